#!/usr/bin/env bash
# A second repository that keeps up (issue 44 §3, acceptance 3, shortened): a cluster (1 MiB
# segments) archives into a file repository (zstd, libsodium) under pgbench for DR_SECONDS
# (60 here; 600 by hand: DR_SECONDS=600), while `walc copy --with-history --every 5s` keeps a
# copy on Ceph RGW and pushes each run's walc_copy_lag_seconds to a Pushgateway.
#   - Every run succeeds and the lag the Pushgateway shows stays under DR_BOUND (30 s); measured
#     apart from walc too: each WAL object appeared on RGW (its LastModified) within DR_BOUND of
#     its arrival in the first repository (the file's mtime).
#   - The first repository is deleted; the cluster restored from the second alone, through walc
#     wal-fetch, reaches its last archived segment with pg_dumpall equal to the source's.
# integration: solo
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup dr-copy
START=$SECONDS
DR_SECONDS=${DR_SECONDS:-60}
DR_BOUND=${DR_BOUND:-30}

s3_rgw_start
s3_mb walc
GW_PORT=$(s3_port 1)
pushgateway_start "$GW_PORT"

head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/key.hex"
chmod 644 "$T/key.hex"
KEYS=(WALG_LIBSODIUM_KEY_PATH="$T/key.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex)
pitr_source WALG_COMPRESSION_METHOD=zstd "${KEYS[@]}"
pgbench_init "$PORT" 1
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push"

cat >"$T/primary.json" <<EOF
{"WALG_FILE_PREFIX": "$R"}
EOF
cat >"$T/dr.json" <<EOF
{"WALG_S3_PREFIX": "s3://walc/dr", "AWS_ENDPOINT": "$S3_ENDPOINT", "AWS_S3_FORCE_PATH_STYLE": "true",
 "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "$AWS_ACCESS_KEY_ID",
 "AWS_SECRET_ACCESS_KEY": "$AWS_SECRET_ACCESS_KEY"}
EOF
chmod 644 "$T/primary.json" "$T/dr.json"
WALG_PUSHGATEWAY_URL="http://127.0.0.1:$GW_PORT" "$WALC" copy --from "$T/primary.json" \
	--to "$T/dr.json" --with-history --every 5s 2>"$T/log/copy.log" &
COPIER=$!
BG_PIDS+=("$COPIER")

# gauge NAME: the copy's last pushed value of NAME
gauge() {
	curl -sf "http://127.0.0.1:$GW_PORT/metrics" |
		awk -v n="$1" '$1 ~ "^"n"\\{" && $1 ~ /command="copy"/ { print $2 }'
}

as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -T "$DR_SECONDS" -c 2 -R 500 postgres \
	>"$T/log/pgbench.log" 2>&1 &
BENCH=$!
BG_PIDS+=("$BENCH")
max_lag=0 polls=0
while kill -0 "$BENCH" 2>/dev/null; do
	sleep 5
	ok_run=$(gauge walc_run_success)
	lag=$(gauge walc_copy_lag_seconds)
	[ -n "$lag" ] || continue
	polls=$((polls + 1))
	[ "$ok_run" = 1 ] || { tail -n 20 "$T/log/copy.log" >&2; fail "a copy run failed"; }
	max_lag=$(awk -v a="$max_lag" -v b="$lag" 'BEGIN { print (b > a) ? b : a }')
done
wait "$BENCH" || fail "pgbench (see $T/log/pgbench.log)"
[ "$polls" -ge 3 ] || fail "the Pushgateway had the copy's lag only $polls times"
awk -v a="$max_lag" -v b="$DR_BOUND" 'BEGIN { exit !(a < b) }' ||
	fail "walc_copy_lag_seconds reached $max_lag s (bound $DR_BOUND s)"
ok "$DR_SECONDS s of pgbench: walc_copy_lag_seconds at most $max_lag s over $polls polls; $((SECONDS - START))s"

FINAL=$(switch_wal "$PORT")
wait_archived "$SRC" "$FINAL" 120
dump_norm "$PORT" >"$T/src.dump"
pg_stop "$SRC"
for _ in $(seq 1 120); do
	awsc s3api head-object --bucket walc --key "dr/wal_005/$FINAL.zst" >/dev/null 2>&1 && break
	sleep 0.5
done
awsc s3api head-object --bucket walc --key "dr/wal_005/$FINAL.zst" >/dev/null 2>&1 ||
	fail "the last segment $FINAL did not reach the second repository within 60 s"
kill -TERM "$COPIER"
wait "$COPIER" || fail "the copier did not stop cleanly on SIGTERM (see $T/log/copy.log)"

# the lag measured apart from walc: RGW's LastModified against the first repository's mtime
awsc s3api list-objects-v2 --bucket walc --prefix dr/wal_005/ \
	--query 'Contents[].[Key,LastModified]' --output text >"$T/dr-times"
worst=0 n=0
while read -r key when; do
	f=$R/wal_005/${key#dr/wal_005/}
	[ -f "$f" ] || continue
	d=$(($(date -d "$when" +%s) - $(stat -c %Y "$f")))
	n=$((n + 1))
	[ "$d" -gt "$worst" ] && worst=$d
done <"$T/dr-times"
[ "$n" -gt 10 ] || fail "only $n WAL objects compared"
[ "$worst" -lt "$DR_BOUND" ] || fail "a WAL object reached RGW $worst s after the first repository"
ok "each of $n WAL objects reached RGW within $worst s (bound $DR_BOUND s)"

rm -rf "$R"
restore_start "$T/r" LATEST WALG_CONFIG_PATH="$T/dr.json" "${KEYS[@]}" WALG_PG_WAL_SIZE=1 \
	-- "recovery_target_timeline = 'latest'"
assert_dump_eq "$T/src.dump" "$RPORT" "the cluster restored from the second repository"
pg_stop "$T/r"
grep -q "restored log file \"$FINAL\" from archive" "$T/r.log" ||
	fail "recovery from the second repository did not reach $FINAL"
ok "first repository deleted: restored from the second alone to $FINAL; $((SECONDS - START))s"
