#!/usr/bin/env bash
# Spilo (the image of Zalando's postgres-operator) with walc as its wal-g (issue 43 §1): a real
# PostgreSQL 15 cluster, Ceph RGW as the S3 store, and the calls and text parsing of Spilo's
# scripts written again in this test's words:
#   - the envdir configure_spilo.py writes for an S3-compatible endpoint (WAL-E's names beside
#     WAL-G's, WALE_S3_ENDPOINT as http+path://, Spilo's own USE_WALG_*, WALG_DISABLE_S3_SSE,
#     WALG_BACKUP_COMPRESSION_METHOD, WALG_BACKUP_FROM_REPLICA, BACKUP_NUM_TO_RETAIN) is
#     archive_command's: 100 segments archived, and the server's log holds no warning from
#     walc, at most one line per segment; the envdirs of the AWS, GCS and Azure variants load
#     without a warning, and a setting walc cannot honour (WALG_S3_SSE_KMS_ID with AES256)
#     stays an error;
#   - the backup CronJob (postgres_backup.sh): backup-push "$PGDATA" stores its partitions with
#     WALG_BACKUP_COMPRESSION_METHOD, WAL keeps WALG_COMPRESSION_METHOD; backup-list cut after
#     its header to name and modified, newest first; with time moved 3 days on, delete before
#     FIND_FULL NAME --confirm drops the older chain and keeps the newer one whole;
#   - the replica bootstrap (wale_restore.sh): column 3 of the newest row is the start segment,
#     whose LSN PostgreSQL takes; backup-fetch DIR LATEST, recovery through the envdir's
#     restore_command: the same dump as the primary;
#   - the clone by time (clone_with_wale.py): the table as tab-separated CSV, last_modified
#     parsed by dateutil, the newest backup before the target, backup-fetch DIR NAME, recovery
#     to the target: the dump taken at the target;
#   - restore_command.sh when Patroni fetches for pg_rewind (the destination named after the
#     file, WALG_DOWNLOAD_CONCURRENCY=1): that one file and nothing else, no prefetch; a
#     segment not yet archived is exit 74 and no file, and is fetched once archived.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup compat-spilo
command -v envdir >/dev/null || fail "envdir not found (Debian's daemontools: deploy/deps.sh test)"
"$PY" -c 'import dateutil' 2>/dev/null || fail "python3-dateutil not found (deploy/deps.sh test)"
s3_rgw_start
s3_mb spilo-backups

# walc where Spilo's scripts find wal-g
ln -s "$WALC_PG" "$T/bin/wal-g"
WALG_BIN=$T/bin/wal-g
BUCKET_PATH=spilo/demo/wal/15 # configure_spilo.py's /spilo/{scope}/wal/{PGVERSION}

# put_env DIR NAME=VALUE...: one file per variable, its value without a newline, as Spilo's
# write_file leaves them
put_env() {
	local dir=$1 kv
	shift
	mkdir -p "$dir"
	for kv in "$@"; do printf '%s' "${kv#*=}" >"$dir/${kv%%=*}"; done
}

pgbench_cluster 1
ENVD=$T/etc/wal-e.d/env
mkdir -p "$T/tmp"
put_env "$ENVD" WALE_S3_PREFIX="s3://spilo-backups/$BUCKET_PATH" \
	WALG_S3_PREFIX="s3://spilo-backups/$BUCKET_PATH" \
	AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
	WALE_S3_ENDPOINT="http+path://127.0.0.1:$RGW_PORT" AWS_ENDPOINT="http://127.0.0.1:$RGW_PORT" \
	AWS_REGION=us-east-1 AWS_S3_FORCE_PATH_STYLE=true \
	WALE_DISABLE_S3_SSE=true WALG_DISABLE_S3_SSE=true \
	WALG_DOWNLOAD_CONCURRENCY=2 WALG_UPLOAD_CONCURRENCY=2 WALG_DELTA_MAX_STEPS=1 \
	WALG_BACKUP_COMPRESSION_METHOD=zstd WALG_BACKUP_FROM_REPLICA=false \
	USE_WALG_BACKUP=true USE_WALG_RESTORE=true WALE_LOG_DESTINATION=stderr \
	PGPORT="$PORT" BACKUP_NUM_TO_RETAIN=2 TMPDIR="$T/tmp"
pg_own "$T"
pg_stop "$SRC"
pg_conf "$SRC" "archive_command = 'envdir \"$ENVD\" $WALG_BIN wal-push \"%p\"'"
pg_start "$SRC" "$PORT"
psqlc "$PORT" "CREATE TABLE spilo_marks (n int, at timestamptz DEFAULT now())"

# wenv DIR ARGS...: walc under the envdir DIR, as Spilo's scripts run it (W_RC, W_OUT, W_ERR as
# wrun sets them)
wenv() {
	local dir=$1
	shift
	set +e
	envdir "$dir" "$WALC" "$@" >"$T/.w_out" 2>"$T/.w_err" </dev/null
	W_RC=$?
	set -e
	W_OUT=$(cat "$T/.w_out")
	W_ERR=$(cat "$T/.w_err")
	assert_no_sanitizer_reports "$T/.w_err"
}

# walc's own lines in the server's log (PostgreSQL's have two spaces after the level)
# (but for "archiving is behind", said once a minute at the most: under a sanitizer the burst of
# 100 segments below can leave the oldest waiting for seconds)
walc_lines() { grep -E "^(DEBUG|INFO|WARNING|ERROR): [0-9]{4}/" "$SRC.log" | grep -vc "archiving is behind" || true; }
walc_warnings() { grep -E "^(WARNING|ERROR): [0-9]{4}/" "$SRC.log" | grep -vc "archiving is behind" || true; }
archived_count() { psqlc "$PORT" "SELECT archived_count FROM pg_stat_archiver"; }

# ---- archive_command through the envdir: 100 segments --------------------------------------
lines0=$(walc_lines)
archived0=$(archived_count)
for _ in 1 2 3 4; do
	psqlc "$PORT" "DO \$\$ BEGIN FOR i IN 1..25 LOOP INSERT INTO spilo_marks (n) VALUES (i); PERFORM pg_switch_wal(); END LOOP; END \$\$"
	psqlc "$PORT" "CHECKPOINT" # recycles archived segments: 100 new ones need not be on disk at once
done
last=$(switch_wal "$PORT")
wait_archived "$SRC" "$last" 120
pushed=$(($(archived_count) - archived0))
[ "$pushed" -ge 100 ] || fail "only $pushed segments archived, expected 100"
lines=$(($(walc_lines) - lines0))
assert_eq 0 "$(walc_warnings)" "warning or error lines from walc in the server's log"
[ "$lines" -le "$pushed" ] || fail "$lines lines from walc for $pushed archived segments: more than one a segment"
ok "$pushed segments archived through Spilo's envdir: $lines lines from walc in the server's log, no warning"

# ---- the envdirs of the other variants of write_wale_environment ----------------------------
# loads DIR's settings as Spilo's scripts do: exit 0 and no warning (walc env reports names it
# does not know, and fails on a setting it refuses)
loads_quietly() { # WHAT DIR
	wenv "$2" env
	expect_rc 0 "$1: walc env under the envdir"
	assert_not_contains "$W_ERR" "WARNING" "$1: walc env under the envdir"
}
put_env "$T/env-aws" WALE_S3_PREFIX=s3://prod-eu-central-1-spilo/$BUCKET_PATH \
	WALG_S3_PREFIX=s3://prod-eu-central-1-spilo/$BUCKET_PATH AWS_REGION=eu-central-1 \
	AWS_INSTANCE_PROFILE=true WALG_S3_SSE=AES256 AWS_ROLE_ARN=arn:aws:iam::1:role/spilo \
	AWS_WEB_IDENTITY_TOKEN_FILE=/var/run/secrets/eks/token AWS_STS_REGIONAL_ENDPOINTS=regional \
	AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6 WALG_S3_CA_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
	USE_WALG_BACKUP=true USE_WALG_RESTORE=true WALG_BACKUP_FROM_REPLICA=true \
	WALG_BACKUP_COMPRESSION_METHOD=brotli WALG_COMPRESSION_METHOD=lz4 WALG_DELTA_MAX_STEPS=6 \
	WALG_DELTA_ORIGIN=LATEST WALG_UPLOAD_DISK_CONCURRENCY=2 WALG_DISK_RATE_LIMIT=10000000 \
	WALG_NETWORK_RATE_LIMIT=10000000 WALG_SENTINEL_USER_DATA='{"cluster":"demo"}' \
	WALG_PREVENT_WAL_OVERWRITE=true no_proxy=localhost http_proxy= https_proxy= \
	WALE_LOG_DESTINATION=stderr PGPORT=5432 BACKUP_NUM_TO_RETAIN=5 TMPDIR=/tmp
loads_quietly "AWS (instance profile, AES256)" "$T/env-aws"
put_env "$T/env-kms" WALG_S3_PREFIX=s3://b/$BUCKET_PATH AWS_REGION=eu-central-1 \
	WALG_S3_SSE=aws:kms WALG_S3_SSE_KMS_ID=arn:aws:kms:eu-central-1:1:key/k USE_WALG_BACKUP=true
loads_quietly "AWS (SSE-KMS)" "$T/env-kms"
# Spilo adds WALG_S3_SSE=AES256 to a KMS key id the user set alone: no server accepts a KMS
# key with AES256, and walc will not store without the encryption asked for
put_env "$T/env-kms-aes" WALG_S3_PREFIX=s3://b/$BUCKET_PATH WALG_S3_SSE=AES256 \
	WALG_S3_SSE_KMS_ID=arn:aws:kms:eu-central-1:1:key/k
wenv "$T/env-kms-aes" backup-list
expect_rc 1 "WALG_S3_SSE=AES256 with WALG_S3_SSE_KMS_ID"
assert_contains "$W_ERR" "S3_SSE_KMS_ID" "the refusal names the KMS key setting"
put_env "$T/env-gs" WALE_GS_PREFIX=gs://spilo-gs/$BUCKET_PATH WALG_GS_PREFIX=gs://spilo-gs/$BUCKET_PATH \
	GOOGLE_APPLICATION_CREDENTIALS=/var/secrets/google/key.json USE_WALG_BACKUP=true \
	USE_WALG_RESTORE=true WALG_BACKUP_COMPRESSION_METHOD=lz4 WALG_BACKUP_FROM_REPLICA=false \
	WALE_LOG_DESTINATION=stderr PGPORT=5432 BACKUP_NUM_TO_RETAIN=5 TMPDIR=/tmp
loads_quietly "GCS" "$T/env-gs"
put_env "$T/env-az" WALG_AZ_PREFIX=azure://spilo/$BUCKET_PATH AZURE_STORAGE_ACCOUNT=spilo \
	AZURE_STORAGE_ACCESS_KEY=c3BpbG8= WALG_AZURE_BUFFER_SIZE=33554432 WALG_AZURE_MAX_BUFFERS=3 \
	AZURE_ENVIRONMENT_NAME=AzurePublicCloud USE_WALG_BACKUP=true USE_WALG_RESTORE=true \
	WALG_BACKUP_FROM_REPLICA=false WALE_LOG_DESTINATION=stderr PGPORT=5432 TMPDIR=/tmp
loads_quietly "Azure" "$T/env-az"
ok "the AWS, SSE-KMS, GCS and Azure envdirs load without a warning; AES256 with a KMS key id is refused"

# ---- the backup CronJob: four backups, two chains -----------------------------------------
# spilo_backup: postgres_backup.sh's push, in this test's words (Spilo backs up the primary when
# WALG_BACKUP_FROM_REPLICA is false; the backup's method comes from WALG_BACKUP_COMPRESSION_METHOD)
spilo_backup() {
	assert_eq f "$(psqlc "$PORT" "SELECT pg_is_in_recovery()")" "the CronJob runs on the primary"
	set +e
	# shellcheck disable=SC2016 # expanded by the shell under envdir
	as_pg envdir "$ENVD" sh -c 'export WALG_COMPRESSION_METHOD=$WALG_BACKUP_COMPRESSION_METHOD PGHOST=$1; exec nice -n 5 "$2" backup-push "$3"' \
		sh "$T" "$WALG_BIN" "$SRC" >"$T/log/push.out" 2>"$T/log/push.err"
	local rc=$?
	set -e
	[ "$rc" = 0 ] || { cat "$T/log/push.err" >&2; fail "backup-push through the envdir: exit $rc"; }
	assert_not_contains "$(cat "$T/log/push.err")" "WARNING" "backup-push through the envdir"
	sed -n 's/.*Wrote backup with name \([^ ]*\).*/\1/p' "$T/log/push.err"
}
change() { psqlc "$PORT" "UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid % 7 = $1; INSERT INTO spilo_marks (n) VALUES ($1)"; }
B1=$(spilo_backup)
change 1
B2=$(spilo_backup)
change 2
B3=$(spilo_backup)
[[ $B2 == *_D_* && $B1 != *_D_* && $B3 != *_D_* ]] || fail "expected full, delta, full: $B1 $B2 $B3"
# the clone's target: after the third backup, before the fourth
change 3
dump_norm "$PORT" >"$T/at_target.sql"
TARGET=$(psqlc "$PORT" "SELECT now()") # PostgreSQL's own form: 2026-12-06 02:04:42.777878+00
sleep 1.2
change 4
B4=$(spilo_backup)
[[ $B4 == "${B4%%_D_*}_D_${B3#base_}" ]] || fail "the fourth backup must be a delta of $B3: $B4"
wenv "$ENVD" st ls -r "basebackups_005/$B1/tar_partitions/"
assert_match "$W_OUT" '\.tar\.zst' "WALG_BACKUP_COMPRESSION_METHOD=zstd: zstd partitions"
wenv "$ENVD" st ls wal_005/
assert_match "$W_OUT" '[0-9A-F]{24}\.lz4' "WAL archived with the default lz4"
ok "the CronJob's backup-push through the envdir: $B1 $B2 $B3 $B4"

# backup_records: name and modified of each backup, newest first, as Spilo cuts backup-list
backup_records() {
	as_pg envdir "$ENVD" "$WALG_BIN" backup-list 2>/dev/null |
		awk 'in_rows { print $1, $2 } /^(backup_)?name[[:space:]]*(last_)?modified/ { in_rows = 1 }' |
		sort -r -k2
}
mapfile -t RECS < <(backup_records)
assert_eq 4 "${#RECS[@]}" "backup records"
assert_eq "$B4" "${RECS[0]%% *}" "the newest record"
# the retention: BACKUP_NUM_TO_RETAIN backups and as many days; time moved 3 days on
KEEP=$(cat "$ENVD/BACKUP_NUM_TO_RETAIN")
NOW=$(($(date -u +%s) + 3 * 86400))
BEFORE=""
for ((i = KEEP - 1; i < ${#RECS[@]}; i++)); do
	modified=$(date -u +%s -d "${RECS[i]#* }") || fail "date cannot read the modified column: ${RECS[i]}"
	if (((NOW - modified) / 86400 >= 2)); then
		BEFORE=${RECS[i]%% *}
		break
	fi
done
assert_eq "$B3" "$BEFORE" "the oldest backup to keep"
wenv "$ENVD" delete before FIND_FULL "$BEFORE" --confirm
expect_rc 0 "delete before FIND_FULL $BEFORE --confirm"
mapfile -t RECS < <(backup_records)
assert_eq "$B4 $B3" "$(printf '%s\n' "${RECS[@]}" | cut -d' ' -f1 | tr '\n' ' ' | sed 's/ $//')" \
	"backups after the CronJob's retention"
ok "the CronJob's retention: delete before FIND_FULL $B3 kept $B3 and $B4"

# ---- WAL up to now, the primary's dump ------------------------------------------------------
change 5
END_SEG=$(switch_wal "$PORT")
wait_archived "$SRC" "$END_SEG" 60
dump_norm "$PORT" >"$T/primary.sql"

# restore_command.sh, in this test's words: a destination named after the file is Patroni
# fetching for pg_rewind (one file, WALG_DOWNLOAD_CONCURRENCY=1); WAL-E's paths are not used
cat >"$T/restore_command.sh" <<EOF
#!/bin/sh
f=\$1 p=\$2
case \$p in */"\$f") export WALG_DOWNLOAD_CONCURRENCY=1 ;; esac
[ "\$USE_WALG_RESTORE" = true ] || exit 1
exec '$WALG_BIN' wal-fetch "\$f" "\$p"
EOF
chmod 755 "$T/restore_command.sh"
# spilo_recovery DIR LINE...: DIR recovers through the envdir's restore_command, as Patroni
# configures it
spilo_recovery() {
	local dir=$1
	shift
	sed -i '/^port = /d; /^listen_addresses/d; /^unix_socket_directories/d; /^archive_command/d; /^archive_mode/d' \
		"$dir/postgresql.conf"
	printf '%s\n' "archive_mode = off" \
		"restore_command = 'envdir \"$ENVD\" $T/restore_command.sh \"%f\" \"%p\"'" \
		"recovery_target_timeline = 'latest'" "$@" >>"$dir/postgresql.conf"
	touch "$dir/recovery.signal"
	pg_own "$dir"
}

# ---- the replica bootstrap ------------------------------------------------------------------
START_SEG=$(as_pg envdir "$ENVD" "$WALG_BIN" backup-list 2>/dev/null |
	awk 'in_rows { print } /^(backup_)?name[[:space:]]*(last_)?modified/ { in_rows = 1 }' |
	sort -b -k2 | tail -n 1 | awk '{ print $3 }' | sed 's/_.*$//')
is_segment_name "$START_SEG" || fail "column 3 of backup-list is not a segment: '$START_SEG'"
printf -v START_LSN '%X/%X' $((16#${START_SEG:8:8})) $((16#${START_SEG:16:8} << 24))
behind=$(psqlc "$PORT" "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$START_LSN')::bigint")
[ "$behind" -gt 0 ] || fail "the primary is not past the newest backup's start $START_LSN"
wenv "$ENVD" backup-list --detail --json
"$PY" - "$W_OUT" "$B4" "$START_LSN" <<'PYEOF' || fail "start segment $START_SEG does not hold $B4's start"
import json, sys
rows, name, seg_lsn = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
hi, lo = (int(x, 16) for x in seg_lsn.split("/"))
start = [r for r in rows if r["backup_name"] == name][0]["start_lsn"]
assert (hi << 32 | lo) <= start < (hi << 32 | lo) + (16 << 20), (seg_lsn, start)
PYEOF
REPL=$T/replica
as_pg envdir "$ENVD" "$WALG_BIN" backup-fetch "$REPL" LATEST 2>"$T/log/replica-fetch.err" ||
	{ cat "$T/log/replica-fetch.err" >&2; fail "backup-fetch $REPL LATEST"; }
assert_contains "$(cat "$T/log/replica-fetch.err")" "$B4" "LATEST is the newest backup"
[ -d "$REPL/pg_wal" ] || as_pg mkdir "$REPL/pg_wal"
find "$REPL" -xtype l -delete
spilo_recovery "$REPL"
recovered_start "$REPL"
assert_dump_eq "$T/primary.sql" "$RPORT" "the replica bootstrapped from $B4"
pg_stop "$REPL"
ok "the replica bootstrap: start segment $START_SEG (LSN $START_LSN), backup-fetch LATEST, recovered to the primary's dump"

# ---- the clone by time ------------------------------------------------------------------------
cat >"$T/choose.py" <<'PYEOF'
# clone_with_wale.py's choice, in this test's words: backup-list's table from its header on,
# spaces made tabs, read as CSV; the newest backup modified before the target (dateutil)
import csv, re, subprocess, sys
from dateutil.parser import parse
target = parse(sys.argv[1])
assert target.tzinfo is not None, "the target needs a time zone"
text = subprocess.check_output(sys.argv[2:]).decode()
header = re.compile(r"^(backup_)?name\s+(last_)?modified\s+")
lines = []
for line in text.splitlines():
    if not lines and header.match(line):
        line = line.replace(" modified ", " last_modified ")
    if lines or header.match(line):
        lines.append("\t".join(line.split()))
newest = None
for row in csv.DictReader(lines, dialect="excel-tab"):
    when = parse(row["last_modified"])
    if when < target and (newest is None or when > newest[0]):
        newest = (when, row.get("name") or row["backup_name"])
print(newest[1] if newest else "")
PYEOF
CHOSEN=$(as_pg envdir "$ENVD" "$PY" "$T/choose.py" "$TARGET" "$WALG_BIN" backup-list)
assert_eq "$B3" "$CHOSEN" "the newest backup before $TARGET"
CLONE=$T/clone
as_pg envdir "$ENVD" "$WALG_BIN" backup-fetch "$CLONE" "$CHOSEN" 2>"$T/log/clone-fetch.err" ||
	{ cat "$T/log/clone-fetch.err" >&2; fail "backup-fetch $CLONE $CHOSEN"; }
spilo_recovery "$CLONE" "recovery_target_time = '$TARGET'" "recovery_target_action = 'promote'"
recovered_start "$CLONE"
assert_dump_eq "$T/at_target.sql" "$RPORT" "the clone of $CHOSEN recovered to $TARGET"
pg_stop "$CLONE"
ok "the clone by time: $CHOSEN chosen by dateutil, recovered to $TARGET"

# ---- pg_rewind's fetch through restore_command.sh ------------------------------------------
RW=$T/rewind
mkdir -p "$RW/pg_wal"
pg_own "$RW"
fetch_for_rewind() { # SEG: restore_command.sh with the destination pg_wal/SEG
	set +e
	as_pg envdir "$ENVD" "$T/restore_command.sh" "$1" "$RW/pg_wal/$1" 2>"$T/log/rewind.err"
	W_RC=$?
	set -e
}
fetch_for_rewind "$START_SEG"
expect_rc 0 "restore_command.sh $START_SEG pg_wal/$START_SEG"
assert_eq "$START_SEG" "$(find "$RW" -mindepth 1 -printf '%P\n' | grep -v '^pg_wal$' | sed 's#^pg_wal/##')" \
	"pg_rewind's fetch leaves that one file and nothing else (no prefetch directory)"
assert_eq 16777216 "$(stat -c %s "$RW/pg_wal/$START_SEG")" "the fetched segment's size"
NEXT=$(psqlc "$PORT" "SELECT pg_walfile_name(pg_current_wal_lsn())")
fetch_for_rewind "$NEXT"
expect_rc 74 "restore_command.sh of $NEXT, not archived yet"
assert_absent "$RW/pg_wal/$NEXT" "a segment not archived"
change 6
switch_wal "$PORT" >/dev/null
wait_archived "$SRC" "$NEXT" 60
fetch_for_rewind "$NEXT"
expect_rc 0 "restore_command.sh of $NEXT once archived (no miss remembered)"
assert_eq "$NEXT $START_SEG" "$(find "$RW/pg_wal" -mindepth 1 -printf '%P\n' | sort -r | tr '\n' ' ' | sed 's/ $//')" \
	"pg_wal after the second fetch"
ok "pg_rewind's fetch: exactly the file asked for, no prefetch, exit 74 then the file once archived"

# the prefetchers the recoveries started (detached, as WAL-G's) end on their own
for i in $(seq 100); do
	pgrep -f "wal-prefetch .*$T/" >/dev/null || break
	sleep 0.2
done
