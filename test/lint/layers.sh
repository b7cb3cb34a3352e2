#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the source tree:
#   - a module under internal/ includes only modules of a lower layer (or itself):
#       core < pipe < codec, crypt, storage, pg, tar < repo < catalog < wal < backup, daemon
#     (cmd/ sits on top and may use any of them); modules of one layer never use each other;
#   - nothing below cmd/ acts on the whole process: no sigaction(), signal(), fork(), _exit().
# Prints each violation as FILE:LINE and exits 1 when there is one. --self-test plants a
# violation of each kind in a copy and checks that it is caught.
set -euo pipefail

# The layers, lowest first; a module of layer N may include those of layers below N.
LAYERS='core=0 pipe=1 codec=2 crypt=2 storage=2 pg=2 tar=2 repo=3 catalog=4 wal=5 backup=6 daemon=6'

check() { # ROOT: prints violations, returns 1 when there are any
	local root=$1 bad=0 files
	# a module's files and those of its rooms (sub-folders)
	mapfile -t files < <(find "$root/internal" -name '*.[ch]' | sort)
	# one awk over every file (a shell loop over each line took most of make lint)
	awk -v layers="$LAYERS" -v root="$root/" '
		BEGIN {
			n = split(layers, kv, " ")
			for (i = 1; i <= n; i++) { split(kv[i], p, "="); rank[p[1]] = p[2] }
		}
		FNR == 1 {
			file = substr(FILENAME, length(root) + 1)
			split(file, parts, "/")
			mod = parts[2]
			if (!(mod in rank)) { print file ": module " mod " has no layer in docs/ARCHITECTURE.md"; bad = 1; nextfile }
		}
		/^#include "internal\// {
			dep = substr($0, length("#include \"internal/") + 1)
			sub(/\/.*/, "", dep)
			if (dep != mod && (!(dep in rank) || rank[dep] >= rank[mod])) {
				print file ":" FNR ": " mod " includes " dep ", which is not below it"
				bad = 1
			}
		}
		END { exit bad }
	' "${files[@]}" || bad=1
	# Process-wide acts belong to cmd/ (comments and strings aside, a call is "name(").
	local hits
	hits=$(grep -nE '(^|[^a-zA-Z0-9_])(sigaction|signal|fork|_exit)[[:space:]]*\(' "${files[@]}" |
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
	printf '#include "internal/backup/backup.h"\n' >>"$tmp/internal/wal/push/push.c"
	if check "$tmp" >/dev/null; then echo "layers self-test: an upward include was not caught"; exit 1; fi
	cp "$here/internal/wal/push/push.c" "$tmp/internal/wal/push/push.c"
	printf '#include "internal/tar/tar.h"\n' >>"$tmp/internal/codec/codec.c"
	if check "$tmp" >/dev/null; then echo "layers self-test: a sideways include was not caught"; exit 1; fi
	cp "$here/internal/codec/codec.c" "$tmp/internal/codec/codec.c"
	printf 'static void f(void) { fork(); }\n' >>"$tmp/internal/pg/page.c"
	if check "$tmp" >/dev/null; then echo "layers self-test: fork() below cmd/ was not caught"; exit 1; fi
	echo "layers self-test: an upward include, a sideways include and fork() are caught"
	exit 0
fi
check "$(cd "$(dirname "$0")/../.." && pwd)" && echo "layers: every include points down; no process-wide act below cmd/"
