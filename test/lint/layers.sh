#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the source tree:
#   - a module under internal/ includes only modules of a lower layer (or itself):
#       core < pipe < codec, crypt, storage, pg, tar < repo < catalog < wal < backup, daemon
#     (cmd/ sits on top and may use any of them); modules of one layer never use each other;
#   - nothing below cmd/ acts on the whole process: no sigaction(), signal(), fork(), _exit().
# Prints each violation as FILE:LINE and exits 1 when there is one. --self-test plants a
# violation of each kind in a copy and checks that it is caught.
set -euo pipefail

rank() {
	case $1 in
	core) echo 0 ;;
	pipe) echo 1 ;;
	codec | crypt | storage | pg | tar) echo 2 ;;
	repo) echo 3 ;;
	catalog) echo 4 ;;
	wal) echo 5 ;;
	backup | daemon) echo 6 ;;
	*) echo "" ;;
	esac
}

check() { # ROOT: prints violations, returns 1 when there are any
	local root=$1 bad=0 f mod dep line n r d
	for f in "$root"/internal/*/*.[ch]; do
		[ -e "$f" ] || continue
		mod=$(basename "$(dirname "$f")")
		r=$(rank "$mod")
		if [ -z "$r" ]; then
			echo "${f#"$root"/}: module $mod has no layer in docs/ARCHITECTURE.md"
			bad=1
			continue
		fi
		n=0
		while IFS= read -r line; do
			n=$((n + 1))
			case $line in '#include "internal/'*) ;; *) continue ;; esac
			dep=${line#'#include "internal/'}
			dep=${dep%%/*}
			[ "$dep" = "$mod" ] && continue
			d=$(rank "$dep")
			if [ -z "$d" ] || [ "$d" -ge "$r" ]; then
				echo "${f#"$root"/}:$n: $mod includes $dep, which is not below it"
				bad=1
			fi
		done <"$f"
	done
	# Process-wide acts belong to cmd/ (comments and strings aside, a call is "name(").
	local hits
	hits=$(grep -nE '(^|[^a-zA-Z0-9_])(sigaction|signal|fork|_exit)[[:space:]]*\(' "$root"/internal/*/*.[ch] |
		grep -vE ':[0-9]+:[[:space:]]*(/?\*|//)' || true)
	if [ -n "$hits" ]; then
		printf '%s\n' "$hits" | sed "s|^$root/||; s|\$|  (a process-wide act below cmd/)|"
		bad=1
	fi
	return "$bad"
}

if [ "${1:-}" = --self-test ]; then
	here=$(cd "$(dirname "$0")/../.." && pwd)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	cp -r "$here/internal" "$tmp/"
	check "$tmp" >/dev/null || { echo "layers self-test: the tree itself fails"; exit 1; }
	printf '#include "internal/backup/backup.h"\n' >>"$tmp/internal/wal/push.c"
	if check "$tmp" >/dev/null; then echo "layers self-test: an upward include was not caught"; exit 1; fi
	cp "$here/internal/wal/push.c" "$tmp/internal/wal/push.c"
	printf '#include "internal/tar/tar.h"\n' >>"$tmp/internal/codec/codec.c"
	if check "$tmp" >/dev/null; then echo "layers self-test: a sideways include was not caught"; exit 1; fi
	cp "$here/internal/codec/codec.c" "$tmp/internal/codec/codec.c"
	printf 'static void f(void) { fork(); }\n' >>"$tmp/internal/pg/page.c"
	if check "$tmp" >/dev/null; then echo "layers self-test: fork() below cmd/ was not caught"; exit 1; fi
	echo "layers self-test: an upward include, a sideways include and fork() are caught"
	exit 0
fi
check "$(cd "$(dirname "$0")/../.." && pwd)" && echo "layers: every include points down; no process-wide act below cmd/"
