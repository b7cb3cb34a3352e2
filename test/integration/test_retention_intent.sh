#!/usr/bin/env bash
# A killed delete does not block delta backups (issue 42 §4). Two full backups F1 < F2;
# `delete target F2 --confirm` is held (strace delays its first unlink) after it recorded its
# intent (walc_deleting.json lists F2) and before it removed anything. While it is alive a
# delta push based on F2 (LATEST) is refused naming the delete; once it is killed (SIGKILL:
# its intent stays), the next delta push is based on F2 and succeeds at once. Without strace,
# the intent a killed delete leaves is written by hand (this host, a pid that has exited).
. "$(dirname "$0")/lib.sh"
it_setup retention-intent

SRC=$T/src
walc_archiving "$SRC" WALG_DELTA_MAX_STEPS=3
psqlc "$PORT" "CREATE TABLE t AS SELECT generate_series(1, 10000) i"

push() { # ARGS: backup-push, prints the backup's name
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC" "$@"
	expect_rc 0 "backup-push $*"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
F1=$(push --full)
psqlc "$PORT" "UPDATE t SET i = i + 1 WHERE i % 10 = 0"
F2=$(push --full)
INTENT=$R/walc_deleting.json

# held_delete: `delete target F2 --confirm` in the background, held before its first unlink
# once its intent is written; DPID is walc's pid
held_delete() {
	as_pg strace -f -o /dev/null -e trace=unlink,unlinkat -e inject=unlink,unlinkat:delay_enter=30s \
		env "${E[@]}" "$WALC_PG" delete target "$F2" --confirm >/dev/null 2>"$T/log/delete.err" &
	BG_PIDS+=($!)
	for _ in $(seq 1 300); do [ -f "$INTENT" ] && break; sleep 0.05; done
	[ -f "$INTENT" ] || fail "the delete recorded no intent: $(cat "$T/log/delete.err")"
	DPID=$(pgrep -f -n "^$WALC_PG delete target $F2") || fail "no walc delete process"
	SPID=$(pgrep -f -n "^strace .* delete target $F2") || fail "no strace process"
}
DPID="" SPID=""
# strace holds the delete past SIGTERM: both go with SIGKILL whatever happens
trap 'rc=$?; [ -z "$DPID$SPID" ] || kill -KILL $DPID $SPID 2>/dev/null; (exit $rc); it_cleanup' EXIT

if command -v strace >/dev/null; then
	held_delete
	psqlc "$PORT" "UPDATE t SET i = i + 1 WHERE i % 7 = 0"
	wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
	expect_rc 1 "a delta push while the delete of its base runs"
	assert_contains "$W_ERR" "the base of this delta, $F2, is being deleted by a delete started" \
		"the refusal names the running delete"
	kill -KILL "$DPID"
	kill -KILL "$SPID"
	for _ in $(seq 1 100); do
		[ -e "/proc/$DPID" ] && ! grep -q '^State:.*zombie' "/proc/$DPID/status" 2>/dev/null || break
		sleep 0.05
	done
	DPID="" SPID=""
	ok "while the delete of $F2 runs, a delta push on it is refused"
else
	log "no strace: writing the intent a killed delete leaves"
	sleep 0 &
	dead=$!
	wait "$dead"
	"$PY" - "$INTENT" "$F2" "$dead" <<'EOF'
import json, os, socket, sys, datetime
path, name, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = {"backups": [name], "hostname": socket.gethostname(), "pid": pid,
       "boot_id": open("/proc/sys/kernel/random/boot_id").read().strip(),
       "pid_namespace": os.readlink("/proc/self/ns/pid"),
       "started": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
json.dump(doc, open(path, "w"))
EOF
fi
[ -f "$INTENT" ] || fail "the killed delete's intent is gone"
grep -q "\"$F2\"" "$INTENT" || fail "the intent does not list $F2: $(cat "$INTENT")"
[ -f "$R/basebackups_005/${F2}_backup_stop_sentinel.json" ] || fail "$F2 was deleted"

psqlc "$PORT" "UPDATE t SET i = i + 1 WHERE i % 3 = 0"
start=$SECONDS
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "the delta push after the delete was killed"
D=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
[ $((SECONDS - start)) -lt 30 ] || fail "the delta push took $((SECONDS - start)) s"
assert_contains "$W_ERR" "is gone: its intent" "the push says the delete is gone"
grep -q "\"DeltaFrom\":\"$F2\"" "$R/basebackups_005/${D}_backup_stop_sentinel.json" ||
	fail "$D is not a delta of $F2: $(cat "$R/basebackups_005/${D}_backup_stop_sentinel.json")"
ok "after the delete was killed, the delta push on $F2 succeeds ($D)"
