#!/usr/bin/env bash
# Runs walc's integration tests: every test_*.sh next to this file, or the subset named in
# $INTEGRATION_TESTS (space-separated; "wal_matrix", "test_wal_matrix" and
# "test_wal_matrix.sh" all name the same test). Each runs with a timeout
# ($INTEGRATION_TIMEOUT, default 600 s; twice that for a "long" test, below); prints
# "PASS name (Ns)" or "FAIL name" followed by the test's output (after a PASS, the test's
# "skipped: REASON" lines, if any), and as the last line "integration: N passed, N failed".
# Exit 1 if any failed.
#
# INTEGRATION_JOBS (default 1) tests run at once. A test whose header has the line
# "# integration: solo" runs with no other test beside it (it asserts timings that load would
# upset); "# integration: long" tests start first, so that the pool does not end on one of them,
# and get twice the timeout (the storage matrices took 548-600 s under coverage + ASan beside
# another test).
# INTEGRATION_FAULTS=1 runs only the fault tests, INTEGRATION_FAULTS=all every test.
#
# After the tests, processes this run started that still run (walc, postgres, the S3 servers,
# the Python fakes: whatever has this run's WALC_IT_RUN in its environment, or its directory as
# working directory or in its arguments) are printed, stopped, and count as one failed test.
#
# Environment: WALC (absolute path of the binary under test, default <repo>/walc), KEEP=1 keeps
# every test's directory, KEEP_FAILED=1 those of failed tests (inside the run's directory,
# /tmp/walc-it-run.XXXXXX, which is then kept), IT_KEEP_GOING=1 lets a test go
# on after a failed check (diagnosis), ASAN_OPTIONS (default detect_leaks=1:abort_on_error=0).
set -u
DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$DIR/../.." && pwd)
cd "$ROOT" || exit 1
TIMEOUT=${INTEGRATION_TIMEOUT:-600}
export WALC=${WALC:-$ROOT/walc}
case $WALC in /*) ;; *) WALC=$ROOT/$WALC ;; esac
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}

tests=()
if [ -n "${INTEGRATION_TESTS:-}" ]; then
	for t in $INTEGRATION_TESTS; do
		t=${t%.sh}
		t=${t#test_}
		if [ -f "$DIR/test_$t.sh" ]; then
			tests+=("$DIR/test_$t.sh")
		else
			echo "no such integration test: $t"
			tests+=("$DIR/test_$t.sh") # counted as a failure below
		fi
	done
else
	# The fault and load tests run on their own (make test-faults).
	for t in "$DIR"/test_*.sh; do
		case $(basename "$t") in test_fault_*) [ -n "${INTEGRATION_FAULTS:-}" ] || continue ;; esac
		case " ${INTEGRATION_SKIP:-} " in *" $(basename "$t" .sh) "*) continue ;; esac
		[ -f "$t" ] && tests+=("$t")
	done
fi
if [ "${INTEGRATION_FAULTS:-}" = 1 ] && [ -z "${INTEGRATION_TESTS:-}" ]; then
	mapfile -t tests < <(printf '%s\n' "${tests[@]}" | grep '/test_fault_')
fi

echo "integration tests with WALC=$WALC"
if [ ! -x "$WALC" ]; then
	echo "walc binary not found or not executable: $WALC (run 'make walc' or set WALC)"
fi

JOBS=${INTEGRATION_JOBS:-1}
passed=0 failed=0
# The run's directory: the tests' reports, and (lib.sh's it_setup) every test's own directory.
# Every process a test starts inherits WALC_IT_RUN; after the tests, whatever still runs with
# it, or in or on a path under this directory, was left behind by this run (see leftovers).
work=$(mktemp -d /tmp/walc-it-run.XXXXXX)
chmod 755 "$work" # the tests' directories belong to postgres, who must reach them
export WALC_IT_RUN=$work
cleanup_work() {
	if [ "${KEEP:-0}" = 1 ] || [ "${KEEP_FAILED:-0}" = 1 ]; then
		rm -f "$work"/*.out "$work"/*.report "$work"/*.rc
		rmdir "$work" 2>/dev/null || echo "kept test directories are in $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup_work EXIT

# tagged TEST TAG: the line "# integration: TAG" is in the first 40 lines of TEST (awk reads
# them itself: `head | grep -q` under pipefail fails when grep stops reading first)
tagged() { awk -v want="# integration: $2" 'NR > 40 { exit } $0 == want { found = 1; exit } END { exit !found }' "$1"; }

# run_one TEST: runs it, leaving its report in $work/NAME.report and its verdict in NAME.rc
run_one() {
	local t=$1 name rc start took out lines limit=$TIMEOUT
	name=$(basename "$t" .sh)
	out=$work/$name.out
	tagged "$t" long && limit=$((TIMEOUT * 2))
	start=$SECONDS
	WALC_IT_TEST=$name timeout -k 20 "$limit" bash "$t" >"$out" 2>&1 </dev/null
	rc=$?
	took=$((SECONDS - start))
	{
		if [ $rc -eq 0 ]; then
			echo "PASS $name (${took}s)"
			# a test that could not run what it checks says why in a "skipped: ..." line
			grep -E '(^|\] )skipped: ' "$out" | sed 's/^/  /' || true
		else
			if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
				echo "FAIL $name (timed out after ${limit}s)"
			else
				echo "FAIL $name (exit $rc, ${took}s)"
			fi
			lines=$(wc -l <"$out")
			if [ "$lines" -gt 400 ]; then
				echo "--- $name: first 100 and last 300 of $lines lines of output ---"
				head -n 100 "$out"
				echo "[...]"
				tail -n 300 "$out"
			else
				echo "--- $name output ---"
				cat "$out"
			fi
			echo "--- end of $name ---"
		fi
	} >"$work/$name.report"
	echo "$rc" >"$work/$name.rc"
}

# collect: print and count the reports of the tests that have finished
collect() {
	local f name
	for f in "$work"/*.rc; do
		[ -f "$f" ] || continue
		name=$(basename "$f" .rc)
		cat "$work/$name.report"
		if [ "$(cat "$f")" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
		rm -f "$f" "$work/$name.report" "$work/$name.out"
	done
}

# order: solo tests one by one first, then the long ones, then the rest
solo=() long=() other=()
for t in "${tests[@]}"; do
	if [ ! -f "$t" ]; then
		echo "FAIL $(basename "$t" .sh) (no such test)"
		failed=$((failed + 1))
	elif [ "$JOBS" -gt 1 ] && tagged "$t" solo; then
		solo+=("$t")
	elif tagged "$t" long; then
		long+=("$t")
	else
		other+=("$t")
	fi
done
for t in "${solo[@]}"; do
	run_one "$t"
	collect
done
running=0
for t in "${long[@]}" "${other[@]}"; do
	while [ "$running" -ge "$JOBS" ]; do
		wait -n
		running=$((running - 1))
		collect
	done
	run_one "$t" &
	running=$((running + 1))
done
wait
collect

# run_pids: the live processes this run started: with WALC_IT_RUN=$work in their environment,
# or their working directory or an argument under $work (PostgreSQL's processes write their
# titles over the memory /proc/PID/environ shows, but they work in their data directory).
# Not this shell and its helpers: after the tests, nothing else descends from it.
run_pids() {
	local pid
	{
		grep -lzxF "WALC_IT_RUN=$work" /proc/[0-9]*/environ
		grep -lzF "$work/" /proc/[0-9]*/cmdline
		find /proc/[0-9]*/cwd -maxdepth 0 -lname "$work/*"
	} 2>/dev/null | sed -nE 's#^/proc/([0-9]+)/.*#\1#p' | sort -un |
		while read -r pid; do
			if live "$pid" && ! from_here "$pid"; then echo "$pid"; fi
		done
}
# stat_field PID N: field N of /proc/PID/stat (3: state, 4: parent)
stat_field() {
	local stat f=()
	read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
	read -r -a f <<<"${stat##*) }"
	echo "${f[$(($2 - 3))]}"
}
live() { local s; s=$(stat_field "$1" 3) && [ "$s" != Z ]; } # a zombie's parent reaps it
from_here() { # PID is this shell or one of its descendants
	local p=$1 i
	for ((i = 0; i < 8 && p > 1; i++)); do
		[ "$p" != $$ ] || return 0
		p=$(stat_field "$p" 4) || return 1
	done
	return 1
}

# describe PID: its user, age, the test that started it and its command line
describe() {
	local vars=() arg test=""
	mapfile -d '' vars 2>/dev/null <"/proc/$1/environ" || vars=()
	for arg in "${vars[@]}"; do [[ $arg != WALC_IT_TEST=* ]] || test=${arg#WALC_IT_TEST=}; done
	if [ -z "$test" ]; then
		test=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null; readlink "/proc/$1/cwd" 2>/dev/null)
		test=$(sed -nE "s#.*$work/walc-([^/ ]+)\.[A-Za-z0-9]{6}.*#test_\1#p" <<<"$test" | sed -n 1p)
	fi
	printf '  %s (%s): %s\n' "$(ps -o pid=,user=,etime= -p "$1" 2>/dev/null | xargs)" \
		"${test:-test unknown}" "$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | cut -c1-200)"
}

# leftovers: fails the run when processes it started outlive every test: prints them, stops
# them (SIGTERM, SIGKILL 5 s later), counts one failure. A test's cleanup may still be
# finishing when the last test ends (servers stopping): they get 10 s first.
leftovers() {
	local pids=() pid i until=$((SECONDS + 10))
	while :; do
		mapfile -t pids < <(run_pids)
		[ ${#pids[@]} -gt 0 ] || return 0
		[ "$SECONDS" -lt "$until" ] || break
		sleep 0.5
	done
	echo "FAIL leftover processes: ${#pids[@]} started by this run still run after every test ended"
	for pid in "${pids[@]}"; do describe "$pid"; done
	kill -TERM "${pids[@]}" 2>/dev/null
	for ((i = 0; i < 10; i++)); do
		mapfile -t pids < <(run_pids)
		[ ${#pids[@]} -gt 0 ] || break
		sleep 0.5
	done
	[ ${#pids[@]} -eq 0 ] || kill -KILL "${pids[@]}" 2>/dev/null
	failed=$((failed + 1))
}
leftovers

echo "integration: $passed passed, $failed failed"
[ $failed -eq 0 ]
