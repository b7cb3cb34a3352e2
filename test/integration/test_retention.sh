#!/usr/bin/env bash
# delete, every mode (issue 7; reference §4.4, §14; walc's differences in `walc help delete`).
# One repository is built once: full F1, delta D1(F1), delta D2(D1), full F2 (automatic:
# WALG_DELTA_MAX_STEPS=2), delta D3(F2), full F3 (--full), 1 MiB WAL segments with a few
# between backups and after the last one, a table of marks (one per switched segment), user
# data on every backup, and two foreign objects (one at the root, one in wal_005/ without a
# segment name). For each mode, on a fresh copy of it:
#   - the expected remaining set is computed independently (retention_repo.py: the backups the
#     mode must delete, and WAL no remaining backup can need);
#   - the dry run exits 0, lists exactly the objects to delete ("would delete KEY") and
#     changes nothing (names, sizes, mtimes, inodes);
#   - --confirm leaves exactly the expected objects;
#   - every remaining backup is restored (backup-fetch) and recovered with no target, replaying
#     all archived WAL, and promotes with every mark its WAL holds. A restore reads only its
#     chain's objects and its WAL run, so a backup whose inputs are byte-identical to an already
#     verified restore is not restored again (FULL_RESTORE=1 restores every one anyway).
# Refusals that delete nothing: retain N onto a delta (suggests FIND_FULL), before a delta,
# an unknown target, a future time, bad arguments; fewer than N backups deletes nothing.
# Last: a failed push's leftover folder older than the retained window is deleted by retain
# (WAL-G deletes every object older than the target) and by garbage/garbage BACKUPS.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/retention_lib.sh"
it_setup retention

mkdir -p "$T/repo" "$T/stash"
pg_own "$T"
export WALG_PG_WAL_SIZE=1 # for retention_repo.py
ENVS=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=2 WALG_PG_WAL_SIZE=1)

pg_init "$T/src" --wal-segsize=1 --data-checksums
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${ENVS[*]} $WALC_PG wal-push %p'" "checkpoint_timeout = 1h"
pg_start "$T/src" "$PORT"
psqlc "$PORT" "CREATE TABLE marks (i int PRIMARY KEY); CREATE TABLE data (id int PRIMARY KEY, v text)"
psqlc "$PORT" "INSERT INTO data SELECT g, md5(g::text) FROM generate_series(1, 20000) g"

NMARK=0
mark() { # insert the next mark and switch: the mark's commit is in the segment switched
	NMARK=$((NMARK + 1))
	psqlc "$PORT" "INSERT INTO marks VALUES ($NMARK)"
	echo "$NMARK $(switch_wal "$PORT")" >>"$T/marks"
}
step() { # some changes and a few WAL segments
	psqlc "$PORT" "UPDATE data SET v = md5(v) WHERE id % 7 = $((NMARK % 7))"
	mark
	mark
}
push() { # LABEL [ARGS]: backup-push with user data {"n": LABEL}; prints the backup name
	local label=$1
	shift
	wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src" --add-user-data "{\"n\": \"$label\"}" "$@"
	expect_rc 0 "backup-push $label"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
now_rfc3339() { sleep 1.1; date -u +%Y-%m-%dT%H:%M:%SZ; sleep 1.1; }

step
# F0: a complete backup whose sentinel is then taken away, kept aside: a failed push's
# leftover for the garbage modes (the pristine repository does not have it).
F0=$(push F0)
mv "$T/repo/basebackups_005/$F0" "$T/stash/"
rm "$T/repo/basebackups_005/${F0}_backup_stop_sentinel.json"
step
F1=$(push F1)
step
D1=$(push D1)
step
TIME_D1_D2=$(now_rfc3339)
D2=$(push D2)
step
TIME_D2_F2=$(now_rfc3339)
F2=$(push F2)
step
D3=$(push D3)
step
F3=$(push F3 --full)
step
last=$(tail -n 1 "$T/marks" | cut -d' ' -f2)
wait_archived "$T/src" "$last"
pg_stop "$T/src"
log "F1=$F1 D1=$D1 D2=$D2 F2=$F2 D3=$D3 F3=$F3"
for n in F0 F1 F2 F3; do [[ ${!n} =~ ^base_[0-9A-F]{24}$ ]] || fail "$n must be a full backup: ${!n}"; done
[[ $D1 =~ ^base_[0-9A-F]{24}_D_${F1:5:24}$ ]] || fail "D1 must be a delta of F1: $D1"
[[ $D2 =~ ^base_[0-9A-F]{24}_D_${D1:5:24}$ ]] || fail "D2 must be a delta of D1: $D2"
[[ $D3 =~ ^base_[0-9A-F]{24}_D_${F2:5:24}$ ]] || fail "D3 must be a delta of F2: $D3"
# foreign objects: never touched but by nothing (everything deletes only walc's two folders)
echo "not walc's" >"$T/repo/README.operator"
echo "not a segment" >"$T/repo/wal_005/NOTES"
pg_own "$T/repo"
PRISTINE=$T/pristine
cp -a "$T/repo" "$PRISTINE"
MODEL info "$PRISTINE" >"$T/info"
[ "$(cut -d' ' -f1 "$T/info" | tr '\n' ' ')" = "$F1 $D1 $D2 $F2 $D3 $F3 " ] || fail "backup order: $(cat "$T/info")"
nwal=$(find "$PRISTINE/wal_005" -name '*.zst' | wc -l)
log "pristine repository: $(count_files "$PRISTINE") objects, $nwal WAL objects"
ok "base repository"

# ------------------------------------------------------------------------------------------
R=$T/m
RENVS=(WALG_FILE_PREFIX="$R" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=2 WALG_PG_WAL_SIZE=1)
RESTORE_SEQ=0
declare -A VERIFIED # restore key -> "mode: backup" that verified it
NRESTORES=0


restore_all() { # REPO WHAT: every backup in REPO
	local repo=$1 what=$2 name key want
	while read -r name key want; do
		if [ -n "${VERIFIED[$key]:-}" ] && [ "${FULL_RESTORE:-0}" != 1 ]; then
			continue
		fi
		restore_check "$repo" "$name" "$want" "$what"
		VERIFIED[$key]="$what: $name"
	done < <(MODEL restores "$repo" "$T/marks")
}

mode() { retention_mode "$PRISTINE" "$@"; } # LABEL "EXPECT ARGS" [SETUP] -- DELETE ARGS

with_orphan() { # a failed push's leftover: F0's folder, no sentinel
	cp -a "$T/stash/$F0" "$1/basebackups_005/"
}

W=(--wal window)
# retain
mode "retain 1" "--gone $F1,$D1,$D2,$F2,$D3 ${W[*]}" "" -- retain 1
mode "retain 3" "--gone $F1,$D1,$D2 ${W[*]}" "" -- retain 3
mode "retain 6" "${W[*]}" "" -- retain 6
mode "retain FULL 1" "--gone $F1,$D1,$D2,$F2,$D3 ${W[*]}" "" -- retain FULL 1
mode "retain FULL 2" "--gone $F1,$D1,$D2 ${W[*]}" "" -- retain FULL 2
mode "retain FIND_FULL 2" "--gone $F1,$D1,$D2 ${W[*]}" "" -- retain FIND_FULL 2
mode "retain FIND_FULL 4" "${W[*]}" "" -- retain FIND_FULL 4
mode "retain 1 --after NAME" "--gone $F1,$D1,$D2 ${W[*]}" "" -- retain 1 --after "$F2"
mode "retain 1 --after TIME" "--gone $F1,$D1,$D2 ${W[*]}" "" -- retain 1 --after "$TIME_D2_F2"
mode "retain 1 --after TIME (a delta)" "${W[*]}" "" -- retain 1 --after "$TIME_D1_D2"
mode "retain 3 --after NAME (newer)" "--gone $F1,$D1,$D2 ${W[*]}" "" -- retain 3 --after "$F3"
mode "retain FULL 1 --after TIME" "--gone $F1,$D1,$D2 ${W[*]}" "" -- retain FULL 1 --after "$TIME_D2_F2"
# walc keeps everything since the time, with its chain (WAL-G would take the first full after
# the time with a modifier, and refuse a delta without one)
mode "retain FULL 1 --after TIME (a delta)" "${W[*]}" "" -- retain FULL 1 --after "$TIME_D1_D2"
# before
mode "before NAME" "--gone $F1,$D1,$D2 ${W[*]}" "" -- before "$F2"
mode "before NAME (newest)" "--gone $F1,$D1,$D2,$F2,$D3 ${W[*]}" "" -- before "$F3"
mode "before TIME" "--gone $F1,$D1,$D2 ${W[*]}" "" -- before "$TIME_D2_F2"
mode "before FIND_FULL NAME" "--gone $F1,$D1,$D2 ${W[*]}" "" -- before FIND_FULL "$D3"
mode "before FIND_FULL TIME" "${W[*]}" "" -- before FIND_FULL "$TIME_D1_D2"
# target
mode "target NAME (delta)" "--gone $D1,$D2" "" -- target "$D1"
mode "target NAME (full)" "--gone $F2,$D3" "" -- target "$F2"
mode "target NAME (newest)" "--gone $F3" "" -- target "$F3"
mode "target FIND_FULL NAME" "--gone $F1,$D1,$D2" "" -- target FIND_FULL "$D2"
mode "target FIND_FULL NAME (full)" "--gone $F2,$D3" "" -- target FIND_FULL "$F2"
mode "target --target-user-data (delta)" "--gone $D2" "" -- target --target-user-data '{"n": "D2"}'
mode "target --target-user-data (full)" "--gone $F2,$D3" "" -- target --target-user-data '{"n":"F2"}'
# garbage: WAL before the oldest backup and the failed push's folder
mode "garbage" "${W[*]} --orphans window" with_orphan -- garbage
mode "garbage ARCHIVES" "${W[*]}" with_orphan -- garbage ARCHIVES
mode "garbage BACKUPS" "--orphans window" with_orphan -- garbage BACKUPS
# everything
mode "everything" "--everything" with_orphan -- everything
mode "everything FORCE" "--everything" "" -- everything FORCE
log "$NRESTORES restores, ${#VERIFIED[@]} distinct restore inputs verified"
[ "${#VERIFIED[@]}" -ge 6 ] || fail "expected every one of the 6 backups to be restored at least once"

# ------------------------------------------------------------------------------------------
# Refusals: exit 1 (0 for "fewer than N"), nothing deleted even with --confirm.
refuse() { # LABEL RC NEEDLE -- DELETE ARGS
	local label=$1 rc=$2 needle=$3 before c
	shift 4
	rm -rf "$R"
	cp -a "$PRISTINE" "$R"
	before=$(snapshot "$R")
	for c in "" --confirm; do
		wrun "${RENVS[@]}" -- delete "$@" $c
		[ "$rc" = any ] || expect_rc "$rc" "$label ${c:-(dry run)}"
		[ -n "$needle" ] && assert_contains "$W_ERR$W_OUT" "$needle" "$label: message"
		assert_eq "" "$(printf '%s\n' "$W_OUT" | grep -E '^(would delete|deleted) ' || true)" "$label: no object listed"
		assert_set "$before" "$(snapshot "$R")" "$label ${c}: nothing deleted"
	done
	ok "refused: delete $*"
}
refuse "retain 2 (a delta)" 1 FIND_FULL -- retain 2
refuse "retain 4 (a delta)" 1 FIND_FULL -- retain 4
refuse "before a delta" 1 FIND_FULL -- before "$D3"
refuse "retain 7 (fewer backups)" 0 "" -- retain 7
refuse "retain FULL 4 (fewer fulls)" 0 "" -- retain FULL 4
refuse "target unknown" 1 "" -- target base_000000010000000000000001
refuse "target unknown user data" 1 "" -- target --target-user-data '{"n": "nope"}'
refuse "before a future time" 1 "" -- before 2099-01-01T00:00:00Z
# WAL-G: "No backup found for deletion", exit 0; walc: an error. Either way nothing goes.
refuse "before a time after every backup" any "" -- before "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
refuse "retain 0" 1 "" -- retain 0
refuse "retain FULL without N" 1 "" -- retain FULL
refuse "before FULL" 1 "" -- before FULL "$F2"
refuse "everything FULL" 1 "" -- everything FULL
refuse "garbage FOO" 1 "" -- garbage FOO

# ------------------------------------------------------------------------------------------
# A failed push's leftover older than the retained window: WAL-G's retain/before delete every
# object older than the target (§14), so the leftover goes with them; walc's help says before
# "deletes what is older than a backup".
mode "retain 3 with a leftover folder" "--gone $F1,$D1,$D2 ${W[*]} --orphans window" with_orphan -- retain 3
mode "before NAME with a leftover folder" "--gone $F1,$D1,$D2 ${W[*]} --orphans window" with_orphan -- before "$F2"
log "retention modes: all checks done"
