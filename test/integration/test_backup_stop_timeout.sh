#!/usr/bin/env bash
# backup-push waits for the backup's WAL to be archived before it writes a sentinel: with
# archiving broken (archive_command failing) it gives up after WALG_STOP_BACKUP_TIMEOUT with a
# clear error naming the failure, exit 1 and no sentinel; with archiving mended the next push
# completes, and only then does a backup exist. With a stalled archive_command (it waits while
# a flag file exists) that archives to another repository, backup-push uploads the backup's
# WAL to its own repository itself and completes; released, the archiver still archives every
# one of those files to its repository (backup-push leaves no marker that would make it skip
# them), and no marker is left anywhere.
. "$(dirname "$0")/lib.sh"
it_setup stoptimeout

# last_segment_stored [REPO]: the last segment of the backup backup-push just wrote (named in
# $W_ERR) is in $T/repo (and in REPO); sets SEG
last_segment_stored() {
	local name sent finish seg r
	name=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
	sent=$T/repo/basebackups_005/${name}_backup_stop_sentinel.json
	finish=$("$PY" -c "import json; print(json.load(open('$sent'))['FinishLSN'])")
	seg=$("$PY" -c "print('%08X%08X%08X' % (1, ($finish - 1) // 2**24 // 256, ($finish - 1) // 2**24 % 256))")
	for r in "$T/repo" "$@"; do
		compgen -G "$r/wal_005/$seg*" >/dev/null || fail "the backup's last segment $seg is not in $r"
	done
	SEG=$seg
}

mkdir -p "$T/repo"
pg_own "$T"
E=(WALG_FILE_PREFIX="$T/repo")
pg_init "$T/src"
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" "archive_command = '/bin/false'"
pg_start "$T/src" "$PORT"
# archiving has been failing for a while: the archiver has failed on a segment already
psqlc "$PORT" "CREATE TABLE t AS SELECT 1 AS x; SELECT pg_switch_wal()" >/dev/null
wait_archive_failed "$PORT"
start=$SECONDS
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" WALG_STOP_BACKUP_TIMEOUT=3s -- backup-push "$T/src"
expect_rc 1 "backup-push with broken archiving"
[ $((SECONDS - start)) -lt 30 ] || fail "the timeout did not bound the wait ($((SECONDS - start)) s)"
assert_contains "$W_ERR" "WALG_STOP_BACKUP_TIMEOUT" "the error names the setting"
assert_contains "$W_ERR" "archive" "the error says what is wrong"
assert_contains "$W_ERR" "last failure: 0000000100000000000000" "the error names the failing segment"
[ -z "$(find "$T/repo" -name '*_backup_stop_sentinel.json')" ] || fail "a sentinel was written"
wrun "${E[@]}" -- backup-list
[ -z "$W_OUT" ] || fail "backup-list must show nothing: $W_OUT"

psqlc "$PORT" "ALTER SYSTEM SET archive_command = 'env ${E[*]} $WALC_PG wal-push %p'"
psqlc "$PORT" "SELECT pg_reload_conf()" >/dev/null
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" WALG_STOP_BACKUP_TIMEOUT=120s -- backup-push "$T/src"
expect_rc 0 "backup-push with archiving mended"
last_segment_stored
log "broken archiving: WALG_STOP_BACKUP_TIMEOUT error; mended: backup complete"

# ---- a stalled archiver: backup-push uploads the backup's WAL ahead of it -------------------------
touch "$T/stall"
mkdir -p "$T/repo2"
pg_own "$T/repo2"
psqlc "$PORT" "ALTER SYSTEM SET archive_command = 'while [ -e $T/stall ]; do sleep 0.1; done; env WALG_FILE_PREFIX=$T/repo2 $WALC_PG wal-push %p'"
psqlc "$PORT" "SELECT pg_reload_conf()" >/dev/null
start=$SECONDS
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" WALG_STOP_BACKUP_TIMEOUT=120s -- backup-push "$T/src"
expect_rc 0 "backup-push with a stalled archive_command"
took=$((SECONDS - start))
assert_contains "$W_ERR" "of the backup's WAL files ahead of the archiver" "backup-push log"
last_segment_stored
# released, the archiver catches up, archiving to its own repository the files walc uploaded
rm "$T/stall"
for _ in $(seq 1 90); do
	compgen -G "$T/src/pg_wal/archive_status/*.ready" >/dev/null || break
	sleep 1
done
! compgen -G "$T/src/pg_wal/archive_status/*.ready" >/dev/null || fail "the archiver did not catch up"
last_segment_stored "$T/repo2"
left=$(find "$T/src/pg_wal/walg_data" "$PGDATA/pg_wal/walg_data" -type f 2>/dev/null || true)
[ -z "$left" ] || fail "markers left after the archiver caught up: $left"
log "stalled archiver: backup complete in $took s with its WAL uploaded ahead; the archiver's repository got $SEG too"
