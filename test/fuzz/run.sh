#!/usr/bin/env bash
# Runs every libFuzzer binary DIR/fuzz_* for SECONDS each, seeded from test/fuzz/corpus/<name>,
# FUZZ_JOBS (default: the number of cores) targets at once: each fuzzes on one core. The corpus
# is copied to a temporary directory so the tree is never modified; a failing target's
# directory (log, crash input) is kept and named. Exits non-zero if any target fails.
set -u
if [ $# -ne 2 ]; then
	echo "usage: $0 DIR SECONDS" >&2
	exit 2
fi
dir=$1 secs=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
jobs=${FUZZ_JOBS:-$(nproc)}
results=$(mktemp -d "${TMPDIR:-/tmp}/walc-fuzz-run.XXXXXX")
trap 'rm -rf "$results"' EXIT

# fuzz_one BIN: one target; a pass leaves $results/NAME.ok
fuzz_one() {
	local bin=$1 name work rc runs
	name=$(basename "$bin")
	work=$(mktemp -d "${TMPDIR:-/tmp}/walc-fuzz-$name.XXXXXX")
	mkdir "$work/corpus"
	if [ -d "$root/test/fuzz/corpus/$name" ]; then
		cp -R "$root/test/fuzz/corpus/$name/." "$work/corpus/"
	fi
	# libFuzzer's own time limit, with a guard in case a target wedges outside an input
	timeout --signal=KILL $((secs + 120)) "$bin" -max_total_time="$secs" -max_len=65536 \
		-timeout=10 -rss_limit_mb=1024 -print_final_stats=1 -artifact_prefix="$work/" \
		"$work/corpus" >"$work/log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n1)
	if [ $rc -eq 0 ]; then
		echo "ok: $name (${runs:-?} runs in ${secs}s)" | tee "$results/$name.ok"
		rm -rf "$work"
	else
		echo "FAIL: $name (exit $rc; log and crash input in $work)"
	fi
}

running=0 started=0
for bin in "$dir"/fuzz_*; do
	[ -f "$bin" ] && [ -x "$bin" ] || continue
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
	fuzz_one "$bin" &
	running=$((running + 1))
	started=$((started + 1))
done
wait
passed=$(find "$results" -name '*.ok' | wc -l)
failed=$((started - passed)) # a target that left no verdict failed too
if [ "$started" -eq 0 ]; then
	echo "fuzz: no fuzz_* binaries in $dir" >&2
	exit 1
fi
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
