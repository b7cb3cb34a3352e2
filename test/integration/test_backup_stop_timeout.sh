#!/usr/bin/env bash
# backup-push waits for the backup's WAL to be archived before it writes a sentinel: with
# archiving broken it gives up after WALG_STOP_BACKUP_TIMEOUT with a clear error, exit 1 and no
# sentinel; with archiving mended the next push completes, and only then does a backup exist.
. "$(dirname "$0")/lib.sh"
it_setup stoptimeout

mkdir -p "$T/repo"
pg_own "$T"
E=(WALG_FILE_PREFIX="$T/repo")
pg_init "$T/src"
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" "archive_command = '/bin/false'"
pg_start "$T/src" "$PORT"
start=$SECONDS
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" WALG_STOP_BACKUP_TIMEOUT=3s -- backup-push "$T/src"
expect_rc 1 "backup-push with broken archiving"
[ $((SECONDS - start)) -lt 30 ] || fail "the timeout did not bound the wait ($((SECONDS - start)) s)"
assert_contains "$W_ERR" "WALG_STOP_BACKUP_TIMEOUT" "the error names the setting"
assert_contains "$W_ERR" "archive" "the error says what is wrong"
[ -z "$(find "$T/repo" -name '*_backup_stop_sentinel.json')" ] || fail "a sentinel was written"
wrun "${E[@]}" -- backup-list
[ -z "$W_OUT" ] || fail "backup-list must show nothing: $W_OUT"

psqlc "$PORT" "ALTER SYSTEM SET archive_command = 'env ${E[*]} $WALC_PG wal-push %p'"
psqlc "$PORT" "SELECT pg_reload_conf()" >/dev/null
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" WALG_STOP_BACKUP_TIMEOUT=120s -- backup-push "$T/src"
expect_rc 0 "backup-push with archiving mended"
name=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
sent=$T/repo/basebackups_005/${name}_backup_stop_sentinel.json
finish=$("$PY" -c "import json; print(json.load(open('$sent'))['FinishLSN'])")
seg=$("$PY" -c "print('%08X%08X%08X' % (1, ($finish - 1) // 2**24 // 256, ($finish - 1) // 2**24 % 256))")
ls "$T/repo/wal_005/" | grep -q "^$seg" || fail "the backup's last segment $seg was not archived before its sentinel"
log "stop timeout ok"
