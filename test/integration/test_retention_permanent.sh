#!/usr/bin/env bash
# Permanent backups and delete (issue 7; reference §4.5, §14; `walc help backup-mark`).
# Repository: full F1, delta D1(F1), delta D2(D1), full F2, full FP pushed with --permanent,
# delta D3(FP) (--delta-from-name), full F3, 1 MiB WAL segments with a few between backups.
#   - backup-push --permanent: metadata.json is_permanent and the sentinel's IsPermanent are
#     true for FP, false for the others;
#   - backup-mark D2 marks its whole chain (F1, D1, D2: metadata and sentinel), touches no
#     other object, and is idempotent; backup-mark -i fails on a backup whose direct delta is
#     permanent (D1, F1) and changes nothing; -i works down a chain from its newest member;
#   - retain, retain FULL, before and garbage keep permanent backups and the WAL from their
#     start to their finish (and delete the WAL around them), exactly as an independent model
#     (retention_repo.py) computes; the dry run lists exactly what --confirm deletes; every
#     remaining backup restores and recovers to the end of its WAL (for a permanent backup
#     out of the window: the end of its own WAL range);
#   - target refuses a permanent backup or a set containing one; everything refuses while one
#     exists (whether pushed permanent or marked); everything FORCE deletes them;
#   - permanence is read from metadata.json as in WAL-G (whose backup-mark does not touch the
#     sentinel): metadata true + sentinel false is permanent, the reverse is not.
# integration: long
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/retention_lib.sh"
it_setup retention-perm

mkdir -p "$T/repo"
pg_own "$T"
export WALG_PG_WAL_SIZE=1 # for retention_repo.py
ENVS=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=2 WALG_PG_WAL_SIZE=1)

pg_init "$T/src" --wal-segsize=1
PORT=$(free_port)
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" \
	"archive_command = 'env ${ENVS[*]} $WALC_PG wal-push %p'" "checkpoint_timeout = 1h"
pg_start "$T/src" "$PORT"
psqlc "$PORT" "CREATE TABLE marks (i int PRIMARY KEY); CREATE TABLE data (id int PRIMARY KEY, v text)"
psqlc "$PORT" "INSERT INTO data SELECT g, md5(g::text) FROM generate_series(1, 20000) g"

NMARK=0
mark() {
	NMARK=$((NMARK + 1))
	psqlc "$PORT" "INSERT INTO marks VALUES ($NMARK)"
	echo "$NMARK $(switch_wal "$PORT")" >>"$T/marks"
}
step() {
	psqlc "$PORT" "UPDATE data SET v = md5(v) WHERE id % 7 = $((NMARK % 7))"
	mark
	mark
}
push() { # LABEL [ARGS]: prints the backup name
	local label=$1
	shift
	wrun_pg "${ENVS[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src" --add-user-data "{\"n\": \"$label\"}" "$@"
	expect_rc 0 "backup-push $label"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}

step
F1=$(push F1)
step
D1=$(push D1)
step
D2=$(push D2)
step
F2=$(push F2)
step
FP=$(push FP --permanent --full)
step
D3=$(push D3 --delta-from-name "$FP") # walc bases no delta on a permanent LATEST unless told
step
TIME_D3_F3=$(sleep 1.1; date -u +%Y-%m-%dT%H:%M:%SZ; sleep 1.1)
F3=$(push F3 --full)
step
wait_archived "$T/src" "$(tail -n 1 "$T/marks" | cut -d' ' -f2)"
pg_stop "$T/src"
log "F1=$F1 D1=$D1 D2=$D2 F2=$F2 FP=$FP D3=$D3 F3=$F3"
for n in F1 F2 FP F3; do [[ ${!n} =~ ^base_[0-9A-F]{24}$ ]] || fail "$n must be a full backup: ${!n}"; done
[[ $D1 =~ ^base_[0-9A-F]{24}_D_${F1:5:24}$ ]] || fail "D1 must be a delta of F1: $D1"
[[ $D2 =~ ^base_[0-9A-F]{24}_D_${D1:5:24}$ ]] || fail "D2 must be a delta of D1: $D2"
[[ $D3 =~ ^base_[0-9A-F]{24}_D_${FP:5:24}$ ]] || fail "D3 must be a delta of FP: $D3"
PRISTINE=$T/pristine
cp -a "$T/repo" "$PRISTINE"

# flags REPO NAME: "<metadata is_permanent> <sentinel IsPermanent>"
flags() {
	"$PY" - "$1/basebackups_005" "$2" <<'PYEOF'
import json, sys
d, n = sys.argv[1], sys.argv[2]
m = json.load(open("%s/%s/metadata.json" % (d, n)))
s = json.load(open("%s/%s_backup_stop_sentinel.json" % (d, n)))
print(str(m.get("is_permanent")).lower(), str(s.get("IsPermanent")).lower())
PYEOF
}
expect_flags() { # REPO WHAT NAME=VALUE... (VALUE: true|false, for both files)
	local repo=$1 what=$2 kv var
	shift 2
	for kv in "$@"; do
		var=${kv%%=*}
		assert_eq "${kv#*=} ${kv#*=}" "$(flags "$repo" "${!var}")" "$what: $var (${!var}) metadata is_permanent, sentinel IsPermanent"
	done
}
expect_flags "$PRISTINE" "after push" F1=false D1=false D2=false F2=false FP=true D3=false F3=false
ok "backup-push --permanent"

# ------------------------------------------------------------------------------------------
# backup-mark on a copy of MARKED: the chain of D2
MARKED=$T/marked
cp -a "$PRISTINE" "$MARKED"
MENVS=(WALG_FILE_PREFIX="$MARKED" WALG_COMPRESSION_METHOD=zstd WALG_PG_WAL_SIZE=1)
before=$(snapshot "$MARKED")
wrun "${MENVS[@]}" -- backup-mark "$D2"
expect_rc 0 "backup-mark D2"
expect_flags "$MARKED" "backup-mark D2" F1=true D1=true D2=true F2=false FP=true D3=false F3=false
changed=$(comm -3 <(printf '%s\n' "$before") <(snapshot "$MARKED") | awk '{ print $1 }' | sort -u)
want=$(for n in "$F1" "$D1" "$D2"; do printf 'basebackups_005/%s/metadata.json\nbasebackups_005/%s_backup_stop_sentinel.json\n' "$n" "$n"; done | sort)
assert_set "$want" "$changed" "backup-mark D2 rewrites exactly the chain's metadata and sentinels"
# sentinels stay valid and otherwise identical
for n in "$F1" "$D1" "$D2"; do
	"$PY" - "$PRISTINE/basebackups_005/${n}_backup_stop_sentinel.json" "$MARKED/basebackups_005/${n}_backup_stop_sentinel.json" <<'PYEOF' || fail "backup-mark changed more than IsPermanent in the sentinel of $n"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
a["IsPermanent"] = True
assert a == b, (a, b)
assert list(a) == list(b), "key order"
PYEOF
done
wrun "${MENVS[@]}" -- backup-mark "$D2"
expect_rc 0 "backup-mark D2 again"
expect_flags "$MARKED" "backup-mark D2 twice" F1=true D1=true D2=true
before=$(snapshot "$MARKED")
for n in D1 F1; do
	wrun "${MENVS[@]}" -- backup-mark "${!n}" -i
	expect_rc 1 "backup-mark -i $n (its direct delta is permanent)"
	assert_set "$before" "$(snapshot "$MARKED")" "backup-mark -i $n changes nothing"
done
wrun "${MENVS[@]}" -- backup-mark base_000000010000000000000001
expect_rc 1 "backup-mark of an unknown backup"
assert_set "$before" "$(snapshot "$MARKED")" "backup-mark of an unknown backup changes nothing"
expect_flags "$MARKED" "after refused -i" F1=true D1=true D2=true
# -i from the newest member down works, on a scratch copy
S=$T/scratch
cp -a "$MARKED" "$S"
SENVS=(WALG_FILE_PREFIX="$S" WALG_COMPRESSION_METHOD=zstd WALG_PG_WAL_SIZE=1)
wrun "${SENVS[@]}" -- backup-mark --impermanent "$D2"
expect_rc 0 "backup-mark --impermanent D2"
expect_flags "$S" "backup-mark -i D2" F1=true D1=true D2=false
wrun "${SENVS[@]}" -- backup-mark -i "$D1"
expect_rc 0 "backup-mark -i D1 once D2 is impermanent"
wrun "${SENVS[@]}" -- backup-mark -i "$F1"
expect_rc 0 "backup-mark -i F1 once D1 is impermanent"
# FP's direct delta D3 is not permanent: FP can be made impermanent
wrun "${SENVS[@]}" -- backup-mark -i "$FP"
expect_rc 0 "backup-mark -i FP"
expect_flags "$S" "backup-mark -i down the chain" F1=false D1=false D2=false FP=false
rm -rf "$S"
ok "backup-mark"

# ------------------------------------------------------------------------------------------
R=$T/m
RENVS=(WALG_FILE_PREFIX="$R" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=2 WALG_PG_WAL_SIZE=1)
RESTORE_SEQ=0
declare -A VERIFIED
NRESTORES=0

restore_all() { # REPO WHAT: every backup in REPO (once per distinct input, see test_retention.sh)
	local repo=$1 what=$2 name key want
	while read -r name key want; do
		if [ -n "${VERIFIED[$key]:-}" ] && [ "${FULL_RESTORE:-0}" != 1 ]; then
			continue
		fi
		restore_check "$repo" "$name" "$want" "$what"
		VERIFIED[$key]="$what: $name"
	done < <(MODEL restores "$repo" "$T/marks")
}
mode() { retention_mode "$@"; } # BASE LABEL "EXPECT ARGS" [SETUP] -- DELETE ARGS
refuse() { # BASE LABEL NEEDLE -- DELETE ARGS: exit 1, nothing deleted even with --confirm
	local base=$1 label=$2 needle=$3 before c
	shift 4
	rm -rf "$R"
	cp -a "$base" "$R"
	before=$(snapshot "$R")
	for c in "" --confirm; do
		# shellcheck disable=SC2086
		wrun "${RENVS[@]}" -- delete "$@" $c
		expect_rc 1 "$label ${c:-(dry run)}"
		[ -n "$needle" ] && assert_contains "$W_ERR" "$needle" "$label: message"
		assert_set "$before" "$(snapshot "$R")" "$label ${c}: nothing deleted"
	done
	ok "refused: $label"
}

W=(--wal window)
# marked chain F1-D1-D2 and pushed-permanent FP
mode "$MARKED" "marked: retain 1" "--gone $F2,$D3 ${W[*]}" "" -- retain 1
mode "$MARKED" "marked: before NAME" "--gone $F2,$D3 ${W[*]}" "" -- before "$F3"
mode "$MARKED" "marked: retain FULL 2" "--gone $F2 ${W[*]}" "" -- retain FULL 2
mode "$MARKED" "marked: retain FIND_FULL 2" "--gone $F2 ${W[*]}" "" -- retain FIND_FULL 2
mode "$MARKED" "marked: garbage" "${W[*]} --orphans window" "" -- garbage
mode "$MARKED" "marked: garbage ARCHIVES" "${W[*]}" "" -- garbage ARCHIVES
mode "$MARKED" "marked: target a delta of a permanent full" "--gone $D3" "" -- target "$D3"
refuse "$MARKED" "target a permanent delta" permanent -- target "$D1"
refuse "$MARKED" "target a permanent full" permanent -- target "$F1"
refuse "$MARKED" "target FIND_FULL on a permanent chain" permanent -- target FIND_FULL "$D3"
refuse "$MARKED" "target --target-user-data of a permanent backup" permanent -- target --target-user-data '{"n": "FP"}'
refuse "$MARKED" "everything with permanent backups" FORCE -- everything
mode "$MARKED" "marked: everything FORCE" "--everything" "" -- everything FORCE
# only FP (pushed --permanent)
mode "$PRISTINE" "pushed: retain 1" "--gone $F1,$D1,$D2,$F2,$D3 ${W[*]}" "" -- retain 1
mode "$PRISTINE" "pushed: before TIME" "--gone $F1,$D1,$D2,$F2,$D3 ${W[*]}" "" -- before "$TIME_D3_F3"
refuse "$PRISTINE" "everything with a pushed permanent backup" FORCE -- everything
mode "$PRISTINE" "pushed: everything FORCE" "--everything" "" -- everything FORCE

# WAL-G's backup-mark edits only metadata.json: F2 marked that way is permanent, FP unmarked
# that way is not.
walg_marks() {
	"$PY" - "$1/basebackups_005" "$F2" "$FP" <<'PYEOF'
import json, sys
d, on, off = sys.argv[1:4]
for name, val in ((on, True), (off, False)):
    p = "%s/%s/metadata.json" % (d, name)
    m = json.load(open(p))
    m["is_permanent"] = val
    json.dump(m, open(p, "w"))
PYEOF
}
mode "$PRISTINE" "WAL-G marks: retain 1" "--gone $F1,$D1,$D2,$FP,$D3 ${W[*]}" walg_marks -- retain 1
# the model agrees on what it kept
MODEL info "$R" | awk '{ print $1, $7 }' >"$T/kept"
assert_eq "$F2 1
$F3 0" "$(cat "$T/kept")" "WAL-G marks: kept backups and their permanence"
log "$NRESTORES restores, ${#VERIFIED[@]} distinct restore inputs verified"
