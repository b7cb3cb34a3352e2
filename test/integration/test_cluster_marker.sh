#!/usr/bin/env bash
# One cluster per repository (issue 21). Cluster A archives to a repository and is backed up;
# then a second cluster B (a fresh initdb: another system identifier) is pointed at the same
# prefix, as a copy-pasted configuration would:
#   - B's archive_command, a direct wal-push of B's segment, B's backup-push (local and
#     remote) and B's wal-push through `walc daemon` each fail, naming both identifiers;
#   - A's archived segments are byte-identical afterwards and A's backup still restores;
#   - a repository WAL-G wrote has no marker: the newest backup's identifier counts (the marker
#     removed here, B is refused naming that backup), and A's next push records it again;
#   - WALG_ALLOW_SYSTEM_ID_CHANGE=true lets B in on purpose (then A is the other cluster);
#   - WAL-G v3.0.9 (../shared/tools/wal-g, when present) restores A's backup from the
#     repository with the marker and the claims in it.
. "$(dirname "$0")/lib.sh"
it_setup cluster-marker

REPO=$T/repo
ENVS=(WALG_FILE_PREFIX="$REPO" WALG_COMPRESSION_METHOD=lz4)
mkdir -p "$REPO" "$T/home"
walc_wrapper "${ENVS[@]}"
pgbench_source 1 push-a.log
PA=$PORT
SYS_A=$(psqlc "$PA" "SELECT system_identifier FROM pg_control_system()")
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PA" -- backup-push "$SRC"
expect_rc 0 "backup-push of A"
BACKUP_A=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
psqlc "$PA" "CREATE TABLE after_backup AS SELECT 1 AS x"
dump_norm "$PA" >"$T/a.dump"
LAST_A=$(switch_wal "$PA")
wait_archived "$SRC" "$LAST_A"
[ -f "$REPO/walc_cluster.json" ] || fail "no cluster marker after A's archiving"
grep -q "\"$SYS_A\"" "$REPO/walc_cluster.json" || fail "the marker does not name A ($SYS_A): $(cat "$REPO/walc_cluster.json")"
wal_state() { find "$REPO/wal_005" -type f -printf '%P %s\n' | sort | while read -r f s; do echo "$f $s $(sha "$REPO/wal_005/$f")"; done; }
wal_state >"$T/wal-a.before"
log "A ($SYS_A) archived up to $LAST_A, backup $BACKUP_A"

# ---- B: another cluster, same prefix ---------------------------------------------------------
B=$T/b
PB=$(free_port)
pg_init "$B"
pg_conf "$B" "wal_level = replica" "archive_mode = on" "max_wal_senders = 4" \
	"archive_command = '$T/walc.sh wal-push %p 2>>$T/log/push-b.log'"
pg_start "$B" "$PB"
SYS_B=$(psqlc "$PB" "SELECT system_identifier FROM pg_control_system()")
[ "$SYS_A" != "$SYS_B" ] || fail "test set-up: A and B have one system identifier"
psqlc "$PB" "CREATE TABLE b AS SELECT g FROM generate_series(1, 1000) g"
SEG_B=$(switch_wal "$PB")
for _ in $(seq 1 200); do grep -q "system identifier" "$T/log/push-b.log" 2>/dev/null && break; sleep 0.1; done
refusal() { # TEXT WHAT: one refusal naming both identifiers
	assert_contains "$1" "this cluster's system identifier is $SYS_B" "$2: names B's identifier"
	assert_contains "$1" "cluster $SYS_A" "$2: names A's identifier"
	assert_contains "$1" "WALG_ALLOW_SYSTEM_ID_CHANGE" "$2: names the way out"
}
refusal "$(grep -m1 ERROR "$T/log/push-b.log" || true)" "B's archive_command"
wait_archive_failed "$PB"
log "  archive_command: $(grep -m1 ERROR "$T/log/push-b.log")"

wrun_pg "${ENVS[@]}" PGDATA="$B" -- wal-push "$B/pg_wal/$SEG_B"
expect_rc 1 "wal-push of B's segment"
assert_eq 1 "$(nlines "$W_ERR")" "wal-push of B's segment: error lines ($W_ERR)"
refusal "$W_ERR" "wal-push of B's segment"
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PB" -- backup-push "$B"
expect_rc 1 "backup-push of B"
refusal "$W_ERR" "backup-push of B"
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PB" -- backup-push
expect_rc 1 "remote backup-push of B"
refusal "$W_ERR" "remote backup-push of B"

# The daemon: an 'F' request for B's segment is answered 'E', and the daemon logs why.
SOCK=$T/walc.sock
as_pg env HOME="$T/home" PGDATA="$B" ASAN_OPTIONS="$ASAN_OPTIONS" "${ENVS[@]}" \
	"$WALC_PG" daemon "$SOCK" >>"$T/log/daemon.log" 2>&1 &
BG_PIDS+=("$!")
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
[ -S "$SOCK" ] || { cat "$T/log/daemon.log"; fail "daemon did not start"; }
mapfile -t -O "${#BG_PIDS[@]}" BG_PIDS < <(pgrep -f " daemon $SOCK" || true)
answer=$("$PY" - "$SOCK" "$SEG_B" <<'PYEOF'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
name = sys.argv[2].encode()
s.sendall(b"F" + struct.pack(">H", len(name) + 3) + name)
print(s.recv(1).decode())
PYEOF
)
assert_eq E "$answer" "daemon answer to B's segment"
refusal "$(grep ERROR "$T/log/daemon.log" | tail -n 1)" "daemon wal-push of B's segment"
ok "a second cluster is refused by archive_command, wal-push, backup-push (local, remote) and the daemon"

wal_state >"$T/wal-a.after"
cmp -s "$T/wal-a.before" "$T/wal-a.after" || fail "A's segments changed: $(diff "$T/wal-a.before" "$T/wal-a.after" | head -n 5)"
ok "A's segments are byte-identical"

# ---- a repository without the marker (as WAL-G leaves it): the newest sentinel counts ------------
mv "$REPO/walc_cluster.json" "$T/marker.saved"
wrun_pg "${ENVS[@]}" PGDATA="$B" -- wal-push "$B/pg_wal/$SEG_B"
expect_rc 1 "wal-push of B's segment, no marker"
assert_contains "$W_ERR" "its newest backup $BACKUP_A" "without a marker the newest backup names the cluster"
refusal "$W_ERR" "wal-push of B's segment, no marker"
[ ! -e "$REPO/walc_cluster.json" ] || fail "a refused push recorded a marker"
psqlc "$PA" "INSERT INTO after_backup VALUES (2)"
LAST_A=$(switch_wal "$PA")
wait_archived "$SRC" "$LAST_A"
grep -q "\"$SYS_A\"" "$REPO/walc_cluster.json" || fail "A's next push did not record A again"
ok "without a marker the newest backup names the cluster; A's next push records it again"

# ---- A still restores ----------------------------------------------------------------------
pg_stop "$SRC"
restore_start "$T/ra" "$BACKUP_A" "${ENVS[@]}" -- "recovery_target_timeline = 'current'" # to the archive's end
dump_norm "$RPORT" >"$T/ra.dump"
amcheck_all "$RPORT"
pg_stop "$T/ra"
grep -q 'after_backup' "$T/ra.dump" || fail "A's restore did not replay the WAL archived after the backup"
ok "A's backup restores with its archived WAL"

# ---- WAL-G restores the repository with the marker and the claims -----------------------------
WALG=$ROOT/../shared/tools/wal-g
if [ -x "$WALG" ]; then
	[ -n "$(find "$REPO/basebackups_005" -name 'walc_claim_*.json')" ] || fail "no claim objects to show WAL-G"
	rm -rf "$T/rw"
	as_pg env HOME="$T/home" WALG_FILE_PREFIX="$REPO" "$WALG" backup-fetch "$T/rw" "$BACKUP_A" >"$T/log/walg-fetch.log" 2>&1 ||
		{ cat "$T/log/walg-fetch.log"; fail "WAL-G backup-fetch of a walc repository with a marker"; }
	sed -i '/^port = /d; /^listen_addresses/d; /^unix_socket_directories/d; /^archive_command/d; /^archive_mode/d; /^restore_command/d' "$T/rw/postgresql.conf"
	printf "archive_mode = off\nrestore_command = 'env HOME=%s WALG_FILE_PREFIX=%s %s wal-fetch %%f %%p'\nrecovery_target_action = 'promote'\n" \
		"$T/home" "$REPO" "$WALG" >>"$T/rw/postgresql.conf"
	touch "$T/rw/recovery.signal"
	pg_own "$T/rw"
	P=$(free_port)
	pg_start "$T/rw" "$P"
	wait_not_in_recovery "$P"
	dump_norm "$P" >"$T/rw.dump"
	pg_stop "$T/rw"
	cmp -s "$T/ra.dump" "$T/rw.dump" || fail "WAL-G's restore differs from walc's"
	ok "WAL-G v3.0.9 restores A's backup from the repository with the marker and claims"
else
	log "skipped: WAL-G check, no WAL-G binary at $WALG"
fi

# ---- on purpose: WALG_ALLOW_SYSTEM_ID_CHANGE -------------------------------------------------
wrun_pg "${ENVS[@]}" PGDATA="$B" WALG_ALLOW_SYSTEM_ID_CHANGE=true -- wal-push "$B/pg_wal/$SEG_B"
expect_rc 0 "wal-push of B's segment with WALG_ALLOW_SYSTEM_ID_CHANGE=true"
assert_contains "$W_ERR" "now holds cluster $SYS_B" "the change is logged"
grep -q "\"$SYS_B\"" "$REPO/walc_cluster.json" || fail "the marker does not name B after the allowed change"
ok "WALG_ALLOW_SYSTEM_ID_CHANGE=true lets the other cluster in and records it"
pg_stop "$B"
