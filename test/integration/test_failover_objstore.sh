#!/usr/bin/env bash
# Failover storages on the other stores (issue 44 §1: any store walc has), through the daemon:
# the main storage on the GCS emulator, reached through a proxy; a failover storage "az" on
# Azurite, its entry holding only Azure settings (the GCS emulator's host comes from the main
# configuration). PostgreSQL archives through `walc daemon-client` to a walc daemon
# (WALG_FAILOVER_STORAGES_CACHE_LIFETIME=2s).
#   - the proxy stopped mid-archiving: the daemon goes on into Azure; the proxy back, once the
#     daemon's choice is older than its lifetime, back to GCS;
#   - a backup on GCS restores through WAL held by both stores, pg_dumpall equal;
#   - wal-fetch --target-storage az reads Azure alone; backup-list lists the backup as GCS's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/objstore_lib.sh"
store_setup failover-objstore
START=$SECONDS

gcs_start
az_start
proxy_start gcs "$GCS_PORT" --rate 0
GPORT=$PPORT
restart_proxy() {
	"$PY" "$IT_DIR/s3_faultproxy.py" --listen "$GPORT" --upstream "127.0.0.1:$GCS_PORT" --rate 0 \
		--log "$T/log/proxy-gcs2.log" >"$T/log/proxy-gcs2.out" 2>&1 &
	OS_PIDS+=("$!")
	for _ in $(seq 1 100); do grep -q ready "$T/log/proxy-gcs2.out" 2>/dev/null && return; sleep 0.1; done
	fail "the proxy did not start again"
}
AZ_JSON="{\"az\": {\"WALG_AZ_PREFIX\": \"azure://walc/fo\""
for kv in "${AZ_ENV[@]}"; do AZ_JSON+=", \"${kv%%=*}\": \"${kv#*=}\""; done
AZ_JSON+="}}"
E=(WALG_GS_PREFIX=gs://walc/main STORAGE_EMULATOR_HOST="127.0.0.1:$GPORT" GCS_MAX_RETRIES=1
	WALG_FAILOVER_STORAGES="$AZ_JSON" WALG_FAILOVER_STORAGES_CHECK_TIMEOUT=10s
	WALG_FAILOVER_STORAGES_CHECK_SIZE=1kb WALG_COMPRESSION_METHOD=lz4 WALG_PG_WAL_SIZE=1)
walc_wrapper "${E[@]}"
SRC=$T/src
PORT=$(free_port)
pg_init "$SRC" --wal-segsize=1
as_pg env PGDATA="$SRC" "${E[@]}" WALG_FAILOVER_STORAGES_CACHE_LIFETIME=2s \
	ASAN_OPTIONS="$ASAN_OPTIONS" "$WALC_PG" daemon "$T/d.sock" >>"$T/log/daemon.log" 2>&1 &
BG_PIDS+=("$!")
daemon_wait "$WALC_PG" "$T/d.sock" "$T/log/daemon.log"
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_timeout = 0" \
	"archive_command = '$WALC_PG daemon-client $T/d.sock wal-push %f'" "fsync = off"
pg_start "$SRC" "$PORT"
pgbench_init "$PORT" 1
has() { # STORAGE KEY: the object is in that storage alone
	wrun "${E[@]}" -- st stat "$2" --target "$1"
	[ "$W_RC" = 0 ]
}

wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push"
B1=$(sed -n 's/.*Wrote backup with name \([^ ]*\) to storage default.*/\1/p' <<<"$W_ERR")
[ -n "$B1" ] || fail "backup-push did not write to the main storage: $W_ERR"
wal_rounds 2
has default "wal_005/$LAST.lz4" || fail "$LAST is not on GCS"

kill "$PROXY_PID"
wal_rounds 3
has az "wal_005/$LAST.lz4" || fail "$LAST, archived with GCS unreachable, is not on Azure"
MID=$LAST
assert_contains "$(cat "$T/log/daemon.log")" 'writing to storage "az"' "the daemon says it fails over"
restart_proxy
sleep 3
wal_rounds 2
has default "wal_005/$LAST.lz4" || fail "$LAST, archived with GCS back, is not on GCS"
has az "wal_005/$LAST.lz4" && fail "$LAST went to Azure with GCS back"
assert_contains "$(cat "$T/log/daemon.log")" 'writing to storage "default"' "the daemon says it is back"
ok "GCS unreachable: WAL into Azure ($MID); GCS back: WAL into GCS ($LAST); $((SECONDS - START))s"

wrun "${E[@]}" -- wal-fetch "$MID" "$T/mid.seg" --target-storage az
expect_rc 0 "wal-fetch --target-storage az"
wrun "${E[@]}" -- wal-fetch "$LAST" "$T/last.seg" --target-storage az
expect_rc 74 "wal-fetch --target-storage az of a segment on GCS only"
wrun "${E[@]}" -- backup-list
assert_match "$W_OUT" "$B1 +[^ ]+ +[0-9A-F]{24} +default" "backup-list names the backup's storage"
psqlc "$PORT" "CHECKPOINT" >/dev/null
wal_rounds 1
dump_norm "$PORT" >"$T/src.dump"
RECOVER_FETCH=$T/walc.sh restore_start "$T/r" "$B1" "${E[@]}" -- "recovery_target_timeline = 'latest'"
assert_dump_eq "$T/src.dump" "$RPORT" "the backup restored through GCS and Azure"
pg_stop "$T/r"
grep -q "restored log file \"$MID\" from archive" "$T/r.log" || fail "recovery did not read $MID from Azure"
grep -q "restored log file \"$LAST\" from archive" "$T/r.log" || fail "recovery did not reach $LAST"
ok "restored across GCS and Azure to $LAST; $((SECONDS - START))s"
