# shellcheck shell=bash
# The check runner of the shell test scripts (test/deploy/check.sh, deploy/image/check.sh,
# test/e2e/pod.sh), sourced:
#   check NAME COMMAND...   runs COMMAND; PASS or FAIL NAME, counted in $passed and $failed;
#                           its output goes to $CHECK_LOGS/<name>.log, and its last lines are
#                           shown on failure. Returns COMMAND's success.
# CHECK_LOGS must name an existing directory.
passed=0
failed=0
check() {
	local name=$1 log
	shift
	log="$CHECK_LOGS/$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-100).log"
	if "$@" >"$log" 2>&1; then
		echo "PASS $name"
		passed=$((passed + 1))
	else
		echo "FAIL $name"
		tail -n 40 "$log" | sed 's/^/    /'
		failed=$((failed + 1))
		return 1
	fi
}
