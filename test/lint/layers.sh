#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the source tree:
#   - a module under internal/ includes only modules of a lower layer (or itself):
#       core < pipe < codec, crypt, storage, pg, tar < repo < catalog < wal < backup, daemon
#     (cmd/ sits on top and may use any of them); modules of one layer never use each other;
#     another module is used through its header (internal/M/M.h) only;
#   - inside a module, its rooms (sub-folders, ROOMS below) the same way: a room includes only
#     rooms of a lower rank (or itself) and the module's header, which includes nothing of its
#     own module; rooms of one rank never use each other;
#   - repo is closed: above it, nothing includes the modules it wraps (storage, codec, crypt) or
#     names their functions and types, and repo.h itself includes none of them; a module's
#     *_impl.h is included only inside that module, by cmd/ too (so repo_impl.h leaks nothing);
#   - no folder under internal/ holds more than MAX_FILES files (about 10: a folder read at a
#     glance);
#   - nothing below cmd/ acts on the whole process: no sigaction(), signal(), fork(), _exit().
# Prints each violation as FILE:LINE and exits 1 when there is one. --self-test plants a
# violation of each kind in a copy and checks that it is caught.
set -euo pipefail

# The layers, lowest first; a module of layer N may include those of layers below N.
LAYERS='core=0 pipe=1 codec=2 crypt=2 storage=2 pg=2 tar=2 repo=3 catalog=4 wal=5 backup=6 daemon=6'
# The rooms of a module, lowest first: ranks apart by '<', rooms of one rank by ','; '.' is the
# module's own folder (its files other than the header). A module without an entry has no rooms.
ROOMS='core=.<sink,keys,mem pg=.<wal<server storage=http<s3,azure,gcs,sftp<.
	wal=.<check<fetch,push backup=push,restore<manage<.'
MAX_FILES=12
# What repo wraps, and the prefixes of their functions and types (also banned above repo).
WRAPPED='storage codec crypt'
WRAPPED_NAMES='storage_|codec_|crypter?_|pgp_|obj_info|obj_list|STORAGE_[A-Z]|CRYPT_[A-Z]'

check() { # ROOT: prints violations, returns 1 when there are any
	local root=$1 bad=0 files cmds
	# a module's files and those of its rooms (sub-folders); cmd/ for the *_impl.h rule
	mapfile -t files < <(find "$root/internal" -name '*.[ch]' | sort)
	mapfile -t cmds < <(find "$root/cmd" -name '*.[ch]' 2>/dev/null | sort)
	# one awk over every file (a shell loop over each line took most of make lint)
	awk -v layers="$LAYERS" -v rooms="$ROOMS" -v wrapped="$WRAPPED" -v names="$WRAPPED_NAMES" -v root="$root/" '
		BEGIN {
			n = split(layers, kv, " ")
			for (i = 1; i <= n; i++) { split(kv[i], p, "="); rank[p[1]] = p[2] }
			n = split(wrapped, w, " ")
			for (i = 1; i <= n; i++) wraps[w[i]] = 1
			named = "(^|[^A-Za-z0-9_])(" names ")"
			n = split(rooms, kv, "[ \t\n]+")
			for (i = 1; i <= n; i++) {
				if (kv[i] == "") continue
				split(kv[i], p, "=")
				nr = split(p[2], level, "<")
				for (j = 1; j <= nr; j++) {
					nn = split(level[j], name, ",")
					for (k = 1; k <= nn; k++) room_rank[p[1] "/" name[k]] = j
				}
				has_rooms[p[1]] = 1
			}
		}
		# the room of internal/MOD/..., "." for the module folder, "" deeper than a room
		function room_of(path,   q, n) {
			n = split(path, q, "/")
			return n == 3 ? "." : n == 4 ? q[3] : ""
		}
		function ranked(m, r) { return (m "/" r) in room_rank || (r == "." && !(m in has_rooms)) }
		FNR == 1 {
			file = substr(FILENAME, length(root) + 1)
			split(file, parts, "/")
			incomment = 0
			if (parts[1] == "cmd") { mod = "cmd"; above = 0; next }
			mod = parts[2]
			above = rank[mod] > rank["repo"]
			room = room_of(file)
			if (!(mod in rank)) { print file ": module " mod " has no layer in docs/ARCHITECTURE.md"; bad = 1; nextfile }
			if (room == "") { print file ": deeper than internal/MODULE/ROOM/"; bad = 1; nextfile }
			if (!ranked(mod, room)) { print file ": room " mod "/" room " has no rank in test/lint/layers.sh"; bad = 1; nextfile }
			header = file == "internal/" mod "/" mod ".h"
		}
		/^#include "internal\// {
			path = $0
			sub(/^#include "/, "", path)
			sub(/".*/, "", path)
			split(path, q, "/")
			dep = q[2]
			if (dep != mod && path ~ /_impl\.h$/) {
				print file ":" FNR ": " mod " includes " dep "\x27s internals (a *_impl.h)"
				bad = 1
			}
			if (mod == "cmd")
				next
			if (above && dep in wraps) {
				print file ":" FNR ": " mod " includes " dep ", which only repo may use"
				bad = 1
			}
			if (file == "internal/repo/repo.h" && dep in wraps) {
				print file ":" FNR ": repo.h includes " dep ", which would reach every module above repo"
				bad = 1
			}
			if (dep != mod) {
				if (!(dep in rank) || rank[dep] >= rank[mod]) {
					print file ":" FNR ": " mod " includes " dep ", which is not below it"
					bad = 1
				} else if (path != "internal/" dep "/" dep ".h") {
					print file ":" FNR ": " mod " includes " path ": another module is used through internal/" dep "/" dep ".h only"
					bad = 1
				}
				next
			}
			if (path == "internal/" mod "/" mod ".h")
				next
			dr = room_of(path)
			if (header) {
				print file ":" FNR ": the module header includes " path ", which is in its own module"
				bad = 1
			} else if (dr != room && (!((mod "/" dr) in room_rank) || room_rank[mod "/" dr] >= room_rank[mod "/" room])) {
				print file ":" FNR ": room " mod "/" room " includes " path ", of room " mod "/" dr ", which is not below it"
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
	' "${files[@]}" "${cmds[@]}" || bad=1
	# A folder that a newcomer reads at a glance: a crowded one is split into rooms.
	local crowded
	crowded=$(printf '%s\n' "${files[@]}" | sed 's|/[^/]*$||' | sort | uniq -c |
		awk -v max="$MAX_FILES" -v root="$root/" \
			'$1 > max { print substr($2, length(root) + 1) "/: " $1 " files, more than " max " (make rooms)" }')
	if [ -n "$crowded" ]; then
		printf '%s\n' "$crowded"
		bad=1
	fi
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
	mkdir -p "$tmp/cmd" && cp -r "$here/cmd/walc" "$tmp/cmd/"
	check "$tmp" >/dev/null || { echo "layers self-test: the tree itself fails"; exit 1; }
	# caught WHAT PATTERN: the planted violation (WHAT) fails the check with a line matching
	# PATTERN; the copy is then made clean again for the next one.
	caught() {
		local out
		if out=$(check "$tmp"); then echo "layers self-test: $1 was not caught"; exit 1; fi
		grep -q -- "$2" <<<"$out" || { echo "layers self-test: $1 was not named: $out"; exit 1; }
		rm -rf "$tmp/internal" "$tmp/cmd/walc" && cp -r "$here/internal" "$tmp/" && cp -r "$here/cmd/walc" "$tmp/cmd/"
	}
	in=internal
	printf '#include "internal/backup/backup.h"\n' >>"$tmp/$in/wal/push/push.c"
	caught "an upward include" "^$in/wal/push/push.c:.*wal includes backup"
	printf '#include "internal/tar/tar.h"\n' >>"$tmp/$in/codec/codec.c"
	caught "a sideways include" "^$in/codec/codec.c:.*codec includes tar"
	printf '#include "internal/storage/s3/s3.h"\n' >>"$tmp/$in/repo/repo.c"
	caught "a module's room used from another module" "^$in/repo/repo.c:.*through internal/storage/storage.h only"
	printf '#include "internal/storage/s3/s3.h"\n' >>"$tmp/$in/storage/http/http.c"
	caught "an upward include between rooms" "^$in/storage/http/http.c:.*room storage/http includes .* storage/s3,"
	printf '#include "internal/backup/restore/fetch_impl.h"\n' >>"$tmp/$in/backup/push/push.c"
	caught "a sideways include between rooms" "^$in/backup/push/push.c:.*room backup/push includes .* backup/restore,"
	printf '#include "internal/storage/http/http.h"\n' >>"$tmp/$in/storage/storage.h"
	caught "a room included by its module's header" "^$in/storage/storage.h:.*module header includes"
	mkdir "$tmp/$in/pg/extra" && echo "/* x */" >"$tmp/$in/pg/extra/x.c"
	caught "a room with no rank" "^$in/pg/extra/x.c: room pg/extra has no rank"
	mkdir "$tmp/$in/storage/s3/x" && echo "/* x */" >"$tmp/$in/storage/s3/x/x.c"
	caught "a folder inside a room" "^$in/storage/s3/x/x.c: deeper than"
	for i in $(seq 1 "$MAX_FILES"); do touch "$tmp/$in/codec/x$i.c"; done
	caught "a crowded folder" "^$in/codec/: .* files, more than $MAX_FILES"
	printf 'static void f(void) { fork(); }\n' >>"$tmp/$in/pg/page.c"
	caught "fork() below cmd/" "^$in/pg/page.c:.*process-wide act"
	# repo closed: each way around it, planted alone, is caught
	printf '#include "internal/storage/storage.h"\n' >>"$tmp/$in/catalog/catalog.c"
	caught "storage included above repo" "^$in/catalog/catalog.c:.*catalog includes storage, which only repo may use"
	printf '#include "internal/crypt/crypt.h"\n' >>"$tmp/$in/daemon/daemon.c"
	caught "crypt included above repo" "^$in/daemon/daemon.c:.*daemon includes crypt, which only repo may use"
	printf '#include "internal/codec/codec.h"\n' >>"$tmp/$in/repo/repo.h"
	caught "codec included by repo.h" "^$in/repo/repo.h:.*repo.h includes codec"
	printf '#include "internal/repo/repo_impl.h"\n' >>"$tmp/$in/backup/manage/copy.c"
	caught "repo_impl.h included outside repo" "^$in/backup/manage/copy.c:.*internals (a \*_impl.h)"
	printf '#include "internal/repo/repo_impl.h"\n' >>"$tmp/cmd/walc/st.c"
	caught "repo_impl.h included by cmd" "^cmd/walc/st.c:.*internals (a \*_impl.h)"
	printf 'static void f(storage *st) { storage_free(st); }\n' >>"$tmp/$in/wal/push/push.c"
	caught "a storage call above repo" "^$in/wal/push/push.c:.*names storage, codec or crypt"
	printf 'static bool f(const codec *c) { return codec_has_frames(c); }\n' >>"$tmp/$in/backup/push/pack.c"
	caught "a codec call above repo" "^$in/backup/push/pack.c:.*names storage, codec or crypt"
	printf 'static obj_info g; /* storage_x */\n' >>"$tmp/$in/catalog/cluster.c"
	caught "a storage type above repo" "^$in/catalog/cluster.c:.*names storage, codec or crypt"
	echo "layers self-test: upward and sideways includes (between modules and between rooms), a"
	echo "  room used from another module or by its module's header, a room with no rank or in a"
	echo "  room, a crowded folder, fork(), and each way around repo (storage, codec or crypt"
	echo "  included or named above it, repo.h including them, another module's *_impl.h) are caught"
	exit 0
fi
check "$(cd "$(dirname "$0")/../.." && pwd)" && echo "layers: every include points down; repo is closed; no process-wide act below cmd/"
