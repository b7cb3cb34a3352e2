#!/usr/bin/env bash
# A backup whose own WAL was dropped past WALG_WAL_BACKLOG_MAX (issue 45 §1): PostgreSQL counts
# dropped segments as archived, so pg_backup_stop's wait (and walc's) passes; the backup could
# never be restored. A cluster (1 MiB segments) archives through walc wal-push with a bound of
# 3 MiB into a repository whose wal_005/ cannot be written; backup-push starts, and while it
# waits for its WAL the cluster writes 8 more segments: the oldest, the backup's among them,
# are dropped. backup-push exits 1 naming its segment and the recorded gap, and publishes no
# sentinel. Once wal_005/ can be written again, the next backup-push succeeds and says it is
# the first restorable point after the gap.
. "$(dirname "$0")/lib.sh"
it_setup wal_backlog_backup
START=$SECONDS

walc_archiving "$T/src" WALG_WAL_BACKLOG_MAX=3mb
SRC=$T/src
psqlc "$PORT" "CREATE TABLE t (v text)"
wait_archived "$SRC" "$(switch_wal "$PORT")" 60
chmod 500 "$R/wal_005"
as_pg env PGDATA="$SRC" PGHOST="$T" PGPORT="$PORT" "${E[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" \
	"$WALC_PG" backup-push "$SRC" >"$T/log/backup.log" 2>&1 &
BACKUP=$!
for _ in $(seq 1 300); do grep -q 'calling pg_backup_stop' "$T/log/backup.log" && break; sleep 0.1; done
grep -q 'calling pg_backup_stop' "$T/log/backup.log" || { cat "$T/log/backup.log"; fail "backup-push did not reach pg_backup_stop"; }
for _ in $(seq 1 8); do
	psqlc "$PORT" "INSERT INTO t SELECT md5(g::text) FROM generate_series(1, 2000) g" >/dev/null
	switch_wal "$PORT" >/dev/null
done
rc=0
wait "$BACKUP" || rc=$?
assert_eq 1 "$rc" "backup-push whose WAL was dropped (log: $(tail -n 3 "$T/log/backup.log"))"
err=$(grep '^ERROR' "$T/log/backup.log")
assert_match "$err" "the backup's WAL segment [0-9A-F]{24} was not archived: WAL segments [0-9A-F]{24} to [0-9A-F]{24} are recorded lost" "backup-push's error"
assert_contains "$err" "WALG_WAL_BACKLOG_MAX" "backup-push's error says why"
[ -z "$(find "$R/basebackups_005" -name '*_backup_stop_sentinel.json' 2>/dev/null)" ] ||
	fail "a sentinel was published for a backup without its WAL"
grep -q 'dropped WAL without archiving it' "$T/log/push.log" || fail "wal-push dropped nothing"
ok "backup-push refused the backup whose WAL was dropped, no sentinel"

chmod 700 "$R/wal_005"
wait_archived "$SRC" "$(switch_wal "$PORT")" 60
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push once archiving works again"
assert_contains "$W_ERR" "is the first restorable point after a gap in the archived WAL" "the next backup-push"
ok "the next backup-push is the first restorable point after the gap; $((SECONDS - START))s"
