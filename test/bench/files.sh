# shellcheck shell=bash
# Section `files` of make bench (issue 20 §5 and §6): memory against the number of files. Not
# in the default run: `BENCH_SECTIONS=files make bench` runs it alone (it needs no dataset).
#
# Two clusters: a fresh one with a database of BENCH_FILES_SMALL_TABLES tables, and one with
# BENCH_FILES_TABLES tables (default 50,000: with each table's primary key, TOAST table and
# TOAST index, about 200,000 relation files). Each table holds one row. Both also hold the same
# table of 500,000 rows (33 MiB), so that they differ only in the number of files: the tools'
# buffers fill the same way (small files alone never fill a 1 MiB read buffer). On each: walc's
# full backup-push, a delta push after one table changed, backup-fetch of the full and of the
# delta (a chain of two), backup-fetch --delta of the chain onto that restore with 15% of its
# relation files changed (delta_restore.sh's change, checked equal to the restore after), and
# backup-verify of the delta; WAL-G's
# backup-push and backup-fetch; pgBackRest's full backup and restore. Wall time and peak RSS;
# report_files.py writes results/files.md with each tool's peak RSS at both sizes.
FILES_SMALL_TABLES=${BENCH_FILES_SMALL_TABLES:-10}
FILES_TABLES=${BENCH_FILES_TABLES:-50000}
FILES_RUNS=${BENCH_FILES_RUNS:-$RUNS}
# walc's partitions (WALG_TAR_SIZE_THRESHOLD, MiB): small enough that both clusters have more
# partitions than backup-fetch decodes at once (its 40 MiB budget: 4 lz4 streams). At the
# default 1 GiB the small cluster has 2 and the large 5, and the fetch's peak would measure
# the partition count (a matter of bytes) instead of the number of files.
FILES_TAR_MIB=${BENCH_FILES_TAR_MIB:-8}
# BENCH_FILES_TOOLS="walc": only walc's rows (a check of walc's memory alone; the peers take
# most of the section's time at 200,000 files)
read -ra FILES_TOOLS <<<"${BENCH_FILES_TOOLS:-walc pgbr walg}"

# files_load DS TABLES: the big table, and TABLES one-row tables in database "many", made by two
# sessions at once
files_load() {
	local ds=$1 n=$2 half
	psqlc "${PORTS[$ds]}" "CREATE TABLE big AS SELECT g, md5(g::text) AS v FROM generate_series(1, 500000) g" >/dev/null
	psqlc "${PORTS[$ds]}" "CREATE DATABASE many" >/dev/null
	as_pg "$PGBIN/psql" -h "$T" -p "${PORTS[$ds]}" -d many -qX -v ON_ERROR_STOP=1 >/dev/null <<'EOF' ||
CREATE PROCEDURE mk(first int, last int) LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN first..last LOOP
		EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, v text)', i);
		EXECUTE format('INSERT INTO t%s VALUES (1, %L)', i, 'x');
		IF i % 200 = 0 THEN COMMIT; END IF;
	END LOOP;
END $$;
EOF
		fail "creating procedure mk"
	half=$((n / 2))
	log "$ds: creating $n tables"
	as_pg "$PGBIN/psql" -h "$T" -p "${PORTS[$ds]}" -d many -qXc "CALL mk(1, $half)" >"$T/log/load-$ds-1.log" 2>&1 &
	local p1=$!
	as_pg "$PGBIN/psql" -h "$T" -p "${PORTS[$ds]}" -d many -qXc "CALL mk($((half + 1)), $n)" >"$T/log/load-$ds-2.log" 2>&1 ||
		{ wait "$p1" || true; cat "$T/log/load-$ds-2.log" >&2; fail "creating tables"; }
	wait "$p1" || { cat "$T/log/load-$ds-1.log" >&2; fail "creating tables"; }
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
}

files_count() { find "$1" -path "$1/pg_wal" -prune -o -type f -print | wc -l; }

# files_delta_restore DS RUN NAME [VAR=VALUE...]: backup-fetch --delta of NAME onto its restore
# that walc_fetch kept in $T/restore, after delta_restore.sh's change of 15% of its relation
# files; the bench fails unless every file then equals the restore's
files_delta_restore() {
	local ds=$1 run=$2 name=$3 dest=$T/restore diffs
	shift 3
	mapfile -t envs < <(walc_env "$ds")
	envs+=("$@")
	dr_py sums "$dest" >"$T/files-restored.sums"
	dr_py change "$DR_SEED" "$DR_FRACTION" "$dest" >"$T/log/$ds-files-change-$run.json"
	pg_own "$dest"
	timed "$ds-walc-fetch-delta-$run" "${PGRUN[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" "$WALC_PG" \
		backup-fetch "$dest" "$name" --delta
	sample "$ds" files-delta walc lz4 chain "$run" "$(pgdata_bytes "$dest")" "$name"
	dr_py sums "$dest" >"$T/files-delta.sums"
	diffs=$(dr_py compare "$T/files-restored.sums" "$T/files-delta.sums") ||
		fail "$ds: backup-fetch --delta $name left files unlike its restore's: $diffs"
	rm -rf "$dest" "$T/files-restored.sums" "$T/files-delta.sums"
}

bench_files_one() { # DS TABLES
	local ds=$1 tables=$2 run item full delta files
	local walc_env=("${BEST[@]}" WALG_TAR_SIZE_THRESHOLD=$((FILES_TAR_MIB << 20)))
	cluster "$ds"
	pg_conf "$T/$ds/pgdata" "max_locks_per_transaction = 1024"
	pg_stop "$T/$ds/pgdata"
	pg_start "$T/$ds/pgdata" "${PORTS[$ds]}"
	files_load "$ds" "$tables"
	archiving "$ds" pgbr
	files=$(files_count "$T/$ds/pgdata")
	log "$ds: $files files in PGDATA ($(($(pgdata_bytes "$T/$ds/pgdata") / 1048576)) MiB)"
	# run 0: not a figure for report.py
	echo "{\"op\":\"files-count\",\"dataset\":\"$ds\",\"files\":$files,\"run\":0}" >>"$SAMPLES"
	for ((run = 1; run <= FILES_RUNS; run++)); do
		while read -r item; do
			case $item in
			walc)
				walc_push "$ds" best "$run" backup "${walc_env[@]}"
				full=$LAST_NAME
				as_pg "$PGBIN/psql" -h "$T" -p "${PORTS[$ds]}" -d many -qXc "UPDATE t1 SET v = 'y'" >/dev/null ||
					fail "UPDATE t1"
				walc_push "$ds" best "$run" delta "${walc_env[@]}" WALG_DELTA_MAX_STEPS=1 WALG_DELTA_FROM_NAME="$full"
				delta=$LAST_NAME
				walc_fetch "$ds" best "$run" "$full" lz4 "${walc_env[@]}"
				# the chain: both backups' files_metadata.json are read (report_files.py's
				# "chain" rows)
				KEEP_RESTORE=1 walc_fetch "$ds" chain "$run" "$delta" lz4 "${walc_env[@]}"
				files_delta_restore "$ds" "$run" "$delta" "${walc_env[@]}"
				walc_verify "$ds" chain "$run" "$delta" lz4 "${walc_env[@]}"
				;;
			walg)
				walg_push "$ds" lz4 "$run" backup
				walg_fetch "$ds" lz4 "$run" "$LAST_NAME"
				;;
			pgbr)
				pgbr_push "$ds" lz4 "$run" backup full
				pgbr_restore "$ds" lz4 "$run" "$LAST_NAME"
				;;
			esac
		done < <(rotate $((run - 1)) walc pgbr "${WALG_ITEMS[@]}" | grep -Fxf <(printf '%s\n' "${FILES_TOOLS[@]}"))
	done
	pg_stop "$T/$ds/pgdata"
	rm -rf "${T:?}/$ds"
}

bench_files() {
	bench_files_one files-small "$FILES_SMALL_TABLES"
	bench_files_one files-large "$FILES_TABLES"
	"$PY" "$BENCH_DIR/report_files.py" "$SAMPLES" "$OUT/files.md"
	cat "$OUT/files.md"
}
