#!/usr/bin/env bash
# wal-restore after a failover feeds pg_rewind the WAL it asks for. A primary A and its standby
# B archive into one repository (1 MiB segments, small max_wal_size so that pg_wal keeps
# little). A stops, B is promoted (timeline 2) and writes; A starts again on timeline 1 and
# writes too (the two diverge), then both stop. pg_rewind of A from B fails for want of A's
# WAL, which A has recycled; after `walc wal-restore A B` it succeeds, and A, started as B's
# standby without any restore_command, replays to B's state: equal dumps, amcheck clean.
# The guards: a running cluster, another cluster's directory, and one directory given twice
# are refused without writing anything. With WAL-G's binary, its wal-restore on copies restores
# the same bytes into SOURCE (it restores nothing into TARGET: pg_rewind still lacks A's WAL).
. "$(dirname "$0")/lib.sh"
it_setup wal_restore

pitr_source
A=$SRC
APORT=$PORT
pg_stop "$A"
pg_conf "$A" "max_wal_senders = 4" "hot_standby = on" "wal_log_hints = on" \
	"min_wal_size = 2MB" "max_wal_size = 4MB" "wal_keep_size = 0"
pg_start "$A" "$APORT"
sql() { psqlc "$1" "$2" >/dev/null; }
sql "$APORT" "CREATE TABLE t (id int PRIMARY KEY, v text); CREATE EXTENSION amcheck"
sql "$APORT" "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 20000) g"

B=$T/b
standby_of "$APORT" "$B"
BPORT=$(free_port)
pg_start "$B" "$BPORT"
sql "$APORT" "UPDATE t SET v = v || 'a' WHERE id % 3 = 0"
wait_replayed "$APORT" "$BPORT"

# the failover: A stops, B is promoted and writes, its early segments recycled
pg_stop "$A"
sql "$BPORT" "SELECT pg_promote()"
wait_not_in_recovery "$BPORT"
# write WAL_MB of rows to PORT, checkpointing: pg_wal keeps little of it
churn() {
	for _ in $(seq 1 "$2"); do
		sql "$1" "UPDATE t SET v = md5(v) WHERE id % 4 = $(( RANDOM % 4 ))"
		sql "$1" "CHECKPOINT"
	done
}
churn "$BPORT" 6
sql "$BPORT" "CREATE TABLE on_b AS SELECT 'written on timeline 2'::text AS note"
last=$(switch_wal "$BPORT")
wait_archived "$B" "$last" 120
# A comes back as a primary on timeline 1: it diverges, and archives its own
pg_start "$A" "$APORT"
sql "$APORT" "CREATE TABLE lost_on_a AS SELECT 1 AS one"
churn "$APORT" 6
last=$(switch_wal "$APORT")
wait_archived "$A" "$last" 120

# the guards, while B runs
WENV=(WALG_FILE_PREFIX="$R" WALG_PG_WAL_SIZE=1)
pg_stop "$A"
wrun_refused "wal-restore with SOURCE running" "runs on SOURCE $B" "$A/pg_wal" \
	"${WENV[@]}" -- wal-restore "$A" "$B"
pg_stop "$B"
wrun_refused "wal-restore with one directory twice" "are one directory" "$A/pg_wal $B/pg_wal" \
	"${WENV[@]}" -- wal-restore "$A" "$A"
pg_init "$T/other" --wal-segsize=1
wrun_refused "wal-restore with another cluster" "are not copies of one cluster" \
	"$A/pg_wal $B/pg_wal" "${WENV[@]}" -- wal-restore "$A" "$T/other"
ok "refused: a running SOURCE, one directory twice, another cluster; nothing written"

# WAL-G's wal-restore (when the binary is here) reads the same repository: on copies, what it
# restores into SOURCE's pg_wal is what walc restores there
WALG=${WALC_WALG:-$ROOT/../shared/tools/wal-g}
if [ -x "$WALG" ]; then
	cp -a "$A" "$T/a-walg"
	cp -a "$B" "$T/b-walg"
	as_pg env WALG_FILE_PREFIX="$R" WALG_PG_WAL_SIZE=1 "$WALG" wal-restore "$T/a-walg" "$T/b-walg" \
		>"$T/log/walg-restore.log" 2>&1 || { cat "$T/log/walg-restore.log"; fail "WAL-G wal-restore"; }
	walg_got=$(comm -13 <(ls "$B/pg_wal") <(ls "$T/b-walg/pg_wal"))
	[ -n "$walg_got" ] || fail "WAL-G's wal-restore restored nothing from walc's repository"
	if as_pg "$PGBIN/pg_rewind" --dry-run -D "$T/a-walg" --source-pgdata="$T/b-walg" >"$T/log/rewind-walg.log" 2>&1; then
		log "WAL-G's wal-restore: pg_rewind --dry-run succeeds"
	else
		log "WAL-G's wal-restore restores SOURCE's WAL only: pg_rewind still says $(grep -o 'could not open file "[^"]*"' "$T/log/rewind-walg.log" | head -n 1)"
	fi
fi

# pg_rewind asks for WAL that A no longer has
if as_pg "$PGBIN/pg_rewind" --dry-run -D "$A" --source-pgdata="$B" >"$T/log/rewind-dry.log" 2>&1; then
	cat "$T/log/rewind-dry.log"
	fail "pg_rewind found all of A's WAL without wal-restore: the test does not test it"
fi
assert_contains "$(cat "$T/log/rewind-dry.log")" "could not open file" "pg_rewind without the WAL"
wrun_pg "${WENV[@]}" -- wal-restore "$A" "$B"
expect_rc 0 "wal-restore A B"
assert_contains "$W_ERR" "the timelines diverge at" "wal-restore's account"
log "$(grep -c 'restored ' <<<"$W_ERR") WAL files restored: $(grep 'WAL files restored' <<<"$W_ERR")"
for f in ${walg_got:-}; do
	cmp -s "$B/pg_wal/$f" "$T/b-walg/pg_wal/$f" || fail "$f: WAL-G's wal-restore wrote other bytes than walc's"
done
as_pg "$PGBIN/pg_rewind" -D "$A" --source-pgdata="$B" >"$T/log/rewind.log" 2>&1 ||
	{ cat "$T/log/rewind.log"; fail "pg_rewind after wal-restore"; }
ok "pg_rewind of A from B ran on the WAL wal-restore restored"

# A as B's standby, with no restore_command: everything it replays came through pg_rewind
pg_start "$B" "$BPORT"
sed -i '/^port = /d; /^unix_socket_directories/d; /^listen_addresses/d; /^archive_command/d; /^restore_command/d' "$A/postgresql.conf"
pg_conf "$A" "archive_mode = off" "primary_conninfo = 'host=$T port=$BPORT user=postgres'"
# pg_rewind copied B's configuration, whose primary_conninfo (from pg_basebackup -R) names A
rm -f "$A/recovery.signal" "$A/postgresql.auto.conf"
touch "$A/standby.signal"
pg_own "$A"
pg_start "$A" "$APORT"
sql "$BPORT" "CREATE TABLE after_rewind AS SELECT 2 AS two"
wait_replayed "$BPORT" "$APORT"
dump_norm "$BPORT" >"$T/b.sql"
assert_dump_eq "$T/b.sql" "$APORT" "A rewound and replaying B"
[ "$(psqlc "$APORT" "SELECT count(*) FROM pg_class WHERE relname = 'lost_on_a'")" = 0 ] ||
	fail "A still has what it wrote after the divergence"
amcheck_all "$APORT"
assert_no_sanitizer_reports "$A.log"
ok "A, rewound, streams from B and equals it (dumps, amcheck)"
