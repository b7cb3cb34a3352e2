#!/usr/bin/env bash
# WAL-G's command lines (issue 14 §3-§6), on a real cluster and a file repository:
#   - every flag docs/DIFFERENCES.md lists as implemented or no-op goes through walc without
#     a usage error, and the implemented ones do what they say (--target-user-data,
#     --mask, --without-files-metadata, wal-verify --timeline/--lsn/--backup-name,
#     delete garbage --without-backup-check, st's flags); refused ones exit 1 naming why;
#   - global options before or after the command: --config FILE (JSON), --turbo, setting
#     flags (--walg-file-prefix=, --pg-ready-rename=true), -h/--help without configuration;
#   - WAL-G's behaviours: any file name is archived and restored; retain N --after X with a
#     delta N-th takes the older target; wal-verify integrity starts after a permanent oldest
#     backup; st ls / and /wal_005; a prefetch directory with a trailing slash;
#   - retention leaves no empty folder of a deleted backup, and delete garbage removes a killed
#     writer's old temporaries and nothing else.
. "$(dirname "$0")/lib.sh"
it_setup walg-cli

REPO=$T/repo
ENVS=(WALG_FILE_PREFIX="$REPO" WALG_DELTA_MAX_STEPS=2)
mkdir -p "$REPO" "$T/home"
walc_wrapper "${ENVS[@]}"
pgbench_source 1 push.log
PG=(PGHOST="$T" PGPORT="$PORT")

w() { wrun_pg "${ENVS[@]}" "${PG[@]}" -- "$@"; }
ok_run() { # WHAT ARGS...: walc ARGS exits 0 and says nothing of a usage error
	local what=$1
	shift
	w "$@"
	expect_rc 0 "$what"
	assert_not_contains "$W_ERR" "usage:" "$what"
	assert_not_contains "$W_ERR" "unknown option" "$what"
}
name_of() { printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'; }
change() { psqlc "$PORT" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 13 = $1"; }

# ---- backup-push flags ---------------------------------------------------------------------
ok_run "backup-push --full --add-user-data" backup-push "$SRC" --full --add-user-data '{"n": "b1"}'
B1=$(name_of)
change 1
ok_run "backup-push -p (permanent delta)" backup-push "$SRC" -p
B2=$(name_of)
[[ $B2 == *_D_* ]] || fail "second push must be a delta: $B2"
ok_run "backup-mark -i" backup-mark "$B2" -i
ok_run "backup-mark --impermanent (again)" backup-mark --impermanent "$B2"
change 2
for f in "-f" "--full -v" "--verify --store-all-corrupt" "-s" "-r" "--rating-composer" "-c" \
	"--copy-composer" "-b" "--database-composer" "--target-storage default" \
	"--delta-from-name $B1" "--delta-from-user-data {\"n\":\"b1\"}"; do
	# shellcheck disable=SC2086 # the flags are words
	ok_run "backup-push $f" backup-push "$SRC" $f
	change 3
done
ok_run "backup-push --without-files-metadata" backup-push --without-files-metadata "$SRC"
NOFM=$(name_of)
[[ $NOFM != *_D_* ]] || fail "--without-files-metadata must take a full backup: $NOFM"
[ ! -e "$REPO/basebackups_005/$NOFM/files_metadata.json" ] || fail "--without-files-metadata wrote files_metadata.json"
grep -q '"FilesMetadataDisabled":true' "$REPO/basebackups_005/${NOFM}_backup_stop_sentinel.json" ||
	fail "the sentinel does not say FilesMetadataDisabled"
ok "backup-push: every WAL-G flag accepted; --without-files-metadata stores none"

# ---- backup-fetch flags ------------------------------------------------------------------------
fetch_ok() { # WHAT DEST ARGS...
	local what=$1 dest=$2
	shift 2
	rm -rf "$dest"
	ok_run "$what" backup-fetch "$dest" "$@"
}
fetch_ok "backup-fetch --target-user-data" "$T/f1" --target-user-data '{"n": "b1"}'
[ -f "$T/f1/global/pg_control" ] || fail "--target-user-data restored nothing"
assert_contains "$W_ERR" "$B1" "--target-user-data restores $B1"
WALG_FETCH_TARGET_USER_DATA='{"n": "b1"}' fetch_ok "WALG_FETCH_TARGET_USER_DATA" "$T/f1b"
assert_contains "$W_ERR" "$B1" "WALG_FETCH_TARGET_USER_DATA restores $B1"
fetch_ok "backup-fetch --mask" "$T/fm" LATEST --mask 'base/*/PG_VERSION'
n=$(find "$T/fm" -type f | wc -l)
nv=$(find "$T/fm" -type f -name PG_VERSION | wc -l)
[ "$n" -gt 0 ] && [ "$n" = "$nv" ] || fail "--mask 'base/*/PG_VERSION' restored $n files, $nv PG_VERSION"
fetch_ok "backup-fetch --reverse-unpack --skip-redundant-tars --target-storage default" "$T/f2" \
	LATEST --reverse-unpack --skip-redundant-tars --target-storage default
fetch_ok "backup-fetch of the backup without files metadata" "$T/f3" "$NOFM"
printf '{"base_prefix": "%s"}\n' "$T/f4" >"$T/spec.json"
fetch_ok "backup-fetch --restore-spec" "$T/f4" "$B1" --restore-spec "$T/spec.json"
ok_run "backup-fetch --delta --force onto an old copy" backup-fetch "$T/f4" "$B2" --delta --force
# --restore-only (test_partial_restore.sh) needs files metadata, which this backup lacks
w backup-fetch "$T/f5" "$NOFM" --restore-only db1
expect_rc 1 "backup-fetch --restore-only of a backup without files metadata"
assert_contains "$W_ERR" "--restore-only needs the backup's files metadata" "the refusal says why"
assert_absent "$T/f5" "backup-fetch --restore-only: destination"
w backup-fetch "$T/f5" LATEST --target-storage failover1
expect_rc 1 "backup-fetch --target-storage failover1"
assert_contains "$W_ERR" "failover1" "the refusal names the storage"
ok "backup-fetch: --target-user-data, --mask, no-ops accepted; --restore-only without files metadata and other storages refused"

# ---- list, show, verify ------------------------------------------------------------------------
for f in --pretty --json --detail "--target-storage default"; do
	# shellcheck disable=SC2086
	ok_run "backup-list $f" backup-list $f
done
ok_run "wal-show --detailed-json --without-backups" wal-show --detailed-json --without-backups
switch_wal "$PORT" >/dev/null
LSN=$(psqlc "$PORT" "SELECT pg_current_wal_lsn()")
wait_archived "$SRC" "$(psqlc "$PORT" "SELECT pg_walfile_name(pg_current_wal_lsn() - 1)")"
ok_run "wal-verify integrity timeline --json" wal-verify integrity timeline --json
ok_run "wal-verify --timeline 1 --lsn" wal-verify integrity --timeline 1 --lsn "$LSN"
assert_contains "$W_OUT" "integrity check details" "WAL-G's details heading"
# without a server: --timeline and --lsn replace the connection
wrun_pg "${ENVS[@]}" PGHOST=/nonexistent -- wal-verify integrity --timeline 1 --lsn "$LSN"
expect_rc 0 "wal-verify --timeline --lsn needs no server"
ok_run "wal-verify --backup-name" wal-verify integrity --backup-name "$B1"
assert_contains "$W_ERR" "checking from backup $B1" "--backup-name starts there"
w wal-verify integrity --backup-name base_0000000100000000000000FF
expect_rc 1 "wal-verify --backup-name of a missing backup"
ok "backup-list, wal-show, wal-verify: WAL-G's flags"

# ---- wal-push, wal-fetch: any file name, flags -------------------------------------------------
mkdir -p "$T/other"
printf 'not a WAL file\n' >"$T/test_file.history"
printf 'other content\n' >"$T/other/test_file.history"
SEG=$(ls "$SRC/pg_wal" | grep -E '^[0-9A-F]{24}$' | head -n 1)
cp "$SRC/pg_wal/$SEG" "$T/${SEG}1"
pg_own "$T"
ok_run "wal-push of a .history file with any name" wal-push "$T/test_file.history" --target-storage default
ok_run "wal-push of the same file again (identical)" wal-push "$T/test_file.history"
w wal-push "$T/other/test_file.history"
expect_rc 1 "wal-push of a different test_file.history"
assert_contains "$W_ERR" "different content" "the .history refusal"
ok_run "wal-push of <segment>1" wal-push "$T/${SEG}1" --pg-ready-rename=true
ok_run "wal-fetch of test_file.history" wal-fetch test_file.history "$T/got.history" --target-storage default
assert_same_file "$T/test_file.history" "$T/got.history" "test_file.history round trip"
ok_run "wal-fetch of <segment>1" wal-fetch "${SEG}1" "$T/got.seg"
assert_same_file "$T/${SEG}1" "$T/got.seg" "<segment>1 round trip"
for bad in "../x" "a/b" "."; do
	w wal-fetch "$bad" "$T/nope"
	expect_rc 1 "wal-fetch of \"$bad\""
done
mkdir -p "$T/pf"
pg_own "$T/pf"
wrun_pg "${ENVS[@]}" WALG_PREFETCH_DIR="$T/pf/" -- wal-fetch "$SEG" "$T/pf/dest"
expect_rc 0 "wal-fetch with a prefetch directory ending in /"
sleep 1
[ ! -e "$T/pf//.wal-g" ] || [ -d "$T/pf/.wal-g" ] || fail "prefetch directory"
find "$T/pf" -path '*//*' | grep -q . && fail "a doubled slash in the prefetch path"
ok "wal-push and wal-fetch take any file name (.history protected), and WAL-G's flags"

# ---- global options ----------------------------------------------------------------------------
printf '{"walg_file_prefix": "%s", "WALG_COMPRESSION_METHOD": "zstd"}\n' "$REPO" >"$T/walg.json"
chmod 644 "$T/walg.json"
wrun_pg -- --config "$T/walg.json" backup-list
expect_rc 0 "--config FILE before the command"
assert_contains "$W_OUT" "$B1" "--config FILE: the repository is read"
wrun_pg -- backup-list --config="$T/walg.json" --turbo
expect_rc 0 "--config=FILE and --turbo after the command"
wrun_pg WALG_CONFIG_PATH="$T/walg.json" -- wal-push "$T/${SEG}1"
expect_rc 0 "WALG_CONFIG_PATH"
wrun_pg HOME="$T/home" -- backup-list
expect_rc 1 "no configuration at all"
cp "$T/walg.json" "$T/home/.walg.json"
pg_own "$T/home"
wrun_pg HOME="$T/home" -- backup-list
expect_rc 0 "~/.walg.json is read"
rm "$T/home/.walg.json"
printf 'WALG_FILE_PREFIX: %s\n' "$REPO" >"$T/home/.walg.yaml"
pg_own "$T/home"
wrun_pg HOME="$T/home" -- backup-list
expect_rc 1 "~/.walg.yaml"
assert_contains "$W_ERR" ".walg.yaml" "a YAML file is refused naming it"
rm "$T/home/.walg.yaml"
wrun_pg -- backup-list --walg-file-prefix="$REPO"
expect_rc 0 "--walg-file-prefix=..."
assert_contains "$W_OUT" "$B1" "the setting flag names the repository"
wrun_pg -- --walg-file-prefix "$REPO" --walg-log-level DEVEL backup-list
expect_rc 0 "setting flags before the command"
wrun -- backup-push --help
expect_rc 0 "backup-push --help without configuration"
assert_contains "$W_OUT" "PGDATA" "backup-push --help says PGDATA"
assert_contains "$W_OUT" "[PGDATA]" "PGDATA is optional (remote mode)"
wrun -- wal-fetch
expect_rc 1 "wal-fetch without arguments"
assert_contains "$W_ERR" "usage: walc wal-fetch" "wal-fetch without arguments prints its usage"
assert_not_contains "$W_ERR" "storage" "the usage, not a storage error"
wrun WALG_FILE_PREFX=/x -- backup-list
assert_contains "$W_ERR" "WALG_FILE_PREFX is unknown" "a typo is warned about with no storage set"
wrun WALG_COMPRESSION_METHOD=bogus -- backup-list
assert_contains "$W_ERR" "WALG_COMPRESSION_METHOD" "a bad value is reported with no storage set"
wrun -- env
for v in PGHOST PGPORT PGUSER PGDATABASE PGSSLMODE; do
	assert_contains "$W_OUT" "$v=" "walc env lists $v"
done
ok "global options: --config, WALG_CONFIG_PATH, ~/.walg.json, --turbo, setting flags, help"

# ---- st ------------------------------------------------------------------------------------------
ok_run "st ls /" st ls /
assert_contains "$W_OUT" "wal_005/" "st ls / lists the root"
ok_run "st ls /wal_005 -r" st ls /wal_005 -r
assert_contains "$W_OUT" "$SEG" "st ls /wal_005"
ok_run "st ls --recursive -t default" st ls --recursive -t default
ok_run "st ls -g" st ls -g 'wal_005/*.history*'
assert_contains "$W_OUT" "test_file.history" "st ls --glob"
KEY=$(printf '%s\n' "$W_OUT" | awk '{print $NF}' | grep test_file | head -n 1)
ok_run "st get --no-decrypt --no-decompress" st get "$KEY" "$T/raw" --no-decrypt --no-decompress
ok_run "st cat --decrypt --decompress" st cat "/$KEY" --decrypt --decompress
assert_eq "not a WAL file" "$W_OUT" "st cat of a leading-slash key"
ok_run "st stat" st stat "$KEY"
ok_run "st put -f --no-encrypt --no-compress" st put "$T/test_file.history" extra/x -f --no-encrypt --no-compress
ok_run "st put --force (again)" st put "$T/test_file.history" extra/x --force
printf 'from stdin' | as_pg env "${ENVS[@]}" "$WALC_PG" st put --read-stdin extra/stdin >/dev/null 2>"$T/log/stdin.err" ||
	fail "st put --read-stdin: $(cat "$T/log/stdin.err")"
ok_run "st cat of the stdin object" st cat extra/stdin.lz4
assert_eq "from stdin" "$W_OUT" "st put --read-stdin content"
ok_run "st rm PREFIX --target=all" st rm extra --target=all
[ ! -e "$REPO/extra" ] || fail "st rm extra left $(find "$REPO/extra")"
w st ls --all-versions
expect_rc 1 "st ls --all-versions"
ok "st: WAL-G's storage-tool flags, leading slashes, globs"

# ---- WAL-G's retention rules ---------------------------------------------------------------------
# retain N --after X where the N-th newest is a delta: the older (full) target counts.
change 4
ok_run "backup-push of a newest delta" backup-push "$SRC" --delta-from-name "$B1"
[[ $(name_of) == *_D_* ]] || fail "the newest backup must be a delta"
w delete retain 1
expect_rc 1 "delete retain 1 with a delta newest"
assert_contains "$W_ERR" "is a delta backup" "retain 1 alone refuses the delta, as WAL-G does"
w delete retain 1 --after "$B1"
expect_rc 0 "delete retain 1 --after a full, the newest being a delta"
ok "retain N --after: the older target decides"

# wal-verify starts after a permanent oldest backup once garbage is gone
ok_run "backup-mark B1 permanent" backup-mark "$B1"
ok_run "delete retain FULL 1 --confirm" delete retain FULL 1 --confirm
ok_run "delete garbage --confirm" delete garbage --confirm
switch_wal "$PORT" >/dev/null
sleep 1
w wal-verify integrity
expect_rc 0 "wal-verify integrity after garbage, oldest backup permanent"
assert_contains "$W_ERR" "$B1 is permanent" "the permanent backup is not the start"
ok "wal-verify integrity skips a permanent oldest backup"

# no empty folder of a deleted backup stays
gone=$(find "$REPO/basebackups_005" -mindepth 1 -maxdepth 1 -type d | while read -r d; do
	[ -f "${d}_backup_stop_sentinel.json" ] || echo "$d"; done)
assert_eq "" "$gone" "folders of deleted backups"
ok "retention leaves no folder of a deleted backup"

# a killed writer's temporaries: old ones go, a recent one and a live writer's stay
D=$REPO/basebackups_005/base_000000010000000000000099/tar_partitions
mkdir -p "$D"
: >"$D/.part_001.tar.lz4.walc-tmp.999999.0"
: >"$D/.part_002.tar.lz4.walc-tmp.999999.1"
: >"$D/.part_003.tar.lz4.walc-tmp.$$.2"
: >"$REPO/wal_005/.000000010000000000000099.lz4.walc-tmp.999998.0"
touch -d '2 hours ago' "$D/.part_001.tar.lz4.walc-tmp.999999.0" "$D/.part_003.tar.lz4.walc-tmp.$$.2" \
	"$REPO/wal_005/.000000010000000000000099.lz4.walc-tmp.999998.0"
pg_own "$REPO"
before=$(find "$REPO" -type f ! -name '.*' | sort)
ok_run "delete garbage --confirm with temporaries" delete garbage --confirm
[ ! -e "$D/.part_001.tar.lz4.walc-tmp.999999.0" ] || fail "an old temporary of a dead writer stayed"
[ ! -e "$REPO/wal_005/.000000010000000000000099.lz4.walc-tmp.999998.0" ] || fail "an old WAL temporary stayed"
[ -e "$D/.part_002.tar.lz4.walc-tmp.999999.1" ] || fail "a recent temporary was removed"
[ -e "$D/.part_003.tar.lz4.walc-tmp.$$.2" ] || fail "a live writer's temporary was removed"
after=$(find "$REPO" -type f ! -name '.*' | sort)
assert_eq "$before" "$after" "objects other than temporaries"
ok "delete garbage removes old temporaries of dead writers, nothing else"
rm -rf "$REPO/basebackups_005/base_000000010000000000000099"

# --without-backup-check: no non-permanent backup at all
mkdir -p "$T/repo2"
pg_own "$T/repo2"
wrun_pg WALG_FILE_PREFIX="$T/repo2" -- wal-push "$T/${SEG}1"
wrun_pg WALG_FILE_PREFIX="$T/repo2" -- delete garbage --confirm
expect_rc 0 "delete garbage with no backup"
assert_contains "$W_ERR" "nothing to do" "garbage without backups does nothing"
wrun_pg WALG_FILE_PREFIX="$T/repo2" -- delete garbage --without-backup-check
expect_rc 0 "delete garbage --without-backup-check (dry run)"
assert_contains "$W_ERR" "anyway" "--without-backup-check goes on"
ok "delete garbage --without-backup-check"

# ---- WAL-G v3.0.9 on the same steps, when it is here ------------------------------------------
WALG=$ROOT/../shared/tools/wal-g
if [ ! -x "$WALG" ]; then
	log "skipped: WAL-G comparison, no WAL-G binary at $WALG"
	exit 0
fi
walg() { # ARGS...: WAL-G on a copy of the repository; sets W_RC, W_OUT, W_ERR
	set +e
	as_pg env HOME="$T/home" PGDATA="$SRC" WALG_FILE_PREFIX="$T/walg-repo" PGHOST="$T" PGPORT="$PORT" \
		"$WALG" "$@" >"$T/.g_out" 2>"$T/.g_err" </dev/null
	W_RC=$?
	set -e
	W_OUT=$(cat "$T/.g_out")
	W_ERR=$(cat "$T/.g_err")
}
rm -rf "$T/walg-repo"
cp -a "$REPO" "$T/walg-repo"
walg wal-push "$T/test_file.history"
expect_rc 0 "WAL-G wal-push of test_file.history (it archives any name)"
walg wal-push "$T/${SEG}1"
expect_rc 0 "WAL-G wal-push of <segment>1"
walg st ls /wal_005
expect_rc 0 "WAL-G st ls /wal_005"
assert_contains "$W_OUT" "test_file.history" "WAL-G's st ls /wal_005 sees what walc stored"
walg delete retain 1 --after "$B1"
expect_rc 0 "WAL-G delete retain 1 --after (the newest a delta)"
walg wal-verify integrity
assert_contains "$W_OUT" "integrity check status: OK" "WAL-G's wal-verify on the same repository"
assert_contains "$W_OUT" "integrity check details" "WAL-G prints the details heading"
ok "WAL-G v3.0.9 does the same on these steps"
