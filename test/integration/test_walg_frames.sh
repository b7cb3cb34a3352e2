#!/usr/bin/env bash
# Partitions cut into compression frames (issue 20: ranged reads for delta restores) stay
# WAL-G's format. walc backup-push with zstd and with no compression, in the clear: the files
# record their frames' offsets (FrameOffset), a partition holds several frames, each recorded
# offset starts a frame that zstd's command-line tool decodes alone (and a tar member), and
# the whole partition decodes too. lz4 is never cut (WAL-G v3.0.9 reads one lz4 frame only):
# no offsets are recorded. With the WAL-G binary ($WALC_WALG, default
# <repo>/../shared/tools/wal-g), WAL-G v3.0.9 restores each backup to exactly the files walc
# restores; without it that part says "skipped".
. "$(dirname "$0")/lib.sh"
it_setup walg_frames

WALG=${WALC_WALG:-$ROOT/../shared/tools/wal-g}
pgbench_cluster 3
psqlc "$PORT" "CREATE TABLE many AS SELECT g, md5(g::text) h FROM generate_series(1, 100) g"
for i in $(seq 1 40); do psqlc "$PORT" "CREATE TABLE small_$i AS SELECT * FROM many"; done
psqlc "$PORT" "CHECKPOINT"
pg_own "$T"

for codec in zstd none lz4; do
	repo=$T/repo-$codec
	mkdir -p "$repo"
	pg_own "$repo"
	E=(WALG_FILE_PREFIX="$repo" WALG_COMPRESSION_METHOD="$codec")
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
	expect_rc 0 "backup-push ($codec)"
	name=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
	b=$repo/basebackups_005/$name
	# Every recorded offset of a partition, and that partition's file, as "PART OFFSET" lines.
	"$PY" - "$b/files_metadata.json" >"$T/frames-$codec" <<'EOF'
import json, sys
meta = json.load(open(sys.argv[1]))
for part, members in meta["TarFileSets"].items():
    for off in sorted({meta["Files"][m]["FrameOffset"] for m in members
                       if "FrameOffset" in meta["Files"].get(m, {})}):
        print(part, off)
EOF
	most=$(cut -d' ' -f1 "$T/frames-$codec" | sort | uniq -c | sort -rn | awk 'NR == 1 { print $1 }')
	case $codec in
	zstd) cli=(zstd -d -q -c) ;;
	none) cli=(cat) ;;
	lz4) cli=(lz4 -d -q -c) ;;
	esac
	if [ "$codec" = lz4 ]; then
		[ ! -s "$T/frames-$codec" ] || fail "lz4 partitions must not be cut: $(head -n 3 "$T/frames-$codec")"
	else
		[ "${most:-0}" -ge 3 ] || fail "$codec: no partition holds 3 frames or more: $(cat "$T/frames-$codec")"
	fi
	while read -r part off; do
		f=$b/tar_partitions/$part
		# from each recorded offset the rest decodes alone and starts with a tar member
		tail -c +$((off + 1)) "$f" | "${cli[@]}" >"$T/rest.tar" ||
			fail "$codec: $part from offset $off does not decode with ${cli[0]}"
		tar -tf "$T/rest.tar" >/dev/null 2>&1 || fail "$codec: $part from offset $off is not a tar stream"
	done <"$T/frames-$codec"
	for f in "$b"/tar_partitions/part_*; do
		"${cli[@]}" "$f" | tar -tf - >/dev/null || fail "$codec: $(basename "$f") does not decode whole"
	done
	ok "$codec: $(wc -l <"$T/frames-$codec") recorded frames, each read from its offset with ${cli[0]}"

	mkdir -m 700 "$T/walc-$codec"
	wrun "${E[@]}" -- backup-fetch "$T/walc-$codec" "$name"
	expect_rc 0 "walc backup-fetch ($codec)"
	if [ -x "$WALG" ]; then
		mkdir -m 700 "$T/walg-$codec"
		env -i PATH=/usr/bin:/bin HOME="$T/home" "${E[@]}" "$WALG" backup-fetch "$T/walg-$codec" "$name" \
			>"$T/log/walg-fetch-$codec.log" 2>&1 || { tail "$T/log/walg-fetch-$codec.log" >&2; fail "WAL-G backup-fetch ($codec)"; }
		# what walc adds or leaves out on purpose: pg_wal/archive_status (a startable layout),
		# tablespace_map (it would link the restore to the recorded, possibly live, location)
		rm -f "$T/walg-$codec/tablespace_map"
		rmdir "$T/walc-$codec/pg_wal/archive_status" 2>/dev/null || true
		diff -r --no-dereference "$T/walc-$codec" "$T/walg-$codec" >"$T/diff-$codec" 2>&1 ||
			{ head "$T/diff-$codec" >&2; fail "$codec: WAL-G restores other files than walc"; }
		ok "$codec: WAL-G v3.0.9 restores the framed backup to the same files as walc"
	else
		echo "skipped: no WAL-G binary at $WALG (set WALC_WALG to run the WAL-G restore)"
	fi
done
pg_stop "$T/src"
log "framed partitions ok"
