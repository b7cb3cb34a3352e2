# shellcheck shell=bash
# Debian package installation for walc's scripts (sourced by deploy/deps.sh,
# deploy/static/build.sh, deploy/pgchroot.sh and test/deploy/check.sh):
#
#   apt_install PACKAGE...  installs those not installed yet (apt-get update first)
#   apt_get ARGS...         apt-get ARGS, as root or through sudo, non-interactive
#
# Another apt or dpkg run (a parallel test suite, unattended-upgrades, a person) holds a lock
# while it works; apt-get then fails at once, and its DPkg::Lock::Timeout covers only dpkg's
# lock, not `apt-get update`'s. So apt_get says that it waits, and tries again until
# APT_LOCK_WAIT seconds (default 600) have passed.

APT_LOCK_WAIT=${APT_LOCK_WAIT:-600}

# apt_missing PACKAGE...: prints those that are not installed, one a line.
apt_missing() {
	local p
	for p in "$@"; do
		[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || echo "$p"
	done
}

apt_get() {
	local deadline=$((SECONDS + APT_LOCK_WAIT)) err rc waited=0 sudo=()
	[ "$(id -u)" = 0 ] || sudo=(sudo)
	err=$(mktemp)
	while :; do
		rc=0
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
			apt-get -o "DPkg::Lock::Timeout=$((deadline > SECONDS ? deadline - SECONDS : 0))" "$@" \
			2>"$err" || rc=$?
		if [ "$rc" = 0 ] || [ "$SECONDS" -ge "$deadline" ] ||
			! grep -Eq 'Could not get lock|Unable to (lock|acquire)' "$err"; then
			break
		fi
		if [ "$waited" = 0 ]; then
			echo "apt: another process holds the lock ($(grep -m1 -o 'held by process .*' "$err" ||
				echo "see below")); waiting up to ${APT_LOCK_WAIT}s" >&2
			waited=1
		fi
		sleep 5
	done
	cat "$err" >&2
	rm -f "$err"
	[ "$waited" = 0 ] || [ "$rc" != 0 ] || echo "apt: got the lock after waiting" >&2
	return "$rc"
}

apt_install() {
	local missing=()
	mapfile -t missing < <(apt_missing "$@")
	[ ${#missing[@]} -gt 0 ] || return 0
	echo "apt: installing ${missing[*]}" >&2
	apt_get update -q
	apt_get install -y -q --no-install-recommends "${missing[@]}"
}
