#!/usr/bin/env bash
# CloudNativePG's WAL-G plugin (cnpg-plugin-wal-g) with walc as its wal-g (issue 43 §3): a real
# PostgreSQL 15 cluster and Ceph RGW as the S3 store, every command line of the plugin's
# pkg/walg with the environment its Config.ToEnvMap gives (defaults and an S3 BackupConfig with
# libsodium: WALE_S3_PREFIX with the major version, WALG_S3_STORAGE_CLASS, GOMAXPROCS, GODEBUG,
# S3_LOG_LEVEL, TOTAL_BG_UPLOADED_LIMIT, WALG_FAILOVER_STORAGES_*, WALG_DOWNLOAD_FILE_RETRIES,
# WALG_LIBSODIUM_KEY_TRANSFORM=hex, WALG_PREFETCH_DIR, WALG_PREVENT_WAL_OVERWRITE=True...), and
# its decoding of the output written again in this test's words:
#   - wal-push as archive_command, with no warning; wal-fetch of a missing segment exits 74;
#   - backup-push PGDATA --add-user-data JSON (a full, then a delta): backup-list --detail
#     --json decodes into the plugin's BackupMetadata with every field's type (user_data an
#     object equal to the map sent, start_time and finish_time RFC 3339, LSNs unsigned);
#     the backup found by its user data, the system identifier and LSN checks it makes;
#   - the backup for a recovery target time chosen as the plugin chooses it (the newest whose
#     finish_time is not after the target), backup-fetch --turbo DIR NAME, recovery through
#     wal-fetch to the target: the dump taken at the target;
#   - backup-mark and backup-mark -i (twice: the second changes nothing and succeeds);
#     DeleteBackup's delete target NAME --confirm then delete garbage --confirm, and WAL-G's
#     "Backup 'NAME' does not exist." for a name already gone; st check read|write; wal-show
#     --detailed-json into WALTimelineInfo, its backups as BackupMetadata (the status
#     controller's first recoverability point); st ls wal_005/ summed as StorageLsTotalSize sums
#     it (the sizes the store reports); DeleteAllBackupsAndWALsInStorage's delete everything
#     FORCE --confirm;
#   - the same settings in the JSON file dump-config writes (numbers and booleans as JSON),
#     read with --config without a warning.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup compat-cnpg
s3_rgw_start
s3_mb cnpg-backups

pgbench_cluster 1
SYSID=$(psqlc "$PORT" "SELECT system_identifier FROM pg_control_system()")
head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/key.hex"
# Config.ToEnvMap: NewConfigWithDefaults, then an S3 BackupConfig with libsodium encryption
# (downloadFileRetries 3, deltaMaxSteps 6), for PostgreSQL 15
CNPG_ENV=(AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY"
	AWS_ENDPOINT="$S3_ENDPOINT" AWS_REGION=us-east-1 AWS_S3_FORCE_PATH_STYLE=true
	WALE_S3_PREFIX=s3://cnpg-backups/cluster-example/15 WALG_S3_STORAGE_CLASS=STANDARD
	GOMAXPROCS=5 GODEBUG=madvdontneed=1 S3_LOG_LEVEL=DEVEL PGHOST="$T" PGUSER=postgres
	TOTAL_BG_UPLOADED_LIMIT=32 WALG_ALIVE_CHECK_INTERVAL=30s WALG_COMPRESSION_METHOD=brotli
	WALG_DELTA_MAX_STEPS=6 WALG_DISK_RATE_LIMIT=314572800 WALG_DOWNLOAD_CONCURRENCY=12
	WALG_DOWNLOAD_FILE_RETRIES=3 WALG_FAILOVER_STORAGES_CACHE_LIFETIME=0m
	WALG_FAILOVER_STORAGES_CHECK_SIZE=1KB WALG_LIBSODIUM_KEY="$(cat "$T/key.hex")"
	WALG_LIBSODIUM_KEY_TRANSFORM=hex WALG_NETWORK_RATE_LIMIT=536870912 WALG_PREFETCH_DIR="$SRC"
	WALG_PREVENT_WAL_OVERWRITE=True WALG_TAR_DISABLE_FSYNC=false WALG_UPLOAD_CONCURRENCY=16
	WALG_UPLOAD_DISK_CONCURRENCY=8 PGPORT="$PORT")
# the instance manager runs wal-g with its own environment plus the map; wal-push and wal-fetch
# through this wrapper, as archive_command and restore_command
cmd_wrapper "$T/plugin.sh" "$WALC_PG" "${CNPG_ENV[@]}"
pg_stop "$SRC"
pg_conf "$SRC" "archive_command = '$T/plugin.sh wal-push %p 2>>$T/log/archive.log'"
pg_start "$SRC" "$PORT"

# plugin ARGS...: wal-g as pkg/walg runs it (W_RC, W_OUT, W_ERR)
plugin() { wrun_pg "${CNPG_ENV[@]}" -- "$@"; }
change() { psqlc "$PORT" "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid % 7 = $1"; }

# decode: backup-list --detail --json as json.Unmarshal fills []BackupMetadata; prints one line
# per backup: name, user_data's cnpg-backup-name, finish_lsn, is_permanent
cat >"$T/decode.py" <<'PYEOF'
import json, sys
from datetime import datetime
fields = {"backup_name": str, "time": str, "wal_file_name": str, "storage_name": str,
          "start_time": str, "finish_time": str, "date_fmt": str, "hostname": str,
          "data_dir": str, "pg_version": int, "start_lsn": int, "finish_lsn": int,
          "is_permanent": bool, "system_identifier": int, "uncompressed_size": int,
          "compressed_size": int, "user_data": dict}
def rfc3339nano(s):
    # Go's time.RFC3339Nano: a "T", fractional seconds of 1 to 9 digits, Z or an offset
    assert "T" in s and (s.endswith("Z") or s[-6] in "+-"), s
    head, _, frac = s.rstrip("Z").partition(".")
    return datetime.strptime(head[:19], "%Y-%m-%dT%H:%M:%S")
for row in json.loads(sys.stdin.read()):
    for k, t in fields.items():
        v = row.get(k)
        if v is None and k == "user_data":
            continue
        assert isinstance(v, t) and not (t is int and isinstance(v, bool)), (k, v)
    for k in ("start_lsn", "finish_lsn"):
        assert 0 <= row[k] < 1 << 64, (k, row[k])
    assert -(1 << 63) <= row["system_identifier"] < 1 << 63
    assert rfc3339nano(row["start_time"]) <= rfc3339nano(row["finish_time"])
    int(row["wal_file_name"][:8], 16)
    ud = row.get("user_data") or {}
    print(row["backup_name"], ud.get("cnpg-backup-name", "-"), row["finish_lsn"],
          str(row["is_permanent"]).lower(), row["system_identifier"], row["finish_time"])
PYEOF
backups() { # the decoded list, or a failure
	plugin backup-list --detail --json
	expect_rc 0 "backup-list --detail --json"
	printf '%s\n' "$W_OUT" | "$PY" "$T/decode.py" || fail "the plugin cannot decode backup-list --detail --json: $W_OUT"
}
# by_user_data NAME: the last backup whose user data is the map the plugin sent for NAME
by_user_data() { backups | awk -v n="$1" '$2 == n { b = $1 } END { print b }'; }

# ---- archiving, backups with user data -------------------------------------------------------
psqlc "$PORT" "CREATE TABLE cnpg_marks (n int)"
change 1
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 60
assert_not_contains "$(cat "$T/log/archive.log")" "WARNING" "wal-push under the plugin's environment"
plugin wal-fetch 0000000100000000000000F0 "$T/missing"
expect_rc 74 "wal-fetch of a segment not archived"
assert_absent "$T/missing" "wal-fetch of a segment not archived"
# Backup: the checks the plugin makes on the list first, then the push
push() { # NAME: backup-push with the plugin's user data for the CNPG backup NAME
	local lsn
	lsn=$(psqlc "$PORT" "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
	backups | while read -r _ _ finish _ sysid _; do
		[ "$sysid" = "$SYSID" ] || fail "a backup of another system identifier: $sysid"
		[ "$finish" -lt "$lsn" ] || fail "a backup ends at or after the current LSN $lsn"
	done
	plugin backup-push "$SRC" --add-user-data \
		"{\"cnpg-backup-name\":\"$1\",\"cnpg-backup-namespace\":\"default\",\"cnpg-backup-human-name\":\"backup-$1\"}"
	expect_rc 0 "backup-push --add-user-data for $1"
	assert_not_contains "$W_ERR" "WARNING" "backup-push under the plugin's environment"
}
push first
FIRST=$(by_user_data first)
[ -n "$FIRST" ] || fail "no backup with the user data of 'first'"
change 2
push second
SECOND=$(by_user_data second)
[[ $SECOND == *_D_${FIRST#base_} ]] || fail "the second backup must be a delta of $FIRST: $SECOND"
# the recovery target: after the second backup
change 3
dump_norm "$PORT" >"$T/at_target.sql"
# the target in both forms: RFC 3339 for the plugin's choice, PostgreSQL's for recovery
NOW=$(psqlc "$PORT" "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') || '|' || now()")
TARGET=${NOW%%|*} TARGET_PG=${NOW#*|}
sleep 1.2
change 4
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 60
ok "wal-push, wal-fetch exit 74, backup-push --add-user-data: $FIRST, $SECOND decoded as BackupMetadata"

# ---- restore for a target time --------------------------------------------------------------
# findClosestBackupFromTargetTime: the newest backup whose finish_time is not after the target
CHOSEN=$(backups | "$PY" -c '
import sys
from datetime import datetime, timezone
def t(s):
    head, _, frac = s.rstrip("Z").partition(".")
    return datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(
        microsecond=int((frac + "000000")[:6]), tzinfo=timezone.utc)
target, best = t(sys.argv[1]), ""
for line in sys.stdin:
    name, finish = line.split()[0], line.split()[5]
    if t(finish) <= target:
        best = name
print(best)' "$TARGET")
assert_eq "$SECOND" "$CHOSEN" "the backup for $TARGET"
plugin backup-fetch --turbo "$T/restored" "$CHOSEN"
expect_rc 0 "backup-fetch --turbo DIR NAME"
[ -d "$T/restored/pg_wal" ] || as_pg mkdir "$T/restored/pg_wal"
RECOVER_FETCH=$T/plugin.sh recover_conf "$T/restored" "" "recovery_target_time = '$TARGET_PG'"
recovered_start "$T/restored"
assert_dump_eq "$T/at_target.sql" "$RPORT" "$CHOSEN recovered to $TARGET"
pg_stop "$T/restored"
ok "the backup chosen for $TARGET, backup-fetch --turbo, recovered to the target"

# ---- marks, deletes, storage checks -----------------------------------------------------------
plugin backup-mark "$SECOND"
expect_rc 0 "backup-mark $SECOND"
assert_eq "true true" "$(backups | awk '{ print $4 }' | tr '\n' ' ' | sed 's/ $//')" \
	"a delta marked permanent: its base too"
plugin backup-mark -i "$SECOND"
expect_rc 0 "backup-mark -i $SECOND"
plugin backup-mark -i "$SECOND"
expect_rc 0 "backup-mark -i of a backup already impermanent"
assert_eq "false" "$(backups | awk -v b="$SECOND" '$1 == b { print $4 }')" "$SECOND impermanent"
plugin backup-mark -i "$FIRST"
expect_rc 0 "backup-mark -i $FIRST"
# DeleteBackup: unmark (errors ignored), delete target NAME, then delete garbage
plugin delete target "$SECOND" --confirm
expect_rc 0 "delete target $SECOND --confirm"
plugin delete garbage --confirm
expect_rc 0 "delete garbage --confirm"
assert_eq "$FIRST" "$(backups | awk '{ print $1 }')" "backups after DeleteBackup of $SECOND"
plugin delete target "$SECOND" --confirm
expect_rc 1 "delete target of a backup already deleted"
assert_contains "$W_ERR" "Backup '$SECOND' does not exist." "the words the plugin takes for 'already deleted'"
plugin st check read
expect_rc 0 "st check read"
plugin st check read "basebackups_005/${FIRST}_backup_stop_sentinel.json"
expect_rc 0 "st check read of the sentinel"
plugin st check read basebackups_005/none.json
expect_rc 1 "st check read of a missing object"
plugin st check write
expect_rc 0 "st check write"
assert_eq "" "$(awsc s3 ls s3://cnpg-backups/cluster-example/15/ | grep -E ' [0-9a-f]{32}$' || true)" \
	"st check write leaves nothing at the root"
plugin wal-show --detailed-json
expect_rc 0 "wal-show --detailed-json"
printf '%s\n' "$W_OUT" | "$PY" -c '
import json, sys
types = {"id": int, "parent_id": int, "switch_point_lsn": int, "start_segment": str,
         "end_segment": str, "segments_count": int, "missing_segments": list,
         "backups": list, "segment_range_size": int, "status": str}
tls = json.load(sys.stdin)
assert len(tls) == 1, tls
for tl in tls:
    for k, t in types.items():
        assert isinstance(tl[k], t), (k, tl[k])
    assert tl["status"] == "OK" and tl["missing_segments"] == [], tl
# the backups of the timeline, with what the status controller reads (start_time)
print("\n".join(json.dumps(b) for b in tls[0]["backups"]))' >"$T/wal-show-backups" ||
	fail "the plugin cannot read wal-show --detailed-json: $W_OUT"
"$PY" "$T/decode.py" < <(printf '[%s]' "$(paste -sd, "$T/wal-show-backups")") >"$T/wal-show-decoded" ||
	fail "wal-show's backups do not decode as BackupMetadata: $(cat "$T/wal-show-backups")"
assert_eq "$FIRST" "$(awk '{ print $1 }' "$T/wal-show-decoded")" "wal-show's backups of timeline 1"
plugin st ls wal_005/
expect_rc 0 "st ls wal_005/"
total=$(printf '%s\n' "$W_OUT" | awk '$1 == "obj" { s += $2 } END { print s + 0 }')
stored=$(awsc s3api list-objects-v2 --bucket cnpg-backups --prefix cluster-example/15/wal_005/ \
	--query 'sum(Contents[].Size)' --output text)
[ "$total" -gt 0 ] || fail "st ls wal_005/ summed to 0: $W_OUT"
assert_eq "$stored" "$total" "StorageLsTotalSize of wal_005/ against the sizes RGW lists"
ok "backup-mark [-i], DeleteBackup, 'does not exist', st check read|write, wal-show, st ls sizes"

# ---- dump-config's JSON file ---------------------------------------------------------------
"$PY" - "$T/walg.json" "${CNPG_ENV[@]}" <<'PYEOF'
# Config.ToFile: the same settings, numbers and booleans as JSON ones
import json, sys
doc = {}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    doc[k] = int(v) if v.isdigit() else True if v == "true" else v
doc["WALG_FAILOVER_STORAGES_CHECK"] = True
with open(sys.argv[1], "w") as f:
    json.dump(doc, f, indent="\t")
PYEOF
pg_own "$T"
wrun_pg -- --config "$T/walg.json" backup-list
expect_rc 0 "backup-list --config walg.json"
assert_contains "$W_OUT" "$FIRST" "backup-list --config walg.json"
assert_not_contains "$W_ERR" "WARNING" "the plugin's configuration file"
# DeleteAllBackupsAndWALsInStorage: unmark the permanent ones, newest first, then everything
plugin backup-mark "$FIRST"
backups | tac | while read -r name _ _ permanent _; do
	[ "$permanent" = true ] || continue
	plugin backup-mark -i "$name"
	expect_rc 0 "backup-mark -i $name"
done
plugin delete everything FORCE --confirm
expect_rc 0 "delete everything FORCE --confirm"
assert_eq "" "$(backups)" "no backup after delete everything"
plugin st ls wal_005/
assert_eq "" "$(printf '%s\n' "$W_OUT" | grep '^obj ' || true)" "no WAL after delete everything"
ok "dump-config's file read without a warning; delete everything FORCE"

# the prefetchers wal-fetch started (detached, as WAL-G's) end on their own
for _ in $(seq 100); do
	pgrep -f "wal-prefetch .*$T/" >/dev/null || break
	sleep 0.2
done
