#!/usr/bin/env bash
# docs/SETTINGS.md lists every setting walc reads, and only those: each name the configuration
# table (cmd/walc/settings/configvars.c) reads has its row, and each row names a setting of the
# table. WAL-G settings walc refuses, warns about or ignores belong to DIFFERENCES.md instead.
# Prints each name out of place and exits 1 when there is one. --self-test plants a setting
# without a row and a row without a setting and checks that both are caught.
set -euo pipefail

TABLE=cmd/walc/settings/configvars.c
DOC=docs/SETTINGS.md

check() { # ROOT
	local root=$1 read documented bad=0
	# a row of the table: a kind macro, or the brace form for the rows that need more fields
	read=$(sed -nE 's/^[[:space:]]*(TEXT|BOOL|INT|DURATION|CHOICE|LIBPQ)\("([A-Z0-9_]+)".*/\2/p;
		s/^[[:space:]]*\{ "([A-Z0-9_]+)", V_(TEXT|BOOL|INT|DURATION|CHOICE),.*/\1/p' "$root/$TABLE" | sort -u)
	# shellcheck disable=SC2016 # the backquotes are Markdown's
	documented=$(sed -nE 's/^\| `([A-Z][A-Z0-9_]+)`.*/\1/p' "$root/$DOC" | sort -u)
	[ -n "$read" ] || { echo "settings-doc: found no setting in $TABLE"; return 1; }
	local n
	for n in $(comm -23 <(echo "$read") <(echo "$documented")); do
		echo "$DOC: no row for $n, which walc reads ($TABLE)"
		bad=1
	done
	for n in $(comm -13 <(echo "$read") <(echo "$documented")); do
		echo "$DOC: a row for $n, which walc does not read ($TABLE)"
		bad=1
	done
	[ "$bad" = 0 ] && echo "settings-doc: the $(echo "$read" | wc -l) settings walc reads each have their row in $DOC"
	return "$bad"
}

here=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = --self-test ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	mkdir -p "$tmp/$(dirname "$TABLE")" "$tmp/docs"
	cp "$here/$TABLE" "$tmp/$TABLE"
	cp "$here/$DOC" "$tmp/$DOC"
	check "$tmp" >/dev/null || { echo "settings-doc self-test: the tree itself fails"; exit 1; }
	printf '\tTEXT("WALG_PLANTED_SETTING", planted, 0, NULL, "planted"),\n' >>"$tmp/$TABLE"
	out=$(check "$tmp") && { echo "settings-doc self-test: a setting without a row was not caught"; exit 1; }
	grep -q "no row for WALG_PLANTED_SETTING" <<<"$out" || { echo "settings-doc self-test: not named: $out"; exit 1; }
	cp "$here/$TABLE" "$tmp/$TABLE"
	# shellcheck disable=SC2016
	printf '| `WALG_PLANTED_ROW` | | planted |\n' >>"$tmp/$DOC"
	out=$(check "$tmp") && { echo "settings-doc self-test: a row without a setting was not caught"; exit 1; }
	grep -q "a row for WALG_PLANTED_ROW" <<<"$out" || { echo "settings-doc self-test: not named: $out"; exit 1; }
	echo "settings-doc self-test: a setting without a row and a row without a setting are caught"
	exit 0
fi
check "$here"
