#!/usr/bin/env bash
# Key rotation (issue 46 §3). A repository written with libsodium key A (a full and a delta
# backup, their WAL) is rotated to key B: B current, A in the ring (WALG_OLD_KEY_PATHS).
#   - `walc rekey` is SIGKILLed at random moments (FAULT_SEED replays them): after each kill
#     every object decodes with the ring (no moment leaves one that neither key opens), and
#     after the first one the newest backup restores and recovers with A and B in the ring;
#   - rerun to the end, every object decodes with B alone, backup-verify --all --wal passes
#     with B alone, both backups restore and recover with B alone, and WAL-G v3.0.9 given B
#     restores the newest (skipped without WAL-G); a second rerun changes nothing;
#   - B is then rotated to an OpenPGP key C (the other method): the objects decode with C
#     alone, walc_cluster.json records OpenPGP, WAL-G given C restores.
. "$(dirname "$0")/lib.sh"
walg_optional
it_setup rekey

SEED=${FAULT_SEED:-$RANDOM}
RUNS=${FAULT_RUNS:-4}
log "seed $SEED (FAULT_SEED=$SEED replays these kills), $RUNS kills"
for k in A B; do head -c 32 /dev/urandom | base64 >"$T/key$k"; done
chmod 600 "$T/keyA" "$T/keyB"
pitr_source WALG_COMPRESSION_METHOD=zstd WALG_LIBSODIUM_KEY_PATH="$T/keyA" \
	WALG_LIBSODIUM_KEY_TRANSFORM=base64 WALG_DELTA_MAX_STEPS=1
pgbench_init "$PORT" 1
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push (full)"
FULL=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
wal_rounds 2
wrun_pg "${E[@]}" PGHOST="$T" PGPORT="$PORT" -- backup-push "$SRC"
expect_rc 0 "backup-push (delta)"
DELTA=$(printf '%s\n' "$W_ERR" | sed -n 's/.*wrote backup \([^ ]*\) to .*/\1/p')
[[ $DELTA == *_D_* ]] || fail "set-up: the second backup $DELTA is not a delta"
wal_rounds 2
source_archived_stopped
chmod -R a+rX "$R"

BASE=(WALG_FILE_PREFIX="$R" WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=zstd WALG_LIBSODIUM_KEY_TRANSFORM=base64)
RING=("${BASE[@]}" WALG_LIBSODIUM_KEY_PATH="$T/keyB" WALG_OLD_KEY_PATHS="$T/keyA")
ONLY_B=("${BASE[@]}" WALG_LIBSODIUM_KEY_PATH="$T/keyB")
CHECK=("$PY" "$IT_DIR/fault_check.py" repo "$WALC" "$R" --wal-size 1048576)
# decodes ENV...: every object of the repository decodes with that configuration
decodes() {
	env "$@" "${CHECK[@]}" >"$T/check.out" 2>&1 || { cat "$T/check.out" >&2; return 1; }
	tail -n 1 "$T/check.out"
}
decodes "${BASE[@]}" WALG_LIBSODIUM_KEY_PATH="$T/keyA" >/dev/null || fail "set-up: the repository does not decode with A"
! env "${ONLY_B[@]}" "${CHECK[@]}" >/dev/null 2>&1 || fail "set-up: B alone decodes the repository"
NOBJ=$(find "$R" -type f \( -path '*/wal_005/*' -o -path '*/tar_partitions/*' \) | wc -l)
# reads paced (WALG_NETWORK_RATE_LIMIT: each object is read twice) so that a rekey runs for
# about 1.5 s past its one-second burst, which the kills cut into
BYTES=$(find "$R" -type f \( -path '*/wal_005/*' -o -path '*/tar_partitions/*' \) -printf '%s\n' | awk '{ s += $1 } END { print s }')
RING+=(WALG_NETWORK_RATE_LIMIT=$((BYTES * 4 / 5)))

# restores NAME WHAT ENV...: NAME restored and recovered to the end with that configuration
restores() {
	local name=$1 what=$2
	shift 2
	restore_start "$T/restored" "$name" "$@" -- "recovery_target_timeline = 'latest'"
	assert_dump_eq "$T/source.sql" "$RPORT" "$what"
	pg_stop "$T/restored"
	rm -rf "$T/restored" "$T/restored.log"
}

# an uninterrupted run on a copy: the time scale of the kills
cp -a "$R" "$T/scale"
t0=$(date +%s%N)
wrun "${RING[@]}" WALG_FILE_PREFIX="$T/scale" -- rekey
expect_rc 0 "rekey of a copy"
SCALE_MS=$((($(date +%s%N) - t0) / 1000000))
assert_contains "$W_OUT" "re-encrypted with the current key, 0 were already, 0 problems" "rekey of a copy"
rm -rf "$T/scale"
log "$NOBJ encrypted objects ($BYTES bytes); an uninterrupted rekey took ${SCALE_MS} ms"

killed=0
for n in $(seq 1 "$RUNS"); do
	# each run cut within the first 30% of a whole one's time: most are killed mid-way
	max=$(awk -v ms="$SCALE_MS" 'BEGIN { printf "%.3f", ms / 1000 * 0.3 }')
	res=$("$PY" "$IT_DIR/fault_kill.py" --tag "rekey-$$" --min 0.03 --max "$max" --seed $((SEED + n)) \
		--out "$T/kill.out" --err "$T/kill.err" -- env "${RING[@]}" "$WALC" rekey)
	case $res in killed*) killed=$((killed + 1)) ;; esac
	counts=$(decodes "${RING[@]}") || fail "after kill $n ($res): an object no key of the ring opens"
	done_now=$(grep -c '^rekeyed ' "$T/kill.out" || true)
	log "kill $n: $res; $done_now objects rekeyed by it; every object decodes with A and B in the ring ($counts)"
	if [ "$n" = 1 ]; then
		restores LATEST "mid-rotation, with A and B in the ring" "${RING[@]}"
	fi
done
[ "$killed" -ge 2 ] || fail "only $killed rekey runs were killed before they ended"
ok "$killed of $RUNS rekey runs killed mid-way: every object decoded with the ring after each; LATEST restored mid-rotation"

wrun "${RING[@]}" -- rekey
expect_rc 0 "the rerun"
assert_match "$W_OUT" "rekey: [0-9]+ objects: [0-9]+ re-encrypted with the current key, [0-9]+ were already, 0 problems" "the rerun's summary"
[ -z "$(find "$R" -path '*walc_rekey*' -type f)" ] || fail "temporary copies left under walc_rekey/: $(find "$R" -path '*walc_rekey*' -type f)"
decodes "${ONLY_B[@]}" >/dev/null || fail "after the rerun, an object does not decode with B alone"
wrun "${ONLY_B[@]}" -- backup-verify --all --wal
expect_rc 0 "backup-verify --all --wal with B alone"
restores "$FULL" "the full backup with B alone" "${ONLY_B[@]}"
restores "$DELTA" "the delta backup with B alone" "${ONLY_B[@]}"
wrun "${RING[@]}" -- rekey
assert_contains "$W_OUT" " 0 re-encrypted with the current key" "a second rerun changes nothing"
ok "the rerun finished the rotation: every object decodes with B alone, both backups verify, restore and recover with B alone"

if [ -x "$WALG" ]; then
	walg_wrapper "${ONLY_B[@]}"
	walg_restores_latest "$T/walg-b" "WAL-G v3.0.9 given B"
	pg_stop "$T/walg-b"
	rm -rf "$T/walg-b"
	ok "WAL-G v3.0.9 given B restores the newest backup and recovers with its own wal-fetch"
else
	log "skipped: WAL-G parts (no WAL-G binary at $WALG)"
fi

# B (libsodium) to C (OpenPGP): the other method
export GNUPGHOME=$T/gnupg
mkdir -m 700 "$GNUPGHOME"
gpg --batch --passphrase '' --quick-gen-key "walc-c <c@walc.test>" future-default default never 2>/dev/null
gpg --batch --armor --export-secret-keys c@walc.test >"$T/keyC.asc"
gpgconf --kill gpg-agent 2>/dev/null || true
pg_own "$T/keyC.asc"
ONLY_C=(WALG_FILE_PREFIX="$R" WALG_PG_WAL_SIZE=1 WALG_COMPRESSION_METHOD=zstd WALG_PGP_KEY_PATH="$T/keyC.asc")
wrun "${ONLY_C[@]}" WALG_OLD_KEY_PATHS="base64:$T/keyB" -- rekey
expect_rc 0 "rekey from B (libsodium) to C (OpenPGP)"
decodes "${ONLY_C[@]}" >/dev/null || fail "after the rotation to OpenPGP, an object does not decode with C alone"
assert_contains "$(cat "$R/walc_cluster.json")" '"encryption":"OpenPGP"' "walc_cluster.json after the rotation to OpenPGP"
if [ -x "$WALG" ]; then
	walg_wrapper "${ONLY_C[@]}"
	walg_restores_latest "$T/walg-c" "WAL-G v3.0.9 given C (OpenPGP)"
	pg_stop "$T/walg-c"
fi
ok "rotated from libsodium to OpenPGP: every object decodes with C alone$([ -x "$WALG" ] && echo ", WAL-G given C restores")"
