# shellcheck shell=bash
# make bench section "stores" (sourced by run.sh; issue 15): walc's full backup and full
# restore of the pgbench dataset on each store, servers on loopback: the file system, S3
# (Ceph RGW, plain HTTP), Azure Blob (Azurite, HTTPS) and GCS (the Firebase CLI's emulator,
# HTTP), each with its wall time and peak RSS; and retention (issues 15 and 20 §6): `delete
# retain FULL 1 --confirm` of BENCH_RETENTION_WAL WAL objects below one backup, walc with
# DeleteObjects (1000 keys a request, 16 at once) against one request per object, one at a
# time (S3_DELETE_BATCH_SIZE=1, WALG_UPLOAD_CONCURRENCY=1: walc before batching), requests
# counted in the DEVEL logs, beside WAL-G v3.0.9 (when run.sh finds it) and pgBackRest's expire
# (its own repository layout; on RGW through stunnel, pgBackRest speaks only HTTPS), on Ceph RGW,
# the file system and, when asked, s3rver (no pgBackRest: plain HTTP) (RGW's own work per deleted key
# bounds what batching can gain there: the longest DeleteObjects answer is recorded beside the
# wall time). report_stores.py writes stores.md.
#
#   BENCH_STORES_RUNS=$BENCH_RUNS   runs of each measurement
#   BENCH_RETENTION_WAL=10000       WAL objects below the backup that each retention run deletes
#   BENCH_STORES_ONLY=              retention: only the retention rows (no backups or restores;
#                                   then the section needs no `full`)
#   BENCH_RETENTION_SERVERS="rgw file"   where the retention rows run: rgw, s3rver, file (s3rver
#                                   is left out by default: its own time per deleted key grows
#                                   with the objects it holds, and at 10000 one run there takes
#                                   about 12 minutes)

# shellcheck source=test/integration/s3lib.sh
. "$ROOT/test/integration/s3lib.sh"
# shellcheck source=test/integration/objstore_lib.sh
. "$ROOT/test/integration/objstore_lib.sh"

STORES_RUNS=${BENCH_STORES_RUNS:-$RUNS}
RET_LOG=1000 # the retention cluster's first WAL log (hex): see bench_delete
RETENTION_WAL=${BENCH_RETENTION_WAL:-10000}
STORES_ONLY=${BENCH_STORES_ONLY:-}
RETENTION_SERVERS=${BENCH_RETENTION_SERVERS:-rgw file}
for st in $RETENTION_SERVERS; do
	case $st in rgw | s3rver | file) ;; *) fail "BENCH_RETENTION_SERVERS: unknown server $st (rgw, s3rver, file)" ;; esac
done
case $RETENTION_WAL in '' | *[!0-9]*) RETENTION_WAL=0 ;; esac
if [ "$RETENTION_WAL" -lt 1 ] || [ "$RETENTION_WAL" -gt $((16#$RET_LOG * 256)) ]; then
	fail "BENCH_RETENTION_WAL=${BENCH_RETENTION_WAL:-}: a number from 1 to $((16#$RET_LOG * 256))"
fi
case $STORES_ONLY in "" | retention) ;; *) fail "BENCH_STORES_ONLY=$STORES_ONLY: only retention is known" ;; esac

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

# Retention (issue 20 §6): a cluster whose WAL starts at log 0x1000 (pg_resetwal), and for each
# tool a repository of its own with one backup it made and RETENTION_WAL WAL objects below it,
# put again before each timed run; `delete retain FULL 1 --confirm` (pgBackRest: expire with
# repo1-retention-full=1) then removes exactly those. Log 0x1000 leaves room for 4096 × 256.
ret_pgbr_archive_id() { echo "$("$PGBIN/postgres" --version | awk '{ split($NF, v, "."); print v[1] }')-1"; }

# ret_put SERVER TOOL: the RETENTION_WAL WAL objects of TOOL's repository on SERVER: walc's and
# WAL-G's wal_005/NAME.lz4, pgBackRest's archive/del/ID/TIMELINE+LOG/NAME-SHA1.gz; on S3 with
# botocore (8 at once), on the file system as files (pgBackRest's owned by postgres)
ret_put() {
	local srv=$1 tool=$2 dest
	case $srv in file) dest=$T/del/$tool-repo ;; *) dest=ret-$tool ;; esac
	RET_DEST=$dest RET_TOOL=$tool RET_N=$RETENTION_WAL RET_AID=$(ret_pgbr_archive_id) RET_BUCKET=$RET_BUCKET \
		"$PY" - <<'PYEOF'
import os
from concurrent.futures import ThreadPoolExecutor
n, tool, dest = int(os.environ["RET_N"]), os.environ["RET_TOOL"], os.environ["RET_DEST"]
def key(i):
    seg = f"00000001{i // 256:08X}{i % 256:08X}"
    if tool == "pgbr":
        return f"archive/del/{os.environ['RET_AID']}/{seg[:16]}/{seg}-{'0' * 40}.gz"
    return f"wal_005/{seg}.lz4"
if dest.startswith("/"):
    for i in range(n):
        k = os.path.join(dest, key(i))
        os.makedirs(os.path.dirname(k), exist_ok=True)
        with open(k, "wb") as f:
            f.write(b"x")
else:
    import botocore.session
    from botocore.config import Config
    c = botocore.session.get_session().create_client(
        "s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name=os.environ["AWS_REGION"],
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=8))
    b = os.environ["RET_BUCKET"]
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda i: c.put_object(Bucket=b, Key=f"{dest}/{key(i)}", Body=b"x"), range(n)))
PYEOF
	if [ "$srv" = file ] && [ "$tool" = pgbr ]; then pg_own "$T/del/pgbr-repo"; fi
}

# ret_left SERVER TOOL: how many WAL objects below log RET_LOG TOOL's repository still holds
# (walc and WAL-G put the backup's own segments beside them)
ret_left() {
	local srv=$1 tool=$2 sub=wal_005 dest=ret-$2
	[ "$tool" = pgbr ] && sub=archive/del/$(ret_pgbr_archive_id)
	[ "$srv" = file ] && dest=$T/del/$tool-repo
	RET_PREFIX=$dest/$sub/ RET_BUCKET=$RET_BUCKET RET_LOG=$RET_LOG "$PY" - <<'PYEOF'
import os
import re
p = os.environ["RET_PREFIX"]
if p.startswith("/"):
    keys = [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs]
else:
    import botocore.session
    from botocore.config import Config
    c = botocore.session.get_session().create_client(
        "s3", endpoint_url=os.environ["S3_ENDPOINT"], region_name=os.environ["AWS_REGION"],
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}))
    keys = [o["Key"] for page in c.get_paginator("list_objects_v2").paginate(Bucket=os.environ["RET_BUCKET"], Prefix=p)
            for o in page.get("Contents", [])]
below = int(os.environ["RET_LOG"], 16)
print(sum(1 for k in keys
          if (m := re.search(r"/([0-9A-F]{8})([0-9A-F]{8})[0-9A-F]{8}[^/]*$", k)) and int(m.group(2), 16) < below))
PYEOF
}

# ret_env SERVER TOOL: walc's or WAL-G's environment for TOOL's repository on SERVER
ret_env() {
	printf '%s\n' "PGHOST=$T" "PGPORT=${PORTS[del]}" "PGDATA=$T/del/pgdata"
	case $1 in
	file) echo "WALG_FILE_PREFIX=$T/del/$2-repo" ;;
	*) printf '%s\n' "WALG_S3_PREFIX=s3://$RET_BUCKET/ret-$2" "AWS_ENDPOINT=$S3_ENDPOINT" \
		"AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY" \
		"AWS_REGION=$AWS_REGION" AWS_S3_FORCE_PATH_STYLE=true ;;
	esac
}

# ret_pgbr_conf SERVER: pgBackRest's configuration for the retention cluster (archive-check off:
# the cluster archives nowhere), its repository on the file system or on RGW through stunnel
# (pgBackRest speaks only HTTPS to S3); prints its path
ret_pgbr_conf() {
	local c=$T/del/pgbr-$1.conf
	{
		printf '%s\n' "[global]" repo1-retention-full=1 "log-path=$T/pgbr/log" "lock-path=$T/pgbr/lock" \
			"spool-path=$T/pgbr/spool" log-level-console=warn log-level-file=off start-fast=y archive-check=n
		case $1 in
		file) echo "repo1-path=$T/del/pgbr-repo" ;;
		*) printf '%s\n' repo1-type=s3 repo1-path=/ret-pgbr "repo1-s3-bucket=$RET_BUCKET" repo1-s3-endpoint=localhost \
			"repo1-storage-port=$S3_TLS_PORT" "repo1-storage-ca-file=$S3_CERT" repo1-s3-uri-style=path \
			"repo1-s3-region=$AWS_REGION" "repo1-s3-key=$AWS_ACCESS_KEY_ID" "repo1-s3-key-secret=$AWS_SECRET_ACCESS_KEY" ;;
		esac
		printf '%s\n' "" "[del]" "pg1-path=$T/del/pgdata" "pg1-socket-path=$T" "pg1-port=${PORTS[del]}" pg1-user=postgres
	} >"$c"
	pg_own "$c"
	echo "$c"
}

# bench_delete SERVER (rgw, s3rver, file) [BUCKET]: the retention rows of SERVER. Tools: walc
# batched (DeleteObjects of 1000 keys, 16 at once), walc one request per object one at a time
# (S3 only: S3_DELETE_BATCH_SIZE=1 WALG_UPLOAD_CONCURRENCY=1), WAL-G (when run.sh found it) and
# pgBackRest (file system and RGW); the order rotates from run to run.
bench_delete() {
	local srv=$1 run item tool lg n left reqs longest items=(walc) conf=""
	RET_BUCKET=${2:-}
	cluster del
	pg_stop "$T/del/pgdata"
	as_pg "$PGBIN/pg_resetwal" -l "00000001$(printf %08X $((16#$RET_LOG)))00000000" -D "$T/del/pgdata" >/dev/null ||
		fail "pg_resetwal"
	pg_start "$T/del/pgdata" "${PORTS[del]}"
	[ "$srv" = file ] || items+=(walc-single)
	mapfile -t envs < <(ret_env "$srv" walc)
	as_pg env "${envs[@]}" "$WALC_PG" backup-push "$T/del/pgdata" >"$T/log/delete-$srv-push.log" 2>&1 ||
		{ tail -n 20 "$T/log/delete-$srv-push.log" >&2; fail "walc backup-push for the retention rows"; }
	if [ ${#WALG_ITEMS[@]} -gt 0 ]; then
		mapfile -t envs < <(ret_env "$srv" walg)
		as_pg env "${envs[@]}" "$WALG" backup-push "$T/del/pgdata" >"$T/log/delete-$srv-walg-push.log" 2>&1 ||
			{ tail -n 20 "$T/log/delete-$srv-walg-push.log" >&2; fail "wal-g backup-push for the retention rows"; }
		items+=(walg)
	fi
	case $srv in
	file | rgw)
		conf=$(ret_pgbr_conf "$srv")
		if ! { as_pg pgbackrest --config="$conf" --stanza=del stanza-create &&
			as_pg pgbackrest --config="$conf" --stanza=del backup --type=full; } >"$T/log/delete-$srv-pgbr-push.log" 2>&1; then
			tail -n 20 "$T/log/delete-$srv-pgbr-push.log" >&2
			fail "pgbackrest backup for the retention rows"
		fi
		items+=(pgbr)
		;;
	esac
	log "retention on $srv: ${items[*]}, $RETENTION_WAL WAL objects each, $STORES_RUNS run(s)"
	for ((run = 1; run <= STORES_RUNS; run++)); do
		while read -r item; do
			tool=${item%-single}
			ret_put "$srv" "$tool"
			lg=delete-$srv-$item-$run
			mapfile -t envs < <(ret_env "$srv" "$tool")
			reqs="" longest=""
			case $item in
			walc) timed "$lg" env "${envs[@]}" WALG_LOG_LEVEL=DEVEL "$WALC" delete retain FULL 1 --confirm ;;
			walc-single) timed "$lg" env "${envs[@]}" WALG_LOG_LEVEL=DEVEL S3_DELETE_BATCH_SIZE=1 \
				WALG_UPLOAD_CONCURRENCY=1 "$WALC" delete retain FULL 1 --confirm ;;
			walg) timed "$lg" env "${envs[@]}" "$WALG" delete retain FULL 1 --confirm ;;
			pgbr) timed "$lg" "${PGRUN[@]}" pgbackrest --config="$conf" --stanza=del expire ;;
			esac
			case $item in walc*)
				# its summary (stderr) rather than its "deleted KEY" lines (stdout, block-buffered into
				# the same log: a stderr line can land inside one of them); the one backup is kept
				n=$(sed -n 's/.*INFO: [^ ]* [^ ]* deleted \([0-9]*\) objects (.*/\1/p' "$T/log/$lg.log" | tail -n 1)
				[ "$n" = "$RETENTION_WAL" ] || fail "walc delete retain ($srv, $item) deleted ${n:-no} objects, not $RETENTION_WAL"
				if [ "$srv" != file ]; then
					reqs=$(grep -c 's3 request: POST .*?delete=' "$T/log/$lg.log" || true)
					# the longest DeleteObjects answer, in ms: the server's own time for its keys
					longest=$(sed -n 's/.*s3 answer: POST .*?delete=: HTTP 200 (\([0-9]*\) ms)$/\1/p' "$T/log/$lg.log" |
						sort -n | tail -n 1)
				fi
				;;
			esac
			# every tool: the repository holds none of the WAL objects any more
			left=$(ret_left "$srv" "$tool")
			[ "$left" = 0 ] || fail "$item's retention on $srv left $left of its $RETENTION_WAL WAL objects"
			case $item in
			walc) sample del "delete-$RETENTION_WAL-$srv" walc - batched "$run" "$reqs" "$longest" ;;
			walc-single) sample del "delete-$RETENTION_WAL-$srv" walc - single "$run" "$reqs" "$longest" ;;
			walg) sample del "delete-$RETENTION_WAL-$srv" wal-g - default "$run" ;;
			pgbr) sample del "delete-$RETENTION_WAL-$srv" pgbackrest - "expire$([ "$srv" = file ] || echo ", https")" "$run" ;;
			esac
		done < <(rotate $((run - 1)) "${items[@]}")
	done
	pg_stop "$T/del/pgdata"
	rm -rf "$T/del"
}

bench_stores() { # DS (empty with BENCH_STORES_ONLY=retention)
	local ds=$1 run st
	declare -gA STORE_NAME
	# shellcheck disable=SC2154 # rc is assigned inside the trap string
	trap 'rc=$?; stores_stop; (exit $rc); it_cleanup' EXIT
	if [ "$STORES_ONLY" != retention ]; then
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
		stores_stop
	fi
	log "retention: delete retain FULL 1 of $RETENTION_WAL WAL objects on: $RETENTION_SERVERS"
	for st in $RETENTION_SERVERS; do
		case $st in
		rgw)
			s3_rgw_start
			curl -sf -X PUT --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
				-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$S3_ENDPOINT/bench" >/dev/null || fail "creating bucket bench"
			# stunnel in front of RGW for pgBackRest (s3.sh's s3_tls_start; stopped with the servers)
			mkdir -p "$T/ret-tls"
			s3_tls_start "$T/ret-tls"
			bench_delete rgw bench
			stores_stop
			;;
		s3rver)
			s3_s3rver_start
			export S3_ENDPOINT=http://127.0.0.1:$S3RVER_PORT AWS_ACCESS_KEY_ID=S3RVER \
				AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=${AWS_REGION:-us-east-1}
			bench_delete s3rver test
			stores_stop
			;;
		file) bench_delete file ;;
		esac
	done
	trap it_cleanup EXIT
	"$PY" "$BENCH_DIR/report_stores.py" "$SAMPLES" "$OUT/stores.md"
	cat "$OUT/stores.md"
}
