#!/usr/bin/env bash
# Runs each unit-test program given and prints one summary line: "N passed, N failed".
# UNIT_JOBS (default: the number of cores) programs run at once; each one's report is printed
# in the order given, once it has finished. The programs share nothing but /tmp, where each
# makes its own names (mkstemp, mkdtemp), and none listens on a port.
set -u
jobs=${UNIT_JOBS:-$(nproc)}
work=$(mktemp -d "${TMPDIR:-/tmp}/walc-unit-run.XXXXXX")
trap 'rm -rf "$work"' EXIT

# run_one INDEX PROGRAM: its output in $work/INDEX.out, its exit code in $work/INDEX.rc
run_one() {
	"$2" >"$work/$1.out" 2>&1
	echo $? >"$work/$1.rc.tmp" && mv "$work/$1.rc.tmp" "$work/$1.rc"
}

passed=0 failed=0
# report INDEX PROGRAM: prints and counts one program's result
report() {
	local out rc p f
	out=$(cat "$work/$1.out")
	rc=$(cat "$work/$1.rc")
	p=$(printf '%s\n' "$out" | sed -nE 's/^\[  PASSED  \] ([0-9]+) test.*/\1/p' | tail -n1)
	f=$(printf '%s\n' "$out" | sed -nE 's/^\[  FAILED  \] ([0-9]+) test.*/\1/p' | tail -n1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	if [ "$rc" -ne 0 ]; then
		printf '%s\n' "$out"
		[ -z "$f" ] && failed=$((failed + 1))
		echo "FAIL: $2 (exit $rc)"
	else
		echo "ok: $(basename "$2") (${p:-0} tests)"
	fi
}

progs=("$@")
next=0 # the next program to report
# drain: reports the finished programs that come next in the given order
drain() {
	while [ -f "$work/$next.rc" ]; do
		report "$next" "${progs[$next]}"
		next=$((next + 1))
	done
}
running=0
for i in "${!progs[@]}"; do
	while [ "$running" -ge "$jobs" ]; do
		wait -n
		running=$((running - 1))
	done
	run_one "$i" "${progs[$i]}" &
	running=$((running + 1))
	drain
done
wait
drain
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
