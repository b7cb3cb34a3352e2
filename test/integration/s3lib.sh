# shellcheck shell=bash
# Helpers for the S3 integration tests (sourced after lib.sh and it_setup): real servers on
# loopback started by test/servers (Ceph RGW, s3rver), the helper programs built with the
# Makefile's flags, awscli as an independent client, and the cleanup of everything started here.

S3_SERVERS=$ROOT/test/servers
S3_PIDS=()      # helper processes (fault proxy, fake STS) to stop on exit
S3_RGW_DIR=""   # Ceph cluster started here, stopped on exit
S3_S3RVER_DIR=""

s3_cleanup() {
	local p
	set +e # runs from the EXIT trap: a helper that already exited must not stop the cleanup
	for p in "${S3_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	if [ -n "$S3_RGW_DIR" ]; then "$S3_SERVERS/ceph-rgw.sh" stop "$S3_RGW_DIR" >/dev/null 2>&1; fi
	if [ -n "$S3_S3RVER_DIR" ]; then "$S3_SERVERS/s3rver.sh" stop "$S3_S3RVER_DIR" >/dev/null 2>&1; fi
	return 0
}

# s3_setup NAME: it_setup plus an EXIT trap that also stops the S3 servers and helpers.
s3_setup() {
	it_setup "$1"
	# shellcheck disable=SC2154 # rc is assigned inside the trap string
	trap 'rc=$?; s3_cleanup; (exit $rc); it_cleanup' EXIT
	export AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_PAGER=""
}

# s3_port SPAN: a base port with SPAN free ports above it on 127.0.0.1.
s3_port() {
	local span=${1:-1} p i ok
	while :; do
		p=$(random_port)
		ok=1
		for ((i = 0; i < span; i++)); do
			if (exec 3<>"/dev/tcp/127.0.0.1/$((p + i))") 2>/dev/null; then ok=0; break; fi
		done
		[ "$ok" = 1 ] && { echo "$p"; return; }
	done
}

# s3_s3rver_start [https]: s3rver on a free port, in $T/s3rver; sets S3RVER_PORT. A start that
# fails is retried twice on another port, and its log is shown if all three fail.
s3_s3rver_start() {
	local mode=${1:-http} try
	S3_S3RVER_DIR=$T/s3rver
	for try in 1 2 3; do
		S3RVER_PORT=$(s3_port 1)
		log "starting s3rver ($mode) on port $S3RVER_PORT"
		if "$S3_SERVERS/s3rver.sh" start "$S3_S3RVER_DIR" "$S3RVER_PORT" "$mode" >"$T/log/s3rver.out" 2>&1; then
			return 0
		fi
		log "s3rver did not start (try $try): $(tail -n 3 "$S3_S3RVER_DIR/log" 2>/dev/null | tr '\n' ' ')"
		"$S3_SERVERS/s3rver.sh" stop "$S3_S3RVER_DIR" >/dev/null 2>&1 || true
	done
	cat "$T/log/s3rver.out" "$S3_S3RVER_DIR/log" >&2 2>/dev/null
	fail "s3rver.sh start"
}

# s3_build_helpers: $S3_LIVE (test/integration/s3_live.c) and $S3_UNIT (test_s3, for
# --dump-signed), linked against libwalc.a with the Makefile's flags.
s3_build_helpers() {
	local build=${S3_BUILD:-$ROOT/build}
	local pkgs
	pkgs=$(sed -n 's/^PKGS *:= *//p' "$ROOT/Makefile") # the libraries walc links, as the Makefile lists them
	local warn="-Wall -Wextra -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes -Wvla -Wwrite-strings -Wcast-qual -Werror"
	# tests may run side by side (INTEGRATION_JOBS): one make at a time in a build directory
	# the settings table and its loader, cmd's, which both programs read their settings through
	local settings=("$build/cmd/walc/settings/config.o" "$build/cmd/walc/settings/configvars.o")
	mkdir -p "$build"
	(
		flock 9
		plain_make -s -C "$ROOT" BUILD="$build" "$build/libwalc.a" "${settings[@]}"
	) 9>"$build/.make.lock" >"$T/log/build.log" 2>&1 ||
		{ cat "$T/log/build.log" >&2; fail "building libwalc.a"; }
	S3_LIVE=$T/bin/s3_live
	S3_UNIT=$T/bin/test_s3
	# shellcheck disable=SC2046,SC2086
	cc -D_GNU_SOURCE $(pkg-config --cflags $pkgs) -O2 -g -std=gnu11 $warn -pthread -I"$ROOT" \
		-o "$S3_LIVE" "$ROOT/test/integration/s3_live.c" "${settings[@]}" "$build/libwalc.a" \
		$(pkg-config --libs $pkgs) -pthread >>"$T/log/build.log" 2>&1 ||
		{ cat "$T/log/build.log" >&2; fail "building s3_live"; }
	# shellcheck disable=SC2046,SC2086
	cc -D_GNU_SOURCE $(pkg-config --cflags $pkgs) -O2 -g -std=gnu11 $warn -pthread -I"$ROOT" \
		-o "$S3_UNIT" "$ROOT/test/unit/test_s3.c" "${settings[@]}" "$build/libwalc.a" -lcmocka \
		$(pkg-config --libs $pkgs) -pthread >>"$T/log/build.log" 2>&1 ||
		{ cat "$T/log/build.log" >&2; fail "building test_s3"; }
}

# s3_rgw_start: a fresh Ceph RGW on loopback; exports its endpoint and credentials.
s3_rgw_start() {
	local port
	port=$(s3_port 10)
	S3_RGW_DIR=$T/rgw
	log "starting Ceph RGW on port $port"
	"$S3_SERVERS/ceph-rgw.sh" start "$S3_RGW_DIR" "$port" >"$T/log/rgw-start.log" 2>&1 ||
		{ cat "$T/log/rgw-start.log" >&2; fail "ceph-rgw.sh start"; }
	set -a
	# shellcheck disable=SC1091
	. "$S3_RGW_DIR/env"
	set +a
	RGW_PORT=$port # used by the test scripts
	export RGW_PORT
	export WALC_S3_TEST_ENDPOINT=$S3_ENDPOINT
}

# s3_rgw_kill: SIGKILL the radosgw s3_rgw_start started (the server gone, as in an outage);
# s3_rgw_restart: start it again and wait until it answers.
s3_rgw_pid() { cat "$S3_RGW_DIR/run/rgw.a.pid"; }
s3_rgw_kill() {
	local p
	p=$(s3_rgw_pid)
	[ -d "/proc/$p" ] || fail "radosgw (pid $p) is not running"
	kill -KILL "$p"
	for _ in $(seq 1 100); do [ -d "/proc/$p" ] || break; sleep 0.05; done
	[ -d "/proc/$p" ] && fail "radosgw $p survived SIGKILL"
	return 0
}
# the same command ceph-rgw.sh runs; its pid file is updated so ceph-rgw.sh stop finds it
s3_rgw_restart() {
	local code
	# in a subshell, so this shell does not report the daemon's later SIGKILL as a job
	(
		setsid radosgw -c "$S3_RGW_DIR/ceph.conf" -n client.rgw.a -f </dev/null >>"$S3_RGW_DIR/log/rgw.a.out" 2>&1 &
		echo $! >"$S3_RGW_DIR/run/rgw.a.pid"
	)
	for _ in $(seq 1 240); do
		code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$S3_ENDPOINT/" || true)
		[ "$code" = 200 ] && return 0
		sleep 0.25
	done
	fail "radosgw did not answer within 60 s of its restart"
}

# Debian's awscli (a pyenv or pip "aws" earlier in PATH may be another major version)
AWSCLI=/usr/bin/aws
[ -x "$AWSCLI" ] || AWSCLI=$(command -v aws || echo aws)

# awsc ARGS...: awscli against $S3_ENDPOINT.
awsc() {
	"$AWSCLI" --endpoint-url "$S3_ENDPOINT" "$@"
}

# s3_mb BUCKET: create a bucket with awscli.
s3_mb() {
	awsc s3api create-bucket --bucket "$1" >/dev/null 2>"$T/log/mb.log" ||
		{ cat "$T/log/mb.log" >&2; fail "creating bucket $1"; }
}

# s3_pending_uploads BUCKET: number of multipart uploads still pending.
s3_pending_uploads() {
	awsc s3api list-multipart-uploads --bucket "$1" --output json 2>/dev/null |
		"$PY" -c 'import json,sys; d=sys.stdin.read().strip(); print(len(json.loads(d).get("Uploads") or []) if d else 0)'
}

# elapsed_since START_NS: milliseconds since a `date +%s%N` value
elapsed_ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
