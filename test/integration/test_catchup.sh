#!/usr/bin/env bash
# catchup-push and catchup-fetch: a standby stopped while its primary takes writes (updates, a
# new table, a dropped table, a new database) is brought back by catchup-push on the primary
# (--from-lsn: the standby's pg_control) and catchup-fetch on the standby; started as a standby
# again it streams, and its dump equals the primary's, amcheck clean, the dropped table's files
# gone. With WAL-G v3.0.9 present: WAL-G's catchup-fetch applies walc's catchup backup to a copy
# of the standby, and walc's catchup-fetch applies WAL-G's to another, each then equal to the
# primary. Refused without a file of the standby changing: a running standby, another
# cluster's directory, a backup from past the standby's LSN, and a backup holding a database
# copied file by file (CREATE DATABASE ... STRATEGY FILE_COPY) since the standby's LSN, whose
# old pages are in neither. test_catchup_s3.sh runs it all with the repository on S3.
. "$(dirname "$0")/lib.sh"
store_setup catchup

pitr_source "${STORE_ENV[@]}"
P=$SRC
PPORT=$PORT
pg_stop "$P"
pg_conf "$P" "max_wal_senders = 4" "hot_standby = on" "wal_keep_size = 256MB"
pg_start "$P" "$PPORT"
sql() { psqlc "$PPORT" "$1" >/dev/null; }
sql "CREATE EXTENSION amcheck; CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE gone (id int)"
sql "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 20000) g; INSERT INTO gone SELECT generate_series(1, 5000)"
gone_file=$(psqlc "$PPORT" "SELECT pg_relation_filepath('gone')")

S=$T/standby
standby_of "$PPORT" "$S"
sed -i '/^archive_command/d' "$S/postgresql.conf"
pg_conf "$S" "archive_mode = off"
SPORT=$(free_port)
pg_start "$S" "$SPORT"
sql "UPDATE t SET v = v || 'x' WHERE id % 10 = 0"
wait_replayed "$PPORT" "$SPORT"
pg_stop "$S"
[ -e "$S/$gone_file" ] || fail "the standby has no $gone_file to start with"
# the standby's LSN: what its pg_control says it holds
from=$(as_pg "$PGBIN/pg_controldata" -D "$S" | sed -n 's/^Minimum recovery ending location: *//p')
log "standby stopped; its minimum recovery ending location is $from"
for d in copy-walg copy-walc copy-cut; do cp -a "$S" "$T/$d"; done

E+=(PGHOST="$T" PGPORT="$PPORT")
# catchup NAME-VAR ARGS...: catchup-push of the primary; NAME-VAR gets the backup's name
catchup() {
	local var=$1
	shift
	wrun_pg "${E[@]}" -- catchup-push "$P" "$@"
	expect_rc 0 "catchup-push $*"
	printf -v "$var" '%s' "$(sed -n 's/.*Wrote backup with name \([^ ]*\) .*/\1/p' <<<"$W_ERR")"
	[ -n "${!var}" ] || fail "catchup-push named no backup: $W_ERR"
}

# a database copied file by file since the standby's LSN: its old pages are in no catchup
sql "CREATE DATABASE copied TEMPLATE template0 STRATEGY FILE_COPY"
catchup filecopy --from-lsn "$from"
wrun_refused "catchup-fetch of a catchup holding a file-copied database" "STRATEGY FILE_COPY" \
	"$S" "${E[@]}" -- catchup-fetch "$S" "$filecopy"
sql "DROP DATABASE copied"
ok "a database copied file by file since the LSN: refused, the standby untouched"

# the writes the standby misses
sql "UPDATE t SET v = md5(v) WHERE id % 3 = 0; DELETE FROM t WHERE id % 7 = 0"
sql "VACUUM t"
sql "CREATE TABLE added AS SELECT g AS id, repeat('y', 100) AS v FROM generate_series(1, 3000) g; CREATE INDEX ON added (id)"
sql "DROP TABLE gone"
sql "CREATE DATABASE later"
psqlc "$PPORT" "CHECKPOINT" >/dev/null
catchup name "--from-lsn=$((16#${from%/*} * 4294967296 + 16#${from#*/}))"
wrun_pg "${E[@]}" -- st cat "catchup_005/$name/files_metadata.json"
grep -q '"IsIncremented": *true' <<<"$W_OUT" || fail "walc's catchup backup $name holds no increment"
wrun_pg "${E[@]}" -- catchup-list
assert_contains "$W_OUT" "$name" "catchup-list"

# refusals, nothing changed: another cluster, a running standby, a backup past the standby
pg_init "$T/other"
wrun_refused "catchup-fetch onto another cluster" "belongs to another cluster" \
	"$T/other" "${E[@]}" -- catchup-fetch "$T/other" "$name"
sql "INSERT INTO t VALUES (-1, 'ahead')"
catchup ahead --from-lsn "$(psqlc "$PPORT" "SELECT pg_current_wal_lsn()")"
sql "DELETE FROM t WHERE id = -1"
wrun_refused "catchup-fetch of a backup from past the standby's LSN" \
	"what lies between is in neither" "$S" "${E[@]}" -- catchup-fetch "$S" "$ahead"
# a running standby (a copy, which streams meanwhile)
cp -a "$S" "$T/running"
pg_start "$T/running" "$(free_port)"
wrun_pg "${E[@]}" -- catchup-fetch "$T/running" "$name"
expect_rc 1 "catchup-fetch onto a running standby"
assert_contains "$W_ERR" "runs on $T/running" "the refusal"
pg_stop "$T/running"
rm -rf "$T/running"
ok "refused: another cluster, a backup past the standby's LSN, a running standby"

# standby_equal DIR WHAT: DIR started as a standby streams from the primary and equals it
standby_equal() {
	local port before
	port=$(free_port)
	before=$(grep -c "starting backup recovery with redo LSN" "$1.log" 2>/dev/null || true)
	pg_start "$1" "$port"
	sql "INSERT INTO t VALUES (-2, 'after the catchup') ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v"
	wait_replayed "$PPORT" "$port"
	dump_norm "$PPORT" >"$T/primary.sql"
	assert_dump_eq "$T/primary.sql" "$port" "$2"
	amcheck_all "$port"
	[ ! -e "$1/$gone_file" ] || fail "$2: the dropped table's file $gone_file is still there"
	grep -q "started streaming WAL from primary" "$1.log" || fail "$2: the standby does not stream"
	# it recovered from the catchup's start, not by replaying what it had missed
	[ "$(grep -c "starting backup recovery with redo LSN" "$1.log")" -gt "${before:-0}" ] ||
		fail "$2: the standby did not start from the catchup backup's backup_label"
	pg_stop "$1"
	assert_no_sanitizer_reports "$1.log"
}

wrun_pg "${E[@]}" -- catchup-fetch "$S" "$name"
expect_rc 0 "catchup-fetch"
log "$(grep -o 'catchup-fetch: [0-9]* files replaced.*' <<<"$W_ERR")"
[ -z "$(find "$S" -name '*.walc-catchup*')" ] || fail "staged files left in the standby"
standby_equal "$S" "the standby after walc's catchup"
ok "walc: catchup-push and catchup-fetch; the standby streams again and equals the primary"

[ "${WALC_IT_S3:-0}" != 1 ] || assert_absent "$R/catchup_005" "the file repository, with the repository on S3"

# a catchup-fetch cut in its second phase: pg_control gone, the marker saying what the standby
# held; a catchup-fetch run again finishes it
sysid=$(as_pg "$PGBIN/pg_controldata" -D "$T/copy-cut" | sed -n 's/^Database system identifier: *//p')
printf 'walc catchup-fetch of %s, not complete while this file exists\nsystem_identifier %s\ncatchup_reached %s\ncatchup_timeline 1\n' \
	"$name" "$sysid" "$((16#${from%/*} * 4294967296 + 16#${from#*/}))" >"$T/copy-cut/walc_restore_incomplete"
rm "$T/copy-cut/global/pg_control"
pg_own "$T/copy-cut"
wrun_pg "${E[@]}" -- catchup-fetch "$T/copy-cut" "$name"
expect_rc 0 "catchup-fetch finishing an interrupted one"
assert_contains "$W_ERR" "holds an interrupted catchup-fetch" "catchup-fetch over its own marker"
assert_absent "$T/copy-cut/walc_restore_incomplete" "the marker once finished"
standby_equal "$T/copy-cut" "the standby whose catchup-fetch was cut, finished"
ok "an interrupted catchup-fetch (pg_control gone, the marker left) is finished by the next"

WALG=${WALC_WALG:-$ROOT/../shared/tools/wal-g}
if [ ! -x "$WALG" ]; then
	echo "skipped: the checks against WAL-G (no WAL-G binary at $WALG)"
	exit 0
fi
walg() { as_pg env "${E[@]}" PGUSER=postgres PGDATABASE=postgres "$WALG" "$@"; }
walg catchup-fetch "$T/copy-walg" "$name" >"$T/log/walg-fetch.log" 2>&1 ||
	{ tail -n 20 "$T/log/walg-fetch.log"; fail "WAL-G catchup-fetch of walc's catchup backup"; }
rm -f "$T/copy-walg/$gone_file" # WAL-G leaves the files the primary dropped
standby_equal "$T/copy-walg" "the standby after WAL-G's catchup-fetch of walc's backup"
ok "WAL-G's catchup-fetch applies walc's catchup backup"

walg catchup-push "$P" --from-lsn "$((16#${from%/*} * 4294967296 + 16#${from#*/}))" \
	>"$T/log/walg-push.log" 2>&1 || { tail -n 20 "$T/log/walg-push.log"; fail "WAL-G catchup-push"; }
walg_name=$(grep -oE 'Wrote backup with name base_[0-9A-F]+' "$T/log/walg-push.log" | awk '{print $NF}')
[ -n "$walg_name" ] && [ "$walg_name" != "$name" ] || fail "WAL-G's catchup backup: \"$walg_name\""
wrun_pg "${E[@]}" -- catchup-fetch "$T/copy-walc" "$walg_name"
expect_rc 0 "walc catchup-fetch of WAL-G's catchup backup"
standby_equal "$T/copy-walc" "the standby after walc's catchup-fetch of WAL-G's backup"
ok "walc's catchup-fetch applies WAL-G's catchup backup"
