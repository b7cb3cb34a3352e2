#!/usr/bin/env bash
# wal-fetch prefetch (issue 6): after serving segment N, segments N+1..N+k are downloaded ahead
# by a detached child and served from the prefetch directory even after they were deleted from
# storage; a short or non-WAL file in the prefetch directory is never handed over; files of
# older segments are cleaned; WALG_PREFETCH_DIR moves the directory; history files and
# WALG_DOWNLOAD_CONCURRENCY=1 start no prefetch; the end of the archive is quiet.
. "$(dirname "$0")/lib.sh"
it_setup prefetch

mkdir -p "$T/repo" "$T/segs" "$T/pg_wal" "$T/elsewhere"
pg_own "$T"
pg_init "$T/src" --wal-segsize=1
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'cp %p $T/segs/%f && env WALG_FILE_PREFIX=$T/repo WALG_PG_WAL_SIZE=1 $WALC_PG wal-push %p'"
pg_start "$T/src" "$PORT"
psqlc "$PORT" "CREATE TABLE t (v text)"
for _ in $(seq 1 14); do
	psqlc "$PORT" "INSERT INTO t SELECT md5(g::text) FROM generate_series(1, 500) g; SELECT pg_switch_wal()" >/dev/null
done
last=$(psqlc "$PORT" "SELECT pg_walfile_name(pg_current_wal_lsn())")
pg_stop "$T/src"
segs=($(ls "$T/segs" | grep -E '^[0-9A-F]{24}$' | sort))
[ "${#segs[@]}" -ge 12 ] || fail "only ${#segs[@]} segments archived"
first=${segs[1]}
E=(WALG_FILE_PREFIX="$T/repo" WALG_PG_WAL_SIZE=1 WALG_DOWNLOAD_CONCURRENCY=4)
PF=$T/pg_wal/.wal-g/prefetch

wait_files() {
	local i
	for i in $(seq 1 200); do
		local all=1 f
		for f in "$@"; do [ -e "$f" ] || all=0; done
		[ $all = 1 ] && return 0
		sleep 0.1
	done
	fail "prefetched files did not appear: $*"
}

wrun "${E[@]}" -- wal-fetch "$first" "$T/pg_wal/RECOVERYXLOG"
expect_rc 0 "wal-fetch $first"
cmp -s "$T/segs/$first" "$T/pg_wal/RECOVERYXLOG" || fail "$first differs"
next=("${segs[@]:2:4}")
wait_files "${next[@]/#/$PF/}"
# The next segments now come from the prefetch directory: delete them from storage first.
for s in "${next[@]}"; do rm -f "$T/repo/wal_005/$s".*; done
for s in "${next[@]}"; do
	rm -f "$T/pg_wal/RECOVERYXLOG"
	wrun "${E[@]}" -- wal-fetch "$s" "$T/pg_wal/RECOVERYXLOG"
	expect_rc 0 "wal-fetch $s from the prefetch directory"
	cmp -s "$T/segs/$s" "$T/pg_wal/RECOVERYXLOG" || fail "$s from prefetch differs"
done
log "segments served from the prefetch directory after deletion from storage"
# Files of segments older than the last requested are cleaned by the next prefetcher.
sleep 1
[ ! -e "$PF/$first" ] || fail "stale prefetch file left"

# A short file or a non-WAL file in place of a prefetched segment is never handed over.
target=${segs[8]}
sleep 1
rm -f "$PF/$target"
head -c 4096 "$T/segs/$target" >"$PF/$target"
rm -f "$T/pg_wal/RECOVERYXLOG"
wrun "${E[@]}" -- wal-fetch "$target" "$T/pg_wal/RECOVERYXLOG"
expect_rc 0 "wal-fetch $target with a short prefetch file"
cmp -s "$T/segs/$target" "$T/pg_wal/RECOVERYXLOG" || fail "short prefetch file was handed over"
target=${segs[9]}
sleep 1
rm -f "$PF/$target"
head -c 1048576 /dev/zero >"$PF/$target"
rm -f "$T/pg_wal/RECOVERYXLOG"
wrun "${E[@]}" -- wal-fetch "$target" "$T/pg_wal/RECOVERYXLOG"
expect_rc 0 "wal-fetch $target with a zero-filled prefetch file"
cmp -s "$T/segs/$target" "$T/pg_wal/RECOVERYXLOG" || fail "non-WAL prefetch file was handed over"
log "short and non-WAL prefetch files refused"

# WALG_PREFETCH_DIR moves it; the end of the archive costs no error noise.
rm -f "$T/pg_wal/RECOVERYXLOG"
wrun "${E[@]}" WALG_PREFETCH_DIR="$T/elsewhere" -- wal-fetch "${segs[-2]}" "$T/pg_wal/RECOVERYXLOG"
expect_rc 0 "wal-fetch with WALG_PREFETCH_DIR"
wait_files "$T/elsewhere/.wal-g/prefetch/${segs[-1]}"
sleep 1
errors=$(find "$T/elsewhere/.wal-g" -type f | grep -vc -E '/[0-9A-F]{24}$' || true)
[ "$errors" -eq 0 ] || fail "unexpected files in the prefetch directory"

# History files and concurrency 1 start no prefetcher.
rm -rf "$T/pg_wal2"; mkdir -p "$T/pg_wal2"
wrun "${E[@]}" WALG_DOWNLOAD_CONCURRENCY=1 -- wal-fetch "${segs[10]}" "$T/pg_wal2/RECOVERYXLOG"
expect_rc 0 "wal-fetch with concurrency 1"
sleep 0.5
[ ! -e "$T/pg_wal2/.wal-g" ] || fail "WALG_DOWNLOAD_CONCURRENCY=1 still prefetched"
log "prefetch ok (last source segment $last)"
