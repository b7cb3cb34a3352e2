# shellcheck shell=bash
# Identities and faults on the store named by $STORE (az: Azurite in OAuth mode, gcs: the GCS
# emulator), sourced by test_az_auth_faults.sh and test_gcs_auth_faults.sh. Fake token
# endpoints (objstore_tool.py) stand in for what cannot run here: Azure AD, the instance
# metadata services and Google's OAuth2 endpoint.
#   1. each identity option pushes and fetches WAL with identical bytes, and the token
#      endpoint saw the exchange: Azure Shared Key, SAS, service principal secret, AKS
#      workload identity (federated token file), managed identity; GCS without credentials
#      (STORAGE_EMULATOR_HOST), the metadata server (GKE Workload Identity) and a service
#      account's key file (signed JWT), the bearer token seen by the proxy on every request;
#   2. a token the store calls expired (401 once) is refreshed and the request repeated;
#   3. through the fault proxy, 20% of requests fail (dropped connections before and
#      mid-answer, 500, 503 SlowDown, stalls, latency): 30 wal-push then 30 wal-fetch succeed
#      with identical bytes;
#   4. a GET broken twice mid-body resumes with Range requests and delivers identical bytes.
. "$(dirname "$0")/objstore_lib.sh"
store_setup "${STORE}faults"
START=$SECONDS
export WALG_PG_WAL_SIZE=1 WALG_DOWNLOAD_CONCURRENCY=1 PGDATA=$T/pgdata
fault_segments
tokens_start --assertion-file "$T/fed.tok"
echo "walc-it-federated-$RANDOM" >"$T/fed.tok"
# tokens KIND: how many tokens of KIND the fake endpoints issued
tokens() { grep -c "^$1 " "$TOK_LOG" || true; }

if [ "$STORE" = az ]; then
	az_start oauth
	BASE=(AZURE_STORAGE_ACCOUNT=devstoreaccount1 AZURE_ENDPOINT_SUFFIX="localhost:$AZ_PORT"
		AZURE_CA_CERT_FILE="$AZ_DIR/cert.pem" WALG_AZ_PREFIX=azure://walc/ids)
	AD=(AZURE_TENANT_ID=walc-tenant AZURE_CLIENT_ID=walc-client
		AZURE_AUTHORITY_HOST="http://127.0.0.1:$TOK_PORT/")
	roundtrip "Shared Key" 000000010000000000000001 "${BASE[@]}" AZURE_STORAGE_ACCESS_KEY="$AZ_KEY"
	SAS=$("$PY" "$IT_DIR/objstore_tool.py" sas devstoreaccount1 "$AZ_KEY" walc)
	roundtrip "a SAS token" 000000010000000000000002 "${BASE[@]}" AZURE_STORAGE_SAS_TOKEN="?$SAS"
	roundtrip "a service principal" 000000010000000000000003 "${BASE[@]}" "${AD[@]}" \
		AZURE_CLIENT_SECRET=walc-secret
	[ "$(tokens secret)" -ge 1 ] || fail "no Azure AD token issued for the client secret"
	roundtrip "workload identity" 000000010000000000000004 "${BASE[@]}" "${AD[@]}" \
		AZURE_FEDERATED_TOKEN_FILE="$T/fed.tok"
	[ "$(tokens workload)" -ge 1 ] || fail "no Azure AD token issued for the federated token"
	roundtrip "managed identity" 000000010000000000000005 "${BASE[@]}" \
		AZURE_IMDS_ENDPOINT="http://127.0.0.1:$TOK_PORT"
	[ "$(tokens imds)" -ge 1 ] || fail "no managed identity token issued"
	# a wrong federated token is refused by the endpoint: an error naming it, no retry loop
	echo "not-the-federated-token" >"$T/wrong.tok"
	wrun "${BASE[@]}" "${AD[@]}" AZURE_FEDERATED_TOKEN_FILE="$T/wrong.tok" \
		-- wal-push "$T/wal/000000010000000000000006"
	expect_rc 1 "wal-push with a wrong federated token"
	assert_contains "$W_ERR" "invalid_client" "the token endpoint's refusal is reported"
	log "ok: Shared Key, SAS, service principal, workload identity and managed identity"

	# expired token: the store answers 401 once, walc refreshes it and sends again
	PROXY_ARGS=(--tls-cert "$AZ_DIR/cert.pem" --tls-key "$AZ_DIR/key.pem" --upstream-tls)
	proxy_start expired "$AZ_PORT" "${PROXY_ARGS[@]}" --rule '^PUT ' 'status:401:InvalidAuthenticationInfo#1'
	VIA=(AZURE_ENDPOINT_SUFFIX="localhost:$PPORT")
	before=$(tokens workload)
	roundtrip "an expired token" 000000010000000000000007 "${BASE[@]}" "${AD[@]}" "${VIA[@]}" \
		AZURE_FEDERATED_TOKEN_FILE="$T/fed.tok" WALG_LOG_LEVEL=DEVEL
	# wal-push: the first token and the refresh; wal-fetch (another process): one
	assert_eq $((before + 3)) "$(tokens workload)" "tokens fetched (first, refresh, wal-fetch's)"
	kill "$PROXY_PID"
	FAULT_ENV=("${BASE[@]}" AZURE_STORAGE_ACCESS_KEY="$AZ_KEY" AZURE_MAX_RETRIES=12)
	PREFIX_VAR=WALG_AZ_PREFIX PREFIX=azure://walc
	UP=$AZ_PORT
	via() { echo "AZURE_ENDPOINT_SUFFIX=localhost:$1"; }
	GETPATH='^GET /walc/'
	BIG=$((24 * 1024 * 1024))
else
	gcs_start
	proxy_start auth "$GCS_PORT" --log-header authorization
	BASE=(GCS_ENDPOINT="http://127.0.0.1:$PPORT" WALG_GS_PREFIX=gs://walc/ids)
	roundtrip "no credentials (STORAGE_EMULATOR_HOST)" 000000010000000000000001 \
		STORAGE_EMULATOR_HOST="127.0.0.1:$GCS_PORT" WALG_GS_PREFIX=gs://walc/ids
	roundtrip "the metadata server" 000000010000000000000002 "${BASE[@]}" \
		GCE_METADATA_HOST="127.0.0.1:$TOK_PORT"
	[ "$(tokens gce-metadata)" -ge 1 ] || fail "no metadata server token issued"
	grep -q 'Bearer_ya29.walc-it-' "$T/log/proxy-auth.log" || fail "the proxy saw no bearer token"
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$T/sa.pem" 2>/dev/null
	"$PY" - "$T/sa.pem" "$TOK_PORT" >"$T/sa.json" <<'PYEOF'
import json, sys
print(json.dumps({"type": "service_account", "project_id": "walc-it",
                  "client_email": "walc-it@test.iam.gserviceaccount.com",
                  "private_key": open(sys.argv[1]).read(),
                  "token_uri": f"http://127.0.0.1:{sys.argv[2]}/token"}))
PYEOF
	roundtrip "a service account key" 000000010000000000000003 "${BASE[@]}" \
		GOOGLE_APPLICATION_CREDENTIALS="$T/sa.json"
	[ "$(tokens google-jwt)" -ge 1 ] || fail "no token issued for the service account's JWT"
	wrun GOOGLE_APPLICATION_CREDENTIALS="$T/nonexistent.json" "${BASE[@]}" -- wal-push "$T/wal/000000010000000000000004"
	expect_rc 1 "wal-push with a missing credentials file"
	assert_contains "$W_ERR" "GOOGLE_APPLICATION_CREDENTIALS" "the error names the setting"
	kill "$PROXY_PID"
	log "ok: emulator without credentials, metadata server, service account key"

	proxy_start expired "$GCS_PORT" --rule '^POST /upload' 'status:401:authError#1'
	before=$(tokens gce-metadata)
	roundtrip "an expired token" 000000010000000000000005 GCS_ENDPOINT="http://127.0.0.1:$PPORT" \
		WALG_GS_PREFIX=gs://walc/ids GCE_METADATA_HOST="127.0.0.1:$TOK_PORT" WALG_LOG_LEVEL=DEVEL
	assert_eq $((before + 3)) "$(tokens gce-metadata)" "tokens fetched (first, refresh, wal-fetch's)"
	kill "$PROXY_PID"
	FAULT_ENV=(WALG_GS_PREFIX=gs://walc/ids GCS_MAX_RETRIES=12)
	PREFIX_VAR=WALG_GS_PREFIX PREFIX=gs://walc
	UP=$GCS_PORT
	PROXY_ARGS=()
	via() { echo "STORAGE_EMULATOR_HOST=127.0.0.1:$1"; }
	GETPATH='^GET /download/'
	BIG=$((12 * 1024 * 1024)) # the emulator takes one upload request of at most 16 MiB
fi
assert_contains "$(cat "$T/push.err")" "credentials expired" "walc reported the refresh"
log "ok: an expired token is refreshed and the request repeated"

# ---- 20% faults -----------------------------------------------------------------------------
proxy_start random "$UP" "${PROXY_ARGS[@]}" --rate 0.2 --faults drop,dropmid,503,500,stall,latency \
	--stall 3 --seed 11
for f in "$T"/wal/*; do
	wrun "${FAULT_ENV[@]}" "$PREFIX_VAR=$PREFIX/faults" "$(via "$PPORT")" -- wal-push "$f"
	cat "$T/.w_err" >>"$T/log/walc-faults.log"
	expect_rc 0 "wal-push $(basename "$f") through the fault proxy"
done
for f in "$T"/wal/*; do
	s=$(basename "$f")
	wrun "${FAULT_ENV[@]}" "$PREFIX_VAR=$PREFIX/faults" "$(via "$PPORT")" -- wal-fetch "$s" "$T/fetch/$s"
	cat "$T/.w_err" >>"$T/log/walc-faults.log"
	expect_rc 0 "wal-fetch $s through the fault proxy"
	assert_same_file "$f" "$T/fetch/$s" "wal-fetch $s through the fault proxy"
done
total=$(wc -l <"$T/log/proxy-random.log")
faulted=$(awk '$4 != "ok"' "$T/log/proxy-random.log" | wc -l)
[ "$faulted" -ge $((total / 10)) ] || fail "only $faulted of $total requests faulted"
for kind in drop 503 500; do
	[ "$(awk -v k="$kind" '$4 == k' "$T/log/proxy-random.log" | wc -l)" -gt 0 ] ||
		fail "the proxy injected no '$kind' fault in $total requests"
done
kill "$PROXY_PID"
log "ok: $N wal-push + $N wal-fetch through 20% faults ($faulted of $total requests faulted)"

# ---- a GET resumed with Range -----------------------------------------------------------------
head -c "$BIG" /dev/urandom >"$T/big"
wrun "${FAULT_ENV[@]}" "$PREFIX_VAR=$PREFIX/resume" "$(via "$UP")" -- st put --no-compress --no-encrypt "$T/big" big
expect_rc 0 "storing the object to resume"
proxy_start resume "$UP" "${PROXY_ARGS[@]}" --rule "$GETPATH" 'dropmid#2'
wrun "${FAULT_ENV[@]}" "$PREFIX_VAR=$PREFIX/resume" "$(via "$PPORT")" WALG_LOG_LEVEL=DEVEL -- \
	st cat --no-decompress --no-decrypt big
expect_rc 0 "st cat through two broken connections"
cmp -s "$T/big" "$T/.w_out" || fail "the object read across two broken connections differs"
assert_eq 2 "$(grep -c 'resuming with a Range request' "$T/.w_err")" "resumed GETs"
grep -q 'range: bytes=[1-9][0-9]*-' "$T/.w_err" || fail "no Range header in the resumed GET"
assert_eq 3 "$(grep -cE '^[0-9]+ GET [^ ]*big ' "$T/log/proxy-resume.log")" "GET requests"
kill "$PROXY_PID"
log "ok: a GET broken twice mid-body resumed with Range requests, bytes identical"
log "test_${STORE}_auth_faults passed in $((SECONDS - START)) s"
