# shellcheck shell=bash
# make bench section "remote" (sourced by run.sh; issue 17, acceptance 2 and 3): backup-push
# without PGDATA against PostgreSQL 17 (the trixie chroot of deploy/pgchroot.sh, through
# test/versions/lib.sh; with BENCH_PG=18 PostgreSQL 18 in the sid-bench chroot), walc on the
# host speaking to it over the socket:
#   - after BENCH_REMOTE_CHANGE of pgbench_accounts' rows changed (a contiguous range of aid),
#     the bytes BASE_BACKUP sends for a remote delta (INCREMENTAL, from WAL summaries) against
#     a remote full; then the chain restored by walc and by WAL-G (when present), every file's
#     sha256 compared;
#   - a remote full with the server's MAX_RATE at BENCH_REMOTE_RATE_MB MB/s
#     (WALG_DISK_RATE_LIMIT), without and with server-side zstd (WALG_REMOTE_COMPRESSION):
#     wall time and bytes on the wire, BENCH_RUNS times alternating, medians;
#   - the remote full against pg_basebackup and WAL-G (remote_peers.sh), samples in the report.
# Results: $OUT/remote.json and the log; docs/PERFORMANCE.md, "Remote backups".
#
#   BENCH_REMOTE_SCALE=$SCALE   pgbench scale of the PostgreSQL 17 cluster
#   BENCH_REMOTE_CHANGE=0.05    fraction of pgbench_accounts rows updated before the delta
#   BENCH_REMOTE_RATE_MB=20     MAX_RATE for the rate-limited fulls, MB/s

RM_SCALE=${BENCH_REMOTE_SCALE:-$SCALE}
RM_CHANGE=${BENCH_REMOTE_CHANGE:-0.05}
RM_RATE_MB=${BENCH_REMOTE_RATE_MB:-20}

# rm_push NAME VAR=VALUE...: remote backup-push timed; "NAME wall wire_bytes backup" on stdout
rm_push() {
	local what=$1 t0 t1 wire name
	shift
	sync
	t0=$(date +%s.%N)
	env HOME="$T/home" WALG_FILE_PREFIX="$T/rrepo" WALG_COMPRESSION_METHOD=zstd PGHOST="$T" \
		PGPORT="$RM_PORT" PGUSER=postgres "$@" "$WALC" backup-push >"$T/log/remote-$what.log" 2>&1 ||
		{ tail -n 20 "$T/log/remote-$what.log" >&2; fail "remote backup-push ($what)"; }
	t1=$(date +%s.%N)
	wire=$(sed -n 's/.*BASE_BACKUP sent .* (\([0-9]*\) bytes).*/\1/p' "$T/log/remote-$what.log" | tail -n 1)
	name=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/remote-$what.log" | tail -n 1)
	[ -n "$wire" ] && [ -n "$name" ] || fail "remote backup-push ($what): no byte count or name in its log"
	echo "$what $(printf '%.3f' "$(echo "$t1 - $t0" | bc)") $wire $name"
}

# rm_sums DIR: type, size and sha256 of every regular file under DIR, sorted
rm_sums() {
	(cd "$1" && find . -type f ! -name postmaster.pid -print0 | sort -z | xargs -0 sha256sum)
}

bench_remote() {
	local root=$PEER_ROOT
	RM_MAJOR=18 RM_WHERE="sid-bench chroot"
	if [ -z "$root" ]; then
		RM_MAJOR=17 RM_WHERE="trixie chroot"
		if ! root=$("$ROOT/deploy/pgchroot.sh" trixie 2>"$T/log/pgchroot-trixie.log"); then
			log "remote: skipped, no PostgreSQL 17 chroot ($(tail -n 1 "$T/log/pgchroot-trixie.log"))"
			return 0
		fi
	fi
	# In a subshell: test/versions/lib.sh makes every PostgreSQL program run in the chroot.
	(
		# shellcheck source=test/versions/lib.sh
		. "$ROOT/test/versions/lib.sh"
		pgv_use "$RM_MAJOR" "$root"
		bench_remote_run
	)
}

bench_remote_run() {
	local d=$T/r17 full delta rows n i a b ratio walg=$WALG
	RM_PORT=$(free_port)
	mkdir -p "$T/rrepo"
	pg_init "$d"
	pg_conf "$d" "wal_level = replica" "summarize_wal = on" "max_wal_senders = 4" \
		"max_wal_size = 4GB" "checkpoint_timeout = 1h" "fsync = off" "shared_buffers = 256MB"
	pg_start "$d" "$RM_PORT"
	log "remote: PostgreSQL $(psqlc "$RM_PORT" "SHOW server_version") ($RM_WHERE), pgbench -i -s $RM_SCALE"
	as_pg "$PGBIN/pgbench" -h "$T" -p "$RM_PORT" -U postgres -i -s "$RM_SCALE" -q postgres \
		>"$T/log/remote-pgbench.log" 2>&1 || { tail "$T/log/remote-pgbench.log" >&2; fail "pgbench -i (remote)"; }
	psqlc "$RM_PORT" "CHECKPOINT" >/dev/null
	read -r _ a full_wire full < <(rm_push full)
	log "remote: full $full: $a s, $full_wire bytes from the server"
	rows=$(psqlc "$RM_PORT" "SELECT count(*) FROM pgbench_accounts")
	n=$(echo "$rows * $RM_CHANGE / 1" | bc)
	psqlc "$RM_PORT" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= $n" >/dev/null
	psqlc "$RM_PORT" "CHECKPOINT" >/dev/null
	read -r _ b delta_wire delta < <(rm_push delta WALG_DELTA_MAX_STEPS=1)
	[[ $delta == *_D_* ]] || fail "remote: expected a delta, got $delta ($(grep -m1 'taking a full' "$T/log/remote-delta.log"))"
	ratio=$(printf '%.4f' "$(echo "scale=6; $delta_wire / $full_wire" | bc)")
	log "remote: delta $delta after $n of $rows rows changed: $b s, $delta_wire bytes ($ratio of the full)"

	# The same change as a local delta (page scan) of the same full: is reading pg_wal/summaries
	# worth it locally? The server's incremental read only what the summaries name.
	local t0 t1 local_s local_read
	sync
	t0=$(date +%s.%N)
	env HOME="$T/home" WALG_FILE_PREFIX="$T/rrepo" WALG_COMPRESSION_METHOD=zstd PGHOST="$T" \
		PGPORT="$RM_PORT" PGUSER=postgres WALG_DELTA_FROM_NAME="$full" "$WALC" backup-push "$d" \
		>"$T/log/remote-localdelta.log" 2>&1 || { tail "$T/log/remote-localdelta.log" >&2; fail "local delta"; }
	t1=$(date +%s.%N)
	local_s=$(printf '%.3f' "$(echo "$t1 - $t0" | bc)")
	# every relation file is read for the scan: the size of the tree walked
	local_read=$(sed -n 's/.*read [0-9.]* of \([0-9.]*\) MiB found.*/\1/p' "$T/log/remote-localdelta.log" | tail -n 1)
	log "remote: the same change as a local delta (page scan): $local_s s, $local_read MiB scanned"
	find "$T/rrepo/basebackups_005" -mindepth 1 -maxdepth 1 -newer "$T/log/remote-delta.log" -exec rm -rf {} +

	# the chain restored by walc and by WAL-G gives the same files
	local same="no WAL-G"
	mkdir -m 700 "$T/rw" "$T/rg"
	env HOME="$T/home" WALG_FILE_PREFIX="$T/rrepo" "$WALC" backup-fetch "$T/rw" "$delta" \
		>"$T/log/remote-fetch-walc.log" 2>&1 || fail "remote: walc backup-fetch $delta"
	rm_sums "$T/rw" >"$T/rw.sums"
	if [ -x "$walg" ]; then
		env -i PATH=/usr/bin:/bin HOME="$T/home" WALG_FILE_PREFIX="$T/rrepo" "$walg" backup-fetch "$T/rg" "$delta" \
			>"$T/log/remote-fetch-walg.log" 2>&1 || fail "remote: WAL-G backup-fetch $delta"
		# WAL-G v3.0.9 writes an empty tablespace_map for this chain (seen on PostgreSQL 17 and 18;
		# no tablespace either way): not a difference in what is restored
		local note=""
		if [ -f "$T/rg/tablespace_map" ] && [ ! -s "$T/rg/tablespace_map" ] && [ ! -e "$T/rw/tablespace_map" ]; then
			rm "$T/rg/tablespace_map"
			note=", WAL-G's empty tablespace_map left out"
		fi
		rm_sums "$T/rg" >"$T/rg.sums"
		if cmp -s "$T/rw.sums" "$T/rg.sums"; then same="identical ($(wc -l <"$T/rw.sums") files$note)"; else
			diff "$T/rw.sums" "$T/rg.sums" | head >&2
			fail "remote: walc and WAL-G restore the chain differently"
		fi
	fi
	rm -rf "$T/rw" "$T/rg"
	log "remote: chain restored by walc and WAL-G: $same"

	# MAX_RATE with and without server-side zstd, alternating
	local rate=$((RM_RATE_MB * 1000 * 1000)) plain=() zst=() plain_wire zst_wire w x
	for ((i = 0; i < RUNS; i++)); do
		for m in plain zstd; do
			if [ "$m" = plain ]; then
				read -r _ w x _ < <(rm_push "rate-plain-$i" WALG_DISK_RATE_LIMIT="$rate")
				plain+=("$w")
				plain_wire=$x
			else
				read -r _ w x _ < <(rm_push "rate-zstd-$i" WALG_DISK_RATE_LIMIT="$rate" WALG_REMOTE_COMPRESSION=zstd)
				zst+=("$w")
				zst_wire=$x
			fi
			log "remote: full at MAX_RATE $RM_RATE_MB MB/s, $m: $w s, $x bytes"
		done
		# keep the repository small: only the chain above is needed
		find "$T/rrepo/basebackups_005" -mindepth 1 -maxdepth 1 ! -name "$full*" ! -name "$delta*" -exec rm -rf {} +
	done
	local med_plain med_zst
	med_plain=$(printf '%s\n' "${plain[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	med_zst=$(printf '%s\n' "${zst[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	bench_remote_peers "$d" "$RM_PORT"
	pg_stop "$d"
	cat >"$OUT/remote.json" <<JSON
{"postgres": "$RM_MAJOR", "scale": $RM_SCALE, "rows": $rows, "changed_rows": $n,
 "full": {"name": "$full", "seconds": $a, "wire_bytes": $full_wire},
 "delta": {"name": "$delta", "seconds": $b, "wire_bytes": $delta_wire, "ratio": $ratio},
 "local_delta_same_change": {"seconds": $local_s, "scanned_mib": ${local_read:-null}},
 "restore_walc_vs_walg": "$same",
 "max_rate_mb_s": $RM_RATE_MB, "runs": $RUNS,
 "rate_plain": {"median_seconds": $med_plain, "seconds": [$(IFS=,; echo "${plain[*]}")], "wire_bytes": $plain_wire},
 "rate_zstd": {"median_seconds": $med_zst, "seconds": [$(IFS=,; echo "${zst[*]}")], "wire_bytes": $zst_wire}}
JSON
	log "remote: results in $OUT/remote.json"
	cat "$OUT/remote.json"
}
