#!/usr/bin/env bash
# backup-push without a data directory (remote mode, the Kubernetes CronJob's way): BASE_BACKUP
# over a replication connection, run as an OS user that cannot read PGDATA, re-packed into
# WAL-G's layout (several partitions, a tablespace); it restores (tablespace relocated) to the
# same dump as the quiet source, exactly like a local backup of the same state does.
. "$(dirname "$0")/lib.sh"
it_setup remote

mkdir -p "$T/repo" "$T/ts"
pg_own "$T"
ENVS=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd)
pg_init "$T/src"
chmod 700 "$T/src"
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${ENVS[*]} $WALC_PG wal-push %p'"
pg_start "$T/src" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 3 -q postgres >/dev/null 2>&1
psqlc "$PORT" "CREATE TABLESPACE ts LOCATION '$T/ts'"
psqlc "$PORT" "CREATE TABLE in_ts TABLESPACE ts AS SELECT g, md5(g::text) h FROM generate_series(1, 20000) g"
psqlc "$PORT" "CREATE INDEX in_ts_g ON in_ts (g) TABLESPACE ts"
OID=$(psqlc "$PORT" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts'")
psqlc "$PORT" "CHECKPOINT"
dump_norm "$PORT" >"$T/src.dump"

# As "nobody": no access to PGDATA at all, only the socket.
chmod 777 "$T" # the socket directory
wrun_as_nobody() {
	set +e
	runuser -u nobody -- env HOME=/tmp "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" PGUSER=postgres \
		WALG_TAR_SIZE_THRESHOLD=10000000 "$WALC_PG" backup-push >"$T/.out" 2>"$T/.err"
	W_RC=$?
	set -e
	W_ERR=$(cat "$T/.err")
}
runuser -u nobody -- test -r "$T/src/PG_VERSION" && fail "test set-up: nobody can read PGDATA"
chmod 777 "$T/repo"
# nobody reads the repository's cluster marker, which the archiver (postgres) wrote; file
# repositories shared by two OS users need a shared group, which nobody is not in.
switch_wal "$PORT" >/dev/null
for _ in $(seq 1 300); do [ -f "$T/repo/walc_cluster.json" ] && break; sleep 0.1; done
chmod a+r "$T/repo/walc_cluster.json"
wrun_as_nobody
expect_rc 0 "remote backup-push"
assert_contains "$W_ERR" "BASE_BACKUP" "remote mode log"
name=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
[[ $name =~ ^base_[0-9A-F]{24}$ ]] || fail "remote backup name: '$name'"
parts=$(ls "$T/repo/basebackups_005/$name/tar_partitions" | grep -c '^part_')
[ "$parts" -ge 2 ] || fail "expected several partitions, got $parts"
for f in pg_control.tar.zst backup_label.tar.zst; do
	[ -f "$T/repo/basebackups_005/$name/tar_partitions/$f" ] || fail "missing $f"
done

pg_stop "$T/src"
# Every object, page and WAL segment of the remote backup checks out.
wrun "${ENVS[@]}" -- backup-verify "$name"
expect_rc 0 "backup-verify of the remote backup: $W_OUT"
assert_match "$W_OUT" "^backup $name: OK: " "backup-verify's summary"
printf '{"base_prefix": "%s", "tablespaces": ["%s"], "%s": {"loc": "%s", "link": "pg_tblspc/%s"}}\n' \
	"$T/dst" "$OID" "$OID" "$T/ts2" "$OID" >"$T/spec.json"
wrun "${ENVS[@]}" -- backup-fetch --restore-spec "$T/spec.json" "$T/dst" LATEST
expect_rc 0 "backup-fetch of the remote backup"
[ "$(readlink "$T/dst/pg_tblspc/$OID")" = "$T/ts2" ] || fail "tablespace not relocated"
recover_conf "$T/dst" "${ENVS[*]}"
pg_own "$T/ts2"
P2=$(free_port)
pg_start "$T/dst" "$P2"
wait_not_in_recovery "$P2"
dump_norm "$P2" >"$T/dst.dump"
cmp -s "$T/src.dump" "$T/dst.dump" || fail "remote backup restores to a different dump"
amcheck_all "$P2"
log "remote backup $name restores to the source's dump"
