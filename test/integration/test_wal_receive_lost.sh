#!/usr/bin/env bash
# wal-receive on an invalidated slot (issue 42 §5): the receiver stops, WAL goes on past
# max_slot_wal_keep_size and a checkpoint removes it (pg_replication_slots says wal_status
# lost). Restarted, wal-receive exits 1 naming the slot and the gap (the first missing segment,
# the last one at most), stores no WAL and records the gap (walc_wal_lost.json); wal-verify
# integrity shows it as lost (FAILURE), not as segments still on their way. WAL-G fails there
# too; before, walc streamed on from the server's position with an INFO line.
. "$(dirname "$0")/lib.sh"
it_setup wal_receive_lost

mkdir -p "$T/repo"
pg_own "$T"
pg_init "$T/src" --wal-segsize=1
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = off" "max_wal_senders = 5" \
	"max_replication_slots = 5" "max_slot_wal_keep_size = 3MB" "wal_keep_size = 0" \
	"max_wal_size = 32MB" "min_wal_size = 2MB"
pg_start "$T/src" "$PORT"
ENV=(PGHOST="$T" PGPORT="$PORT" PGUSER=postgres PGDATABASE=postgres WALG_FILE_PREFIX="$T/repo"
	WALG_PG_WAL_SIZE=1 WALG_SLOTNAME=walg)

rows() { # N: N rows, then a segment switch; prints the segment completed
	psqlc "$PORT" "INSERT INTO t SELECT g, repeat('x', 300) FROM generate_series(1, $1) g" >/dev/null
	switch_wal "$PORT"
}
psqlc "$PORT" "CREATE TABLE t (id int, v text)"
wal_receive_start "$T/receive.log"
wrun_pg "${ENV[@]}" -- backup-push "$T/src"
expect_rc 0 "backup-push"
seg=$(rows 1000)
for _ in $(seq 1 300); do [ -e "$T/repo/wal_005/$seg.lz4" ] && break; sleep 0.1; done
[ -e "$T/repo/wal_005/$seg.lz4" ] || { cat "$T/receive.log"; fail "$seg not stored"; }
kill -TERM "$RECV"
wait "$RECV_JOB" || fail "wal-receive ended with status $? on SIGTERM"
NEXT=$("$PY" -c 'import sys; n = sys.argv[1]; s = int(n[8:16], 16) * 4096 + int(n[16:], 16) + 1
print("%s%08X%08X" % (n[:8], s // 4096, s % 4096))' "$seg")

# The slot falls behind by more than max_slot_wal_keep_size; a checkpoint removes its WAL.
for _ in $(seq 1 8); do rows 2000 >/dev/null; done
psqlc "$PORT" "CHECKPOINT"
st=$(psqlc "$PORT" "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'walg'")
assert_eq lost "$st" "the slot's wal_status after the checkpoint"
before=$(find "$T/repo/wal_005" -type f | sort)

wrun_pg "${ENV[@]}" -- wal-receive
expect_rc 1 "wal-receive on an invalidated slot"
assert_eq 1 "$(nlines "$W_ERR")" "wal-receive on an invalidated slot: error lines ($W_ERR)"
assert_contains "$W_ERR" 'slot "walg" was invalidated' "the error names the slot"
assert_contains "$W_ERR" "from $NEXT to" "the error names the first missing segment"
assert_eq "$before" "$(find "$T/repo/wal_005" -type f | sort)" "objects stored by the refused receiver"
log "refused: $W_ERR"

pos=$(psqlc "$PORT" "SELECT pg_current_wal_lsn()")
wrun "${ENV[@]}" -- wal-verify integrity --timeline 1 --lsn "$pos" --json
expect_rc 1 "wal-verify integrity over the gap"
"$PY" - "$W_OUT" "$NEXT" <<'EOF' || fail "wal-verify does not show the gap: $W_OUT"
import json, sys
res, first = json.loads(sys.argv[1]), sys.argv[2]
i = res["integrity"]
assert i["status"] == "FAILURE", i
lost = [d for d in i["details"] if d["status"] == "MISSING_LOST"]
assert lost and lost[0]["start_segment"] == first, lost
EOF
ok "wal-receive stops on an invalidated slot naming it and the gap; wal-verify shows the gap"
