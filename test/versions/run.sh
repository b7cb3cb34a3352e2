#!/usr/bin/env bash
# make test-versions: the PostgreSQL version matrix. Runs the checks of version.sh on
# PostgreSQL 13 (bullseye chroot), 15 (the host's), 17 (trixie chroot), 18 (sid chroot) and 19
# (sid chroot with PostgreSQL from Debian experimental), with the static walc inside each, and
# prints a table: one row per check, one column per version, cells PASS / FAIL / n/a, the
# reasons under it. Last line: "versions: N passed, N failed"
# (n/a cells count as neither). Exit 1 when a cell failed.
#
# The chroots come from deploy/pgchroot.sh (cached in /var/cache/walc-pg; missing ones are
# built first, side by side). One Ceph RGW on 127.0.0.1 serves every version's s3 check. The
# versions run PGV_JOBS at a time (default: the number of CPUs), each under a timeout
# (PGV_TIMEOUT, default 1800 s: a version's checks took about 3 minutes here beside a loaded
# run; the timeout guards against a hang, and CI's hosts have run 2-3 times slower). SIGINT or
# SIGTERM stops every version's servers and the RGW.
#
# Environment: PGV_VERSIONS (default "13 15 17 18 19"), PGV_ONLY (checks, as version.sh),
# WALC_STATIC (default <repo>/walc-static), KEEP=1 / KEEP_FAILED=1 as for the integration
# tests, PGV_LOG_LINES (lines of a failed check's log shown, default 40), PGV_TIMES=1 (a second
# table: the seconds each check took).
set -uo pipefail
DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$DIR/../.." && pwd)
VERSIONS=${PGV_VERSIONS:-13 15 17 18 19}
WALC_STATIC=${WALC_STATIC:-$ROOT/walc-static}
RGW=$ROOT/test/servers/ceph-rgw.sh # the project's own, as the S3 integration tests use
JOBS=${PGV_JOBS:-$(nproc)}
TIMEOUT=${PGV_TIMEOUT:-1800}
LOG_LINES=${PGV_LOG_LINES:-40}
start=$SECONDS

release_of() {
	case $1 in
	13) echo bullseye ;;
	15) echo host ;;
	17) echo trixie ;;
	18) echo sid ;;
	19) echo experimental ;;
	*) echo unknown ;;
	esac
}

work=$(mktemp -d /tmp/walc-pgv-run.XXXXXX)
rgw=""
pids=()
cleanup() {
	local p
	trap "" INT TERM # a second Ctrl-C must not cut the cleanup short
	# timeout forwards the signal to its whole process group: the version script, its checks,
	# their psql; each version script's traps stop its servers (they are in other sessions).
	local tpids=() deadline=$((SECONDS + 60))
	for p in "$work"/*/timeout.pid; do [ -f "$p" ] && tpids+=("$(cat "$p")"); done
	for p in "${tpids[@]}"; do kill -TERM "$p" 2>/dev/null; done
	# timeout exits once its version script has stopped its servers and removed its directory
	for p in "${tpids[@]}"; do
		while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
	done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	[ -z "$rgw" ] || "$RGW" stop "$rgw" >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "versions: interrupted"; exit 130' INT
trap 'echo "versions: terminated"; exit 143' TERM

[ "$(id -u)" = 0 ] || { echo "the version matrix needs root (debootstrap, chroot, mounts)"; echo "versions: 0 passed, 1 failed"; exit 1; }
case $WALC_STATIC in /*) ;; *) WALC_STATIC=$ROOT/$WALC_STATIC ;; esac
if [ ! -x "$WALC_STATIC" ]; then
	echo "no static walc at $WALC_STATIC (make static)"
	echo "versions: 0 passed, 1 failed"
	exit 1
fi
echo "version matrix: PostgreSQL $VERSIONS with $("$WALC_STATIC" --version | head -n 1)"

# ---- chroots (cached; the missing ones built side by side) ----------------------------------
declare -A ROOTOF BROKEN
bpids=()
for v in $VERSIONS; do
	rel=$(release_of "$v")
	case $rel in
	host) ROOTOF[$v]="" ;;
	unknown) BROKEN[$v]="no Debian release known for PostgreSQL $v" ;;
	*)
		"$ROOT/deploy/pgchroot.sh" "$rel" >"$work/root-$v" 2>"$work/chroot-$v.log" &
		bpids+=("$v:$!")
		;;
	esac
done
for vp in "${bpids[@]}"; do
	v=${vp%%:*}
	if wait "${vp#*:}"; then
		ROOTOF[$v]=$(cat "$work/root-$v")
		grep -h 'chroot built in' "$work/chroot-$v.log" | sed 's/^/  /'
	else
		BROKEN[$v]="deploy/pgchroot.sh $(release_of "$v") failed: $(tail -n 1 "$work/chroot-$v.log")"
		tail -n 20 "$work/chroot-$v.log" | sed 's/^/  /'
	fi
done
echo "chroots ready after $((SECONDS - start))s"

# ---- one Ceph RGW for every version's s3 check ----------------------------------------------
s3_free_base() { # a port with 10 free ones above it, below the ephemeral range
	local p i low=32768
	[ -r /proc/sys/net/ipv4/ip_local_port_range ] && read -r low _ </proc/sys/net/ipv4/ip_local_port_range
	while :; do
		p=$((10000 + RANDOM % (low - 10100)))
		for ((i = 0; i < 10; i++)); do
			(exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null && continue 2
		done
		echo "$p"
		return
	done
}
rgw=$work/rgw
# Debian's awscli (a pip or pyenv "aws" earlier in PATH may be another major version)
AWSCLI=/usr/bin/aws
[ -x "$AWSCLI" ] || AWSCLI=$(command -v aws || echo aws)
if "$RGW" start "$rgw" "$(s3_free_base)" >"$work/rgw.out" 2>&1; then
	set -a
	# shellcheck disable=SC1091
	. "$rgw/env"
	set +a
	for v in $VERSIONS; do
		"$AWSCLI" --endpoint-url "$S3_ENDPOINT" s3api create-bucket --bucket "walc-pg$v" >/dev/null 2>>"$work/rgw.out" ||
			echo "could not create bucket walc-pg$v: $(tail -n 1 "$work/rgw.out")"
	done
	echo "Ceph RGW at $S3_ENDPOINT"
else
	echo "Ceph RGW did not start (the s3 checks will fail): $(tail -n 3 "$work/rgw.out" | tr '\n' ' ')"
	rgw=""
fi

# ---- the versions, JOBS at a time -----------------------------------------------------------
declare -A TOOK
run_version() { # VERSION: in the background; its exit status in $work/V/rc
	local v=$1 t0=$SECONDS
	# a Ctrl-C reaches the runner, which stops the version through its timeout (cleanup)
	trap '' INT TERM
	mkdir -p "$work/$v"
	PGV_OUT=$work/$v WALC=$WALC_STATIC PGV_S3_BUCKET=walc-pg$v \
		timeout -k 30 "$TIMEOUT" bash "$DIR/version.sh" "$v" "${ROOTOF[$v]}" >"$work/$v/run.log" 2>&1 </dev/null &
	echo "$!" >"$work/$v/timeout.pid"
	wait "$!"
	echo "$?" >"$work/$v/rc"
	rm -f "$work/$v/timeout.pid"
	echo "$((SECONDS - t0))" >"$work/$v/took"
}
running=0
# Newest first: the newer majors run the most checks (incremental, compression, the archive
# module), so the short old ones fill the last slot instead of one long version running alone.
for v in $(tr ' ' '\n' <<<"$VERSIONS" | sort -rn); do
	[ -z "${BROKEN[$v]:-}" ] || continue
	while [ "$running" -ge "$JOBS" ]; do
		wait -n
		running=$((running - 1))
	done
	echo "PostgreSQL $v: started ($(release_of "$v"))"
	run_version "$v" &
	pids+=("$!")
	running=$((running + 1))
done
wait
pids=()
for v in $VERSIONS; do
	[ -f "$work/$v/took" ] && TOOK[$v]=$(cat "$work/$v/took")
done

# ---- the table ------------------------------------------------------------------------------
mapfile -t CHECKS < <(bash "$DIR/version.sh" --list)
passed=0 failed=0 na=0
notes=()
cell() { # VERSION CHECK: prints the cell, remembers the reason, counts
	local v=$1 c=$2 line status reason rc
	if [ -n "${BROKEN[$v]:-}" ]; then
		status=FAIL reason=${BROKEN[$v]}
	else
		line=$(grep -m1 "^$c	" "$work/$v/results" 2>/dev/null)
		if [ -z "$line" ]; then
			rc=$(cat "$work/$v/rc" 2>/dev/null || echo "?")
			status=FAIL reason="no result (version.sh exited $rc$([ "$rc" = 124 ] && echo ": timed out after ${TIMEOUT}s"))"
		else
			status=$(printf '%s\n' "$line" | cut -f2)
			reason=$(printf '%s\n' "$line" | cut -f3)
		fi
	fi
	case $status in
	PASS) passed=$((passed + 1)) ;;
	n/a) na=$((na + 1)); notes+=("$v $c: n/a: $reason") ;;
	*) failed=$((failed + 1)); notes+=("$v $c: FAIL: $reason") ;;
	esac
	printf ' %-6s' "$status"
}
echo
printf '%-20s' "check"
for v in $VERSIONS; do printf ' %-6s' "$v"; done
echo
for c in "${CHECKS[@]}"; do
	printf '%-20s' "$c"
	for v in $VERSIONS; do cell "$v" "$c"; done
	echo
done
printf '%-20s' "time"
for v in $VERSIONS; do printf ' %-6s' "${TOOK[$v]:-}${TOOK[$v]:+s}"; done
echo
if [ "${PGV_TIMES:-0}" = 1 ]; then
	echo "seconds per check:"
	for c in "${CHECKS[@]}"; do
		printf '%-20s' "$c"
		for v in $VERSIONS; do
			printf ' %-6s' "$(awk -F'\t' -v c="$c" '$1 == c && $2 == "PASS" { print $3 }' "$work/$v/results" 2>/dev/null)"
		done
		echo
	done
fi
echo
for v in $VERSIONS; do
	ver=$(sed -n 's/.*PostgreSQL \([0-9][0-9a-z.]*\) .*running on port.*/\1/p' "$work/$v/setup.log" 2>/dev/null | head -n 1)
	echo "  $v: PostgreSQL ${ver:-?} ($(release_of "$v")$([ "$(release_of "$v")" = host ] || echo " chroot"))"
done
for n in "${notes[@]}"; do echo "  $n"; done

# the logs of failed checks (the end of each)
for v in $VERSIONS; do
	[ -d "$work/$v" ] || continue
	while IFS=$'\t' read -r c status _; do
		[ "$status" = FAIL ] || continue
		[ -s "$work/$v/$c.log" ] || continue
		echo "--- PostgreSQL $v, $c: last $LOG_LINES lines of its log ---"
		tail -n "$LOG_LINES" "$work/$v/$c.log"
	done <"$work/$v/results"
	rc=$(cat "$work/$v/rc" 2>/dev/null || echo "?")
	if [ "$rc" != 0 ]; then
		echo "--- PostgreSQL $v: version.sh exited $rc; last $LOG_LINES lines ---"
		tail -n "$LOG_LINES" "$work/$v/run.log"
	fi
done
echo "the matrix took $((SECONDS - start))s; $na cells n/a"
echo "versions: $passed passed, $failed failed"
[ "$failed" = 0 ]
