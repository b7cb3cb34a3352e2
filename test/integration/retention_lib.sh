# shellcheck shell=bash
# Shared by the retention tests (sourced after lib.sh): listing helpers and a restore check
# that recovers a backup to the end of its WAL and counts its marks.

assert_set() { # EXPECTED ACTUAL WHAT: two sorted lists, reported as a difference
	[ "$1" = "$2" ] && return 0
	fail "$3: missing [$(comm -23 <(printf '%s\n' "$1") <(printf '%s\n' "$2") | tr '\n' ' ')]; unexpected [$(comm -13 <(printf '%s\n' "$1") <(printf '%s\n' "$2") | tr '\n' ' ')]"
}
files_of() { (cd "$1" && find . -type f ! -name '.*' -printf '%P\n' | sort); }
snapshot() { (cd "$1" && find . -type f -printf '%P %s %T@ %i\n' | sort); }

# restore_check REPO NAME MAXMARK WHAT: restore, recover to the end of WAL, promote; with
# RESTORE_TIMELINE set, recovery_target_timeline is that
restore_check() {
	local repo=$1 name=$2 want=$3 what=$4 d p got
	RESTORE_SEQ=$((RESTORE_SEQ + 1))
	d=$T/restore$RESTORE_SEQ # fresh: no earlier restore's prefetched segments
	wrun WALG_FILE_PREFIX="$repo" WALG_COMPRESSION_METHOD=zstd WALG_PG_WAL_SIZE=1 -- backup-fetch "$d" "$name"
	expect_rc 0 "$what: backup-fetch $name"
	sed -i '/^port = /d; /^listen_addresses/d; /^unix_socket_directories/d; /^archive_command/d; /^archive_mode/d; /^restore_command/d' "$d/postgresql.conf"
	printf "archive_mode = off\nrestore_command = 'env WALG_FILE_PREFIX=%s WALG_PG_WAL_SIZE=1 %s wal-fetch %%f %%p'\nrecovery_target_action = 'promote'\n" \
		"$repo" "$WALC_PG" >>"$d/postgresql.conf"
	[ -z "${RESTORE_TIMELINE:-}" ] || echo "recovery_target_timeline = '$RESTORE_TIMELINE'" >>"$d/postgresql.conf"
	touch "$d/recovery.signal"
	pg_own "$d"
	p=$(free_port)
	pg_start "$d" "$p"
	wait_not_in_recovery "$p"
	got=$(psqlc "$p" "SELECT coalesce(max(i), 0) || ' ' || count(*) FROM marks")
	assert_eq "$want $want" "$got" "$what: $name recovered to the end of its WAL (max mark, count)"
	grep -q "consistent recovery state reached" "$d.log" || fail "$what: $name: no consistent state in the log"
	grep -q "archive recovery complete" "$d.log" || fail "$what: $name: recovery did not complete"
	psqlc "$p" "SELECT count(*) FROM data" >/dev/null || fail "$what: $name: data unreadable"
	pg_stop "$d"
	rm -rf "$d" "$d.log"
	NRESTORES=$((${NRESTORES:-0} + 1))
}
