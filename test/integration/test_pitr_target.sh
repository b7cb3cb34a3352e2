#!/usr/bin/env bash
# Point-in-time recovery in one command (issue 18 §2): commits at known times, a named restore
# point, a transaction id and an LSN on timeline 1, two backups; then a recovery to the restore
# point promoted into timeline 2, archiving there. For each target (time, name, xid, LSN, and a
# time on timeline 2) `backup-fetch DEST --target-...` picks the backup, writes the recovery
# settings, and `pg_ctl start` alone gives exactly the rows of that point. Unreachable targets
# (after the archive's last commit, before every backup, across a gap in the archive) are
# refused with nothing written. backup-list --detail --json gives each backup's recovery window
# (checked against the commits made) and wal-show --restore-points lists the restore point.
. "$(dirname "$0")/lib.sh"
it_setup pitr-target

pitr_source

q() { psqlc "$PORT" "$1"; }
rows() { psqlc "$1" "SELECT coalesce(string_agg(i::text, ',' ORDER BY i), '') FROM t"; }
row() { q "INSERT INTO t VALUES ($1)"; }
# mark: a time after every commit so far and before the next one
mark() {
	sleep 1
	q "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
	sleep 1
}
push() {
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$1" PGUSER=postgres -- backup-push "$2"
	expect_rc 0 "backup-push"
}
archive_all() { # PORT DIR: switch, and wait until the switched-from segment is archived
	local seg
	seg=$(switch_wal "$1")
	wait_archived "$2" "$seg" 60
}

q "CREATE TABLE t (i int)"
row 1
push "$PORT" "$SRC"
for f in "$R"/basebackups_005/base_*_backup_stop_sentinel.json; do B1=$(basename "$f" _backup_stop_sentinel.json); done
row 2
row 3
M3=$(mark)
row 4
q "SELECT pg_create_restore_point('before five')" >/dev/null
X5=$(q "BEGIN; INSERT INTO t VALUES (5); SELECT txid_current(); COMMIT;" | head -n 1)
push "$PORT" "$SRC"
row 6
L6=$(q "SELECT pg_current_wal_insert_lsn()")
mark >/dev/null
row 7
archive_all "$PORT" "$SRC"
log "timeline 1: backup $B1, M3=$M3, restore point after 4, xid $X5 inserts 5, LSN $L6 after 6"

# recover TARGET-OPTION VALUE EXPECTED [LINE...]: fetch with the target (and $FETCH_EXTRA), start
# (not archiving, or as LINEs say), compare the rows
recover() {
	local opt=$1 value=$2 want=$3 dir=$T/r-${1#--target-}
	shift 3
	rm -rf "$dir"
	# shellcheck disable=SC2086 # one option or none
	wrun_pg "${E[@]}" -- backup-fetch "$dir" "$opt" "$value" ${FETCH_EXTRA:-}
	expect_rc 0 "backup-fetch $opt $value"
	pg_conf "$dir" "archive_mode = off" "$@"
	grep -q "^recovery_target_${opt#--target-} = " "$dir/postgresql.auto.conf" ||
		fail "$opt: no recovery_target_${opt#--target-} in postgresql.auto.conf"
	[ -f "$dir/recovery.signal" ] || fail "$opt: no recovery.signal"
	RPORT=$(free_port)
	pg_start "$dir" "$RPORT"
	wait_not_in_recovery "$RPORT" 120
	assert_eq "$want" "$(rows "$RPORT")" "rows after recovery to $opt $value"
	PICKED=$(grep -o 'backup base_[0-9A-F]*' <<<"$W_ERR" | head -n 1)
}

recover --target-time "$M3" "1,2,3"
assert_eq "backup $B1" "$PICKED" "--target-time before the second backup picks the first"
pg_stop "$T/r-time"
# The same instant as PostgreSQL prints it (now()'s format, a zone of +05:30): the same rows.
M3PG=$(q "SET TimeZone = 'Asia/Kolkata'; SELECT '$M3'::timestamptz")
[[ $M3PG == *" "*+05:30 ]] || fail "PostgreSQL printed $M3 as $M3PG"
recover --target-time "$M3PG" "1,2,3"
assert_eq "backup $B1" "$PICKED" "--target-time in PostgreSQL's format picks the same backup"
pg_stop "$T/r-time"
recover --target-xid "$X5" "1,2,3,4,5"
pg_stop "$T/r-xid"
recover --target-lsn "$L6" "1,2,3,4,5,6"
[ "$PICKED" != "backup $B1" ] || fail "--target-lsn after the second backup picked the first"
pg_stop "$T/r-lsn"
ok "time, xid and LSN targets on timeline 1: exactly the rows of each point"

# The restore point, promoted: timeline 2, archiving into the same repository.
FETCH_EXTRA=--keep-archiving recover --target-name "before five" "1,2,3,4" "archive_mode = on" \
	"archive_command = '$T/walc.sh wal-push %p 2>>$T/log/push2.log'"
N=$T/r-name
psqlc "$RPORT" "INSERT INTO t VALUES (40)"
M40=$(sleep 1; psqlc "$RPORT" "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"; sleep 1)
psqlc "$RPORT" "INSERT INTO t VALUES (41)"
M41=$(psqlc "$RPORT" "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
archive_all "$RPORT" "$N"
pg_stop "$N"
compgen -G "$R/wal_005/00000002.history*" >/dev/null || fail "no 00000002.history archived"
ok "the restore point 'before five' recovered and promoted to timeline 2"

# Recovery windows: the first backup recovers through timeline 2 up to the commit of 41; the
# second ended on timeline 1 after the switch point, off the path recovery follows.
wrun "${E[@]}" -- backup-list --detail --json --recovery-windows
expect_rc 0 "backup-list --detail --json --recovery-windows"
"$PY" - "$W_OUT" "$B1" "$M40" "$M41" <<'EOF' || fail "backup-list recovery windows: $W_OUT"
import json, sys
rows, b1, m40, m41 = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
win = {r["backup_name"]: r["recovery_window"] for r in rows}
w = win[b1]
assert w["timeline"] == 2 and w["from_lsn"] and w["to_lsn"], w
# RFC 3339 UTC strings of the same form compare as times
assert m40 < w["to_time"] < m41, (m40, w["to_time"], m41)
others = [n for n in win if n != b1]
assert len(others) == 1 and win[others[0]] is None, win
EOF
ok "backup-list --detail --json --recovery-windows: the first backup recovers to the commit of 41, the second is off the path"
wrun "${E[@]}" -- backup-list --detail --json
assert_not_contains "$W_OUT" recovery_window "backup-list --detail --json reads no WAL unless asked"
wrun "${E[@]}" -- wal-show --restore-points
expect_rc 0 "wal-show --restore-points"
assert_match "$W_OUT" "before five +[0-9T:.Z-]+ +[0-9A-F]+/[0-9A-F]+ +1" "wal-show --restore-points"
ok "wal-show --restore-points lists 'before five' on timeline 1"

recover --target-time "$M40" "1,2,3,4,40"
assert_eq "backup $B1" "$PICKED" "a time on timeline 2 picks the backup before the switch"
pg_stop "$T/r-time"
ok "a time after the timeline switch: the rows of timeline 2 at that time"

# refused DESCRIPTION NEEDLE OPTION VALUE: exit 1, one line with NEEDLE, nothing written
refused() {
	local what=$1 needle=$2
	shift 2
	rm -rf "$T/r-no"
	wrun_pg "${E[@]}" -- backup-fetch "$T/r-no" "$@"
	expect_rc 1 "$what"
	assert_contains "$W_ERR" "$needle" "$what"
	assert_absent "$T/r-no" "$what: the destination"
}
refused "a time after the last commit" "is not reachable" --target-time "2099-01-01T00:00:00Z"
refused "a restore point never made" "is not reachable" --target-name "no such point"
refused "a time before every backup" "before the end of every backup" --target-time "2001-01-01T00:00:00Z"
refused "a bad time" "--target-time" --target-time "yesterday"
refused "a time without a zone" "has no time zone" --target-time "2026-01-01 00:00:00"
refused "two targets" "one recovery target" --target-xid "$X5" --target-name "before five"
# A gap: the first backup's start segment taken out of the archive (the segment after it may
# hold timeline 2's switch, and then recovery reads timeline 2's copy of it).
gapseg=${B1#base_}
mv "$R/wal_005/$gapseg".* "$T/"
refused "a gap in the archive" "$gapseg is missing" --target-time "$M3"
ok "unreachable targets refused naming the reason, nothing written"
