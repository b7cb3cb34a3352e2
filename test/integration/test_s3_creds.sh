#!/usr/bin/env bash
# Credentials for the S3 backend, against Ceph RGW:
#   1. static keys under their alternative names (AWS_ACCESS_KEY / AWS_SECRET_KEY) with
#      surrounding whitespace; the shared credentials file with AWS_PROFILE.
#   2. web identity: a fake STS (s3_fakests.py) hands out credentials that expire after 12 s and
#      re-verifies every S3 request's signature with botocore before forwarding it (re-signed
#      with the real key) to RGW. wal-push / wal-fetch work; a 25 s run refreshes the
#      credentials before they expire (no request is refused); credentials refused early as
#      ExpiredToken are refreshed and the request retried; a wrong role fails with STS's code.
#   3. EC2 instance metadata (IMDSv2) from the same fake.
#   4. No issued secret, session token or web identity token appears in DEVEL logs.
# integration: solo
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3creds
START=$SECONDS

s3_build_helpers
s3_rgw_start
s3_mb walc
REAL_KEY=$AWS_ACCESS_KEY_ID
REAL_SECRET=$AWS_SECRET_ACCESS_KEY
export AWS_REGION=us-east-1 PGDATA=$T/pgdata WALG_S3_PREFIX=s3://walc/creds
mkdir -p "$T/wal" "$T/fetch"
SEG=000000010000000000000001
fake_segment "$SEG" 1048576 "$T/wal/$SEG"

# ---- 1. static keys under other names, shared credentials file -------------------------------
wrun -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_ACCESS_KEY="  $REAL_KEY " \
	AWS_SECRET_KEY="$REAL_SECRET
" AWS_ENDPOINT="$S3_ENDPOINT" -- wal-push "$T/wal/$SEG"
expect_rc 0 "wal-push with AWS_ACCESS_KEY / AWS_SECRET_KEY (whitespace-trimmed)"
cat >"$T/credentials" <<EOF
[default]
aws_access_key_id = WRONG
aws_secret_access_key = wrong

[walc]
aws_access_key_id = $REAL_KEY
aws_secret_access_key = $REAL_SECRET
EOF
wrun -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_SHARED_CREDENTIALS_FILE="$T/credentials" \
	AWS_PROFILE=walc AWS_ENDPOINT="$S3_ENDPOINT" -- wal-fetch "$SEG" "$T/fetch/a"
expect_rc 0 "wal-fetch with the shared credentials file, profile walc"
assert_same_file "$T/wal/$SEG" "$T/fetch/a" "wal-fetch with the shared credentials file"
wrun -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_SHARED_CREDENTIALS_FILE="$T/credentials" \
	AWS_ENDPOINT="$S3_ENDPOINT" -- wal-fetch "$SEG" "$T/fetch/b"
expect_rc 1 "wal-fetch with the default profile's wrong key"
assert_contains "$W_ERR" "InvalidAccessKeyId" "default profile's wrong key"
log "static keys (alternative names, trimmed) and the shared credentials file work"

# ---- 2. web identity through a fake STS -------------------------------------------------------
echo "fake-oidc-token-$RANDOM$RANDOM" >"$T/oidc-token"
ROLE=arn:aws:iam::123456789012:role/walc-test
# fakests NAME ARGS...: start the fake; sets FPORT
fakests() {
	local name=$1 try
	shift
	# A port picked free can be taken before the fake binds it: then try another one.
	for try in 1 2 3; do
		FPORT=$(s3_port 1)
		"$PY" "$IT_DIR/s3_fakests.py" --listen "$FPORT" --upstream "127.0.0.1:$RGW_PORT" \
			--access-key "$REAL_KEY" --secret-key "$REAL_SECRET" --role "$ROLE" \
			--token-file "$T/oidc-token" --log "$T/log/sts-$name.log" --secrets "$T/secrets" "$@" \
			>"$T/log/sts-$name.out" 2>&1 &
		FAKE_PID=$!
		S3_PIDS+=("$FAKE_PID")
		for _ in $(seq 100); do
			if grep -q ready "$T/log/sts-$name.out" 2>/dev/null &&
				(exec 3<>"/dev/tcp/127.0.0.1/$FPORT") 2>/dev/null && kill -0 "$FAKE_PID" 2>/dev/null; then
				return
			fi
			sleep 0.1
		done
		log "fake STS $name (try $try) did not start: $(tr '\n' ' ' <"$T/log/sts-$name.out")"
		kill "$FAKE_PID" 2>/dev/null || true
	done
	fail "fake STS $name did not start"
}
webid=(-u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_WEB_IDENTITY_TOKEN_FILE="$T/oidc-token"
	AWS_ROLE_ARN="$ROLE")

fakests ttl --ttl 12
ep=(AWS_STS_ENDPOINT="http://127.0.0.1:$FPORT/" AWS_ENDPOINT="http://127.0.0.1:$FPORT")
t0=$SECONDS
wrun "${webid[@]}" "${ep[@]}" WALG_LOG_LEVEL=DEVEL -- wal-push "$T/wal/$SEG"
expect_rc 0 "wal-push with web identity credentials"
cp "$T/.w_err" "$T/log/devel-push.log"
t1=$SECONDS
# No prefetch (WALG_DOWNLOAD_CONCURRENCY=1): its child, a third process, would take credentials
# of its own and outlive the fake server on a loaded machine; prefetch has tests of its own.
wrun "${webid[@]}" "${ep[@]}" WALG_LOG_LEVEL=DEVEL WALG_DOWNLOAD_CONCURRENCY=1 -- wal-fetch "$SEG" "$T/fetch/c"
expect_rc 0 "wal-fetch with web identity credentials"
cp "$T/.w_err" "$T/log/devel-fetch.log"
assert_same_file "$T/wal/$SEG" "$T/fetch/c" "wal-fetch with web identity credentials"
# one call per process, unless a process outlived three quarters of the 12 s credentials (a
# loaded machine, a sanitizer build): then it rightly refreshed them
calls=$(grep -c ' issue ' "$T/log/sts-ttl.log")
if [ $((t1 - t0)) -lt 8 ] && [ $((SECONDS - t1)) -lt 8 ]; then
	assert_eq 2 "$calls" "AssumeRoleWithWebIdentity calls (one per process)"
else
	[ "$calls" -ge 2 ] || fail "AssumeRoleWithWebIdentity calls: $calls for two processes"
	log "wal-push and wal-fetch took $((t1 - t0)) s and $((SECONDS - t1)) s: $calls STS calls"
fi
[ "$(grep -c ' s3 ASIAWALCFAKE' "$T/log/sts-ttl.log")" -ge 2 ] || fail "no S3 request under the issued keys"

# a 25 s run with 12 s credentials: refreshed ahead of expiry, never refused
out=$(env "${webid[@]}" "${ep[@]}" "$S3_LIVE" loop 25 loop/obj 2>"$T/log/loop.err") ||
	{ cat "$T/log/loop.err" >&2; fail "25 s of requests with expiring credentials"; }
[ "$out" -ge 10 ] || fail "only $out round trips in 25 s"
issued=$(grep -c ' issue ' "$T/log/sts-ttl.log")
[ "$issued" -ge 5 ] || fail "credentials not refreshed: $issued issued in all"
if grep -q ' reject ' "$T/log/sts-ttl.log"; then
	grep ' reject ' "$T/log/sts-ttl.log" >&2
	fail "a request was refused while credentials should have been refreshed in time"
fi
keys=$(awk '$2 == "s3" {print $3}' "$T/log/sts-ttl.log" | sort -u | wc -l)
[ "$keys" -ge 4 ] || fail "S3 requests used only $keys distinct issued keys"
log "web identity: $out round trips in 25 s with 12 s credentials, $((issued - 2)) refreshes, $keys keys used, none refused"
kill "$FAKE_PID"

# credentials refused as expired before their stated expiry: refreshed and retried
fakests early --ttl 3600 --reject-after 4
ep=(AWS_STS_ENDPOINT="http://127.0.0.1:$FPORT/" AWS_ENDPOINT="http://127.0.0.1:$FPORT")
out=$(env "${webid[@]}" "${ep[@]}" "$S3_LIVE" loop 10 loop/obj2 2>"$T/log/early.err") ||
	{ cat "$T/log/early.err" >&2; fail "requests with credentials refused as ExpiredToken"; }
grep -q ' reject .* ExpiredToken' "$T/log/sts-early.log" || fail "the fake never refused a request"
grep -q 'credentials expired (ExpiredToken); refreshed them' "$T/log/early.err" ||
	fail "walc did not report refreshing after ExpiredToken"
log "ExpiredToken: credentials refreshed and the request retried ($out round trips)"

# a role STS refuses
wrun "${webid[@]}" "${ep[@]}" AWS_ROLE_ARN=arn:aws:iam::123456789012:role/other -- wal-push "$T/wal/$SEG"
expect_rc 1 "wal-push with a role STS refuses"
assert_contains "$W_ERR" "AssumeRoleWithWebIdentity" "wrong role"
assert_contains "$W_ERR" "AccessDenied" "wrong role"
kill "$FAKE_PID"

# ---- 3. EC2 instance metadata -----------------------------------------------------------------
fakests imds --ttl 3600
wrun -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_EC2_METADATA_DISABLED \
	AWS_EC2_METADATA_SERVICE_ENDPOINT="http://127.0.0.1:$FPORT" AWS_ENDPOINT="http://127.0.0.1:$FPORT" \
	WALG_LOG_LEVEL=DEVEL WALG_DOWNLOAD_CONCURRENCY=1 -- wal-fetch "$SEG" "$T/fetch/d"
expect_rc 0 "wal-fetch with instance-metadata credentials"
cp "$T/.w_err" "$T/log/devel-imds.log"
assert_same_file "$T/wal/$SEG" "$T/fetch/d" "wal-fetch with instance-metadata credentials"
assert_contains "$W_ERR" "credentials from EC2 instance metadata" "IMDS credentials"
kill "$FAKE_PID"
log "EC2 instance metadata (IMDSv2) credentials work"

# ---- 4. no secret in DEVEL logs ------------------------------------------------------------------
while read -r s; do
	[ -n "$s" ] || continue
	if grep -qF -- "$s" "$T"/log/devel-*.log "$T/log/loop.err" "$T/log/early.err"; then
		fail "an issued secret or token appears in a log"
	fi
done <"$T/secrets"
if grep -qF -- "$(cat "$T/oidc-token")" "$T"/log/devel-*.log; then fail "the web identity token appears in a log"; fi
grep -q 'x-amz-security-token: --HIDDEN--' "$T/log/devel-fetch.log" || fail "session token not masked"
log "no secret, session token or identity token in DEVEL logs ($(wc -l <"$T/secrets") checked)"
log "test_s3_creds passed in $((SECONDS - START)) s"
