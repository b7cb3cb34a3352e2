/*
 * Records in blocks (core.h): the blocks are freed one by one as recs_take copies them out,
 * so the peak is the array plus one block. A block is 1 MiB so that the allocator maps it on
 * its own and gives it back to the system when freed (musl's and mimalloc's large
 * allocations); the pages of a block are touched only as records are added.
 */
#include "internal/core/core.h"

#include <stdlib.h>
#include <string.h>

#define RECS_BLOCK (1u << 20)

static size_t per_block(const recs *r)
{
	return r->size < RECS_BLOCK ? RECS_BLOCK / r->size : 1;
}

void *recs_add(recs *r)
{
	size_t per = per_block(r), at = r->n % per;
	if (at == 0) {
		r->blocks = xrealloc(r->blocks, (r->nblocks + 1) * sizeof(*r->blocks));
		r->blocks[r->nblocks++] = xmalloc(per * r->size);
	}
	char *rec = r->blocks[r->n / per] + at * r->size;
	memset(rec, 0, r->size);
	r->n++;
	return rec;
}

void *recs_take(recs *r)
{
	char *out = NULL;
	if (r->n > 0) {
		size_t per = per_block(r), left = r->n;
		out = xmalloc(r->n * r->size);
		for (size_t b = 0; b < r->nblocks; b++) {
			size_t k = left < per ? left : per;
			memcpy(out + b * per * r->size, r->blocks[b], k * r->size);
			left -= k;
			free(r->blocks[b]);
			r->blocks[b] = NULL;
		}
	}
	recs_free(r);
	return out;
}

void recs_free(recs *r)
{
	for (size_t b = 0; b < r->nblocks; b++)
		free(r->blocks[b]);
	free(r->blocks);
	r->blocks = NULL;
	r->nblocks = 0;
	r->n = 0;
}
