# shellcheck shell=bash
# PostgreSQL of any major for walc's tests: the host's, or one in a chroot made by
# deploy/pgchroot.sh. Sourced after test/integration/lib.sh, whose helpers (pg_init, pg_start,
# pg_stop, psqlc, dump_norm, amcheck_all, wrun_pg, ...) then run the chroot's programs: they all
# go through as_pg, which is replaced here.
#
#   pgv_use MAJOR [ROOT]   PostgreSQL MAJOR, in the chroot ROOT (empty: the host's)
#   pgv_setup NAME         it_setup, plus the walc under test copied into $T/bin (visible inside)
#   pgv_exec USER CMD...   CMD as root or postgres, inside the chroot when there is one
#   pgv_module_install     build cmd/walc_archive with that major's PGXS and install it
#   pgv_stop_all           stop every server whose data directory is under $T
#
# Inside a chroot every command runs in a private mount namespace of its own (in-chroot.sh):
# $T is bind-mounted at the same path, so paths are the same on both sides, and the mounts go
# away with the namespace's last process. A server keeps its namespace until it stops, which
# is why each test stops its servers on exit (it_cleanup, pgv_stop_all).

PGV_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PGV_MAJOR=15
PGV_ROOT=""

pgv_use() {
	PGV_MAJOR=$1
	PGV_ROOT=${2:-}
	PGBIN=/usr/lib/postgresql/$PGV_MAJOR/bin
}

pgv_exec() {
	local user=$1
	shift
	if [ -n "$PGV_ROOT" ]; then
		unshare --mount --propagation private -- "$PGV_DIR/in-chroot.sh" "$PGV_ROOT" "$T" "$user" "$@"
	elif [ "$user" = root ] || [ "$(id -u)" != 0 ]; then
		"$@"
	else
		runuser -u postgres -- "$@"
	fi
}

# Replaces lib.sh's: every PostgreSQL program, and walc as postgres, runs where that major is.
as_pg() { pgv_exec postgres env HOME="$T/home" "$@"; }

pgv_setup() {
	[ "$(id -u)" = 0 ] || fail "the version tests run as root (chroot, mounts, runuser)"
	# it_setup checks for initdb where the host sees it
	PGBIN=$PGV_ROOT$PGBIN it_setup "$1"
	[ -x "$PGV_ROOT$PGBIN/initdb" ] || fail "no PostgreSQL $PGV_MAJOR in ${PGV_ROOT:-the host} ($PGBIN)"
	# The chroot sees $T only: archive_command, restore_command and backup-push use this copy,
	# and so does the host side, so both run the same binary.
	cp "$WALC" "$T/bin/walc"
	WALC=$T/bin/walc
	# shellcheck disable=SC2034 # lib.sh's, used by wrun_pg and walc_wrapper
	WALC_PG=$T/bin/walc
	pg_own "$T"
}

# pgv_module_install LOG: cmd/walc_archive built in $T/module with this major's pg_config,
# installed into its libdir (the chroot's, or the host's). One install at a time per tree.
pgv_module_install() {
	local log=$1 lock
	rm -rf "$T/module"
	# Sources only: the tree may hold objects built for another major (make archive-module).
	mkdir -p "$T/module"
	cp "$ROOT/cmd/walc_archive/Makefile" "$ROOT/cmd/walc_archive/"*.c "$T/module/"
	lock=${PGV_ROOT:-/tmp}/.walc-archive-install.lock
	{
		flock 9
		pgv_exec root env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$T/module" \
			PG_CONFIG="$PGBIN/pg_config" install
	} 9>"$lock" >"$log" 2>&1 || { tail -n 30 "$log" >&2; fail "building/installing walc_archive for PostgreSQL $PGV_MAJOR"; }
	[ -f "$PGV_ROOT$(pgv_exec root "$PGBIN/pg_config" --pkglibdir)/walc_archive.so" ] ||
		fail "walc_archive.so not installed"
}

# Every server with a postmaster.pid under $T, stopped at once (used on exit and after each
# check, so no server, and so no mount namespace, outlives the test).
pgv_stop_all() {
	local pidfile d
	[ -n "$T" ] && [ -d "$T" ] || return 0
	while read -r pidfile; do
		d=$(dirname "$pidfile")
		as_pg "$PGBIN/pg_ctl" -D "$d" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
	done < <(find "$T" -maxdepth 3 -name postmaster.pid 2>/dev/null)
	return 0
}
