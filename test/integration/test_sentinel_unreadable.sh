#!/usr/bin/env bash
# A sentinel that cannot be read stops neither PITR nor retention (issue 42 §4). Backups B0 <
# B1 < B2 < B3 of one cluster; B2's sentinel is cut short (not JSON) and B3's has lost its LSN.
# Each command skips them with one WARNING naming them: LATEST is B1; a --target-time after B3
# restores from B1 and recovers to exactly the rows of the target; `delete retain 1 --confirm`
# keeps B1 (the newest readable backup), deletes B0, and leaves every object of B2 and B3.
. "$(dirname "$0")/lib.sh"
it_setup sentinel-unreadable

SRC=$T/src
walc_archiving "$SRC"
psqlc "$PORT" "CREATE TABLE t (i int)"

B=()
for i in 0 1 2 3; do
	psqlc "$PORT" "INSERT INTO t VALUES ($i)"
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 0 "backup-push B$i"
	B+=("$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')")
done
psqlc "$PORT" "INSERT INTO t VALUES (4)"
sleep 1
M=$(psqlc "$PORT" "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
sleep 1
psqlc "$PORT" "INSERT INTO t VALUES (5)"
wait_archived "$SRC" "$(switch_wal "$PORT")" 60
pg_stop "$SRC"

sentinel() { echo "$R/basebackups_005/$1_backup_stop_sentinel.json"; }
head -c 40 "$(sentinel "${B[2]}")" >"$T/cut" && cat "$T/cut" >"$(sentinel "${B[2]}")"
"$PY" - "$(sentinel "${B[3]}")" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
del doc["LSN"]
json.dump(doc, open(sys.argv[1], "w"))
EOF
objects_of() { (cd "$R/basebackups_005" && find . -path "./$1*" -type f | sort); }
kept2=$(objects_of "${B[2]}")
kept3=$(objects_of "${B[3]}")
log "B0..B3: ${B[*]}; ${B[2]} cut short, ${B[3]} without LSN"

# warned WHAT: one WARNING naming each unreadable backup in the last run's stderr
warned() {
	assert_match "$W_ERR" "WARNING: .*skipping backup ${B[2]}: its sentinel cannot be read \(.*invalid JSON" "$1: ${B[2]}"
	assert_match "$W_ERR" "WARNING: .*skipping backup ${B[3]}: its sentinel cannot be read \(.*missing LSN" "$1: ${B[3]}"
}

wrun "${E[@]}" -- backup-fetch "$T/latest" LATEST
expect_rc 0 "backup-fetch LATEST"
assert_contains "$W_ERR" "backup ${B[1]} restored into" "LATEST is the newest readable backup"
assert_match "$W_ERR" "skipping backup ${B[3]}: " "backup-fetch LATEST names the skipped newest"
ok "LATEST: ${B[1]}, the unreadable newer ones named"

wrun_pg "${E[@]}" -- backup-fetch "$T/pitr" --target-time "$M"
expect_rc 0 "backup-fetch --target-time"
warned "PITR"
assert_contains "$W_ERR" "backup ${B[1]}, the archived WAL reaches it" "PITR picks the newest readable backup"
pg_conf "$T/pitr" "archive_mode = off"
RPORT=$(free_port)
pg_start "$T/pitr" "$RPORT"
wait_not_in_recovery "$RPORT" 120
assert_eq "0,1,2,3,4" "$(psqlc "$RPORT" "SELECT string_agg(i::text, ',' ORDER BY i) FROM t")" \
	"rows at the target"
pg_stop "$T/pitr"
ok "PITR to a time after ${B[3]}: from ${B[1]}, exactly the rows of the target"

wrun "${E[@]}" -- delete retain 1 --confirm
expect_rc 0 "delete retain 1 --confirm"
warned "delete"
[ -f "$(sentinel "${B[1]}")" ] || fail "delete retain 1 deleted ${B[1]}, the newest readable backup"
[ ! -e "$(sentinel "${B[0]}")" ] || fail "delete retain 1 kept ${B[0]}"
[ -z "$(objects_of "${B[0]}")" ] || fail "objects of ${B[0]} remain"
assert_eq "$kept2" "$(objects_of "${B[2]}")" "every object of ${B[2]} (cut sentinel)"
assert_eq "$kept3" "$(objects_of "${B[3]}")" "every object of ${B[3]} (sentinel without LSN)"
ok "delete retain 1: ${B[0]} deleted, ${B[1]} kept, the unreadable backups untouched"
