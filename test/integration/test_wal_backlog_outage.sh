#!/usr/bin/env bash
# An archive outage without a bound (issue 45 §1, acceptance 2): PostgreSQL 15 archives through
# the walc_archive module and `walc daemon` into Ceph RGW, without WALG_WAL_BACKLOG_MAX; RGW is
# killed while pgbench writes, then started again.
#   - during the outage the daemon's /metrics shows the backlog growing (walc_wal_backlog_bytes,
#     _files, _oldest_seconds) and its log has the WARNING that archiving is behind;
#   - nothing is dropped: once RGW is back every segment PostgreSQL wrote is in the bucket, no
#     gap is recorded, walc_wal_dropped_segments_total stays 0 and the backlog empties.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup wal_backlog_outage
START=$SECONDS

plain_make -s -C "$ROOT" archive-module-install >"$T/log/module.log" 2>&1 ||
	{ cat "$T/log/module.log"; fail "installing walc_archive"; }
s3_rgw_start
s3_mb walc
SRC=$T/src
SOCK=$T/walc.sock
MPORT=$(s3_port 1)
pg_init "$SRC"
PORT=$(free_port)
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_library = 'walc_archive'" \
	"walc_archive.socket = '$SOCK'" "max_wal_size = 64MB" "synchronous_commit = off"
as_pg env PGDATA="$SRC" WALG_S3_PREFIX=s3://walc/outage AWS_ENDPOINT="$S3_ENDPOINT" \
	AWS_S3_FORCE_PATH_STYLE=true AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" \
	AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" WALG_UPLOAD_CONCURRENCY=4 \
	WALG_METRICS_ADDRESS="127.0.0.1:$MPORT" ASAN_OPTIONS="$ASAN_OPTIONS" \
	"$WALC_PG" daemon "$SOCK" >>"$T/log/daemon.log" 2>&1 &
daemon_wait "$WALC_PG" "$SOCK" "$T/log/daemon.log"
pg_start "$SRC" "$PORT"
pgbench_init "$PORT" 1
psqlc "$PORT" "CREATE TABLE fill (id bigint, v text)"
wait_archived "$SRC" "$(switch_wal "$PORT")" 60

# metric NAME: the daemon's current value of NAME
metric() { curl -sf "http://127.0.0.1:$MPORT/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
assert_eq 0 "$(metric walc_wal_backlog_limit_bytes)" "walc_wal_backlog_limit_bytes without a bound"

cat >"$T/fill.sql" <<'SQL'
INSERT INTO fill SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, 2000) g;
SQL
pg_own "$T/fill.sql"
FIRST=$(psqlc "$PORT" "SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
s3_rgw_kill
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -T 8 -c 2 -R 40 -f "$T/fill.sql" postgres \
	>"$T/log/pgbench.log" 2>&1 &
BENCH=$!
max_bytes=0 max_files=0 max_age=0
while kill -0 "$BENCH" 2>/dev/null; do
	sleep 0.5
	b=$(metric walc_wal_backlog_bytes) f=$(metric walc_wal_backlog_files) a=$(metric walc_wal_backlog_oldest_seconds)
	[ "${b:-0}" -le "$max_bytes" ] || max_bytes=$b
	[ "${f:-0}" -le "$max_files" ] || max_files=$f
	[ "${a:-0}" -le "$max_age" ] || max_age=$a
done
wait "$BENCH" || fail "pgbench (see $T/log/pgbench.log)"
LAST=$(switch_wal "$PORT")
log "backlog during the outage: at most $((max_bytes / 1048576)) MiB in $max_files files, the oldest waiting ${max_age} s"
[ "$max_files" -ge 5 ] || fail "the daemon's /metrics showed at most $max_files files waiting"
[ "$max_bytes" -ge $((5 * 16777216)) ] || fail "the daemon's /metrics showed at most $max_bytes bytes waiting"
[ "$max_age" -ge 2 ] || fail "walc_wal_backlog_oldest_seconds stayed at $max_age"
grep -q 'WARNING: .* archiving is behind: .* nothing bounds it (WALG_WAL_BACKLOG_MAX is not set)' "$T/log/daemon.log" ||
	{ tail -n 20 "$T/log/daemon.log" >&2; fail "no WARNING that archiving is behind in the daemon's log"; }
ok "the outage's backlog showed on /metrics and in a WARNING"

s3_rgw_restart
wait_archived "$SRC" "$LAST" 120
awsc s3 ls s3://walc/outage/wal_005/ | awk '{ print $4 }' >"$T/objects.txt"
"$PY" - "$FIRST" "$LAST" "$T/objects.txt" <<'EOF' || fail "segments missing from the bucket after the outage"
import sys
seg = lambda n: int(n[8:16], 16) * 256 + int(n[16:24], 16)
have = {seg(o) for o in open(sys.argv[3]).read().split() if len(o.split(".")[0]) == 24}
want = set(range(seg(sys.argv[1]), seg(sys.argv[2]) + 1))
missing = sorted(want - have)
assert not missing, "missing: %s" % missing
EOF
if awsc s3 ls s3://walc/outage/walc_wal_lost.json >/dev/null 2>&1; then fail "a gap was recorded without a bound"; fi
! grep -q 'dropped WAL' "$T/log/daemon.log" || fail "the daemon dropped WAL without a bound"
assert_eq 0 "$(metric walc_wal_dropped_segments_total)" "walc_wal_dropped_segments_total"
for _ in $(seq 1 40); do [ "$(metric walc_wal_backlog_files)" -le 1 ] && break; sleep 0.25; done
[ "$(metric walc_wal_backlog_files)" -le 1 ] || fail "the backlog did not empty: $(metric walc_wal_backlog_files) files"
ok "every segment from $FIRST to $LAST archived once RGW was back, nothing dropped; $((SECONDS - START))s"
