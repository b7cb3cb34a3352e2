#!/usr/bin/env bash
# wal-show and wal-verify (issue 6): a complete archive is OK; deleting one segment from
# storage shows LOST_SEGMENTS and makes wal-verify integrity report FAILURE with a non-zero
# exit; after a promotion the new timeline, its parent and switch point come from .history.
. "$(dirname "$0")/lib.sh"
it_setup walshow

mkdir -p "$T/repo"
pg_own "$T"
E=(WALG_FILE_PREFIX="$T/repo" WALG_PG_WAL_SIZE=1)
pg_init "$T/src" --wal-segsize=1
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${E[*]} $WALC_PG wal-push %p'"
pg_start "$T/src" "$PORT"
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src"
expect_rc 0 "backup-push"
psqlc "$PORT" "CREATE TABLE t (v text)"
for _ in $(seq 1 8); do
	last=$(psqlc "$PORT" "INSERT INTO t SELECT md5(g::text) FROM generate_series(1, 300) g; SELECT pg_walfile_name(pg_switch_wal())")
done
wait_archived "$T/src" "$last" 60
V=("${E[@]}" PGHOST="$T" PGPORT="$PORT" WALG_UPLOAD_CONCURRENCY=1)

wrun "${E[@]}" -- wal-show
expect_rc 0 "wal-show"
assert_match "$W_OUT" '\| +1 \| +0 \| +0/0 \| [0-9A-F]{24} \| [0-9A-F]{24} \| +[0-9]+ \| +[0-9]+ \| OK +\| +1 \|' "wal-show, complete archive"
wrun "${V[@]}" -- wal-verify integrity timeline
expect_rc 0 "wal-verify on a complete archive"
assert_contains "$W_OUT" "integrity check status: OK" "wal-verify integrity"
assert_contains "$W_OUT" "timeline check status: OK" "wal-verify timeline"

# A hole in the middle of the archive.
gap=$(ls "$T/repo/wal_005" | grep -E '^[0-9A-F]{24}\.' | sort | sed -n '4p')
rm -f "$T/repo/wal_005/$gap"
wrun "${E[@]}" -- wal-show
assert_contains "$W_OUT" "LOST_SEGMENTS" "wal-show after deleting $gap"
wrun "${E[@]}" -- wal-show --detailed-json
printf '%s\n' "$W_OUT" | "$PY" -c "import json,sys; d=json.load(sys.stdin); assert d[0]['missing_segments']==['${gap%%.*}'], d" ||
	fail "detailed JSON must list the missing segment ${gap%%.*}"
wrun "${V[@]}" -- wal-verify integrity --json
[ "$W_RC" -ne 0 ] || fail "wal-verify must exit non-zero on FAILURE"
printf '%s\n' "$W_OUT" | "$PY" -c "import json,sys; d=json.load(sys.stdin)['integrity']; assert d['status']=='FAILURE' and any(x['status']=='MISSING_LOST' and x['start_segment']=='${gap%%.*}' for x in d['details']), d" ||
	fail "wal-verify --json must report ${gap%%.*} as MISSING_LOST"

# A promotion: restore the backup and promote onto timeline 2.
pg_stop "$T/src"
wrun "${E[@]}" -- backup-fetch "$T/dst" LATEST
expect_rc 0 "backup-fetch"
cp "$T/src/pg_wal/${gap%%.*}" "$T/dst/pg_wal/" 2>/dev/null || true
recover_conf "$T/dst" "${E[*]}"
# The promoted cluster archives too, so its timeline's history reaches the repository.
pg_conf "$T/dst" "archive_mode = on" "archive_command = 'env ${E[*]} $WALC_PG wal-push %p'"
P2=$(free_port)
pg_start "$T/dst" "$P2"
wait_not_in_recovery "$P2"
seg=$(psqlc "$P2" "SELECT pg_walfile_name(pg_switch_wal())")
wait_archived "$T/dst" "$seg" 60
[ -e "$T/repo/wal_005/00000002.history.lz4" ] || fail "00000002.history not archived"
wrun "${E[@]}" -- wal-show
assert_match "$W_OUT" '\| +2 \| +1 \| +0/[0-9A-F]+ \| 00000002' "wal-show: timeline 2 with parent 1"
log "wal-show and wal-verify ok"
