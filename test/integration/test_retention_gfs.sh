#!/usr/bin/env bash
# Grandfather-father-son retention with WAL thinning (issue 46 §2). A simulated year: nine real
# backups (B2, B4, B5 and B7 deltas, a mark row before each) whose start and finish times are
# rewritten to 2024-03-10, 2024-11-20, 2025-01-15, 2025-01-28, 2025-06-02, now - 20 days,
# now - 2 days, now - 1 day (B9: now). `delete retain --daily 2 --weekly 2 --monthly 3
# --yearly 2 --timezone America/New_York --pitr-window 10d`:
#   - the dry run prints the plan and deletes nothing; the backups it keeps are exactly those
#     retention_gfs.py (a model apart from walc) expects, with the bases of kept deltas;
#   - --confirm leaves exactly those, and exactly the WAL the plan printed: each kept backup
#     before the window its own range, the WAL from the window's first backup on;
#   - wal-verify integrity checks from the window's first backup, backup-verify --all --wal
#     passes (a backup before the window to its stop segment);
#   - every kept backup restores to its consistency point (its mark, no later one);
#   - a target time inside the window restores; targets before it (a time, an LSN) are
#     refused naming the window.
. "$(dirname "$0")/lib.sh"
it_setup retention-gfs
. "$IT_DIR/retention_lib.sh"

SRC=$T/src
walc_archiving "$SRC"
psqlc "$PORT" "CREATE TABLE marks (i int); CREATE TABLE data AS SELECT generate_series(1, 5000) i"
B=()
push() { # I ENV...: mark I, then a backup
	local i=$1
	shift
	psqlc "$PORT" "INSERT INTO marks VALUES ($i); UPDATE data SET i = i + 1 WHERE i % 9 = $i"
	wrun_pg "${E[@]}" "$@" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 0 "backup-push B$i"
	B[i]=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
}
FULL=(WALG_DELTA_MAX_STEPS=0)
DELTA=(WALG_DELTA_MAX_STEPS=3)
push 1 "${FULL[@]}"; push 2 "${DELTA[@]}"; push 3 "${FULL[@]}"; push 4 "${DELTA[@]}"
push 5 "${DELTA[@]}"; push 6 "${FULL[@]}"; push 7 "${DELTA[@]}"; push 8 "${FULL[@]}"
sleep 1.2
INSIDE=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ) # a target after B8, before mark 9
sleep 1.2
push 9 "${FULL[@]}"
psqlc "$PORT" "INSERT INTO marks VALUES (10)"
wait_archived "$SRC" "$(switch_wal "$PORT")" 60
pg_stop "$SRC"
NOW=$(date +%s)
ago() { date -u -d "@$((NOW - $1 * 86400))" +%Y-%m-%dT%H:%M:%SZ; }
FAKE=("2024-03-10T10:00:00Z" "2024-11-20T04:00:00Z" "2025-01-15T03:00:00Z" "2025-01-28T03:00:00Z"
	"2025-06-02T03:00:00Z" "$(ago 20)" "$(ago 2)" "$(ago 1)")
for i in 1 2 3 4 5 6 7 8; do "$PY" "$IT_DIR/retention_gfs.py" fake "$R" "${B[i]}" "${FAKE[i - 1]}"; done
for i in 2 4 5 7; do
	grep -q '"IsDelta":true\|"DeltaFrom":"base_' "$R/basebackups_005/${B[i]}_backup_stop_sentinel.json" || fail "B$i is not a delta"
done
name_of() { for i in 1 2 3 4 5 6 7 8 9; do [ "${B[i]}" != "$1" ] || echo "B$i"; done; }
log "B1..B9: ${B[*]}"

# the model's expectation, as Bn names
ARGS=(--daily 2 --weekly 2 --monthly 3 --yearly 2 --timezone America/New_York --pitr-window 10d)
model=$("$PY" "$IT_DIR/retention_gfs.py" expect "$R" "$NOW" America/New_York 2 2 3 2 $((10 * 86400)))
EXPECT=$(for n in $(printf '%s\n' "$model" | grep -v '^window'); do name_of "$n"; done | tr '\n' ' ')
WINDOW=$(name_of "$(printf '%s\n' "$model" | sed -n 's/^window //p')")
log "the model keeps $EXPECT; the window starts at $WINDOW"
[ "$WINDOW" = B6 ] || fail "set-up: the model's window starts at $WINDOW, not B6"

remaining() { for i in 1 2 3 4 5 6 7 8 9; do [ ! -f "$R/basebackups_005/${B[i]}_backup_stop_sentinel.json" ] || printf 'B%s ' "$i"; done; }
segments() { find "$R/wal_005" -name '0*' -printf '%f\n' | sed 's/\..*//' | grep -E '^[0-9A-F]{24}$' | sort -u; }
before=$(snapshot "$R")
wrun "${E[@]}" -- delete retain "${ARGS[@]}"
expect_rc 0 "the dry run"
assert_set "$before" "$(snapshot "$R")" "the dry run changes nothing"
printf '%s\n' "$W_OUT" >"$T/plan.txt"
KEPT=$(for i in 1 2 3 4 5 6 7 8 9; do awk -v b="${B[i]}" '$1 == b && $3 == "yes" { print b }' "$T/plan.txt"; done |
	while read -r n; do name_of "$n"; done | tr '\n' ' ')
assert_eq "$EXPECT" "$KEPT" "the backups the plan keeps (the model's)"
assert_contains "$(grep "^${B[5]} " "$T/plan.txt")" "yearly 2025" "B5's reason"
assert_contains "$(grep "^${B[3]} " "$T/plan.txt")" "base of ${B[4]}" "B3's reason"
assert_contains "$(grep "^${B[6]} " "$T/plan.txt")" "start of the point-in-time window (10d)" "B6's reason"
assert_contains "$W_OUT" "point-in-time recovery: from the end of ${B[6]}" "the window line"
# the WAL the plan prints: "FIRST to LAST" or "FIRST onward" per kept backup
last=$(segments | tail -n 1)
want_wal=$(awk '$3 == "yes" { if ($NF == "onward") print $(NF-1), "onward"; else print $(NF-2), $NF }' "$T/plan.txt" |
	while read -r a b; do [ "$b" = onward ] && b=$last; segments | awk -v a="$a" -v b="$b" '$1 >= a && $1 <= b'; done | sort -u)
ok "the dry run's plan keeps $KEPT (the model's), and says why"

wrun "${E[@]}" -- delete retain "${ARGS[@]}" --confirm
expect_rc 0 "delete retain --confirm"
assert_eq "$EXPECT" "$(remaining)" "backups left"
assert_set "$want_wal" "$(segments)" "the WAL left is what the plan printed"
[ -f "$R/walc_retention.json" ] || fail "no walc_retention.json recorded"
ok "--confirm left the planned backups and exactly the WAL the plan printed"

# the checks that read WAL know where it was thinned
lsn=$(printf '%X/%X' $((16#${last:8:8})) $((16#${last:16:8} * 1048576)))
wrun "${E[@]}" -- wal-verify integrity --timeline 1 --lsn "$lsn"
expect_rc 0 "wal-verify integrity after the thinning"
assert_contains "$W_ERR" "checking from backup ${B[6]}" "wal-verify integrity starts at the window"
wrun "${E[@]}" -- backup-verify --all --wal
expect_rc 0 "backup-verify --all --wal after the thinning"
ok "wal-verify integrity checks from the window's first backup; backup-verify --all --wal passes"

for b in $KEPT; do
	i=${b#B}
	restore_start "$T/r$i" "${B[i]}" "${E[@]}"
	assert_eq "$i" "$(psqlc "$RPORT" "SELECT max(i) FROM marks")" "B$i restored to its consistency point"
	pg_stop "$T/r$i"
	rm -rf "$T/r$i" "$T/r$i.log"
done
ok "every kept backup ($KEPT) restores to its consistency point"

rm -rf "$T/pitr"
wrun "${E[@]}" -- backup-fetch "$T/pitr" --target-time "$INSIDE" --restore-command "$T/walc.sh wal-fetch %f %p"
expect_rc 0 "backup-fetch --target-time inside the window"
sed -i '/^port = /d; /^unix_socket_directories/d; /^listen_addresses/d' "$T/pitr/postgresql.conf"
pg_own "$T/pitr"
recovered_start "$T/pitr"
assert_eq 8 "$(psqlc "$RPORT" "SELECT max(i) FROM marks")" "PITR inside the window recovered to its target"
pg_stop "$T/pitr"
for target in "--target-time 2025-08-01T00:00:00Z" "--target-time $(ago 30)" \
	"--target-lsn $("$PY" -c 'import json,sys; l=json.load(open(sys.argv[1]))["FinishLSN"] + 4096; print("%X/%X" % (l >> 32, l & 0xffffffff))' "$R/basebackups_005/${B[5]}_backup_stop_sentinel.json")"; do
	rm -rf "$T/out"
	# shellcheck disable=SC2086 # the option and its value
	wrun "${E[@]}" -- backup-fetch "$T/out" $target
	expect_rc 1 "backup-fetch $target (before the window)"
	assert_contains "$W_ERR" "outside the point-in-time window: delete retain --pitr-window 10d" "refusal of $target"
	assert_contains "$W_ERR" "end of backup ${B[6]}" "refusal of $target names the window's start"
	assert_absent "$T/out" "backup-fetch $target"
done
ok "PITR inside the window recovers; targets before it are refused naming the window"
