/*
 * codec: streaming compression and decompression filters with WAL-G's exact framing
 * (lz4 frame, zstd frame, raw brotli, LZMA-alone, none), chosen by method name or by the
 * object's file extension.
 */
#ifndef WALC_INTERNAL_CODEC_CODEC_H
#define WALC_INTERNAL_CODEC_CODEC_H

#include "internal/core/core.h"

typedef struct codec codec;

/* "lz4", "zstd", "brotli", "lzma", "none"; NULL when unknown. */
const codec *codec_by_name(const char *name);
/* "lz4", "zst", "br", "lzma", "" (none); NULL when unknown. */
const codec *codec_by_ext(const char *ext);
/*
 * Every codec in the order wal-fetch probes extensions when the configured one misses,
 * NULL-terminated.
 */
const codec *const *codec_all(void);
const char *codec_name(const codec *c);
/* The extension without the dot; "" for none. */
const char *codec_ext(const codec *c);
/* Accepted levels, for messages and validation; 0 always means WAL-G's default. */
int codec_level_min(const codec *c);
int codec_level_max(const codec *c);

/*
 * About how much memory one decompressing stream of this codec holds (its window or block
 * buffers), for callers that bound how many streams run at once.
 */
size_t codec_decode_memory(const codec *c);

/* Compress into next (takes ownership of next). level 0 = WAL-G's default level. */
sink *codec_compress_new(const codec *c, int level, sink *next);
/*
 * The calling thread compresses its streams itself from now on, with no worker threads: for
 * a thread that is one of several compressing at once, which fill the cores already.
 */
void codec_compress_here(void);
/*
 * Whether c's objects may be concatenations of independent frames, which a decoder can start
 * reading at any frame's first byte, and which every reader (WAL-G's too) takes as one
 * stream: zstd, and none trivially. Not lz4 (WAL-G's reader stops after one frame), brotli
 * or LZMA-alone.
 */
bool codec_has_frames(const codec *c);
/*
 * s (from codec_compress_new(c, ...)) ends its frame and passes every byte so far on, so the
 * next byte written starts a new frame: its offset in the object is an entry point for ranged
 * reads. The object stays one valid stream for any reader (WAL-G's too). Only for codecs
 * with frames.
 */
err_code codec_end_frame(const codec *c, sink *s);
/*
 * Decompress into next (takes ownership of next). finish() fails with E_CORRUPT when the
 * stream is truncated or followed by garbage; write() fails with E_CORRUPT on bad data.
 */
sink *codec_decompress_new(const codec *c, sink *next);

#endif
