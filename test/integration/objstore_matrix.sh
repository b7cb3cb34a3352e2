# shellcheck shell=bash
# The storage matrix of test_s3_backup_matrix.sh and test_wal_matrix.sh, on the store named by
# $STORE (az: Azurite, gcs: the GCS emulator, sftp: OpenSSH's sshd), sourced by
# test_az_matrix.sh, test_gcs_matrix.sh and test_sftp_matrix.sh. One server; one source cluster (1 MiB segments) whose archive_command
# pushes every WAL file into 6 repositories (every codec, three without a libsodium key and
# three with one, in both key transforms) and keeps a golden copy. Then:
#   - every repository lists exactly the archived WAL files, and each file fetched back from
#     two repositories (one with a key, one without) is byte-identical;
#   - a local full backup, a delta on it and a remote (BASE_BACKUP) backup, each fetched into
#     a new directory and recovered to the end of the archive: pg_dumpall equal to the source,
#     amcheck clean; a delta restore (backup-fetch --delta) of the delta onto the restored
#     full backup, equal too, reading only the changed files' zstd frames (Range GETs);
#   - PITR to a restore point of an encrypted repository: the rows written after it are absent;
#   - retention: delete retain FULL 1 --confirm leaves the newest full backup and the WAL it
#     needs (batched, parallel or pipelined deletes counted in the log), which still restores
#     equal;
#   - st put / ls / cat / rm on the store.
. "$(dirname "$0")/objstore_lib.sh"
store_setup "${STORE}matrix"
START=$SECONDS

case $STORE in
az) az_start ;;
gcs) gcs_start ;;
sftp) sftp_start ;;
*) fail "STORE: expected az, gcs or sftp, got \"$STORE\"" ;;
esac
# Every codec and key transform once, not each codec with and without a key (test_wal_matrix
# does that on file storage): what this store sees of a codec is an object's name and bytes,
# and ten repositories meant ten wal-push processes per segment. The three without a key come
# first, the three with one after (the fetches below pair them).
CONFIGS=(zstd lzma none lz4-hex zstd-base64 brotli-hex)
mkdir -p "$T/conf" "$T/golden"
head -c 32 /dev/urandom >"$T/key.bin"
od -An -v -tx1 "$T/key.bin" | tr -d ' \n' >"$T/key.hex"
base64 -w0 "$T/key.bin" >"$T/key.base64"
chmod 600 "$T/key.hex" "$T/key.base64"
for c in "${CONFIGS[@]}"; do
	# a folder on a file system (SFTP's) is made by its operator, as for file storage
	[ "$STORE" = sftp ] && mkdir -p "$SFTP_ROOT/$c"
	{
		store_env "$STORE" "$c"
		echo "WALG_COMPRESSION_METHOD=${c%%-*}"
		echo "WALG_PG_WAL_SIZE=1"
		echo "WALG_UPLOAD_CONCURRENCY=1" # one data directory, six repositories: no shared markers
		echo "WALG_DELTA_MAX_STEPS=1"
		case $c in *-*)
			echo "WALG_LIBSODIUM_KEY_PATH=$T/key.${c#*-}"
			echo "WALG_LIBSODIUM_KEY_TRANSFORM=${c#*-}"
			;;
		esac
	} >"$T/conf/$c.env"
done
[ "$STORE" = sftp ] && pg_own "$SFTP_ROOT"
cat >"$T/conf/archive.sh" <<EOF
#!/bin/sh
for c in ${CONFIGS[*]}; do
	env HOME='$T/home' PGDATA="\$PWD" \$(cat "$T/conf/\$c.env") "$WALC_PG" wal-push "\$1" 2>>"$T/log/push-\$c.log" ||
		{ echo "wal-push \$1 failed for \$c" >>"$T/archive-failed"; exit 1; }
done
f=\$(basename "\$1")
cp "\$1" "$T/golden/.\$f" && mv "$T/golden/.\$f" "$T/golden/\$f"
EOF
chmod 755 "$T/conf/archive.sh"
pg_own "$T"
cfg() { cat "$T/conf/$1.env"; }

pg_init "$T/src" --wal-segsize=1 --data-checksums
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" "max_wal_senders = 4" \
	"archive_command = '$T/conf/archive.sh %p'" "fsync = off"
pg_start "$T/src" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 1 -q postgres >/dev/null 2>&1 || fail "pgbench -i"
psqlc "$PORT" "CREATE TABLE marks (n int, at text)"

push() { # CONFIG [remote|full]: prints the backup's name
	local dir="$T/src" steps=1
	[ "${2:-}" = remote ] && dir=""
	[ "${2:-}" = full ] && steps=0
	# shellcheck disable=SC2046
	wrun_pg $(cfg "$1") WALG_DELTA_MAX_STEPS=$steps PGHOST="$T" PGPORT="$PORT" PGUSER=postgres -- \
		backup-push ${dir:+"$dir"}
	expect_rc 0 "backup-push $1 ${2:-}"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
load() { as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -n -c 2 -t 200 postgres >/dev/null 2>&1 || fail "pgbench"; }

FULL=$(push zstd)
OLD=$(push lz4-hex) # retention deletes it, keeping the newest full backup
load
DELTA=$(push zstd)
case $DELTA in *_D_*) ;; *) fail "the second zstd backup is not a delta: $DELTA" ;; esac
KFULL=$(push zstd-base64)
psqlc "$PORT" "INSERT INTO marks SELECT g, 'before' FROM generate_series(1, 100) g"
psqlc "$PORT" "SELECT pg_create_restore_point('walc_rp')" >/dev/null
psqlc "$PORT" "INSERT INTO marks SELECT g, 'after' FROM generate_series(1, 50) g"
load
REMOTE=$(push brotli-hex remote) # the first of its repository: a full one
load
psqlc "$PORT" "CHECKPOINT"
dump_norm "$PORT" >"$T/src.dump"
NEWEST=$(push lz4-hex full) # a second full backup there, for retention
last=$(switch_wal "$PORT")
wait_archived "$T/src" "$last" 180 "$T/archive-failed"
pg_stop "$T/src"
log "backups: full $FULL, delta $DELTA, encrypted $KFULL, remote $REMOTE, newest $NEWEST"

# ---- the WAL of every repository -------------------------------------------------------------
# Every repository lists exactly the archived files; each file is fetched back from two of the
# six (the k-th repository fetches the files whose index is k modulo 3): every codec and key
# round-trips WAL on this store, and every file once with and once without a key, at a third of
# the wal-fetch processes (under CI's sanitized build all of them took minutes). No prefetch:
# the next files are not the ones fetched next (the restores below prefetch).
mapfile -t GOLDEN < <(cd "$T/golden" && ls | LC_ALL=C sort)
nseg=0
for k in "${!CONFIGS[@]}"; do
	c=${CONFIGS[$k]}
	# shellcheck disable=SC2046
	wrun $(cfg "$c") -- st ls wal_005/
	expect_rc 0 "st ls wal_005/ of $c"
	assert_eq "$(printf '%s\n' "${GOLDEN[@]}")" \
		"$(awk '$1 == "obj" { print $NF }' <<<"$W_OUT" | sed -E 's/\.(lz4|zst|br|lzma)$//' | LC_ALL=C sort)" \
		"$c: the files under wal_005/"
	for ((i = k % 3; i < ${#GOLDEN[@]}; i += 3)); do
		s=${GOLDEN[$i]}
		# shellcheck disable=SC2046
		wrun $(cfg "$c") WALG_DOWNLOAD_CONCURRENCY=1 -- wal-fetch "$s" "$T/fetched"
		expect_rc 0 "wal-fetch $s from $c"
		cmp -s "$T/golden/$s" "$T/fetched" || fail "$c: wal-fetch $s differs from what was archived"
		nseg=$((nseg + 1))
	done
done
[ "${#GOLDEN[@]}" -ge 20 ] || fail "only ${#GOLDEN[@]} WAL files were archived"
log "ok: ${#GOLDEN[@]} WAL files listed in each of ${#CONFIGS[@]} repositories (every codec, with and without a key), $nseg fetches byte-identical"

# ---- restores -------------------------------------------------------------------------------
END="recovery_target_timeline = 'latest'" # no target: recover to the end of the archive
restore() { # CONFIG NAME DIR [LINE...]: fetch, recover (to the end by default), start on RPORT
	local c=$1 name=$2 dir=$3
	shift 3
	[ $# -gt 0 ] || set -- "$END"
	# shellcheck disable=SC2046
	restore_start "$dir" "$name" $(cfg "$c") -- "$@"
}
equal() { # DIR WHAT
	dump_norm "$RPORT" >"$1.dump"
	cmp -s "$T/src.dump" "$1.dump" || fail "$2: the restored cluster differs from the source"
	amcheck_all "$RPORT"
}
restore zstd "$FULL" "$T/r-full"
equal "$T/r-full" "full backup $FULL"
pg_stop "$T/r-full"
log "ok: full backup restored and recovered to the end: equal, amcheck clean"
restore zstd "$DELTA" "$T/r-delta"
equal "$T/r-delta" "delta backup $DELTA"
pg_stop "$T/r-delta"
rm -rf "$T/r-delta"
log "ok: delta backup restored: equal"
# shellcheck disable=SC2046
wrun $(cfg zstd) WALG_LOG_LEVEL=DEVEL -- backup-fetch --delta "$T/r-full" "$DELTA"
expect_rc 0 "backup-fetch --delta $DELTA onto the restored full backup"
assert_match "$W_ERR" "delta restore: [0-9]+ of [0-9]+ files intact" "delta restore summary"
# A cold copy of the full backup with one small file changed: zstd in the clear, so the
# delta restore reads only that file's frame (a Range GET), and the copy is whole again.
mkdir -m 700 "$T/r-one" "$T/r-cold"
# shellcheck disable=SC2046
wrun $(cfg zstd) -- backup-fetch "$T/r-cold" "$FULL"
expect_rc 0 "cold restore of $FULL"
cp -a "$T/r-cold/." "$T/r-one/"
small=$(cd "$T/r-one" && find base -type f -size -16k -size +0 | sort | tail -n 1)
printf 'garbage' | dd of="$T/r-one/$small" bs=1 seek=10 conv=notrunc status=none
# shellcheck disable=SC2046
wrun $(cfg zstd) WALG_LOG_LEVEL=DEVEL -- backup-fetch --delta "$T/r-one" "$FULL"
expect_rc 0 "backup-fetch --delta $FULL with one changed file"
assert_match "$W_ERR" "extracting .*part_[0-9]+\.tar\.zst bytes [0-9]+ to [0-9]+" "ranged reads on $STORE"
cmp -s "$T/r-cold/$small" "$T/r-one/$small" || fail "$small not restored by the ranged read"
log "one changed file: $(printf '%s\n' "$W_ERR" | sed -nE 's/.*; (reading [0-9.]+ of [0-9.]+ MiB stored).*/\1/p')"
rm -rf "$T/r-one" "$T/r-cold"
recover_conf "$T/r-full" "$(cfg zstd | tr '\n' ' ')" "$END"
RPORT=$(free_port)
pg_start "$T/r-full" "$RPORT"
wait_not_in_recovery "$RPORT"
equal "$T/r-full" "delta restore of $DELTA"
pg_stop "$T/r-full"
rm -rf "$T/r-full"
log "ok: delta restore onto the restored full backup: equal"
restore brotli-hex "$REMOTE" "$T/r-remote"
equal "$T/r-remote" "remote backup $REMOTE"
pg_stop "$T/r-remote"
rm -rf "$T/r-remote"
log "ok: remote (BASE_BACKUP) backup restored: equal"
restore zstd-base64 "$KFULL" "$T/r-pitr" "recovery_target_name = 'walc_rp'"
assert_eq "100|0" "$(psqlc "$RPORT" "SELECT count(*) FILTER (WHERE at = 'before'), count(*) FILTER (WHERE at = 'after') FROM marks")" \
	"rows at the restore point"
amcheck_all "$RPORT"
pg_stop "$T/r-pitr"
rm -rf "$T/r-pitr"
log "ok: PITR to a restore point from an encrypted repository"

# ---- retention ------------------------------------------------------------------------------
# shellcheck disable=SC2046
wrun $(cfg lz4-hex) WALG_LOG_LEVEL=DEVEL WALG_UPLOAD_CONCURRENCY=4 -- delete retain FULL 1 --confirm
expect_rc 0 "delete retain FULL 1 --confirm"
cp "$T/.w_err" "$T/log/retain.log"
deleted=$(printf '%s\n' "$W_OUT" | grep -c '^deleted ' || true)
case $STORE in
az) batches=$(grep -c 'in one batch' "$T/log/retain.log" || true) ;;
gcs) batches=$(grep -c 'gcs answer: DELETE' "$T/log/retain.log" || true) ;;
sftp) batches=$(grep -c 'sftp: deleted [0-9]* objects' "$T/log/retain.log" || true) ;;
esac
[ "$deleted" -gt 5 ] || fail "delete retain FULL 1 deleted only $deleted objects"
[ "$batches" -ge 1 ] || fail "no batched (Azure), parallel (GCS) or pipelined (SFTP) deletes in the log"
assert_contains "$W_OUT" "$OLD" "the old backup is deleted"
# shellcheck disable=SC2046
wrun $(cfg lz4-hex) -- backup-list
expect_rc 0 "backup-list"
assert_eq 1 "$(printf '%s\n' "$W_OUT" | grep -c '^base_')" "backups left after retention"
assert_contains "$W_OUT" "$NEWEST" "the newest backup is kept"
restore lz4-hex "$NEWEST" "$T/r-newest"
equal "$T/r-newest" "the kept backup $NEWEST"
pg_stop "$T/r-newest"
rm -rf "$T/r-newest"
log "ok: retention deleted $deleted objects ($batches delete requests) and kept what $NEWEST needs"
# shellcheck disable=SC2046
wrun $(cfg none) -- delete everything FORCE --confirm
expect_rc 0 "delete everything FORCE --confirm"
for f in basebackups_005/ wal_005/; do
	# shellcheck disable=SC2046
	wrun $(cfg none) -- st ls -r "$f"
	assert_eq "" "$(printf '%s\n' "$W_OUT" | grep '^obj ' || true)" "st ls -r $f after delete everything"
done
log "ok: delete everything FORCE empties the repository"

# ---- st -------------------------------------------------------------------------------------
head -c 300000 /dev/urandom >"$T/blob"
# shellcheck disable=SC2046
wrun $(cfg zstd) -- st put "$T/blob" extra/blob
expect_rc 0 "st put"
# shellcheck disable=SC2046
wrun $(cfg zstd) -- st ls extra/
assert_match "$W_OUT" '^obj +[0-9]+ .* blob\.zst$' "st ls (names relative to the folder, as WAL-G)"
# shellcheck disable=SC2046
wrun $(cfg zstd) -- st cat --decompress extra/blob.zst
cmp -s "$T/blob" "$T/.w_out" || fail "st cat --decompress differs from st put's input"
# shellcheck disable=SC2046
wrun $(cfg zstd) -- st rm extra/
expect_rc 0 "st rm"
# shellcheck disable=SC2046
wrun $(cfg zstd) -- st ls extra/
assert_eq "" "$(printf '%s\n' "$W_OUT" | grep '^obj ' || true)" "st ls after st rm"
log "ok: st put, ls, cat, rm"
log "test_${STORE}_matrix passed in $((SECONDS - START)) s"
