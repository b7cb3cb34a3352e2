#!/usr/bin/env bash
# Which history a point-in-time recovery follows (issue 42 §3):
#   - a foreign cluster's .history (timeline 9, branching off timeline 1 early) stored with
#     wal-push: wal-show and wal-verify ignore it, saying so; wal-fetch answers that it does
#     not exist (PostgreSQL's 'latest' would follow it); a PITR reads timeline 1 and writes
#     recovery_target_timeline = '1';
#   - a restore of the source, promoted into timeline 2 and archiving into the same repository,
#     while the source goes on writing on timeline 1: a --target-time after both went on is
#     held by two histories and refused naming both timelines; with --target-timeline 1 it
#     restores the source's rows at that time, with --target-timeline 2 the restore's, each
#     compared by pg_dumpall.
. "$(dirname "$0")/lib.sh"
it_setup pitr-timelines

pitr_source

q() { psqlc "$1" "$2"; }
now() { q "$1" "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"; }
archive_all() { # PORT DIR
	local seg
	seg=$(switch_wal "$1")
	wait_archived "$2" "$seg" 60
}

q "$PORT" "CREATE TABLE t (i int)"
q "$PORT" "INSERT INTO t VALUES (1)"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" PGUSER=postgres -- backup-push "$SRC"
expect_rc 0 "backup-push"
START=$(q "$PORT" "SELECT pg_current_wal_insert_lsn()")
q "$PORT" "INSERT INTO t VALUES (2)"
sleep 1
MB=$(now "$PORT")
sleep 1
q "$PORT" "INSERT INTO t VALUES (3)"
archive_all "$PORT" "$SRC"

# A foreign cluster's history: timeline 9 branching off timeline 1 right after the backup.
printf '1\t%s\tno recovery target specified\n' "$START" >"$T/00000009.history"
pg_own "$T/00000009.history"
wrun_pg "${E[@]}" -- wal-push "$T/00000009.history"
expect_rc 0 "wal-push of a foreign .history (history files stay accepted)"
wrun_pg "${E[@]}" -- wal-fetch 00000009.history "$T/h9"
expect_rc 74 "wal-fetch of a lone .history (PostgreSQL's 'latest' would follow it)"
assert_contains "$W_ERR" "no WAL segment of timeline 9" "wal-fetch says why"
assert_absent "$T/h9" "wal-fetch of a lone .history"
wrun "${E[@]}" -- wal-show --detailed-json
expect_rc 0 "wal-show"
assert_eq "1" "$("$PY" -c 'import json, sys; print(",".join(str(t["id"]) for t in json.loads(sys.argv[1])))' "$W_OUT")" \
	"timelines wal-show lists"
assert_contains "$W_ERR" "00000009.history" "wal-show says it ignores timeline 9"
wrun "${E[@]}" -- wal-verify timeline --timeline 1 --lsn "$START"
expect_rc 0 "wal-verify timeline with a foreign .history"
assert_contains "$W_OUT" "highest timeline in storage: 1" "wal-verify's highest timeline"
assert_contains "$W_ERR" "00000009.history" "wal-verify says it ignores timeline 9"
rm -rf "$T/rb"
wrun_pg "${E[@]}" -- backup-fetch "$T/rb" --target-time "$MB"
expect_rc 0 "PITR with a foreign .history in the archive"
assert_contains "$W_ERR" "00000009.history" "the PITR says it ignores timeline 9"
grep -q "^recovery_target_timeline = '1'" "$T/rb/postgresql.auto.conf" ||
	fail "recovery_target_timeline is not '1': $(grep recovery_target_timeline "$T/rb/postgresql.auto.conf")"
pg_conf "$T/rb" "archive_mode = off"
recovered_start "$T/rb"
assert_eq "1,2" "$(q "$RPORT" "SELECT string_agg(i::text, ',' ORDER BY i) FROM t")" "rows at MB"
pg_stop "$T/rb"
ok "a foreign .history is ignored by wal-show, wal-verify and PITR, saying so"

# Timeline 2: the backup restored to MB and promoted, archiving into the same repository.
rm -rf "$T/tl2"
wrun_pg "${E[@]}" -- backup-fetch "$T/tl2" LATEST
expect_rc 0 "backup-fetch for timeline 2"
MBPG=${MB/T/ }
recover_conf "$T/tl2" "${E[*]}" "recovery_target_time = '${MBPG%Z}+00'"
pg_conf "$T/tl2" "archive_mode = on" "archive_command = '$T/walc.sh wal-push %p 2>>$T/log/push2.log'"
recovered_start "$T/tl2"
P2=$RPORT
q "$P2" "INSERT INTO t VALUES (20)"
q "$PORT" "INSERT INTO t VALUES (30)"
dump_norm "$P2" >"$T/tl2.sql"
dump_norm "$PORT" >"$T/tl1.sql"
sleep 1
MT=$(now "$PORT")
sleep 1
q "$P2" "INSERT INTO t VALUES (21)"
q "$PORT" "INSERT INTO t VALUES (31)"
archive_all "$P2" "$T/tl2"
archive_all "$PORT" "$SRC"
pg_stop "$T/tl2"
pg_stop "$SRC"
compgen -G "$R/wal_005/00000002.history*" >/dev/null || fail "no 00000002.history archived"
wrun_pg "${E[@]}" -- wal-fetch 00000002.history "$T/h2"
expect_rc 0 "wal-fetch of timeline 2's history, its WAL archived"

rm -rf "$T/r"
wrun_pg "${E[@]}" -- backup-fetch "$T/r" --target-time "$MT"
expect_rc 1 "a target two histories hold"
assert_contains "$W_ERR" "timeline 2 branched from timeline 1" "the refusal names both timelines"
assert_contains "$W_ERR" "--target-timeline" "the refusal says how to choose"
assert_absent "$T/r" "nothing written when two histories hold the target"
log "refused: $W_ERR"
for tli in 1 2; do
	rm -rf "$T/r$tli"
	wrun_pg "${E[@]}" -- backup-fetch "$T/r$tli" --target-time "$MT" --target-timeline "$tli"
	expect_rc 0 "--target-timeline $tli"
	grep -q "^recovery_target_timeline = '$tli'" "$T/r$tli/postgresql.auto.conf" ||
		fail "--target-timeline $tli: recovery_target_timeline not written"
	pg_conf "$T/r$tli" "archive_mode = off"
	recovered_start "$T/r$tli"
	assert_dump_eq "$T/tl$tli.sql" "$RPORT" "recovery along timeline $tli"
	pg_stop "$T/r$tli"
done
ok "two histories after the target: refused without --target-timeline, each restored with it"
