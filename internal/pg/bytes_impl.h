/* pg-internal: PostgreSQL's on-disk integers are little-endian on every platform walc runs. */
#ifndef WALC_INTERNAL_PG_BYTES_IMPL_H
#define WALC_INTERNAL_PG_BYTES_IMPL_H

#include <stdint.h>

static inline uint64_t pg_le(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

#endif
