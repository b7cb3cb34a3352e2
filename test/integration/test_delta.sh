#!/usr/bin/env bash
# Delta backups (issue 5): a chain full + 3 deltas with WALG_DELTA_MAX_STEPS=3 taken while
# pgbench writes into another database; the 5th push is full; every backup restores to a
# consistent cluster (amcheck) and the quiet database dumps exactly as it was at that backup,
# including a table dropped and re-created under the same name; LATEST_FULL and
# --delta-from-name pick their bases; a base from another cluster is refused; --verify finds a
# page corrupted on disk and backup-list --detail counts it.
. "$(dirname "$0")/lib.sh"
it_setup delta

mkdir -p "$T/repo" "$T/ts"
pg_own "$T"
ENVS=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=3)
pg_init "$T/src" --data-checksums
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${ENVS[*]} $WALC_PG wal-push %p'" "checkpoint_timeout = 1h"
pg_start "$T/src" "$PORT"
sql() { as_pg "$PGBIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$T" -p "$PORT" -U postgres -d "$1" -c "$2"; }
sql postgres "CREATE DATABASE app"
sql postgres "CREATE DATABASE load"
sql postgres "CREATE TABLESPACE ts LOCATION '$T/ts'"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 5 -q load >/dev/null 2>&1
sql app "CREATE TABLE keep (id int PRIMARY KEY, v text) ; INSERT INTO keep SELECT g, md5(g::text) FROM generate_series(1, 20000) g"
sql app "CREATE TABLE replaced (id int, v text); INSERT INTO replaced SELECT g, 'old-' || g FROM generate_series(1, 3000) g"
sql app "CREATE TABLE in_ts (id int PRIMARY KEY, v text) TABLESPACE ts; INSERT INTO in_ts SELECT g, 'ts-' || g FROM generate_series(1, 5000) g"

push() { # backup-push with ENVS and $PUSH_ARGS; prints the backup name
	# shellcheck disable=SC2086
	wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src" ${PUSH_ARGS:-}
	expect_rc 0 "backup-push $*"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
app_dump() { as_pg "$PGBIN/pg_dump" -h "$T" -p "$1" -U postgres app | normalize_dump; }

# Writes into "load" run during every backup; "app" changes only between backups.
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -n -c 2 -T 600 load >/dev/null 2>&1 &
BG_PIDS+=($!)

declare -a NAMES
step_changes=(
	""
	"DROP TABLE replaced; CREATE TABLE replaced (id bigint PRIMARY KEY, v text NOT NULL, note text); INSERT INTO replaced SELECT g, 'new-' || g, 'after full' FROM generate_series(1, 1500) g"
	"UPDATE keep SET v = v || '-2' WHERE id % 7 = 0; INSERT INTO in_ts SELECT g, 'ts2-' || g FROM generate_series(5001, 6000) g"
	"DELETE FROM keep WHERE id > 19000; UPDATE replaced SET v = v || '-3' WHERE id <= 100"
	"INSERT INTO keep SELECT g, 'five' FROM generate_series(30001, 31000) g"
)
for i in 0 1 2 3 4; do
	[ -n "${step_changes[$i]}" ] && sql app "${step_changes[$i]}"
	sql app "CHECKPOINT"
	app_dump "$PORT" >"$T/app-$i.sql"
	NAMES[$i]=$(push)
	log "backup $i: ${NAMES[$i]}"
done
[[ ${NAMES[0]} =~ ^base_[0-9A-F]{24}$ ]] || fail "first backup must be full: ${NAMES[0]}"
for i in 1 2 3; do
	[[ ${NAMES[$i]} =~ ^base_[0-9A-F]{24}_D_${NAMES[$((i - 1))]:5:24}$ ]] ||
		fail "backup $i must be a delta of ${NAMES[$((i - 1))]}: ${NAMES[$i]}"
done
[[ ${NAMES[4]} =~ ^base_[0-9A-F]{24}$ ]] || fail "5th backup must be full (MAX_STEPS=3): ${NAMES[4]}"
# Taken while pgbench wrote: pages changed during a backup are left to WAL replay, so every
# backup of the chain verifies clean (no torn-page false positive).
for i in 0 1 2 3 4; do
	wrun "${ENVS[@]}" -- backup-verify "${NAMES[$i]}"
	expect_rc 0 "backup-verify ${NAMES[$i]}: $W_OUT"
done
log "ok: every backup verifies clean"
sent() { cat "$T/repo/basebackups_005/$1_backup_stop_sentinel.json"; }
sent "${NAMES[3]}" | "$PY" -c "import json,sys; s=json.load(sys.stdin); assert s['DeltaCount']==3 and s['DeltaFullName']=='${NAMES[0]}' and s['DeltaFrom']=='${NAMES[2]}', s" ||
	fail "delta 3 sentinel bookkeeping"
full_size=$(du -sb "$T/repo/basebackups_005/${NAMES[0]}" | cut -f1)
d1_size=$(du -sb "$T/repo/basebackups_005/${NAMES[1]}" | cut -f1)
log "full ${full_size} bytes, delta1 ${d1_size} bytes"
[ "$d1_size" -lt "$full_size" ] || fail "delta not smaller than full"

# LATEST_FULL: each delta references the full; --delta-from-name picks the named base.
n5=$(ENVS+=(WALG_DELTA_ORIGIN=LATEST_FULL); push)
n6=$(ENVS+=(WALG_DELTA_ORIGIN=LATEST_FULL); push)
[[ $n5 == *_D_${NAMES[4]:5:24} ]] || fail "LATEST_FULL delta 1 must reference ${NAMES[4]}: $n5"
[[ $n6 == *_D_${NAMES[4]:5:24} ]] || fail "LATEST_FULL delta 2 must reference the full ${NAMES[4]}: $n6"
n7=$(PUSH_ARGS="--delta-from-name ${NAMES[1]}" push)
[[ $n7 == *_D_${NAMES[1]:5:24} ]] || fail "--delta-from-name must base on ${NAMES[1]}: $n7"

kill "${BG_PIDS[@]}" 2>/dev/null || true
wait 2>/dev/null || true
BG_PIDS=()

# A base from another cluster is refused.
pg_init "$T/other"
P2=$(free_port)
pg_conf "$T/other" "wal_level = replica" "archive_mode = on" "archive_command = '/bin/true'"
pg_start "$T/other" "$P2"
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$P2" -- backup-push "$T/other"
expect_rc 1 "delta from another cluster"
assert_contains "$W_ERR" "this cluster's system identifier is" "refusal message (the repository's cluster)"
# Allowed to take over the repository, the delta still refuses a base of another cluster
# (in a copy: taking the repository over is for good).
cp -a "$T/repo" "$T/repo-copy"
wrun_pg "WALG_FILE_PREFIX=$T/repo-copy" WALG_DELTA_MAX_STEPS=3 WALG_ALLOW_SYSTEM_ID_CHANGE=true \
	PGHOST="$T" PGPORT="$P2" -- backup-push "$T/other"
expect_rc 1 "delta from another cluster, system identifier change allowed"
assert_contains "$W_ERR" "another cluster" "refusal message (the delta's base)"
rm -rf "$T/repo-copy"
pg_stop "$T/other"

# Every backup of the chain restores; the quiet database is exactly as at that backup.
pg_stop "$T/src"
for i in 0 1 2 3 4; do
	d=$T/r$i
	wrun "${ENVS[@]}" -- backup-fetch "$d" "${NAMES[$i]}"
	expect_rc 0 "backup-fetch ${NAMES[$i]}"
	recover_conf "$d" "${ENVS[*]}"
	p=$(free_port)
	pg_start "$d" "$p"
	wait_not_in_recovery "$p"
	app_dump "$p" >"$T/got-$i.sql"
	cmp -s "$T/app-$i.sql" "$T/got-$i.sql" || fail "backup $i (${NAMES[$i]}): app differs from the source at that backup"
	for db in app load postgres; do amcheck_all "$p" "$db"; done
	if [ "$i" -ge 1 ] && [ "$i" -le 3 ]; then
		got=$(as_pg "$PGBIN/psql" -X -A -t -h "$T" -p "$p" -U postgres -d app -c "SELECT count(*), min(v) FROM replaced")
		case $got in "1500|new-"*) ;; *) fail "backup $i: re-created table shows '$got'" ;; esac
	fi
	pg_stop "$d"
	log "ok: backup $i restores (${NAMES[$i]})"
	rm -rf "$d"
done

# --verify: a page corrupted on disk (cluster stopped) is reported with file and block.
pg_start "$T/src" "$PORT"
relpath=$(sql app "SELECT pg_relation_filepath('keep')")
pg_stop "$T/src"
# Flip bytes in the middle of block 2 (tuple data): the header stays valid, the checksum not.
printf '\xde\xad\xbe\xef' | dd of="$T/src/$relpath" bs=1 seek=$((2 * 8192 + 5000)) conv=notrunc status=none
pg_start "$T/src" "$PORT"
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src" --full --verify
expect_rc 0 "backup-push --verify with a corrupt page"
assert_contains "$W_ERR" "$relpath block 2" "corrupt page report"
wrun "${ENVS[@]}" -- backup-list --detail
last=$(printf '%s\n' "$W_OUT" | tail -n 1)
assert_eq "1 -" "$(printf '%s\n' "$last" | awk '{ print $(NF - 1), $NF }')" "corrupt_blocks and verified columns"
name=$(printf '%s\n' "$last" | cut -f 1 -d " ")
"$PY" - "$T/repo/basebackups_005/$name/files_metadata.json" "/$relpath" <<'PYEOF' || fail "CorruptBlocks in files_metadata.json"
import json, sys
f = json.load(open(sys.argv[1]))["Files"][sys.argv[2]]
assert f["CorruptBlocks"] == {"CorruptBlocksCount": 1, "SomeCorruptBlocks": [2]}, f
PYEOF
log "delta chain, bases, refusal and --verify all ok"
