#!/usr/bin/env bash
# Retention keeps what was proven (issue 46 §1). Seven backups B1..B7, a mark row before each;
# a byte flipped in a partition of each of the newest five. backup-verify --all records each
# outcome with its backup (walc_verified.json), shown by backup-list --detail and pushed to a
# Pushgateway (the newest verified backup's finish time). `delete retain 2 --confirm` keeps B6,
# B7 (the count) and B2 (the newest verified, said in one line) with the WAL from B2's start
# on, deletes B1, B3, B4 and B5 and the WAL before B2; B2 restores and recovers to the end of
# the archive. On a copy taken before any verification, `delete retain 2 --verify --confirm`
# verifies B7 back to B2 first and leaves the same backups.
. "$(dirname "$0")/lib.sh"
it_setup retention-verified
. "$IT_DIR/retention_lib.sh"

SRC=$T/src
walc_archiving "$SRC" WALG_COMPRESSION_METHOD=none
psqlc "$PORT" "CREATE TABLE marks (i int); CREATE TABLE data AS SELECT generate_series(1, 20000) i"
B=()
for i in 1 2 3 4 5 6 7; do
	psqlc "$PORT" "INSERT INTO marks VALUES ($i); UPDATE data SET i = i + 1 WHERE i % 7 = $i"
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 0 "backup-push B$i"
	B[i]=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
done
psqlc "$PORT" "INSERT INTO marks VALUES (8)"
wait_archived "$SRC" "$(switch_wal "$PORT")" 60
dump_norm "$PORT" >"$T/expected.dump"
pg_stop "$SRC"
for i in 3 4 5 6 7; do
	part=$(find "$R/basebackups_005/${B[i]}/tar_partitions" -name 'part_*' -printf '%s %p\n' | sort -n | tail -n 1 | cut -d' ' -f2)
	read -r off _ < <("$PY" "$IT_DIR/restore_damage.py" largest "$part")
	flip_byte "$part" "$off"
done
cp -a "$R" "$T/unverified"
log "B1..B7: ${B[*]}; a byte flipped in B3..B7"

# backup-verify --all: each outcome kept with its backup, pushed as metrics
GW_PORT=$(free_port)
pushgateway_start "$GW_PORT"
wrun "${E[@]}" WALG_PUSHGATEWAY_URL="http://127.0.0.1:$GW_PORT" -- backup-verify --all
expect_rc 1 "backup-verify --all (five damaged backups)"
for i in 1 2; do assert_contains "$W_OUT" "backup ${B[i]}: OK" "backup-verify B$i"; done
for i in 3 4 5 6 7; do assert_contains "$W_OUT" "backup ${B[i]}: FAILED" "backup-verify B$i"; done
for i in 1 2 3 4 5 6 7; do
	[ -f "$R/basebackups_005/${B[i]}/walc_verified.json" ] || fail "B$i has no walc_verified.json"
done
gauge() { curl -sf "http://127.0.0.1:$GW_PORT/metrics" | awk -v n="$1" '$1 ~ "^"n"\\{" && $1 ~ /command="backup-verify"/ { print $2 }'; }
finish=$("$PY" -c 'import json,sys,datetime
t = json.load(open(sys.argv[1]))["FinishTime"]
print(int(datetime.datetime.fromisoformat(t[:19]).replace(tzinfo=datetime.timezone.utc).timestamp()))' \
	"$R/basebackups_005/${B[2]}_backup_stop_sentinel.json")
assert_eq "$finish" "$("$PY" -c 'import sys; print(int(float(sys.argv[1])))' "$(gauge walc_verified_backup_timestamp_seconds)")" \
	"pushed walc_verified_backup_timestamp_seconds (B2's finish time)"
assert_eq "1 5" "$(gauge walc_run_success) $(gauge walc_verify_problems)" "pushed walc_run_success and walc_verify_problems"
age=$(gauge walc_verified_backup_age_seconds)
"$PY" -c 'import sys; a = float(sys.argv[1]); sys.exit(0 if 0 <= a < 600 else 1)' "$age" ||
	fail "walc_verified_backup_age_seconds is $age"
kill "$GW_PID"
wait "$GW_PID" || true

wrun "${E[@]}" -- backup-list --detail
expect_rc 0 "backup-list --detail"
for i in 1 2 3 4 5 6 7; do
	want=passed
	[ "$i" -le 2 ] || want=failed
	assert_match "$(printf '%s\n' "$W_OUT" | grep "^${B[i]} ")" " $want@[0-9TZ:.-]+\$" "backup-list --detail's verified column for B$i"
done
wrun "${E[@]}" -- backup-list --detail --json
assert_eq "passed passed failed failed failed failed failed" \
	"$("$PY" -c 'import json,sys; print(" ".join(r["verified"]["result"] for r in json.loads(sys.argv[1])))' "$W_OUT")" \
	"backup-list --detail --json: verified.result"
ok "backup-verify --all kept each outcome (B1, B2 passed; B3..B7 failed), listed and pushed"

# remaining ONE: the backups whose sentinels ONE repository holds, in order
remaining() { for i in 1 2 3 4 5 6 7; do [ ! -f "$1/basebackups_005/${B[i]}_backup_stop_sentinel.json" ] || printf 'B%s ' "$i"; done; }
# wal_from REPO NAME: every WAL segment before NAME's start is gone, every one from it to the
# last archived is there
wal_from() {
	local start=${2:5:24} s have=0 last
	last=$(find "$1/wal_005" -name '0*' -printf '%f\n' | sed 's/\..*//' | grep -E '^[0-9A-F]{24}$' | sort -u | tail -n 1)
	for s in $(find "$1/wal_005" -name '0*' -printf '%f\n' | sed 's/\..*//' | grep -E '^[0-9A-F]{24}$' | sort -u); do
		[[ ! $s < $start ]] || fail "WAL segment $s before $2 was kept"
		have=$((have + 1))
	done
	[ "$have" -eq $((16#${last:16:8} - 16#${start:16:8} + 1)) ] ||
		fail "the WAL from $2 to $last is not continuous ($have segments)"
}

wrun "${E[@]}" -- delete retain 2
expect_rc 0 "delete retain 2 (dry run)"
assert_contains "$W_ERR" "keeping ${B[2]}: it is the newest verified backup" "the dry run says why"
for i in 1 3 4 5; do assert_contains "$W_OUT" "would delete basebackups_005/${B[i]}_backup_stop_sentinel.json" "dry run: B$i"; done
for i in 2 6 7; do assert_not_contains "$W_OUT" "${B[i]}_backup_stop_sentinel.json" "dry run: B$i"; done
wrun "${E[@]}" -- delete retain 2 --confirm
expect_rc 0 "delete retain 2 --confirm"
assert_eq "B2 B6 B7 " "$(remaining "$R")" "backups left"
wal_from "$R" "${B[2]}"
ok "delete retain 2: B2 (the newest verified) kept with the WAL from its start on; B1, B3, B4, B5 deleted"

restore_start "$T/restored" "${B[2]}" "${E[@]}" -- "recovery_target_timeline = 'latest'"
assert_dump_eq "$T/expected.dump" "$RPORT" "B2 recovered to the end of the archive"
pg_stop "$T/restored"
rm -rf "$T/restored"
ok "B2 restores and recovers to the end of the archive"

U=(WALG_FILE_PREFIX="$T/unverified" WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=none)
wrun "${U[@]}" -- delete retain 2 --verify --confirm
expect_rc 0 "delete retain 2 --verify --confirm"
for i in 7 6 5 4 3; do assert_contains "$W_OUT" "backup ${B[i]}: FAILED" "--verify: B$i"; done
assert_contains "$W_OUT" "backup ${B[2]}: OK" "--verify: B2"
assert_not_contains "$W_OUT" "backup ${B[1]}:" "--verify stops at the first backup that passes"
assert_eq "B2 B6 B7 " "$(remaining "$T/unverified")" "backups left after --verify"
wal_from "$T/unverified" "${B[2]}"
ok "delete retain 2 --verify: B7 back to B2 verified first, the same backups and WAL left"
