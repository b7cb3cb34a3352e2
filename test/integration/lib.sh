# shellcheck shell=bash
# Shared helpers for walc's integration tests (sourced by test_*.sh and test/demo.sh).
#
# Conventions:
#   - it_setup creates the test's own directory $T under /tmp, or in the run's directory
#     $WALC_IT_RUN under test/integration/run.sh (owned by postgres, since the
#     servers and their archive/restore commands run as postgres), its own HOME and PGDATA for
#     walc runs, and an EXIT trap that stops every server started here and removes $T
#     (KEEP=1 keeps it).
#   - PostgreSQL programs run as the postgres OS user (we are root); client sockets live in $T.
#   - walc's configuration comes from the environment only: inherited WALG_* variables are
#     dropped here so a developer's shell cannot leak into a test.
#   - Any sanitizer report in walc output fails the test (make asan reruns these tests with
#     WALC pointing at an ASan/UBSan build).

set -euo pipefail

IT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$IT_DIR/../.." && pwd)
WALC=${WALC:-$ROOT/walc}
case $WALC in /*) ;; *) WALC=$PWD/$WALC ;; esac
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || echo python3)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export LC_ALL=C
export PGUSER=postgres
unset PGHOST PGPORT PGDATABASE PGPASSWORD PGSERVICE PGOPTIONS
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(WALG_|WALE_|AWS_|GOOGLE_|AZURE_)' || true)

SANITIZER_RE='(Address|Leak|Memory|Thread|Undefined(Behavior)?)Sanitizer|runtime error:'

T=""              # the test's directory
WALC_PG=""        # walc path usable by the postgres user
PG_RUNNING=()     # data directories of servers started by pg_start
BG_PIDS=()        # background jobs to kill on exit
# set by wrun/wrun_pg: walc's exit status, stdout and stderr
W_RC=0
# shellcheck disable=SC2034 # read by the tests that source this file
W_OUT=""
W_ERR=""

# ------------------------------------------------------------------------------------------
# Messages and assertions
# ------------------------------------------------------------------------------------------

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*"; }
IT_FAILURES=0
# fail MSG: the test fails here. With IT_KEEP_GOING=1 (diagnosis) it is counted, the test goes
# on, and exits 1 at the end.
fail() {
	printf 'FAIL: %s\n' "$*" >&2
	if [ "${IT_KEEP_GOING:-0}" = 1 ]; then
		IT_FAILURES=$((IT_FAILURES + 1))
		return 0
	fi
	exit 1
}
# ok MSG: end of a group of checks: "PASS MSG", or "FAILED MSG" when a check in it failed
# (only possible with IT_KEEP_GOING=1)
IT_LAST_FAILURES=0
ok() {
	if [ "$IT_FAILURES" -eq "$IT_LAST_FAILURES" ]; then log "PASS $*"; else log "FAILED $*"; fi
	IT_LAST_FAILURES=$IT_FAILURES
}
assert_eq() { # EXPECTED ACTUAL WHAT
	[ "$1" = "$2" ] || fail "$3: expected '$1', got '$2'"
}
assert_contains() { # HAYSTACK NEEDLE WHAT
	case $1 in *"$2"*) ;; *) fail "$3: expected to contain '$2', got: $1" ;; esac
}
assert_not_contains() { # HAYSTACK NEEDLE WHAT
	case $1 in *"$2"*) fail "$3: must not contain '$2', got: $1" ;; *) ;; esac
}
assert_match() { # HAYSTACK ERE WHAT
	grep -Eq -- "$2" <<<"$1" || fail "$3: expected to match /$2/, got: $1"
}
assert_absent() { # PATH WHAT
	if [ -e "$1" ] || [ -L "$1" ]; then fail "$2: $1 must not exist"; fi
}
assert_same_file() { # EXPECTED ACTUAL WHAT
	[ -f "$2" ] || fail "$3: $2 does not exist"
	cmp -s "$1" "$2" || fail "$3: $2 differs from $1 ($(cmp "$1" "$2" 2>&1 | head -n1))"
}
assert_no_sanitizer_reports() { # FILE...
	local f
	for f in "$@"; do
		[ -f "$f" ] || continue
		if grep -Eq "$SANITIZER_RE" "$f"; then
			grep -En -B2 -A20 "$SANITIZER_RE" "$f" | sed -n 1,60p >&2
			fail "sanitizer report in $f"
		fi
	done
}
nlines() { # number of lines in a string ("" has 0)
	if [ -z "$1" ]; then echo 0; else printf '%s\n' "$1" | wc -l | tr -d ' '; fi
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
# identity of a stored object: content hash, inode and mtime (a rewrite changes one of them)
obj_id() { echo "$(sha "$1") $(stat -c '%i %y' "$1")"; }
flip_byte() { # FILE OFFSET: xor one byte with 1
	"$PY" -c 'import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 1]))' "$1" "$2"
}
count_files() { find "$1" -type f 2>/dev/null | wc -l | tr -d ' '; }
# A file wal-push and wal-fetch take as segment NAME (walc checks the long page header, not the
# records): SIZE bytes (a PostgreSQL segment size), a long page header for NAME's place, then
# SOURCE's bytes (repeated as needed; random when no SOURCE). SYSID defaults to a fixed one.
fake_segment() { "$PY" "$IT_DIR/fake_segment.py" "$@"; } # NAME SIZE OUT [SOURCE [SYSID]]

# ------------------------------------------------------------------------------------------
# Setup, cleanup, running as postgres
# ------------------------------------------------------------------------------------------

as_pg() { # run a command as the postgres OS user (directly when we already are not root)
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- env HOME="$T/home" "$@"
	else
		env HOME="$T/home" "$@"
	fi
}

it_cleanup() {
	local rc=$? d p
	set +e
	if [ "$rc" = 0 ] && [ "$IT_FAILURES" -gt 0 ]; then
		echo "$IT_FAILURES failure(s)" >&2
		rc=1
	fi
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for d in "${PG_RUNNING[@]}"; do
		[ -f "$d/postmaster.pid" ] && as_pg "$PGBIN/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1
	done
	if [ -n "$T" ] && [ -d "$T" ]; then
		if [ "${KEEP:-0}" = 1 ] || { [ "$rc" != 0 ] && [ "${KEEP_FAILED:-0}" = 1 ]; }; then
			echo "kept $T" >&2
		else
			rm -rf "$T"
		fi
	fi
	exit "$rc"
}

# it_setup NAME: make $T, HOME, PGDATA, the walc copy for postgres; install the cleanup trap.
it_setup() {
	[ -x "$WALC" ] || fail "walc binary not found or not executable: $WALC (run 'make walc', or set WALC)"
	[ -x "$PGBIN/initdb" ] || fail "PostgreSQL 15 binaries not found in $PGBIN"
	# Under run.sh, in the run's directory: its check for processes left running finds them by it.
	T=$(mktemp -d "${WALC_IT_RUN:-/tmp}/walc-${1:-it}.XXXXXX")
	trap it_cleanup EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT
	mkdir -p "$T/home" "$T/pgdata" "$T/bin" "$T/log"
	export HOME=$T/home PGDATA=$T/pgdata
	# archive_command/restore_command run as postgres: use walc in place when postgres can
	# execute it there, else a copy inside $T.
	if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$WALC"; then
		cp "$WALC" "$T/bin/walc"
		WALC_PG=$T/bin/walc
	else
		WALC_PG=$WALC
	fi
	chmod 755 "$T"
	pg_own "$T"
}

# store_setup NAME: it_setup NAME; with WALC_IT_S3=1 also an s3rver, STORE_ENV then holding
# the settings of a repository in its bucket, which win over WALG_FILE_PREFIX for walc and for
# WAL-G alike (both look for S3 first). Tests that run on either storage pass STORE_ENV on.
STORE_ENV=()
store_setup() {
	if [ "${WALC_IT_S3:-0}" != 1 ]; then
		it_setup "$1"
		return
	fi
	# shellcheck source=s3lib.sh
	. "$IT_DIR/s3lib.sh"
	s3_setup "$1"
	s3_s3rver_start
	STORE_ENV=(WALG_S3_PREFIX="s3://test/$1" AWS_ENDPOINT="http://127.0.0.1:$S3RVER_PORT"
		AWS_S3_FORCE_PATH_STYLE=true AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
		AWS_REGION=us-east-1)
}

# plain_make ARGS...: make as a fresh shell would run it. Under make coverage (or asan) the
# calling make exports its command-line variables (CC, EXTRA_CFLAGS, BUILD...) and MAKEFLAGS,
# which would build the tests' helpers instrumented, into the wrong directory.
plain_make() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u CC -u EXTRA_CFLAGS -u EXTRA_LDFLAGS -u BUILD \
		-u SAN_BIN make "$@"
}

pg_own() { # chown to postgres (no-op when not root)
	if [ "$(id -u)" = 0 ]; then chown -R postgres:postgres "$@"; fi
}

# pushgateway_start PORT: a Prometheus Pushgateway on 127.0.0.1:PORT until the test ends (GW_PID)
pushgateway_start() {
	prometheus-pushgateway --web.listen-address="127.0.0.1:$1" \
		--persistence.file="$T/pushgateway.data" >"$T/log/pushgateway.log" 2>&1 &
	GW_PID=$!
	BG_PIDS+=("$GW_PID")
	for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$1/-/ready" >/dev/null && break; sleep 0.1; done
	curl -sf "http://127.0.0.1:$1/-/ready" >/dev/null || fail "the Pushgateway did not start"
}

# wal_receive_start LOG VAR=VALUE...: walc wal-receive as postgres in the background, with the
# test's ENV and these settings, logging to LOG, until its slot is active on $PORT; RECV is its
# pid, RECV_JOB the job's (both stopped with the test)
wal_receive_start() {
	local log=$1
	shift
	as_pg env "${ENV[@]}" "$@" ASAN_OPTIONS="$ASAN_OPTIONS" "$WALC_PG" wal-receive >>"$log" 2>&1 &
	RECV_JOB=$!
	BG_PIDS+=("$RECV_JOB")
	RECV=""
	for _ in $(seq 1 200); do
		RECV=$(pid_of "$WALC_PG wal-receive" "PGPORT=$PORT")
		[ -n "$RECV" ] && [ "$(psqlc "$PORT" "SELECT count(*) FROM pg_replication_slots WHERE active")" = 1 ] && break
		sleep 0.05
	done
	[ -n "$RECV" ] || { cat "$log"; fail "wal-receive did not start"; }
	BG_PIDS+=("$RECV")
}

# walc_instrumented: WALC is a sanitizer or coverage build, whose run times are not walc's
walc_instrumented() { grep -qaE '__asan_init|__tsan_init|__llvm_profile_write_file' "$WALC"; }
# rss_limit_kib MIB: a bound on walc's peak RSS in KiB; an instrumented build gets 1.6 times it
# (ASan's shadow memory and the quarantine that keeps freed buffers: 105 MiB where the plain
# binary peaks at 30 on an 8 MiB listing)
rss_limit_kib() { if walc_instrumented; then echo $(($1 * 1024 * 8 / 5)); else echo $(($1 * 1024)); fi; }

# wrun [VAR=VALUE ...] -- ARGS...: run walc (as the current user) with extra environment;
# sets W_RC, W_OUT, W_ERR. Fails the test on any sanitizer report.
wrun() {
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	set +e
	# fresh files: a background child of an earlier call (wal-fetch's prefetch) may still
	# hold the old ones open and write to them
	rm -f "$T/.w_out" "$T/.w_err"
	env "${envs[@]}" "$WALC" "$@" >"$T/.w_out" 2>"$T/.w_err" </dev/null
	W_RC=$?
	set -e
	# shellcheck disable=SC2034
	W_OUT=$(cat "$T/.w_out")
	W_ERR=$(cat "$T/.w_err")
	if grep -Eq "$SANITIZER_RE" <<<"$W_ERR"; then
		printf '%s\n' "$W_ERR" >&2
		fail "sanitizer report from: walc $*"
	fi
}
# wrun_pg: as wrun, but as the postgres OS user
wrun_pg() {
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	set +e
	rm -f "$T/.w_out" "$T/.w_err" # as in wrun
	as_pg env PGDATA="$PGDATA" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" "$WALC_PG" "$@" \
		>"$T/.w_out" 2>"$T/.w_err" </dev/null
	W_RC=$?
	set -e
	# shellcheck disable=SC2034
	W_OUT=$(cat "$T/.w_out")
	W_ERR=$(cat "$T/.w_err")
	if grep -Eq "$SANITIZER_RE" <<<"$W_ERR"; then
		printf '%s\n' "$W_ERR" >&2
		fail "sanitizer report from (as postgres): walc $*"
	fi
}
# Describe the last wrun for failure messages.
wdesc() { printf 'exit %s, stderr: %s' "$W_RC" "$W_ERR"; }

# tree_listing DIR...: files with their sizes and times, directories by name (a look changes
# their times), sorted
tree_listing() { { find "$@" -type d -printf '%p/\n'; find "$@" ! -type d -printf '%p %s %T@\n'; } | sort; }

# wrun_refused WHAT NEEDLE DIRS [VAR=VALUE...] -- ARGS...: walc as postgres exits 1 with NEEDLE
# in its message, and nothing under DIRS (space-separated) changed
wrun_refused() {
	local what=$1 needle=$2 before
	local -a dirs
	read -ra dirs <<<"$3"
	shift 3
	before=$(tree_listing "${dirs[@]}")
	wrun_pg "$@"
	expect_rc 1 "$what"
	assert_contains "$W_ERR" "$needle" "$what: the refusal"
	assert_eq "$before" "$(tree_listing "${dirs[@]}")" "$what: what it must not touch"
}

# expect_rc RC WHAT: the last wrun exited with RC
expect_rc() {
	[ "$W_RC" = "$1" ] || fail "$2: expected exit $1, got $(wdesc)"
}

# ------------------------------------------------------------------------------------------
# PostgreSQL
# ------------------------------------------------------------------------------------------

# random_port: a port below the kernel's ephemeral range, so that no outgoing connection can
# hold it when a server binds it (an ephemeral port in use made a server fail to start in CI).
random_port() {
	local low=32768
	[ -r /proc/sys/net/ipv4/ip_local_port_range ] && read -r low _ </proc/sys/net/ipv4/ip_local_port_range
	[ "$low" -gt 12000 ] || low=32768
	echo $((10000 + RANDOM % (low - 10000 - 100)))
}

# free_port: a port for a server. Servers listen on a Unix socket in $T only
# (listen_addresses = ''), so a port is free when $T has no socket for it and nothing listens
# on it over TCP (in case a test ever enables TCP).
free_port() {
	local p
	while :; do
		p=$(random_port)
		[ -e "$T/.s.PGSQL.$p" ] && continue
		if [ -r /proc/net/tcp ] && grep -qi ":$(printf '%04X' "$p") " /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
			continue
		fi
		echo "$p"
		return
	done
}

# cmd_wrapper FILE PROGRAM VAR=VALUE...: FILE runs PROGRAM as PostgreSQL's archive_command and
# restore_command run it: with HOME, PGDATA (the data directory they run in) and the given
# variables (values may hold spaces and backslashes, not single quotes)
cmd_wrapper() {
	local file=$1 prog=$2
	shift 2
	# shellcheck disable=SC2016 # $PWD and $@ belong to the wrapper
	printf '#!/bin/sh\nexec env HOME='"'%s'"' PGDATA="$PWD" %s'"'%s'"' "$@"\n' \
		"$T/home" "$(printf "'%s' " "$@")" "$prog" >"$file"
	chmod 755 "$file"
	pg_own "$file"
}
# walc_wrapper VAR=VALUE...: $T/walc.sh, walc as archive_command and restore_command run it
walc_wrapper() { cmd_wrapper "$T/walc.sh" "$WALC_PG" "$@"; }

# walg_required: WALG, the WAL-G binary ($WALC_WALG, default <repo>/../shared/tools/wal-g:
# walc's developers have it there; it is not part of walc). Without it the test prints
# "skipped: ..." and passes. Called before it_setup.
walg_required() {
	walg_optional
	if [ ! -x "$WALG" ]; then
		echo "skipped: no WAL-G binary at $WALG (set WALC_WALG to the wal-g v3.0.9 binary to run this test)"
		exit 0
	fi
}
# walg_restores_latest DST WHAT: WAL-G restores the repository's LATEST backup into DST
# (backup-fetch through $T/walg.sh) and recovers it with its own wal-fetch to the end of the
# archive; the started server (RPORT) must dump as $T/source.sql and pass amcheck
walg_restores_latest() {
	local dst=$1
	mkdir -p "$dst"
	chmod 700 "$dst"
	pg_own "$dst"
	as_pg "$T/walg.sh" backup-fetch "$dst" LATEST >"$T/log/walg-fetch.out" 2>&1 ||
		{ tail -n 30 "$T/log/walg-fetch.out" >&2; fail "wal-g backup-fetch LATEST"; }
	RECOVER_FETCH=$T/walg.sh recover_conf "$dst" "" "recovery_target_timeline = 'latest'"
	recovered_start "$dst"
	assert_dump_eq "$T/source.sql" "$RPORT" "$2"
	amcheck_all "$RPORT"
}
# walg_lists NAME...: WAL-G's backup-list (through $T/walg.sh) names every NAME
walg_lists() {
	local n
	as_pg "$T/walg.sh" backup-list >"$T/log/walg-list.out" 2>&1 || { cat "$T/log/walg-list.out" >&2; fail "wal-g backup-list"; }
	for n in "$@"; do assert_contains "$(cat "$T/log/walg-list.out")" "$n" "wal-g backup-list"; done
}
# walg_optional: WALG as walg_required sets it, for a test whose WAL-G part is skipped (saying so)
# when the binary is absent: [ -x "$WALG" ] tells
walg_optional() { WALG=${WALC_WALG:-$ROOT/../shared/tools/wal-g}; }
# walg_wrapper VAR=VALUE...: $T/walg.sh, a copy of WAL-G as archive_command and
# restore_command run it, with $T/bin first in PATH: its prefetcher runs `wal-g` from PATH
walg_wrapper() {
	cp "$WALG" "$T/bin/wal-g"
	cmd_wrapper "$T/walg.sh" "$T/bin/wal-g" PATH="$T/bin:/usr/bin:/bin" "$@"
}

# walg_sodium_pair NAME: the start of a test of walc beside WAL-G (skipped without WAL-G): its
# directory (it_setup NAME), in E a file repository with a libsodium key and deltas of up to 2
# steps, both tools' wrappers with E, and a pgbench cluster archiving through walc's
# (pgbench_source 2 archive.log)
walg_sodium_pair() {
	walg_required
	it_setup "$1"
	log "WAL-G: $("$WALG" --version 2>&1 | head -n 1)"
	mkdir -p "$T/repo"
	head -c 32 /dev/urandom | base64 >"$T/key"
	chmod 644 "$T/key"
	E=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd WALG_LIBSODIUM_KEY_PATH="$T/key"
		WALG_LIBSODIUM_KEY_TRANSFORM=base64 WALG_DELTA_MAX_STEPS=2)
	walc_wrapper "${E[@]}"
	walg_wrapper "${E[@]}"
	pg_own "$T"
	pgbench_source 2 archive.log
}

# A configuration matrix: one environment file and wrapper per configuration name, and an
# archive_command that pushes to every configuration. A name is CODEC or CODEC-TRANSFORM (a
# libsodium key transform: that configuration encrypts with $T/key.TRANSFORM).
codec_of() { echo "${1%%-*}"; }
transform_of() { case $1 in *-*) echo "${1#*-}" ;; *) echo "" ;; esac; }

# matrix_wrapper NAME: $T/conf/NAME.sh runs walc with the variables of $T/conf/NAME.env
matrix_wrapper() {
	cat >"$T/conf/$1.sh" <<EOF
#!/bin/sh
# walc with configuration '$1'
set -a
. '$T/conf/$1.env'
set +a
exec '$WALC_PG' "\$@"
EOF
	chmod 755 "$T/conf/$1.sh"
}

# matrix_push_all NAME...: $T/push-all.sh, an archive_command (%p relative to the data
# directory, the cwd) that wal-pushes with each configuration in turn (stderr to
# $T/log/push-NAME.log; a failure is noted in $T/archive-failed), then, when $T/golden exists,
# keeps a golden copy of the segment there. wal-push leaves a marker under
# $PGDATA/walg_data/walg_archive_status for each file it uploads in the background, so that
# the next wal-push of it returns at once: each configuration gets its own PGDATA for them.
matrix_push_all() {
	cat >"$T/push-all.sh" <<EOF
#!/bin/sh
p=\$1
f=\$(basename "\$p")
export HOME='$T/home'
for c in $*; do
	mkdir -p '$T/markers/'\$c/pg_wal
	if ! PGDATA='$T/markers/'\$c '$T/conf/'\$c.sh wal-push "\$p" 2>>'$T/log/push-'\$c.log; then
		echo "\$(date +%T) wal-push \$p failed for configuration \$c (see $T/log/push-\$c.log)" >>'$T/archive-failed'
		exit 1
	fi
done
[ ! -d '$T/golden' ] || { cp "\$p" '$T/golden/.'"\$f" && mv '$T/golden/.'"\$f" '$T/golden/'"\$f"; }
EOF
	chmod 755 "$T/push-all.sh"
}

# pgbench_cluster SCALE: a running cluster in $T/src (SRC) on PORT, loaded by pgbench -i -s
# SCALE and checkpointed, archive_mode on with archive_command /bin/true
pgbench_cluster() {
	local scale=$1
	SRC=$T/src
	PORT=$(free_port)
	pg_init "$SRC"
	pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_command = '/bin/true'" \
		"fsync = off" "max_wal_size = 1GB" "checkpoint_timeout = 1h"
	pg_own "$T"
	pg_start "$SRC" "$PORT"
	as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -i -s "$scale" -q postgres >"$T/log/pgbench-init.log" 2>&1 ||
		{ cat "$T/log/pgbench-init.log" >&2; fail "pgbench -i -s $scale"; }
	psqlc "$PORT" "CHECKPOINT"
}

# pgbench_init PORT SCALE: pgbench -i -s SCALE on the server on PORT (its log in $T/log)
pgbench_init() {
	as_pg "$PGBIN/pgbench" -h "$T" -p "$1" -U postgres -i -s "$2" -q postgres >"$T/log/pgbench-init.log" 2>&1 ||
		{ cat "$T/log/pgbench-init.log" >&2; fail "pgbench -i -s $2"; }
}

# wal_rounds N: N rounds of 300 pgbench transactions on the server SRC (on PORT), each ending its
# segment, then waits until the last is archived; LAST is its name
wal_rounds() {
	local seg
	for _ in $(seq 1 "$1"); do
		as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -t 300 -c 2 postgres >>"$T/log/pgbench.log" 2>&1 ||
			fail "pgbench (see $T/log/pgbench.log)"
		seg=$(switch_wal "$PORT")
	done
	wait_archived "$SRC" "$seg" 120
	# shellcheck disable=SC2034 # read by the tests that source this file
	LAST=$seg
}

# pgbench_source SCALE LOG: a cluster in SRC=$T/src on PORT, loaded by pgbench -i -s SCALE
# before archiving starts (the load is not archived), then restarted with archive_command
# $T/walc.sh wal-push (see walc_wrapper), its stderr appended to $T/log/LOG
pgbench_source() {
	local logname=$2
	pgbench_cluster "$1"
	pg_stop "$SRC"
	pg_conf "$SRC" "archive_command = '$T/walc.sh wal-push %p 2>>$T/log/$logname'"
	pg_start "$SRC" "$PORT"
}

# walc_archiving DIR [VAR=VALUE...]: the repository R=$T/repo, E=(WALG_FILE_PREFIX=$R
# WALG_PG_WAL_SIZE=1 VAR=VALUE...) and walc_wrapper with E; a cluster in DIR with 1 MiB
# segments archiving into R through it (wal-push's stderr in $T/log/push.log; with
# ARCHIVE_SWITCH=1 only while $T/archive-on exists, which is made), started on PORT
walc_archiving() {
	local dir=$1 cmd
	shift
	R=$T/repo
	mkdir -p "$R"
	E=(WALG_FILE_PREFIX="$R" WALG_PG_WAL_SIZE=1 "$@")
	walc_wrapper "${E[@]}"
	pg_own "$T"
	cmd="$T/walc.sh wal-push %p 2>>$T/log/push.log"
	if [ "${ARCHIVE_SWITCH:-0}" = 1 ]; then
		cmd="test -f $T/archive-on && $cmd"
		touch "$T/archive-on"
	fi
	pg_init "$dir" --wal-segsize=1
	PORT=$(free_port)
	pg_conf "$dir" "wal_level = replica" "archive_mode = on" "archive_timeout = 0" \
		"archive_command = '$cmd'"
	pg_start "$dir" "$PORT"
}

# wait_replayed PRIMARY_PORT STANDBY_PORT: the standby has replayed the primary's WAL so far
wait_replayed() {
	local lsn i
	lsn=$(psqlc "$1" "SELECT pg_current_wal_lsn()")
	for i in $(seq 1 200); do
		[ "$(psqlc "$2" "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ] && return 0
		sleep 0.1
	done
	fail "the standby on port $2 did not replay up to $lsn in 20 s"
}

# archiving_source DIR SCALE ARCHIVE_COMMAND [LINE...]: a cluster with data checksums in DIR,
# archiving with ARCHIVE_COMMAND, loaded by pgbench -i -s SCALE (archived too); its port is
# SPORT
archiving_source() {
	local dir=$1 scale=$2 cmd=$3
	shift 3
	SPORT=$(free_port)
	pg_init "$dir" --data-checksums
	pg_conf "$dir" "wal_level = replica" "archive_mode = on" "max_wal_senders = 4" \
		"archive_command = '$cmd'" "$@"
	pg_start "$dir" "$SPORT"
	as_pg "$PGBIN/pgbench" -h "$T" -p "$SPORT" -i -s "$scale" -q postgres >"$dir.pgbench.log" 2>&1 ||
		{ cat "$dir.pgbench.log" >&2; fail "pgbench -i -s $scale"; }
}

# pitr_source [VAR=VALUE...]: the repository R and a cluster SRC (1 MiB segments) archiving into
# it through walc_wrapper, started on PORT; E is the walc environment (WALG_FILE_PREFIX=$R,
# WALG_PG_WAL_SIZE=1 and the arguments)
pitr_source() {
	R=$T/repo
	mkdir -p "$R"
	pg_own "$T"
	E=(WALG_FILE_PREFIX="$R" WALG_PG_WAL_SIZE=1 "$@")
	walc_wrapper "${E[@]}"
	SRC=$T/src
	pg_init "$SRC" --wal-segsize=1
	PORT=$(free_port)
	pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_timeout = 0" \
		"archive_command = '$T/walc.sh wal-push %p 2>>$T/log/push.log'"
	pg_start "$SRC" "$PORT"
}

# pg_init DIR [initdb args...]
pg_init() {
	local dir=$1
	shift
	mkdir -p "$dir"
	chmod 700 "$dir"
	pg_own "$dir"
	as_pg "$PGBIN/initdb" -D "$dir" -A trust -U postgres --locale=C --encoding=UTF8 "$@" \
		>"$dir.initdb.log" 2>&1 || { cat "$dir.initdb.log" >&2; fail "initdb $dir"; }
}

# pg_conf DIR 'line' ...: append lines to DIR/postgresql.conf
pg_conf() {
	local dir=$1
	shift
	printf '%s\n' "$@" >>"$dir/postgresql.conf"
}

# pg_start DIR PORT: start a server on a Unix socket in $T; the log is DIR.log
pg_start() {
	local dir=$1 port=$2
	pg_conf "$dir" "port = $port" "listen_addresses = ''" "unix_socket_directories = '$T'"
	pg_own "$dir"
	touch "$dir.log"
	pg_own "$dir.log"
	PG_RUNNING+=("$dir")
	if ! as_pg "$PGBIN/pg_ctl" -D "$dir" -l "$dir.log" -w -t 180 start >/dev/null; then
		tail -n 40 "$dir.log" >&2
		fail "pg_ctl start $dir"
	fi
}

# pg_stop DIR: fast shutdown
pg_stop() {
	as_pg "$PGBIN/pg_ctl" -D "$1" -m fast -w -t 180 stop >/dev/null || {
		tail -n 40 "$1.log" >&2
		fail "pg_ctl stop $1"
	}
}

# psqlc PORT SQL: one command as postgres@postgres, unaligned tuples only
psqlc() {
	as_pg "$PGBIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$T" -p "$1" -U postgres -d postgres -c "$2"
}

# wait_not_in_recovery PORT [TIMEOUT]
wait_not_in_recovery() {
	local port=$1 limit=${2:-180} i=0
	while [ "$(psqlc "$port" 'SELECT pg_is_in_recovery()' 2>/dev/null || true)" != f ]; do
		i=$((i + 1))
		[ "$i" -le $((limit * 2)) ] || fail "server on port $port still in recovery after ${limit}s"
		sleep 0.5
	done
}

# normalize a pg_dumpall (fixtures README): drop \restrict/\unrestrict and version lines,
# replace tablespace locations.
normalize_dump() {
	sed -E -e '/^\\(un)?restrict /d' \
		-e '/^-- Dumped (from database|by pg_dump) version /d' \
		-e "s#^(CREATE TABLESPACE [^ ]+ OWNER [^ ]+ LOCATION ')[^']*(';)\$#\1TABLESPACE_LOCATION\2#"
}

# dump_norm PORT > FILE: normalized pg_dumpall --no-role-passwords
dump_norm() {
	local out
	out=$(mktemp "$T/.dump.XXXXXX")
	as_pg "$PGBIN/pg_dumpall" -h "$T" -p "$1" -U postgres --no-role-passwords >"$out" ||
		fail "pg_dumpall on port $1"
	normalize_dump <"$out"
	rm -f "$out"
}

# switch_wal PORT: pg_switch_wal(), prints the name of the segment it completed
switch_wal() {
	psqlc "$1" 'SELECT pg_walfile_name(pg_switch_wal())'
}

# archived DATADIR SEG: the server has archived SEG: its archive_status says .done, or the
# segment has been removed/recycled (which only happens after archiving) with no .ready left.
archived() {
	local st=$1/pg_wal/archive_status/$2
	[ -e "$st.done" ] && return 0
	[ ! -e "$1/pg_wal/$2" ] && [ ! -e "$st.ready" ]
}

# oldest_ready DATADIR: the name of the oldest segment still waiting for archive_command, or
# nothing (the archiver takes them in name order, so a new name here means one was archived)
oldest_ready() {
	local f
	for f in "$1"/pg_wal/archive_status/*.ready; do
		[ -e "$f" ] && basename "$f" .ready
		return 0
	done
}

# wait_archived DATADIR SEG [TIMEOUT] [FAILFLAG]: wait until SEG is archived; fail when the
# archiver has archived nothing for TIMEOUT seconds (a backlog drains at whatever pace the
# machine's load allows: only a stalled archiver is an error), and early when FAILFLAG (a file
# an archive wrapper creates on failure) appears.
wait_archived() {
	local dir=$1 seg=$2 limit=${3:-180} flag=${4:-} i=0 head last=
	until archived "$dir" "$seg"; do
		if [ -n "$flag" ] && [ -e "$flag" ]; then
			cat "$flag" >&2
			fail "archive_command failed while waiting for $seg"
		fi
		head=$(oldest_ready "$dir")
		if [ "$head" != "$last" ]; then
			last=$head
			i=0
		fi
		i=$((i + 1))
		if [ "$i" -gt $((limit * 4)) ]; then
			tail -n 30 "$dir.log" >&2
			fail "segment $seg not archived: nothing archived for ${limit}s (oldest waiting: ${head:-none})"
		fi
		sleep 0.25
	done
}

# source_archived_stopped: the last segment of the cluster in SRC (on PORT) switched and
# archived (LAST), its normalized dump in $T/source.sql, the cluster stopped
source_archived_stopped() {
	LAST=$(switch_wal "$PORT")
	wait_archived "$SRC" "$LAST" 120
	dump_norm "$PORT" >"$T/source.sql"
	pg_stop "$SRC"
}

# wait_started ERRFILE PID WHAT: the background walc PID has logged "started" in ERRFILE
wait_started() {
	for _ in $(seq 1 200); do
		grep -q started "$1" 2>/dev/null && break
		kill -0 "$2" 2>/dev/null || break
		sleep 0.1
	done
	grep -q started "$1" || { cat "$1" >&2; fail "$3 did not start"; }
}

# wait_archive_failed PORT: wait until pg_stat_archiver counts a failure. The archiver counts
# it only after archive_command has exited, so whatever the command logged can be seen before
# the count moves. (With an archive module whose check_configured callback says no, PostgreSQL
# 15 only warns and never counts.)
wait_archive_failed() {
	local i=0
	until [ "$(psqlc "$1" "SELECT failed_count FROM pg_stat_archiver")" -gt 0 ]; do
		i=$((i + 1))
		[ "$i" -le 150 ] || fail "archive_command on port $1 did not fail within 30s"
		sleep 0.2
	done
}

is_segment_name() { [[ $1 =~ ^[0-9A-F]{24}$ ]]; }

# ext_of CODEC: object suffix WAL-G uses
ext_of() {
	case $1 in
	lz4) echo .lz4 ;; zstd) echo .zst ;; brotli) echo .br ;; lzma) echo .lzma ;; none) echo "" ;;
	*) fail "unknown codec $1" ;;
	esac
}
# decode_cli CODEC < object > plain: the Debian command-line decoder for CODEC
decode_cli() {
	case $1 in
	lz4) lz4 -d -c ;;
	zstd) zstd -d -c -q ;;
	brotli) brotli -d -c ;;
	lzma) xz --format=lzma -d -c ;;
	none) cat ;;
	*) fail "unknown codec $1" ;;
	esac
}
# sodium_decrypt KEYFILE TRANSFORM < object > plain: independent secretstream decryption
sodium_decrypt() { "$PY" "$IT_DIR/sodium.py" decrypt "$1" "$2"; }

# ------------------------------------------------------------------------------------------
# Restored clusters
# ------------------------------------------------------------------------------------------

# recover_conf DIR "WALC ENV" [LINE...]: make a restored data directory recover through
# walc wal-fetch and promote; LINEs replace the default recovery_target = 'immediate'.
# RECOVER_FETCH=COMMAND: another wal-fetch than walc's (e.g. WAL-G's) as restore_command.
recover_conf() {
	local dir=$1 fetch="${RECOVER_FETCH:-env $2 $WALC_PG}"
	shift 2
	[ $# -gt 0 ] || set -- "recovery_target = 'immediate'"
	sed -i '/^port = /d; /^listen_addresses/d; /^unix_socket_directories/d; /^archive_command/d; /^archive_mode/d; /^restore_command/d; /^recovery_target/d' \
		"$dir/postgresql.conf"
	printf "archive_mode = off\nrestore_command = '%s wal-fetch %%f %%p'\nrecovery_target_action = 'promote'\n" \
		"$fetch" >>"$dir/postgresql.conf"
	printf '%s\n' "$@" >>"$dir/postgresql.conf"
	touch "$dir/recovery.signal"
	pg_own "$dir"
}

# assert_dump_eq EXPECTED PORT WHAT: the normalized pg_dumpall of the server on PORT is the
# file EXPECTED (the first differences shown when not)
assert_dump_eq() {
	local got=$1.got
	dump_norm "$2" >"$got"
	if ! cmp -s "$1" "$got"; then
		diff "$1" "$got" | head -n 20 >&2
		fail "$3: the restored cluster's dump differs from $1"
	fi
	rm -f "$got"
}

# recovered_start DIR: start a data directory recover_conf prepared and wait for the
# promotion; the server's port is RPORT
recovered_start() {
	RPORT=$(free_port)
	pg_start "$1" "$RPORT"
	wait_not_in_recovery "$RPORT"
}

# recover_to_end BASE FETCH EXPECTED FINAL WHAT: a copy of the data directory BASE recovers
# through the wal-fetch script FETCH to the end of the archive: it must replay segment FINAL,
# and its dump must be the file EXPECTED; the copy is removed after.
recover_to_end() {
	local r=$1.recovered
	cp -a "$1" "$r"
	RECOVER_FETCH=$2 recover_conf "$r" "" "recovery_target_timeline = 'latest'"
	recovered_start "$r"
	assert_dump_eq "$3" "$RPORT" "$5"
	pg_stop "$r"
	grep -q "restored log file \"$4\" from archive" "$r.log" ||
		fail "$5: recovery did not replay the final segment $4 (see $r.log)"
	assert_no_sanitizer_reports "$r.log"
	rm -rf "$r"
}

# restore_start DIR BACKUP VAR=VALUE... [-- LINE...]: backup-fetch BACKUP into DIR with that
# walc environment, recover_conf with it (LINEs as there), start; the server's port is RPORT.
# RECOVER_FETCH as for recover_conf (restore_start with RECOVER_FETCH=$T/walc.sh recovers
# through walc_wrapper's wrapper).
restore_start() {
	local dir=$1 backup=$2 wenv=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do wenv+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	rm -rf "$dir"
	wrun "${wenv[@]}" -- backup-fetch "$dir" "$backup"
	expect_rc 0 "backup-fetch $backup"
	recover_conf "$dir" "${wenv[*]}" "$@"
	recovered_start "$dir"
}

# standby_of PORT DIR: DIR a streaming standby of the server on PORT (pg_basebackup -R), its
# port and socket settings left to pg_start
standby_of() {
	as_pg "$PGBIN/pg_basebackup" -h "$T" -p "$1" -U postgres -D "$2" -X stream -R -c fast \
		>"$2.basebackup.log" 2>&1 || { cat "$2.basebackup.log"; fail "pg_basebackup of $2"; }
	sed -i '/^port = /d; /^unix_socket_directories/d; /^listen_addresses/d' "$2/postgresql.conf"
}

# amcheck_all PORT [DB]: bt_index_check (with heapallindexed) on every btree index of DB (on a
# standby, the primary must have created the extension)
amcheck_all() {
	local create="CREATE EXTENSION IF NOT EXISTS amcheck;"
	[ "$(psqlc "$1" "SELECT pg_is_in_recovery()")" = f ] || create=""
	as_pg "$PGBIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$T" -p "$1" -U postgres -d "${2:-postgres}" -c \
		"$create SELECT count(bt_index_check(c.oid, true)) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'btree' AND c.relpersistence <> 't'" \
		>/dev/null || fail "amcheck failed in database ${2:-postgres} on port $1"
}

# daemon_wait BINARY SOCKET LOG: after starting `BINARY daemon SOCKET` in the background (as
# postgres, through runuser or sh), wait for its socket; its pid (found by its command line,
# not the wrapper's) joins BG_PIDS so that the cleanup stops the daemon itself.
daemon_wait() {
	local pid=""
	for _ in $(seq 1 200); do
		[ -n "$pid" ] || pid=$(pgrep -xf "$1 daemon $2" || true)
		[ -n "$pid" ] && [ -S "$2" ] && break
		sleep 0.05
	done
	[ -S "$2" ] || { cat "$3"; fail "daemon on $2 did not start"; }
	BG_PIDS+=("$pid")
	DAEMON_PID=$pid
}

# await_pid CMDLINE VAR=VALUE LOG: AWAITED_PID, the pid (pid_of) of a process just started in
# the background, waited for up to 10 s (LOG shown when it does not appear); it joins BG_PIDS
await_pid() {
	AWAITED_PID=""
	for _ in $(seq 1 200); do
		AWAITED_PID=$(pid_of "$1" "$2")
		[ -z "$AWAITED_PID" ] || break
		sleep 0.05
	done
	[ -n "$AWAITED_PID" ] || { cat "$3"; fail "$1 did not start"; }
	BG_PIDS+=("$AWAITED_PID")
}

# pid_of CMDLINE VAR=VALUE: the pid of the process running exactly CMDLINE with VAR=VALUE in
# its environment (several tests may run the same command line at once: a port tells them apart)
pid_of() {
	local p
	for p in $(pgrep -xf "$1" || true); do
		if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "$2"; then
			echo "$p"
			return
		fi
	done
}
