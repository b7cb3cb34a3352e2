#!/usr/bin/env bash
# Where walc used to differ from WAL-G for no reason (issue 43 §6), each step run by walc and,
# when ../shared/tools/wal-g (v3.0.9) is at hand, by WAL-G on a copy of the same repository,
# both outcomes compared:
#   - WALG_GPG_KEY_ID beside WALG_PGP_KEY_PATH: the key is used, the id ignored (a warning
#     outside wal-push); alone it stays refused;
#   - delete before TIME with a time copied from backup-list: the backup it was copied from
#     is kept, the older one goes;
#   - wal-verify integrity with no backup: the timeline is scanned from its first segment;
#     missing segments before the first archived one are a WARNING, a hole after it a FAILURE;
#   - delete target of a permanent backup: the impermanent delta built on it goes, the
#     permanent backup stays, exit 0.
. "$(dirname "$0")/lib.sh"
WALG=${WALC_WALG:-$ROOT/../shared/tools/wal-g}
[ -x "$WALG" ] || WALG=""
it_setup walg_parity
[ -n "$WALG" ] || echo "skipped: the comparisons with WAL-G (no binary at $ROOT/../shared/tools/wal-g)"

walc_archiving "$T/src" WALG_COMPRESSION_METHOD=lz4 WALG_DELTA_MAX_STEPS=2
psqlc "$PORT" "CREATE TABLE t AS SELECT g FROM generate_series(1, 20000) g"
PGENV=(PGHOST="$T" PGPORT="$PORT" PGUSER=postgres)
push() {
	wrun_pg "${E[@]}" "${PGENV[@]}" -- backup-push "$T/src" "$@"
	expect_rc 0 "backup-push $*"
	sleep 1.1 # sentinels a second apart: listed times are whole seconds
}
push --full
push
push --full
mapfile -t names < <(wrun "${E[@]}" -- backup-list && sed -n 's/^\(base_[0-9A-F_D]*\) .*/\1/p' <<<"$W_OUT")
[ "${#names[@]}" = 3 ] || fail "expected three backups, got: ${names[*]}"
F1=${names[0]} D1=${names[1]} F2=${names[2]}

# each TOOL copy: run the same command in a copy of the repository per tool
copy_for() { rm -rf "$T/repo-$1"; cp -a "$R" "$T/repo-$1"; pg_own "$T/repo-$1"; }
walg() { # DIR ARGS...: WAL-G on a repository copy, its output in WG_OUT, status in WG_RC
	local dir=$1
	shift
	set +e
	WG_OUT=$(env WALG_FILE_PREFIX="$dir" WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=lz4 \
		"${PGENV[@]}" PGDATA="$T/src" "$WALG" "$@" 2>&1)
	WG_RC=$?
	set -e
}
listed() { sed -n 's/^\(base_[0-9A-F_D]*\) .*/\1/p' <<<"$1" | tr '\n' ' '; }

# 1. delete before TIME, the time copied from backup-list's listing of D1
wrun "${E[@]}" -- backup-list
when=$(awk -v n="$D1" '$1 == n { print $2 }' <<<"$W_OUT")
[ -n "$when" ] || fail "no listed time for $D1 in: $W_OUT"
copy_for walc
wrun WALG_FILE_PREFIX="$T/repo-walc" WALG_PG_WAL_SIZE=1 -- delete before FIND_FULL "$when" --confirm
expect_rc 0 "delete before FIND_FULL $when"
wrun WALG_FILE_PREFIX="$T/repo-walc" -- backup-list
walc_kept=$(listed "$W_OUT")
assert_eq "$F1 $D1 $F2 " "$walc_kept" "FIND_FULL keeps D1's base: the backups after delete before FIND_FULL $when"
wrun WALG_FILE_PREFIX="$T/repo-walc" WALG_PG_WAL_SIZE=1 -- delete before "$F2" --confirm
copy_for walc
wrun WALG_FILE_PREFIX="$T/repo-walc" WALG_PG_WAL_SIZE=1 -- delete before "$(awk -v n="$F2" '$1 == n { print $2 }' <<<"$(env "${E[@]}" "$WALC" backup-list 2>/dev/null)")" --confirm
expect_rc 0 "delete before F2's listed time"
wrun WALG_FILE_PREFIX="$T/repo-walc" -- backup-list
walc_kept=$(listed "$W_OUT")
assert_eq "$F2 " "$walc_kept" "the backups after delete before F2's listed time"
if [ -n "$WALG" ]; then
	copy_for walg
	walg "$T/repo-walg" delete before "$(awk -v n="$F2" '$1 == n { print $2 }' <<<"$(env "${E[@]}" "$WALC" backup-list 2>/dev/null)")" --confirm
	[ "$WG_RC" = 0 ] || fail "WAL-G delete before: $WG_OUT"
	walg "$T/repo-walg" backup-list
	assert_eq "$walc_kept" "$(listed "$WG_OUT")" "WAL-G's backups after the same delete before"
fi
ok "delete before a listed time keeps the backup it was copied from"

# 2. delete target of a permanent backup: walc refuses it, naming it (WAL-G v3.0.9 deletes it
# and the delta built on it, measured here: see docs/DIFFERENCES.md)
copy_for walc
wrun WALG_FILE_PREFIX="$T/repo-walc" -- backup-mark "$F1"
expect_rc 0 "backup-mark $F1"
wrun WALG_FILE_PREFIX="$T/repo-walc" WALG_PG_WAL_SIZE=1 -- delete target "$F1" --confirm
expect_rc 1 "delete target of a permanent backup"
assert_contains "$W_ERR" "$F1 is permanent: nothing deleted (backup-mark -i $F1 first)" "the refusal"
wrun WALG_FILE_PREFIX="$T/repo-walc" -- backup-list
assert_eq "$F1 $D1 $F2 " "$(listed "$W_OUT")" "the backups after a refused delete target"
wrun WALG_FILE_PREFIX="$T/repo-walc" -- backup-mark -i "$F1"
wrun WALG_FILE_PREFIX="$T/repo-walc" WALG_PG_WAL_SIZE=1 -- delete target "$F1" --confirm
expect_rc 0 "delete target after backup-mark -i (CloudNativePG's plugin's order)"
wrun WALG_FILE_PREFIX="$T/repo-walc" -- backup-list
assert_eq "$F2 " "$(listed "$W_OUT")" "the backups after delete target"
if [ -n "$WALG" ]; then
	copy_for walg
	walg "$T/repo-walg" backup-mark "$F1"
	walg "$T/repo-walg" delete target "$F1" --confirm
	walg "$T/repo-walg" backup-list
	assert_eq "$F2 " "$(listed "$WG_OUT")" "WAL-G v3.0.9 deletes a permanent target and its delta"
fi
ok "delete target of a permanent backup: refused, nothing deleted; unmarked, deleted"

# 3. wal-verify integrity with no backup: from the first segment
verify_status() { sed -n 's/.*integrity check status: \([A-Z]*\).*/\1/p' <<<"$1"; }
# more segments than WALG_UPLOAD_CONCURRENCY (16), within which a missing one may still be
# uploading
for _ in $(seq 1 24); do
	psqlc "$PORT" "INSERT INTO t SELECT g FROM generate_series(1, 100) g"
	switch_wal "$PORT" >/dev/null
done
wait_archived "$T/src" "$(switch_wal "$PORT")" 60
copy_for walc
rm -rf "$T/repo-walc/basebackups_005"
first=$(cd "$T/repo-walc/wal_005" && ls | grep -E '^[0-9A-F]{24}\.' | sort | head -n 1)
rm -f "$T/repo-walc/wal_005/$first"
wrun_pg WALG_FILE_PREFIX="$T/repo-walc" WALG_PG_WAL_SIZE=1 "${PGENV[@]}" -- wal-verify integrity
assert_eq WARNING "$(verify_status "$W_OUT")" "wal-verify without backups, the first segment missing"
assert_contains "$W_OUT" "${first%%.*}" "the scan reaches the first segment"
mid=$(cd "$T/repo-walc/wal_005" && ls | grep -E '^[0-9A-F]{24}\.' | sort | sed -n 3p)
[ -n "$mid" ] || fail "not enough archived segments"
cp "$T/repo-walc/wal_005/$mid" "$T/mid.keep"
rm -f "$T/repo-walc/wal_005/$mid"
wrun_pg WALG_FILE_PREFIX="$T/repo-walc" WALG_PG_WAL_SIZE=1 "${PGENV[@]}" -- wal-verify integrity
expect_rc 1 "wal-verify with a hole after the first archived segment"
assert_eq FAILURE "$(verify_status "$W_OUT")" "wal-verify without backups, a hole"
if [ -n "$WALG" ]; then
	walg "$T/repo-walc" wal-verify integrity
	assert_eq FAILURE "$(verify_status "$WG_OUT")" "WAL-G's wal-verify on the same repository"
	cp "$T/mid.keep" "$T/repo-walc/wal_005/$mid"
	walg "$T/repo-walc" wal-verify integrity
	assert_eq WARNING "$(verify_status "$WG_OUT")" "WAL-G's wal-verify with only the first segment missing"
fi
ok "wal-verify integrity with no backup scans from the first segment"

# 4. WALG_GPG_KEY_ID beside an OpenPGP key: the key is used
PGPFX=$ROOT/test/fixtures/walg-v3.0.9-pgp/keys
seg=$(cd "$T/src/pg_wal" && ls | grep -E '^[0-9A-F]{24}$' | tail -n 1)
cp "$T/src/pg_wal/$seg" "$T/seg"
mkdir -p "$T/pgp"
pg_own "$T/pgp"
wrun WALG_FILE_PREFIX="$T/pgp" WALG_PG_WAL_SIZE=1 WALG_GPG_KEY_ID=walc-test -- wal-push "$T/seg"
expect_rc 1 "WALG_GPG_KEY_ID alone"
assert_contains "$W_ERR" "WALG_GPG_KEY_ID is set, but" "the refusal"
wrun WALG_FILE_PREFIX="$T/pgp" WALG_PG_WAL_SIZE=1 WALG_GPG_KEY_ID=walc-test \
	WALG_PGP_KEY_PATH="$PGPFX/pgp-public.asc" -- backup-list
assert_contains "$W_ERR" "WALG_GPG_KEY_ID is ignored" "the warning beside a key"
cp "$T/seg" "$T/$seg"
wrun WALG_FILE_PREFIX="$T/pgp" WALG_PG_WAL_SIZE=1 WALG_GPG_KEY_ID=walc-test \
	WALG_PGP_KEY_PATH="$PGPFX/pgp-public.asc" -- wal-push "$T/$seg"
expect_rc 0 "wal-push with WALG_GPG_KEY_ID and WALG_PGP_KEY_PATH"
assert_not_contains "$W_ERR" "GPG_KEY_ID" "wal-push's stderr (PostgreSQL's log)"
DEC=(WALG_FILE_PREFIX="$T/pgp" WALG_PG_WAL_SIZE=1 WALG_GPG_KEY_ID=walc-test
	WALG_PGP_KEY_PATH="$PGPFX/pgp-secret.asc" WALG_PGP_KEY_PASSPHRASE="$(cat "$PGPFX/passphrase.txt")")
wrun "${DEC[@]}" -- wal-fetch "$seg" "$T/back"
expect_rc 0 "wal-fetch with the secret key and the id"
assert_same_file "$T/seg" "$T/back" "the segment encrypted beside a key id"
if [ -n "$WALG" ]; then
	set +e
	env "${DEC[@]}" "$WALG" wal-fetch "$seg" "$T/back-walg" >"$T/walg.out" 2>&1
	rc=$?
	set -e
	[ "$rc" = 0 ] || fail "WAL-G wal-fetch of what walc encrypted beside a key id: $(cat "$T/walg.out")"
	assert_same_file "$T/seg" "$T/back-walg" "WAL-G's fetch of the same segment"
fi
ok "WALG_GPG_KEY_ID beside an OpenPGP key is ignored, as WAL-G ignores it"
