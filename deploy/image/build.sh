#!/usr/bin/env bash
# Builds walc's container images with buildah, without any registry (none is reachable here):
#
#   deploy/image/build.sh [walc]   the Dockerfile at the repository root -> localhost/walc:VERSION
#                                  (make image), then checks it (image.sh check)
#   deploy/image/build.sh base     only the Debian bookworm base: prints its name
#   deploy/image/build.sh postgres PostgreSQL 15 from Debian's packages (deploy/image/postgres/),
#                                  then deploy/postgres-walc/Dockerfile on it: prints its name
#   deploy/image/build.sh check    the checks of localhost/walc:VERSION alone
#
# The base is what the official debian:bookworm-slim is, made here: `debootstrap --variant=minbase
# bookworm`, then `podman import` as localhost/walc-bookworm:minbase. The rootfs tarball is
# cached in $WALC_IMAGE_CACHE (default /var/cache/walc-image) and remade when older than
# WALC_BASE_MAX_AGE days (default 30; the builders run apt-get update anyway).
# Builds use buildah's layer cache (--layers): the toolchain layers are reused until
# deploy/static or deploy/apt.sh change, and the walc builder shares the host's static library
# cache (/var/cache/walc-static, deploy/static/README.md) through a volume, so an image build
# after `make static` compiles walc only.
# The newest builder stages stay tagged (localhost/walc-builder:cache, localhost/postgres-walc-
# module:cache); untagged images of earlier builds are pruned after each build.
# podman and buildah read deploy/image/containers.conf (runc, ulimits): see the comments there.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$HERE/lib.sh"

CACHE=${WALC_IMAGE_CACHE:-/var/cache/walc-image}
STATIC_CACHE=${WALC_STATIC_CACHE:-/var/cache/walc-static}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
MAX_AGE=${WALC_BASE_MAX_AGE:-30}

# The rootfs, configured as the official slim image is: deb822 sources with the updates and
# security suites, no documentation or locales installed by later packages.
make_rootfs() {
	local dir=$1
	msg "debootstrap --variant=minbase bookworm ($MIRROR)"
	debootstrap --variant=minbase bookworm "$dir" "$MIRROR" >"$dir.log" 2>&1 ||
		{ tail -n 20 "$dir.log" >&2; die "debootstrap failed"; }
	rm -f "$dir/etc/apt/sources.list"
	cat >"$dir/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${MIRROR%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	cat >"$dir/etc/dpkg/dpkg.cfg.d/walc-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
	rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/tmp/* "$dir.log"
}

cmd_base() {
	local tarball=$CACHE/bookworm-minbase.tar work
	mkdir -p "$CACHE"
	exec 8>"$CACHE/.lock"
	flock 8
	if [ -n "$(find "$tarball" -mtime "-$MAX_AGE" 2>/dev/null)" ]; then
		podman image exists "$BASE_IMAGE" && { flock -u 8; return 0; }
	else
		work=$(mktemp -d "$CACHE/rootfs.XXXXXX")
		make_rootfs "$work/rootfs"
		tar --numeric-owner -C "$work/rootfs" -cf "$tarball.tmp" .
		mv -f "$tarball.tmp" "$tarball"
		rm -rf "$work"
	fi
	msg "podman import $tarball -> $BASE_IMAGE"
	podman import -q \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["bash"]' "$tarball" "$BASE_IMAGE" >/dev/null
	flock -u 8
}

# bud ARGS...: buildah bud with the settings every build here needs. The label marks every
# image these builds make, intermediate ones included, for prune_old.
BUILD_LABEL=io.github.walc.built-by=deploy/image/build.sh
bud() {
	buildah bud --layers --network host --format oci --quiet --label "$BUILD_LABEL" "$@" >/dev/null
}
# bud_cached CACHE_TAG TARGET TAG ARGS...: builds stage TARGET tagged CACHE_TAG, then the whole
# file from the same layers, tagged TAG. The tag keeps the newest builder chain (and so the toolchain layers under
# it) out of prune_old; an older chain, left untagged by a new commit's sources, goes.
bud_cached() {
	local cache=$1 target=$2 tag=$3
	shift 3
	bud --target "$target" -t "$cache" "$@" && bud -t "$tag" "$@"
}
# Untagged images of earlier builds, which nothing needs now: each commit's sources and build
# would otherwise stay behind (about 30 MB each). Only images carrying BUILD_LABEL.
prune_old() {
	podman image prune -f --filter "label=$BUILD_LABEL" >/dev/null
}

cmd_walc() {
	local start=$SECONDS
	cmd_base
	mkdir -p "$STATIC_CACHE"
	msg "buildah bud Dockerfile -> $WALC_IMAGE"
	bud_cached localhost/walc-builder:cache builder "$WALC_IMAGE" \
		--build-arg "BUILDER_BASE=$BASE_IMAGE" -v "$STATIC_CACHE:/var/cache/walc-static" \
		-f "$ROOT/Dockerfile" "$ROOT"
	prune_old
	msg "built $WALC_IMAGE in $((SECONDS - start))s"
}

cmd_postgres() {
	cmd_base
	msg "buildah bud deploy/image/postgres -> $PG_DEBIAN_IMAGE"
	bud --build-arg "BASE=$BASE_IMAGE" -t "$PG_DEBIAN_IMAGE" "$HERE/postgres"
	msg "buildah bud deploy/postgres-walc/Dockerfile -> $PG_WALC_IMAGE"
	bud_cached localhost/postgres-walc-module:cache module "$PG_WALC_IMAGE" \
		--build-arg "POSTGRES_IMAGE=$PG_DEBIAN_IMAGE" \
		-f "$ROOT/deploy/postgres-walc/Dockerfile" "$ROOT"
	prune_old
	echo "$PG_WALC_IMAGE"
}

main() {
	as_root_or_die
	ensure_podman
	case ${1:-walc} in
	base) cmd_base && echo "$BASE_IMAGE" ;;
	walc) cmd_walc && "$HERE/check.sh" ;;
	check) "$HERE/check.sh" ;;
	postgres) cmd_postgres ;;
	*) die "usage: $0 [walc|base|postgres|check]" ;;
	esac
}

main "$@"
