#!/usr/bin/env bash
# The SFTP server (sshd and every session process under it) killed with SIGKILL in the middle
# of uploads.
#
# A cluster with ~50 MB of data (pgbench -i -s 3) archiving to SFTP with walc wal-push.
#   A. backup-push (zstd, 8 MB partitions, WALG_DISK_RATE_LIMIT=10000000: ~5 s) with one retry
#      allowed (SSH_MAX_RETRIES=1): sshd killed 2 s in, while partitions are being written,
#      and kept down: the push exits 1. With sshd back: the killed uploads' temporaries are on
#      the server's disk, but no listing shows them, and every object a listing shows is
#      whole (each partition decodes to its end through walc st cat, each JSON parses; on the
#      server's disk every file under its real name decodes too); no sentinel; backup-list
#      does not show the backup. A second backup-push succeeds.
#   B. wal-push of a 16 MiB segment (no compression) through a proxy slowed to 2 MB/s, sshd
#      killed 2 s in: exit 1; the segment is in no listing and wal-fetch answers 74 (does not
#      exist), while its temporary on the server's disk is part-written. With sshd back, the
#      same wal-push succeeds and wal-fetch returns identical bytes.
# Then `delete garbage --confirm` (the temporaries aged past its hour) leaves no temporary
# and no object of the failed backup; the second backup restores from SFTP (backup-fetch,
# recovery through walc wal-fetch to 'immediate', amcheck, pgbench's 300000 accounts).
. "$(dirname "$0")/lib.sh"
# shellcheck source=objstore_lib.sh
. "$(dirname "$0")/objstore_lib.sh"
store_setup fault-sftp-kill
START=$SECONDS

sftp_start
mkdir -p "$SFTP_ROOT/bk" "$SFTP_ROOT/wal"
pg_own "$SFTP_ROOT"
E=(WALG_SSH_PREFIX="ssh://127.0.0.1$SFTP_ROOT/bk" "${SFTP_ENV[@]}" WALG_COMPRESSION_METHOD=zstd)
PUSH_E=(WALG_TAR_SIZE_THRESHOLD=8000000 WALG_DISK_RATE_LIMIT=10000000)
walc_wrapper "${E[@]}"
pgbench_source 3 archive.log
log "source up on port $PORT; $((SECONDS - START))s"

hidden_temps() { find "$SFTP_ROOT/$1" -type f -name '.*.walc-tmp.*' | sort; }
# whole_on_disk DIR: every file under its real name below DIR decodes or parses to its end
whole_on_disk() {
	local f
	while IFS= read -r f; do
		case $f in
		*.zst) zstd -q -t "$f" || fail "$f is visible and not a whole zstd stream" ;;
		*.json) "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$f" ||
			fail "$f is visible and not whole JSON" ;;
		esac
	done < <(find "$SFTP_ROOT/$1" -type f ! -name '.*')
}

# kill_mid TAG ERRFILE PID: 2 s on, the walc PID (still running) loses sshd and every session
# process under it, and exits 1
kill_mid() {
	local rc=0
	sleep 2
	kill -0 "$3" 2>/dev/null || { cat "$2" >&2; fail "$1: walc ended before sshd was killed"; }
	MID_TEMPS=$(hidden_temps "" | wc -l)
	sftp_stop
	log "$1: sshd killed with its $((SSHD_KILLED - 1)) session processes"
	wait "$3" || rc=$?
	assert_no_sanitizer_reports "$2"
	[ "$rc" = 1 ] || { cat "$2" >&2; fail "$1: walc with sshd killed exited $rc, want 1"; }
}

# ---- A: backup-push killed mid-upload ---------------------------------------------------------
as_pg env PGDATA="$SRC" PGHOST="$T" PGPORT="$PORT" "${E[@]}" "${PUSH_E[@]}" SSH_MAX_RETRIES=1 \
	"$WALC_PG" backup-push "$SRC" >"$T/log/push-A.out" 2>"$T/log/push-A.err" </dev/null &
bg=$!
BG_PIDS+=("$bg")
wait_started "$T/log/push-A.err" "$bg" "A: backup-push"
kill_mid A "$T/log/push-A.err" "$bg"
A_NAME=$(grep -oE 'base_[0-9A-F]{24}' "$T/log/push-A.err" | head -n 1 || true)
[ -n "$A_NAME" ] || fail "A: no backup name in the log"
temps=$(hidden_temps bk | wc -l)
[ "$temps" -ge 1 ] || fail "A: no upload was cut (no temporary on the server's disk; $MID_TEMPS while it ran)"
sshd_launch || fail "sshd did not start again"
wrun "${E[@]}" -- st ls -r basebackups_005/
expect_rc 0 "A: st ls -r basebackups_005/"
listing=$W_OUT
assert_not_contains "$listing" "walc-tmp" "A: the listing"
assert_not_contains "$listing" "${A_NAME}_backup_stop_sentinel.json" "A: the listing"
n=0
# WAL-G's listing: a header, then "obj SIZE DATE TIME +0000 UTC NAME", names below the folder
while read -r type _ _ _ _ _ name; do
	[ "$type" = obj ] && [ -n "$name" ] || continue
	key=basebackups_005/$name
	wrun "${E[@]}" -- st cat "$key"
	expect_rc 0 "A: st cat of the listed $key (decoded whole)"
	n=$((n + 1))
done <<<"$listing"
whole_on_disk bk
wrun "${E[@]}" -- backup-list
assert_not_contains "$W_OUT" "$A_NAME" "A: backup-list after the failed push"
ok "A: exit 1 with sshd killed mid-upload: $temps temporaries on the server's disk, none listed;" \
	"$n listed objects each whole; no sentinel: $(grep ERROR "$T/log/push-A.err" | head -n 1 | cut -c 1-200)"
psqlc "$PORT" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 100 = 0"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "A: backup-push with sshd back"
GOOD=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
ok "A: the next backup-push succeeds: $GOOD"

# ---- B: wal-push killed mid-upload --------------------------------------------------------------
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 120
cp "$SRC/pg_wal/$seg" "$T/$seg" 2>/dev/null || { seg=000000010000000000000099; head -c 16777216 /dev/urandom >"$T/$seg"; }
tcp_proxy_start slow "$SSHD_PORT" --bps 2000000
{
	echo "[127.0.0.1]:$PPORT $(cut -d' ' -f1,2 "$SSHD_DIR/host_key.pub")"
	cat "$SSHD_DIR/known_hosts"
} >"$T/slow_hosts"
W=(WALG_SSH_PREFIX="ssh://127.0.0.1$SFTP_ROOT/wal" SSH_PORT="$PPORT" SSH_USERNAME=walc
	SSH_PRIVATE_KEY_PATH="$SSHD_DIR/id_ed25519" SSH_KNOWN_HOSTS="$T/slow_hosts" WALG_COMPRESSION_METHOD=none)
env "${W[@]}" SSH_MAX_RETRIES=1 "$WALC" wal-push "$T/$seg" >"$T/log/push-B.out" 2>"$T/log/push-B.err" </dev/null &
bg=$!
BG_PIDS+=("$bg")
kill_mid B "$T/log/push-B.err" "$bg"
tmp=$(hidden_temps wal | head -n 1)
[ -n "$tmp" ] || fail "B: no temporary of the cut upload on the server's disk"
size=$(stat -c %s "$tmp")
[ "$size" -gt 0 ] && [ "$size" -lt 16777216 ] || fail "B: the temporary holds $size bytes: not cut mid-upload"
sshd_launch || fail "sshd did not start again"
wrun "${W[@]}" -- st ls -r /
expect_rc 0 "B: st ls -r"
assert_not_contains "$W_OUT" "$seg" "B: the listing after the cut wal-push"
wrun "${W[@]}" -- wal-fetch "$seg" "$T/fetched"
expect_rc 74 "B: wal-fetch of the segment whose upload was cut"
assert_absent "$T/fetched" "B: wal-fetch's destination"
whole_on_disk wal
# the retry goes straight to sshd (the slow proxy only made the cut land mid-upload)
W+=(SSH_PORT="$SSHD_PORT")
wrun "${W[@]}" -- wal-push "$T/$seg"
expect_rc 0 "B: wal-push with sshd back"
wrun "${W[@]}" -- wal-fetch "$seg" "$T/fetched"
expect_rc 0 "B: wal-fetch"
assert_same_file "$T/$seg" "$T/fetched" "B: the segment fetched after the retry"
ok "B: wal-push cut at $size of 16777216 bytes: exit 1, not listed, wal-fetch 74; the retry stores it whole"

# ---- garbage ------------------------------------------------------------------------------------
# the temporaries of the killed uploads, aged past delete garbage's hour
hidden_temps "" | while IFS= read -r f; do touch -d '2 hours ago' "$f"; done
for R in E W; do
	declare -n env_ref=$R
	wrun "${env_ref[@]}" -- delete garbage --confirm --without-backup-check
	expect_rc 0 "delete garbage --confirm ($R)"
	deleted=$(printf '%s\n' "$W_OUT" | grep -c '^deleted ' || true)
	log "delete garbage ($R) deleted $deleted objects"
done
assert_eq "" "$(hidden_temps "")" "temporaries after delete garbage"
left=$(find "$SFTP_ROOT/bk/basebackups_005" -path "*$A_NAME*" -type f | wc -l)
assert_eq 0 "$left" "objects of the failed backup $A_NAME after delete garbage"
ok "delete garbage removed the temporaries and the failed backup's objects"

# ---- the backup restores from SFTP -----------------------------------------------------------------
last=$(switch_wal "$PORT")
wait_archived "$SRC" "$last" 120
pg_stop "$SRC"
RECOVER_FETCH=$T/walc.sh restore_start "$T/restored" "$GOOD" "${E[@]}"
amcheck_all "$RPORT"
assert_eq 300000 "$(psqlc "$RPORT" "SELECT count(*) FROM pgbench_accounts")" "restored pgbench_accounts"
pg_stop "$T/restored"
ok "$GOOD restores from SFTP after the kills"
log "all done in $((SECONDS - START))s"
