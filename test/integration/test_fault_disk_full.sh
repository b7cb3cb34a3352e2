#!/usr/bin/env bash
# Disk full (a 20 MiB tmpfs; needs root for mount) during backup-fetch, wal-fetch and wal-push.
#
#   backup-fetch of a synthetic backup holding 40 MiB of incompressible data (fault_hostile.py
#   big) into the tmpfs: exit 1 with a message naming the path being written and the errno
#   text, no global/pg_control (a cut restore never looks startable), within 60 s; the same
#   backup restores into a roomy directory (the fixture is sound).
#   wal-fetch of a 16 MiB segment into a tmpfs with ~6 MiB free: exit 1 (not 74, which
#   PostgreSQL takes for the end of the archive and would promote on) naming the path,
#   no RECOVERYXLOG and no temporary left beside it; with space freed the same call succeeds.
#   wal-fetch with WALG_DOWNLOAD_CONCURRENCY=4 into a tmpfs with room for the segment but not
#   for the prefetched ones: exit 0, identical; the prefetcher's failed downloads leave no
#   file that a later wal-fetch would take (the next three fetches, with the first one's
#   space freed as recovery does, are byte-identical).
#   wal-push into a repository on a full tmpfs: exit 1 naming the path, no visible object;
#   with space freed, a retry succeeds and the object decodes to the segment.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup fault-disk-full
START=$SECONDS
[ "$(id -u)" = 0 ] || { log "skipped: mounting a tmpfs needs root"; exit 0; }
MOUNTS=()
# unmount before it_cleanup removes $T; it reads the test's status from $?
# shellcheck disable=SC2154 # rc is assigned inside the trap string
trap 'rc=$?; set +e; for m in "${MOUNTS[@]}"; do umount -l "$m"; done; (exit $rc); it_cleanup' EXIT
small_fs() { # DIR: a fresh 20 MiB tmpfs at DIR
	mkdir -p "$1"
	mount -t tmpfs -o size=20m,mode=0755 tmpfs "$1" || fail "mount -t tmpfs on $1"
	MOUNTS+=("$1")
}
free_kib() { df -k --output=avail "$1" | tail -n 1 | tr -d ' '; }
fill_to() { # DIR KIB: a filler file leaving about KIB free
	local avail
	avail=$(free_kib "$1")
	[ "$avail" -gt "$2" ] || return 0
	head -c $(((avail - $2) * 1024)) /dev/zero >"$1/filler" 2>/dev/null || true
}

# ---- backup-fetch into a full disk -------------------------------------------------------------
REPO=$T/repo
"$PY" "$IT_DIR/fault_hostile.py" big "$REPO" 40 || fail "building the 40 MiB backup"
NAME=base_000000010000000000000002
wrun WALG_FILE_PREFIX="$REPO" -- backup-fetch "$T/roomy" "$NAME"
expect_rc 0 "backup-fetch of the 40 MiB backup into a roomy directory"
assert_eq 41943040 "$(stat -c %s "$T/roomy/base/1/big")" "restored base/1/big size"
small_fs "$T/fs1"
t0=$SECONDS
wrun WALG_FILE_PREFIX="$REPO" -- backup-fetch "$T/fs1/dest" "$NAME"
took=$((SECONDS - t0))
expect_rc 1 "backup-fetch into a 20 MiB file system"
assert_contains "$W_ERR" "$T/fs1/dest" "backup-fetch into a full disk: the message names the path"
assert_contains "$W_ERR" "No space left on device" "backup-fetch into a full disk: the message says why"
assert_absent "$T/fs1/dest/global/pg_control" "backup-fetch into a full disk: pg_control"
[ "$took" -le 60 ] || fail "backup-fetch into a full disk took ${took}s"
ok "backup-fetch into a full disk: exit 1 in ${took}s: $(printf '%s\n' "$W_ERR" | grep ERROR | head -n 1)"

# ---- wal-fetch into a full disk ----------------------------------------------------------------
SEG=000000010000000000000010
mkdir -p "$T/segs" "$T/wrepo"
seq 1 2000000 >"$T/text"
for i in 0 1 2 3 4; do
	s=$(printf '0000000100000000000000%02X' $((16 + i)))
	{ head -c $((8 * 1048576)) /dev/urandom; head -c $((8 * 1048576)) "$T/text"; } >"$T/src"
	fake_segment "$s" 16777216 "$T/segs/$s" "$T/src"
	wrun WALG_FILE_PREFIX="$T/wrepo" -- wal-push "$T/segs/$s"
	expect_rc 0 "wal-push $s"
done
small_fs "$T/fs2"
mkdir -p "$T/fs2/pg_wal"
fill_to "$T/fs2" 6144
wrun WALG_FILE_PREFIX="$T/wrepo" WALG_DOWNLOAD_CONCURRENCY=1 -- wal-fetch "$SEG" "$T/fs2/pg_wal/RECOVERYXLOG"
expect_rc 1 "wal-fetch of a 16 MiB segment into 6 MiB of free space"
assert_contains "$W_ERR" "$T/fs2/pg_wal" "wal-fetch into a full disk: the message names the path"
assert_contains "$W_ERR" "No space left on device" "wal-fetch into a full disk: the message says why"
left=$(ls -A "$T/fs2/pg_wal")
assert_eq "" "$left" "wal-fetch into a full disk: files left in pg_wal"
rm -f "$T/fs2/filler"
wrun WALG_FILE_PREFIX="$T/wrepo" WALG_DOWNLOAD_CONCURRENCY=1 -- wal-fetch "$SEG" "$T/fs2/pg_wal/RECOVERYXLOG"
expect_rc 0 "wal-fetch once space is freed"
assert_same_file "$T/segs/$SEG" "$T/fs2/pg_wal/RECOVERYXLOG" "wal-fetch once space is freed"
ok "wal-fetch into a full disk: exit 1 (not 74), nothing left; succeeds once space is freed"

# the segment fits, the prefetched ones do not
rm -f "$T/fs2/pg_wal/RECOVERYXLOG"
wrun WALG_FILE_PREFIX="$T/wrepo" WALG_DOWNLOAD_CONCURRENCY=4 -- wal-fetch "$SEG" "$T/fs2/pg_wal/RECOVERYXLOG"
expect_rc 0 "wal-fetch with prefetch into a disk with room for one segment"
assert_same_file "$T/segs/$SEG" "$T/fs2/pg_wal/RECOVERYXLOG" "wal-fetch with prefetch into a small disk"
sleep 3 # the prefetcher runs detached: let it hit the full disk and give up
for i in 1 2 3; do
	rm -f "$T/fs2/pg_wal/RECOVERYXLOG" # recovery consumed it
	s=$(printf '0000000100000000000000%02X' $((16 + i)))
	wrun WALG_FILE_PREFIX="$T/wrepo" WALG_DOWNLOAD_CONCURRENCY=1 -- wal-fetch "$s" "$T/fs2/pg_wal/RECOVERYXLOG"
	expect_rc 0 "wal-fetch $s after the prefetcher met a full disk"
	assert_same_file "$T/segs/$s" "$T/fs2/pg_wal/RECOVERYXLOG" "wal-fetch $s after the prefetcher met a full disk"
done
pf=$(find "$T/fs2/pg_wal/.wal-g" -type f 2>/dev/null | wc -l)
ok "prefetch into a full disk: the next three segments identical ($pf files left in .wal-g)"

# ---- wal-push into a full repository -----------------------------------------------------------
small_fs "$T/fs3"
mkdir -p "$T/fs3/repo"
fill_to "$T/fs3" 4096
mkdir -p "$T/pw"
s=000000010000000000000030
fake_segment "$s" 16777216 "$T/pw/$s"
wrun WALG_FILE_PREFIX="$T/fs3/repo" WALG_COMPRESSION_METHOD=lz4 -- wal-push "$T/pw/$s"
expect_rc 1 "wal-push of an incompressible segment into a repository with 4 MiB free"
assert_contains "$W_ERR" "$T/fs3/repo" "wal-push into a full repository: the message names the path"
visible=$(find "$T/fs3/repo" -type f ! -name '.*' ! -name walc_cluster.json | wc -l)
assert_eq 0 "$visible" "wal-push into a full repository: visible objects (the cluster marker aside)"
hidden=$(find "$T/fs3/repo" -type f -name '.*' | wc -l)
assert_eq 0 "$hidden" "wal-push into a full repository: temporaries left"
rm -f "$T/fs3/filler"
wrun WALG_FILE_PREFIX="$T/fs3/repo" WALG_COMPRESSION_METHOD=lz4 -- wal-push "$T/pw/$s"
expect_rc 0 "wal-push retry with space freed"
wrun WALG_FILE_PREFIX="$T/fs3/repo" -- wal-fetch "$s" "$T/pw/back"
expect_rc 0 "wal-fetch of the retried segment"
assert_same_file "$T/pw/$s" "$T/pw/back" "wal-push retry after a full disk"
ok "wal-push into a full repository: exit 1 naming the path, nothing visible, no temporary; the retry succeeds"
log "all done in $((SECONDS - START))s"
