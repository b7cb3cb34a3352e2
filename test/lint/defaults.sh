#!/usr/bin/env bash
# Every setting's default is written once, in the configuration table (docs/ARCHITECTURE.md,
# Configuration); the code that uses a setting trusts the value it is given. Checked on the
# source tree, counting each default the table gives (TEXT/BOOL/INT/DURATION/CHOICE rows):
#   (a) a default that names a place (a URL, a host, a date: it holds '.', ':', '/' or '-')
#       appears as that exact quoted string nowhere in internal/ or cmd/ but the table;
#   (b) no line outside the table reads a field that has a default (`->F` or `.F`, F the
#       field's name in its settings struct) in a conditional whose other branch is a literal
#       or an upper-case constant (`x->F > 0 ? x->F : 16`, `x->F ? x->F : "walc"`), nor
#       tests it in an `if` that then assigns it (`if (x->F == NULL) x->F = ...`).
# A fallback on such a field is a second default, which the table no longer controls.
# Prints each violation as FILE:LINE and exits 1 when there is one. --self-test plants a
# restated default of each kind in a copy and checks that it is caught.
set -euo pipefail

# The table, and the loop that applies it (the only code that may name a default).
TABLE=cmd/walc/settings/configvars.c
LOOP=cmd/walc/settings/config.c

# FIELD<TAB>DEFAULT<TAB>NAME for each row of the table that has a default.
defaults() { # ROOT
	awk '
		function flush(   i, n, c, depth, q, arg, args, name, field, def) {
			n = 0; arg = ""; depth = 0; q = 0
			for (i = 1; i <= length(row); i++) {
				c = substr(row, i, 1)
				if (q) { arg = arg c; if (c == "\\") { i++; arg = arg substr(row, i, 1) } else if (c == "\"") q = 0; continue }
				if (c == "\"") { q = 1; arg = arg c; continue }
				if (c == "(") { depth++; if (depth == 1) { arg = ""; continue } }
				if (c == ")") { depth--; if (depth == 0) break }
				if (c == "," && depth == 1) { args[++n] = arg; arg = ""; continue }
				arg = arg c
			}
			args[++n] = arg
			for (i = 1; i <= n; i++) { gsub(/^[ \t]+|[ \t]+$/, "", args[i]) }
			name = args[1]; field = args[2]; def = args[4]
			gsub(/"/, "", name)
			if (def != "NULL" && def != "") { gsub(/^"|"$/, "", def); print field "\t" def "\t" name }
			row = ""
		}
		/^\t(TEXT|BOOL|INT|DURATION|CHOICE)\(/ { row = $0; if ($0 ~ /\),?[ \t]*$/) flush(); next }
		row != "" { row = row " " $0; if ($0 ~ /\),?[ \t]*$/) flush() }
	' "$1/$TABLE"
}

check() { # ROOT: prints violations, returns 1 when there are any
	local root=$1 bad=0 files rows
	rows=$(defaults "$root")
	[ -n "$rows" ] || { echo "$TABLE: no defaults found (has the table moved?)"; return 1; }
	files=$(cd "$root" && find internal cmd -name "*.[ch]" | sort | grep -vxF -e "$TABLE" -e "$LOOP")
	# (a) a default naming a place, quoted anywhere else
	local places
	places=$(printf '%s\n' "$rows" | awk -F'\t' '$2 ~ /[.:\/-]/ && $2 !~ /^-?[0-9]+$/ { print "\"" $2 "\"" }' | sort -u)
	if [ -n "$places" ]; then
		local hits
		hits=$(cd "$root" && grep -nF -f <(printf '%s\n' "$places") $files || true)
		if [ -n "$hits" ]; then
			printf '%s\n' "$hits" | sed 's/$/  (a default of the table, restated)/'
			bad=1
		fi
	fi
	# (b) a fallback on a field that has a default
	local fields
	fields=$(printf '%s\n' "$rows" | awk -F'\t' '{ n = split($1, p, "."); print p[n] }' | sort -u | paste -sd'|')
	(cd "$root" && awk -v fields="$fields" '
		BEGIN {
			f = "(->|\\.)(" fields ")"
			lit = "(\"|-?[0-9]|[A-Z][A-Z0-9_]*[A-Z0-9_]([^a-zA-Z0-9_(]|$))"
			# x->F, x->F != NULL, x->F > 0 ... ? ... : LITERAL
			given = f "[ \t]*((!=|>|>=)[ \t]*(nullptr|0|1))?[ \t]*\\?[^:;]*:[ \t]*" lit
			# x->F == NULL, !x->F, x->F <= 0 ...: unset
			unset = "(![ \t]*[a-zA-Z0-9_]+(->|\\.)([a-zA-Z0-9_]+(->|\\.))*(" fields ")([^a-zA-Z0-9_]|$)|" f "[ \t]*(==[ \t]*(nullptr|0)|<=[ \t]*0|<[ \t]*1))"
		}
		function report() {
			print FILENAME ":" FNR ": a fallback for a setting that has a default in the table"
			bad = 1
		}
		FNR == 1 { pending = "" }
		{
			line = $0
			sub(/\/\/.*/, "", line)
			if (line ~ /^[ \t]*(\/?\*)/) { pending = ""; next }
			# NULL is no default: spelled so that a literal never matches it
			gsub(/NULL/, "nullptr", line)
			if (line ~ given || line ~ (unset "[ \t]*\\?[ \t]*" lit))
				report()
			# if (x->F == NULL) x->F = ...;   on one line or the next
			if (pending != "" && line ~ ("(->|\\.)" pending "[ \t]*=[^=]"))
				report()
			pending = ""
			if (line ~ /(^|[^a-zA-Z0-9_])if[ \t]*\(/ && match(line, unset)) {
				name = substr(line, RSTART, RLENGTH)
				n = split(fields, all, "|")
				for (i = 1; i <= n; i++)
					if (name ~ ("(->|\\.)" all[i] "([^a-zA-Z0-9_]|$)")) { fld = all[i]; break }
				rest = substr(line, RSTART + RLENGTH)
				if (rest ~ ("(->|\\.)" fld "[ \t]*=[^=]"))
					report()
				else
					pending = fld
			}
		}
		END { exit bad }
	' $files) || bad=1
	if [ "$bad" = 0 ] && [ "${2:-}" = count ]; then
		echo "defaults: each of the table's $(printf '%s\n' "$rows" | wc -l) defaults is written once (in $TABLE)"
	fi
	return "$bad"
}

if [ "${1:-}" = --self-test ]; then
	here=$(cd "$(dirname "$0")/../.." && pwd)
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/cmd"
	cp -r "$here/internal" "$tmp/"
	cp -r "$here/cmd/walc" "$tmp/cmd/"
	check "$tmp" >/dev/null || { echo "defaults self-test: the tree itself fails"; exit 1; }
	plant() { # FILE TEXT WHAT
		cp "$tmp/$1" "$tmp/$1.orig"
		printf '%s\n' "$2" >>"$tmp/$1"
		if check "$tmp" >/dev/null; then echo "defaults self-test: $3 was not caught"; exit 1; fi
		mv "$tmp/$1.orig" "$tmp/$1"
	}
	plant internal/storage/s3/s3.c \
		'static long f(const s3_settings *set) { return set->max_part_size > 0 ? set->max_part_size : 20971520; }' \
		"a numeric fallback (?:)"
	plant internal/storage/azure/azure.c \
		'static const char *f(const az_settings *set) { return set->api_version ? set->api_version : API_VERSION; }' \
		"a fallback to a constant (?:)"
	plant internal/storage/gcs/gcs.c \
		'static void f(gcs_settings *set) { if (set->metadata_host == NULL) set->metadata_host = xstrdup("m"); }' \
		"an if that assigns a default"
	plant internal/storage/s3/s3cred.c \
		$'static void f(s3_settings *set)\n{\n\tif (!set->role_session_name)\n\t\tset->role_session_name = NULL;\n}' \
		"an if that assigns a default on the next line"
	plant internal/storage/azure/azure.c \
		'static const char *const suffix = "core.windows.net";' \
		"a default's value quoted outside the table"
	echo "defaults self-test: numeric, constant and if-assigned fallbacks and a quoted default are caught"
	exit 0
fi
check "$(cd "$(dirname "$0")/../.." && pwd)" count
