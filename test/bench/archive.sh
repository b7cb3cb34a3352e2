# shellcheck shell=bash
# make bench section "archive" (sourced by run.sh; issue 45 §2): the WAL rate each archiving
# path keeps up with. PostgreSQL 15 (16 MiB segments, synchronous_commit off) is driven as hard
# as this machine goes for BENCH_ARCHIVE_SECONDS by pgbench (every client truncates its own
# table and inserts 2000 rows again: the tables stay small, the WAL does not) while one path
# archives, zstd everywhere:
#   walc wal-push as archive_command; the walc_archive module with walc daemon; walc
#   wal-receive (archive_mode off, a replication slot); WAL-G's wal-push; pgBackRest's
#   archive-push with archive-async=y and process-max=2; PostgreSQL's own pg_receivewal (file
#   system only, uncompressed: what streaming from a slot costs the server without walc); and
#   "none" (archive_mode off): the rate the machine sustains without archiving;
# each to the file system and to Ceph RGW (pgBackRest through stunnel: it speaks only HTTPS).
# Per run: the WAL generated, the largest backlog (segments PostgreSQL keeps .ready, or for
# wal-receive the complete segments its slot holds; sampled five times a second), the backlog
# when the load stops, how long it then takes to drain, and the archiving processes' CPU for
# all of the run's WAL (the archiver with the archive_command processes it waited for; the
# daemon; wal-receive or pg_receivewal with its walsender, whose share is also given apart;
# pgBackRest's async processes, which detach from the
# archiver, counted by reaper.py, a subreaper the cluster runs under). report_archive.py
# writes archive.md.
#
#   BENCH_ARCHIVE_SECONDS=60       each run's load
#   BENCH_ARCHIVE_RUNS=$RUNS       runs of every path and store (the order rotates)
#   BENCH_ARCHIVE_STORES="file rgw"
#   BENCH_ARCHIVE_PATHS="none walc walc-daemon wal-receive pg_receivewal pgbackrest wal-g"
#                                  (wal-g when run.sh found WAL-G)
#   BENCH_ARCHIVE_CLIENTS=$CORES   pgbench clients
#   BENCH_ARCHIVE_MAX_GB=4         a run whose pg_wal passes this stops its load early (the
#                                  disk is shared): its row says so

ARC_SEG=16777216
ARC_BUCKET=arcbench

# arc_cpu PID: utime + stime + cutime + cstime of PID, in ticks (0 when gone)
arc_cpu() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
	s=${s##*) }
	awk '{ print $12 + $13 + $14 + $15 }' <<<"$s"
}

# arc_backlog: bytes waiting for the path now: .ready segments, or what the slot holds
arc_backlog() {
	if [ "$ARC_PATH" = wal-receive ] || [ "$ARC_PATH" = pg_receivewal ]; then
		# complete segments only, as .ready counts them: the one being written cannot be stored
		psqlc "$ARC_PORT" "SELECT greatest(0, ((pg_current_wal_lsn() - '0/0')::bigint / $ARC_SEG * $ARC_SEG - (restart_lsn - '0/0'))::bigint) FROM pg_replication_slots WHERE slot_name = 'walg'" 2>/dev/null || echo 0
	else
		local n
		n=$(find "$A/pg/pg_wal/archive_status" -name '????????????????????????.ready' 2>/dev/null | wc -l)
		echo $((n * ARC_SEG))
	fi
}

# arc_template: a stopped cluster every run copies: pgbench's tables and one per client
arc_template() {
	pg_init "$A/template"
	ARC_PORT=$(free_port)
	pg_conf "$A/template" "wal_level = replica" "max_wal_size = 1GB" "checkpoint_timeout = 5min" \
		"synchronous_commit = off" "autovacuum = off" "max_wal_senders = 4" "max_replication_slots = 4"
	pg_start "$A/template" "$ARC_PORT"
	as_pg "$PGBIN/pgbench" -h "$T" -p "$ARC_PORT" -i -s 1 -q postgres >"$T/log/arc-init.log" 2>&1 ||
		{ cat "$T/log/arc-init.log" >&2; fail "pgbench -i"; }
	for c in $(seq 0 $((ARC_CLIENTS - 1))); do psqlc "$ARC_PORT" "CREATE TABLE fill_$c (id int, v text)"; done
	pg_stop "$A/template"
	sed -i '/^port = /d; /^listen_addresses/d; /^unix_socket_directories/d' "$A/template/postgresql.conf"
	cat >"$A/fill.sql" <<'EOF'
TRUNCATE fill_:client_id;
INSERT INTO fill_:client_id SELECT g, repeat(md5(g::text), 6) FROM generate_series(1, 2000) g;
EOF
	pg_own "$A"
}

# arc_env STORE RUN: walc's and WAL-G's settings for STORE, a repository of its own per run
arc_env() {
	case $1 in
	file) echo "WALG_FILE_PREFIX=$A/repo" ;;
	rgw) printf '%s\n' "WALG_S3_PREFIX=s3://$ARC_BUCKET/r$2" "AWS_ENDPOINT=$S3_ENDPOINT" AWS_S3_FORCE_PATH_STYLE=true \
		AWS_REGION=us-east-1 "AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY" ;;
	esac
	printf '%s\n' WALG_COMPRESSION_METHOD=zstd "PGDATA=$A/pg"
}

# arc_pgbr_conf STORE RUN: pgBackRest's configuration (async, process-max=2), its path
arc_pgbr_conf() {
	local c=$A/pgbr.conf
	{
		printf '%s\n' "[global]" "log-path=$A/pgbr-log" "lock-path=$A/pgbr-lock" "spool-path=$A/pgbr-spool" \
			archive-async=y process-max=2 compress-type=zst compress-level=3 log-level-console=warn \
			log-level-file=off archive-check=n
		case $1 in
		file) echo "repo1-path=$A/repo" ;;
		rgw) printf '%s\n' repo1-type=s3 "repo1-path=/r$2" "repo1-s3-bucket=$ARC_BUCKET" repo1-s3-endpoint=localhost \
			"repo1-storage-port=$S3_TLS_PORT" "repo1-storage-ca-file=$S3_CERT" repo1-s3-uri-style=path \
			repo1-s3-region=us-east-1 "repo1-s3-key=$AWS_ACCESS_KEY_ID" "repo1-s3-key-secret=$AWS_SECRET_ACCESS_KEY" ;;
		esac
		printf '%s\n' "" "[arc]" "pg1-path=$A/pg" "pg1-socket-path=$T" "pg1-port=$ARC_PORT" pg1-user=postgres
	} >"$c"
	mkdir -p "$A/pgbr-log" "$A/pgbr-lock" "$A/pgbr-spool"
	pg_own "$A"
	echo "$c"
}

# arc_stored STORE RUN: segments the run's repository holds
arc_stored() {
	local where=wal_005
	[ "$ARC_PATH" != pgbackrest ] || where=archive
	case $1 in
	file) if [ "$ARC_PATH" = pg_receivewal ]; then
			find "$A/repo" -type f 2>/dev/null | grep -cE '/[0-9A-F]{24}$' || true
		else
			find "$A/repo/$where" -type f 2>/dev/null | grep -cE '/[0-9A-F]{24}[-.]' || true
		fi ;;
	rgw) awsc s3 ls --recursive "s3://$ARC_BUCKET/r$2/$where/" 2>/dev/null | grep -cE '/[0-9A-F]{24}[-.]' || true ;;
	esac
}

# arc_run PATH STORE RUN: one run; appends its sample
arc_run() {
	ARC_PATH=$1
	local store=$2 run=$3 env cmd="" dpid="" rpid="" apid="" wpid="" lsn0 lsn1 t0 t1 t2 c0 c1 pg_max=0 max=0 b end
	local reaper="" early=false limit=$((${BENCH_ARCHIVE_MAX_GB:-4} * 1073741824)) drain_limit conf first last
	mapfile -t env < <(arc_env "$store" "$run")
	rm -rf "$A/pg" "$A/repo" "$A/pgbr-spool"
	mkdir -p "$A/repo"
	cp -a "$A/template" "$A/pg"
	ARC_PORT=$(free_port)
	case $ARC_PATH in
	none | wal-receive | pg_receivewal) pg_conf "$A/pg" "archive_mode = off" ;;
	walc) cmd="env ${env[*]} $WALC_PG wal-push %p" ;;
	wal-g) cmd="env ${env[*]} $WALG wal-push %p" ;;
	pgbackrest)
		conf=$(arc_pgbr_conf "$store" "$run")
		cmd="pgbackrest --config=$conf --stanza=arc archive-push %p"
		;;
	walc-daemon)
		pg_conf "$A/pg" "archive_mode = on" "archive_library = 'walc_archive'" "walc_archive.socket = '$A/walc.sock'"
		rm -f "$A/walc.sock"
		as_pg env "${env[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "$WALC_PG" daemon "$A/walc.sock" >>"$T/log/arc-daemon.log" 2>&1 &
		daemon_wait "$WALC_PG" "$A/walc.sock" "$T/log/arc-daemon.log"
		dpid=$DAEMON_PID
		;;
	esac
	[ -z "$cmd" ] || pg_conf "$A/pg" "archive_mode = on" "archive_command = '$cmd'"
	pg_own "$A"
	if [ "$ARC_PATH" = pgbackrest ]; then
		# under a subreaper: pgBackRest's async processes, orphans, are reaped and counted there
		rm -f "$A/reaped"
		pg_conf "$A/pg" "port = $ARC_PORT" "listen_addresses = ''" "unix_socket_directories = '$T'"
		touch "$A/pg.log"
		pg_own "$A"
		PG_RUNNING+=("$A/pg")
		"$PY" "$BENCH_DIR/reaper.py" "$A/reaped" pgbackrest -- "${PGRUN[@]}" "$PGBIN/pg_ctl" -D "$A/pg" \
			-l "$A/pg.log" -w -t 180 start >/dev/null 2>&1 &
		reaper=$!
		for _ in $(seq 1 600); do "$PGBIN/pg_isready" -q -h "$T" -p "$ARC_PORT" && break; sleep 0.1; done
		"$PGBIN/pg_isready" -q -h "$T" -p "$ARC_PORT" || { tail -n 20 "$A/pg.log" >&2; fail "starting $A/pg"; }
	else
		pg_start "$A/pg" "$ARC_PORT"
	fi
	if [ "$ARC_PATH" = pgbackrest ]; then
		as_pg pgbackrest --config="$conf" --stanza=arc stanza-create >"$T/log/arc-stanza.log" 2>&1 ||
			{ cat "$T/log/arc-stanza.log" >&2; fail "pgbackrest stanza-create ($store)"; }
	fi
	if [ "$ARC_PATH" = wal-receive ]; then
		as_pg env "${env[@]}" PGHOST="$T" PGPORT="$ARC_PORT" PGUSER=postgres WALG_SLOTNAME=walg \
			ASAN_OPTIONS="$ASAN_OPTIONS" "$WALC_PG" wal-receive >>"$T/log/arc-receive.log" 2>&1 &
		await_pid "$WALC_PG wal-receive" "PGPORT=$ARC_PORT" "$T/log/arc-receive.log"
		rpid=$AWAITED_PID
	elif [ "$ARC_PATH" = pg_receivewal ]; then
		as_pg "$PGBIN/pg_receivewal" -h "$T" -p "$ARC_PORT" -U postgres -S walg --create-slot \
			>>"$T/log/arc-receive.log" 2>&1 || { cat "$T/log/arc-receive.log" >&2; fail "pg_receivewal --create-slot"; }
		as_pg env PGPORT="$ARC_PORT" "$PGBIN/pg_receivewal" -h "$T" -U postgres -D "$A/repo" -S walg -n -s 1 \
			>>"$T/log/arc-receive.log" 2>&1 &
		await_pid "$PGBIN/pg_receivewal -h $T -U postgres -D $A/repo -S walg -n -s 1" "PGPORT=$ARC_PORT" "$T/log/arc-receive.log"
		rpid=$AWAITED_PID
	fi
	if [ -n "$rpid" ]; then
		for _ in $(seq 1 200); do
			wpid=$(psqlc "$ARC_PORT" "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'walg'")
			[ -n "$wpid" ] && break
			sleep 0.05
		done
		[ -n "$wpid" ] || { cat "$T/log/arc-receive.log" >&2; fail "$ARC_PATH did not start streaming"; }
	fi
	apid=$(pgrep -P "$(head -n 1 "$A/pg/postmaster.pid")" -f 'archiver' || true)
	first=$(psqlc "$ARC_PORT" "SELECT pg_walfile_name(pg_current_wal_insert_lsn())")
	lsn0=$(psqlc "$ARC_PORT" "SELECT pg_current_wal_insert_lsn() - '0/0'")
	# CPU: ticks of every archiving process at the start (pgBackRest's async ones come and go)
	arc_ticks() {
		local t=0 p
		for p in $apid $dpid $rpid $wpid; do t=$((t + $(arc_cpu "$p"))); done
		echo "$t"
	}
	c0=$(arc_ticks)
	local s0=0 s1
	[ -z "$wpid" ] || s0=$(arc_cpu "$wpid")
	sync
	t0=$(date +%s.%N)
	as_pg "$PGBIN/pgbench" -h "$T" -p "$ARC_PORT" -U postgres -n -T "$ARC_SECONDS" -c "$ARC_CLIENTS" \
		-j "$ARC_CLIENTS" -f "$A/fill.sql" postgres >"$T/log/arc-pgbench-$ARC_PATH-$store-$run.log" 2>&1 &
	local bench=$!
	while kill -0 "$bench" 2>/dev/null; do
		sleep 0.2
		b=$(arc_backlog)
		[ "$b" -le "$max" ] || max=$b
		pg_max=$(du -sb "$A/pg/pg_wal" 2>/dev/null | cut -f1 || true)
		if [ "${pg_max:-0}" -gt "$limit" ] && ! $early; then
			early=true
			log "  archive: pg_wal passed BENCH_ARCHIVE_MAX_GB; the load stops early"
			pkill -P "$bench" pgbench 2>/dev/null || true
			pkill -f "pgbench -h $T -p $ARC_PORT " 2>/dev/null || true
		fi
	done
	wait "$bench" || $early || { tail -n 5 "$T/log/arc-pgbench-$ARC_PATH-$store-$run.log" >&2; fail "pgbench ($ARC_PATH, $store)"; }
	t1=$(date +%s.%N)
	end=$(arc_backlog)
	[ "$end" -le "$max" ] || max=$end
	lsn1=$(psqlc "$ARC_PORT" "SELECT pg_current_wal_insert_lsn() - '0/0'")
	last=$(switch_wal "$ARC_PORT")
	drain_limit=$((SECONDS + 1800))
	if [ "$ARC_PATH" != none ]; then
		until [ "$(arc_backlog)" -le 0 ]; do
				[ "$SECONDS" -lt "$drain_limit" ] || fail "archive: $ARC_PATH to $store did not drain in 30 min"
			sleep 0.1
		done
	fi
	t2=$(date +%s.%N)
	c1=$(arc_ticks)
	s1=0
	[ -z "$wpid" ] || s1=$(($(arc_cpu "$wpid") - s0))
	local segs=$(((lsn1 - lsn0) / ARC_SEG)) stored=null cpu async=0
	[ "$ARC_PATH" = none ] || stored=$(arc_stored "$store" "$run")
	if [ "$ARC_PATH" = pgbackrest ]; then
		# the async processes still running finish their queue, and the reaper counts them
		# once the server has stopped and they are gone
		pg_stop "$A/pg"
		wait "$reaper" || true
		async=$(cat "$A/reaped" 2>/dev/null || echo 0)
	fi
	cpu=$(awk -v t=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v a="$async" 'BEGIN { printf "%.2f", t / hz + a }')
	printf '{"dataset":"archive","op":"archive-keepup","tool":"%s","codec":"zstd","settings":"%s","run":%s,"wall":%s,"user":%s,"sys":0,"rss_kb":0,"bytes":%s,"name":"","stop_s":null,"max_backlog":%s,"end_backlog":%s,"drain_s":%s,"first":"%s","last":"%s","stored":%s,"early":%s,"clients":%s,"walsender_s":%s}\n' \
		"$ARC_PATH" "$store" "$run" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" "$cpu" \
		"$((lsn1 - lsn0))" "$max" "$end" "$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", b - a }')" \
		"$first" "$last" "$stored" "$early" "$ARC_CLIENTS" \
		"$(awk -v t="$s1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }')" >>"$SAMPLES"
	log "  archive $ARC_PATH to $store run $run: $(((lsn1 - lsn0) / 1048576)) MiB of WAL ($segs segments) in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }') s; backlog at most $((max / 1048576)) MiB, $((end / 1048576)) MiB at the end, drained in $(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }') s; CPU ${cpu} s; stored $stored"
	# wal-receive before the server, which would end its stream under it
	[ -z "$rpid" ] || { kill "$rpid" 2>/dev/null || true; while kill -0 "$rpid" 2>/dev/null; do sleep 0.1; done; }
	[ "$ARC_PATH" = pgbackrest ] || pg_stop "$A/pg"
	[ -z "$dpid" ] || { kill "$dpid" 2>/dev/null || true; while kill -0 "$dpid" 2>/dev/null; do sleep 0.1; done; }
	for p in $(pgrep -f "config=$A/pgbr.conf .*archive-push:(async|local)" || true); do kill "$p" 2>/dev/null || true; done
	rm -rf "$A/pg" "$A/repo"
	[ "$store" != rgw ] || awsc s3 rm --recursive --quiet "s3://$ARC_BUCKET/r$run/" >/dev/null 2>&1 || true
}

bench_archive() {
	local run store item paths
	ARC_SECONDS=${BENCH_ARCHIVE_SECONDS:-60}
	ARC_CLIENTS=${BENCH_ARCHIVE_CLIENTS:-$CORES}
	local runs=${BENCH_ARCHIVE_RUNS:-$RUNS} stores=${BENCH_ARCHIVE_STORES:-file rgw}
	A=$T/arc
	mkdir -p "$A"
	pg_own "$A"
	# shellcheck disable=SC2154 # rc is assigned inside the trap string
	trap 'rc=$?; stores_stop; (exit $rc); it_cleanup' EXIT
	plain_make -s -C "$ROOT" archive-module-install >"$T/log/arc-module.log" 2>&1 ||
		{ cat "$T/log/arc-module.log" >&2; fail "installing walc_archive"; }
	log "archive: ${ARC_SECONDS} s of pgbench ($ARC_CLIENTS clients) per run, $runs run(s), stores: $stores"
	arc_template
	paths=(none walc walc-daemon wal-receive pg_receivewal pgbackrest "${WALG_ITEMS[@]/walg/wal-g}")
	[ -z "${BENCH_ARCHIVE_PATHS:-}" ] || read -r -a paths <<<"$BENCH_ARCHIVE_PATHS"
	for store in $stores; do
		if [ "$store" = rgw ]; then
			s3_rgw_start
			export AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_PAGER=""
			s3_mb "$ARC_BUCKET"
			mkdir -p "$A/tls"
			s3_tls_start "$A/tls"
		fi
		for ((run = 1; run <= runs; run++)); do
			while read -r item; do
				[ "$item" != none ] || [ "$store" = "${stores%% *}" ] || continue
				[ "$item" != pg_receivewal ] || [ "$store" = file ] || continue
				arc_run "$item" "$store" "$run"
			done < <(rotate $((run - 1)) "${paths[@]}")
		done
		[ "$store" != rgw ] || stores_stop
	done
	trap it_cleanup EXIT
	"$PY" "$BENCH_DIR/report_archive.py" "$SAMPLES" "$OUT/archive.md"
	cat "$OUT/archive.md"
	rm -rf "$A"
}
