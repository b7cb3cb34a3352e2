#!/usr/bin/env bash
# The daemon's socket is its whole authority (issue 42): started under umask 000, it is still
# 0600, another OS user cannot connect, and even through a socket loosened by hand the daemon
# serves no peer of another uid (SO_PEERCRED). A wal-fetch request writes only a file directly
# in PGDATA/pg_wal: not pg_control, not a sibling directory sharing PGDATA's prefix, not
# through "..".
. "$(dirname "$0")/lib.sh"
it_setup daemon_guard

OTHER=nobody
id -u "$OTHER" >/dev/null 2>&1 || fail "no OS user $OTHER to play the other local user"
mkdir -p "$T/repo" "$T/src_evil/pg_wal"
pg_own "$T"
pg_init "$T/src"
SEG=000000010000000000000001
E=(WALG_FILE_PREFIX="$T/repo")
PGDATA=$T/src wrun_pg "${E[@]}" -- wal-push "$T/src/pg_wal/$SEG"
expect_rc 0 "wal-push of the first segment"

SOCK=$T/walc.sock
as_pg sh -c 'umask 000; exec env PGDATA="$1" WALG_FILE_PREFIX="$2" ASAN_OPTIONS="$3" "$4" daemon "$5"' \
	sh "$T/src" "$T/repo" "$ASAN_OPTIONS" "$WALC_PG" "$SOCK" >>"$T/daemon.log" 2>&1 &
BG_PIDS+=("$!")
daemon_wait "$WALC_PG" "$SOCK" "$T/daemon.log"
WALC_D=$DAEMON_PID
assert_eq 600 "$(stat -c %a "$SOCK")" "the socket's mode under umask 000"

# request AS_USER TYPE [NAME DEST]: one message; prints the answer byte, "refused" when the
# connection could not be made, "closed" when the daemon hung up without answering.
request() {
	local user=$1
	shift
	runuser -u "$user" -- "$PY" - "$SOCK" "$@" <<'PYEOF'
import socket, struct, sys
sock, kind = sys.argv[1], sys.argv[2]
if kind == "C":
    msg = b"C" + struct.pack(">H", 3)
else:
    name, dest = sys.argv[3].encode(), sys.argv[4].encode()
    body = bytes([2]) + struct.pack(">H", len(name)) + name + struct.pack(">H", len(dest)) + dest
    msg = b"f" + struct.pack(">H", len(body) + 3) + body
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sock)
except OSError:
    print("refused"); sys.exit(0)
try:
    s.sendall(msg)
    a = s.recv(1)
except OSError:
    a = b""
print(a.decode() if a else "closed")
PYEOF
}

assert_eq O "$(request postgres C)" "postgres's check"
assert_eq O "$(request root C)" "root's check"
assert_eq refused "$(request "$OTHER" C)" "$OTHER connecting to a 0600 socket"

# Loosened by hand, the socket lets the other user connect; the daemon still serves nothing.
chmod 0666 "$SOCK"
assert_eq closed "$(request "$OTHER" C)" "$OTHER's check through a loosened socket"
assert_eq closed "$(request "$OTHER" f "$SEG" pg_wal/FROM_OTHER)" "$OTHER's fetch"
assert_absent "$T/src/pg_wal/FROM_OTHER" "a file fetched for $OTHER"
grep -q "refusing a connection from uid $(id -u "$OTHER")" "$T/daemon.log" ||
	fail "the daemon's log does not name the refused uid: $(cat "$T/daemon.log")"

# Destinations outside PGDATA/pg_wal, asked by the server's own user.
ctl=$(sha "$T/src/global/pg_control")
for dest in global/pg_control "$T/src/global/pg_control" pg_wal/../global/pg_control \
	"$T/src_evil/pg_wal/$SEG" "$T/src/../src_evil/pg_wal/$SEG" ../src_evil/pg_wal/"$SEG" \
	pg_wal/archive_status/x "$T/src/pg_wal"; do
	assert_eq E "$(request postgres f "$SEG" "$dest")" "fetch to $dest"
done
assert_eq "$ctl" "$(sha "$T/src/global/pg_control")" "pg_control after the refused fetches"
[ -z "$(ls -A "$T/src_evil/pg_wal")" ] || fail "a fetch wrote into the sibling $T/src_evil"
grep -q "refusing destination global/pg_control" "$T/daemon.log" || fail "no line names the refused destination"

# The one place a fetch may write, relative and absolute.
assert_eq O "$(request postgres f "$SEG" pg_wal/RECOVERYXLOG)" "fetch to pg_wal/RECOVERYXLOG"
cmp -s "$T/src/pg_wal/$SEG" "$T/src/pg_wal/RECOVERYXLOG" || fail "the fetched segment differs"
assert_eq O "$(request postgres f "$SEG" "$T/src/pg_wal/RECOVERY2")" "fetch to an absolute path in pg_wal"
cmp -s "$T/src/pg_wal/$SEG" "$T/src/pg_wal/RECOVERY2" || fail "the second fetched segment differs"

# Run as root for a server of another user, the socket is that user's, still 0600.
if [ "$(id -u)" = 0 ]; then
	kill "$WALC_D"
	for _ in $(seq 1 100); do kill -0 "$WALC_D" 2>/dev/null || break; sleep 0.05; done
	rm -f "$SOCK"
	(umask 000; exec env PGDATA="$T/src" WALG_FILE_PREFIX="$T/repo" "$WALC" daemon "$SOCK") >>"$T/daemon.log" 2>&1 &
	BG_PIDS+=("$!")
	for _ in $(seq 1 200); do [ -S "$SOCK" ] && break; sleep 0.05; done
	assert_eq "postgres 600" "$(stat -c '%U %a' "$SOCK")" "a root daemon's socket"
	assert_eq O "$(request postgres C)" "postgres's check of a root daemon"
	assert_eq refused "$(request "$OTHER" C)" "$OTHER's check of a root daemon"
fi
log "daemon guard ok"
