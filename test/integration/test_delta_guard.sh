#!/usr/bin/env bash
# --delta deletes what the backup does not have, so it runs only onto a stopped data directory
# of the backup's cluster (issue 42). One small cluster with a tablespace, one backup, then:
#   - a fake home (.ssh/id_rsa, Documents/a.txt), with --delta, WALG_DELTA_RESTORE=true and
#     --force, and with a PG_VERSION but no pg_control: refused with one line, every file kept;
#   - an empty or absent directory: a plain restore, said at INFO;
#   - another cluster's directory: refused, --force admits it; the running source: refused even
#     with --force; a postmaster.pid of a dead pid: refused, --force admits it; an empty one:
#     refused even with --force;
#   - what an interrupted restore left (no pg_control, walc_restore_incomplete): --delta
#     finishes it without --force, unless its marker names another cluster;
#   - a spec placing the tablespace at DEST, a tablespace location holding more than its
#     PG_<version> folder, a pg_tblspc link with no spec: refused, nothing touched;
#   - a spec's location and a pg_wal link are pruned (their stale files go, the links stay), a
#     spec naming another location replaces the link and leaves the old one alone;
#     a pg_wal link to a directory holding more than WAL is refused; a stale tablespace_map goes.
. "$(dirname "$0")/lib.sh"
it_setup deltaguard

E=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=lz4)
mkdir -p "$T/repo" "$T/ts"
pg_own "$T"
SRC=$T/src
pg_init "$SRC"
PORT=$(free_port)
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${E[*]} $WALC_PG wal-push %p'"
pg_start "$SRC" "$PORT"
psqlc "$PORT" "CREATE TABLESPACE ts LOCATION '$T/ts'"
psqlc "$PORT" "CREATE TABLE t TABLESPACE ts AS SELECT g FROM generate_series(1, 1000) g; CHECKPOINT"
OID=$(psqlc "$PORT" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts'")
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push"

tree() { "$PY" "$IT_DIR/fault_check.py" tree "$1"; }
# refused DIR WHAT NEEDLE [VAR=VALUE...] -- ARGS...: exit 1 with one error line naming NEEDLE,
# DIR's files unchanged
refused() {
	local dir=$1 what=$2 needle=$3 before envs=()
	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	before=$(tree "$dir")
	wrun "${E[@]}" "${envs[@]}" -- backup-fetch "$@" "$dir" LATEST
	expect_rc 1 "$what"
	assert_contains "$W_ERR" "$needle" "$what: the message"
	assert_eq 1 "$(grep -c ERROR <<<"$W_ERR")" "$what: one error line"
	[ "$before" = "$(tree "$dir")" ] || fail "$what: files of $dir changed"
	log "  $what: $(grep ERROR <<<"$W_ERR" | sed -E 's/^ERROR: [0-9\/]+ [0-9:.]+ //')"
}

# ---- a directory that is no cluster ----------------------------------------------------------
H=$T/fakehome
mkdir -p "$H/.ssh" "$H/Documents"
echo "-----BEGIN OPENSSH PRIVATE KEY-----" >"$H/.ssh/id_rsa"
echo "notes" >"$H/Documents/a.txt"
echo "export X=1" >"$H/.bashrc"
refused "$H" "--delta onto a home" "is not a PostgreSQL data directory" -- --delta
refused "$H" "WALG_DELTA_RESTORE=true onto a home" "is not a PostgreSQL data directory" WALG_DELTA_RESTORE=true --
refused "$H" "--delta --force onto a home" "is not a PostgreSQL data directory" -- --delta --force
echo 15 >"$H/PG_VERSION"
refused "$H" "--delta onto a home with a PG_VERSION" "no readable global/pg_control" -- --delta --force
for f in .ssh/id_rsa Documents/a.txt .bashrc; do [ -f "$H/$f" ] || fail "$f of the home is gone"; done
ok "a directory that is no cluster: refused with one line (--delta, WALG_DELTA_RESTORE, --force), every file kept"

# ---- empty or absent: a plain restore --------------------------------------------------------
mkdir "$T/empty"
for d in "$T/empty" "$T/absent"; do
	wrun "${E[@]}" -- backup-fetch --delta "$d" LATEST
	expect_rc 0 "--delta onto $d"
	assert_match "$W_ERR" "INFO: .*--delta: $d is (empty|absent): nothing to compare or remove, a plain restore" "--delta onto $d: the INFO line"
	[ -s "$d/global/pg_control" ] || fail "--delta onto $d: no pg_control"
done
ok "--delta onto an empty or absent directory: a plain restore, said at INFO"
C=$T/empty # a stopped copy of the cluster from now on

# ---- another cluster, a running one, postmaster.pid ------------------------------------------
pg_init "$T/other"
refused "$T/other" "--delta onto another cluster" "belongs to another cluster" -- --delta
wrun "${E[@]}" -- backup-fetch --delta --force "$T/other" LATEST
expect_rc 0 "--delta --force onto another cluster"
assert_contains "$W_ERR" "overwriting it" "--force onto another cluster warns"
wrun "${E[@]}" -- backup-fetch --delta --force "$SRC" LATEST
expect_rc 1 "--delta --force onto the running source"
assert_match "$W_ERR" "a server \(pid [0-9]+, .*postmaster.pid\) runs on $SRC: stop it first" "the refusal"
for f in global/pg_control PG_VERSION; do [ -s "$SRC/$f" ] || fail "the running source lost $f"; done
assert_eq 1000 "$(psqlc "$PORT" "SELECT count(*) FROM t")" "the running source"
printf '2147483646\n%s\n' "$C" >"$C/postmaster.pid"
refused "$C" "--delta with a dead server's postmaster.pid" "which is not running here" -- --delta
wrun "${E[@]}" -- backup-fetch --delta --force "$C" LATEST
expect_rc 0 "--delta --force with a dead server's postmaster.pid"
assert_absent "$C/postmaster.pid" "--delta --force over a crashed server's directory"
: >"$C/postmaster.pid"
refused "$C" "--delta --force with an empty postmaster.pid" "names no process" -- --delta --force
rm "$C/postmaster.pid"
ok "another cluster: refused, --force admits it; a running server: refused even with --force; a dead pid: --force only"

# ---- an interrupted restore ------------------------------------------------------------------
mkdir -p "$T/cut/repo"
cp -al "$T/repo/." "$T/cut/repo/"
rm "$T/cut/repo/basebackups_005/"*/tar_partitions/pg_control.tar.lz4
I=$T/interrupted
wrun WALG_FILE_PREFIX="$T/cut/repo" -- backup-fetch "$I" LATEST
expect_rc 1 "backup-fetch without pg_control.tar"
[ -f "$I/walc_restore_incomplete" ] || fail "an interrupted restore left no marker"
assert_absent "$I/global/pg_control" "an interrupted restore"
cp "$I/walc_restore_incomplete" "$T/marker"
sed -i 's/^system_identifier .*/system_identifier 1/' "$I/walc_restore_incomplete"
refused "$I" "--delta over an interrupted restore of another cluster" "belongs to another cluster" -- --delta
cp "$T/marker" "$I/walc_restore_incomplete"
wrun "${E[@]}" -- backup-fetch --delta "$I" LATEST
expect_rc 0 "--delta over an interrupted restore"
assert_contains "$W_ERR" "holds an interrupted walc restore" "the INFO line"
[ -s "$I/global/pg_control" ] || fail "--delta over an interrupted restore: no pg_control"
assert_absent "$I/walc_restore_incomplete" "a finished restore"
[ "$(tree "$C" | grep -v postgresql.auto.conf)" = "$(tree "$I" | grep -v postgresql.auto.conf)" ] ||
	fail "the finished restore differs from a plain one"
ok "an interrupted restore: --delta finishes it (its marker names the cluster), another cluster's refused"

# ---- tablespaces and links -------------------------------------------------------------------
spec() { # FILE LOC
	printf '{"base_prefix": "/x", "tablespaces": ["%s"], "%s": {"loc": "%s", "link": "pg_tblspc/%s"}}\n' \
		"$OID" "$OID" "$2" "$OID" >"$1"
}
spec "$T/s-dest.json" "$C"
refused "$C" "--delta with a spec at DEST" "is the destination" -- --delta --restore-spec "$T/s-dest.json"
for f in PG_VERSION postgresql.conf; do [ -f "$C/$f" ] || fail "--delta with a spec at DEST removed $f"; done
mkdir -p "$T/lts"
echo keep >"$T/lts/notes.txt"
spec "$T/s-lts.json" "$T/lts"
refused "$C" "--delta with a location holding a stray file" "holds notes.txt, not only its PG_<version> folder" -- --delta --restore-spec "$T/s-lts.json"
assert_eq keep "$(cat "$T/lts/notes.txt")" "the stray file at the location"
rm "$T/lts/notes.txt"
L=$T/linked
wrun "${E[@]}" -- backup-fetch --restore-spec "$T/s-lts.json" "$L" LATEST
expect_rc 0 "restore with the tablespace linked"
refused "$L" "--delta without a spec over a pg_tblspc link" "links to $T/lts, outside the destination" -- --delta
ver=$(ls "$T/lts")
echo stale >"$T/lts/$ver/stale"
wrun "${E[@]}" -- backup-fetch --delta --restore-spec "$T/s-lts.json" "$L" LATEST
expect_rc 0 "--delta with the spec"
assert_absent "$T/lts/$ver/stale" "a stale file at the spec's location"
assert_eq "$T/lts" "$(readlink "$L/pg_tblspc/$OID")" "the tablespace link"
[ -n "$(find "$T/lts/$ver" -type f | head -n 1)" ] || fail "the tablespace's files are gone"
LTS_SUM=$(tree "$T/lts")
spec "$T/s-lts2.json" "$T/lts2"
wrun "${E[@]}" -- backup-fetch --delta --restore-spec "$T/s-lts2.json" "$L" LATEST
expect_rc 0 "--delta with a spec moving the tablespace"
assert_eq "$T/lts2" "$(readlink "$L/pg_tblspc/$OID")" "the replaced tablespace link"
[ "$LTS_SUM" = "$(tree "$T/lts2")" ] || fail "the tablespace restored at its new location differs"
[ "$LTS_SUM" = "$(tree "$T/lts")" ] || fail "the old location was touched"
ok "--delta: a spec at DEST, a location holding other files, a pg_tblspc link without a spec refused; the spec's location pruned"

# ---- a pg_wal link -----------------------------------------------------------------------------
mv "$C/pg_wal" "$T/wal2"
ln -s "$T/wal2" "$C/pg_wal"
echo notes >"$T/wal2/notes.txt"
refused "$C" "--delta with pg_wal linked to a directory holding more than WAL" "holds notes.txt, not WAL" -- --delta
rm "$T/wal2/notes.txt"
echo stale >"$T/wal2/000000090000000000000009"
echo stale >"$T/wal2/00000009.history"
echo "$OID $T/ts" >"$C/tablespace_map" # would make PostgreSQL link the live location
wrun "${E[@]}" -- backup-fetch --delta "$C" LATEST
expect_rc 0 "--delta with a pg_wal link"
assert_absent "$C/tablespace_map" "a stale tablespace_map after --delta"
assert_eq "$T/wal2" "$(readlink "$C/pg_wal")" "the pg_wal link"
assert_absent "$T/wal2/000000090000000000000009" "a stale segment behind the pg_wal link"
assert_absent "$T/wal2/00000009.history" "a stale history file behind the pg_wal link"
[ -d "$T/wal2/archive_status" ] || fail "no archive_status behind the pg_wal link"
ok "--delta with a pg_wal link: kept, its stale WAL removed; a link to more than WAL refused"
