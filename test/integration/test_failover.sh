#!/usr/bin/env bash
# Failover storages (issue 44 §1, acceptance 1): the main storage on Ceph RGW, a failover
# storage "local" on the file system, in one WAL-G JSON configuration file that walc and WAL-G
# v3.0.9 both read. A cluster (1 MiB segments) archives through walc wal-push under pgbench;
# backup B1 goes to RGW.
#   A. RGW killed mid-archiving: wal-push goes on into "local" (no segment lost: every one from
#      B1's start to the end is in one storage or the other); backup-push writes B2 there;
#      backup-list lists it (storage_name local); delete refuses to run without RGW and
#      changes nothing.
#   B. RGW restarted: the next segments go to RGW again; every object RGW held before the
#      outage is there with the same size and ETag (byte-identical).
#   C. wal-show sees one timeline without gaps across both storages; B1 (on RGW, its WAL on RGW,
#      then "local", then RGW) restores through walc wal-fetch with both configured, to the
#      last archived segment, pg_dumpall equal to the source's.
#   D. delete retain 1 --confirm plans over both storages: B1 goes (from RGW), B2 and all the
#      WAL after its start stay, in whichever storage holds them; B2 (on "local", its WAL in
#      both) then restores with WAL-G v3.0.9 reading the same configuration (with walc when
#      WAL-G is absent), pg_dumpall equal.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3lib.sh"
s3_setup failover
START=$SECONDS
walg_optional

s3_rgw_start
s3_mb walc
LOCAL=$T/local
mkdir -p "$LOCAL"
CONF=$T/walg.json
cat >"$CONF" <<EOF
{
  "WALG_S3_PREFIX": "s3://walc/main",
  "AWS_ENDPOINT": "$S3_ENDPOINT",
  "AWS_S3_FORCE_PATH_STYLE": "true",
  "AWS_REGION": "us-east-1",
  "AWS_ACCESS_KEY_ID": "$AWS_ACCESS_KEY_ID",
  "AWS_SECRET_ACCESS_KEY": "$AWS_SECRET_ACCESS_KEY",
  "S3_MAX_RETRIES": "1",
  "WALG_COMPRESSION_METHOD": "zstd",
  "WALG_PG_WAL_SIZE": "1",
  "WALG_FAILOVER_STORAGES": {
    "local": { "WALG_FILE_PREFIX": "$LOCAL" }
  },
  "WALG_FAILOVER_STORAGES_CHECK_TIMEOUT": "10s",
  "WALG_FAILOVER_STORAGES_CHECK_SIZE": "1kb"
}
EOF
chmod 644 "$CONF"
E=(WALG_CONFIG_PATH="$CONF")
walc_wrapper "${E[@]}"
pg_own "$T"

SRC=$T/src
PORT=$(free_port)
pg_init "$SRC" --wal-segsize=1
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_timeout = 0" \
	"archive_command = '$T/walc.sh wal-push %p 2>>$T/log/push.log'" "fsync = off"
pg_start "$SRC" "$PORT"
pgbench_init "$PORT" 1

rgw_listing() {
	awsc s3api list-objects-v2 --bucket walc --prefix main/ --query 'Contents[].[Key,Size,ETag]' \
		--output text | sort
}
in_rgw() { awsc s3api head-object --bucket walc --key "main/wal_005/$1.zst" >/dev/null 2>&1; }
in_local() { [ -f "$LOCAL/wal_005/$1.zst" ]; }
backup_name() { # OUT: the name backup-push logged
	sed -n 's/.*Wrote backup with name \([^ ]*\).*/\1/p' <<<"$1" | tail -n 1
}

wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push B1"
B1=$(backup_name "$W_ERR")
[ -n "$B1" ] || fail "no backup name in: $W_ERR"
wal_rounds 3
in_rgw "$LAST" || fail "$LAST is not on RGW before the outage"
rgw_listing >"$T/rgw-before"
ok "B1 ($B1) and $(grep -c wal_005/ "$T/rgw-before") WAL objects on RGW; $((SECONDS - START))s"

# A. the outage
s3_rgw_kill
wal_rounds 4
in_local "$LAST" || fail "$LAST archived during the outage is not in the failover storage"
assert_contains "$(cat "$T/log/push.log")" 'storage "default"' "wal-push says the main storage is not alive"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push B2 during the outage"
B2=$(backup_name "$W_ERR")
[ -f "$LOCAL/basebackups_005/${B2}_backup_stop_sentinel.json" ] || fail "B2 ($B2) is not in the failover storage"
wrun "${E[@]}" -- backup-list
expect_rc 0 "backup-list during the outage"
assert_match "$W_OUT" "$B2 +[^ ]+ +[0-9A-F]{24} +local" "backup-list names B2's storage"
before=$(find "$LOCAL" -type f | sort)
wrun "${E[@]}" -- delete retain 1 --confirm
expect_rc 1 "delete during the outage"
assert_contains "$W_ERR" 'storage "default" is not alive: this command works on every storage' \
	"delete refuses without the main storage"
assert_eq "$before" "$(find "$LOCAL" -type f | sort)" "the failover storage after the refused delete"
ok "RGW down: WAL and B2 ($B2) went to the failover storage, delete refused; $((SECONDS - START))s"

# B. RGW back
s3_rgw_restart
wal_rounds 3
in_rgw "$LAST" || fail "$LAST archived after RGW came back is not on RGW"
rgw_listing >"$T/rgw-after"
missing=$(comm -23 "$T/rgw-before" "$T/rgw-after")
assert_eq "" "$missing" "objects RGW held before the outage, changed or gone"
ok "RGW back: WAL on RGW again; its $(wc -l <"$T/rgw-before") earlier objects byte-identical"

# C. one archive across both storages
wrun "${E[@]}" -- wal-show
expect_rc 0 "wal-show"
assert_match "$W_OUT" '\| +1 \| .* OK +\|' "wal-show: timeline 1 complete across both storages ($W_OUT)"
n_local=$(find "$LOCAL/wal_005" -name '*.zst' | wc -l)
[ "$n_local" -gt 0 ] || fail "no WAL in the failover storage"
psqlc "$PORT" "CHECKPOINT" >/dev/null
wal_rounds 1
dump_norm "$PORT" >"$T/src.dump"
FINAL=$LAST
restore_start "$T/r1" "$B1" "${E[@]}" -- "recovery_target_timeline = 'latest'"
assert_dump_eq "$T/src.dump" "$RPORT" "B1 restored across both storages"
pg_stop "$T/r1"
grep -q "restored log file \"$FINAL\" from archive" "$T/r1.log" ||
	fail "B1's recovery did not replay the last segment $FINAL"
ok "B1 restores through WAL in both storages ($n_local segments in the failover one); $((SECONDS - START))s"

# D. retention over both storages
wrun "${E[@]}" -- delete retain 1 --confirm
expect_rc 0 "delete retain 1"
awsc s3api head-object --bucket walc --key "main/basebackups_005/${B1}_backup_stop_sentinel.json" \
	>/dev/null 2>&1 && fail "B1's sentinel is still on RGW"
[ -f "$LOCAL/basebackups_005/${B2}_backup_stop_sentinel.json" ] || fail "B2 was deleted"
first=${B2#base_}
first=${first:0:24}
for f in $(awsc s3 ls s3://walc/main/wal_005/ | awk '{print $4}') $(ls "$LOCAL/wal_005"); do
	seg=${f%%.*}
	is_segment_name "$seg" || continue
	[[ $seg < $first ]] && fail "WAL $seg before B2 ($first) kept in a storage"
done
if [ -x "$WALG" ]; then
	log "WAL-G: $("$WALG" --version 2>&1 | head -n 1)"
	cp "$WALG" "$T/bin/wal-g"
	pg_own "$T/bin/wal-g"
	as_pg env WALG_CONFIG_PATH="$CONF" "$T/bin/wal-g" backup-fetch "$T/r2" LATEST >"$T/log/walg-fetch.log" 2>&1 ||
		{ cat "$T/log/walg-fetch.log" >&2; fail "WAL-G backup-fetch LATEST"; }
	grep -q "$B2" "$T/log/walg-fetch.log" || fail "WAL-G did not restore B2 (see $T/log/walg-fetch.log)"
	recover_conf "$T/r2" "" "recovery_target_timeline = 'latest'"
	sed -i "s#^restore_command = .*#restore_command = 'env WALG_CONFIG_PATH=$CONF $T/bin/wal-g wal-fetch %f %p'#" \
		"$T/r2/postgresql.conf"
	who="WAL-G v3.0.9"
else
	log "no WAL-G binary at $WALG: B2 restored with walc"
	wrun "${E[@]}" -- backup-fetch "$T/r2" LATEST
	expect_rc 0 "backup-fetch LATEST"
	recover_conf "$T/r2" "${E[*]}" "recovery_target_timeline = 'latest'"
	who=walc
fi
recovered_start "$T/r2"
assert_dump_eq "$T/src.dump" "$RPORT" "B2 restored by $who"
pg_stop "$T/r2"
grep -q "restored log file \"$FINAL\" from archive" "$T/r2.log" ||
	fail "B2's recovery did not replay the last segment $FINAL"
ok "delete kept B2 and its WAL in both storages; $who restored it; $((SECONDS - START))s"
