/*
 * libFuzzer target for the tar reader (and its partial mode, for ranged reads): the input is a
 * tar stream, fed in a few uneven writes to handlers that count and discard. Seeds in corpus/fuzz_tar are GNU tar archives in the
 * ustar, pax, gnu, oldgnu and v7 formats with long names, a directory and symlinks.
 */
#include "internal/tar/tar.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct counts {
	size_t entries, ends;
	uint64_t bytes, want;
	bool open;
} counts;

static err_code on_entry(void *ctx, const tar_entry *e)
{
	counts *c = ctx;
	/* The reader promises a well-formed callback sequence and bounded, terminated strings. */
	if (c->open || strlen(e->name) > TAR_NAME_MAX ||
		(e->linkname && strlen(e->linkname) > TAR_NAME_MAX) || e->size > TAR_SIZE_MAX)
		abort();
	c->entries++;
	c->open = true;
	c->bytes = 0;
	c->want = e->size;
	return E_OK;
}

static err_code on_data(void *ctx, const void *buf, size_t len)
{
	counts *c = ctx;
	if (!c->open || len == 0 || len > c->want - c->bytes)
		abort();
	/* Touch the bytes so ASan checks the range handed to us. */
	volatile unsigned char sink_byte = ((const unsigned char *)buf)[len - 1];
	(void)sink_byte;
	c->bytes += len;
	return E_OK;
}

static err_code on_end(void *ctx)
{
	counts *c = ctx;
	if (!c->open || c->bytes != c->want)
		abort();
	c->open = false;
	c->ends++;
	return E_OK;
}

static const tar_handler handler = { on_entry, on_data, on_end };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(LOG_ERROR, false, "fuzz");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	counts c = { 0 };
	/* The input's size picks the reader: the whole-archive one, or the one for a run of
	 * members cut out of an archive (ranged reads), which may end between two members. */
	sink *s = size % 2 ? tar_reader_new_partial(&handler, &c) : tar_reader_new(&handler, &c);
	/* Uneven pieces so header and record boundaries fall inside writes; keep writing after an
	 * error, since callers may too. */
	size_t cuts[] = { size < 1 ? size : 1, size / 3, size / 3 + 511, size / 2 + 1025, size };
	size_t at = 0;
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		size_t end = cuts[i] < size ? cuts[i] : size;
		if (end > at) {
			(void)sink_write(s, data + at, end - at);
			at = end;
		}
	}
	err_code rc = sink_finish(s);
	sink_free(s);
	/* A clean finish means every member was closed. */
	if (rc == E_OK && (c.open || c.ends != c.entries))
		abort();
	return 0;
}
