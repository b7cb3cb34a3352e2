# shellcheck shell=bash
# make bench section "s3" (sourced by run.sh; issue #11): full backup and full restore to a real
# S3 server, Ceph RGW on loopback (memstore), for walc (zstd, best), pgBackRest (zst) and, when
# run.sh finds it, WAL-G (zstd, over HTTP); with BENCH_PG=18 also Barman Cloud 3.20 (over HTTP).
#
# pgBackRest speaks only HTTPS to S3, so stunnel terminates TLS in front of RGW (self-signed
# certificate); walc runs both over that same stunnel and over plain HTTP to RGW. pgBackRest gets
# the S3 bucket as repo2: while this section runs its archive-push writes to both repositories,
# and so does the archive_command of every backup here (walc's backup-push waits for the stop
# segment's .done, which that archive_command gives). The walc file backups of bench_full are the
# reference for S3/file. Peak RSS at a second size: walc over HTTP on a pgbench cluster of scale
# BENCH_SMALL_SCALE made here (archive_command /bin/true: the backups are only restored, never
# recovered).
#
#   BENCH_S3_RUNS=$BENCH_RUNS   runs of the S3 measurements
#   BENCH_S3_PART_MIB=          extra walc rows over http with S3_MAX_PART_SIZE at each of these
#                               sizes in MiB (e.g. "5 10"; the default part size is 20 MiB)
#   BENCH_BARMAN_CHUNK=20MB     barman-cloud-backup --min-chunk-size (walc's default part size)

# shellcheck source=test/integration/s3lib.sh
. "$ROOT/test/integration/s3lib.sh"

S3_RUNS=${BENCH_S3_RUNS:-$RUNS}
S3_BUCKET=bench
BARMAN_CHUNK=${BENCH_BARMAN_CHUNK:-20MB}

# s3_tls_start DIR: a self-signed certificate for localhost and stunnel from 127.0.0.1:S3_TLS_PORT
# to RGW; sets S3_TLS_PORT and S3_CERT. TCP_NODELAY on both of its sides, for the reason
# s3_rgw_nodelay gives.
s3_tls_start() {
	local dir=$1 i
	command -v stunnel4 >/dev/null || apt_install stunnel4 >/dev/null # apt.sh, sourced by run.sh
	S3_CERT=$dir/cert.pem
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
		-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$dir/key.pem" -out "$S3_CERT" \
		>"$T/log/s3-cert.log" 2>&1 || { cat "$T/log/s3-cert.log" >&2; fail "openssl req"; }
	chmod 644 "$S3_CERT" # pgBackRest reads it as postgres
	S3_TLS_PORT=$(s3_port 1)
	cat >"$dir/stunnel.conf" <<EOF
foreground = yes
pid =
socket = l:TCP_NODELAY=1
socket = r:TCP_NODELAY=1
[s3]
accept = 127.0.0.1:$S3_TLS_PORT
connect = 127.0.0.1:$RGW_PORT
cert = $S3_CERT
key = $dir/key.pem
EOF
	stunnel4 "$dir/stunnel.conf" >"$T/log/stunnel.log" 2>&1 &
	S3_PIDS+=($!)
	for ((i = 0; i < 40; i++)); do
		curl -s -o /dev/null --cacert "$S3_CERT" "https://localhost:$S3_TLS_PORT/" && return 0
		sleep 0.25
	done
	cat "$T/log/stunnel.log" >&2
	fail "stunnel did not answer on port $S3_TLS_PORT"
}

# s3_rgw_nodelay: restart radosgw with tcp_nodelay=1 on its beast frontend, unless ceph-rgw.sh
# already sets it. Without it RGW writes an answer's headers and body apart, and Nagle holds the
# body until the client's delayed ACK: ~40 ms per small request (50 GETs of a 3 KB object: 2.2 s,
# 0.1 s with it), which a GET per file (pgBackRest) pays a thousand times and a GET per
# partition (walc) a few times. The daemon is restarted the way ceph-rgw.sh starts it (same
# command line and pid file), so that `ceph-rgw.sh stop` still finds it.
s3_rgw_nodelay() {
	local conf=$S3_RGW_DIR/ceph.conf pid i
	grep -q '^rgw frontends = .*tcp_nodelay' "$conf" && return 0
	sed -i 's/^\(rgw frontends = beast endpoint=[^ ]*\)$/\1 tcp_nodelay=1/' "$conf"
	pid=$(cat "$S3_RGW_DIR/run/rgw.a.pid")
	kill "$pid"
	for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	setsid radosgw -c "$conf" -n client.rgw.a -f </dev/null >>"$S3_RGW_DIR/log/rgw.a.out" 2>&1 &
	echo $! >"$S3_RGW_DIR/run/rgw.a.pid"
	for ((i = 0; i < 120; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$S3_ENDPOINT/")" = 200 ] && return 0
		sleep 0.25
	done
	fail "radosgw did not come back after the restart with tcp_nodelay=1"
}

# s3_walc_env DS TRANSPORT: walc's environment for DS's cluster and the S3 repository, over http
# (RGW) or https (stunnel); http-N is http with S3_MAX_PART_SIZE N MiB
s3_walc_env() {
	printf '%s\n' "PGHOST=$T" "PGPORT=${PORTS[$1]}" "PGDATA=$T/$1/pgdata" "WALG_S3_PREFIX=s3://$S3_BUCKET/walc-$1" \
		"AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY" \
		"AWS_REGION=$AWS_REGION" AWS_S3_FORCE_PATH_STYLE=true WALG_COMPRESSION_METHOD=zstd "${BEST[@]}"
	case $2 in
	https) printf '%s\n' "AWS_ENDPOINT=https://localhost:$S3_TLS_PORT" "S3_CA_CERT_FILE=$S3_CERT" ;;
	http-*) printf '%s\n' "AWS_ENDPOINT=$S3_ENDPOINT" "S3_MAX_PART_SIZE=$((${2#http-} * 1048576))" ;;
	*) echo "AWS_ENDPOINT=$S3_ENDPOINT" ;;
	esac
}

# s3_walc_push DS TRANSPORT RUN: walc backup-push to S3 (a prefix per dataset); sets S3_NAME[DS:walc-TRANSPORT]
s3_walc_push() {
	local ds=$1 tr=$2 run=$3 lg stored
	mapfile -t envs < <(s3_walc_env "$ds" "$tr")
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	lg=$ds-s3-walc-push-$tr-$run
	timed "$lg" "${PGRUN[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" "$WALC_PG" backup-push "$T/$ds/pgdata"
	S3_NAME[$ds:walc-$tr]=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/$lg.log" | tail -n 1)
	STOP_S=$(sed -n -e 's/^[A-Z]*: [^ ]* \([0-9:.]*\) calling pg_backup_stop.*/\1/p' \
		-e 's/^[A-Z]*: [^ ]* \([0-9:.]*\) wrote backup .*/\1/p' "$T/log/$lg.log" |
		awk -F: '{ t[NR] = $1 * 3600 + $2 * 60 + $3 } END { if (NR == 2) printf "%.3f", t[2] - t[1]; else print "null" }')
	stored=$(as_pg env "${envs[@]}" "$WALC_PG" st ls -r basebackups_005 |
		awk -v n="${S3_NAME[$ds:walc-$tr]}" '$1 == "obj" && index($NF, n) { s += $2 } END { print s + 0 }')
	sample "$ds" s3-backup walc zstd "best, $tr" "$run" "$stored" "${S3_NAME[$ds:walc-$tr]}"
	# shellcheck disable=SC2034 # read by run.sh's sample
	STOP_S=null
}

s3_walc_fetch() { # DS TRANSPORT RUN
	local ds=$1 tr=$2 run=$3 dest=$T/restore
	mapfile -t envs < <(s3_walc_env "$ds" "$tr")
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	timed "$ds-s3-walc-fetch-$tr-$run" "${PGRUN[@]}" ASAN_OPTIONS="$ASAN_OPTIONS" "${envs[@]}" "$WALC_PG" \
		backup-fetch "$dest" "${S3_NAME[$ds:walc-$tr]}"
	[ -f "$dest/global/pg_control" ] || fail "walc backup-fetch from S3 ($tr): no pg_control"
	sample "$ds" s3-restore walc zstd "best, $tr" "$run" "$(pgdata_bytes "$dest")" "${S3_NAME[$ds:walc-$tr]}"
	rm -rf "$dest"
}

s3_pgbr_push() { # DS RUN
	local ds=$1 run=$2 stored
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	timed "$ds-s3-pgbr-push-$run" "${PGRUN[@]}" pgbackrest --config="$PGBR_CONF" --stanza="$ds" --repo=2 backup \
		--type=full --compress-type=zst --compress-level=3
	S3_NAME[$ds:pgbr]=$(pgbr --stanza="$ds" --repo=2 info --output=json |
		"$PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["backup"][-1]["label"])')
	stored=$(pgbr --stanza="$ds" --repo=2 repo-ls "backup/$ds/${S3_NAME[$ds:pgbr]}" --recurse --output=json |
		"$PY" -c 'import json,sys; print(sum(v.get("size", 0) for v in json.load(sys.stdin).values() if v["type"] == "file"))')
	sample "$ds" s3-backup pgbackrest zst "$PGBR_SETTINGS, https" "$run" "$stored" "${S3_NAME[$ds:pgbr]}"
}

s3_pgbr_fetch() { # DS RUN
	local ds=$1 run=$2 dest=$T/restore
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	timed "$ds-s3-pgbr-restore-$run" "${PGRUN[@]}" pgbackrest --config="$PGBR_CONF" --stanza="$ds" --repo=2 \
		--pg1-path="$dest" restore --set="${S3_NAME[$ds:pgbr]}"
	[ -f "$dest/global/pg_control" ] || fail "pgbackrest restore from S3: no pg_control"
	sample "$ds" s3-restore pgbackrest zst "$PGBR_SETTINGS, https" "$run" "$(pgdata_bytes "$dest")" "${S3_NAME[$ds:pgbr]}"
	rm -rf "$dest"
}

# WAL-G v3.0.9 over HTTP to RGW (issue 20 §1), when run.sh found it: zstd, as walc's rows
s3_walg_env() { # DS
	printf '%s\n' "PGHOST=$T" "PGPORT=${PORTS[$1]}" "PGDATA=$T/$1/pgdata" "WALG_S3_PREFIX=s3://$S3_BUCKET/walg-$1" \
		"AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY" \
		"AWS_REGION=$AWS_REGION" "AWS_ENDPOINT=$S3_ENDPOINT" AWS_S3_FORCE_PATH_STYLE=true \
		WALG_COMPRESSION_METHOD=zstd "WALG_UPLOAD_DISK_CONCURRENCY=$CORES"
}

s3_walg_push() { # DS RUN: sets S3_NAME[DS:walg]
	local ds=$1 run=$2 lg stored
	mapfile -t envs < <(s3_walg_env "$ds")
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	lg=$ds-s3-walg-push-$run
	timed "$lg" "${PGRUN[@]}" "${envs[@]}" "$WALG" backup-push "$T/$ds/pgdata"
	S3_NAME[$ds:walg]=$(sed -n 's/.*Wrote backup with name \(base_[0-9A-F_D]*\).*/\1/p' "$T/log/$lg.log" | tail -n 1)
	[ -n "${S3_NAME[$ds:walg]}" ] || fail "wal-g backup-push to S3 printed no backup name"
	# walc reads WAL-G's repository: the same listing as walc's rows
	stored=$(as_pg env "${envs[@]}" "$WALC_PG" st ls -r basebackups_005 |
		awk -v n="${S3_NAME[$ds:walg]}" '$1 == "obj" && index($NF, n) { s += $2 } END { print s + 0 }')
	sample "$ds" s3-backup wal-g zstd "upload-disk-concurrency=$CORES, http" "$run" "$stored" "${S3_NAME[$ds:walg]}"
}

s3_walg_fetch() { # DS RUN
	local ds=$1 run=$2 dest=$T/restore
	mapfile -t envs < <(s3_walg_env "$ds")
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	timed "$ds-s3-walg-fetch-$run" "${PGRUN[@]}" "${envs[@]}" "$WALG" backup-fetch "$dest" "${S3_NAME[$ds:walg]}"
	[ -f "$dest/global/pg_control" ] || fail "wal-g backup-fetch from S3: no pg_control"
	sample "$ds" s3-restore wal-g zstd "upload-disk-concurrency=$CORES, http" "$run" "$(pgdata_bytes "$dest")" \
		"${S3_NAME[$ds:walg]}"
	rm -rf "$dest"
}

# Barman Cloud over HTTP to RGW (BENCH_PG=18): its parallel options, zstd, a job per core, chunks
# of walc's part size, the checkpoint at once as the other tools ask for it. Its restore has no
# parallel option; it does not fsync what it writes, so its timing ends with a syncfs of the
# restored directory, as the limit's does.
s3_barman_env() {
	printf '%s\n' "AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY" \
		"AWS_DEFAULT_REGION=$AWS_REGION" AWS_EC2_METADATA_DISABLED=true
}
s3_barman_url() { echo "s3://$S3_BUCKET/barman-$1"; }
s3_barman_where() { printf '%s\n' --endpoint-url "$S3_ENDPOINT" --addressing-style path; }

s3_barman_push() { # DS RUN: sets S3_NAME[DS:barman]
	local ds=$1 run=$2 stored where
	mapfile -t envs < <(s3_barman_env)
	mapfile -t where < <(s3_barman_where)
	psqlc "${PORTS[$ds]}" "CHECKPOINT" >/dev/null
	timed "$ds-s3-barman-push-$run" "${PGRUN[@]}" "${envs[@]}" barman-cloud-backup "${where[@]}" --zstd \
		--jobs "$CORES" --min-chunk-size "$BARMAN_CHUNK" --immediate-checkpoint -h "$T" -p "${PORTS[$ds]}" \
		-U postgres "$(s3_barman_url "$ds")" "$ds"
	S3_NAME[$ds:barman]=$(as_pg env "${envs[@]}" barman-cloud-backup-list "${where[@]}" --format json \
		"$(s3_barman_url "$ds")" "$ds" | "$PY" -c 'import json,sys
print(max(b["backup_id"] for b in json.load(sys.stdin)["backups_list"]))')
	# walc lists Barman's objects too: the same listing as the other rows
	stored=$(as_pg env "${envs[@]}" WALG_S3_PREFIX="$(s3_barman_url "$ds")" AWS_ENDPOINT="$S3_ENDPOINT" \
		AWS_S3_FORCE_PATH_STYLE=true AWS_REGION="$AWS_REGION" "$WALC_PG" st ls -r "$ds/base/${S3_NAME[$ds:barman]}" |
		awk '$1 == "obj" { s += $2 } END { print s + 0 }')
	sample "$ds" s3-backup barman-cloud zstd "$BARMAN_SETTINGS" "$run" "$stored" "${S3_NAME[$ds:barman]}"
}

s3_barman_fetch() { # DS RUN
	local ds=$1 run=$2 dest=$T/restore where
	mapfile -t envs < <(s3_barman_env)
	mapfile -t where < <(s3_barman_where)
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	# shellcheck disable=SC2016 # expanded by the inner shell
	timed "$ds-s3-barman-restore-$run" "${PGRUN[@]}" "${envs[@]}" bash -c 'barman-cloud-restore "$@" && sync -f "${@: -1}"' \
		barman "${where[@]}" "$(s3_barman_url "$ds")" "$ds" "${S3_NAME[$ds:barman]}" "$dest"
	[ -f "$dest/global/pg_control" ] || fail "barman-cloud-restore: no pg_control"
	sample "$ds" s3-restore barman-cloud zstd "$BARMAN_SETTINGS" "$run" "$(pgdata_bytes "$dest")" "${S3_NAME[$ds:barman]}"
	rm -rf "$dest"
}

# the pgBackRest configuration without repo2, RGW and stunnel stopped, the AWS_* of s3lib gone
s3_bench_stop() {
	[ -f "$T/s3/pgbackrest.conf" ] && cp "$T/s3/pgbackrest.conf" "$PGBR_CONF"
	s3_cleanup
	S3_PIDS=()
	SERVER_PIDS=()
	S3_RGW_DIR=""
	unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION AWS_DEFAULT_REGION S3_ENDPOINT \
		WALC_S3_TEST_ENDPOINT CEPH_RGW_DIR RGW_PORT
}

bench_s3() { # DS
	local ds=$1 run item phase small=s3-small
	declare -gA S3_NAME
	mkdir -p "$T/s3"
	# a failure anywhere below must not leave RGW and stunnel running
	# shellcheck disable=SC2154 # rc is assigned inside the trap string
	trap 'rc=$?; s3_bench_stop; (exit $rc); it_cleanup' EXIT
	s3_rgw_start
	s3_rgw_nodelay
	s3_tls_start "$T/s3"
	# RGW's daemons and stunnel: their CPU goes with each sample (run.sh's timed)
	mapfile -t SERVER_PIDS < <(cat "$S3_RGW_DIR"/run/*.pid)
	SERVER_PIDS+=("${S3_PIDS[@]}")
	curl -sf -X PUT --aws-sigv4 "aws:amz:$AWS_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$S3_ENDPOINT/$S3_BUCKET" >/dev/null || fail "creating bucket $S3_BUCKET"
	cp "$PGBR_CONF" "$T/s3/pgbackrest.conf"
	cat >>"$PGBR_CONF" <<EOF
repo2-type=s3
repo2-path=/pgbr
repo2-retention-full=1000
repo2-s3-bucket=$S3_BUCKET
repo2-s3-endpoint=localhost
repo2-storage-port=$S3_TLS_PORT
repo2-storage-ca-file=$S3_CERT
repo2-s3-uri-style=path
repo2-s3-region=$AWS_REGION
repo2-s3-key=$AWS_ACCESS_KEY_ID
repo2-s3-key-secret=$AWS_SECRET_ACCESS_KEY
EOF
	pgbr --stanza="$ds" stanza-create >"$T/log/s3-stanza.log" 2>&1 || {
		cat "$T/log/s3-stanza.log" >&2
		fail "pgbackrest stanza-create on S3"
	}
	# pgBackRest 2.60's recommended repository on S3 too (pgmajor.sh sets repo1's)
	[ "$PGMAJOR" -lt 18 ] || printf '%s\n' repo2-bundle=y repo2-block=y >>"$PGBR_CONF"
	BARMAN_SETTINGS="jobs=$CORES, min-chunk-size=$BARMAN_CHUNK, http"
	local parts=()
	read -r -a parts <<<"${BENCH_S3_PART_MIB:-}"
	log "$ds: S3 (Ceph RGW $S3_ENDPOINT, stunnel https://localhost:$S3_TLS_PORT): $S3_RUNS run(s)"
	for ((run = 1; run <= S3_RUNS; run++)); do
		for phase in push fetch; do
			while read -r item; do
				case $item in
				walc-*) "s3_walc_$phase" "$ds" "${item#walc-}" "$run" ;;
				pgbr) "s3_pgbr_$phase" "$ds" "$run" ;;
				walg) "s3_walg_$phase" "$ds" "$run" ;;
				barman) "s3_barman_$phase" "$ds" "$run" ;;
				esac
			done < <(rotate $((run - 1)) walc-http pgbr walc-https "${WALG_ITEMS[@]}" "${BARMAN_ITEMS[@]}" \
				"${parts[@]/#/walc-http-}")
		done
	done
	log "$small: walc peak RSS to S3 at scale $SMALL_SCALE"
	cluster "$small"
	load_pgbench "$small" "$SMALL_SCALE"
	for ((run = 1; run <= S3_RUNS; run++)); do
		s3_walc_push "$small" http "$run"
		s3_walc_fetch "$small" http "$run"
	done
	pg_stop "$T/$small/pgdata"
	rm -rf "${T:?}/$small"
	s3_bench_stop
	trap it_cleanup EXIT
}
