/*
 * lzma method: the legacy LZMA-alone (.lzma) format WAL-G writes: header 5D, dictionary 8 MiB,
 * unknown size, end-of-stream marker.
 */
#include "internal/codec/codec_impl.h"

#include <lzma.h>
#include <stdlib.h>

/* WAL-G's header says 8 MiB; keeping it whatever the level keeps objects identical in form. */
#define LZMA_DICT_SIZE (8u << 20)
/* Dictionaries above this in a hostile header are refused rather than allocated. */
#define LZMA_DEC_MEMLIMIT (256u << 20)

static lzma_ret code(lzma_stream *strm, codec_io *io, lzma_action action)
{
	strm->next_in = io->in;
	strm->avail_in = io->in_len;
	strm->next_out = io->out;
	strm->avail_out = io->out_room;
	lzma_ret r = lzma_code(strm, action);
	io->in = strm->next_in;
	io->in_len = strm->avail_in;
	io->out = strm->next_out;
	io->out_room = strm->avail_out;
	return r;
}

static err_code enc_step(void *state, codec_io *io, bool finishing, bool *ended)
{
	lzma_ret r = code(state, io, finishing ? LZMA_FINISH : LZMA_RUN);
	if (r != LZMA_OK && r != LZMA_STREAM_END)
		return err_set(E_FAIL, "lzma: compression failed (liblzma error %d)", (int)r);
	*ended = r == LZMA_STREAM_END;
	return E_OK;
}

static void lzma_free(void *state)
{
	lzma_end(state);
	free(state);
}

static const codec_step lzma_enc = { "lzma", enc_step, lzma_free, false };

sink *codec_lzma_compress_new(int level, sink *next)
{
	lzma_stream *strm = xmalloc(sizeof(*strm));
	*strm = (lzma_stream)LZMA_STREAM_INIT;
	lzma_options_lzma opt;
	if (lzma_lzma_preset(&opt, (uint32_t)level))
		codec_fatal("lzma preset");
	opt.dict_size = LZMA_DICT_SIZE;
	opt.lc = 3;
	opt.lp = 0;
	opt.pb = 2;
	/* the options are fixed and valid, so only a failed allocation can make this fail */
	if (lzma_alone_encoder(strm, &opt) != LZMA_OK)
		codec_fatal("lzma encoder");
	return codec_driver_new(&lzma_enc, strm, false, 0, next);
}

static err_code dec_error(lzma_ret r)
{
	switch (r) {
	case LZMA_FORMAT_ERROR:
		return err_set(E_CORRUPT, "lzma: not an lzma stream");
	case LZMA_MEMLIMIT_ERROR:
		return err_set(E_CORRUPT, "lzma: dictionary larger than the %u MiB limit",
					   LZMA_DEC_MEMLIMIT >> 20);
	case LZMA_MEM_ERROR:
		return err_set(E_FAIL, "lzma: out of memory");
	default:
		return err_set(E_CORRUPT, "lzma: corrupt data (liblzma error %d)", (int)r);
	}
}

/* One stream that nothing may follow. */
static err_code dec_step(void *state, codec_io *io, bool finishing, bool *ended)
{
	(void)finishing;
	lzma_ret r = code(state, io, LZMA_RUN);
	if (r != LZMA_OK && r != LZMA_STREAM_END)
		return dec_error(r);
	*ended = r == LZMA_STREAM_END;
	return E_OK;
}

static const codec_step lzma_dec = { "lzma", dec_step, lzma_free, true };

sink *codec_lzma_decompress_new(sink *next)
{
	lzma_stream *strm = xmalloc(sizeof(*strm));
	*strm = (lzma_stream)LZMA_STREAM_INIT;
	if (lzma_alone_decoder(strm, LZMA_DEC_MEMLIMIT) != LZMA_OK)
		codec_fatal("lzma decoder");
	return codec_driver_new(&lzma_dec, strm, true, 0, next);
}
