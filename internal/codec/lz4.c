/* lz4 method: LZ4 frames as WAL-G writes them (4 MiB independent blocks, content checksum). */
#include "internal/codec/codec_impl.h"

#include <lz4frame.h>
#include <stdlib.h>

/* Input handed to LZ4F per call; the output bound is dominated by the 4 MiB block anyway. */
#define LZ4_IN_STEP (64u * 1024)

typedef struct lz4_enc {
	sink base;
	LZ4F_cctx *cctx;
	LZ4F_preferences_t prefs;
	bool begun;
	size_t out_cap; /* LZ4F_compressBound(LZ4_IN_STEP): one update always fits */
	size_t out_len;
	unsigned char *out;
} lz4_enc;

static err_code lz4_enc_flush(lz4_enc *e)
{
	err_code rc = sink_write(e->base.next, e->out, e->out_len);
	e->out_len = 0;
	return rc;
}

/* Makes room for one worst-case LZ4F call. */
static err_code lz4_enc_room(lz4_enc *e)
{
	if (e->out_cap - e->out_len < LZ4F_compressBound(LZ4_IN_STEP, &e->prefs))
		TRY(lz4_enc_flush(e));
	return E_OK;
}

static err_code lz4_enc_begin(lz4_enc *e)
{
	if (e->begun)
		return E_OK;
	size_t n = LZ4F_compressBegin(e->cctx, e->out + e->out_len, e->out_cap - e->out_len,
		&e->prefs);
	if (LZ4F_isError(n))
		return err_set(E_FAIL, "lz4: %s", LZ4F_getErrorName(n));
	e->out_len += n;
	e->begun = true;
	return E_OK;
}

static err_code lz4_enc_write(sink *s, const void *buf, size_t len)
{
	lz4_enc *e = (lz4_enc *)s;
	const unsigned char *p = buf;
	TRY(lz4_enc_begin(e));
	while (len > 0) {
		size_t step = len < LZ4_IN_STEP ? len : LZ4_IN_STEP;
		TRY(lz4_enc_room(e));
		size_t n = LZ4F_compressUpdate(e->cctx, e->out + e->out_len, e->out_cap - e->out_len,
			p, step, NULL);
		if (LZ4F_isError(n))
			return err_set(E_FAIL, "lz4: %s", LZ4F_getErrorName(n));
		e->out_len += n;
		p += step;
		len -= step;
	}
	return E_OK;
}

static err_code lz4_enc_finish(sink *s)
{
	lz4_enc *e = (lz4_enc *)s;
	TRY(lz4_enc_begin(e));
	TRY(lz4_enc_room(e));
	size_t n = LZ4F_compressEnd(e->cctx, e->out + e->out_len, e->out_cap - e->out_len, NULL);
	if (LZ4F_isError(n))
		return err_set(E_FAIL, "lz4: %s", LZ4F_getErrorName(n));
	e->out_len += n;
	TRY(lz4_enc_flush(e));
	return sink_finish(e->base.next);
}

static void lz4_enc_free(sink *s)
{
	lz4_enc *e = (lz4_enc *)s;
	LZ4F_freeCompressionContext(e->cctx);
	free(e->out);
	sink_free(e->base.next);
	free(e);
}

static const sink_ops lz4_enc_ops = { lz4_enc_write, lz4_enc_finish, lz4_enc_free };

sink *codec_lz4_compress_new(int level, sink *next)
{
	lz4_enc *e = xcalloc(1, sizeof(*e));
	e->base.ops = &lz4_enc_ops;
	e->base.next = next;
	if (LZ4F_isError(LZ4F_createCompressionContext(&e->cctx, LZ4F_VERSION)))
		codec_fatal("lz4 compression context");
	e->prefs.frameInfo.blockSizeID = LZ4F_max4MB;
	e->prefs.frameInfo.blockMode = LZ4F_blockIndependent;
	e->prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
	e->prefs.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
	e->prefs.compressionLevel = level;
	e->out_cap = LZ4F_compressBound(LZ4_IN_STEP, &e->prefs);
	e->out = xmalloc(e->out_cap);
	return &e->base;
}

typedef struct lz4_dec {
	sink base;
	LZ4F_dctx *dctx;
	bool seen_input;
	bool at_boundary; /* between frames: the last frame ended and nothing of a new one came */
	unsigned char out[CODEC_BUF_SIZE];
} lz4_dec;

static err_code lz4_dec_write(sink *s, const void *buf, size_t len)
{
	lz4_dec *d = (lz4_dec *)s;
	const unsigned char *p = buf;
	d->seen_input = true;
	/* LZ4F keeps decoded bytes it could not place, so go on while the output came back full */
	for (;;) {
		size_t in_n = len, out_n = sizeof(d->out);
		size_t r = LZ4F_decompress(d->dctx, d->out, &out_n, p, &in_n, NULL);
		if (LZ4F_isError(r))
			return err_set(E_CORRUPT, "lz4: %s", LZ4F_getErrorName(r));
		if (in_n > 0 || out_n > 0)
			d->at_boundary = r == 0; /* 0: a frame ended and LZ4F is ready for the next */
		TRY(sink_write(d->base.next, d->out, out_n));
		p += in_n;
		len -= in_n;
		if (len == 0 && out_n < sizeof(d->out))
			return E_OK;
	}
}

static err_code lz4_dec_finish(sink *s)
{
	lz4_dec *d = (lz4_dec *)s;
	/* WAL-G never writes an empty object: an lz4 object holds at least one frame */
	if (!d->seen_input)
		return err_set(E_CORRUPT, "lz4 stream is empty");
	if (!d->at_boundary)
		return err_set(E_CORRUPT, "lz4 stream truncated");
	return sink_finish(d->base.next);
}

static void lz4_dec_free(sink *s)
{
	lz4_dec *d = (lz4_dec *)s;
	LZ4F_freeDecompressionContext(d->dctx);
	sink_free(d->base.next);
	free(d);
}

static const sink_ops lz4_dec_ops = { lz4_dec_write, lz4_dec_finish, lz4_dec_free };

sink *codec_lz4_decompress_new(sink *next)
{
	lz4_dec *d = xcalloc(1, sizeof(*d));
	d->base.ops = &lz4_dec_ops;
	d->base.next = next;
	if (LZ4F_isError(LZ4F_createDecompressionContext(&d->dctx, LZ4F_VERSION)))
		codec_fatal("lz4 decompression context");
	return &d->base;
}
