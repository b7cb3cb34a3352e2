/* zstd method, reading: a stream of standard frames (zstdenc.c writes them). */
#include "internal/codec/codec_impl.h"

#include <zstd.h>

/*
 * Largest window the decoder accepts (128 MiB, zstd --ultra -22 uses 2^27): WAL-G writes
 * 8 MiB windows, and this bounds what a hostile object can make us allocate.
 */
#define ZSTD_WINDOW_LOG_MAX 27

/* A stream of frames: it may end after any whole frame. */
static err_code dec_step(void *state, codec_io *io, bool finishing, bool *ended)
{
	(void)finishing;
	ZSTD_inBuffer in = { io->in, io->in_len, 0 };
	ZSTD_outBuffer out = { io->out, io->out_room, 0 };
	size_t r = ZSTD_decompressStream(state, &out, &in);
	if (ZSTD_isError(r))
		return err_set(E_CORRUPT, "zstd: %s", ZSTD_getErrorName(r));
	io->in += in.pos, io->in_len -= in.pos;
	io->out += out.pos, io->out_room -= out.pos;
	*ended = r == 0;
	return E_OK;
}

static void dec_free(void *state)
{
	ZSTD_freeDCtx(state);
}

static const codec_step zstd_dec = { "zstd", dec_step, dec_free, false };

sink *codec_zstd_decompress_new(sink *next)
{
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	if (dctx == NULL)
		codec_fatal("zstd decompression context");
	ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX);
	return codec_driver_new(&zstd_dec, dctx, true, 0, next);
}
