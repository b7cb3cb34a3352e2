#!/usr/bin/env bash
# A repository of encrypted objects and a writer or reader without a key (issue 42 §4). A
# cluster archives with a libsodium key: the first encrypted write records the method (never
# the key) in walc_cluster.json. Without a key, wal-push (a segment, and a .history file) and
# backup-push are refused with one line naming the method and its variables, and write
# nothing; wal-fetch says the object is "encrypted (libsodium), no key configured" and creates
# no file. wal-fetch of WAL-G's OpenPGP fixture without a key says "encrypted (OpenPGP)".
# With the key everything works as before.
. "$(dirname "$0")/lib.sh"
it_setup encrypted-no-key

head -c 32 /dev/urandom | base64 >"$T/key"
chmod 644 "$T/key"
SRC=$T/src
walc_archiving "$SRC" WALG_COMPRESSION_METHOD=zstd WALG_LIBSODIUM_KEY_PATH="$T/key" \
	WALG_LIBSODIUM_KEY_TRANSFORM=base64
NOKEY=(WALG_FILE_PREFIX="$R" WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=zstd)
psqlc "$PORT" "CREATE TABLE t AS SELECT generate_series(1, 1000) i"
SEG=$(switch_wal "$PORT")
wait_archived "$SRC" "$SEG" 30
mkdir "$T/copy"
cp "$SRC/pg_wal/$SEG" "$T/copy/"
printf '1\t0/3000000\tno recovery target specified\n' >"$T/copy/00000002.history"
pg_own "$T/copy"

grep -q '"encryption":"libsodium"' "$R/walc_cluster.json" ||
	fail "the marker does not record the encryption: $(cat "$R/walc_cluster.json")"
key_text=$(cat "$T/key")
if grep -qF "$key_text" "$R/walc_cluster.json"; then fail "the marker holds the key"; fi
ok "the first encrypted write recorded libsodium in the marker, no key material"

listing() { (cd "$R" && find . -type f | sort); }
before=$(listing)
# refused WHAT ARGS...: exit 1, one line naming the method and the variables
refused() {
	local what=$1
	shift
	wrun_pg "${NOKEY[@]}" PGHOST="$T" PGPORT="$PORT" -- "$@"
	expect_rc 1 "$what without a key"
	assert_eq 1 "$(nlines "$W_ERR")" "$what: one line ($W_ERR)"
	assert_contains "$W_ERR" "holds objects encrypted with libsodium (walc_cluster.json), and no key is configured: set WALG_LIBSODIUM_KEY or WALG_LIBSODIUM_KEY_PATH" "$what"
}
refused "wal-push of a segment" wal-push "$T/copy/$SEG"
refused "wal-push of a history file" wal-push "$T/copy/00000002.history"
refused "backup-push" backup-push "$SRC"
assert_eq "$before" "$(listing)" "the repository after the refused writes"
ok "wal-push and backup-push without a key: refused in one line, nothing written"

wrun_pg "${NOKEY[@]}" -- wal-fetch "$SEG" "$T/fetched"
expect_rc 1 "wal-fetch without a key"
assert_contains "$W_ERR" "object wal_005/$SEG.zst in $R is encrypted (libsodium), no key configured: set WALG_LIBSODIUM_KEY or WALG_LIBSODIUM_KEY_PATH" "wal-fetch without a key"
assert_absent "$T/fetched" "wal-fetch without a key"
wrun_pg "${E[@]}" -- wal-fetch "$SEG" "$T/fetched"
expect_rc 0 "wal-fetch with the key"
assert_same_file "$T/copy/$SEG" "$T/fetched" "the fetched segment"
ok "wal-fetch without a key: encrypted (libsodium), no key configured; with it, the segment"

PGP=$ROOT/test/fixtures/walg-v3.0.9-pgp/repo
wrun WALG_FILE_PREFIX="$PGP" -- wal-fetch 00000001000000000000001D "$T/pgp-fetched"
expect_rc 1 "wal-fetch from WAL-G's OpenPGP repository without a key"
assert_contains "$W_ERR" "is encrypted (OpenPGP), no key configured: set WALG_PGP_KEY or WALG_PGP_KEY_PATH" "WAL-G's OpenPGP object"
assert_absent "$T/pgp-fetched" "wal-fetch of WAL-G's OpenPGP object"
ok "WAL-G's OpenPGP objects without a key: encrypted (OpenPGP), no key configured"

wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push with the key"
ok "with the key, backup-push works"
