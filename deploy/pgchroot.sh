#!/usr/bin/env bash
# PostgreSQL majors other than the host's, each in a Debian chroot of the release that ships it
# (debootstrap, minbase), built once and cached; used by the version matrix (test/versions/).
#
#   deploy/pgchroot.sh [build] RELEASE   make sure the chroot is there (builds it when it is not
#                                        cached or its key changed); prints its root directory
#   deploy/pgchroot.sh path RELEASE      prints the root when cached and current, else exit 1
#   deploy/pgchroot.sh key RELEASE       prints the key and the recipe it hashes
#   deploy/pgchroot.sh major RELEASE     prints the PostgreSQL major RELEASE ships
#
# RELEASE: bullseye (PostgreSQL 13), bookworm (15), trixie (17), sid (18), experimental (19: sid
# with Debian's experimental suite added, pinned for PostgreSQL's own packages only), sid-bench
# (sid's PostgreSQL 18 plus today's peers for make bench: pgBackRest and Barman Cloud; a cache
# of its own, so the version matrix's sid is not rebuilt when the peers change).
#
# Each chroot lives in ${WALC_PG_CACHE:-/var/cache/walc-pg}/RELEASE/: root/ (the tree),
# root/.walc-pg-key (its key: a hash of the recipe below: release, mirror, package list, the
# uid/gid it gives the postgres user, RECIPE_VERSION) and build.log. A changed recipe rebuilds.
# The tree is built in root.new/ and renamed into place when complete, under a lock (flock on
# RELEASE.lock), so an interrupted build is never taken for a chroot. The build runs in a mount
# namespace of its own: mounts made while it runs (debootstrap's /proc and /sys) cannot outlive it.
#
# Inside: postgresql-N (amcheck and pg_checksums are part of it); for N >= 15 also
# postgresql-server-dev-N, gcc and make, to build the walc_archive module with PGXS. The
# postgres user has the host's uid and gid, so files the host's tests chown to postgres are the
# same user's inside. No cluster is created and no service started (policy-rc.d denies it).
#
# Environment: WALC_PG_CACHE (cache root), WALC_PG_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=apt.sh
. "$HERE/apt.sh"

CACHE=${WALC_PG_CACHE:-/var/cache/walc-pg}
MIRROR=${WALC_PG_MIRROR:-http://deb.debian.org/debian}
# Bump when the way a chroot is made changes without the package list changing.
RECIPE_VERSION=1

msg() { printf '[pgchroot %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { msg "ERROR: $*"; exit 1; }

major_of() {
	case $1 in
	bullseye) echo 13 ;;
	bookworm) echo 15 ;;
	trixie) echo 17 ;;
	sid | sid-bench) echo 18 ;;
	experimental) echo 19 ;;
	*) die "unknown release '$1' (bullseye, bookworm, trixie, sid, experimental, sid-bench)" ;;
	esac
}

# The suite debootstrap makes the tree from: experimental is not a whole release, only packages
# on top of sid.
suite_of() {
	case $1 in
	experimental | sid-bench) echo sid ;;
	*) echo "$1" ;;
	esac
}

# The suite added on top of the tree's for PostgreSQL's own packages (none: empty)
added_suite_of() {
	case $1 in
	experimental) echo experimental ;;
	esac
}

packages_of() {
	local n
	n=$(major_of "$1")
	printf '%s\n' "postgresql-$n"
	[ "$n" -lt 15 ] || printf '%s\n' "postgresql-server-dev-$n" gcc make libc6-dev
	# the peers make bench measures; Barman's zstd is a recommend, and recommends are off
	[ "$1" != sid-bench ] || printf '%s\n' pgbackrest barman-cli-cloud python3-boto3 python3-zstandard
}

pg_ids() {
	local uid gid
	uid=$(id -u postgres 2>/dev/null) || die "no postgres user on the host (install postgresql first)"
	gid=$(id -g postgres)
	echo "$uid:$gid"
}

recipe() {
	echo "recipe $RECIPE_VERSION"
	echo "release $1"
	[ -z "$(added_suite_of "$1")" ] || echo "suite $(suite_of "$1"), pinned: postgresql* libpq*"
	echo "mirror $MIRROR"
	echo "postgres $(pg_ids)"
	echo "packages $(packages_of "$1" | tr '\n' ' ')"
}

key_of() { recipe "$1" | sha256sum | cut -c1-16; }

current() { # RELEASE: the cached root is complete and has the current key
	local root=$CACHE/$1/root
	[ -f "$root/.walc-pg-key" ] && [ "$(cat "$root/.walc-pg-key")" = "$(key_of "$1")" ]
}

# in_root ROOT CMD...: run CMD inside the chroot being built, with /proc and /dev mounted
# (the caller runs in a private mount namespace, so these go away with it).
in_root() {
	local root=$1
	shift
	mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
	mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
	chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@"
}

# build_tree RELEASE NEW: everything, inside the private mount namespace
build_tree() {
	local rel=$1 new=$2 n ids uid gid pkgs suite added start=$SECONDS
	n=$(major_of "$rel")
	suite=$(suite_of "$rel")
	added=$(added_suite_of "$rel")
	ids=$(pg_ids)
	uid=${ids%:*}
	gid=${ids#*:}
	mapfile -t pkgs < <(packages_of "$rel")
	msg "debootstrap --variant=minbase $suite into $new"
	debootstrap --variant=minbase "$suite" "$new" "$MIRROR" || {
		tail -n 30 "$new/debootstrap/debootstrap.log" >&2 2>/dev/null
		die "debootstrap $suite failed"
	}
	if [ -n "$added" ]; then
		# Only PostgreSQL's own packages from the added suite: the whole of it (apt-get -t) also
		# asks for its newer perl, which sid's modules cannot go with.
		echo "deb $MIRROR $added main" >"$new/etc/apt/sources.list.d/$added.list"
		printf 'Package: postgresql* libpq*\nPin: release a=%s\nPin-Priority: 990\n' "$added" \
			>"$new/etc/apt/preferences.d/walc-pg"
	fi
	msg "debootstrap done in $((SECONDS - start))s"
	# Our own configuration before any PostgreSQL package: no recommends, an expired Release
	# file is accepted (sid's here is past its date), no service starts, no cluster is made.
	cat >"$new/etc/apt/apt.conf.d/90walc-pg" <<-'EOF'
		APT::Install-Recommends "false";
		Acquire::Check-Valid-Until "false";
	EOF
	printf '#!/bin/sh\nexit 101\n' >"$new/usr/sbin/policy-rc.d"
	chmod 755 "$new/usr/sbin/policy-rc.d"
	mkdir -p "$new/etc/postgresql-common"
	echo "create_main_cluster = false" >"$new/etc/postgresql-common/createcluster.conf"
	# The postgres user with the host's ids, before postgresql-common would make its own.
	if in_root "$new" getent passwd "$uid" >/dev/null; then
		die "uid $uid (the host's postgres) is taken in the $rel chroot: $(in_root "$new" getent passwd "$uid")"
	fi
	if in_root "$new" getent group "$gid" >/dev/null; then
		die "gid $gid (the host's postgres) is taken in the $rel chroot: $(in_root "$new" getent group "$gid")"
	fi
	in_root "$new" groupadd -g "$gid" postgres
	in_root "$new" useradd -u "$uid" -g "$gid" -d /var/lib/postgresql -s /bin/bash -M postgres
	in_root "$new" mkdir -p /var/lib/postgresql
	in_root "$new" chown postgres:postgres /var/lib/postgresql
	msg "apt-get install ${pkgs[*]}"
	in_root "$new" apt-get update -q || die "apt-get update in the $rel chroot failed"
	in_root "$new" apt-get install -y -q -o Dpkg::Options::=--force-confold "${pkgs[@]}" ||
		die "apt-get install in the $rel chroot failed"
	in_root "$new" apt-get clean
	[ -x "$new/usr/lib/postgresql/$n/bin/initdb" ] || die "no initdb for PostgreSQL $n in the $rel chroot"
	[ -f "$new/usr/share/postgresql/$n/extension/amcheck.control" ] || die "no amcheck in the $rel chroot"
	[ -x "$new/usr/lib/postgresql/$n/bin/pg_checksums" ] || die "no pg_checksums in the $rel chroot"
	[ "$rel" != sid-bench ] || { [ -x "$new/usr/bin/pgbackrest" ] && [ -x "$new/usr/bin/barman-cloud-backup" ]; } ||
		die "no pgbackrest or barman-cloud-backup in the $rel chroot"
	umount "$new/dev" "$new/proc"
	key_of "$rel" >"$new/.walc-pg-key"
	msg "$rel chroot built in $((SECONDS - start))s: PostgreSQL $(chroot "$new" "/usr/lib/postgresql/$n/bin/postgres" --version)"
}

build() {
	local rel=$1 dir=$CACHE/$1 start=$SECONDS
	[ "$(id -u)" = 0 ] || die "building a chroot needs root"
	mkdir -p "$CACHE"
	exec 9>"$CACHE/$rel.lock"
	flock 9
	if current "$rel"; then
		flock -u 9
		echo "$dir/root"
		return 0
	fi
	# The version matrix builds chroots in parallel: apt_install waits for apt's lock where a
	# bare apt-get failed at once in the second builder (two of three releases lost that way).
	command -v debootstrap >/dev/null || {
		msg "installing debootstrap"
		apt_install debootstrap >/dev/null
	}
	msg "no current $rel chroot (key $(key_of "$rel")): building it (log: $dir/build.log)"
	mkdir -p "$dir"
	rm -rf "$dir/root.new"
	if ! unshare --mount --propagation private -- "$0" _build "$rel" "$dir/root.new" >"$dir/build.log" 2>&1; then
		tail -n 40 "$dir/build.log" >&2
		rm -rf "$dir/root.new"
		die "building the $rel chroot failed (log: $dir/build.log)"
	fi
	rm -rf "$dir/root.old"
	[ ! -e "$dir/root" ] || mv "$dir/root" "$dir/root.old"
	mv "$dir/root.new" "$dir/root"
	rm -rf "$dir/root.old"
	msg "$rel chroot ready in $((SECONDS - start))s: $dir/root"
	flock -u 9
	echo "$dir/root"
}

main() {
	local cmd=build
	case ${1:-} in build | path | key | major | _build) cmd=$1; shift ;; esac
	[ $# -ge 1 ] || die "usage: $0 [build|path|key|major] RELEASE"
	major_of "$1" >/dev/null
	case $cmd in
	build) build "$1" ;;
	path) current "$1" && echo "$CACHE/$1/root" ;;
	key) key_of "$1"; recipe "$1" ;;
	major) major_of "$1" ;;
	_build) build_tree "$1" "$2" ;;
	esac
}

main "$@"
