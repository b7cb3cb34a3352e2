#!/usr/bin/env bash
# A flipped byte inside a WAL record of an archived segment (issue 42 §3), stored in the clear
# (WALG_COMPRESSION_METHOD=none), with brotli (no checksum of its own) and re-compressed with
# lz4 and zstd (whose checksums cover only what they were given: a byte flipped before
# compression passes them). Undamaged, backup-verify --wal passes (records crossing segment
# boundaries are checked once both segments are read). In every case:
#   - backup-verify --wal exits 1 naming the segment's object and the record's LSN;
#   - backup-list --detail --json: the backup's recovery window ends before that record;
#   - backup-fetch --target-time after the record is refused naming the object and the LSN,
#     nothing written;
# and a --target-time before the record restores, recovers and matches the source's dump at
# that time. The record is found with pg_waldump; PostgreSQL itself would stop recovery at it.
. "$(dirname "$0")/lib.sh"
it_setup wal-damage

pitr_source WALG_COMPRESSION_METHOD=none

q() { psqlc "$PORT" "$1"; }
mark() {
	sleep 1
	q "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
	sleep 1
}
batch() { q "INSERT INTO t SELECT g, repeat('w', 200) FROM generate_series($1, $2) g"; }

q "CREATE TABLE t (i int, pad text)"
batch 1 1000
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" PGUSER=postgres -- backup-push "$SRC"
expect_rc 0 "backup-push"
batch 1001 2000
M1=$(mark)
dump_norm "$PORT" >"$T/at-m1.sql"
batch 2001 2001 # the commit after M1 where recovery to M1 stops, before the damage
L=$(q "SELECT pg_current_wal_insert_lsn()")
batch 2002 12000 # a few segments, records crossing from one into the next
M2=$(mark)
batch 4001 4100
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 60
pg_stop "$SRC"
SEG=$("$PY" -c 'import sys
hi, lo = sys.argv[1].split("/")
lsn = (int(hi, 16) << 32) | int(lo, 16)
print("00000001%08X%08X" % (lsn >> 32, (lsn & 0xFFFFFFFF) >> 20))' "$L")
[ -f "$R/wal_005/$SEG" ] || fail "segment $SEG (holding $L) not archived in the clear"
cp "$R/wal_005/$SEG" "$T/good"

# The first record at or after L that lies on one page and has data past its header.
mkdir -p "$T/wd"
cp "$T/good" "$T/wd/$SEG"
"$PGBIN/pg_waldump" -p "$T/wd" -s "$L" -n 40 >"$T/waldump.txt" 2>&1 || true
read -r LSN OFF < <("$PY" - "$T/waldump.txt" <<'EOF'
import re, sys
for line in open(sys.argv[1]):
    m = re.search(r"len \(rec/tot\): +\d+/ *(\d+), tx: +\d+, lsn: ([0-9A-F]+)/([0-9A-F]+)", line)
    if not m:
        continue
    tot, lsn = int(m.group(1)), (int(m.group(2), 16) << 32) | int(m.group(3), 16)
    if tot >= 64 and lsn % 8192 + tot <= 8192:
        print("%X/%X" % (lsn >> 32, lsn & 0xFFFFFFFF), lsn % (1 << 20) + 40)
        break
EOF
)
[ -n "${OFF:-}" ] || fail "no record to damage found by pg_waldump after $L: $(head -n 5 "$T/waldump.txt")"
cp "$T/good" "$T/bad"
flip_byte "$T/bad" "$OFF"
log "damaging the record at $LSN in $SEG (byte $OFF)"

# Undamaged, every record checks, across segment boundaries too.
wrun "${E[@]}" -- backup-verify LATEST --wal
expect_rc 0 "backup-verify --wal before the damage"

lsn_num() { "$PY" -c 'import sys; h, l = sys.argv[1].split("/"); print((int(h, 16) << 32) | int(l, 16))' "$1"; }
LSN_N=$(lsn_num "$LSN")

for codec in none brotli lz4 zstd; do
	obj=wal_005/$SEG$(ext_of "$codec")
	rm -f "$R/wal_005/$SEG" "$R/wal_005/$SEG".*
	wrun WALG_FILE_PREFIX="$R" WALG_COMPRESSION_METHOD="$codec" -- st put "$T/bad" "wal_005/$SEG"
	expect_rc 0 "[$codec] st put of the damaged segment"
	[ -f "$R/$obj" ] || fail "[$codec] $obj not stored"
	pg_own "$R"

	wrun "${E[@]}" -- backup-verify LATEST --wal
	expect_rc 1 "[$codec] backup-verify --wal of a damaged record"
	assert_match "$W_OUT" "PROBLEM $obj: .*WAL record at $LSN: record checksum mismatch" \
		"[$codec] backup-verify names the object and the LSN"
	assert_eq 1 "$(grep -c '^PROBLEM' <<<"$W_OUT")" "[$codec] problems backup-verify reports"

	wrun "${E[@]}" -- backup-list --detail --json --recovery-windows
	expect_rc 0 "[$codec] backup-list --detail --json --recovery-windows"
	assert_contains "$W_ERR" "$obj" "[$codec] backup-list warns naming the object"
	"$PY" - "$W_OUT" "$LSN_N" <<'EOF' || fail "[$codec] recovery window: $W_OUT"
import json, sys
rows, bad = json.loads(sys.argv[1]), int(sys.argv[2])
w = rows[0]["recovery_window"]
h, l = w["to_lsn"].split("/")
assert (int(h, 16) << 32) | int(l, 16) <= bad, (w, bad)
EOF

	rm -rf "$T/r2"
	wrun_pg "${E[@]}" -- backup-fetch "$T/r2" --target-time "$M2"
	expect_rc 1 "[$codec] a target past the damaged record"
	assert_contains "$W_ERR" "$obj is damaged" "[$codec] the refusal names the object"
	assert_contains "$W_ERR" "record at $LSN" "[$codec] the refusal names the LSN"
	assert_absent "$T/r2" "[$codec] nothing written"
	log "  [$codec] $(grep -o 'target .*' <<<"$W_ERR" | head -n 1)"
done
ok "a damaged record: backup-verify --wal, recovery windows and PITR stop at it, naming it (none, brotli, lz4, zstd)"

# Before the damage: restored, recovered to M1, the source's rows then.
rm -rf "$T/r1"
wrun_pg "${E[@]}" -- backup-fetch "$T/r1" --target-time "$M1"
expect_rc 0 "backup-fetch --target-time before the damaged record"
pg_conf "$T/r1" "archive_mode = off"
recovered_start "$T/r1"
assert_dump_eq "$T/at-m1.sql" "$RPORT" "recovery to a time before the damaged record"
pg_stop "$T/r1"
ok "a target before the damaged record restores and matches the source at that time"
