#!/usr/bin/env bash
# wal-fetch / wal-push failure paths (no server needed):
#   - a missing WAL file: exit 74 and "Archive 'NAME' does not exist." (PostgreSQL's
#     end-of-archive answer), nothing written;
#   - an unreadable repository (prefix below a regular file; a root-only directory read by the
#     postgres user): exit 1 with the path in the message, nothing written;
#   - a wrong key, no key for an encrypted object, one flipped byte in an encrypted object, an
#     encrypted object cut short (also exactly at a chunk boundary, i.e. without its FINAL
#     chunk): exit 1 naming the object, no DEST;
#   - truncated lz4/zstd/brotli/lzma objects (half, and one byte short): exit 1, no DEST;
#   - wal-push of a missing file: exit 1, nothing stored; wal-fetch replaces an existing DEST;
#     wal-fetch into a missing directory: exit 1 naming it.
# After every failed fetch the destination directory holds no file at all (no partial or
# temporary file left behind).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup errors
export WALG_PG_WAL_SIZE=1

SEG=000000010000000000000002
mkdir -p "$T/wal" "$T/keys"
# a 1 MiB "segment": half random, half compressible text
seq 1 200000 >"$T/text"
{
	head -c 524288 /dev/urandom
	head -c 524288 "$T/text"
} >"$T/src"
fake_segment "$SEG" 1048576 "$T/wal/$SEG" "$T/src"
[ "$(wc -c <"$T/wal/$SEG")" = 1048576 ] || fail "test segment size"
head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/keys/a.hex"
head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/keys/b.hex"
chmod 600 "$T"/keys/*
KEY_A=("WALG_LIBSODIUM_KEY_PATH=$T/keys/a.hex" "WALG_LIBSODIUM_KEY_TRANSFORM=hex")
KEY_B=("WALG_LIBSODIUM_KEY_PATH=$T/keys/b.hex" "WALG_LIBSODIUM_KEY_TRANSFORM=hex")
pg_own "$T"

n=0
d=""
# newdest: sets d to DEST in a fresh, empty destination directory
newdest() {
	n=$((n + 1))
	mkdir -p "$T/dest$n"
	pg_own "$T/dest$n"
	d=$T/dest$n/RECOVERYXLOG
}
# no_files DEST WHAT: DEST does not exist and its directory holds no file
no_files() {
	assert_absent "$1" "$2"
	local left
	left=$(find "$(dirname "$1")" -type f)
	[ -z "$left" ] || fail "$2: files left next to DEST: $left"
}
# push_to REPO [ENV...]: wal-push the test segment
push_to() {
	local repo=$1
	shift
	mkdir -p "$repo"
	wrun "WALG_FILE_PREFIX=$repo" "$@" -- wal-push "$T/wal/$SEG"
	expect_rc 0 "wal-push into $repo"
}

# ---- missing WAL file -------------------------------------------------------------------------
push_to "$T/repo"
for repo in "$T/repo" "$T/empty-repo"; do
	mkdir -p "$repo"
	for name in 000000010000000000000099 00000002.history; do
		newdest
		wrun "WALG_FILE_PREFIX=$repo" -- wal-fetch "$name" "$d"
		expect_rc 74 "wal-fetch of missing $name from $repo"
		assert_contains "$W_ERR" "Archive '$name' does not exist." "missing $name: stderr"
		no_files "$d" "missing $name"
	done
done
ok "missing file: exit 74 with \"Archive '...' does not exist.\""

# ---- unreadable repository --------------------------------------------------------------------
echo "not a directory" >"$T/afile"
newdest
wrun "WALG_FILE_PREFIX=$T/afile/repo" -- wal-fetch "$SEG" "$d"
expect_rc 1 "wal-fetch with the prefix below a regular file"
assert_contains "$W_ERR" "$T/afile" "wal-fetch, prefix below a regular file: message names the path"
no_files "$d" "wal-fetch, prefix below a regular file"
wrun "WALG_FILE_PREFIX=$T/afile/repo" -- wal-push "$T/wal/$SEG"
expect_rc 1 "wal-push with the prefix below a regular file"
assert_contains "$W_ERR" "$T/afile" "wal-push, prefix below a regular file: message names the path"
ok "prefix below a regular file: exit 1 naming the path"

# A new archive's folder does not exist before its first wal-push, which makes it (as WAL-G
# does); a fetch from an absent folder is a mistyped prefix, never "does not exist" (74).
newdest
wrun "WALG_FILE_PREFIX=$T/absent/repo" -- wal-fetch "$SEG" "$d"
expect_rc 1 "wal-fetch from an absent repository"
assert_absent "$T/absent" "the absent repository after a fetch"
wrun "WALG_FILE_PREFIX=$T/absent/repo" -- wal-push "$T/wal/$SEG"
expect_rc 0 "the first wal-push into an absent repository"
wrun "WALG_FILE_PREFIX=$T/absent/repo" -- wal-fetch "$SEG" "$d"
expect_rc 0 "wal-fetch of the first segment of a new repository"
assert_same_file "$T/wal/$SEG" "$d" "the first segment of a new repository"
ok "a new repository's folder is made by its first wal-push; a fetch from an absent one exits 1"

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$T/private"
	push_to "$T/private/repo"
	chown -R root:root "$T/private"
	chmod 700 "$T/private"
	newdest
	wrun_pg "WALG_FILE_PREFIX=$T/private/repo" -- wal-fetch "$SEG" "$d"
	expect_rc 1 "wal-fetch as postgres from a root-only repository"
	assert_contains "$W_ERR" "$T/private" "wal-fetch from a root-only repository: message names the path"
	no_files "$d" "wal-fetch from a root-only repository"
	wrun_pg "WALG_FILE_PREFIX=$T/private/repo" -- wal-push "$T/wal/$SEG"
	expect_rc 1 "wal-push as postgres into a root-only repository"
	assert_contains "$W_ERR" "$T/private" "wal-push into a root-only repository: message names the path"
	ok "root-only repository read by postgres: exit 1 naming the path"
fi

# ---- encryption failures ----------------------------------------------------------------------
for codec in lz4 none; do
	repo=$T/enc-$codec
	push_to "$repo" "WALG_COMPRESSION_METHOD=$codec" "${KEY_A[@]}"
	obj=$repo/wal_005/$SEG$(ext_of "$codec")
	[ -f "$obj" ] || fail "encrypted object $obj not written"
	cp "$obj" "$T/good.obj"
	size=$(wc -c <"$obj")

	newdest
	wrun "WALG_FILE_PREFIX=$repo" "${KEY_A[@]}" -- wal-fetch "$SEG" "$d"
	expect_rc 0 "[$codec] wal-fetch with the right key"
	assert_same_file "$T/wal/$SEG" "$d" "[$codec] wal-fetch with the right key"

	newdest
	wrun "WALG_FILE_PREFIX=$repo" "${KEY_B[@]}" -- wal-fetch "$SEG" "$d"
	expect_rc 1 "[$codec] wal-fetch with a wrong key"
	assert_contains "$W_ERR" "$SEG" "[$codec] wrong key: message names the object"
	no_files "$d" "[$codec] wrong key"

	# without a key: a compressed object cannot be decompressed (with codec none walc cannot
	# tell ciphertext from WAL, as WAL-G cannot: not asserted)
	if [ "$codec" != none ]; then
		newdest
		wrun "WALG_FILE_PREFIX=$repo" -- wal-fetch "$SEG" "$d"
		expect_rc 1 "[$codec] wal-fetch of an encrypted object without a key"
		assert_contains "$W_ERR" "$SEG" "[$codec] no key: message names the object"
		no_files "$d" "[$codec] no key"
	fi

	# one flipped byte: in the header, the first chunk, the last chunk
	for off in 5 $((24 + 100)) $((size - 3)); do
		cp "$T/good.obj" "$obj"
		flip_byte "$obj" "$off"
		cmp -s "$obj" "$T/good.obj" && fail "flipping byte $off did not change $obj"
		newdest
		wrun "WALG_FILE_PREFIX=$repo" "${KEY_A[@]}" -- wal-fetch "$SEG" "$d"
		expect_rc 1 "[$codec] wal-fetch of an encrypted object with byte $off of $size flipped"
		assert_contains "$W_ERR" "$SEG" "[$codec] flipped byte $off: message names the object"
		no_files "$d" "[$codec] flipped byte $off"
	done

	# cut short: mid-chunk, and (none: 1 MiB = 128 full chunks + an empty FINAL chunk) exactly
	# at a chunk boundary, i.e. the FINAL chunk missing
	cuts=$((size / 2))
	[ "$codec" = none ] && cuts="$cuts $((size - 17)) $((24 + 8209))"
	for len in $cuts; do
		head -c "$len" "$T/good.obj" >"$obj"
		newdest
		wrun "WALG_FILE_PREFIX=$repo" "${KEY_A[@]}" -- wal-fetch "$SEG" "$d"
		expect_rc 1 "[$codec] wal-fetch of an encrypted object cut to $len of $size bytes"
		assert_contains "$W_ERR" "$SEG" "[$codec] cut to $len bytes: message names the object"
		no_files "$d" "[$codec] encrypted object cut to $len bytes"
	done
	cp "$T/good.obj" "$obj"
done
ok "encryption: wrong key, no key, flipped bytes, truncation: exit 1 naming the object, no DEST"

# ---- truncated compressed objects -------------------------------------------------------------
for codec in lz4 zstd brotli lzma; do
	repo=$T/trunc-$codec
	push_to "$repo" "WALG_COMPRESSION_METHOD=$codec"
	obj=$repo/wal_005/$SEG$(ext_of "$codec")
	[ -f "$obj" ] || fail "object $obj not written"
	cp "$obj" "$T/good.obj"
	size=$(wc -c <"$obj")
	for len in $((size / 2)) $((size - 1)); do
		head -c "$len" "$T/good.obj" >"$obj"
		if decode_cli "$codec" <"$obj" >/dev/null 2>&1; then
			log "note: the $codec CLI accepts the object cut to $len of $size bytes; case skipped"
			continue
		fi
		newdest
		wrun "WALG_FILE_PREFIX=$repo" -- wal-fetch "$SEG" "$d"
		expect_rc 1 "[$codec] wal-fetch of an object cut to $len of $size bytes"
		assert_contains "$W_ERR" "$SEG" "[$codec] cut to $len bytes: message names the object"
		no_files "$d" "[$codec] object cut to $len bytes"
	done
	cp "$T/good.obj" "$obj"
	newdest
	wrun "WALG_FILE_PREFIX=$repo" -- wal-fetch "$SEG" "$d"
	expect_rc 0 "[$codec] wal-fetch of the intact object"
	assert_same_file "$T/wal/$SEG" "$d" "[$codec] intact object"
done
ok "truncated lz4/zstd/brotli/lzma objects: exit 1, no DEST"

# ---- wal-push of a missing file ---------------------------------------------------------------
mkdir -p "$T/repo-nofile"
wrun "WALG_FILE_PREFIX=$T/repo-nofile" -- wal-push "$T/wal/000000010000000000000066"
expect_rc 1 "wal-push of a file that does not exist"
assert_contains "$W_ERR" 000000010000000000000066 "wal-push of a missing file: message names it"
assert_eq 0 "$(count_files "$T/repo-nofile")" "wal-push of a missing file: files in the repository"
ok "wal-push of a missing file: exit 1, nothing stored"

# ---- an existing DEST is replaced -------------------------------------------------------------
newdest
echo "stale content" >"$d"
# a successful fetch starts the prefetcher, which would write beside DEST: elsewhere here, so
# that the count below sees only what the fetch itself left
wrun "WALG_FILE_PREFIX=$T/repo" "WALG_PREFETCH_DIR=$T/prefetch" -- wal-fetch "$SEG" "$d"
expect_rc 0 "wal-fetch over an existing DEST"
assert_same_file "$T/wal/$SEG" "$d" "wal-fetch over an existing DEST"
assert_eq 1 "$(count_files "$(dirname "$d")")" "wal-fetch over an existing DEST: files in its directory"
ok "an existing DEST is replaced"

# ---- destination directory missing -----------------------------------------------------------
wrun "WALG_FILE_PREFIX=$T/repo" -- wal-fetch "$SEG" "$T/no/such/dir/RECOVERYXLOG"
expect_rc 1 "wal-fetch into a missing directory"
assert_contains "$W_ERR" "$T/no/such/dir" "wal-fetch into a missing directory: message names the path"
ok "destination in a missing directory: exit 1 naming it"

# ---- the wal-push deadline -----------------------------------------------------------------------
# A store that accepts the connection and never answers: at WALG_WAL_PUSH_TIMEOUT the push is
# cancelled and fails (PostgreSQL retries later), long before its retries would give up.
HPORT=$(free_port)
"$PY" -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
' "$HPORT" &
BG_PIDS+=("$!")
sleep 0.5
start=$SECONDS
wrun WALG_S3_PREFIX=s3://bucket/p AWS_ENDPOINT="http://127.0.0.1:$HPORT" AWS_ACCESS_KEY_ID=k \
	AWS_SECRET_ACCESS_KEY=s AWS_S3_FORCE_PATH_STYLE=true WALG_WAL_PUSH_TIMEOUT=2s \
	S3_LOW_SPEED_TIMEOUT=600 -- wal-push "$T/wal/$SEG"
took=$((SECONDS - start))
expect_rc 1 "wal-push to a store that never answers"
assert_contains "$W_ERR" "WALG_WAL_PUSH_TIMEOUT" "the deadline is named"
[ "$took" -le 8 ] || fail "wal-push stopped $took s after start (deadline 2 s)"
ok "wal-push stops at WALG_WAL_PUSH_TIMEOUT ($took s)"
