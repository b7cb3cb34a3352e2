/*
 * XXH3-128's update compiled with AVX2 (the Makefile adds -mavx2 for this file alone): on this
 * project's machine it hashes 23 GB/s against 11 GB/s for the SSE2 code every x86-64 CPU runs,
 * and the per-file hash is 5% of a backup-push's CPU (docs/PERFORMANCE.md). hash.c calls it
 * only when the CPU says it has AVX2. xxhash's own run-time dispatch is built into the shared
 * libxxhash only; walc inlines xxhash, so both builds pick the same way, here.
 */
#include "internal/core/keys/hash_impl.h"

#if defined(__x86_64__)
#ifndef __AVX2__
#error "hash_avx2.c needs -mavx2 (see the Makefile)"
#endif

#define XXH_INLINE_ALL
#include <xxhash.h>

void hash_update_avx2(void *state, const void *buf, size_t len)
{
	XXH3_128bits_update(state, buf, len);
}
#endif
