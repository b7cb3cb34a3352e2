# shellcheck shell=bash
# make bench section "remote", its anchors (issue 49; sourced by run.sh, run by remote.sh on its
# cluster): a remote full backup-push (BASE_BACKUP over the replication protocol, no PGDATA)
# against what a user would run instead, every client in the same chroot as the server:
#   walc-client   walc, zstd on the client (the stream uncompressed on the wire)
#   walc-server   walc, WALG_REMOTE_COMPRESSION=zstd (the server compresses)
#   pgbb-client   pg_basebackup -Ft -X none -Z client-zstd:level=3
#   pgbb-server   pg_basebackup -Ft -X none -Z server-zstd:level=3
#   walg          WAL-G's remote backup-push (no directory), zstd, when present
# BENCH_RUNS runs rotated; each row: wall, the client's CPU and peak RSS, the server's CPU (the
# postmaster, its children and those it reaped, during the run), bytes on the wire, bytes
# stored. Then each backup restored (walc and WAL-G: backup-fetch; pg_basebackup: zstd -d | tar
# -x, then syncfs). -X none: WAL reaches walc and WAL-G through the archive, so pg_basebackup
# sends none either. Wire bytes: walc's log; pg_basebackup's archive, decompressed for
# client-zstd (the uncompressed stream) and as is for server-zstd, plus its manifest; WAL-G asks
# for an uncompressed stream and reports no count (null).

# rm_pg_ticks DIR: CPU ticks of the cluster in DIR so far: the postmaster's own and its reaped
# children's, plus every live child's
rm_pg_ticks() {
	local pm p t=0
	pm=$(head -n 1 "$1/postmaster.pid")
	for p in "$pm" $(pgrep -P "$pm"); do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk -v own=$((p == pm)) '{ print $12 + $13 + own * ($14 + $15) }')))
	done
	echo "$t"
}

# rm_walsenders_gone DIR: wait (at most 5 s) until the backup's walsender has exited and been
# reaped, so that its CPU is in the postmaster's count
rm_walsenders_gone() {
	local pm i
	pm=$(head -n 1 "$1/postmaster.pid")
	for ((i = 0; i < 50; i++)); do
		pgrep -P "$pm" -f walsender >/dev/null || return 0
		sleep 0.1
	done
}

# rm_peer_push ITEM RUN: one timed remote full of ITEM; sets RM_NAME[ITEM]
rm_peer_push() {
	local item=$1 run=$2 s0 s1 wire=null stored lg=remote-$1-$2 out=$T/rpgbb-$1 envs=()
	envs=(WALG_COMPRESSION_METHOD=zstd PGHOST="$T" PGPORT="$RM_PORT" PGUSER=postgres "${BEST[@]}")
	psqlc "$RM_PORT" "CHECKPOINT" >/dev/null
	s0=$(rm_pg_ticks "$RM_DIR")
	case $item in
	walc-*)
		[ "$item" = walc-server ] && envs+=(WALG_REMOTE_COMPRESSION=zstd)
		timed "$lg" "${RMRUN[@]}" "${envs[@]}" WALG_FILE_PREFIX="$T/rpeer" "$T/bin/walc" backup-push
		RM_NAME[$item]=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/$lg.log" | tail -n 1)
		wire=$(sed -n 's/.*BASE_BACKUP sent .* (\([0-9]*\) bytes).*/\1/p' "$T/log/$lg.log" | tail -n 1)
		stored=$(bytes_of "$T/rpeer/basebackups_005/${RM_NAME[$item]}" "$T/rpeer/basebackups_005/${RM_NAME[$item]}_backup_stop_sentinel.json")
		;;
	pgbb-*)
		rm -rf "$out"
		timed "$lg" "${RMRUN[@]}" "$PGBIN/pg_basebackup" -h "$T" -p "$RM_PORT" -U postgres -D "$out" -Ft -X none \
			-c fast -Z "${item#pgbb-}-zstd:level=3"
		RM_NAME[$item]=$out
		stored=$(bytes_of "$out")
		if [ "$item" = pgbb-client ]; then
			wire=$(($(zstd -dc "$out/base.tar.zst" | wc -c) + $(stat -c %s "$out/backup_manifest")))
		else
			wire=$stored
		fi
		;;
	walg)
		timed "$lg" "${RMRUN[@]}" "${envs[@]}" WALG_FILE_PREFIX="$T/rwalg" "$T/bin/wal-g" backup-push
		RM_NAME[$item]=$(sed -n 's/.*Wrote backup with name \(base_[0-9A-F_D]*\).*/\1/p' "$T/log/$lg.log" | tail -n 1)
		stored=$(bytes_of "$T/rwalg/basebackups_005/${RM_NAME[$item]}" "$T/rwalg/basebackups_005/${RM_NAME[$item]}_backup_stop_sentinel.json")
		;;
	esac
	{ [ -n "${RM_NAME[$item]}" ] && [ -n "$wire" ]; } || fail "remote $item: no backup name or byte count in its log"
	rm_walsenders_gone "$RM_DIR"
	s1=$(rm_pg_ticks "$RM_DIR")
	TM_SERVER_CPU=$(awk -v a="$s0" -v b="$s1" -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", (b - a) / hz }')
	sample remote remote-backup "${RM_TOOL[$item]}" zstd "${RM_SETTINGS[$item]}" "$run" "$stored" "${RM_NAME[$item]}"
	printf '{"dataset":"remote","op":"remote-wire","tool":"%s","codec":"zstd","settings":"%s","run":%s,"wire_bytes":%s}\n' \
		"${RM_TOOL[$item]}" "${RM_SETTINGS[$item]}" "$run" "$wire" >>"$SAMPLES"
}

rm_peer_restore() { # ITEM RUN
	local item=$1 run=$2 dest=$T/restore lg=remote-restore-$1-$2
	rm -rf "$dest"
	mkdir -m 700 "$dest"
	pg_own "$dest"
	# shellcheck disable=SC2016 # expanded by the inner shell
	case $item in
	walc-*) timed "$lg" "${RMRUN[@]}" WALG_FILE_PREFIX="$T/rpeer" "${BEST[@]}" "$T/bin/walc" backup-fetch "$dest" "${RM_NAME[$item]}" ;;
	walg) timed "$lg" "${RMRUN[@]}" WALG_FILE_PREFIX="$T/rwalg" "${BEST[@]}" "$T/bin/wal-g" backup-fetch "$dest" "${RM_NAME[$item]}" ;;
	pgbb-*) timed "$lg" bash -c 'set -o pipefail; zstd -d -q -c "$1/base.tar.zst" | tar -C "$2" -xf - && sync -f "$2"' \
		pgbb "${RM_NAME[$item]}" "$dest" ;;
	esac
	[ -f "$dest/global/pg_control" ] || fail "remote $item: its restore has no pg_control"
	# shellcheck disable=SC2034 # read by run.sh's sample
	TM_SERVER_CPU=null
	sample remote remote-restore "${RM_TOOL[$item]}" zstd "${RM_SETTINGS[$item]}" "$run" "$(pgdata_bytes "$dest")" "${RM_NAME[$item]}"
	rm -rf "$dest"
}

# bench_remote_peers DIR PORT: the rows above on the running cluster in DIR; RUN in the chroot
# of that cluster (remote.sh's subshell has pgv_use'd it)
bench_remote_peers() {
	local run item items=(walc-client pgbb-client walc-server pgbb-server)
	RM_DIR=$1 RM_PORT=$2
	declare -gA RM_NAME RM_TOOL RM_SETTINGS
	RMRUN=(unshare --mount --propagation private -- "$PGV_DIR/in-chroot.sh" "$PGV_ROOT" "$T" postgres env -u PGDATA HOME="$T/home")
	[ -x "$T/bin/walc" ] || cp "$WALC" "$T/bin/walc"
	if [ ${#WALG_ITEMS[@]} -gt 0 ]; then
		[ -x "$T/bin/wal-g" ] || cp "$WALG" "$T/bin/wal-g"
		items+=(walg)
	fi
	# repositories of their own, the postgres user's: remote.sh's walc runs as root
	mkdir -p "$T/rpeer" "$T/rwalg"
	pg_own "$T/bin" "$T/rpeer" "$T/rwalg"
	RM_TOOL=([walc-client]=walc [walc-server]=walc [pgbb-client]=pg_basebackup [pgbb-server]=pg_basebackup [walg]=wal-g)
	RM_SETTINGS=([walc-client]="client zstd" [walc-server]="server zstd (WALG_REMOTE_COMPRESSION=zstd)"
		[pgbb-client]="-Ft -X none -Z client-zstd:level=3" [pgbb-server]="-Ft -X none -Z server-zstd:level=3"
		[walg]="client zstd, upload-disk-concurrency=$CORES")
	log "remote: full backups against pg_basebackup${items[4]:+ and WAL-G}, $RUNS run(s)"
	for ((run = 1; run <= RUNS; run++)); do
		while read -r item; do rm_peer_push "$item" "$run"; done < <(rotate $((run - 1)) "${items[@]}")
		while read -r item; do rm_peer_restore "$item" "$run"; done < <(rotate $((run - 1)) "${items[@]}")
		# only the last run's backups are kept: the disk holds one of each at a time
		for item in "${items[@]}"; do
			case $item in
			pgbb-*) rm -rf "${RM_NAME[$item]}" ;;
			walc-*) rm -rf "$T/rpeer/basebackups_005/${RM_NAME[$item]}"* ;;
			walg) rm -rf "$T/rwalg/basebackups_005/${RM_NAME[$item]}"* ;;
			esac
		done
	done
}
