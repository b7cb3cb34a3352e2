#!/usr/bin/env bash
# Where a restore writes (issue 42). A running primary with pg_wal on a disk of its own
# (initdb --waldir), two tablespaces, a setuid file, a sticky directory and a stray symbolic
# link in PGDATA; one backup (codec none, so that a partition can be rewritten by hand).
#   - backup-push warns naming the stray link, and stores pg_wal although it is a link;
#   - backup-fetch without a spec, on the primary's host while it runs: the tablespaces land
#     in DEST/pg_tblspc/OID (WAL-G's placement), no tablespace_map, the live tablespaces stay
#     byte-identical; the restore starts on another port and its dump is the source's at the
#     backup; members have data-directory modes only;
#   - a spec placing one tablespace inside DEST (where it belongs) and one elsewhere starts too;
#   - refused before anything is written: a spec or --original-tablespaces onto the live
#     (non-empty) locations, a location that is DEST, inside it or holding it, two tablespaces
#     at one location or one inside the other, a relative one;
#   - a crafted sentinel Spec with locations outside DEST (one an .ssh with authorized_keys):
#     never used without --original-tablespaces, which then refuses the non-empty one;
#   - a backup without pg_wal (as older walc backups of such a cluster): the restore has
#     pg_wal and archive_status and starts.
. "$(dirname "$0")/lib.sh"
it_setup place

E=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=none)
walc_wrapper "${E[@]}"
mkdir -p "$T/repo" "$T/ts1" "$T/ts2"
pg_own "$T"
SRC=$T/src
pg_init "$SRC" --waldir="$T/waldisk"
[ -L "$SRC/pg_wal" ] || fail "initdb --waldir made no pg_wal link"
PORT=$(free_port)
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_command = '$T/walc.sh wal-push %p'"
pg_start "$SRC" "$PORT"
psqlc "$PORT" "CREATE TABLESPACE ts1 LOCATION '$T/ts1'"
psqlc "$PORT" "CREATE TABLESPACE ts2 LOCATION '$T/ts2'"
psqlc "$PORT" "CREATE TABLE t1 TABLESPACE ts1 AS SELECT g, md5(g::text) h FROM generate_series(1, 20000) g;
	CREATE INDEX t1_g ON t1 (g) TABLESPACE ts2; CREATE TABLE t2 TABLESPACE ts2 AS SELECT g FROM generate_series(1, 5000) g;
	CHECKPOINT"
OID1=$(psqlc "$PORT" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts1'")
OID2=$(psqlc "$PORT" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts2'")
echo x >"$SRC/setuid_file"
chmod 6755 "$SRC/setuid_file"
mkdir "$SRC/sticky_dir"
chmod 1777 "$SRC/sticky_dir"
ln -s /etc/hostname "$SRC/stray_link"
pg_own "$SRC"
dump_norm "$PORT" >"$T/src.dump"

wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push"
assert_match "$W_ERR" "WARNING: .*$SRC/stray_link is a symbolic link" "backup-push warns about the stray link"
assert_not_contains "$W_ERR" "pg_wal is a symbolic link" "pg_wal is no stray link"
NAME=$(find "$T/repo/basebackups_005" -maxdepth 1 -name '*_backup_stop_sentinel.json' -printf '%f\n' | sed 's/_backup_stop_sentinel.json$//')
"$PY" -c 'import json, sys; f = json.load(open(sys.argv[1]))["Files"]; sys.exit("/pg_wal" not in f)' \
	"$T/repo/basebackups_005/$NAME/files_metadata.json" || fail "files_metadata.json has no /pg_wal"
ok "backup-push of a cluster with pg_wal on its own disk: /pg_wal stored, the stray link named at WARNING"

# The primary goes on: the live tablespaces now differ from the backup.
psqlc "$PORT" "INSERT INTO t1 SELECT g, 'later' FROM generate_series(20001, 30000) g; CHECKPOINT"
tree() { "$PY" "$IT_DIR/fault_check.py" tree "$T/ts1"; "$PY" "$IT_DIR/fault_check.py" tree "$T/ts2"; }
LIVE=$(tree)
live_unchanged() { # WHAT
	[ "$LIVE" = "$(tree)" ] || fail "$1: the live cluster's tablespace files changed"
	assert_eq 30000 "$(psqlc "$PORT" "SELECT count(*) FROM t1")" "$1: live rows in ts1"
}

real_dir() { [ -d "$1" ] && [ ! -L "$1" ]; }
# start_check DIR WHAT: recover DIR to the backup's end on another port, compare, stop
start_check() {
	recover_conf "$1" "${E[*]}"
	recovered_start "$1"
	assert_dump_eq "$T/src.dump" "$RPORT" "$2"
	assert_eq 20000 "$(psqlc "$RPORT" "SELECT count(*) FROM t1")" "$2: rows in ts1"
	pg_stop "$1"
}

# ---- no spec: inside DEST, on the primary's host ------------------------------------------------
R=$T/r1
wrun "${E[@]}" -- backup-fetch "$R" LATEST
expect_rc 0 "backup-fetch without a spec"
live_unchanged "backup-fetch without a spec"
for oid in "$OID1" "$OID2"; do
	real_dir "$R/pg_tblspc/$oid" || fail "pg_tblspc/$oid is not a directory in DEST"
	[ -n "$(find "$R/pg_tblspc/$oid" -type f -name '[0-9]*' | head -n 1)" ] || fail "no relation files in pg_tblspc/$oid"
	assert_contains "$W_ERR" "tablespace $oid restored inside the destination" "backup-fetch says where"
done
assert_absent "$R/tablespace_map" "no spec"
assert_absent "$R/walc_restore_incomplete" "a whole restore"
assert_absent "$R/stray_link" "the stray link"
grep -qx "allow_in_place_tablespaces = on" "$R/postgresql.auto.conf" || fail "allow_in_place_tablespaces not set"
real_dir "$R/pg_wal" || fail "pg_wal is not a directory"
[ -d "$R/pg_wal/archive_status" ] || fail "pg_wal/archive_status missing"
# 6755 and 1777 in the tar: group read stays (initdb --allow-group-access), nothing else
assert_eq 640 "$(stat -c %a "$R/setuid_file")" "a setuid, setgid member's mode"
assert_eq 750 "$(stat -c %a "$R/sticky_dir")" "a sticky directory member's mode"
bad=$(find "$R" -perm /7027 -printf '%m %P\n' | head -n 3)
[ -z "$bad" ] || fail "modes beyond a data directory's: $bad"
start_check "$R" "restored without a spec"
live_unchanged "the restored cluster started and stopped"
ok "no spec: tablespaces in DEST/pg_tblspc (as WAL-G), live tablespaces byte-identical, started, dump equal, no setuid, setgid, sticky or others' bits"

# ---- a spec: one tablespace where it belongs inside DEST, one elsewhere ----------------------
R=$T/r2
spec() { # FILE OID LOC [OID LOC]
	local f=$1 list="" body=""
	shift
	while [ $# -gt 0 ]; do
		list="$list${list:+, }\"$1\""
		body="$body, \"$1\": {\"loc\": \"$2\", \"link\": \"pg_tblspc/$1\"}"
		shift 2
	done
	printf '{"base_prefix": "/x", "tablespaces": [%s]%s}\n' "$list" "$body" >"$f"
}
spec "$T/spec.json" "$OID1" "$R/pg_tblspc/$OID1" "$OID2" "$T/r2ts2"
wrun "${E[@]}" -- backup-fetch --restore-spec "$T/spec.json" "$R" LATEST
expect_rc 0 "backup-fetch with a spec"
real_dir "$R/pg_tblspc/$OID1" || fail "spec: pg_tblspc/$OID1 is not a directory"
assert_eq "$T/r2ts2" "$(readlink "$R/pg_tblspc/$OID2")" "spec: tablespace $OID2's link"
pg_own "$T/r2ts2"
start_check "$R" "restored with a spec"
live_unchanged "backup-fetch with a spec"
ok "spec: one tablespace in DEST/pg_tblspc, one linked elsewhere: started, dump equal"

# ---- refused before anything is written ------------------------------------------------------
# refused WHAT NEEDLE ARGS...: exit 1 naming NEEDLE, DEST absent, no new path under $T
refused() {
	local what=$1 needle=$2 before after
	shift 2
	before=$(find "$T" -path "$T/log" -prune -o -path "$T/.w_*" -prune -o -print | sort)
	wrun "${E[@]}" -- backup-fetch "$@" "$T/dest" LATEST
	expect_rc 1 "$what"
	assert_contains "$W_ERR" "$needle" "$what: the message"
	assert_eq 1 "$(grep -c ERROR <<<"$W_ERR")" "$what: one error line"
	assert_absent "$T/dest" "$what"
	after=$(find "$T" -path "$T/log" -prune -o -path "$T/.w_*" -prune -o -print | sort)
	[ "$before" = "$after" ] || fail "$what: something was written: $(diff <(echo "$before") <(echo "$after") | head -n 5)"
	live_unchanged "$what"
	log "  $what: $(grep ERROR <<<"$W_ERR" | sed -E 's/^ERROR: [0-9\/]+ [0-9:.]+ //')"
}
spec "$T/s-live.json" "$OID1" "$T/ts1" "$OID2" "$T/new2"
refused "a spec onto the live location" "is not empty" --restore-spec "$T/s-live.json"
refused "--original-tablespaces onto the live locations" "is not empty" --original-tablespaces
spec "$T/s-dest.json" "$OID1" "$T/dest"
refused "a spec at DEST" "is the destination" --restore-spec "$T/s-dest.json"
spec "$T/s-in.json" "$OID1" "$T/dest/base/x"
refused "a spec inside DEST" "inside the destination" --restore-spec "$T/s-in.json"
spec "$T/s-up.json" "$OID1" "$T"
refused "a spec holding DEST" "holds the destination" --restore-spec "$T/s-up.json"
spec "$T/s-same.json" "$OID1" "$T/same" "$OID2" "$T/same/"
refused "two tablespaces at one location" "at one location" --restore-spec "$T/s-same.json"
spec "$T/s-nest.json" "$OID1" "$T/nest" "$OID2" "$T/nest/two"
refused "a tablespace inside another's" "one inside the other" --restore-spec "$T/s-nest.json"
ln -s "$T/nowhere" "$T/dangling"
spec "$T/s-dangling.json" "$OID1" "$T/dangling"
refused "a dangling link as location" "is not a directory" --restore-spec "$T/s-dangling.json"
spec "$T/s-rel.json" "$OID1" "relative/ts"
refused "a relative location" "absolute" --restore-spec "$T/s-rel.json"
refused "--restore-spec with --original-tablespaces" "cannot be combined" --restore-spec "$T/spec.json" --original-tablespaces
ok "refused with one line, nothing written: live locations, DEST, inside DEST, around DEST, shared, nested, a dangling link, relative"

# ---- a crafted sentinel Spec -----------------------------------------------------------------
mkdir -p "$T/evil/repo" "$T/fakehome/.ssh"
echo "ssh-ed25519 AAAA operator" >"$T/fakehome/.ssh/authorized_keys"
cp -al "$T/repo/." "$T/evil/repo/"
S=$T/evil/repo/basebackups_005/${NAME}_backup_stop_sentinel.json
"$PY" - "$S" "$OID1" "$T/fakehome/.ssh" "$OID2" "$T/evil/never" <<'EOF'
import json, os, sys
path, o1, l1, o2, l2 = sys.argv[1:]
s = json.load(open(path))
s["Spec"][o1]["loc"] = l1
s["Spec"][o2]["loc"] = l2
os.remove(path)  # a hard link to the real repository's sentinel
json.dump(s, open(path, "w"))
EOF
HOME_SUM=$("$PY" "$IT_DIR/fault_check.py" tree "$T/fakehome")
wrun WALG_FILE_PREFIX="$T/evil/repo" -- backup-fetch "$T/evil/r" LATEST
expect_rc 0 "a crafted sentinel Spec, no spec given"
assert_eq "$HOME_SUM" "$("$PY" "$IT_DIR/fault_check.py" tree "$T/fakehome")" "the crafted location's files"
assert_absent "$T/evil/never" "a crafted absent location"
real_dir "$T/evil/r/pg_tblspc/$OID1" || fail "crafted Spec: tablespace not in DEST"
wrun WALG_FILE_PREFIX="$T/evil/repo" -- backup-fetch --original-tablespaces "$T/evil/r2" LATEST
expect_rc 1 "a crafted sentinel Spec with --original-tablespaces"
assert_contains "$W_ERR" "$T/fakehome/.ssh is not empty" "the refusal names the location"
assert_absent "$T/evil/r2" "refused --original-tablespaces"
assert_absent "$T/evil/never" "refused --original-tablespaces"
assert_eq "$HOME_SUM" "$("$PY" "$IT_DIR/fault_check.py" tree "$T/fakehome")" "the crafted location's files"
ok "a crafted sentinel Spec (an .ssh, an absent path): nothing written there; --original-tablespaces refuses it"

# ---- a backup without pg_wal (older walc backups of a cluster whose pg_wal is a link) ---------
mkdir -p "$T/nowal/repo"
cp -al "$T/repo/." "$T/nowal/repo/"
"$PY" - "$T/nowal/repo/basebackups_005/$NAME" <<'EOF'
import glob, json, os, sys, tarfile
b = sys.argv[1]
drop = lambda n: n.strip("/") in ("pg_wal", "pg_wal/archive_status")
dropped = 0
for p in glob.glob(b + "/tar_partitions/part_*"):
    src = tarfile.open(p)
    if not any(drop(m.name) for m in src.getmembers()):
        continue
    os.remove(p)  # hard-linked: write a new file
    with tarfile.open(p, "w", format=tarfile.GNU_FORMAT) as out:
        for m in src.getmembers():
            if drop(m.name):
                dropped += 1
                continue
            out.addfile(m, src.extractfile(m) if m.isfile() else None)
f = b + "/files_metadata.json"
meta = json.load(open(f))
for k in [k for k in meta["Files"] if drop(k)]:
    del meta["Files"][k]
os.remove(f)
json.dump(meta, open(f, "w"))
sys.exit(0 if dropped else "no pg_wal member found")
EOF
R=$T/nowal/r
wrun WALG_FILE_PREFIX="$T/nowal/repo" -- backup-fetch "$R" LATEST
expect_rc 0 "backup-fetch of a backup without pg_wal"
[ -d "$R/pg_wal/archive_status" ] || fail "no pg_wal/archive_status after restoring a backup without pg_wal"
start_check "$R" "a backup without pg_wal"
ok "a backup without pg_wal: the restore has pg_wal/archive_status, starts, dump equal"
