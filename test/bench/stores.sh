# shellcheck shell=bash
# make bench section "stores" (sourced by run.sh; issue 15): walc's full backup and full
# restore of the pgbench dataset on each store, servers on loopback: the file system, S3
# (Ceph RGW, plain HTTP), Azure Blob (Azurite, HTTPS) and GCS (the Firebase CLI's emulator,
# HTTP), each with its wall time and peak RSS; and the batched deletes of retention: `delete
# retain 1` of 2000 WAL objects on S3 with DeleteObjects (1000 keys a request, 16 at once)
# against one request per object, one at a time (S3_DELETE_BATCH_SIZE=1,
# WALG_UPLOAD_CONCURRENCY=1: walc before batching), requests counted in the DEVEL logs, on
# Ceph RGW and on s3rver (RGW's own work per deleted key bounds what batching can gain there:
# the longest DeleteObjects answer is recorded beside the wall time). report_stores.py writes
# stores.md.
#
#   BENCH_STORES_RUNS=$BENCH_RUNS   runs of each measurement

# shellcheck source=test/integration/s3lib.sh
. "$ROOT/test/integration/s3lib.sh"
# shellcheck source=test/integration/objstore_lib.sh
. "$ROOT/test/integration/objstore_lib.sh"

STORES_RUNS=${BENCH_STORES_RUNS:-$RUNS}

stores_stop() {
	local opts=$-
	s3_cleanup # it turns errexit off (it runs from EXIT traps): on again if it was on
	case $opts in *e*) set -e ;; esac
	store_cleanup
	S3_PIDS=()
	S3_RGW_DIR=""
	S3_S3RVER_DIR=""
	OS_PIDS=()
	OS_DIRS=()
}

# store_walc_env DS STORE: the environment of DS's repository on STORE
store_walc_env() {
	printf '%s\n' "PGHOST=$T" "PGPORT=${PORTS[$1]}" "PGDATA=$T/$1/pgdata" "${BEST[@]}"
	case $2 in
	file) echo "WALG_FILE_PREFIX=$T/$1/stores-repo" ;;
	s3) printf '%s\n' "WALG_S3_PREFIX=s3://bench/stores-$1" "AWS_ENDPOINT=$S3_ENDPOINT" \
		"AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY" \
		"AWS_REGION=$AWS_REGION" AWS_S3_FORCE_PATH_STYLE=true ;;
	az | gcs) store_env "$2" "stores-$1" ;;
	esac
}

store_push() { # DS STORE RUN
	local ds=$1 st=$2 run=$3 lg
	mapfile -t envs < <(store_walc_env "$ds" "$st")
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	lg=$ds-store-$st-push-$run
	timed "$lg" "${PGRUN[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" "$WALC_PG" backup-push "$T/$ds/pgdata"
	STORE_NAME[$st]=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/$lg.log" | tail -n 1)
	sample "$ds" store-backup walc lz4 "$st" "$run" "" "${STORE_NAME[$st]}"
}

store_fetch() { # DS STORE RUN
	local ds=$1 st=$2 run=$3 dest=$T/restore
	mapfile -t envs < <(store_walc_env "$ds" "$st")
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	timed "$ds-store-$st-fetch-$run" "${PGRUN[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" "$WALC_PG" \
		backup-fetch "$dest" "${STORE_NAME[$st]}"
	[ -f "$dest/global/pg_control" ] || fail "backup-fetch from $st: no pg_control"
	sample "$ds" store-restore walc lz4 "$st" "$run" "$(pgdata_bytes "$dest")" "${STORE_NAME[$st]}"
	rm -rf "$dest"
}

# The delete measurement: a cluster whose WAL starts at log 0x10 (pg_resetwal), one backup,
# and 2000 WAL objects below it that `delete retain 1` removes.
delete_put_wal() { # BUCKET PREFIX
	S3_BUCKET_NAME=$1 S3_PREFIX_PATH=$2 "$PY" - <<'PYEOF'
import os
import botocore.session
from botocore.config import Config
s = botocore.session.get_session()
c = s.create_client("s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name=os.environ["AWS_REGION"],
                    aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                    aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
                    config=Config(s3={"addressing_style": "path"}, max_pool_connections=4))
p = os.environ["S3_PREFIX_PATH"]
for i in range(2000):
    c.put_object(Bucket=os.environ["S3_BUCKET_NAME"], Key=f"{p}/wal_005/00000001{i // 250:08X}{i % 250:08X}.lz4", Body=b"x")
PYEOF
}

bench_delete() { # SERVER (rgw, s3rver) BUCKET
	local srv=$1 bucket=$2 run mode d=$T/del envs lg
	cluster del
	pg_stop "$T/del/pgdata"
	as_pg "$PGBIN/pg_resetwal" -l 000000010000001000000000 -D "$T/del/pgdata" >/dev/null || fail "pg_resetwal"
	pg_start "$T/del/pgdata" "${PORTS[del]}"
	envs=(PGHOST="$T" PGPORT="${PORTS[del]}" WALG_S3_PREFIX="s3://$bucket/delete" AWS_ENDPOINT="$S3_ENDPOINT"
		AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY"
		AWS_REGION="$AWS_REGION" AWS_S3_FORCE_PATH_STYLE=true)
	as_pg env "${envs[@]}" "$WALC_PG" backup-push "$d/pgdata" >"$T/log/delete-$srv-push.log" 2>&1 ||
		{ tail -n 20 "$T/log/delete-$srv-push.log" >&2; fail "backup-push for the delete measurement"; }
	for ((run = 1; run <= STORES_RUNS; run++)); do
		while read -r mode; do
			delete_put_wal "$bucket" delete
			lg=delete-$srv-$mode-$run
			case $mode in
			batched) timed "$lg" env "${envs[@]}" WALG_LOG_LEVEL=DEVEL "$WALC" delete retain 1 --confirm ;;
			single) timed "$lg" env "${envs[@]}" WALG_LOG_LEVEL=DEVEL S3_DELETE_BATCH_SIZE=1 \
				WALG_UPLOAD_CONCURRENCY=1 "$WALC" delete retain 1 --confirm ;;
			esac
			n=$(grep -c '^deleted wal_005/' "$T/log/$lg.log" || true)
			[ "$n" = 2000 ] || fail "delete retain 1 ($srv, $mode) deleted $n WAL objects, not 2000"
			reqs=$(grep -c 's3 request: POST .*?delete=' "$T/log/$lg.log" || true)
			# the longest DeleteObjects answer, in ms: the server's own time for its keys
			longest=$(sed -n 's/.*s3 answer: POST .*?delete=: HTTP 200 (\([0-9]*\) ms)$/\1/p' "$T/log/$lg.log" |
				sort -n | tail -n 1)
			sample del "delete-2000-$srv" walc - "$mode" "$run" "$reqs" "$longest"
		done < <(rotate $((run - 1)) batched single)
	done
	pg_stop "$T/del/pgdata"
	rm -rf "$T/del"
}

bench_stores() { # DS
	local ds=$1 run st
	declare -gA STORE_NAME
	# shellcheck disable=SC2154 # rc is assigned inside the trap string
	trap 'rc=$?; stores_stop; (exit $rc); it_cleanup' EXIT
	s3_rgw_start
	curl -sf -X PUT --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$S3_ENDPOINT/bench" >/dev/null || fail "creating bucket bench"
	az_start
	gcs_start
	mkdir -p "$T/$ds/stores-repo"
	pg_own "$T/$ds/stores-repo"
	log "$ds: backup and restore on each store: $STORES_RUNS run(s)"
	for ((run = 1; run <= STORES_RUNS; run++)); do
		while read -r st; do
			store_push "$ds" "$st" "$run"
			store_fetch "$ds" "$st" "$run"
		done < <(rotate $((run - 1)) file s3 az gcs)
	done
	log "delete retain 1 of 2000 WAL objects on S3: batched against one request per object"
	bench_delete rgw bench
	stores_stop
	local saved=("$S3_ENDPOINT" "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY")
	s3_s3rver_start
	S3_ENDPOINT=http://127.0.0.1:$S3RVER_PORT AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
	bench_delete s3rver test
	S3_ENDPOINT=${saved[0]} AWS_ACCESS_KEY_ID=${saved[1]} AWS_SECRET_ACCESS_KEY=${saved[2]}
	stores_stop
	trap it_cleanup EXIT
	"$PY" "$BENCH_DIR/report_stores.py" "$SAMPLES" "$OUT/stores.md"
	cat "$OUT/stores.md"
}
