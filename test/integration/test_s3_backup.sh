#!/usr/bin/env bash
# Base backups on S3 (Ceph RGW, which verifies SigV4): archive to S3, a full and a delta
# backup-push (multipart parts of 5 MiB in a long partition, several tar partitions,
# a tablespace, libsodium + zstd) and a
# remote-mode push; backup-list; backup-fetch of the delta from S3 recovers to the quiet
# source's dump and passes amcheck; delete retain on S3 leaves the newest backup restorable.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3backup

s3_rgw_start
s3_mb walc
mkdir -p "$T/ts"
head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/key.hex"
chmod 600 "$T/key.hex"
pg_own "$T"
E=(WALG_S3_PREFIX=s3://walc/backups AWS_ENDPOINT="$S3_ENDPOINT" AWS_S3_FORCE_PATH_STYLE=true
	AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY"
	AWS_REGION=us-east-1 WALG_COMPRESSION_METHOD=zstd WALG_LIBSODIUM_KEY_PATH="$T/key.hex"
	WALG_LIBSODIUM_KEY_TRANSFORM=hex S3_MAX_PART_SIZE=10485760 WALG_UPLOAD_CONCURRENCY=4
	WALG_TAR_SIZE_THRESHOLD=20000000 WALG_DELTA_MAX_STEPS=1)
pg_init "$T/src" --data-checksums
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${E[*]} $WALC_PG wal-push %p'"
pg_start "$T/src" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 5 -q postgres >/dev/null 2>&1
psqlc "$PORT" "CREATE TABLESPACE ts LOCATION '$T/ts'"
psqlc "$PORT" "CREATE TABLE in_ts TABLESPACE ts AS SELECT g, md5(g::text) h FROM generate_series(1, 20000) g"
# about 30 MB with 13 MB of random bytes: a partition of its own that zstd leaves above 10 MiB
psqlc "$PORT" "CREATE TABLE noise AS SELECT g, decode(md5(random()::text) || md5(random()::text), 'hex') b
	FROM generate_series(1, 400000) g"
push() {
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" WALG_UPLOAD_DISK_CONCURRENCY=2 -- backup-push "$@"
	expect_rc 0 "backup-push $*"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
full=$(push "$T/src")
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -n -t 500 -c 2 postgres >/dev/null 2>&1
psqlc "$PORT" "CHECKPOINT"
delta=$(push "$T/src")
[[ $delta == *_D_${full:5:24} ]] || fail "second push must be a delta of $full: $delta"
dump_norm "$PORT" >"$T/src.dump"
remote=$(push)
log "full $full, delta $delta, remote $remote"
parts=$(awsc s3 ls "s3://walc/backups/basebackups_005/$full/tar_partitions/" | grep -c part_)
[ "$parts" -ge 2 ] || fail "expected several partitions on S3, got $parts"
# A partition of 10 to 20 MiB went up as a long stream: parts of 5 MiB however large
# S3_MAX_PART_SIZE is (with whole 10 MiB parts it would be 2). A multipart ETag ends in
# -<number of parts>.
long=$(awsc s3api list-objects-v2 --bucket walc --prefix "backups/basebackups_005/$full/tar_partitions/" \
	--query 'Contents[].[Size,ETag]' --output text | awk '$1 > 10485760 && $1 <= 20971520 { print $1 "," $2 }')
[ -n "$long" ] || fail "no partition of 10 to 20 MiB on S3 to check the part sizes of"
for obj in $long; do
	size=${obj%%,*} etag=${obj#*,}
	want=$(((size + 5242879) / 5242880))
	[[ $etag == *-$want\" ]] || fail "a partition of $size bytes must be $want parts of 5 MiB, ETag $etag"
done

wrun "${E[@]}" -- backup-list
expect_rc 0 "backup-list on S3"
[ "$(printf '%s\n' "$W_OUT" | tail -n 1 | cut -f 1 -d " ")" = "$remote" ] || fail "LATEST must be $remote"
pg_stop "$T/src"

restore() { # NAME DIR
	printf '{"base_prefix": "%s", "tablespaces": ["%s"], "%s": {"loc": "%s", "link": "pg_tblspc/%s"}}\n' \
		"$2" "$OID" "$OID" "$2.ts" "$OID" >"$T/spec.json"
	wrun "${E[@]}" -- backup-fetch --restore-spec "$T/spec.json" "$2" "$1"
	expect_rc 0 "backup-fetch $1 from S3"
	recover_conf "$2" "${E[*]}"
	pg_own "$2.ts"
	local p
	p=$(free_port)
	pg_start "$2" "$p"
	wait_not_in_recovery "$p"
	dump_norm "$p" >"$2.dump"
	cmp -s "$T/src.dump" "$2.dump" || fail "$1 restored from S3 differs from the source"
	amcheck_all "$p"
	pg_stop "$2"
}
OID=$(ls "$T/src/pg_tblspc")
restore "$delta" "$T/r1"
restore "$remote" "$T/r2"
log "delta and remote backups restore from S3"

wrun "${E[@]}" -- delete retain FULL 1 --confirm
expect_rc 0 "delete retain FULL 1 on S3"
wrun "${E[@]}" -- backup-list
[ "$(printf '%s\n' "$W_OUT" | awk 'NR > 1' | wc -l)" = 1 ] || fail "retain FULL 1 must leave one backup: $W_OUT"
restore "$remote" "$T/r3"
log "S3 backups ok"
