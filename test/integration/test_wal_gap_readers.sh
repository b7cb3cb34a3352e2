#!/usr/bin/env bash
# A gap dropped past WALG_WAL_BACKLOG_MAX by wal-receive (issue 45 §1), and every reader that must
# name it rather than meet a hole: a cluster (1 MiB segments) streams its WAL to a file repository
# through wal-receive; a backup is taken; wal-receive stops while 12 segments are written, and
# restarted with WALG_WAL_BACKLOG_MAX=4mb it drops the oldest of them (an ERROR naming the first
# and last, the slot moved past them, the gap recorded before the next segment is stored) and
# stores the rest. Then:
#   - wal-show --detailed-json lists the gap (recorded_lost, status LOST_SEGMENTS) with a WARNING;
#   - backup-verify --wal of the backup reports the gap's segments as recorded lost (exit 1);
#   - backup-list --detail --json --recovery-windows: the backup's window ends at the gap, and
#     says so (ends_at_gap);
#   - wal-fetch of a segment in the gap: exit 74 with a WARNING naming the gap.
. "$(dirname "$0")/lib.sh"
it_setup wal_gap_readers
START=$SECONDS

mkdir -p "$T/repo"
pg_own "$T"
pg_init "$T/src" --wal-segsize=1
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = off" "max_wal_senders = 5" \
	"max_replication_slots = 5" "max_wal_size = 64MB" "min_wal_size = 2MB"
pg_start "$T/src" "$PORT"
ENV=(PGHOST="$T" PGPORT="$PORT" PGUSER=postgres PGDATABASE=postgres WALG_FILE_PREFIX="$T/repo"
	WALG_PG_WAL_SIZE=1 WALG_SLOTNAME=walg PGDATA="$T/src")
psqlc "$PORT" "CREATE TABLE t (id int, v text)"
rows() { # N: N rows, then a segment switch; prints the segment completed
	psqlc "$PORT" "INSERT INTO t SELECT g, repeat('x', 300) FROM generate_series(1, $1) g" >/dev/null
	switch_wal "$PORT"
}
# receive VAR=VALUE...: wal-receive in the background (RECV its pid) until the slot is active
receive() { wal_receive_start "$T/log/receive.log" "$@"; }
stored() { # SEG: wait until SEG is in the repository
	for _ in $(seq 1 300); do [ -e "$T/repo/wal_005/$1.lz4" ] && return 0; sleep 0.1; done
	cat "$T/log/receive.log"
	fail "$1 not stored"
}
stop_receive() {
	kill -TERM "$RECV"
	wait "$RECV_JOB" || fail "wal-receive ended with status $? on SIGTERM"
}

receive
wrun_pg "${ENV[@]}" -- backup-push "$T/src"
expect_rc 0 "backup-push"
BACKUP=$(sed -n 's/.*wrote backup \(base_[0-9A-F]*\) .*/\1/p' <<<"$W_ERR")
stored "$(rows 100)"
stop_receive
for _ in $(seq 1 11); do rows 2000 >/dev/null; done
END=$(rows 100)
receive WALG_WAL_BACKLOG_MAX=4mb
stored "$END"
stop_receive
errs=$(grep 'wal-receive: dropped WAL without archiving it' "$T/log/receive.log") ||
	{ cat "$T/log/receive.log"; fail "wal-receive dropped nothing past WALG_WAL_BACKLOG_MAX=4mb"; }
assert_contains "$errs" "over WALG_WAL_BACKLOG_MAX (4 MiB)" "the drop's ERROR says why"
FIRST=$(sed -n 's/.*archiving it: \([0-9A-F]*\) to .*/\1/p' <<<"$errs" | sort | head -n 1)
LAST=$(sed -n 's/.*archiving it: [0-9A-F]* to \([0-9A-F]*\) .*/\1/p' <<<"$errs" | sort | tail -n 1)
for s in "$FIRST" "$LAST"; do assert_absent "$T/repo/wal_005/$s.lz4" "dropped segment $s"; done
"$PY" - "$T/repo/walc_wal_lost.json" "$FIRST" "$LAST" <<'EOF' || fail "walc_wal_lost.json: $(cat "$T/repo/walc_wal_lost.json")"
import json, sys
g = json.load(open(sys.argv[1]))["gaps"]
assert g[0]["first_segment"] == sys.argv[2] and g[-1]["last_segment"] == sys.argv[3], g
assert all("replication slot walg" in x["reason"] for x in g), g
EOF
restart=$(psqlc "$PORT" "SELECT pg_walfile_name(restart_lsn) FROM pg_replication_slots WHERE slot_name = 'walg'")
[[ "$restart" > "$LAST" ]] || fail "the slot still holds the dropped WAL (restart at $restart, gap ends $LAST)"
ok "wal-receive dropped $FIRST to $LAST, recorded it, and moved the slot past it"

wrun "${ENV[@]}" -- wal-show --detailed-json
expect_rc 0 "wal-show"
assert_contains "$W_ERR" "$FIRST to $LAST are recorded lost" "wal-show's WARNING"
"$PY" - "$W_OUT" "$FIRST" "$LAST" <<'EOF' || fail "wal-show does not list the gap: $W_OUT"
import json, sys
tl = json.loads(sys.argv[1])[0]
assert tl["status"] == "LOST_SEGMENTS", tl
r = tl["recorded_lost"]
assert r and r[0]["first_segment"] == sys.argv[2] and r[-1]["last_segment"] == sys.argv[3], r
EOF

wrun "${ENV[@]}" -- backup-verify "$BACKUP" --wal
expect_rc 1 "backup-verify --wal across the gap"
assert_contains "$W_OUT$W_ERR" "wal_005/$FIRST: WAL segment missing: WAL segments $FIRST to $LAST are recorded lost" "backup-verify names the gap"

wrun "${ENV[@]}" -- backup-list --detail --json --recovery-windows
expect_rc 0 "backup-list"
"$PY" - "$W_OUT" "$BACKUP" "$FIRST" <<'EOF' || fail "the recovery window does not end at the gap: $W_OUT"
import json, sys
b = [x for x in json.loads(sys.argv[1]) if x["backup_name"] == sys.argv[2]][0]
w = b["recovery_window"]
assert sys.argv[3] in w["ends_at_gap"] and "recorded lost" in w["ends_at_gap"], w
seg = int(sys.argv[3][16:], 16)
hi, lo = w["to_lsn"].split("/")
assert (int(hi, 16) << 32 | int(lo, 16)) <= seg << 20, w
EOF

wrun "${ENV[@]}" -- wal-fetch "$FIRST" "$T/fetched"
expect_rc 74 "wal-fetch of a dropped segment"
assert_contains "$W_ERR" "$FIRST to $LAST are recorded lost" "wal-fetch's WARNING"
assert_absent "$T/fetched" "wal-fetch of a dropped segment"
ok "wal-show, backup-verify --wal, backup-list's windows and wal-fetch name the gap; $((SECONDS - START))s"
