#!/usr/bin/env bash
# integration: long
# Retention during a push (issue 21), on file storage and on S3 (Ceph RGW). Two full backups
# F1 < F2 exist; then, while a paced backup-push runs, `delete retain 1 --confirm` runs again
# and again:
#   - a full push: it completes, the deletes never touch its objects or the WAL it needs, and
#     its backup restores (recovery to the end of the archive: dump equal, amcheck);
#   - a delta push based on F1 (WALG_DELTA_FROM_NAME), which retain 1 alone would delete: F1
#     is kept while the push runs ("is based on it"), the delta completes and restores;
#   - `delete target F1` and `delete everything FORCE` are refused while that push runs, and
#     delete garbage leaves the running push alone.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup retention-push

# phase NAME RATE_VAR ENVS...: the three cases against one repository
phase() {
	local name=$1 ratevar=$2 src=$T/src-$1 port f1 f2 p n deletes bad
	shift 2
	local envs=("$@")
	archiving_source "$src" 8 "env HOME=$T/home ${envs[*]} $WALC_PG wal-push %p" "max_wal_size = 1GB"
	port=$SPORT
	push_now() {
		wrun_pg "${envs[@]}" PGHOST="$T" PGPORT="$port" -- backup-push "$src" "$@"
		expect_rc 0 "$name: backup-push $*"
		printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
	}
	f1=$(push_now)
	psqlc "$port" "UPDATE pgbench_accounts SET abalance = 1 WHERE aid % 50 = 0"
	f2=$(push_now)
	log "$name: F1 $f1, F2 $f2"

	# paced PUSH_ARGS... in the background; deletes loop until it ends
	paced() {
		local case=$1
		shift
		psqlc "$port" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 31 = 0"
		psqlc "$port" "CHECKPOINT"
		dump_norm "$port" >"$T/$name-$case.dump"
		as_pg env HOME="$T/home" PGDATA="$src" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" \
			PGHOST="$T" PGPORT="$port" "$ratevar=8000000" "$@" \
			"$WALC_PG" backup-push "$src" >/dev/null 2>"$T/log/$name-$case.err" </dev/null &
		p=$!
		for _ in $(seq 1 600); do grep -q 'started at LSN' "$T/log/$name-$case.err" && break; sleep 0.1; done
		deletes=0 bad=0
		while kill -0 "$p" 2>/dev/null; do
			wrun "${envs[@]}" -- delete retain 1 --confirm
			printf '%s\n%s\n' "$W_OUT" "$W_ERR" >>"$T/log/$name-$case-deletes.log"
			# Once the delta is written it is the newest backup, which retain 1 refuses
			# (WAL-G's rule: the bases of a delta target cannot be deleted).
			if [ "$W_RC" != 0 ] && [[ $W_ERR != *"is a delta backup: the backups it is based on"* ]]; then
				bad=$((bad + 1))
				log "  delete retain 1: $W_ERR"
			fi
			deletes=$((deletes + 1))
			sleep 0.3
		done
		wait "$p" || fail "$name $case: the push failed while retention ran: $(cat "$T/log/$name-$case.err")"
		assert_no_sanitizer_reports "$T/log/$name-$case.err"
		[ "$deletes" -ge 3 ] || fail "$name $case: only $deletes deletes ran during the push"
		assert_eq 0 "$bad" "$name $case: failed deletes"
		n=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/$name-$case.err")
		log "$name $case: $n written while $deletes deletes ran"
	}
	restores() { # BACKUP CASE: recovery to the end of the archive gives the case's dump
		local d=$T/restore-$name last
		last=$(switch_wal "$port")
		wait_archived "$src" "$last"
		restore_start "$d" "$1" "${envs[@]}" -- "recovery_target_timeline = 'current'"
		dump_norm "$RPORT" >"$T/got.dump"
		amcheck_all "$RPORT"
		pg_stop "$d"
		rm -rf "$d"
		cmp -s "$T/$name-$2.dump" "$T/got.dump" || fail "$name: $1 does not restore to the data of $2"
	}

	paced full
	restores "$n" full
	ok "$name: a full push completes while delete retain 1 runs, and restores"

	# F1 is gone now (retain 1 kept only the newest); push it back as the base of a delta.
	f1=$(push_now --full)
	psqlc "$port" "UPDATE pgbench_accounts SET abalance = 2 WHERE aid % 40 = 0"
	f2=$(push_now --full)
	# While the delta runs: target and everything are refused, garbage spares it.
	(
		for _ in $(seq 1 600); do grep -q 'started at LSN' "$T/log/$name-delta.err" 2>/dev/null && break; sleep 0.1; done
		sleep 0.5
		# not wrun: the delete loop beside this uses wrun's files
		side() { # RESULT ARGS...
			local res=$1 rc=0
			shift
			env "${envs[@]}" "$WALC" "$@" >/dev/null 2>"$res.err" </dev/null || rc=$?
			echo "$rc $(cat "$res.err")" >"$res"
		}
		side "$T/$name-target.res" delete target "$f1" --confirm
		side "$T/$name-everything.res" delete everything FORCE --confirm
		side "$T/$name-garbage.res" delete garbage --confirm
	) &
	local side=$!
	paced delta WALG_DELTA_MAX_STEPS=3 WALG_DELTA_FROM_NAME="$f1"
	wait "$side" || true
	[[ $n == *_D_${f1:5:24} ]] || fail "$name: the delta is not based on $f1: $n"
	assert_match "$(cat "$T/$name-target.res")" '^1 .*is running, based on it' "$name: delete target of the running delta's base"
	assert_match "$(cat "$T/$name-everything.res")" '^1 .*is running' "$name: delete everything during a push"
	assert_match "$(cat "$T/$name-garbage.res")" '^0 ' "$name: delete garbage during a push"
	restores "$n" delta
	ok "$name: a delta on a backup retain 1 would delete completes while it runs (base kept), and restores; target and everything refused"
	pg_stop "$src"
}

mkdir -p "$T/repo" "$T/home"
pg_own "$T"
PHASES=${RETENTION_PUSH_PHASES:-file s3}
[[ " $PHASES " != *" file "* ]] ||
	phase file WALG_DISK_RATE_LIMIT WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd

[[ " $PHASES " == *" s3 "* ]] || exit 0
s3_rgw_start
s3_mb walc
phase s3 WALG_NETWORK_RATE_LIMIT WALG_S3_PREFIX=s3://walc/ret AWS_ENDPOINT="$S3_ENDPOINT" \
	AWS_S3_FORCE_PATH_STYLE=true AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" \
	AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" AWS_REGION=us-east-1 WALG_COMPRESSION_METHOD=none
