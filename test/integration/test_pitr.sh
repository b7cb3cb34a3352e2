#!/usr/bin/env bash
# Point-in-time recovery from a walc base backup and walc-archived WAL.
#
# A source cluster archives with walc wal-push. A backup-push is taken first; then 6 rows are
# inserted one per transaction, 1 s apart, each stamped with clock_timestamp(); the WAL is
# switched and archived. The backup (LATEST) is restored with backup-fetch and recovered
# through walc wal-fetch with recovery_target_time strictly between the stamps of rows 3 and 4
# (recovery_target_action = promote): exactly rows 1..3 must be there. A second restore with a
# target between rows 5 and 6 must hold exactly rows 1..5.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup pitr
START=$SECONDS

REPO=$T/repo
ENVS=(WALG_FILE_PREFIX="$REPO" WALG_COMPRESSION_METHOD=zstd)
mkdir -p "$REPO"
walc_wrapper WALG_FILE_PREFIX="$REPO" WALG_COMPRESSION_METHOD=zstd

SRC=$T/src
PORT=$(free_port)
pg_init "$SRC"
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "fsync = off" \
	"archive_command = '$T/walc.sh wal-push %p 2>>$T/log/push.log'"
pg_own "$T"
pg_start "$SRC" "$PORT"
psqlc "$PORT" "CREATE TABLE stamps (id int PRIMARY KEY, ts timestamptz NOT NULL)"

wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push"
wrun "${ENVS[@]}" -- backup-list
expect_rc 0 "backup-list"
NAME=$(printf '%s\n' "$W_OUT" | tail -n 1 | cut -f 1 -d ' ')
[[ $NAME =~ ^base_[0-9A-F]{24}$ ]] || fail "backup-list after backup-push: $W_OUT"
log "backup $NAME taken; inserting 6 rows 1 s apart"

for i in 1 2 3 4 5 6; do
	[ "$i" = 1 ] || psqlc "$PORT" "SELECT pg_sleep(1)" >/dev/null
	psqlc "$PORT" "INSERT INTO stamps VALUES ($i, clock_timestamp())"
done
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 120
psqlc "$PORT" "SELECT id, ts FROM stamps ORDER BY id" | sed 's/^/  /'
# midpoints between consecutive stamps, in UTC with microseconds
target() { # A B: the instant halfway between the stamps of rows A and B
	psqlc "$PORT" "SET TimeZone = 'UTC';
		SELECT to_char(a.ts + (b.ts - a.ts) / 2, 'YYYY-MM-DD HH24:MI:SS.US') || '+00'
		FROM stamps a, stamps b WHERE a.id = $1 AND b.id = $2"
}
TARGET34=$(target 3 4)
TARGET56=$(target 5 6)
ok=$(psqlc "$PORT" "SELECT (SELECT ts FROM stamps WHERE id = 3) < '$TARGET34'::timestamptz
	AND '$TARGET34'::timestamptz < (SELECT ts FROM stamps WHERE id = 4)
	AND (SELECT ts FROM stamps WHERE id = 4) - (SELECT ts FROM stamps WHERE id = 3) > interval '0.5 s'")
assert_eq t "$ok" "target $TARGET34 strictly between the stamps of rows 3 and 4"
pg_stop "$SRC"
assert_no_sanitizer_reports "$T/log/push.log"

restore_to() { # TARGET EXPECTED_IDS
	local target=$1 want=$2 R=$T/r rport got
	rm -rf "$R" "$R.log"
	wrun "${ENVS[@]}" -- backup-fetch "$R" LATEST
	expect_rc 0 "backup-fetch LATEST"
	pg_conf "$R" "archive_mode = off" "restore_command = '$T/walc.sh wal-fetch %f %p'" \
		"recovery_target_time = '$target'" "recovery_target_action = 'promote'"
	touch "$R/recovery.signal"
	pg_own "$R"
	rport=$(free_port)
	pg_start "$R" "$rport"
	wait_not_in_recovery "$rport" 120
	got=$(psqlc "$rport" "SELECT string_agg(id::text, ' ' ORDER BY id) FROM stamps")
	grep -E 'recovery stopping before commit of transaction' "$R.log" | sed 's/^/  /' || true
	pg_stop "$R"
	assert_eq "$want" "$got" "rows after recovery to $target"
	grep -q 'recovery stopping before commit of transaction' "$R.log" ||
		fail "recovery did not stop at a commit before $target (see $R.log)"
	assert_no_sanitizer_reports "$R.log"
	ok "recovery_target_time = '$target' -> rows $got"
}

restore_to "$TARGET34" "1 2 3"
restore_to "$TARGET56" "1 2 3 4 5"
log "all done in $((SECONDS - START))s"
