#!/usr/bin/env bash
# wal-receive: WAL streamed through a replication slot into the repository, with archiving off,
# as a role that has REPLICATION and no other privilege.
# Every segment stored equals the server's own; the slot is released only behind what is
# stored; a receiver stopped while WAL is written leaves nothing missing once restarted; a
# backup recovers to the end with that WAL alone; a standby's promotion (timeline 2) stores the
# .partial segment and 00000002.history, and streaming goes on on the new timeline.
. "$(dirname "$0")/lib.sh"
it_setup wal_receive

mkdir -p "$T/repo" "$T/got"
pg_own "$T"
pg_init "$T/src" --wal-segsize=1
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = off" "max_wal_senders = 5" \
	"max_replication_slots = 5" "hot_standby = on"
pg_start "$T/src" "$PORT"

env_for() { # PORT: the environment of a receiver (and of the other walc calls) for that server
	echo "PGHOST=$T PGPORT=$1 PGUSER=postgres PGDATABASE=postgres WALG_FILE_PREFIX=$T/repo WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=zstd"
}
read -ra ENV <<<"$(env_for "$PORT")"

# A slot name PostgreSQL would refuse is refused before connecting, naming the variable; the
# commands that do not use it (wal-show here) are not stopped by it.
wrun_pg "${ENV[@]}" WALG_SLOTNAME=Bad-Name -- wal-receive
expect_rc 1 "wal-receive with a bad slot name"
assert_contains "$W_ERR" "WALG_SLOTNAME" "the error names the variable"
wrun "${ENV[@]}" WALG_SLOTNAME=Bad-Name -- wal-show
expect_rc 0 "wal-show with a slot name only wal-receive reads"

# start_receiver PORT: walc wal-receive in the background, as walc_rcv (a role with
# REPLICATION and nothing else) without PGDATABASE (no database is named walc_rcv: its SQL
# session must find one); RECV is walc's pid
start_receiver() {
	local env
	read -ra env <<<"$(env_for "$1")"
	as_pg env "${env[@]}" PGUSER=walc_rcv PGDATABASE= ASAN_OPTIONS="$ASAN_OPTIONS" "$WALC_PG" wal-receive >>"$T/receive.log" 2>&1 &
	RECV_JOB=$!
	BG_PIDS+=("$RECV_JOB")
	await_pid "$WALC_PG wal-receive" "PGPORT=$1" "$T/receive.log"
	RECV=$AWAITED_PID
}
# stop_receiver: SIGTERM, which must end it (and runuser, RECV_JOB) with status 0 within 10 s
stop_receiver() {
	local said
	said=$(grep -c "wal-receive: stopping" "$T/receive.log" || true)
	kill -TERM "$RECV"
	for _ in $(seq 1 200); do
		kill -0 "$RECV" 2>/dev/null || break
		sleep 0.05
	done
	! kill -0 "$RECV" 2>/dev/null || fail "wal-receive still running 10 s after SIGTERM"
	wait "$RECV_JOB" || fail "wal-receive ended with status $? on SIGTERM"
	[ "$(grep -c "wal-receive: stopping" "$T/receive.log")" -gt "$said" ] || { cat "$T/receive.log"; fail "wal-receive did not stop cleanly"; }
}
# wait_stored SEG [TIMEOUT]: wal_005/SEG.zst appears
wait_stored() {
	for _ in $(seq 1 $((${2:-60} * 10))); do
		[ -e "$T/repo/wal_005/$1.zst" ] && return 0
		sleep 0.1
	done
	cat "$T/receive.log"
	fail "$1 was not stored by wal-receive"
}
# wait_slot PORT LSN_SQL: the slot walg's restart_lsn reaches LSN_SQL (an SQL expression)
wait_slot() {
	for _ in $(seq 1 100); do
		[ "$(psqlc "$1" "SELECT restart_lsn >= $2 FROM pg_replication_slots WHERE slot_name = 'walg'")" = t ] && return 0
		sleep 0.1
	done
	fail "the slot did not move past $2: $(psqlc "$1" "SELECT restart_lsn FROM pg_replication_slots")"
}
# rows PORT N: N more rows of text into t, then a segment switch; prints the segment completed
rows() {
	psqlc "$1" "INSERT INTO t SELECT g, md5(g::text) || repeat('x', 200) FROM generate_series(1, $2) g" >/dev/null
	switch_wal "$1"
}
# same_as_server SEG DIR: the stored SEG, fetched back, is the server's file in DIR/pg_wal
same_as_server() {
	rm -f "$T/got/$1"
	wrun "${ENV[@]}" -- wal-fetch "$1" "$T/got/$1"
	expect_rc 0 "wal-fetch $1"
	cmp -s "$T/got/$1" "$2/pg_wal/$1" || fail "$1 as stored differs from the server's"
}

psqlc "$PORT" "CREATE ROLE walc_rcv LOGIN REPLICATION"
start_receiver "$PORT"
for _ in $(seq 1 100); do
	[ "$(psqlc "$PORT" "SELECT active FROM pg_replication_slots WHERE slot_name = 'walg'")" = t ] && break
	sleep 0.1
done
[ "$(psqlc "$PORT" "SELECT slot_type FROM pg_replication_slots WHERE slot_name = 'walg'")" = physical ] ||
	{ cat "$T/receive.log"; fail "wal-receive did not create and use the physical slot walg"; }

psqlc "$PORT" "CREATE TABLE t (id int, v text)"
rows "$PORT" 5000 >/dev/null
wrun_pg "${ENV[@]}" -- backup-push "$T/src"
expect_rc 0 "backup-push with archiving off"
first=""
for i in 1 2 3 4 5; do
	seg=$(rows "$PORT" 3000)
	[ -n "$first" ] || first=$seg
done
wait_stored "$seg"
for f in "$T/src/pg_wal"/[0-9A-F]*; do
	s=${f##*/}
	if is_segment_name "$s" && [[ ! $s < $first ]] && [[ ! $s > $seg ]]; then same_as_server "$s" "$T/src"; fi
done
# the slot keeps nothing that is stored: it moves to the end of the last segment stored (1 MiB
# segments: 4096 to a "log" of the name's middle part)
end_lsn=$(((16#${seg:8:8} * 4096 + 16#${seg:16:8} + 1) * 1048576))
wait_slot "$PORT" "'$(printf '%X/%X' $((end_lsn >> 32)) $((end_lsn & 0xFFFFFFFF)))'::pg_lsn"
log "$first..$seg stored byte for byte as the server wrote them; the slot followed"

# Stopped while WAL is written: the slot keeps it, and the restarted receiver stores it all.
stop_receiver
for i in 1 2 3; do down=$(rows "$PORT" 3000); done
[ ! -e "$T/repo/wal_005/$down.zst" ] || fail "$down stored while no receiver ran"
start_receiver "$PORT"
last=$(rows "$PORT" 3000)
wait_stored "$last"
end=$(rows "$PORT" 10)
dump_norm "$PORT" >"$T/src.dump"
wait_stored "$end"
wrun "${ENV[@]}" -- wal-show
expect_rc 0 "wal-show"
assert_not_contains "$W_OUT" "MISSING" "wal-show after the restart"
seq_names=$(find "$T/repo/wal_005" -name '*.zst' -printf '%f\n' | sed -n 's/^\([0-9A-F]\{24\}\)\.zst$/\1/p' | sort)
"$PY" -c '
import sys
names = sys.argv[1].split()
segs = [int(n[8:16], 16) * 256 + int(n[16:], 16) for n in names]
gaps = [hex(a) for a, b in zip(segs, segs[1:]) if b != a + 1]
assert not gaps, "gaps after " + " ".join(gaps)
' "$seq_names" || fail "the stored segments have a gap"
log "receiver stopped and restarted: $(nlines "$seq_names") segments, no gap"

# The backup recovers to the end with the received WAL alone.
restore_start "$T/restored" LATEST "${ENV[@]}" -- "recovery_target_timeline = 'latest'"
assert_dump_eq "$T/src.dump" "$RPORT" "recovery from received WAL"
pg_stop "$T/restored"
assert_no_sanitizer_reports "$T/restored.log"
log "the backup recovered with the received WAL to the source's dump"

# A standby's promotion: the receiver on the standby stores the .partial and 00000002.history,
# then timeline 2's segments.
stop_receiver
standby_of "$PORT" "$T/standby"
SPORT=$(free_port)
pg_start "$T/standby" "$SPORT"
start_receiver "$SPORT"
for _ in $(seq 1 100); do
	[ "$(psqlc "$SPORT" "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'walg' AND active")" = 1 ] && break
	sleep 0.1
done
before=$(rows "$PORT" 2000)
wait_stored "$before"
# rows without a switch, replayed by the standby: its timeline 1 ends inside a segment
psqlc "$PORT" "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 500) g"
lsn=$(psqlc "$PORT" "SELECT pg_current_wal_lsn()")
for _ in $(seq 1 200); do
	[ "$(psqlc "$SPORT" "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && break
	sleep 0.05
done
psqlc "$SPORT" "SELECT pg_promote()" >/dev/null
wait_not_in_recovery "$SPORT"
for _ in $(seq 1 300); do
	[ -e "$T/repo/wal_005/00000002.history.zst" ] && break
	sleep 0.1
done
[ -e "$T/repo/wal_005/00000002.history.zst" ] || { cat "$T/receive.log"; fail "00000002.history not stored"; }
partial=$(find "$T/repo/wal_005" -name '00000001*.partial.zst' -printf '%f\n')
[ -n "$partial" ] || { cat "$T/receive.log"; fail "no .partial segment stored at the promotion"; }
wrun "${ENV[@]}" -- st cat wal_005/00000002.history.zst
expect_rc 0 "st cat the history file"
[ "$W_OUT" = "$(cat "$T/standby/pg_wal/00000002.history")" ] || fail "the stored history file differs"
# the .partial holds timeline 1 up to the switch point as the standby had it, zeros after
switch=$(awk '{ print $2 }' "$T/standby/pg_wal/00000002.history")
off=$((16#${switch#*/} % 1048576))
[ "$off" -gt 0 ] || fail "timeline 1 ended at a segment boundary ($switch): no .partial to check"
seg=${partial%.partial.zst}
# PostgreSQL renames the old timeline's last segment to .partial only when it archives
old=$T/standby/pg_wal/$seg.partial
wrun "${ENV[@]}" -- wal-fetch "$seg.partial" "$T/got/partial"
expect_rc 0 "wal-fetch $seg.partial"
{ [ -e "$old" ] || old=$T/standby/pg_wal/$seg; cmp -s -n "$off" "$T/got/partial" "$old"; } ||
	fail "$partial differs from the standby's own before the switch point $switch"
[ "$(tail -c +"$((off + 1))" "$T/got/partial" | tr -d '\0' | wc -c)" = 0 ] || fail "$partial is not zeros after $switch"
psqlc "$SPORT" "CREATE TABLE after_promotion AS SELECT 1 AS one"
tl2=$(rows "$SPORT" 2000)
case $tl2 in 00000002*) ;; *) fail "the promoted standby switched $tl2, not a timeline 2 segment" ;; esac
wait_stored "$tl2"
same_as_server "$tl2" "$T/standby"
log "promotion: $partial, 00000002.history and $tl2 stored"

# The server shutting down ends the stream without a new timeline: the receiver exits non-zero
# saying so, and stores no .partial (the segment goes on after the server's restart).
psqlc "$SPORT" "INSERT INTO after_promotion VALUES (2)"
pg_stop "$T/standby"
for _ in $(seq 1 200); do
	kill -0 "$RECV" 2>/dev/null || break
	sleep 0.05
done
! kill -0 "$RECV" 2>/dev/null || fail "wal-receive still running after the server stopped"
if wait "$RECV_JOB"; then fail "wal-receive exited 0 when the server stopped"; fi
grep -q "the server ended replication" "$T/receive.log" || { tail -n 5 "$T/receive.log"; fail "wal-receive did not say the server ended replication"; }
[ "$(find "$T/repo/wal_005" -name '00000002*.partial.zst' | wc -l)" = 0 ] || fail "a .partial stored at a shutdown"
assert_no_sanitizer_reports "$T/receive.log"
ok "wal-receive"
