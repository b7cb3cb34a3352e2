#!/usr/bin/env bash
# What wal-push stores and wal-fetch hands PostgreSQL is what its name says (issue 42 §3; no
# server needed, the segments are PostgreSQL's, from the WAL-G fixtures):
#   - wal-push of a zero-filled, a random and a 1,000-byte file (a segment's first 1,000
#     bytes) under a segment name, of a segment under another segment's name, of a 1 MiB
#     segment with WALG_PG_WAL_SIZE=16, and of a malformed .history: exit 1 naming the file,
#     nothing stored; a real segment and a .history are still pushed;
#   - wal-fetch of a 50,000-byte object stored under a segment name with `st put` (none,
#     brotli, lz4, zstd), of a segment stored under another's name, and of a segment of
#     another cluster than the repository's marker names: exit 1 naming the object, nothing at
#     DEST nor beside it; the prefetcher leaves such an object out of its directory, and a
#     later wal-fetch still refuses it.
. "$(dirname "$0")/lib.sh"
it_setup wal-refused
export WALG_PG_WAL_SIZE=1

FIX=$ROOT/test/fixtures/walg-v3.0.9/zstd/repo/wal_005
SEG=00000001000000000000002D
R=$T/repo
mkdir -p "$R" "$T/wal" "$T/bad"
zstd -dcq <"$FIX/$SEG.zst" >"$T/wal/$SEG"
printf '1\t0/2E00000\tno recovery target specified\n' >"$T/wal/00000002.history"
E=(WALG_FILE_PREFIX="$R")

# refused_push WHAT FILE [ENV...]: exit 1, one line naming FILE, nothing of its name stored
refused_push() {
	local what=$1 file=$2
	shift 2
	wrun "${E[@]}" "$@" -- wal-push "$file"
	expect_rc 1 "wal-push of $what"
	assert_eq 1 "$(nlines "$W_ERR")" "wal-push of $what: error lines ($W_ERR)"
	assert_contains "$W_ERR" "$file" "wal-push of $what names the file"
	assert_contains "$W_ERR" "nothing stored" "wal-push of $what says nothing was stored"
	[ -z "$(find "$R" -name "$(basename "$file")*")" ] || fail "wal-push of $what stored something"
	log "  $what: $W_ERR"
}
head -c 1048576 /dev/zero >"$T/bad/000000010000000000000030"
refused_push "a zero-filled file" "$T/bad/000000010000000000000030"
head -c 1048576 /dev/urandom >"$T/bad/000000010000000000000031"
refused_push "a random file" "$T/bad/000000010000000000000031"
head -c 1000 "$T/wal/$SEG" >"$T/bad/000000010000000000000032"
refused_push "a 1,000-byte file" "$T/bad/000000010000000000000032"
cp "$T/wal/$SEG" "$T/bad/000000010000000000000033"
refused_push "a segment under another segment's name" "$T/bad/000000010000000000000033"
refused_push "a 1 MiB segment with WALG_PG_WAL_SIZE=16" "$T/wal/$SEG" WALG_PG_WAL_SIZE=16
printf 'not a history file\n' >"$T/bad/00000003.history"
refused_push "a malformed .history" "$T/bad/00000003.history"

wrun "${E[@]}" -- wal-push "$T/wal/$SEG"
expect_rc 0 "wal-push of a segment PostgreSQL wrote"
wrun "${E[@]}" -- wal-push "$T/wal/00000002.history"
expect_rc 0 "wal-push of a .history"
# without WALG_PG_WAL_SIZE the header's own segment size counts
mkdir -p "$T/repo-nosize"
env -u WALG_PG_WAL_SIZE WALG_FILE_PREFIX="$T/repo-nosize" "$WALC" wal-push "$T/wal/$SEG" 2>"$T/nosize.err" ||
	fail "wal-push of a 1 MiB segment without WALG_PG_WAL_SIZE: $(cat "$T/nosize.err")"
ok "wal-push refuses zeros, noise, a short file, a misnamed segment, a wrong size and a bad .history; takes real ones"

# refused_fetch WHAT NAME NEEDLE [ENV...]: exit 1 naming the object and NEEDLE, no file at or
# beside DEST
n=0
refused_fetch() {
	local what=$1 name=$2 needle=$3
	shift 3
	n=$((n + 1))
	mkdir -p "$T/dest$n"
	wrun "${E[@]}" WALG_DOWNLOAD_CONCURRENCY=1 "$@" -- wal-fetch "$name" "$T/dest$n/RECOVERYXLOG"
	expect_rc 1 "wal-fetch of $what"
	assert_contains "$W_ERR" "wal_005/$name" "wal-fetch of $what names the object"
	assert_contains "$W_ERR" "$needle" "wal-fetch of $what says why"
	assert_eq "" "$(ls -A "$T/dest$n")" "wal-fetch of $what: files at or beside DEST"
	log "  $what: $W_ERR"
}
head -c 50000 "$T/wal/$SEG" >"$T/short"
for codec in none brotli lz4 zstd; do
	wrun "${E[@]}" WALG_COMPRESSION_METHOD="$codec" -- st put "$T/short" wal_005/000000010000000000000040
	expect_rc 0 "st put of a 50,000-byte object ($codec)"
	refused_fetch "a 50,000-byte segment ($codec)" 000000010000000000000040 "is 50000 bytes"
	rm -f "$R"/wal_005/000000010000000000000040*
done
wrun "${E[@]}" -- st put "$T/wal/$SEG" wal_005/000000010000000000000041
refused_fetch "a segment under another's name" 000000010000000000000041 "page address"
fake_segment 000000010000000000000042 1048576 "$T/other" "" 6000000000000000001
wrun "${E[@]}" -- st put "$T/other" wal_005/000000010000000000000042
refused_fetch "another cluster's segment" 000000010000000000000042 "of cluster 6000000000000000001"
ok "wal-fetch refuses a short object (every codec), a misplaced segment and another cluster's, writing nothing"

# The prefetcher: 2E is short in the repository; fetching 2D prefetches 2E, 2F, 30.
head -c 50000 "$T/wal/$SEG" >"$T/short"
wrun "${E[@]}" -- st put "$T/short" wal_005/00000001000000000000002E
for s in 00000001000000000000002F 000000010000000000000030; do
	zstd -dcq <"$FIX/$s.zst" >"$T/wal/$s"
	wrun "${E[@]}" -- wal-push "$T/wal/$s"
	expect_rc 0 "wal-push $s"
done
mkdir -p "$T/pg_wal"
wrun "${E[@]}" WALG_DOWNLOAD_CONCURRENCY=3 -- wal-fetch "$SEG" "$T/pg_wal/RECOVERYXLOG"
expect_rc 0 "wal-fetch $SEG"
PF=$T/pg_wal/.wal-g/prefetch
for _ in $(seq 1 100); do
	[ -e "$PF/00000001000000000000002F" ] && [ -e "$PF/000000010000000000000030" ] &&
		[ -z "$(ls -A "$PF/running" 2>/dev/null)" ] && break
	sleep 0.1
done
[ -e "$PF/000000010000000000000030" ] || fail "the prefetcher did not fetch the good segments"
[ ! -e "$PF/00000001000000000000002E" ] || fail "the prefetcher kept a short segment"
rm -f "$T/pg_wal/RECOVERYXLOG"
wrun "${E[@]}" WALG_DOWNLOAD_CONCURRENCY=3 -- wal-fetch 00000001000000000000002E "$T/pg_wal/RECOVERYXLOG"
expect_rc 1 "wal-fetch of the short segment after a prefetch"
assert_absent "$T/pg_wal/RECOVERYXLOG" "the short segment after a prefetch"
wrun "${E[@]}" WALG_DOWNLOAD_CONCURRENCY=1 -- wal-fetch 00000001000000000000002F "$T/pg_wal/RECOVERYXLOG"
expect_rc 0 "wal-fetch of a prefetched segment"
assert_same_file "$T/wal/00000001000000000000002F" "$T/pg_wal/RECOVERYXLOG" "a prefetched segment"
ok "the prefetcher keeps a short segment out of its directory"
