#!/usr/bin/env bash
# How mimalloc, walc-static's allocator in place of musl's, is built: from Debian bookworm's
# source package, into a prefix of its own. That prefix has its own cache key (this file, the
# source files, musl-dev and gcc), apart from libs.sh's: changing the allocator rebuilds this
# prefix in seconds, not the library prefix (14-33 minutes cold). Why mimalloc: README.md.
#
#   mimalloc.sh SRCDIR      build mimalloc from SRCDIR into $M (with $JOBS set)
#
# Sourced by build.sh for MALLOC_PKG.

# shellcheck disable=SC2034 # (used by build.sh)
MALLOC_PKG=mimalloc

# set_default NAME VALUE: the default of option NAME in src/options.c's table (the MIMALLOC_NAME
# environment variable still overrides it). Used for the decommit delays: mimalloc keeps freed
# pages 25 ms and freed segments 500 ms before returning them, which at 200,000 files raised
# walc's peak RSS by 4-10 MiB (docs/PERFORMANCE.md, Files); at 0 it returns them at once, as
# musl did, for no measurable time.
set_default() {
	local name=$1 value=$2 opt
	opt="UNINIT, MI_OPTION(_LEGACY)?\\(${name}[,)]"
	sed -i -E "s/^( *\{ *)[0-9]+(, *$opt)/\1$value\2/" src/options.c
	grep -qE "^ *\{ *$value, *$opt" src/options.c || { echo "no option $name in src/options.c" >&2; return 1; }
}

# The object file (mimalloc.o), not the archive: linked as an object it is always taken whole,
# so its malloc, free, calloc, realloc and the rest are defined before libc.a is searched and
# every caller (walc, the libraries, musl's stdio) gets them. MI_OVERRIDE defines those names;
# no shared library, no tests. -ffunction-sections as for the other libraries.
# -D__USE_ISOC11=1: src/alloc-override.c defines aligned_alloc only under that glibc macro,
# which musl's headers never set; without it musl's aligned_alloc stays, and what it returns
# (libc++abi allocates exceptions with it) would reach mimalloc's free.
build_mimalloc() {
	cd "$1"
	set_default decommit_delay 0
	set_default segment_decommit_delay 0
	cmake -S . -B _build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=musl-gcc \
		-DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG -D__USE_ISOC11=1 -ffunction-sections -fdata-sections" \
		-DCMAKE_INSTALL_PREFIX="$M" -DMI_INSTALL_TOPLEVEL=ON -DMI_OVERRIDE=ON \
		-DMI_BUILD_SHARED=OFF -DMI_BUILD_STATIC=OFF -DMI_BUILD_OBJECT=ON -DMI_BUILD_TESTS=OFF \
		>/dev/null
	cmake --build _build -j "$JOBS"
	cmake --install _build >/dev/null
	[ -f "$M/lib/mimalloc.o" ]
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	if [ $# != 1 ] || [ -z "${M:-}" ] || [ -z "${JOBS:-}" ]; then
		echo "usage: M=PREFIX JOBS=N $0 SRCDIR" >&2
		exit 2
	fi
	export MAKEFLAGS=
	set -x
	build_mimalloc "$1"
fi
