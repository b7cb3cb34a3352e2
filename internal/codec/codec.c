/* The codec table: lookup by method name or object extension, and level defaulting. */
#include "internal/codec/codec_impl.h"

#include <stdlib.h>
#include <string.h>

/*
 * Defaults are WAL-G's: lz4 "fast" (LZ4F level 0), zstd 3, brotli quality 3. WAL-G's lzma
 * writer has no level; we use preset 2 with the dictionary forced to 8 MiB (see lzma.c): on
 * mixed data xz's default preset 6 was only 1-3% smaller for 25-60% more CPU, and presets 1-3
 * differ by under 0.5%.
 */
static const codec codec_lz4 = { .name = "lz4", .ext = "lz4", .level_min = 1, .level_max = 12,
	.level_default = 0, .compress_new = codec_lz4_compress_new,
	.decompress_new = codec_lz4_decompress_new };
static const codec codec_zstd = { .name = "zstd", .ext = "zst", .level_min = 1, .level_max = 22,
	.level_default = CODEC_ZSTD_LEVEL_DEFAULT, .compress_new = codec_zstd_compress_new,
	.decompress_new = codec_zstd_decompress_new, .frames = true };
static const codec codec_brotli = { .name = "brotli", .ext = "br", .level_min = 0, .level_max = 11,
	.level_default = 3, .compress_new = codec_brotli_compress_new,
	.decompress_new = codec_brotli_decompress_new };
static const codec codec_lzma = { .name = "lzma", .ext = "lzma", .level_min = 0, .level_max = 9,
	.level_default = 2, .compress_new = codec_lzma_compress_new,
	.decompress_new = codec_lzma_decompress_new };
static const codec codec_none = { .name = "none", .ext = "", .level_min = 0, .level_max = 0,
	.level_default = 0, .compress_new = codec_none_compress_new,
	.decompress_new = codec_none_decompress_new, .frames = true };

/* none last: probing an extension-less name only makes sense once the others missed. */
static const codec *const codec_table[] = { &codec_lz4, &codec_zstd, &codec_brotli, &codec_lzma,
	&codec_none, NULL };

const codec *codec_by_name(const char *name)
{
	for (const codec *const *c = codec_table; *c != NULL; c++)
		if (strcmp((*c)->name, name) == 0)
			return *c;
	return NULL;
}

const codec *codec_by_ext(const char *ext)
{
	for (const codec *const *c = codec_table; *c != NULL; c++)
		if (strcmp((*c)->ext, ext) == 0)
			return *c;
	return NULL;
}

const codec *const *codec_all(void)
{
	return codec_table;
}

const char *codec_name(const codec *c)
{
	return c->name;
}

const char *codec_ext(const codec *c)
{
	return c->ext;
}

int codec_level_min(const codec *c)
{
	return c->level_min;
}

int codec_level_max(const codec *c)
{
	return c->level_max;
}

sink *codec_compress_new(const codec *c, int level, sink *next)
{
	/* config validated the level; clamping keeps a stray value from reaching a library */
	if (level == 0)
		level = c->level_default;
	else if (level < c->level_min)
		level = c->level_min;
	else if (level > c->level_max)
		level = c->level_max;
	return c->compress_new(level, next);
}

bool codec_has_frames(const codec *c)
{
	return c->frames;
}

err_code codec_end_frame(const codec *c, sink *s)
{
	if (!c->frames)
		return err_set(E_FAIL, "%s streams cannot be cut into frames", c->name);
	/* none's sink is the chain below it: nothing is held back */
	return c->compress_new == codec_none_compress_new ? E_OK : codec_driver_end_frame(s);
}

sink *codec_decompress_new(const codec *c, sink *next)
{
	return c->decompress_new(next);
}

void codec_fatal(const char *what)
{
	log_error("%s: out of memory", what);
	abort();
}

size_t codec_decode_memory(const codec *c)
{
	/* Measured with WAL-G's settings: lz4 4 MiB blocks in and out, an 8 MiB LZMA dictionary,
	 * zstd and brotli windows of a few MiB. */
	if (strcmp(c->name, "lz4") == 0 || strcmp(c->name, "lzma") == 0)
		return 9u << 20;
	if (strcmp(c->name, "none") == 0)
		return CODEC_BUF_SIZE;
	return 5u << 20;
}
