/*
 * A member name's key (pg.h): exact for a relation file, so that the keys of one folder's files
 * sort together and differ by small numbers, which keytab stores in a byte or two.
 */
#include "internal/pg/pg.h"

#include <string.h>

#define KEY_RELATION (UINT64_C(1) << 63)

/* A canonical decimal number (no sign, no leading zero) up to max, ending at *end. */
static bool parse_number(const char *s, const char **end, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (*p < '1' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > max)
			return false;
	}
	*end = p;
	*out = (uint32_t)v;
	return true;
}

/*
 * base is the last part of a name; true when PostgreSQL writes a relation file's name that way
 * ("16385", "16385_vm", "16385.3"). Any other spelling is not one, so two names never share
 * the numbers.
 */
static bool parse_relation(const char *base, uint32_t *rel, uint32_t *forkseg)
{
	const char *p;
	uint32_t fork = 0, seg = 0;
	if (!parse_number(base, &p, UINT32_MAX, rel))
		return false;
	if (*p == '_') {
		static const char *const forks[] = { NULL, "_fsm", "_vm", "_init" };
		for (fork = 1; fork < 4 && !str_has_prefix(p, forks[fork]); fork++)
			;
		if (fork == 4)
			return false;
		p += strlen(forks[fork]);
	}
	if (*p == '.' && !parse_number(p + 1, &p, (1u << 30) - 1, &seg))
		return false;
	if (*p != '\0')
		return false;
	*forkseg = seg << 2 | fork;
	return true;
}

void pg_name_key(const char *name, uint64_t key[2])
{
	const char *base = strrchr(name, '/');
	uint32_t rel, forkseg;
	if (base != NULL && parse_relation(base + 1, &rel, &forkseg)) {
		uint64_t dir[2];
		hash128(name, (size_t)(base - name), dir);
		key[0] = KEY_RELATION | dir[0] >> 1;
		/* segment and fork first: a folder's main forks follow each other by relfilenode */
		key[1] = (uint64_t)forkseg << 32 | rel;
		return;
	}
	hash128(name, strlen(name), key);
	key[0] &= ~KEY_RELATION;
}
