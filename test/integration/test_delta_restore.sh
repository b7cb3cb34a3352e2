#!/usr/bin/env bash
# Delta restore (issue 10): a cluster restored, run for a while, stopped, then ~15% of its
# files changed, removed or corrupted (and strays added): backup-fetch --delta brings the
# directory back to exactly the backup (every file equal to a cold restore's), downloads only
# the parts holding changed files, then the cluster recovers to the source's dump and passes
# amcheck. Another cluster's directory is refused without --force; a running one always.
. "$(dirname "$0")/lib.sh"
it_setup deltarestore

mkdir -p "$T/repo" "$T/ts"
pg_own "$T"
E=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd WALG_TAR_SIZE_THRESHOLD=4000000)
pg_init "$T/src" --data-checksums
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${E[*]} $WALC_PG wal-push %p'"
pg_start "$T/src" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 4 -q postgres >/dev/null 2>&1
psqlc "$PORT" "CREATE TABLESPACE ts LOCATION '$T/ts'"
psqlc "$PORT" "CREATE TABLE in_ts TABLESPACE ts AS SELECT g, md5(g::text) h FROM generate_series(1, 30000) g"
psqlc "$PORT" "CHECKPOINT"
dump_norm "$PORT" >"$T/src.dump"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
expect_rc 0 "backup-push"
pg_stop "$T/src"

# The restored copies hold the tablespace in pg_tblspc/OID (no spec); $T/ts is never written.
TS_SUM=$("$PY" "$IT_DIR/fault_check.py" tree "$T/ts")
restore_conf() { # DIR
	recover_conf "$1" "${E[*]}"
}

# A restored cluster that then lives on: pgbench, a new table, a checkpoint; then stopped.
wrun "${E[@]}" -- backup-fetch "$T/node" LATEST
expect_rc 0 "cold restore"
restore_conf "$T/node"
P2=$(free_port)
pg_start "$T/node" "$P2"
wait_not_in_recovery "$P2"
as_pg "$PGBIN/pgbench" -h "$T" -p "$P2" -n -t 300 -c 2 postgres >/dev/null 2>&1
psqlc "$P2" "CREATE TABLE later AS SELECT g FROM generate_series(1, 50000) g; CHECKPOINT"
pg_stop "$T/node"

# Now damage ~15% of the files: change, remove, corrupt pages, add strays.
mapfile -t files < <(cd "$T/node" && find . -type f -path './base/*' | sort)
total=${#files[@]}
k=$((total * 15 / 100))
for ((i = 0; i < k; i++)); do
	f=$T/node/${files[$i]}
	case $((i % 3)) in
	0) rm -f "$f" ;;
	1) [ -s "$f" ] && printf 'garbage' | dd of="$f" bs=1 seek=100 conv=notrunc status=none ;;
	2) echo "appended" >>"$f" ;;
	esac
done
# Corrupted pages in a relation (bytes flipped in the middle of block 1).
rel=$(cd "$T/node" && find base -type f -size +100k | sort | head -n 1)
printf '\xff\xff\xff\xff' | dd of="$T/node/$rel" bs=1 seek=$((8192 + 4000)) conv=notrunc status=none
echo stray >"$T/node/base/stray_file"
mkdir -p "$T/node/base/stray_dir" && echo x >"$T/node/base/stray_dir/f"
log "changed, removed or corrupted $k of $total files under base/, plus $rel"

# Refusals: a running cluster, and another cluster's directory without --force.
touch "$T/node/postmaster.pid"
wrun "${E[@]}" -- backup-fetch --delta "$T/node" LATEST
expect_rc 1 "delta restore onto a running cluster"
rm -f "$T/node/postmaster.pid"
pg_init "$T/other"
wrun "${E[@]}" -- backup-fetch --delta "$T/other" LATEST
expect_rc 1 "delta restore onto another cluster"
assert_contains "$W_ERR" "another cluster" "refusal message"

wrun "${E[@]}" WALG_LOG_LEVEL=DEVEL -- backup-fetch --delta "$T/node" LATEST
expect_rc 0 "backup-fetch --delta"
assert_match "$W_ERR" "delta restore: [0-9]+ of [0-9]+ files intact" "delta summary"
assert_contains "$W_ERR" "the others hold nothing needed" "parts with only intact files are skipped"
extracted=$(printf '%s\n' "$W_ERR" | grep -c "extracting .*part_" || true)
parts=$(ls "$T/repo/basebackups_005"/*/tar_partitions | grep -c '^part_')
log "downloaded $extracted of $parts parts"
[ "$extracted" -lt "$parts" ] || fail "every part was downloaded"
# Inside the parts it reads, only the frames holding what changed (FrameOffset ranges).
assert_match "$W_ERR" "extracting .*part_[0-9]+\.tar\.zst bytes [0-9]+ to [0-9]+" "ranged reads of parts"
read -r got of < <(printf '%s\n' "$W_ERR" | sed -nE 's/.*; reading ([0-9.]+) of ([0-9.]+) MiB stored.*/\1 \2/p' | head -n 1)
log "read $got of $of MiB stored"
awk -v a="$got" -v b="$of" 'BEGIN { exit !(a < b) }' || fail "read $got of $of MiB: everything"

# Exactly a cold restore's files.
wrun "${E[@]}" -- backup-fetch "$T/cold" LATEST
expect_rc 0 "second cold restore"
diff -r --no-dereference "$T/cold" "$T/node" >"$T/diff.txt" 2>&1 || true
if [ -s "$T/diff.txt" ]; then
	head -n 20 "$T/diff.txt"
	fail "delta-restored directory differs from a cold restore"
fi

# One small file changed: only its frame is read (at most about 1 MiB of tar, compressed).
small=$(cd "$T/node" && find base -type f -size -16k -size +0 | sort | tail -n 1)
printf 'garbage' | dd of="$T/node/$small" bs=1 seek=10 conv=notrunc status=none
wrun "${E[@]}" WALG_LOG_LEVEL=DEVEL -- backup-fetch --delta "$T/node" LATEST
expect_rc 0 "backup-fetch --delta of one changed file"
read -r got of < <(printf '%s\n' "$W_ERR" | sed -nE 's/.*; reading ([0-9.]+) of ([0-9.]+) MiB stored.*/\1 \2/p' | head -n 1)
log "one changed file ($small): read $got of $of MiB stored"
awk -v a="$got" 'BEGIN { exit !(a < 1.0) }' || fail "restoring one small file read $got MiB"
cmp -s "$T/cold/$small" "$T/node/$small" || fail "$small not restored"

restore_conf "$T/node"
pg_start "$T/node" "$P2"
wait_not_in_recovery "$P2"
dump_norm "$P2" >"$T/node.dump"
cmp -s "$T/src.dump" "$T/node.dump" || fail "delta-restored cluster differs from the source"
amcheck_all "$P2"
assert_eq "$TS_SUM" "$("$PY" "$IT_DIR/fault_check.py" tree "$T/ts")" "the source's tablespace location"
log "delta restore ok"
