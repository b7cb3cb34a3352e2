#!/usr/bin/env bash
# WALG_UPLOAD_WAL_METADATA=INDIVIDUAL and BULK, against WAL-G v3.0.9 archiving the same files.
# One archive_command pushes every WAL file with walc and with WAL-G at each level, each into
# its own repository: walc's metadata objects (wal_005/<name>.json, and for BULK one object per
# 16 segments, wal_005/<23 characters>.json) have WAL-G's names and contents, times included
# (the file's own); BULK's entries staged between groups are WAL-G's too, so that each tool
# merges what the other staged: walc staging with WAL-G completing the group, and the other
# way, store what WAL-G alone stores. wal-verify (walc's and WAL-G's) passes on walc's
# repositories; wal-receive stores each segment's metadata too.
# Needs the WAL-G binary (skipped without it).
. "$(dirname "$0")/lib.sh"
walg_required
it_setup wal_metadata
cp "$WALG" "$T/bin/wal-g"

# Each configuration: a repository and a directory that stands for PGDATA (WAL-G stages BULK
# entries under the working directory's pg_wal, walc under PGDATA's: both are that directory).
CONFS="walc-INDIVIDUAL walg-INDIVIDUAL walc-BULK walg-BULK walc+walg-BULK walg+walc-BULK"
for c in $CONFS; do mkdir -p "$T/repo/$c" "$T/cwd/$c/pg_wal"; done
cat >"$T/push.sh" <<EOF
#!/bin/sh
# archive_command: %p is relative to the data directory, the working directory
p=\$(readlink -f "\$1")
f=\$(basename "\$p")
for c in $CONFS; do
	level=\${c#*-}
	tool=\${c%-*}
	# the mixed configurations: the first tool pushes, the second the names ending in F
	case \$tool in *+*) case \$f in *F) tool=\${tool#*+} ;; *) tool=\${tool%+*} ;; esac ;; esac
	case \$tool in walc) bin='$WALC_PG' ;; *) bin='$T/bin/wal-g' ;; esac
	# WAL-G without background uploads: they would leave its markers under PGDATA
	(cd '$T/cwd/'\$c && env HOME='$T/home' PGDATA='$T/cwd/'\$c WALG_FILE_PREFIX='$T/repo/'\$c \\
		WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=zstd WALG_UPLOAD_WAL_METADATA=\$level \\
		\$( [ \$tool = walc ] || echo WALG_UPLOAD_CONCURRENCY=1 ) "\$bin" wal-push "\$p") \\
		2>>'$T/log/push-'\$c.log || exit 1
done
EOF
chmod 755 "$T/push.sh"
pg_own "$T"

SRC=$T/src
pg_init "$SRC" --wal-segsize=1
PORT=$(free_port)
pg_conf "$SRC" "wal_level = replica" "archive_mode = on" "archive_timeout = 0" \
	"max_wal_senders = 4" "max_replication_slots = 4" "archive_command = '$T/push.sh %p'"
pg_start "$SRC" "$PORT"
psqlc "$PORT" "CREATE TABLE t (id int, v text)"
PGE=(PGHOST="$T" PGPORT="$PORT")
walc_in() { local c=$1; shift; wrun_pg "${PGE[@]}" WALG_FILE_PREFIX="$T/repo/$c" WALG_PG_WAL_SIZE=1 "$@"; }
walc_in walc-INDIVIDUAL -- backup-push "$SRC"
expect_rc 0 "backup-push"
walc_in walc-BULK -- backup-push "$SRC"
expect_rc 0 "backup-push"

# segments up to the second group's 6th (...16): the group 0..F completes
seg=""
while [[ -z $seg || $((16#${seg:16:8})) -lt 22 ]]; do
	psqlc "$PORT" "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 100) g"
	seg=$(switch_wal "$PORT")
done
wait_archived "$SRC" "$seg" 120
for c in $CONFS; do
	! grep -qiE 'error|fatal' "$T/log/push-$c.log" || { cat "$T/log/push-$c.log"; fail "wal-push for $c"; }
done

# json_same A B: two JSON documents that decode equal
json_same() { "$PY" -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' "$1" "$2"; }
# same_json DIR_A DIR_B WHAT: the same *.json files in both, each decoding equal
same_json() {
	local a b f
	a=$(cd "$1" && ls -- *.json 2>/dev/null | sort || true)
	b=$(cd "$2" && ls -- *.json 2>/dev/null | sort || true)
	[ -n "$b" ] || fail "$3: WAL-G wrote no metadata in $2"
	[ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b") >&2; fail "$3: other metadata names than WAL-G's"; }
	for f in $a; do json_same "$1/$f" "$2/$f" || { cat "$1/$f" "$2/$f" >&2; fail "$3: $f differs from WAL-G's"; }; done
}

same_json "$T/repo/walc-INDIVIDUAL/wal_005" "$T/repo/walg-INDIVIDUAL/wal_005" INDIVIDUAL
n=$(find "$T/repo/walc-INDIVIDUAL/wal_005" -name '*.json' | wc -l)
segs=$(find "$T/repo/walc-INDIVIDUAL/wal_005" -name '*.zst' | wc -l)
[ "$n" = "$segs" ] || fail "INDIVIDUAL: $n metadata objects for $segs WAL files"
"$PY" - "$T/repo/walc-INDIVIDUAL/wal_005/$seg.json" "$SRC/pg_wal/$seg" <<'EOF' || fail "INDIVIDUAL: $seg.json is not the file's time in WAL-G's form"
import json, os, sys, datetime
doc = json.load(open(sys.argv[1]))
name = os.path.basename(sys.argv[2])
e = doc[name]
assert list(doc) == [name] and e["date_fmt"] == "%Y-%m-%dT%H:%M:%S.%fZ", doc
ns = os.stat(sys.argv[2]).st_mtime_ns
want = datetime.datetime.fromtimestamp(ns // 10**9, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
frac = ("%09d" % (ns % 10**9)).rstrip("0")
assert e["created_time"] == want + ("." + frac if frac else "") + "Z", (e, ns)
EOF
ok "INDIVIDUAL: walc's $n metadata objects are WAL-G's, names and times"

same_json "$T/repo/walc-BULK/wal_005" "$T/repo/walg-BULK/wal_005" BULK
group=${seg:0:16}0000000
[ -e "$T/repo/walc-BULK/wal_005/$group.json" ] || fail "BULK: no $group.json"
[ "$("$PY" -c 'import json,sys; print(" ".join(sorted(json.load(open(sys.argv[1])))))' "$T/repo/walc-BULK/wal_005/$group.json")" = \
	"$(cd "$T/repo/walc-BULK/wal_005" && ls -- "$group"?*.zst | sed 's/\.zst$//' | sort | tr '\n' ' ' | sed 's/ $//')" ] ||
	fail "BULK: $group.json does not hold each WAL file of its group"
staged=walg_data/walg_archive_status
same_json "$T/cwd/walc-BULK/pg_wal/$staged" "$T/cwd/walg-BULK/pg_wal/$staged" "BULK staged entries"
for c in walc+walg-BULK walg+walc-BULK; do
	same_json "$T/repo/$c/wal_005" "$T/repo/walg-BULK/wal_005" "BULK, $c"
done
ok "BULK: walc's group objects and staged entries are WAL-G's; each tool completes the other's group"

# wal-verify passes on walc's repositories, walc's and WAL-G's
for c in walc-INDIVIDUAL walc-BULK; do
	walc_in "$c" -- wal-verify integrity timeline
	expect_rc 0 "walc wal-verify on $c"
	assert_contains "$W_OUT" "integrity check status: OK" "walc wal-verify integrity on $c"
	assert_contains "$W_OUT" "timeline check status: OK" "walc wal-verify timeline on $c"
	out=$(as_pg env "${PGE[@]}" PGUSER=postgres PGDATABASE=postgres WALG_FILE_PREFIX="$T/repo/$c" \
		WALG_PG_WAL_SIZE=1 "$T/bin/wal-g" wal-verify integrity timeline 2>"$T/log/walg-verify.log") ||
		{ cat "$T/log/walg-verify.log"; fail "WAL-G wal-verify on $c"; }
	assert_contains "$out" "integrity check status: OK" "WAL-G wal-verify integrity on $c"
	assert_contains "$out" "timeline check status: OK" "WAL-G wal-verify timeline on $c"
	walc_in "$c" -- wal-show
	assert_not_contains "$W_OUT" "LOST" "wal-show on $c"
done
ok "wal-verify integrity and timeline: OK by walc and by WAL-G on walc's repositories"

# wal-receive stores each segment's metadata, timed when it stored it
mkdir -p "$T/repo/receive"
pg_own "$T/repo"
start=$(date +%s)
as_pg env "${PGE[@]}" PGUSER=postgres PGDATABASE=postgres WALG_FILE_PREFIX="$T/repo/receive" \
	WALG_COMPRESSION_METHOD=zstd WALG_UPLOAD_WAL_METADATA=INDIVIDUAL \
	ASAN_OPTIONS="$ASAN_OPTIONS" "$WALC_PG" wal-receive >"$T/log/receive.log" 2>&1 &
BG_PIDS+=($!)
await_pid "$WALC_PG wal-receive" "PGPORT=$PORT" "$T/log/receive.log"
RECV=$AWAITED_PID
for _ in $(seq 1 100); do
	[ "$(psqlc "$PORT" "SELECT count(*) FROM pg_replication_slots WHERE active")" = 1 ] && break
	sleep 0.1
done
for _ in 1 2; do
	psqlc "$PORT" "INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 100) g"
	rseg=$(switch_wal "$PORT")
done
for _ in $(seq 1 300); do
	[ -e "$T/repo/receive/wal_005/$rseg.json" ] && break
	sleep 0.1
done
[ -e "$T/repo/receive/wal_005/$rseg.zst" ] || { cat "$T/log/receive.log"; fail "wal-receive did not store $rseg"; }
[ -e "$T/repo/receive/wal_005/$rseg.json" ] || { cat "$T/log/receive.log"; fail "wal-receive stored no $rseg.json"; }
"$PY" - "$T/repo/receive/wal_005/$rseg.json" "$rseg" "$start" <<'EOF' || fail "wal-receive's $rseg.json"
import json, sys, datetime
e = json.load(open(sys.argv[1]))[sys.argv[2]]
t = datetime.datetime.strptime(e["created_time"][:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
assert e["created_time"].endswith("Z") and e["date_fmt"] == "%Y-%m-%dT%H:%M:%S.%fZ", e
assert int(sys.argv[3]) - 1 <= t.timestamp() <= int(sys.argv[3]) + 120, (e, sys.argv[3])
EOF
kill -TERM "$RECV"
ok "wal-receive stored $rseg.json beside $rseg"
