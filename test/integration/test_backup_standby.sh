#!/usr/bin/env bash
# A backup from a standby is done only once its WAL is in the repository (issue 42 §5). A
# primary archives into the repository while $T/archive-on exists; a streaming standby is
# backed up (local mode) while the primary's archiving fails: with WALG_STOP_BACKUP_TIMEOUT=4s
# backup-push exits 1 naming the segment it waited for, leaving no backup. With archiving
# back, a push waits (saying for which segment) until the primary switches WAL and archives
# it, then completes; its WAL from start to stop segment is in the repository, and the backup
# restores to a consistent cluster through that WAL, and backup-verify does not take the .backup
# file it shares a name with (pg_basebackup's, which made the standby) for its own.
. "$(dirname "$0")/lib.sh"
it_setup backup-standby

P=$T/primary
ARCHIVE_SWITCH=1 walc_archiving "$P"
PPORT=$PORT
psqlc "$PPORT" "CREATE TABLE t AS SELECT generate_series(1, 1000) i"
wait_archived "$P" "$(switch_wal "$PPORT")" 30
as_pg "$PGBIN/pg_basebackup" -h "$T" -p "$PPORT" -U postgres -D "$T/standby" -X stream -R -c fast \
	>"$T/log/basebackup.log" 2>&1 || { cat "$T/log/basebackup.log"; fail "pg_basebackup"; }
S=$T/standby
sed -i '/^port = /d; /^unix_socket_directories/d; /^listen_addresses/d' "$S/postgresql.conf"
SPORT=$(free_port)
pg_start "$S" "$SPORT"
assert_eq t "$(psqlc "$SPORT" "SELECT pg_is_in_recovery()")" "the standby is in recovery"

rm "$T/archive-on" # the primary's archiving fails from here on
psqlc "$PPORT" "INSERT INTO t SELECT generate_series(1001, 2000)"
wait_replayed "$PPORT" "$SPORT"
sentinels() { find "$R/basebackups_005" -maxdepth 1 -name '*_backup_stop_sentinel.json' 2>/dev/null | wc -l; }

wrun_pg "${E[@]}" WALG_STOP_BACKUP_TIMEOUT=4s PGHOST="$T" PGPORT="$SPORT" -- backup-push "$S"
expect_rc 1 "backup-push on the standby while the primary cannot archive"
assert_match "$W_ERR" "WAL segment [0-9A-F]{24} was not archived into $R within WALG_STOP_BACKUP_TIMEOUT \(4000 ms\)" \
	"the error names the segment and the timeout"
missing=$(grep -oE 'WAL segment [0-9A-F]{24}' <<<"$W_ERR" | tail -n 1 | cut -d' ' -f3)
compgen -G "$R/wal_005/$missing*" >/dev/null && fail "the segment named, $missing, is in the repository"
assert_eq 0 "$(sentinels)" "sentinels after the failed push"
[ -z "$(find "$R/basebackups_005" -type f 2>/dev/null)" ] ||
	fail "the failed push left objects: $(find "$R/basebackups_005" -type f | head -3)"
ok "the primary not archiving: the standby's backup fails at the timeout naming $missing, no backup"

touch "$T/archive-on"
as_pg env PGDATA="$S" ASAN_OPTIONS="$ASAN_OPTIONS" "${E[@]}" WALG_STOP_BACKUP_TIMEOUT=120s \
	PGHOST="$T" PGPORT="$SPORT" "$WALC_PG" backup-push "$S" >/dev/null 2>"$T/log/standby-push.log" </dev/null &
push_pid=$!
BG_PIDS+=("$push_pid")
for _ in $(seq 1 300); do grep -q 'waiting for the primary to archive WAL segment' "$T/log/standby-push.log" && break; sleep 0.1; done
grep -q 'waiting for the primary to archive WAL segment' "$T/log/standby-push.log" ||
	fail "the push does not say what it waits for: $(cat "$T/log/standby-push.log")"
sleep 2
kill -0 "$push_pid" 2>/dev/null || fail "the push ended before the primary archived its WAL: $(cat "$T/log/standby-push.log")"
assert_eq 0 "$(sentinels)" "sentinels while the WAL is not archived"
ok "archiving back but the last segment incomplete: the push waits, saying for which segment"

switch_wal "$PPORT" >/dev/null
wait "$push_pid" || fail "the standby's push failed: $(cat "$T/log/standby-push.log")"
assert_no_sanitizer_reports "$T/log/standby-push.log"
assert_eq 1 "$(sentinels)" "sentinels after the primary archived"
B=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/standby-push.log")
"$PY" - "$R/basebackups_005/${B}_backup_stop_sentinel.json" "$R/wal_005" <<'EOF' || fail "the backup's WAL is not all in the repository"
import json, os, sys
s = json.load(open(sys.argv[1]))
seg = 1 << 20
names = {n.split(".")[0] for n in os.listdir(sys.argv[2])}
for n in range(s["LSN"] // seg, (s["FinishLSN"] - 1) // seg + 1):
    name = "%08X%08X%08X" % (1, n >> 12, n & 0xFFF)
    assert name in names, name
EOF
ok "the primary switched and archived: the push completes ($B), its WAL all in the repository"

# The same rule in remote mode (BASE_BACKUP from the standby, which does not wait for WAL).
rm "$T/archive-on"
psqlc "$PPORT" "INSERT INTO t SELECT generate_series(2001, 3000)"
switch_wal "$PPORT" >/dev/null
psqlc "$PPORT" "CHECKPOINT"
wait_replayed "$PPORT" "$SPORT"
psqlc "$SPORT" "CHECKPOINT" # a restartpoint: the next backup starts later than the last
wrun_pg "${E[@]}" WALG_STOP_BACKUP_TIMEOUT=4s PGHOST="$T" PGPORT="$SPORT" -- backup-push
expect_rc 1 "remote backup-push from the standby while the primary cannot archive"
assert_match "$W_ERR" "WAL segment [0-9A-F]{24} was not archived into $R within WALG_STOP_BACKUP_TIMEOUT" \
	"remote mode: the error names the segment"
assert_eq 1 "$(sentinels)" "sentinels after the failed remote push"
ok "remote mode from the standby: the same wait, the same failure at the timeout"
touch "$T/archive-on"

restore_start "$T/restored" "$B" "${E[@]}"
assert_eq 2000 "$(psqlc "$RPORT" "SELECT count(*) FROM t")" "rows in the restored standby backup"
pg_stop "$T/restored"
ok "the standby's backup restores"

# The standby's first restartpoint was the checkpoint of pg_basebackup, which made it: the
# standby's backup shares its start, and so its .backup history file's name, with that backup,
# whose file the primary archived. backup-verify must not take that file for the backup's own.
ls "$R/wal_005/${B:5:24}".*.backup* >/dev/null 2>&1 || fail "no .backup file shares $B's start"
wrun "${E[@]}" -- backup-verify "$B"
expect_rc 0 "backup-verify of the standby's backup (stdout: $W_OUT)"
assert_contains "$W_ERR" "is another backup's" "backup-verify says why the .backup file is not compared"
ok "the standby's backup, sharing its start with pg_basebackup's, verifies"
