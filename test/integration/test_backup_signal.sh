#!/usr/bin/env bash
# backup-push stopped by SIGTERM and by SIGINT.
#
# A source cluster with ~200 MB of data (pgbench -i -s 15). backup-push runs as postgres with
# WALG_DISK_RATE_LIMIT=20000000 (so it would take ~10 s); once it has started and read for
# ~2 s, the walc process gets SIGTERM (then, in a second round, SIGINT). Each time:
#   - walc exits with status 1 within a few seconds;
#   - no *_backup_stop_sentinel.json, no metadata.json exists in the repository;
#   - backup-list prints nothing on stdout (and backup-list --json prints []);
#   - no session with application_name 'walc' remains in pg_stat_activity, and the server is
#     not left in backup mode (a new backup can start).
# Then a backup-push without the rate limit succeeds, is the only backup listed, and restores:
# backup-fetch LATEST, recovery through walc wal-fetch to 'immediate', promotion, the data is
# the source's.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup backup-signal
START=$SECONDS

REPO=$T/repo
ENVS=(WALG_FILE_PREFIX="$REPO" WALG_COMPRESSION_METHOD=lz4)
mkdir -p "$REPO"
walc_wrapper "${ENVS[@]}"

# the initial load is not archived; walc archives from the restart on
pgbench_source 15 push.log
size=$(du -sb "$SRC/base" | cut -f1)
[ "$size" -gt 180000000 ] || fail "source has only $size bytes"
log "source up on port $PORT with $((size / 1000000)) MB; $((SECONDS - START))s"

no_backups() { # WHAT: the repository holds no complete backup
	local s
	s=$(find "$REPO" -name '*_backup_stop_sentinel.json' -o -name metadata.json)
	[ -z "$s" ] || fail "$1: found $s"
	wrun "${ENVS[@]}" -- backup-list
	expect_rc 0 "$1: backup-list"
	assert_eq "" "$W_OUT" "$1: backup-list stdout"
	wrun "${ENVS[@]}" -- backup-list --json
	expect_rc 0 "$1: backup-list --json"
	assert_eq "[]" "$(printf '%s' "$W_OUT" | tr -d ' \n')" "$1: backup-list --json"
}

walc_sessions() {
	psqlc "$PORT" "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'walc'"
}

# interrupted SIGNAL: start a rate-limited backup-push, signal the walc process after ~2 s
interrupted() {
	local sig=$1 pidf=$T/walc-$1.pid errf=$T/log/backup-push-$1.log bg wpid rc t_sig t_end sess
	rm -f "$pidf"
	# the shell execs walc, so the pid it records is walc's own
	# shellcheck disable=SC2016 # expanded by that shell
	as_pg env PGDATA="$PGDATA" ASAN_OPTIONS="$ASAN_OPTIONS" "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" \
		WALG_DISK_RATE_LIMIT=20000000 \
		sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$pidf" "$WALC_PG" backup-push "$SRC" \
		>"$T/log/backup-push-$sig.out" 2>"$errf" </dev/null &
	bg=$!
	BG_PIDS+=("$bg")
	for _ in $(seq 1 200); do
		[ -s "$pidf" ] && grep -q 'started' "$errf" 2>/dev/null && break
		kill -0 "$bg" 2>/dev/null || { cat "$errf" >&2; fail "$sig: backup-push ended before it started"; }
		sleep 0.1
	done
	wpid=$(cat "$pidf")
	grep -q 'started' "$errf" || { cat "$errf" >&2; fail "$sig: backup-push did not start"; }
	sess=$(walc_sessions)
	[ "$sess" -ge 1 ] || fail "$sig: no session with application_name 'walc' while backup-push runs"
	sleep 2
	kill -0 "$wpid" 2>/dev/null || { cat "$errf" >&2; fail "$sig: backup-push finished within 2 s despite WALG_DISK_RATE_LIMIT"; }
	[ -z "$(find "$REPO" -name '*_backup_stop_sentinel.json')" ] || fail "$sig: a sentinel exists before the signal"
	t_sig=$(date +%s.%N)
	kill "-$sig" "$wpid"
	for _ in $(seq 1 100); do
		kill -0 "$wpid" 2>/dev/null || break
		sleep 0.1
	done
	t_end=$(date +%s.%N)
	if kill -0 "$wpid" 2>/dev/null; then
		kill -KILL "$wpid"
		fail "$sig: walc still running 10 s after the signal"
	fi
	set +e
	wait "$bg"
	rc=$?
	set -e
	assert_no_sanitizer_reports "$errf"
	[ "$rc" = 1 ] || { cat "$errf" >&2; fail "$sig: backup-push exited $rc, want 1"; }
	awk -v a="$t_sig" -v b="$t_end" 'BEGIN { exit !(b - a <= 5) }' ||
		fail "$sig: walc took $(awk -v a="$t_sig" -v b="$t_end" 'BEGIN { print b - a }') s to exit"
	no_backups "after $sig"
	for _ in $(seq 1 20); do
		sess=$(walc_sessions)
		[ "$sess" = 0 ] && break
		sleep 0.25
	done
	assert_eq 0 "$sess" "$sig: sessions with application_name 'walc' left in pg_stat_activity"
	ok "$sig: exit 1 after $(awk -v a="$t_sig" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }') s, no sentinel, nothing listed, no session left"
	sed 's/^/    /' "$errf" | tail -n 4
}

interrupted TERM
interrupted INT

# the server is not stuck in backup mode: a complete backup works now
psqlc "$PORT" "CREATE TABLE marker AS SELECT g AS id, md5(g::text) AS h FROM generate_series(1, 1000) g;
	UPDATE pgbench_accounts SET abalance = aid % 997 WHERE aid % 1000 = 7"
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push after the interrupted ones"
wrun "${ENVS[@]}" -- backup-list
expect_rc 0 "backup-list"
assert_eq 1 "$(nlines "$(printf '%s\n' "$W_OUT" | tail -n +2)")" "backups listed after the complete backup-push"
NAME=$(printf '%s\n' "$W_OUT" | tail -n 1 | cut -f 1 -d ' ')
[ -f "$REPO/basebackups_005/${NAME}_backup_stop_sentinel.json" ] || fail "no sentinel for $NAME"
want=$(psqlc "$PORT" "SELECT count(*), sum(abalance), (SELECT md5(string_agg(h, ',' ORDER BY id)) FROM marker) FROM pgbench_accounts")
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 120
pg_stop "$SRC"

R=$T/restored
RECOVER_FETCH=$T/walc.sh restore_start "$R" LATEST "${ENVS[@]}"
got=$(psqlc "$RPORT" "SELECT count(*), sum(abalance), (SELECT md5(string_agg(h, ',' ORDER BY id)) FROM marker) FROM pgbench_accounts")
pg_stop "$R"
assert_eq "$want" "$got" "restored data"
assert_no_sanitizer_reports "$T/log/push.log" "$R.log"
ok "complete backup $NAME after the interrupted ones restores ($got)"
log "all done in $((SECONDS - START))s"
