#!/usr/bin/env bash
# Retention deletes in batches on S3 (Ceph RGW): a cluster whose WAL starts at log 0x10
# (pg_resetwal), one backup, 2000 WAL objects below it; `delete retain 1 --confirm` removes
# them (and the cluster's WAL older than the backup) with one DeleteObjects request per 1000
# keys (counted in the DEVEL log) and no per-object DELETE, keeps the backup and its WAL.
# S3_DELETE_BATCH_SIZE=300: one request per 300. (make bench times batched against one request
# per object: test/bench/stores.sh.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3delete

s3_rgw_start
s3_mb walc
ENVS=(WALG_S3_PREFIX=s3://walc/del AWS_ENDPOINT="$S3_ENDPOINT" AWS_REGION=us-east-1
	AWS_S3_FORCE_PATH_STYLE=true AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID"
	AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY")
pg_init "$T/src"
as_pg "$PGBIN/pg_resetwal" -l 000000010000001000000000 -D "$T/src" >/dev/null || fail "pg_resetwal"
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env HOME=$T/home ${ENVS[*]} $WALC_PG wal-push %p'"
pg_start "$T/src" "$PORT"
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
expect_rc 0 "backup-push"
put_wal() { # N PREFIX-IN-BUCKET: N fake WAL objects below the backup
	"$PY" - "$1" <<'PYEOF'
import os, sys
import botocore.session
from botocore.config import Config
c = botocore.session.get_session().create_client(
    "s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name="us-east-1",
    aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
    config=Config(s3={"addressing_style": "path"}))
for i in range(int(sys.argv[1])):
    c.put_object(Bucket="walc", Key=f"del/wal_005/00000001{i // 250:08X}{i % 250:08X}.lz4", Body=b"x")
PYEOF
}
# fake: the objects put_wal made (logs 0 to 7, below the cluster's WAL at log 0x10)
count_wal() { # all|fake
	wrun "${ENVS[@]}" -- st ls wal_005/
	# WAL-G's listing: "obj SIZE DATE TIME ZONE ZONE NAME", names relative to wal_005/
	if [ "$1" = fake ]; then
		printf '%s\n' "$W_OUT" | grep -c '^obj .* 000000010000000[0-7]' || true
	else
		printf '%s\n' "$W_OUT" | grep -c '^obj ' || true
	fi
}
put_wal 2000 || fail "storing 2000 WAL objects"
assert_eq 2000 "$(count_wal fake)" "fake WAL objects before retention"
wrun "${ENVS[@]}" WALG_LOG_LEVEL=DEVEL -- delete retain 1 --confirm
expect_rc 0 "delete retain 1 --confirm"
assert_eq 2000 "$(printf '%s\n' "$W_OUT" | grep -c '^deleted wal_005/000000010000000[0-7]')" "fake WAL objects deleted"
all=$(printf '%s\n' "$W_OUT" | grep -c '^deleted ') # the fakes and older WAL of the cluster
assert_eq $(((all + 999) / 1000)) "$(grep -c 's3 request: POST .*?delete=' "$T/.w_err")" \
	"DeleteObjects requests for $all objects"
assert_eq 0 "$(grep -c 's3 request: DELETE ' "$T/.w_err")" "single DELETE requests"
assert_eq 0 "$(count_wal fake)" "fake WAL objects after retention"
kept=$(count_wal all)
[ "$kept" -ge 1 ] || fail "retention deleted the backup's own WAL"
wrun "${ENVS[@]}" -- backup-list
assert_eq 1 "$(printf '%s\n' "$W_OUT" | grep -c '^base_')" "backups after retention"
log "ok: $all objects (2000 fake WAL) deleted with $(((all + 999) / 1000)) DeleteObjects requests"
put_wal 2000 || fail "storing 2000 WAL objects"
wrun "${ENVS[@]}" WALG_LOG_LEVEL=DEVEL S3_DELETE_BATCH_SIZE=300 -- delete retain 1 --confirm
expect_rc 0 "delete retain 1 --confirm with S3_DELETE_BATCH_SIZE=300"
all=$(printf '%s\n' "$W_OUT" | grep -c '^deleted ')
assert_eq $(((all + 299) / 300)) "$(grep -c 's3 request: POST .*?delete=' "$T/.w_err")" \
	"DeleteObjects requests of 300 keys for $all objects"
assert_eq "$kept" "$(count_wal all)" "WAL objects after the second retention"
log "ok: S3_DELETE_BATCH_SIZE=300: $(((all + 299) / 300)) requests for $all objects"
pg_stop "$T/src"
