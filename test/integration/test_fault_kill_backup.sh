#!/usr/bin/env bash
# backup-push and backup-fetch killed with SIGKILL at random moments (file storage).
#
# A cluster with ~50 MB of data (pgbench -i -s 3), archiving with walc wal-push into the
# repository. backup-push runs as postgres with lz4 + libsodium, WALG_TAR_SIZE_THRESHOLD=8 MB
# (several partitions), WALG_UPLOAD_DISK_CONCURRENCY=2, WALG_DISK_RATE_LIMIT=40 MB/s and
# WALG_DELTA_MAX_STEPS=2 (a push after a complete backup is a delta of it).
#
# backup-push, $FAULT_RUNS runs (default 20): pgbench writes a little, then backup-push gets
# SIGKILL after a random delay in [0, an uninterrupted full push's time] (deltas are
# quicker: some usually finish first; when none does, one more push runs uninterrupted so that
# a delta is complete). Then:
#   - no walc session is left in pg_stat_activity and the next push starts (the server left
#     backup mode when the session died);
# once all runs are done:
#   - every visible object in the repository decodes completely (walc st get; tars parse to
#     the end, JSON parses, WAL objects are 16 MiB; hidden .walc-tmp. temporaries allowed);
#   - every backup with a sentinel restores: backup-fetch exits 0 with global/pg_control; the
#     newest and one other (random; delta chains included) start with walc wal-fetch as
#     restore_command, recover to 'immediate', pass amcheck and hold pgbench's 300000 accounts;
#   - a complete backup-push --full succeeds, and `delete retain FULL 1 --confirm` leaves in
#     basebackups_005 only that backup's objects (the killed pushes' visible leftovers are
#     gone; their hidden .walc-tmp. files, which no command lists, are counted).
# backup-fetch, $FAULT_RUNS runs: of the newest delta backup (chain full + delta), into a
# fresh directory, SIGKILL after a random delay in [0, 1.5 x an uninterrupted fetch's time]:
#   - global/pg_control exists only if the whole tree is there (same files, sizes and
#     sha256 as an uninterrupted fetch): a cut restore never looks startable;
#   - `backup-fetch --delta --force` over the remains completes it to the same tree.
# FAULT_SEED=N replays the random delays (printed at the start).
# shellcheck source=lib.sh
# integration: long
. "$(dirname "$0")/lib.sh"
it_setup fault-kill-backup
START=$SECONDS
RUNS=${FAULT_RUNS:-20}
SEED=${FAULT_SEED:-$RANDOM}
RANDOM=$SEED
log "seed $SEED (FAULT_SEED=$SEED replays these delays), $RUNS runs each"
KILL=("$PY" "$IT_DIR/fault_kill.py")
CHECK=("$PY" "$IT_DIR/fault_check.py")
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

REPO=$T/repo
KEY=WalcFaultKillBackupKey-012345678 # 32 characters
mkdir -p "$REPO"
ENVS=(WALG_FILE_PREFIX="$REPO" WALG_COMPRESSION_METHOD=lz4 "WALG_LIBSODIUM_KEY=$KEY")
PUSH_ENVS=(WALG_TAR_SIZE_THRESHOLD=8000000 WALG_UPLOAD_DISK_CONCURRENCY=2
	WALG_DISK_RATE_LIMIT=40000000 WALG_DELTA_MAX_STEPS=2)
walc_wrapper "${ENVS[@]}"

pgbench_source 3 archive.log
log "source up on port $PORT with $(($(du -sb "$SRC" | cut -f1) / 1000000)) MB; $((SECONDS - START))s"

walc_sessions() {
	psqlc "$PORT" "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'walc'"
}
sentinels() { # names of the backups with a sentinel, sorted
	find "$REPO/basebackups_005" -maxdepth 1 -name '*_backup_stop_sentinel.json' -printf '%f\n' 2>/dev/null |
		sed 's/_backup_stop_sentinel.json$//' | sort || true
}
write_some() {
	as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -t 100 -c 1 postgres >/dev/null 2>&1 || fail "pgbench"
}

# ---- an uninterrupted push for the time scale --------------------------------------------------
t0=$(date +%s%N)
wrun_pg "${ENVS[@]}" "${PUSH_ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
PUSH_MS=$(ms_since "$t0")
expect_rc 0 "uninterrupted backup-push"
PUSH_MAX=$(awk -v m="$PUSH_MS" 'BEGIN { printf "%.3f", m * 1.0 / 1000 }')
log "uninterrupted backup-push (full): $PUSH_MS ms; kills within [0, $PUSH_MAX] s"

killed=0 finished=0
for n in $(seq 1 "$RUNS"); do
	write_some
	before=$(sentinels | wc -l)
	r=$("${KILL[@]}" --tag "walc-fault-$$-bpush-$n" --min 0 --max "$PUSH_MAX" --seed "$((SEED * 1000 + n))" \
		--out "$T/log/bpush-$n.out" --err "$T/log/bpush-$n.err" -- \
		runuser -u postgres -- env HOME="$T/home" PGDATA="$SRC" PGHOST="$T" PGPORT="$PORT" \
		"${ENVS[@]}" "${PUSH_ENVS[@]}" "$WALC_PG" backup-push "$SRC")
	assert_no_sanitizer_reports "$T/log/bpush-$n.err"
	after=$(sentinels | wc -l)
	case $r in
	killed*) killed=$((killed + 1)) ;;
	"exited 0 "*) finished=$((finished + 1)) ;;
	*) cat "$T/log/bpush-$n.err" >&2; fail "backup-push run $n: $r" ;;
	esac
	case $r in killed*) [ "$after" = "$before" ] || [ "$after" = $((before + 1)) ] || fail "run $n: sentinels $before -> $after" ;; esac
	case $r in "exited 0 "*) [ "$after" = $((before + 1)) ] || fail "backup-push run $n exited 0 without a new sentinel" ;; esac
	# the dead session goes away; the server is not left in backup mode
	for _ in $(seq 1 40); do
		[ "$(walc_sessions)" = 0 ] && break
		sleep 0.25
	done
	assert_eq 0 "$(walc_sessions)" "run $n ($r): walc sessions left in pg_stat_activity"
	phase=$(grep -oE 'started|wrote backup|stopping|ERROR.*' "$T/log/bpush-$n.err" | tail -n 1 || true)
	printf '    push run %2d: %-14s sentinels %s -> %s  (last log: %s)\n' "$n" "$r" "$before" "$after" "${phase:-none}"
done
ok "backup-push SIGKILLed $killed times ($finished finished first); no session left behind"
# The kill delays are drawn within a full push's time, and a delta takes about as long (the
# rate limit paces both): under some seeds and loads no push finishes first. The checks below
# need a complete delta, so one more push then runs uninterrupted.
if [ "$finished" = 0 ]; then
	write_some
	wrun_pg "${ENVS[@]}" "${PUSH_ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 0 "uninterrupted backup-push after the killed ones"
	log "no killed push finished first: one more, uninterrupted, for the checks below"
fi

# ---- every visible object decodes ---------------------------------------------------------------
out=$(env "${ENVS[@]}" "${CHECK[@]}" repo "$WALC" "$REPO" --wal-size 16777216) ||
	fail "a visible object of a killed push does not decode: $out"
ok "every visible object decodes completely: $out"

# ---- every backup with a sentinel restores -------------------------------------------------------
mapfile -t NAMES < <(sentinels)
[ "${#NAMES[@]}" -ge 2 ] || fail "only ${#NAMES[@]} complete backups; the delays never let a push finish"
for b in "${NAMES[@]}"; do
	rm -rf "$T/r"
	wrun "${ENVS[@]}" -- backup-fetch "$T/r" "$b"
	expect_rc 0 "backup-fetch of $b (it has a sentinel)"
	[ -s "$T/r/global/pg_control" ] || fail "backup-fetch of $b: no global/pg_control"
	printf '    %s: backup-fetch ok, %s files\n' "$b" "$(find "$T/r" -type f | wc -l)"
done
rm -rf "$T/r"
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 120
# start_restored NAME: backup-fetch, recover to immediate through wal-fetch, count accounts
start_restored() {
	local d=$T/start-$1 got
	RECOVER_FETCH=$T/walc.sh restore_start "$d" "$1" "${ENVS[@]}"
	amcheck_all "$RPORT"
	got=$(psqlc "$RPORT" "SELECT count(*) FROM pgbench_accounts")
	pg_stop "$d"
	assert_eq 300000 "$got" "$1 restored and started: pgbench_accounts rows"
	rm -rf "$d"
}
other=${NAMES[$((RANDOM % (${#NAMES[@]} - 1)))]}
start_restored "${NAMES[-1]}"
start_restored "$other"
ok "${#NAMES[@]} backups with a sentinel: each restores; ${NAMES[-1]} and $other start and hold the data"

# ---- backup-fetch killed ------------------------------------------------------------------------
FETCH_NAME=""
for b in "${NAMES[@]}"; do [[ $b == *_D_* ]] && FETCH_NAME=$b; done
[ -n "$FETCH_NAME" ] || FETCH_NAME=${NAMES[-1]}
t0=$(date +%s%N)
wrun "${ENVS[@]}" -- backup-fetch "$T/fetch-ref" "$FETCH_NAME"
FETCH_MS=$(ms_since "$t0")
expect_rc 0 "uninterrupted backup-fetch of $FETCH_NAME"
"${CHECK[@]}" tree "$T/fetch-ref" >"$T/fetch-ref.tree"
FETCH_MAX=$(awk -v m="$FETCH_MS" 'BEGIN { printf "%.3f", m * 1.5 / 1000 }')
log "uninterrupted backup-fetch of $FETCH_NAME: $FETCH_MS ms, $(wc -l <"$T/fetch-ref.tree") files; kills within [0, $FETCH_MAX] s"
killed=0 finished=0 with_control=0
for n in $(seq 1 "$RUNS"); do
	d=$T/fetch-$n
	r=$("${KILL[@]}" --tag "walc-fault-$$-bfetch-$n" --min 0 --max "$FETCH_MAX" --seed "$((SEED * 1000 + 500 + n))" \
		--out "$T/log/bfetch-$n.out" --err "$T/log/bfetch-$n.err" -- \
		env "${ENVS[@]}" "$WALC" backup-fetch "$d" "$FETCH_NAME")
	assert_no_sanitizer_reports "$T/log/bfetch-$n.err"
	case $r in killed*) killed=$((killed + 1)) ;; *) finished=$((finished + 1)) ;; esac
	files=$(find "$d" -type f 2>/dev/null | wc -l || true)
	control=no
	if [ -e "$d/global/pg_control" ]; then
		control=yes
		with_control=$((with_control + 1))
		"${CHECK[@]}" tree "$d" >"$T/fetch-$n.tree"
		cmp -s "$T/fetch-ref.tree" "$T/fetch-$n.tree" || {
			diff "$T/fetch-ref.tree" "$T/fetch-$n.tree" | head -n 10 >&2
			fail "backup-fetch run $n ($r): global/pg_control exists but the restore is incomplete"
		}
	fi
	case $r in "exited 0 "*) [ "$control" = yes ] || fail "backup-fetch run $n exited 0 without pg_control" ;; esac
	# finishing the job over the remains
	wrun "${ENVS[@]}" -- backup-fetch --delta --force "$d" "$FETCH_NAME"
	expect_rc 0 "backup-fetch run $n ($r): backup-fetch --delta --force over the remains"
	"${CHECK[@]}" tree "$d" >"$T/fetch-$n.tree"
	cmp -s "$T/fetch-ref.tree" "$T/fetch-$n.tree" || {
		diff "$T/fetch-ref.tree" "$T/fetch-$n.tree" | head -n 10 >&2
		fail "backup-fetch run $n ($r): --delta over the remains differs from an uninterrupted fetch"
	}
	printf '    fetch run %2d: %-14s %5s files after the kill, pg_control %s; --delta completed it\n' "$n" "$r" "$files" "$control"
	rm -rf "$d" "$T/fetch-$n.tree"
done
ok "backup-fetch SIGKILLed $killed times ($finished finished first): pg_control only over a complete tree" \
	"($with_control times); --delta --force over the remains completes every one"

# ---- a complete push, then retention removes the leftovers --------------------------------------
write_some
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push --full "$SRC"
expect_rc 0 "final backup-push --full"
wrun "${ENVS[@]}" -- backup-list
FINAL=$(printf '%s\n' "$W_OUT" | tail -n 1 | cut -f 1 -d ' ')
leftovers=0
for dir in "$REPO"/basebackups_005/base_*/; do
	b=$(basename "$dir")
	[ -e "$REPO/basebackups_005/${b}_backup_stop_sentinel.json" ] || leftovers=$((leftovers + 1))
done
wrun "${ENVS[@]}" -- delete retain FULL 1 --confirm
expect_rc 0 "delete retain FULL 1 --confirm"
rest=$(find "$REPO/basebackups_005" -type f ! -name '.*.walc-tmp.*' -printf '%P\n' | grep -v "^$FINAL" || true)
[ -z "$rest" ] || fail "after delete retain FULL 1 (keeping $FINAL), basebackups_005 still holds: $rest"
empty=$(find "$REPO/basebackups_005" -mindepth 1 -type d -empty | wc -l)
tmps=$(find "$REPO" -type f -name '.*.walc-tmp.*' | wc -l)
tmpbytes=$(find "$REPO" -type f -name '.*.walc-tmp.*' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
ok "final full $FINAL; delete retain FULL 1 removed every other backup and the visible objects of" \
	"$leftovers killed pushes (left on file storage: $empty empty directories, $tmps hidden" \
	"temporaries of killed writers, $((tmpbytes / 1048576)) MiB)"
log "all done in $((SECONDS - START))s"
