#!/usr/bin/env bash
# Self-check of the static walc binary (default <repo>/walc-static, or $1):
#   - an x86-64 ELF executable that file(1) calls statically linked;
#   - no dynamic section (readelf -d) and no program interpreter (readelf -l);
#   - every allocation function in it is mimalloc's, not musl's (nm, objdump);
#   - --version runs and names the repository's VERSION, also with an empty environment;
#   - as root: --version runs in a chroot that holds nothing but the binary (no libc, no loader,
#     no /etc), so nothing is loaded from the host at start.
# Prints PASS/FAIL per check and "static-check: N passed, N failed" last; exit 1 on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${1:-${WALC_STATIC:-$ROOT/walc-static}}
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
VERSION=$(cat "$ROOT/VERSION" 2>/dev/null || echo 0.0.0)
passed=0 failed=0 tmp=""
trap '[ -z "$tmp" ] || rm -rf "$tmp"' EXIT

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

echo "static-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
