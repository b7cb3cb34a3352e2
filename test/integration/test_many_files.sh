#!/usr/bin/env bash
# More files than one run of a keytab holds (16,384 keys, internal/core/keys/keytab.c): a cluster of
# about 18,000 relation files, a full backup and a delta after a few tables changed. Every
# table a restore keeps of Files, each need set and the set of files --delta finds intact is
# then merged from several runs. The chain verifies clean and restores to the source's dump,
# and backup-fetch --delta onto a restore with files removed and changed leaves exactly a cold
# restore's files.
. "$(dirname "$0")/lib.sh"
it_setup manyfiles

TABLES=4200 # a heap, a primary key, a TOAST table and its index each
mkdir -p "$T/repo"
pg_own "$T"
E=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=1)
pg_init "$T/src"
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${E[*]} $WALC_PG wal-push %p'"
pg_start "$T/src" "$PORT"
as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$T" -p "$PORT" -U postgres -d postgres >/dev/null <<EOF ||
DO \$\$
BEGIN
	FOR i IN 1..$TABLES LOOP
		EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, v text)', i);
		EXECUTE format('INSERT INTO t%s VALUES (1, %L)', i, 'x');
		IF i % 200 = 0 THEN COMMIT; END IF;
	END LOOP;
END \$\$;
VACUUM FREEZE;
CHECKPOINT;
EOF
	fail "creating $TABLES tables"
nfiles=$(find "$T/src/base" -type f | wc -l)
log "$nfiles files under base/"
[ "$nfiles" -gt 17000 ] || fail "only $nfiles files under base/: fewer than the test needs"
# (frozen: the dump below reads every table without setting hint bits, so the delta's files
# are those the changes touch, and the rest are whole-file sums --delta can check)

push() { # backup-push; prints the backup name
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
	expect_rc 0 "backup-push"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
# A delta skips a file only if it predates its base's start by 10 s (DELTA_MTIME_MARGIN); the
# others are increments, which --delta restores without a whole-file sum to check.
sleep 11
full=$(push)
psqlc "$PORT" "UPDATE t1 SET v = 'y'; DROP TABLE t2; CREATE TABLE t2 (id bigint PRIMARY KEY); INSERT INTO t${TABLES} VALUES (2, repeat('z', 5000)); CHECKPOINT"
dump_norm "$PORT" >"$T/src.dump"
delta=$(push)
[[ $delta == *_D_${full:5:24} ]] || fail "the second backup must be a delta of $full: $delta"
pg_stop "$T/src"

wrun "${E[@]}" -- backup-verify "$delta"
expect_rc 0 "backup-verify of the chain: $W_OUT"

# The chain restores to the source's dump.
restore_start "$T/started" "$delta" "${E[@]}"
assert_dump_eq "$T/src.dump" "$RPORT" "the chain's restore"
pg_stop "$T/started"
rm -rf "$T/started"

# A cold restore with files removed and changed: --delta finds the rest intact (more than a
# run's worth) and leaves exactly another cold restore's files.
wrun "${E[@]}" -- backup-fetch "$T/node" "$delta"
expect_rc 0 "cold restore"
mapfile -t files < <(cd "$T/node" && find base -type f | sort)
for ((i = 0; i < ${#files[@]}; i += 40)); do
	if ((i % 80)); then rm -f "$T/node/${files[$i]}"; else echo changed >>"$T/node/${files[$i]}"; fi
done
wrun "${E[@]}" -- backup-fetch --delta "$T/node" "$delta"
expect_rc 0 "backup-fetch --delta"
intact=$(printf '%s\n' "$W_ERR" | sed -nE 's/.*delta restore: ([0-9]+) of [0-9]+ files intact.*/\1/p')
log "delta restore: ${intact:-?} files intact"
[ "${intact:-0}" -gt 16384 ] || fail "${intact:-no} files intact: not more than one run of the set"
wrun "${E[@]}" -- backup-fetch "$T/cold" "$delta"
expect_rc 0 "second cold restore"
if ! diff -r --no-dereference "$T/cold" "$T/node" >"$T/diff.txt" 2>&1; then
	head -n 20 "$T/diff.txt"
	fail "the delta-restored directory differs from a cold restore"
fi
ok "$nfiles files: the chain verifies, restores to the source's dump, and --delta matches a cold restore"
