#!/usr/bin/env bash
# s3rver (npm, 3.7.1) on 127.0.0.1: a light S3 server for walc's tests, the one with HTTPS.
#
#   test/servers/s3rver.sh install                 the npm packages, into test/servers/node_modules
#                                                  (npm-install.sh; deploy/deps.sh runs it)
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
BIN=$HERE/node_modules/.bin/s3rver

say() { echo "s3rver: $*" >&2; }
die() { say "$*"; exit 1; }

usage() {
	echo "usage: s3rver.sh install | start DIR PORT [http|https] | stop DIR | status DIR" >&2
	exit 2
}

# install: test/servers/npm-install.sh (npm ci from package-lock.json, once per change).
cmd_install() {
	"$HERE/npm-install.sh" || die "installing the npm test servers failed"
	[ -x "$BIN" ] || die "npm ci did not install $BIN"
}

# shellcheck source-path=SCRIPTDIR source=serverlib.sh
. "$HERE/serverlib.sh"

cmd_stop() { server_stop "$1"; }

cmd_start() {
	local dir=$1 port=$2 mode=${3:-http} scheme=http tls=() i child
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
	child=$!
	echo "$child" >"$dir/pid"
	for ((i = 0; i < 200; i++)); do
		if curl -sk -o /dev/null -m 2 "$scheme://127.0.0.1:$port/"; then
			echo "S3_ENDPOINT=$scheme://127.0.0.1:$port bucket=test AWS_ACCESS_KEY_ID=S3RVER" \
				"AWS_SECRET_ACCESS_KEY=S3RVER${tls:+ S3_CA_CERT_FILE=$dir/cert.pem}"
			return 0
		fi
		pid_running "$child" || break
		sleep 0.1
	done
	server_abandon "$child" "$dir" 2>/dev/null
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
