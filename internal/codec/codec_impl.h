/* codec internals shared by the per-method files: the codec record and their constructors. */
#ifndef WALC_INTERNAL_CODEC_CODEC_IMPL_H
#define WALC_INTERNAL_CODEC_CODEC_IMPL_H

#include "internal/codec/codec.h"

/* Output buffer of every streaming filter: bounded, flushed to next when full. */
#define CODEC_BUF_SIZE (256u * 1024)

struct codec {
	const char *name;
	const char *ext;
	int level_min;
	int level_max;
	int level_default; /* what level 0 means: WAL-G's choice */
	sink *(*compress_new)(int level, sink *next);
	sink *(*decompress_new)(sink *next);
};

/* A library refused to create a context: only out-of-memory can cause it, so abort like xmalloc. */
void codec_fatal(const char *what) __attribute__((noreturn));

sink *codec_none_compress_new(int level, sink *next);
sink *codec_none_decompress_new(sink *next);
sink *codec_lz4_compress_new(int level, sink *next);
sink *codec_lz4_decompress_new(sink *next);
sink *codec_zstd_compress_new(int level, sink *next);
sink *codec_zstd_decompress_new(sink *next);
sink *codec_brotli_compress_new(int level, sink *next);
sink *codec_brotli_decompress_new(sink *next);
sink *codec_lzma_compress_new(int level, sink *next);
sink *codec_lzma_decompress_new(sink *next);

#endif
