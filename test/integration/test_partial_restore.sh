#!/usr/bin/env bash
# backup-fetch --restore-only (WAL-G's partial restore, its docker test's cluster): three
# databases with tables in each, 10,000 rows, a backup, 10,000 more rows each, archived. A
# restore of first/tbl1 and second, recovered to the end of the archive: tbl1 (with its index
# and TOAST table) and the whole of second hold their data (their dumps equal the source's,
# amcheck clean); first's tbl2 and third's tbl, skipped as WAL-G skips them, hold only what
# WAL replay wrote (fewer rows); the cluster starts and recovers. walc's restore of walc's
# backup, and with WAL-G v3.0.9: WAL-G's restore of walc's backup and walc's of WAL-G's.
# A name that matches nothing is refused before anything is written.
# test_partial_restore_s3.sh runs it all with the repository on S3.
. "$(dirname "$0")/lib.sh"
store_setup partial_restore

pitr_source "${STORE_ENV[@]}"
sql() { as_pg "$PGBIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$T" -p "$PORT" -U postgres -d "$1" -c "$2"; }
for db in first second third; do sql postgres "CREATE DATABASE $db"; done
sql first "CREATE EXTENSION amcheck"
sql first "CREATE TABLE tbl1 (id int PRIMARY KEY, note text); CREATE TABLE tbl2 (data integer)"
sql second "CREATE TABLE tbl (data integer)"
sql third "CREATE TABLE tbl (data integer)"
fill() {
	sql first "INSERT INTO tbl1 SELECT g + $1, repeat(md5(g::text), 100 + g % 50) FROM generate_series(1, 10000) g"
	sql first "INSERT INTO tbl2 SELECT * FROM generate_series(1, 10000)"
	sql second "INSERT INTO tbl SELECT * FROM generate_series(1, 10000)"
	sql third "INSERT INTO tbl SELECT * FROM generate_series(1, 10000)"
}
fill 0
PGE=(PGHOST="$T" PGPORT="$PORT")
wrun_pg "${E[@]}" "${PGE[@]}" -- backup-push "$SRC"
expect_rc 0 "walc backup-push"
walc_backup=$(sed -n 's/.*Wrote backup with name \([^ ]*\) .*/\1/p' <<<"$W_ERR")
wrun_pg "${E[@]}" -- st cat "basebackups_005/$walc_backup/files_metadata.json"
grep -q '"DatabasesByNames"' <<<"$W_OUT" || fail "walc's backup records no DatabasesByNames"

WALG=${WALC_WALG:-$ROOT/../shared/tools/wal-g}
if [ -x "$WALG" ]; then
	cp "$WALG" "$T/bin/wal-g"
	walg() { as_pg env "${E[@]}" "${PGE[@]}" PGUSER=postgres PGDATABASE=postgres "$T/bin/wal-g" "$@"; }
	walg backup-push "$SRC" >"$T/log/walg-push.log" 2>&1 || { tail -n 20 "$T/log/walg-push.log"; fail "WAL-G backup-push"; }
	walg_backup=$(grep -oE 'Wrote backup with name base_[0-9A-F]+' "$T/log/walg-push.log" | awk '{print $NF}')
	[ -n "$walg_backup" ] || fail "WAL-G's backup name"
fi

fill 10000
last=$(switch_wal "$PORT")
wait_archived "$SRC" "$last" 120
dump_db() { as_pg "$PGBIN/pg_dump" -h "$T" -p "$1" -U postgres "${@:3}" "$2" | normalize_dump; }
dump_db "$PORT" first -t tbl1 >"$T/first-tbl1.sql"
dump_db "$PORT" second >"$T/second.sql"
pg_stop "$SRC"

[ "${WALC_IT_S3:-0}" != 1 ] || assert_absent "$R/basebackups_005" "the file repository, with the repository on S3"

# a name that matches nothing: refused, nothing written
wrun_pg "${E[@]}" -- backup-fetch "$T/none" "$walc_backup" --restore-only=first/tbl1,fourth
expect_rc 1 "--restore-only naming a database the backup does not have"
assert_contains "$W_ERR" '"fourth" names no database' "the refusal"
assert_absent "$T/none" "the destination of a refused partial restore"
wrun_pg "${E[@]}" -- backup-fetch "$T/none" "$walc_backup" --restore-only=first/tbl9
expect_rc 1 "--restore-only naming a table the backup does not have"
assert_contains "$W_ERR" '"first/tbl9" names no table' "the refusal"
ok "names matching nothing are refused, nothing written"

# partial TOOL BACKUP: TOOL's partial restore of BACKUP recovers to the archive's end
partial() {
	local dir=$T/restored-$1-$2 port count
	case $1 in
	walc) wrun_pg "${E[@]}" -- backup-fetch "$dir" "$2" --restore-only=first/tbl1,second
		expect_rc 0 "walc backup-fetch --restore-only of $2" ;;
	wal-g) walg backup-fetch "$dir" "$2" --restore-only=first/tbl1,second >"$T/log/walg-fetch.log" 2>&1 ||
		{ tail -n 20 "$T/log/walg-fetch.log"; fail "WAL-G backup-fetch --restore-only of $2"; } ;;
	esac
	recover_conf "$dir" "${E[*]}" "recovery_target_timeline = 'latest'"
	port=$(free_port)
	pg_start "$dir" "$port"
	wait_not_in_recovery "$port"
	[ "$(dump_db "$port" first -t tbl1)" = "$(cat "$T/first-tbl1.sql")" ] || fail "$1 of $2: first's tbl1 differs from the source's"
	[ "$(dump_db "$port" second)" = "$(cat "$T/second.sql")" ] || fail "$1 of $2: database second differs from the source's"
	# WAL-G's DatabasesByNames does not tie a table's indexes to it: they are not restored
	if [ "$2" = "${walg_backup:-}" ]; then
		as_pg "$PGBIN/psql" -X -q -h "$T" -p "$port" -U postgres -d first -c "REINDEX TABLE tbl1"
	fi
	amcheck_all "$port" first
	amcheck_all "$port" second
	for skipped in "first tbl2" "third tbl"; do
		count=$(as_pg "$PGBIN/psql" -X -q -A -t -h "$T" -p "$port" -U postgres -d "${skipped% *}" -c "SELECT count(*) FROM ${skipped#* }")
		[ "$count" -lt 20000 ] || fail "$1 of $2: ${skipped% *}'s ${skipped#* } was not skipped ($count rows)"
	done
	pg_stop "$dir"
	assert_no_sanitizer_reports "$dir.log"
	ok "$1 restored first/tbl1 and second of $2: theirs are the source's, tbl2 and third's tbl skipped ($count rows from WAL), the cluster recovered"
}
partial walc "$walc_backup"
if [ -x "$WALG" ]; then
	partial wal-g "$walc_backup"
	partial walc "$walg_backup"
else
	echo "skipped: the checks against WAL-G (no WAL-G binary at $WALG)"
fi
