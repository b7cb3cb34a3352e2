#!/usr/bin/env bash
# A repository written once as root stays the archiving user's (issue 42 §5). The repository
# folder belongs to postgres; the first writer is a backup-push run as root, which creates the
# cluster marker and the backup's folders: every object and folder it made belongs to
# postgres, and the archive_command (wal-push as postgres) goes on archiving. Objects left by
# a root writer of old (a folder root:root 0755, a marker root:root 0600) make postgres's
# wal-push fail with one line naming the object, its owner and mode, and the chown that fixes
# it; after that chown, archiving resumes.
. "$(dirname "$0")/lib.sh"
it_setup repo-permissions
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (a root writer and the postgres user)"; exit 0; }

SRC=$T/src
walc_archiving "$SRC"
psqlc "$PORT" "CREATE TABLE t AS SELECT generate_series(1, 1000) i"

wrun "${E[@]}" PGHOST="$T" PGPORT="$PORT" PGUSER=postgres -- backup-push "$SRC"
expect_rc 0 "backup-push as root"
[ -f "$R/walc_cluster.json" ] || fail "the root push did not record the cluster"
not_pg=$(find "$R" ! -user postgres -printf '%p %u:%g %m\n')
[ -z "$not_pg" ] || fail "objects of the root push not owned by postgres: $not_pg"
psqlc "$PORT" "INSERT INTO t VALUES (0)"
done_seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$done_seg" 30
# a complete segment to push again by hand (an identical copy: nothing to upload)
mkdir "$T/copy"
cp "$SRC/pg_wal/$done_seg" "$T/copy/"
pg_own "$T/copy"
seg=$T/copy/$done_seg
ok "a backup-push as root: its objects are postgres's, and wal-push as postgres goes on"

# What a root writer of old left: wal_005/ root:root 0755.
chown root:root "$R/wal_005"
chmod 0755 "$R/wal_005"
wrun_pg "${E[@]}" -- wal-push "$seg"
expect_rc 1 "wal-push into a folder root owns"
assert_eq 1 "$(nlines "$W_ERR")" "one line"
assert_contains "$W_ERR" "repository folder $R/wal_005 is owned by root:root with mode 0755: walc runs as postgres and may not write in it" "the error names the folder, owner and mode"
assert_contains "$W_ERR" "chown -R postgres: $R" "the error says how to fix it"
chown -R postgres: "$R"
wrun_pg "${E[@]}" -- wal-push "$seg"
expect_rc 0 "wal-push after the chown"
ok "a folder root owns: one line with owner, mode and the chown that fixes it"

# The marker, root:root 0600 (as an old root writer's umask 077 made it).
chown root:root "$R/walc_cluster.json"
chmod 0600 "$R/walc_cluster.json"
psqlc "$PORT" "INSERT INTO t VALUES (1)"
wrun_pg "${E[@]}" -- wal-push "$seg"
expect_rc 1 "wal-push with an unreadable marker"
assert_contains "$W_ERR" "repository object $R/walc_cluster.json is owned by root:root with mode 0600: walc runs as postgres and may not read it" "the error names the marker"
assert_contains "$W_ERR" "chown -R postgres: $R" "the error says how to fix it"
chown -R postgres: "$R"
last=$(switch_wal "$PORT")
wait_archived "$SRC" "$last" 30
ok "an unreadable marker: one line naming it; archiving resumes after the chown"
