#!/usr/bin/env bash
# WAL-G restores what walc wrote: a cluster archives with walc wal-push (zstd, libsodium key)
# and walc takes a full and a delta backup-push; WAL-G v3.0.9 lists both, restores the chain
# with backup-fetch LATEST and recovers with wal-fetch as restore_command, and the restored
# cluster's normalized pg_dumpall equals the source's after its last archived write. The delta's
# increments carry walc's IncrementChecksum, a key WAL-G ignores.
#
# Needs the WAL-G binary: $WALC_WALG, default <repo>/../shared/tools/wal-g (walc's developers
# have it there; it is not part of walc). Without it the test prints "skipped: ..." and passes.
. "$(dirname "$0")/lib.sh"

walg_sodium_pair walg_restore
sql() { psqlc "$PORT" "$1" >/dev/null; }
push() { # backup-push with walc; prints the backup's name
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 0 "walc backup-push"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
full=$(push)
sql "CREATE TABLE after_full (id int PRIMARY KEY, v text); INSERT INTO after_full SELECT g, md5(g::text) FROM generate_series(1, 5000) g"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -t 300 -c 2 postgres >"$T/log/pgbench.log" 2>&1 ||
	{ cat "$T/log/pgbench.log" >&2; fail "pgbench"; }
delta=$(push)
[[ $delta == *_D_${full:5:24} ]] || fail "the second backup must be a delta of $full: $delta"
# walc's own keys in the delta's Files (IncrementChecksum, Checksum, Size), which WAL-G must ignore
incs=$(grep -o '"IncrementChecksum":"xxh3-128:[0-9a-f]*"' "$T/repo/basebackups_005/$delta/files_metadata.json" | wc -l)
[ "$incs" -gt 0 ] || fail "the delta records no IncrementChecksum"
sql "UPDATE after_full SET v = v || '-after-delta' WHERE id % 3 = 0; CREATE TABLE marker AS SELECT 'after the delta'::text AS note"
last=$(switch_wal "$PORT")
wait_archived "$SRC" "$last" 120
dump_norm "$PORT" >"$T/source.sql"
pg_stop "$SRC"
log "walc wrote $full and $delta; archived up to $last"

as_pg "$T/walg.sh" backup-list >"$T/log/walg-list.out" 2>&1 || { cat "$T/log/walg-list.out" >&2; fail "wal-g backup-list"; }
listed=$(cat "$T/log/walg-list.out")
assert_contains "$listed" "$full" "wal-g backup-list"
assert_contains "$listed" "$delta" "wal-g backup-list"
ok "WAL-G lists walc's full and delta backups"

DST=$T/restored
mkdir -p "$DST"
chmod 700 "$DST"
pg_own "$DST"
as_pg "$T/walg.sh" backup-fetch "$DST" LATEST >"$T/log/walg-fetch.out" 2>&1 ||
	{ tail -n 30 "$T/log/walg-fetch.out" >&2; fail "wal-g backup-fetch LATEST"; }
# Recovery to the end of the archive with WAL-G's wal-fetch (exit 74 at the end).
RECOVER_FETCH=$T/walg.sh recover_conf "$DST" "" "recovery_target_timeline = 'latest'"
RPORT=$(free_port)
pg_start "$DST" "$RPORT"
wait_not_in_recovery "$RPORT"
dump_norm "$RPORT" >"$T/restored.sql"
if ! cmp -s "$T/source.sql" "$T/restored.sql"; then
	diff "$T/source.sql" "$T/restored.sql" | head -n 20 >&2
	fail "the cluster WAL-G restored differs from the source"
fi
[ "$(psqlc "$RPORT" "SELECT note FROM marker")" = "after the delta" ] || fail "the write after the delta is missing"
amcheck_all "$RPORT"
ok "WAL-G restored walc's delta chain and replayed walc's WAL: the dumps are equal"
