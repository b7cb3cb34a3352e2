#!/usr/bin/env bash
# Hostile repository contents, names and configuration (file storage, no server). Beyond
# test_hostile_tar.sh (member names, links, truncation) and test_config.sh (bad codec, keys,
# prefixes). Repositories come from fault_hostile.py (see its header for the exact bytes).
#
#   tar sizes: a member whose size field claims 8 GiB (octal), 2^62 and -1 (base-256), 2^40
#     (accepted size, data missing), a PAX size of 2^40 + 1 or 10^22, a PAX header of 1 GiB:
#     backup-fetch exits 1 naming the partition, peak memory < 100 MiB, the member's file (if
#     made) holds no more than the bytes present (no preallocation), no pg_control;
#   increments (delta backup: DeltaFrom = a valid full, files_metadata.json marks
#     /base/1/16384 IsIncremented): a benign increment restores exactly (pages 1 and 3
#     replaced); wrong magic ("wi2U", zeros), a block number past the file size (7 of 4 pages,
#     0xFFFFFFFF), a page count larger than the data (1000, 0xFFFFFFFF), a 1 TiB file size, a
#     member shorter than the header, no base file: exit 1 naming the file, the file never
#     grows, no pg_control;
#   sentinel JSON (not JSON, an array, a string, empty, no LSN, LSN as string / negative /
#     float / 10^26, Version as string, Spec as string, a tablespace oid "../..", a relative
#     tablespace loc, DeltaFrom a number, a delta without DeltaFullName, DeltaFrom = itself,
#     DeltaFrom missing or "../../../../etc/passwd", IsPermanent "yes", 100000 nested
#     arrays): backup-fetch exits 1 naming the backup or its sentinel; backup-list (which lists
#     sentinel names, as WAL-G does) exits 0 and lists it; delete retain 1 exits 0 or 1;
#   delta metadata: files_metadata.json missing, not JSON, Files an array or missing,
#     IsIncremented "true" / 1, a file entry that is a string; DeltaCount "1"; no DeltaLSN:
#     backup-fetch exits 1 naming the backup or files_metadata.json (a mistyped IsIncremented
#     must not make walc write the increment's bytes as the file);
#   metadata.json (not JSON, an array, numbers past double/int64): backup-list --detail exits 1
#     naming metadata.json; every field of the wrong type: exit 0 or 1, no crash;
#   names: wal-fetch ../../etc/passwd, /etc/passwd, SEG/../../x, a name with a newline, "..",
#     "": exit 1, nothing written; wal-push of ../../etc/passwd; backup-fetch of backup
#     "../../etc" and "base_.../../../x"; st get/cat/rm of keys with ".."; delete target
#     ../../x: exit 1;
#   configuration: values with a newline and overflowing or non-finite numbers (see CONFIGS):
#     exactly one stderr line naming the variable, exit 1, nothing written.
# Every case: nothing under the test directory outside DEST changes, /etc/passwd unchanged,
# no sanitizer report, no exit status but 0 and 1 (a crash is 128+).
# The cases are independent: every one runs even after a failed check (IT_KEEP_GOING defaults
# to 1 here), and the test exits 1 at the end having printed each failed check.
IT_KEEP_GOING=${IT_KEEP_GOING:-1}
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup fault-hostile
START=$SECONDS
HOST=("$PY" "$IT_DIR/fault_hostile.py")
FULL=base_000000010000000000000002
DELTA=base_000000010000000000000004_D_000000010000000000000002
PASSWD_SUM=$(sha /etc/passwd)
RSS_LIMIT_KIB=$(rss_limit_kib 100)
# shellcheck disable=SC2154 # rc is assigned inside the trap string
trap 'rc=$?; set +e; rm -rf /tmp/walc-hostile-never-made /tmp/walc-hostile-oid; (exit $rc); it_cleanup' EXIT
mkdir -p "$T/work"

snapshot() { # the test directory outside destinations and walc's output files (and backup-verify's
	# record of its outcome, walc_verified.json, which it keeps with the backup by design)
	(cd "$T" && find . -path './sb-*/dest' -prune -o -path ./work -prune -o \
		! -name '.w_*' ! -name rss ! -path './repo-*/basebackups_005/*/walc_verified.json' -printf '%p %y %s %m %l\n' | sort)
}
# hrun ENV... -- ARGS: as wrun, under `timeout 60` and with the peak RSS in $H_RSS (KiB)
hrun() {
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	set +e
	"$PY" "$IT_DIR/fault_check.py" rss "$T/rss" timeout 60 env "${envs[@]}" "$WALC" "$@" \
		>"$T/.w_out" 2>"$T/.w_err" </dev/null
	W_RC=$?
	set -e
	W_OUT=$(cat "$T/.w_out")
	W_ERR=$(cat "$T/.w_err")
	H_RSS=$(cat "$T/rss")
	if grep -Eq "$SANITIZER_RE" <<<"$W_ERR"; then
		printf '%s\n' "$W_ERR" >&2
		fail "sanitizer report from: walc $*"
	fi
	[ "$W_RC" = 124 ] && fail "walc $* did not finish within 60 s"
	[ "$W_RC" -le 1 ] || fail "walc $* crashed: $(wdesc)"
	return 0
}
first_error() { # the first error line without its timestamp, its end if it is long
	printf '%s\n' "$W_ERR" | grep -E 'ERROR|FATAL' | head -n 1 | sed -E 's/^[A-Z]+: [0-9\/]+ [0-9:.]+ //' |
		awk '{ print (length($0) > 200 ? "..." substr($0, length($0) - 196) : $0) }'
}
unchanged() { # WHAT BEFORE
	local after
	after=$(snapshot)
	if [ "$2" != "$after" ]; then
		diff <(printf '%s\n' "$2") <(printf '%s\n' "$after") | head -n 20 >&2
		fail "$1: files changed outside DEST"
	fi
	assert_eq "$PASSWD_SUM" "$(sha /etc/passwd)" "$1: /etc/passwd"
	assert_absent /tmp/walc-hostile-never-made "$1: a tablespace location from a hostile spec"
	assert_absent /tmp/walc-hostile-oid "$1: a path from a hostile tablespace oid"
}
# fetch_refused CASE NAME NEEDLE...: backup-fetch NAME from repo-CASE exits 1, stderr holds
# every NEEDLE, bounded memory, no pg_control, nothing written outside DEST
fetch_refused() {
	local c=$1 name=$2 before
	shift 2
	mkdir -p "$T/sb-$c"
	before=$(snapshot)
	hrun WALG_FILE_PREFIX="$T/repo-$c" -- backup-fetch "$T/sb-$c/dest" "$name"
	expect_rc 1 "$c: backup-fetch $name"
	for n in "$@"; do assert_contains "$W_ERR" "$n" "$c: backup-fetch's message"; done
	[ "$H_RSS" -le "$RSS_LIMIT_KIB" ] || fail "$c: backup-fetch used $H_RSS KiB"
	assert_absent "$T/sb-$c/dest/global/pg_control" "$c: pg_control after a refused restore"
	unchanged "$c" "$before"
	# backup-verify reads the same bytes: a problem (exit 1), bounded memory, nothing written
	hrun WALG_FILE_PREFIX="$T/repo-$c" -- backup-verify "$name"
	[ "$W_RC" = 1 ] || fail "$c: backup-verify $name: expected exit 1, got $(wdesc); $W_OUT"
	assert_contains "$W_OUT" "PROBLEM " "$c: backup-verify names the problem"
	[ "$H_RSS" -le "$RSS_LIMIT_KIB" ] || fail "$c: backup-verify used $H_RSS KiB"
	unchanged "$c" "$before"
}

# ---- tar member sizes ----------------------------------------------------------------------------
for c in tar-octal:'truncated' tar-b256:'too large' tar-b256neg:'bad size' tar-tib:'truncated' \
	tar-pax:'PAX size' tar-paxover:'PAX size' tar-paxlong:'extended header'; do
	cn=${c%%:*}
	"${HOST[@]}" "$cn" "$T/repo-$cn"
	fetch_refused "$cn" "$FULL" "${c#*:}" part_001.tar.zst
	f=$T/sb-$cn/dest/base/1/huge
	if [ -e "$f" ]; then
		[ "$(stat -c %s "$f")" -le 4096 ] || fail "$cn: base/1/huge grew to $(stat -c %s "$f") bytes (4096 present)"
	fi
	[ "$(du -sk "$T/sb-$cn" | cut -f1)" -le 1024 ] || fail "$cn: DEST uses $(du -sk "$T/sb-$cn" | cut -f1) KiB"
	log "  $cn: exit 1, $H_RSS KiB peak: $(first_error)"
done
ok "huge, negative and overflowing tar member sizes: exit 1 naming the partition, bounded memory, no preallocation"

# ---- increments -----------------------------------------------------------------------------------
"${HOST[@]}" inc-ok "$T/repo-inc-ok"
mkdir -p "$T/sb-inc-ok"
hrun WALG_FILE_PREFIX="$T/repo-inc-ok" -- backup-fetch "$T/sb-inc-ok/dest" "$DELTA"
expect_rc 0 "inc-ok: backup-fetch of a delta with a benign increment"
"$PY" - "$T/sb-inc-ok/dest/base/1/16384" <<'EOF' || fail "inc-ok: the increment was not applied page by page"
import sys
d = open(sys.argv[1], "rb").read()
want = b"\x11" * 8192 + b"\x22" * 8192 + b"\x11" * 8192 + b"\x33" * 8192
sys.exit(0 if d == want else 1)
EOF
[ -s "$T/sb-inc-ok/dest/global/pg_control" ] || fail "inc-ok: no pg_control"
ok "inc-ok: the control delta restores, pages 1 and 3 replaced"
for c in inc-magic:'increment header' inc-magic0:'increment header' inc-block:'past the file size' \
	inc-blockmax:'past the file size' inc-count:'1000 pages' inc-countmax:'4294967295 pages' \
	inc-bigfile:'1099511627776-byte file' inc-short:'shorter than its header' inc-nobase:'no base file'; do
	cn=${c%%:*}
	"${HOST[@]}" "$cn" "$T/repo-$cn"
	fetch_refused "$cn" "$DELTA" "${c#*:}" /base/1/16384
	f=$T/sb-$cn/dest/base/1/16384
	if [ -e "$f" ]; then
		[ "$(stat -c %s "$f")" -le 32768 ] || fail "$cn: base/1/16384 grew to $(stat -c %s "$f") bytes"
	fi
	log "  $cn: exit 1: $(first_error)"
done
ok "hostile increments: exit 1 naming the file, which never grows"

# ---- sentinels ------------------------------------------------------------------------------------
declare -A SENT_NEEDLE=(
	[sent-deltaself]='longer than' [sent-deltamissing]=base_000000010000000000000001
	[sent-deltapath]='".."' [sent-specoid]=tablespace [sent-specrel]=loc
)
mapfile -t SENTS < <("$PY" -c "import sys; sys.path.insert(0, '$IT_DIR'); import fault_hostile as f; print('\n'.join(f.SENTINELS))")
for c in "${SENTS[@]}"; do
	"${HOST[@]}" "$c" "$T/repo-$c"
	fetch_refused "$c" "$FULL" "${SENT_NEEDLE[$c]:-$FULL}"
	line=$(first_error)
	hrun WALG_FILE_PREFIX="$T/repo-$c" -- backup-list
	expect_rc 0 "$c: backup-list"
	assert_contains "$W_OUT" "$FULL" "$c: backup-list lists the backup by its sentinel's name"
	hrun WALG_FILE_PREFIX="$T/repo-$c" -- delete retain 1
	log "  $c: backup-fetch: $line; delete retain 1: exit $W_RC"
done
ok "${#SENTS[@]} hostile sentinels: backup-fetch exits 1 naming the backup; backup-list and delete do not crash"

# ---- metadata.json --------------------------------------------------------------------------------
for c in meta-notjson meta-array meta-huge-numbers meta-types; do
	"${HOST[@]}" "$c" "$T/repo-$c"
	hrun WALG_FILE_PREFIX="$T/repo-$c" -- backup-list
	expect_rc 0 "$c: backup-list"
	for fmt in "" --json; do
		hrun WALG_FILE_PREFIX="$T/repo-$c" -- backup-list --detail $fmt
		if [ "$c" = meta-types ]; then
			if [ "$W_RC" = 0 ] && [ "$fmt" = --json ]; then
				printf '%s\n' "$W_OUT" | "$PY" -c 'import json, sys; json.load(sys.stdin)' ||
					fail "$c: backup-list --detail --json printed invalid JSON: $W_OUT"
			fi
			[ "$W_RC" = 0 ] || assert_contains "$W_ERR" metadata.json "$c: backup-list --detail $fmt"
		else
			# one damaged metadata.json must not hide every other backup: listed, with a
			# WARNING naming the object
			expect_rc 0 "$c: backup-list --detail $fmt"
			assert_contains "$W_ERR" "WARNING" "$c: backup-list --detail $fmt warns"
			assert_contains "$W_ERR" "$FULL/metadata.json" "$c: backup-list --detail $fmt names the object"
			assert_contains "$W_OUT" "$FULL" "$c: backup-list --detail $fmt still lists the backup"
		fi
	done
	log "  $c: backup-list --detail exit $W_RC $(first_error)"
done
ok "hostile metadata.json: backup-list --detail warns naming it and lists the backups (wrong field types: no crash)"

# ---- names with path separators --------------------------------------------------------------------
R=$T/repo-names
mkdir -p "$R" "$T/names"
fake_segment 000000010000000000000001 16777216 "$T/names/000000010000000000000001"
wrun WALG_FILE_PREFIX="$R" -- wal-push "$T/names/000000010000000000000001"
expect_rc 0 "wal-push of a benign segment"
mkdir -p "$T/names/a/b"
before=$(snapshot)
for n in ../../etc/passwd /etc/passwd 000000010000000000000001/../../../etc/passwd \
	"pg_wal/000000010000000000000001" .. . "" "000000010000000000000001
" "0000000100000000000000../x"; do
	rm -f "$T/names/X"
	hrun WALG_FILE_PREFIX="$R" -- wal-fetch "$n" "$T/names/X"
	expect_rc 1 "wal-fetch '$n'"
	assert_absent "$T/names/X" "wal-fetch '$n': the destination"
	[ "$(nlines "$W_ERR")" = 1 ] || fail "wal-fetch '$n': expected one error line, got: $W_ERR"
done
cp "$T/names/000000010000000000000001" "$T/names/passwd"
# As WAL-G, wal-push archives any file under its base name: inside wal_005/, nowhere else.
hrun WALG_FILE_PREFIX="$R" -- wal-push "$T/names/a/b/../../passwd"
expect_rc 0 "wal-push of ../../passwd"
[ -f "$R/wal_005/passwd.lz4" ] || fail "wal-push of ../../passwd: not stored as wal_005/passwd.lz4"
rm -f "$R/wal_005/passwd.lz4"
for n in . .. ""; do
	hrun WALG_FILE_PREFIX="$R" -- wal-push "$T/names/$n"
	expect_rc 1 "wal-push of '$T/names/$n'"
done
for b in ../../etc base_000000010000000000000002/../../x "$FULL/" "$FULL
"; do
	hrun WALG_FILE_PREFIX="$R" -- backup-fetch "$T/names/dest" "$b"
	expect_rc 1 "backup-fetch of backup '$b'"
	rmdir "$T/names/dest" 2>/dev/null || true # made before the name is checked; empty
done
for k in ../../etc/passwd wal_005/../../../../etc/passwd /etc/passwd; do
	hrun WALG_FILE_PREFIX="$R" -- st get "$k" "$T/names/Y"
	expect_rc 1 "st get '$k'"
	assert_absent "$T/names/Y" "st get '$k'"
	hrun WALG_FILE_PREFIX="$R" -- st rm "$k"
	expect_rc 1 "st rm '$k'"
done
hrun WALG_FILE_PREFIX="$R" -- delete target ../../x --confirm
expect_rc 1 "delete target ../../x"
[ -f "$R/wal_005/000000010000000000000001.lz4" ] || fail "the benign object disappeared"
rm -f "$T/names/passwd"
unchanged "names" "$before"
ok "names with path separators, dots and newlines: exit 1, nothing written or removed"

# ---- delta metadata -------------------------------------------------------------------------------
mapfile -t DELTAS < <("$PY" -c "import sys; sys.path.insert(0, '$IT_DIR'); import fault_hostile as f; print('\n'.join(f.DELTAS))")
for c in "${DELTAS[@]}"; do
	"${HOST[@]}" "$c" "$T/repo-$c"
	needle=$DELTA
	case $c in delta-inc* | delta-entry* | delta-files* | delta-notjson | delta-nometa) needle=files_metadata.json ;; esac
	fetch_refused "$c" "$DELTA" "$needle"
	f=$T/sb-$c/dest/base/1/16384
	if [ -e "$f" ] && [ "$(head -c 4 "$f")" = wi1U ]; then
		fail "$c: the increment's bytes were written as base/1/16384"
	fi
	log "  $c: exit 1: $(first_error)"
done
ok "${#DELTAS[@]} hostile delta sentinels and files_metadata.json: exit 1 naming the object"

# ---- configuration ---------------------------------------------------------------------------------
NL='
'
CONFIGS=(
	"WALG_COMPRESSION_METHOD=lz4${NL}zstd" "WALG_DELTA_ORIGIN=LATEST${NL}" "WALG_LOG_LEVEL=DEVEL${NL}"
	"WALG_LOG_FORMAT=json${NL}" "WALG_FILE_PREFIX=$T/cfg-repo${NL}x" "WALG_STORAGE_PREFIX=a${NL}b"
	"WALG_PREFETCH_DIR=$T${NL}x" "PGDATA=$T/pgdata${NL}x" "WALG_UPLOAD_CONCURRENCY=4${NL}"
	"WALG_PREVENT_WAL_OVERWRITE=true${NL}" "WALG_ALIVE_CHECK_INTERVAL=1s${NL}" "WALG_PG_WAL_SIZE=16${NL}"
	WALG_UPLOAD_CONCURRENCY=99999999999999999999 WALG_DOWNLOAD_CONCURRENCY=-99999999999999999999
	WALG_UPLOAD_DISK_CONCURRENCY=4294967297 WALG_TAR_SIZE_THRESHOLD=99999999999999999999999
	WALG_DISK_RATE_LIMIT=18446744073709551616 WALG_NETWORK_RATE_LIMIT=-1 WALG_PG_WAL_SIZE=4294967312
	WALG_COMPRESSION_LEVEL=4294967297 WALG_DELTA_MAX_STEPS=99999999999999999999
	TOTAL_BG_UPLOADED_LIMIT=99999999999999999999 WALG_INTEGRITY_MAX_DELAYED_WALS=-1
	WALG_ALIVE_CHECK_INTERVAL=99999999999999999999h WALG_WAL_PUSH_TIMEOUT=1e400s
	WALG_STOP_BACKUP_TIMEOUT=-5s WALG_WAL_PUSH_TIMEOUT=nans WALG_ALIVE_CHECK_INTERVAL=nanms
	WALG_STOP_BACKUP_TIMEOUT=NaNh
)
mkdir -p "$T/cfg-repo" "$T/cfg-cwd"
head -c 16777216 /dev/zero >"$T/cfg-seg"
SEG=000000010000000000000003
cp "$T/cfg-seg" "$T/$SEG"
for kv in "${CONFIGS[@]}"; do
	rm -rf "$T/cfg-repo"
	mkdir -p "$T/cfg-repo"
	var=${kv%%=*}
	shown=$(printf '%s' "$kv" | sed -n '1p')
	envs=(WALG_FILE_PREFIX="$T/cfg-repo" "$kv")
	(cd "$T/cfg-cwd" && hrun "${envs[@]}" -- wal-push "$T/$SEG" && declare -p W_RC W_ERR >"$T/.w_decl")
	# shellcheck disable=SC1091
	. "$T/.w_decl"
	expect_rc 1 "$shown: wal-push"
	assert_eq 1 "$(nlines "$W_ERR")" "$shown: number of stderr lines (stderr: $W_ERR)"
	assert_contains "$W_ERR" "$var" "$shown: the message names the variable"
	assert_eq 0 "$(count_files "$T/cfg-repo")" "$shown: files written to the repository"
	assert_eq "" "$(ls -A "$T/cfg-cwd")" "$shown: files in the working directory"
	log "  $(printf '%s' "$kv" | tr '\n' '|' | cut -c 1-60): $(printf '%s' "$W_ERR" | sed -E 's/^[A-Z]+: [0-9\/]+ [0-9:.]+ //' | cut -c 1-160)"
done
ok "${#CONFIGS[@]} configuration values with newlines or overflowing/non-finite numbers: one line naming the variable"
log "all done in $((SECONDS - START))s"
