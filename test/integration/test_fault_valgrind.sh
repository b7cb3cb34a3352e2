#!/usr/bin/env bash
# valgrind memcheck over one backup cycle on file storage (lz4 + libsodium): wal-push,
# backup-push (WALG_UPLOAD_DISK_CONCURRENCY=2, several tar partitions), backup-list --detail,
# backup-fetch, wal-fetch (with a prefetcher), of a small cluster (initdb + pgbench -i -s 1).
# Each runs as
#   valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
#            --track-fds=no --child-silent-after-fork=yes
# and must exit 0 with "ERROR SUMMARY: 0 errors" in its log (no invalid read/write, no use of
# uninitialised values, no definite leak). The restored cluster then starts, recovers through
# walc wal-fetch to 'immediate', passes amcheck and holds pgbench's 100000 accounts (memcheck must not have
# hidden a wrong result). Skipped when valgrind is not installed.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup fault-valgrind
START=$SECONDS
VG=$(command -v valgrind || true)
[ -n "$VG" ] || { log "skipped: valgrind is not installed"; exit 0; }
VGOPTS=(--error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --track-fds=no
	--child-silent-after-fork=yes --num-callers=30)

REPO=$T/repo
KEY=WalcValgrindTestKey-0123456789ab # 32 characters
mkdir -p "$REPO"
ENVS=(WALG_FILE_PREFIX="$REPO" WALG_COMPRESSION_METHOD=lz4 "WALG_LIBSODIUM_KEY=$KEY")
walc_wrapper WALG_FILE_PREFIX="$REPO" WALG_COMPRESSION_METHOD=lz4 "WALG_LIBSODIUM_KEY=$KEY"
SRC=$T/src
PORT=$(free_port)
pg_init "$SRC"
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "fsync = off" \
	"archive_command = '$T/walc.sh wal-push %p 2>>$T/log/archive.log'"
pg_own "$T"
pg_start "$SRC" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -i -s 1 -q postgres >/dev/null 2>&1 || fail "pgbench -i -s 1"
psqlc "$PORT" "CHECKPOINT"

N=0
# vg WHAT AS(root|pg) ENV... -- ARGS: walc under memcheck; its log in $T/log/vg-N.log
vg() {
	local what=$1 as=$2 envs=() vlog rc t0
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	N=$((N + 1))
	vlog=$T/log/vg-$N.log
	touch "$vlog"
	pg_own "$vlog"
	t0=$SECONDS
	set +e
	if [ "$as" = pg ]; then
		as_pg env PGDATA="$SRC" "${envs[@]}" "$VG" "${VGOPTS[@]}" --log-file="$vlog" "$WALC_PG" "$@" \
			>"$T/log/vg-$N.out" 2>"$T/log/vg-$N.err" </dev/null
	else
		env "${envs[@]}" "$VG" "${VGOPTS[@]}" --log-file="$vlog" "$WALC" "$@" \
			>"$T/log/vg-$N.out" 2>"$T/log/vg-$N.err" </dev/null
	fi
	rc=$?
	set -e
	if [ "$rc" != 0 ] || ! grep -q 'ERROR SUMMARY: 0 errors' "$vlog"; then
		tail -n 5 "$T/log/vg-$N.err" >&2
		grep -v '^==[0-9]*== *$' "$vlog" | head -n 80 >&2
		fail "$what under valgrind: exit $rc, $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$vlog" | tail -n 1)"
	fi
	log "  $what: memcheck clean in $((SECONDS - t0)) s ($(grep -oE 'in use at exit: [0-9,]+ bytes|total heap usage: [0-9,]+ allocs' "$vlog" | tr '\n' ';' | sed 's/;$//'))"
}

mkdir -p "$T/wal"
# of the cluster whose archive_command records the repository's marker meanwhile
fake_segment 0000000100000000000000F0 16777216 "$T/wal/0000000100000000000000F0" "" \
	"$(psqlc "$PORT" "SELECT system_identifier FROM pg_control_system()")"
vg "wal-push" root "${ENVS[@]}" -- wal-push "$T/wal/0000000100000000000000F0"
vg "backup-push" pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" WALG_UPLOAD_DISK_CONCURRENCY=2 \
	WALG_TAR_SIZE_THRESHOLD=10000000 -- backup-push "$SRC"
want=$(psqlc "$PORT" "SELECT count(*) FROM pgbench_accounts")
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 120
pg_stop "$SRC"
vg "backup-list --detail" root "${ENVS[@]}" -- backup-list --detail
vg "backup-fetch" root "${ENVS[@]}" -- backup-fetch "$T/restored" LATEST
mkdir -p "$T/wf"
vg "wal-fetch (prefetch 2)" root "${ENVS[@]}" WALG_DOWNLOAD_CONCURRENCY=2 -- wal-fetch 0000000100000000000000F0 "$T/wf/RECOVERYXLOG"
assert_same_file "$T/wal/0000000100000000000000F0" "$T/wf/RECOVERYXLOG" "wal-fetch under valgrind"

R=$T/restored
RECOVER_FETCH=$T/walc.sh recover_conf "$R" ""
recovered_start "$R"
amcheck_all "$RPORT"
assert_eq "$want" "$(psqlc "$RPORT" "SELECT count(*) FROM pgbench_accounts")" "restored pgbench_accounts"
pg_stop "$R"
ok "$N commands memcheck-clean; the backup made and restored under valgrind starts with $want accounts"
log "all done in $((SECONDS - START))s"
