#!/usr/bin/env bash
# A sentinel is held to what PostgreSQL recorded in the backup (issue 42 §2): its start LSN
# moved one WAL segment ahead (a changed digit: a delta built on it would leave out every page
# changed in between), its finish LSN or its system identifier changed, each makes backup-verify
# exit 1 with a problem naming the sentinel and what disagrees (backup_label's START WAL
# LOCATION, the .backup history file's STOP WAL LOCATION, pg_control); the next backup-push
# does not build a delta on the moved one: it takes a full backup with a WARNING naming the
# mismatch, and that backup restores to the source's dump. A clean repository's next push is
# a delta.
. "$(dirname "$0")/lib.sh"
it_setup sentinel_check

mkdir -p "$T/repo"
E=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=3)
walc_wrapper "${E[@]}"
pg_own "$T"
pgbench_source 1 archive.log

push() { # REPO: backup-push into it; prints the backup's name
	wrun_pg "${E[@]}" WALG_FILE_PREFIX="$1" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 0 "backup-push"
	printf '%s\n' "$W_ERR" >"$T/push.err" # (this runs in a subshell)
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
FULL=$(push "$T/repo")
wrun "${E[@]}" -- backup-verify "$FULL"
expect_rc 0 "backup-verify of the clean full: $W_OUT"
ok "a clean backup's sentinel agrees with its records"

SENTINEL=basebackups_005/${FULL}_backup_stop_sentinel.json
# damaged KEY ADD WHAT NEEDLE: a copy whose sentinel's KEY is moved by ADD fails backup-verify
# with a problem naming the sentinel and holding NEEDLE
damaged() {
	rm -rf "$T/dmg"
	cp -a "$T/repo" "$T/dmg"
	"$PY" "$IT_DIR/restore_damage.py" sentinel "$T/dmg/$SENTINEL" "$1" "$2"
	wrun "${E[@]}" WALG_FILE_PREFIX="$T/dmg" -- backup-verify "$FULL"
	expect_rc 1 "backup-verify, $3"
	assert_match "$W_OUT" "^PROBLEM $SENTINEL: .*$4" "backup-verify, $3"
	log "$3: $(grep "^PROBLEM $SENTINEL" <<<"$W_OUT" | head -n 1)"
}
damaged SystemIdentifier 1 "system identifier" "but pg_control says"
damaged FinishLSN 8 "finish LSN" "000000010000000000000[0-9A-F]{3}\.[0-9A-F]{8}\.backup says STOP WAL LOCATION"
damaged LSN 16777216 "start LSN one segment ahead" "but backup_label says START WAL LOCATION"
ok "backup-verify finds a sentinel that disagrees with backup_label, pg_control and the history file"

# Changes the base must not lose: rows updated after it.
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -n -t 200 -c 2 postgres >"$T/log/pgbench.log" 2>&1 ||
	fail "pgbench"
psqlc "$PORT" "UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid % 3 = 0; CHECKPOINT"
NEXT=$(push "$T/dmg")
[[ $NEXT =~ ^base_[0-9A-F]{24}$ ]] || fail "the push after a moved sentinel must be full: $NEXT"
assert_match "$(cat "$T/push.err")" "^WARNING: .* not taking a delta from $FULL: $SENTINEL: start LSN .*, but backup_label says START WAL LOCATION" \
	"the push names the mismatch"
log "$(grep 'not taking a delta' "$T/push.err" | cut -c 1-240)"
DELTA=$(push "$T/repo")
[[ $DELTA == *_D_${FULL:5:24} ]] || fail "the clean repository's next push must be a delta: $DELTA"
last=$(switch_wal "$PORT")
wait_archived "$SRC" "$last"
dump_norm "$PORT" >"$T/source.sql"
pg_stop "$SRC"
# the full the damaged repository got instead restores whole (WAL from the clean one)
cp -n "$T/repo/wal_005/"* "$T/dmg/wal_005/"
restore_start "$T/restored" "$NEXT" "${E[@]}" WALG_FILE_PREFIX="$T/dmg" -- \
	"recovery_target_timeline = 'latest'"
# shellcheck disable=SC2153 # RPORT is set by restore_start
assert_dump_eq "$T/source.sql" "$RPORT" "the full taken instead of the delta"
pg_stop "$T/restored"
ok "backup-push takes a full backup, with a warning, rather than a delta on a moved sentinel"
