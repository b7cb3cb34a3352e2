/*
 * libFuzzer target for PostgreSQL 17's INCREMENTAL files as BASE_BACKUP sends them (bytes from
 * the server): the input, fed in chunks of its first byte's size, is one member converted to a
 * WAL-G increment. Hostile counts must be refused before allocation; whatever is accepted must
 * yield an increment of a file no longer than a relation segment.
 */
#include <stdlib.h>

#include "internal/backup/push/push_impl.h"
#include "internal/pg/pg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t chunk = (size_t)data[0] + 1;
	data++;
	size--;
	tar_writer *tw = tar_writer_new(null_sink_new());
	tar_entry te = { .name = "/base/1/16384", .mode = 0600 };
	incr_conv *c = incr_conv_new(size, &te);
	err_code rc = E_OK;
	for (size_t off = 0; rc == E_OK && off < size; off += chunk)
		rc = incr_conv_write(c, tw, data + off, size - off < chunk ? size - off : chunk);
	if (rc == E_OK)
		rc = incr_conv_end(c, tw);
	if (rc == E_OK) {
		uint64_t stored = incr_conv_stored(c);
		if (stored < 16 || (stored - 16) % (4 + PG_PAGE_SIZE) != 0 ||
			(stored - 16) / (4 + PG_PAGE_SIZE) > PG_RELSEG_BLOCKS)
			abort();
		if (tar_writer_finish(tw) != E_OK)
			abort();
	}
	incr_conv_free(c);
	tar_writer_free(tw);
	err_clear();
	return 0;
}
