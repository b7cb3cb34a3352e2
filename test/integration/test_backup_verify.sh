#!/usr/bin/env bash
# backup-verify (issue 18 §1): clean backups (full and delta, plain and libsodium) pass with
# exit 0; each kind of damage is found, named (object, file, block) and exits 1: a flipped byte
# in a tar partition (plain and encrypted), a page with a bad checksum stored by backup-push, a
# WAL segment missing between start and stop, a truncated increment in a delta, and a
# files_metadata.json checksum that does not match. WAL-G's fixtures verify clean.
. "$(dirname "$0")/lib.sh"
it_setup backup_verify

mkdir -p "$T/repo" "$T/repo-enc"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/key.hex"
chmod 600 "$T/key.hex"
pg_own "$T"
PLAIN=(WALG_FILE_PREFIX="$T/repo" WALG_COMPRESSION_METHOD=zstd WALG_DELTA_MAX_STEPS=3)
ENC=(WALG_FILE_PREFIX="$T/repo-enc" WALG_COMPRESSION_METHOD=lz4
	WALG_LIBSODIUM_KEY_PATH="$T/key.hex" WALG_LIBSODIUM_KEY_TRANSFORM=hex)
pg_init "$T/src" --data-checksums
PORT=$(free_port)
# One upload at a time: wal-push's markers of background uploads are per cluster, not per
# repository, and would let one repository skip a segment the other got (--wal finds that).
ARCH="WALG_UPLOAD_CONCURRENCY=1"
pg_conf "$T/src" "wal_level = replica" "archive_mode = on" "checkpoint_timeout = 1h" \
	"archive_command = 'env $ARCH ${PLAIN[*]} $WALC_PG wal-push %p && env $ARCH ${ENC[*]} $WALC_PG wal-push %p'"
pg_start "$T/src" "$PORT"
sql() { as_pg "$PGBIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$T" -p "$PORT" -U postgres -d postgres -c "$1"; }
as_pg "$PGBIN/pgbench" -h "$T" -p "$PORT" -i -s 2 -q postgres >/dev/null 2>&1
sql "CREATE TABLE keep (id int PRIMARY KEY, v text); INSERT INTO keep SELECT g, md5(g::text) FROM generate_series(1, 20000) g"
sql "CHECKPOINT"

push() { # REPO-ENVS... -- ARGS: backup-push; prints the backup name
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	wrun_pg "${envs[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$T/src" "$@"
	expect_rc 0 "backup-push $*"
	printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p'
}
verify() { # REPO-ENVS... -- ARGS: backup-verify
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	wrun "${envs[@]}" WALG_DOWNLOAD_CONCURRENCY=3 -- backup-verify "$@"
}
expect_clean() { # WHAT
	expect_rc 0 "$1"
	assert_match "$W_OUT" "^backup [^ ]+: OK: " "$1: summary"
	assert_not_contains "$W_OUT" "PROBLEM" "$1"
}
expect_problem() { # WHAT NEEDLE...: exit 1, a problem line containing every needle
	local what=$1 line
	shift
	[ "$W_RC" = 1 ] || fail "$what: expected exit 1, got $(wdesc); stdout: $W_OUT"
	line=$(grep -m 1 '^PROBLEM ' <<<"$W_OUT" || true)
	[ -n "$line" ] || fail "$what: no PROBLEM line in: $W_OUT"
	for n in "$@"; do assert_contains "$(grep '^PROBLEM ' <<<"$W_OUT")" "$n" "$what"; done
	assert_match "$W_OUT" "^backup [^ ]+: FAILED: " "$what: summary"
	log "found: $line"
}
# clone NAME: a copy of the plain repository to damage
clone() { rm -rf "${T:?}/$1"; cp -a "$T/repo" "$T/$1"; }
largest_part() { # REPO BACKUP: the key of its largest ordinary tar partition
	find "$1/basebackups_005/$2/tar_partitions" -name 'part_*' -printf '%s %p\n' | sort -n | tail -n 1 | cut -d' ' -f2
}

FULL=$(push "${PLAIN[@]}" --)
FULL_ENC=$(push "${ENC[@]}" --)
log "full backups $FULL (zstd), $FULL_ENC (lz4 + libsodium)"
verify "${PLAIN[@]}" -- "$FULL"
expect_clean "clean full backup"
verify "${ENC[@]}" -- LATEST
expect_clean "clean encrypted backup"
assert_match "$W_ERR" "data checksums on" "pg_control read"

# A delta whose increments the truncation case damages.
sql "UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid % 50 = 0; CHECKPOINT"
DELTA=$(push "${PLAIN[@]}" --)
[[ $DELTA == *_D_* ]] || fail "second push must be a delta: $DELTA"
verify "${PLAIN[@]}" -- --json "$DELTA"
expect_rc 0 "clean delta backup (--json)"
"$PY" - "$W_OUT" <<'PYEOF' || fail "backup-verify --json: $W_OUT"
import json, sys
d = json.loads(sys.argv[1])
assert d["problems"] == [], d
b = d["backups"][0]
assert b["chain"] == 2 and b["problems"] == 0 and b["pages"] > 0 and b["wal_segments"] >= 1, b
PYEOF
# --wal reads on to the newest segment: let the archiver catch up with backup-push's own uploads.
seg=$(switch_wal "$PORT")
wait_archived "$T/src" "$seg"
verify "${PLAIN[@]}" -- --all --wal
expect_rc 0 "--all --wal: $W_OUT"
ok "clean backups verify"

# 1. A flipped byte in a tar partition, plain and encrypted.
clone flip
part=$(largest_part "$T/flip" "$FULL")
flip_byte "$part" $(($(stat -c %s "$part") / 2))
verify WALG_FILE_PREFIX="$T/flip" -- "$FULL"
expect_problem "flipped byte (zstd)" "${part#"$T/flip/"}"
part=$(largest_part "$T/repo-enc" "$FULL_ENC")
cp "$part" "$T/enc.orig"
flip_byte "$part" $(($(stat -c %s "$part") / 2))
verify "${ENC[@]}" -- "$FULL_ENC"
expect_problem "flipped byte (libsodium)" "${part#"$T/repo-enc/"}"
cp "$T/enc.orig" "$part"
ok "flipped bytes found"

# 1b. A tar partition deleted: one problem naming it, not one per file it held.
clone gone
part=$(largest_part "$T/gone" "$FULL")
rm "$part"
verify WALG_FILE_PREFIX="$T/gone" -- "$FULL"
expect_problem "deleted partition" "${part#"$T/gone/"}: tar partition missing"
[ "$(grep -c '^PROBLEM ' <<<"$W_OUT")" = 1 ] || fail "deleted partition: one problem, got: $W_OUT"
ok "missing partition found"

# 2. A files_metadata.json checksum that does not match.
clone meta
"$PY" - "$T/meta/basebackups_005/$FULL/files_metadata.json" <<'PYEOF' >"$T/meta.file"
import json, sys
p = sys.argv[1]
d = json.load(open(p))
name = "/global/1262"
d["Files"][name]["Checksum"] = "xxh3-128:" + "0" * 32
json.dump(d, open(p, "w"))
print(name)
PYEOF
verify WALG_FILE_PREFIX="$T/meta" -- "$FULL"
expect_problem "files_metadata.json checksum" "$(cat "$T/meta.file")" "files_metadata.json says"
ok "checksum mismatch found"

# 2b. files_metadata.json naming a file no partition holds (in a document with TarFileSets
# first), and a delta marking a file unchanged that its base does not have.
clone meta2
"$PY" - "$T/meta2/basebackups_005/$FULL/files_metadata.json" \
	"$T/meta2/basebackups_005/$DELTA/files_metadata.json" <<'PYEOF'
import json, sys
full, delta = sys.argv[1], sys.argv[2]
d = json.load(open(full))
d["Files"]["/base/1/999999"] = {"Size": 1}
json.dump({"TarFileSets": d.pop("TarFileSets"), **d}, open(full, "w"))
d = json.load(open(delta))
d["Files"]["/base/1/888888"] = {"IsSkipped": True}
json.dump(d, open(delta, "w"))
PYEOF
verify WALG_FILE_PREFIX="$T/meta2" -- "$DELTA"
expect_problem "a file no partition holds" "/base/1/999999: listed as stored, but no tar partition holds it"
assert_contains "$W_OUT" "/base/1/888888: unchanged since the base, but its base $FULL has no such file" \
	"a skipped file its base lacks"
[ "$(grep -c '^PROBLEM ' <<<"$W_OUT")" = 2 ] || fail "files_metadata.json problems: two, got: $W_OUT"
ok "files_metadata.json's own problems found"

# 3. A WAL segment between the backup's start and stop is missing.
clone nowal
seg=${FULL:5:24}
rm "$T/nowal/wal_005/$seg".*
verify WALG_FILE_PREFIX="$T/nowal" -- "$FULL"
expect_problem "missing WAL segment" "wal_005/$seg" "missing"
ok "missing WAL found"

# 4. A truncated increment in the delta: its largest increment (one with pages) rewritten 100
# bytes short in a copy of its partition, which is then stored again.
clone trunc
"$PY" - "$T/trunc/basebackups_005/$DELTA/files_metadata.json" >"$T/incs" <<'PYEOF'
import json, sys
files = json.load(open(sys.argv[1]))["Files"]
print("\n".join(k for k, v in files.items() if v.get("IsIncremented")))
PYEOF
[ -s "$T/incs" ] || fail "the delta has no increment"
found="" inc=""
for obj in "$T/trunc/basebackups_005/$DELTA/tar_partitions"/part_*; do
	key=${obj#"$T/trunc/"}
	wrun WALG_FILE_PREFIX="$T/trunc" -- st get "$key" "$T/part.tar"
	expect_rc 0 "st get $key"
	if inc=$("$PY" - "$T/part.tar" "$T/incs" <<'PYEOF'
import io, sys, tarfile
src, incs = sys.argv[1], set(open(sys.argv[2]).read().split())
members = []
with tarfile.open(src, "r:") as t:
    for m in t.getmembers():
        members.append((m, t.extractfile(m).read() if m.isfile() else None))
cands = [(len(d), m.name) for m, d in members if d is not None and m.name in incs and len(d) > 8192]
if not cands:
    sys.exit(1)
name = max(cands)[1]
with tarfile.open(src + ".new", "w:", format=tarfile.PAX_FORMAT) as t:
    for m, data in members:
        if m.name == name:
            data = data[: len(data) - 100]
            m.size = len(data)
        t.addfile(m, io.BytesIO(data) if data is not None else None)
print(name)
PYEOF
	); then
		wrun WALG_FILE_PREFIX="$T/trunc" -- st rm "$key"
		expect_rc 0 "st rm"
		wrun WALG_FILE_PREFIX="$T/trunc" WALG_COMPRESSION_METHOD=zstd -- st put "$T/part.tar.new" "${key%.zst}"
		expect_rc 0 "st put"
		found=$key
		break
	fi
done
[ -n "$found" ] || fail "no partition of $DELTA holds an increment with pages"
verify WALG_FILE_PREFIX="$T/trunc" -- "$DELTA"
expect_problem "truncated increment" "$found" "$inc" "needs" "member has"
ok "truncated increment found"

# 5. A page with a bad checksum, stored by backup-push (without --verify).
relpath=$(sql "SELECT pg_relation_filepath('keep')")
pg_stop "$T/src"
# Bytes in the middle of block 2 (tuple data): the header stays valid, the checksum not.
printf '\xde\xad\xbe\xef' | dd of="$T/src/$relpath" bs=1 seek=$((2 * 8192 + 5000)) conv=notrunc status=none
pg_start "$T/src" "$PORT"
BAD=$(push "${PLAIN[@]}" -- --full)
verify "${PLAIN[@]}" -- "$BAD"
expect_problem "bad page checksum" "/$relpath block 2: checksum mismatch"
ok "bad page checksum found"
pg_stop "$T/src"

# 5b. A backup on timeline 2 (a restored, promoted copy): its history file is read and must be
# sound; a bad or missing one is named.
restore_start "$T/tl2" "$FULL" "${PLAIN[@]}"
pg_stop "$T/tl2"
pg_conf "$T/tl2" "archive_mode = on" "archive_command = 'env $ARCH ${PLAIN[*]} $WALC_PG wal-push %p'"
# shellcheck disable=SC2153 # RPORT is set by restore_start
pg_start "$T/tl2" "$RPORT"
wrun_pg "${PLAIN[@]}" -- wal-push "$T/tl2/pg_wal/00000002.history"
expect_rc 0 "wal-push 00000002.history"
wrun_pg "${PLAIN[@]}" PGHOST="$T" PGPORT="$RPORT" -- backup-push "$T/tl2" --full
expect_rc 0 "backup-push on timeline 2"
TL2=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
pg_stop "$T/tl2"
[[ $TL2 == base_00000002* ]] || fail "the promoted copy's backup must be on timeline 2: $TL2"
verify "${PLAIN[@]}" -- "$TL2"
expect_clean "backup on timeline 2"
clone hist
hkey=$(cd "$T/hist" && find wal_005 -name '00000002.history*')
printf '3\t0/5000000\tno such parent\n' >"$T/bad.history"
wrun WALG_FILE_PREFIX="$T/hist" -- st rm "$hkey"
expect_rc 0 "st rm $hkey"
wrun WALG_FILE_PREFIX="$T/hist" WALG_COMPRESSION_METHOD=zstd -- st put "$T/bad.history" wal_005/00000002.history
expect_rc 0 "st put a bad history"
verify WALG_FILE_PREFIX="$T/hist" -- "$TL2"
expect_problem "bad history file" "wal_005/00000002.history" "parent timeline is not below"
wrun WALG_FILE_PREFIX="$T/hist" -- st rm "wal_005/00000002.history.zst"
verify WALG_FILE_PREFIX="$T/hist" -- "$TL2"
expect_problem "missing history file" "wal_005/00000002.history: timeline history file missing"
ok "timeline history checked"

# 6. WAL-G's fixtures: every backup whose data they keep verifies clean.
FX=$ROOT/test/fixtures/walg-v3.0.9
for fx in lz4 zstd brotli lzma; do
	cp -r "$FX/$fx/repo" "$T/fx-$fx"
	name=$(find "$T/fx-$fx/basebackups_005" -maxdepth 1 -type d -regex '.*/base_[0-9A-F]*' -printf '%f\n' |
		grep -E '^base_[0-9A-F]{24}$' | sort | head -n 1)
	verify WALG_FILE_PREFIX="$T/fx-$fx" WALG_PG_WAL_SIZE=1 -- "$name"
	expect_clean "WAL-G fixture $fx $name"
done
cp -r "$FX/zstd-libsodium-base64/repo" "$T/fx-sodium"
cp "$FX/zstd-libsodium-base64/libsodium-base64.key" "$T/fx-sodium.key"
chmod 600 "$T/fx-sodium.key"
verify WALG_FILE_PREFIX="$T/fx-sodium" WALG_PG_WAL_SIZE=1 WALG_LIBSODIUM_KEY_PATH="$T/fx-sodium.key" \
	WALG_LIBSODIUM_KEY_TRANSFORM=base64 -- --all
expect_rc 0 "WAL-G fixture zstd-libsodium --all: $W_OUT"
[ "$(grep -c ': OK: ' <<<"$W_OUT")" = 3 ] || fail "three fixture backups verified: $W_OUT"
ok "WAL-G fixtures verify clean"
log "backup-verify: all cases ok"
