#!/usr/bin/env bash
# SFTP identities, host keys and broken connections (Debian's sshd on 127.0.0.1; its host key
# and the client's keys are made here):
#   1. an Ed25519 key, a password, a passphrase-protected key (OpenSSH format), an ECDSA key in
#      PEM, and an unknown key followed by the password (as WAL-G tries them) each push and
#      fetch WAL with identical bytes, so does a known_hosts with hashed names; without
#      SSH_KNOWN_HOSTS any host key is taken, as WAL-G does, and nothing is said about it;
#   2. refused in one line naming the setting, exit 1, nothing stored: a key the server does
#      not know, a wrong password, a wrong passphrase, a missing key file, an RSA key (which
#      libssh2 1.10 signs with SHA-1: the line says so), a known_hosts with another key for the
#      server, a known_hosts with no key for it; no secret (password, passphrase) in any
#      output, DEVEL logs and `walc env` included;
#   3. through a proxy that cuts 20% of connections at a random byte: 30 wal-push + 30
#      wal-fetch succeed with identical bytes;
#   4. an upload cut twice mid-stream goes on where the server's acknowledgements left it,
#      and a read cut twice goes on from the byte it had reached: identical bytes.
. "$(dirname "$0")/lib.sh"
# shellcheck source=objstore_lib.sh
. "$(dirname "$0")/objstore_lib.sh"
store_setup sftpauth
START=$SECONDS
export WALG_PG_WAL_SIZE=1 WALG_DOWNLOAD_CONCURRENCY=1 PGDATA=$T/pgdata
fault_segments
sftp_start
mkdir -p "$SFTP_ROOT/ids" "$SFTP_ROOT/faults" "$SFTP_ROOT/resume"
pg_own "$SFTP_ROOT"
REPO=(WALG_SSH_PREFIX="ssh://127.0.0.1$SFTP_ROOT/ids" SSH_PORT="$SSHD_PORT" SSH_USERNAME=walc)
KEY=(SSH_PRIVATE_KEY_PATH="$SSHD_DIR/id_ed25519")
HOSTS=(SSH_KNOWN_HOSTS="$SSHD_DIR/known_hosts")

# refused WHAT NEEDLE ENV...: wal-push exits 1 with one line holding NEEDLE, nothing stored
refused() {
	local what=$1 needle=$2 before
	shift 2
	before=$(find "$SFTP_ROOT" | sort)
	wrun "$@" -- wal-push "$T/wal/000000010000000000000010"
	expect_rc 1 "wal-push with $what"
	assert_eq 1 "$(nlines "$W_ERR")" "lines of the refusal of $what ($W_ERR)"
	assert_contains "$W_ERR" "$needle" "the refusal of $what"
	assert_eq "$before" "$(find "$SFTP_ROOT" | sort)" "the server's files after the refusal of $what"
}

# ---- 1. identities ------------------------------------------------------------------------
roundtrip "a key" 000000010000000000000001 "${REPO[@]}" "${KEY[@]}" "${HOSTS[@]}"
PASS=(SSH_PASSWORD="$SFTP_PASSWORD")
roundtrip "a password" 000000010000000000000002 "${REPO[@]}" "${PASS[@]}" "${HOSTS[@]}"
PHRASE="walc it phrase $RANDOM"
ssh-keygen -q -t ed25519 -N "$PHRASE" -C walc-it-phrase -f "$T/phrase_key"
ssh-keygen -q -t ecdsa -m PEM -N '' -C walc-it-pem -f "$T/pem_key"
ssh-keygen -q -t rsa -b 2048 -N '' -C walc-it-rsa -f "$T/rsa_key"
cat "$T/phrase_key.pub" "$T/pem_key.pub" "$T/rsa_key.pub" >>"$SSHD_DIR/authorized_keys"
roundtrip "a key with a passphrase" 000000010000000000000003 "${REPO[@]}" "${HOSTS[@]}" \
	SSH_PRIVATE_KEY_PATH="$T/phrase_key" SSH_PRIVATE_KEY_PASSPHRASE="$PHRASE"
roundtrip "an ECDSA key in PEM" 000000010000000000000004 "${REPO[@]}" "${HOSTS[@]}" \
	SSH_PRIVATE_KEY_PATH="$T/pem_key"
cp "$SSHD_DIR/known_hosts" "$T/hashed_hosts"
ssh-keygen -q -H -f "$T/hashed_hosts" >/dev/null 2>&1
grep -q '^|1|' "$T/hashed_hosts" || fail "ssh-keygen -H did not hash the known_hosts names"
roundtrip "a hashed known_hosts" 000000010000000000000008 "${REPO[@]}" "${KEY[@]}" \
	SSH_KNOWN_HOSTS="$T/hashed_hosts"
roundtrip "no known_hosts" 000000010000000000000005 "${REPO[@]}" "${KEY[@]}"
assert_not_contains "$(cat "$T/push.err")" "host key" "wal-push without SSH_KNOWN_HOSTS"
# a key the server refuses, then the password: as WAL-G, the password is tried next
ssh-keygen -q -t ed25519 -N '' -C walc-it-stranger -f "$T/stranger_key"
roundtrip "an unknown key and the password" 000000010000000000000006 "${REPO[@]}" "${HOSTS[@]}" \
	"${PASS[@]}" SSH_PRIVATE_KEY_PATH="$T/stranger_key"
wrun "${REPO[@]}" "${KEY[@]}" -- st ls wal_005/
assert_eq 7 "$(grep -c "^obj " <<<"$W_OUT")" "objects stored by the seven identities"
ok "an Ed25519 key, a password, a passphrase-protected key, an ECDSA PEM key, an unknown key then the password; hashed known_hosts; no known_hosts, no word"

# ---- 2. refusals ----------------------------------------------------------------------------
refused "an unknown key" "SSH_PRIVATE_KEY_PATH" "${REPO[@]}" "${HOSTS[@]}" \
	SSH_PRIVATE_KEY_PATH="$T/stranger_key"
assert_contains "$W_ERR" "refused the key $T/stranger_key for user walc" "the unknown key's refusal"
refused "a wrong password" "SSH_PASSWORD" "${REPO[@]}" "${HOSTS[@]}" SSH_PASSWORD=not-the-password
refused "a wrong passphrase" "SSH_PRIVATE_KEY_PATH" "${REPO[@]}" "${HOSTS[@]}" \
	SSH_PRIVATE_KEY_PATH="$T/phrase_key" SSH_PRIVATE_KEY_PASSPHRASE=not-the-phrase
refused "a missing key file" "SSH_PRIVATE_KEY_PATH" "${REPO[@]}" "${HOSTS[@]}" \
	SSH_PRIVATE_KEY_PATH="$T/nonexistent_key"
refused "an RSA key" "SSH_PRIVATE_KEY_PATH" "${REPO[@]}" "${HOSTS[@]}" SSH_PRIVATE_KEY_PATH="$T/rsa_key"
assert_contains "$W_ERR" "an RSA key, which libssh2 1.10 signs with SHA-1" "the RSA key's refusal"
ssh-keygen -q -t ed25519 -N '' -C walc-it-other-host -f "$T/other_host"
echo "[127.0.0.1]:$SSHD_PORT $(cut -d' ' -f1,2 "$T/other_host.pub")" >"$T/wrong_hosts"
refused "another host key" "SSH_KNOWN_HOSTS" "${REPO[@]}" "${KEY[@]}" SSH_KNOWN_HOSTS="$T/wrong_hosts"
assert_contains "$W_ERR" "does not match" "the wrong host key's refusal"
echo "[127.0.0.1]:1 $(cut -d' ' -f1,2 "$SSHD_DIR/host_key.pub")" >"$T/other_hosts"
refused "no key for the host" "SSH_KNOWN_HOSTS" "${REPO[@]}" "${KEY[@]}" SSH_KNOWN_HOSTS="$T/other_hosts"
assert_contains "$W_ERR" "has no key for ssh://127.0.0.1:$SSHD_PORT" "the unknown host's refusal"
# secrets: in no output, failing or not, DEVEL or not
wrun "${REPO[@]}" "${HOSTS[@]}" SSH_PASSWORD="$SFTP_PASSWORD" SSH_PRIVATE_KEY_PATH="$T/phrase_key" \
	SSH_PRIVATE_KEY_PASSPHRASE="$PHRASE" WALG_LOG_LEVEL=DEVEL -- wal-push "$T/wal/000000010000000000000007"
expect_rc 0 "wal-push at DEVEL with every secret set"
all=$W_ERR$W_OUT
wrun "${REPO[@]}" SSH_PASSWORD=not-the-password SSH_PRIVATE_KEY_PASSPHRASE=not-the-phrase \
	SSH_PRIVATE_KEY_PATH="$T/phrase_key" WALG_LOG_LEVEL=DEVEL -- wal-push "$T/wal/000000010000000000000010"
expect_rc 1 "wal-push at DEVEL with wrong secrets"
all=$all$W_ERR$W_OUT
wrun "${REPO[@]}" SSH_PASSWORD="$SFTP_PASSWORD" SSH_PRIVATE_KEY_PASSPHRASE="$PHRASE" -- env
expect_rc 0 "walc env"
assert_contains "$W_OUT" "SSH_PASSWORD" "walc env lists SSH_PASSWORD"
all=$all$W_ERR$W_OUT
for secret in "$SFTP_PASSWORD" "$PHRASE" not-the-password not-the-phrase; do
	assert_not_contains "$all" "$secret" "walc's output"
done
ok "an unknown key, a wrong password or passphrase, a missing key, an RSA key, another host key, an unknown host: one line each, nothing stored; no secret shown"

# ---- 3. 20% of connections cut ----------------------------------------------------------------
# the proxy's port is another [host]:port for known_hosts
echo "[127.0.0.1]:PROXYPORT $(cut -d' ' -f1,2 "$SSHD_DIR/host_key.pub")" >"$T/proxy_hosts"
proxy_tcp() { # NAME ARGS...: the TCP fault proxy in front of sshd; PPORT, PROXY_PID, VIA
	tcp_proxy_start "$1" "$SSHD_PORT" "${@:2}"
	sed -i "s/^\[127.0.0.1\]:[0-9A-Z]* /[127.0.0.1]:$PPORT /" "$T/proxy_hosts"
	VIA=(SSH_PORT="$PPORT" SSH_USERNAME=walc "${KEY[@]}" SSH_KNOWN_HOSTS="$T/proxy_hosts")
}
proxy_tcp random --rate 0.2 --cut-min 0 --cut-max 120000 --seed 11
F=(WALG_SSH_PREFIX="ssh://127.0.0.1$SFTP_ROOT/faults" SSH_MAX_RETRIES=12)
for f in "$T"/wal/*; do
	wrun "${F[@]}" "${VIA[@]}" -- wal-push "$f"
	cat "$T/.w_err" >>"$T/log/walc-faults.log"
	expect_rc 0 "wal-push $(basename "$f") through the fault proxy"
done
for f in "$T"/wal/*; do
	s=$(basename "$f")
	wrun "${F[@]}" "${VIA[@]}" -- wal-fetch "$s" "$T/fetch/$s"
	cat "$T/.w_err" >>"$T/log/walc-faults.log"
	expect_rc 0 "wal-fetch $s through the fault proxy"
	assert_same_file "$f" "$T/fetch/$s" "wal-fetch $s through the fault proxy"
done
total=$(wc -l <"$T/log/proxy-random.log")
cut=$(grep -c ' cut@' "$T/log/proxy-random.log" || true)
[ "$cut" -ge $((total / 10)) ] || fail "only $cut of $total connections were cut"
retries=$(grep -c 'retry [0-9]* of 12' "$T/log/walc-faults.log" || true)
[ "$retries" -ge 1 ] || fail "no retry logged through $cut cut connections"
leftover=$(find "$SFTP_ROOT/faults" -name '.*walc-tmp*' | wc -l)
kill "$PROXY_PID"
ok "$N wal-push + $N wal-fetch through cut connections ($cut of $total cut, $retries retries, $leftover temporaries of cut uploads left)"

# ---- 4. an upload and a read cut twice, resumed ----------------------------------------------
head -c $((8 * 1024 * 1024)) /dev/urandom >"$T/big"
R=(WALG_SSH_PREFIX="ssh://127.0.0.1$SFTP_ROOT/resume")
proxy_tcp up --first 2 --cut-at 3000000 --dir up
wrun "${R[@]}" "${VIA[@]}" -- st put --no-compress --no-encrypt "$T/big" big
expect_rc 0 "st put through two broken connections"
assert_eq 2 "$(grep -c 'the upload goes on at byte [1-9]' "$T/.w_err")" "uploads resumed ($W_ERR)"
assert_same_file "$T/big" "$SFTP_ROOT/resume/big" "the object written across three connections"
kill "$PROXY_PID"
proxy_tcp down --first 2 --cut-at 3000000 --dir down
wrun "${R[@]}" "${VIA[@]}" -- st cat --no-decompress --no-decrypt big
expect_rc 0 "st cat through two broken connections"
cmp -s "$T/big" "$T/.w_out" || fail "the object read across two broken connections differs"
assert_eq 2 "$(grep -c 'resuming at byte [1-9]' "$T/.w_err")" "reads resumed ($W_ERR)"
kill "$PROXY_PID"
ok "an upload and a read each cut twice mid-stream go on where they were: bytes identical"
log "test_sftp_auth_faults passed in $((SECONDS - START)) s"
