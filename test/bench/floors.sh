# shellcheck shell=bash
# The machine's own floors, measured in bench_full's rotation beside the tools (issue 49; sourced
# by run.sh), on the bytes a full restore writes: the dataset's files (as the limit's tar takes
# them) in one tar file made before the runs, not timed.
#   - CPU floor (op backup, tool "floor"): that file through zstd at walc's level (3) on every
#     core, read from the page cache, written to /dev/null: compression alone, no reading of
#     files, no storage;
#   - disk floor (op restore, tool "floor"): that file written with dd from the page cache and
#     synced (conv=fsync): the disk alone, one sequential file.
# The report prints walc's full backup / CPU floor and full restore / disk floor.

floor_tar() { echo "$T/$1/floor.tar"; }

floor_prepare() { # DS
	local ds=$1
	# tar exits 1 for "file changed as we read it": a running cluster's files do
	tar -C "$T/$ds/pgdata" -cf "$(floor_tar "$ds")" --warning=no-file-changed --exclude=./pg_wal/* \
		--exclude=./pg_stat_tmp/* --exclude=./pg_replslot/* --exclude=./postmaster.pid \
		--exclude=./postmaster.opts . || [ $? = 1 ] || fail "tar of $ds for the floors"
}

floor_cpu() { # DS RUN
	local ds=$1 run=$2 f
	f=$(floor_tar "$ds")
	cat "$f" >/dev/null # into the page cache, outside the timing
	# shellcheck disable=SC2016
	timed "$ds-floor-cpu-$run" bash -c 'zstd -3 -T"$2" -q -c "$1" >/dev/null' floor "$f" "$CORES"
	sample "$ds" backup floor zstd "CPU: zstd -3 -T$CORES, page cache to /dev/null" "$run" "$(bytes_of "$f")"
}

floor_disk() { # DS RUN
	local ds=$1 run=$2 f out=$T/floor.out
	f=$(floor_tar "$ds")
	rm -f "$out"
	cat "$f" >/dev/null
	timed "$ds-floor-disk-$run" dd if="$f" of="$out" bs=1M conv=fsync status=none
	sample "$ds" restore floor none "disk: dd from the page cache, conv=fsync" "$run" "$(bytes_of "$f")"
	rm -f "$out"
}
