#!/usr/bin/env bash
# in-chroot.sh ROOT DIR USER CMD...: runs CMD in the chroot ROOT as USER (root or postgres) with
# /proc, /dev, a private /tmp and /dev/shm, and the host directory DIR (under /tmp) at the same
# path inside. Meant to run as the first process of a private mount namespace
# (`unshare --mount --propagation private -- in-chroot.sh ...`, see lib.sh's pgv_exec): the
# mounts belong to that namespace and vanish with its last process (for a server: when it
# stops), so none can outlive the test, even after SIGKILL.
set -euo pipefail
root=$1 dir=$2 user=$3
shift 3
case $dir in /tmp/?*) ;; *) echo "in-chroot.sh: $dir must be under /tmp" >&2; exit 2 ;; esac
[ "$(readlink /proc/self/ns/mnt)" != "$(readlink /proc/1/ns/mnt)" ] ||
	{ echo "in-chroot.sh: run me under unshare --mount" >&2; exit 2; }
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t tmpfs -o mode=1777,size=1g tmpfs "$root/dev/shm"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mkdir -p "$root$dir"
mount --bind "$dir" "$root$dir"
# The host's CA locations mean nothing inside unless the chroot has them too: walc refuses an
# SSL_CERT_FILE it cannot read, and the minimal chroots have no CA bundle.
for v in SSL_CERT_FILE SSL_CERT_DIR; do
	[ -z "${!v:-}" ] || [ -e "$root${!v}" ] || unset "$v"
done
case $user in
root) spec=0:0 ;;
postgres) spec=$(id -u postgres):$(id -g postgres) ;;
*) echo "in-chroot.sh: unknown user $user" >&2; exit 2 ;;
esac
exec chroot --userspec="$spec" --groups="${spec#*:}" "$root" "$@"
