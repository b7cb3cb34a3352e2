# shellcheck shell=bash
# Helpers for the Azure Blob, GCS and SFTP integration tests (sourced after lib.sh): Azurite and
# the Firebase CLI's GCS emulator on loopback (test/servers), OpenSSH's sshd, the fake token
# endpoints (objstore_tool.py), the fault proxy in front of either, and the cleanup of all of
# them.
#
#   store_setup NAME     it_setup plus an EXIT trap stopping every server started here
#   az_start [oauth]     Azurite over HTTPS; AZ_ENV: the settings of a repository's account
#                        (Shared Key); AZ_PORT, AZ_DIR; container "walc" created
#   gcs_start            the GCS emulator; GCS_PORT; GCS_ENV: STORAGE_EMULATOR_HOST
#   tokens_start         the fake token endpoints; TOK_PORT, TOK_LOG
#   proxy_start NAME UPSTREAM_PORT [proxy args...]   the HTTP fault proxy; PPORT, PROXY_PID
#   tcp_proxy_start NAME UPSTREAM_PORT [args...]     the TCP fault proxy (SFTP); the same
#   fault_segments, roundtrip WHAT SEG ENV...        WAL files, and one pushed and fetched back
#   sftp_start           Debian's sshd on 127.0.0.1, unprivileged (as postgres), with its own
#                        host key, config and a client key made here: user walc (the postgres
#                        uid under another name, through nss_wrapper, so that the password
#                        SFTP_PASSWORD can be checked without touching the system's accounts);
#                        SFTP_ENV: key authentication, host key checked (SSH_KNOWN_HOSTS);
#                        SFTP_ROOT the folder behind ssh://127.0.0.1/$SFTP_ROOT; SSHD_DIR
#   sftp_stop            sshd and every session process under it killed (SIGKILL)
#   sshd_launch          sshd started again after sftp_stop, on the same port
#   store_env STORE PATH one repository's settings (one per line): STORE az, gcs or sftp

SERVERS=$ROOT/test/servers
OS_PIDS=()
OS_DIRS=() # "script dir" pairs to stop

store_cleanup() {
	local p d
	set +e
	[ -n "${SSHD_PID:-}" ] && sftp_stop
	for p in "${OS_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for d in "${OS_DIRS[@]}"; do "$SERVERS/${d%% *}" stop "${d#* }" >/dev/null 2>&1; done
	return 0
}

store_setup() {
	it_setup "$1"
	# shellcheck disable=SC2154 # rc is assigned inside the trap string
	trap 'rc=$?; store_cleanup; (exit $rc); it_cleanup' EXIT
}

# a base port with a free port on 127.0.0.1
os_port() {
	local p
	while :; do
		p=$(random_port)
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}

AZ_KEY=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==

az_start() {
	local try
	AZ_DIR=$T/azurite
	for try in 1 2 3; do
		AZ_PORT=$(os_port)
		log "starting Azurite${1:+ ($1)} on port $AZ_PORT"
		if "$SERVERS/azurite.sh" start "$AZ_DIR" "$AZ_PORT" "${1:-}" >"$T/log/azurite.out" 2>&1; then
			OS_DIRS+=("azurite.sh $AZ_DIR")
			break
		fi
		"$SERVERS/azurite.sh" stop "$AZ_DIR" >/dev/null 2>&1 || true
		[ "$try" = 3 ] && { cat "$T/log/azurite.out" "$AZ_DIR/log" >&2; fail "azurite.sh start"; }
	done
	AZ_ENV=(AZURE_STORAGE_ACCOUNT=devstoreaccount1 AZURE_STORAGE_ACCESS_KEY="$AZ_KEY"
		AZURE_ENDPOINT_SUFFIX="localhost:$AZ_PORT" AZURE_CA_CERT_FILE="$AZ_DIR/cert.pem")
	"$PY" "$IT_DIR/objstore_tool.py" mkcontainer "https://devstoreaccount1.blob.localhost:$AZ_PORT" \
		devstoreaccount1 "$AZ_KEY" walc "$AZ_DIR/cert.pem" || fail "creating the container"
	chmod 755 "$AZ_DIR"
	chmod 644 "$AZ_DIR/cert.pem"
}

gcs_start() {
	local i try
	mkdir -p "$T/gcs/data"
	"$SERVERS/npm-install.sh" || fail "installing the npm test servers"
	for try in 1 2 3; do
		GCS_PORT=$(os_port)
		log "starting the GCS emulator on port $GCS_PORT"
		node "$SERVERS/gcs-emulator.js" 127.0.0.1 "$GCS_PORT" "$T/gcs/data" </dev/null >"$T/log/gcs.out" 2>&1 &
		OS_PIDS+=($!)
		for ((i = 0; i < 200; i++)); do
			grep -q '^ready' "$T/log/gcs.out" 2>/dev/null && break 2
			kill -0 "${OS_PIDS[-1]}" 2>/dev/null || break
			sleep 0.1
		done
		kill "${OS_PIDS[-1]}" 2>/dev/null
		[ "$try" = 3 ] && { cat "$T/log/gcs.out" >&2; fail "the GCS emulator did not start"; }
	done
	GCS_ENV=(STORAGE_EMULATOR_HOST="127.0.0.1:$GCS_PORT")
}

tokens_start() {
	TOK_PORT=$(os_port)
	TOK_LOG=$T/log/tokens.log
	: >"$TOK_LOG"
	"$PY" "$IT_DIR/objstore_tool.py" tokens "$TOK_PORT" "$TOK_LOG" "$@" >"$T/log/tokens.out" 2>&1 &
	OS_PIDS+=($!)
	local i
	for ((i = 0; i < 100; i++)); do grep -q ready "$T/log/tokens.out" 2>/dev/null && return; sleep 0.1; done
	fail "the fake token endpoints did not start"
}

# proxy_run SCRIPT NAME UPSTREAM_PORT [args...]: one of the fault proxies; PPORT, PROXY_PID
proxy_run() {
	local script=$1 name=$2 up=$3 i
	shift 3
	PPORT=$(os_port)
	"$PY" "$IT_DIR/$script" --listen "$PPORT" --upstream "127.0.0.1:$up" \
		--log "$T/log/proxy-$name.log" "$@" >"$T/log/proxy-$name.out" 2>&1 &
	PROXY_PID=$!
	OS_PIDS+=("$PROXY_PID")
	for ((i = 0; i < 100; i++)); do grep -q ready "$T/log/proxy-$name.out" 2>/dev/null && return; sleep 0.1; done
	fail "fault proxy $name did not start"
}
proxy_start() { proxy_run s3_faultproxy.py "$@"; }
tcp_proxy_start() { proxy_run tcp_faultproxy.py "$@"; }

# fault_segments: $T/wal holds N (OBJSTORE_FAULT_N, 30) 1 MiB WAL segments
# 0000000100000000000000NN (a long page header, then random and repeated bytes); $T/fetch is
# where they come back
fault_segments() {
	local i seg
	mkdir -p "$T/wal" "$T/fetch"
	N=${OBJSTORE_FAULT_N:-30}
	for i in $(seq 1 "$N"); do
		seg=$(printf '0000000100000000000000%02X' "$i")
		{ head -c 65536 /dev/urandom; { yes "segment $seg" | head -c 983040 || true; }; } >"$T/wal/src"
		fake_segment "$seg" 1048576 "$T/wal/$seg" "$T/wal/src"
		rm "$T/wal/src"
	done
}

# roundtrip WHAT SEG ENV...: wal-push then wal-fetch of $T/wal/SEG with that environment,
# the bytes identical; wal-push's stderr kept in $T/push.err
roundtrip() {
	local what=$1 seg=$2
	shift 2
	rm -f "$T/fetch/$seg"
	wrun "$@" -- wal-push "$T/wal/$seg"
	expect_rc 0 "wal-push with $what"
	cp "$T/.w_err" "$T/push.err"
	wrun "$@" -- wal-fetch "$seg" "$T/fetch/$seg"
	expect_rc 0 "wal-fetch with $what"
	assert_same_file "$T/wal/$seg" "$T/fetch/$seg" "wal-fetch with $what"
}

# proc_tree PID: PID and every process below it, children first
proc_tree() {
	local c
	for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do proc_tree "$c"; done
	echo "$1"
}

SSHD_PID=""
sftp_start() {
	local try uid gid
	SSHD_NSS=$(find /usr/lib -maxdepth 2 -name libnss_wrapper.so | head -n 1)
	[ -x /usr/sbin/sshd ] && [ -n "$SSHD_NSS" ] ||
		fail "sshd or nss_wrapper missing: deploy/deps.sh installs openssh-server and libnss-wrapper"
	SSHD_DIR=$T/sshd
	SFTP_ROOT=$T/sftp
	if [ ! -f "$SSHD_DIR/host_key" ]; then
		mkdir -p "$SSHD_DIR/home" "$SFTP_ROOT"
		ssh-keygen -q -t ed25519 -N '' -C walc-it-host -f "$SSHD_DIR/host_key"
		ssh-keygen -q -t ed25519 -N '' -C walc-it -f "$SSHD_DIR/id_ed25519"
		cp "$SSHD_DIR/id_ed25519.pub" "$SSHD_DIR/authorized_keys"
		SFTP_PASSWORD=walc-pw-$RANDOM$RANDOM
		uid=$(as_pg id -u)
		gid=$(as_pg id -g)
		echo "walc:$(openssl passwd -6 "$SFTP_PASSWORD"):$uid:$gid:walc:$SSHD_DIR/home:/bin/sh" >"$SSHD_DIR/passwd"
		echo "walc:x:$gid:" >"$SSHD_DIR/group"
		pg_own "$SSHD_DIR" "$SFTP_ROOT"
		chmod 600 "$SSHD_DIR/host_key" "$SSHD_DIR/id_ed25519"
	fi
	for try in 1 2 3; do
		SSHD_PORT=$(os_port)
		cat >"$SSHD_DIR/sshd_config" <<-EOF
			Port $SSHD_PORT
			ListenAddress 127.0.0.1
			HostKey $SSHD_DIR/host_key
			PidFile $SSHD_DIR/sshd.pid
			AuthorizedKeysFile $SSHD_DIR/authorized_keys
			StrictModes no
			UsePAM no
			PasswordAuthentication yes
			KbdInteractiveAuthentication no
			Subsystem sftp internal-sftp
			LogLevel VERBOSE
		EOF
		log "starting sshd on port $SSHD_PORT"
		sshd_launch && break
		[ "$try" = 3 ] && { cat "$SSHD_DIR/sshd.log" >&2; fail "sshd did not start"; }
	done
	echo "[127.0.0.1]:$SSHD_PORT $(cut -d' ' -f1,2 "$SSHD_DIR/host_key.pub")" >"$SSHD_DIR/known_hosts"
	chmod 644 "$SSHD_DIR/known_hosts"
	SFTP_ENV=(SSH_PORT="$SSHD_PORT" SSH_USERNAME=walc SSH_PRIVATE_KEY_PATH="$SSHD_DIR/id_ed25519"
		SSH_KNOWN_HOSTS="$SSHD_DIR/known_hosts")
}

# sshd_launch: sshd with the configuration made by sftp_start (again, after sftp_stop: the same
# port, keys and files); false when it does not listen
sshd_launch() {
	local i
	as_pg env LD_PRELOAD="$SSHD_NSS" NSS_WRAPPER_PASSWD="$SSHD_DIR/passwd" \
		NSS_WRAPPER_GROUP="$SSHD_DIR/group" /usr/sbin/sshd -D -f "$SSHD_DIR/sshd_config" \
		-E "$SSHD_DIR/sshd.log" </dev/null >>"$T/log/sshd.out" 2>&1 &
	SSHD_PID=$!
	for ((i = 0; i < 100; i++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$SSHD_PORT") 2>/dev/null && return 0
		kill -0 "$SSHD_PID" 2>/dev/null || break
		sleep 0.05
	done
	sftp_stop
	return 1
}

sftp_stop() {
	local pids
	[ -n "$SSHD_PID" ] || return 0
	mapfile -t pids < <(proc_tree "$SSHD_PID")
	# shellcheck disable=SC2034 # read by the tests (how many processes went)
	SSHD_KILLED=${#pids[@]}
	kill -KILL "${pids[@]}" 2>/dev/null
	wait "$SSHD_PID" 2>/dev/null || true
	SSHD_PID=""
	return 0
}

# store_env STORE PATH: WALG_*_PREFIX and the server's settings, one per line
store_env() {
	case $1 in
	az)
		echo "WALG_AZ_PREFIX=azure://walc/$2"
		printf '%s\n' "${AZ_ENV[@]}"
		;;
	gcs)
		echo "WALG_GS_PREFIX=gs://walc/$2"
		printf '%s\n' "${GCS_ENV[@]}"
		;;
	sftp)
		echo "WALG_SSH_PREFIX=ssh://127.0.0.1$SFTP_ROOT/$2"
		printf '%s\n' "${SFTP_ENV[@]}"
		;;
	esac
}
