#!/usr/bin/env bash
# walc demo: continuous archiving and point-in-time restore of a throwaway PostgreSQL 15
# cluster into a local file repository (WALG_FILE_PREFIX, zstd).
#
#   1. a new cluster archives every WAL segment with  archive_command = 'walc wal-push %p'
#   2. pgbench -i -s 10 loads data; a base backup is taken (take_base_backup)
#   3. more writes after the backup (pgbench, plus a marker row), WAL switched and archived
#   4. the base backup is restored into a new directory (restore_base_backup) and recovered
#      with  restore_command = 'walc wal-fetch %f %p'  to the end of the archive
#   5. the restored cluster's normalized pg_dumpall must equal the source's
#
# Prints a summary and "OK: restored cluster matches the source" (exit 0), or FAIL (exit 1).
# Runs as root (PostgreSQL runs as the postgres OS user) or as a user that can run PostgreSQL.
# Environment: WALC (binary, default ./walc), KEEP=1 keeps the temporary directory,
# DEMO_SCALE (pgbench scale, default 10), DEMO_SECONDS (pgbench run after the backup, default 10).
#
# The base backup is walc's own (backup-push, streamed into the repository) and is restored with
# walc backup-fetch, so every byte the restored cluster starts from comes from the repository.

# shellcheck source=integration/lib.sh
. "$(dirname "$0")/integration/lib.sh"

SCALE=${DEMO_SCALE:-10}
RUN_SECONDS=${DEMO_SECONDS:-10}
now_ms() { date +%s%3N; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.1f s", ms / 1000 }'; }
human() { numfmt --to=iec-i --suffix=B --format='%.1f' "$1"; }
step() { printf '\n== %s\n' "$*"; }

it_setup demo
SRC=$T/source
REPO=$T/repo
DST=$T/restored
mkdir -p "$REPO"
pg_own "$REPO"
# one environment for walc everywhere: the archive/restore commands and the summary below
WALC_ENV="WALG_FILE_PREFIX=$REPO WALG_COMPRESSION_METHOD=zstd HOME=$T/home"

echo "walc demo: $("$WALC" --version 2>&1 | head -n1)"
echo "working directory: $T"

# ---- the two steps that walc's own backups will replace ----------------------------------------
take_base_backup() {
	# shellcheck disable=SC2086
	as_pg env $WALC_ENV PGHOST="$T" PGPORT="$PORT" "$WALC_PG" backup-push "$SRC" \
		>"$T/log/backup-push.log" 2>&1 || { cat "$T/log/backup-push.log" >&2; fail "walc backup-push"; }
	BACKUP_NAME=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/backup-push.log")
}
restore_base_backup() { # DEST
	# shellcheck disable=SC2086
	env $WALC_ENV "$WALC" backup-fetch "$1" LATEST >"$T/log/backup-fetch.log" 2>&1 ||
		{ cat "$T/log/backup-fetch.log" >&2; fail "walc backup-fetch"; }
	# A restored data directory keeps the source's settings: give it its own socket and port.
	sed -i '/^port = /d; /^listen_addresses/d; /^unix_socket_directories/d; /^archive_command/d' \
		"$1/postgresql.conf"
	pg_own "$1"
}

# ---- 1. source cluster ------------------------------------------------------------------------
step "1. source cluster with archive_command = 'walc wal-push %p' (zstd, file repository)"
t0=$(now_ms)
PORT=$(free_port)
pg_init "$SRC"
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "autovacuum = off" \
	"archive_command = '$WALC_ENV PGDATA=$SRC $WALC_PG wal-push %p 2>>$T/log/wal-push.log'"
pg_start "$SRC" "$PORT"
echo "   started on port $PORT (socket in $T)"

# ---- 2. load and base backup ------------------------------------------------------------------
step "2. pgbench -i -s $SCALE, then a base backup"
t=$(now_ms)
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -i -s "$SCALE" -q postgres >"$T/log/pgbench-init.log" 2>&1 ||
	{ cat "$T/log/pgbench-init.log" >&2; fail "pgbench -i"; }
LOAD_MS=$(($(now_ms) - t))
echo "   loaded $((SCALE * 100000)) pgbench_accounts rows in $(secs "$LOAD_MS")"
t=$(now_ms)
take_base_backup
BACKUP_MS=$(($(now_ms) - t))
echo "   walc backup-push: $BACKUP_NAME, $(human "$(du -sb "$REPO/basebackups_005" | cut -f1)") in the repository for $(human "$(du -sb "$SRC" | cut -f1)") of data, in $(secs "$BACKUP_MS")"

# ---- 3. writes after the backup ---------------------------------------------------------------
step "3. writes after the base backup (pgbench -T $RUN_SECONDS -c 2, a marker row)"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -T "$RUN_SECONDS" -c 2 postgres >"$T/log/pgbench-run.log" 2>&1 ||
	{ cat "$T/log/pgbench-run.log" >&2; fail "pgbench run"; }
echo "   $(grep -E '^number of transactions actually processed' "$T/log/pgbench-run.log")"
psqlc "$PORT" "CREATE TABLE demo_marker (note text, at timestamptz DEFAULT now());
	INSERT INTO demo_marker (note) VALUES ('written after the base backup');"
psqlc "$PORT" "CHECKPOINT"
dump_norm "$PORT" >"$T/source.sql"
t=$(now_ms)
LAST=$(switch_wal "$PORT")
wait_archived "$SRC" "$LAST" 300
ARCHIVE_WAIT_MS=$(($(now_ms) - t))
pg_stop "$SRC"
SOURCE_MS=$(($(now_ms) - t0))
echo "   last segment $LAST archived (waited $(secs "$ARCHIVE_WAIT_MS") after the switch)"
assert_no_sanitizer_reports "$T/log/wal-push.log" "$SRC.log"

# ---- 4. restore ---------------------------------------------------------------------------------
step "4. restore the base backup, recover with restore_command = 'walc wal-fetch %f %p'"
t=$(now_ms)
restore_base_backup "$DST"
pg_conf "$DST" "archive_mode = off" \
	"restore_command = '$WALC_ENV PGDATA=$DST $WALC_PG wal-fetch %f %p'" \
	"recovery_target_action = 'promote'"
touch "$DST/recovery.signal"
pg_own "$DST"
RPORT=$(free_port)
pg_start "$DST" "$RPORT"
wait_not_in_recovery "$RPORT" 300
RESTORE_MS=$(($(now_ms) - t))
FETCHED=$(grep -c 'restored log file ".*" from archive' "$DST.log" || true)
echo "   recovered and promoted in $(secs "$RESTORE_MS") ($FETCHED WAL files fetched from the repository)"
marker=$(psqlc "$RPORT" "SELECT note FROM demo_marker")
echo "   marker row in the restored cluster: '$marker'"

# ---- 5. compare ---------------------------------------------------------------------------------
step "5. compare normalized pg_dumpall of source and restored cluster"
dump_norm "$RPORT" >"$T/restored.sql"
pg_stop "$DST"
assert_no_sanitizer_reports "$DST.log"

SEGMENTS=$(find "$REPO/wal_005" -type f | grep -cE '/[0-9A-F]{24}(\.[a-z0-9]+)?$' || true)
WAL_BYTES=$((SEGMENTS * 16 * 1024 * 1024))
REPO_BYTES=$(du -sb "$REPO" | cut -f1)
row() { printf '  %-24s %s\n' "$1" "$2"; }
echo
echo "summary"
row "WAL segments archived:" "$SEGMENTS ($(human "$WAL_BYTES") of WAL)"
row "repository size:" "$(human "$REPO_BYTES") (zstd: $(awk -v a="$REPO_BYTES" -v b="$WAL_BYTES" 'BEGIN { printf "%.1f%%", b ? 100 * a / b : 0 }') of the WAL)"
row "pgbench -i -s $SCALE:" "$(secs "$LOAD_MS")"
row "base backup:" "$(secs "$BACKUP_MS")"
row "source phase in all:" "$(secs "$SOURCE_MS")"
row "restore + recovery:" "$(secs "$RESTORE_MS") ($FETCHED WAL files fetched)"
row "dumps:" "source $(human "$(wc -c <"$T/source.sql")"), restored $(human "$(wc -c <"$T/restored.sql")")"
if [ -s "$T/source.sql" ] && cmp -s "$T/source.sql" "$T/restored.sql"; then
	echo
	echo "OK: restored cluster matches the source"
	exit 0
fi
echo
diff "$T/source.sql" "$T/restored.sql" | head -n 20 || true # diff exits 1; head may stop it early
echo "FAIL: restored cluster differs from the source (KEEP=1 keeps $T)"
exit 1
