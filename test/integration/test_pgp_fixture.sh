#!/usr/bin/env bash
# WAL-G -> walc with OpenPGP: the repository WAL-G v3.0.9 wrote with lz4 + OpenPGP (RSA 3072
# key, passphrase; test/fixtures/walg-v3.0.9-pgp) restores with walc:
#   - backup-list --detail and wal-show as WAL-G listed them (the JSON is plain);
#   - every WAL file (segments and .backup files) decrypts with walc wal-fetch, byte for byte
#     what WAL-G's own wal-fetch gives when ../shared/tools/wal-g is there;
#   - every backup (full, delta, delta of delta) restores with backup-fetch and recovers through
#     walc wal-fetch to its expected dump, the key given as WALG_PGP_KEY_PATH and as WALG_PGP_KEY
#     (one line, "\n" escapes);
#   - the key and passphrase also work from a JSON configuration file and as flags, and no
#     output (walc env, DEVEL logs, errors) shows either;
#   - the repository is unchanged afterwards.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup pgp-fixture

FX=$ROOT/test/fixtures/walg-v3.0.9-pgp
[ -d "$FX/repo" ] || fail "fixture not found at $FX"
WALG=${WALC_WALG_BIN:-$ROOT/../shared/tools/wal-g}
PASS=$(cat "$FX/keys/passphrase.txt")
cp -r "$FX/repo" "$T/repo"
cp "$FX/keys/pgp-secret.asc" "$T/secret.asc"
chmod 600 "$T/secret.asc"
pg_own "$T"
BASE=(WALG_FILE_PREFIX="$T/repo" WALG_PG_WAL_SIZE=1)
BY_PATH=("${BASE[@]}" WALG_PGP_KEY_PATH="$T/secret.asc" WALG_PGP_KEY_PASSPHRASE="$PASS")
# WALG_PGP_KEY as a one-line secret: newlines written as \n
INLINE=$(awk '{ printf "%s\\n", $0 }' "$T/secret.asc")
BY_TEXT=("${BASE[@]}" WALG_PGP_KEY="$INLINE" WALG_PGP_KEY_PASSPHRASE="$PASS")

# ---- listings: sentinels and metadata are plain JSON ------------------------------------------
wrun "${BY_PATH[@]}" -- backup-list --detail
expect_rc 0 "backup-list --detail"
want=$(awk '{ $2 = ""; print }' "$FX/expected-backup-list-detail.txt")
got=$(printf '%s\n' "$W_OUT" | awk '{ $2 = ""; NF = 12; print }')
assert_eq "$want" "$got" "backup-list --detail (every column but the storage time)"
wrun "${BY_PATH[@]}" -- wal-show
expect_rc 0 "wal-show"
assert_eq "$(cat "$FX/expected-wal-show.txt")" "$W_OUT" "wal-show"
ok "backup-list --detail and wal-show as WAL-G listed them"

# ---- every WAL file decrypts, identical to WAL-G's own wal-fetch ------------------------------
have_walg=false
if [ -x "$WALG" ]; then have_walg=true; else log "skipped: comparison with WAL-G's wal-fetch, no WAL-G binary at $WALG"; fi
mkdir -p "$T/wal-walc" "$T/wal-walg"
n=0
for obj in "$T"/repo/wal_005/*.lz4; do
	name=$(basename "$obj" .lz4)
	wrun "${BY_PATH[@]}" -- wal-fetch "$name" "$T/wal-walc/$name"
	expect_rc 0 "walc wal-fetch $name"
	if [[ $name != *.backup ]]; then
		assert_eq 1048576 "$(stat -c %s "$T/wal-walc/$name")" "size of $name"
		# the page magic of PostgreSQL 15 WAL (0xD110, little endian)
		assert_eq "10d1" "$(od -An -tx1 -N2 "$T/wal-walc/$name" | tr -d ' ')" "WAL page magic of $name"
	fi
	if $have_walg; then
		env HOME="$T/home" "${BY_PATH[@]}" "$WALG" wal-fetch "$name" "$T/wal-walg/$name" \
			>"$T/log/walg-$name.log" 2>&1 || { cat "$T/log/walg-$name.log" >&2; fail "WAL-G wal-fetch $name"; }
		assert_same_file "$T/wal-walg/$name" "$T/wal-walc/$name" "walc and WAL-G wal-fetch of $name"
	fi
	n=$((n + 1))
done
[ "$n" = 9 ] || fail "expected 9 WAL objects in the fixture, found $n"
if $have_walg; then
	ok "$n WAL files decrypt with walc, byte-identical to WAL-G's wal-fetch"
else
	ok "$n WAL files decrypt with walc (WAL-G comparison skipped)"
fi

# ---- the key settings from a JSON file and as flags, never shown ------------------------------
objs=("$T"/repo/wal_005/*.lz4)
first=$(basename "${objs[0]}" .lz4)
KEYLINE=$(sed -n 5p "$T/secret.asc") # a line of the armored secret key's body
python3 -c 'import json, sys; print(json.dumps({"WALG_PGP_KEY": open(sys.argv[1]).read(), "WALG_PGP_KEY_PASSPHRASE": sys.argv[2]}))' \
	"$T/secret.asc" "$PASS" >"$T/walg.json"
chmod 600 "$T/walg.json"
wrun "${BASE[@]}" WALG_CONFIG_PATH="$T/walg.json" WALG_LOG_LEVEL=DEVEL -- wal-fetch "$first" "$T/from-file"
expect_rc 0 "wal-fetch with the key and passphrase in WALG_CONFIG_PATH"
assert_same_file "$T/wal-walc/$first" "$T/from-file" "wal-fetch $first, key from the file"
wrun "${BASE[@]}" -- --walg-pgp-key-path="$T/secret.asc" --walg-pgp-key-passphrase="$PASS" \
	wal-fetch "$first" "$T/from-flags"
expect_rc 0 "wal-fetch with the key and passphrase as flags"
assert_same_file "$T/wal-walc/$first" "$T/from-flags" "wal-fetch $first, key from flags"
for form in path text; do
	if [ $form = path ]; then envs=("${BY_PATH[@]}"); else envs=("${BY_TEXT[@]}"); fi
	wrun "${envs[@]}" WALG_LOG_LEVEL=DEVEL -- env
	expect_rc 0 "walc env (key $form)"
	out="$W_OUT$W_ERR"
	wrun "${envs[@]}" WALG_LOG_LEVEL=DEVEL WALG_PGP_KEY_PATH=/nonexistent -- wal-fetch "$first" "$T/devel-$form"
	out+="$W_OUT$W_ERR"
	wrun "${envs[@]}" WALG_LIBSODIUM_KEY=0123456789abcdef0123456789abcdef -- wal-fetch "$first" "$T/both-$form"
	expect_rc 1 "wal-fetch with libsodium and OpenPGP keys (key $form)"
	assert_contains "$W_ERR" "are both set" "two methods (key $form): the error names both"
	out+="$W_OUT$W_ERR"
	assert_not_contains "$out" "$PASS" "walc's output (key $form): the passphrase"
	assert_not_contains "$out" "$KEYLINE" "walc's output (key $form): the key text"
done
wrun "${BASE[@]}" WALG_CONFIG_PATH="$T/walg.json" WALG_LOG_LEVEL=DEVEL -- env
assert_not_contains "$W_OUT$W_ERR" "$PASS" "walc env, key from the file: the passphrase"
assert_not_contains "$W_OUT$W_ERR" "$KEYLINE" "walc env, key from the file: the key text"
ok "the key settings work from a JSON file and as flags; no output shows the key or passphrase"

# ---- every backup restores to its expected dump ------------------------------------------------
cmd_wrapper "$T/by-path.sh" "$WALC_PG" "${BY_PATH[@]}"
cmd_wrapper "$T/by-text.sh" "$WALC_PG" "${BY_TEXT[@]}"
stages=(full delta1 delta2)
i=0
while read -r name; do
	stage=${stages[$i]} dir=$T/r-${stages[$i]}
	if [ $((i % 2)) = 0 ]; then form=by-path envs=("${BY_PATH[@]}"); else form=by-text envs=("${BY_TEXT[@]}"); fi
	i=$((i + 1))
	wrun "${envs[@]}" -- backup-fetch "$dir" "$name"
	expect_rc 0 "backup-fetch $name ($form)"
	recover_conf "$dir" ""
	sed -i "s|^restore_command = .*|restore_command = '$T/$form.sh wal-fetch %f %p'|" "$dir/postgresql.conf"
	RPORT=$(free_port)
	pg_start "$dir" "$RPORT"
	wait_not_in_recovery "$RPORT"
	got=$(dump_norm "$RPORT" | sha256sum | cut -d' ' -f1)
	pg_stop "$dir"
	want=$(awk -v f="$stage.sql" '$2 == f { print $1 }' "$FX/expected/SHA256SUMS")
	[ -n "$want" ] || fail "no expected checksum for $stage"
	assert_eq "$want" "$got" "dump of $name ($stage) restored by walc, key $form"
	grep -q 'restored log file' "$dir.log" || fail "$stage: recovery did not fetch WAL through walc"
	log "ok: $stage $name (key $form)"
	rm -rf "$dir"
done <"$FX/expected/backups.txt"
[ "$i" = 3 ] || fail "expected 3 backups in expected/backups.txt"
ok "every backup of the WAL-G PGP fixture restores with walc to its expected dump"

(cd "$T/repo" && find . -type f | LC_ALL=C sort | xargs sha256sum) >"$T/repo.sums"
cmp -s "$T/repo.sums" "$FX/expected/REPO-SHA256SUMS" || fail "the repository changed during the restores"
ok "repository unchanged"
