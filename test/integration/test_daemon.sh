#!/usr/bin/env bash
# The daemon and the archive module (issue 8): PostgreSQL 15 with archive_library =
# 'walc_archive' archives >= 50 segments through `walc daemon` with no process per segment;
# killing the daemon makes archiving fail and retry; with the daemon back it resumes and no
# segment is lost; /metrics parses as Prometheus text; wal-fetch works over the socket too.
. "$(dirname "$0")/lib.sh"
it_setup daemon

plain_make -s -C "$ROOT" archive-module-install >"$T/module.log" 2>&1 || { cat "$T/module.log"; fail "installing walc_archive"; }
mkdir -p "$T/repo"
pg_own "$T"
pg_init "$T/src" --wal-segsize=1
PORT=$(free_port)
MPORT=$(free_port)
SOCK=$T/walc.sock
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" "archive_library = 'walc_archive'" \
	"walc_archive.socket = '$SOCK'" "wal_keep_size = 1GB" "archive_timeout = 0"

# start_daemon: walc daemon on $SOCK, as postgres. DAEMON is the job (a subshell running as_pg's
# runuser), WALC_D walc itself, found by its exact command line. A killed daemon leaves its
# socket file behind: it is removed first, so that the socket seen below is the new daemon's.
start_daemon() {
	rm -f "$SOCK"
	as_pg env PGDATA="$T/src" WALG_FILE_PREFIX="$T/repo" WALG_PG_WAL_SIZE=1 \
		WALG_METRICS_ADDRESS="127.0.0.1:$MPORT" ASAN_OPTIONS="$ASAN_OPTIONS" \
		"$WALC_PG" daemon "$SOCK" >>"$T/daemon.log" 2>&1 &
	DAEMON=$!
	BG_PIDS+=("$DAEMON")
	WALC_D=""
	for _ in $(seq 1 200); do
		[ -n "$WALC_D" ] || WALC_D=$(pgrep -xf "$WALC_PG daemon $SOCK" || true)
		if [ -n "$WALC_D" ] && [ -S "$SOCK" ]; then
			BG_PIDS+=("$WALC_D") # the cleanup must stop walc, not only runuser
			return 0
		fi
		sleep 0.05
	done
	cat "$T/daemon.log"
	fail "daemon did not start"
}
start_daemon
pg_start "$T/src" "$PORT"
[ -z "$(psqlc "$PORT" "SHOW archive_command")" ] || fail "archive_command must be empty"
psqlc "$PORT" "CREATE TABLE t (v text)"
switch_n() {
	local last=""
	for _ in $(seq 1 "$1"); do
		last=$(psqlc "$PORT" "INSERT INTO t SELECT md5(g::text) FROM generate_series(1, 200) g; SELECT pg_walfile_name(pg_switch_wal())")
	done
	echo "$last"
}
last=$(switch_n 55)
wait_archived "$T/src" "$last" 120
n=$(find "$T/repo/wal_005" -name '[0-9A-F]*.lz4' | grep -cE '/[0-9A-F]{24}\.lz4$')
[ "$n" -ge 50 ] || fail "only $n segments archived through the daemon"
archived=$(psqlc "$PORT" "SELECT archived_count FROM pg_stat_archiver")
metrics=$(curl -sf "http://127.0.0.1:$MPORT/metrics") || fail "GET /metrics"
total=$(printf '%s\n' "$metrics" | awk '$1 == "walc_wal_archived_total" { print $2 }')
[ "$total" -ge "$archived" ] || fail "daemon archived $total files, PostgreSQL says $archived"
printf '%s\n' "$metrics" | "$PY" -c '
import sys
from prometheus_client.parser import text_string_to_metric_families
names = [f.name for f in text_string_to_metric_families(sys.stdin.read())]
assert "walc_wal_archived" in names and "walc_archive_lag_seconds" in names, names
' || fail "/metrics is not valid Prometheus text"
[ "$(curl -sf "http://127.0.0.1:$MPORT/healthz")" = ok ] || fail "/healthz"
log "$n segments archived through the daemon (PostgreSQL: $archived), metrics parse"

# Daemon gone: archiving fails and PostgreSQL keeps the files; back: it resumes, nothing lost.
kill -KILL "$WALC_D" || fail "no daemon process to kill"
wait "$DAEMON" 2>/dev/null || true
failed0=$(psqlc "$PORT" "SELECT failed_count FROM pg_stat_archiver")
last=$(switch_n 5)
for _ in $(seq 1 100); do
	[ "$(psqlc "$PORT" "SELECT failed_count FROM pg_stat_archiver")" -gt "$failed0" ] && break
	sleep 0.2
done
[ -e "$T/src/pg_wal/archive_status/$last.ready" ] || fail "$last should wait while the daemon is down"
start_daemon
# A new segment wakes the archiver, which otherwise waits a minute after repeated failures.
switch_n 1 >/dev/null
wait_archived "$T/src" "$last" 180
for f in "$T"/src/pg_wal/[0-9A-F]*; do
	s=$(basename "$f")
	[[ $s =~ ^[0-9A-F]{24}$ ]] || continue
	[ -e "$T/src/pg_wal/archive_status/$s.done" ] || continue
	wrun WALG_FILE_PREFIX="$T/repo" WALG_PG_WAL_SIZE=1 -- wal-fetch "$s" "$T/got"
	expect_rc 0 "wal-fetch $s"
	cmp -s "$f" "$T/got" || fail "$s differs after the daemon restart"
done
log "daemon restart: archiving resumed, every archived segment identical"

# wal-fetch over the socket: 'f' with two arguments; a missing file answers 'N'.
fetch_via_socket() { # NAME DEST -> prints the one-byte answer
	"$PY" - "$SOCK" "$1" "$2" <<'PYEOF'
import socket, struct, sys
sock, name, dest = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
body = bytes([2]) + struct.pack(">H", len(name)) + name + struct.pack(">H", len(dest)) + dest
s = socket.socket(socket.AF_UNIX); s.connect(sock)
s.sendall(b"f" + struct.pack(">H", len(body) + 3) + body)
print(s.recv(1).decode())
PYEOF
}
[ "$(fetch_via_socket "$last" "pg_wal/RESTORED_TEST")" = O ] || fail "socket wal-fetch of $last"
cmp -s "$T/src/pg_wal/$last" "$T/src/pg_wal/RESTORED_TEST" || fail "socket wal-fetch content"
[ "$(fetch_via_socket 0000000100000000000000FF "pg_wal/NOPE")" = N ] || fail "socket wal-fetch of a missing file must answer N"
log "daemon ok"
