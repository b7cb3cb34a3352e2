/*
 * Shared body of the decompression fuzz targets (fuzz_lz4.c, fuzz_zstd.c, ...): untrusted bytes
 * go through a decoder in writes of varying size; it must fail cleanly, never crash or leak.
 * fuzz_feed() is also fuzz_pgp.c's.
 */
#ifndef WALC_TEST_FUZZ_FUZZ_CODEC_H
#define WALC_TEST_FUZZ_FUZZ_CODEC_H

#include "internal/codec/codec.h"

#include <stdint.h>
#include <stdlib.h>

/* Decompression bombs are legal input: stop counting there instead of timing out. */
#define FUZZ_OUTPUT_CAP ((size_t)64 << 20)

typedef struct fuzz_count_sink {
	sink base;
	size_t total;
} fuzz_count_sink;

static err_code fuzz_count_write(sink *s, const void *buf, size_t len)
{
	fuzz_count_sink *c = (fuzz_count_sink *)s;
	c->total += len;
	if (c->total > FUZZ_OUTPUT_CAP)
		return err_set(E_CORRUPT, "output over the fuzzing cap");
	return sink_write(s->next, buf, len);
}

static err_code fuzz_count_finish(sink *s)
{
	return sink_finish(s->next);
}

static void fuzz_count_free(sink *s)
{
	sink_free(s->next);
	free(s);
}

static const sink_ops fuzz_count_ops = { fuzz_count_write, fuzz_count_finish, fuzz_count_free };

/*
 * Writes data into s, then finishes it, stopping at the first error. Chunk sizes cycle through
 * steps from a start the input picks (byte at pick), so buffer edges move with the data.
 */
static inline err_code fuzz_feed(sink *s, const uint8_t *data, size_t size, const size_t *steps,
								 size_t nsteps, size_t pick)
{
	size_t k = size > 0 ? data[pick < size ? pick : size - 1] : 0;
	err_code rc = E_OK;
	for (size_t off = 0; rc == E_OK && off < size; k++) {
		size_t n = steps[k % nsteps];
		if (n > size - off)
			n = size - off;
		rc = sink_write(s, data + off, n);
		off += n;
	}
	return rc == E_OK ? sink_finish(s) : rc;
}

static inline int fuzz_codec_run(const char *name, const uint8_t *data, size_t size)
{
	static const size_t steps[] = { 1, 4099, 3, 65536, 17, 251, 1024, 64 };
	const codec *c = codec_by_name(name);
	if (c == NULL)
		abort();
	fuzz_count_sink *count = xcalloc(1, sizeof(*count));
	count->base.ops = &fuzz_count_ops;
	count->base.next = null_sink_new();
	sink *s = codec_decompress_new(c, &count->base);
	err_code rc = fuzz_feed(s, data, size, steps, sizeof(steps) / sizeof(steps[0]), SIZE_MAX);
	sink_free(s);
	/* bad input is E_CORRUPT; anything else means the decoder misreported it */
	if (rc != E_OK && rc != E_CORRUPT)
		abort();
	err_clear();
	return 0;
}

#endif
