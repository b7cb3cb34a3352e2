#!/usr/bin/env bash
# The S3 backend over HTTPS, against s3rver with its self-signed certificate:
#   - wal-push / wal-fetch with S3_CA_CERT_FILE (and its WALG_ alias), with no key, a libsodium
#     key and an OpenPGP key (stored encrypted: no key, no fetch); awscli (--ca-bundle) downloads
#     what walc wrote, walc reads what it uploaded;
#   - without the CA file the certificate is refused at once (exit 1, no retries);
#   - a multipart upload (3 parts of 5 MiB) and a listing of 1001 keys (two pages) over TLS.
# s3rver does not check signatures (Ceph RGW does, in test_s3_rgw.sh); here the point is TLS.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup s3https
START=$SECONDS

s3_build_helpers
s3_s3rver_start https
PORT=$S3RVER_PORT
CA=$S3_S3RVER_DIR/cert.pem
export S3_ENDPOINT=https://127.0.0.1:$PORT WALC_S3_TEST_ENDPOINT=https://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ENDPOINT=$S3_ENDPOINT PGDATA=$T/pgdata
mkdir -p "$T/wal" "$T/fetch"
head -c 32 /dev/urandom | base64 -w0 >"$T/key.b64"
SEG=000000010000000000000001
{ head -c 100000 /dev/urandom; { yes "tls record" | head -c 948576 || true; }; } >"$T/src"
fake_segment "$SEG" 1048576 "$T/wal/$SEG" "$T/src"

PGPFX=$ROOT/test/fixtures/walg-v3.0.9-pgp/keys
for cfg in plain keyed pgp; do
	envs=(WALG_S3_PREFIX="s3://test/https/$cfg" S3_CA_CERT_FILE="$CA")
	[ "$cfg" = keyed ] && envs+=(WALG_LIBSODIUM_KEY_PATH="$T/key.b64" WALG_LIBSODIUM_KEY_TRANSFORM=base64)
	fetch_envs=("${envs[@]}")
	if [ "$cfg" = pgp ]; then # OpenPGP: the public key pushes, the secret key and passphrase fetch
		envs+=(WALG_PGP_KEY_PATH="$PGPFX/pgp-public.asc")
		fetch_envs+=(WALG_PGP_KEY_PATH="$PGPFX/pgp-secret.asc" WALG_PGP_KEY_PASSPHRASE="$(cat "$PGPFX/passphrase.txt")")
	fi
	wrun "${envs[@]}" -- wal-push "$T/wal/$SEG"
	expect_rc 0 "wal-push over HTTPS ($cfg)"
	wrun "${fetch_envs[@]}" -- wal-fetch "$SEG" "$T/fetch/$cfg"
	expect_rc 0 "wal-fetch over HTTPS ($cfg)"
	assert_same_file "$T/wal/$SEG" "$T/fetch/$cfg" "wal-fetch over HTTPS ($cfg)"
	if [ "$cfg" != plain ]; then
		wrun WALG_S3_PREFIX="s3://test/https/$cfg" S3_CA_CERT_FILE="$CA" -- wal-fetch "$SEG" "$T/fetch/$cfg-nokey"
		expect_rc 1 "wal-fetch of a $cfg object without its key"
	fi
done
# awscli reads what walc wrote
"$AWSCLI" --endpoint-url "$S3_ENDPOINT" --ca-bundle "$CA" s3 cp --quiet \
	"s3://test/https/plain/wal_005/$SEG.lz4" "$T/aws.lz4" || fail "awscli download over HTTPS"
lz4 -d -q -c "$T/aws.lz4" >"$T/aws.plain"
assert_same_file "$T/wal/$SEG" "$T/aws.plain" "awscli download of a walc object over HTTPS"
# walc reads what awscli wrote (the WALG_ alias of the CA setting)
"$AWSCLI" --endpoint-url "$S3_ENDPOINT" --ca-bundle "$CA" s3 cp --quiet "$T/aws.lz4" \
	"s3://test/https/fromaws/wal_005/$SEG.lz4" || fail "awscli upload over HTTPS"
wrun WALG_S3_PREFIX=s3://test/https/fromaws WALG_S3_CA_CERT_FILE="$CA" -- wal-fetch "$SEG" "$T/fetch/aws"
expect_rc 0 "wal-fetch of an awscli object with WALG_S3_CA_CERT_FILE"
assert_same_file "$T/wal/$SEG" "$T/fetch/aws" "wal-fetch of an awscli object over HTTPS"
log "HTTPS wal-push/wal-fetch with S3_CA_CERT_FILE, with no key, libsodium and OpenPGP; awscli both ways"

# without the CA: refused at once, not retried
t0=$(date +%s%N)
wrun WALG_S3_PREFIX=s3://test/https/plain -- wal-fetch "$SEG" "$T/fetch/noca"
ms=$(elapsed_ms "$t0")
expect_rc 1 "wal-fetch without the CA file"
assert_match "$W_ERR" "certificate|SSL" "error without the CA file"
assert_not_contains "$W_ERR" "retry" "error without the CA file"
[ "$ms" -lt 5000 ] || fail "a certificate error took $ms ms"
log "without S3_CA_CERT_FILE the self-signed certificate is refused at once ($ms ms)"

# multipart and a two-page listing over TLS
export WALG_S3_PREFIX=s3://test/https/mp S3_CA_CERT_FILE=$CA S3_MAX_PART_SIZE=5242880 WALG_UPLOAD_CONCURRENCY=3
head -c $((15 * 1024 * 1024 + 4242)) /dev/urandom >"$T/big"
"$S3_LIVE" put big.bin "$T/big" || fail "multipart upload over HTTPS"
"$S3_LIVE" get big.bin "$T/big.back" || fail "download over HTTPS"
assert_same_file "$T/big" "$T/big.back" "multipart object over HTTPS"
"$S3_LIVE" putmany keys 1001 || fail "1001 objects over HTTPS"
assert_eq 1001 "$("$S3_LIVE" list keys/ | head -n1)" "listing of 1001 keys over HTTPS"
log "multipart (4 parts) and a 1001-key listing over HTTPS"
log "test_s3_https passed in $((SECONDS - START)) s"
