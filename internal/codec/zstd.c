/* zstd method: standard Zstandard frames with the XXH64 content checksum, as WAL-G writes them. */
#include "internal/codec/codec_impl.h"

#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

/*
 * Largest window the decoder accepts (128 MiB, zstd --ultra -22 uses 2^27): WAL-G writes
 * 8 MiB windows, and this bounds what a hostile object can make us allocate.
 */
#define ZSTD_WINDOW_LOG_MAX 27

typedef struct zstd_enc {
	sink base;
	ZSTD_CCtx *cctx;
	ZSTD_outBuffer out;
	unsigned char buf[CODEC_BUF_SIZE];
} zstd_enc;

static err_code zstd_enc_flush(zstd_enc *e)
{
	err_code rc = sink_write(e->base.next, e->buf, e->out.pos);
	e->out.pos = 0;
	return rc;
}

static err_code zstd_enc_write(sink *s, const void *buf, size_t len)
{
	zstd_enc *e = (zstd_enc *)s;
	ZSTD_inBuffer in = { buf, len, 0 };
	while (in.pos < in.size) {
		size_t r = ZSTD_compressStream2(e->cctx, &e->out, &in, ZSTD_e_continue);
		if (ZSTD_isError(r))
			return err_set(E_FAIL, "zstd: %s", ZSTD_getErrorName(r));
		if (e->out.pos == e->out.size)
			TRY(zstd_enc_flush(e));
	}
	return E_OK;
}

static err_code zstd_enc_finish(sink *s)
{
	zstd_enc *e = (zstd_enc *)s;
	ZSTD_inBuffer in = { NULL, 0, 0 };
	size_t r;
	do {
		r = ZSTD_compressStream2(e->cctx, &e->out, &in, ZSTD_e_end);
		if (ZSTD_isError(r))
			return err_set(E_FAIL, "zstd: %s", ZSTD_getErrorName(r));
		TRY(zstd_enc_flush(e));
	} while (r != 0);
	return sink_finish(e->base.next);
}

static void zstd_enc_free(sink *s)
{
	zstd_enc *e = (zstd_enc *)s;
	ZSTD_freeCCtx(e->cctx);
	sink_free(e->base.next);
	free(e);
}

static const sink_ops zstd_enc_ops = { zstd_enc_write, zstd_enc_finish, zstd_enc_free };

sink *codec_zstd_compress_new(int level, sink *next)
{
	zstd_enc *e = xcalloc(1, sizeof(*e));
	e->base.ops = &zstd_enc_ops;
	e->base.next = next;
	e->cctx = ZSTD_createCCtx();
	if (e->cctx == NULL)
		codec_fatal("zstd compression context");
	/* both values are valid (level clamped to 1..22), so these cannot fail */
	ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_checksumFlag, 1);
	/*
	 * One stream usually compresses one large file at a time: zstd's own worker threads let
	 * it use every core, as `zstd -T0` does. The frames stay standard (any decoder reads
	 * them). A libzstd without thread support refuses the setting and stays single-threaded.
	 */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus > 1) {
		ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_nbWorkers, (int)(cpus > 4 ? 4 : cpus));
		/* Small jobs keep the buffers of every worker within the memory target. */
		ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_jobSize, 1 << 20);
	}
	e->out = (ZSTD_outBuffer){ e->buf, sizeof(e->buf), 0 };
	return &e->base;
}

typedef struct zstd_dec {
	sink base;
	ZSTD_DCtx *dctx;
	bool seen_input;
	bool at_boundary; /* the last frame was decoded and flushed, no new one started */
	unsigned char buf[CODEC_BUF_SIZE];
} zstd_dec;

static err_code zstd_dec_write(sink *s, const void *buf, size_t len)
{
	zstd_dec *d = (zstd_dec *)s;
	ZSTD_inBuffer in = { buf, len, 0 };
	d->seen_input = true;
	/* a full output buffer may mean more is held back, so loop until it comes back short */
	for (;;) {
		ZSTD_outBuffer out = { d->buf, sizeof(d->buf), 0 };
		size_t before = in.pos;
		size_t r = ZSTD_decompressStream(d->dctx, &out, &in);
		if (ZSTD_isError(r))
			return err_set(E_CORRUPT, "zstd: %s", ZSTD_getErrorName(r));
		/* a call that moved nothing returns a size hint even at a frame boundary */
		if (in.pos > before || out.pos > 0)
			d->at_boundary = r == 0;
		TRY(sink_write(d->base.next, d->buf, out.pos));
		if (in.pos == in.size && out.pos < out.size)
			return E_OK;
	}
}

static err_code zstd_dec_finish(sink *s)
{
	zstd_dec *d = (zstd_dec *)s;
	/* even empty input compresses to a frame, so no bytes at all is not a zstd object */
	if (!d->seen_input)
		return err_set(E_CORRUPT, "zstd stream is empty");
	if (!d->at_boundary)
		return err_set(E_CORRUPT, "zstd stream truncated");
	return sink_finish(d->base.next);
}

static void zstd_dec_free(sink *s)
{
	zstd_dec *d = (zstd_dec *)s;
	ZSTD_freeDCtx(d->dctx);
	sink_free(d->base.next);
	free(d);
}

static const sink_ops zstd_dec_ops = { zstd_dec_write, zstd_dec_finish, zstd_dec_free };

sink *codec_zstd_decompress_new(sink *next)
{
	zstd_dec *d = xcalloc(1, sizeof(*d));
	d->base.ops = &zstd_dec_ops;
	d->base.next = next;
	d->dctx = ZSTD_createDCtx();
	if (d->dctx == NULL)
		codec_fatal("zstd decompression context");
	ZSTD_DCtx_setParameter(d->dctx, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX);
	return &d->base;
}
