# shellcheck shell=bash
# Shared by deploy/image/*.sh and test/e2e/*.sh: image names, messages, podman's configuration.
# Image names are used by the scripts that source this.
# shellcheck disable=SC2034

WALC_VERSION=$(cat "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/VERSION")
BASE_IMAGE=localhost/walc-bookworm:minbase
WALC_IMAGE=localhost/walc:$WALC_VERSION
PG_DEBIAN_IMAGE=localhost/walc-postgres-debian:15
PG_WALC_IMAGE=localhost/postgres-walc:15
export CONTAINERS_CONF=${CONTAINERS_CONF:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/containers.conf}

msg() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { msg "ERROR: $*"; exit 1; }

# Rootful podman: these scripts install packages and use the system's container storage.
as_root_or_die() { [ "$(id -u)" = 0 ] || die "run as root (podman and buildah, rootful)"; }

# podman, buildah, runc, catatonit, debootstrap (deploy/deps.sh pod; quick when installed).
ensure_podman() {
	"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/deps.sh" pod >&2 || die "deploy/deps.sh pod failed"
}
