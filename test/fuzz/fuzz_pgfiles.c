/*
 * libFuzzer target for what backup-verify reads of PostgreSQL's own files, untrusted bytes
 * from a repository: pg_control (data checksums, and what catchup-fetch and wal-restore read
 * of it), WAL pages, timeline history files and data
 * pages; and the long page header wal-push and wal-fetch hold a segment to. The checks must
 * never read past their input, whatever it holds.
 */
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	bool on;
	(void)pg_control_checksums(data, size, &on);
	pg_control_info ci;
	(void)pg_control_read(data, size, &ci);

	uint32_t tli = size >= 4 ? (uint32_t)data[0] | (uint32_t)data[1] << 8 : 2;
	const char *what = pg_history_check((const char *)data, size, tli);
	if (what != NULL && what[0] == '\0')
		abort(); /* a problem always says what */

	/* The input as a segment of 1 MiB WAL: pages in order, the last one zero-padded. */
	unsigned char *page = xcalloc(1, PG_WAL_PAGE);
	pg_wal_check c = { 0 };
	for (size_t off = 0, i = 0; off < size && i < 128; off += PG_WAL_PAGE, i++) {
		size_t n = size - off < PG_WAL_PAGE ? size - off : PG_WAL_PAGE;
		memset(page, 0, PG_WAL_PAGE);
		memcpy(page, data + off, n);
		(void)pg_wal_page_check(&c, page, 3, (uint64_t)1 << 20, (uint32_t)i, tli, 0);
		pg_page_verdict v = pg_page_verify(page, (uint32_t)i, true, 0);
		if (v > PG_PAGE_BAD_CHECKSUM)
			abort();
	}
	free(page);

	/* The input as the start of a file named as a segment, of its own size or a segment's. */
	static const char *const names[] = { "000000030000000000000003", "000000010000000100000000",
										 "000000010000000000000003.partial" };
	uint64_t sysid;
	char why[128];
	for (size_t i = 0; i < 3; i++)
		for (uint64_t seg = 0; seg <= ((uint64_t)1 << 24); seg += (uint64_t)1 << 24)
			if (!wal_segment_check(names[i], data, size < 40 ? size : 40, seg ? seg : size, seg,
								   &sysid, why) &&
				memchr(why, '\0', sizeof(why)) == NULL)
				abort();
	err_clear();
	return 0;
}
