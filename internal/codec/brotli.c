/* brotli method: a raw brotli stream (no container), quality 3 and lgwin 22 like WAL-G. */
#include "internal/codec/codec_impl.h"

#include <brotli/decode.h>
#include <brotli/encode.h>
#include <stdlib.h>

#define BROTLI_LGWIN 22

typedef struct brotli_enc {
	sink base;
	BrotliEncoderState *st;
	unsigned char buf[CODEC_BUF_SIZE];
} brotli_enc;

/* Runs op over the input; FINISH with no input also ends the stream. */
static err_code brotli_enc_run(brotli_enc *e, BrotliEncoderOperation op, const uint8_t *in,
	size_t len)
{
	for (;;) {
		size_t avail_out = sizeof(e->buf);
		uint8_t *next_out = e->buf;
		if (!BrotliEncoderCompressStream(e->st, op, &len, &in, &avail_out, &next_out, NULL))
			return err_set(E_FAIL, "brotli: compression failed");
		TRY(sink_write(e->base.next, e->buf, sizeof(e->buf) - avail_out));
		if (len == 0 && !BrotliEncoderHasMoreOutput(e->st) &&
			(op != BROTLI_OPERATION_FINISH || BrotliEncoderIsFinished(e->st)))
			return E_OK;
	}
}

static err_code brotli_enc_write(sink *s, const void *buf, size_t len)
{
	return brotli_enc_run((brotli_enc *)s, BROTLI_OPERATION_PROCESS, buf, len);
}

static err_code brotli_enc_finish(sink *s)
{
	TRY(brotli_enc_run((brotli_enc *)s, BROTLI_OPERATION_FINISH, NULL, 0));
	return sink_finish(s->next);
}

static void brotli_enc_free(sink *s)
{
	brotli_enc *e = (brotli_enc *)s;
	BrotliEncoderDestroyInstance(e->st);
	sink_free(e->base.next);
	free(e);
}

static const sink_ops brotli_enc_ops = { brotli_enc_write, brotli_enc_finish, brotli_enc_free };

sink *codec_brotli_compress_new(int level, sink *next)
{
	brotli_enc *e = xcalloc(1, sizeof(*e));
	e->base.ops = &brotli_enc_ops;
	e->base.next = next;
	e->st = BrotliEncoderCreateInstance(NULL, NULL, NULL);
	if (e->st == NULL)
		codec_fatal("brotli encoder");
	BrotliEncoderSetParameter(e->st, BROTLI_PARAM_QUALITY, (uint32_t)level);
	BrotliEncoderSetParameter(e->st, BROTLI_PARAM_LGWIN, BROTLI_LGWIN);
	return &e->base;
}

typedef struct brotli_dec {
	sink base;
	BrotliDecoderState *st;
	bool ended;
	unsigned char buf[CODEC_BUF_SIZE];
} brotli_dec;

static err_code brotli_dec_write(sink *s, const void *buf, size_t len)
{
	brotli_dec *d = (brotli_dec *)s;
	const uint8_t *in = buf;
	while (!d->ended) {
		size_t avail_out = sizeof(d->buf);
		uint8_t *next_out = d->buf;
		BrotliDecoderResult r =
			BrotliDecoderDecompressStream(d->st, &len, &in, &avail_out, &next_out, NULL);
		if (r == BROTLI_DECODER_RESULT_ERROR)
			return err_set(E_CORRUPT, "brotli: %s",
				BrotliDecoderErrorString(BrotliDecoderGetErrorCode(d->st)));
		TRY(sink_write(d->base.next, d->buf, sizeof(d->buf) - avail_out));
		if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT)
			return E_OK;
		d->ended = r == BROTLI_DECODER_RESULT_SUCCESS;
	}
	/* a brotli stream cannot be followed by anything, unlike lz4 and zstd frames */
	if (len > 0)
		return err_set(E_CORRUPT, "brotli: garbage after the end of the stream");
	return E_OK;
}

static err_code brotli_dec_finish(sink *s)
{
	brotli_dec *d = (brotli_dec *)s;
	if (!d->ended)
		return err_set(E_CORRUPT, "brotli stream truncated");
	return sink_finish(d->base.next);
}

static void brotli_dec_free(sink *s)
{
	brotli_dec *d = (brotli_dec *)s;
	BrotliDecoderDestroyInstance(d->st);
	sink_free(d->base.next);
	free(d);
}

static const sink_ops brotli_dec_ops = { brotli_dec_write, brotli_dec_finish, brotli_dec_free };

sink *codec_brotli_decompress_new(sink *next)
{
	brotli_dec *d = xcalloc(1, sizeof(*d));
	d->base.ops = &brotli_dec_ops;
	d->base.next = next;
	d->st = BrotliDecoderCreateInstance(NULL, NULL, NULL);
	if (d->st == NULL)
		codec_fatal("brotli decoder");
	return &d->base;
}
