#!/usr/bin/env bash
# Retention across a timeline reset (issue 7; reference §14 and §17 #1, WAL-G issue #636).
# Cluster A (timeline 1, its own repository) is backed up, restored as cluster B and promoted:
# B runs on timeline 2 and archives and pushes B1, B2 (a delta of B1), B3 into the shared
# repository. Then a NEW cluster C (fresh initdb: timeline 1, later wall clock, its WAL past
# B's segment numbers as after pg_upgrade) pushes C1 (--full: B3 is another cluster's) and
# C2 (a delta of C1: walc's LATEST is the newest by time, not B3) into the same prefix.
# WAL-G orders by (timeline, segment) and would take B's backups for the newest; walc orders
# by start time:
#   - delete retain 2 keeps C1 and C2 and deletes B1..B3 and every WAL object no kept backup
#     needs (B's timeline-2 WAL, B's timeline-1 .partial, C's WAL before C1; 00000002.history
#     stays): exactly as the independent model (retention_repo.py) computes; the dry run lists
#     exactly that; C1 and C2 restore and recover to the end of C's WAL;
#   - delete retain 3 keeps B3 too (with its timeline-2 WAL), and B3 restores;
#   - retain FULL 2 keeps B3 (the second newest full); before C1 (name, time, FIND_FULL with
#     a time that falls on C2) deletes the same as retain 2.
# Restores set recovery_target_timeline = 'current': the shared prefix holds B's
# 00000002.history, which a cluster C recovering towards 'latest' would try to follow.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/retention_lib.sh"
it_setup retention-tli

mkdir -p "$T/repoA" "$T/repo"
pg_own "$T"
export WALG_PG_WAL_SIZE=1 # for retention_repo.py
ENVS_A=(WALG_FILE_PREFIX="$T/repoA" WALG_COMPRESSION_METHOD=zstd WALG_PG_WAL_SIZE=1)
ENVS=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=1 WALG_PG_WAL_SIZE=1)

NMARK=0
mark() { # PORT MARKSFILE
	NMARK=$((NMARK + 1))
	psqlc "$1" "INSERT INTO marks VALUES ($NMARK)"
	echo "$NMARK $(switch_wal "$1")" >>"$2"
}
step() { # PORT MARKSFILE
	psqlc "$1" "UPDATE data SET v = md5(v) WHERE id % 7 = $((NMARK % 7))"
	mark "$1" "$2"
	mark "$1" "$2"
}
push() { # DATADIR PORT LABEL [ARGS]: backup-push with ENVS ($PUSH_ENVS); prints the name
	local dir=$1 port=$2 label=$3
	shift 3
	wrun_pg "${PUSH_ENVS[@]}" PGHOST="$T" PGPORT="$port" -- backup-push "$dir" --add-user-data "{\"n\": \"$label\"}" "$@"
	expect_rc 0 "backup-push $label"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
new_cluster() { # DIR PORT ENVS...: initdb, archiving with ENVS, tables
	local dir=$1 port=$2
	shift 2
	pg_init "$dir" --wal-segsize=1
	pg_conf "$dir" "wal_level = replica" "archive_mode = on" \
		"archive_command = 'env $* $WALC_PG wal-push %p'" "checkpoint_timeout = 1h"
	pg_start "$dir" "$port"
	psqlc "$port" "CREATE TABLE marks (i int PRIMARY KEY); CREATE TABLE data (id int PRIMARY KEY, v text)"
	psqlc "$port" "INSERT INTO data SELECT g, md5(g::text) FROM generate_series(1, 20000) g"
}
last_mark_seg() { tail -n 1 "$1" | cut -d' ' -f2; }

# A, timeline 1, its own repository
PA=$(free_port)
new_cluster "$T/A" "$PA" "${ENVS_A[@]}"
step "$PA" "$T/marks_ab"
PUSH_ENVS=("${ENVS_A[@]}")
FA=$(push "$T/A" "$PA" FA)
step "$PA" "$T/marks_ab"
wait_archived "$T/A" "$(last_mark_seg "$T/marks_ab")"
pg_stop "$T/A"

# B: A's backup restored and promoted (timeline 2), archiving into the shared repository
wrun "${ENVS_A[@]}" -- backup-fetch "$T/B" "$FA"
expect_rc 0 "backup-fetch FA"
sed -i '/^port = /d; /^listen_addresses/d; /^unix_socket_directories/d; /^archive_command/d' "$T/B/postgresql.conf"
pg_conf "$T/B" "archive_command = 'env ${ENVS[*]} $WALC_PG wal-push %p'" \
	"restore_command = 'env ${ENVS_A[*]} $WALC_PG wal-fetch %f %p'"
touch "$T/B/recovery.signal"
pg_own "$T/B"
PB=$(free_port)
pg_start "$T/B" "$PB"
wait_not_in_recovery "$PB"
assert_eq 2 "$(psqlc "$PB" "SELECT timeline_id FROM pg_control_checkpoint()")" "B's timeline after promotion"
PUSH_ENVS=("${ENVS[@]}")
step "$PB" "$T/marks_ab"
B1=$(push "$T/B" "$PB" B1)
step "$PB" "$T/marks_ab"
B2=$(push "$T/B" "$PB" B2)
step "$PB" "$T/marks_ab"
B3=$(push "$T/B" "$PB" B3)
step "$PB" "$T/marks_ab"
wait_archived "$T/B" "$(last_mark_seg "$T/marks_ab")"
pg_stop "$T/B"
[[ $B1 =~ ^base_00000002[0-9A-F]{16}$ ]] || fail "B1 must be a full backup on timeline 2: $B1"
[[ $B2 =~ ^base_00000002[0-9A-F]{16}_D_${B1:5:24}$ ]] || fail "B2 must be a delta of B1 on timeline 2: $B2"
[[ $B3 =~ ^base_00000002[0-9A-F]{16}$ ]] || fail "B3 must be a full backup on timeline 2: $B3"
[ -f "$T/repo/wal_005/00000002.history.zst" ] || fail "B's timeline history was not archived"
b_last=$((16#$(last_mark_seg "$T/marks_ab" | cut -c17-24)))

# C: a new cluster, timeline 1, later, its WAL past B's (as pg_upgrade leaves it). Another
# system identifier: walc refuses it in this repository until told the change is intended.
TIME_B3_C1=$(sleep 1.1; date -u +%Y-%m-%dT%H:%M:%SZ; sleep 1.1)
PC=$(free_port)
new_cluster "$T/C" "$PC" "${ENVS[@]}"
wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PC" -- backup-push "$T/C"
expect_rc 1 "backup-push of a new cluster into B's repository"
assert_contains "$W_ERR" "this cluster's system identifier is" "the refusal names the identifiers"
ENVS+=(WALG_ALLOW_SYSTEM_ID_CHANGE=true)
pg_conf "$T/C" "archive_command = 'env ${ENVS[*]} $WALC_PG wal-push %p'"
psqlc "$PC" "SELECT pg_reload_conf()" >/dev/null
PUSH_ENVS=("${ENVS[@]}")
NMARK=0
while :; do
	mark "$PC" "$T/marks_c"
	[ $((16#$(last_mark_seg "$T/marks_c" | cut -c17-24))) -gt $((b_last + 2)) ] && break
done
step "$PC" "$T/marks_c"
C1=$(push "$T/C" "$PC" C1 --full)
step "$PC" "$T/marks_c"
TIME_C1_C2=$(sleep 1.1; date -u +%Y-%m-%dT%H:%M:%SZ; sleep 1.1)
C2=$(push "$T/C" "$PC" C2)
step "$PC" "$T/marks_c"
wait_archived "$T/C" "$(last_mark_seg "$T/marks_c")"
pg_stop "$T/C"
[[ $C1 =~ ^base_00000001[0-9A-F]{16}$ ]] || fail "C1 must be a full backup on timeline 1: $C1"
[[ $C2 =~ ^base_00000001[0-9A-F]{16}_D_${C1:5:24}$ ]] || fail "C2 must be a delta of C1 (the newest backup, not B3): $C2"
log "B1=$B1 B2=$B2 B3=$B3 C1=$C1 C2=$C2"
PRISTINE=$T/pristine
cp -a "$T/repo" "$PRISTINE"
assert_eq "$B1 $B2 $B3 $C1 $C2 " "$(MODEL info "$PRISTINE" | cut -d' ' -f1 | tr '\n' ' ')" "backups by start time"
# WAL-G's order (timeline, segment) would put every B backup after C's
[[ ${B1:5:8} > ${C2:5:8} ]] || fail "test set-up: B's names must sort after C's"
ok "two clusters, a timeline reset, one prefix"

# ------------------------------------------------------------------------------------------
R=$T/m
RENVS=(WALG_FILE_PREFIX="$R" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=1 WALG_PG_WAL_SIZE=1)
RESTORE_SEQ=0
declare -A VERIFIED
RESTORE_TIMELINE=current # the promoted timeline the backups were taken on
restore_all() { # REPO WHAT: every backup (B's with B's marks, C's with C's)
	local repo=$1 what=$2 name key want marks
	for marks in marks_ab marks_c; do
		while read -r name key want; do
			case $marks:$name in marks_ab:base_00000002* | marks_c:base_00000001*) ;; *) continue ;; esac
			[ -n "${VERIFIED[$key]:-}" ] && [ "${FULL_RESTORE:-0}" != 1 ] && continue
			restore_check "$repo" "$name" "$want" "$what"
			VERIFIED[$key]="$what: $name"
		done < <(MODEL restores "$repo" "$T/$marks")
	done
}
mode() { retention_mode "$PRISTINE" "$@"; } # LABEL "EXPECT ARGS" -- DELETE ARGS

mode "retain 2" "--gone $B1,$B2,$B3 --wal window" -- retain 2
# explicit statements of what retain 2 must have done, beyond the model
[ -z "$(find "$R/basebackups_005" -name 'base_00000002*' -type f)" ] || fail "retain 2: objects of B's backups remain"
for n in "$C1" "$C2"; do
	[ -f "$R/basebackups_005/${n}_backup_stop_sentinel.json" ] || fail "retain 2 must keep C1 and C2 ($n)"
done
[ -z "$(find "$R/wal_005" -name '00000002000*' -type f)" ] || fail "retain 2: B's timeline-2 WAL remains: $(find "$R/wal_005" -name '00000002000*' -type f | head -3)"
[ -f "$R/wal_005/00000002.history.zst" ] || fail "retain 2: timeline history files are never deleted"
[ -f "$R/wal_005/${C1:5:24}.zst" ] || fail "retain 2: C1's first segment deleted"
mode "retain 3" "--gone $B1,$B2 --wal window" -- retain 3
mode "retain FULL 2" "--gone $B1,$B2 --wal window" -- retain FULL 2
mode "before NAME" "--gone $B1,$B2,$B3 --wal window" -- before "$C1"
mode "before TIME" "--gone $B1,$B2,$B3 --wal window" -- before "$TIME_B3_C1"
mode "before FIND_FULL TIME" "--gone $B1,$B2,$B3 --wal window" -- before FIND_FULL "$TIME_C1_C2"
