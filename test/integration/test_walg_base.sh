#!/usr/bin/env bash
# A WAL-G user switching to walc keeps the full backups WAL-G took: WAL-G v3.0.9 pushes a full
# (zstd, libsodium key), then walc pushes a delta on it, reading WAL-G's files_metadata.json
# (its names, its MTime format) to skip the files unchanged since and to store the changed
# relation files as increments. walc and WAL-G each restore the chain and recover with
# their own wal-fetch; both restored clusters' normalized pg_dumpall equal the source's.
#
# Needs the WAL-G binary: $WALC_WALG, default <repo>/../shared/tools/wal-g (walc's developers
# have it there; it is not part of walc). Without it the test prints "skipped: ..." and passes.
. "$(dirname "$0")/lib.sh"

walg_sodium_pair walg_base
sql() { psqlc "$PORT" "$1" >/dev/null; }
sql "CREATE TABLE later (id int PRIMARY KEY, v text); INSERT INTO later SELECT g, md5(g::text) FROM generate_series(1, 5000) g"
sql CHECKPOINT
# walc skips a file only if it predates its base's start by 10 s (DELTA_MTIME_MARGIN).
sleep 11
as_pg env PGHOST="$T" PGPORT="$PORT" "$T/walg.sh" backup-push "$SRC" >"$T/log/walg-push.out" 2>&1 ||
	{ tail -n 20 "$T/log/walg-push.out" >&2; fail "wal-g backup-push"; }
full=$(cd "$T/repo/basebackups_005" && ls -- *_backup_stop_sentinel.json)
full=${full%_backup_stop_sentinel.json}
[[ $full =~ ^base_[0-9A-F]{24}$ ]] || fail "WAL-G's full backup not found: $full"

sql "UPDATE later SET v = v || '-changed' WHERE id % 50 = 0; CREATE TABLE after_full AS SELECT 'after the full'::text AS note"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "walc backup-push"
delta=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
[[ $delta == *_D_${full:5:24} ]] ||
	fail "walc's backup must be a delta of WAL-G's $full: $delta"
meta=$T/repo/basebackups_005/$delta/files_metadata.json
skipped=$(grep -oE '"IsSkipped": ?true' "$meta" | wc -l)
incremented=$(grep -oE '"IsIncremented": ?true' "$meta" | wc -l)
total=$(grep -o '"MTime"' "$meta" | wc -l)
log "walc's delta of WAL-G's full: $skipped of $total files skipped, $incremented increments"
[ "$skipped" -gt $((total / 2)) ] || fail "walc skipped $skipped of $total files: WAL-G's MTimes were not matched"
[ "$incremented" -gt 0 ] || fail "walc stored no increment: the changed table was not found in WAL-G's Files"
ok "walc took a delta of WAL-G's full, skipping $skipped of $total files by WAL-G's MTime"

sql "CREATE TABLE marker AS SELECT 'after the delta'::text AS note"
last=$(switch_wal "$PORT")
wait_archived "$SRC" "$last" 120
dump_norm "$PORT" >"$T/source.sql"
pg_stop "$SRC"

# restore_with NAME FETCH...: NAME's restore of LATEST with the command FETCH (walc's or
# WAL-G's wrapper), recovered to the end of the archive with the same tool's wal-fetch
restore_with() {
	local name=$1 dst=$T/restored-$1 port
	shift
	mkdir -p "$dst"
	chmod 700 "$dst"
	pg_own "$dst"
	as_pg "$@" backup-fetch "$dst" LATEST >"$T/log/fetch-$name.out" 2>&1 ||
		{ tail -n 30 "$T/log/fetch-$name.out" >&2; fail "$name backup-fetch LATEST"; }
	RECOVER_FETCH=$1 recover_conf "$dst" "" "recovery_target_timeline = 'latest'"
	port=$(free_port)
	pg_start "$dst" "$port"
	wait_not_in_recovery "$port"
	assert_dump_eq "$T/source.sql" "$port" "the cluster $name restored"
	[ "$(psqlc "$port" "SELECT note FROM marker")" = "after the delta" ] || fail "$name: the write after the delta is missing"
	amcheck_all "$port"
	pg_stop "$dst"
}
restore_with walc "$T/walc.sh"
ok "walc restored its delta on WAL-G's full: the dumps are equal"
restore_with wal-g "$T/walg.sh"
ok "WAL-G restored walc's delta on its own full: the dumps are equal"
