#!/usr/bin/env bash
# Ranged reads on S3 (Ceph RGW, which checks SigV4 with the Range header signed): a zstd
# backup in the clear, restored cold; one small file and one large one changed, then
# backup-fetch --delta reads only their frames of the partition (Range GETs, "extracting KEY
# bytes FROM to TO"), far less than the backup stores, and the directory equals the cold
# restore again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3ranges

s3_rgw_start
s3_mb walc
pg_own "$T"
E=(WALG_S3_PREFIX=s3://walc/ranges AWS_ENDPOINT="$S3_ENDPOINT" AWS_S3_FORCE_PATH_STYLE=true
	AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY"
	AWS_REGION=us-east-1 WALG_COMPRESSION_METHOD=zstd)
pgbench_cluster 3
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
expect_rc 0 "backup-push to S3"
pg_stop "$T/src"

mkdir -m 700 "$T/cold" "$T/node"
wrun "${E[@]}" -- backup-fetch "$T/cold" LATEST
expect_rc 0 "cold restore from S3"
cp -a "$T/cold/." "$T/node/"
small=$(cd "$T/node" && find base -type f -size -16k -size +0 | sort | tail -n 1)
large=$(cd "$T/node" && find base -type f -size +2M | sort | head -n 1)
[ -n "$large" ] || fail "no relation file over 2 MiB"
printf 'garbage' | dd of="$T/node/$small" bs=1 seek=10 conv=notrunc status=none
printf 'garbage' | dd of="$T/node/$large" bs=1 seek=$((8192 * 3 + 100)) conv=notrunc status=none
rm -f "$T/node/postmaster.pid"
wrun "${E[@]}" WALG_LOG_LEVEL=DEVEL -- backup-fetch --delta "$T/node" LATEST
expect_rc 0 "backup-fetch --delta from S3"
assert_match "$W_ERR" "extracting .*part_[0-9]+\.tar\.zst bytes [0-9]+ to [0-9]+" "ranged reads on S3"
assert_contains "$W_ERR" "range: bytes=" "Range headers on the requests"
read -r got of < <(printf '%s\n' "$W_ERR" | sed -nE 's/.*; reading ([0-9.]+) of ([0-9.]+) MiB stored.*/\1 \2/p' | head -n 1)
large_mib=$(stat -c %s "$T/cold/$large" | awk '{ printf "%.1f", $1 / 1048576 }')
log "two changed files ($small; $large, $large_mib MiB): read $got of $of MiB stored"
awk -v a="$got" -v b="$of" 'BEGIN { exit !(a < b / 2) }' || fail "read $got of $of MiB"
diff -r --no-dereference "$T/cold" "$T/node" >"$T/diff.txt" 2>&1 || { head "$T/diff.txt"; fail "delta restore from S3 differs from the cold restore"; }
log "S3 ranged reads ok"
