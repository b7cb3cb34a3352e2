#!/usr/bin/env bash
# WAL-G settings walc does not implement that change what is stored, where, or how it is
# protected are errors, never warnings (issue 14 §1); the OpenPGP ones walc implements are not.
# A repository with a full backup and its WAL, a running cluster; then each such setting alone,
# on top of a configuration that works:
#   - wal-push of a real segment, backup-push of the running cluster and backup-fetch of the
#     backup each exit 1 with exactly one stderr line naming the setting;
#   - the repository's listing (names, sizes, times) is the same before and after, and
#     backup-fetch's destination is not created;
#   - a setting's "off" value (WALG_TARGET_STORAGE=default, WALG_UPLOAD_WAL_METADATA=NOMETADATA,
#     WALG_PG_BLOCK_SIZE=8192) is accepted;
#   - harmless unimplemented settings stay warnings, and no-ops of walc's design say nothing at
#     NORMAL level.
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
it_setup config-refused

REPO=$T/repo
ENVS=(WALG_FILE_PREFIX="$REPO")
mkdir -p "$REPO"
walc_wrapper "${ENVS[@]}"
pgbench_source 1 push.log
PGENV=(PGHOST="$T" PGPORT="$PORT")

wrun_pg "${ENVS[@]}" "${PGENV[@]}" -- backup-push "$SRC"
expect_rc 0 "backup-push with a working configuration"
switch_wal "$PORT"
SEG=$(psqlc "$PORT" "SELECT pg_walfile_name(pg_current_wal_lsn())")
BACKUP=$(find "$REPO/basebackups_005" -maxdepth 1 -name '*_backup_stop_sentinel.json' | head -n1)
BACKUP=$(basename "${BACKUP%_backup_stop_sentinel.json}")
[ -n "$BACKUP" ] || fail "no backup was written"
log "repository with backup $BACKUP; pushing $SEG in the checks below"

listing() { find "$REPO" -printf '%P %s %T@\n' | sort; }

# refused VAR=VALUE [NEEDLE]: each of the three commands exits 1 with one line holding NEEDLE
# (default: "VAR is set, but"), and nothing changed
refused() {
	local setting=$1 var=${1%%=*} before cmd
	local needle=${2:-"${1%%=*} is set, but"}
	for cmd in wal-push backup-push backup-fetch; do
		before=$(listing)
		rm -rf "$T/dest"
		case $cmd in
		wal-push) wrun_pg "${ENVS[@]}" "$setting" -- wal-push "$SRC/pg_wal/$SEG" ;;
		backup-push) wrun_pg "${ENVS[@]}" "${PGENV[@]}" "$setting" -- backup-push "$SRC" ;;
		backup-fetch) wrun_pg "${ENVS[@]}" "$setting" -- backup-fetch "$T/dest" LATEST ;;
		esac
		expect_rc 1 "$cmd with $setting"
		assert_eq 1 "$(nlines "$W_ERR")" "$cmd with $setting: stderr lines (stderr: $W_ERR)"
		assert_contains "$W_ERR" "$needle" "$cmd with $setting: the message names it"
		assert_eq "$before" "$(listing)" "$cmd with $setting: the repository's listing"
		assert_absent "$T/dest" "$cmd with $setting: the destination"
	done
	log "  $var: $W_ERR"
}

# encryption walc does not implement (OpenPGP from a gpg keyring, envelopes, KMS)
refused WALG_GPG_KEY_ID=0123ABCD
assert_contains "$W_ERR" "export the key into WALG_PGP_KEY_PATH" "WALG_GPG_KEY_ID: the way out"
refused WALE_GPG_KEY_ID=0123ABCD
refused WALG_ENVELOPE_PGP_KEY="-----BEGIN PGP PUBLIC KEY BLOCK-----"
refused WALG_ENVELOPE_PGP_KEY_PATH=/etc/walg/envelope.asc
refused WALG_ENVELOPE_PGP_YC_CSE_KMS_KEY_ID=abc
refused WALG_ENVELOPE_PGP_YC_SERVICE_ACCOUNT_KEY_FILE=/etc/walg/sa.json
refused WALG_ENVELOPE_PGP_YC_ENDPOINT=kms.example
refused WALG_CSE_KMS_ID=arn:aws:kms:eu-west-1:1:key/abc
refused WALG_CSE_KMS_REGION=eu-west-1
refused YC_CSE_KMS_KEY_ID=abc
refused YC_SERVICE_ACCOUNT_KEY_FILE=/etc/walg/sa.json
ok "other encryption settings are refused"

# OpenPGP keys are walc settings now: a bad key is a configuration error naming it (before any
# work, nothing changed), and the passphrase alone only warns.
for setting in WALG_PGP_KEY="-----BEGIN PGP PUBLIC KEY BLOCK-----" WALG_PGP_KEY_PATH="$T/no-such-key.asc"; do
	before=$(listing)
	rm -rf "$T/dest"
	wrun_pg "${ENVS[@]}" "$setting" -- wal-push "$SRC/pg_wal/$SEG"
	expect_rc 1 "wal-push with $setting"
	assert_eq 1 "$(nlines "$W_ERR")" "wal-push with $setting: stderr lines (stderr: $W_ERR)"
	assert_contains "$W_ERR" "${setting%%=*}: " "wal-push with $setting: the message names it"
	assert_not_contains "$W_ERR" "is set, but" "wal-push with $setting: not refused as unimplemented"
	wrun_pg "${ENVS[@]}" "$setting" -- backup-fetch "$T/dest" LATEST
	expect_rc 1 "backup-fetch with $setting"
	assert_eq "$before" "$(listing)" "$setting: the repository's listing"
	assert_absent "$T/dest" "backup-fetch with $setting: the destination"
done
wrun_pg "${ENVS[@]}" WALG_PGP_KEY_PASSPHRASE=secret -- backup-list
expect_rc 0 "backup-list with only WALG_PGP_KEY_PASSPHRASE"
assert_contains "$W_ERR" "WALG_PGP_KEY_PASSPHRASE is set, but neither WALG_PGP_KEY nor WALG_PGP_KEY_PATH" \
	"the passphrase alone warns"
assert_not_contains "$W_ERR" "secret" "the passphrase is not shown"
ok "OpenPGP settings are accepted: a bad key is an error naming it, the passphrase alone warns"

# other storages, targets (GCS, Azure and SFTP are implemented: test_gcs_*, test_az_*,
# test_sftp_*)
for s in SWIFT OSS; do
	refused "WALG_${s}_PREFIX=x://bucket/path"
	refused "WALE_${s}_PREFIX=x://bucket/path"
done
refused AZURE_ENVIRONMENT_NAME=AzureChinaCloud
ok "other storages are refused"

# failover storages (test_failover.sh) that cannot be what was meant: an error naming them
refused WALG_FAILOVER_STORAGES='second: /tmp/x' "WALG_FAILOVER_STORAGES: expected a JSON object"
refused WALG_FAILOVER_STORAGES='{"default": {"WALG_FILE_PREFIX": "/tmp/x"}}' \
	'WALG_FAILOVER_STORAGES "default": the name is reserved'
refused WALG_FAILOVER_STORAGES='{"second": "/tmp/x"}' \
	'WALG_FAILOVER_STORAGES "second": expected a JSON object of settings'
refused WALG_FAILOVER_STORAGES='{"second": {"AWS_REGION": "eu-west-1"}}' \
	'WALG_FAILOVER_STORAGES "second": no storage prefix'
refused WALG_FAILOVER_STORAGES='{"second": {"WALG_S3_PREFIX": "bucket/x"}}' \
	'WALG_FAILOVER_STORAGES "second": WALG_S3_PREFIX: expected s3://bucket/path'
refused WALG_FAILOVER_STORAGES='{"second": {"WALG_FILE_PREFIX": "/tmp/x", "S3_ENDPOINT_SOURCE": "http://b"}}' \
	'S3_ENDPOINT_SOURCE (in WALG_FAILOVER_STORAGES "second") is set, but'
refused WALG_TARGET_STORAGE=second \
	'storage "second" (--target-storage, WALG_TARGET_STORAGE) is not configured; the storages are default'
refused WALG_FAILOVER_STORAGES_CHECK_SIZE=lots \
	'WALG_FAILOVER_STORAGES_CHECK_SIZE: expected a size like 100, 64kb or 1mb, got "lots"'
ok "failover storages, a target and check sizes that are malformed are refused"

# what is written and how it is kept
# WAL metadata is implemented (test_wal_metadata.sh): a level WAL-G does not know is refused
before=$(listing)
wrun_pg "${ENVS[@]}" WALG_UPLOAD_WAL_METADATA=ALL -- wal-push "$SRC/pg_wal/$SEG"
expect_rc 1 "wal-push with WALG_UPLOAD_WAL_METADATA=ALL"
assert_contains "$W_ERR" "WALG_UPLOAD_WAL_METADATA: expected one of NOMETADATA,INDIVIDUAL,BULK" \
	"an unknown WAL metadata level"
assert_eq "$before" "$(listing)" "WALG_UPLOAD_WAL_METADATA=ALL: the repository's listing"
refused WALG_PG_BLOCK_SIZE=32768
refused WALG_PG_WAL_PAGE_SIZE=32768
for v in S3_ENDPOINT_SOURCE=http://balancer S3_REQUEST_ADDITIONAL_HEADERS='{"X-A": "1"}' \
	S3_USE_YC_SESSION_TOKEN=true; do
	refused "$v"
done
ok "unknown WAL metadata levels, page sizes and request rewriting are refused"

# a configuration file in a format walc does not read (WAL-G reads YAML too): refused, naming it
printf 'WALG_PGP_KEY_PATH: /etc/walg/key.asc\n' >"$T/walg.yaml"
for cmd in wal-push backup-push backup-fetch; do
	before=$(listing)
	rm -rf "$T/dest"
	case $cmd in
	wal-push) wrun_pg "${ENVS[@]}" WALG_CONFIG_PATH="$T/walg.yaml" -- wal-push "$SRC/pg_wal/$SEG" ;;
	backup-push) wrun_pg "${ENVS[@]}" "${PGENV[@]}" -- --config "$T/walg.yaml" backup-push "$SRC" ;;
	backup-fetch) wrun_pg "${ENVS[@]}" -- backup-fetch "$T/dest" LATEST --config "$T/walg.yaml" ;;
	esac
	expect_rc 1 "$cmd with a YAML configuration file"
	assert_eq 1 "$(nlines "$W_ERR")" "$cmd with a YAML file: stderr lines (stderr: $W_ERR)"
	assert_contains "$W_ERR" "$T/walg.yaml" "$cmd with a YAML file: the message names it"
	assert_eq "$before" "$(listing)" "$cmd with a YAML file: the repository's listing"
	assert_absent "$T/dest" "$cmd with a YAML file: the destination"
done
# ...and a refused setting inside a JSON one is refused like one in the environment
printf '{"WALG_CSE_KMS_ID": "arn:aws:kms:eu-west-1:1:key/abc"}\n' >"$T/walg.json"
chmod 644 "$T/walg.yaml" "$T/walg.json"
wrun_pg "${ENVS[@]}" WALG_CONFIG_PATH="$T/walg.json" -- wal-push "$SRC/pg_wal/$SEG"
expect_rc 1 "wal-push with a refused setting in the JSON file"
assert_contains "$W_ERR" "WALG_CSE_KMS_ID (in $T/walg.json) is set, but" "the refusal names the file"
ok "configuration files: other formats refused naming the file, refused settings in JSON too"

# "off" values are accepted, and the harmless ones stay quiet or warn
wrun_pg "${ENVS[@]}" WALG_TARGET_STORAGE=default WALG_UPLOAD_WAL_METADATA=NOMETADATA \
	WALG_PG_BLOCK_SIZE=8192 WALG_PG_WAL_PAGE_SIZE=8192 S3_RETENTION_PERIOD=-1 \
	AZURE_ENVIRONMENT_NAME=AzurePublicCloud -- backup-list
expect_rc 0 "backup-list with the off values"
assert_eq "" "$W_ERR" "backup-list with the off values: stderr"
wrun_pg "${ENVS[@]}" WALG_USE_REVERSE_UNPACK=true WALG_USE_RATING_COMPOSER=true \
	WALG_UPLOAD_QUEUE=4 -- backup-list
expect_rc 0 "backup-list with no-op settings"
assert_eq "" "$W_ERR" "backup-list with no-op settings: stderr at NORMAL level"
wrun_pg "${ENVS[@]}" WALG_LOG_LEVEL=DEVEL WALG_USE_REVERSE_UNPACK=true -- backup-list
assert_contains "$W_ERR" "WALG_USE_REVERSE_UNPACK has no effect" "no-op setting at DEVEL level"
wrun_pg "${ENVS[@]}" WALG_STATSD_ADDRESS=127.0.0.1:8125 -- backup-list
expect_rc 0 "backup-list with WALG_STATSD_ADDRESS"
assert_contains "$W_ERR" "WALG_STATSD_ADDRESS is not implemented" "WALG_STATSD_ADDRESS warns"
ok "off values accepted, no-ops quiet, harmless unimplemented settings warn"

# the working configuration still works after all this
wrun_pg "${ENVS[@]}" -- backup-fetch "$T/dest" LATEST
expect_rc 0 "backup-fetch with the working configuration"
ok "the repository is intact"
