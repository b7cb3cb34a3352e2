#!/usr/bin/env bash
# Replacing and creating objects on SFTP (Debian's sshd on 127.0.0.1):
#   1. an object replaced 20 times (st put -f, two 2 MiB contents in turn) while another
#      process reads it 40 times (st cat): every read succeeds and returns one of the two
#      contents whole: posix-rename@openssh.com replaces without a moment of absence;
#   2. six wal-push of one .history name with six different contents at once: exactly one
#      exits 0, the others exit 1 saying the name is taken with different content, and the
#      stored object is the winner's (the draft's RENAME, which OpenSSH never lets replace);
#   3. wal-push of the winner's content again: exit 0 (identical content is already there).
. "$(dirname "$0")/lib.sh"
# shellcheck source=objstore_lib.sh
. "$(dirname "$0")/objstore_lib.sh"
store_setup sftpoverwrite
START=$SECONDS
sftp_start
mkdir -p "$SFTP_ROOT/repo"
pg_own "$SFTP_ROOT"
E=(WALG_SSH_PREFIX="ssh://127.0.0.1$SFTP_ROOT/repo" "${SFTP_ENV[@]}" PGDATA="$T/pgdata")

# ---- 1. replaced while read ---------------------------------------------------------------------
head -c 2097152 /dev/urandom >"$T/a"
head -c 2097152 /dev/urandom >"$T/b"
wrun "${E[@]}" -- st put --no-compress --no-encrypt "$T/a" obj
expect_rc 0 "st put obj"
(
	for i in $(seq 1 20); do
		if [ $((i % 2)) = 0 ]; then f=$T/a; else f=$T/b; fi
		env "${E[@]}" "$WALC" st put -f --no-compress --no-encrypt "$f" obj 2>>"$T/log/writer.err" ||
			echo "put $i failed" >>"$T/writer-failed"
	done
) &
writer=$!
BG_PIDS+=("$writer")
reads=0 a=0 b=0
for i in $(seq 1 40); do
	env "${E[@]}" "$WALC" st cat --no-decompress --no-decrypt obj >"$T/read" 2>"$T/read.err" ||
		{ cat "$T/read.err" >&2; fail "read $i of the object being replaced failed"; }
	assert_no_sanitizer_reports "$T/read.err"
	if cmp -s "$T/read" "$T/a"; then
		a=$((a + 1))
	elif cmp -s "$T/read" "$T/b"; then
		b=$((b + 1))
	else
		fail "read $i returned neither content whole ($(stat -c %s "$T/read") bytes)"
	fi
	reads=$((reads + 1))
done
wait "$writer"
[ ! -e "$T/writer-failed" ] || { cat "$T/writer-failed" "$T/log/writer.err" >&2; fail "a replacing st put failed"; }
assert_eq "" "$(find "$SFTP_ROOT/repo" -name '.*walc-tmp*')" "temporaries left by the replacements"
ok "$reads reads while the object was replaced 20 times: each whole ($a of one content, $b of the other)"

# ---- 2. one name, six writers ----------------------------------------------------------------------
mkdir -p "$T/h"
for i in 1 2 3 4 5 6; do
	mkdir -p "$T/h/$i"
	printf '1\t0/3000000\tbefore writer %s\n' "$i" >"$T/h/$i/00000002.history"
done
pids=()
for i in 1 2 3 4 5 6; do
	env "${E[@]}" PGDATA="$T/h/$i" "$WALC" wal-push "$T/h/$i/00000002.history" \
		>"$T/h/$i.out" 2>"$T/h/$i.err" &
	pids+=($!)
done
won=()
for i in 1 2 3 4 5 6; do
	if wait "${pids[$((i - 1))]}"; then
		won+=("$i")
	else
		assert_match "$(cat "$T/h/$i.err")" "already archived .* with different content|appeared in .* while it was being archived" \
			"writer $i's refusal"
	fi
done
assert_eq 1 "${#won[@]}" "writers whose wal-push of 00000002.history exited 0 (${won[*]})"
# a history file is handed out once a segment of its timeline is archived
fake_segment 000000020000000000000003 1048576 "$T/h/000000020000000000000003"
wrun "${E[@]}" -- wal-push "$T/h/000000020000000000000003"
expect_rc 0 "wal-push of a segment of timeline 2"
wrun "${E[@]}" -- wal-fetch 00000002.history "$T/h/fetched"
expect_rc 0 "wal-fetch 00000002.history"
assert_same_file "$T/h/${won[0]}/00000002.history" "$T/h/fetched" "the stored history file"
ok "six writers of one .history name at once: writer ${won[0]} won, five refused, its bytes stored"

wrun "${E[@]}" PGDATA="$T/h/${won[0]}" -- wal-push "$T/h/${won[0]}/00000002.history"
expect_rc 0 "wal-push of the stored content again"
assert_contains "$W_ERR" "identical content" "wal-push of the stored content again"
ok "the same content again: exit 0, nothing replaced"
log "test_sftp_overwrite passed in $((SECONDS - START)) s"
