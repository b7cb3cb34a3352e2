/* Unit tests for internal/codec: round trips, bad input, CLI interop and WAL-G-written objects. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#include "internal/codec/codec.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <zstd.h>


#define MIB (1024u * 1024)

static const char *const compressing[] = { "lz4", "zstd", "brotli", "lzma", NULL };
static const char *const all_names[] = { "lz4", "zstd", "brotli", "lzma", "none", NULL };

static const codec *get(const char *name)
{
	const codec *c = codec_by_name(name);
	assert_non_null(c);
	return c;
}

/* Deterministic test data: random bytes, or text-like bytes that compress well. */
static unsigned char *gen(size_t n, bool compressible, uint32_t seed)
{
	static const char words[][8] = { "wal ", "page ", "lsn ", "xlog ", "tuple ", "heap ",
		"index ", "vacuum " };
	unsigned char *p = xmalloc(n);
	uint32_t x = seed * 2654435761u + 1;
	size_t i = 0;
	while (i < n) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		if (compressible) {
			const char *w = words[x % 8];
			for (size_t k = 0; w[k] != '\0' && i < n; k++)
				p[i++] = (unsigned char)w[k];
		} else {
			p[i++] = (unsigned char)x;
		}
	}
	return p;
}

/* Writes in chunks of odd, changing sizes so buffer edges land everywhere. */
static err_code feed(sink *s, const unsigned char *p, size_t n)
{
	static const size_t chunks[] = { 1, 7, 4093, 65537, 13, 300001, 2, 1048583 };
	return feed_sizes(s, p, n, ODD, chunks, sizeof(chunks) / sizeof(chunks[0]));
}

/* Pushes data through a filter into memory; whole: one write instead of odd chunks. */
static err_code run(sink *s, const unsigned char *p, size_t n, bool whole)
{
	err_code rc = whole ? sink_write(s, p, n) : feed(s, p, n);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	return rc;
}

static err_code compress_mem(const char *name, int level, const unsigned char *p, size_t n,
	membuf *out)
{
	memset(out, 0, sizeof(*out));
	return run(codec_compress_new(get(name), level, membuf_sink_new(out)), p, n, false);
}

static err_code decompress_mem(const char *name, const unsigned char *p, size_t n, membuf *out,
	bool whole)
{
	memset(out, 0, sizeof(*out));
	return run(codec_decompress_new(get(name), membuf_sink_new(out)), p, n, whole);
}

static void check_roundtrip(const char *name, int level, const unsigned char *p, size_t n)
{
	membuf z, back;
	assert_int_equal(compress_mem(name, level, p, n, &z), E_OK);
	if (strcmp(name, "none") != 0)
		assert_true(z.len > 0);
	for (int whole = 0; whole <= 1; whole++) {
		assert_int_equal(decompress_mem(name, z.data, z.len, &back, whole), E_OK);
		assert_int_equal(back.len, n);
		if (n > 0)
			assert_memory_equal(back.data, p, n);
		free(back.data);
	}
	free(z.data);
}

static void roundtrip(const char *name)
{
	/* 256 KiB and 4 MiB: exactly one output buffer and one lz4 block */
	static const size_t sizes[] = { 0, 1, 8191, 256 * 1024, MIB + 3, 4 * MIB };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int comp = sizes[i] > 2 * MIB; comp <= 1; comp++) {
			unsigned char *p = gen(sizes[i], comp, (uint32_t)i);
			check_roundtrip(name, 0, p, sizes[i]);
			free(p);
		}
	}
	/* several lz4 blocks and many output buffers in one write */
	size_t big = 9 * MIB + 5;
	unsigned char *p = gen(big, true, 99);
	membuf z, back;
	memset(&z, 0, sizeof(z));
	assert_int_equal(run(codec_compress_new(get(name), 0, membuf_sink_new(&z)), p, big, true),
		E_OK);
	assert_int_equal(decompress_mem(name, z.data, z.len, &back, false), E_OK);
	assert_int_equal(back.len, big);
	assert_memory_equal(back.data, p, big);
	free(back.data);
	free(z.data);
	free(p);
}

/* ---------------------------------------------------------------------------------------- */

static void test_lookup(void **state)
{
	(void)state;
	static const char *const exts[] = { "lz4", "zst", "br", "lzma", "" };
	const codec *const *all = codec_all();
	for (int i = 0; all_names[i] != NULL; i++) {
		const codec *c = codec_by_name(all_names[i]);
		assert_non_null(c);
		assert_ptr_equal(all[i], c); /* probing order: lz4, zstd, brotli, lzma, none */
		assert_string_equal(codec_name(c), all_names[i]);
		assert_string_equal(codec_ext(c), exts[i]);
		assert_ptr_equal(codec_by_ext(exts[i]), c);
	}
	assert_null(all[5]);
	assert_null(codec_by_name("gzip"));
	assert_null(codec_by_name("zst"));
	assert_null(codec_by_name(""));
	assert_null(codec_by_name("LZ4"));
	assert_null(codec_by_ext("zstd"));
	assert_null(codec_by_ext("gz"));
	assert_null(codec_by_ext("lzo"));
	assert_null(codec_by_ext(".lz4"));
}

static void test_levels(void **state)
{
	(void)state;
	static const int range[][2] = { { 1, 12 }, { 1, 22 }, { 0, 11 }, { 0, 9 }, { 0, 0 } };
	unsigned char *p = gen(70000, true, 5);
	for (int i = 0; all_names[i] != NULL; i++) {
		const codec *c = get(all_names[i]);
		assert_int_equal(codec_level_min(c), range[i][0]);
		assert_int_equal(codec_level_max(c), range[i][1]);
		/* min, max, and out-of-range values that must be clamped, not crash */
		int levels[] = { range[i][0], range[i][1], -5, range[i][1] + 7 };
		for (size_t k = 0; k < sizeof(levels) / sizeof(levels[0]); k++)
			check_roundtrip(all_names[i], levels[k], p, 70000);
	}
	/* the level reaches the library: the highest beats level 1 on text-like data */
	for (int i = 0; compressing[i] != NULL; i++) {
		membuf lo, hi;
		assert_int_equal(compress_mem(compressing[i], 1, p, 70000, &lo), E_OK);
		assert_int_equal(compress_mem(compressing[i], range[i][1], p, 70000, &hi), E_OK);
		assert_true(hi.len < lo.len);
		free(lo.data);
		free(hi.data);
	}
	free(p);
}

#define PER_CODEC(fn)                                                                         \
	static void fn##_lz4(void **st)                                                           \
	{                                                                                         \
		(void)st;                                                                             \
		fn("lz4");                                                                            \
	}                                                                                         \
	static void fn##_zstd(void **st)                                                          \
	{                                                                                         \
		(void)st;                                                                             \
		fn("zstd");                                                                           \
	}                                                                                         \
	static void fn##_brotli(void **st)                                                        \
	{                                                                                         \
		(void)st;                                                                             \
		fn("brotli");                                                                         \
	}                                                                                         \
	static void fn##_lzma(void **st)                                                          \
	{                                                                                         \
		(void)st;                                                                             \
		fn("lzma");                                                                           \
	}

PER_CODEC(roundtrip)

static void test_roundtrip_none(void **state)
{
	(void)state;
	roundtrip("none");
}

/* A valid object is never empty; only "none" may decode nothing to nothing. */
static void test_empty_input(void **state)
{
	(void)state;
	membuf out;
	for (int i = 0; compressing[i] != NULL; i++) {
		assert_int_equal(decompress_mem(compressing[i], NULL, 0, &out, true), E_CORRUPT);
		free(out.data);
	}
	assert_int_equal(decompress_mem("none", NULL, 0, &out, true), E_OK);
	assert_int_equal(out.len, 0);
	free(out.data);
}

static void test_truncated(void **state)
{
	(void)state;
	unsigned char *p = gen(300000, true, 7);
	for (int i = 0; compressing[i] != NULL; i++) {
		membuf z, out;
		assert_int_equal(compress_mem(compressing[i], 0, p, 300000, &z), E_OK);
		size_t cuts[] = { z.len - 1, z.len / 2, 1, 5 };
		for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
			/* the data so far is fine: write() succeeds, finish() notices the missing end */
			memset(&out, 0, sizeof(out));
			sink *s = codec_decompress_new(get(compressing[i]), membuf_sink_new(&out));
			assert_int_equal(feed(s, z.data, cuts[k]), E_OK);
			assert_int_equal(sink_finish(s), E_CORRUPT);
			assert_true(strstr(err_msg(), compressing[i]) != NULL);
			sink_free(s);
			free(out.data);
		}
		free(z.data);
	}
	free(p);
}

static void test_garbage(void **state)
{
	(void)state;
	unsigned char *junk = gen(100000, false, 11);
	static const char text[] = "this is not a compressed stream at all, just some text\n";
	for (int i = 0; compressing[i] != NULL; i++) {
		membuf out;
		assert_int_equal(decompress_mem(compressing[i], junk, 100000, &out, false), E_CORRUPT);
		free(out.data);
		assert_int_equal(decompress_mem(compressing[i], (const unsigned char *)text,
							 sizeof(text) - 1, &out, true),
			E_CORRUPT);
		free(out.data);
	}
	free(junk);
}

/* lz4 and zstd carry content checksums: a flipped byte in the body must be caught. */
static void test_checksum(void **state)
{
	(void)state;
	unsigned char *p = gen(200000, false, 13);
	static const char *const summed[] = { "lz4", "zstd" };
	for (int i = 0; i < 2; i++) {
		membuf z, out;
		assert_int_equal(compress_mem(summed[i], 0, p, 200000, &z), E_OK);
		z.data[z.len / 2] ^= 0x40;
		assert_int_equal(decompress_mem(summed[i], z.data, z.len, &out, false), E_CORRUPT);
		free(out.data);
		free(z.data);
	}
	free(p);
}

static void test_trailing_garbage(void **state)
{
	(void)state;
	unsigned char *p = gen(50000, true, 17);
	for (int i = 0; compressing[i] != NULL; i++) {
		membuf z, out;
		assert_int_equal(compress_mem(compressing[i], 0, p, 50000, &z), E_OK);
		/* appended in the same write, and in a later write after the end */
		unsigned char *t = xmalloc(z.len + 3);
		memcpy(t, z.data, z.len);
		memcpy(t + z.len, "xyz", 3);
		assert_int_equal(decompress_mem(compressing[i], t, z.len + 3, &out, true), E_CORRUPT);
		free(out.data);
		memset(&out, 0, sizeof(out));
		sink *s = codec_decompress_new(get(compressing[i]), membuf_sink_new(&out));
		assert_int_equal(sink_write(s, z.data, z.len), E_OK);
		err_code rc = sink_write(s, "\0", 1);
		if (rc == E_OK)
			rc = sink_finish(s);
		assert_int_equal(rc, E_CORRUPT);
		sink_free(s);
		free(out.data);
		free(t);
		free(z.data);
	}
	free(p);
}

/* lz4 and zstd readers accept several frames back to back, as their CLIs do. */
static void test_concatenated(void **state)
{
	(void)state;
	unsigned char *a = gen(100000, true, 19), *b = gen(70001, false, 23);
	static const char *const framed[] = { "lz4", "zstd" };
	for (int i = 0; i < 2; i++) {
		membuf za, zempty, zb, both, out;
		assert_int_equal(compress_mem(framed[i], 0, a, 100000, &za), E_OK);
		assert_int_equal(compress_mem(framed[i], 0, NULL, 0, &zempty), E_OK);
		assert_int_equal(compress_mem(framed[i], 0, b, 70001, &zb), E_OK);
		memset(&both, 0, sizeof(both));
		sink *m = membuf_sink_new(&both);
		assert_int_equal(sink_write(m, za.data, za.len), E_OK);
		assert_int_equal(sink_write(m, zempty.data, zempty.len), E_OK);
		assert_int_equal(sink_write(m, zb.data, zb.len), E_OK);
		sink_free(m);
		assert_int_equal(decompress_mem(framed[i], both.data, both.len, &out, false), E_OK);
		assert_int_equal(out.len, 170001);
		assert_memory_equal(out.data, a, 100000);
		assert_memory_equal(out.data + 100000, b, 70001);
		free(out.data);
		free(both.data);
		free(za.data);
		free(zempty.data);
		free(zb.data);
	}
	free(a);
	free(b);
}

/*
 * codec_end_frame cuts a stream into frames a decoder can start at: from each cut's offset
 * the rest decodes alone, and between two cuts exactly what was written between them. A cut
 * with nothing since the last one adds nothing, and finish after a cut adds no empty frame.
 */
static void test_frames(void **state)
{
	(void)state;
	size_t la = 100000, lb = 300001, lc = 5000;
	unsigned char *a = gen(la, true, 3), *b = gen(lb, false, 5), *c = gen(lc, true, 7);
	static const char *const framed[] = { "zstd", "none" };
	for (int i = 0; i < 2; i++) {
		const codec *k = get(framed[i]);
		assert_true(codec_has_frames(k));
		membuf z = { 0 }, out;
		sink *s = codec_compress_new(k, 0, membuf_sink_new(&z));
		assert_int_equal(codec_end_frame(k, s), E_OK); /* nothing yet: no frame */
		assert_int_equal(z.len, 0);
		assert_int_equal(feed(s, a, la), E_OK);
		assert_int_equal(codec_end_frame(k, s), E_OK);
		size_t at_b = z.len;
		assert_true(at_b > 0);
		for (size_t at = 0; at < lb; at += 65536)
			assert_int_equal(sink_write(s, b + at, lb - at < 65536 ? lb - at : 65536), E_OK);
		assert_int_equal(codec_end_frame(k, s), E_OK);
		size_t at_c = z.len;
		assert_int_equal(codec_end_frame(k, s), E_OK);
		assert_int_equal(z.len, at_c);
		assert_int_equal(feed(s, c, lc), E_OK);
		assert_int_equal(codec_end_frame(k, s), E_OK);
		size_t end = z.len;
		assert_int_equal(sink_finish(s), E_OK);
		sink_free(s);
		assert_int_equal(z.len, end);

		assert_int_equal(decompress_mem(framed[i], z.data, z.len, &out, false), E_OK);
		assert_int_equal(out.len, la + lb + lc);
		assert_memory_equal(out.data, a, la);
		assert_memory_equal(out.data + la + lb, c, lc);
		free(out.data);
		assert_int_equal(decompress_mem(framed[i], z.data + at_b, at_c - at_b, &out, false), E_OK);
		assert_int_equal(out.len, lb);
		assert_memory_equal(out.data, b, lb);
		free(out.data);
		assert_int_equal(decompress_mem(framed[i], z.data + at_c, z.len - at_c, &out, false), E_OK);
		assert_int_equal(out.len, lc);
		assert_memory_equal(out.data, c, lc);
		free(out.data);
		free(z.data);
	}
	for (int i = 0; i < 4; i++) { /* lz4 (for WAL-G), brotli, lzma: one stream each */
		if (strcmp(compressing[i], "zstd") == 0)
			continue;
		const codec *k = get(compressing[i]);
		assert_false(codec_has_frames(k));
		membuf z = { 0 };
		sink *s = codec_compress_new(k, 0, membuf_sink_new(&z));
		assert_int_equal(codec_end_frame(k, s), E_FAIL);
		sink_free(s);
		free(z.data);
	}
	free(a);
	free(b);
	free(c);
}

/* A sink that fails with E_IO at write or at finish, to check errors come back unchanged. */
typedef struct fail_sink {
	sink base;
	bool at_finish;
} fail_sink;

static err_code fail_write(sink *s, const void *buf, size_t len)
{
	(void)buf;
	(void)len;
	if (((fail_sink *)s)->at_finish)
		return E_OK;
	return err_set(E_IO, "disk on fire");
}

static err_code fail_finish(sink *s)
{
	(void)s;
	return err_set(E_IO, "disk on fire");
}

static void fail_free(sink *s)
{
	free(s);
}

static const sink_ops fail_ops = { fail_write, fail_finish, fail_free };

static sink *fail_sink_new(bool at_finish)
{
	fail_sink *f = xcalloc(1, sizeof(*f));
	f->base.ops = &fail_ops;
	f->at_finish = at_finish;
	return &f->base;
}

static void test_error_propagation(void **state)
{
	(void)state;
	unsigned char *p = gen(3 * MIB, false, 29);
	for (int i = 0; all_names[i] != NULL; i++) {
		const codec *c = get(all_names[i]);
		membuf z;
		assert_int_equal(compress_mem(all_names[i], 0, p, 3 * MIB, &z), E_OK);
		for (int at_finish = 0; at_finish <= 1; at_finish++) {
			assert_int_equal(run(codec_compress_new(c, 0, fail_sink_new(at_finish)), p,
								 3 * MIB, false),
				E_IO);
			assert_string_equal(err_msg(), "disk on fire");
			assert_int_equal(run(codec_decompress_new(c, fail_sink_new(at_finish)), z.data,
								 z.len, false),
				E_IO);
			assert_string_equal(err_msg(), "disk on fire");
		}
		free(z.data);
	}
	free(p);
}

/*
 * zstd keeps a finished stream's context for the next one: the next stream gets its own level,
 * and a stream dropped mid-frame (its sink failed) leaves nothing behind for the next.
 */
static void test_zstd_context_reuse(void **state)
{
	(void)state;
	size_t n = 3 * MIB;
	unsigned char *p = gen(n, true, 37);
	membuf fast, slow, again, back;
	assert_int_equal(compress_mem("zstd", 1, p, n, &fast), E_OK);
	assert_int_equal(compress_mem("zstd", 19, p, n, &slow), E_OK);
	assert_true(slow.len < fast.len);
	assert_int_equal(run(codec_compress_new(get("zstd"), 1, fail_sink_new(false)), p, n, false),
		E_IO);
	assert_int_equal(compress_mem("zstd", 1, p, n, &again), E_OK);
	assert_int_equal(again.len, fast.len);
	assert_memory_equal(again.data, fast.data, fast.len);
	assert_int_equal(decompress_mem("zstd", slow.data, slow.len, &back, true), E_OK);
	assert_int_equal(back.len, n);
	assert_memory_equal(back.data, p, n);
	free(fast.data);
	free(slow.data);
	free(again.data);
	free(back.data);
	free(p);
}

/*
 * zstd output is a frame for each 1 MiB of input, cut at the same places however the input
 * was written: one write and odd chunks give the same bytes.
 */
static void test_zstd_pieces(void **state)
{
	(void)state;
	size_t n = 5 * MIB + 123;
	unsigned char *p = gen(n, true, 41);
	membuf odd, whole;
	assert_int_equal(compress_mem("zstd", 0, p, n, &odd), E_OK);
	memset(&whole, 0, sizeof(whole));
	assert_int_equal(run(codec_compress_new(get("zstd"), 0, membuf_sink_new(&whole)), p, n, true),
		E_OK);
	assert_int_equal(odd.len, whole.len);
	assert_memory_equal(odd.data, whole.data, odd.len);
	size_t at = 0, frames = 0;
	while (at < odd.len) {
		size_t len = ZSTD_findFrameCompressedSize(odd.data + at, odd.len - at);
		assert_false(ZSTD_isError(len));
		unsigned long long content = ZSTD_getFrameContentSize(odd.data + at, len);
		assert_int_equal(content, frames < 5 ? MIB : 123);
		at += len;
		frames++;
	}
	assert_int_equal(frames, 6);
	free(odd.data);
	free(whole.data);
	free(p);
}

/*
 * At the default level a piece whose samples do not compress goes at level 1, one that
 * compresses at level 3, and a level asked for above the default is kept: the frames of
 * random bytes are level 1's, of text level 3's, of random bytes at level 5 not level 1's.
 */
static void test_zstd_poor_pieces(void **state)
{
	(void)state;
	size_t n = 3 * MIB + 5;
	unsigned char *noise = gen(n, false, 47), *text = gen(n, true, 53);
	membuf d, one, three;
	assert_int_equal(compress_mem("zstd", 0, noise, n, &d), E_OK);
	assert_int_equal(compress_mem("zstd", 1, noise, n, &one), E_OK);
	assert_int_equal(d.len, one.len);
	assert_memory_equal(d.data, one.data, d.len);
	free(d.data);
	free(one.data);
	assert_int_equal(compress_mem("zstd", 5, noise, n, &d), E_OK);
	assert_int_equal(compress_mem("zstd", 1, noise, n, &one), E_OK);
	assert_true(d.len != one.len || memcmp(d.data, one.data, d.len) != 0);
	free(d.data);
	free(one.data);
	assert_int_equal(compress_mem("zstd", 0, text, n, &d), E_OK);
	assert_int_equal(compress_mem("zstd", 3, text, n, &three), E_OK);
	assert_int_equal(compress_mem("zstd", 1, text, n, &one), E_OK);
	assert_int_equal(d.len, three.len);
	assert_memory_equal(d.data, three.data, d.len);
	assert_true(d.len != one.len || memcmp(d.data, one.data, d.len) != 0);
	free(d.data);
	free(three.data);
	free(one.data);
	check_roundtrip("zstd", 0, noise, n);
	free(noise);
	free(text);
}

typedef struct here_job {
	const unsigned char *p;
	size_t n;
	membuf out;
	err_code rc;
} here_job;

static void *compress_here(void *arg)
{
	here_job *j = arg;
	codec_compress_here();
	j->rc = compress_mem("zstd", 0, j->p, j->n, &j->out);
	return NULL;
}

/* A thread that compresses its streams itself writes the same frames as the workers do. */
static void test_zstd_here(void **state)
{
	(void)state;
	size_t n = 3 * MIB + 77;
	unsigned char *p = gen(n, true, 43);
	membuf workers;
	assert_int_equal(compress_mem("zstd", 0, p, n, &workers), E_OK);
	here_job j = { .p = p, .n = n };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, compress_here, &j), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(j.rc, E_OK);
	assert_int_equal(j.out.len, workers.len);
	assert_memory_equal(j.out.data, workers.data, workers.len);
	free(j.out.data);
	free(workers.data);
	free(p);
}

/* The exact stream headers WAL-G writes (see walg-compat.md §10). */
static void test_framing(void **state)
{
	(void)state;
	unsigned char *p = gen(5000, true, 31);
	membuf z;

	assert_int_equal(compress_mem("lz4", 0, p, 5000, &z), E_OK);
	assert_memory_equal(z.data, "\x04\x22\x4d\x18", 4);
	assert_int_equal(z.data[4], 0x64); /* version 01, independent blocks, content checksum */
	assert_int_equal(z.data[5], 0x70); /* 4 MiB blocks */
	free(z.data);

	assert_int_equal(compress_mem("zstd", 0, p, 5000, &z), E_OK);
	assert_memory_equal(z.data, "\x28\xb5\x2f\xfd", 4);
	assert_true(z.data[4] & 0x04); /* content checksum flag */
	free(z.data);

	assert_int_equal(compress_mem("brotli", 0, p, 5000, &z), E_OK);
	assert_int_equal(z.data[0] & 0x0f, 0x0b); /* WBITS code for lgwin 22 */
	free(z.data);

	assert_int_equal(compress_mem("lzma", 0, p, 5000, &z), E_OK);
	assert_memory_equal(z.data, "\x5d\x00\x00\x80\x00\xff\xff\xff\xff\xff\xff\xff\xff", 13);
	free(z.data);

	assert_int_equal(compress_mem("none", 0, p, 5000, &z), E_OK);
	assert_int_equal(z.len, 5000);
	assert_memory_equal(z.data, p, 5000);
	free(z.data);
	free(p);
}

/* ---------------------------------------------------------------------------------------- */
/* Interop with the Debian command-line tools                                              */

static char *tmpdir;

static int make_tmpdir(void **state)
{
	(void)state;
	tmpdir = unit_tmpdir();
	return 0;
}

static int remove_tmpdir(void **state)
{
	(void)state;
	int rc = unit_rmtree(tmpdir);
	free(tmpdir);
	return rc;
}

static void write_file(const char *path, const unsigned char *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(p, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

static unsigned char *read_file(const char *path, size_t *n)
{
	membuf mb;
	memset(&mb, 0, sizeof(mb));
	sink *s = membuf_sink_new(&mb);
	err_code rc = sink_write_file(s, path);
	if (rc != E_OK)
		print_error("%s\n", err_msg());
	assert_int_equal(rc, E_OK);
	sink_free(s);
	*n = mb.len;
	return mb.data ? mb.data : xmalloc(1);
}

/* Runs "tool in > out", the tool's flags writing to stdout. */
static void shell(const char *tool, const char *in, const char *out)
{
	char *cmd = xasprintf("%s '%s' > '%s'", tool, in, out);
	int rc = system(cmd);
	if (rc != 0)
		print_error("command failed (%d): %s\n", rc, cmd);
	assert_int_equal(rc, 0);
	free(cmd);
}

/* Text with stretches of random bytes, like a WAL segment or a tar of a data directory. */
static unsigned char *mixed(size_t n)
{
	unsigned char *p = gen(n, true, 37), *r = gen(n, false, 41);
	for (size_t i = 0; i + 100000 < n; i += 250000)
		memcpy(p + i, r + i, 100000);
	free(r);
	return p;
}

static const char *const cli_decode[] = { "lz4 -d -q -c", "zstd -d -q -c",
	"brotli -d -c", "xz --format=lzma -d -c" };

static void test_cli_decodes_ours(void **state)
{
	(void)state;
	size_t n = MIB + 3;
	unsigned char *p = mixed(n);
	char *zpath = xasprintf("%s/ours.z", tmpdir), *opath = xasprintf("%s/ours.out", tmpdir);
	for (int i = 0; compressing[i] != NULL; i++) {
		size_t sizes[] = { n, 0 };
		for (int k = 0; k < 2; k++) {
			membuf z;
			assert_int_equal(compress_mem(compressing[i], 0, p, sizes[k], &z), E_OK);
			write_file(zpath, z.data, z.len);
			free(z.data);
			shell(cli_decode[i], zpath, opath);
			size_t m;
			unsigned char *back = read_file(opath, &m);
			assert_int_equal(m, sizes[k]);
			if (m > 0)
				assert_memory_equal(back, p, m);
			free(back);
		}
	}
	free(zpath);
	free(opath);
	free(p);
}

static void test_we_decode_cli(void **state)
{
	(void)state;
	/* defaults, and settings WAL-G never uses but a reader must still accept */
	static const struct {
		const char *name, *cmd;
	} enc[] = {
		{ "lz4", "lz4 -q -c" },
		{ "lz4", "lz4 -q -9 -BD -BX -B4 --content-size -c" },
		{ "zstd", "zstd -q -c" },
		{ "zstd", "zstd -q -12 --no-check --long=24 -c" },
		{ "brotli", "brotli -c" },
		{ "brotli", "brotli -q 5 -w 16 -c" },
		{ "lzma", "xz --format=lzma -c" },
		{ "lzma", "xz --format=lzma -0 -c" },
	};
	size_t n = MIB + 3;
	unsigned char *p = mixed(n);
	char *dpath = xasprintf("%s/plain", tmpdir), *zpath = xasprintf("%s/cli.z", tmpdir);
	write_file(dpath, p, n);
	for (size_t i = 0; i < sizeof(enc) / sizeof(enc[0]); i++) {
		shell(enc[i].cmd, dpath, zpath);
		size_t m;
		unsigned char *z = read_file(zpath, &m);
		membuf out;
		err_code rc = decompress_mem(enc[i].name, z, m, &out, false);
		if (rc != E_OK)
			print_error("%s: %s\n", enc[i].cmd, err_msg());
		assert_int_equal(rc, E_OK);
		assert_int_equal(out.len, n);
		assert_memory_equal(out.data, p, n);
		free(out.data);
		free(z);
	}
	free(dpath);
	free(zpath);
	free(p);
}

/* The same WAL segment as pushed by WAL-G v3.0.9 with each method. */
static void test_walg_objects(void **state)
{
	(void)state;
	const char *dir = getenv("WALC_FIXTURES_WALG"); /* else the copy in the repository */
	if (dir == NULL || *dir == '\0')
		dir = "test/fixtures/walg-v3.0.9";
	static const char *const exts[] = { "lz4", "zst", "br", "lzma" };
	unsigned char *first = NULL;
	for (int i = 0; i < 4; i++) {
		char *path = xasprintf("%s/%s/repo/wal_005/000000010000000000000024.%s", dir,
			compressing[i], exts[i]);
		size_t m;
		unsigned char *z = read_file(path, &m); /* fails the test when the fixture is absent */
		membuf out;
		const codec *c = codec_by_ext(exts[i]);
		assert_ptr_equal(c, get(compressing[i]));
		err_code rc = decompress_mem(compressing[i], z, m, &out, false);
		if (rc != E_OK)
			print_error("%s: %s\n", path, err_msg());
		assert_int_equal(rc, E_OK);
		assert_int_equal(out.len, 1048576);
		/* XLOG_PAGE_MAGIC 0xD110 (PostgreSQL 15) / 0xD111 (16), little-endian */
		assert_true(out.data[0] == 0x10 || out.data[0] == 0x11);
		assert_int_equal(out.data[1], 0xd1);
		if (first == NULL)
			first = out.data;
		else {
			assert_memory_equal(out.data, first, 1048576);
			free(out.data);
		}
		free(z);
		free(path);
	}
	free(first);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(roundtrip_lz4),
		cmocka_unit_test(roundtrip_zstd),
		cmocka_unit_test(roundtrip_brotli),
		cmocka_unit_test(roundtrip_lzma),
		cmocka_unit_test(test_roundtrip_none),
		cmocka_unit_test(test_empty_input),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_checksum),
		cmocka_unit_test(test_trailing_garbage),
		cmocka_unit_test(test_concatenated),
		cmocka_unit_test(test_frames),
		cmocka_unit_test(test_error_propagation),
		cmocka_unit_test(test_zstd_context_reuse),
		cmocka_unit_test(test_zstd_pieces),
		cmocka_unit_test(test_zstd_poor_pieces),
		cmocka_unit_test(test_zstd_here),
		cmocka_unit_test(test_framing),
		cmocka_unit_test(test_cli_decodes_ours),
		cmocka_unit_test(test_we_decode_cli),
		cmocka_unit_test(test_walg_objects),
	};
	return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
