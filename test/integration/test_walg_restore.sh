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
source_archived_stopped
log "walc wrote $full and $delta; archived up to $LAST"

walg_lists "$full" "$delta"
ok "WAL-G lists walc's full and delta backups"

# Recovery to the end of the archive with WAL-G's wal-fetch (exit 74 at the end).
walg_restores_latest "$T/restored" "the cluster WAL-G restored"
[ "$(psqlc "$RPORT" "SELECT note FROM marker")" = "after the delta" ] || fail "the write after the delta is missing"
ok "WAL-G restored walc's delta chain and replayed walc's WAL: the dumps are equal"
