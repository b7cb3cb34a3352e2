#!/usr/bin/env bash
# A remote backup-push does not wait forever for a server whose archiving fails (issue 42 §5).
# The server archives while $T/archive-on exists. With archiving failing, a remote backup-push
# (BASE_BACKUP, no PGDATA) with WALG_STOP_BACKUP_TIMEOUT=6s says, while the server waits, for
# which segment, then exits 1 at the timeout naming that segment (still .ready on the server),
# with no backup left. With archiving back, the same push completes.
. "$(dirname "$0")/lib.sh"
it_setup backup-remote-timeout

P=$T/primary
ARCHIVE_SWITCH=1 walc_archiving "$P"
psqlc "$PORT" "CREATE TABLE t AS SELECT generate_series(1, 1000) i"
wait_archived "$P" "$(switch_wal "$PORT")" 30
rm "$T/archive-on"

start=$SECONDS
wrun_pg "${E[@]}" WALG_STOP_BACKUP_TIMEOUT=6s PGHOST="$T" PGPORT="$PORT" -- backup-push
expect_rc 1 "remote backup-push while the server's archiving fails"
took=$((SECONDS - start))
[ "$took" -lt 40 ] || fail "the push took ${took}s"
assert_match "$W_ERR" "waiting for the server to archive the backup's WAL, up to segment [0-9A-F]{24}" \
	"the push says what it waits for"
assert_match "$W_ERR" "the server did not archive WAL segment [0-9A-F]{24} within WALG_STOP_BACKUP_TIMEOUT \(6000 ms\)" \
	"the error names the segment and the timeout"
seg=$(grep -oE 'did not archive WAL segment [0-9A-F]{24}' <<<"$W_ERR" | cut -d' ' -f6)
[ -e "$P/pg_wal/archive_status/$seg.ready" ] || fail "the segment named, $seg, is not waiting for archiving on the server"
[ -z "$(find "$R/basebackups_005" -type f 2>/dev/null)" ] ||
	fail "the failed push left objects: $(find "$R/basebackups_005" -type f | head -3)"
ok "archiving failing: remote backup-push exits 1 after ${took}s naming $seg, no backup left"

touch "$T/archive-on"
psqlc "$PORT" "SELECT pg_switch_wal()" >/dev/null # wakes the archiver, idle after its failures
wrun_pg "${E[@]}" WALG_STOP_BACKUP_TIMEOUT=60s PGHOST="$T" PGPORT="$PORT" -- backup-push
expect_rc 0 "remote backup-push with archiving back"
assert_eq 1 "$(find "$R/basebackups_005" -maxdepth 1 -name '*_backup_stop_sentinel.json' | wc -l)" "sentinels"
ok "archiving back: the remote push completes"
