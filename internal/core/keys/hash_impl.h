/* core-internal: XXH3-128's update built for AVX2 (hash_avx2.c), which hash.c picks at start. */
#ifndef WALC_INTERNAL_CORE_HASH_IMPL_H
#define WALC_INTERNAL_CORE_HASH_IMPL_H

#include <stddef.h>

#if defined(__x86_64__)
/* state: an XXH3_state_t of hash.c's, whose layout does not depend on the vector code. */
void hash_update_avx2(void *state, const void *buf, size_t len);
#endif

#endif
