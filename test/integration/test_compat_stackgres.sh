#!/usr/bin/env bash
# StackGres (OnGres' operator) with walc as its wal-g (issue 43 §2): a real PostgreSQL 15 cluster
# and a file repository encrypted with libsodium; the calls of create-backup.sh,
# start-patroni.sh and PatroniConfigEndpoints.java, and their text parsing, written again in
# this test's words (a directory of one file per variable stands for exec-with-env):
#   - archive_command and restore_command through the environment directory;
#   - backup-push DIR -f [-p]: the name taken from WAL-G's "Wrote backup with name" line;
#   - backup-list --detail --json (WALG_LOG_LEVEL empty, stderr dropped): one compact line in
#     WAL-G's key order, cut into one object per backup by deleting brackets and splitting at
#     "},{", each object cut at commas into key:value lines with every field create-backup.sh
#     reads; sorted by the second field, the time;
#   - a volume-snapshot backup as create-backup.sh writes it: pg_backup_start, the copy,
#     pg_backup_stop in one session, a sentinel and metadata.json written by hand (no Files, no
#     TarFileSets, user_data the string "volume-snapshot") and files_metadata.json {"Files":{}},
#     stored with st put --no-encrypt --no-compress: listed, marked and unmarked, verified as
#     metadata only, passed over by a recovery target's choice of backup, restored from the
#     copy with its backup label and recovered through walc's wal-fetch;
#   - backup-mark [-i], backup-fetch DIR NAME and recovery (the dump of the primary),
#     backup-fetch --target-time (the dump at that time), wal-verify integrity and timeline,
#     delete target FIND_FULL NAME --confirm, delete before NAME --confirm.
. "$(dirname "$0")/lib.sh"
it_setup compat-stackgres
command -v envdir >/dev/null || fail "envdir not found (Debian's daemontools: deploy/deps.sh test)"

REPO=$T/repo
mkdir -p "$REPO"
head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/key.hex"
pgbench_cluster 1
BACKUP_ENV=$T/backup-env
mkdir -p "$BACKUP_ENV"
# AbstractBackupConfigMap's variables, for a repository of this test's own
for kv in PGDATA="$SRC" PGPORT="$PORT" PGUSER=postgres PGDATABASE=postgres PGHOST="$T" \
	WALG_FILE_PREFIX="$REPO" WALG_COMPRESSION_METHOD=lz4 WALG_UPLOAD_DISK_CONCURRENCY=1 \
	WALG_UPLOAD_CONCURRENCY=4 WALG_DOWNLOAD_CONCURRENCY=4 WALG_NETWORK_RATE_LIMIT=104857600 \
	WALG_DISK_RATE_LIMIT=104857600 WALG_LIBSODIUM_KEY="$(cat "$T/key.hex")" \
	WALG_LIBSODIUM_KEY_TRANSFORM=hex; do
	printf '%s\n' "${kv#*=}" >"$BACKUP_ENV/${kv%%=*}"
done
pg_own "$T"
pg_stop "$SRC"
pg_conf "$SRC" "archive_command = 'envdir $BACKUP_ENV $WALC_PG wal-push %p'"
pg_start "$SRC" "$PORT"

# sg ARGS...: wal-g under the backup environment, as the postgres user (W_RC, W_OUT, W_ERR)
sg() {
	set +e
	as_pg envdir "$BACKUP_ENV" "$WALC_PG" "$@" >"$T/.w_out" 2>"$T/.w_err" </dev/null
	W_RC=$?
	set -e
	W_OUT=$(cat "$T/.w_out")
	W_ERR=$(cat "$T/.w_err")
	assert_no_sanitizer_reports "$T/.w_err"
}
change() { psqlc "$PORT" "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid % 7 = $1"; }

# push FLAGS...: backup-push "$PGDATA" FLAGS; prints the name create-backup.sh reads from the log
push() {
	sg backup-push "$SRC" "$@"
	expect_rc 0 "backup-push $*"
	local line
	line=$(printf '%s\n' "$W_ERR" | grep ' Wrote backup with name ' | tail -n 1)
	[[ $line =~ \ Wrote\ backup\ with\ name\ ([^ ]+)(\ to\ storage\ [^ ]+)?$ ]] ||
		fail "no 'Wrote backup with name' line create-backup.sh can read: $W_ERR"
	echo "${BASH_REMATCH[1]}"
}

# list: backup-list --detail --json as create-backup.sh runs it; $LIST is its output,
# $T/backups one object per line as its tr/sed cut makes them
list() {
	set +e
	as_pg env WALG_LOG_LEVEL= envdir "$BACKUP_ENV" "$WALC_PG" backup-list --detail --json \
		>"$T/backup-list" 2>/dev/null
	local rc=$?
	set -e
	[ "$rc" = 0 ] || fail "backup-list --detail --json: exit $rc"
	LIST=$(cat "$T/backup-list")
	assert_eq 1 "$(wc -l <"$T/backup-list" | tr -d ' ')" "backup-list --detail --json is one line"
	tr -d '[]' <"$T/backup-list" | awk '{ gsub(/},{/, "}\n{"); print }' | grep -F '"backup_name"' \
		>"$T/backups" || true
}
# field NAME KEY: KEY of backup NAME, from its object cut at commas into key:value lines
field() {
	grep -F "\"backup_name\":\"$1\"" "$T/backups" | tr -d '{}"' | tr ',' '\n' |
		grep "^$2:" | cut -d : -f 2-
}

# ---- backups, names from the log, the list as create-backup.sh reads it --------------------
B1=$(push -f)
change 1
B2=$(push -f -p)
list
assert_eq 2 "$(wc -l <"$T/backups" | tr -d ' ')" "one object per backup after the cut"
"$PY" - "$LIST" <<'PYEOF' || fail "backup-list --detail --json's keys: $LIST"
import json, sys
walg = ["backup_name", "time", "wal_file_name", "storage_name", "start_time", "finish_time",
        "date_fmt", "hostname", "data_dir", "pg_version", "start_lsn", "finish_lsn",
        "is_permanent", "system_identifier", "uncompressed_size", "compressed_size"]
for row in json.loads(sys.argv[1]):
    keys = list(row)
    assert keys[:len(walg)] == walg, keys
PYEOF
for b in "$B1" "$B2"; do
	assert_eq "backup_name:$b" "$(grep -F "\"backup_name\":\"$b\"" "$T/backups" | tr -d '{}"' | tr ',' '\n' | grep -x "backup_name:$b")" \
		"$b found by create-backup.sh's grep"
	for k in start_lsn finish_lsn pg_version system_identifier uncompressed_size compressed_size; do
		[[ $(field "$b" "$k") =~ ^[0-9]+$ ]] || fail "$b: $k is not a number: '$(field "$b" "$k")'"
	done
	for k in time start_time finish_time; do
		[[ $(field "$b" "$k") =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T ]] || fail "$b: $k is not a time: '$(field "$b" "$k")'"
	done
	assert_eq "$SRC" "$(field "$b" data_dir)" "$b: data_dir"
	assert_eq 1 "$(printf '%d' "0x$(field "$b" wal_file_name | cut -c 1-8)")" "$b: the timeline from wal_file_name"
done
assert_eq false "$(field "$B1" is_permanent)" "$B1 pushed without -p"
assert_eq true "$(field "$B2" is_permanent)" "$B2 pushed with -p"
# retain_backups sorts the objects by their second comma-separated field, the time
assert_eq "$B2 $B1" "$(sort -r -t , -k 2 "$T/backups" | sed 's/.*"backup_name":"\([^"]*\)".*/\1/' | tr '\n' ' ' | sed 's/ $//')" \
	"the objects sorted by time, newest first"
ok "backup-push -f [-p]: names from the log; backup-list --detail --json cut as create-backup.sh cuts it"

# ---- a volume-snapshot backup, written by hand -------------------------------------------------
change 2
SNAPDIR=$T/snapshot
# one session: start, the snapshot (a copy of the data directory), stop
cat >"$T/snapshot.sql" <<EOF
SET client_min_messages TO WARNING;
SELECT (SELECT system_identifier FROM pg_control_system()), current_setting('server_version_num')::int,
  pg_is_in_recovery(), (pg_walfile_name_offset(lsn)).file_name, lsn - '0/0'::pg_lsn
  FROM pg_backup_start(label => 'snapshot', fast => true) AS lsn;
\\! cp -a '$SRC' '$SNAPDIR'
SELECT lsn - '0/0'::pg_lsn, regexp_replace(encode(labelfile::bytea, 'base64'), '[\\n\\r]+', '', 'g'),
  coalesce(spcmapfile, '') FROM pg_backup_stop(wait_for_archive => true);
EOF
pg_own "$T"
# create-backup.sh's times have whole seconds: one past the previous backup's start, so that
# the order by start time is the order of the backups, as it is with hours between them
sleep 1.1
SNAP_START_TIME=$(date -u +%Y-%m-%dT%H:%M:%SZ)
as_pg "$PGBIN/psql" -X -q -t -A -v ON_ERROR_STOP=1 -h "$T" -p "$PORT" -U postgres -d postgres \
	-f "$T/snapshot.sql" >"$T/snapshot.out" 2>"$T/log/snapshot.err" ||
	{ cat "$T/log/snapshot.err" >&2; fail "the snapshot's backup session"; }
SNAP_END_TIME=$(date -u +%Y-%m-%dT%H:%M:%SZ)
START=$(sed -n 1p "$T/snapshot.out")
STOP=$(sed -n 2p "$T/snapshot.out")
SNAP=base_$(cut -d '|' -f 4 <<<"$START")
"$PY" - "$T" "$SNAP" "$START" "$STOP" "$SNAP_START_TIME" "$SNAP_END_TIME" "$SRC" <<'PYEOF'
# create-backup.sh's two documents, field by field, and the empty files metadata
import json, sys
t, name, start, stop, began, ended, pgdata = sys.argv[1:]
sysid, version, _, _, lsn = start.split("|")
finish = int(stop.split("|")[0])
size = 123456789
sentinel = {"LSN": int(lsn), "PgVersion": int(version), "FinishLSN": finish,
            "SystemIdentifier": int(sysid), "UncompressedSize": size, "CompressedSize": size,
            "Spec": None, "Version": 2, "StartTime": began, "FinishTime": ended,
            "DateFmt": "%Y-%m-%dT%H:%M:%S.%fZ", "Hostname": "stackgres-0", "DataDir": pgdata,
            "IsPermanent": False}
meta = {"start_time": began, "finish_time": ended, "date_fmt": "%Y-%m-%dT%H:%M:%S.%fZ",
        "hostname": "stackgres-0", "data_dir": pgdata, "pg_version": int(version),
        "start_lsn": int(lsn), "finish_lsn": finish, "is_permanent": False,
        "system_identifier": int(sysid), "uncompressed_size": size, "compressed_size": size,
        "user_data": "volume-snapshot"}
for path, doc in ((f"{t}/{name}_backup_stop_sentinel.json", sentinel),
                  (f"{t}/{name}_metadata.json", meta),
                  (f"{t}/{name}_files_metadata.json", {"Files": {}})):
    with open(path, "w") as f:
        f.write(json.dumps(doc, separators=(",", ":")) + "\n")
PYEOF
pg_own "$T"
for obj in "_backup_stop_sentinel.json:basebackups_005/${SNAP}_backup_stop_sentinel.json" \
	"_metadata.json:basebackups_005/$SNAP/metadata.json" \
	"_files_metadata.json:basebackups_005/$SNAP/files_metadata.json"; do
	sg st put --no-encrypt --no-compress "$T/$SNAP${obj%%:*}" "${obj#*:}"
	expect_rc 0 "st put --no-encrypt --no-compress ${obj#*:}"
	cmp -s "$T/$SNAP${obj%%:*}" "$REPO/${obj#*:}" || fail "${obj#*:} is not stored as written"
done
change 3
dump_norm "$PORT" >"$T/at_target.sql"
TARGET=$(psqlc "$PORT" "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
sleep 1.2
change 4
list
assert_eq 3 "$(wc -l <"$T/backups" | tr -d ' ')" "three objects after the cut, the snapshot's too"
assert_eq volume-snapshot "$(field "$SNAP" user_data)" "the snapshot's user_data"
assert_eq "$(cut -d '|' -f 5 <<<"$START")" "$(field "$SNAP" start_lsn)" "the snapshot's start_lsn"
sg backup-list
assert_contains "$W_OUT" "$SNAP" "backup-list lists the snapshot"
sg backup-mark "$SNAP"
expect_rc 0 "backup-mark of the snapshot"
list
assert_eq true "$(field "$SNAP" is_permanent)" "the snapshot marked permanent"
sg backup-mark -i "$SNAP"
expect_rc 0 "backup-mark -i of the snapshot"
sg backup-mark -i "$B2"
expect_rc 0 "backup-mark -i $B2"
list
assert_eq "false false" "$(field "$SNAP" is_permanent) $(field "$B2" is_permanent)" "impermanent again"
sg backup-verify "$SNAP"
expect_rc 0 "backup-verify of the snapshot"
assert_match "$W_OUT" "^backup $SNAP: OK: metadata only, no objects; [1-9][0-9]* WAL segments read; 0 problems$" \
	"backup-verify of the snapshot"
sg backup-verify --all
expect_rc 0 "backup-verify --all with the snapshot among the backups"
ok "the volume snapshot's backup: listed, marked, unmarked, verified as metadata only"

# ---- WAL up to now; restores ------------------------------------------------------------------
change 5
END_SEG=$(switch_wal "$PORT")
wait_archived "$SRC" "$END_SEG" 60
dump_norm "$PORT" >"$T/primary.sql"
sg wal-verify integrity
expect_rc 0 "wal-verify integrity"
assert_contains "$W_OUT" "integrity check status: OK" "wal-verify integrity"
sg wal-verify timeline
expect_rc 0 "wal-verify timeline"
assert_contains "$W_OUT" "timeline check status: OK" "wal-verify timeline"

# recover_sg DIR LINE...: Patroni's recovery through restore_command under the environment
recover_sg() {
	local dir=$1
	shift
	RECOVER_FETCH="envdir $BACKUP_ENV $WALC_PG" recover_conf "$dir" "" "$@"
	recovered_start "$dir"
}
# the snapshot's restore: the copy, its backup label, recovery from the archive
cp -a "$SNAPDIR" "$T/from-snapshot"
rm -f "$T/from-snapshot/postmaster.pid"
cut -d '|' -f 2 <<<"$STOP" | base64 -d >"$T/from-snapshot/backup_label"
recover_sg "$T/from-snapshot" "recovery_target_timeline = 'latest'"
assert_dump_eq "$T/primary.sql" "$RPORT" "the volume snapshot recovered through wal-fetch"
pg_stop "$T/from-snapshot"
# start-patroni.sh's restore: backup-fetch DIR NAME
sg backup-fetch "$T/restored" "$B1"
expect_rc 0 "backup-fetch DIR $B1"
recover_sg "$T/restored" "recovery_target_timeline = 'latest'"
assert_dump_eq "$T/primary.sql" "$RPORT" "$B1 restored and recovered"
pg_stop "$T/restored"
# a recovery target: the snapshot is the newest backup before it, but holds nothing to restore
sg backup-fetch "$T/pitr" --target-time "$TARGET" --restore-command "envdir $BACKUP_ENV $WALC_PG wal-fetch %f %p"
expect_rc 0 "backup-fetch --target-time $TARGET"
assert_contains "$W_ERR" "passing over $SNAP" "the snapshot passed over"
assert_contains "$W_ERR" "backup $B2" "the newest backup with objects before the target"
sed -i '/^port = /d; /^listen_addresses/d; /^unix_socket_directories/d; /^archive_command/d' "$T/pitr/postgresql.conf"
pg_conf "$T/pitr" "archive_mode = off"
recovered_start "$T/pitr"
assert_dump_eq "$T/at_target.sql" "$RPORT" "recovered to $TARGET"
pg_stop "$T/pitr"
sg backup-fetch "$T/nothing" "$SNAP"
expect_rc 1 "backup-fetch of the snapshot"
assert_contains "$W_ERR" "holds no objects" "backup-fetch of the snapshot says why"
assert_absent "$T/nothing" "backup-fetch of the snapshot"
ok "restores: the snapshot with its label, $B1 by name, $B2 for $TARGET (the snapshot passed over)"

# ---- retention as retain_backups runs it ----------------------------------------------------
# StackGres never runs backup-verify: the records of the checks above would make every
# retention keep the newest verified backup (walc's rule), so they go first.
find "$REPO/basebackups_005" -name walc_verified.json -delete
sg delete target FIND_FULL "$B1" --confirm
expect_rc 0 "delete target FIND_FULL $B1 --confirm"
list
assert_eq "$B2 $SNAP" "$(sed 's/.*"backup_name":"\([^"]*\)".*/\1/' "$T/backups" | tr '\n' ' ' | sed 's/ $//')" \
	"backups after delete target FIND_FULL $B1"
sg delete before "$SNAP" --confirm
expect_rc 0 "delete before $SNAP --confirm"
list
assert_eq "$SNAP" "$(sed 's/.*"backup_name":"\([^"]*\)".*/\1/' "$T/backups")" "backups after delete before $SNAP"
left=$(find "$REPO/basebackups_005" -mindepth 1 -maxdepth 1 ! -name "$SNAP*")
assert_eq "" "$left" "objects of deleted backups left"
sg delete target FIND_FULL "$SNAP" --confirm
expect_rc 0 "delete target FIND_FULL $SNAP --confirm"
list
assert_eq "[]" "$LIST" "no backup left"
assert_eq "" "$(find "$REPO/basebackups_005" -type f 2>/dev/null)" "no object of a backup left"
ok "delete target FIND_FULL and delete before, the snapshot's backup among the others"
