#!/usr/bin/env bash
# backup-fetch against hostile and broken tar partitions.
#
# Each case is a fresh file repository holding one backup base_000000010000000000000002: a
# minimal sentinel (no Version, so no files_metadata.json is needed), a backup_label.tar.zst
# (every backup has its backup_label: a restore without one is refused), a valid pg_control.tar.zst
# (/global/pg_control, 8192 zero bytes) and tar_partitions/part_001.tar.zst built by
# backup_hostile.py (Python's tarfile) and compressed with the zstd CLI:
#   ok         benign members: backup-fetch succeeds (the fixture itself is sound)
#   dotdot     ../x                              absolute escape  /../../../../tmp/<unique>
#   mid        base/../../x   and  /base/../../x
#   symlink    link -> /etc, then link/passwd;   link2 -> a directory outside DEST, then link2/victim
#   hardlink   hl => /etc/passwd;                hl2 => a file outside DEST, then hl2 written
#   truncated  the zstd stream cut in half; a complete zstd stream of a tar cut mid-member
# Every hostile or broken case: backup-fetch exits 1 with a message naming the member (or, for
# truncation, the object), writes nothing outside DEST (the would-be targets don't exist, a
# sentinel directory around DEST and a directory of victims are unchanged, /etc/passwd is
# unchanged), and writes no global/pg_control (a failed restore must not look startable).
# backup-fetch runs as the postgres OS user, who owns every would-be target outside /etc.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup hostile
START=$SECONDS

NAME=base_000000010000000000000002
UNIQUE=walc-hostile-$$-$RANDOM$RANDOM
ABS_TARGET=/tmp/$UNIQUE
OUTSIDE=$T/outside
mkdir -p "$OUTSIDE" "$T/work"
echo original >"$OUTSIDE/victim"
pg_own "$T"
PASSWD_SUM=$(sha "/etc/passwd")
# remove the absolute escape's target too, should it ever be created; it_cleanup reads the
# test's exit status from $?, so hand it on
trap 'rc=$?; set +e; rm -rf "$ABS_TARGET"; (exit $rc); it_cleanup' EXIT

snapshot() { # DIR: every path with type, size, mode, link target and content hash
	(cd "$1" && find . -printf '%p %y %s %m %l\n' | sort &&
		find . -type f -exec sha256sum {} + | awk '{ print $2, $1 }' | sort)
}

# make_repo CASE [ARG]: the repository for CASE in $T/repo-CASE
make_repo() {
	local c=$1 arg=${2:-} repo=$T/repo-$1 tp
	tp=$repo/basebackups_005/$NAME/tar_partitions
	mkdir -p "$tp"
	printf '{"LSN": 33554472, "FinishLSN": 33554600, "PgVersion": 150000}' \
		>"$repo/basebackups_005/${NAME}_backup_stop_sentinel.json"
	mkdir -p "$T/work/pgc/global"
	head -c 8192 /dev/zero >"$T/work/pgc/global/pg_control"
	"$PY" - "$T/work/pgc/global/pg_control" "$T/work/pg_control.tar" <<'EOF'
import sys, tarfile
with tarfile.open(sys.argv[2], "w", format=tarfile.PAX_FORMAT) as tf:
    ti = tf.gettarinfo(sys.argv[1], arcname="/global/pg_control")
    ti.name = "/global/pg_control"
    with open(sys.argv[1], "rb") as f:
        tf.addfile(ti, f)
EOF
	zstd -q -c "$T/work/pg_control.tar" >"$tp/pg_control.tar.zst"
	printf 'START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n' >"$T/work/backup_label"
	tar -C "$T/work" -cf "$T/work/backup_label.tar" backup_label
	zstd -q -f -c "$T/work/backup_label.tar" >"$tp/backup_label.tar.zst"
	case $c in
	trunc-zstd)
		"$PY" "$IT_DIR/backup_hostile.py" ok "$T/work/part.tar"
		zstd -q -c "$T/work/part.tar" >"$T/work/part.tar.zst"
		head -c $(($(wc -c <"$T/work/part.tar.zst") / 2)) "$T/work/part.tar.zst" >"$tp/part_001.tar.zst"
		;;
	trunc-tar)
		"$PY" "$IT_DIR/backup_hostile.py" truncated "$T/work/part.tar"
		zstd -q -c "$T/work/part.tar" >"$tp/part_001.tar.zst"
		;;
	*)
		"$PY" "$IT_DIR/backup_hostile.py" "$c" "$T/work/part.tar" "$arg"
		zstd -q -c "$T/work/part.tar" >"$tp/part_001.tar.zst"
		;;
	esac
	zstd -q -t "$tp/part_001.tar.zst" 2>/dev/null || [ "$c" = trunc-zstd ] || fail "$c: zstd -t"
	pg_own "$repo"
}

# fetch CASE: backup-fetch into $T/sb-CASE/dest as postgres
fetch() {
	local sb=$T/sb-$1
	mkdir -p "$sb/neighbour"
	[ -f "$sb/neighbour/file" ] || echo neighbour >"$sb/neighbour/file"
	pg_own "$sb"
	wrun_pg WALG_FILE_PREFIX="$T/repo-$1" -- backup-fetch "$sb/dest" "$NAME"
}

# hostile CASE NEEDLE [ARG]: backup-fetch fails naming NEEDLE and writes nothing outside DEST
hostile() {
	local c=$1 needle=$2 arg=${3:-} sb=$T/sb-$1 before after out_before out_after
	make_repo "$c" "$arg"
	mkdir -p "$sb/neighbour"
	echo neighbour >"$sb/neighbour/file"
	pg_own "$sb"
	out_before=$(snapshot "$OUTSIDE")
	before=$(snapshot "$T" | grep -v -E "^\./(sb-$c/dest|work|\.w_out|\.w_err)(/| )" || true)
	fetch "$c"
	after=$(snapshot "$T" | grep -v -E "^\./(sb-$c/dest|work|\.w_out|\.w_err)(/| )" || true)
	out_after=$(snapshot "$OUTSIDE")
	expect_rc 1 "$c: backup-fetch"
	assert_contains "$W_ERR" "$needle" "$c: backup-fetch's error message"
	if [ "$before" != "$after" ]; then
		diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") | head -n 20 >&2
		fail "$c: backup-fetch changed files outside DEST under $T"
	fi
	assert_eq "$out_before" "$out_after" "$c: the directory of victims outside DEST"
	assert_eq original "$(cat "$OUTSIDE/victim")" "$c: $OUTSIDE/victim"
	assert_eq "$PASSWD_SUM" "$(sha /etc/passwd)" "$c: /etc/passwd"
	assert_absent "$ABS_TARGET" "$c: absolute escape target"
	assert_absent "$T/sb-$c/x" "$c: ../x target"
	assert_absent "$T/x" "$c: ../../x target"
	assert_absent "$sb/dest/global/pg_control" "$c: pg_control after a failed restore"
	ok "$c: exit 1, $(printf '%s\n' "$W_ERR" | grep -E 'ERROR|FATAL' | head -n 1)"
}

# the control: the same repository layout with benign members restores
make_repo ok
fetch ok
expect_rc 0 "ok: backup-fetch of the benign backup"
assert_eq "15" "$(cat "$T/sb-ok/dest/PG_VERSION")" "ok: PG_VERSION"
assert_eq 262144 "$(stat -c %s "$T/sb-ok/dest/base/1/1259")" "ok: base/1/1259 size"
assert_eq 8192 "$(stat -c %s "$T/sb-ok/dest/global/pg_control")" "ok: global/pg_control size"
ok "ok: the benign backup restores"

# the member's name, quoted, as the message shows it
hostile dotdot '"../x"'
hostile abs "\"/../../../../../../../../../..$ABS_TARGET\"" "$ABS_TARGET"
hostile mid '"base/../../x"'
hostile midslash '"/base/../../x"'
hostile symlink '"link"'
hostile symlink2 '"link2"' "$OUTSIDE"
hostile hardlink '"hl"'
hostile hardlink2 '"hl2"' "$OUTSIDE/victim"
hostile trunc-zstd 'part_001.tar.zst'
hostile trunc-tar 'part_001.tar.zst'
log "all done in $((SECONDS - START))s"
