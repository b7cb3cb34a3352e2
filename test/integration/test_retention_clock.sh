#!/usr/bin/env bash
# Backups are ordered by WAL position, not by the clocks of the hosts that took them (issue 42
# §5). B1 is taken, then given what a host whose clock runs 400 days ahead writes (start and
# finish times in its sentinel and metadata.json, the sentinel's modification time); B2 is
# taken after it with a true clock. backup-list ends with B2, LATEST is B2, and
# `delete retain 1 --confirm` deletes B1 and the WAL before B2, keeps B2, which restores and
# recovers to the end of the archive.
. "$(dirname "$0")/lib.sh"
it_setup retention-clock

SRC=$T/src
walc_archiving "$SRC"
psqlc "$PORT" "CREATE TABLE t AS SELECT generate_series(1, 1000) i"

push() {
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 0 "backup-push"
	PUSHED=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
}
push
B1=$PUSHED
"$PY" - "$R/basebackups_005/$B1" <<'EOF'
import datetime, json, os, sys
base = sys.argv[1]
ahead = datetime.timedelta(days=400)
def skew(text):
    t = datetime.datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S") + ahead
    return t.strftime("%Y-%m-%dT%H:%M:%S") + text[19:]
for path, keys in ((base + "_backup_stop_sentinel.json", ("StartTime", "FinishTime")),
                   (base + "/metadata.json", ("start_time", "finish_time"))):
    doc = json.load(open(path))
    for k in keys:
        doc[k] = skew(doc[k])
    json.dump(doc, open(path, "w"), separators=(",", ":"))
    future = os.stat(path).st_mtime + ahead.total_seconds()
    os.utime(path, (future, future))
EOF
psqlc "$PORT" "UPDATE t SET i = -i WHERE i % 2 = 0"
push
B2=$PUSHED
psqlc "$PORT" "INSERT INTO t VALUES (5000)"
wait_archived "$SRC" "$(switch_wal "$PORT")" 60
dump_norm "$PORT" >"$T/expected.dump"
pg_stop "$SRC"
skewed=$(sed -n 's/.*"StartTime":"\([0-9]*\)-.*/\1/p' "$R/basebackups_005/${B1}_backup_stop_sentinel.json")
[ "$skewed" -gt "$(date -u +%Y)" ] || fail "set-up: $B1's start time is not 400 days ahead"
log "B1 $B1 (clock 400 days ahead), B2 $B2"

wrun "${E[@]}" -- backup-list
expect_rc 0 "backup-list"
assert_eq "$B2" "$(printf '%s\n' "$W_OUT" | tail -n 1 | cut -d' ' -f1)" "backup-list's last row"
wrun "${E[@]}" -- backup-list --detail --json
expect_rc 0 "backup-list --detail --json"
assert_eq "$B1 $B2" "$("$PY" -c 'import json,sys; print(" ".join(r["backup_name"] for r in json.loads(sys.argv[1])))' "$W_OUT")" \
	"backup-list --detail --json order"
ok "backup-list: $B1 then $B2, whatever $B1's times say"

wrun "${E[@]}" -- delete retain 1
expect_rc 0 "delete retain 1 (dry run)"
assert_contains "$W_OUT" "would delete basebackups_005/${B1}_backup_stop_sentinel.json" "the dry run"
assert_not_contains "$W_OUT" "$B2" "the dry run"
wrun "${E[@]}" -- delete retain 1 --confirm
expect_rc 0 "delete retain 1 --confirm"
[ ! -e "$R/basebackups_005/${B1}_backup_stop_sentinel.json" ] || fail "$B1 was kept"
[ -f "$R/basebackups_005/${B2}_backup_stop_sentinel.json" ] || fail "$B2, the newest, was deleted"
for f in "$R"/wal_005/0*; do
	n=$(basename "$f")
	n=${n%%.*}
	is_segment_name "$n" || continue
	[[ ! $n < ${B2:5:24} ]] || fail "WAL segment $n before $B2 was kept"
done
compgen -G "$R/wal_005/${B2:5:24}*" >/dev/null || fail "$B2's first segment was deleted"
ok "delete retain 1: $B1 (the skewed one) deleted with the WAL before $B2; $B2 kept"

restore_start "$T/restored" LATEST "${E[@]}" -- "recovery_target_timeline = 'latest'"
assert_contains "$W_ERR" "backup $B2 restored into" "LATEST after retention"
assert_dump_eq "$T/expected.dump" "$RPORT" "$B2 recovered to the end of the archive"
pg_stop "$T/restored"
ok "LATEST is $B2 and recovers to the end of the archive"
