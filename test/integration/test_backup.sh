#!/usr/bin/env bash
# Base backups under load and quiet, in 5 repositories, restored and checked.
#
# One source cluster (--data-checksums, 1 MiB WAL segments, autovacuum on) archives every WAL
# file into 5 repositories in turn: one per codec (lz4, zstd, brotli, lzma, none), two of them
# with a libsodium key file (base64 and hex transforms). Every codec with and without a key is
# test_s3_backup_matrix's (ten repositories here as well made this the suite's longest test,
# for the same backup and restore code). A tablespace outside PGDATA holds a
# table and its indexes; pgbench -i -s 3 fills the default tablespace.
#   Phase A: while pgbench writes (tpcb-like plus inserts/updates in the tablespace table),
#            walc backup-push into every repository (some with WALG_UPLOAD_DISK_CONCURRENCY=2,
#            some with a small WALG_TAR_SIZE_THRESHOLD so there are several part_NNN objects).
#   Phase B: pgbench stopped, CHECKPOINT, the source's normalized pg_dumpall taken, then
#            backup-push into every repository again (now the LATEST).
# Checks per repository:
#   - objects named as WAL-G names them (extension per codec, none = no extension), pg_control
#     and backup_label tars decode with the Debian CLI tools (after independent decryption),
#     the sentinel is not older than any other object of its backup;
#   - backup-list lists exactly the 2 backups, oldest first, `tail -n 1 | cut -f 1 -d " "` is
#     the phase-B backup; backup-list --json is a JSON array of those 2;
#   - backup-fetch LATEST (tablespace relocated with --restore-spec, restored at its original
#     location with --original-tablespaces, or inside DEST at pg_tblspc/OID with neither, by
#     repository and phase), recovery through walc wal-fetch to
#     'immediate', promotion: the normalized dump equals the quiet source's, and amcheck's
#     bt_index_check (heapallindexed) passes on every btree index;
#   - the phase-A backup restored by name (from backup-list) recovers to 'immediate' and
#     passes the same amcheck.
# shellcheck source=lib.sh
# integration: long
. "$(dirname "$0")/lib.sh"
it_setup backup
START=$SECONDS

CONFIGS=(lz4 zstd-base64 brotli-hex lzma none)
# per configuration: upload disk concurrency and tar size threshold (empty = walc's default)
declare -A DISKCONC=([zstd-base64]=2 [brotli-hex]=2 [lzma]=2)
declare -A TARSIZE=([lz4]=8000000 [none]=8000000 [zstd-base64]=8000000)
# where each repository's restores put the tablespace, phase B then phase A: spec (relocated
# with --restore-spec), original (--original-tablespaces) or dest (DEST/pg_tblspc/OID)
declare -A MODES=([lz4]="spec dest" [zstd-base64]="original spec" [brotli-hex]="spec original"
	[lzma]="dest spec" [none]="spec dest")


# ---- keys and configurations ----------------------------------------------------------------
mkdir -p "$T/conf" "$T/work"
head -c 32 /dev/urandom >"$T/key.bin"
od -An -v -tx1 "$T/key.bin" | tr -d ' \n' >"$T/key.hex"
echo >>"$T/key.hex"
base64 -w0 "$T/key.bin" >"$T/key.base64"
echo >>"$T/key.base64"
chmod 600 "$T/key.hex" "$T/key.base64"

for c in "${CONFIGS[@]}"; do
	{
		echo "WALG_FILE_PREFIX=$T/repo-$c"
		echo "WALG_COMPRESSION_METHOD=$(codec_of "$c")"
		echo "WALG_PG_WAL_SIZE=1"
		tr=$(transform_of "$c")
		if [ -n "$tr" ]; then
			echo "WALG_LIBSODIUM_KEY_PATH=$T/key.$tr"
			echo "WALG_LIBSODIUM_KEY_TRANSFORM=$tr"
		fi
	} >"$T/conf/$c.env"
	mkdir -p "$T/repo-$c"
	matrix_wrapper "$c"
done

# wal-push uploads further .ready files in the background and leaves a marker for each under
# $PGDATA/pg_wal/walg_data/, which the next wal-push of that file takes as "already archived"
# (WAL-G's design). The markers don't say which repository got the file, so each configuration
# gets its own PGDATA for them; the WAL path (%p, relative to the data directory) is what
# locates pg_wal/archive_status.
mkdir -p "$T/markers"
# archive_command: wal-push %p with every configuration in turn, then keep a golden copy.
matrix_push_all "${CONFIGS[@]}"

# ---- source cluster -------------------------------------------------------------------------
SRC=$T/src
TS=$T/ts
PORT=$(free_port)
mkdir -p "$TS"
pg_init "$SRC" --wal-segsize=1 --data-checksums
# the initial load is not archived (the backups need WAL from their own start only); walc
# archives from the restart below on
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_command = '/bin/true'" \
	"max_wal_size = 256MB" "checkpoint_timeout = 1h" "fsync = off" "autovacuum_naptime = 2s" \
	"wal_compression = lz4"
pg_own "$T"
pg_start "$SRC" "$PORT"
psqlc "$PORT" "CREATE TABLESPACE ts1 LOCATION '$TS'"
TSOID=$(psqlc "$PORT" "SELECT oid FROM pg_tablespace WHERE spcname = 'ts1'")
psqlc "$PORT" "CREATE TABLE tst (id serial PRIMARY KEY USING INDEX TABLESPACE ts1, v text, n int) TABLESPACE ts1;
	CREATE INDEX tst_v ON tst (v) TABLESPACE ts1;
	INSERT INTO tst (v, n) SELECT md5(g::text), 0 FROM generate_series(1, 20000) g"
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -i -s 3 -q postgres >"$T/log/pgbench-init.log" 2>&1 ||
	{ cat "$T/log/pgbench-init.log" >&2; fail "pgbench -i"; }
cat >"$T/ts.sql" <<'EOF'
\set id random(1, 20000)
UPDATE tst SET v = md5(v), n = n + 1 WHERE id = :id;
INSERT INTO tst (v, n) VALUES (md5(random()::text), 0);
EOF
pg_own "$T/ts.sql"
psqlc "$PORT" "CHECKPOINT"
pg_stop "$SRC"
pg_conf "$SRC" "archive_command = '$T/push-all.sh %p'"
pg_start "$SRC" "$PORT"
log "source up on port $PORT (tablespace ts1 oid $TSOID at $TS); $((SECONDS - START))s"

# backup_names REPO: the backups with a sentinel, sorted
backup_names() {
	[ -d "$1/basebackups_005" ] || return 0
	find "$1/basebackups_005" -maxdepth 1 -name '*_backup_stop_sentinel.json' -printf '%f\n' 2>/dev/null |
		sed 's/_backup_stop_sentinel\.json$//' | sort
}

# push CONFIG: backup-push the source into CONFIG's repository; prints the new backup's name
declare -A NAME_A NAME_B
push() {
	local c=$1 envs before after new
	mapfile -t envs <"$T/conf/$c.env"
	envs+=(PGHOST="$T" PGPORT="$PORT")
	[ -n "${DISKCONC[$c]:-}" ] && envs+=(WALG_UPLOAD_DISK_CONCURRENCY="${DISKCONC[$c]}")
	[ -n "${TARSIZE[$c]:-}" ] && envs+=(WALG_TAR_SIZE_THRESHOLD="${TARSIZE[$c]}")
	before=$(backup_names "$T/repo-$c")
	wrun_pg "${envs[@]}" -- backup-push "$SRC"
	printf '%s\n' "$W_ERR" >"$T/log/backup-push-$c-$2.log"
	expect_rc 0 "[$c] backup-push (phase $2)"
	after=$(backup_names "$T/repo-$c")
	new=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after"))
	[ "$(nlines "$new")" = 1 ] || fail "[$c] backup-push (phase $2) made $(nlines "$new") new sentinels: $new"
	[[ $new =~ ^base_[0-9A-F]{24}$ ]] || fail "[$c] backup name '$new'"
	if [ "$2" = A ]; then NAME_A[$c]=$new; else NAME_B[$c]=$new; fi
}

# ---- phase A: under load --------------------------------------------------------------------
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -c 2 -T 900 -R "${PGBENCH_RATE:-25}" \
	-b tpcb-like@3 -f "$T/ts.sql@1" postgres >"$T/log/pgbench-run.log" 2>&1 &
PGBENCH=$!
BG_PIDS+=("$PGBENCH")
sleep 2
h0=$(psqlc "$PORT" "SELECT count(*) FROM pgbench_history")
for c in "${CONFIGS[@]}"; do
	t0=$SECONDS
	push "$c" A
	kill -0 "$PGBENCH" 2>/dev/null || { cat "$T/log/pgbench-run.log" >&2; fail "pgbench stopped during phase A"; }
	[ ! -e "$T/archive-failed" ] || { cat "$T/archive-failed" >&2; fail "archive_command failed"; }
	log "phase A [$c] ${NAME_A[$c]} ($((SECONDS - t0))s)"
done
h1=$(psqlc "$PORT" "SELECT count(*) FROM pgbench_history")
# stop pgbench by ending its sessions (a signal to runuser would not reach it)
psqlc "$PORT" "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgbench'" >/dev/null
wait "$PGBENCH" 2>/dev/null || true
grep -E '^(tps|number of (transactions actually processed|failed))' "$T/log/pgbench-run.log" || true
[ "$h1" -gt $((h0 + 25)) ] || fail "pgbench wrote only $((h1 - h0)) transactions during phase A"
log "phase A done: $((h1 - h0)) pgbench transactions during the backups; $((SECONDS - START))s"

# ---- phase B: quiet -------------------------------------------------------------------------
psqlc "$PORT" "CHECKPOINT"
dump_norm "$PORT" >"$T/source.sql"
grep -q 'pgbench_accounts' "$T/source.sql" || fail "source dump has no pgbench data"
grep -q "TABLESPACE ts1" "$T/source.sql" || grep -q "tablespace = 'ts1'" "$T/source.sql" ||
	fail "source dump does not mention tablespace ts1"
for c in "${CONFIGS[@]}"; do
	t0=$SECONDS
	push "$c" B
	log "phase B [$c] ${NAME_B[$c]} ($((SECONDS - t0))s)"
done
# the source must not have changed during phase B
dump_norm "$PORT" >"$T/work/source-after.sql"
cmp -s "$T/source.sql" "$T/work/source-after.sql" || fail "the source changed during phase B"
seg=$(switch_wal "$PORT")
wait_archived "$SRC" "$seg" 180 "$T/archive-failed"
pg_stop "$SRC"
[ ! -e "$T/archive-failed" ] || { cat "$T/archive-failed" >&2; fail "archive_command failed"; }
assert_no_sanitizer_reports "$T"/log/*.log "$SRC.log"
# the original tablespace location must be free for the restores with --original-tablespaces
mv "$TS" "$T/ts-source"
log "phase B done; $((SECONDS - START))s"

# ---- repository layout and backup-list ------------------------------------------------------
check_layout() { # CONFIG NAME
	local c=$1 name=$2 codec tr ext repo b f parts=0 smt newer
	codec=$(codec_of "$c")
	tr=$(transform_of "$c")
	ext=$(ext_of "$codec")
	repo=$T/repo-$c
	b=$repo/basebackups_005/$name
	[ -f "$b/metadata.json" ] || fail "[$c] $name: metadata.json missing"
	[ -f "$b/files_metadata.json" ] || fail "[$c] $name: files_metadata.json missing"
	"$PY" -c 'import json,sys; [json.load(open(p)) for p in sys.argv[1:]]' \
		"$b/metadata.json" "$b/files_metadata.json" "$b"_backup_stop_sentinel.json ||
		fail "[$c] $name: metadata.json, files_metadata.json or the sentinel is not JSON"
	for f in "$b"/tar_partitions/*; do
		f=${f##*/}
		case $f in
		pg_control.tar"$ext" | backup_label.tar"$ext") ;;
		part_[0-9][0-9][0-9]*.tar"$ext")
			[[ ${f%.tar"$ext"} =~ ^part_[0-9]{3,}$ ]] || fail "[$c] $name: object name $f"
			parts=$((parts + 1))
			;;
		*) fail "[$c] $name: unexpected object tar_partitions/$f (codec $codec wants '.tar$ext')" ;;
		esac
	done
	[ "$parts" -ge 1 ] || fail "[$c] $name: no part_NNN.tar$ext"
	if [ "$codec" = none ] && [ -z "$tr" ] && [ -n "${TARSIZE[$c]:-}" ] && [ -z "${DISKCONC[$c]:-}" ]; then
		# one packer: every part but the last closes on the first file that takes its
		# content past the threshold (WAL-G's rollover rule)
		local last sum lastsz
		last=$(find "$b/tar_partitions" -name 'part_*' -printf '%f\n' | sort -V | tail -n 1)
		for f in "$b"/tar_partitions/part_*; do
			[ "${f##*/}" = "$last" ] && continue
			read -r sum lastsz < <(tar -tvf "$f" 2>/dev/null | awk '$1 ~ /^-/ { s += $3; l = $3 } END { print s + 0, l + 0 }')
			if [ "$sum" -le "${TARSIZE[$c]}" ] || [ $((sum - lastsz)) -gt "${TARSIZE[$c]}" ]; then
				fail "[$c] $name: ${f##*/} holds $sum bytes (last member $lastsz), threshold ${TARSIZE[$c]}"
			fi
		done
	fi
	if [ -n "${TARSIZE[$c]:-}" ]; then
		[ "$parts" -ge 3 ] || fail "[$c] $name: WALG_TAR_SIZE_THRESHOLD=${TARSIZE[$c]} but only $parts part(s)"
	fi
	for f in pg_control backup_label; do
		local obj=$b/tar_partitions/$f.tar$ext
		[ -f "$obj" ] || fail "[$c] $name: $f.tar$ext missing"
		if [ -n "$tr" ]; then
			sodium_decrypt "$T/key.$tr" "$tr" <"$obj" >"$T/work/dec" || fail "[$c] $obj: decryption"
		else
			cp "$obj" "$T/work/dec"
		fi
		decode_cli "$codec" <"$T/work/dec" >"$T/work/plain.tar" || fail "[$c] $obj: $codec CLI cannot decode it"
		tar -tf "$T/work/plain.tar" >"$T/work/members" 2>/dev/null || fail "[$c] $obj: not a tar"
		if [ $f = pg_control ]; then
			assert_eq "/global/pg_control" "$(cat "$T/work/members")" "[$c] $name: members of $f.tar$ext"
		else
			assert_eq "backup_label tablespace_map" "$(sort "$T/work/members" | tr '\n' ' ' | sed 's/ $//')" \
				"[$c] $name: members of $f.tar$ext"
		fi
	done
	# every WAL segment the backup needs is in the repository
	local seg missing=""
	for seg in $("$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))
seg = 1 << 20
for n in range(s["LSN"] // seg, (s["FinishLSN"] - 1) // seg + 1):
    print("%08X%08X%08X" % (1, n // 4096, n % 4096))' "$b"_backup_stop_sentinel.json); do
		[ -f "$repo/wal_005/$seg$ext" ] || missing="$missing $seg$ext"
	done
	[ -z "$missing" ] || fail "[$c] $name: WAL needed by the backup missing from wal_005/:$missing"
	# the sentinel is written last: no object of the backup is newer
	smt=$(find "$repo/basebackups_005" -maxdepth 1 -name "${name}_backup_stop_sentinel.json" -printf '%T@\n')
	newer=$(find "$b" -type f -printf '%T@ %P\n' | awk -v s="$smt" '$1 > s')
	[ -z "$newer" ] || fail "[$c] $name: objects newer than the sentinel ($smt): $newer"
	PARTS=$parts
}

for c in "${CONFIGS[@]}"; do
	mapfile -t envs <"$T/conf/$c.env"
	check_layout "$c" "${NAME_A[$c]}"
	pa=$PARTS
	check_layout "$c" "${NAME_B[$c]}"
	pb=$PARTS
	[ "${NAME_A[$c]}" != "${NAME_B[$c]}" ] || fail "[$c] both backups are named ${NAME_A[$c]}"
	wrun "${envs[@]}" -- backup-list
	expect_rc 0 "[$c] backup-list"
	rows=$(printf '%s\n' "$W_OUT" | tail -n +2)
	assert_eq 2 "$(nlines "$rows")" "[$c] backup-list rows"
	assert_match "$(printf '%s\n' "$W_OUT" | head -n 1)" '^backup_name +modified +wal_file_name +storage_name$' \
		"[$c] backup-list header"
	assert_eq "${NAME_A[$c]}" "$(printf '%s\n' "$rows" | head -n 1 | cut -f 1 -d ' ')" "[$c] backup-list first row"
	assert_eq "${NAME_B[$c]}" "$(printf '%s\n' "$W_OUT" | tail -n 1 | cut -f 1 -d ' ')" \
		"[$c] backup-list | tail -n 1 | cut -f 1 -d ' '"
	wrun "${envs[@]}" -- backup-list --json
	expect_rc 0 "[$c] backup-list --json"
	got=$(printf '%s' "$W_OUT" | "$PY" -c '
import json, sys
a = json.load(sys.stdin)
assert isinstance(a, list), "not an array"
print(" ".join(e["backup_name"] for e in a))') || fail "[$c] backup-list --json does not parse: $W_OUT"
	assert_eq "${NAME_A[$c]} ${NAME_B[$c]}" "$got" "[$c] backup-list --json names"
	ok "layout [$c]: ${NAME_A[$c]} ($pa parts), ${NAME_B[$c]} ($pb parts)"
done

# ---- restores -------------------------------------------------------------------------------
AMCHECK_SQL="SELECT count(bt_index_check(c.oid, true)) FROM pg_index i
	JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
	WHERE a.amname = 'btree' AND c.relpersistence <> 't' AND i.indisready AND i.indisvalid"

# amcheck PORT WHAT: bt_index_check(heapallindexed) on every btree index of every database
amcheck() {
	local port=$1 what=$2 db n total=0 out
	for db in $(psqlc "$port" "SELECT datname FROM pg_database WHERE datallowconn ORDER BY 1"); do
		out=$(as_pg "$PGBIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$T" -p "$port" -U postgres -d "$db" \
			-c "CREATE EXTENSION IF NOT EXISTS amcheck" -c "$AMCHECK_SQL" 2>&1) ||
			fail "$what: amcheck failed in database $db: $out"
		n=$(printf '%s\n' "$out" | tail -n 1)
		if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -eq 0 ]; then fail "$what: amcheck in $db: $out"; fi
		total=$((total + n))
	done
	# the tablespace's indexes and pgbench's are among them; the data is there
	n=$(psqlc "$port" "SELECT count(*) FROM pg_class c JOIN pg_tablespace t ON t.oid = c.reltablespace
		WHERE t.spcname = 'ts1' AND c.relname IN ('tst_pkey', 'tst_v')")
	assert_eq 2 "$n" "$what: indexes in tablespace ts1"
	n=$(psqlc "$port" "SELECT count(*) FROM pgbench_accounts")
	assert_eq 300000 "$n" "$what: pgbench_accounts rows"
	psqlc "$port" "SELECT count(*) FROM tst" >/dev/null || fail "$what: tst unreadable"
	NIDX=$total
}

# restore CONFIG NAME spec|original|dest A|B
restore() {
	local c=$1 name=$2 mode=$3 phase=$4 R=$T/r-$1-$4 tsdir envs args=() what
	what="[$c] phase $phase $name ($mode)"
	mapfile -t envs <"$T/conf/$c.env"
	if [ "$mode" = spec ]; then
		tsdir=$T/rts-$c-$phase
		cat >"$T/work/spec.json" <<EOF
{"base_prefix": "$R", "tablespaces": ["$TSOID"], "$TSOID": {"loc": "$tsdir", "link": "pg_tblspc/$TSOID"}}
EOF
		args=(--restore-spec "$T/work/spec.json")
	elif [ "$mode" = original ]; then
		tsdir=$TS
		rm -rf "$TS"
		args=(--original-tablespaces)
	else
		tsdir=$R/pg_tblspc/$TSOID
	fi
	wrun "${envs[@]}" -- backup-fetch "$R" "$name" "${args[@]}"
	expect_rc 0 "$what: backup-fetch"
	# each level's progress ends with a line of what it read and wrote
	assert_match "$W_ERR" "backup-fetch base_[0-9A-F_D]+: [0-9.]+ MiB of [0-9.]+ MiB \(100%\), [1-9][0-9]* files, [0-9.]+ MiB/s" \
		"$what: backup-fetch's progress"
	if [ "$mode" = dest ]; then
		if [ ! -d "$tsdir" ] || [ -L "$tsdir" ]; then fail "$what: pg_tblspc/$TSOID is not a directory"; fi
		grep -qx 'allow_in_place_tablespaces = on' "$R/postgresql.auto.conf" ||
			fail "$what: no allow_in_place_tablespaces in postgresql.auto.conf"
	else
		[ -L "$R/pg_tblspc/$TSOID" ] || fail "$what: pg_tblspc/$TSOID is not a link"
		assert_eq "$tsdir" "$(readlink "$R/pg_tblspc/$TSOID")" "$what: tablespace link"
	fi
	[ -n "$(find "$tsdir" -type f -name '[0-9]*' | head -n 1)" ] || fail "$what: no relation files in $tsdir"
	assert_absent "$R/tablespace_map" "$what: tablespace_map"
	[ "$mode" = original ] || assert_absent "$TS" "$what: original tablespace location"
	[ -f "$R/global/pg_control" ] || fail "$what: global/pg_control missing"
	[ -f "$R/backup_label" ] || fail "$what: backup_label missing"
	pg_own "$tsdir"
	RECOVER_FETCH=$T/conf/$c.sh recover_conf "$R" ""
	recovered_start "$R"
	grep -q 'recovery stopping after reaching consistency' "$R.log" ||
		fail "$what: recovery did not stop at 'immediate' (see $R.log)"
	[ "$phase" != B ] || assert_dump_eq "$T/source.sql" "$RPORT" "$what (the quiet source)"
	amcheck "$RPORT" "$what"
	pg_stop "$R"
	assert_no_sanitizer_reports "$R.log"
	rm -rf "$R" "$R.log" "$tsdir"
}

for c in "${CONFIGS[@]}"; do
	t0=$SECONDS
	read -r mb ma <<<"${MODES[$c]}"
	restore "$c" LATEST "$mb" B
	nb=$NIDX
	restore "$c" "${NAME_A[$c]}" "$ma" A
	na=$NIDX
	ok "[$c] LATEST ($mb): dump equal, $nb btree indexes ok; ${NAME_A[$c]} under load ($ma): $na btree indexes ok ($((SECONDS - t0))s)"
done
log "all done in $((SECONDS - START))s"
