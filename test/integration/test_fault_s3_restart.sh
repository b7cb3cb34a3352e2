#!/usr/bin/env bash
# The S3 server (Ceph RGW's radosgw) killed with SIGKILL and restarted while backup-push runs.
#
# A cluster with ~50 MB of data (pgbench -i -s 3) archiving to RGW with walc wal-push;
# backup-push as postgres with zstd + libsodium, 5 MiB multipart parts, WALG_TAR_SIZE_THRESHOLD
# of 8 MB and WALG_DISK_RATE_LIMIT=10000000 (a push takes ~6 s).
#   A. radosgw killed ~3 s into a push that may retry only once (S3_MAX_RETRIES=1), kept down
#      for 10 s: backup-push exits 1 (within 10 s of the kill) and no sentinel exists; some of
#      its objects stay behind (leftovers, counted).
#   B. radosgw killed ~2 s into a push with the default retries (15) and restarted 5 s later:
#      the push completes through its retries (exit 0, sentinel) or fails with no sentinel
#      (both are allowed; which one happened is reported).
#   C. a push with the server up succeeds.
# Then `delete garbage --confirm` removes every object of the failed pushes: every object left
# under basebackups_005/ belongs to a backup with a sentinel; backup-list lists the same backups
# as before; the newest backup restores from RGW (backup-fetch, recovery through walc wal-fetch
# to 'immediate', amcheck, pgbench's 300000 accounts). Multipart uploads left pending by the failed push
# are counted (invisible to listings; S3 lifecycle rules clean those).
# integration: solo
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup fault-s3-restart
START=$SECONDS

s3_rgw_start
s3_mb walc
KEY=WalcFaultS3RestartKey-0123456789 # 32 characters
E=(WALG_S3_PREFIX=s3://walc/bk AWS_ENDPOINT="$S3_ENDPOINT" AWS_S3_FORCE_PATH_STYLE=true
	AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY"
	AWS_REGION=us-east-1 WALG_COMPRESSION_METHOD=zstd "WALG_LIBSODIUM_KEY=$KEY"
	S3_CONNECT_TIMEOUT=2 S3_LOW_SPEED_TIMEOUT=10)
PUSH_E=(S3_MAX_PART_SIZE=5242880 WALG_TAR_SIZE_THRESHOLD=8000000 WALG_DISK_RATE_LIMIT=10000000)
walc_wrapper "${E[@]}"

pgbench_source 3 archive.log
log "source up on port $PORT; $((SECONDS - START))s"

sentinel_of() { awsc s3 ls "s3://walc/bk/basebackups_005/$1_backup_stop_sentinel.json" >/dev/null 2>&1; }
# push_with_outage NAME KILL_AFTER DOWN_FOR [ENV...]: a backup-push in the background; radosgw
# killed KILL_AFTER seconds after it started, restarted DOWN_FOR seconds later. Sets P_RC,
# P_MS (the push's time), P_EXIT_AFTER_KILL_MS (when it exited, counted from the kill),
# P_NAME (the backup's name from its log).
push_with_outage() {
	local tag=$1 after=$2 down=$3 errf=$T/log/push-$1.err bg t0 t_kill
	shift 3
	as_pg env PGDATA="$SRC" PGHOST="$T" PGPORT="$PORT" "${E[@]}" "${PUSH_E[@]}" "$@" \
		"$WALC_PG" backup-push "$SRC" >"$T/log/push-$tag.out" 2>"$errf" </dev/null &
	bg=$!
	BG_PIDS+=("$bg")
	t0=$(date +%s%N)
	wait_started "$errf" "$bg" "$tag: backup-push"
	sleep "$after"
	kill -0 "$bg" 2>/dev/null || { cat "$errf" >&2; fail "$tag: backup-push ended before the outage"; }
	t_kill=$(date +%s%N)
	s3_rgw_kill
	log "$tag: radosgw killed $after s into the push; down for $down s"
	P_EXIT_AFTER_KILL_MS=""
	for _ in $(seq 1 $((down * 10))); do
		if [ -z "$P_EXIT_AFTER_KILL_MS" ] && ! kill -0 "$bg" 2>/dev/null; then
			P_EXIT_AFTER_KILL_MS=$((($(date +%s%N) - t_kill) / 1000000))
		fi
		sleep 0.1
	done
	s3_rgw_restart
	log "$tag: radosgw back after $((($(date +%s%N) - t_kill) / 1000000)) ms"
	P_RC=0
	wait "$bg" || P_RC=$?
	P_MS=$((($(date +%s%N) - t0) / 1000000))
	[ -n "$P_EXIT_AFTER_KILL_MS" ] || P_EXIT_AFTER_KILL_MS=$((($(date +%s%N) - t_kill) / 1000000))
	assert_no_sanitizer_reports "$errf"
	P_NAME=$(grep -oE 'base_[0-9A-F]{24}(_D_[0-9A-F]{24})?' "$errf" | head -n 1 || true)
}

# ---- A: the push cannot outlast the outage --------------------------------------------------------
push_with_outage A 3 10 S3_MAX_RETRIES=1
[ "$P_RC" = 1 ] || { cat "$T/log/push-A.err" >&2; fail "A: backup-push with one retry through a 10 s outage exited $P_RC, want 1"; }
[ "$P_EXIT_AFTER_KILL_MS" -le 10000 ] || fail "A: backup-push with one retry exited only $P_EXIT_AFTER_KILL_MS ms after the kill"
A_NAME=$P_NAME
[ -n "$A_NAME" ] || fail "A: no backup name in the log"
sentinel_of "$A_NAME" && fail "A: the failed push $A_NAME has a sentinel"
A_LEFT=$(awsc s3 ls --recursive "s3://walc/bk/basebackups_005/$A_NAME/" 2>/dev/null | wc -l)
A_PENDING=$(s3_pending_uploads walc)
ok "A: exit 1 $P_EXIT_AFTER_KILL_MS ms after the kill, no sentinel for $A_NAME; $A_LEFT objects left behind, $A_PENDING multipart uploads pending:" \
	"$(grep ERROR "$T/log/push-A.err" | head -n 1 | cut -c 1-240)"

# ---- B: the push rides out a 5 s outage -------------------------------------------------------------
psqlc "$PORT" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 100 = 0"
push_with_outage B 2 5
B_NAME=$P_NAME
if [ "$P_RC" = 0 ]; then
	sentinel_of "$B_NAME" || fail "B: backup-push exited 0 but $B_NAME has no sentinel"
	B_OUT="completed through its retries in $P_MS ms"
else
	[ "$P_RC" = 1 ] || { cat "$T/log/push-B.err" >&2; fail "B: backup-push exited $P_RC"; }
	sentinel_of "$B_NAME" && fail "B: the failed push $B_NAME has a sentinel"
	B_OUT="failed with no sentinel: $(grep ERROR "$T/log/push-B.err" | head -n 1 | cut -c 1-200)"
fi
retries=$(grep -c -i -E 'retry|retrying' "$T/log/push-B.err" || true)
ok "B: $B_NAME $B_OUT ($retries retry lines logged)"

# ---- C: a push with the server up ----------------------------------------------------------------
psqlc "$PORT" "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 100 = 1"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "C: backup-push with the server up"
wrun "${E[@]}" -- backup-list
expect_rc 0 "backup-list"
LISTED_BEFORE=$(printf '%s\n' "$W_OUT" | tail -n +2 | cut -f 1 -d ' ' | sort)
C_NAME=$(printf '%s\n' "$W_OUT" | tail -n 1 | cut -f 1 -d ' ')
ok "C: $C_NAME complete; listed: $(printf '%s' "$LISTED_BEFORE" | tr '\n' ' ')"

# ---- garbage ---------------------------------------------------------------------------------------
wrun "${E[@]}" -- delete garbage --confirm
expect_rc 0 "delete garbage --confirm"
deleted=$(printf '%s\n' "$W_OUT" | grep -c '^deleted ' || true)
orphans=""
while read -r _ _ _ key; do
	[ -n "$key" ] || continue
	rest=${key#bk/basebackups_005/}
	b=${rest%%/*}
	b=${b%_backup_stop_sentinel.json}
	sentinel_of "$b" || orphans="$orphans $key"
done < <(awsc s3 ls --recursive s3://walc/bk/basebackups_005/)
[ -z "$orphans" ] || fail "objects of failed pushes left after delete garbage:$orphans"
wrun "${E[@]}" -- backup-list
LISTED_AFTER=$(printf '%s\n' "$W_OUT" | tail -n +2 | cut -f 1 -d ' ' | sort)
assert_eq "$LISTED_BEFORE" "$LISTED_AFTER" "backups listed after delete garbage"
ok "delete garbage removed $deleted objects; every object left belongs to a backup with a sentinel"

# ---- the newest backup restores from RGW -------------------------------------------------------------
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 120
pg_stop "$SRC"
R=$T/restored
RECOVER_FETCH=$T/walc.sh restore_start "$R" LATEST "${E[@]}"
amcheck_all "$RPORT"
assert_eq 300000 "$(psqlc "$RPORT" "SELECT count(*) FROM pgbench_accounts")" "restored pgbench_accounts"
pg_stop "$R"
ok "$C_NAME restores from RGW after the outages"
log "all done in $((SECONDS - START))s"
