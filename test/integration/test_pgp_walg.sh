#!/usr/bin/env bash
# walc -> WAL-G with OpenPGP, and the failures that must write nothing:
#   - a PostgreSQL 15 cluster archives with walc wal-push (the public key, WALG_PGP_KEY_PATH);
#     walc backup-push makes a full backup (the same) and a delta (the passphrase-protected
#     secret key inline in WALG_PGP_KEY, no passphrase: its public part encrypts);
#   - every stored WAL and tar object is a binary OpenPGP message (PKESK, SEIPD) under its
#     compression name only; with gpg(1) present, its packets are what WAL-G writes (v3 PKESK,
#     MDC, literal data, no compression packet, no signature);
#   - walc restores the full (to its end) and the delta (through all archived WAL) with the
#     secret key and passphrase, in both key forms; WAL-G v3.0.9 (../shared/tools/wal-g, when
#     present; "skipped:" otherwise) restores both to the same dumps;
#   - a wrong key, a wrong passphrase, a public key only: backup-fetch and wal-fetch exit 1
#     naming the object, create no destination, and leave the repository as it was;
#   - libsodium and OpenPGP keys both set: exit 1 naming both, nothing stored.
# integration: long
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup pgp-walg

FX=$ROOT/test/fixtures/walg-v3.0.9-pgp
KEYS=$ROOT/test/unit/pgp
WALG=${WALC_WALG_BIN:-$ROOT/../shared/tools/wal-g}
PASS=$(cat "$FX/keys/passphrase.txt")
cp "$FX/keys/pgp-public.asc" "$T/public.asc"
cp "$FX/keys/pgp-secret.asc" "$T/secret.asc"
cp "$KEYS/other.sec.asc" "$T/other.asc"
chmod 600 "$T"/*.asc
REPO=$T/repo
mkdir -p "$REPO"
pg_own "$T"
inline() { awk '{ printf "%s\\n", $0 }' "$1"; } # a key file as a one-line WALG_PGP_KEY
PUSH_PATH=(WALG_FILE_PREFIX="$REPO" WALG_PGP_KEY_PATH="$T/public.asc")
PUSH_TEXT=(WALG_FILE_PREFIX="$REPO" WALG_PGP_KEY="$(inline "$T/secret.asc")")
FETCH_PATH=(WALG_FILE_PREFIX="$REPO" WALG_PGP_KEY_PATH="$T/secret.asc" WALG_PGP_KEY_PASSPHRASE="$PASS")
FETCH_TEXT=(WALG_FILE_PREFIX="$REPO" WALG_PGP_KEY="$(inline "$T/secret.asc")" WALG_PGP_KEY_PASSPHRASE="$PASS")
cmd_wrapper "$T/push.sh" "$WALC_PG" "${PUSH_PATH[@]}"
cmd_wrapper "$T/fetch-path.sh" "$WALC_PG" "${FETCH_PATH[@]}"
cmd_wrapper "$T/fetch-text.sh" "$WALC_PG" "${FETCH_TEXT[@]}"
cmd_wrapper "$T/walg-fetch.sh" "$WALG" "${FETCH_PATH[@]}"

# ---- a walc PGP repository: full, delta, WAL ------------------------------------------------
SRC=$T/src
archiving_source "$SRC" 1 "$T/push.sh wal-push %p 2>>$T/log/push.log || { touch $T/archive-failed; exit 1; }" \
	"fsync = off" "checkpoint_timeout = 1h"
PORT=$SPORT
psqlc "$PORT" "CREATE TABLE notes (id int PRIMARY KEY, body text);
	INSERT INTO notes SELECT g, repeat('full ', g % 30) FROM generate_series(1, 3000) g"
wrun_pg "${PUSH_PATH[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push (full, public key in WALG_PGP_KEY_PATH)"
wrun "${PUSH_PATH[@]}" -- backup-list
FULL=$(printf '%s\n' "$W_OUT" | awk 'NR == 2 { print $1 }')
[[ $FULL =~ ^base_[0-9A-F]{24}$ ]] || fail "no full backup listed: $W_OUT"
dump_norm "$PORT" >"$T/full.dump"

as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -n -t 300 -c 2 postgres >"$T/log/pgbench-1.log" 2>&1 ||
	fail "pgbench after the full backup"
psqlc "$PORT" "UPDATE notes SET body = 'after the full' WHERE id % 7 = 0;
	CREATE TABLE after_full AS SELECT g AS id, md5(g::text) AS h FROM generate_series(1, 2000) g"
wrun_pg "${PUSH_TEXT[@]}" WALG_DELTA_MAX_STEPS=1 PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push (delta, protected secret key inline, no passphrase)"
wrun "${PUSH_PATH[@]}" -- backup-list
DELTA=$(printf '%s\n' "$W_OUT" | awk 'NR == 3 { print $1 }')
[[ $DELTA == *_D_${FULL#base_} ]] || fail "the second backup is not a delta of the full: $W_OUT"

psqlc "$PORT" "DELETE FROM notes WHERE id > 2900; INSERT INTO after_full VALUES (0, 'after the delta')"
LAST=$(switch_wal "$PORT")
wait_archived "$SRC" "$LAST" 180 "$T/archive-failed"
dump_norm "$PORT" >"$T/final.dump"
pg_stop "$SRC"
[ ! -e "$T/archive-failed" ] || { cat "$T/log/push.log" >&2; fail "archive_command failed"; }
ok "walc PGP repository: full $FULL, delta $DELTA, WAL up to $LAST"

# ---- what is stored ----------------------------------------------------------------------------
objs=$(find "$REPO/wal_005" "$REPO/basebackups_005" -type f ! -name '*.json' | LC_ALL=C sort)
[ "$(nlines "$objs")" -gt 5 ] || fail "too few objects: $objs"
while read -r o; do
	[[ $o == *.lz4 ]] || fail "$o: not named by its compression only"
	# first packet: a PKESK (tag 1), new or old format
	b=$(od -An -tu1 -N1 "$o" | tr -d ' ')
	tag=$(((b & 64) ? (b & 63) : ((b >> 2) & 15)))
	if [ $((b & 128)) != 128 ] || [ "$tag" != 1 ]; then
		fail "$o does not start with a PKESK packet (first byte $b)"
	fi
done <<<"$objs"
find "$REPO/basebackups_005" -name '*.json' -print0 | xargs -0 "$PY" -c \
	'import json,sys; [json.load(open(f)) for f in sys.argv[1:]]' || fail "JSON objects are not plain JSON"
if command -v gpg >/dev/null; then
	G=$T/gnupg
	mkdir -m 700 "$G"
	GNUPGHOME=$G gpg --batch --pinentry-mode loopback --passphrase "$PASS" --import "$T/secret.asc" 2>/dev/null
	seg=$(find "$REPO/wal_005" -name '0*.lz4' ! -name '*.backup.lz4' | LC_ALL=C sort | head -n1)
	pk=$(GNUPGHOME=$G gpg --batch --pinentry-mode loopback --passphrase "$PASS" \
		--show-session-key --list-packets "$seg" 2>&1 || true)
	assert_contains "$pk" ":pubkey enc packet: version 3, algo 1, keyid 4707272EB1F66E0C" "gpg --list-packets $seg"
	assert_contains "$pk" "mdc_method: 2" "gpg --list-packets $seg"
	assert_contains "$pk" ":literal data packet:" "gpg --list-packets $seg"
	assert_contains "$pk" "mode b (62), created 0, name=\"\"" "gpg --list-packets $seg"
	assert_match "$pk" "session key: '7:[0-9A-F]{32}'" "gpg --list-packets $seg: AES-128 (7)"
	assert_not_contains "$pk" ":compressed packet:" "gpg --list-packets $seg"
	assert_not_contains "$pk" "signature packet" "gpg --list-packets $seg"
	GNUPGHOME=$G gpgconf --kill gpg-agent 2>/dev/null || true
	ok "objects are binary OpenPGP messages named by compression only; gpg sees WAL-G's packets (v3 PKESK, AES-128, MDC, literal 'b', no compression)"
else
	ok "objects are binary OpenPGP messages named by compression only (gpg not installed: packets not listed)"
fi

# ---- restores: walc, then WAL-G --------------------------------------------------------------
# restore TOOL NAME DIR RESTORE_WRAPPER [LINE...]: backup-fetch by TOOL, recovery through the
# wrapper; the normalized dump goes to DIR.dump
restore() {
	local tool=$1 name=$2 dir=$3 wrap=$4 p
	shift 4
	rm -rf "$dir"
	if [ "$tool" = walg ]; then
		as_pg env HOME="$T/home" "${FETCH_PATH[@]}" "$WALG" backup-fetch "$dir" "$name" >"$T/log/walg-fetch.log" 2>&1 ||
			{ cat "$T/log/walg-fetch.log" >&2; fail "WAL-G backup-fetch $name"; }
	else
		wrun "${FETCH_TEXT[@]}" -- backup-fetch "$dir" "$name"
		expect_rc 0 "walc backup-fetch $name"
	fi
	recover_conf "$dir" "" "$@"
	sed -i "s|^restore_command = .*|restore_command = '$wrap wal-fetch %f %p'|" "$dir/postgresql.conf"
	p=$(free_port)
	pg_start "$dir" "$p"
	wait_not_in_recovery "$p"
	dump_norm "$p" >"$dir.dump"
	pg_stop "$dir"
}
restore walc "$FULL" "$T/walc-full" "$T/fetch-path.sh"
assert_same_file "$T/full.dump" "$T/walc-full.dump" "walc restore of the full backup"
restore walc "$DELTA" "$T/walc-delta" "$T/fetch-text.sh" "recovery_target_timeline = 'current'"
assert_same_file "$T/final.dump" "$T/walc-delta.dump" "walc restore of the delta through all WAL"
ok "walc restores its PGP repository: full, and delta + WAL (both key forms)"

if [ -x "$WALG" ]; then
	restore walg "$FULL" "$T/walg-full" "$T/walg-fetch.sh"
	assert_same_file "$T/walc-full.dump" "$T/walg-full.dump" "WAL-G restore of walc's full backup"
	restore walg "$DELTA" "$T/walg-delta" "$T/walg-fetch.sh" "recovery_target_timeline = 'current'"
	assert_same_file "$T/walc-delta.dump" "$T/walg-delta.dump" "WAL-G restore of walc's delta through all WAL"
	ok "WAL-G v3.0.9 restores walc's PGP repository (full, delta + WAL) to the same dumps as walc"
else
	log "skipped: WAL-G restore of walc's PGP repository, no WAL-G binary at $WALG"
fi

# ---- failures write nothing --------------------------------------------------------------------
listing() { (cd "$REPO" && find . -type f | LC_ALL=C sort | xargs sha256sum); }
listing >"$T/before"
seg=$(basename "$(find "$REPO/wal_005" -name '0*.lz4' ! -name '*.backup.lz4' | LC_ALL=C sort | head -n1)" .lz4)
mkdir -p "$T/wal-out"
check_refused() { # WHAT EXPECTED-TEXT VAR=VALUE...
	local what=$1 text=$2
	shift 2
	wrun "$@" -- backup-fetch "$T/never" "$DELTA"
	expect_rc 1 "backup-fetch with $what"
	assert_contains "$W_ERR" "$text" "backup-fetch with $what"
	assert_contains "$W_ERR" "tar_partitions/pg_control.tar.lz4" "backup-fetch with $what names the object"
	assert_absent "$T/never" "backup-fetch with $what"
	[ "$(printf '%s\n' "$W_ERR" | grep -c '^ERROR: ')" = 1 ] || fail "backup-fetch with $what: not one error line: $W_ERR"
	wrun "$@" -- wal-fetch "$seg" "$T/wal-out/$seg"
	expect_rc 1 "wal-fetch with $what"
	assert_contains "$W_ERR" "wal_005/$seg.lz4" "wal-fetch with $what names the object"
	[ -z "$(ls -A "$T/wal-out")" ] || fail "wal-fetch with $what left $(ls -A "$T/wal-out")"
}
check_refused "another secret key" "no secret key in WALG_PGP_KEY_PATH can decrypt this object (it is encrypted for key 4707272EB1F66E0C)" \
	WALG_FILE_PREFIX="$REPO" WALG_PGP_KEY_PATH="$T/other.asc" WALG_PGP_KEY_PASSPHRASE="other passphrase"
check_refused "a wrong passphrase" "WALG_PGP_KEY_PASSPHRASE: wrong passphrase" \
	WALG_FILE_PREFIX="$REPO" WALG_PGP_KEY="$(inline "$T/secret.asc")" WALG_PGP_KEY_PASSPHRASE="not $PASS"
check_refused "no passphrase" "WALG_PGP_KEY_PASSPHRASE is not set" \
	WALG_FILE_PREFIX="$REPO" WALG_PGP_KEY_PATH="$T/secret.asc"
check_refused "the public key" "WALG_PGP_KEY_PATH holds no secret key" \
	WALG_FILE_PREFIX="$REPO" WALG_PGP_KEY_PATH="$T/public.asc"
assert_not_contains "$W_ERR" "$PASS" "no passphrase in messages"
ok "wrong key, wrong or missing passphrase, public key only: exit 1 naming the object, nothing written"

# Two methods at once.
head -c 32 /dev/urandom | base64 -w0 >"$T/sodium.key"
NEXT=000000010000000000000099
head -c 16777216 /dev/zero >"$T/$NEXT"
for op in wal-push backup-fetch; do
	if [ $op = wal-push ]; then args=(wal-push "$T/$NEXT"); else args=(backup-fetch "$T/never" LATEST); fi
	wrun "${PUSH_PATH[@]}" WALG_LIBSODIUM_KEY_PATH="$T/sodium.key" WALG_LIBSODIUM_KEY_TRANSFORM=base64 -- "${args[@]}"
	expect_rc 1 "$op with libsodium and OpenPGP keys"
	assert_contains "$W_ERR" "WALG_LIBSODIUM_KEY_PATH and WALG_PGP_KEY_PATH are both set" "$op with two methods"
	assert_absent "$T/never" "$op with two methods"
done
listing >"$T/after"
cmp -s "$T/before" "$T/after" || fail "the repository changed: $(diff "$T/before" "$T/after" | head -n 5)"
ok "libsodium and OpenPGP both configured: exit 1 naming both; repository unchanged by every failure"
