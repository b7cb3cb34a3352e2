# shellcheck shell=bash
# Helpers the npm test servers' scripts share (sourced): a server is identified by the data
# directory in its arguments, so a stale pid file never names another process.

# server_pid DIR: the PID of the server started for DIR, when it still runs: the pid file's
# process must be serving DIR/data.
server_pid() {
	local pid arg argv=()
	read -r pid 2>/dev/null <"$1/pid" || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	mapfile -d '' argv 2>/dev/null <"/proc/$pid/cmdline" || return 1
	pid_running "$pid" || return 1
	for arg in "${argv[@]}"; do
		if [ "$arg" = "$1/data" ]; then
			echo "$pid"
			return 0
		fi
	done
	return 1
}

# pid_running PID: the process has neither exited nor become a zombie. Unlike server_pid this
# holds from the fork on, before the child has exec'd the server (its command line is then the
# calling script's and names no data directory).
pid_running() {
	local state
	read -r state 2>/dev/null <"/proc/$1/stat" || return 1
	state=${state##*) }
	[ "${state%% *}" != Z ]
}

# pid_stop PID: SIGTERM, SIGKILL after 5 s.
pid_stop() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		pid_running "$pid" || return 0
		sleep 0.1
	done
	echo "pid $pid did not stop in 5 s: SIGKILL" >&2
	kill -KILL "$pid" 2>/dev/null || true
}

# server_stop DIR: stops the server started for DIR; removes the pid file.
server_stop() {
	local pid
	if pid=$(server_pid "$1"); then
		pid_stop "$pid"
	fi
	rm -f "$1/pid"
}

# server_abandon PID DIR: stops a server this script just started that did not answer, by the
# PID it started (server_stop's check of the command line fails while the child has not
# exec'd yet, and a server left then would outlive the test run).
server_abandon() {
	pid_stop "$1"
	rm -f "$2/pid"
}
