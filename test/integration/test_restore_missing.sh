#!/usr/bin/env bash
# A restore checks that it got everything files_metadata.json lists (issue 42 §2): a tar
# partition that TarFileSets lists but storage lacks fails backup-fetch of the full and of a
# delta chain that needs files from it; a file removed from its partition (TarFileSets still
# listing it) fails the restore naming the file; --delta checks what it writes, and a failed
# --delta leaves no pg_control behind (the old one goes before any file is changed); a backup
# with no files metadata whose backup_label.tar is gone is refused. Each: exit 1, one error
# line naming the object, no global/pg_control. Uncompressed partitions of
# about 4 MB, so the backup has several.
. "$(dirname "$0")/lib.sh"
it_setup restore_missing

mkdir -p "$T/repo"
E=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=none WALG_TAR_SIZE_THRESHOLD=4000000
	WALG_DELTA_MAX_STEPS=1)
walc_wrapper "${E[@]}"
pg_own "$T"
pgbench_source 1 archive.log

push() { # backup-push; prints the backup's name
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 0 "backup-push"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
FULL=$(push)
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -n -t 300 -c 2 postgres >"$T/log/pgbench.log" 2>&1 ||
	fail "pgbench"
psqlc "$PORT" "CHECKPOINT"
DELTA=$(push)
[[ $DELTA == *_D_${FULL:5:24} ]] || fail "the second push must be a delta: $DELTA"
E+=(WALG_WITHOUT_FILES_METADATA=true)
NOFM=$(push)
pg_stop "$SRC"
nparts=$(find "$T/repo/basebackups_005/$FULL/tar_partitions" -name 'part_*' | wc -l)
[ "$nparts" -ge 3 ] || fail "the full backup should have several partitions, has $nparts"

clone() { rm -rf "$T/dmg"; cp -a "$T/repo" "$T/dmg"; }
# refused BACKUP WHAT NEEDLE...: backup-fetch BACKUP from the damaged copy fails with one error
# line holding every NEEDLE, and leaves no pg_control
refused() {
	local backup=$1 what=$2 n
	shift 2
	rm -rf "$T/out"
	wrun WALG_FILE_PREFIX="$T/dmg" -- backup-fetch "$T/out" "$backup"
	expect_rc 1 "$what"
	for n in "$@"; do assert_contains "$W_ERR" "$n" "$what"; done
	[ "$(grep -c '^ERROR' <<<"$W_ERR")" = 1 ] || fail "$what: one error line, got: $W_ERR"
	assert_absent "$T/out/global/pg_control" "$what"
	log "$what: $(grep '^ERROR' <<<"$W_ERR" | cut -c 1-240)"
}
meta() { # BACKUP KEY [not]: restore_damage.py files of BACKUP's files_metadata.json in the copy
	"$PY" "$IT_DIR/restore_damage.py" files "$T/dmg/basebackups_005/$1/files_metadata.json" "${@:2}"
}
tp() { echo "basebackups_005/$1/tar_partitions"; }

# 1. A partition gone: the full's restore, and the chain's when the delta needs its files.
clone
meta "$DELTA" IsIncremented >"$T/incremented"
[ -s "$T/incremented" ] || fail "the delta increments no file"
gone=""
for part in "$T/dmg/$(tp "$FULL")"/part_*; do
	if "$PY" "$IT_DIR/restore_damage.py" largest "$part" "$T/incremented" >/dev/null; then
		gone=$(basename "$part")
		rm "$part"
		break
	fi
done
[ -n "$gone" ] || fail "no partition of the full holds a file the delta increments"
refused "$FULL" "missing partition, full" "tar partition $(tp "$FULL")/$gone is missing" \
	"files_metadata.json lists it"
refused "$DELTA" "missing partition, chain" "tar partition $(tp "$FULL")/$gone is missing"
ok "a missing partition fails the restore of the full and of the chain"

# 2. A member removed from its partition, which TarFileSets still lists.
clone
part=$(find "$T/dmg/$(tp "$FULL")" -name 'part_*' | sort | head -n 1)
meta "$FULL" IsIncremented not >"$T/whole"
read -r _ member < <("$PY" "$IT_DIR/restore_damage.py" largest "$part" "$T/whole") ||
	fail "no file to remove from $part"
"$PY" "$IT_DIR/restore_damage.py" drop "$part" "$part.new" "$member" || fail "drop $member"
mv "$part.new" "$part"
refused "$FULL" "missing member" "backup $FULL: files_metadata.json lists $member as stored in this backup, but no tar partition held it"
# backup-verify says the same
wrun WALG_FILE_PREFIX="$T/dmg" -- backup-verify "$FULL"
expect_rc 1 "backup-verify of the missing member"
assert_contains "$W_OUT" "$member: listed as stored, but no tar partition holds it" "backup-verify"
ok "a member missing from its partition fails the restore"

# 3. --delta writes only what differs, and holds it to files_metadata.json as well.
clone
wrun WALG_FILE_PREFIX="$T/dmg" -- backup-fetch "$T/node" "$FULL"
expect_rc 0 "restore for --delta"
read -r off member < <("$PY" "$IT_DIR/restore_damage.py" largest "$part" "$T/whole")
printf 'changed' | dd of="$T/node$member" bs=1 seek=100 conv=notrunc status=none
flip_byte "$part" "$off"
wrun WALG_FILE_PREFIX="$T/dmg" -- backup-fetch --delta "$T/node" "$FULL"
expect_rc 1 "--delta over a flipped byte"
assert_contains "$W_ERR" "$(tp "$FULL")/$(basename "$part")" "--delta: the partition is named"
assert_contains "$W_ERR" "$member: content is xxh3-128:" "--delta: the file is named"
assert_absent "$T/node/global/pg_control" "a failed --delta"
flip_byte "$part" "$off"
wrun WALG_FILE_PREFIX="$T/dmg" -- backup-fetch --delta "$T/node" "$FULL"
expect_rc 0 "--delta again, the partition repaired: $W_ERR"
[ -s "$T/node/global/pg_control" ] || fail "--delta: no pg_control"
cmp -s "$T/node$member" <(cd "$T/dmg/$(tp "$FULL")" && tar -xOf "$(basename "$part")" "$member" 2>/dev/null) ||
	fail "--delta: $member is not the backup's copy"
ok "--delta checks what it writes; a failed one leaves no pg_control"

# 4. A backup without files metadata (nothing lists its partitions) whose backup_label.tar is
# gone: PostgreSQL would start from pg_control's checkpoint, not from the backup's start.
clone
rm "$T/dmg/$(tp "$NOFM")"/backup_label.tar
refused "$NOFM" "no backup_label" "backup $NOFM has no backup_label in any tar partition"
ok "a backup without backup_label is not restored"
