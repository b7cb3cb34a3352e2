# shellcheck shell=bash
# Helpers the npm test servers' scripts share (sourced): a server is identified by the data
# directory in its arguments, so a stale pid file never names another process.

# server_pid DIR: the PID of the server started for DIR, when it still runs: the pid file's
# process must be serving DIR/data.
server_pid() {
	local pid arg argv=() state
	read -r pid 2>/dev/null <"$1/pid" || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	mapfile -d '' argv 2>/dev/null <"/proc/$pid/cmdline" || return 1
	read -r state 2>/dev/null <"/proc/$pid/stat" || return 1
	state=${state##*) }
	[ "${state%% *}" != Z ] || return 1
	for arg in "${argv[@]}"; do
		if [ "$arg" = "$1/data" ]; then
			echo "$pid"
			return 0
		fi
	done
	return 1
}

# server_stop DIR: SIGTERM, SIGKILL after 5 s; removes the pid file.
server_stop() {
	local dir=$1 pid i
	if pid=$(server_pid "$dir"); then
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			server_pid "$dir" >/dev/null || break
			sleep 0.1
		done
		if server_pid "$dir" >/dev/null; then
			echo "pid $pid did not stop in 5 s: SIGKILL" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$dir/pid"
}
