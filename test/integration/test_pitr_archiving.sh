#!/usr/bin/env bash
# A PITR restore never archives into the repository it came from (issue 42 §1). A cluster
# archiving into a walc repository, one backup, a target time after it. backup-fetch
# --target-time restores; the restored directory is started as it is (the backup's
# archive_command still names the production repository): it promotes into timeline 2, takes
# writes and WAL switches, and the repository is exactly as it was (nothing of timeline 2).
# Restored again with --keep-archiving, it archives its timeline 2 into the repository. A plain
# restore says that its configuration archives.
. "$(dirname "$0")/lib.sh"
it_setup pitr-archiving

SRC=$T/src
walc_archiving "$SRC"

psqlc "$PORT" "CREATE TABLE t (i int); INSERT INTO t VALUES (1)"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push"
psqlc "$PORT" "INSERT INTO t VALUES (2)"
sleep 1
M=$(psqlc "$PORT" "SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
sleep 1
psqlc "$PORT" "INSERT INTO t VALUES (3)"
wait_archived "$SRC" "$(switch_wal "$PORT")" 60
pg_stop "$SRC"

listing() { (cd "$R" && find . -type f | sort); }

# restored DIR [OPTION]: backup-fetch DIR --target-time M [OPTION], start it as restored,
# wait for the promotion, write and switch WAL twice; the port is RPORT
restored() {
	local dir=$1
	shift
	wrun_pg "${E[@]}" -- backup-fetch "$dir" --target-time "$M" "$@"
	expect_rc 0 "backup-fetch --target-time $*"
	RPORT=$(free_port)
	pg_start "$dir" "$RPORT"
	wait_not_in_recovery "$RPORT" 120
	assert_eq "1,2" "$(psqlc "$RPORT" "SELECT string_agg(i::text, ',' ORDER BY i) FROM t")" \
		"rows at the target"
	assert_eq 2 "$(psqlc "$RPORT" "SELECT timeline_id FROM pg_control_checkpoint()")" \
		"the restored cluster's timeline after promotion"
	psqlc "$RPORT" "INSERT INTO t SELECT generate_series(10, 5000)"
	SEG1=$(switch_wal "$RPORT")
	psqlc "$RPORT" "INSERT INTO t VALUES (42)"
	SEG2=$(switch_wal "$RPORT")
	psqlc "$RPORT" "CHECKPOINT"
}

before=$(listing)
restored "$T/r1"
assert_contains "$W_ERR" "archiving turned off in $T/r1/postgresql.auto.conf" \
	"backup-fetch says archiving is off"
assert_contains "$W_ERR" "--keep-archiving" "backup-fetch says how to keep archiving"
grep -q "^archive_mode = 'off'" "$T/r1/postgresql.auto.conf" || fail "no archive_mode = 'off'"
grep -q "^# Archiving off: started as restored" "$T/r1/postgresql.auto.conf" ||
	fail "the settings do not say why archiving is off"
assert_eq off "$(psqlc "$RPORT" "SHOW archive_mode")" "archive_mode of the restored cluster"
# Give an archiver (were there one) the time it takes the keep-archiving run below.
sleep 3
assert_absent "$T/r1/pg_wal/archive_status/$SEG1.ready" "no archiving pending for $SEG1"
assert_absent "$T/r1/pg_wal/archive_status/$SEG1.done" "no archiving done for $SEG1"
assert_eq "$before" "$(listing)" "the repository after the restored cluster's timeline 2"
pg_stop "$T/r1"
ok "restored with --target-time and started as is: archiving off, nothing new in the repository"

restored "$T/r2" --keep-archiving
assert_not_contains "$W_ERR" "archiving turned off" "--keep-archiving"
if grep -q "^archive_mode = 'off'" "$T/r2/postgresql.auto.conf"; then fail "--keep-archiving wrote archive_mode = 'off'"; fi
wait_archived "$T/r2" "$SEG2" 60
pg_stop "$T/r2"
compgen -G "$R/wal_005/00000002.history*" >/dev/null || fail "no 00000002.history archived"
compgen -G "$R/wal_005/$SEG2*" >/dev/null || fail "segment $SEG2 of timeline 2 not archived"
ok "--keep-archiving: the promoted cluster archives timeline 2 into the repository"

wrun_pg "${E[@]}" -- backup-fetch "$T/r3" LATEST
expect_rc 0 "plain backup-fetch"
assert_contains "$W_ERR" "must archive to a new prefix" "a plain restore of an archiving cluster"
ok "a plain restore says the restored configuration archives"
