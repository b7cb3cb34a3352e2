#!/usr/bin/env bash
# s3rver (npm, 3.7.1) on 127.0.0.1: a light S3 server for walc's tests, the one with HTTPS.
#
#   test/servers/s3rver.sh install                 the npm package, into test/servers/node_modules
#                                                  (pinned by package-lock.json; deploy/deps.sh
#                                                  runs this)
#   test/servers/s3rver.sh start DIR PORT [https]  a server for DIR on PORT, bucket "test",
#                                                  credentials S3RVER / S3RVER; prints the endpoint
#   test/servers/s3rver.sh stop DIR                stops the server started for DIR
#   test/servers/s3rver.sh status DIR              exits 0 when it runs, 3 when not
#
# DIR holds everything: data/, log, pid, and with https a self-signed certificate for 127.0.0.1
# and localhost (cert.pem, which clients are given, and key.pem). The server runs as the caller,
# in its process group, so a test killed by its timeout takes it along.
# What s3rver does not do (tests must not rely on it): it checks the access key but no
# signature, has no AbortMultipartUpload, ListParts or ListMultipartUploads, stores aws-chunked
# bodies as sent, answers suffix ranges (bytes=-N) wrongly and ignores If-None-Match.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=$HERE/node_modules/.bin/s3rver
STAMP=$HERE/node_modules/.walc-lock-sha256

say() { echo "s3rver: $*" >&2; }
die() { say "$*"; exit 1; }

usage() {
	echo "usage: s3rver.sh install | start DIR PORT [http|https] | stop DIR | status DIR" >&2
	exit 2
}

installed() {
	[ -x "$BIN" ] && [ -f "$STAMP" ] &&
		[ "$(cat "$STAMP")" = "$(sha256sum <"$HERE/package-lock.json" | cut -d' ' -f1)" ]
}

# install: npm ci from package-lock.json, once per change of the lock file. Tests may start
# servers side by side: one install at a time (flock on package.json).
cmd_install() {
	installed && return 0
	if ! command -v npm >/dev/null 2>&1; then
		say "npm not found: installing the test packages (deploy/deps.sh test)"
		"$ROOT/deploy/deps.sh" test >&2 || die "deploy/deps.sh test failed"
	fi
	local sum
	sum=$(sha256sum <"$HERE/package-lock.json" | cut -d' ' -f1)
	(
		flock 9
		installed && exit 0
		say "npm ci in $HERE"
		cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >&2 && echo "$sum" >"$STAMP"
	) 9<"$HERE/package.json" || die "npm ci in $HERE failed"
	installed || die "npm ci did not install $BIN"
}

# server_pid DIR: the PID of the server started for DIR, when it still runs: the pid file's
# process must be serving DIR/data.
server_pid() {
	local pid arg argv=() state
	read -r pid 2>/dev/null <"$1/pid" || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	mapfile -d '' argv 2>/dev/null <"/proc/$pid/cmdline" || return 1
	read -r state 2>/dev/null <"/proc/$pid/stat" || return 1
	state=${state##*) }
	[ "${state%% *}" != Z ] || return 1
	for arg in "${argv[@]}"; do
		if [ "$arg" = "$1/data" ]; then
			echo "$pid"
			return 0
		fi
	done
	return 1
}

cmd_stop() {
	local dir=$1 pid i
	if pid=$(server_pid "$dir"); then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			server_pid "$dir" >/dev/null || break
			sleep 0.1
		done
		if server_pid "$dir" >/dev/null; then
			say "pid $pid did not stop in 5 s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		say "stopped pid $pid"
	fi
	rm -f "$dir/pid"
}

cmd_start() {
	local dir=$1 port=$2 mode=${3:-http} scheme=http tls=() i pid
	if ! [[ $port =~ ^[0-9]{4,5}$ ]] || [ "$port" -lt 1024 ] || [ "$port" -gt 65535 ]; then
		die "PORT: expected a number from 1024 to 65535, got \"$port\""
	fi
	case $mode in
	http) ;;
	https) scheme=https ;;
	*) die "expected http or https, got \"$mode\"" ;;
	esac
	cmd_install
	cmd_stop "$dir" 2>/dev/null
	mkdir -p "$dir/data"
	if [ "$mode" = https ]; then
		if [ ! -s "$dir/cert.pem" ]; then
			openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=127.0.0.1 \
				-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
				-keyout "$dir/key.pem" -out "$dir/cert.pem" >"$dir/openssl.log" 2>&1 ||
				die "openssl req failed: $(cat "$dir/openssl.log")"
		fi
		tls=(--key "$dir/key.pem" --cert "$dir/cert.pem")
	fi
	# s3rver encrypts ListObjectsV2 continuation tokens with DES, which Node's OpenSSL 3 offers
	# only in its legacy provider: without it every truncated listing fails.
	NODE_OPTIONS=--openssl-legacy-provider "$BIN" -d "$dir/data" -a 127.0.0.1 -p "$port" \
		--silent --no-vhost-buckets --configure-bucket test "${tls[@]}" \
		</dev/null >"$dir/log" 2>&1 &
	echo $! >"$dir/pid"
	for ((i = 0; i < 200; i++)); do
		if curl -sk -o /dev/null -m 2 "$scheme://127.0.0.1:$port/"; then
			echo "S3_ENDPOINT=$scheme://127.0.0.1:$port bucket=test AWS_ACCESS_KEY_ID=S3RVER" \
				"AWS_SECRET_ACCESS_KEY=S3RVER${tls:+ S3_CA_CERT_FILE=$dir/cert.pem}"
			return 0
		fi
		pid=$(server_pid "$dir") || break
		sleep 0.1
	done
	cmd_stop "$dir" 2>/dev/null
	die "no answer on $scheme://127.0.0.1:$port; last lines of $dir/log: $(tail -n 5 "$dir/log" | tr '\n' ' ')"
}

main() {
	local cmd=${1:-} dir=${2:-}
	case $cmd:$# in
	install:1) cmd_install; return ;;
	start:3 | start:4 | stop:2 | status:2) ;;
	*) usage ;;
	esac
	if [ ! -d "$dir" ]; then
		case $cmd in
		start) mkdir -p "$dir" ;;
		stop) return 0 ;;
		status) say "no server for $dir"; return 3 ;;
		esac
	fi
	dir=$(cd "$dir" && pwd -P) # the server is identified by its absolute data directory
	case $cmd in
	start) cmd_start "$dir" "$3" "${4:-http}" ;;
	stop) cmd_stop "$dir" ;;
	status) if pid=$(server_pid "$dir"); then echo "running, pid $pid"; else say "not running"; return 3; fi ;;
	esac
}

main "$@"
