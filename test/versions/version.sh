#!/usr/bin/env bash
# One column of the version matrix (run by run.sh): version.sh MAJOR [ROOT] runs every check
# below against PostgreSQL MAJOR (in the chroot ROOT, or the host's when ROOT is empty) with
# the static walc, and writes one line per check to $PGV_OUT/results:
#   CHECK <tab> PASS|FAIL|n/a <tab> detail (the time, the first failure, or why it does not apply)
# and each check's output to $PGV_OUT/CHECK.log. `version.sh --list` prints the checks in order.
#
# One source cluster (data checksums, a tablespace, pgbench -s 1 in "postgres", a table and
# index in the tablespace in "app") archives through walc wal-push into an encrypted (libsodium)
# file repository, and from the s3 check on into Ceph RGW too. Every restored cluster recovers
# through walc wal-fetch inside the same chroot, then: pg_dumpall equal to the source's at the
# recovery point, amcheck (bt_index_check with heapallindexed on every btree index of every
# database), and pg_checksums --check once stopped.
#
# Each check runs in a subshell of its own: a failure ends that check only, and the servers it
# started are stopped when it ends. A check whose prerequisite did not pass fails as "not run".
# Environment: PGV_OUT (required), PGV_ONLY (checks to run, default all), WALC (the static walc), S3_ENDPOINT, AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY and PGV_S3_BUCKET (the s3 check; it fails without them).
CHECKS=(setup local-full local-delta fetch-chain tablespace pitr delta-restore backup-verify encryption
	remote next-major remote-incremental remote-compression s3 standby archive-module wal-receive
	wal-verify retention)
if [ "${1:-}" = --list ]; then
	printf '%s\n' "${CHECKS[@]}"
	exit 0
fi
MAJOR=${1:?usage: version.sh MAJOR [ROOT] | --list}
PGV_ROOT_ARG=${2:-}
# lib.sh drops inherited AWS_* variables (a developer's shell must not leak into a test): keep
# the S3 server's own, given by run.sh.
S3_ENV=(AWS_ENDPOINT="${S3_ENDPOINT:-}" AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-}"
	AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-}" AWS_REGION=us-east-1 AWS_S3_FORCE_PATH_STYLE=true)
S3_BUCKET=${PGV_S3_BUCKET:-}
# shellcheck source-path=SCRIPTDIR source=../integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
OUT=${PGV_OUT:?PGV_OUT must name the output directory}
RES=$OUT/results
mkdir -p "$OUT"
: >"$RES"
pgv_use "$MAJOR" "$PGV_ROOT_ARG"
pgv_setup "pgv$MAJOR"
# shellcheck disable=SC2154 # rc is assigned inside the trap string
# a second signal must not cut the cleanup short
trap 'rc=$?; trap "" INT TERM; pgv_stop_all; (exit $rc); it_cleanup' EXIT
mkdir -p "$T/state" "$T/repo" "$T/ts"
head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/key.hex"
chmod 600 "$T/key.hex"
KEY=(WALG_LIBSODIUM_KEY_PATH="$T/key.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex)
ENVS=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd "${KEY[@]}")
S3E=(WALG_S3_PREFIX="s3://$S3_BUCKET/pg$MAJOR" WALG_COMPRESSION_METHOD=zstd "${KEY[@]}" "${S3_ENV[@]}")
walc_wrapper "${S3E[@]}"
mv "$T/walc.sh" "$T/walc-s3.sh"
walc_wrapper "${ENVS[@]}"
# archive_command: the file repository, and during the s3 check (while $T/s3.on exists) RGW too.
# Then without background uploads: WAL-G's markers in pg_wal/walg_data say "archived" without
# saying where, so a segment one wal-push uploaded ahead for RGW was skipped by the next one for
# the file repository (seen on PostgreSQL 13: wal-verify found the hole).
cat >"$T/archive.sh" <<EOF
#!/bin/sh
if [ ! -e '$T/s3.on' ]; then
	exec '$T/walc.sh' wal-push "\$1" 2>>'$T/log/push.log'
fi
WALG_UPLOAD_CONCURRENCY=1 '$T/walc.sh' wal-push "\$1" 2>>'$T/log/push.log' &&
	WALG_UPLOAD_CONCURRENCY=1 '$T/walc-s3.sh' wal-push "\$1" 2>>'$T/log/push-s3.log'
EOF
chmod 755 "$T/archive.sh"
pg_own "$T"
SRC=$T/src
PORT=$(free_port)
DBS=(postgres app)

# ------------------------------------------------------------------------------------------
# Helpers shared by the checks (state between checks lives in files: checks are subshells)
# ------------------------------------------------------------------------------------------

put() { printf '%s\n' "$2" >"$T/state/$1"; }
get() { cat "$T/state/$1" 2>/dev/null || fail "no $1 recorded (an earlier check did not get there)"; }
# not_applicable REASON: this check does not apply to this major
not_applicable() { printf '%s\n' "$1" >"$T/.na"; exit 3; }

# push [VAR=VALUE...] -- ARGS: backup-push as postgres against the source; prints the backup name
push() {
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	wrun_pg "${envs[@]}" PGHOST="$T" PGPORT="${PUSH_PORT:-$PORT}" -- backup-push "$@"
	printf '%s\n' "$W_ERR" >>"$T/log/backup-push.log"
	expect_rc 0 "backup-push $*"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' | tail -n 1
}

# archive_now: completes the source's current WAL segment and waits until it is archived;
# prints its name. A switch right after another one
# (pg_backup_stop's) would be a no-op leaving the segment open, hence the message first.
archive_now() {
	local seg
	seg=$(psqlc "$PORT" "SELECT pg_logical_emit_message(false, 'walc-test', 'switch'); SELECT pg_walfile_name(pg_switch_wal())" | tail -n 1)
	wait_archived "$SRC" "$seg" 120
	echo "$seg"
}

# quiet_point NAME: the source's dump now into $T/dump-NAME, then the current WAL segment
# archived, so a recovery to the end of the archive reaches exactly this state
quiet_point() {
	dump_norm "$PORT" >"$T/dump-$1"
	put "seg-$1" "$(archive_now)"
}

# fetch_to DIR NAME TSLOC [--delta] [VAR=VALUE...]: backup-fetch NAME into DIR with the
# tablespace relocated to TSLOC (restore spec), or with TSLOC "" inside DIR at pg_tblspc/OID (no
# spec); extra variables replace the file repository
fetch_to() {
	local dir=$1 name=$2 ts=$3 oid args=() envs=("${ENVS[@]}")
	shift 3
	if [ "${1:-}" = --delta ]; then args+=(--delta); shift; fi
	[ $# -eq 0 ] || envs=("$@")
	oid=$(get ts-oid)
	if [ -n "$ts" ]; then
		printf '{"base_prefix": "%s", "tablespaces": ["%s"], "%s": {"loc": "%s", "link": "pg_tblspc/%s"}}\n' \
			"$dir" "$oid" "$oid" "$ts" "$oid" >"$T/spec-$(basename "$dir").json"
		args+=(--restore-spec "$T/spec-$(basename "$dir").json")
	fi
	wrun "${envs[@]}" -- backup-fetch "${args[@]}" "$dir" "$name"
	printf '%s\n' "$W_ERR" >"$T/log/fetch-$(basename "$dir").log"
	expect_rc 0 "backup-fetch ${args[*]} $name into $dir"
	if [ -n "$ts" ]; then
		mkdir -p "$ts"
		pg_own "$ts"
	else
		if [ ! -d "$dir/pg_tblspc/$oid" ] || [ -L "$dir/pg_tblspc/$oid" ]; then
			fail "pg_tblspc/$oid is not a directory in $dir"
		fi
	fi
	pg_own "$dir"
}

# verify_restored DIR WANT "WALC ENV" [RECOVERY LINE...]: recover DIR through walc wal-fetch
# (default: to the end of the archive), then its dump must equal $T/dump-WANT, amcheck must
# pass in every database, and pg_checksums once it is stopped
verify_restored() {
	local dir=$1 want=$2 walc_env=$3 p db out
	shift 3
	[ $# -gt 0 ] || set -- "recovery_target_timeline = 'latest'"
	recover_conf "$dir" "$walc_env" "$@"
	p=$(free_port)
	pg_start "$dir" "$p"
	wait_not_in_recovery "$p" 180
	dump_norm "$p" >"$dir.dump"
	if ! cmp -s "$T/dump-$want" "$dir.dump"; then
		diff "$T/dump-$want" "$dir.dump" | head -n 20 >&2
		fail "$(basename "$dir"): pg_dumpall differs from the source's at $want"
	fi
	for db in "${DBS[@]}"; do amcheck_all "$p" "$db"; done
	pg_stop "$dir"
	out=$(as_pg "$PGBIN/pg_checksums" --check -D "$dir" 2>&1) || { echo "$out" >&2; fail "pg_checksums --check $dir"; }
	assert_contains "$out" "Bad checksums:  0" "pg_checksums on $(basename "$dir")"
	log "$(basename "$dir"): same dump as the source at $want, amcheck and pg_checksums pass"
}

backup_names() { # the file repository's backups, oldest first
	wrun "${ENVS[@]}" -- backup-list
	expect_rc 0 "backup-list"
	printf '%s\n' "$W_OUT" | awk 'NR > 1 { print $1 }'
}

# ------------------------------------------------------------------------------------------
# The checks
# ------------------------------------------------------------------------------------------

check_setup() {
	pg_init "$SRC" --data-checksums
	pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_command = '$T/archive.sh %p'" \
		"fsync = off" "max_wal_size = 1GB" "checkpoint_timeout = 1h" "max_wal_senders = 5"
	pg_start "$SRC" "$PORT"
	as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -i -s 1 -q postgres >"$T/log/pgbench-i.log" 2>&1 ||
		{ cat "$T/log/pgbench-i.log" >&2; fail "pgbench -i"; }
	psqlc "$PORT" "CREATE TABLESPACE ts LOCATION '$T/ts'"
	psqlc "$PORT" "CREATE DATABASE app"
	as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$T" -p "$PORT" -U postgres -d app -c \
		"CREATE TABLE items (id int PRIMARY KEY, v text) TABLESPACE ts;
		 INSERT INTO items SELECT g, md5(g::text) FROM generate_series(1, 20000) g;
		 CREATE INDEX items_v ON items (v) TABLESPACE ts; CHECKPOINT" >/dev/null
	put ts-oid "$(psqlc "$PORT" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts'")"
	log "PostgreSQL $(psqlc "$PORT" "SHOW server_version") running on port $PORT"
	PG_RUNNING=() # the source lives on across the checks
}

app() { as_pg "$PGBIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$T" -p "$PORT" -U postgres -d app -c "$1"; }
bench() { as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -c 2 -t "$1" postgres >/dev/null 2>&1 || fail "pgbench -t $1"; }

check_local_full() {
	local name
	dump_norm "$PORT" >"$T/dump-full"
	name=$(push "${ENVS[@]}" -- "$SRC")
	[[ $name =~ ^base_[0-9A-F]{24}$ ]] || fail "local full backup name: '$name'"
	put full "$name"
	log "local full backup $name"
}

check_local_delta() {
	local full name
	full=$(get full)
	bench 200
	app "INSERT INTO items SELECT g, 'c1-' || g FROM generate_series(20001, 25000) g"
	dump_norm "$PORT" >"$T/dump-t1"
	put t1 "$(psqlc "$PORT" "SELECT clock_timestamp()")"
	sleep 1.2 # commits after t1 have later timestamps
	app "UPDATE items SET v = v || '-2' WHERE id % 5 = 0; CREATE TABLE after_t1 AS SELECT g FROM generate_series(1, 1000) g"
	bench 100
	psqlc "$PORT" "CHECKPOINT"
	name=$(push "${ENVS[@]}" WALG_DELTA_MAX_STEPS=2 -- "$SRC")
	[[ $name =~ ^base_[0-9A-F]{24}_D_${full:5:24}$ ]] || fail "expected a delta of $full, got '$name'"
	put delta "$name"
	log "local delta backup $name"
}

check_fetch_chain() {
	local delta seg
	delta=$(get delta)
	app "DELETE FROM items WHERE id > 24000"
	bench 100
	quiet_point chain
	seg=$(get seg-chain)
	fetch_to "$T/r-chain" "$delta" "$T/ts-chain"
	verify_restored "$T/r-chain" chain "${ENVS[*]}"
	grep -q "restored log file \"$seg\" from archive" "$T/r-chain.log" ||
		fail "recovery did not reach $seg, the end of the archive (see r-chain.log)"
	log "delta chain $delta restored and recovered to the end of the archive ($seg)"
}

check_tablespace() {
	local oid link n
	oid=$(get ts-oid)
	[ -d "$T/r-chain" ] || fail "no restored cluster from fetch-chain"
	link=$(readlink "$T/r-chain/pg_tblspc/$oid") || fail "pg_tblspc/$oid is not a symbolic link"
	assert_eq "$T/ts-chain" "$link" "restored tablespace link"
	n=$(find "$T/ts-chain" -type f -path '*/PG_*' | wc -l)
	[ "$n" -ge 3 ] || fail "only $n files in the relocated tablespace $T/ts-chain"
	log "tablespace $oid relocated to $link ($n files); its table and index are in the equal dump"
}

check_pitr() {
	local full t1 seg
	full=$(get full)
	t1=$(get t1)
	seg=$(archive_now)
	fetch_to "$T/r-pitr" "$full" "$T/ts-pitr"
	verify_restored "$T/r-pitr" t1 "${ENVS[*]}" "recovery_target_time = '$t1'"
	grep -q "recovery stopping before commit" "$T/r-pitr.log" || fail "no 'recovery stopping before commit' in r-pitr.log"
	log "$full recovered to $t1"
}

check_delta_restore() {
	local delta out
	delta=$(get delta)
	[ -f "$T/r-pitr/PG_VERSION" ] || fail "no restored cluster from pitr to restore onto"
	# r-pitr is an old copy (the full backup) that was promoted and lived on: bring it to the delta
	quiet_point delta-restore
	fetch_to "$T/r-pitr" "$delta" "$T/ts-pitr" --delta
	out=$(grep -m1 'delta restore: ' "$T/log/fetch-r-pitr.log") || fail "backup-fetch --delta did not report a delta restore"
	assert_match "$out" 'delta restore: [1-9][0-9]* of [0-9]+ files intact' "backup-fetch --delta onto the old copy"
	verify_restored "$T/r-pitr" delta-restore "${ENVS[*]}"
	log "backup-fetch --delta of $delta onto the old copy: ${out#*INFO: * * }"
}

# backup-verify --wal of the delta chain, without restoring it: its pg_control read for the data
# checksum setting (this major's layout), every page's checksum, and the WAL from the delta's
# start to the newest segment: every page header (this major's magic and flags) and every
# record's CRC
check_backup_verify() {
	local delta
	delta=$(get delta)
	wrun "${ENVS[@]}" -- backup-verify --wal "$delta"
	printf '%s\n%s\n' "$W_OUT" "$W_ERR" >"$T/log/backup-verify.log"
	expect_rc 0 "backup-verify --wal $delta"
	assert_contains "$W_ERR" "data checksums on" "backup-verify: the source's pg_control"
	assert_match "$W_OUT" "^backup $delta: OK: [0-9]+ objects, [0-9]+ files, [1-9][0-9]* pages, [1-9][0-9]* WAL segments read; 0 problems" \
		"backup-verify summary"
	log "$(grep "^backup $delta: OK" <<<"$W_OUT")"
}

check_encryption() {
	local obj seg
	obj=$(find "$T/repo/wal_005" -name '[0-9A-F]*.zst' | sort | head -n 1)
	[ -n "$obj" ] || fail "no WAL object in the repository"
	seg=$(basename "$obj" .zst)
	[ "$(head -c 4 "$obj" | od -An -tx1 | tr -d ' ')" != 28b52ffd ] || fail "$obj is plain zstd, not encrypted"
	sodium_decrypt "$T/key.hex" hex <"$obj" | zstd -d -c -q >"$T/enc.plain" || fail "sodium.py + zstd cannot decode $obj"
	wrun "${ENVS[@]}" -- wal-fetch "$seg" "$T/enc.fetched"
	expect_rc 0 "wal-fetch $seg"
	assert_same_file "$T/enc.plain" "$T/enc.fetched" "wal-fetch vs independent decryption of $seg"
	wrun WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd -- wal-fetch "$seg" "$T/enc.nokey"
	{ [ "$W_RC" != 0 ] && [ "$W_RC" != 74 ]; } || fail "wal-fetch of an encrypted object without the key: $(wdesc)"
	assert_absent "$T/enc.nokey" "wal-fetch without the key"
	log "objects are encrypted: sodium.py decrypts $seg to what wal-fetch gives; without the key: $(printf '%s\n' "$W_ERR" | tail -n 1)"
}

check_remote() {
	local name
	dump_norm "$PORT" >"$T/dump-remote"
	# no data directory: BASE_BACKUP over a replication connection
	wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push
	printf '%s\n' "$W_ERR" >>"$T/log/backup-push.log"
	expect_rc 0 "remote backup-push"
	assert_contains "$W_ERR" "BASE_BACKUP" "remote mode log"
	name=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' | tail -n 1)
	[[ $name =~ ^base_[0-9A-F]{24}$ ]] || fail "remote backup name: '$name'"
	# no spec: the tablespace inside the restore, where WAL-G puts it (allow_in_place_tablespaces)
	fetch_to "$T/r-remote" "$name" ""
	verify_restored "$T/r-remote" remote "${ENVS[*]}" "recovery_target = 'immediate'"
	log "remote backup $name restored, its tablespace inside the data directory"
}

# The next major (PG_MAX_MAJOR + 1, which no server runs yet): the source seen through a proxy
# that reports its server_version as 20devel (next_major.py) is refused in one line, in local
# and in remote mode, before anything is written. psql works through the same proxy (and reads
# 200000 as libpq's server version), so the refusal is walc's.
check_next_major() {
	local dir=$T/next mode want args i=0
	want="PostgreSQL 20devel (server_version_num 200000) is not supported: walc supports PostgreSQL 13 to 19"
	mkdir -p "$dir" "$T/repo-next"
	chmod 755 "$dir"
	pg_own "$T/repo-next"
	"$PY" "$PGV_DIR/next_major.py" "$dir" "$PORT" "$T" 20devel >"$T/log/next-major.log" 2>&1 &
	BG_PIDS+=($!)
	until grep -q ready "$T/log/next-major.log"; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || fail "next_major.py did not start: $(cat "$T/log/next-major.log")"
		sleep 0.1
	done
	# psql connects through it, and libpq there reads the major as walc's does
	assert_eq 200000 "$(as_pg "$PGBIN/psql" -X -A -t -h "$dir" -p "$PORT" -U postgres -d postgres \
		-c "SELECT 1" -c '\echo :SERVER_VERSION_NUM' | tail -n 1)" "psql through the proxy"
	for mode in local remote; do
		args=()
		[ "$mode" = remote ] || args=("$SRC")
		wrun_pg WALG_FILE_PREFIX="$T/repo-next" WALG_COMPRESSION_METHOD=zstd "${KEY[@]}" PGHOST="$dir" PGPORT="$PORT" \
			-- backup-push "${args[@]}"
		[ "$W_RC" = 1 ] || fail "$mode backup-push from a 20devel server: $(wdesc)"
		assert_eq 1 "$(printf '%s\n' "$W_ERR" | wc -l)" "$mode backup-push from a 20devel server: lines on stderr ($W_ERR)"
		assert_contains "$W_ERR" "$want" "$mode backup-push from a 20devel server"
	done
	[ -z "$(find "$T/repo-next" -type f)" ] || fail "objects written for a 20devel server: $(find "$T/repo-next" -type f | head -n 3)"
	log "a server reporting 20devel is refused in one line (local and remote backup-push), nothing written"
}

# rpush [VAR=VALUE...]: remote backup-push (no data directory); prints the backup name, the log
# goes to $T/rpush.err
rpush() {
	wrun_pg "${ENVS[@]}" "$@" PGHOST="$T" PGPORT="$PORT" -- backup-push
	printf '%s\n' "$W_ERR" >>"$T/log/backup-push.log"
	printf '%s\n' "$W_ERR" >"$T/rpush.err"
	expect_rc 0 "remote backup-push $*"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' | tail -n 1
}

# walg_restore DIR NAME TSLOC: WAL-G v3.0.9 fetches NAME (its delta chain) into DIR, the
# tablespace relocated; false when there is no WAL-G
WALG=${WALG:-$ROOT/../shared/tools/wal-g}
walg_restore() {
	local dir=$1 name=$2 ts=$3 oid
	[ -x "$WALG" ] || return 1
	oid=$(get ts-oid)
	printf '{"base_prefix": "%s", "tablespaces": ["%s"], "%s": {"loc": "%s", "link": "pg_tblspc/%s"}}\n' \
		"$dir" "$oid" "$oid" "$ts" "$oid" >"$T/spec-$(basename "$dir").json"
	env -i PATH=/usr/bin:/bin HOME="$T/home" "${ENVS[@]}" "$WALG" backup-fetch \
		--restore-spec "$T/spec-$(basename "$dir").json" "$dir" "$name" >"$T/log/walg-$(basename "$dir").log" 2>&1 ||
		{ tail -n 20 "$T/log/walg-$(basename "$dir").log" >&2; fail "WAL-G backup-fetch $name"; }
	mkdir -p "$ts"
	chmod 700 "$dir" # WAL-G leaves the directory as its umask made it
	pg_own "$dir" "$ts"
}

# PostgreSQL 17+: remote deltas are incremental backups through WAL summaries, their INCREMENTAL
# files stored as WAL-G increments; the chain restores with walc and with WAL-G
check_remote_incremental() {
	local full d1 d2 out
	if [ "$MAJOR" -lt 17 ]; then
		full=$(rpush WALG_DELTA_MAX_STEPS=3)
		[[ $full =~ ^base_[0-9A-F]{24}$ ]] || fail "a remote delta before 17: expected a full backup, got '$full'"
		assert_contains "$(cat "$T/rpush.err")" "taking a full backup: remote deltas need PostgreSQL 17 or later" "remote delta before 17"
		not_applicable "incremental backups are 17+ (checked: a remote delta is a full backup, saying why)"
	fi
	psqlc "$PORT" "ALTER SYSTEM SET summarize_wal = off" >/dev/null
	psqlc "$PORT" "SELECT pg_reload_conf()" >/dev/null
	full=$(rpush WALG_DELTA_MAX_STEPS=3)
	assert_contains "$(cat "$T/rpush.err")" "taking a full backup: summarize_wal is off" "remote delta without summaries"
	[[ $full =~ ^base_[0-9A-F]{24}$ ]] || fail "without summaries: expected a full backup, got '$full'"
	# summaries from a checkpoint after that full on: the server refuses an incremental from it
	psqlc "$PORT" "CHECKPOINT" >/dev/null
	psqlc "$PORT" "ALTER SYSTEM SET summarize_wal = on" >/dev/null
	psqlc "$PORT" "SELECT pg_reload_conf()" >/dev/null
	sleep 1
	full=$(rpush WALG_DELTA_MAX_STEPS=3)
	assert_contains "$(cat "$T/rpush.err")" "taking a full backup: the server refused an incremental one" "remote delta over a gap in the summaries"
	[[ $full =~ ^base_[0-9A-F]{24}$ ]] || fail "after the refusal: expected a full backup, got '$full'"
	[ -n "$(find "$T/repo/basebackups_005/$full" -maxdepth 1 -name 'walc_backup_manifest*')" ] ||
		fail "$full: no walc_backup_manifest beside its metadata"
	[ -z "$(find "$T/repo/basebackups_005/$full/tar_partitions" -name '*manifest*')" ] ||
		fail "$full: a manifest inside tar_partitions (WAL-G would extract it)"
	app "UPDATE items SET v = v || '-i1' WHERE id % 20 = 0"
	bench 100
	d1=$(rpush WALG_DELTA_MAX_STEPS=3)
	[[ $d1 =~ ^base_[0-9A-F]{24}_D_${full:5:24}$ ]] || fail "expected a remote delta of $full, got '$d1': $(grep -m1 'taking a full' "$T/rpush.err")"
	assert_contains "$(cat "$T/rpush.err")" "BASE_BACKUP INCREMENTAL" "remote delta log"
	app "UPDATE items SET v = v || '-i2' WHERE id % 30 = 0; CREATE TABLE after_i1 AS SELECT g FROM generate_series(1, 500) g"
	bench 100
	d2=$(rpush WALG_DELTA_MAX_STEPS=3)
	[[ $d2 =~ ^base_[0-9A-F]{24}_D_${d1:5:24}$ ]] || fail "expected a remote delta of $d1, got '$d2'"
	out=$(grep -c '"IsIncremented":true\|"IsIncremented": true' "$T/repo/basebackups_005/$d2/files_metadata.json" || true)
	[ "$out" -ge 1 ] || fail "$d2: no file stored as an increment"
	grep -q '"DeltaCount": *2' "$T/repo/basebackups_005/${d2}_backup_stop_sentinel.json" || fail "$d2: DeltaCount is not 2"
	quiet_point incr
	fetch_to "$T/r-incr" "$d2" "$T/ts-incr"
	verify_restored "$T/r-incr" incr "${ENVS[*]}" "recovery_target = 'immediate'"
	if walg_restore "$T/r-incr-walg" "$d2" "$T/ts-incr-walg"; then
		verify_restored "$T/r-incr-walg" incr "${ENVS[*]}" "recovery_target = 'immediate'"
		out="walc and WAL-G"
	else
		out="walc (no WAL-G at $WALG)"
	fi
	log "remote chain $full <- $d1 <- $d2 restored by $out"
}

# PostgreSQL 15+: WALG_REMOTE_COMPRESSION has the server compress the stream
check_remote_compression() {
	local name m
	if [ "$MAJOR" -lt 15 ]; then
		wrun_pg "${ENVS[@]}" WALG_REMOTE_COMPRESSION=zstd PGHOST="$T" PGPORT="$PORT" -- backup-push
		[ "$W_RC" = 1 ] || fail "WALG_REMOTE_COMPRESSION on $MAJOR: $(wdesc)"
		assert_contains "$W_ERR" "server-side compression needs PostgreSQL 15 or later" "WALG_REMOTE_COMPRESSION on $MAJOR"
		not_applicable "server-side compression is 15+ (checked: walc refuses it in one line)"
	fi
	for m in zstd:level=3,workers=2 lz4; do
		dump_norm "$PORT" >"$T/dump-cmp"
		name=$(rpush WALG_REMOTE_COMPRESSION=$m)
		[[ $name =~ ^base_[0-9A-F]{24}$ ]] || fail "remote backup name: '$name'"
		grep -q "COMPRESSION '${m%%:*}'" "$T/rpush.err" || fail "no COMPRESSION '${m%%:*}' sent (see backup-push.log)"
		fetch_to "$T/r-cmp-${m%%:*}" "$name" "$T/ts-cmp-${m%%:*}"
		verify_restored "$T/r-cmp-${m%%:*}" cmp "${ENVS[*]}" "recovery_target = 'immediate'"
	done
	log "remote backups compressed by the server (zstd with workers, lz4) restored"
}

check_s3() {
	local name seg
	{ [ -n "$S3_BUCKET" ] && [ -n "${S3_ENDPOINT:-}" ]; } || fail "no S3 server given (S3_ENDPOINT, PGV_S3_BUCKET)"
	touch "$T/s3.on"
	# segments completed from now on go to RGW too, the backup's first one included
	app "INSERT INTO items SELECT g, 's3-' || g FROM generate_series(30001, 31000) g"
	dump_norm "$PORT" >"$T/dump-s3"
	name=$(push "${S3E[@]}" -- "$SRC")
	[[ $name =~ ^base_[0-9A-F]{24}$ ]] || fail "S3 backup name: '$name'"
	seg=$(archive_now)
	rm -f "$T/s3.on"
	[ ! -s "$T/log/push-s3.log" ] || ! grep -qi error "$T/log/push-s3.log" || fail "wal-push to RGW: $(grep -i -m1 error "$T/log/push-s3.log")"
	wrun "${S3E[@]}" -- backup-list
	expect_rc 0 "backup-list on RGW"
	assert_contains "$W_OUT" "$name" "backup-list on RGW"
	fetch_to "$T/r-s3" "$name" "$T/ts-s3" "${S3E[@]}"
	verify_restored "$T/r-s3" s3 "${S3E[*]}" "recovery_target = 'immediate'"
	log "backup $name to Ceph RGW, restored from it with its WAL"
}

check_standby() {
	local sport lsn name seg pid i=0
	sport=$(free_port)
	as_pg "$PGBIN/pg_basebackup" -h "$T" -p "$PORT" -U postgres -D "$T/standby" -R -X stream -c fast \
		-T "$T/ts=$T/ts-standby" >"$T/log/basebackup.log" 2>&1 || { cat "$T/log/basebackup.log" >&2; fail "pg_basebackup"; }
	pg_start "$T/standby" "$sport"
	app "UPDATE items SET v = 'standby' WHERE id <= 100"
	dump_norm "$PORT" >"$T/dump-standby"
	lsn=$(psqlc "$PORT" "SELECT pg_current_wal_lsn()")
	until [ "$(psqlc "$sport" "SELECT pg_last_wal_replay_lsn() >= '$lsn'")" = t ]; do
		i=$((i + 1))
		[ "$i" -lt 240 ] || fail "the standby did not replay up to $lsn"
		sleep 0.25
	done
	[ "$(psqlc "$sport" "SELECT pg_is_in_recovery()")" = t ] || fail "the standby is not in recovery"
	# The backup ends in a segment the primary has still to complete: the push waits until the
	# primary has archived it, saying so, and the switch below lets it finish.
	as_pg env PGDATA="$T/standby" "${ENVS[@]}" WALG_STOP_BACKUP_TIMEOUT=120s PGHOST="$T" PGPORT="$sport" \
		"$WALC_PG" backup-push "$T/standby" >/dev/null 2>"$T/log/standby-push.log" </dev/null &
	pid=$!
	BG_PIDS+=("$pid")
	i=0
	until grep -q 'waiting for the primary to archive WAL segment' "$T/log/standby-push.log"; do
		kill -0 "$pid" 2>/dev/null || fail "the standby's push ended before its WAL was archived: $(tail -n 3 "$T/log/standby-push.log")"
		i=$((i + 1))
		[ "$i" -lt 600 ] || fail "the standby's push does not say it waits for the primary"
		sleep 0.1
	done
	seg=$(archive_now)
	wait "$pid" || fail "backup-push on the standby: $(tail -n 3 "$T/log/standby-push.log")"
	name=$(sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p' "$T/log/standby-push.log" | tail -n 1)
	[[ $name =~ ^base_[0-9A-F]{24}$ ]] || fail "standby backup name: '$name'"
	pg_stop "$T/standby"
	fetch_to "$T/r-standby" "$name" "$T/ts-rstandby"
	verify_restored "$T/r-standby" standby "${ENVS[*]}" "recovery_target = 'immediate'"
	put standby "$name"
	log "backup $name taken on a streaming standby restored"
}

check_archive_module() {
	local sock=$T/walc.sock dport last n s daemon_pids
	[ "$MAJOR" -ge 15 ] || not_applicable "archive_library is PostgreSQL 15+ (walc_archive is an archive module)"
	pgv_module_install "$T/log/module.log"
	mkdir -p "$T/repo-dmn"
	pg_own "$T/repo-dmn"
	pg_init "$T/dmn" --wal-segsize=1
	pg_conf "$T/dmn" "wal_level = replica" "archive_mode = on" "archive_library = 'walc_archive'" \
		"walc_archive.socket = '$sock'" "fsync = off"
	as_pg env PGDATA="$T/dmn" WALG_FILE_PREFIX="$T/repo-dmn" WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=zstd \
		"${KEY[@]}" "$WALC_PG" daemon "$sock" >>"$T/log/daemon.log" 2>&1 &
	BG_PIDS+=($!)
	for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.05; done
	[ -S "$sock" ] || { cat "$T/log/daemon.log" >&2; fail "walc daemon did not start"; }
	mapfile -t daemon_pids < <(pgrep -f " daemon $sock" || true)
	BG_PIDS+=("${daemon_pids[@]}") # walc itself: the job is a subshell around unshare
	dport=$(free_port)
	pg_start "$T/dmn" "$dport"
	assert_eq "" "$(psqlc "$dport" "SHOW archive_command")" "archive_command with archive_library"
	psqlc "$dport" "CREATE TABLE t (v text)"
	for _ in $(seq 1 12); do
		last=$(psqlc "$dport" "INSERT INTO t SELECT md5(g::text) FROM generate_series(1, 500) g; SELECT pg_walfile_name(pg_switch_wal())")
	done
	wait_archived "$T/dmn" "$last" 120
	n=$(find "$T/repo-dmn/wal_005" -name '[0-9A-F]*.zst' | wc -l)
	[ "$n" -ge 12 ] || fail "only $n segments archived through the daemon"
	for s in "$T"/dmn/pg_wal/[0-9A-F]*; do
		[ -e "$T/dmn/pg_wal/archive_status/$(basename "$s").done" ] || continue
		wrun WALG_FILE_PREFIX="$T/repo-dmn" WALG_PG_WAL_SIZE=1 "${KEY[@]}" -- wal-fetch "$(basename "$s")" "$T/dmn-got"
		expect_rc 0 "wal-fetch $(basename "$s") from the daemon's repository"
		assert_same_file "$s" "$T/dmn-got" "segment archived by the daemon"
	done
	[ "$(psqlc "$dport" "SELECT failed_count FROM pg_stat_archiver")" = 0 ] || fail "pg_stat_archiver counts failures"
	log "$n segments archived by walc_archive through walc daemon, identical when fetched"
}

check_wal_receive() {
	local rport last s n first="" rpids
	mkdir -p "$T/repo-rcv"
	pg_own "$T/repo-rcv"
	pg_init "$T/rcv" --wal-segsize=1
	pg_conf "$T/rcv" "wal_level = replica" "archive_mode = off" "max_wal_senders = 4" \
		"max_replication_slots = 4" "fsync = off"
	rport=$(free_port)
	pg_start "$T/rcv" "$rport"
	as_pg env PGHOST="$T" PGPORT="$rport" PGUSER=postgres PGDATABASE=postgres WALG_FILE_PREFIX="$T/repo-rcv" \
		WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=zstd "${KEY[@]}" "$WALC_PG" wal-receive >>"$T/log/receive.log" 2>&1 &
	BG_PIDS+=($!)
	for _ in $(seq 1 100); do
		[ "$(psqlc "$rport" "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'walg' AND active")" = 1 ] && break
		sleep 0.1
	done
	# this version's walc only (its own copy in $T): the versions run side by side, and another's
	# wal-receive killed when this check ends would starve that version's check
	mapfile -t rpids < <(pgrep -f "^$WALC_PG wal-receive\$" || true)
	BG_PIDS+=("${rpids[@]}")
	psqlc "$rport" "CREATE TABLE t (v text)"
	for _ in $(seq 1 8); do
		last=$(psqlc "$rport" "INSERT INTO t SELECT md5(g::text) FROM generate_series(1, 500) g; SELECT pg_walfile_name(pg_switch_wal())")
		[ -n "$first" ] || first=$last
	done
	for _ in $(seq 1 600); do [ -e "$T/repo-rcv/wal_005/$last.zst" ] && break; sleep 0.1; done
	if [ ! -e "$T/repo-rcv/wal_005/$last.zst" ]; then
		# what the server sent against what walc stored tells a stalled stream from a stuck store
		cat "$T/log/receive.log" >&2
		psqlc "$rport" "SELECT pg_current_wal_lsn(), state, sent_lsn, write_lsn, flush_lsn FROM pg_stat_replication" >&2 || true
		ps -o pid,stat,wchan:20,args -p "$(printf '%s,' "${rpids[@]}" 0)" >&2 || true
		fail "wal-receive did not store $last"
	fi
	n=0
	for s in "$T"/rcv/pg_wal/[0-9A-F]*; do
		s=$(basename "$s")
		if ! is_segment_name "$s" || [[ $s < $first ]] || [[ $s > $last ]]; then continue; fi
		wrun WALG_FILE_PREFIX="$T/repo-rcv" WALG_PG_WAL_SIZE=1 "${KEY[@]}" -- wal-fetch "$s" "$T/rcv-got"
		expect_rc 0 "wal-fetch $s from wal-receive's repository"
		assert_same_file "$T/rcv/pg_wal/$s" "$T/rcv-got" "segment stored by wal-receive"
		n=$((n + 1))
	done
	[ "$n" -ge 8 ] || fail "only $n segments compared"
	log "$n segments streamed by wal-receive through slot walg, identical when fetched"
}

check_wal_verify() {
	local seg
	seg=$(archive_now)
	wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- wal-verify integrity timeline
	expect_rc 0 "wal-verify integrity timeline"
	assert_contains "$W_OUT" "integrity check status: OK" "wal-verify integrity"
	assert_contains "$W_OUT" "timeline check status: OK" "wal-verify timeline"
	log "wal-verify: $(printf '%s\n' "$W_OUT" | grep -c 'status: OK') checks OK"
}

check_retention() {
	local before after keep b seg old left
	mapfile -t before < <(backup_names)
	[ "${#before[@]}" -ge 2 ] || fail "retention needs 2 backups or more, the repository has ${#before[@]}"
	keep=${before[-1]}
	[[ $keep =~ ^base_[0-9A-F]{24}$ ]] || fail "the newest backup $keep should be a full one"
	# retention keeps the newest verified backup whatever the count: backup-verify proved the
	# delta chain above, so the newest is proven too and then kept alone
	wrun "${ENVS[@]}" -- backup-verify "$keep"
	expect_rc 0 "backup-verify $keep (stdout: $(printf "%s" "$W_OUT" | head -c 600))"
	wrun "${ENVS[@]}" -- delete retain 1 --confirm
	expect_rc 0 "delete retain 1 --confirm"
	mapfile -t after < <(backup_names)
	assert_eq "$keep" "${after[*]}" "backups left by delete retain 1"
	# objects, that is: the file storage leaves empty folders behind, as a bucket has none
	for b in "${before[@]}"; do
		[ "$b" != "$keep" ] || continue
		left=$(find "$T/repo/basebackups_005" -type f \( -path "*/$b/*" -o -name "${b}_backup_stop_sentinel.json" \) | head -n 3)
		[ -z "$left" ] || fail "objects of the deleted backup $b are left: $left"
	done
	seg=${keep:5:24}
	old=$(find "$T/repo/wal_005" -name '[0-9A-F]*' -printf '%f\n' | cut -c1-24 | sort | awk -v s="$seg" '$1 < s' | head -n 1)
	[ -z "$old" ] || fail "WAL $old, older than the kept backup's $seg, is still there"
	wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- wal-verify integrity
	expect_rc 0 "wal-verify integrity after delete"
	assert_contains "$W_OUT" "integrity check status: OK" "wal-verify integrity after delete"
	quiet_point final
	fetch_to "$T/r-final" LATEST "$T/ts-final"
	verify_restored "$T/r-final" final "${ENVS[*]}"
	log "delete retain 1 kept $keep of ${#before[@]} backups and its WAL; it restores to the end of the archive"
}

# ------------------------------------------------------------------------------------------
# Running them
# ------------------------------------------------------------------------------------------

record() { printf '%s\t%s\t%s\n' "$1" "$2" "${3:-}" >>"$RES"; }

check_exit() {
	local rc=$? d p
	set +e
	trap '' INT TERM
	rm -f "$T/s3.on" # the s3 check's, should it have failed half-way
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for d in "${PG_RUNNING[@]}"; do
		[ -f "$d/postmaster.pid" ] && as_pg "$PGBIN/pg_ctl" -D "$d" -m immediate -w -t 30 stop >/dev/null 2>&1
	done
	exit "$rc"
}

# run_check NAME NEEDS...: check_NAME in a subshell, once every check in NEEDS has passed
# (PGV_ONLY="setup remote ...": only those checks, for working on a few)
run_check() {
	local name=$1 fn=check_${1//-/_} need rc start=$SECONDS why
	shift
	case " ${PGV_ONLY:-$name} " in *" $name "*) ;; *) return 0 ;; esac
	for need in "$@"; do
		if ! grep -q "^$need	PASS" "$RES"; then
			record "$name" FAIL "not run: needs $need"
			return 0
		fi
	done
	rm -f "$T/.na"
	set +e
	(
		set -e
		PG_RUNNING=()
		BG_PIDS=()
		trap check_exit EXIT
		trap 'exit 143' TERM
		trap 'exit 130' INT
		"$fn"
	) >"$OUT/$name.log" 2>&1 </dev/null
	rc=$?
	set -e
	case $rc in
	0) record "$name" PASS "$((SECONDS - start))s" ;;
	3) record "$name" n/a "$(cat "$T/.na")" ;;
	130 | 143) record "$name" FAIL "interrupted"; exit "$rc" ;;
	*)
		why=$(grep -m1 '^FAIL: ' "$OUT/$name.log" | cut -c7- | tr '\t' ' ' | cut -c1-400)
		record "$name" FAIL "${why:-exit $rc, see $name.log}"
		;;
	esac
	printf '%-15s %s\n' "$name" "$(tail -n 1 "$RES" | cut -f2-)"
}

log "PostgreSQL $MAJOR (${PGV_ROOT:-host}) in $T, walc $("$WALC" --version 2>&1 | head -n 1)"
run_check setup
run_check local-full setup
run_check local-delta local-full
run_check fetch-chain local-delta
run_check tablespace fetch-chain
run_check pitr local-delta
run_check delta-restore pitr
run_check backup-verify local-delta
run_check encryption local-full
run_check remote setup
run_check next-major setup
run_check remote-incremental setup
run_check remote-compression setup
run_check s3 setup
run_check standby setup
run_check archive-module
run_check wal-receive
run_check wal-verify setup
run_check retention setup
