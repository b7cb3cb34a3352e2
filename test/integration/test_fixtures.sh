#!/usr/bin/env bash
# The WAL-G v3.0.9 fixture repositories (test/fixtures/walg-v3.0.9: every codec, libsodium,
# delta chains, a tablespace) restore with walc: backup-fetch --restore-spec, recovery through
# walc wal-fetch to 'immediate', promotion, and the normalized pg_dumpall equals the expected
# one. Every backup whose data the fixtures keep is restored: the full backup of each codec and
# the whole delta chain of the libsodium fixture, with its base64 and its hex key.
# Also: backup-list and wal-show match WAL-G's own output for every fixture.
#
# Environment: WALC_FIXTURES_WALG (default test/fixtures/walg-v3.0.9; the complete set, with
# every delta chain, is restored in full the same way), FIXTURES (which ones, see below).
. "$(dirname "$0")/lib.sh"
it_setup fixtures

FX=${WALC_FIXTURES_WALG:-$ROOT/test/fixtures/walg-v3.0.9}
[ -d "$FX" ] || fail "fixtures not found at $FX (WALC_FIXTURES_WALG)"
SUMS=$FX/expected/SHA256SUMS
FIXTURES=${FIXTURES:-lz4 zstd brotli lzma zstd-libsodium-base64 zstd-libsodium-base64:hex}

# The state (full, delta1, delta2) backup NAME of FIXTURE restores to: from expected/STAGES in
# the trimmed copy, else from the complete set's expected-NAME.sql.xz entries (links, or files
# holding the link text).
stage_of() { # FIXTURE NAME
	local f=$FX/$1/expected-$2.sql.xz target
	if [ -f "$FX/expected/STAGES" ]; then
		awk -v fx="$1" -v n="$2" '$1 == fx && $2 == n { print $3 }' "$FX/expected/STAGES"
		return
	fi
	if [ -L "$f" ]; then target=$(readlink "$f"); else target=$(cat "$f"); fi
	basename "$target" .sql.xz
}

restore_one() { # FIXTURE TRANSFORM NAME
	local fx=$1 tr=$2 name=$3 dir=$T/$1-$3 port envs=()
	envs=(WALG_FILE_PREFIX="$T/repo-$fx" WALG_PG_WAL_SIZE=1)
	if [ -n "$tr" ]; then
		envs+=(WALG_LIBSODIUM_KEY_PATH="$T/key-$fx" WALG_LIBSODIUM_KEY_TRANSFORM="$tr")
	fi
	sed -e "s|@PGDATA@|$dir/pg|" -e "s|@TABLESPACE_DIR@|$dir/ts|" \
		"$FX/$fx/restore-spec.template.json" >"$T/spec-$fx.json"
	wrun "${envs[@]}" -- backup-fetch --restore-spec "$T/spec-$fx.json" "$dir/pg" "$name"
	expect_rc 0 "backup-fetch $fx $name"
	[ -L "$dir/pg/pg_tblspc/16406" ] || fail "$fx $name: tablespace link not created"
	[ "$(readlink "$dir/pg/pg_tblspc/16406")" = "$dir/ts" ] || fail "$fx $name: tablespace link target"
	[ ! -e "$dir/pg/tablespace_map" ] || fail "$fx $name: tablespace_map restored despite --restore-spec"
	port=$(free_port)
	{
		printf 'archive_mode = off\n'
		printf "restore_command = 'env"
		printf ' %s' "${envs[@]}"
		printf " %s wal-fetch %%f %%p'\n" "$WALC_PG"
		printf "recovery_target = 'immediate'\nrecovery_target_action = 'promote'\n"
	} >>"$dir/pg/postgresql.conf"
	touch "$dir/pg/recovery.signal"
	pg_own "$dir"
	pg_start "$dir/pg" "$port"
	wait_not_in_recovery "$port"
	local got want stage
	stage=$(stage_of "$fx" "$name")
	got=$(dump_norm "$port" | sha256sum | cut -d' ' -f1)
	want=$(awk -v f="$stage.sql" '$2 == f { print $1 }' "$SUMS")
	[ -n "$want" ] || fail "no expected checksum for $stage"
	pg_stop "$dir/pg"
	[ "$got" = "$want" ] || fail "$fx $name: dump differs from expected $stage"
	log "ok: $fx${tr:+ ($tr key)} $name -> $stage"
	rm -rf "$dir"
}

total=0
for spec in $FIXTURES; do
	fx=${spec%%:*}
	tr=""
	[ "$spec" != "$fx" ] && tr=${spec#*:}
	case $fx in *libsodium*) tr=${tr:-base64}; cp "$FX/$fx/libsodium-$tr.key" "$T/key-$fx" ;; esac
	rm -rf "$T/repo-$fx"
	cp -r "$FX/$fx/repo" "$T/repo-$fx"
	pg_own "$T"

	# backup-list: WAL-G's columns; only `modified` (the storage time) may differ, and walc
	# adds two last columns (corrupt_blocks, verified).
	wrun WALG_FILE_PREFIX="$T/repo-$fx" -- backup-list --detail
	expect_rc 0 "backup-list $fx"
	want=$(awk '{ $2 = ""; print }' "$FX/$fx/expected-backup-list-detail.txt")
	got=$(printf '%s\n' "$W_OUT" | awk '{ $2 = ""; NF = 12; print }')
	assert_eq "$want" "$got" "backup-list --detail $fx"

	names=$(printf '%s\n' "$W_OUT" | awk 'NR > 1 { print $1 }')

	# wal-show: exactly WAL-G's table.
	wrun WALG_FILE_PREFIX="$T/repo-$fx" WALG_PG_WAL_SIZE=1 -- wal-show
	expect_rc 0 "wal-show $fx"
	assert_eq "$(cat "$FX/$fx/expected-wal-show.txt")" "$W_OUT" "wal-show $fx"
	restored=0
	for name in $names; do
		# The trimmed copy keeps the sentinels and metadata of every backup (for the
		# listings above) but the data of only some of them (test/fixtures/walg-v3.0.9/README.md).
		if [ ! -d "$T/repo-$fx/basebackups_005/$name/tar_partitions" ]; then
			log "not restored: $fx $name (its data is not in $FX)"
			continue
		fi
		restore_one "$fx" "$tr" "$name"
		restored=$((restored + 1))
	done
	[ "$restored" -gt 0 ] || fail "$fx: no backup to restore in $FX"
	total=$((total + restored))
done
log "all $total fixture backups with data restored"
