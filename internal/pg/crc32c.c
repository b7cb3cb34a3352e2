/*
 * PostgreSQL's CRC-32C (Castagnoli, reflected), the checksum of every WAL record: the SSE 4.2
 * instruction where the CPU has it, else eight tables. Registers are combined without the
 * bytes between them (crc32c_shift), so segments read in parallel can finish the checksum
 * of a record that crosses from one into the next.
 */
#include "internal/pg/pg.h"

#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define POLY 0x82F63B78u

static uint32_t crc_table[8][256];

static uint32_t update_tables(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len >= 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
							 (uint32_t)p[3] << 24);
		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
			crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
			crc_table[0][p[7]];
		p += 8;
		len -= 8;
	}
	while (len-- > 0)
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t update_sse42(uint32_t crc,
															   const unsigned char *p,
															   size_t len)
{
	uint64_t c = crc;
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len-- > 0)
		crc = _mm_crc32_u8(crc, *p++);
	return crc;
}
#endif

/* Chosen before main, as hash.c chooses its code: threads only read it. */
static uint32_t (*update)(uint32_t crc, const unsigned char *p, size_t len) = update_tables;

__attribute__((constructor)) static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		crc_table[0][i] = c;
	}
	for (int t = 1; t < 8; t++)
		for (uint32_t i = 0; i < 256; i++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
		update = update_sse42;
#endif
}

uint32_t pg_crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	return update(crc, buf, len);
}

/* a times b modulo the polynomial, in the reflected order (bit 31 is x^0). */
static uint32_t mul_mod(uint32_t a, uint32_t b)
{
	uint32_t product = 0;
	for (uint32_t bit = UINT32_C(1) << 31; bit != 0; bit >>= 1) {
		if (a & bit)
			product ^= b;
		b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
	}
	return product;
}

uint32_t pg_crc32c_shift(uint32_t crc, uint64_t len)
{
	/* x^(8 len): square-and-multiply over the bits of len, starting from x^8. */
	uint32_t power = UINT32_C(1) << 23; /* x^8 */
	uint32_t factor = UINT32_C(1) << 31; /* 1 */
	for (; len != 0; len >>= 1) {
		if (len & 1)
			factor = mul_mod(factor, power);
		power = mul_mod(power, power);
	}
	return mul_mod(factor, crc);
}
