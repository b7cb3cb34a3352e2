#!/usr/bin/env bash
# Runs every libFuzzer binary DIR/fuzz_* for SECONDS each, seeded from test/fuzz/corpus/<name>.
# The corpus is copied to a temporary directory so the tree is never modified; a failing
# target's directory (log, crash input) is kept and named. Exits non-zero if any target fails.
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 DIR SECONDS" >&2
	exit 2
fi
dir=$1 secs=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
failed=0 ran=0
for bin in "$dir"/fuzz_*; do
	[ -f "$bin" ] && [ -x "$bin" ] || continue
	name=$(basename "$bin")
	work=$(mktemp -d "${TMPDIR:-/tmp}/walc-fuzz-$name.XXXXXX")
	mkdir "$work/corpus"
	if [ -d "$root/test/fuzz/corpus/$name" ]; then
		cp -R "$root/test/fuzz/corpus/$name/." "$work/corpus/"
	fi
	ran=$((ran + 1))
	# libFuzzer's own time limit, with a guard in case a target wedges outside an input
	timeout --signal=KILL $((secs + 120)) "$bin" -max_total_time="$secs" -max_len=65536 \
		-timeout=10 -rss_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$work/" \
		"$work/corpus" >"$work/log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n1)
	if [ $rc -eq 0 ]; then
		echo "ok: $name (${runs:-?} runs in ${secs}s)"
		rm -rf "$work"
	else
		failed=$((failed + 1))
		echo "FAIL: $name (exit $rc; log and crash input in $work)"
	fi
done
if [ $ran -eq 0 ]; then
	echo "fuzz: no fuzz_* binaries in $dir" >&2
	exit 1
fi
echo "fuzz: $((ran - failed)) passed, $failed failed"
[ $failed -eq 0 ]
