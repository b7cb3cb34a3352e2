#!/usr/bin/env bash
# The S3 backend through a fault-injecting proxy (s3_faultproxy.py) in front of Ceph RGW:
#   1. 20% of requests fail (connection dropped before or mid-answer, 503 SlowDown, 500, a
#      30 s stall against S3_LOW_SPEED_TIMEOUT=5, added latency): 100 wal-push then 100
#      wal-fetch all succeed with identical bytes, each within a bound.
#   2. a GET whose connection breaks twice mid-body resumes with Range requests and delivers
#      identical bytes.
#   3. the server gone for good: wal-push exits 1 within the retry budget (S3_MAX_RETRIES=8:
#      at most 11.3 s of backoff); a server that accepts and never answers: exit 1 within
#      (retries + 1) x low-speed timeout + backoff.
# integration: long
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3faults
START=$SECONDS

s3_build_helpers
s3_rgw_start
s3_mb walc
export AWS_REGION=us-east-1 PGDATA=$T/pgdata

# proxy_start NAME ARGS...: a fault proxy in front of RGW; sets PPORT
proxy_start() {
	local name=$1
	shift
	PPORT=$(s3_port 1)
	"$PY" "$IT_DIR/s3_faultproxy.py" --listen "$PPORT" --upstream "127.0.0.1:$RGW_PORT" \
		--log "$T/log/proxy-$name.log" "$@" >"$T/log/proxy-$name.out" 2>&1 &
	PROXY_PID=$!
	S3_PIDS+=("$PROXY_PID")
	for _ in $(seq 100); do grep -q ready "$T/log/proxy-$name.out" 2>/dev/null && return; sleep 0.1; done
	fail "fault proxy $name did not start"
}

# ---- 1. 100 wal-push + 100 wal-fetch with 20% faults ------------------------------------------
proxy_start random --rate 0.2 --faults drop,dropmid,503,500,stall,latency --stall 30 --seed 7
export WALG_S3_PREFIX=s3://walc/faults AWS_ENDPOINT=http://127.0.0.1:$PPORT WALG_DOWNLOAD_CONCURRENCY=1 \
	S3_LOW_SPEED_TIMEOUT=5 S3_CONNECT_TIMEOUT=2 WALG_PG_WAL_SIZE=1
N=${S3_FAULT_N:-100}
LIMIT=60 # seconds for any single command: a few stalls and backoffs, never a hang
mkdir -p "$T/wal" "$T/fetch"
for i in $(seq 1 "$N"); do
	seg=$(printf '0000000100000000000000%02X' "$i")
	{ head -c 65536 /dev/urandom; { yes "segment $seg" | head -c 983040 || true; }; } >"$T/wal/src"
	fake_segment "$seg" 1048576 "$T/wal/$seg" "$T/wal/src"
	rm "$T/wal/src"
done
worst=0
for f in "$T"/wal/*; do
	t0=$(date +%s%N)
	wrun -- wal-push "$f"
	ms=$(elapsed_ms "$t0")
	[ "$ms" -gt "$worst" ] && worst=$ms
	cat "$T/.w_err" >>"$T/log/walc-faults.log"
	expect_rc 0 "wal-push $(basename "$f") through the fault proxy"
	[ "$ms" -le $((LIMIT * 1000)) ] || fail "wal-push $(basename "$f") took $ms ms"
done
push_worst=$worst
worst=0
for f in "$T"/wal/*; do
	s=$(basename "$f")
	t0=$(date +%s%N)
	wrun -- wal-fetch "$s" "$T/fetch/$s"
	ms=$(elapsed_ms "$t0")
	[ "$ms" -gt "$worst" ] && worst=$ms
	cat "$T/.w_err" >>"$T/log/walc-faults.log"
	expect_rc 0 "wal-fetch $s through the fault proxy"
	assert_same_file "$f" "$T/fetch/$s" "wal-fetch $s through the fault proxy"
	[ "$ms" -le $((LIMIT * 1000)) ] || fail "wal-fetch $s took $ms ms"
done
total=$(wc -l <"$T/log/proxy-random.log")
faulted=$(awk '$4 != "ok"' "$T/log/proxy-random.log" | wc -l)
for kind in drop dropmid 503 500 stall; do
	c=$(awk -v k="$kind" '$4 == k' "$T/log/proxy-random.log" | wc -l)
	[ "$c" -gt 0 ] || fail "the proxy injected no '$kind' fault in $total requests"
done
[ "$faulted" -ge $((total / 10)) ] || fail "only $faulted of $total requests faulted"
log "$N wal-push + $N wal-fetch through 20% faults: $faulted of $total requests faulted;" \
	"slowest push ${push_worst} ms, slowest fetch ${worst} ms"
kill "$PROXY_PID"

# ---- 2. a GET resumed with Range requests -----------------------------------------------------
proxy_start resume --rule '^GET /walc/faults/big' 'dropmid#2'
head -c $((24 * 1024 * 1024)) /dev/urandom >"$T/big"
AWS_ENDPOINT=$S3_ENDPOINT "$S3_LIVE" put big "$T/big" || fail "storing the resume object"
AWS_ENDPOINT=http://127.0.0.1:$PPORT WALG_LOG_LEVEL=DEVEL "$S3_LIVE" get big "$T/big.back" 2>"$T/log/resume.err" || {
	cat "$T/log/resume.err" >&2
	fail "get through two broken connections"
}
assert_same_file "$T/big" "$T/big.back" "object read across two broken connections"
assert_eq 2 "$(grep -c 'resuming with a Range request' "$T/log/resume.err")" "resumed GETs"
assert_eq 3 "$(grep -c '^[0-9]* GET /walc/faults/big' "$T/log/proxy-resume.log")" "GET requests"
grep -q 'range: bytes=[1-9][0-9]*-' "$T/log/resume.err" || fail "no Range header in the resumed GET"
log "a GET broken twice mid-body resumed with Range requests, bytes identical"
kill "$PROXY_PID"

# ---- 3. bounded failure: server gone, server silent -------------------------------------------
gone=$(s3_port 1) # nothing listens there
t0=$(date +%s%N)
wrun AWS_ENDPOINT="http://127.0.0.1:$gone" S3_MAX_RETRIES=8 -- wal-push "$T/wal/000000010000000000000001"
ms=$(elapsed_ms "$t0")
expect_rc 1 "wal-push with the server gone"
assert_contains "$W_ERR" "gave up after 9 attempts" "wal-push with the server gone"
# backoff budget for 8 retries: 0.1+0.2+0.4+0.8+1.6+3.2+5+5 = 16.3 s at most (full jitter)
[ "$ms" -le 18000 ] || fail "wal-push with the server gone took $ms ms (budget 16.3 s)"
log "server gone: exit 1 after 9 attempts in $ms ms (budget 16.3 s)"

proxy_start silent --rule '.' 'hang' --stall 120
t0=$(date +%s%N)
wrun AWS_ENDPOINT="http://127.0.0.1:$PPORT" S3_MAX_RETRIES=2 -- wal-push "$T/wal/000000010000000000000002"
ms=$(elapsed_ms "$t0")
expect_rc 1 "wal-push to a server that never answers"
# 3 attempts x 5 s low-speed timeout + at most 0.3 s of backoff
[ "$ms" -le 18000 ] || fail "wal-push to a silent server took $ms ms (bound 15.3 s + slack)"
log "silent server: exit 1 in $ms ms (3 attempts x 5 s low-speed timeout)"
kill "$PROXY_PID"

log "test_s3_faults passed in $((SECONDS - START)) s"
