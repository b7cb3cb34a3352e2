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
	/*
	 * an object may be a concatenation of independent frames that every reader takes as one
	 * stream: zstd's, and raw bytes (none). Not lz4: WAL-G v3.0.9 fails on a second lz4 frame
	 * ("lz4: invalid block size"), though lz4's own tools read them.
	 */
	bool frames;
	sink *(*compress_new)(int level, sink *next);
	sink *(*decompress_new)(sink *next);
};

/* A library refused to create a context: only out-of-memory can cause it, so abort like xmalloc. */
void codec_fatal(const char *what) __attribute__((noreturn));

/*
 * What a method's library does, one call at a time; the driver (driver.c) owns the buffer,
 * the loops, flushing to the next sink, and the end-of-stream and garbage checks, once for
 * every method.
 */
typedef struct codec_io {
	const unsigned char *in; /* the step advances in and in_len by what it consumed */
	size_t in_len;
	unsigned char *out; /* ... and out and out_room by what it produced */
	size_t out_room;
} codec_io;

typedef struct codec_step {
	const char *name; /* for messages: "zstd" */
	/*
	 * One library call. finishing: no input will follow (an encoder ends its stream). *ended:
	 * the stream, or for multi-frame formats the last frame, is complete here. A step that
	 * needs more room than out_room consumes and produces nothing; the driver then flushes.
	 */
	err_code (*step)(void *state, codec_io *io, bool finishing, bool *ended);
	void (*free)(void *state);
	bool single_stream; /* decoding: nothing may follow the end (brotli, LZMA-alone) */
} codec_step;

/*
 * A sink running step over its input into next (takes ownership of state and next), with an
 * output buffer of out_size bytes (0: CODEC_BUF_SIZE).
 */
sink *codec_driver_new(const codec_step *step, void *state, bool decoding, size_t out_size,
					   sink *next);
/* An encoding driver's stream ends here (the step is called finishing) and everything so far
 * goes on to next; the step then starts a new stream with the next input. */
err_code codec_driver_end_frame(sink *s);

sink *codec_none_compress_new(int level, sink *next);
sink *codec_none_decompress_new(sink *next);
sink *codec_lz4_compress_new(int level, sink *next);
sink *codec_lz4_decompress_new(sink *next);
/* WAL-G's "default" zstd level, walc's when none is set; at it and below, zstd adapts (zstdenc.c). */
#define CODEC_ZSTD_LEVEL_DEFAULT 3
sink *codec_zstd_compress_new(int level, sink *next);
sink *codec_zstd_decompress_new(sink *next);
sink *codec_brotli_compress_new(int level, sink *next);
sink *codec_brotli_decompress_new(sink *next);
sink *codec_lzma_compress_new(int level, sink *next);
sink *codec_lzma_decompress_new(sink *next);

#endif
