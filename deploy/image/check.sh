#!/usr/bin/env bash
# Checks the image make image built (localhost/walc:VERSION): it runs walc --version and
# walc help, runs as 65532:65532 (non-root), is FROM scratch (one layer holding exactly the
# files the Dockerfile names), carries a CA bundle and a static walc; prints its size.
# Last line: "image: N passed, N failed".
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

CHECK_LOGS=$(mktemp -d)
trap 'rm -rf "$CHECK_LOGS"' EXIT
# shellcheck source-path=SCRIPTDIR source=../../test/checks.sh
. "$HERE/../../test/checks.sh"
run() { podman run --rm --network none "$@"; }

version() {
	local out
	out=$(run "$WALC_IMAGE" --version) || return 1
	echo "$out"
	grep -qF "$WALC_VERSION" <<<"$out"
}
help() {
	local out
	out=$(run "$WALC_IMAGE" help) || return 1
	echo "$out"
	grep -q 'backup-push' <<<"$out" && grep -q 'wal-fetch' <<<"$out"
}
user() {
	local cfg uid
	cfg=$(podman image inspect --format '{{.Config.User}}' "$WALC_IMAGE") || return 1
	uid=$(run --entrypoint /usr/local/bin/busybox "$WALC_IMAGE" id -u) || return 1
	echo "Config.User=$cfg id -u=$uid"
	[ "$cfg" = 65532:65532 ] && [ "$uid" = 65532 ]
}
# The whole file tree, from an exported container: scratch plus what the Dockerfile copies.
files() {
	local ctr list want layers
	layers=$(podman image inspect --format '{{len .RootFS.Layers}}' "$WALC_IMAGE") || return 1
	[ "$layers" = 1 ] || { echo "$layers layers: not FROM scratch with one COPY"; return 1; }
	ctr=$(podman create "$WALC_IMAGE") || return 1
	list=$(podman export "$ctr" | tar -t | sed 's|^\./||; s|/$||' | grep -v '^\.\?$' | LC_ALL=C sort)
	podman rm -f "$ctr" >/dev/null
	want=$(printf '%s\n' etc etc/group etc/passwd etc/ssl etc/ssl/certs \
		etc/ssl/certs/ca-certificates.crt tmp usr usr/local usr/local/bin usr/local/bin/busybox \
		usr/local/bin/walc | LC_ALL=C sort)
	diff <(echo "$want") <(echo "$list")
}
ca_bundle() {
	local n
	n=$(run --entrypoint /usr/local/bin/busybox "$WALC_IMAGE" grep -c 'BEGIN CERTIFICATE' \
		/etc/ssl/certs/ca-certificates.crt) || return 1
	echo "$n certificates"
	[ "$n" -gt 50 ]
}
# A static binary has no program interpreter: it runs in scratch; also checked by the ELF header.
static() {
	local ctr tmp rc=0
	tmp=$(mktemp -d) && ctr=$(podman create "$WALC_IMAGE") || return 1
	podman cp "$ctr:/usr/local/bin/walc" "$tmp/walc" && podman rm -f "$ctr" >/dev/null || rc=1
	[ "$rc" = 0 ] && { readelf -l "$tmp/walc" | grep -q 'Requesting program interpreter' && rc=1; }
	rm -rf "$tmp"
	return "$rc"
}

check "walc --version in $WALC_IMAGE names $WALC_VERSION" version
check "walc help in the image" help
check "the image runs as 65532:65532" user
check "FROM scratch: one layer, exactly walc, busybox, the CA bundle, passwd, group, /tmp" files
check "the CA bundle is there" ca_bundle
check "walc in the image is static (no program interpreter)" static
size=$(podman image inspect --format '{{.Size}}' "$WALC_IMAGE")
echo "image: $WALC_IMAGE is $size bytes ($(((size + 524288) / 1048576)) MiB)"
echo "image: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
