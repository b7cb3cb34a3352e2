/*
 * What backup-verify checks in PostgreSQL's own files: WAL page headers and timeline history
 * files. Every input is untrusted bytes.
 */
#include "internal/pg/bytes_impl.h"
#include "internal/pg/pg.h"
#include "internal/pg/wal/walpage_impl.h"

#include <stdlib.h>
#include <string.h>

#define WAL_SHORT_HEADER 24

static bool zero_page(const unsigned char *p)
{
	for (size_t i = 0; i < PG_WAL_PAGE; i++)
		if (p[i] != 0)
			return false;
	return true;
}

const char *pg_wal_page_check(pg_wal_check *c, const unsigned char *page, uint64_t segno,
							  uint64_t seg_size, uint32_t index, uint32_t max_tli,
							  uint64_t sysid)
{
	uint16_t magic = (uint16_t)pg_le(page, 2), info = (uint16_t)pg_le(page + 2, 2);
	uint32_t tli = (uint32_t)pg_le(page + 4, 4);
	uint64_t addr = pg_le(page + 8, 8);
	if (magic == 0 && zero_page(page)) {
		if (index == 0)
			return "segment starts with an empty page";
		c->ended = true;
		return NULL;
	}
	if (c->ended)
		return "page header after the end of the WAL in this segment";
	if (magic < WAL_MAGIC_PG92 || (c->magic != 0 && magic != c->magic))
		return "bad page magic";
	if (c->magic == 0)
		c->magic = magic;
	if ((info & ~wal_flags_known(magic)) != 0)
		return "unknown page flags";
	if (index == 0) {
		if ((info & XLP_LONG_HEADER) == 0)
			return "first page has no long header";
		if (pg_le(page + 32, 4) != seg_size || pg_le(page + 36, 4) != PG_WAL_PAGE)
			return "long header: wrong segment or page size";
		if (sysid != 0 && pg_le(page + 24, 8) != sysid)
			return "long header: another system identifier";
	} else if (info & XLP_LONG_HEADER) {
		return "long header on a page other than the first";
	}
	if (addr != segno * seg_size + (uint64_t)index * PG_WAL_PAGE)
		return "page address is not its place in the segment";
	if (tli == 0 || tli > max_tli)
		return "page timeline is not the backup's or an ancestor's";
	if (tli < c->tli)
		return "page timeline goes back";
	c->tli = tli;
	return NULL;
}

const char *pg_history_check(const char *text, size_t len, uint32_t tli)
{
	size_t n;
	return pg_history_parse(text, len, tli, NULL, 0, &n);
}

const char *pg_history_parse(const char *text, size_t len, uint32_t tli, pg_history_entry *out,
							 size_t max, size_t *n_out)
{
	uint64_t last_parent = 0, last_lsn = 0;
	size_t entries = 0;
	*n_out = 0;
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *start = p, *stop = nl ? nl : end;
		char line[256];
		size_t n = (size_t)(stop - start);
		p = nl ? nl + 1 : end;
		if (n >= sizeof(line))
			return "line too long";
		memcpy(line, start, n);
		line[n] = '\0';
		char *s = line;
		while (*s == ' ' || *s == '\t' || *s == '\r')
			s++;
		if (*s == '\0' || *s == '#')
			continue;
		char *after;
		if (*s < '0' || *s > '9')
			return "a line does not start with a timeline";
		unsigned long long parent = strtoull(s, &after, 10);
		if (after == s || (*after != ' ' && *after != '\t'))
			return "a line does not start with a timeline";
		while (*after == ' ' || *after == '\t')
			after++;
		char lsntext[40];
		size_t ln = strcspn(after, " \t\r");
		if (ln == 0 || ln >= sizeof(lsntext))
			return "a line has no switch LSN";
		memcpy(lsntext, after, ln);
		lsntext[ln] = '\0';
		uint64_t lsn;
		if (pg_lsn_parse(lsntext, &lsn) != E_OK) {
			err_clear();
			return "a switch LSN is malformed";
		}
		if (parent == 0 || parent >= tli)
			return "a parent timeline is not below the file's own";
		if (parent <= last_parent)
			return "parent timelines do not increase";
		if (lsn < last_lsn)
			return "switch LSNs go back";
		if (out != NULL) {
			if (entries == max)
				return "more parent timelines than walc follows";
			out[entries] = (pg_history_entry){ (uint32_t)parent, lsn };
		}
		last_parent = parent;
		last_lsn = lsn;
		entries++;
		*n_out = entries;
	}
	return entries > 0 ? NULL : "no parent timeline";
}
