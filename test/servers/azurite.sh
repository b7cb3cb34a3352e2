#!/usr/bin/env bash
# Azurite (npm, 3.37.0), Microsoft's Azure Storage emulator, on 127.0.0.1: the blob service
# over HTTPS for walc's Azure tests.
#
#   test/servers/azurite.sh start DIR PORT [oauth]   a blob service for DIR on PORT; prints the
#                                                    settings walc needs (account
#                                                    devstoreaccount1, its well-known key,
#                                                    AZURE_ENDPOINT_SUFFIX=localhost:PORT,
#                                                    AZURE_CA_CERT_FILE); with oauth, Azurite
#                                                    also accepts Azure AD bearer tokens
#                                                    (--oauth basic: issuer, audience, expiry)
#   test/servers/azurite.sh stop DIR                 stops the server started for DIR
#
# WAL-G's only endpoint setting is AZURE_ENDPOINT_SUFFIX (https://ACCOUNT.blob.SUFFIX/), so the
# server gets a certificate of its own for devstoreaccount1.blob.localhost (libcurl resolves
# *.localhost to 127.0.0.1 itself). DIR holds data/, log, pid, cert.pem and key.pem. The server
# runs as the caller, in its process group, so a test killed by its timeout takes it along.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=$HERE/node_modules/.bin/azurite-blob
ACCOUNT=devstoreaccount1
# Azurite's well-known development key (public, in Microsoft's documentation)
KEY=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==

say() { echo "azurite: $*" >&2; }
die() { say "$*"; exit 1; }

# shellcheck source-path=SCRIPTDIR source=serverlib.sh
. "$HERE/serverlib.sh"

cmd_stop() { server_stop "$1"; }

cmd_start() {
	local dir=$1 port=$2 mode=${3:-} extra=() i child
	[[ $port =~ ^[0-9]{4,5}$ ]] || die "PORT: expected a number from 1024 to 65535, got \"$port\""
	"$HERE/npm-install.sh" || die "installing the npm test servers failed"
	cmd_stop "$dir" 2>/dev/null
	mkdir -p "$dir/data"
	if [ ! -s "$dir/cert.pem" ]; then
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$ACCOUNT.blob.localhost" \
			-addext "subjectAltName=DNS:$ACCOUNT.blob.localhost,DNS:*.blob.localhost,DNS:localhost,IP:127.0.0.1" \
			-keyout "$dir/key.pem" -out "$dir/cert.pem" >"$dir/openssl.log" 2>&1 ||
			die "openssl req failed: $(cat "$dir/openssl.log")"
	fi
	case $mode in
	"") ;;
	oauth) extra=(--oauth basic) ;;
	*) die "expected oauth or nothing, got \"$mode\"" ;;
	esac
	"$BIN" --blobHost 127.0.0.1 --blobPort "$port" --location "$dir/data" --silent --loose \
		--skipApiVersionCheck --disableTelemetry --cert "$dir/cert.pem" --key "$dir/key.pem" \
		"${extra[@]}" </dev/null >"$dir/log" 2>&1 &
	child=$!
	echo "$child" >"$dir/pid"
	for ((i = 0; i < 300; i++)); do
		if curl -s -o /dev/null -m 2 --cacert "$dir/cert.pem" "https://$ACCOUNT.blob.localhost:$port/"; then
			echo "AZURE_STORAGE_ACCOUNT=$ACCOUNT AZURE_STORAGE_ACCESS_KEY=$KEY" \
				"AZURE_ENDPOINT_SUFFIX=localhost:$port AZURE_CA_CERT_FILE=$dir/cert.pem"
			return 0
		fi
		pid_running "$child" || break
		sleep 0.1
	done
	server_abandon "$child" "$dir" 2>/dev/null
	die "no answer on https://$ACCOUNT.blob.localhost:$port; last lines of $dir/log: $(tail -n 5 "$dir/log" | tr '\n' ' ')"
}

case ${1:-}:$# in
start:3 | start:4) mkdir -p "$2"; cmd_start "$(cd "$2" && pwd -P)" "$3" "${4:-}" ;;
stop:2) [ -d "$2" ] && cmd_stop "$(cd "$2" && pwd -P)" ;;
*) echo "usage: azurite.sh start DIR PORT [oauth] | stop DIR" >&2; exit 2 ;;
esac
