#!/usr/bin/env bash
# Load: LOAD_N (300) wal-push processes at once against Ceph RGW through the fault proxy
# (s3_faultproxy.py) failing 10% of requests (connection dropped before or mid-answer, 503
# SlowDown, 500 InternalError).
#   - N distinct 1 MiB segment files (WALG_PG_WAL_SIZE=1), named as the WAL segments
#     000000010000000000000001..00000001000000000000012C for 300, the WAL page magic 0xD110 in
#     their first two bytes, their name and random bytes after it;
#   - all N wal-push processes start together and every one exits 0; the wall time of the
#     whole batch and the slowest process are reported (WAL-G does 300 within 100 s; the batch
#     must finish within LOAD_LIMIT seconds, default 100);
#   - the proxy injected at least 5% faults;
#   - all N come back byte-identical with wal-fetch through the same faulty proxy (30 at a
#     time); RGW holds exactly one object per segment (wal_005/NAME.lz4, encrypted);
#   - the peak memory of one wal-push (VmHWM, sampled) is reported.
# A sanitizer or coverage build runs 100 within 300 s by default: what it looks for, memory
# errors on the fault paths, 100 processes reach as well (the proxy's faults are drawn in
# request order from a fixed seed). With 300 the test took 184 s of a CI rehearsal's coverage
# + ASan run, alone on the machine; with 100, 36 s on the ASan binary. .ci/run also runs this
# test on the plain binary, at 300.
# integration: solo
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup fault-load
START=$SECONDS
N=${LOAD_N:-300}
LIMIT=${LOAD_LIMIT:-100}
if walc_instrumented; then
	N=${LOAD_N:-100}
	LIMIT=${LOAD_LIMIT:-300}
fi

s3_rgw_start
s3_mb walc
PPORT=$(s3_port 1)
"$PY" "$IT_DIR/s3_faultproxy.py" --listen "$PPORT" --upstream "127.0.0.1:$RGW_PORT" \
	--log "$T/log/proxy.log" --rate 0.1 --faults drop,dropmid,503,500 --seed 11 \
	>"$T/log/proxy.out" 2>&1 &
S3_PIDS+=("$!")
for _ in $(seq 100); do grep -q ready "$T/log/proxy.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$T/log/proxy.out" || fail "fault proxy did not start"
KEY=WalcFaultLoadTestKey-0123456789ab # 32 characters
E=(WALG_S3_PREFIX=s3://walc/load AWS_ENDPOINT="http://127.0.0.1:$PPORT" AWS_S3_FORCE_PATH_STYLE=true
	AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY"
	AWS_REGION=us-east-1 WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=lz4 "WALG_LIBSODIUM_KEY=$KEY"
	S3_CONNECT_TIMEOUT=5 S3_LOW_SPEED_TIMEOUT=10 WALG_DOWNLOAD_CONCURRENCY=1 PGDATA="$T/pgdata")

mkdir -p "$T/wal" "$T/back" "$T/rc"
"$PY" - "$T/wal" "$N" <<'EOF'
import os, struct, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    name = "00000001%08X%08X" % (i // 4096, i % 4096)
    # a long page header for the name's place: walc refuses a "segment" without one
    head = struct.pack("<HHIQI4xQII", 0xD110, 2, 1, i << 20, 0, 7000000000000000042, 1 << 20, 8192)
    body = head + (name.encode() * 20) + os.urandom(262144)
    body += (b"segment " + name.encode() + b" ") * 40000
    with open(os.path.join(d, name), "wb") as f:
        f.write(body[: 1 << 20].ljust(1 << 20, b"\0"))
EOF
SEGS=()
for f in "$T"/wal/*; do SEGS+=("$(basename "$f")"); done
assert_eq "$N" "${#SEGS[@]}" "segment files made"
assert_eq "$(printf '00000001%08X%08X' $((N / 4096)) $((N % 4096)))" "${SEGS[-1]}" "the last segment's name"

# one process: every push records its exit status and time; the batch waits for all
push_one() {
	local s=$1 t0 rc
	t0=$(date +%s%N)
	rc=0
	env "${E[@]}" "$WALC" wal-push "$T/wal/$s" >/dev/null 2>"$T/rc/$s.err" </dev/null || rc=$?
	echo "$rc $((($(date +%s%N) - t0) / 1000000))" >"$T/rc/$s"
}
# VmHWM of wal-push processes while they run (the largest seen)
sample_rss() {
	local max=0 p v
	while [ ! -e "$T/rc/.done" ]; do
		for p in $(pgrep -f "$WALC wal-push $T/wal/" 2>/dev/null || true); do
			v=$(awk '/^VmHWM/ { print $2 }' "/proc/$p/status" 2>/dev/null || true)
			[ -n "$v" ] && [ "$v" -gt "$max" ] && max=$v
		done
		sleep 0.2
	done
	echo "$max" >"$T/rc/.rss"
}
sample_rss &
SAMPLER=$!
BG_PIDS+=("$SAMPLER")
log "starting $N wal-push processes at once through 10% faults"
t0=$(date +%s%N)
pids=()
for s in "${SEGS[@]}"; do
	push_one "$s" &
	pids+=("$!")
done
for p in "${pids[@]}"; do wait "$p" || true; done
BATCH_MS=$((($(date +%s%N) - t0) / 1000000))
touch "$T/rc/.done"
wait "$SAMPLER" || true
failed=0 slowest=0
for s in "${SEGS[@]}"; do
	[ -f "$T/rc/$s" ] || { failed=$((failed + 1)); echo "no status for $s" >&2; continue; }
	read -r rc ms <"$T/rc/$s"
	assert_no_sanitizer_reports "$T/rc/$s.err"
	if [ "$rc" != 0 ]; then
		failed=$((failed + 1))
		printf 'wal-push %s exit %s: %s\n' "$s" "$rc" "$(grep ERROR "$T/rc/$s.err" | tail -n 1)" >&2
	fi
	[ "$ms" -gt "$slowest" ] && slowest=$ms
done
[ "$failed" = 0 ] || fail "$failed of $N concurrent wal-push processes failed"
total=$(wc -l <"$T/log/proxy.log")
faulted=$(awk '$4 != "ok"' "$T/log/proxy.log" | wc -l)
[ "$faulted" -ge $((total / 20)) ] || fail "only $faulted of $total requests faulted"
retried=$(grep -l -i -E 'retry|retrying|attempt' "$T"/rc/*.err 2>/dev/null | wc -l)
[ "$BATCH_MS" -le $((LIMIT * 1000)) ] || fail "$N concurrent wal-push took $BATCH_MS ms (limit ${LIMIT}s)"
ok "$N concurrent wal-push through 10% faults: all exit 0 in $BATCH_MS ms (slowest process $slowest ms;" \
	"$faulted of $total requests faulted; $retried processes logged retries;" \
	"peak VmHWM of one wal-push $(cat "$T/rc/.rss") KiB)"

# exactly one object per segment, straight from RGW (awscli, not through the proxy)
awsc s3 ls s3://walc/load/wal_005/ >"$T/log/ls.txt" 2>"$T/log/ls.err" || { cat "$T/log/ls.err" >&2; fail "aws s3 ls"; }
assert_eq "$N" "$(grep -cE ' [0-9A-F]{24}\.lz4$' "$T/log/ls.txt")" "objects wal_005/SEGMENT.lz4 on RGW"
assert_eq "$N" "$(wc -l <"$T/log/ls.txt")" "objects under wal_005/ on RGW"

# ---- fetch all back through the same faults, 30 at a time ------------------------------------------
t0=$(date +%s%N)
export T WALC
# shellcheck disable=SC2016 # expanded by the inner sh
printf '%s\n' "${SEGS[@]}" | xargs -P 30 -I{} env "${E[@]}" sh -c \
	'"$WALC" wal-fetch "$1" "$T/back/$1" >/dev/null 2>"$T/back/.$1.err" || echo "$1" >>"$T/back/.failed"' sh {}
FETCH_MS=$((($(date +%s%N) - t0) / 1000000))
if [ -s "$T/back/.failed" ]; then
	while read -r s; do printf 'wal-fetch %s: %s\n' "$s" "$(tail -n 1 "$T/back/.$s.err")" >&2; done <"$T/back/.failed"
	fail "$(wc -l <"$T/back/.failed") wal-fetch calls failed through the faults"
fi
for s in "${SEGS[@]}"; do
	assert_same_file "$T/wal/$s" "$T/back/$s" "wal-fetch $s through the faults"
done
total2=$(wc -l <"$T/log/proxy.log")
ok "all $N segments fetched back byte-identical through the faults in $FETCH_MS ms" \
	"($((total2 - total)) requests)"
log "all done in $((SECONDS - START))s"
