/* lz4 method: LZ4 frames as WAL-G writes them (4 MiB independent blocks, content checksum). */
#include "internal/codec/codec_impl.h"

#include <lz4frame.h>
#include <stdlib.h>

/* Input handed to LZ4F per call; the output bound is dominated by the 4 MiB block anyway. */
#define LZ4_IN_STEP (64u * 1024)

typedef struct lz4_enc {
	LZ4F_cctx *cctx;
	LZ4F_preferences_t prefs;
	bool begun;
} lz4_enc;

/* LZ4F writes whole blocks: a call needs its worst case in room, else it waits for a flush. */
static err_code enc_step(void *state, codec_io *io, bool finishing, bool *ended)
{
	lz4_enc *e = state;
	size_t step = io->in_len < LZ4_IN_STEP ? io->in_len : LZ4_IN_STEP;
	if (io->out_room < LZ4F_compressBound(LZ4_IN_STEP, &e->prefs) + LZ4F_HEADER_SIZE_MAX)
		return E_OK;
	size_t n;
	if (!e->begun) {
		n = LZ4F_compressBegin(e->cctx, io->out, io->out_room, &e->prefs);
		if (LZ4F_isError(n))
			return err_set(E_FAIL, "lz4: %s", LZ4F_getErrorName(n));
		io->out += n, io->out_room -= n;
		e->begun = true;
	}
	if (step > 0) {
		n = LZ4F_compressUpdate(e->cctx, io->out, io->out_room, io->in, step, NULL);
		if (LZ4F_isError(n))
			return err_set(E_FAIL, "lz4: %s", LZ4F_getErrorName(n));
		io->out += n, io->out_room -= n;
		io->in += step, io->in_len -= step;
	} else if (finishing) {
		n = LZ4F_compressEnd(e->cctx, io->out, io->out_room, NULL);
		if (LZ4F_isError(n))
			return err_set(E_FAIL, "lz4: %s", LZ4F_getErrorName(n));
		io->out += n, io->out_room -= n;
		*ended = true;
	}
	return E_OK;
}

static void enc_free(void *state)
{
	lz4_enc *e = state;
	LZ4F_freeCompressionContext(e->cctx);
	free(e);
}

static const codec_step lz4_enc_step = { "lz4", enc_step, enc_free, false };

sink *codec_lz4_compress_new(int level, sink *next)
{
	lz4_enc *e = xcalloc(1, sizeof(*e));
	if (LZ4F_isError(LZ4F_createCompressionContext(&e->cctx, LZ4F_VERSION)))
		codec_fatal("lz4 compression context");
	e->prefs.frameInfo.blockSizeID = LZ4F_max4MB;
	e->prefs.frameInfo.blockMode = LZ4F_blockIndependent;
	e->prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
	e->prefs.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
	e->prefs.compressionLevel = level;
	/* Room for the largest call: a whole 4 MiB block may come out of one update. */
	size_t out = LZ4F_compressBound(LZ4_IN_STEP, &e->prefs) + LZ4F_HEADER_SIZE_MAX;
	return codec_driver_new(&lz4_enc_step, e, false, out, next);
}

/* A stream of frames: LZ4F answers 0 once a frame ended and it is ready for the next. */
static err_code dec_step(void *state, codec_io *io, bool finishing, bool *ended)
{
	(void)finishing;
	size_t in_n = io->in_len, out_n = io->out_room;
	size_t r = LZ4F_decompress(state, io->out, &out_n, io->in, &in_n, NULL);
	if (LZ4F_isError(r))
		return err_set(E_CORRUPT, "lz4: %s", LZ4F_getErrorName(r));
	io->in += in_n, io->in_len -= in_n;
	io->out += out_n, io->out_room -= out_n;
	*ended = r == 0;
	return E_OK;
}

static void dec_free(void *state)
{
	LZ4F_freeDecompressionContext(state);
}

static const codec_step lz4_dec_step = { "lz4", dec_step, dec_free, false };

sink *codec_lz4_decompress_new(sink *next)
{
	LZ4F_dctx *dctx;
	if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
		codec_fatal("lz4 decompression context");
	return codec_driver_new(&lz4_dec_step, dctx, true, 0, next);
}
