#!/usr/bin/env bash
# Installs what walc's build, demo and tests need, by purpose:
#
#   deploy/deps.sh demo    building ./walc and `make demo` (PostgreSQL 15, file repository)
#   deploy/deps.sh [test]  that, and everything the test suites use (`make test`, .ci/run):
#                          the unit-test and sanitizer toolchain, the codecs' command-line tools,
#                          Ceph RGW, OpenSSH's sshd, awscli, valgrind, Node.js, and from npm s3rver, Azurite and the
#                          Firebase Storage emulator (into test/servers/node_modules, see npm-install.sh)
#   deploy/deps.sh pod     `make image` and `make e2e-pod`: podman and buildah (with runc and
#                          catatonit, see deploy/image/containers.conf), debootstrap for the
#                          base image, Prometheus, promtool and the Pushgateway
#
# Idempotent and quick when everything is there: apt runs only for what is missing. Runs as
# root or with sudo. When another process holds apt's lock, waits for it (APT_LOCK_WAIT seconds,
# default 600; see deploy/apt.sh).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=apt.sh
. "$HERE/apt.sh"

# ./walc: compiler and the libraries of the Makefile's PKGS (xxhash is header-only)
build=(
	build-essential pkg-config
	libzstd-dev liblz4-dev libbrotli-dev liblzma-dev libsodium-dev librnp-dev
	libcurl4-openssl-dev libssl-dev libpq-dev libjansson-dev libexpat1-dev libxxhash-dev
	libssh2-1-dev
)
# test/demo.sh: a PostgreSQL 15 cluster (server, pgbench, pg_dumpall)
demo=(postgresql-15 postgresql-client-15)
# make test, test-faults, asan, coverage, tsan, fuzz-smoke, lint, archive-module-install; the S3 servers
# (and stunnel, TLS in front of them); sshd for SFTP storage (and nss_wrapper: a login the test
# makes up, for password authentication); ccache for .ci/run; envdir (daemontools) and dateutil
# for the operators' calls (test_compat_*)
tests=(
	clang libclang-rt-14-dev llvm libcmocka-dev
	postgresql-contrib postgresql-server-dev-15
	python3 python3-prometheus-client python3-botocore awscli
	daemontools python3-dateutil
	zstd lz4 brotli xz-utils openssl curl shellcheck valgrind cppcheck ccache
	radosgw ceph-mon ceph-osd ceph-common
	stunnel4
	openssh-server libnss-wrapper
)
# make image, make e2e-pod (test/e2e/pod.sh); curl and the PostgreSQL client on the host; Ceph
# RGW and awscli for its S3
pod=(podman buildah runc catatonit conmon debootstrap prometheus prometheus-pushgateway curl
	postgresql-client-15 radosgw ceph-mon ceph-osd ceph-common awscli)

case ${1:-test} in
demo) apt_install "${build[@]}" "${demo[@]}" ;;
test)
	# Node.js may come from elsewhere on the machine (its npm conflicts with Debian's): only
	# install Debian's when there is none at all.
	command -v npm >/dev/null 2>&1 || tests+=(nodejs npm)
	apt_install "${build[@]}" "${demo[@]}" "${tests[@]}"
	"$ROOT/test/servers/npm-install.sh"
	;;
pod) apt_install "${pod[@]}" ;;
*)
	echo "usage: deploy/deps.sh [demo|test|pod]" >&2
	exit 2
	;;
esac
