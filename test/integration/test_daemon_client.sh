#!/usr/bin/env bash
# walc daemon-client (issue 50), WAL-G's walg-daemon-client with its arguments: PostgreSQL 15
# archives through `walc daemon-client SOCKET wal-push %f` to a walc daemon, a backup taken then
# restores with `restore_command = 'walc daemon-client SOCKET wal-fetch %f %p'` served by a
# daemon on the restored directory, and its dump matches; a missing file exits 74, a daemon
# that is not there 1. With WAL-G v3.0.9 at hand, walc's client archives through WAL-G's
# daemon too, and what it stored is the segment.
. "$(dirname "$0")/lib.sh"
it_setup daemon_client

mkdir -p "$T/repo"
pg_own "$T"
E=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd)
# start_daemon NAME PGDATA [BINARY]: a daemon as postgres on $T/NAME.sock
start_daemon() {
	local sock=$T/$1.sock bin=${3:-$WALC_PG}
	as_pg env PGDATA="$2" "${E[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "$bin" daemon "$sock" \
		>>"$T/$1.log" 2>&1 &
	BG_PIDS+=("$!")
	daemon_wait "$bin" "$sock" "$T/$1.log"
}

pg_init "$T/src"
start_daemon src "$T/src"
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = '$WALC_PG daemon-client $T/src.sock wal-push %f'"
pg_start "$T/src" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 1 -q postgres >/dev/null 2>&1
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
expect_rc 0 "backup-push"
psqlc "$PORT" "CREATE TABLE after_backup AS SELECT g FROM generate_series(1, 1000) g"
dump_norm "$PORT" >"$T/src.dump"
seg=$(switch_wal "$PORT")
wait_archived "$T/src" "$seg" 60
pg_stop "$T/src"
[ -n "$(ls "$T/repo/wal_005")" ] || fail "nothing archived through the daemon client"

# The restore: a daemon on the restored directory writes what PostgreSQL asks for into its pg_wal.
wrun "${E[@]}" -- backup-fetch "$T/dst" LATEST
expect_rc 0 "backup-fetch"
pg_own "$T/dst"
start_daemon dst "$T/dst"
RECOVER_FETCH="$WALC_PG daemon-client $T/dst.sock" recover_conf "$T/dst" "" "recovery_target_timeline = 'latest'"
sed -i "s|restore_command = .*|restore_command = '$WALC_PG daemon-client $T/dst.sock wal-fetch %f %p'|" "$T/dst/postgresql.conf"
recovered_start "$T/dst"
assert_dump_eq "$T/src.dump" "$RPORT" "the cluster recovered through the daemon client"
pg_stop "$T/dst"
log "archived and restored through walc daemon-client"

# Exit codes: 74 for a file the archive lacks, 1 without a daemon or for a bad request.
wrun -- daemon-client "$T/dst.sock" wal-fetch 0000000100000000000000FE pg_wal/RECOVERYXLOG
expect_rc 74 "daemon-client wal-fetch of a missing file"
wrun -- daemon-client "$T/none.sock" wal-push "$seg"
expect_rc 1 "daemon-client without a daemon"
assert_contains "$W_ERR" "$T/none.sock" "the error names the socket"
wrun -- daemon-client "$T/dst.sock" wal-push ../../etc/passwd
expect_rc 1 "daemon-client wal-push of a path"
wrun -- daemon-client "$T/dst.sock" wal-copy "$seg"
expect_rc 1 "an unknown daemon-client command"
wrun -- daemon-client "$T/dst.sock" wal-fetch "$seg" pg_wal/X --timeout never
expect_rc 1 "a bad --timeout"
assert_contains "$W_ERR" "--timeout" "the error names the option"

walg_required
# a segment walc archived, put back in the stopped source's pg_wal for WAL-G's daemon to push
seg=$(cd "$T/repo/wal_005" && ls | sed -n 's/^\([0-9A-F]\{24\}\)\..*/\1/p' | sort | tail -n 1)
wrun WALG_FILE_PREFIX="$T/repo" -- wal-fetch "$seg" "$T/seg.copy"
expect_rc 0 "wal-fetch of $seg from walc's repository"
cp "$T/seg.copy" "$T/src/pg_wal/$seg"
pg_own "$T/src/pg_wal/$seg"
E=(WALG_FILE_PREFIX="$T/walg-repo" WALG_COMPRESSION_METHOD=lz4)
mkdir -p "$T/walg-repo"
pg_own "$T/walg-repo"
cp "$WALG" "$T/bin/wal-g"
chmod 755 "$T/bin/wal-g"
start_daemon walg "$T/src" "$T/bin/wal-g"
wrun -- daemon-client "$T/walg.sock" wal-push "$seg"
expect_rc 0 "walc daemon-client to WAL-G's daemon"
wrun "${E[@]}" -- wal-fetch "$seg" "$T/from-walg"
expect_rc 0 "wal-fetch of what WAL-G's daemon stored"
assert_same_file "$T/seg.copy" "$T/from-walg" "the segment archived through WAL-G's daemon"
log "daemon client ok"
