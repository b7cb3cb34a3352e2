#!/usr/bin/env bash
# A throwaway Ceph cluster for walc's S3 tests: one monitor, one OSD that keeps objects in
# memory, and the RADOS Gateway (radosgw) serving S3 on 127.0.0.1. A production S3 server: it
# checks SigV4 signatures and implements multipart uploads, listings, deletes and ranges.
#
#   test/servers/ceph-rgw.sh start DIR PORT   a new, empty cluster in DIR; S3 on
#                                             http://127.0.0.1:PORT. Prints the lines of DIR/env
#                                             (S3_ENDPOINT, AWS_ACCESS_KEY_ID, ...).
#   test/servers/ceph-rgw.sh stop DIR         stops the daemons started in DIR; keeps DIR/log
#   test/servers/ceph-rgw.sh status DIR       prints DIR/env when S3 answers, else exits 3
#
# Ports: PORT for S3, PORT+1 for the monitor, PORT+2 to PORT+9 for the OSD and clients. All state
# lives in DIR: ceph.conf, env, log/, run/NAME.pid for the daemons mon.a, osd.0 and rgw.a. A
# daemon counts as started in DIR when its pid file names it and its command line is
# "... -c DIR/ceph.conf ...": a test that restarts radosgw itself runs
# `radosgw -c DIR/ceph.conf -n client.rgw.a -f` and writes its PID to run/rgw.a.pid.
#
# Daemons run as the calling user in its process group, with cephx off: the cluster holds test
# data and listens on loopback only; S3 requests are still authenticated (SigV4) by radosgw.
# Ceph comes from Debian (radosgw ceph-mon ceph-osd ceph-common): deploy/deps.sh installs it
# when it is missing. Environment: CEPH_RGW_TIMEOUT (seconds start may take, default 180),
# CEPH_RGW_MEM_BYTES (the OSD's memory store, default 4 GiB; writes fail once it is full).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# Test credentials, fixed: nothing but test data is ever stored here.
readonly ACCESS_KEY=WALCTESTACCESSKEY001
readonly SECRET_KEY=walc-test-secret-key-0000000000000000001
readonly REGION=us-east-1
readonly PROGRAMS=(ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph curl)
readonly MARK=.walc-ceph-rgw

say() { echo "ceph-rgw: $*" >&2; }
die() { say "$*"; exit 1; }

usage() {
	echo "usage: ceph-rgw.sh start DIR PORT | stop DIR | status DIR" >&2
	exit 2
}

ensure_ceph() {
	local p
	for p in "${PROGRAMS[@]}"; do
		command -v "$p" >/dev/null 2>&1 && continue
		say "$p not found: installing the test packages (deploy/deps.sh test)"
		"$ROOT/deploy/deps.sh" test >&2 || die "deploy/deps.sh test failed"
		return 0
	done
}

# daemon_pid DIR NAME: the PID of daemon NAME started in DIR, when it is alive (not a zombie).
# Builtins only: stop polls it.
daemon_pid() {
	local pid state argv=()
	read -r pid 2>/dev/null <"$1/run/$2.pid" || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	mapfile -d '' argv 2>/dev/null <"/proc/$pid/cmdline" || return 1
	[ "${argv[1]:-}" = -c ] && [ "${argv[2]:-}" = "$1/ceph.conf" ] || return 1
	read -r state 2>/dev/null <"/proc/$pid/stat" || return 1
	state=${state##*) }
	[ "${state%% *}" != Z ] || return 1
	echo "$pid"
}

# gone DIR NAME: the daemon just started has exited already (checked by PID alone: until it
# has exec'd, its command line is still this script's).
gone() {
	local pid state
	read -r pid <"$1/run/$2.pid"
	read -r state 2>/dev/null <"/proc/$pid/stat" || return 0
	state=${state##*) }
	[ "${state%% *}" = Z ]
}

# tcmalloc: the allocator upstream Ceph links; Debian's build uses glibc malloc, which costs
# ceph-osd about a third more CPU per op. libgoogle-perftools4 comes with Debian's radosgw.
tcmalloc() {
	local f
	for f in /usr/lib/*-linux-gnu/libtcmalloc.so.4 /usr/lib64/libtcmalloc.so.4; do
		[ -e "$f" ] && { echo "$f"; return 0; }
	done
	echo ""
}

# launch DIR NAME PROGRAM ARGS...: a daemon in the background, in the foreground mode of Ceph
# (-f), its output in log/NAME.out, its PID in run/NAME.pid. It stays in our process group,
# so a test killed by its timeout takes it along.
launch() {
	local dir=$1 name=$2
	shift 2
	LD_PRELOAD=$(tcmalloc) "$@" </dev/null >>"$dir/log/$name.out" 2>&1 &
	echo $! >"$dir/run/$name.pid"
}

# http_status PORT [CURL ARGS...]: the HTTP status of GET / on PORT, 000 when nothing answers.
http_status() {
	local port=$1
	shift
	curl -s -o /dev/null -m 5 -w '%{http_code}' "$@" "http://127.0.0.1:$port/" || true
}

signed_status() { # PORT SECRET: ListBuckets signed with SigV4 by curl
	http_status "$1" --aws-sigv4 "aws:amz:$REGION:s3" --user "$ACCESS_KEY:$2" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD"
}

env_lines() { # DIR PORT
	printf '%s\n' "S3_ENDPOINT=http://127.0.0.1:$2" "AWS_ACCESS_KEY_ID=$ACCESS_KEY" \
		"AWS_SECRET_ACCESS_KEY=$SECRET_KEY" "AWS_REGION=$REGION" "AWS_DEFAULT_REGION=$REGION" \
		"CEPH_RGW_DIR=$1"
}

# stop_daemons DIR: radosgw first (it needs its OSD to shut down cleanly), then the OSD (which
# would otherwise wait for the monitor to acknowledge its shutdown), then the monitor. Each
# gets SIGTERM and 5 s, then SIGKILL: the data is thrown away anyway.
stop_daemons() {
	local dir=$1 name pid i stopped=()
	for name in rgw.a osd.0 mon.a; do
		pid=$(daemon_pid "$dir" "$name") || continue
		kill -TERM "$pid" 2>/dev/null || continue
		for ((i = 0; i < 50; i++)); do
			daemon_pid "$dir" "$name" >/dev/null || break
			sleep 0.1
		done
		if daemon_pid "$dir" "$name" >/dev/null; then
			say "$name (pid $pid) did not stop in 5 s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		stopped+=("$name:$pid")
	done
	rm -f "$dir"/run/*.pid
	[ ${#stopped[@]} -eq 0 ] || say "stopped ${stopped[*]}"
}

write_conf() { # DIR PORT FSID
	local dir=$1 port=$2
	cat >"$dir/ceph.conf" <<EOF
# A one-node Ceph cluster for walc's tests (test/servers/ceph-rgw.sh): loopback only, test data.
[global]
fsid = $3
mon host = v2:127.0.0.1:$((port + 1))
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
ms bind port min = $((port + 2))
ms bind port max = $((port + 9))
auth cluster required = none
auth service required = none
auth client required = none
mon warn on insecure global id reclaim allowed = false
# The monitor refuses to start when the disk is nearly full (5% by default); test machines are.
mon data avail warn = 1
mon data avail crit = 0
# A single OSD: one copy of everything, placement by OSD, a few placement groups.
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd pool default pg autoscale mode = off
osd pool default pg num = 8
osd pool default pgp num = 8
# radosgw creates its pools one map change at a time; the default 1 s batching of changes would
# add seconds to start-up and to the first bucket and upload.
paxos propose interval = 0.01
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
keyring = $dir/keyring
# Logging off: at the default levels (1/5 for most subsystems) every op formats level-5 lines into
# the in-memory log, which costs the OSD and radosgw CPU on each RADOS op.
debug osd = 0/0
debug rgw = 0/0
debug ms = 0/0
debug objecter = 0/0
debug rados = 0/0
debug objclass = 0/0
debug filestore = 0/0
debug bluestore = 0/0
debug journal = 0/0
debug auth = 0/0
debug monc = 0/0
debug finisher = 0/0
debug heartbeatmap = 0/0
debug perfcounter = 0/0
debug optracker = 0/0
debug asok = 0/0
debug throttle = 0/0
debug context = 0/0
debug crush = 0/0
debug bdev = 0/0
debug buffer = 0/0
debug tp = 0/0
debug timer = 0/0
debug none = 0/0
debug crypto = 0/0
debug compressor = 0/0
debug reserver = 0/0
debug rgw sync = 0/0
# A short placement-group log (defaults: 250 to 10000 entries, 3000 request ids kept for
# duplicate detection): with one OSD there is no peer to recover from it, and keeping and trimming
# it is a large part of each write op's CPU.
osd min pg log entries = 10
osd max pg log entries = 100
osd pg log dups tracked = 100
osd pg log trim min = 10

[mon]
mon data = $dir/mon.\$id

[osd]
osd data = $dir/osd.\$id
osd objectstore = memstore
memstore device bytes = ${CEPH_RGW_MEM_BYTES:-4294967296}

[client.rgw.a]
# Without tcp_nodelay, Nagle holds an answer's body until the client's delayed ACK of its
# headers: about 40 ms more for every small request.
rgw frontends = beast endpoint=127.0.0.1:$port tcp_nodelay=1
rgw data = $dir/rgw
# Virtual-hosted-style requests: http://BUCKET.localhost:PORT (libcurl resolves *.localhost).
rgw dns name = localhost
# Without cephx the monitor connection must not ask for "secure" mode.
ms mon client mode = crc secure
rgw thread pool size = 64
# radosgw starts before the OSD is up and looks again only every objecter tick (5 s).
objecter tick interval = 0.5
# Free deleted objects' space within a minute: the OSD keeps it in memory.
rgw gc obj min wait = 30
rgw gc processor period = 30
EOF
}

cmd_start() {
	local dir=$1 port=$2 timeout=${CEPH_RGW_TIMEOUT:-180} p t0=$SECONDS fsid osd_uuid id name
	if ! [[ $port =~ ^[0-9]{4,5}$ ]] || [ "$port" -lt 1024 ] || [ "$port" -gt 65526 ]; then
		die "PORT: expected a number from 1024 to 65526, got \"$port\""
	fi
	ensure_ceph
	# start wipes DIR: only an empty directory or one made here.
	if [ -n "$(ls -A "$dir")" ] && [ ! -e "$dir/$MARK" ]; then
		die "$dir is not empty and was not made by ceph-rgw.sh: not wiping it"
	fi
	stop_daemons "$dir" 2>/dev/null
	for ((p = port; p <= port + 9; p++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			die "port $p on 127.0.0.1 is in use (ports $port to $((port + 9)) are needed)"
		fi
	done
	rm -rf "${dir:?}"/{mon.a,osd.0,rgw,run,log,monmap,keyring,ceph.conf,env,port}
	mkdir -p "$dir"/{mon.a,osd.0,rgw,run,log}
	touch "$dir/$MARK"
	fsid=$(cat /proc/sys/kernel/random/uuid)
	osd_uuid=$(cat /proc/sys/kernel/random/uuid)
	write_conf "$dir" "$port" "$fsid"
	local conf=$dir/ceph.conf setup=$dir/log/setup.out

	monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$((port + 1))]" "$dir/monmap" \
		>"$setup" 2>&1 || start_failed "$dir" "monmaptool --create"
	ceph-mon -c "$conf" -i a --mkfs --monmap "$dir/monmap" >>"$setup" 2>&1 ||
		start_failed "$dir" "ceph-mon --mkfs"
	launch "$dir" mon.a ceph-mon -c "$conf" -i a -f
	# Registering the OSD also waits for the monitor to answer.
	id=$(ceph -c "$conf" --connect-timeout 60 osd new "$osd_uuid" 2>>"$setup") ||
		start_failed "$dir" "ceph osd new (is the monitor up?)"
	[ "$id" = 0 ] || start_failed "$dir" "ceph osd new: expected OSD id 0, got \"$id\""
	ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$setup" 2>&1 ||
		start_failed "$dir" "ceph-osd --mkfs"
	launch "$dir" osd.0 ceph-osd -c "$conf" -i 0 -f
	launch "$dir" rgw.a radosgw -c "$conf" -n client.rgw.a -f
	# radosgw answers once it has made its pools.
	until [ "$(http_status "$port")" = 200 ]; do
		for name in mon.a osd.0 rgw.a; do
			! gone "$dir" "$name" || start_failed "$dir" "$name exited while starting"
		done
		[ $((SECONDS - t0)) -lt "$timeout" ] || start_failed "$dir" "no S3 answer within ${timeout}s"
		sleep 0.25
	done
	radosgw-admin -c "$conf" user create --uid=walc-test --display-name="walc tests" \
		--access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >"$dir/log/user.out" 2>&1 ||
		start_failed "$dir" "radosgw-admin user create"
	# The server must tell a good signature from a bad one, or the S3 tests prove nothing.
	[ "$(signed_status "$port" "$SECRET_KEY")" = 200 ] ||
		start_failed "$dir" "a correctly signed ListBuckets was refused"
	[ "$(signed_status "$port" "x$SECRET_KEY")" = 403 ] ||
		start_failed "$dir" "a ListBuckets signed with a wrong secret was not refused with 403"
	echo "$port" >"$dir/port"
	env_lines "$dir" "$port" >"$dir/env"
	say "S3 on http://127.0.0.1:$port after $((SECONDS - t0))s; logs in $dir/log"
	cat "$dir/env"
}

# start_failed DIR WHAT: stop what started, show the ends of the logs, exit 1.
start_failed() {
	local f
	say "start failed: $2"
	stop_daemons "$1" || true
	for f in "$1"/log/*; do
		[ -s "$f" ] || continue
		echo "--- $f (last lines)" >&2
		tail -n 5 "$f" >&2
	done
	exit 1
}

cmd_status() {
	local dir=$1 name port
	[ -r "$dir/port" ] || { say "no cluster in $dir"; return 3; }
	port=$(cat "$dir/port")
	for name in mon.a osd.0 rgw.a; do
		daemon_pid "$dir" "$name" >/dev/null || { say "$name is not running"; return 3; }
	done
	[ "$(http_status "$port")" = 200 ] || { say "no S3 answer on port $port"; return 3; }
	cat "$dir/env"
}

main() {
	local cmd=${1:-} dir=${2:-}
	case $cmd:$# in
	start:3 | stop:2 | status:2) ;;
	*) usage ;;
	esac
	if [ ! -d "$dir" ]; then
		case $cmd in
		start) mkdir -p "$dir" ;;
		stop) return 0 ;;
		status) say "no cluster in $dir"; return 3 ;;
		esac
	fi
	# The absolute path goes into ceph.conf, which cannot quote blanks or comment characters,
	# and identifies the daemons by their command line.
	dir=$(cd "$dir" && pwd -P)
	case $dir in *[[:space:]\#\;\$\\]*) die "DIR: ceph.conf cannot hold the path \"$dir\"" ;; esac
	case $cmd in
	start) cmd_start "$dir" "$3" ;;
	stop) stop_daemons "$dir" ;;
	status) cmd_status "$dir" ;;
	esac
}

main "$@"
