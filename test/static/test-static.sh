#!/usr/bin/env bash
# make test-static: the self-check of the static binary (check.sh), then walc-static against a
# real PostgreSQL 15 on file storage, over HTTPS against s3rver and over SFTP against sshd
# (scenario.sh file|s3|sftp).
#
# Environment: WALC_STATIC (binary, default <repo>/walc-static), STATIC_TIMEOUT (per scenario,
# default 600 s), KEEP=1 / KEEP_FAILED=1 as for the integration tests. s3rver is started by
# test/servers/s3rver.sh.
# Last line: "test-static: N passed, N failed" for the scenarios (", N not run" when the S3
# part could not run); exit 1 when a scenario or the self-check failed.
set -u
DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$DIR/../.." && pwd)
export WALC=${WALC_STATIC:-$ROOT/walc-static}
case $WALC in /*) ;; *) WALC=$ROOT/$WALC ;; esac
TIMEOUT=${STATIC_TIMEOUT:-600}

# The self-check prints its own "static-check: N passed, N failed"; the line below counts the
# scenarios only (.ci/run adds up every such line).
check_rc=0
"$DIR/check.sh" "$WALC" || check_rc=1
passed=0 failed=0 notrun=0

out=$(mktemp /tmp/walc-test-static.XXXXXX)
trap 'rm -f "$out"' EXIT
for s in file s3 sftp; do
	start=$SECONDS
	timeout -k 20 "$TIMEOUT" bash "$DIR/scenario.sh" "$s" >"$out" 2>&1 </dev/null
	rc=$?
	took=$((SECONDS - start))
	case $rc in
	0)
		echo "PASS static-$s (${took}s)"
		grep -E '\] PASS ' "$out" | sed 's/^/  /'
		passed=$((passed + 1))
		;;
	3)
		grep -m1 '^S3 part: not run:' "$out" || echo "S3 part: not run: (no reason given)"
		notrun=$((notrun + 1))
		;;
	*)
		if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
			echo "FAIL static-$s (timed out after ${TIMEOUT}s)"
		else
			echo "FAIL static-$s (exit $rc, ${took}s)"
		fi
		echo "--- static-$s output (last 200 lines) ---"
		tail -n 200 "$out"
		echo "--- end of static-$s ---"
		failed=$((failed + 1))
		;;
	esac
done
if [ "$notrun" -gt 0 ]; then
	echo "test-static: $passed passed, $failed failed, $notrun not run"
else
	echo "test-static: $passed passed, $failed failed"
fi
[ "$failed" = 0 ] && [ "$check_rc" = 0 ]
