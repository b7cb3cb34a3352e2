/*
 * libFuzzer target: the WAL record reader on untrusted bytes (archived segments come from
 * storage). The first byte picks the size of the pieces fed and, by its low bit, the layout:
 * the seeds' 1 MiB segments read as one stream, or 32 KiB segments read both as one stream
 * and each by a reader of its own, stitched as backup-verify stitches them. Every record
 * reported must lie inside what was fed, after the previous one, with a terminated restore
 * point name; segments that pass alone and as a stream must stitch without a problem.
 */
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

#define START (UINT64_C(0x2D) << 20) /* the seeds are the start of fixture segment 2D */
#define SMALL_SEG (UINT64_C(32768))

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

/* Reads data as the stream from start in pieces; whether it read all without an end. */
static bool read_stream(uint64_t seg_size, uint64_t start, const uint8_t *data, size_t size,
						size_t piece, wal_seam *seam)
{
	bounds b = { start + size, start };
	wal_reader *r = wal_reader_new(seg_size, start, check, &b);
	bool fed = true;
	for (size_t off = 0; off < size && fed; off += piece)
		if (wal_reader_feed(r, data + off, size - off < piece ? size - off : piece) != E_OK) {
			err_clear();
			fed = false;
		}
	uint64_t end;
	wal_ending e;
	bool done = wal_reader_done(r, &end);
	wal_reader_end(r, &e);
	if (end > start + size || (e.kind != WAL_END_NONE && e.why == NULL))
		abort();
	if (seam != NULL)
		wal_reader_seam(r, seam);
	wal_reader_free(r);
	return fed && !done;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = (size_t)(data[0] >> 1) * 97 + 1;
	bool small = data[0] & 1;
	data++, size--;
	if (!small) {
		read_stream(UINT64_C(1) << 20, START, data, size, piece, NULL);
		return 0;
	}
	bool whole = read_stream(SMALL_SEG, START, data, size, piece, NULL);
	wal_stitch st;
	memset(&st, 0, sizeof(st));
	bool alone = true;
	const char *bad = NULL;
	for (size_t off = 0; off < size; off += SMALL_SEG) {
		size_t n = size - off < SMALL_SEG ? size - off : (size_t)SMALL_SEG;
		wal_seam seam;
		alone &= read_stream(SMALL_SEG, START + off, data + off, n, piece, &seam);
		uint64_t at;
		const char *why = wal_stitch_next(&st, &seam, &at);
		if (bad == NULL)
			bad = why;
	}
	/* what the stream reader accepts whole, the stitch accepts too */
	if (whole && alone && bad != NULL)
		abort();
	return 0;
}
