#!/usr/bin/env bash
# leftovers.sh: prints every process a version test left behind, and exits 1 when there is one:
# those whose root directory is inside a walc-pg chroot (a server, a walc daemon, a psql, and
# with it the mount namespace holding its bind mounts), and those naming a /tmp/walc-pgv*
# directory (the host's PostgreSQL 15 servers, the runner's Ceph RGW). Mounts made by the tests live in such
# processes' private namespaces, so none can be left without a process.
CACHE=${WALC_PG_CACHE:-/var/cache/walc-pg}
found=0
for p in /proc/[0-9]*; do
	r=$(readlink "$p/root" 2>/dev/null) || continue
	case $r in
	"$CACHE"/*)
		echo "left behind: pid ${p#/proc/} in $r: $(tr '\0' ' ' 2>/dev/null <"$p/cmdline" | cut -c1-100)"
		found=1
		;;
	esac
done
# the host's servers and walc processes of a version test (PostgreSQL 15 runs outside a chroot)
for p in /proc/[0-9]*; do
	[ "${p#/proc/}" != $$ ] || continue
	args=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
	case $args in
	*/tmp/walc-pgv*)
		echo "left behind: pid ${p#/proc/}: $(printf '%s' "$args" | cut -c1-100)"
		found=1
		;;
	esac
done
if grep -qs "$CACHE" /proc/self/mountinfo; then
	grep "$CACHE" /proc/self/mountinfo | sed 's/^/mounted here: /'
	found=1
fi
exit "$found"
