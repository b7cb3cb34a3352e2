#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the source tree:
#   - a module under internal/ includes only modules of a lower layer (or itself):
#       core < pipe < codec, crypt, storage, pg, tar < repo < catalog < wal < backup, daemon
#     (cmd/ sits on top and may use any of them); modules of one layer never use each other;
#   - repo is closed: above it, nothing includes the modules it wraps (storage, codec, crypt) or
#     names their functions and types, and repo.h itself includes none of them; a module's
#     *_impl.h is included only inside that module (so repo_impl.h leaks nothing);
#   - nothing below cmd/ acts on the whole process: no sigaction(), signal(), fork(), _exit().
# Prints each violation as FILE:LINE and exits 1 when there is one. --self-test plants a
# violation of each kind in a copy and checks that it is caught.
set -euo pipefail

# The layers, lowest first; a module of layer N may include those of layers below N.
LAYERS='core=0 pipe=1 codec=2 crypt=2 storage=2 pg=2 tar=2 repo=3 catalog=4 wal=5 backup=6 daemon=6'
# What repo wraps, and the prefixes of their functions and types (also banned above repo).
WRAPPED='storage codec crypt'
WRAPPED_NAMES='storage_|codec_|crypter?_|pgp_|obj_info|obj_list|STORAGE_[A-Z]|CRYPT_[A-Z]'

check() { # ROOT: prints violations, returns 1 when there are any
	local root=$1 bad=0
	# one awk over every file (a shell loop over each line took most of make lint)
	awk -v layers="$LAYERS" -v wrapped="$WRAPPED" -v names="$WRAPPED_NAMES" -v root="$root/" '
		BEGIN {
			n = split(layers, kv, " ")
			for (i = 1; i <= n; i++) { split(kv[i], p, "="); rank[p[1]] = p[2] }
			n = split(wrapped, w, " ")
			for (i = 1; i <= n; i++) wraps[w[i]] = 1
			named = "(^|[^A-Za-z0-9_])(" names ")"
		}
		FNR == 1 {
			file = substr(FILENAME, length(root) + 1)
			split(file, parts, "/")
			mod = parts[1] == "cmd" ? "cmd" : parts[2]
			above = mod != "cmd" && rank[mod] > rank["repo"]
			incomment = 0
			if (mod != "cmd" && !(mod in rank)) { print file ": module " mod " has no layer in docs/ARCHITECTURE.md"; bad = 1; nextfile }
		}
		/^#include "internal\// {
			dep = substr($0, length("#include \"internal/") + 1)
			sub(/\/.*/, "", dep)
			if (mod != "cmd" && dep != mod && (!(dep in rank) || rank[dep] >= rank[mod])) {
				print file ":" FNR ": " mod " includes " dep ", which is not below it"
				bad = 1
			}
			if (above && dep in wraps) {
				print file ":" FNR ": " mod " includes " dep ", which only repo may use"
				bad = 1
			}
			if (file == "internal/repo/repo.h" && dep in wraps) {
				print file ":" FNR ": repo.h includes " dep ", which would reach every module above repo"
				bad = 1
			}
			if (dep != mod && $0 ~ /_impl\.h"/) {
				print file ":" FNR ": " mod " includes " dep "\x27s internals (a *_impl.h)"
				bad = 1
			}
		}
		above {
			# code only: comments and string literals may say anything
			line = $0
			gsub(/"([^"\\]|\\.)*"/, "\"\"", line)
			code = ""
			while (line != "") {
				if (incomment) {
					e = index(line, "*/")
					if (e == 0) { line = ""; break }
					line = substr(line, e + 2)
					incomment = 0
				}
				s = index(line, "/*")
				d = index(line, "//")
				if (d > 0 && (s == 0 || d < s)) { code = code substr(line, 1, d - 1); break }
				if (s == 0) { code = code line; break }
				code = code substr(line, 1, s - 1)
				line = substr(line, s + 2)
				incomment = 1
			}
			if (code ~ named) {
				print file ":" FNR ": " mod " names storage, codec or crypt, which only repo may use"
				bad = 1
			}
		}
		END { exit bad }
	' "$root"/internal/*/*.[ch] "$root"/cmd/walc/*.[ch] || bad=1
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
	mkdir -p "$tmp/cmd" && cp -r "$here/cmd/walc" "$tmp/cmd/"
	check "$tmp" >/dev/null || { echo "layers self-test: the tree itself fails"; exit 1; }
	printf '#include "internal/backup/backup.h"\n' >>"$tmp/internal/wal/push.c"
	if check "$tmp" >/dev/null; then echo "layers self-test: an upward include was not caught"; exit 1; fi
	cp "$here/internal/wal/push.c" "$tmp/internal/wal/push.c"
	printf '#include "internal/tar/tar.h"\n' >>"$tmp/internal/codec/codec.c"
	if check "$tmp" >/dev/null; then echo "layers self-test: a sideways include was not caught"; exit 1; fi
	cp "$here/internal/codec/codec.c" "$tmp/internal/codec/codec.c"
	printf 'static void f(void) { fork(); }\n' >>"$tmp/internal/pg/page.c"
	if check "$tmp" >/dev/null; then echo "layers self-test: fork() below cmd/ was not caught"; exit 1; fi
	cp "$here/internal/pg/page.c" "$tmp/internal/pg/page.c"
	# repo closed: each way around it, planted alone, is caught
	plant() { # FILE TEXT WHAT
		printf '%s\n' "$2" >>"$tmp/$1"
		if check "$tmp" >/dev/null; then echo "layers self-test: $3 was not caught"; exit 1; fi
		cp "$here/$1" "$tmp/$1"
	}
	plant internal/catalog/catalog.c '#include "internal/storage/storage.h"' "storage included above repo"
	plant internal/daemon/daemon.c '#include "internal/crypt/crypt.h"' "crypt included above repo"
	plant internal/repo/repo.h '#include "internal/codec/codec.h"' "codec included by repo.h"
	plant internal/backup/copy.c '#include "internal/repo/repo_impl.h"' "repo_impl.h included outside repo"
	plant cmd/walc/st.c '#include "internal/repo/repo_impl.h"' "repo_impl.h included by cmd"
	plant internal/wal/push.c 'static void f(storage *st) { storage_free(st); }' "a storage call above repo"
	plant internal/backup/pack.c 'static bool f(const codec *c) { return codec_has_frames(c); }' "a codec call above repo"
	plant internal/catalog/cluster.c 'static obj_info g; /* storage_x */' "a storage type above repo"
	check "$tmp" >/dev/null || { echo "layers self-test: the tree fails after the plants were undone"; exit 1; }
	echo "layers self-test: an upward include, a sideways include, fork(), and each way around repo (storage, codec or crypt included or named above it, repo.h including them, another module's *_impl.h) are caught"
	exit 0
fi
check "$(cd "$(dirname "$0")/../.." && pwd)" && echo "layers: every include points down; repo is closed; no process-wide act below cmd/"
