#!/usr/bin/env bash
# Configuration by environment (no server needed):
#   - each bad configuration makes wal-push (and, where it concerns reading, wal-fetch) exit 1
#     with exactly one line on stderr naming the variable, and writes nothing to the repository
#     (nor DEST): unknown WALG_COMPRESSION_METHOD, a WALG_LIBSODIUM_KEY under 25 characters,
#     WALG_LIBSODIUM_KEY_PATH missing or unreadable, WALG_LIBSODIUM_KEY_TRANSFORM=hex/base64
#     with a key that is not 32 bytes, a relative WALG_FILE_PREFIX, no storage prefix at all;
#   - walc --version, help, env (secrets masked: the key value appears neither in `walc env`
#     nor in a DEVEL-level wal-push / wal-fetch log);
#   - WALG_LOG_FORMAT=json: every stderr line is a JSON object with "level" and "msg";
#   - WALG_LOG_LEVEL=ERROR: a successful wal-push prints nothing on stderr;
#   - an unknown WALG_FOO_BAR gives a warning naming it (the command still succeeds), except in
#     wal-push and wal-fetch, run once a segment, which name it only at DEVEL level; in a
#     configuration file too;
#   - WALG_FILE_PREFIX=file://localhost/abs/path is the same repository as /abs/path.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup config

SEG=000000010000000000000003
mkdir -p "$T/wal" "$T/cwd"
seq 1 300000 >"$T/text"
fake_segment "$SEG" 1048576 "$T/wal/$SEG" "$T/text"
SECRET=Zq7SecretKeyValue-9f3b2c1d8e7a6X # 32 characters, easy to spot
printf '%s' "$(head -c 16 /dev/urandom | od -An -v -tx1 | tr -d ' \n')" >"$T/key16.hex"   # 16 bytes
printf '%s' "$(head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n')" >"$T/key32.hex"   # 32 bytes
printf '%s' "$(head -c 64 /dev/urandom | od -An -v -tx1 | tr -d ' \n')" >"$T/key64.hex"   # 64 bytes
printf '%s' "$(head -c 20 /dev/urandom | base64 -w0)" >"$T/key20.b64"                     # 20 bytes
printf '%064d' 0 | tr 0 z >"$T/keynothex.hex"                                              # 64 non-hex chars
chmod 600 "$T"/key*.* # walc warns about key files readable by others (a second stderr line)
pg_own "$T"

# ---- bad configurations -----------------------------------------------------------------------
# bad_config WHAT VAR_RE COMMANDS [VAR=VALUE ...]: with this environment (WALG_FILE_PREFIX is
# set to an empty repository unless given), each command in COMMANDS (push, fetch) exits 1 with
# exactly one stderr line matching VAR_RE, and nothing is written.
bad_config() {
	local what=$1 var_re=$2 cmds=$3 c repo dest
	shift 3
	for c in $cmds; do
		repo=$T/repo-bad
		rm -rf "$repo" "$T/dest"
		mkdir -p "$repo" "$T/dest"
		dest=$T/dest/RECOVERYXLOG
		local envs=("WALG_FILE_PREFIX=$repo" "$@")
		case $c in
		push) (cd "$T/cwd" && wrun "${envs[@]}" -- wal-push "$T/wal/$SEG" && declare -p W_RC W_ERR >"$T/.wr") ;;
		fetch) (cd "$T/cwd" && wrun "${envs[@]}" -- wal-fetch "$SEG" "$dest" && declare -p W_RC W_ERR >"$T/.wr") ;;
		esac
		# shellcheck disable=SC1091
		. "$T/.wr"
		expect_rc 1 "$what ($c)"
		assert_eq 1 "$(nlines "$W_ERR")" "$what ($c): number of stderr lines (stderr: $W_ERR)"
		assert_match "$W_ERR" "$var_re" "$what ($c): the message names the variable"
		assert_eq 0 "$(count_files "$repo")" "$what ($c): files written to the repository"
		assert_eq 0 "$(count_files "$T/dest")" "$what ($c): files written next to DEST"
		assert_eq "" "$(ls -A "$T/cwd")" "$what ($c): files created in the working directory"
		log "  $what ($c): $W_ERR"
	done
}

# Some objects must exist for fetch to get past "not found" if configuration were ignored.
mkdir -p "$T/repo-good"
wrun "WALG_FILE_PREFIX=$T/repo-good" -- wal-push "$T/wal/$SEG"
expect_rc 0 "wal-push with a good configuration"

bad_config "unknown WALG_COMPRESSION_METHOD" 'WALG_COMPRESSION_METHOD' push \
	WALG_COMPRESSION_METHOD=foo
bad_config "WALG_LIBSODIUM_KEY of 24 characters (transform none)" 'WALG_LIBSODIUM_KEY' "push fetch" \
	WALG_LIBSODIUM_KEY=abcdefghijklmnopqrstuvwx
bad_config "WALG_LIBSODIUM_KEY_PATH missing" 'WALG_LIBSODIUM_KEY_PATH' "push fetch" \
	"WALG_LIBSODIUM_KEY_PATH=$T/no-such.key"
bad_config "WALG_LIBSODIUM_KEY_PATH is a directory" 'WALG_LIBSODIUM_KEY_PATH' "push fetch" \
	"WALG_LIBSODIUM_KEY_PATH=$T/cwd"
bad_config "WALG_LIBSODIUM_KEY_TRANSFORM=hex, 16-byte key" 'WALG_LIBSODIUM_KEY' "push fetch" \
	"WALG_LIBSODIUM_KEY_PATH=$T/key16.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex
bad_config "WALG_LIBSODIUM_KEY_TRANSFORM=hex, 64-byte key" 'WALG_LIBSODIUM_KEY' "push fetch" \
	"WALG_LIBSODIUM_KEY_PATH=$T/key64.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex
bad_config "WALG_LIBSODIUM_KEY_TRANSFORM=hex, not hex" 'WALG_LIBSODIUM_KEY' "push fetch" \
	"WALG_LIBSODIUM_KEY_PATH=$T/keynothex.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex
bad_config "WALG_LIBSODIUM_KEY_TRANSFORM=hex, 16-byte key in WALG_LIBSODIUM_KEY" 'WALG_LIBSODIUM_KEY' "push fetch" \
	"WALG_LIBSODIUM_KEY=$(cat "$T/key16.hex")" WALG_LIBSODIUM_KEY_TRANSFORM=hex
bad_config "WALG_LIBSODIUM_KEY_TRANSFORM=base64, 20-byte key" 'WALG_LIBSODIUM_KEY' "push fetch" \
	"WALG_LIBSODIUM_KEY_PATH=$T/key20.b64" WALG_LIBSODIUM_KEY_TRANSFORM=base64
bad_config "unknown WALG_LIBSODIUM_KEY_TRANSFORM" 'WALG_LIBSODIUM_KEY_TRANSFORM' "push fetch" \
	"WALG_LIBSODIUM_KEY_PATH=$T/key32.hex" WALG_LIBSODIUM_KEY_TRANSFORM=rot13
bad_config "relative WALG_FILE_PREFIX" 'WALG_FILE_PREFIX' "push fetch" \
	WALG_FILE_PREFIX=rel/path
if [ "$(id -u)" = 0 ]; then
	# unreadable key file: owned by root, mode 600, read by the postgres user
	cp "$T/key32.hex" "$T/root-only.key"
	chown root:root "$T/root-only.key"
	chmod 600 "$T/root-only.key"
	for c in push fetch; do
		rm -rf "$T/repo-bad" "$T/dest"
		mkdir -p "$T/repo-bad" "$T/dest"
		pg_own "$T/repo-bad" "$T/dest"
		envs=("WALG_FILE_PREFIX=$T/repo-bad" "WALG_LIBSODIUM_KEY_PATH=$T/root-only.key" WALG_LIBSODIUM_KEY_TRANSFORM=hex)
		if [ $c = push ]; then
			wrun_pg "${envs[@]}" -- wal-push "$T/wal/$SEG"
		else
			wrun_pg "${envs[@]}" -- wal-fetch "$SEG" "$T/dest/RECOVERYXLOG"
		fi
		expect_rc 1 "unreadable WALG_LIBSODIUM_KEY_PATH ($c, as postgres)"
		assert_eq 1 "$(nlines "$W_ERR")" "unreadable WALG_LIBSODIUM_KEY_PATH ($c): number of stderr lines (stderr: $W_ERR)"
		assert_contains "$W_ERR" WALG_LIBSODIUM_KEY_PATH "unreadable WALG_LIBSODIUM_KEY_PATH ($c)"
		assert_eq 0 "$(count_files "$T/repo-bad")" "unreadable WALG_LIBSODIUM_KEY_PATH ($c): files in the repository"
		assert_eq 0 "$(count_files "$T/dest")" "unreadable WALG_LIBSODIUM_KEY_PATH ($c): files next to DEST"
		log "  unreadable WALG_LIBSODIUM_KEY_PATH ($c): $W_ERR"
	done
fi
# no storage at all (no WALG_FILE_PREFIX, no WALG_S3_PREFIX)
for c in push fetch; do
	rm -rf "$T/dest"
	mkdir -p "$T/dest"
	if [ $c = push ]; then
		(cd "$T/cwd" && wrun -- wal-push "$T/wal/$SEG" && declare -p W_RC W_ERR >"$T/.wr")
	else
		(cd "$T/cwd" && wrun -- wal-fetch "$SEG" "$T/dest/RECOVERYXLOG" && declare -p W_RC W_ERR >"$T/.wr")
	fi
	# shellcheck disable=SC1091
	. "$T/.wr"
	expect_rc 1 "no storage prefix ($c)"
	assert_eq 1 "$(nlines "$W_ERR")" "no storage prefix ($c): number of stderr lines (stderr: $W_ERR)"
	assert_match "$W_ERR" 'WALG_(FILE|S3)_PREFIX' "no storage prefix ($c): the message names the variable"
	assert_eq 0 "$(count_files "$T/dest")" "no storage prefix ($c): files next to DEST"
	assert_eq "" "$(ls -A "$T/cwd")" "no storage prefix ($c): files created in the working directory"
	log "  no storage prefix ($c): $W_ERR"
done
ok "bad configurations: exit 1, one line naming the variable, nothing written"

# ---- good key forms are accepted (the same key three ways reads the same object) ------------
KEY_RAW=$SECRET
mkdir -p "$T/repo-key"
wrun "WALG_FILE_PREFIX=$T/repo-key" "WALG_LIBSODIUM_KEY=$KEY_RAW" -- wal-push "$T/wal/$SEG"
expect_rc 0 "wal-push with a 32-character WALG_LIBSODIUM_KEY"
printf '%s' "$KEY_RAW" | od -An -v -tx1 | tr -d ' \n' >"$T/keyraw.hex"
printf '%s' "$KEY_RAW" | base64 -w0 >"$T/keyraw.b64"
chmod 600 "$T/keyraw.b64"
for form in "WALG_LIBSODIUM_KEY=$KEY_RAW" \
	"WALG_LIBSODIUM_KEY=$(cat "$T/keyraw.hex")|WALG_LIBSODIUM_KEY_TRANSFORM=hex" \
	"WALG_LIBSODIUM_KEY_PATH=$T/keyraw.b64|WALG_LIBSODIUM_KEY_TRANSFORM=base64"; do
	IFS='|' read -r -a envs <<<"$form"
	rm -f "$T/out"
	wrun "WALG_FILE_PREFIX=$T/repo-key" "${envs[@]}" -- wal-fetch "$SEG" "$T/out"
	expect_rc 0 "wal-fetch with key form ${envs[*]}"
	assert_same_file "$T/wal/$SEG" "$T/out" "wal-fetch with key form ${envs[*]}"
done
ok "one key as WALG_LIBSODIUM_KEY, hex and base64 reads the same object"

# ---- version, help, env -----------------------------------------------------------------------
wrun -- --version
expect_rc 0 "walc --version"
[ -n "$W_OUT$W_ERR" ] || fail "walc --version printed nothing"
log "  --version: $W_OUT"
wrun -- help
expect_rc 0 "walc help"
assert_contains "$W_OUT$W_ERR" wal-push "walc help"
assert_contains "$W_OUT$W_ERR" wal-fetch "walc help"
wrun "WALG_LIBSODIUM_KEY=$SECRET" "WALG_FILE_PREFIX=$T/repo-good" -- env
expect_rc 0 "walc env"
for v in WALG_FILE_PREFIX WALG_COMPRESSION_METHOD WALG_LIBSODIUM_KEY WALG_LIBSODIUM_KEY_PATH \
	WALG_LIBSODIUM_KEY_TRANSFORM WALG_PREVENT_WAL_OVERWRITE WALG_LOG_LEVEL WALG_PG_WAL_SIZE; do
	assert_contains "$W_OUT" "$v" "walc env lists $v"
done
assert_contains "$W_OUT" "$T/repo-good" "walc env shows the value of WALG_FILE_PREFIX"
assert_not_contains "$W_OUT$W_ERR" "$SECRET" "walc env masks WALG_LIBSODIUM_KEY"
assert_not_contains "$W_OUT$W_ERR" "${SECRET:0:12}" "walc env masks WALG_LIBSODIUM_KEY (prefix)"
ok "--version, help, env (secret masked)"

# the secret never appears in DEVEL logs either
mkdir -p "$T/repo-devel"
wrun WALG_LOG_LEVEL=DEVEL "WALG_LIBSODIUM_KEY=$SECRET" "WALG_FILE_PREFIX=$T/repo-devel" -- wal-push "$T/wal/$SEG"
expect_rc 0 "DEVEL wal-push"
assert_not_contains "$W_OUT$W_ERR" "$SECRET" "DEVEL wal-push log"
assert_not_contains "$W_OUT$W_ERR" "${SECRET:0:12}" "DEVEL wal-push log (prefix)"
devel_push_lines=$(nlines "$W_ERR")
wrun WALG_LOG_LEVEL=DEVEL "WALG_LIBSODIUM_KEY=$SECRET" "WALG_FILE_PREFIX=$T/repo-devel" -- wal-fetch "$SEG" "$T/devel.out"
expect_rc 0 "DEVEL wal-fetch"
assert_not_contains "$W_OUT$W_ERR" "$SECRET" "DEVEL wal-fetch log"
assert_same_file "$T/wal/$SEG" "$T/devel.out" "DEVEL wal-fetch"
wrun WALG_LOG_LEVEL=DEVEL "WALG_LIBSODIUM_KEY=$SECRET" "WALG_FILE_PREFIX=$T/repo-devel" -- env
assert_not_contains "$W_OUT$W_ERR" "$SECRET" "DEVEL walc env"
ok "the key is not printed at DEVEL level ($devel_push_lines lines from wal-push)"

# ---- log format and level ---------------------------------------------------------------------
check_json() { # WHAT: every line of W_ERR is a JSON object with "level" and "msg"
	[ -n "$W_ERR" ] || fail "$1: no log lines to check"
	printf '%s\n' "$W_ERR" | "$PY" -c '
import json, sys
for n, line in enumerate(sys.stdin, 1):
    try:
        o = json.loads(line)
    except ValueError as e:
        sys.exit("line %d is not JSON (%s): %r" % (n, e, line))
    if not isinstance(o, dict) or "level" not in o or "msg" not in o:
        sys.exit("line %d lacks \"level\" or \"msg\": %r" % (n, line))
' || fail "$1: WALG_LOG_FORMAT=json output: $W_ERR"
}
wrun WALG_LOG_FORMAT=json "WALG_FILE_PREFIX=$T/repo-good" -- wal-fetch 000000010000000000000077 "$T/json.out"
expect_rc 74 "json: wal-fetch of a missing file"
check_json "json: wal-fetch of a missing file"
assert_contains "$W_ERR" "000000010000000000000077" "json: wal-fetch of a missing file"
mkdir -p "$T/repo-json"
wrun WALG_LOG_FORMAT=json WALG_LOG_LEVEL=DEVEL "WALG_FILE_PREFIX=$T/repo-json" -- wal-push "$T/wal/$SEG"
expect_rc 0 "json: DEVEL wal-push"
check_json "json: DEVEL wal-push"
wrun WALG_LOG_FORMAT=json WALG_COMPRESSION_METHOD=foo "WALG_FILE_PREFIX=$T/repo-json" -- wal-push "$T/wal/$SEG"
expect_rc 1 "json: bad configuration"
check_json "json: bad configuration"
assert_eq 1 "$(nlines "$W_ERR")" "json: bad configuration: number of lines"
assert_contains "$W_ERR" WALG_COMPRESSION_METHOD "json: bad configuration"
ok "WALG_LOG_FORMAT=json: JSON lines with level and msg"

mkdir -p "$T/repo-quiet"
wrun WALG_LOG_LEVEL=ERROR "WALG_FILE_PREFIX=$T/repo-quiet" -- wal-push "$T/wal/$SEG"
expect_rc 0 "WALG_LOG_LEVEL=ERROR wal-push"
assert_eq "" "$W_ERR" "WALG_LOG_LEVEL=ERROR: stderr of a successful wal-push"
ok "WALG_LOG_LEVEL=ERROR is quiet on success"

# ---- unknown variable -------------------------------------------------------------------------
mkdir -p "$T/repo-unknown"
wrun WALG_FOO_BAR=1 "WALG_FILE_PREFIX=$T/repo-unknown" -- wal-push "$T/wal/$SEG"
expect_rc 0 "wal-push with WALG_FOO_BAR set"
assert_not_contains "$W_ERR" "WALG_FOO_BAR" "wal-push (once a segment) does not warn about WALG_FOO_BAR"
[ -n "$(find "$T/repo-unknown" -type f -name "$SEG*")" ] || fail "wal-push with WALG_FOO_BAR stored nothing"
wrun WALG_FOO_BAR=1 WALG_LOG_LEVEL=DEVEL "WALG_FILE_PREFIX=$T/repo-unknown" -- wal-fetch "$SEG" "$T/unknown.out"
expect_rc 0 "wal-fetch with WALG_FOO_BAR set"
assert_match "$W_ERR" '^DEBUG: .*WALG_FOO_BAR is unknown to walc' "wal-fetch names WALG_FOO_BAR at DEVEL level"
wrun WALG_FOO_BAR=1 "WALG_FILE_PREFIX=$T/repo-unknown" -- backup-list
expect_rc 0 "backup-list with WALG_FOO_BAR set"
assert_match "$W_ERR" '^WARNING: .*WALG_FOO_BAR is unknown to walc and ignored' "backup-list warns about WALG_FOO_BAR"
printf '{"WALG_FILE_PREFIX": "%s", "WALG_BAR_FOO": "1"}\n' "$T/repo-unknown" >"$T/unknown.json"
wrun -- --config "$T/unknown.json" backup-list
assert_match "$W_ERR" "WALG_BAR_FOO \\(in $T/unknown.json\\) is unknown" "an unknown key of a file"
wrun -- --config "$T/unknown.json" wal-push "$T/wal/$SEG"
expect_rc 0 "wal-push with an unknown key in its file"
assert_not_contains "$W_ERR" "WALG_BAR_FOO" "wal-push does not warn about a file's unknown key"
ok "unknown WALG_FOO_BAR: warned by backup-list, a DEVEL line in wal-push and wal-fetch"

# ---- file://localhost prefix --------------------------------------------------------------------
mkdir -p "$T/repo-url"
wrun "WALG_FILE_PREFIX=file://localhost$T/repo-url" WALG_COMPRESSION_METHOD=zstd -- wal-push "$T/wal/$SEG"
expect_rc 0 "wal-push with a file://localhost prefix"
[ -f "$T/repo-url/wal_005/$SEG.zst" ] || fail "file://localhost$T/repo-url: object not at $T/repo-url/wal_005/$SEG.zst ($(find "$T/repo-url" -type f))"
wrun "WALG_FILE_PREFIX=$T/repo-url" -- wal-fetch "$SEG" "$T/url.out"
expect_rc 0 "wal-fetch with the plain path of a file://localhost repository"
assert_same_file "$T/wal/$SEG" "$T/url.out" "file://localhost round trip"
rm -f "$T/url.out"
wrun "WALG_FILE_PREFIX=file://localhost$T/repo-url" -- wal-fetch "$SEG" "$T/url.out"
expect_rc 0 "wal-fetch with a file://localhost prefix"
assert_same_file "$T/wal/$SEG" "$T/url.out" "file://localhost wal-fetch"
ok "WALG_FILE_PREFIX=file://localhost/abs/path"
