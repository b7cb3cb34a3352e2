# shellcheck shell=bash
# make bench on PostgreSQL 18 with today's peers (issue 49; sourced by run.sh): BENCH_PG=18 runs
# every cluster of the bench from the sid-bench chroot of deploy/pgchroot.sh (PostgreSQL 18,
# pgBackRest 2.60, barman-cli-cloud 3.20), through test/versions/lib.sh, whose as_pg then runs
# PostgreSQL's programs there. Every timed tool runs inside that chroot too, walc-static and
# WAL-G copied into $T/bin, each behind the same unshare + chroot wrapper (PGRUN): the same
# files and page cache for all, the wrapper's 20-30 ms a call (here) paid by every tool alike.
# BENCH_PG=15 (the default) is the host's PostgreSQL and bookworm's pgBackRest 2.45: the
# history rows.
#
#   BENCH_PG=15              15 (the host's) or 18 (the sid-bench chroot)
#   BENCH_PGBR_VERSION=2.60.0      the pgBackRest version BENCH_PG=18 requires
#   BENCH_BARMAN_VERSION=3.20.1    the barman-cli-cloud version BENCH_PG=18 requires

BENCH_PG=${BENCH_PG:-15}
PGMAJOR=15
PEER_ROOT="" # the chroot of BENCH_PG=18; empty: the host
BARMAN_ITEMS=() # (barman) when Barman Cloud is there to measure
PGBR_SETTINGS="process-max=$CORES" # pgBackRest's settings, as its rows name them

# bench_pg_setup: with BENCH_PG=18 the chroot (built when missing), the tools copied where it sees
# them, PGRUN wrapping every timed command, pgBackRest's current recommended repository options
bench_pg_setup() {
	case $BENCH_PG in
	15) return 0 ;;
	18) ;;
	*) fail "BENCH_PG: 15 (the host's PostgreSQL) or 18 (the sid-bench chroot), got $BENCH_PG" ;;
	esac
	log "bench: PostgreSQL 18 from the sid-bench chroot (deploy/pgchroot.sh sid-bench; built when missing)"
	local s
	for s in stores archive files; do
		section "$s" || continue
		log "skipped: $s, measured on the host's PostgreSQL only (BENCH_PG=15)"
		SECTIONS=${SECTIONS/ $s / }
	done
	PEER_ROOT=$("$ROOT/deploy/pgchroot.sh" sid-bench 2>"$T/log/pgchroot.log") ||
		{ tail -n 20 "$T/log/pgchroot.log" >&2; fail "no sid-bench chroot"; }
	# shellcheck source=test/versions/lib.sh
	. "$ROOT/test/versions/lib.sh"
	pgv_use 18 "$PEER_ROOT"
	PGMAJOR=18
	cp "$WALC" "$T/bin/walc"
	# shellcheck disable=SC2034 # lib.sh's, and run.sh's PGRUN below
	WALC_PG=$T/bin/walc
	if [ -x "$WALG" ]; then
		cp "$WALG" "$T/bin/wal-g"
		WALG=$T/bin/wal-g
	fi
	# shellcheck disable=SC2034 # run.sh's, read by timed's callers
	PGRUN=(unshare --mount --propagation private -- "$PGV_DIR/in-chroot.sh" "$PEER_ROOT" "$T" postgres env HOME="$T/home")
	pg_own "$T/bin"
	peer_version_check "pgBackRest" "${BENCH_PGBR_VERSION:-2.60.0}" pgbackrest version
	peer_version_check "Barman Cloud" "${BENCH_BARMAN_VERSION:-3.20.1}" barman-cloud-backup --version
	BARMAN_ITEMS=(barman)
	# pgBackRest 2.60's recommended repository: small files bundled, and block incremental for
	# diff and incr backups (its fulls then carry the block maps the incrementals start from)
	printf '%s\n' repo1-bundle=y repo1-block=y >>"$PGBR_CONF"
	PGBR_SETTINGS="$PGBR_SETTINGS, repo-bundle, repo-block"
}

# peer_version_check NAME VERSION CMD...: CMD (in the chroot) prints VERSION, or the bench stops
peer_version_check() {
	local name=$1 want=$2 got
	shift 2
	got=$(as_pg "$@" 2>&1 | head -n 1) || fail "$name: $* failed: $got"
	case " $got " in *" $want "*) log "bench: $got" ;; *) fail "$name: expected $want, $* printed: $got" ;; esac
}

# peer_versions: the JSON members naming PostgreSQL's major and each peer's version
peer_versions() {
	local barman=""
	[ ${#BARMAN_ITEMS[@]} = 0 ] || barman=$(as_pg barman-cloud-backup --version 2>&1 | head -n 1)
	printf '"postgres_major":%s,"pgbackrest":"%s","barman":"%s","postgres":"%s"' "$PGMAJOR" \
		"$(as_pg pgbackrest version)" "$barman" "$(as_pg "$PGBIN/postgres" --version)"
}
