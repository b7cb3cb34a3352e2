#!/usr/bin/env bash
# wal-push and wal-fetch killed with SIGKILL at random moments (file storage, no server).
#
# Eight 16 MiB segments (WAL page magic 0xD110 in the first 2 bytes, then random and text).
#
# wal-push, $FAULT_RUNS runs (default 20): a fresh data directory whose pg_wal holds the eight
# segments, each with archive_status/X.ready, and a fresh repository; `wal-push pg_wal/FIRST`
# with WALG_UPLOAD_CONCURRENCY=4 (so the seven others upload in the background at the same
# time), WALG_PREVENT_WAL_OVERWRITE=true, codec lz4 or zstd, every other run encrypted. Every
# walc process of the run gets SIGKILL after a random delay in [0, 1.3 x an uninterrupted
# run's time]. Then:
#   - every visible object in the repository decodes completely (walc st get) to the very
#     segment it names (hidden .NAME.walc-tmp.* temporaries are allowed);
#   - every wal-push marker (walg_data/walg_archive_status: PostgreSQL's next call for that
#     segment returns 0 without uploading) names a segment whose object is complete;
#   - PostgreSQL's retries succeed: wal-push of each segment in order (X.ready renamed to X.done
#     after each success, as the archiver does) exits 0, despite the overwrite protection;
#     then all eight objects decode to their segments.
# wal-fetch, $FAULT_RUNS runs: one repository holding the eight segments (lz4, encrypted);
# wal-fetch of a random one of the first four into a fresh pg_wal/RECOVERYXLOG with
# WALG_DOWNLOAD_CONCURRENCY=4 (a detached prefetcher downloads the next four into
# pg_wal/.wal-g/prefetch); the whole process tree, prefetcher included, gets SIGKILL after a
# random delay in [0, 1.2 x an uninterrupted fetch's time] (odd runs: mostly the main process
# is killed) or [0, 1.2 x the time the fetch and its prefetcher take] (even runs: mostly the
# prefetcher is killed mid-download). Then:
#   - RECOVERYXLOG does not exist or is byte-identical to the segment (never a partial file
#     handed to PostgreSQL); nothing else visible is left beside it;
#   - every visible file in the prefetch directory is byte-identical to its segment;
#   - the next two wal-fetch calls (the ones recovery would make; from the prefetch directory
#     or storage) deliver byte-identical segments.
# FAULT_SEED=N replays a run's random delays (printed at the start).
# shellcheck source=lib.sh
# integration: long
. "$(dirname "$0")/lib.sh"
it_setup fault-kill-wal
START=$SECONDS
RUNS=${FAULT_RUNS:-20}
SEED=${FAULT_SEED:-$RANDOM}
RANDOM=$SEED
log "seed $SEED (FAULT_SEED=$SEED replays these delays), $RUNS runs each"
SEGSIZE=16777216
KILL=("$PY" "$IT_DIR/fault_kill.py")
CHECK=("$PY" "$IT_DIR/fault_check.py")
KEY=WalcFaultKillTestKey-0123456789a # 32 characters
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# ---- eight segments ---------------------------------------------------------------------------
mkdir -p "$T/segs"
seq 1 2000000 >"$T/text"
SEGS=()
for i in $(seq 16 23); do
	s=$(printf '0000000100000000000000%02X' "$i")
	SEGS+=("$s")
	{
		head -c $((8 * 1048576)) /dev/urandom
		head -c $((8 * 1048576)) "$T/text"
	} >"$T/src"
	fake_segment "$s" "$SEGSIZE" "$T/segs/$s" "$T/src"
	[ "$(stat -c %s "$T/segs/$s")" = "$SEGSIZE" ] || fail "segment $s size"
done

# push_env N: the environment of push run N (codec by run, encrypted on odd runs)
push_env() {
	local n=$1
	PENV=(WALG_UPLOAD_CONCURRENCY=4 WALG_PREVENT_WAL_OVERWRITE=true)
	if [ $((n % 2)) = 1 ]; then PENV+=("WALG_LIBSODIUM_KEY=$KEY"); fi
	if [ $((n % 4)) -lt 2 ]; then PENV+=(WALG_COMPRESSION_METHOD=lz4); else PENV+=(WALG_COMPRESSION_METHOD=zstd); fi
}
# push_setup DIR: DIR/pgdata/pg_wal with the eight segments, each .ready; DIR/repo empty
push_setup() {
	mkdir -p "$1/pgdata/pg_wal/archive_status" "$1/repo"
	for s in "${SEGS[@]}"; do
		cp "$T/segs/$s" "$1/pgdata/pg_wal/$s"
		touch "$1/pgdata/pg_wal/archive_status/$s.ready"
	done
}

# ---- wal-push: an uninterrupted run for the time scale ----------------------------------------
push_setup "$T/push-ref"
push_env 0
t0=$(date +%s%N)
wrun "${PENV[@]}" PGDATA="$T/push-ref/pgdata" WALG_FILE_PREFIX="$T/push-ref/repo" -- wal-push "$T/push-ref/pgdata/pg_wal/${SEGS[0]}"
PUSH_MS=$(ms_since "$t0")
expect_rc 0 "uninterrupted wal-push"
# the background uploads end before walc exits: all eight are there
out=$(WALG_FILE_PREFIX="$T/push-ref/repo" "${CHECK[@]}" repo "$WALC" "$T/push-ref/repo" --segments "$T/segs" --wal-size $SEGSIZE) ||
	fail "uninterrupted wal-push: $out"
assert_contains "$out" "wal 8" "uninterrupted wal-push with background uploads: segments stored"
PUSH_MAX=$(awk -v m="$PUSH_MS" 'BEGIN { printf "%.3f", m * 1.3 / 1000 }')
log "uninterrupted wal-push of 1 + 7 background segments: $PUSH_MS ms; kills within [0, $PUSH_MAX] s"

killed=0 finished=0 hidden_total=0 markers_total=0 objs_total=0
for n in $(seq 1 "$RUNS"); do
	d=$T/push-$n
	push_setup "$d"
	push_env "$n"
	r=$("${KILL[@]}" --tag "walc-fault-$$-push-$n" --min 0 --max "$PUSH_MAX" --seed "$((SEED * 1000 + n))" \
		--out "$d/out" --err "$d/err" -- env "${PENV[@]}" PGDATA="$d/pgdata" WALG_FILE_PREFIX="$d/repo" \
		"$WALC" wal-push "$d/pgdata/pg_wal/${SEGS[0]}")
	assert_no_sanitizer_reports "$d/err"
	case $r in killed*) killed=$((killed + 1)) ;; *) finished=$((finished + 1)) ;; esac
	# what a reader sees right after the kill; every marker names a segment whose object is complete
	out=$(env "${PENV[@]}" "${CHECK[@]}" repo "$WALC" "$d/repo" --segments "$T/segs" --wal-size $SEGSIZE \
		--markers "$d/pgdata/pg_wal/walg_data/walg_archive_status") ||
		fail "wal-push run $n ($r, ${PENV[*]}): a visible object does not decode to its segment, or a marker claims an incomplete upload: $out"
	objs=$(printf '%s\n' "$out" | awk 'NR == 1 { print $2 }')
	hidden=$(printf '%s\n' "$out" | awk 'NR == 1 { print $10 }')
	markers=$(printf '%s\n' "$out" | awk 'NR == 1 { print $12 }')
	# PostgreSQL's archiver retries every segment, oldest first
	for s in "${SEGS[@]}"; do
		wrun "${PENV[@]}" PGDATA="$d/pgdata" WALG_FILE_PREFIX="$d/repo" -- wal-push "$d/pgdata/pg_wal/$s"
		expect_rc 0 "wal-push run $n ($r): PostgreSQL's retry of $s"
		mv "$d/pgdata/pg_wal/archive_status/$s.ready" "$d/pgdata/pg_wal/archive_status/$s.done"
	done
	out=$(env "${PENV[@]}" "${CHECK[@]}" repo "$WALC" "$d/repo" --segments "$T/segs" --wal-size $SEGSIZE) ||
		fail "wal-push run $n: after the retries: $out"
	assert_contains "$out" "wal 8" "wal-push run $n: segments stored after the retries"
	[ -z "$(ls -A "$d/pgdata/pg_wal/walg_data/walg_archive_status" 2>/dev/null)" ] ||
		fail "wal-push run $n: markers left after every segment was archived: $(ls "$d/pgdata/pg_wal/walg_data/walg_archive_status")"
	hidden_total=$((hidden_total + hidden))
	markers_total=$((markers_total + markers))
	objs_total=$((objs_total + objs))
	printf '    push run %2d: %-14s %s objects, %s markers, %s hidden temporaries after the kill\n' \
		"$n" "$r" "$objs" "$markers" "$hidden"
	rm -rf "$d"
done
ok "wal-push SIGKILLed $killed times ($finished finished first): never a partial visible object" \
	"($objs_total complete objects, $markers_total markers checked, $hidden_total hidden temporaries left); retries all exit 0"

# ---- wal-fetch ---------------------------------------------------------------------------------
FREPO=$T/fetch-repo
mkdir -p "$FREPO"
FENV=(WALG_FILE_PREFIX="$FREPO" "WALG_LIBSODIUM_KEY=$KEY" WALG_COMPRESSION_METHOD=lz4)
for s in "${SEGS[@]}"; do
	wrun "${FENV[@]}" -- wal-push "$T/segs/$s"
	expect_rc 0 "wal-push $s for the fetch runs"
done
# an uninterrupted fetch: the main process, then its prefetcher's four downloads
mkdir -p "$T/fetch-ref/pg_wal"
t0=$(date +%s%N)
wrun "${FENV[@]}" WALG_DOWNLOAD_CONCURRENCY=4 -- wal-fetch "${SEGS[0]}" "$T/fetch-ref/pg_wal/RECOVERYXLOG"
FETCH_MS=$(ms_since "$t0")
expect_rc 0 "uninterrupted wal-fetch"
assert_same_file "$T/segs/${SEGS[0]}" "$T/fetch-ref/pg_wal/RECOVERYXLOG" "uninterrupted wal-fetch"
pfdir=$T/fetch-ref/pg_wal/.wal-g/prefetch
for _ in $(seq 1 600); do
	[ "$(find "$pfdir" -maxdepth 1 -name '0000*' 2>/dev/null | wc -l)" = 4 ] &&
		[ -z "$(ls -A "$pfdir/running" 2>/dev/null)" ] && break
	sleep 0.05
done
PREFETCH_MS=$(ms_since "$t0")
[ "$(find "$pfdir" -maxdepth 1 -name '0000*' | wc -l)" = 4 ] || fail "the prefetcher did not download the next four segments"
for f in "$pfdir"/0000*; do assert_same_file "$T/segs/$(basename "$f")" "$f" "uninterrupted prefetch"; done
FETCH_MAX=$(awk -v m="$FETCH_MS" 'BEGIN { printf "%.3f", m * 1.2 / 1000 }')
PREFETCH_MAX=$(awk -v m="$PREFETCH_MS" 'BEGIN { printf "%.3f", m * 1.2 / 1000 }')
log "uninterrupted wal-fetch: $FETCH_MS ms, its prefetcher done after $PREFETCH_MS ms;" \
	"kills within [0, $FETCH_MAX] s (odd runs) or [0, $PREFETCH_MAX] s (even runs)"

killed=0 finished=0 served=0 prefetched_total=0 hidden_total=0
for n in $(seq 1 "$RUNS"); do
	d=$T/fetch-$n/pg_wal
	mkdir -p "$d"
	k=$((RANDOM % 4))
	s=${SEGS[$k]}
	max=$FETCH_MAX
	[ $((n % 2)) = 0 ] && max=$PREFETCH_MAX
	r=$("${KILL[@]}" --tag "walc-fault-$$-fetch-$n" --min 0 --max "$max" --seed "$((SEED * 1000 + 500 + n))" \
		--out "$d/../out" --err "$d/../err" -- env "${FENV[@]}" WALG_DOWNLOAD_CONCURRENCY=4 \
		"$WALC" wal-fetch "$s" "$d/RECOVERYXLOG")
	assert_no_sanitizer_reports "$d/../err"
	case $r in killed*) killed=$((killed + 1)) ;; *) finished=$((finished + 1)) ;; esac
	got=absent
	if [ -e "$d/RECOVERYXLOG" ]; then
		assert_same_file "$T/segs/$s" "$d/RECOVERYXLOG" "wal-fetch run $n ($r): RECOVERYXLOG after SIGKILL"
		served=$((served + 1))
		got=identical
	fi
	case $r in exited\ 0*) [ -e "$d/RECOVERYXLOG" ] || fail "wal-fetch run $n exited 0 without RECOVERYXLOG" ;; esac
	left=$(cd "$d" && find . -path ./.wal-g -prune -o -type f ! -name RECOVERYXLOG ! -name '.RECOVERYXLOG.walc-tmp.*' -print)
	[ -z "$left" ] || fail "wal-fetch run $n ($r): files left beside RECOVERYXLOG: $left"
	hidden=$(find "$d" -maxdepth 1 -name '.RECOVERYXLOG.walc-tmp.*' | wc -l)
	pf=0
	if [ -d "$d/.wal-g/prefetch" ]; then
		for f in "$d"/.wal-g/prefetch/*; do
			[ -f "$f" ] || continue
			assert_same_file "$T/segs/$(basename "$f")" "$f" "wal-fetch run $n ($r): prefetched file after SIGKILL"
			pf=$((pf + 1))
		done
		hidden=$((hidden + $(find "$d/.wal-g/prefetch" -maxdepth 1 -name '.*walc-tmp*' | wc -l)))
	fi
	# recovery goes on: the next two segments, as restore_command asks for them
	for j in 1 2; do
		rm -f "$d/RECOVERYXLOG"
		wrun "${FENV[@]}" WALG_DOWNLOAD_CONCURRENCY=1 -- wal-fetch "${SEGS[$((k + j))]}" "$d/RECOVERYXLOG"
		expect_rc 0 "wal-fetch run $n ($r): next segment ${SEGS[$((k + j))]}"
		assert_same_file "$T/segs/${SEGS[$((k + j))]}" "$d/RECOVERYXLOG" "wal-fetch run $n: next segment ${SEGS[$((k + j))]}"
	done
	prefetched_total=$((prefetched_total + pf))
	hidden_total=$((hidden_total + hidden))
	printf '    fetch run %2d: %-14s %s: RECOVERYXLOG %s, %s complete prefetched files, %s hidden temporaries\n' \
		"$n" "$r" "$s" "$got" "$pf" "$hidden"
	rm -rf "$T/fetch-$n"
done
ok "wal-fetch SIGKILLed $killed times ($finished finished first, their prefetchers killed): RECOVERYXLOG" \
	"absent or identical ($served identical), $prefetched_total prefetched files all complete," \
	"$hidden_total hidden temporaries (downloads cut by the kill); later fetches identical"
log "all done in $((SECONDS - START))s"
