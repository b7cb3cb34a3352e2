#!/usr/bin/env bash
# wal-push's parallel archiving (issue 6): with archiving failing, PostgreSQL piles up 200
# segments; once walc archives again the backlog drains through background uploads; every
# segment is stored byte-identically and no marker is left behind. Also PG_READY_RENAME.
. "$(dirname "$0")/lib.sh"
it_setup backlog

N=${BACKLOG_SEGMENTS:-200}
mkdir -p "$T/repo" "$T/repo2" "$T/keep"
pg_own "$T"
pg_init "$T/src" --wal-segsize=1
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" "archive_command = '/bin/false'" \
	"wal_keep_size = 1GB" "max_wal_size = 2GB" "checkpoint_timeout = 1h"
pg_start "$T/src" "$PORT"
psqlc "$PORT" "CREATE TABLE t (v text)"
for _ in $(seq 1 "$N"); do
	psqlc "$PORT" "INSERT INTO t SELECT md5(g::text) FROM generate_series(1, 100) g; SELECT pg_switch_wal()" >/dev/null
done
ready=$(ls "$T/src/pg_wal/archive_status" | grep -c '\.ready$')
[ "$ready" -ge "$N" ] || fail "expected >= $N .ready files, got $ready"
log "$ready segments waiting"
# Copies of the waiting segments, to compare with what gets archived.
for f in "$T"/src/pg_wal/archive_status/*.ready; do
	s=$(basename "$f" .ready)
	cp "$T/src/pg_wal/$s" "$T/keep/$s"
done
last=$(ls "$T/keep" | sort | tail -n 1)

# DEVEL: a segment found archived in the background says so at that level only
ENVS="WALG_FILE_PREFIX=$T/repo WALG_COMPRESSION_METHOD=lz4 WALG_PG_WAL_SIZE=1 WALG_UPLOAD_CONCURRENCY=8 WALG_LOG_LEVEL=DEVEL PGDATA=$T/src"
psqlc "$PORT" "ALTER SYSTEM SET archive_command = 'env $ENVS $WALC_PG wal-push %p 2>>$T/push.log'"
psqlc "$PORT" "SELECT pg_reload_conf()" >/dev/null
start=$SECONDS
wait_archived "$T/src" "$last" 300
log "backlog of $ready drained in $((SECONDS - start)) s with WALG_UPLOAD_CONCURRENCY=8"
grep -q "already archived in the background" "$T/push.log" || fail "no segment was archived in the background"

# Every segment byte-identical; the marker folder left empty.
for s in $(ls "$T/keep"); do
	wrun WALG_FILE_PREFIX="$T/repo" WALG_PG_WAL_SIZE=1 -- wal-fetch "$s" "$T/got"
	expect_rc 0 "wal-fetch $s"
	cmp -s "$T/keep/$s" "$T/got" || fail "$s differs from the segment PostgreSQL wrote"
done
markers=$(find "$T/src/pg_wal/walg_data" -type f 2>/dev/null | wc -l)
[ "$markers" -eq 0 ] || fail "$markers markers left in pg_wal/walg_data"

# PG_READY_RENAME: background uploads mark the files .done themselves, no markers.
psqlc "$PORT" "ALTER SYSTEM SET archive_command = '/bin/false'"
psqlc "$PORT" "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 1 20); do
	psqlc "$PORT" "INSERT INTO t VALUES ('x'); SELECT pg_switch_wal()" >/dev/null
done
last=$(ls "$T/src/pg_wal/archive_status" | grep '\.ready$' | sort | tail -n 1)
last=${last%.ready}
psqlc "$PORT" "ALTER SYSTEM SET archive_command = 'env ${ENVS/$T\/repo/$T/repo2} PG_READY_RENAME=true $WALC_PG wal-push %p 2>>$T/push2.log'"
psqlc "$PORT" "SELECT pg_reload_conf()" >/dev/null
wait_archived "$T/src" "$last" 120
stored=$(ls "$T/repo2/wal_005" | wc -l)
[ "$stored" -ge 20 ] || fail "PG_READY_RENAME: only $stored objects stored"
markers=$(find "$T/src/pg_wal/walg_data" -type f 2>/dev/null | wc -l)
[ "$markers" -eq 0 ] || fail "PG_READY_RENAME left $markers markers"
log "backlog drained, all identical, no markers left"
