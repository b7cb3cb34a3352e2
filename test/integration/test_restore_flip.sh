#!/usr/bin/env bash
# A restore holds every file it writes to files_metadata.json (issue 42 §2): with each codec
# (none and brotli carry no checksum of their own, lz4 and zstd do), a byte flipped in a tar
# partition of a full backup fails backup-fetch of the full, and one flipped in a delta's
# partition fails the restore of the chain: exit 1 naming the partition (and, with no
# compression, the file and both checksums), no global/pg_control written. A byte flipped in
# the full's copy of a file that the delta only increments fails the chain's restore at the
# full's level. The clean chains restore, and the uncompressed one recovers to its source's dump.
. "$(dirname "$0")/lib.sh"
it_setup restore_flip

CODECS=(none brotli lz4 zstd)
for c in "${CODECS[@]}"; do mkdir -p "$T/repo-$c"; done
walc_wrapper WALG_FILE_PREFIX="$T/repo-none" WALG_COMPRESSION_METHOD=none
pg_own "$T"
pgbench_source 1 archive.log # archives into repo-none through walc

push() { # CODEC: backup-push into repo-CODEC (deltas of one step); prints the backup's name
	wrun_pg WALG_FILE_PREFIX="$T/repo-$1" WALG_COMPRESSION_METHOD="$1" WALG_DELTA_MAX_STEPS=1 \
		PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 0 "backup-push ($1)"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
declare -A FULL DELTA
for c in "${CODECS[@]}"; do FULL[$c]=$(push "$c"); done
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -n -t 300 -c 2 postgres >"$T/log/pgbench.log" 2>&1 ||
	fail "pgbench"
psqlc "$PORT" "CREATE TABLE after_full AS SELECT g, md5(g::text) v FROM generate_series(1, 5000) g; CHECKPOINT"
for c in "${CODECS[@]}"; do
	DELTA[$c]=$(push "$c")
	[[ ${DELTA[$c]} == *_D_${FULL[$c]:5:24} ]] || fail "$c: the second push must be a delta: ${DELTA[$c]}"
done
last=$(switch_wal "$PORT")
wait_archived "$SRC" "$last"
dump_norm "$PORT" >"$T/source.sql"
pg_stop "$SRC"
log "full and delta backups with ${CODECS[*]}"

# The clean chains restore; the uncompressed one recovers to the source's last write.
for c in lz4 zstd brotli; do
	wrun WALG_FILE_PREFIX="$T/repo-$c" -- backup-fetch "$T/clean-$c" "${DELTA[$c]}"
	expect_rc 0 "clean chain ($c)"
	[ -s "$T/clean-$c/global/pg_control" ] || fail "clean chain ($c): no pg_control"
done
restore_start "$T/clean-none" "${DELTA[none]}" WALG_FILE_PREFIX="$T/repo-none" -- \
	"recovery_target_timeline = 'latest'"
# shellcheck disable=SC2153 # RPORT is set by restore_start
assert_dump_eq "$T/source.sql" "$RPORT" "clean uncompressed chain"
pg_stop "$T/clean-none"
ok "clean chains restore with every codec"

largest_part() { # REPO BACKUP: the key of its largest ordinary tar partition
	find "$1/basebackups_005/$2/tar_partitions" -name 'part_*' -printf '%s %p\n' | sort -n | tail -n 1 | cut -d' ' -f2
}
# flip_in CODEC PART [NAMES]: flips a byte of PART, in the middle of its largest member's
# content (of those in the file NAMES) when uncompressed, else in the middle of the object;
# prints the offset and the member's name (none when compressed); fails when no member fits
flip_in() {
	local at=()
	if [ "$1" = none ]; then
		read -r -a at < <("$PY" "$IT_DIR/restore_damage.py" largest "$2" ${3:+"$3"}) || return 1
	else
		at=($(($(stat -c %s "$2") / 2)))
	fi
	flip_byte "$2" "${at[0]}"
	echo "${at[*]}"
}
# refused CODEC BACKUP KEY MEMBER WHAT: backup-fetch BACKUP from dmg-CODEC fails naming the
# object KEY (and MEMBER, with both checksums, when given), leaving no pg_control
refused() {
	local dest=$T/out-$1
	rm -rf "$dest"
	wrun WALG_FILE_PREFIX="$T/dmg-$1" -- backup-fetch "$dest" "$2"
	expect_rc 1 "$5"
	assert_contains "$W_ERR" "${3#"$T/dmg-$1/"}" "$5: the partition is named"
	if [ -n "$4" ]; then
		assert_match "$W_ERR" "$4: (content|increment) is xxh3-128:[0-9a-f]{32}, " "$5: the file is named"
		assert_match "$W_ERR" "files_metadata.json('s IncrementChecksum)? says xxh3-128:" "$5: the recorded sum"
	fi
	assert_absent "$dest/global/pg_control" "$5"
	[ "$(grep -c '^ERROR' <<<"$W_ERR")" = 1 ] || fail "$5: one error line, got: $W_ERR"
	log "$5: $(grep '^ERROR' <<<"$W_ERR" | cut -c 1-240)"
}
clone() { rm -rf "$T/dmg-$1"; cp -a "$T/repo-$1" "$T/dmg-$1"; }
meta() { # CODEC BACKUP KEY [not]: restore_damage.py files of that backup's files_metadata.json
	"$PY" "$IT_DIR/restore_damage.py" files "$T/dmg-$1/basebackups_005/$2/files_metadata.json" "${@:3}"
}

for c in "${CODECS[@]}"; do
	clone "$c"
	part=$(largest_part "$T/dmg-$c" "${FULL[$c]}")
	read -r off member < <(flip_in "$c" "$part")
	refused "$c" "${FULL[$c]}" "$part" "${member:-}" "flipped byte in the full ($c)"
	flip_byte "$part" "$off"
	# the delta: with no compression, a whole file it stored (increments: below)
	part=$(largest_part "$T/dmg-$c" "${DELTA[$c]}")
	meta "$c" "${DELTA[$c]}" IsIncremented not >"$T/whole"
	read -r off member < <(flip_in "$c" "$part" "$T/whole") || fail "$c: no whole file in $part"
	if [ "$c" != none ]; then
		# The middle of a compressed object may decode into bytes no check covers (a tar
		# member's padding, an unused header field): then the restore must equal the clean
		# one, never differ while it says success.
		rm -rf "$T/out-$c"
		wrun WALG_FILE_PREFIX="$T/dmg-$c" -- backup-fetch "$T/out-$c" "${DELTA[$c]}"
		if [ "$W_RC" = 0 ]; then
			diff -r --no-dereference -x postgresql.auto.conf "$T/clean-$c" "$T/out-$c" >"$T/flip-diff" 2>&1 ||
				{ head "$T/flip-diff" >&2; fail "flipped byte in the delta ($c): restored with exit 0 and different files"; }
			log "flipped byte in the delta, chain restore ($c): it decoded into bytes no file holds; the restore is the clean one"
			continue
		fi
	fi
	refused "$c" "${DELTA[$c]}" "$part" "${member:-}" "flipped byte in the delta, chain restore ($c)"
done
ok "a flipped byte fails the restore of the full and of the chain with every codec"

# flip_any NAMES BACKUP WHAT: in the uncompressed copy, a byte flipped in the largest file of
# NAMES that a partition of BACKUP holds; the chain's restore then fails naming it
flip_any() {
	local part found="" off member
	for part in "$T/dmg-none/basebackups_005/$2/tar_partitions"/part_*; do
		if read -r off member < <(flip_in none "$part" "$1"); then
			found=$part
			break
		fi
	done
	[ -n "$found" ] || fail "$3: no partition of $2 holds one of $(wc -l <"$1") files"
	refused none "${DELTA[none]}" "$found" "$member" "$3"
}
clone none
meta none "${DELTA[none]}" IsIncremented >"$T/incremented"
[ -s "$T/incremented" ] || fail "the delta increments no file"
flip_any "$T/incremented" "${DELTA[none]}" "damaged increment (its IncrementChecksum)"
wrun WALG_FILE_PREFIX="$T/dmg-none" -- backup-verify "${DELTA[none]}"
expect_rc 1 "backup-verify of the damaged increment"
assert_match "$W_OUT" "^PROBLEM .*: increment is xxh3-128:" "backup-verify names the increment"
ok "a damaged increment fails the chain's restore and backup-verify"

# The full's copy of a file the delta only increments: read for the chain, checked there.
clone none
flip_any "$T/incremented" "${FULL[none]}" "flipped base of an increment, chain restore"
ok "the chain's lower level checks the files it supplies"
