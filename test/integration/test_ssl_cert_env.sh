#!/usr/bin/env bash
# SSL_CERT_FILE and SSL_CERT_DIR (issue 43): how a Go program such as WAL-G is given a private
# CA, and so how WAL-G users give one. A CA made here signs the certificates of Azurite, of
# Ceph RGW behind stunnel and of the GCS emulator behind stunnel; with SSL_CERT_FILE alone (no
# store CA setting) wal-push and wal-fetch reach all three, with SSL_CERT_DIR alone too (a
# directory of unhashed files, as a Kubernetes Secret mounts them), and without either the
# servers are refused. A store's own CA setting wins over SSL_CERT_FILE; an unreadable
# SSL_CERT_FILE is one line naming it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
. "$(dirname "$0")/objstore_lib.sh"
it_setup sslcert
# shellcheck disable=SC2154 # rc is assigned inside the trap string
trap 'rc=$?; s3_cleanup; store_cleanup; (exit $rc); it_cleanup' EXIT
export AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_PAGER=""

# The CA, and one server certificate for every name the servers answer to.
P=$T/pki
mkdir -p "$P" "$T/certdir" "$T/wal" "$T/got"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=walc test CA" \
	-keyout "$P/ca.key" -out "$P/ca.pem" >"$T/log/openssl.log" 2>&1 || fail "making the CA"
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$P/server.key" \
	-out "$P/server.csr" >>"$T/log/openssl.log" 2>&1 || fail "making the server key"
printf 'subjectAltName=DNS:localhost,DNS:*.blob.localhost,DNS:devstoreaccount1.blob.localhost,IP:127.0.0.1\n' >"$P/san"
openssl x509 -req -in "$P/server.csr" -CA "$P/ca.pem" -CAkey "$P/ca.key" -CAcreateserial \
	-days 2 -extfile "$P/san" -out "$P/server.pem" >>"$T/log/openssl.log" 2>&1 || fail "signing the server certificate"
cp "$P/ca.pem" "$T/certdir/private-ca.crt" # no hash name: Go reads every file, so must walc
chmod -R a+rX "$P" "$T/certdir"

# Azurite with the CA's certificate (azurite.sh keeps a cert.pem it finds; the chain lets its
# own readiness check and the container's creation verify it).
mkdir -p "$T/azurite"
cat "$P/server.pem" "$P/ca.pem" >"$T/azurite/cert.pem"
cp "$P/server.key" "$T/azurite/key.pem"
az_start
AZ=(WALG_AZ_PREFIX=azure://walc/ssl AZURE_STORAGE_ACCOUNT=devstoreaccount1
	AZURE_STORAGE_ACCESS_KEY="$AZ_KEY" AZURE_ENDPOINT_SUFFIX="localhost:$AZ_PORT")

# stunnel in front of RGW and of the GCS emulator (with the fake metadata server's tokens).
s3_rgw_start
gcs_start
tokens_start
RGW_TLS=$(os_port)
GCS_TLS=$(os_port)
cat >"$T/stunnel.conf" <<EOF
foreground = yes
pid =
cert = $P/server.pem
key = $P/server.key
[rgw]
accept = 127.0.0.1:$RGW_TLS
connect = 127.0.0.1:$RGW_PORT
[gcs]
accept = 127.0.0.1:$GCS_TLS
connect = 127.0.0.1:$GCS_PORT
EOF
stunnel "$T/stunnel.conf" >"$T/log/stunnel.log" 2>&1 &
OS_PIDS+=($!)
for _ in $(seq 1 100); do
	curl -s -o /dev/null --cacert "$P/ca.pem" "https://127.0.0.1:$RGW_TLS/" &&
		curl -s -o /dev/null --cacert "$P/ca.pem" "https://127.0.0.1:$GCS_TLS/" && break
	sleep 0.1
done
S3=(WALG_S3_PREFIX=s3://walc-ssl/wal AWS_ENDPOINT="https://127.0.0.1:$RGW_TLS" AWS_S3_FORCE_PATH_STYLE=true
	AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY")
awsc s3 mb s3://walc-ssl >/dev/null || fail "creating the bucket"
GCS=(WALG_GS_PREFIX=gs://walc/ssl GCS_ENDPOINT="https://127.0.0.1:$GCS_TLS" GCE_METADATA_HOST="127.0.0.1:$TOK_PORT")

n=0
# roundtrip STORE TRUST... : a new segment pushed and fetched back with only these settings
roundtrip() {
	local store=$1 seg
	shift
	n=$((n + 1))
	seg=$(printf '0000000100000000000000%02X' "$n")
	fake_segment "$seg" 1048576 "$T/wal/$seg"
	local -n st=$store
	wrun "${st[@]}" WALG_PG_WAL_SIZE=1 "$@" -- wal-push "$T/wal/$seg"
	expect_rc 0 "$store wal-push with $*"
	wrun "${st[@]}" WALG_PG_WAL_SIZE=1 "$@" -- wal-fetch "$seg" "$T/got/$seg"
	expect_rc 0 "$store wal-fetch with $*"
	assert_same_file "$T/wal/$seg" "$T/got/$seg" "$store segment $seg"
}
# refused STORE TRUST...: the server's certificate is not trusted
refused() {
	local store=$1
	shift
	local -n st=$store
	wrun "${st[@]}" "$@" -- wal-fetch 000000010000000000000001 "$T/got/refused"
	expect_rc 1 "$store without the CA ($*)"
	assert_contains "$W_ERR" "certificate" "$store's refusal"
	assert_absent "$T/got/refused" "a segment fetched from an untrusted $store"
}

for store in AZ S3 GCS; do
	refused "$store" SSL_CERT_FILE= # the system's bundle alone
	roundtrip "$store" SSL_CERT_FILE="$P/ca.pem"
	roundtrip "$store" SSL_CERT_DIR="$T/certdir"
done
log "SSL_CERT_FILE and SSL_CERT_DIR reach Azurite, RGW and the GCS emulator"

# A store's own CA setting wins over SSL_CERT_FILE (here: a wrong one).
wrun "${S3[@]}" SSL_CERT_FILE="$P/ca.pem" S3_CA_CERT_FILE="$T/azurite/key.pem" -- \
	wal-fetch 000000010000000000000002 "$T/got/store-ca"
expect_rc 1 "S3_CA_CERT_FILE naming no CA, with SSL_CERT_FILE right"
roundtrip AZ SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt AZURE_CA_CERT_FILE="$P/ca.pem"

# Bad values: one line naming the variable, nothing fetched.
wrun "${S3[@]}" SSL_CERT_FILE="$T/nonexistent.pem" -- wal-fetch 000000010000000000000002 "$T/got/bad"
expect_rc 1 "an unreadable SSL_CERT_FILE"
assert_eq 1 "$(nlines "$W_ERR")" "lines of the error"
assert_contains "$W_ERR" "SSL_CERT_FILE" "the error"
wrun "${S3[@]}" SSL_CERT_DIR="$T/certdir:$T/nonexistent" -- wal-fetch 000000010000000000000002 "$T/got/bad"
expect_rc 1 "an SSL_CERT_DIR naming a missing directory"
assert_eq 1 "$(nlines "$W_ERR")" "lines of the error"
assert_contains "$W_ERR" "SSL_CERT_DIR: cannot list $T/nonexistent" "the error"
assert_absent "$T/got/bad" "a segment fetched with bad trust settings"
log "ssl cert env ok"
