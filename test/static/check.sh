#!/usr/bin/env bash
# Self-check of the static walc binary (default <repo>/walc-static, or $1):
#   - an x86-64 ELF executable that file(1) calls statically linked;
#   - no dynamic section (readelf -d) and no program interpreter (readelf -l);
#   - every allocation function in it is mimalloc's, not musl's (nm, objdump);
#   - --version runs and names the repository's VERSION, also with an empty environment;
#   - as root: --version runs in a chroot that holds nothing but the binary (no libc, no loader,
#     no /etc), so nothing is loaded from the host at start;
#   - wal-push asks for transparent huge pages and backup-push does not
#     (internal/core/mem/hugepages.c).
# Prints PASS/FAIL per check and "static-check: N passed, N failed" last; exit 1 on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-${WALC_STATIC:-$ROOT/walc-static}}
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
VERSION=$(cat "$ROOT/VERSION" 2>/dev/null || echo 0.0.0)
passed=0 failed=0 tmp="" hg="" pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf ${tmp:+"$tmp"} ${hg:+"$hg"}
}
trap cleanup EXIT

pass() { echo "PASS $1"; passed=$((passed + 1)); }
failc() { # WHAT DETAILS
	echo "FAIL $1"
	[ -z "${2:-}" ] || printf '%s\n' "$2" | head -n 20 | sed 's/^/    /'
	failed=$((failed + 1))
}

echo "self-check of $BIN"
if [ ! -x "$BIN" ]; then
	failc "binary exists and is executable" "not found: $BIN (run 'make static')"
	echo "static-check: $passed passed, $failed failed"
	exit 1
fi

out=$(file -b "$BIN")
echo "  file: $out"
case $out in
*"ELF 64-bit LSB executable, x86-64"*"statically linked"*) pass "file: x86-64 ELF executable, statically linked" ;;
*) failc "file: x86-64 ELF executable, statically linked" "$out" ;;
esac

out=$(LC_ALL=C readelf -d "$BIN" 2>&1 | sed '/^[[:space:]]*$/d')
echo "  readelf -d: $out"
if [ "$out" = "There is no dynamic section in this file." ]; then
	pass "readelf -d: no dynamic section"
else
	failc "readelf -d: no dynamic section" "$out"
fi

out=$(LC_ALL=C readelf -lW "$BIN" 2>&1)
if grep -qE '^[[:space:]]*(INTERP|DYNAMIC)[[:space:]]' <<<"$out"; then
	failc "readelf -l: no INTERP/DYNAMIC program header" "$(printf '%s\n' "$out" | grep -E 'INTERP|DYNAMIC|interpreter')"
else
	pass "readelf -l: no INTERP/DYNAMIC program header"
fi

# Every allocation function the binary has must be mimalloc's: an alias of its mi_ function or
# a body that calls into mimalloc. A change of link order, or a function mimalloc.o does not
# define, would leave musl's, and memory from one allocator would reach the other's free.
syms=$(nm "$BIN" 2>&1)
addr() { awk -v s="$1" '$3 == s { print $1 }' <<<"$syms"; }
bad=""
n=0
for f in malloc calloc realloc free aligned_alloc posix_memalign memalign valloc pvalloc \
	reallocarray malloc_usable_size; do
	a=$(addr "$f")
	[ -n "$a" ] || continue
	n=$((n + 1))
	[ "$a" = "$(addr "mi_$f")" ] && continue
	objdump -d --no-show-raw-insn --disassemble="$f" "$BIN" 2>/dev/null | grep -q '<_\?mi_' ||
		bad="$bad $f"
done
if [ -z "$bad" ] && [ -n "$(addr malloc)" ] && [ -n "$(addr free)" ]; then
	pass "nm: the $n allocation functions present are mimalloc's"
else
	failc "nm: the allocation functions present are mimalloc's" "not mimalloc's:${bad:- (no malloc or free)}"
fi

out=$("$BIN" --version 2>&1)
rc=$?
echo "  --version: $out"
if [ "$rc" = 0 ] && [[ $out == "walc $VERSION"* ]]; then
	pass "--version runs (walc $VERSION)"
else
	failc "--version runs (walc $VERSION)" "exit $rc: $out"
fi

out=$(env -i "$BIN" --version 2>&1)
rc=$?
if [ "$rc" = 0 ] && [[ $out == "walc $VERSION"* ]]; then
	pass "--version runs with an empty environment"
else
	failc "--version runs with an empty environment" "exit $rc: $out"
fi

CHROOT=$(command -v chroot || true)
if [ "$(id -u)" = 0 ] && [ -n "$CHROOT" ]; then
	tmp=$(mktemp -d /tmp/walc-static-check.XXXXXX)
	cp "$BIN" "$tmp/walc"
	out=$(env -i "$CHROOT" "$tmp" /walc --version 2>&1)
	rc=$?
	if [ "$rc" = 0 ] && [[ $out == "walc $VERSION"* ]]; then
		pass "--version runs in an empty chroot (only the binary in it)"
	else
		failc "--version runs in an empty chroot (only the binary in it)" "exit $rc: $out"
	fi
else
	echo "  (not root: the empty-chroot check is left out)"
fi

# wal-push and wal-fetch ask mimalloc for transparent huge pages before their first allocation;
# the long commands must not (their peak RSS). Each command is caught waiting on a server that
# accepts connections and never answers, and its mappings are read: a range madvised with
# MADV_HUGEPAGE shows "hg" in VmFlags. A kernel without transparent huge pages has no such flag.
hg_vmas() { grep -c 'VmFlags:.* hg' "/proc/$1/smaps" 2>/dev/null || true; }
# accepted N: wait (10 s at most) until the silent server has accepted N connections
accepted() {
	for _ in $(seq 100); do
		[ "$(wc -l <"$hg/accepted")" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
if [ ! -e /sys/kernel/mm/transparent_hugepage/enabled ] || ! command -v python3 >/dev/null; then
	echo "  (no transparent huge pages in this kernel, or no python3: the huge-page check is left out)"
else
	hg=$(mktemp -d /tmp/walc-static-hg.XXXXXX)
	python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
print(s.getsockname()[1], flush=True)
held = []
while True:
    c, _ = s.accept()
    held.append(c)
    print("accepted", file=sys.stderr, flush=True)
' >"$hg/port" 2>"$hg/accepted" &
	pids+=($!)
	for _ in $(seq 50); do [ -s "$hg/port" ] && break; sleep 0.1; done
	port=$(cat "$hg/port")
	mkdir -p "$hg/pg/pg_wal"
	python3 "$ROOT/test/integration/fake_segment.py" 000000010000000000000001 16777216 \
		"$hg/pg/pg_wal/000000010000000000000001"
	(cd "$hg/pg" && exec env -i PGDATA="$hg/pg" WALG_S3_PREFIX=s3://bucket/p AWS_REGION=us-east-1 \
		AWS_ACCESS_KEY_ID=k AWS_SECRET_ACCESS_KEY=s AWS_ENDPOINT="http://127.0.0.1:$port" \
		"$BIN" wal-push pg_wal/000000010000000000000001) >"$hg/push.log" 2>&1 &
	pids+=($!)
	push=$!
	accepted 1
	n_push=$(hg_vmas "$push")
	(exec env -i PGHOST=127.0.0.1 PGPORT="$port" PGUSER=postgres WALG_FILE_PREFIX="$hg" \
		"$BIN" backup-push) >"$hg/backup.log" 2>&1 &
	pids+=($!)
	backup=$!
	accepted 2
	n_backup=$(hg_vmas "$backup")
	if [ "${n_push:-0}" -ge 1 ] && [ "${n_backup:-0}" = 0 ]; then
		pass "wal-push asks for huge pages ($n_push range), backup-push does not"
	else
		failc "wal-push asks for huge pages, backup-push does not" \
			"ranges with VmFlags hg: wal-push ${n_push:-none}, backup-push ${n_backup:-none}
$(cat "$hg/push.log" "$hg/backup.log")"
	fi
fi

echo "static-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
