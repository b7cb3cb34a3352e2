#!/usr/bin/env bash
# make bench: walc side by side with pgBackRest and with the `tar | zstd` limit, on the same data
# in the same run (docs/PERFORMANCE.md says what is measured and how to read it).
#
#   BENCH_SCALE=100        pgbench scale of the main dataset (100 ≈ 1.5 GB)
#   BENCH_RUNS=3           runs of every measurement; the table shows medians
#   BENCH_MIXED_MB=        size of the less compressible mixed dataset (default 5 × scale, ≥ 32)
#   BENCH_SMALL_SCALE=10   the smaller size for the peak-RSS-vs-size check (issue #4)
#   BENCH_DATASETS="pgbench mixed"
#   BENCH_PERF=1           perf record one walc backup-push and one backup-fetch (0 = skip)
#   BENCH_CORES=$(nproc)   process-max / WALG_UPLOAD_DISK_CONCURRENCY / zstd -T
#   BENCH_CODECS="zstd lz4"  the codecs of full's rows (zstd: the limit, walc, pgBackRest and
#                          WAL-G zstd and backup-verify; lz4 adds their lz4 rows and walc's
#                          default); "zstd" alone halves full at a large scale
#   BENCH_OUT=test/bench/results
#   BENCH_SECTIONS="full delta delta-restore s3 stores wal archive small remote"   which parts to run
#                          (full is needed by delta, delta-restore, s3 and stores, except
#                          BENCH_STORES_ONLY=retention; each section's
#                          file says what it does; remote runs PostgreSQL 17 in the trixie chroot
#                          (BENCH_PG=18: 18 in the sid-bench chroot);
#                          files, not in the default, measures memory at 200,000 files)
#   BENCH_PG=15            15: the host's PostgreSQL with bookworm's pgBackRest 2.45 (history rows);
#                          18: PostgreSQL 18.6 with pgBackRest 2.60.0 and barman-cli-cloud 3.20.1
#                          from the sid-bench chroot, every tool run inside it (test/bench/pgmajor.sh);
#                          its sections: full delta delta-restore s3 wal small remote (stores,
#                          archive and files run on 15 only)
#   KEEP=1                 keep the temporary directory
#
# Quick smoke run: BENCH_SCALE=10 BENCH_RUNS=1 make bench
#
# Today's peers (issue 49): BENCH_PG=18 (pgmajor.sh) takes PostgreSQL 18.6 from the sid-bench
# chroot of deploy/pgchroot.sh and runs every timed tool inside it, behind the same unshare +
# chroot wrapper; it checks pgBackRest 2.60.0 and barman-cli-cloud 3.20.1 (BENCH_PGBR_VERSION,
# BENCH_BARMAN_VERSION) and the results name them with PostgreSQL's major. pgBackRest runs with
# repo-bundle=y and repo-block=y (delta's pgBackRest row is then its block incremental, and the
# report compares walc's delta bytes with it); s3 adds Barman Cloud (barman-cloud-backup --zstd
# --jobs cores --min-chunk-size BENCH_BARMAN_CHUNK, barman-cloud-restore then syncfs); wal adds
# barman-cloud-wal-archive --zstd to S3 (a drain and one call per segment). In every mode full's
# rotation holds the machine's floors (floors.sh): CPU, the dataset's bytes through zstd -3 on
# every core from the page cache to /dev/null; disk, the same bytes written by dd with fsync;
# the report prints walc's full backup / CPU floor and full restore / disk floor. remote
# (remote_peers.sh) sets the remote full against pg_basebackup -Ft -X none with client-zstd and
# server-zstd and against WAL-G's remote backup-push: wall, client and server CPU, peak RSS,
# bytes on the wire, then each restored. Every row keeps its peak RSS.
#
# Every timed command runs under /usr/bin/time -f '%e %U %S %M' (wall, user, sys, peak RSS of
# the largest process). Before each one: CHECKPOINT (backups) and sync, outside the timing.
# Order inside a run alternates tools (limit, walc, pgBackRest, walc, pgBackRest, ...) and is
# rotated from one run to the next; ratios are medians of the per-run ratios.
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source=deploy/apt.sh
. "$ROOT/deploy/apt.sh"
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

SCALE=${BENCH_SCALE:-100}
RUNS=${BENCH_RUNS:-3}
CORES=${BENCH_CORES:-$(nproc)}
MIXED_MB=${BENCH_MIXED_MB:-$((SCALE * 5 > 32 ? SCALE * 5 : 32))}
SMALL_SCALE=${BENCH_SMALL_SCALE:-10}
[ "$SMALL_SCALE" -lt "$SCALE" ] || SMALL_SCALE=$((SCALE / 10 > 0 ? SCALE / 10 : 1))
DATASETS=${BENCH_DATASETS:-pgbench mixed}
PERF=${BENCH_PERF:-1}
CODECS=" ${BENCH_CODECS:-zstd lz4} "
case $CODECS in *" zstd "*) ;; *) echo "BENCH_CODECS must include zstd (delta, delta-restore and the limit use it)" >&2; exit 2 ;; esac
OUT=${BENCH_OUT:-$ROOT/test/bench/results}
SECTIONS=" ${BENCH_SECTIONS:-full delta delta-restore s3 stores wal archive small remote} "
# BENCH_PG=18 measures the sections of issue 49 (pgmajor.sh)
[ "${BENCH_PG:-15}" = 15 ] || SECTIONS=" ${BENCH_SECTIONS:-full delta delta-restore s3 wal small remote} "
section() { case $SECTIONS in *" $1 "*) return 0 ;; esac; return 1; }
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac

# ------------------------------------------------------------------------------------------
# Tools: install what is missing (Debian packages only)
# ------------------------------------------------------------------------------------------
need_pkgs=()
command -v pgbackrest >/dev/null || need_pkgs+=(pgbackrest)
[ -x /usr/bin/time ] || need_pkgs+=(time)
"$PY" -c 'import matplotlib' 2>/dev/null || need_pkgs+=(python3-matplotlib)
command -v zstd >/dev/null || need_pkgs+=(zstd)
if [ "$PERF" = 1 ] && ! command -v perf >/dev/null; then need_pkgs+=(linux-perf); fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
	log "installing ${need_pkgs[*]}"
	apt_get update -q >/dev/null
	apt_get install -y -q --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
if [ "$PERF" = 1 ] && ! perf stat -e task-clock true >/dev/null 2>&1; then
	log "perf does not work here: skipping the profiles"
	PERF=0
fi

it_setup bench
# a set -e exit names its command (lib.sh's fail prints its own message)
set -E
trap 'echo "bench: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
mkdir -p "$OUT" "$T/pgbr/log" "$T/pgbr/lock" "$T/pgbr/spool" "$T/pgbr/repo" "$T/times"
pg_own "$T"
# run as postgres under /usr/bin/time (as_pg is a shell function, time needs a program)
if [ "$(id -u)" = 0 ]; then PGRUN=(runuser -u postgres -- env HOME="$T/home"); else PGRUN=(env HOME="$T/home"); fi
SAMPLES=$T/samples.jsonl
: >"$SAMPLES"
STARTED=$(date +%s)
log "bench: scale $SCALE, mixed ${MIXED_MB} MB, small scale $SMALL_SCALE, $RUNS run(s), $CORES cores, work dir $T"

PGBR_CONF=$T/pgbackrest.conf
cat >"$PGBR_CONF" <<EOF
[global]
repo1-path=$T/pgbr/repo
repo1-retention-full=1000
process-max=$CORES
log-path=$T/pgbr/log
lock-path=$T/pgbr/lock
spool-path=$T/pgbr/spool
log-level-console=warn
log-level-file=off
start-fast=y
EOF
pg_own "$PGBR_CONF"
pgbr() { as_pg pgbackrest --config="$PGBR_CONF" "$@"; }

# ------------------------------------------------------------------------------------------
# Measuring
# ------------------------------------------------------------------------------------------

# timed LOGNAME CMD...: run CMD under /usr/bin/time (as root; as_pg inside CMD for postgres);
# sets TM_WALL TM_USER TM_SYS TM_RSS_KB; CMD's output goes to $T/log/LOGNAME.log.
TM_WALL=0 TM_USER=0 TM_SYS=0 TM_RSS_KB=0 STOP_S=null
# SERVER_PIDS: the object-store daemons a section runs (set by s3.sh). On the same cores as the
# tools they take CPU from them; timed adds what they used while a command ran (TM_SERVER_CPU,
# seconds; null with none), so a report can tell a slower tool from a busier machine.
SERVER_PIDS=()
CLK_TCK=$(getconf CLK_TCK)
server_ticks() {
	local p t=0
	for p in "${SERVER_PIDS[@]}"; do
		# utime + stime: fields 14 and 15, counted after the ") " that ends the command name
		[ -r "/proc/$p/stat" ] && t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 }')))
	done
	echo "$t"
}

timed() {
	local name=$1 tf=$T/times/$1.time rc ticks
	shift
	sync
	ticks=$(server_ticks)
	set +e
	/usr/bin/time -f '%e %U %S %M' -o "$tf" "$@" >"$T/log/$name.log" 2>&1 </dev/null
	rc=$?
	set -e
	if [ "$rc" != 0 ]; then
		tail -n 30 "$T/log/$name.log" >&2
		fail "$name: exit $rc"
	fi
	assert_no_sanitizer_reports "$T/log/$name.log"
	read -r TM_WALL TM_USER TM_SYS TM_RSS_KB < <(tail -n 1 "$tf")
	TM_SERVER_CPU=null
	[ ${#SERVER_PIDS[@]} = 0 ] ||
		TM_SERVER_CPU=$(awk -v a="$ticks" -v b="$(server_ticks)" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / hz }')
}

# sample DATASET OP TOOL CODEC SETTINGS RUN BYTES [NAME]: append the last timed figures
sample() {
	printf '{"dataset":"%s","op":"%s","tool":"%s","codec":"%s","settings":"%s","run":%s,"wall":%s,"user":%s,"sys":%s,"rss_kb":%s,"bytes":%s,"name":"%s","stop_s":%s,"server_cpu":%s}\n' \
		"$1" "$2" "$3" "$4" "$5" "$6" "$TM_WALL" "$TM_USER" "$TM_SYS" "$TM_RSS_KB" "${7:-null}" "${8:-}" "$STOP_S" \
		"${TM_SERVER_CPU:-null}" >>"$SAMPLES"
	log "  $1 $2 $3 $4 ($5) run $6: ${TM_WALL}s wall, $(echo "$TM_USER $TM_SYS" | awk '{printf "%.1f", $1 + $2}')s cpu, $((TM_RSS_KB / 1024)) MiB rss${7:+, $(($7 / 1048576)) MiB stored}"
}

bytes_of() { du -sb "$@" | awk '{ s += $1 } END { print s + 0 }'; }

# free space of the work directory's file system: logged at each step of a large run, where a
# restore target is as large as PGDATA
disk_free_bytes() { df -B1 --output=avail "$T" | tail -n 1 | tr -d ' '; }
disk_free_gib() { disk_free_bytes | awk '{ printf "%.1f", $1 / 1073741824 }'; }

# PGDATA size as the tools see it: everything but pg_wal's contents
pgdata_bytes() { du -sb --exclude="$1/pg_wal" "$1" | cut -f1; }

# ------------------------------------------------------------------------------------------
# Clusters
# ------------------------------------------------------------------------------------------

# cluster DS: make and start the cluster of dataset DS; sets PORT and D (its directory)
declare -A PORTS
cluster() {
	local ds=$1
	D=$T/$ds
	mkdir -p "$D/walc-repo" "$D/walg-repo"
	pg_own "$D"
	pg_init "$D/pgdata"
	PORT=$(free_port)
	PORTS[$ds]=$PORT
	# archive_mode on from the start; the real archive_command is set after the load, so that
	# the load's WAL is not archived by both tools.
	pg_conf "$D/pgdata" "wal_level = replica" "archive_mode = on" "archive_command = '/bin/true'" \
		"max_wal_size = 4GB" "checkpoint_timeout = 30min" "autovacuum = off"
	pg_start "$D/pgdata" "$PORT"
}

walc_env() { # DS: the walc environment of DS's repository (codec settings come per call)
	printf '%s\n' "WALG_FILE_PREFIX=$T/$1/walc-repo" "PGHOST=$T" "PGPORT=${PORTS[$1]}" "PGDATA=$T/$1/pgdata"
}

# archiving DS [pgbr]: archive to walc (and pgBackRest) from now on
archiving() {
	local ds=$1 cmd
	cmd="env WALG_FILE_PREFIX=$T/$ds/walc-repo WALG_COMPRESSION_METHOD=zstd $WALC_PG wal-push %p"
	if [ "${2:-}" = pgbr ]; then
		cmd="$cmd && pgbackrest --config=$PGBR_CONF --stanza=$ds archive-push %p"
		cat >>"$PGBR_CONF" <<EOF

[$ds]
pg1-path=$T/$ds/pgdata
pg1-socket-path=$T
pg1-port=${PORTS[$ds]}
pg1-user=postgres
EOF
	fi
	psqlc "${PORTS[$ds]}" "ALTER SYSTEM SET archive_command = '$cmd'" >/dev/null
	psqlc "${PORTS[$ds]}" "SELECT pg_reload_conf()" >/dev/null
	if [ "${2:-}" = pgbr ]; then
		pgbr --stanza="$ds" stanza-create >"$T/log/stanza-$ds.log" 2>&1 || {
			cat "$T/log/stanza-$ds.log" >&2
			fail "pgbackrest stanza-create $ds"
		}
	fi
}

load_pgbench() { # DS SCALE
	log "loading pgbench scale $2 into $1"
	as_pg "$PGBIN/pgbench" -h "$T" -p "${PORTS[$1]}" -i -s "$2" -q postgres >"$T/log/load-$1.log" 2>&1 || {
		tail -n 20 "$T/log/load-$1.log" >&2
		fail "pgbench -i"
	}
	psqlc "${PORTS[$1]}" "VACUUM (ANALYZE)" >/dev/null
	psqlc "${PORTS[$1]}" "CHECKPOINT" >/dev/null
}

# A less compressible mix: text (half prose, half hex), JSONB documents and random bytes, a
# third of MIXED_MB each.
load_mixed() { # DS
	local p=${PORTS[$1]} third=$((MIXED_MB * 1048576 / 3))
	log "loading the mixed dataset (${MIXED_MB} MB) into $1"
	psqlc "$p" "CREATE EXTENSION pgcrypto" >/dev/null
	psqlc "$p" "CREATE TABLE mixed_text (id bigint PRIMARY KEY, body text NOT NULL);
		INSERT INTO mixed_text SELECT g, substr(repeat('the quick brown fox jumps over the lazy dog while pack my box with five dozen liquor jugs ', 3), 1 + g % 60, 160) || ' ' || md5(random()::text) || md5(random()::text) || md5(random()::text)
		FROM generate_series(1, $((third / 330))) g" >/dev/null
	psqlc "$p" "CREATE TABLE mixed_json (id bigint PRIMARY KEY, doc jsonb NOT NULL);
		INSERT INTO mixed_json SELECT g, jsonb_build_object('id', g, 'user', 'user' || (random() * 100000)::int,
			'email', md5(random()::text) || '@example.com', 'score', random() * 1000, 'active', random() < 0.5,
			'tags', jsonb_build_array('t' || (random() * 50)::int, 't' || (random() * 50)::int),
			'created', now() - random() * interval '1000 days', 'note', md5(random()::text) || md5(random()::text))
		FROM generate_series(1, $((third / 330))) g" >/dev/null
	psqlc "$p" "CREATE TABLE mixed_bytes (id bigint PRIMARY KEY, data bytea NOT NULL);
		INSERT INTO mixed_bytes SELECT g, gen_random_bytes(1000) FROM generate_series(1, $((third / 1070))) g" >/dev/null
	psqlc "$p" "VACUUM (ANALYZE)" >/dev/null
	psqlc "$p" "CHECKPOINT" >/dev/null
}

# ------------------------------------------------------------------------------------------
# The tools, one function per measured operation
# ------------------------------------------------------------------------------------------

# walc_push DS SETTINGS_LABEL RUN OP [VAR=VALUE...]: backup-push as postgres; sets LAST_NAME
walc_push() {
	local ds=$1 label=$2 run=$3 op=$4 codec
	shift 4
	mapfile -t envs < <(walc_env "$ds")
	envs+=("$@")
	codec=lz4
	for v in "$@"; do case $v in WALG_COMPRESSION_METHOD=*) codec=${v#*=} ;; esac; done
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	local lg=$ds-walc-$op-${label//[^A-Za-z0-9]/_}-$run
	timed "$lg" "${PGRUN[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" "$WALC_PG" backup-push "$T/$ds/pgdata"
	LAST_NAME=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/$lg.log" | tail -n 1)
	[ -n "$LAST_NAME" ] || fail "walc backup-push printed no backup name"
	# seconds from "calling pg_backup_stop" to "wrote backup": PostgreSQL waiting for the archiver
	STOP_S=$(awk '/calling pg_backup_stop/ { split($3, a, ":"); s = a[1] * 3600 + a[2] * 60 + a[3] }
		/wrote backup/ { split($3, a, ":"); e = a[1] * 3600 + a[2] * 60 + a[3] }
		END { if (s && e) printf "%.3f", e - s; else print "null" }' "$T/log/$lg.log")
	local b=$T/$ds/walc-repo/basebackups_005/$LAST_NAME
	sample "$ds" "$op" walc "$codec" "$label" "$run" "$(bytes_of "$b" "${b}_backup_stop_sentinel.json")" "$LAST_NAME"
	STOP_S=null
}

# walc_fetch DS SETTINGS_LABEL RUN NAME CODEC [VAR=VALUE...]: into $T/restore, removed after
# unless KEEP_RESTORE is set
walc_fetch() {
	local ds=$1 label=$2 run=$3 name=$4 codec=$5 dest=$T/restore
	shift 5
	mapfile -t envs < <(walc_env "$ds")
	envs+=("$@")
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	timed "$ds-walc-fetch-${label//[^A-Za-z0-9]/_}-$run" "${PGRUN[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" "$WALC_PG" backup-fetch "$dest" "$name"
	{ [ -f "$dest/global/pg_control" ] && [ -f "$dest/PG_VERSION" ]; } || fail "walc backup-fetch $name: no pg_control"
	sample "$ds" restore walc "$codec" "$label" "$run" "$(pgdata_bytes "$dest")" "$name"
	[ -n "${KEEP_RESTORE:-}" ] || rm -rf "$dest"
}

# walc_verify DS SETTINGS_LABEL RUN NAME CODEC [VAR=VALUE...]: backup-verify of what walc_fetch
# restores (issue 18: at most 0.8 x its wall time); a problem fails the bench
walc_verify() {
	local ds=$1 label=$2 run=$3 name=$4 codec=$5
	shift 5
	mapfile -t envs < <(walc_env "$ds")
	envs+=("$@")
	timed "$ds-walc-verify-${label//[^A-Za-z0-9]/_}-$run" "${PGRUN[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" "$WALC_PG" backup-verify "$name"
	sample "$ds" verify walc "$codec" "$label" "$run" "" "$name"
}

# pgbr_push DS CODEC RUN OP TYPE: pgbackrest backup; sets LAST_NAME (the label)
pgbr_push() {
	local ds=$1 codec=$2 run=$3 op=$4 type=$5 lvl=()
	[ "$codec" = zst ] && lvl=(--compress-level=3)
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	timed "$ds-pgbr-$op-$codec-$run" "${PGRUN[@]}" pgbackrest --config="$PGBR_CONF" --stanza="$ds" backup \
		--type="$type" --compress-type="$codec" "${lvl[@]}"
	LAST_NAME=$(pgbr --stanza="$ds" info --output=json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["backup"][-1]["label"])')
	sample "$ds" "$op" pgbackrest "$codec" "$PGBR_SETTINGS" "$run" "$(bytes_of "$T/pgbr/repo/backup/$ds/$LAST_NAME")" "$LAST_NAME"
}

pgbr_restore() { # DS CODEC RUN LABEL
	local ds=$1 codec=$2 run=$3 name=$4 dest=$T/restore
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	timed "$ds-pgbr-restore-$codec-$run" "${PGRUN[@]}" pgbackrest --config="$PGBR_CONF" --stanza="$ds" \
		--pg1-path="$dest" restore --set="$name"
	[ -f "$dest/global/pg_control" ] || fail "pgbackrest restore $name: no pg_control"
	sample "$ds" restore pgbackrest "$codec" "$PGBR_SETTINGS" "$run" "$(pgdata_bytes "$dest")" "$name"
	rm -rf "$dest"
}

# WAL-G v3.0.9, the third tool where it applies (issue 20): BENCH_WALG names the binary
# (default ../shared/tools/wal-g beside the repository); without it its rows are left out.
WALG=${BENCH_WALG:-$ROOT/../shared/tools/wal-g}
walg_env() { # DS: WAL-G's environment for DS, its own repository beside walc's
	printf '%s\n' "WALG_FILE_PREFIX=$T/$1/walg-repo" "PGHOST=$T" "PGPORT=${PORTS[$1]}" "PGDATA=$T/$1/pgdata" \
		"WALG_UPLOAD_DISK_CONCURRENCY=$CORES"
}

# walg_push DS CODEC RUN OP [VAR=VALUE...]: wal-g backup-push as postgres; sets LAST_NAME
walg_push() {
	local ds=$1 codec=$2 run=$3 op=$4 lg
	shift 4
	mapfile -t envs < <(walg_env "$ds")
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	lg=$ds-walg-$op-$codec-$run
	timed "$lg" "${PGRUN[@]}" "${envs[@]}" WALG_COMPRESSION_METHOD="$codec" "$@" "$WALG" backup-push "$T/$ds/pgdata"
	LAST_NAME=$(sed -n 's/.*Wrote backup with name \(base_[0-9A-F_D]*\).*/\1/p' "$T/log/$lg.log" | tail -n 1)
	[ -n "$LAST_NAME" ] || fail "wal-g backup-push printed no backup name"
	local b=$T/$ds/walg-repo/basebackups_005/$LAST_NAME
	sample "$ds" "$op" wal-g "$codec" "upload-disk-concurrency=$CORES" "$run" "$(bytes_of "$b" "${b}_backup_stop_sentinel.json")" "$LAST_NAME"
}

walg_fetch() { # DS CODEC RUN NAME
	local ds=$1 codec=$2 run=$3 name=$4 dest=$T/restore
	mapfile -t envs < <(walg_env "$ds")
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	timed "$ds-walg-fetch-$codec-$run" "${PGRUN[@]}" "${envs[@]}" "$WALG" backup-fetch "$dest" "$name"
	[ -f "$dest/global/pg_control" ] || fail "wal-g backup-fetch $name: no pg_control"
	sample "$ds" restore wal-g "$codec" "upload-disk-concurrency=$CORES" "$run" "$(pgdata_bytes "$dest")" "$name"
	rm -rf "$dest"
}

# The limit: tar of the same files (pg_wal's contents and the temporary directories left out,
# as both tools do) through zstd -3 on every core; restore = zstd -d | tar -x, then syncfs so
# the written data is on disk as after the tools' per-file fsyncs.
limit_push() { # DS RUN
	local ds=$1 run=$2
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	rm -f "$T/$ds/limit.tar.zst"
	# tar exits 1 for "file changed as we read it": a running cluster's files do
	# shellcheck disable=SC2016
	timed "$ds-limit-backup-$run" bash -c '
		tar -C "$1" -cf - --warning=no-file-changed --exclude=./pg_wal/* --exclude=./pg_stat_tmp/* \
			--exclude=./pg_replslot/* --exclude=./postmaster.pid --exclude=./postmaster.opts . |
			zstd -3 -T"$3" -q -f -o "$2"
		s=("${PIPESTATUS[@]}"); [ "${s[0]}" -le 1 ] && [ "${s[1]}" = 0 ]' limit "$T/$ds/pgdata" "$T/$ds/limit.tar.zst" "$CORES"
	sample "$ds" backup "tar|zstd" zstd "zstd -3 -T$CORES" "$run" "$(bytes_of "$T/$ds/limit.tar.zst")"
}

limit_restore() { # DS RUN
	local ds=$1 run=$2 dest=$T/restore
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	# shellcheck disable=SC2016
	timed "$ds-limit-restore-$run" bash -c 'set -o pipefail; zstd -d -q -c "$1" | tar -C "$2" -xf - && sync -f "$2"' \
		limit "$T/$ds/limit.tar.zst" "$dest"
	sample "$ds" restore "tar|zstd" zstd "zstd -d | tar -x; syncfs" "$run" "$(pgdata_bytes "$dest")"
	rm -rf "$dest"
}

# rotate N ITEMS...: the items rotated left by N
rotate() {
	local n=$1
	shift
	local a=("$@") k
	k=${#a[@]}
	for ((i = 0; i < k; i++)); do printf '%s\n' "${a[$(((i + n) % k))]}"; done
}

BEST=(WALG_UPLOAD_DISK_CONCURRENCY="$CORES")
WALG_ITEMS=()
if [ -x "$WALG" ]; then WALG_ITEMS=(walg); else log "skipped: WAL-G's rows (no $WALG; BENCH_WALG names the binary)"; fi
declare -A LAST # backup names to restore, by dataset:item

# full_items ITEM...: the items of BENCH_CODECS (walc-default is lz4; the limit is zstd)
full_items() {
	local i c
	for i in "$@"; do
		c=${i##*-}
		case $c in zst) c=zstd ;; default) c=lz4 ;; limit | cpu | disk) c=zstd ;; esac
		case $CODECS in *" $c "*) echo "$i" ;; esac
	done
}

bench_full() { # DS: full backups then restores, every tool and codec, RUNS times
	local ds=$1 run item push_items fetch_items
	mapfile -t push_items < <(full_items limit floor-cpu walc-zstd pgbr-zst "${WALG_ITEMS[@]/%/-zstd}" walc-lz4 pgbr-lz4 \
		"${WALG_ITEMS[@]/%/-lz4}" walc-default)
	mapfile -t fetch_items < <(full_items limit floor-disk walc-zstd pgbr-zst "${WALG_ITEMS[@]/%/-zstd}" walc-lz4 verify-zstd \
		pgbr-lz4 "${WALG_ITEMS[@]/%/-lz4}" walc-default)
	log "$ds: PGDATA $(($(pgdata_bytes "$T/$ds/pgdata") / 1048576)) MiB, $(disk_free_gib) GiB free; full backups"
	floor_prepare "$ds"
	for ((run = 1; run <= RUNS; run++)); do
		while read -r item; do
			case $item in
			limit) limit_push "$ds" "$run" ;;
			floor-cpu) floor_cpu "$ds" "$run" ;;
			walc-zstd) walc_push "$ds" "best" "$run" backup WALG_COMPRESSION_METHOD=zstd "${BEST[@]}" ;;
			walc-lz4) walc_push "$ds" "best" "$run" backup WALG_COMPRESSION_METHOD=lz4 "${BEST[@]}" ;;
			walc-default) walc_push "$ds" "default" "$run" backup ;;
			pgbr-zst) pgbr_push "$ds" zst "$run" backup full ;;
			pgbr-lz4) pgbr_push "$ds" lz4 "$run" backup full ;;
			walg-zstd) walg_push "$ds" zstd "$run" backup ;;
			walg-lz4) walg_push "$ds" lz4 "$run" backup ;;
			esac
			case $item in limit | floor-*) ;; *) LAST[$ds:$item]=$LAST_NAME ;; esac
		done < <(rotate $((run - 1)) "${push_items[@]}")
	done
	log "$ds: restores ($(disk_free_gib) GiB free)"
	for ((run = 1; run <= RUNS; run++)); do
		while read -r item; do
			case $item in
			limit) limit_restore "$ds" "$run" ;;
			floor-disk) floor_disk "$ds" "$run" ;;
			walc-zstd) walc_fetch "$ds" best "$run" "${LAST[$ds:$item]}" zstd ;;
			walc-lz4) walc_fetch "$ds" best "$run" "${LAST[$ds:$item]}" lz4 ;;
			walc-default) walc_fetch "$ds" default "$run" "${LAST[$ds:$item]}" lz4 ;;
			verify-zstd) walc_verify "$ds" best "$run" "${LAST[$ds:walc-zstd]}" zstd ;;
			pgbr-zst) pgbr_restore "$ds" zst "$run" "${LAST[$ds:$item]}" ;;
			pgbr-lz4) pgbr_restore "$ds" lz4 "$run" "${LAST[$ds:$item]}" ;;
			walg-zstd) walg_fetch "$ds" zstd "$run" "${LAST[$ds:$item]}" ;;
			walg-lz4) walg_fetch "$ds" lz4 "$run" "${LAST[$ds:$item]}" ;;
			esac
		done < <(rotate $((run - 1)) "${fetch_items[@]}")
	done
	rm -f "$(floor_tar "$ds")"
}

# Delta after ~5% of pgbench_accounts updated (a contiguous aid range, issue #5): walc delta
# (WALG_DELTA_MAX_STEPS=1) from the last zstd full, pgBackRest diff from its last full (zst).
bench_delta() { # DS SCALE
	local ds=$1 scale=$2 run n
	[ -n "${LAST[$ds:walc-zstd]:-}" ] || fail "no walc zstd full to base the delta on"
	# pgBackRest's diff is based on its latest full: make it the zst one
	pgbr_push "$ds" zst 0 backup-base full
	n=$((scale * 100000 / 20))
	log "$ds: UPDATE pgbench_accounts WHERE aid <= $n (5%); delta backups ($(disk_free_gib) GiB free)"
	psqlc "${PORTS[$ds]}" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid <= $n" >/dev/null
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	# the UPDATE's WAL is archived (by both tools) before any timing: pg_backup_stop would
	# otherwise charge that backlog to whichever backup comes first
	wait_archived "$T/$ds/pgdata" "$(switch_wal "${PORTS[$ds]}")" 900
	for ((run = 1; run <= RUNS; run++)); do
		while read -r item; do
			case $item in
			walc) walc_push "$ds" best "$run" delta WALG_COMPRESSION_METHOD=zstd "${BEST[@]}" \
				WALG_DELTA_MAX_STEPS=1 WALG_DELTA_FROM_NAME="${LAST[$ds:walc-zstd]}" ;;
			pgbr) pgbr_push "$ds" zst "$run" delta diff ;;
			walg) walg_push "$ds" zstd "$run" delta WALG_DELTA_MAX_STEPS=1 WALG_DELTA_FROM_NAME="${LAST[$ds:walg-zstd]}" ;;
			esac
		done < <(rotate $((run - 1)) walc pgbr "${WALG_ITEMS[@]}")
	done
}

# Issue #4: walc's peak RSS at default settings does not grow with the database. backup-fetch
# streams up to WALG_DOWNLOAD_CONCURRENCY (10) partitions at once, and a database gets one
# partition per WALG_TAR_SIZE_THRESHOLD (1 GiB) of files: the small cluster's backup is also
# cut into 4 MiB partitions, as many as a database of 20+ GiB has, and fetched at default
# settings.
bench_small() {
	local ds=small run parts i
	cluster "$ds"
	load_pgbench "$ds" "$SMALL_SCALE"
	for i in $(seq 1 12); do # 12 tables of ~6 MiB: enough files for 20 partitions
		psqlc "${PORTS[$ds]}" "CREATE TABLE filler_$i AS SELECT g, md5(g::text) || md5(random()::text) AS v FROM generate_series(1, 60000) g" >/dev/null
	done
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	archiving "$ds"
	DS_BYTES[$ds]=$(pgdata_bytes "$T/$ds/pgdata")
	log "$ds: PGDATA $((DS_BYTES[$ds] / 1048576)) MiB (scale $SMALL_SCALE); walc at default settings"
	for ((run = 1; run <= RUNS; run++)); do
		walc_push "$ds" default "$run" backup
		walc_fetch "$ds" default "$run" "$LAST_NAME" lz4
	done
	walc_push "$ds" parts 0 backup WALG_TAR_SIZE_THRESHOLD=4194304
	parts=$(find "$T/$ds/walc-repo/basebackups_005/$LAST_NAME/tar_partitions" -name 'part_*' | wc -l)
	for ((run = 1; run <= RUNS; run++)); do
		walc_fetch "$ds" "default, $parts partitions" "$run" "$LAST_NAME" lz4
	done
	pg_stop "$T/$ds/pgdata"
	rm -rf "${T:?}/$ds"
}

perf_top() { # DATA SORT N: the top N lines of a flat perf report (runuser's few samples included:
	# perf 6.1 drops the kernel line from --sort dso when filtered with --comms)
	perf report -i "$1" --stdio --no-children --sort "$2" 2>/dev/null >"$1.$2.txt" || true
	sed -e '/^#/d' -e '/^$/d' "$1.$2.txt" | head -n "$3" || true
}

# perf profiles of one walc backup-push and one backup-fetch (zstd, best settings)
bench_perf() { # DS
	local ds=$1 dest=$T/restore name
	mapfile -t envs < <(walc_env "$ds")
	envs+=(WALG_COMPRESSION_METHOD=zstd "${BEST[@]}")
	log "$ds: perf record of walc backup-push and backup-fetch"
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	sync
	perf record -q -F 999 -o "$T/perf-push.data" -- "${PGRUN[@]}" "${envs[@]}" \
		"$WALC_PG" backup-push "$T/$ds/pgdata" >"$T/log/perf-push.log" 2>&1 || fail "perf backup-push"
	name=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/perf-push.log" | tail -n 1)
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	sync
	perf record -q -F 999 -o "$T/perf-fetch.data" -- "${PGRUN[@]}" "${envs[@]}" \
		"$WALC_PG" backup-fetch "$dest" "$name" >"$T/log/perf-fetch.log" 2>&1 || fail "perf backup-fetch"
	rm -rf "$dest"
	for w in push fetch; do
		{
			echo "# perf record -F 999 of walc backup-$w (zstd, WALG_UPLOAD_DISK_CONCURRENCY=$CORES), dataset $ds"
			echo "## by shared object"
			perf_top "$T/perf-$w.data" dso 12
			echo "## by symbol"
			perf_top "$T/perf-$w.data" dso,sym 30
		} >"$OUT/perf-$w.txt"
	done
	log "perf summaries in $OUT/perf-push.txt and $OUT/perf-fetch.txt"
}

# The sections in files of their own (each defines one bench_* function)
# shellcheck source=test/bench/delta_restore.sh
. "$BENCH_DIR/delta_restore.sh"
# shellcheck source=test/bench/s3.sh
. "$BENCH_DIR/s3.sh"
# shellcheck source=test/bench/wal.sh
. "$BENCH_DIR/wal.sh"
# shellcheck source=test/bench/stores.sh
. "$BENCH_DIR/stores.sh"
# shellcheck source=test/bench/remote.sh
. "$BENCH_DIR/remote.sh"
# shellcheck source=test/bench/remote_peers.sh
. "$BENCH_DIR/remote_peers.sh"
# shellcheck source=test/bench/files.sh
. "$BENCH_DIR/files.sh"
# shellcheck source=test/bench/archive.sh
. "$BENCH_DIR/archive.sh"
# shellcheck source=test/bench/pgmajor.sh
. "$BENCH_DIR/pgmajor.sh"
# shellcheck source=test/bench/floors.sh
. "$BENCH_DIR/floors.sh"
bench_pg_setup

# ------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------
declare -A DS_BYTES
section full || DATASETS=""
for ds in $DATASETS; do
	cluster "$ds"
	case $ds in
	pgbench) load_pgbench "$ds" "$SCALE" ;;
	mixed) load_mixed "$ds" ;;
	*) fail "unknown dataset $ds" ;;
	esac
	archiving "$ds" pgbr
	DS_BYTES[$ds]=$(pgdata_bytes "$T/$ds/pgdata")
	bench_full "$ds"
	if [ "$ds" = pgbench ]; then
		[ "$PERF" = 1 ] && bench_perf "$ds"
		section delta && bench_delta "$ds" "$SCALE"
		section delta-restore && bench_delta_restore "$ds"
		section s3 && bench_s3 "$ds"
		section stores && bench_stores "$ds"
	fi
	pg_stop "$T/$ds/pgdata"
	rm -rf "${T:?}/$ds"
done
case " ${BENCH_DATASETS:-pgbench mixed} " in *" pgbench "*) section small && bench_small ;; esac
if section stores && ! section full; then
	# the backup and restore rows need full's pgbench cluster; the retention rows make their own
	if [ "$STORES_ONLY" = retention ]; then
		bench_stores ""
	else
		log "skipped: stores without full (BENCH_STORES_ONLY=retention runs its retention rows alone)"
	fi
fi
section wal && bench_wal
section archive && bench_archive
section remote && bench_remote
section files && bench_files

# ------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------
ds_json=$(for ds in "${!DS_BYTES[@]}"; do printf '"%s":%s,' "$ds" "${DS_BYTES[$ds]}"; done)
cat >"$T/meta.json" <<EOF
{"scale":$SCALE,"small_scale":$SMALL_SCALE,"mixed_mb":$MIXED_MB,"runs":$RUNS,"cores":$CORES,
 "date":"$(date -u +%Y-%m-%dT%H:%M:%SZ)","seconds":$(($(date +%s) - STARTED)),
 "cpu":"$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)","kernel":"$(uname -r)",
 "walc":"$("$WALC" version 2>/dev/null | head -n 1), $(ldd "$WALC" >/dev/null 2>&1 && echo dynamic || echo static)",$(peer_versions),
 "walg":"$([ ${#WALG_ITEMS[@]} = 0 ] || "$WALG" --version 2>/dev/null | awk '{ print "WAL-G " $3; exit }')",
 "zstd":"$(zstd --version | head -n 1)","remote_major":${RM_MAJOR:-null},
 "pgdata_bytes":{${ds_json%,}}}
EOF
stamp=$(date -u +%Y%m%dT%H%M%SZ)
cp "$SAMPLES" "$OUT/samples-$stamp.jsonl"
"$PY" "$BENCH_DIR/report.py" "$T/meta.json" "$SAMPLES" "$OUT" "$stamp"
log "bench done in $(($(date +%s) - STARTED)) s; results in $OUT"
