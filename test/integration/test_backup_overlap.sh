#!/usr/bin/env bash
# integration: long
# Two writers never mix (issue 21): two backup-push of one cluster started at the same moment
# (a CronJob run overlapping a manual one), $OVERLAP_RUNS (20) times, on file storage and on S3
# (Ceph RGW). The pushes are paced (WALG_DISK_RATE_LIMIT) so that they overlap for about a
# second. In every run:
#   - never do two pushes report success for one name; a push that stops exits 1 with one line
#     saying why (another push is writing the backup, or it exists already) and leaves nothing;
# and at the end every listed backup is one that a push reported, and restores: recovery to its
# consistent point, amcheck, and exactly the data of the run it was taken in.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup overlap
RUNS=${OVERLAP_RUNS:-20}
STOP_RE='is being written by another backup-push|already exists in|claimed it at the same moment|another writer started at the same moment'

# phase NAME ENVS...: a source cluster archiving with ENVS, RUNS overlapping pairs, restores
phase() {
	local name=$1 src=$T/src-$1 port i a name_a name_b rc_a rc_b n ok=0 stopped=0
	shift
	local envs=("$@")
	declare -A run_of=()
	archiving_source "$src" 1 "env HOME=$T/home ${envs[*]} $WALC_PG wal-push %p"
	port=$SPORT
	psqlc "$port" "CREATE TABLE runs (i int PRIMARY KEY)"
	for ((i = 1; i <= RUNS; i++)); do
		psqlc "$port" "INSERT INTO runs VALUES ($i); UPDATE pgbench_accounts SET abalance = abalance + $i WHERE aid % 97 = $i"
		dump_norm "$port" >"$T/$name-run-$i.dump"
		for a in a b; do
			as_pg env HOME="$T/home" PGDATA="$src" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" \
				PGHOST="$T" PGPORT="$port" WALG_DISK_RATE_LIMIT=20000000 \
				"$WALC_PG" backup-push "$src" >/dev/null 2>"$T/log/$name-$i-$a.err" </dev/null &
			eval "pid_$a=\$!"
		done
		# shellcheck disable=SC2154 # pid_a and pid_b are set by the eval above
		{ wait "$pid_a"; rc_a=$?; } || true
		# shellcheck disable=SC2154
		{ wait "$pid_b"; rc_b=$?; } || true
		assert_no_sanitizer_reports "$T/log/$name-$i-a.err" "$T/log/$name-$i-b.err"
		name_a=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/$name-$i-a.err")
		name_b=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/$name-$i-b.err")
		for a in a b; do
			eval "rc=\$rc_$a n=\$name_$a"
			# shellcheck disable=SC2154 # rc and n are set by the eval above
			if [ "$rc" = 0 ]; then
				[ -n "$n" ] || fail "$name run $i push $a: exit 0 without a backup name"
				[ -z "${run_of[$n]:-}" ] || fail "$name run $i: $n reported twice (runs ${run_of[$n]} and $i)"
				run_of[$n]=$i
				ok=$((ok + 1))
			else
				[ "$rc" = 1 ] || fail "$name run $i push $a: exit $rc: $(cat "$T/log/$name-$i-$a.err")"
				grep -Eq "$STOP_RE" "$T/log/$name-$i-$a.err" ||
					fail "$name run $i push $a stopped without saying it was the other push: $(grep ERROR "$T/log/$name-$i-$a.err")"
				assert_eq 1 "$(grep -c ERROR "$T/log/$name-$i-$a.err")" "$name run $i push $a: error lines"
				stopped=$((stopped + 1))
			fi
		done
		[ "$rc_a" = 0 ] || [ "$rc_b" = 0 ] || fail "$name run $i: both pushes failed: $(cat "$T/log/$name-$i-a.err" "$T/log/$name-$i-b.err")"
		if [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ]; then
			[ "$name_a" != "$name_b" ] || fail "$name run $i: two pushes reported success for $name_a"
		fi
	done
	log "$name: $RUNS runs, $ok pushes succeeded, $stopped stopped because of the other"
	[ "$stopped" -gt 0 ] || fail "$name: no run overlapped (the test proves nothing)"
	switch_wal "$port" >/dev/null
	pg_stop "$src"

	# Every listed backup is one a push reported, and restores to its run's data.
	wrun "${envs[@]}" -- backup-list
	expect_rc 0 "$name: backup-list"
	local listed
	listed=$(printf '%s\n' "$W_OUT" | tail -n +2 | cut -f 1 -d ' ')
	assert_eq "$ok" "$(printf '%s\n' "$listed" | grep -c .)" "$name: backups listed vs pushes that succeeded"
	for n in $listed; do
		[ -n "${run_of[$n]:-}" ] || fail "$name: backup $n is listed but no push reported it"
		local d=$T/restore-$name
		restore_start "$d" "$n" "${envs[@]}"
		dump_norm "$RPORT" >"$T/got.dump"
		amcheck_all "$RPORT"
		cmp -s "$T/$name-run-${run_of[$n]}.dump" "$T/got.dump" ||
			fail "$name: backup $n restores to other data than run ${run_of[$n]} had"
		pg_stop "$d"
		rm -rf "$d"
	done
	ok "$name: $RUNS overlapping pairs, never two successes for one name, every backup ($ok) restores to its run's data"
}

mkdir -p "$T/repo" "$T/home"
pg_own "$T"
phase file WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd

s3_rgw_start
s3_mb walc
phase s3 WALG_S3_PREFIX=s3://walc/overlap AWS_ENDPOINT="$S3_ENDPOINT" AWS_S3_FORCE_PATH_STYLE=true \
	AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
	AWS_REGION=us-east-1 WALG_COMPRESSION_METHOD=lz4
