#!/usr/bin/env bash
# wal-push overwrite rules (no server needed):
#   - re-pushing identical content succeeds; with WALG_PREVENT_WAL_OVERWRITE=true the stored
#     object is not touched (same bytes, inode and mtime; checked with an encrypted object too,
#     whose bytes would differ on any rewrite);
#   - WALG_PREVENT_WAL_OVERWRITE=true and different content: exit 1, stored object unchanged,
#     wal-fetch still returns the first content;
#   - without protection (unset or false) a normal segment is overwritten;
#   - NAME.history is always protected, even with WALG_PREVENT_WAL_OVERWRITE=false or unset;
#     identical re-push of a .history file succeeds;
#   - protection also holds when the existing object was written with another codec (the
#     name, not the suffix, is what is archived);
#   - 8 concurrent pushes of the same file (WALG_PREVENT_WAL_OVERWRITE=true) all succeed and
#     leave exactly one intact object, no temporary file.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup overwrite
export WALG_PG_WAL_SIZE=1

SEG=000000010000000000000004
HIST=00000002.history
mkdir -p "$T/v1" "$T/v2" "$T/v1b" "$T/out"
seq 1 300000 >"$T/text"
fake_segment "$SEG" 1048576 "$T/v1/$SEG" "$T/text"
cp "$T/v1/$SEG" "$T/v1b/$SEG" # same content, another file
# the same long page header (walc refuses a file named as a segment that is none), other bytes
{ head -c 40 "$T/v1/$SEG"; head -c 1000 /dev/urandom; tail -c +1041 "$T/v1/$SEG"; } >"$T/v2/$SEG"
printf '1\t0/3000000\tno recovery target specified\n' >"$T/v1/$HIST"
# wal-fetch gives a .history only once a segment of its timeline is archived
TL2=000000020000000000000003
mkdir -p "$T/tl2"
fake_segment "$TL2" 1048576 "$T/tl2/$TL2" "$T/text"
cp "$T/v1/$HIST" "$T/v1b/$HIST"
printf '1\t0/5000000\tno recovery target specified\n' >"$T/v2/$HIST"
head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/key.hex"
chmod 600 "$T/key.hex"
pg_own "$T"

# push REPO FILE [ENV...]; fetch_is REPO NAME EXPECTED_FILE WHAT
push() {
	local repo=$1 file=$2
	shift 2
	mkdir -p "$repo"
	wrun "WALG_FILE_PREFIX=$repo" "$@" -- wal-push "$file"
}
fetch_is() {
	local repo=$1 name=$2 want=$3
	shift 3
	rm -f "$T/out/$name"
	wrun "WALG_FILE_PREFIX=$repo" "$@" -- wal-fetch "$name" "$T/out/$name"
	expect_rc 0 "wal-fetch $name from $repo"
	assert_same_file "$want" "$T/out/$name" "wal-fetch $name from $repo"
}

# ---- WALG_PREVENT_WAL_OVERWRITE=true ------------------------------------------------------------
for mode in plain encrypted; do
	repo=$T/prevent-$mode
	envs=(WALG_PREVENT_WAL_OVERWRITE=true WALG_COMPRESSION_METHOD=zstd)
	[ $mode = encrypted ] && envs+=("WALG_LIBSODIUM_KEY_PATH=$T/key.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex)
	obj=$repo/wal_005/$SEG.zst
	push "$repo" "$T/v1/$SEG" "${envs[@]}"
	expect_rc 0 "[$mode] first push of $SEG"
	[ -f "$obj" ] || fail "[$mode] $obj not written"
	before=$(obj_id "$obj")
	sleep 0.05
	push "$repo" "$T/v1b/$SEG" "${envs[@]}"
	expect_rc 0 "[$mode] WALG_PREVENT_WAL_OVERWRITE=true, identical content pushed again"
	assert_eq "$before" "$(obj_id "$obj")" "[$mode] identical re-push: stored object (sha256 inode mtime)"
	push "$repo" "$T/v2/$SEG" "${envs[@]}"
	expect_rc 1 "[$mode] WALG_PREVENT_WAL_OVERWRITE=true, different content"
	log "  [$mode] refused: $W_ERR"
	assert_eq "$before" "$(obj_id "$obj")" "[$mode] refused overwrite: stored object (sha256 inode mtime)"
	assert_eq 1 "$(count_files "$repo/wal_005")" "[$mode] WAL objects after the refused overwrite"
	fetch_is "$repo" "$SEG" "$T/v1/$SEG" "${envs[@]}"
done
ok "WALG_PREVENT_WAL_OVERWRITE=true: identical re-push is a no-op, different content refused"

# ---- no protection: a normal segment is overwritten ---------------------------------------------
for setting in unset false; do
	repo=$T/free-$setting
	envs=()
	[ $setting = false ] && envs=(WALG_PREVENT_WAL_OVERWRITE=false)
	push "$repo" "$T/v1/$SEG" "${envs[@]}"
	expect_rc 0 "[$setting] first push"
	push "$repo" "$T/v1b/$SEG" "${envs[@]}"
	expect_rc 0 "[$setting] identical re-push"
	fetch_is "$repo" "$SEG" "$T/v1/$SEG"
	push "$repo" "$T/v2/$SEG" "${envs[@]}"
	expect_rc 0 "[$setting] WALG_PREVENT_WAL_OVERWRITE $setting: push of different content"
	fetch_is "$repo" "$SEG" "$T/v2/$SEG"
	lz4 -dc <"$repo/wal_005/$SEG.lz4" >"$T/plain" || fail "[$setting] lz4 -d of the overwritten object"
	assert_same_file "$T/v2/$SEG" "$T/plain" "[$setting] overwritten object's content"
done
ok "without protection a segment is overwritten"

# ---- .history files are always protected ---------------------------------------------------------
for setting in false unset true; do
	repo=$T/hist-$setting
	envs=()
	[ $setting != unset ] && envs=("WALG_PREVENT_WAL_OVERWRITE=$setting")
	push "$repo" "$T/v1/$HIST" "${envs[@]}"
	expect_rc 0 "[$setting] first push of $HIST"
	push "$repo" "$T/tl2/$TL2"
	expect_rc 0 "[$setting] push of timeline 2's first segment"
	obj=$(find "$repo/wal_005" -type f -name "$HIST*")
	[ -n "$obj" ] || fail "[$setting] no object for $HIST"
	before=$(obj_id "$obj")
	push "$repo" "$T/v1b/$HIST" "${envs[@]}"
	expect_rc 0 "[$setting] identical re-push of $HIST"
	fetch_is "$repo" "$HIST" "$T/v1/$HIST"
	push "$repo" "$T/v2/$HIST" "${envs[@]}"
	expect_rc 1 "[$setting] WALG_PREVENT_WAL_OVERWRITE $setting: different $HIST"
	log "  [$setting] refused: $W_ERR"
	assert_eq "$before" "$(obj_id "$obj")" "[$setting] refused $HIST overwrite: stored object"
	fetch_is "$repo" "$HIST" "$T/v1/$HIST"
done
ok ".history is always protected (false, unset, true)"

# ---- protection across codecs --------------------------------------------------------------------
repo=$T/cross
push "$repo" "$T/v1/$HIST" WALG_COMPRESSION_METHOD=lz4
expect_rc 0 "cross-codec: first push of $HIST (lz4)"
push "$repo" "$T/tl2/$TL2"
expect_rc 0 "cross-codec: push of timeline 2's first segment"
push "$repo" "$T/v2/$HIST" WALG_COMPRESSION_METHOD=zstd WALG_PREVENT_WAL_OVERWRITE=false
expect_rc 1 "cross-codec: different $HIST pushed with zstd over an lz4 object"
fetch_is "$repo" "$HIST" "$T/v1/$HIST"
push "$repo" "$T/v1/$SEG" WALG_COMPRESSION_METHOD=brotli
expect_rc 0 "cross-codec: first push of $SEG (brotli)"
push "$repo" "$T/v2/$SEG" WALG_COMPRESSION_METHOD=lzma WALG_PREVENT_WAL_OVERWRITE=true
expect_rc 1 "cross-codec: WALG_PREVENT_WAL_OVERWRITE=true, different $SEG with lzma over a brotli object"
fetch_is "$repo" "$SEG" "$T/v1/$SEG"
push "$repo" "$T/v1b/$SEG" WALG_COMPRESSION_METHOD=lzma WALG_PREVENT_WAL_OVERWRITE=true
expect_rc 0 "cross-codec: WALG_PREVENT_WAL_OVERWRITE=true, identical $SEG with lzma over a brotli object"
fetch_is "$repo" "$SEG" "$T/v1/$SEG"
ok "protection holds across codecs"

# ---- concurrent pushes of the same file -----------------------------------------------------------
repo=$T/concurrent
mkdir -p "$repo"
pids=()
for i in 1 2 3 4 5 6 7 8; do
	env "WALG_FILE_PREFIX=$repo" WALG_PREVENT_WAL_OVERWRITE=true WALG_COMPRESSION_METHOD=zstd \
		"$WALC" wal-push "$T/v1/$SEG" >"$T/conc.$i.log" 2>&1 &
	pids+=($!)
done
for i in "${!pids[@]}"; do
	wait "${pids[$i]}" || fail "concurrent push $((i + 1)) failed: $(cat "$T/conc.$((i + 1)).log")"
done
assert_no_sanitizer_reports "$T"/conc.*.log
assert_eq "$SEG.zst" "$(find "$repo/wal_005" -type f -printf '%f\n')" "concurrent pushes: WAL objects"
zstd -dcq <"$repo/wal_005/$SEG.zst" >"$T/plain" || fail "concurrent pushes: zstd -d of the object"
assert_same_file "$T/v1/$SEG" "$T/plain" "concurrent pushes: stored object"
fetch_is "$repo" "$SEG" "$T/v1/$SEG"
ok "8 concurrent identical pushes: all succeed, one intact object"
