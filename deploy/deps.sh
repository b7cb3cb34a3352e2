#!/usr/bin/env bash
# Installs every Debian package walc's build, tests and demo need. Idempotent and quick when
# everything is present: apt runs only for what is missing.
set -euo pipefail

pkgs=(
	build-essential pkg-config clang libclang-rt-14-dev
	libzstd-dev liblz4-dev libbrotli-dev liblzma-dev libsodium-dev librnp-dev
	libcurl4-openssl-dev libssl-dev libpq-dev libjansson-dev libexpat1-dev libcmocka-dev
	postgresql-15 postgresql-client-15 postgresql-contrib postgresql-server-dev-15
	python3-prometheus-client
	zstd lz4 brotli xz-utils python3 shellcheck curl libxxhash-dev
	awscli python3-botocore
	radosgw ceph-mon ceph-osd ceph-common
)

# Node.js may come from elsewhere on the machine (its npm conflicts with Debian's): only
# install Debian's when there is none at all.
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	$sudo apt-get update -q
	# The package's own cluster is not wanted: tests make their own on private ports.
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
