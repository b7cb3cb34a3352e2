#!/usr/bin/env bash
# PostgreSQL restarted while backup-push runs.
#
# A cluster with ~50 MB of data (pgbench -i -s 3); backup-push as postgres with
# WALG_DISK_RATE_LIMIT=8000000 (a push takes ~8 s) and WALG_ALIVE_CHECK_INTERVAL=1s. About 2 s
# after the push has started, the server is restarted: `pg_ctl restart -m fast`, then (second
# round) `-m immediate`. Each time:
#   - walc exits 1 within 4 s of the restart's end (the alive check runs every second; the
#     restart's own time is measured and reported), saying what happened;
#   - no sentinel and no metadata.json exist; backup-list lists nothing;
# then a backup-push without the rate limit succeeds, and it restores: backup-fetch, recovery
# through walc wal-fetch to 'immediate', amcheck passes, pgbench's 300000 accounts are there.
# shellcheck source=lib.sh
# integration: solo
. "$(dirname "$0")/lib.sh"
it_setup fault-pg-restart
START=$SECONDS

REPO=$T/repo
mkdir -p "$REPO"
ENVS=(WALG_FILE_PREFIX="$REPO" WALG_COMPRESSION_METHOD=zstd)
walc_wrapper "${ENVS[@]}"
pgbench_source 3 archive.log
log "source up on port $PORT; $((SECONDS - START))s"

no_backups() { # WHAT
	local s
	s=$(find "$REPO" -name '*_backup_stop_sentinel.json' -o -name metadata.json)
	[ -z "$s" ] || fail "$1: found $s"
	wrun "${ENVS[@]}" -- backup-list
	expect_rc 0 "$1: backup-list"
	assert_eq "" "$W_OUT" "$1: backup-list stdout"
}

restarted() { # MODE
	local mode=$1 pidf=$T/walc-$1.pid errf=$T/log/push-$1.err bg wpid rc t_down t_up t_end
	rm -f "$pidf"
	# shellcheck disable=SC2016 # expanded by that shell
	as_pg env PGDATA="$SRC" ASAN_OPTIONS="$ASAN_OPTIONS" "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" \
		WALG_DISK_RATE_LIMIT=8000000 WALG_ALIVE_CHECK_INTERVAL=1s \
		sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$pidf" "$WALC_PG" backup-push "$SRC" \
		>"$T/log/push-$mode.out" 2>"$errf" </dev/null &
	bg=$!
	BG_PIDS+=("$bg")
	for _ in $(seq 1 200); do
		[ -s "$pidf" ] && grep -q 'started' "$errf" 2>/dev/null && break
		kill -0 "$bg" 2>/dev/null || { cat "$errf" >&2; fail "$mode: backup-push ended before it started"; }
		sleep 0.1
	done
	grep -q 'started' "$errf" || { cat "$errf" >&2; fail "$mode: backup-push did not start"; }
	wpid=$(cat "$pidf")
	sleep 2
	kill -0 "$wpid" 2>/dev/null || { cat "$errf" >&2; fail "$mode: backup-push finished within 2 s despite the rate limit"; }
	t_down=$(date +%s%N)
	as_pg "$PGBIN/pg_ctl" -D "$SRC" -l "$SRC.log" -m "$mode" -w -t 60 restart >/dev/null ||
		{ tail -n 20 "$SRC.log" >&2; fail "pg_ctl restart -m $mode"; }
	t_up=$(date +%s%N)
	for _ in $(seq 1 300); do
		kill -0 "$wpid" 2>/dev/null || break
		sleep 0.05
	done
	t_end=$(date +%s%N)
	if kill -0 "$wpid" 2>/dev/null; then
		kill -KILL "$wpid"
		fail "$mode: walc still running 15 s after PostgreSQL restarted"
	fi
	set +e
	wait "$bg"
	rc=$?
	set -e
	assert_no_sanitizer_reports "$errf"
	[ "$rc" = 1 ] || { cat "$errf" >&2; fail "$mode: backup-push exited $rc after the restart, want 1"; }
	local restart_ms=$(((t_up - t_down) / 1000000)) after_ms=$(((t_end - t_up) / 1000000))
	local total_ms=$(((t_end - t_down) / 1000000))
	[ "$after_ms" -le 4000 ] || fail "$mode: walc exited $after_ms ms after the restart ended (alive check every 1 s)"
	no_backups "after the $mode restart"
	ok "restart -m $mode (took $restart_ms ms): walc exited 1, $total_ms ms after the shutdown began," \
		"$after_ms ms after the server was back; no sentinel: $(grep -E 'ERROR' "$errf" | head -n 1 | cut -c 1-200)"
	wait_not_in_recovery "$PORT" 60
}

restarted fast
restarted immediate

psqlc "$PORT" "CHECKPOINT"
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push after the restarts"
wrun "${ENVS[@]}" -- backup-list
NAME=$(printf '%s\n' "$W_OUT" | tail -n 1 | cut -f 1 -d ' ')
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 120
R=$T/restored
RECOVER_FETCH=$T/walc.sh restore_start "$R" LATEST "${ENVS[@]}"
amcheck_all "$RPORT"
assert_eq 300000 "$(psqlc "$RPORT" "SELECT count(*) FROM pgbench_accounts")" "restored pgbench_accounts"
pg_stop "$R"
ok "backup $NAME after the restarts restores"
log "all done in $((SECONDS - START))s"
