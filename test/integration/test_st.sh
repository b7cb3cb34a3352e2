#!/usr/bin/env bash
# Storage tools (issue 7; reference §4.15), no PostgreSQL needed. For every codec (lz4, zstd,
# brotli, lzma, none), without and with a libsodium key (hex transform):
#   - st put FILE some/key stores some/key<ext> (none: no extension), and the stored bytes
#     decode with the standard tools (sodium.py, lz4/zstd/brotli/xz) to the original;
#   - st get KEY OUT and st cat KEY return the original bytes (empty, small, multi-chunk files);
#   - st get --no-decompress --no-decrypt returns exactly the stored bytes (the file under
#     WALG_FILE_PREFIX), --no-decompress alone the compressed plaintext;
#   - st put onto an existing key fails without -f (object unchanged) and replaces it with -f;
#   - st put --no-compress / --no-encrypt; st get decompresses by the key's extension, not by
#     the configured codec.
# Then: st ls (objects and folders of a folder), st ls PREFIX, st ls -r (everything, recursively),
# st rm KEY, st rm PREFIX/ (everything below, nothing beside it), errors for missing keys.
. "$(dirname "$0")/lib.sh"
it_setup st

mkdir -p "$T/in" "$T/out"
# wcat OUTFILE ENV... -- st cat ARGS: as wrun, with stdout (binary) into OUTFILE
wcat() {
	local out=$1 envs=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	set +e
	env "${envs[@]}" "$WALC" "$@" >"$out" 2>"$T/.w_err" </dev/null
	W_RC=$?
	set -e
	W_ERR=$(cat "$T/.w_err")
	if grep -Eq "$SANITIZER_RE" <<<"$W_ERR"; then
		printf '%s\n' "$W_ERR" >&2
		fail "sanitizer report from: walc $*"
	fi
}
# Inputs: compressible text of several secretstream chunks, random bytes, an empty file, a
# file of exactly 8192 bytes (one full chunk: the FINAL chunk is then empty).
seq 1 60000 | sed 's/$/ walc st round trip/' >"$T/in/text"
head -c 300000 /dev/urandom >"$T/in/random"
: >"$T/in/empty"
head -c 8192 /dev/urandom >"$T/in/chunk"
printf 'second version\n' >"$T/in/v2"
printf '%s' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$T/key.hex"

check_codec() { # CODEC ENCRYPTED(0|1)
	local codec=$1 enc=$2 ext repo envs f key stored
	ext=$(ext_of "$codec")
	repo=$T/repo-$codec-$enc
	envs=(WALG_FILE_PREFIX="$repo" WALG_COMPRESSION_METHOD="$codec")
	[ "$enc" = 1 ] && envs+=(WALG_LIBSODIUM_KEY_PATH="$T/key.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex)
	for f in text random empty chunk; do
		key=some/$f
		wrun "${envs[@]}" -- st put "$T/in/$f" "$key"
		expect_rc 0 "[$codec enc=$enc] st put $f"
		stored=$repo/$key$ext
		[ -f "$stored" ] || fail "[$codec enc=$enc] st put $f: $key$ext not stored ($(cd "$repo" && find . -type f | tr '\n' ' '))"
		# the stored object is exactly what the standard decoders expect
		if [ "$enc" = 1 ]; then
			sodium_decrypt "$T/key.hex" hex <"$stored" | decode_cli "$codec" >"$T/out/indep" ||
				fail "[$codec enc=$enc] $key$ext does not decrypt/decode independently"
			if cmp -s "$T/in/$f" "$stored"; then fail "[$codec enc=$enc] $key$ext stored in clear"; fi
		else
			decode_cli "$codec" <"$stored" >"$T/out/indep" || fail "[$codec] $key$ext does not decode independently"
		fi
		assert_same_file "$T/in/$f" "$T/out/indep" "[$codec enc=$enc] independent decoding of $key$ext"

		rm -f "$T/out/get"
		wrun "${envs[@]}" -- st get "$key$ext" "$T/out/get"
		expect_rc 0 "[$codec enc=$enc] st get $key$ext"
		assert_same_file "$T/in/$f" "$T/out/get" "[$codec enc=$enc] st get $key$ext"

		wcat "$T/out/cat" "${envs[@]}" -- st cat "$key$ext"
		expect_rc 0 "[$codec enc=$enc] st cat $key$ext"
		assert_same_file "$T/in/$f" "$T/out/cat" "[$codec enc=$enc] st cat $key$ext"

		rm -f "$T/out/raw"
		wrun "${envs[@]}" -- st get --no-decompress --no-decrypt "$key$ext" "$T/out/raw"
		expect_rc 0 "[$codec enc=$enc] st get --no-decompress --no-decrypt"
		assert_same_file "$stored" "$T/out/raw" "[$codec enc=$enc] raw st get of $key$ext"

		if [ "$enc" = 1 ]; then
			rm -f "$T/out/nodec"
			wrun "${envs[@]}" -- st get --no-decompress "$key$ext" "$T/out/nodec"
			expect_rc 0 "[$codec enc=$enc] st get --no-decompress"
			decode_cli "$codec" <"$T/out/nodec" >"$T/out/indep" || fail "[$codec] --no-decompress output does not decode"
			assert_same_file "$T/in/$f" "$T/out/indep" "[$codec enc=$enc] st get --no-decompress of $key$ext"
		fi
	done

	# no overwrite without -f; -f replaces
	local before
	before=$(obj_id "$repo/some/text$ext")
	wrun "${envs[@]}" -- st put "$T/in/v2" some/text
	[ "$W_RC" != 0 ] || fail "[$codec enc=$enc] st put onto an existing key must fail without -f"
	assert_contains "$W_ERR" "-f" "[$codec enc=$enc] refusal names -f"
	assert_eq "$before" "$(obj_id "$repo/some/text$ext")" "[$codec enc=$enc] refused put left the object untouched"
	wrun "${envs[@]}" -- st get "some/text$ext" "$T/out/after-refusal"
	assert_same_file "$T/in/text" "$T/out/after-refusal" "[$codec enc=$enc] object after a refused put"
	wrun "${envs[@]}" -- st put "$T/in/v2" some/text -f
	expect_rc 0 "[$codec enc=$enc] st put -f"
	rm -f "$T/out/v2"
	wrun "${envs[@]}" -- st get "some/text$ext" "$T/out/v2"
	expect_rc 0 "[$codec enc=$enc] st get after put -f"
	assert_same_file "$T/in/v2" "$T/out/v2" "[$codec enc=$enc] st get after put -f"
	# -f before the positional arguments works too
	wrun "${envs[@]}" -- st put -f "$T/in/text" some/text
	expect_rc 0 "[$codec enc=$enc] st put -f FILE KEY"
	wcat "$T/out/cat" "${envs[@]}" -- st cat "some/text$ext"
	expect_rc 0 "[$codec enc=$enc] st cat after put -f FILE KEY"
	assert_same_file "$T/in/text" "$T/out/cat" "[$codec enc=$enc] st cat after put -f FILE KEY"

	# the exact listing of what was stored
	wrun "${envs[@]}" -- st ls -r
	expect_rc 0 "[$codec enc=$enc] st ls -r"
	assert_eq "$(printf '%s\n' some/chunk some/empty some/random some/text | sed "s/\$/$ext/")" \
		"$(printf '%s\n' "$W_OUT" | awk '$1 == "obj" { print $NF }' | sort)" "[$codec enc=$enc] st ls -r keys"
	ok "st round trips, codec $codec, encrypted=$enc"
}

for enc in 0 1; do
	for codec in lz4 zstd brotli lzma none; do
		check_codec "$codec" "$enc"
	done
done

# --no-compress / --no-encrypt; decompression follows the key's extension
R=$T/repo-misc
E=(WALG_FILE_PREFIX="$R" WALG_COMPRESSION_METHOD=zstd WALG_LIBSODIUM_KEY_PATH="$T/key.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex)
wrun "${E[@]}" -- st put "$T/in/text" plain/x --no-compress --no-encrypt
expect_rc 0 "st put --no-compress --no-encrypt"
assert_same_file "$T/in/text" "$R/plain/x" "st put --no-compress --no-encrypt stores the file as is"
wrun "${E[@]}" -- st put "$T/in/text" enc-only/x --no-compress
expect_rc 0 "st put --no-compress"
[ -f "$R/enc-only/x" ] || fail "st put --no-compress must not add an extension"
sodium_decrypt "$T/key.hex" hex <"$R/enc-only/x" >"$T/out/enc-only" || fail "--no-compress object does not decrypt"
assert_same_file "$T/in/text" "$T/out/enc-only" "st put --no-compress (encrypted, not compressed)"
wrun "${E[@]}" -- st put "$T/in/text" comp-only/x --no-encrypt
expect_rc 0 "st put --no-encrypt"
zstd -d -c -q <"$R/comp-only/x.zst" >"$T/out/comp-only" || fail "--no-encrypt object is not plain zstd"
assert_same_file "$T/in/text" "$T/out/comp-only" "st put --no-encrypt (compressed, not encrypted)"
wrun WALG_FILE_PREFIX="$R" WALG_COMPRESSION_METHOD=zstd -- st get comp-only/x.zst "$T/out/g"
expect_rc 0 "st get without a key of an unencrypted object"
assert_same_file "$T/in/text" "$T/out/g" "st get of a compressed-only object"
# an lz4 object read with zstd configured: the extension decides
wrun WALG_FILE_PREFIX="$R" WALG_COMPRESSION_METHOD=lz4 -- st put "$T/in/random" other/y
expect_rc 0 "st put with lz4"
wrun WALG_FILE_PREFIX="$R" WALG_COMPRESSION_METHOD=brotli -- st get other/y.lz4 "$T/out/y"
expect_rc 0 "st get of a .lz4 object with brotli configured"
assert_same_file "$T/in/random" "$T/out/y" "decompression by extension"
# missing objects
wrun "${E[@]}" -- st get no/such.zst "$T/out/missing"
[ "$W_RC" != 0 ] || fail "st get of a missing key must fail"
assert_absent "$T/out/missing" "st get of a missing key"
wcat "$T/out/cat" "${E[@]}" -- st cat no/such.zst
[ "$W_RC" != 0 ] || fail "st cat of a missing key must fail"
# get refuses to decrypt with the wrong key
printf '%s' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$T/other.hex"
wrun WALG_FILE_PREFIX="$R" WALG_COMPRESSION_METHOD=zstd WALG_LIBSODIUM_KEY_PATH="$T/other.hex" \
	WALG_LIBSODIUM_KEY_TRANSFORM=hex -- st get enc-only/x "$T/out/wrongkey"
[ "$W_RC" != 0 ] || fail "st get with the wrong key must fail"
ok "st put/get flags"

# ls and rm on a small tree (no codec: keys are exactly the names given)
L=$T/repo-tree
N=(WALG_FILE_PREFIX="$L" WALG_COMPRESSION_METHOD=none)
for k in top dir/a dir/b dir/sub/c dir2/d dirfile; do
	wrun "${N[@]}" -- st put "$T/in/v2" "$k"
	expect_rc 0 "st put $k"
done
# WAL-G's listing: a header, then "obj SIZE DATE TIME +0000 UTC NAME" and "dir 0 ... NAME/" rows,
# NAME relative to the folder listed
keys() { printf '%s\n' "$W_OUT" | awk '$1 == "obj" { print $NF }' | sort | tr '\n' ' '; }
dirs() { printf '%s\n' "$W_OUT" | awk '$1 == "dir" { print $NF }' | sort | tr '\n' ' '; }
wrun "${N[@]}" -- st ls -r
expect_rc 0 "st ls -r"
assert_eq "type size last modified name" "$(printf '%s\n' "$W_OUT" | head -n 1 | tr -s ' ')" "st ls header"
assert_eq "dir/a dir/b dir/sub/c dir2/d dirfile top " "$(keys)" "st ls -r lists every object"
# each object row: type, size, Go's time (date, clock, zone offset and name), key
while read -r type size day clock off zone key; do
	[ "$type" = obj ] || continue
	[[ "$day $clock $off $zone" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}\ [0-9:]{8}(\.[0-9]+)?\ \+0000\ UTC$ ]] ||
		fail "st ls -r: no time in '$day $clock $off $zone'"
	assert_eq "$(stat -c %s "$L/$key")" "$size" "st ls -r size of $key"
done <<<"$W_OUT"
wrun "${N[@]}" -- st ls dir/
expect_rc 0 "st ls dir/"
assert_eq "a b " "$(keys)" "st ls dir/ lists the folder's objects"
assert_eq "sub/ " "$(dirs)" "st ls dir/ lists its sub-folder once"
wrun "${N[@]}" -- st ls dir
assert_eq "a b " "$(keys)" "st ls dir (a folder without the slash)"
wrun "${N[@]}" -- st ls dir/ -r
expect_rc 0 "st ls -r dir/"
assert_eq "a b sub/c " "$(keys)" "st ls -r dir/"
wrun "${N[@]}" -- st ls no/such/
expect_rc 0 "st ls of an empty folder"
assert_eq "" "$(printf '%s\n' "$W_OUT" | sed 1d)" "st ls of an empty folder: the header only"
wrun "${N[@]}" -- st ls
expect_rc 0 "st ls"
assert_eq "dirfile top " "$(keys)" "st ls lists the objects at the root"
assert_eq "dir/ dir2/ " "$(dirs)" "st ls lists the folders at the root"

wrun "${N[@]}" -- st rm dir/a
expect_rc 0 "st rm dir/a"
assert_absent "$L/dir/a" "st rm KEY"
[ -f "$L/dir/b" ] || fail "st rm dir/a removed dir/b"
wrun "${N[@]}" -- st rm dir/
expect_rc 0 "st rm dir/"
wrun "${N[@]}" -- st ls -r
assert_eq "dir2/d dirfile top " "$(keys)" "st rm dir/ removes everything below dir/ and nothing else"
wrun "${N[@]}" -- st rm dir2
expect_rc 0 "st rm dir2 (a folder without the slash)"
wrun "${N[@]}" -- st ls -r
assert_eq "dirfile top " "$(keys)" "st rm dir2"
wrun "${N[@]}" -- st rm top
expect_rc 0 "st rm top"
wrun "${N[@]}" -- st ls -r
assert_eq "dirfile " "$(keys)" "st rm top"
ok "st ls and st rm"

# WAL-G: "wal-g st ls: get listing with all objects and folders in the configured storage"; in
# a real repository everything is in basebackups_005/ and wal_005/, so a root listing without
# its folders is empty.
wrun "${N[@]}" -- st put "$T/in/v2" dir/a
wrun "${N[@]}" -- st ls
expect_rc 0 "st ls"
assert_contains "$W_OUT" "dirfile" "st ls lists the objects at the root"
assert_contains "$W_OUT" "dir/" "st ls lists the folders at the root (as WAL-G does)"
ok "st ls shows folders"
