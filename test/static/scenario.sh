#!/usr/bin/env bash
# One storage scenario of make test-static (run by test-static.sh): scenario.sh file|s3|sftp
#
# With WALC pointing at the static binary (test/integration/lib.sh conventions: the servers
# and their archive/restore commands run as postgres, everything lives in $T):
#   file: codecs — one WAL file pushed with each codec (lz4, zstd, brotli, lzma; lzma and zstd
#         encrypted with a libsodium key, lz4 with OpenPGP) is fetched back identical, and the
#         stored object decodes with Debian's CLI tools (after independent decryption with
#         sodium.py or gpg); a wrong OpenPGP passphrase fails and writes nothing;
#   both: a PostgreSQL 15 cluster archives with walc wal-push (archive_command); pgbench -i
#         fills it; walc backup-push; rows are added after the backup and their WAL archived;
#         walc backup-fetch LATEST into a new data directory, which recovers through walc
#         wal-fetch (restore_command) to the end of the archive and is promoted: the table
#         checksums equal the source's, rows added after the backup included;
#   s3:   all of it against s3rver over HTTPS (its self-signed certificate given with
#         S3_CA_CERT_FILE, path-style addressing), and without the CA file the certificate is
#         refused;
#   sftp: all of it against Debian's sshd (test/integration/objstore_lib.sh: key
#         authentication, the host key checked with SSH_KNOWN_HOSTS), and a known_hosts with
#         another key is refused.
# Exit 0 passed, 1 failed, 3 not run (printed as "S3 part: not run: REASON": only when walc
# reports its S3 backend as not implemented).
STORAGE=${1:?usage: scenario.sh file|s3|sftp}
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source-path=SCRIPTDIR source=../integration/objstore_lib.sh
. "$(dirname "$0")/../integration/objstore_lib.sh"
it_setup "static-$STORAGE"
START=$SECONDS
S3RVER_SH=$ROOT/test/servers/s3rver.sh
S3RVER_DIR=""

cleanup() {
	local rc=$?
	if [ -n "$S3RVER_DIR" ]; then "$S3RVER_SH" stop "$S3RVER_DIR" >/dev/null 2>&1; fi
	store_cleanup
	(exit "$rc")
	it_cleanup
}
trap cleanup EXIT

# ---- storage configuration ------------------------------------------------------------------
ENVS=()
case $STORAGE in
file)
	mkdir -p "$T/repo"
	ENVS=(WALG_FILE_PREFIX="$T/repo")
	;;
s3)
	# a port with nothing listening on it
	while :; do
		S3PORT=$(random_port)
		(exec 3<>"/dev/tcp/127.0.0.1/$S3PORT") 2>/dev/null || break
	done
	S3RVER_DIR=$T/s3rver
	log "starting s3rver (https) on 127.0.0.1:$S3PORT"
	"$S3RVER_SH" start "$S3RVER_DIR" "$S3PORT" https >"$T/log/s3rver.out" 2>&1 ||
		{ cat "$T/log/s3rver.out" "$S3RVER_DIR/log" >&2 2>/dev/null; fail "s3rver.sh start"; }
	chmod 755 "$S3RVER_DIR"
	chmod 644 "$S3RVER_DIR/cert.pem"
	ENVS=(WALG_S3_PREFIX=s3://test/static AWS_ENDPOINT="https://127.0.0.1:$S3PORT"
		AWS_S3_FORCE_PATH_STYLE=true AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
		AWS_REGION=us-east-1 S3_CA_CERT_FILE="$S3RVER_DIR/cert.pem")
	# Is the S3 backend there at all? A missing WAL file must be reported as missing.
	wrun "${ENVS[@]}" -- wal-fetch 000000010000000000000042 "$T/probe"
	if [ "$W_RC" != 0 ] && grep -Eiq 'not (yet )?(implemented|supported)|unsupported|unknown storage' <<<"$W_ERR"; then
		echo "S3 part: not run: walc's S3 backend reports: $(printf '%s\n' "$W_ERR" | head -n 1)"
		exit 3
	fi
	[ "$W_RC" != 0 ] || fail "wal-fetch of a missing WAL file over S3 succeeded"
	assert_match "$W_ERR" "does not exist|not found|NoSuchKey" "wal-fetch of a missing WAL file over S3"
	# Without the CA file the self-signed certificate is refused: TLS verification works in
	# the static OpenSSL/curl.
	noca=()
	for e in "${ENVS[@]}"; do [[ $e == S3_CA_CERT_FILE=* ]] || noca+=("$e"); done
	wrun "${noca[@]}" -- wal-fetch 000000010000000000000042 "$T/probe"
	[ "$W_RC" != 0 ] || fail "wal-fetch over HTTPS without the CA file succeeded"
	assert_match "$W_ERR" "certificate|SSL" "wal-fetch over HTTPS without the CA file"
	ok "HTTPS to s3rver: a missing object is reported missing; without S3_CA_CERT_FILE the certificate is refused"
	;;
sftp)
	sftp_start
	mkdir -p "$SFTP_ROOT/static"
	pg_own "$SFTP_ROOT"
	ENVS=(WALG_SSH_PREFIX="ssh://127.0.0.1$SFTP_ROOT/static" "${SFTP_ENV[@]}")
	echo "[127.0.0.1]:$SSHD_PORT $(cut -d' ' -f1,2 "$SSHD_DIR/id_ed25519.pub")" >"$T/wrong_hosts"
	wrun "${ENVS[@]}" SSH_KNOWN_HOSTS="$T/wrong_hosts" -- wal-fetch 000000010000000000000001 "$T/x"
	expect_rc 1 "wal-fetch with another host key in SSH_KNOWN_HOSTS"
	assert_contains "$W_ERR" "does not match" "wal-fetch with another host key in SSH_KNOWN_HOSTS"
	ok "SFTP: a known_hosts with another key for the server is refused"
	;;
*) fail "unknown storage $STORAGE" ;;
esac

# ---- codecs (file storage only: the S3 part reuses the same code for objects) ---------------
if [ "$STORAGE" = file ]; then
	head -c 32 /dev/urandom >"$T/key.bin"
	base64 -w0 "$T/key.bin" >"$T/key.base64"
	chmod 644 "$T/key.base64"
	mkdir -p "$T/wal" "$T/fetched"
	SEG=000000010000000000000001
	{ head -c 300000 /dev/urandom; { yes "static walc segment" | head -c 748576 || true; }; } >"$T/segsrc"
	fake_segment "$SEG" 1048576 "$T/wal/$SEG" "$T/segsrc"
	# OpenPGP with the WAL-G fixture's key: pushed with the public key, fetched with the secret
	# key and its passphrase; decoded independently by gpg(1) when it is installed
	PGPFX=$ROOT/test/fixtures/walg-v3.0.9-pgp/keys
	cp "$PGPFX/pgp-public.asc" "$PGPFX/pgp-secret.asc" "$T/"
	PGPPASS=$(cat "$PGPFX/passphrase.txt")
	for c in lz4 zstd brotli lzma zstd-key lzma-key lz4-pgp; do
		codec=${c%-*}
		# a repository's folder exists before the first write (a missing one is an error)
		mkdir -p "$T/codec-$c"
		envs=(WALG_FILE_PREFIX="$T/codec-$c" WALG_COMPRESSION_METHOD="$codec")
		# no prefetch: a detached prefetcher writing into $T/fetched/.wal-g would race the
		# chown -R of $T below (it did in CI: a temporary file vanished under chown)
		fetch=(WALG_DOWNLOAD_CONCURRENCY=1)
		case $c in
		*-key) envs+=(WALG_LIBSODIUM_KEY_PATH="$T/key.base64" WALG_LIBSODIUM_KEY_TRANSFORM=base64) ;;
		*-pgp)
			envs+=(WALG_PGP_KEY_PATH="$T/pgp-public.asc")
			fetch+=(WALG_PGP_KEY_PATH="$T/pgp-secret.asc" WALG_PGP_KEY_PASSPHRASE="$PGPPASS")
			;;
		esac
		wrun "${envs[@]}" -- wal-push "$T/wal/$SEG"
		expect_rc 0 "wal-push with $c"
		obj=$T/codec-$c/wal_005/$SEG$(ext_of "$codec")
		[ -f "$obj" ] || fail "wal-push with $c: $obj not stored ($(find "$T/codec-$c" -type f))"
		case $c in
		*-key)
			sodium_decrypt "$T/key.base64" base64 <"$obj" | decode_cli "$codec" >"$T/fetched/$c.cli" ||
				fail "sodium.py + Debian's $codec CLI cannot decode $obj"
			;;
		*-pgp)
			if command -v gpg >/dev/null; then
				mkdir -m 700 "$T/gnupg"
				GNUPGHOME=$T/gnupg gpg --batch --pinentry-mode loopback --passphrase "$PGPPASS" \
					--import "$T/pgp-secret.asc" 2>/dev/null
				GNUPGHOME=$T/gnupg gpg --batch -q --pinentry-mode loopback --passphrase "$PGPPASS" -d "$obj" 2>/dev/null |
					decode_cli "$codec" >"$T/fetched/$c.cli" || fail "gpg + Debian's $codec CLI cannot decode $obj"
				GNUPGHOME=$T/gnupg gpgconf --kill gpg-agent 2>/dev/null || true
			else
				log "gpg not installed: the OpenPGP object is not decoded independently"
				cp "$T/wal/$SEG" "$T/fetched/$c.cli"
			fi
			;;
		*) decode_cli "$codec" <"$obj" >"$T/fetched/$c.cli" || fail "Debian's $codec CLI cannot decode $obj" ;;
		esac
		assert_same_file "$T/wal/$SEG" "$T/fetched/$c.cli" "$c object decoded independently"
		wrun "${envs[@]}" "${fetch[@]}" -- wal-fetch "$SEG" "$T/fetched/$c"
		expect_rc 0 "wal-fetch with $c"
		assert_same_file "$T/wal/$SEG" "$T/fetched/$c" "wal-fetch with $c"
	done
	# a wrong passphrase: exit 1, nothing written
	wrun WALG_FILE_PREFIX="$T/codec-lz4-pgp" WALG_PGP_KEY_PATH="$T/pgp-secret.asc" \
		WALG_PGP_KEY_PASSPHRASE="not $PGPPASS" -- wal-fetch "$SEG" "$T/fetched/wrong"
	expect_rc 1 "wal-fetch with a wrong passphrase"
	assert_contains "$W_ERR" "wrong passphrase" "wal-fetch with a wrong passphrase"
	assert_absent "$T/fetched/wrong" "wal-fetch with a wrong passphrase"
	ok "codecs: lz4 zstd brotli lzma (+ libsodium, + OpenPGP) round trip, objects decode with Debian's tools (and gpg)"
fi

# ---- PostgreSQL 15: archive, base backup, restore, recovery ---------------------------------
WALC_ENV=$T/walc.env
{
	printf '%q\n' "${ENVS[@]}" | sed 's/^/export /'
	echo "export WALG_COMPRESSION_METHOD=zstd HOME='$T/home'"
} >"$WALC_ENV"
cat >"$T/walc.sh" <<EOF
#!/bin/sh
# walc-static with this scenario's storage, as archive_command/restore_command run it
. '$WALC_ENV'
export PGDATA="\$PWD"
exec '$WALC_PG' "\$@"
EOF
chmod 755 "$T/walc.sh"
pg_own "$T"

SRC=$T/src
PORT=$(free_port)
pg_init "$SRC"
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "fsync = off" \
	"archive_command = '$T/walc.sh wal-push %p 2>>$T/log/push.log || { echo \"wal-push %p failed\" >>$T/archive-failed; exit 1; }'"
pg_start "$SRC" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -i -s 2 -q postgres >"$T/log/pgbench.log" 2>&1 ||
	{ cat "$T/log/pgbench.log" >&2; fail "pgbench -i"; }
psqlc "$PORT" "CREATE TABLE after_backup (id int PRIMARY KEY, payload text)"

wrun_pg WALG_COMPRESSION_METHOD=zstd "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
printf '%s\n' "$W_ERR" >"$T/log/backup-push.log"
expect_rc 0 "backup-push"
wrun "${ENVS[@]}" -- backup-list
expect_rc 0 "backup-list"
NAME=$(printf '%s\n' "$W_OUT" | tail -n 1 | cut -f 1 -d ' ')
[[ $NAME =~ ^base_[0-9A-F]{24}$ ]] || fail "backup-list after backup-push: $W_OUT"
log "backup $NAME pushed"

psqlc "$PORT" "INSERT INTO after_backup SELECT g, md5(g::text) FROM generate_series(1, 5000) g;
	UPDATE pgbench_accounts SET abalance = abalance + aid % 7 WHERE aid % 11 = 0"
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 180 "$T/archive-failed"
CHECK_SQL="SELECT (SELECT count(*) || ':' || sum(abalance) FROM pgbench_accounts) || '/' ||
	(SELECT count(*) || ':' || md5(string_agg(id || payload, ',' ORDER BY id)) FROM after_backup)"
WANT=$(psqlc "$PORT" "$CHECK_SQL")
pg_stop "$SRC"
[ ! -e "$T/archive-failed" ] || { cat "$T/archive-failed" "$T/log/push.log" >&2; fail "archive_command failed"; }
ok "$STORAGE: wal-push as archive_command and backup-push of a pgbench -i -s 2 cluster"

R=$T/restored
wrun "${ENVS[@]}" -- backup-fetch "$R" LATEST
expect_rc 0 "backup-fetch LATEST"
pg_conf "$R" "archive_mode = off" "restore_command = '$T/walc.sh wal-fetch %f %p'" \
	"recovery_target_action = 'promote'"
touch "$R/recovery.signal"
pg_own "$R"
RPORT=$(free_port)
pg_start "$R" "$RPORT"
wait_not_in_recovery "$RPORT" 180
GOT=$(psqlc "$RPORT" "$CHECK_SQL")
pg_stop "$R"
assert_eq "$WANT" "$GOT" "$STORAGE: tables after backup-fetch and recovery through wal-fetch"
grep -q 'restored log file "'"$seg"'" from archive' "$R.log" ||
	fail "$STORAGE: recovery did not restore $seg through wal-fetch (see $R.log)"
ok "$STORAGE: backup-fetch LATEST and recovery through wal-fetch up to $seg: $GOT"
log "scenario $STORAGE passed in $((SECONDS - START))s"
