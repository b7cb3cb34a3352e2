#!/usr/bin/env bash
# A bounded archive backlog (issue 45 §1, acceptance 1): a cluster (16 MiB segments) archives
# through walc wal-push into Ceph RGW with WALG_WAL_BACKLOG_MAX=256mb; RGW is killed while
# pgbench writes as fast as it can.
#   - pg_wal never holds more than the bound plus one checkpoint's worth (max_wal_size);
#   - the dropped range is logged (an ERROR naming its first and last segment), counted (the
#     Pushgateway's walc_wal_dropped_segments_total for wal-push) and, once RGW is back and
#     before any later segment is stored, recorded in walc_wal_lost.json;
#   - wal-verify integrity reports it (FAILURE, MISSING_LOST from its first segment);
#   - backup-fetch --target-time to a commit inside the gap is refused naming it;
#   - a backup-push after RGW is back says it is the first restorable point after the gap,
#     and restored it recovers to the end of the archive (pg_dumpall equal to the source's).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup wal_backlog_max
START=$SECONDS
LIMIT_MB=256
MAX_WAL_MB=64
RATE=${BACKLOG_RATE:-60} # pgbench transactions a second, about 0.5 MiB of WAL each

s3_rgw_start
s3_mb walc
GW_PORT=$(s3_port 1)
pushgateway_start "$GW_PORT"

E=(WALG_S3_PREFIX=s3://walc/gap AWS_ENDPOINT="$S3_ENDPOINT" AWS_S3_FORCE_PATH_STYLE=true
	AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID"
	AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" WALG_WAL_BACKLOG_MAX=${LIMIT_MB}mb
	WALG_PUSHGATEWAY_URL="http://127.0.0.1:$GW_PORT" WALG_UPLOAD_CONCURRENCY=4)
walc_wrapper "${E[@]}"
SRC=$T/src
pg_init "$SRC"
PORT=$(free_port)
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_timeout = 0" \
	"archive_command = '$T/walc.sh wal-push %p 2>>$T/log/push.log'" \
	"max_wal_size = ${MAX_WAL_MB}MB" "min_wal_size = 32MB" "synchronous_commit = off" \
	"log_checkpoints = off"
pg_start "$SRC" "$PORT"
pgbench_init "$PORT" 1
psqlc "$PORT" "CREATE TABLE fill (id bigint, v text); CREATE TABLE marks (at timestamptz, seg text)"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push before the outage"
BEFORE=$(switch_wal "$PORT")
wait_archived "$SRC" "$BEFORE" 60

# ---- the outage: RGW killed while pgbench writes (unthrottled it fills the disk) -------------
cat >"$T/fill.sql" <<'EOF'
INSERT INTO fill SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, 2000) g;
EOF
pg_own "$T/fill.sql"
s3_rgw_kill
touch "$T/writing"
# short runs while $T/writing exists: each pgbench ends on its own
while [ -e "$T/writing" ]; do
	as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -T 2 -c 2 -R "$RATE" -f "$T/fill.sql" postgres \
		>>"$T/log/pgbench.log" 2>&1 || { echo failed >"$T/pgbench.failed"; break; }
done &
BENCH=$!
BG_PIDS+=("$BENCH")
# pg_wal's size twice a second; a commit each second whose time a recovery target can name
max=0 dropped_at=""
for i in $(seq 1 240); do
	# the WAL segments in pg_wal (all 16 MiB: removed ones are renamed for reuse, not cut)
	size=$(($(find "$SRC/pg_wal" -maxdepth 1 -regextype egrep -regex '.*/[0-9A-F]{24}' 2>/dev/null | wc -l) * 16777216))
	if [ "$size" -gt "$max" ]; then
		max=$size
		ls -l "$SRC/pg_wal" "$SRC/pg_wal/archive_status" >"$T/log/pg_wal-at-max.txt" 2>/dev/null || true
	fi
	if [ $((i % 2)) = 0 ]; then
		psqlc "$PORT" "INSERT INTO marks SELECT clock_timestamp(), pg_walfile_name(pg_current_wal_insert_lsn())" >/dev/null
	fi
	if [ -z "$dropped_at" ] && grep -q 'dropped WAL without archiving it' "$T/log/push.log" 2>/dev/null; then
		dropped_at=$i
	fi
	# once dropping has gone on for 5 s
	[ -n "$dropped_at" ] && [ $((i - dropped_at)) -ge 10 ] && break
	sleep 0.5
done
rm -f "$T/writing"
wait "$BENCH"
[ ! -e "$T/pgbench.failed" ] || { tail -n 20 "$T/log/pgbench.log" >&2; fail "pgbench failed"; }
[ -n "$dropped_at" ] || { tail -n 20 "$T/log/push.log" >&2; fail "nothing was dropped in 120 s of pgbench with RGW down"; }
bound=$(((LIMIT_MB + MAX_WAL_MB) * 1048576))
log "pg_wal at most $((max / 1048576)) MiB during the outage (bound $((bound / 1048576)) MiB)"
[ "$max" -le "$bound" ] || fail "pg_wal reached $((max / 1048576)) MiB, over WALG_WAL_BACKLOG_MAX + max_wal_size"
ok "pg_wal stayed within the bound plus max_wal_size while RGW was down"

# ---- RGW back: the gap recorded before anything after it is stored ---------------------------
s3_rgw_restart
CAUGHT=$(switch_wal "$PORT")
wait_archived "$SRC" "$CAUGHT" 120

# the ERROR lines: each names its first and last segment; together they are the gap
errs=$(grep 'dropped WAL without archiving it' "$T/log/push.log")
assert_match "$errs" '^ERROR: .* dropped WAL without archiving it: [0-9A-F]{24} to [0-9A-F]{24} \([0-9]+ segments?' "the drop's log line"
assert_contains "$errs" "over WALG_WAL_BACKLOG_MAX (256 MiB)" "the drop's log line says why"
FIRST=$(sed -n 's/.*archiving it: \([0-9A-F]*\) to .*/\1/p' <<<"$errs" | sort | head -n 1)
LAST=$(sed -n 's/.*archiving it: [0-9A-F]* to \([0-9A-F]*\) .*/\1/p' <<<"$errs" | sort | tail -n 1)
count=$(sed -n 's/.*archiving it: [0-9A-F]* to [0-9A-F]* (\([0-9]*\) segment.*/\1/p' <<<"$errs" | awk '{ s += $1 } END { print s }')
log "dropped $count segments, $FIRST to $LAST"
grep -q 'archiving is behind:' "$T/log/push.log" || fail "no WARNING about the backlog"
pushed=$(curl -sf "http://127.0.0.1:$GW_PORT/metrics" |
	awk '$1 ~ /^walc_wal_dropped_segments_total\{/ && $1 ~ /command="wal-push"/ { print $2 }')
assert_eq "$count" "$pushed" "walc_wal_dropped_segments_total on the Pushgateway"
ok "the drop is logged ($FIRST to $LAST) and counted ($count)"

awsc s3 cp --quiet s3://walc/gap/walc_wal_lost.json "$T/lost.json" || fail "walc_wal_lost.json is not in the bucket"
"$PY" - "$T/lost.json" "$FIRST" "$LAST" <<'EOF' || fail "walc_wal_lost.json does not hold the gap: $(cat "$T/lost.json")"
import json, sys
gaps = json.load(open(sys.argv[1]))["gaps"]
segs = lambda n: int(n[8:16], 16) * 256 + int(n[16:], 16)
a, b = segs(sys.argv[2]), segs(sys.argv[3])
covered = set()
for g in gaps:
    covered |= set(range(segs(g["first_segment"]), segs(g["last_segment"]) + 1))
    assert "WALG_WAL_BACKLOG_MAX" in g["reason"], g
assert set(range(a, b + 1)) <= covered, (gaps, sys.argv[2:])
EOF
# the segment after the gap was stored once the gap was recorded (RGW's time of the object,
# whole seconds, against the time walc recorded the gap, the same clock)
after=$("$PY" -c 'import sys; n = sys.argv[1]; s = int(n[8:16], 16) * 256 + int(n[16:], 16) + 1
print("%s%08X%08X" % (n[:8], s // 256, s % 256))' "$LAST")
first_t=$(awsc s3api head-object --bucket walc --key "gap/wal_005/$after.lz4" --query LastModified --output text) ||
	fail "$after, the segment after the gap, is not stored"
"$PY" - "$T/lost.json" "$LAST" "$first_t" <<'EOF' || fail "$after was stored ($first_t) before the gap was recorded: $(cat "$T/lost.json")"
import json, sys, datetime as d
gaps, last, stored = json.load(open(sys.argv[1]))["gaps"], sys.argv[2], sys.argv[3]
rec = min(g["recorded"] for g in gaps if g["first_segment"] <= last <= g["last_segment"])
t = lambda s: d.datetime.fromisoformat(s.replace("Z", "+00:00")[:19] + "+00:00")
sys.exit(0 if t(rec) <= t(stored) else 1)
EOF
pos=$(psqlc "$PORT" "SELECT pg_current_wal_lsn()")
wrun "${E[@]}" -- wal-verify integrity --timeline 1 --lsn "$pos" --json
expect_rc 1 "wal-verify integrity over the gap"
"$PY" - "$W_OUT" "$FIRST" <<'EOF' || fail "wal-verify does not report the gap: $W_OUT"
import json, sys
i = json.loads(sys.argv[1])["integrity"]
assert i["status"] == "FAILURE", i
lost = [d for d in i["details"] if d["status"] == "MISSING_LOST"]
assert lost and lost[0]["start_segment"] <= sys.argv[2] <= lost[0]["end_segment"], lost
EOF
ok "the gap is recorded in walc_wal_lost.json before $after was stored; wal-verify reports it"

# ---- a recovery target inside the gap is refused, naming it -----------------------------------
target=$(psqlc "$PORT" "SELECT at FROM marks WHERE seg > '$FIRST' AND seg < '$LAST' ORDER BY at LIMIT 1")
[ -n "$target" ] || fail "no commit was made inside the gap $FIRST to $LAST"
wrun_pg "${E[@]}" -- backup-fetch "$T/pitr" --target-time "$target"
expect_rc 1 "backup-fetch to $target, inside the gap"
assert_contains "$W_ERR" "recorded lost" "the refusal names the gap"
assert_contains "$W_ERR" "WALG_WAL_BACKLOG_MAX" "the refusal says why the WAL is gone"
assert_absent "$T/pitr/global/pg_control" "the refused restore"
ok "backup-fetch --target-time $target (inside the gap) is refused naming it"

# ---- a new backup: the first restorable point after the gap -----------------------------------
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push after the outage"
assert_contains "$W_ERR" "is the first restorable point after a gap in the archived WAL" "backup-push after the gap"
psqlc "$PORT" "INSERT INTO marks VALUES (now(), 'after the backup')" >/dev/null
source_archived_stopped
restore_start "$T/restored" LATEST "${E[@]}" -- "recovery_target_timeline = 'latest'"
assert_dump_eq "$T/source.sql" "$RPORT" "restored from the backup after the gap"
ok "the backup after the gap restores and recovers to the end of the archive; $((SECONDS - START))s"
