# shellcheck shell=bash
# Shared by the retention tests (sourced after lib.sh): listing helpers, a restore check that
# recovers a backup to the end of its WAL and counts its marks, and one delete mode checked
# against the model (retention_repo.py).

assert_set() { # EXPECTED ACTUAL WHAT: two sorted lists, reported as a difference
	[ "$1" = "$2" ] && return 0
	fail "$3: missing [$(comm -23 <(printf '%s\n' "$1") <(printf '%s\n' "$2") | tr '\n' ' ')]; unexpected [$(comm -13 <(printf '%s\n' "$1") <(printf '%s\n' "$2") | tr '\n' ' ')]"
}
MODEL() { "$PY" "$IT_DIR/retention_repo.py" "$@"; }
files_of() { (cd "$1" && find . -type f ! -name '.*' -printf '%P\n' | sort); }
snapshot() { (cd "$1" && find . -type f -printf '%P %s %T@ %i\n' | sort); }

# restore_check REPO NAME MAXMARK WHAT: restore, recover to the end of WAL, promote; with
# RESTORE_TIMELINE set, recovery_target_timeline is that
restore_check() {
	local repo=$1 name=$2 want=$3 what=$4 d p got
	RESTORE_SEQ=$((RESTORE_SEQ + 1))
	d=$T/restore$RESTORE_SEQ # fresh: no earlier restore's prefetched segments
	restore_start "$d" "$name" WALG_FILE_PREFIX="$repo" WALG_COMPRESSION_METHOD=zstd WALG_PG_WAL_SIZE=1 \
		-- "recovery_target_timeline = '${RESTORE_TIMELINE:-latest}'"
	p=$RPORT
	got=$(psqlc "$p" "SELECT coalesce(max(i), 0) || ' ' || count(*) FROM marks")
	assert_eq "$want $want" "$got" "$what: $name recovered to the end of its WAL (max mark, count)"
	grep -q "consistent recovery state reached" "$d.log" || fail "$what: $name: no consistent state in the log"
	grep -q "archive recovery complete" "$d.log" || fail "$what: $name: recovery did not complete"
	psqlc "$p" "SELECT count(*) FROM data" >/dev/null || fail "$what: $name: data unreadable"
	pg_stop "$d"
	rm -rf "$d" "$d.log"
	NRESTORES=$((${NRESTORES:-0} + 1))
}

# retention_mode BASE LABEL "EXPECT ARGS" [SETUP] -- DELETE ARGS: on a fresh copy of the
# repository BASE in $R (after SETUP $R, when given), the dry run lists exactly what the model
# expects to go and changes nothing; --confirm deletes exactly that and reports it; then
# restore_all $R LABEL (the caller's) restores what remains. RENVS: walc's environment.
retention_mode() {
	local base=$1 label=$2 spec=$3 setup="" expected del before would
	shift 3
	if [ "$1" != -- ]; then setup=$1; shift; fi
	shift
	rm -rf "$R"
	cp -a "$base" "$R"
	[ -z "$setup" ] || "$setup" "$R"
	# shellcheck disable=SC2086
	expected=$(MODEL expect "$R" $spec)
	del=$(comm -23 <(files_of "$R") <(printf '%s\n' "$expected"))
	before=$(snapshot "$R")
	wrun "${RENVS[@]}" -- delete "$@"
	expect_rc 0 "$label: dry run"
	would=$(printf '%s\n' "$W_OUT" | sed -n 's/^would delete //p' | sort)
	assert_set "$del" "$would" "$label: the dry run lists exactly the objects to delete"
	assert_set "$before" "$(snapshot "$R")" "$label: the dry run changes nothing"
	wrun "${RENVS[@]}" -- delete "$@" --confirm
	expect_rc 0 "$label: --confirm"
	assert_set "$del" "$(printf '%s\n' "$W_OUT" | sed -n 's/^deleted //p' | sort)" "$label: --confirm reports what it deleted"
	assert_set "$expected" "$(files_of "$R")" "$label: exactly the expected objects remain"
	restore_all "$R" "$label"
	ok "$label: delete $* ($(nlines "$del") objects deleted)"
}
