#!/usr/bin/env bash
# Secrets never reach walc's output, at WALG_LOG_LEVEL=DEVEL (text and json formats).
#
# WALG_LIBSODIUM_KEY, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and PGPASSWORD hold recognisable
# values. Storage is s3rver (it checks the key id only, so a session token is accepted and every
# code path runs: PUT, multipart, GET, LIST, DELETE); PostgreSQL requires scram-sha-256
# passwords on its socket, so backup-push and wal-verify authenticate with PGPASSWORD. Every
# command runs: wal-push (PostgreSQL's archive_command too), wal-fetch, backup-push,
# backup-list (--detail --json), backup-fetch, wal-show, wal-verify, st ls/put/get/cat/rm,
# delete retain (dry run and --confirm), delete garbage, backup-mark, env; a failing wal-fetch
# and a failing backup-push (wrong password) too, since error paths print more. For each:
#   - none of the four values, nor their first 12 characters, nor the key in hex or base64,
#     appears on stdout or stderr;
# and: a WALG_LIBSODIUM_KEY_PATH file readable by others gets a warning naming the file (mode
# 0644); a 0640 (a Kubernetes Secret for the pod's fsGroup) or 0600 file gets none.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup fault-secrets
START=$SECONDS

KEY=WalcSecretKeyMaterial-3e9f1a2b7c # 32 characters
AWS_SECRET=WalcSecretAccessKey-55aa0c1d9e8f7a6b5c4d3e2f1a0b
AWS_TOKEN=WalcSessionToken-FQoGZXIvYXdzEJr-8c7d6e5f4a3b2c1d0e9f
PGPASS=WalcPgPassword-0b1c2d3e4f5a6b7c
SECRETS=("$KEY" "$AWS_SECRET" "$AWS_TOKEN" "$PGPASS")
FORMS=()
for s in "${SECRETS[@]}"; do
	FORMS+=("$s" "${s:0:12}" "$(printf '%s' "$s" | od -An -v -tx1 | tr -d ' \n')"
		"$(printf '%s' "$s" | base64 -w0 | tr -d '=')")
done

s3_s3rver_start
SPORT=$S3RVER_PORT
E=(WALG_S3_PREFIX=s3://test/secrets AWS_ENDPOINT="http://127.0.0.1:$SPORT" AWS_S3_FORCE_PATH_STYLE=true
	AWS_ACCESS_KEY_ID=S3RVER "AWS_SECRET_ACCESS_KEY=$AWS_SECRET" "AWS_SESSION_TOKEN=$AWS_TOKEN"
	AWS_REGION=us-east-1 "WALG_LIBSODIUM_KEY=$KEY" "PGPASSWORD=$PGPASS" WALG_LOG_LEVEL=DEVEL
	WALG_COMPRESSION_METHOD=zstd S3_MAX_PART_SIZE=5242880 WALG_TAR_SIZE_THRESHOLD=8000000
	WALG_UPLOAD_CONCURRENCY=4)

# scan WHAT FILE...: no secret form in the files
SCANNED=0
scan() {
	local what=$1 f s
	shift
	for f in "$@"; do
		[ -f "$f" ] || continue
		for s in "${FORMS[@]}"; do
			if grep -qF -- "$s" "$f"; then
				grep -nF -- "$s" "$f" | head -n 3 | cut -c 1-300 >&2
				fail "$what: a secret (or its prefix/hex/base64 form '$s') appears in its output"
			fi
		done
		SCANNED=$((SCANNED + $(wc -l <"$f")))
	done
}
# sec ENV... -- ARGS: wrun, then scan stdout and stderr
NCMDS=0
sec() {
	local args=() envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	args=("$@")
	wrun "${E[@]}" "${envs[@]}" -- "${args[@]}"
	scan "walc ${args[*]}" "$T/.w_out" "$T/.w_err"
	NCMDS=$((NCMDS + 1))
}

# ---- PostgreSQL with password authentication ----------------------------------------------------
walc_wrapper "${E[@]}"
SRC=$T/src
PORT=$(free_port)
pg_init "$SRC"
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "fsync = off" \
	"archive_command = '$T/walc.sh wal-push %p 2>>$T/log/archive.log'" "password_encryption = 'scram-sha-256'"
pg_own "$T"
pg_start "$SRC" "$PORT"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 2 -q postgres >/dev/null 2>&1 || fail "pgbench -i"
psqlc "$PORT" "ALTER USER postgres PASSWORD '$PGPASS'" >/dev/null
printf 'local all all scram-sha-256\nhost all all 127.0.0.1/32 scram-sha-256\n' >"$SRC/pg_hba.conf"
psqlc "$PORT" "SELECT pg_reload_conf()" >/dev/null
export PGPASSWORD=$PGPASS # for psqlc from now on
sleep 0.5
PGPASSWORD=wrong-password "$PGBIN/psql" -X -h "$T" -p "$PORT" -U postgres -d postgres -c 'SELECT 1' >/dev/null 2>&1 &&
	fail "the server accepts a wrong password: password authentication is not in force"
psqlc "$PORT" "SELECT 1" >/dev/null || fail "psql with the password"
log "PostgreSQL with scram-sha-256 on port $PORT; s3rver on $SPORT"

# ---- every command at DEVEL ----------------------------------------------------------------------
PGE=(PGHOST="$T" PGPORT="$PORT" PGUSER=postgres PGDATA="$SRC")
SYSID=$(psqlc "$PORT" "SELECT system_identifier FROM pg_control_system()")
for fmt in text json; do
	F=("WALG_LOG_FORMAT=$fmt")
	mkdir -p "$T/w-$fmt"
	[ "$fmt" = json ] && seg=0000000100000001000000F0 || seg=0000000100000002000000F0
	fake_segment "$seg" 16777216 "$T/w-$fmt/$seg" "" "$SYSID"
	sec "${F[@]}" -- env
	expect_rc 0 "walc env ($fmt)"
	sec "${F[@]}" -- wal-push "$T/w-$fmt/$seg"
	expect_rc 0 "wal-push ($fmt)"
	sec "${F[@]}" -- wal-fetch "$seg" "$T/w-$fmt/back"
	expect_rc 0 "wal-fetch ($fmt)"
	assert_same_file "$T/w-$fmt/$seg" "$T/w-$fmt/back" "wal-fetch ($fmt)"
	sec "${F[@]}" -- wal-fetch 0000000100000000000000FF "$T/w-$fmt/missing"
	expect_rc 74 "wal-fetch of a missing segment ($fmt)"
	sec "${F[@]}" "${PGE[@]}" -- backup-push "$SRC"
	expect_rc 0 "backup-push with password authentication ($fmt)"
	sec "${F[@]}" "${PGE[@]}" PGPASSWORD=wrong-"$PGPASS" -- backup-push "$SRC"
	expect_rc 1 "backup-push with a wrong password ($fmt)"
	sec "${F[@]}" -- backup-list
	sec "${F[@]}" -- backup-list --detail --json
	expect_rc 0 "backup-list --detail --json ($fmt)"
	name=$(printf '%s\n' "$W_OUT" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)[-1]["backup_name"])')
	sec "${F[@]}" -- backup-fetch "$T/r-$fmt" LATEST
	expect_rc 0 "backup-fetch ($fmt)"
	sec "${F[@]}" -- backup-mark "$name"
	sec "${F[@]}" -- backup-mark "$name" -i
	sec "${F[@]}" -- wal-show
	expect_rc 0 "wal-show ($fmt)"
	sec "${F[@]}" -- wal-show --detailed-json
	sec "${F[@]}" "${PGE[@]}" -- wal-verify integrity timeline
	sec "${F[@]}" -- st ls -r
	expect_rc 0 "st ls -r ($fmt)"
	sec "${F[@]}" -- st put "$T/w-$fmt/$seg" "tmp/obj-$fmt"
	sec "${F[@]}" -- st get "tmp/obj-$fmt.zst" "$T/w-$fmt/got"
	sec "${F[@]}" -- st cat "basebackups_005/${name}_backup_stop_sentinel.json"
	sec "${F[@]}" -- st rm "tmp/obj-$fmt.zst"
	sec "${F[@]}" -- delete retain 1
	sec "${F[@]}" -- delete garbage
	[ "$fmt" = json ] && sec "${F[@]}" -- delete retain FULL 1 --confirm
	log "  $fmt: $NCMDS commands so far, $SCANNED output lines scanned"
done
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 60
scan "PostgreSQL's archive_command (wal-push at DEVEL)" "$T/log/archive.log" "$SRC.log"
ok "$NCMDS commands at DEVEL (text and json), $SCANNED lines: no secret, prefix, hex or base64 form printed"

# ---- key file permissions ------------------------------------------------------------------------
printf '%s' "$KEY" >"$T/key.raw"
mkdir -p "$T/keyrepo"
for mode in 644 640 600; do
	chmod "$mode" "$T/key.raw"
	wrun WALG_FILE_PREFIX="$T/keyrepo" WALG_LIBSODIUM_KEY_PATH="$T/key.raw" -- wal-push "$T/w-text/0000000100000002000000F0"
	expect_rc 0 "wal-push with a key file of mode $mode"
	scan "wal-push with a key file of mode $mode" "$T/.w_out" "$T/.w_err"
	if [ "$mode" != 644 ]; then
		# a group may read it: how Kubernetes mounts a Secret for the pod's fsGroup
		assert_not_contains "$W_ERR" WARNING "key file of mode $mode: warnings"
	else
		assert_match "$W_ERR" "WARNING.*$T/key.raw" "key file of mode $mode: a warning naming the file"
		log "  mode $mode: $(printf '%s\n' "$W_ERR" | grep WARNING | head -n 1 | sed -E 's/^[A-Z]+: [0-9\/]+ [0-9:.]+ //')"
	fi
done
ok "a key file readable by others gets a warning; 0640 and 0600 none"
log "all done in $((SECONDS - START))s"
