#!/usr/bin/env bash
# Every request walc signs is re-signed by AWS's own signer (botocore's S3SigV4Auth): test_s3
# --dump-signed prints the PUT, GET, HEAD, DELETE, ListObjectsV2, DeleteObjects and multipart
# requests for fixed credentials and dates, over keys with spaces, unicode, + = ~ and URL
# specials, path-style and virtual-hosted, with and without a session token; s3_sigcheck.py
# also checks the URL encoding against urllib and the payload hash against hashlib.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3sign
"$PY" -c 'import botocore' 2>/dev/null || fail "python3-botocore is not installed (deploy/deps.sh)"
s3_build_helpers
"$S3_UNIT" --dump-signed >"$T/signed.jsonl" || fail "test_s3 --dump-signed"
n=$(wc -l <"$T/signed.jsonl")
[ "$n" -ge 100 ] || fail "expected at least 100 signed requests, got $n"
out=$("$PY" "$IT_DIR/s3_sigcheck.py" <"$T/signed.jsonl") || { printf '%s\n' "$out" | head -n 40 >&2; fail "botocore disagrees"; }
assert_eq "sigcheck: $n passed, 0 failed" "$(printf '%s\n' "$out" | tail -n1)" "botocore cross-check"
# The checker must notice a wrong signature.
sed '1s/Signature=[0-9a-f]/Signature=x/' "$T/signed.jsonl" >"$T/bad.jsonl"
if "$PY" "$IT_DIR/s3_sigcheck.py" <"$T/bad.jsonl" >/dev/null; then fail "s3_sigcheck.py accepted a wrong signature"; fi
log "botocore re-signed all $n requests identically"
