#!/usr/bin/env bash
# walc copy (issue 44 §2, acceptance 2): a file repository (zstd, libsodium) holding a full
# backup, a delta on it and their WAL, copied into Ceph RGW by WAL-G JSON configuration files
# that carry no key.
#   A. The copy is killed (SIGKILL) half-way: the target lists no backup (sentinels go last)
#      and holds some objects.
#   B. The rerun copies exactly what was missing: its PUT requests (walc's DEVEL log) are the
#      objects the target lacked, each checked after its copy; a third run PUTs nothing.
#   C. The copy lists both backups and restores: the delta's chain recovered through walc
#      wal-fetch, and through WAL-G v3.0.9 (when present), to the last archived segment,
#      pg_dumpall equal to the source's.
#   D. Copied again within RGW (another prefix): the store copies (CopyObject), and
#      backup-verify --wal proves that copy whole.
#   E. A target object of another size is an error before anything is copied.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup copy
START=$SECONDS
walg_optional

s3_rgw_start
s3_mb walc
head -c 32 /dev/urandom | od -An -v -tx1 | tr -d ' \n' >"$T/key.hex"
chmod 644 "$T/key.hex"
KEYS=(WALG_LIBSODIUM_KEY_PATH="$T/key.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex)
pitr_source WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=1 "${KEYS[@]}"
pgbench_init "$PORT" 2
load() {
	as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -U postgres -n -t "$1" -c 2 postgres >>"$T/log/pgbench.log" 2>&1 ||
		fail "pgbench"
}
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "full backup"
load 2000
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "delta backup"
DELTA=$(sed -n 's/.*Wrote backup with name \([^ ]*\).*/\1/p' <<<"$W_ERR")
grep -q '"DeltaFrom"' "$R/basebackups_005/${DELTA}_backup_stop_sentinel.json" || fail "$DELTA is not a delta"
load 1000
FINAL=$(switch_wal "$PORT")
wait_archived "$SRC" "$FINAL" 120
dump_norm "$PORT" >"$T/src.dump"
pg_stop "$SRC"
n_src=$(find "$R" -type f | wc -l)
log "source: full + delta ($DELTA), $n_src objects; $((SECONDS - START))s"

cat >"$T/from.json" <<EOF
{"WALG_FILE_PREFIX": "$R", "WALG_COMPRESSION_METHOD": "zstd"}
EOF
to_conf() {
	cat >"$T/$1.json" <<EOF
{"WALG_S3_PREFIX": "s3://walc/$1", "AWS_ENDPOINT": "$S3_ENDPOINT", "AWS_S3_FORCE_PATH_STYLE": "true",
 "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "$AWS_ACCESS_KEY_ID",
 "AWS_SECRET_ACCESS_KEY": "$AWS_SECRET_ACCESS_KEY"}
EOF
	chmod 644 "$T/$1.json"
}
to_conf copy
rgw_count() { awsc s3 ls --recursive "s3://walc/$1/" | wc -l; }
puts() { grep -c 'request: PUT .*(attempt 1,' "$1" || true; }
COPY=(copy --from "$T/from.json" --to "$T/copy.json" --with-history)

# A. killed half-way (paced, one object at a time)
WALG_NETWORK_RATE_LIMIT=4000000 WALG_UPLOAD_CONCURRENCY=1 WALG_LOG_LEVEL=DEVEL \
	"$WALC" "${COPY[@]}" 2>"$T/log/copy1.log" &
cp1=$!
BG_PIDS+=("$cp1")
for _ in $(seq 1 400); do
	[ "$(grep -c '^DEBUG.*copied ' "$T/log/copy1.log" 2>/dev/null || true)" -ge 10 ] && break
	kill -0 "$cp1" 2>/dev/null || break
	sleep 0.05
done
kill -KILL "$cp1" 2>/dev/null || fail "the copy ended before it could be killed (see $T/log/copy1.log)"
wait "$cp1" 2>/dev/null || true
grep -q 'objects (.*) copied' "$T/log/copy1.log" && fail "the first copy finished before it was killed"
K=$(rgw_count copy)
[ "$K" -gt 0 ] || fail "nothing was copied before the kill"
wrun WALG_CONFIG_PATH="$T/copy.json" -- backup-list
expect_rc 0 "backup-list of the interrupted copy"
assert_not_contains "$W_OUT" "base_" "the interrupted copy lists no backup ($W_OUT)"
ok "copy killed after $K objects: the target lists no backup; $((SECONDS - START))s"

# B. the rerun copies what is missing, and only that
wrun WALG_LOG_LEVEL=DEVEL -- "${COPY[@]}"
expect_rc 0 "the copy's rerun"
printf '%s\n' "$W_ERR" >"$T/log/copy2.log"
N=$(rgw_count copy)
assert_eq $((N - K)) "$(puts "$T/log/copy2.log")" "PUTs of the rerun (objects the target lacked)"
assert_match "$W_ERR" "$((N - K)) objects \\([0-9.]+ MiB\\) to copy" "the rerun's plan"
assert_contains "$W_ERR" "$K already in" "the rerun counts what the target held"
wrun WALG_LOG_LEVEL=DEVEL -- "${COPY[@]}"
expect_rc 0 "a third copy"
printf '%s\n' "$W_ERR" >"$T/log/copy3.log"
assert_eq 0 "$(puts "$T/log/copy3.log")" "PUTs of a copy with nothing missing"
assert_eq "$N" "$(rgw_count copy)" "objects after the third copy"
ok "the rerun PUT the $((N - K)) missing objects of $N, a third run none; $((SECONDS - START))s"

# C. the copy restores, with walc and with WAL-G
wrun WALG_CONFIG_PATH="$T/copy.json" -- backup-list
expect_rc 0 "backup-list of the copy"
assert_eq 2 "$(grep -c '^base_' <<<"$W_OUT")" "backups listed in the copy ($W_OUT)"
CE=(WALG_CONFIG_PATH="$T/copy.json" "${KEYS[@]}")
restore_start "$T/r1" LATEST "${CE[@]}" -- "recovery_target_timeline = 'latest'"
assert_dump_eq "$T/src.dump" "$RPORT" "the delta restored from the copy by walc"
pg_stop "$T/r1"
grep -q "restored log file \"$FINAL\" from archive" "$T/r1.log" || fail "walc's recovery did not reach $FINAL"
if [ -x "$WALG" ]; then
	cp "$WALG" "$T/bin/wal-g"
	pg_own "$T/bin/wal-g"
	GE=(WALG_CONFIG_PATH="$T/copy.json" "${KEYS[@]}")
	as_pg env "${GE[@]}" "$T/bin/wal-g" backup-fetch "$T/r2" LATEST >"$T/log/walg-fetch.log" 2>&1 ||
		{ cat "$T/log/walg-fetch.log" >&2; fail "WAL-G backup-fetch from the copy"; }
	RECOVER_FETCH="env ${GE[*]} $T/bin/wal-g" recover_conf "$T/r2" "" "recovery_target_timeline = 'latest'"
	recovered_start "$T/r2"
	assert_dump_eq "$T/src.dump" "$RPORT" "the delta restored from the copy by WAL-G"
	pg_stop "$T/r2"
	grep -q "restored log file \"$FINAL\" from archive" "$T/r2.log" || fail "WAL-G's recovery did not reach $FINAL"
	who="walc and WAL-G v3.0.9"
else
	who="walc (no WAL-G binary at $WALG)"
fi
ok "the copy restores with $who; $((SECONDS - START))s"

# D. inside one endpoint the store copies
to_conf copy2
wrun -- copy --from "$T/copy.json" --to "$T/copy2.json" --with-history
expect_rc 0 "copy within RGW"
assert_contains "$W_ERR" "copied (inside the store)" "copy within RGW"
assert_eq "$N" "$(rgw_count copy2)" "objects of the copy within RGW"
wrun WALG_CONFIG_PATH="$T/copy2.json" WALG_PG_WAL_SIZE=1 "${KEYS[@]}" -- backup-verify LATEST --wal
expect_rc 0 "backup-verify --wal of the copy within RGW ($W_OUT)"
ok "copied inside RGW (CopyObject), backup-verify --wal OK"

# E. a conflicting object stops the copy before it starts
seg=$(awsc s3 ls "s3://walc/copy2/wal_005/" | awk '/\.zst$/ {print $4}' | head -n 1)
awsc s3 rm "s3://walc/copy2/basebackups_005/${DELTA}_backup_stop_sentinel.json" >/dev/null
printf 'other' | awsc s3 cp - "s3://walc/copy2/wal_005/$seg" >/dev/null
wrun -- copy --from "$T/copy.json" --to "$T/copy2.json" --with-history
expect_rc 1 "copy onto a conflicting object"
assert_contains "$W_ERR" "wal_005/$seg in s3://walc/copy2 has 5 bytes" "the conflict is named"
awsc s3api head-object --bucket walc --key "copy2/basebackups_005/${DELTA}_backup_stop_sentinel.json" \
	>/dev/null 2>&1 && fail "the conflicting copy still wrote the sentinel"
ok "a conflicting object is refused before anything is copied; $((SECONDS - START))s"
