/* brotli method: a raw brotli stream (no container), quality 3 and lgwin 22 like WAL-G. */
#include "internal/codec/codec_impl.h"

#include <brotli/decode.h>
#include <brotli/encode.h>

#define BROTLI_LGWIN 22

static err_code enc_step(void *state, codec_io *io, bool finishing, bool *ended)
{
	BrotliEncoderState *st = state;
	BrotliEncoderOperation op = finishing ? BROTLI_OPERATION_FINISH : BROTLI_OPERATION_PROCESS;
	if (!BrotliEncoderCompressStream(st, op, &io->in_len, &io->in, &io->out_room, &io->out,
									 NULL))
		return err_set(E_FAIL, "brotli: compression failed");
	*ended = finishing && BrotliEncoderIsFinished(st) && !BrotliEncoderHasMoreOutput(st);
	return E_OK;
}

static void enc_free(void *state)
{
	BrotliEncoderDestroyInstance(state);
}

static const codec_step brotli_enc = { "brotli", enc_step, enc_free, false };

sink *codec_brotli_compress_new(int level, sink *next)
{
	BrotliEncoderState *st = BrotliEncoderCreateInstance(NULL, NULL, NULL);
	if (st == NULL)
		codec_fatal("brotli encoder");
	BrotliEncoderSetParameter(st, BROTLI_PARAM_QUALITY, (uint32_t)level);
	BrotliEncoderSetParameter(st, BROTLI_PARAM_LGWIN, BROTLI_LGWIN);
	return codec_driver_new(&brotli_enc, st, false, 0, next);
}

/* One stream that nothing may follow. */
static err_code dec_step(void *state, codec_io *io, bool finishing, bool *ended)
{
	(void)finishing;
	BrotliDecoderState *st = state;
	BrotliDecoderResult r =
		BrotliDecoderDecompressStream(st, &io->in_len, &io->in, &io->out_room, &io->out, NULL);
	if (r == BROTLI_DECODER_RESULT_ERROR)
		return err_set(E_CORRUPT, "brotli: %s",
					   BrotliDecoderErrorString(BrotliDecoderGetErrorCode(st)));
	*ended = r == BROTLI_DECODER_RESULT_SUCCESS;
	return E_OK;
}

static void dec_free(void *state)
{
	BrotliDecoderDestroyInstance(state);
}

static const codec_step brotli_dec = { "brotli", dec_step, dec_free, true };

sink *codec_brotli_decompress_new(sink *next)
{
	BrotliDecoderState *st = BrotliDecoderCreateInstance(NULL, NULL, NULL);
	if (st == NULL)
		codec_fatal("brotli decoder");
	return codec_driver_new(&brotli_dec, st, true, 0, next);
}
