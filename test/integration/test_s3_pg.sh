#!/usr/bin/env bash
# PostgreSQL 15 archiving to S3 and recovering from it (Ceph RGW, which verifies SigV4):
# archive_command = walc wal-push into two S3 repositories at once (zstd with a libsodium key
# over virtual-hosted URLs and parallel background uploads of other .ready files; lz4 without a
# key over path-style URLs), while pgbench writes and a
# base backup (pg_basebackup -X none) is taken. For each repository: every archived file
# fetched by walc is byte-identical to what archive_command saw, awscli lists one object per
# file, and a copy of the base backup recovered with restore_command = walc wal-fetch and
# promoted has the same normalized pg_dumpall as the source.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3pg
START=$SECONDS
MIN_SEGMENTS=${MIN_SEGMENTS:-10}

s3_rgw_start
s3_mb walc
CONFIGS=(zstd-key lz4)
mkdir -p "$T/conf" "$T/golden" "$T/fetch" "$T/markers-lz4/pg_wal"
head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/key.hex"
for c in "${CONFIGS[@]}"; do
	{
		echo "WALG_S3_PREFIX=s3://walc/pg/$c"
		echo "AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID"
		echo "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY"
		echo "AWS_REGION=us-east-1"
		echo "WALG_PG_WAL_SIZE=1"
		if [ "$c" = zstd-key ]; then
			# parallel background uploads of other .ready files (WAL-G's markers in PGDATA)
			echo "WALG_UPLOAD_CONCURRENCY=4"
			echo "AWS_ENDPOINT=http://localhost:$RGW_PORT"
			echo "WALG_COMPRESSION_METHOD=zstd"
			echo "WALG_LIBSODIUM_KEY_PATH=$T/key.hex"
			echo "WALG_LIBSODIUM_KEY_TRANSFORM=hex"
		else
			echo "AWS_ENDPOINT=$S3_ENDPOINT"
			echo "AWS_S3_FORCE_PATH_STYLE=true"
			echo "WALG_COMPRESSION_METHOD=lz4"
			# WAL-G's upload markers are shared by every configuration on one PGDATA: this
			# second repository gets its own, so it uploads every file PostgreSQL hands it
			echo "PGDATA=$T/markers-$c"
		fi
	} >"$T/conf/$c.env"
	matrix_wrapper "$c"
done
# archive_command: wal-push %p with every configuration in turn, then keep a golden copy.
matrix_push_all "${CONFIGS[@]}"
pg_own "$T"

SRC=$T/src
PORT=$(free_port)
pg_init "$SRC" --wal-segsize=1
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_command = '$T/push-all.sh %p'" \
	"autovacuum = off" "checkpoint_timeout = 1h" "max_wal_size = 1GB" "fsync = off"
pg_start "$SRC" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -i -s 2 -q postgres >"$T/log/pgbench-init.log" 2>&1 ||
	{ cat "$T/log/pgbench-init.log" >&2; fail "pgbench -i"; }
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -T 6 -c 2 -R 200 postgres >"$T/log/pgbench-run.log" 2>&1 &
PGBENCH=$!
BG_PIDS+=("$PGBENCH")
sleep 1
as_pg "$PGBIN/pg_basebackup" -h "$T" -p "$PORT" -U postgres -D "$T/base" -X none -c fast \
	>"$T/log/basebackup.log" 2>&1 || { cat "$T/log/basebackup.log" >&2; fail "pg_basebackup"; }
while kill -0 "$PGBENCH" 2>/dev/null; do
	switch_wal "$PORT" >/dev/null
	sleep 1
done
wait "$PGBENCH" || { cat "$T/log/pgbench-run.log" >&2; fail "pgbench run"; }
psqlc "$PORT" "CREATE TABLE filler (id int, h text)"
for i in $(seq 1 40); do
	seg=$(switch_wal "$PORT")
	wait_archived "$SRC" "$seg" 180 "$T/archive-failed"
	n=$(find "$T/golden" -maxdepth 1 -name '????????????????????????' | wc -l)
	[ "$n" -ge "$MIN_SEGMENTS" ] && break
	psqlc "$PORT" "INSERT INTO filler SELECT g, md5(g::text) FROM generate_series($i * 5000, $i * 5000 + 4999) g"
done
psqlc "$PORT" "CHECKPOINT"
dump_norm "$PORT" >"$T/source.sql"
FINAL=$(switch_wal "$PORT")
wait_archived "$SRC" "$FINAL" 180 "$T/archive-failed"
pg_stop "$SRC"
[ ! -e "$T/archive-failed" ] || { cat "$T/archive-failed" >&2; fail "archive_command failed"; }
assert_no_sanitizer_reports "$T"/log/push-*.log
mapfile -t GOLDEN < <(find "$T/golden" -maxdepth 1 -type f ! -name '.*' -printf '%f\n' | sort)
log "archived ${#GOLDEN[@]} files to both S3 repositories (final segment $FINAL)"

for c in "${CONFIGS[@]}"; do
	mapfile -t ENV <"$T/conf/$c.env"
	for f in "${GOLDEN[@]}"; do
		wrun "${ENV[@]}" -- wal-fetch "$f" "$T/fetch/$f"
		expect_rc 0 "[$c] wal-fetch $f"
		assert_same_file "$T/golden/$f" "$T/fetch/$f" "[$c] wal-fetch $f"
		rm -f "$T/fetch/$f"
	done
	nobj=$(awsc s3 ls "s3://walc/pg/$c/wal_005/" | wc -l | tr -d ' ')
	assert_eq "${#GOLDEN[@]}" "$nobj" "[$c] objects in wal_005/ (awscli)"

	recover_to_end "$T/base" "$T/conf/$c.sh" "$T/source.sql" "$FINAL" "[$c]"
	log "[$c] ${#GOLDEN[@]} files fetched identically; recovery from S3 gives the source's dump"
done
log "test_s3_pg passed in $((SECONDS - START)) s"
