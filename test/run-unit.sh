#!/usr/bin/env bash
# Runs each unit-test program given and prints one summary line: "N passed, N failed".
set -u
passed=0 failed=0
for t in "$@"; do
	out=$("$t" 2>&1); rc=$?
	p=$(printf '%s\n' "$out" | sed -nE 's/^\[  PASSED  \] ([0-9]+) test.*/\1/p' | tail -n1)
	f=$(printf '%s\n' "$out" | sed -nE 's/^\[  FAILED  \] ([0-9]+) test.*/\1/p' | tail -n1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	if [ $rc -ne 0 ]; then
		printf '%s\n' "$out"
		[ -z "$f" ] && failed=$((failed + 1))
		echo "FAIL: $t (exit $rc)"
	else
		echo "ok: $(basename "$t") (${p:-0} tests)"
	fi
done
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
