/*
 * libFuzzer target: the WAL record reader on untrusted bytes (archived segments come from
 * storage). The first byte picks the size of the pieces fed; every record reported must lie
 * inside what was fed, after the previous one, with a terminated restore point name.
 */
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

#define START (UINT64_C(0x2D) << 20) /* the seeds are the start of fixture segment 2D */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct bounds {
	uint64_t fed_end, last_end;
} bounds;

static bool check(const wal_record *rec, void *arg)
{
	bounds *b = arg;
	if (rec->lsn < b->last_end || rec->end_lsn <= rec->lsn || rec->end_lsn > b->fed_end ||
		memchr(rec->name, '\0', sizeof(rec->name)) == NULL)
		abort();
	b->last_end = rec->end_lsn;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = (size_t)data[0] * 97 + 1;
	data++, size--;
	bounds b = { START + size, START };
	wal_reader *r = wal_reader_new(UINT64_C(1) << 20, START, check, &b);
	for (size_t off = 0; off < size; off += piece)
		if (wal_reader_feed(r, data + off, size - off < piece ? size - off : piece) != E_OK)
			break;
	uint64_t end;
	wal_reader_done(r, &end);
	if (end > START + size)
		abort();
	wal_reader_free(r);
	return 0;
}
