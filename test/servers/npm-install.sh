#!/usr/bin/env bash
# Installs the test servers from npm (s3rver, Azurite, the Firebase CLI's Cloud Storage
# emulator) into test/servers/node_modules with `npm ci`, pinned by package-lock.json, once per
# change of the lock file. Tests may start servers side by side: one install at a time (flock
# on package.json). deploy/deps.sh runs this; the server scripts call it before a start.
#
# A completed install is also kept in $WALC_NPM_CACHE/<lock file's sha256> (default
# /var/cache/walc-npm, when writable; the newest two kept) and copied from there into a fresh
# clone: seconds instead of minutes of npm ci. It is copied, not linked, so nothing a test does
# in node_modules can reach the cache.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
STAMP=$HERE/node_modules/.walc-lock-sha256
CACHE=${WALC_NPM_CACHE:-/var/cache/walc-npm}

say() { echo "npm-install: $*" >&2; }

installed() {
	[ -x "$HERE/node_modules/.bin/s3rver" ] && [ -x "$HERE/node_modules/.bin/azurite-blob" ] &&
		[ -f "$HERE/node_modules/firebase-tools/package.json" ] && [ -f "$STAMP" ] &&
		[ "$(cat "$STAMP")" = "$(sha256sum <"$HERE/package-lock.json" | cut -d' ' -f1)" ]
}

# keep SUM: node_modules into the cache, unless it is there (a failure costs only that)
keep() {
	local tmp
	[ ! -e "$CACHE/$1" ] && mkdir -p "$CACHE" 2>/dev/null && [ -w "$CACHE" ] || return 0
	tmp=$(mktemp -d "$CACHE/.new.XXXXXX") && chmod 755 "$tmp" || return 0
	if cp -a "$HERE/node_modules" "$tmp/" && touch "$tmp/.complete" && mv -T "$tmp" "$CACHE/$1" 2>/dev/null; then
		# shellcheck disable=SC2012 # the names are hex digests
		ls -1dt "$CACHE"/*/ | tail -n +3 | xargs -r rm -rf
	else
		rm -rf "$tmp"
	fi
}

if installed; then
	keep "$(cat "$STAMP")"
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	say "npm not found: installing the test packages (deploy/deps.sh test)"
	"$ROOT/deploy/deps.sh" test >&2 || { say "deploy/deps.sh test failed"; exit 1; }
fi
sum=$(sha256sum <"$HERE/package-lock.json" | cut -d' ' -f1)
(
	flock 9
	installed && exit 0
	if [ -f "$CACHE/$sum/.complete" ]; then
		rm -rf "$HERE/node_modules"
		if cp -a "$CACHE/$sum/node_modules" "$HERE/node_modules" && echo "$sum" >"$STAMP"; then
			say "node_modules copied from $CACHE/$sum"
			exit 0
		fi
		say "copying from $CACHE/$sum failed: npm ci instead"
	fi
	say "npm ci in $HERE (a few minutes the first time)"
	cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >&2 && echo "$sum" >"$STAMP" || exit 1
	keep "$sum"
) 9<"$HERE/package.json" || { say "npm ci in $HERE failed"; exit 1; }
installed || { say "npm ci did not install the servers"; exit 1; }
