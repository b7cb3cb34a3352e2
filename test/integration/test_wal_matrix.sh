#!/usr/bin/env bash
# The core acceptance test of wal-push / wal-fetch against a real PostgreSQL 15.
#
# One source cluster (1 MiB segments) archives every WAL file into 10 repositories in turn:
# codecs lz4, zstd, brotli, lzma, none, each without a key and with a libsodium key read from
# WALG_LIBSODIUM_KEY_PATH (hex or base64 transform). The archive wrapper also keeps a "golden"
# copy of each file exactly as archive_command saw it. A base backup (pg_basebackup -X none, so
# every WAL record must come from the archive) is taken while pgbench writes. Then, for every
# configuration:
#   (a) walc wal-fetch of every archived file is byte-identical to its golden copy;
#   (b) every stored object decodes with the Debian command-line tool (lz4, zstd, brotli,
#       xz --format=lzma) to the golden bytes; encrypted objects are first decrypted by an
#       independent libsodium secretstream reader (sodium.py, ctypes), must not be decodable
#       without decryption, and have exactly the secretstream size for their payload;
#   (c) for lz4 and zstd-base64 (WAL-G's default codec without a key, another with one): a
#       copy of the base backup recovered with restore_command = walc wal-fetch to the end of
#       the archive and promoted has the same normalized pg_dumpall as the source. (a) has
#       already fetched every file of every configuration byte for byte, so the other eight
#       recoveries would replay the same bytes (under CI's sanitized build they took the test
#       past its timeout).
# Finally a cluster with default 16 MiB segments and the default codec archives >= 3 segments,
# which are fetched and compared (keeps the 16 MiB path honest).
# Knobs: MIN_SEGMENTS (default 20), PGBENCH_RATE (pgbench -R during the backup, default 100 tps:
# bounds the WAL volume. After the backup's checkpoint nearly every transaction writes full
# pages: 250 tps made about 50 segments, each pushed ten times and fetched and decoded ten
# times, against 31 files at 100 tps; MIN_SEGMENTS is the floor either way).
# shellcheck source=lib.sh
# integration: long
. "$(dirname "$0")/lib.sh"
it_setup matrix
START=$SECONDS

MIN_SEGMENTS=${MIN_SEGMENTS:-20}
CONFIGS=(lz4 zstd brotli lzma none lz4-hex zstd-base64 brotli-hex lzma-base64 none-hex)

# ---- keys and configurations ----------------------------------------------------------------
mkdir -p "$T/conf" "$T/golden" "$T/fetch" "$T/work"
head -c 32 /dev/urandom >"$T/key.bin"
od -An -v -tx1 "$T/key.bin" | tr -d ' \n' >"$T/key.hex"
echo >>"$T/key.hex" # trailing newline, like the WAL-G fixtures' key files
base64 -w0 "$T/key.bin" >"$T/key.base64"
echo >>"$T/key.base64"
[ "$(wc -c <"$T/key.hex")" = 65 ] || fail "hex key file"
chmod 600 "$T"/key.* # private, owned by postgres (pg_own below)


for c in "${CONFIGS[@]}"; do
	{
		echo "WALG_FILE_PREFIX=$T/repo-$c"
		echo "WALG_COMPRESSION_METHOD=$(codec_of "$c")"
		echo "WALG_PG_WAL_SIZE=1"
		# WAL-G's background-upload markers live under PGDATA and are shared by every
		# configuration on one data directory: give each repository its own.
		echo "PGDATA=$T/markers-$c"
		tr=$(transform_of "$c")
		if [ -n "$tr" ]; then
			echo "WALG_LIBSODIUM_KEY_PATH=$T/key.$tr"
			echo "WALG_LIBSODIUM_KEY_TRANSFORM=$tr"
		fi
	} >"$T/conf/$c.env"
	mkdir -p "$T/repo-$c"
	matrix_wrapper "$c"
done

# archive_command: wal-push %p with every configuration in turn, then keep a golden copy.
matrix_push_all "${CONFIGS[@]}"
pg_own "$T"

# ---- decoder self-check against a WAL-G fixture ---------------------------------------------
fx=${WALC_FIXTURES_WALG:-$ROOT/test/fixtures/walg-v3.0.9}
obj=$fx/zstd-libsodium-base64/repo/wal_005/000000010000000000000025.zst
plain=$fx/zstd/repo/wal_005/000000010000000000000025.zst
if [ ! -f "$obj" ] || [ ! -f "$plain" ]; then
	fail "WAL-G fixture objects not found under $fx (WALC_FIXTURES_WALG)"
fi
a=$(sodium_decrypt "$fx/zstd-libsodium-base64/libsodium-base64.key" base64 <"$obj" | zstd -dcq | sha256sum)
b=$(zstd -dcq <"$plain" | sha256sum)
assert_eq "$b" "$a" "sodium.py self-check on the WAL-G fixture"
log "sodium.py decrypts WAL-G's fixture object correctly"

# ---- source cluster -------------------------------------------------------------------------
SRC=$T/src
PORT=$(free_port)
pg_init "$SRC" --wal-segsize=1 --data-checksums
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_command = '/bin/true'" \
	"autovacuum = off" "checkpoint_timeout = 1h" "max_wal_size = 1GB" "fsync = off"
pg_start "$SRC" "$PORT"
log "source up on port $PORT; loading pgbench -i -s 5 (not archived)"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -i -s 5 -q postgres >"$T/log/pgbench-init.log" 2>&1 ||
	{ cat "$T/log/pgbench-init.log" >&2; fail "pgbench -i"; }

# From here on every WAL file goes through walc (restart: no window with the old command).
pg_stop "$SRC"
pg_conf "$SRC" "archive_command = '$T/push-all.sh %p'"
pg_start "$SRC" "$PORT"
switch_wal "$PORT" >/dev/null

log "base backup (pg_basebackup -X none) while pgbench -T 10 -c 2 -R ${PGBENCH_RATE:-100} writes"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -T 10 -c 2 -R "${PGBENCH_RATE:-100}" postgres >"$T/log/pgbench-run.log" 2>&1 &
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
grep -E '^(tps|number of transactions actually processed)' "$T/log/pgbench-run.log" || true

# Make sure there are at least MIN_SEGMENTS archived segments.
psqlc "$PORT" "CREATE TABLE filler (id int, h text)"
n=0
for i in $(seq 1 60); do
	seg=$(switch_wal "$PORT")
	wait_archived "$SRC" "$seg" 180 "$T/archive-failed"
	n=$(find "$T/golden" -maxdepth 1 -name '????????????????????????' | wc -l)
	[ "$n" -ge "$MIN_SEGMENTS" ] && break
	psqlc "$PORT" "INSERT INTO filler SELECT g, md5(g::text) FROM generate_series($i * 10000, $i * 10000 + 9999) g"
done
[ "$n" -ge "$MIN_SEGMENTS" ] || fail "only $n segments archived"

psqlc "$PORT" "CHECKPOINT"
dump_norm "$PORT" >"$T/source.sql"
FINAL=$(switch_wal "$PORT")
wait_archived "$SRC" "$FINAL" 180 "$T/archive-failed"
pg_stop "$SRC"
[ ! -e "$T/archive-failed" ] || { cat "$T/archive-failed" >&2; fail "archive_command failed"; }
assert_no_sanitizer_reports "$T"/log/push-*.log "$SRC.log"
grep -q 'pgbench_accounts' "$T/source.sql" || fail "source dump has no pgbench data"

START_SEG=$(sed -nE 's/^START WAL LOCATION: .* \(file ([0-9A-F]{24})\)$/\1/p' "$T/base/backup_label")
is_segment_name "$START_SEG" || fail "no start segment in backup_label"
mapfile -t GOLDEN < <(find "$T/golden" -maxdepth 1 -type f ! -name '.*' -printf '%f\n' | sort)
mapfile -t SEGS < <(printf '%s\n' "${GOLDEN[@]}" | grep -E '^[0-9A-F]{24}$')
GOLDEN_BYTES=$(cat "$T"/golden/* | wc -c)
log "archived ${#GOLDEN[@]} files (${#SEGS[@]} segments, ${SEGS[0]}..${SEGS[-1]}); backup starts in $START_SEG, final $FINAL"

# every segment from the backup's start to the final one must have been archived
next_seg() { # 1 MiB segments: 4096 per xlogid
	local tli=${1:0:8} hi=$((16#${1:8:8})) lo=$((16#${1:16:8}))
	lo=$((lo + 1))
	if [ "$lo" -ge 4096 ]; then lo=0 hi=$((hi + 1)); fi
	printf '%s%08X%08X\n' "$tli" "$hi" "$lo"
}
s=$START_SEG
while :; do
	[ -f "$T/golden/$s" ] || fail "segment $s (between backup start and final) was not archived"
	[ "$s" = "$FINAL" ] && break
	s=$(next_seg "$s")
done
log "source phase done in $((SECONDS - START))s"

# ---- per configuration ----------------------------------------------------------------------
for c in "${CONFIGS[@]}"; do
	t0=$SECONDS
	codec=$(codec_of "$c")
	tr=$(transform_of "$c")
	ext=$(ext_of "$codec")
	repo=$T/repo-$c
	mapfile -t ENV < "$T/conf/$c.env"

	# (a) wal-fetch returns every archived file byte for byte
	for f in "${GOLDEN[@]}"; do
		wrun "${ENV[@]}" -- wal-fetch "$f" "$T/fetch/$f"
		expect_rc 0 "[$c] wal-fetch $f"
		assert_same_file "$T/golden/$f" "$T/fetch/$f" "[$c] wal-fetch $f"
		rm -f "$T/fetch/$f"
	done

	# (b) stored objects: exactly one per archived file, decodable by the CLI tools
	mapfile -t OBJS < <(find "$repo/wal_005" -maxdepth 1 -type f -printf '%f\n' | sort)
	assert_eq "${#GOLDEN[@]}" "${#OBJS[@]}" "[$c] number of objects in wal_005/"
	for f in "${GOLDEN[@]}"; do
		obj=$repo/wal_005/$f$ext
		[ -f "$obj" ] || fail "[$c] object $obj missing (objects: ${OBJS[*]:0:5} ...)"
		plain=$T/work/plain
		if [ -n "$tr" ]; then
			sodium_decrypt "$T/key.$tr" "$tr" <"$obj" >"$T/work/dec" ||
				fail "[$c] $obj: independent secretstream decryption failed"
			n=$(wc -c <"$T/work/dec")
			want=$((24 + (n / 8192 + 1) * 17 + n))
			assert_eq "$want" "$(wc -c <"$obj")" "[$c] $obj size (secretstream of $n bytes)"
			if [ "$codec" = none ]; then
				cmp -s "$obj" "$T/golden/$f" && fail "[$c] $obj is stored in plain text"
			elif decode_cli "$codec" <"$obj" >/dev/null 2>&1; then
				fail "[$c] $obj decodes with the $codec CLI without decryption"
			fi
			decode_cli "$codec" <"$T/work/dec" >"$plain" 2>"$T/work/err" ||
				fail "[$c] $obj: $codec CLI cannot decode the decrypted object: $(cat "$T/work/err")"
		else
			decode_cli "$codec" <"$obj" >"$plain" 2>"$T/work/err" ||
				fail "[$c] $obj: $codec CLI cannot decode it: $(cat "$T/work/err")"
		fi
		assert_same_file "$T/golden/$f" "$plain" "[$c] CLI-decoded $obj"
	done
	tab=$(du -sb "$repo/wal_005" | cut -f1)
	if [ "$codec" != none ] && [ "$tab" -gt $((GOLDEN_BYTES / 2)) ]; then
		fail "[$c] wal_005 holds $tab bytes for $GOLDEN_BYTES bytes of WAL: not compressed"
	fi

	# (c) restore the base backup with restore_command = walc wal-fetch, to the end of archive
	restored=""
	case $c in lz4 | zstd-base64)
		recover_to_end "$T/base" "$T/conf/$c.sh" "$T/source.sql" "$FINAL" "[$c]"
		restored=", restore matches"
		;;
	esac
	ok "[$c] ${#GOLDEN[@]} files fetched and CLI-decoded$restored; wal_005 ${tab} bytes ($((SECONDS - t0))s)"
done

# ---- default 16 MiB segments, default codec -------------------------------------------------
log "16 MiB segments, default codec"
S16=$T/s16
mkdir -p "$T/g16" "$T/repo16"
pg_own "$T/g16" "$T/repo16"
pg_init "$S16"
pg_conf "$S16" "wal_level = replica" "archive_mode = on" "autovacuum = off" "fsync = off" \
	"archive_command = 'cp %p $T/g16/.%f && HOME=$T/home PGDATA=$S16 WALG_FILE_PREFIX=$T/repo16 $WALC_PG wal-push %p 2>>$T/log/push16.log && mv $T/g16/.%f $T/g16/%f'"
PORT16=$(free_port)
pg_start "$S16" "$PORT16"
psqlc "$PORT16" "CREATE TABLE t (id int, h text)"
for i in 1 2 3; do
	psqlc "$PORT16" "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 30000) g"
	seg=$(switch_wal "$PORT16")
done
wait_archived "$S16" "$seg" 180
pg_stop "$S16"
assert_no_sanitizer_reports "$T/log/push16.log" "$S16.log"
mapfile -t G16 < <(find "$T/g16" -maxdepth 1 -type f ! -name '.*' -printf '%f\n' | grep -E '^[0-9A-F]{24}$' | sort)
[ "${#G16[@]}" -ge 3 ] || fail "16 MiB: only ${#G16[@]} segments archived"
for f in "${G16[@]}"; do
	assert_eq 16777216 "$(wc -c <"$T/g16/$f")" "16 MiB segment size of $f"
	obj=$T/repo16/wal_005/$f.lz4
	[ -f "$obj" ] || fail "16 MiB: $obj missing (default codec must be lz4)"
	lz4 -dc <"$obj" >"$T/work/plain" || fail "16 MiB: lz4 -d $obj"
	assert_same_file "$T/g16/$f" "$T/work/plain" "16 MiB: lz4-decoded $obj"
	wrun "WALG_FILE_PREFIX=$T/repo16" -- wal-fetch "$f" "$T/fetch/$f"
	expect_rc 0 "16 MiB: wal-fetch $f"
	assert_same_file "$T/g16/$f" "$T/fetch/$f" "16 MiB: wal-fetch $f"
	rm -f "$T/fetch/$f"
done
ok "16 MiB: ${#G16[@]} segments archived, fetched and lz4-decoded"
log "all done in $((SECONDS - START))s"
