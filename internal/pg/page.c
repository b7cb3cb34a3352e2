/*
 * Page headers and checksums. The checksum is PostgreSQL's FNV-1a variant over 32 parallel
 * lanes (src/include/storage/checksum_impl.h), reimplemented from its published description.
 */
#include "internal/pg/pg.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

/* PageHeaderData offsets, little-endian. */
#define OFF_LSN 0
#define OFF_CHECKSUM 8
#define OFF_FLAGS 10
#define OFF_LOWER 12
#define OFF_UPPER 14
#define OFF_SPECIAL 16
#define OFF_VERSION 18
#define HEADER_SIZE 24
#define VALID_FLAGS 0x7
#define LAYOUT_VERSION_MAX 5

static uint16_t u16(const unsigned char *p, size_t off)
{
	return (uint16_t)(p[off] | p[off + 1] << 8);
}

static uint32_t u32(const unsigned char *p, size_t off)
{
	return (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 |
		(uint32_t)p[off + 3] << 24;
}

bool pg_page_is_new(const unsigned char *page)
{
	return u16(page, OFF_UPPER) == 0;
}

uint64_t pg_page_lsn(const unsigned char *page)
{
	/* pd_lsn is {xlogid, xrecoff}, each a native (little-endian) uint32. */
	return (uint64_t)u32(page, OFF_LSN) << 32 | u32(page, OFF_LSN + 4);
}

bool pg_page_header_valid(const unsigned char *page)
{
	uint16_t flags = u16(page, OFF_FLAGS), lower = u16(page, OFF_LOWER);
	uint16_t upper = u16(page, OFF_UPPER), special = u16(page, OFF_SPECIAL);
	uint16_t version = u16(page, OFF_VERSION);
	return (flags & ~VALID_FLAGS) == 0 && lower >= HEADER_SIZE && lower <= upper &&
		upper <= special && special <= PG_PAGE_SIZE && pg_page_lsn(page) != 0 &&
		(version & 0xFF00) == PG_PAGE_SIZE && (version & 0x00FF) <= LAYOUT_VERSION_MAX;
}

uint16_t pg_page_stored_checksum(const unsigned char *page)
{
	return u16(page, OFF_CHECKSUM);
}

#define N_SUMS 32
#define FNV_PRIME 16777619u

/* The base offsets PostgreSQL seeds its 32 lanes with. */
static const uint32_t checksum_base[N_SUMS] = {
	0x5B1F36E9, 0xB8525960, 0x02AB50AA, 0x1DE66D2A, 0x79FF467A, 0x9BB9F8A3, 0x217E7CD2, 0x83E13D2C,
	0xF8D4474F, 0xE39EB970, 0x42C6AE16, 0x993216FA, 0x7B093B5D, 0x98DAFF3C, 0xF718902A, 0x0B1C9CDB,
	0xE58F764B, 0x187636BC, 0x5D7B3BB1, 0xE73DE7DE, 0x92BEC979, 0xCCA6C0B2, 0x304A0979, 0x85AA43D4,
	0x783125BB, 0x6CA8EAA2, 0xE407EAC6, 0x4B5CFC3E, 0x9FBF8C76, 0x15CA20BE, 0xF2CA9FD3, 0x959BD756,
};

static uint32_t mix(uint32_t sum, uint32_t value)
{
	uint32_t tmp = sum ^ value;
	return tmp * FNV_PRIME ^ (tmp >> 17);
}

uint16_t pg_page_checksum(const unsigned char *page, uint32_t blkno)
{
	/* The page as little-endian words, the lanes run over them in order: vectorizes well. */
	uint32_t words[PG_PAGE_SIZE / 4];
	uint32_t sums[N_SUMS];
	uint32_t result = 0;

	memcpy(words, page, PG_PAGE_SIZE);
	for (size_t i = 0; i < PG_PAGE_SIZE / 4; i++)
		words[i] = le32toh(words[i]);
	/* The checksum field itself (bytes 8 and 9: the low half of word 2) counts as zero. */
	words[OFF_CHECKSUM / 4] &= 0xFFFF0000u;
	memcpy(sums, checksum_base, sizeof(sums));
	for (size_t i = 0; i < PG_PAGE_SIZE / (4 * N_SUMS); i++)
		for (size_t j = 0; j < N_SUMS; j++)
			sums[j] = mix(sums[j], words[i * N_SUMS + j]);
	/* Two rounds of zeros finish the mixing. */
	for (int round = 0; round < 2; round++)
		for (size_t j = 0; j < N_SUMS; j++)
			sums[j] = mix(sums[j], 0);
	for (size_t j = 0; j < N_SUMS; j++)
		result ^= sums[j];
	result ^= blkno;
	return (uint16_t)(result % 65535 + 1);
}

#define MAXALIGN_OF 8

static bool all_zero(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != 0)
			return false;
	return true;
}

pg_page_verdict pg_page_verify(const unsigned char *page, uint32_t blkno, bool checksums,
							   uint64_t start_lsn)
{
	if (pg_page_is_new(page))
		return all_zero(page, PG_PAGE_SIZE) ? PG_PAGE_NEW : PG_PAGE_BAD_HEADER;
	uint16_t flags = u16(page, OFF_FLAGS), lower = u16(page, OFF_LOWER);
	uint16_t upper = u16(page, OFF_UPPER), special = u16(page, OFF_SPECIAL);
	if ((flags & ~VALID_FLAGS) != 0 || lower > upper || upper > special ||
		special > PG_PAGE_SIZE || special % MAXALIGN_OF != 0)
		return PG_PAGE_BAD_HEADER;
	if (start_lsn != 0 && pg_page_lsn(page) >= start_lsn)
		return PG_PAGE_RECENT;
	if (checksums && pg_page_checksum(page, blkno) != pg_page_stored_checksum(page))
		return PG_PAGE_BAD_CHECKSUM;
	return PG_PAGE_OK;
}

const char *pg_page_verdict_text(pg_page_verdict v)
{
	switch (v) {
	case PG_PAGE_BAD_HEADER:
		return "invalid page header";
	case PG_PAGE_BAD_CHECKSUM:
		return "checksum mismatch";
	default:
		return "";
	}
}

uint32_t pg_relation_first_block(const char *path)
{
	const char *base = strrchr(path, '/');
	const char *dot = strchr(base ? base : path, '.');
	return dot ? (uint32_t)strtoul(dot + 1, NULL, 10) * PG_SEGMENT_PAGES : 0;
}
