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

typedef struct lzma_enc {
	sink base;
	lzma_stream strm;
	unsigned char buf[CODEC_BUF_SIZE];
} lzma_enc;

/* Runs action over the input, keeping output in buf and flushing it to next when full. */
static err_code lzma_enc_run(lzma_enc *e, lzma_action action)
{
	for (;;) {
		lzma_ret r = lzma_code(&e->strm, action);
		if (r != LZMA_OK && r != LZMA_STREAM_END)
			return err_set(E_FAIL, "lzma: compression failed (liblzma error %d)", (int)r);
		if (e->strm.avail_out == 0 || r == LZMA_STREAM_END) {
			TRY(sink_write(e->base.next, e->buf, sizeof(e->buf) - e->strm.avail_out));
			e->strm.next_out = e->buf;
			e->strm.avail_out = sizeof(e->buf);
		}
		if (r == LZMA_STREAM_END || (action == LZMA_RUN && e->strm.avail_in == 0))
			return E_OK;
	}
}

static err_code lzma_enc_write(sink *s, const void *buf, size_t len)
{
	lzma_enc *e = (lzma_enc *)s;
	e->strm.next_in = buf;
	e->strm.avail_in = len;
	return lzma_enc_run(e, LZMA_RUN);
}

static err_code lzma_enc_finish(sink *s)
{
	lzma_enc *e = (lzma_enc *)s;
	e->strm.next_in = NULL;
	e->strm.avail_in = 0;
	TRY(lzma_enc_run(e, LZMA_FINISH));
	return sink_finish(e->base.next);
}

static void lzma_enc_free(sink *s)
{
	lzma_enc *e = (lzma_enc *)s;
	lzma_end(&e->strm);
	sink_free(e->base.next);
	free(e);
}

static const sink_ops lzma_enc_ops = { lzma_enc_write, lzma_enc_finish, lzma_enc_free };

sink *codec_lzma_compress_new(int level, sink *next)
{
	lzma_enc *e = xcalloc(1, sizeof(*e));
	e->base.ops = &lzma_enc_ops;
	e->base.next = next;
	e->strm = (lzma_stream)LZMA_STREAM_INIT;
	lzma_options_lzma opt;
	if (lzma_lzma_preset(&opt, (uint32_t)level))
		codec_fatal("lzma preset");
	opt.dict_size = LZMA_DICT_SIZE;
	opt.lc = 3;
	opt.lp = 0;
	opt.pb = 2;
	/* the options are fixed and valid, so only a failed allocation can make this fail */
	if (lzma_alone_encoder(&e->strm, &opt) != LZMA_OK)
		codec_fatal("lzma encoder");
	e->strm.next_out = e->buf;
	e->strm.avail_out = sizeof(e->buf);
	return &e->base;
}

typedef struct lzma_dec {
	sink base;
	lzma_stream strm;
	bool ended;
	unsigned char buf[CODEC_BUF_SIZE];
} lzma_dec;

static err_code lzma_dec_error(lzma_ret r)
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

static err_code lzma_dec_write(sink *s, const void *buf, size_t len)
{
	lzma_dec *d = (lzma_dec *)s;
	d->strm.next_in = buf;
	d->strm.avail_in = len;
	while (!d->ended) {
		d->strm.next_out = d->buf;
		d->strm.avail_out = sizeof(d->buf);
		lzma_ret r = lzma_code(&d->strm, LZMA_RUN);
		if (r != LZMA_OK && r != LZMA_STREAM_END)
			return lzma_dec_error(r);
		TRY(sink_write(d->base.next, d->buf, sizeof(d->buf) - d->strm.avail_out));
		d->ended = r == LZMA_STREAM_END;
		/* a full output buffer may mean more is held back: only a short one means done */
		if (d->strm.avail_in == 0 && d->strm.avail_out > 0)
			break;
	}
	if (d->ended && d->strm.avail_in > 0)
		return err_set(E_CORRUPT, "lzma: garbage after the end of the stream");
	return E_OK;
}

static err_code lzma_dec_finish(sink *s)
{
	lzma_dec *d = (lzma_dec *)s;
	if (!d->ended)
		return err_set(E_CORRUPT, "lzma stream truncated");
	return sink_finish(d->base.next);
}

static void lzma_dec_free(sink *s)
{
	lzma_dec *d = (lzma_dec *)s;
	lzma_end(&d->strm);
	sink_free(d->base.next);
	free(d);
}

static const sink_ops lzma_dec_ops = { lzma_dec_write, lzma_dec_finish, lzma_dec_free };

sink *codec_lzma_decompress_new(sink *next)
{
	lzma_dec *d = xcalloc(1, sizeof(*d));
	d->base.ops = &lzma_dec_ops;
	d->base.next = next;
	d->strm = (lzma_stream)LZMA_STREAM_INIT;
	if (lzma_alone_decoder(&d->strm, LZMA_DEC_MEMLIMIT) != LZMA_OK)
		codec_fatal("lzma decoder");
	return &d->base;
}
