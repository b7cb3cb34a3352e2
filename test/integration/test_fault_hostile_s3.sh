#!/usr/bin/env bash
# A hostile S3 server (fault_fakes3.py on loopback; the bucket name picks the misbehaviour).
#   - ListObjectsV2 answered with bytes that are not XML, an HTML page, XML cut mid-tag, a 4 GiB
#     body (with a length, and chunked), a billion-laughs DOCTYPE, 100000 nested elements, a
#     16 MiB key, a 500 with an endless body, IsTruncated without a token, sizes of -5 and
#     10^23: `st ls -r`, backup-list and wal-show each exit 1 within 30 s naming the request
#     (ListObjectsV2 s3://MODE/...), with a peak memory under 100 MiB; the same continuation
#     token forever: `st ls -r` exits 1 within 15 s;
#   - a sentinel whose GET streams 256 MiB: backup-fetch LATEST exits 1 naming it, bounded
#     memory;
#   - keys with "..", "//" and a newline in the listing: backup-fetch LATEST exits 1 and writes
#     nothing outside DEST; delete retain 1 --confirm sends no DELETE;
#   - credentials with CR/LF: AWS_ACCESS_KEY_ID or AWS_SESSION_TOKEN holding
#     "\nX-Injected: 1", an ECS credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI)
#     answering a Token with "\r\nX-Injected: 1", a shared credentials file whose
#     aws_session_token holds "\rX-Injected: 1": wal-push exits 1 naming the variable or the
#     source, and no request carrying an X-Injected header reaches the server; other S3
#     settings with newlines or overflowing numbers: one error line naming the variable, no
#     request sent.
# The cases are independent: every one runs even after a failed check (IT_KEEP_GOING defaults
# to 1 here), and the test exits 1 at the end having printed each failed check.
IT_KEEP_GOING=${IT_KEEP_GOING:-1}
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup fault-hostile-s3
START=$SECONDS
RSS_LIMIT_KIB=$(rss_limit_kib 100)
FPORT=$(s3_port 1)
"$PY" "$IT_DIR/fault_fakes3.py" --listen "$FPORT" --log "$T/log/fake.jsonl" >"$T/log/fake.out" 2>&1 &
S3_PIDS+=("$!")
for _ in $(seq 100); do grep -q ready "$T/log/fake.out" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$T/log/fake.out" || fail "fault_fakes3.py did not start"
# shellcheck disable=SC2154 # rc is assigned inside the trap string
trap 'rc=$?; set +e; rm -rf /tmp/walc-fakes3-escape*; s3_cleanup; (exit $rc); it_cleanup' EXIT
base_env() { # MODE: the environment for bucket MODE on the fake server
	BENV=(WALG_S3_PREFIX="s3://$1/p" AWS_ENDPOINT="http://127.0.0.1:$FPORT" AWS_S3_FORCE_PATH_STYLE=true
		AWS_ACCESS_KEY_ID=AKIDFAKE AWS_SECRET_ACCESS_KEY=fake-secret AWS_REGION=us-east-1
		S3_MAX_RETRIES=1 S3_CONNECT_TIMEOUT=2 S3_LOW_SPEED_TIMEOUT=5 WALG_PG_WAL_SIZE=1)
}
# hrun ENV... -- ARGS: as wrun, under `timeout $H_TIMEOUT` (30 s), peak RSS (KiB) in H_RSS, time in
# H_MS
hrun() {
	local envs=() t0
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	t0=$(date +%s%N)
	set +e
	"$PY" "$IT_DIR/fault_check.py" rss "$T/rss" timeout "${H_TIMEOUT:-30}" env -u AWS_CONFIG_FILE "${envs[@]}" "$WALC" "$@" \
		>"$T/.w_out" 2>"$T/.w_err" </dev/null
	W_RC=$?
	set -e
	H_MS=$((($(date +%s%N) - t0) / 1000000))
	W_OUT=$(cat "$T/.w_out")
	W_ERR=$(cat "$T/.w_err")
	H_RSS=$(cat "$T/rss")
	if grep -Eq "$SANITIZER_RE" <<<"$W_ERR"; then
		printf '%s\n' "$W_ERR" >&2
		fail "sanitizer report from: walc $*"
	fi
	return 0
}
first_error() {
	printf '%s\n' "$W_ERR" | grep -E 'ERROR|FATAL' | head -n 1 | sed -E 's/^[A-Z]+: [0-9\/]+ [0-9:.]+ //' | cut -c 1-200
}
requests() { # number of logged requests so far
	wc -l <"$T/log/fake.jsonl" | tr -d ' '
}

# ---- hostile listings ------------------------------------------------------------------------------
for mode in garbage html truncxml huge hugechunked laughs deep longkey err500huge notoken badsize bigsize loop; do
	base_env "$mode"
	cmds=("st ls -r" backup-list wal-show)
	H_TIMEOUT=30
	# a server that repeats its continuation token: one command, a shorter wait
	[ "$mode" = loop ] && cmds=("st ls -r") && H_TIMEOUT=15
	for cmd in "${cmds[@]}"; do
		# shellcheck disable=SC2086 # cmd is split into its words on purpose
		hrun "${BENV[@]}" -- $cmd
		[ "$W_RC" != 124 ] || fail "$mode: walc $cmd did not finish within $H_TIMEOUT s ($(requests) requests logged)"
		[ "$W_RC" = 1 ] || fail "$mode: walc $cmd: expected exit 1, got $(wdesc); stdout: $(printf '%s' "$W_OUT" | head -c 300)"
		assert_contains "$W_ERR" "ListObjectsV2 s3://$mode/p/" "$mode: walc $cmd names the request"
		[ "$H_RSS" -le "$RSS_LIMIT_KIB" ] || fail "$mode: walc $cmd used $H_RSS KiB"
	done
	log "  $mode: exit $W_RC in $H_MS ms, $H_RSS KiB peak: $(first_error)"
done
H_TIMEOUT=30
ok "hostile ListObjectsV2 answers: exit 1 naming the request, bounded time and memory"

# ---- a 256 MiB sentinel ------------------------------------------------------------------------------
base_env hugesentinel
mkdir -p "$T/sb"
hrun "${BENV[@]}" -- backup-fetch "$T/sb/dest" LATEST
expect_rc 1 "backup-fetch of a backup whose sentinel streams 256 MiB"
assert_contains "$W_ERR" base_000000010000000000000002_backup_stop_sentinel.json "hugesentinel: the message names the sentinel"
[ "$H_RSS" -le "$RSS_LIMIT_KIB" ] || fail "hugesentinel: backup-fetch used $H_RSS KiB"
ok "a 256 MiB sentinel: exit 1 in $H_MS ms, $H_RSS KiB peak: $(first_error)"

# ---- hostile keys ------------------------------------------------------------------------------------
base_env hostilekeys
before=$(cd "$T" && find . -path ./sb -prune -o ! -name '.w_*' ! -name rss ! -name 'fake.*' -print | sort)
hrun "${BENV[@]}" -- backup-fetch "$T/sb/dest2" LATEST
expect_rc 1 "backup-fetch LATEST with hostile keys in the listing"
assert_contains "$W_ERR" '".."' "hostilekeys: backup-fetch names the bad key"
after=$(cd "$T" && find . -path ./sb -prune -o ! -name '.w_*' ! -name rss ! -name 'fake.*' -print | sort)
assert_eq "$before" "$after" "hostilekeys: files outside DEST"
ls /tmp/walc-fakes3-escape* >/dev/null 2>&1 && fail "hostilekeys: something was written under /tmp/walc-fakes3-escape*"
n0=$(requests)
hrun "${BENV[@]}" -- delete retain 1 --confirm
dels=$(tail -n +$((n0 + 1)) "$T/log/fake.jsonl" | grep -c '"method": "DELETE"\|"method": "POST"' || true)
assert_eq 0 "$dels" "hostilekeys: DELETE or DeleteObjects requests sent by delete retain 1 --confirm"
ok "hostile keys: backup-fetch exit 1 ($(first_error)); delete retain exit $W_RC without deleting anything"

# ---- credentials and settings with CR/LF --------------------------------------------------------------
mkdir -p "$T/wal"
fake_segment 000000010000000000000001 1048576 "$T/wal/000000010000000000000001"
NL='
'
injected() { grep -c '"X-Injected"' "$T/log/fake.jsonl" || true; }
base_env record
for kv in "AWS_ACCESS_KEY_ID=AKID${NL}X-Injected: 1" "AWS_SESSION_TOKEN=tok${NL}X-Injected: 1"; do
	var=${kv%%=*}
	n0=$(requests)
	hrun "${BENV[@]}" "$kv" -- wal-push "$T/wal/000000010000000000000001"
	sent=$(($(requests) - n0))
	expect_rc 1 "$var with a newline: wal-push"
	assert_eq 1 "$(nlines "$W_ERR")" "$var with a newline: stderr lines (stderr: $W_ERR)"
	assert_contains "$W_ERR" "$var" "$var with a newline: the message names the variable"
	assert_eq 0 "$sent" "$var with a newline: requests sent"
	log "  $var with a newline: $(first_error)"
done
n0=$(requests)
ECS_ENV=()
for e in "${BENV[@]}"; do case $e in AWS_ACCESS_KEY_ID=* | AWS_SECRET_ACCESS_KEY=*) ;; *) ECS_ENV+=("$e") ;; esac; done
hrun "${ECS_ENV[@]}" AWS_CONTAINER_CREDENTIALS_FULL_URI="http://127.0.0.1:$FPORT/ecs-creds" \
	AWS_EC2_METADATA_DISABLED=true -- wal-push "$T/wal/000000010000000000000001"
puts=$(tail -n +$((n0 + 1)) "$T/log/fake.jsonl" | grep -c '"method": "PUT"' || true)
expect_rc 1 "wal-push with a session token holding CR LF from the ECS endpoint"
assert_eq 0 "$puts" "ECS token with CR LF: PUT requests sent"
log "  ECS token with CR LF: $(first_error)"
printf '[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = file-secret\naws_session_token = tok\rX-Injected: 1\n' >"$T/credentials"
chmod 600 "$T/credentials"
n0=$(requests)
hrun "${ECS_ENV[@]}" AWS_SHARED_CREDENTIALS_FILE="$T/credentials" AWS_EC2_METADATA_DISABLED=true \
	-- wal-push "$T/wal/000000010000000000000001"
puts=$(tail -n +$((n0 + 1)) "$T/log/fake.jsonl" | grep -c '"method": "PUT"' || true)
expect_rc 1 "wal-push with a session token holding CR from the shared credentials file"
assert_contains "$W_ERR" "$T/credentials" "shared credentials file with CR: the message names the file"
assert_eq 0 "$puts" "shared credentials file with CR: PUT requests sent"
log "  shared credentials file with CR: $(first_error)"
assert_eq 0 "$(injected)" "requests that reached the server with an injected X-Injected header"
CONFIGS=(
	"AWS_REGION=us-east-1${NL}X-Injected: 1" "S3_STORAGE_CLASS=STANDARD${NL}X-Injected: 1"
	"S3_SSE=AES256${NL}X-Injected: 1" "AWS_ENDPOINT=http://127.0.0.1:$FPORT${NL}X-Injected: 1"
	"WALG_S3_PREFIX=s3://record/p${NL}x" "AWS_S3_FORCE_PATH_STYLE=true${NL}"
	S3_MAX_RETRIES=99999999999999999999 S3_MAX_PART_SIZE=99999999999999999999
	S3_CONNECT_TIMEOUT=99999999999999999999 S3_LOW_SPEED_TIMEOUT=-99999999999999999999
	S3_MAX_PART_SIZE=-5242880
)
for kv in "${CONFIGS[@]}"; do
	var=${kv%%=*}
	n0=$(requests)
	hrun "${BENV[@]}" "$kv" -- wal-push "$T/wal/000000010000000000000001"
	expect_rc 1 "$(printf '%s' "$kv" | head -n 1): wal-push"
	assert_eq 1 "$(nlines "$W_ERR")" "$var: stderr lines (stderr: $W_ERR)"
	assert_contains "$W_ERR" "$var" "$var: the message names the variable"
	assert_eq "$n0" "$(requests)" "$var: requests sent"
done
assert_eq 0 "$(injected)" "requests with an injected header"
ok "credentials and S3 settings with CR/LF or overflowing numbers: refused before any request"
log "all done in $((SECONDS - START))s"
