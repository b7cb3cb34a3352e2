#!/usr/bin/env bash
# WAL-G v3.0.9 and walc on one SFTP repository (Debian's sshd on 127.0.0.1): a cluster archives
# with walc wal-push over SFTP and walc takes a backup-push over SFTP; WAL-G lists it, restores
# it with backup-fetch LATEST and recovers with its own wal-fetch: the restored cluster's
# normalized pg_dumpall equals the source's. The other way, WAL files WAL-G's wal-push stored
# are fetched by walc over SFTP with identical bytes.
#
# An SFTP repository is the server's files under the prefix's folder, at the paths WAL-G's SSH
# storage reads and writes (pkg/storages/sh: path.Join of the folder and the key). The WAL-G
# binary here is built with file and S3 storage only, so WAL-G works on that folder as file
# storage (WALG_FILE_PREFIX), which reads and writes the same paths and bytes.
#
# Needs the WAL-G binary: $WALC_WALG, default <repo>/../shared/tools/wal-g. Without it the
# test prints "skipped: ..." and passes.
. "$(dirname "$0")/lib.sh"
walg_required
# shellcheck source=objstore_lib.sh
. "$(dirname "$0")/objstore_lib.sh"
store_setup sftpwalg
sftp_start
mkdir -p "$SFTP_ROOT/repo"
pg_own "$SFTP_ROOT"
E=(WALG_SSH_PREFIX="ssh://127.0.0.1$SFTP_ROOT/repo" "${SFTP_ENV[@]}" WALG_COMPRESSION_METHOD=zstd)
walc_wrapper "${E[@]}"
walg_wrapper WALG_FILE_PREFIX="$SFTP_ROOT/repo" WALG_COMPRESSION_METHOD=zstd
pgbench_source 2 archive.log

wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "walc backup-push"
name=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
psqlc "$PORT" "CREATE TABLE after_backup AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 5000) g"
source_archived_stopped
log "walc wrote $name over SFTP; archived up to $LAST"

walg_lists "$name"
walg_restores_latest "$T/restored" "WAL-G's restore of walc's backup over SFTP"
pg_stop "$T/restored"
ok "WAL-G restored the backup walc stored over SFTP and replayed the WAL walc archived there: the dumps are equal"

mkdir -p "$T/wal" "$T/walg-pgdata/pg_wal"
pg_own "$T/walg-pgdata"
# segments of the repository's cluster (wal-fetch checks a segment's system identifier)
SYSID=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["system_identifier"])' "$SFTP_ROOT/repo/walc_cluster.json")
for i in 1 2 3; do
	seg=$(printf '0000000900000000000000%02X' "$i")
	{ head -c 65536 /dev/urandom; { yes "segment $seg" | head -c 983040 || true; }; } >"$T/wal/src"
	fake_segment "$seg" 1048576 "$T/wal/$seg" "$T/wal/src" "$SYSID"
	chmod 644 "$T/wal/$seg"
	(cd "$T/walg-pgdata" && as_pg "$T/walg.sh" wal-push "$T/wal/$seg") >>"$T/log/walg-push.out" 2>&1 ||
		{ cat "$T/log/walg-push.out" >&2; fail "wal-g wal-push $seg"; }
	wrun "${E[@]}" -- wal-fetch "$seg" "$T/fetched-$seg"
	expect_rc 0 "walc wal-fetch of WAL-G's $seg"
	assert_same_file "$T/wal/$seg" "$T/fetched-$seg" "walc wal-fetch of WAL-G's $seg"
done
ok "walc fetched the WAL files WAL-G stored over SFTP, bytes identical"
