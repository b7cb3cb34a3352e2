/*
 * The header of PostgreSQL 17's INCREMENTAL.<relfile> files (backup/basebackup_incremental.c
 * writes them): bytes from the server, so every count is checked against the member's size
 * before anything is allocated for it.
 */
#include "internal/pg/pg.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#define FIXED 12 /* magic, block count, truncation length */

struct pg_incr {
	uint64_t member_size;
	unsigned char fixed[FIXED];
	size_t got;		  /* header bytes consumed so far */
	size_t head_size; /* once the fixed part is in: the whole header, padding included */
	uint32_t nblocks, truncation;
	uint32_t *blocks;
	bool ready;
};

pg_incr *pg_incr_new(uint64_t member_size)
{
	pg_incr *p = xcalloc(1, sizeof(*p));
	p->member_size = member_size;
	return p;
}

void pg_incr_free(pg_incr *p)
{
	if (p == NULL)
		return;
	free(p->blocks);
	free(p);
}

static uint32_t le32_at(const unsigned char *b)
{
	uint32_t v;
	memcpy(&v, b, 4);
	return le32toh(v);
}

/*
 * The header is padded to a whole page when there are blocks (17.0 final); an unpadded one
 * (17 betas) is recognised by the member size too, since only one of the two can fit it.
 */
static err_code fixed_part(pg_incr *p)
{
	if (le32_at(p->fixed) != PG_INCR_MAGIC)
		return err_set(E_CORRUPT, "not an incremental file (magic %08x)", le32_at(p->fixed));
	p->nblocks = le32_at(p->fixed + 4);
	p->truncation = le32_at(p->fixed + 8);
	if (p->nblocks > PG_RELSEG_BLOCKS || p->truncation > PG_RELSEG_BLOCKS)
		return err_set(E_CORRUPT, "incremental file claims %u blocks, truncation at %u (a "
								  "segment has %u)",
					   p->nblocks, p->truncation, PG_RELSEG_BLOCKS);
	uint64_t raw = FIXED + 4ull * p->nblocks;
	uint64_t padded = p->nblocks > 0 ? (raw + PG_PAGE_SIZE - 1) / PG_PAGE_SIZE * PG_PAGE_SIZE : raw;
	uint64_t pages = (uint64_t)p->nblocks * PG_PAGE_SIZE;
	if (p->member_size == padded + pages)
		p->head_size = (size_t)padded;
	else if (p->member_size == raw + pages)
		p->head_size = (size_t)raw;
	else
		return err_set(E_CORRUPT, "incremental file of %u blocks is %llu bytes long, not %llu",
					   p->nblocks, (unsigned long long)p->member_size,
					   (unsigned long long)(padded + pages));
	p->blocks = xmalloc(p->nblocks ? p->nblocks * sizeof(uint32_t) : 1);
	return E_OK;
}

/* Each block below a segment's end and listed once: a page is written once, in bounds. */
static err_code check_blocks(pg_incr *p)
{
	unsigned char *seen = xcalloc(PG_RELSEG_BLOCKS / 8, 1);
	err_code rc = E_OK;
	for (uint32_t i = 0; i < p->nblocks && rc == E_OK; i++) {
		uint32_t b = p->blocks[i] = le32toh(p->blocks[i]);
		if (b >= PG_RELSEG_BLOCKS)
			rc = err_set(E_CORRUPT, "incremental file lists block %u (a segment has %u)", b,
						 PG_RELSEG_BLOCKS);
		else if (seen[b / 8] & (1u << (b % 8)))
			rc = err_set(E_CORRUPT, "incremental file lists block %u twice", b);
		else
			seen[b / 8] |= (unsigned char)(1u << (b % 8));
	}
	free(seen);
	return rc;
}

err_code pg_incr_feed(pg_incr *p, const void *buf, size_t len, size_t *used)
{
	const unsigned char *in = buf;
	*used = 0;
	while (!p->ready && *used < len) {
		size_t take;
		if (p->got < FIXED) {
			take = FIXED - p->got < len - *used ? FIXED - p->got : len - *used;
			memcpy(p->fixed + p->got, in + *used, take);
		} else {
			size_t list_end = FIXED + (size_t)p->nblocks * 4;
			size_t want = p->got < list_end ? list_end - p->got : p->head_size - p->got;
			take = want < len - *used ? want : len - *used;
			if (p->got < list_end)
				memcpy((unsigned char *)p->blocks + (p->got - FIXED), in + *used, take);
		}
		p->got += take;
		*used += take;
		if (p->got == FIXED)
			TRY(fixed_part(p));
		if (p->got >= FIXED && p->got == FIXED + (size_t)p->nblocks * 4)
			TRY(check_blocks(p));
		if (p->got >= FIXED && p->got == p->head_size)
			p->ready = true;
	}
	return E_OK;
}

bool pg_incr_ready(const pg_incr *p)
{
	return p->ready;
}

uint32_t pg_incr_nblocks(const pg_incr *p)
{
	return p->nblocks;
}

uint32_t pg_incr_truncation(const pg_incr *p)
{
	return p->truncation;
}

const uint32_t *pg_incr_blocks(const pg_incr *p)
{
	return p->blocks;
}
