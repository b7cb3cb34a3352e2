#!/usr/bin/env bash
# The S3 backend against a real S3 server that verifies SigV4 (Ceph RGW on loopback):
#   1. wal-push / wal-fetch of WAL files for every codec, with and without a libsodium key,
#      alternating path-style and virtual-hosted addressing; awscli downloads each object and
#      the Debian command-line decoders (after sodium.py for keyed ones) give the same bytes;
#      walc wal-fetch reads an object awscli uploaded; a missing segment exits 74.
#   2. multipart: a 200 MiB stream with 5 MiB parts and WALG_UPLOAD_CONCURRENCY=4 round-trips
#      byte-identically, awscli downloads it identically; a failure injected in one part
#      (fault proxy) leaves no object and no pending multipart upload.
#   3. listing 2500 keys returns exactly 2500 (pages of 1000), DeleteObjects removes them.
#   4. a wrong secret: exit 1, a message naming the bucket and SignatureDoesNotMatch, one
#      request only; DEVEL logs hold no secret, no session token, no Authorization value; a
#      bucket that does not exist is exit 1 (NoSuchBucket), never exit 74.
# integration: long
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3rgw
START=$SECONDS

s3_build_helpers
s3_rgw_start
s3_mb walc
export AWS_REGION=us-east-1 PGDATA=$T/pgdata

# ---- 1. WAL round trips for every codec and key --------------------------------------------
mkdir -p "$T/wal" "$T/fetch" "$T/dl"
head -c 32 /dev/urandom >"$T/key.bin"
od -An -v -tx1 "$T/key.bin" | tr -d ' \n' >"$T/key.hex"
SEGS=(000000010000000000000001 000000010000000000000002 000000010000000000000003)
# WAL-like content: compressible records and random pages
for s in "${SEGS[@]}"; do
	{ head -c 300000 /dev/urandom; { yes "walc s3 record $s" | head -c 500000 || true; }; head -c 248576 /dev/zero; } >"$T/src"
	fake_segment "$s" 1048576 "$T/wal/$s" "$T/src"
done
n=0
for codec in lz4 zstd brotli lzma none; do
	for keyed in no yes; do
		n=$((n + 1))
		cfg=$codec-$keyed
		if [ $((n % 2)) = 0 ]; then ep=http://localhost:$RGW_PORT; else ep=$S3_ENDPOINT; fi
		envs=(WALG_S3_PREFIX="s3://walc/matrix/$cfg" AWS_ENDPOINT="$ep" WALG_COMPRESSION_METHOD="$codec")
		if [ "$keyed" = yes ]; then
			envs+=(WALG_LIBSODIUM_KEY_PATH="$T/key.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex)
		fi
		for s in "${SEGS[@]}"; do
			wrun "${envs[@]}" -- wal-push "$T/wal/$s"
			expect_rc 0 "wal-push $s ($cfg via $ep)"
		done
		for s in "${SEGS[@]}"; do
			rm -f "$T/fetch/$s"
			wrun "${envs[@]}" -- wal-fetch "$s" "$T/fetch/$s"
			expect_rc 0 "wal-fetch $s ($cfg)"
			assert_same_file "$T/wal/$s" "$T/fetch/$s" "wal-fetch $s ($cfg)"
			# independent path: awscli download, then sodium.py and the CLI decoder
			obj=matrix/$cfg/wal_005/$s$(ext_of "$codec")
			awsc s3 cp --quiet "s3://walc/$obj" "$T/dl/obj" || fail "awscli download of $obj"
			if [ "$keyed" = yes ]; then
				sodium_decrypt "$T/key.hex" hex <"$T/dl/obj" >"$T/dl/dec" || fail "sodium.py on $obj"
			else
				cp "$T/dl/obj" "$T/dl/dec"
			fi
			decode_cli "$codec" <"$T/dl/dec" >"$T/dl/plain" || fail "$codec CLI decoder on $obj"
			assert_same_file "$T/wal/$s" "$T/dl/plain" "awscli + CLI decode of $obj"
		done
		wrun "${envs[@]}" -- wal-fetch 000000010000000000000009 "$T/fetch/none"
		expect_rc 74 "wal-fetch of a missing segment ($cfg)"
		assert_absent "$T/fetch/none" "missing segment"
	done
done
log "wal-push/wal-fetch: 10 configurations x ${#SEGS[@]} segments, awscli cross-check ok"

# walc reads what awscli uploaded
lz4 -q -c "$T/wal/${SEGS[0]}" >"$T/dl/up.lz4"
awsc s3 cp --quiet "$T/dl/up.lz4" "s3://walc/fromaws/wal_005/${SEGS[0]}.lz4" || fail "awscli upload"
wrun WALG_S3_PREFIX=s3://walc/fromaws AWS_ENDPOINT="$S3_ENDPOINT" -- wal-fetch "${SEGS[0]}" "$T/fetch/A"
expect_rc 0 "wal-fetch of an object awscli uploaded"
assert_same_file "$T/wal/${SEGS[0]}" "$T/fetch/A" "wal-fetch of an object awscli uploaded"
log "walc reads what awscli wrote"

# put_new: never replaces; the conditional PUT loses to a writer that published first
export WALG_S3_PREFIX=s3://walc/exclusive AWS_ENDPOINT=$S3_ENDPOINT
head -c 100000 /dev/urandom >"$T/excl"
"$S3_LIVE" putnew once "$T/excl" || fail "put_new of a new key"
set +e
"$S3_LIVE" putnew once "$T/wal/${SEGS[0]}" 2>"$T/log/putnew.err"
rc1=$?
"$S3_LIVE" racenew raced "$T/excl" 2>"$T/log/racenew.err"
rc2=$?
set -e
assert_eq 3 "$rc1" "put_new of an existing key"
assert_eq 3 "$rc2" "put_new losing the race to a plain put (If-None-Match)"
"$S3_LIVE" get once "$T/excl.back" && assert_same_file "$T/excl" "$T/excl.back" "object kept by put_new"
"$S3_LIVE" get raced "$T/raced.back"
assert_eq "the other writer" "$(cat "$T/raced.back")" "the first writer's object is kept"
log "put_new refuses an existing key, also when another writer publishes first (If-None-Match)"

# ---- 2. multipart ------------------------------------------------------------------------------
export WALG_S3_PREFIX=s3://walc/mp AWS_ENDPOINT=$S3_ENDPOINT S3_MAX_PART_SIZE=5242880 WALG_UPLOAD_CONCURRENCY=4
head -c $((200 * 1024 * 1024)) /dev/urandom >"$T/big"
t0=$(date +%s%N)
"$S3_LIVE" put big/object.bin "$T/big" || fail "multipart put of 200 MiB"
put_ms=$(elapsed_ms "$t0")
assert_eq "$((200 * 1024 * 1024))" "$("$S3_LIVE" stat big/object.bin)" "size of the multipart object"
t0=$(date +%s%N)
"$S3_LIVE" get big/object.bin "$T/big.back" || fail "get of the multipart object"
get_ms=$(elapsed_ms "$t0")
assert_same_file "$T/big" "$T/big.back" "200 MiB multipart round trip"
rm -f "$T/big.back"
awsc s3 cp --quiet s3://walc/mp/big/object.bin "$T/big.aws" || fail "awscli download of the multipart object"
assert_same_file "$T/big" "$T/big.aws" "awscli download of the multipart object"
rm -f "$T/big.aws"
parts=$(awsc s3api head-object --bucket walc --key mp/big/object.bin --query ETag --output text | sed -E 's/.*-([0-9]+)"?$/\1/')
assert_eq 40 "$parts" "number of parts in the multipart ETag"
log "multipart 200 MiB, 40 parts of 5 MiB, concurrency 4: put ${put_ms} ms, get ${get_ms} ms"

# memory: at the default part size (20 MiB) and concurrency (16), against a server slower than
# the reader (0.5 s added to every request), an upload holds its own part buffer and the one
# of the process-wide pool (24 MiB / 20 MiB = 1): peak RSS stays near 2 parts, not 1 + 16
LPORT=$(s3_port 1)
"$PY" "$IT_DIR/s3_faultproxy.py" --listen "$LPORT" --upstream "127.0.0.1:$RGW_PORT" \
	--log "$T/log/proxy-slow.log" --rate 1 --faults latency --latency 0.5 >"$T/log/proxy-slow.out" 2>&1 &
S3_PIDS+=($!)
for _ in $(seq 100); do grep -q ready "$T/log/proxy-slow.out" 2>/dev/null && break; sleep 0.1; done
env -u S3_MAX_PART_SIZE -u WALG_UPLOAD_CONCURRENCY AWS_ENDPOINT="http://127.0.0.1:$LPORT" \
	"$PY" "$IT_DIR/fault_check.py" rss "$T/rss" "$S3_LIVE" put big/slow.bin "$T/big" || fail "multipart put through the slow proxy"
rss_mib=$(($(cat "$T/rss") / 1024))
assert_eq "$((200 * 1024 * 1024))" "$("$S3_LIVE" stat big/slow.bin)" "size of the object put through the slow proxy"
[ "$rss_mib" -le 70 ] || fail "a 200 MiB multipart put at 20 MiB parts peaked at $rss_mib MiB (bound: 2 parts + 30 MiB)"
log "200 MiB through a slow server at default part size and concurrency: peak RSS $rss_mib MiB"

# a failure injected in part 3: no object, no pending upload
PPORT=$(s3_port 1)
"$PY" "$IT_DIR/s3_faultproxy.py" --listen "$PPORT" --upstream "127.0.0.1:$RGW_PORT" \
	--log "$T/log/proxy-mp.log" --rule 'partNumber=3&' 'status:400:InvalidPart' \
	>"$T/log/proxy-mp.out" 2>&1 &
S3_PIDS+=($!)
for _ in $(seq 50); do grep -q ready "$T/log/proxy-mp.out" 2>/dev/null && break; sleep 0.1; done
head -c $((30 * 1024 * 1024)) /dev/urandom >"$T/mid"
set +e
AWS_ENDPOINT=http://127.0.0.1:$PPORT "$S3_LIVE" put big/failed.bin "$T/mid" 2>"$T/log/failpart.err"
rc=$?
set -e
[ "$rc" = 1 ] || fail "put with a failing part: expected exit 1, got $rc"
assert_contains "$(cat "$T/log/failpart.err")" "InvalidPart" "error of the failing part"
grep -q 'DELETE .* ok 204' "$T/log/proxy-mp.log" || fail "no AbortMultipartUpload reached the server"
set +e
"$S3_LIVE" stat big/failed.bin >/dev/null 2>&1
rc=$?
set -e
assert_eq 1 "$rc" "stat of the object whose upload failed"
assert_eq 0 "$(s3_pending_uploads walc)" "pending multipart uploads after the failure"
log "a failed part leaves no object and no pending multipart upload"
unset S3_MAX_PART_SIZE WALG_UPLOAD_CONCURRENCY
rm -f "$T/big" "$T/mid"

# ---- 3. listing 2500 keys ---------------------------------------------------------------------
export WALG_S3_PREFIX=s3://walc/many
t0=$(date +%s%N)
"$S3_LIVE" putmany "dir with space" 2500 || fail "storing 2500 objects"
"$S3_LIVE" putmany "dir with space/sub" 3 || fail "storing 3 objects in a subfolder"
put_ms=$(elapsed_ms "$t0")
assert_eq 2503 "$("$S3_LIVE" list "dir with space/" -r | head -n1)" "recursive listing"
assert_eq 2500 "$("$S3_LIVE" list "dir with space/" | head -n1)" "listing of one folder"
assert_eq 2503 "$(awsc s3 ls --recursive 's3://walc/many/dir with space/' | wc -l | tr -d ' ')" "awscli listing"
"$S3_LIVE" rmprefix "dir with space/" >/dev/null || fail "DeleteObjects of 2503 keys"
assert_eq 0 "$("$S3_LIVE" list "dir with space/" -r | head -n1)" "listing after DeleteObjects"
log "2500 keys: stored in ${put_ms} ms, listed exactly, removed in batches of 1000"

# ---- 4. wrong secret, logs without secrets ------------------------------------------------------
export WALG_S3_PREFIX=s3://walc/matrix/lz4-no
wrun AWS_SECRET_ACCESS_KEY=wrong-secret-value-123 WALG_LOG_LEVEL=DEVEL -- wal-push "$T/wal/${SEGS[0]}"
expect_rc 1 "wal-push with a wrong secret"
assert_contains "$W_ERR" "bucket walc" "wrong-secret message"
assert_contains "$W_ERR" "SignatureDoesNotMatch" "wrong-secret message"
assert_eq 1 "$(printf '%s\n' "$W_ERR" | grep -c 's3 request:')" "requests sent with a wrong secret"
assert_not_contains "$W_ERR" "wrong-secret-value-123" "DEVEL log"
assert_contains "$W_ERR" "authorization: --HIDDEN--" "DEVEL log masks Authorization"
assert_not_contains "$W_ERR" "Signature=" "DEVEL log"
wrun AWS_SESSION_TOKEN=sEcReTsEsSiOnToKeN WALG_LOG_LEVEL=DEVEL -- wal-fetch "${SEGS[0]}" "$T/fetch/tok"
assert_not_contains "$W_ERR" "sEcReTsEsSiOnToKeN" "DEVEL log with a session token"
assert_contains "$W_ERR" "x-amz-security-token: --HIDDEN--" "DEVEL log masks the session token"
wrun WALG_LOG_LEVEL=DEVEL -- wal-fetch "${SEGS[0]}" "$T/fetch/ok"
expect_rc 0 "wal-fetch at DEVEL level"
assert_not_contains "$W_ERR" "$AWS_SECRET_ACCESS_KEY" "DEVEL log"
log "wrong secret: one request, exit 1, bucket and code named; no secret in DEVEL logs"

# a bucket that does not exist: an error (exit 1), never "no such segment" (exit 74)
wrun WALG_S3_PREFIX=s3://no-such-bucket/x -- wal-fetch "${SEGS[0]}" "$T/fetch/nobucket"
expect_rc 1 "wal-fetch from a bucket that does not exist"
assert_contains "$W_ERR" "NoSuchBucket" "wal-fetch from a bucket that does not exist"
wrun WALG_S3_PREFIX=s3://no-such-bucket/x -- wal-push "$T/wal/${SEGS[0]}"
expect_rc 1 "wal-push to a bucket that does not exist"
assert_contains "$W_ERR" "NoSuchBucket" "wal-push to a bucket that does not exist"
log "a missing bucket is exit 1 with NoSuchBucket, not exit 74"

log "test_s3_rgw passed in $((SECONDS - START)) s"
