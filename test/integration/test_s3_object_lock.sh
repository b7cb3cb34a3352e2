#!/usr/bin/env bash
# S3 Object Lock (issue 43), on Ceph RGW with a bucket made with object lock enabled: with
# S3_RETENTION_PERIOD (and S3_RETENTION_MODE) every object wal-push and backup-push write,
# single PUTs and multipart uploads alike, carries the lock (read back with the API); the
# backup restores and recovers to the source's dump; `delete retain 1 --confirm` deletes
# nothing locked and says so, keeping a backup with locked objects whole (sentinel too) while
# an unlocked one goes; WAL-G v3.0.9 reads the same repository.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3lock

s3_rgw_start
awsc s3api create-bucket --bucket walc-locked --object-lock-enabled-for-bucket >/dev/null 2>"$T/log/mb.log" ||
	{ cat "$T/log/mb.log" >&2; fail "creating a bucket with object lock"; }
pg_own "$T"
S3E=(WALG_S3_PREFIX=s3://walc-locked/repo AWS_ENDPOINT="$S3_ENDPOINT" AWS_S3_FORCE_PATH_STYLE=true
	AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" AWS_REGION=us-east-1)
E=("${S3E[@]}" WALG_COMPRESSION_METHOD=zstd S3_MAX_PART_SIZE=5242880 WALG_UPLOAD_CONCURRENCY=4
	S3_RETENTION_PERIOD=3600 S3_RETENTION_MODE=COMPLIANCE)
pg_init "$T/src"
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${E[*]} $WALC_PG wal-push %p'"
pg_start "$T/src" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 2 -q postgres >/dev/null 2>&1
# random bytes zstd cannot shrink: a partition above 5 MiB, a multipart upload
psqlc "$PORT" "CREATE TABLE noise AS SELECT g, decode(md5(random()::text) || md5(random()::text), 'hex') b
	FROM generate_series(1, 300000) g"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
expect_rc 0 "backup-push with S3_RETENTION_PERIOD"
dump_norm "$PORT" >"$T/src.dump"
switch_wal "$PORT" >/dev/null

# Every object is locked, COMPLIANCE, for about an hour from its upload.
awsc s3api list-objects-v2 --bucket walc-locked --prefix repo/ --query 'Contents[].[Key,ETag]' \
	--output text >"$T/objects"
multipart=$(grep -c -- '-[0-9]*"$' "$T/objects" || true)
[ "$multipart" -ge 1 ] || fail "no multipart object to check: $(cat "$T/objects")"
n=0
now=$(date +%s)
while read -r key _; do
	awsc s3api get-object-retention --bucket walc-locked --key "$key" --output text >"$T/ret" 2>&1 ||
		fail "$key carries no lock: $(cat "$T/ret")"
	read -r _ mode until <"$T/ret"
	assert_eq COMPLIANCE "$mode" "the lock mode of $key"
	left=$(($(date -d "$until" +%s) - now))
	[ "$left" -gt 3000 ] && [ "$left" -le 3700 ] || fail "$key is locked until $until ($left s from now)"
	n=$((n + 1))
done <"$T/objects"
log "$n objects locked ($multipart multipart), COMPLIANCE for an hour"

restore_start "$T/restored" LATEST "${S3E[@]}"
assert_dump_eq "$T/src.dump" "$RPORT" "the restore from the locked bucket"
pg_stop "$T/restored"
B1=$(sed -n 's/^\(base_[0-9A-F]*\) .*/\1/p' <<<"$(env "${S3E[@]}" "$WALC" backup-list 2>/dev/null)" | head -n 1)

# Two more backups written without a lock, then retention keeping one: the locked first
# backup stays whole, the unlocked second goes, the locked WAL stays; each kept object is said.
push_unlocked() {
	psqlc "$PORT" "INSERT INTO noise SELECT g, 'x' FROM generate_series(1, 10) g"
	wrun_pg "${S3E[@]}" WALG_COMPRESSION_METHOD=zstd PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
	expect_rc 0 "backup-push without a lock"
}
push_unlocked
push_unlocked
push_unlocked
mapfile -t names < <(env "${S3E[@]}" "$WALC" backup-list 2>/dev/null | sed -n 's/^\(base_[0-9A-F]*\) .*/\1/p')
B2=${names[1]} B3=${names[2]}
# One object of B3 locked by hand: B3 must stay whole, its unlocked sentinel too.
part=$(awsc s3api list-objects-v2 --bucket walc-locked --prefix "repo/basebackups_005/$B3/tar_partitions/part_" \
	--query 'Contents[0].Key' --output text)
awsc s3api put-object-retention --bucket walc-locked --key "$part" \
	--retention "Mode=GOVERNANCE,RetainUntilDate=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)" ||
	fail "locking $part by hand"
wrun "${S3E[@]}" -- delete retain 1 --confirm
expect_rc 0 "delete retain 1 with locked objects"
assert_contains "$W_OUT" "kept basebackups_005/${B1}_backup_stop_sentinel.json (locked until 20" "the kept sentinel"
assert_match "$W_OUT" "kept basebackups_005/$B1/tar_partitions/[^ ]* \\(locked until 20" "a kept partition"
assert_match "$W_OUT" "kept wal_005/[0-9A-F]{24}[^ ]* \\(locked until 20" "kept WAL"
assert_contains "$W_OUT" "deleted basebackups_005/${B2}_backup_stop_sentinel.json" "the unlocked backup's sentinel"
assert_contains "$W_OUT" "kept basebackups_005/${B3}_backup_stop_sentinel.json (its backup has locked objects)" "B3's sentinel"
assert_not_contains "$W_OUT" "deleted basebackups_005/$B3" "B3's objects"
assert_contains "$W_ERR" "S3 Object Lock forbids deleting them" "the warning"
list=$(env "${S3E[@]}" "$WALC" backup-list 2>/dev/null)
assert_contains "$list" "$B1" "backup-list after the delete"
assert_not_contains "$list" "$B2" "backup-list after the delete"
assert_contains "$list" "$B3" "backup-list after the delete"
awsc s3api list-object-versions --bucket walc-locked --prefix "repo/basebackups_005/$B1" \
	--query 'length(DeleteMarkers || `[]`)' --output text >"$T/markers"
assert_eq 0 "$(cat "$T/markers")" "delete markers on the locked backup"
pg_stop "$T/src"
log "retention keeps what is locked, whole, and says so"

walg_required
"$WALG" --version >/dev/null
env "${S3E[@]}" "$WALG" backup-list >"$T/walg.list" 2>"$T/walg.err" || fail "WAL-G backup-list: $(cat "$T/walg.err")"
grep -q base_ "$T/walg.list" || fail "WAL-G lists no backup: $(cat "$T/walg.list")"
env "${S3E[@]}" "$WALG" backup-fetch "$T/walg-restored" LATEST >"$T/walg.out" 2>&1 ||
	fail "WAL-G backup-fetch from the locked bucket: $(tail -5 "$T/walg.out")"
[ -s "$T/walg-restored/global/pg_control" ] || fail "WAL-G restored no pg_control"
log "s3 object lock ok"
