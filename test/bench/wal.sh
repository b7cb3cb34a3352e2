# shellcheck shell=bash
# make bench section "wal" (sourced by run.sh): issues #6, #8 and #11 on 16 MiB segments, zstd,
# PostgreSQL 15 (or BENCH_PG's), all from one backlog of real data (docs/PERFORMANCE.md, "WAL"):
#   - backlog drain: the time PostgreSQL's archiver takes to empty a backlog of
#     BENCH_WAL_SEGMENTS .ready segments through walc wal-push, WALG_UPLOAD_CONCURRENCY 8 vs 1,
#     to file storage and to S3 (Ceph RGW);
#   - per-segment archiving latency: walc wal-push (archive_command), walc_archive + walc daemon
#     (archive_library), pgBackRest archive-push and WAL-G wal-push, one segment per call, from the gaps between
#     the archiver's successive .ready -> .done renames during a drain; with BENCH_PG=18 also
#     barman-cloud-wal-archive --zstd to S3 (a drain and one call per segment);
#   - recovery of the whole backlog from S3 through a proxy adding latency to every request,
#     wal-fetch with prefetch (default WALG_DOWNLOAD_CONCURRENCY) vs WALG_DOWNLOAD_CONCURRENCY=1,
#     walc's and WAL-G's (restore_command = wal-g wal-fetch on walc's repository) alternating.
#
#   BENCH_WAL_SEGMENTS=200       segments in the backlog (at least 16)
#   BENCH_WAL_RUNS=$RUNS         runs of every drain
#   BENCH_WAL_RECOVERY_RUNS=1    runs of every recovery (at most BENCH_WAL_RUNS)
#   BENCH_WAL_LATENCY_MS=20      latency the proxy adds to every S3 request during recovery
#
# shellcheck source=test/integration/s3lib.sh
. "$BENCH_DIR/../integration/s3lib.sh"

WAL_SEG_BYTES=16777216 # initdb's default, the size the issues are about
WAL_BUCKET=walbench
WAL_DPID="" WAL_RGW_DIR="" WAL_PROXY_PID="" WAL_PREV_EXIT_TRAP=""

# A failure stops what this section started before lib.sh's cleanup removes $T: the Ceph
# daemons are not children of this shell, and their files live under $T.
wal_cleanup() {
	local rc=$?
	set +e
	[ -z "$WAL_DPID" ] || kill "$WAL_DPID" 2>/dev/null
	[ -z "$WAL_PROXY_PID" ] || kill "$WAL_PROXY_PID" 2>/dev/null
	[ -z "$WAL_RGW_DIR" ] || "$S3_SERVERS/ceph-rgw.sh" stop "$WAL_RGW_DIR" >/dev/null 2>&1
	WAL_DPID="" WAL_PROXY_PID="" WAL_RGW_DIR=""
	return "$rc"
}

# wal_command PORT COMMAND: the archive_command from the next reload on
wal_command() {
	psqlc "$1" "ALTER SYSTEM SET archive_command = '$2'" >/dev/null
	psqlc "$1" "SELECT pg_reload_conf()" >/dev/null
}

# wal_mark DIR FROM TO: rename the backlog's archive_status files in one go. The archiver
# acts on .ready files only, and sleeps until a signal (or its 60 s timeout) once it has
# none: the renames cannot start a drain before the reload that wakes it up.
wal_mark() {
	"$PY" -c 'import os, sys
d, a, b = sys.argv[1] + "/pg_wal/archive_status/", sys.argv[2], sys.argv[3]
for s in open(sys.argv[4]).read().split():
    os.rename(d + s + a, d + s + b)' "$1" "$2" "$3" "$W/backlog"
}

wal_ready_left() { compgen -G "$1/pg_wal/archive_status/*.ready" >/dev/null; }

# wal_proc_cpu PID: "user_ticks sys_ticks", its own plus its waited-for children's (the
# archiver's children are archive_command's shell and what it runs), "0 0" when gone
wal_proc_cpu() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0 0; return; }
	s=${s##*) }
	awk '{ print $12 + $14, $13 + $15 }' <<<"$s"
}

# wal_busy: CPU ticks the whole machine has spent so far (the bench shares it with others)
wal_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }

wal_ticks_s() { awk -v t="$1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'; }

wal_archiver_pid() { pgrep -P "$(head -n 1 "$1/postmaster.pid")" -f 'archiver'; }

# wal_gaps DIR START: "COUNT [gaps in ms] FIRST_MS" between the archiver's successive completions, which
# are the times it renamed .ready to .done (the change time of the .done files). PostgreSQL
# logs its own "archived" line for archive_command only, not for an archive_library.
wal_gaps() {
	sed "s|^|$1/pg_wal/archive_status/|; s|\$|.done|" "$W/backlog" | xargs stat -c '%.9Z' 2>/dev/null | sort -n |
		awk -v t0="$2" '{
			if (n > 0) s = s (n > 1 ? "," : "") sprintf("%.1f", ($1 - p) * 1000)
			else first = ($1 - t0) * 1000
			p = $1; n++
		} END { printf "%d [%s] %.1f\n", n, s, first }'
}

# wal_sample OP TOOL SETTINGS RUN EXTRA_JSON: a sample (TM_* figures) with extra members
wal_sample() {
	printf '{"dataset":"wal","op":"%s","tool":"%s","codec":"zstd","settings":"%s","run":%s,"wall":%s,"user":%s,"sys":%s,"rss_kb":0,"bytes":%s,"name":"","stop_s":null,%s}\n' \
		"$1" "$2" "$3" "$4" "$TM_WALL" "$TM_USER" "$TM_SYS" "$((WAL_N * WAL_SEG_BYTES))" "$5" >>"$SAMPLES"
	log "  wal $1 $2 ($3) run $4: ${TM_WALL}s wall, $(echo "$TM_USER $TM_SYS" | awk '{printf "%.1f", $1 + $2}')s cpu"
}

# The backlog: a cluster with archiving failing accumulates WAL_N segments of inserted rows
# (text and hex, ~4.5× compressible with zstd -3). The rows are inserted again and again into a
# table truncated before each round, so pg_wal grows but the table does not.
wal_backlog() {
	local p pos target copy first seg0 s
	pg_init "$W/pg"
	WAL_PORT=$(free_port)
	p=$WAL_PORT
	# no checkpoint, and segments kept after archiving: every run drains the same files
	pg_conf "$W/pg" "wal_level = replica" "archive_mode = on" "archive_command = '/bin/false'" \
		"max_wal_size = 64GB" "wal_keep_size = $(((WAL_N + 64) * 16))MB" "checkpoint_timeout = 1d" \
		"autovacuum = off" "log_line_prefix = '%m '" \
		"walc_archive.socket = '$W/walc.sock'"
	pg_start "$W/pg" "$p"
	# the base the recoveries start from (its own WAL included, the rest comes from the archive)
	as_pg "$PGBIN/pg_basebackup" -h "$T" -p "$p" -D "$W/base" -X stream -c fast >"$T/log/wal-basebackup.log" 2>&1 ||
		{ cat "$T/log/wal-basebackup.log" >&2; fail "pg_basebackup"; }
	psqlc "$p" "CREATE TABLE wal_src (id bigint, at timestamptz, body text);
		INSERT INTO wal_src SELECT g, now() - g * interval '1 second', substr(repeat('the quick brown fox jumps over the lazy dog while pack my box with five dozen liquor jugs ', 3), 1 + g % 60, 160) || ' ' || md5(g::text) || ' ' || md5((g * 7)::text) || ' ' || (g % 1000)::text
		FROM generate_series(1, 400000) g;
		CREATE TABLE wal_t (LIKE wal_src); CREATE TABLE wal_marker (at timestamptz)" >/dev/null
	first=$(cd "$W/pg/pg_wal/archive_status" && compgen -G '????????????????????????.ready' | sort | head -n 1)
	first=${first%.ready}
	seg0=$((16#${first:8:8} * 256 + 16#${first:16:8}))
	# the switch at the end completes the segment holding this position: the WAL_N-th
	target=$(((seg0 + WAL_N - 1) * WAL_SEG_BYTES + 65536))
	pos=$(psqlc "$p" "SELECT pg_current_wal_insert_lsn() - '0/0'")
	# a round writes a bit more WAL than the table's size
	copy=$(($(psqlc "$p" "SELECT pg_relation_size('wal_src')") * 6 / 5))
	while [ $((pos + copy)) -lt "$target" ]; do
		psqlc "$p" "TRUNCATE wal_t; INSERT INTO wal_t SELECT * FROM wal_src" >/dev/null
		copy=$(($(psqlc "$p" "SELECT pg_current_wal_insert_lsn() - '0/0'") - pos))
		pos=$((pos + copy))
	done
	while [ "$pos" -lt "$target" ]; do
		psqlc "$p" "INSERT INTO wal_t SELECT * FROM wal_src LIMIT 5000" >/dev/null
		pos=$(psqlc "$p" "SELECT pg_current_wal_insert_lsn() - '0/0'")
	done
	psqlc "$p" "INSERT INTO wal_marker VALUES (now())" >/dev/null
	switch_wal "$p" >/dev/null
	# only segments: pg_basebackup's backup history file is left out of the measured backlog
	for s in $(compgen -G "$W/pg/pg_wal/archive_status/*.backup.ready"); do mv "$s" "${s%.ready}.done"; done
	(cd "$W/pg/pg_wal/archive_status" && compgen -G '*.ready' | sed 's/\.ready$//' | sort) >"$W/backlog"
	[ "$(wc -l <"$W/backlog")" = "$WAL_N" ] || fail "backlog of $(wc -l <"$W/backlog") segments, expected $WAL_N"
	[ "$(head -n 1 "$W/backlog")" = "$first" ] || fail "the backlog does not start at $first"
	log "wal: backlog of $WAL_N segments ($first to $(tail -n 1 "$W/backlog")), $(psqlc "$p" "SELECT failed_count FROM pg_stat_archiver") failed archive_command calls"
}

# wal_drain TOOL SETTINGS RUN CLEAR DIR PORT: empty the repository with CLEAR, make the backlog
# of the cluster in DIR .ready again, then time its archiver from the reload that wakes it up
# until no .ready is left. CPU is the archiver's and its children's, plus the daemon's.
wal_drain() {
	local tool=$1 settings=$2 run=$3 clear=$4 dir=$5 port=$6 apid c0 d0=(0 0) c1 d1=(0 0) t0 t1 n gaps first markers limit
	local wlog=$dir.log off uploads=null b0 b1 failed twice
	[ "$dir" = "$W/pg" ] || wlog=$T/log/wal-daemon.log
	off=$(stat -c %s "$wlog")
	failed=$(psqlc "$port" "SELECT failed_count FROM pg_stat_archiver")
	$clear
	sync
	apid=$(wal_archiver_pid "$dir") || fail "no archiver in $dir"
	read -r -a c0 < <(wal_proc_cpu "$apid")
	[ -z "$WAL_DPID" ] || read -r -a d0 < <(wal_proc_cpu "$WAL_DPID")
	wal_mark "$dir" .done .ready
	b0=$(wal_busy)
	t0=$(date +%s.%N)
	psqlc "$port" "SELECT pg_reload_conf()" >/dev/null
	limit=$((SECONDS + 900))
	while wal_ready_left "$dir"; do
		[ "$SECONDS" -lt "$limit" ] || { tail -n 20 "$dir.log" >&2; fail "wal drain ($tool, $settings) not done after 900 s"; }
		sleep 0.05
	done
	t1=$(date +%s.%N)
	b1=$(wal_busy)
	[ "$(wal_archiver_pid "$dir")" = "$apid" ] || { grep -v '^INFO' "$dir.log" | tail -n 20 >&2; fail "the archiver of $dir ($apid, now $(wal_archiver_pid "$dir")) restarted during the drain"; }
	read -r -a c1 < <(wal_proc_cpu "$apid")
	[ -z "$WAL_DPID" ] || read -r -a d1 < <(wal_proc_cpu "$WAL_DPID")
	TM_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	TM_USER=$(wal_ticks_s $((c1[0] - c0[0] + d1[0] - d0[0])))
	TM_SYS=$(wal_ticks_s $((c1[1] - c0[1] + d1[1] - d0[1])))
	read -r n gaps first < <(wal_gaps "$dir" "$t0")
	markers=0
	[ ! -d "$dir/pg_wal/walg_data" ] || markers=$(count_files "$dir/pg_wal/walg_data")
	[ "$markers" = 0 ] || log "  wal: $markers walc marker(s) left in pg_wal/walg_data after the drain"
	[ "$n" = "$WAL_N" ] || log "  wal: $n segments marked .done, expected $WAL_N"
	failed=$(($(psqlc "$port" "SELECT failed_count FROM pg_stat_archiver") - failed))
	[ "$failed" = 0 ] || log "  wal: $failed failed archive calls during the drain"
	# walc logs one line per upload: more than the backlog means segments uploaded twice
	if [ "$tool" = walc ]; then
		tail -c +"$((off + 1))" "$wlog" >"$W/drain.log"
		uploads=$(grep -c 'archived WAL file' "$W/drain.log" || true)
		twice=$(sed -n 's/.*archived WAL file file=\([0-9A-F]*\) .*/\1/p' "$W/drain.log" | sort | uniq -d | paste -sd'|')
		if [ -n "$twice" ]; then
			log "  wal: uploaded more than once: ${twice//|/ } (their log lines in $OUT/wal-uploaded-twice.log)"
			{
				echo "# $settings, run $run"
				grep -E "$twice" "$W/drain.log"
			} >>"$OUT/wal-uploaded-twice.log"
		fi
	fi
	WAL_EXTRA="\"busy_s\":$(wal_ticks_s $((b1 - b0))),\"failed\":$failed,\"archived\":$n,\"uploads\":$uploads,\"first_ms\":$first,\"gaps_ms\":$gaps,\"markers_left\":$markers"
}

# an empty file repository: the directory must exist (walc and WAL-G refuse a missing one)
wal_empty_dir() { rm -rf "$1" && mkdir -p "$1" && pg_own "$1"; }
wal_clear_file() { wal_empty_dir "$W/repo"; }
wal_clear_pgbr() { rm -rf "$T/pgbr/repo/archive/wal/$PGMAJOR-1"; }
wal_clear_barman() {
	AWS_ACCESS_KEY_ID=$WAL_KEY AWS_SECRET_ACCESS_KEY=$WAL_SECRET awsc s3 rm --recursive --quiet \
		"s3://$WAL_BUCKET/barman/" >"$T/log/wal-s3-rm.log" 2>&1 || { cat "$T/log/wal-s3-rm.log" >&2; fail "emptying s3://$WAL_BUCKET/barman"; }
}
wal_clear_walg() { wal_empty_dir "$W/walg-repo"; }
wal_clear_s3() {
	AWS_ACCESS_KEY_ID=$WAL_KEY AWS_SECRET_ACCESS_KEY=$WAL_SECRET awsc s3 rm --recursive --quiet \
		"s3://$WAL_BUCKET/wal/" >"$T/log/wal-s3-rm.log" 2>&1 || { cat "$T/log/wal-s3-rm.log" >&2; fail "emptying s3://$WAL_BUCKET/wal"; }
}

# wal_single TOOL SETTINGS RUN CLEAR [env VAR=VALUE...] CMD...: one archive call per segment
# with nothing else waiting, as on a primary that fills one segment at a time: CMD with the
# segment's path appended, on each of the backlog's first BENCH_WAL_SINGLE segments, every
# archive_status file .done; each call timed on its own, its milliseconds kept as gaps_ms.
# One shell as postgres runs every call with the variables exported, as PostgreSQL runs
# archive_command: runuser and env cost 20-30 ms a call here, which timing each call through
# as_pg counted for every tool (until 2026-12-04).
wal_single() {
	local tool=$1 settings=$2 run=$3 clear=$4 ms c0 c1 k=${BENCH_WAL_SINGLE:-20}
	shift 4
	[ "$1" = env ] && shift
	$clear
	sync
	read -r -a c0 < <(awk '{ print $14 + $16, $15 + $17 }' /proc/$$/stat)
	# shellcheck disable=SC2016 # expanded by the inner shell
	ms=$(as_pg LC_ALL=C bash -c 'dir=$1 log=$2; shift 2
		while [ $# -gt 0 ] && [[ $1 == *=* ]]; do export "${1?}"; shift; done
		while read -r seg; do
			t0=$EPOCHREALTIME
			"$@" "$dir/$seg" >>"$log" 2>&1 || { echo "failed: $seg"; exit 1; }
			t1=$EPOCHREALTIME
			echo "$t0 $t1"
		done' bash "$W/pg/pg_wal" "$T/log/wal-single-$tool-$run.log" "$@" \
		< <(head -n "$k" "$W/backlog")) ||
		{ tail -n 20 "$T/log/wal-single-$tool-$run.log" >&2; fail "$tool: archiving, $(tail -n 1 <<<"$ms")"; }
	read -r -a c1 < <(awk '{ print $14 + $16, $15 + $17 }' /proc/$$/stat)
	TM_WALL=$(awk '{ s += $2 - $1 } END { printf "%.3f", s }' <<<"$ms")
	TM_USER=$(wal_ticks_s $((c1[0] - c0[0]))) TM_SYS=$(wal_ticks_s $((c1[1] - c0[1])))
	local WAL_N=$k gaps
	gaps="[$(awk '{ printf "%s%.1f", (NR > 1 ? "," : ""), ($2 - $1) * 1000 }' <<<"$ms")]"
	wal_sample wal-single "$tool" "$settings" "$run" "\"archived\":$k,\"gaps_ms\":$gaps,\"markers_left\":0"
}

# wal_verify ENV...: the number of backlog segments walc wal-fetch gives back identical
wal_verify() {
	local d=$W/check s same=0
	rm -rf "$d"
	mkdir -p "$d"
	while read -r s; do
		env "$@" ASAN_OPTIONS="$ASAN_OPTIONS" "$WALC" wal-fetch "$s" "$d/$s" >>"$T/log/wal-verify.log" 2>&1 || continue
		cmp -s "$d/$s" "$W/pg/pg_wal/$s" && same=$((same + 1))
		rm -f "$d/$s"
	done <"$W/backlog"
	assert_no_sanitizer_reports "$T/log/wal-verify.log"
	wal_quiet "$d/"
	rm -rf "$d"
	echo "$same"
}

# wal_fetchers DIR/: the ids of the prefetchers working in DIR: walc's and WAL-G's wal-fetch
# calls both start a detached "wal-prefetch SEGMENT DEST" that they do not wait for. During a
# recovery DEST is relative (PostgreSQL's %p, pg_wal/RECOVERYXLOG), so the process's working
# directory tells whose it is; wal_verify's DEST is an absolute path.
wal_fetchers() {
	local p
	for p in $(pgrep -f 'wal-(pre)?fetch [0-9A-F]+ ' || true); do
		case "$(readlink "/proc/$p/cwd" 2>/dev/null)/ $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline")" in
		"$1"* | *" $1"*) echo "$p" ;;
		esac
	done
}

# wal_quiet DIR/ [TOOL]: wait for the prefetchers working in DIR to end. Those still running
# after 30 s are killed by their ids and counted in WAL_KILLED; walc's fail the bench, WAL-G's
# are logged.
wal_quiet() {
	local ids
	WAL_KILLED=0
	for _ in $(seq 1 300); do
		[ -n "$(wal_fetchers "$1")" ] || return 0
		sleep 0.1
	done
	mapfile -t ids < <(wal_fetchers "$1")
	[ ${#ids[@]} -gt 0 ] || return 0
	log "  wal: prefetchers still running in $1 after 30 s, killed: $(ps -o args= -p "$(IFS=,; echo "${ids[*]}")" | paste -sd'|' || true)" >&2
	kill "${ids[@]}" 2>/dev/null || true
	WAL_KILLED=${#ids[@]}
	[ "${2:-walc}" != walc ] || fail "walc prefetchers still running in $1"
}

# wal_recover TOOL SETTINGS RUN ENV...: recover a copy of the base backup with restore_command =
# TOOL's wal-fetch %f %p (walc, or wal-g: WAL-G reads walc's repository) with ENV until it
# promotes at the end of the archive.
wal_recover() {
	local tool=$1 settings=$2 run=$3 d=$W/rec t0 t1 b0 b1 limit port fetched rows fetch=
	shift 3
	[ "$tool" = walc ] || fetch="env $* $WALG"
	rm -rf "$d" "$d.log"
	cp -a "$W/base" "$d"
	RECOVER_FETCH=$fetch recover_conf "$d" "$*" "recovery_target_timeline = 'latest'"
	port=$(free_port)
	pg_conf "$d" "port = $port" "listen_addresses = ''" "unix_socket_directories = '$T'"
	touch "$d.log"
	pg_own "$d" "$d.log"
	PG_RUNNING+=("$d")
	sync
	b0=$(wal_busy)
	t0=$(date +%s.%N)
	as_pg "$PGBIN/pg_ctl" -D "$d" -l "$d.log" start >/dev/null
	limit=$((SECONDS + 900))
	until grep -q 'database system is ready to accept connections' "$d.log"; do
		[ "$SECONDS" -lt "$limit" ] || { tail -n 20 "$d.log" >&2; fail "recovery ($tool, $settings) not done after 900 s"; }
		sleep 0.1
	done
	t1=$(date +%s.%N)
	b1=$(wal_busy)
	TM_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') TM_USER=0 TM_SYS=0
	fetched=$(grep -c 'restored log file ".*" from archive' "$d.log" || true)
	rows=$(psqlc "$port" "SELECT count(*) FROM wal_marker")
	[ "$rows" = 1 ] || fail "the recovered cluster ($tool, $settings) misses the last transaction"
	pg_stop "$d"
	wal_quiet "$d/" "$tool"
	cp "$d.log" "$T/log/wal-recovery-$tool-${settings//[^A-Za-z0-9]/_}-$run.log"
	wal_sample wal-recovery "$tool" "$settings" "$run" "\"busy_s\":$(wal_ticks_s $((b1 - b0))),\"fetched\":$fetched,\"segments\":$WAL_N,\"killed\":$WAL_KILLED"
	rm -rf "$d" "$d.log"
}

bench_wal() {
	local run item s3env fileenv c verified pgbr_cmd s3port latency env_ clear pport a S3_ENDPOINT pre one
	WAL_N=${BENCH_WAL_SEGMENTS:-200}
	local runs=${BENCH_WAL_RUNS:-$RUNS} rruns=${BENCH_WAL_RECOVERY_RUNS:-1}
	[ "$rruns" -le "$runs" ] || rruns=$runs
	latency=${BENCH_WAL_LATENCY_MS:-20}
	W=$T/wal
	mkdir -p "$W"
	pg_own "$W"
	WAL_PREV_EXIT_TRAP=$(trap -p EXIT)
	eval "a=($WAL_PREV_EXIT_TRAP)" # trap -- 'HANDLER' EXIT
	# shellcheck disable=SC2064 # the previous handler is fixed now
	trap "wal_cleanup; ${a[2]:-}" EXIT

	if [ -n "$PEER_ROOT" ]; then
		pgv_module_install "$T/log/wal-module.log" # test/versions/lib.sh: into the chroot's PostgreSQL
	else
		make -s -C "$ROOT" archive-module-install >"$T/log/wal-module.log" 2>&1 ||
			{ cat "$T/log/wal-module.log" >&2; fail "installing walc_archive"; }
	fi
	s3port=$(s3_port 10)
	WAL_RGW_DIR=$W/rgw
	log "wal: starting Ceph RGW on port $s3port"
	"$S3_SERVERS/ceph-rgw.sh" start "$WAL_RGW_DIR" "$s3port" >"$T/log/wal-rgw.log" 2>&1 ||
		{ cat "$T/log/wal-rgw.log" >&2; fail "ceph-rgw.sh start"; }
	WAL_KEY=$(sed -n 's/^AWS_ACCESS_KEY_ID=//p' "$WAL_RGW_DIR/env")
	WAL_SECRET=$(sed -n 's/^AWS_SECRET_ACCESS_KEY=//p' "$WAL_RGW_DIR/env")
	S3_ENDPOINT=http://127.0.0.1:$s3port
	AWS_ACCESS_KEY_ID=$WAL_KEY AWS_SECRET_ACCESS_KEY=$WAL_SECRET AWS_EC2_METADATA_DISABLED=true \
		AWS_CONFIG_FILE=/dev/null s3_mb "$WAL_BUCKET"
	s3env="WALG_S3_PREFIX=s3://$WAL_BUCKET/wal AWS_ENDPOINT=$S3_ENDPOINT AWS_S3_FORCE_PATH_STYLE=true AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=$WAL_KEY AWS_SECRET_ACCESS_KEY=$WAL_SECRET"
	fileenv="WALG_FILE_PREFIX=$W/repo"
	# Barman Cloud (BENCH_PG=18) to the same RGW: zstd, as every row here
	local barman_cmd="env AWS_ACCESS_KEY_ID=$WAL_KEY AWS_SECRET_ACCESS_KEY=$WAL_SECRET AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true barman-cloud-wal-archive --endpoint-url $S3_ENDPOINT --addressing-style path --zstd s3://$WAL_BUCKET/barman wal"

	log "wal: generating a backlog of $WAL_N segments with archiving failing"
	wal_backlog
	fileenv="$fileenv PGDATA=$W/pg"
	s3env="$s3env PGDATA=$W/pg"

	cat >>"$PGBR_CONF" <<EOF

[wal]
pg1-path=$W/pg
pg1-socket-path=$T
pg1-port=$WAL_PORT
pg1-user=postgres
EOF
	pgbr --stanza=wal stanza-create >"$T/log/stanza-wal.log" 2>&1 || { cat "$T/log/stanza-wal.log" >&2; fail "pgbackrest stanza-create wal"; }
	pgbr_cmd="pgbackrest --config=$PGBR_CONF --stanza=wal --compress-type=zst --compress-level=3 archive-push %p"

	# archive_library cannot change back and forth: PostgreSQL 15 restarts the archiver for
	# that, and at most once a minute. The daemon drains its own copy of the backlog.
	wal_command "$WAL_PORT" ""
	pg_stop "$W/pg"
	cp -a "$W/pg" "$W/pgd"
	wal_mark "$W/pg" .ready .done
	wal_mark "$W/pgd" .ready .done
	pg_conf "$W/pgd" "archive_library = 'walc_archive'"
	pg_start "$W/pg" "$WAL_PORT"
	WAL_DPORT=$(free_port)
	pg_start "$W/pgd" "$WAL_DPORT"
	wal_empty_dir "$W/repo"
	# the daemon pushes one segment per request, as wal-push with concurrency 1 does
	as_pg env PGDATA="$W/pgd" WALG_FILE_PREFIX="$W/repo" WALG_COMPRESSION_METHOD=zstd WALG_UPLOAD_CONCURRENCY=1 \
		ASAN_OPTIONS="$ASAN_OPTIONS" "$WALC_PG" daemon "$W/walc.sock" >"$T/log/wal-daemon.log" 2>&1 &
	for _ in $(seq 1 100); do [ -S "$W/walc.sock" ] && break; sleep 0.05; done
	# runuser is the job: the daemon is walc itself
	WAL_DPID=$(pgrep -f "^$WALC_PG daemon $W/walc.sock") || { cat "$T/log/wal-daemon.log" >&2; fail "walc daemon did not start"; }

	log "wal: drains of the backlog, $runs run(s)"
	for ((run = 1; run <= runs; run++)); do
		while read -r item; do
			case $item in
			file-8 | file-1 | s3-8 | s3-1)
				c=${item#*-}
				if [ "${item%-*}" = file ]; then env_=$fileenv clear=wal_clear_file; else env_=$s3env clear=wal_clear_s3; fi
				wal_command "$WAL_PORT" "env $env_ WALG_COMPRESSION_METHOD=zstd WALG_UPLOAD_CONCURRENCY=$c $WALC_PG wal-push %p"
				wal_drain walc "${item%-*}, archive_command, concurrency $c" "$run" "$clear" "$W/pg" "$WAL_PORT"
				verified=null
				# shellcheck disable=SC2086 # env_ is a list of VAR=VALUE words
				[ "$run" = 1 ] && verified=$(wal_verify $env_)
				wal_sample wal-drain walc "${item%-*}, archive_command, concurrency $c" "$run" "$WAL_EXTRA,\"verified\":$verified"
				;;
			daemon)
				wal_drain walc "file, archive_library + daemon, concurrency 1" "$run" wal_clear_file "$W/pgd" "$WAL_DPORT"
				verified=null
				# shellcheck disable=SC2086
				[ "$run" = 1 ] && verified=$(wal_verify $fileenv)
				wal_sample wal-drain walc "file, archive_library + daemon, concurrency 1" "$run" "$WAL_EXTRA,\"verified\":$verified"
				;;
			pgbr)
				wal_command "$WAL_PORT" "$pgbr_cmd"
				wal_drain pgbackrest "file, archive_command, archive-push zst 3" "$run" wal_clear_pgbr "$W/pg" "$WAL_PORT"
				verified=$(find "$T/pgbr/repo/archive/wal/$PGMAJOR-1" -name '*.zst' | wc -l)
				wal_sample wal-drain pgbackrest "file, archive_command, archive-push zst 3" "$run" "$WAL_EXTRA,\"stored\":$verified"
				;;
			walg-1 | walg-8)
				c=${item#*-}
				wal_command "$WAL_PORT" "env WALG_FILE_PREFIX=$W/walg-repo PGDATA=$W/pg WALG_COMPRESSION_METHOD=zstd WALG_UPLOAD_CONCURRENCY=$c $WALG wal-push %p"
				wal_drain wal-g "file, archive_command, concurrency $c" "$run" wal_clear_walg "$W/pg" "$WAL_PORT"
				verified=$(find "$W/walg-repo/wal_005" -name '*.zst' | wc -l)
				wal_sample wal-drain wal-g "file, archive_command, concurrency $c" "$run" "$WAL_EXTRA,\"stored\":$verified"
				;;
			barman)
				wal_command "$WAL_PORT" "$barman_cmd %p"
				wal_drain barman-cloud "s3, archive_command, barman-cloud-wal-archive --zstd" "$run" wal_clear_barman "$W/pg" "$WAL_PORT"
				verified=$(AWS_ACCESS_KEY_ID=$WAL_KEY AWS_SECRET_ACCESS_KEY=$WAL_SECRET awsc s3 ls --recursive "s3://$WAL_BUCKET/barman/" | grep -c '\.zst$' || true)
				wal_sample wal-drain barman-cloud "s3, archive_command, barman-cloud-wal-archive --zstd" "$run" "$WAL_EXTRA,\"stored\":$verified"
				;;
			esac
		done < <(rotate $((run - 1)) file-8 pgbr s3-8 daemon "${WALG_ITEMS[@]/%/-1}" file-1 s3-1 \
			"${WALG_ITEMS[@]/%/-8}" "${BARMAN_ITEMS[@]}")
	done
	log "wal: one archive call per segment with no backlog, $runs run(s)"
	for ((run = 1; run <= runs; run++)); do
		while read -r item; do
			# shellcheck disable=SC2086 # fileenv is a list of VAR=VALUE words
			case $item in
			walc) wal_single walc "file, default settings" "$run" wal_clear_file env $fileenv \
				WALG_COMPRESSION_METHOD=zstd "$WALC_PG" wal-push ;;
			walc-1) wal_single walc "file, concurrency 1" "$run" wal_clear_file env $fileenv \
				WALG_COMPRESSION_METHOD=zstd WALG_UPLOAD_CONCURRENCY=1 "$WALC_PG" wal-push ;;
			walg) wal_single wal-g "file, default settings" "$run" wal_clear_walg env WALG_FILE_PREFIX="$W/walg-repo" \
				PGDATA="$W/pg" WALG_COMPRESSION_METHOD=zstd "$WALG" wal-push ;;
			pgbr) wal_single pgbackrest "file, archive-push zst 3" "$run" wal_clear_pgbr pgbackrest \
				--config="$PGBR_CONF" --stanza=wal --compress-type=zst --compress-level=3 archive-push ;;
			barman) wal_single barman-cloud "s3, barman-cloud-wal-archive --zstd" "$run" wal_clear_barman $barman_cmd ;;
			esac
		done < <(rotate $((run - 1)) walc pgbr "${WALG_ITEMS[@]}" walc-1 "${BARMAN_ITEMS[@]}")
	done

	kill "$WAL_DPID"
	WAL_DPID=""
	pg_stop "$W/pg"
	pg_stop "$W/pgd"
	rm -rf "$W/pgd"

	# The S3 repository holds the backlog of the last S3 drain.
	"$PY" "$ROOT/test/integration/s3_faultproxy.py" --listen "$(s3_port 1)" --upstream "127.0.0.1:$s3port" \
		--faults latency --rate 1 --latency "$(awk -v l="$latency" 'BEGIN { print l / 1000 }')" \
		>"$T/log/wal-proxy.out" 2>&1 &
	WAL_PROXY_PID=$!
	for _ in $(seq 1 100); do grep -qs ready "$T/log/wal-proxy.out" && break; sleep 0.1; done
	pport=$(sed -n 's/^ready //p' "$T/log/wal-proxy.out")
	[ -n "$pport" ] || fail "s3_faultproxy.py did not start"
	s3env=${s3env/AWS_ENDPOINT=$S3_ENDPOINT/AWS_ENDPOINT=http://127.0.0.1:$pport}
	s3env=${s3env% PGDATA=*}
	log "wal: recoveries from S3 + ${latency} ms per request, $rruns run(s)"
	# both tools at WALG_DOWNLOAD_CONCURRENCY's default, 10 (WAL-G v3.0.9's too), and at 1
	pre="s3 + $latency ms, WALG_DOWNLOAD_CONCURRENCY default (10)"
	one="s3 + $latency ms, WALG_DOWNLOAD_CONCURRENCY=1"
	for ((run = 1; run <= rruns; run++)); do
		while read -r item; do
			# shellcheck disable=SC2086 # s3env is a list of VAR=VALUE words
			case $item in
			prefetch) wal_recover walc "$pre" "$run" $s3env ;;
			one) wal_recover walc "$one" "$run" $s3env WALG_DOWNLOAD_CONCURRENCY=1 ;;
			walg-prefetch) wal_recover wal-g "$pre" "$run" $s3env ;;
			walg-one) wal_recover wal-g "$one" "$run" $s3env WALG_DOWNLOAD_CONCURRENCY=1 ;;
			esac
		done < <(rotate $((run - 1)) prefetch "${WALG_ITEMS[@]/%/-prefetch}" one "${WALG_ITEMS[@]/%/-one}")
	done

	wal_cleanup
	eval "${WAL_PREV_EXIT_TRAP:-trap - EXIT}"
	rm -rf "$W" "$T/pgbr/repo/archive/wal" "$T/pgbr/repo/backup/wal"
}
