#!/usr/bin/env bash
# Installs the test servers from npm (s3rver, Azurite, the Firebase CLI's Cloud Storage
# emulator) into test/servers/node_modules with `npm ci`, pinned by package-lock.json, once per
# change of the lock file. Tests may start servers side by side: one install at a time (flock
# on package.json). deploy/deps.sh runs this; the server scripts call it before a start.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
STAMP=$HERE/node_modules/.walc-lock-sha256

say() { echo "npm-install: $*" >&2; }

installed() {
	[ -x "$HERE/node_modules/.bin/s3rver" ] && [ -x "$HERE/node_modules/.bin/azurite-blob" ] &&
		[ -f "$HERE/node_modules/firebase-tools/package.json" ] && [ -f "$STAMP" ] &&
		[ "$(cat "$STAMP")" = "$(sha256sum <"$HERE/package-lock.json" | cut -d' ' -f1)" ]
}

installed && exit 0
if ! command -v npm >/dev/null 2>&1; then
	say "npm not found: installing the test packages (deploy/deps.sh test)"
	"$ROOT/deploy/deps.sh" test >&2 || { say "deploy/deps.sh test failed"; exit 1; }
fi
sum=$(sha256sum <"$HERE/package-lock.json" | cut -d' ' -f1)
(
	flock 9
	installed && exit 0
	say "npm ci in $HERE (a few minutes the first time)"
	cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >&2 && echo "$sum" >"$STAMP"
) 9<"$HERE/package.json" || { say "npm ci in $HERE failed"; exit 1; }
installed || { say "npm ci did not install the servers"; exit 1; }
