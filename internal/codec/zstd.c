/* zstd method: standard Zstandard frames with the XXH64 content checksum, as WAL-G writes them. */
#include "internal/codec/codec_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

/*
 * Largest window the decoder accepts (128 MiB, zstd --ultra -22 uses 2^27): WAL-G writes
 * 8 MiB windows, and this bounds what a hostile object can make us allocate.
 */
#define ZSTD_WINDOW_LOG_MAX 27

typedef struct encoder {
	ZSTD_CCtx *cctx;
	/*
	 * The last frame is complete and nothing followed: the context may serve another stream.
	 * One dropped mid-frame is freed instead: libzstd 1.5.4's reset does not wait for the
	 * frame's jobs still running in the worker threads.
	 */
	bool clean;
} encoder;

static err_code enc_step(void *state, codec_io *io, bool finishing, bool *ended)
{
	encoder *e = state;
	ZSTD_inBuffer in = { io->in, io->in_len, 0 };
	ZSTD_outBuffer out = { io->out, io->out_room, 0 };
	e->clean = false;
	size_t r =
		ZSTD_compressStream2(e->cctx, &out, &in, finishing ? ZSTD_e_end : ZSTD_e_continue);
	if (ZSTD_isError(r))
		return err_set(E_FAIL, "zstd: %s", ZSTD_getErrorName(r));
	io->in += in.pos, io->in_len -= in.pos;
	io->out += out.pos, io->out_room -= out.pos;
	*ended = finishing && r == 0;
	e->clean = *ended;
	return E_OK;
}

/*
 * Compression contexts a finished stream left, kept for the next one. A context with worker
 * threads costs its threads and about 10 MiB of job buffers to set up, which the daemon or a
 * push of many objects would otherwise pay again for every object (with musl's allocator, the
 * static binary's, every page is faulted in again): the static daemon's CPU per WAL segment
 * fell from 100 to 76 ms. At most IDLE_MAX are kept (a segment and the backlog's next, or a
 * backup's packer and its pg_control tar), so a process at rest holds about 20 MiB of them.
 */
#define IDLE_MAX 2

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static ZSTD_CCtx *idle[IDLE_MAX];
static size_t idle_count;

static void enc_free(void *state)
{
	encoder *e = state;
	ZSTD_CCtx *cctx = e->cctx;
	if (e->clean) {
		/* the parameters set below stay */
		ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
		pthread_mutex_lock(&idle_lock);
		if (idle_count < IDLE_MAX) {
			idle[idle_count++] = cctx;
			cctx = NULL;
		}
		pthread_mutex_unlock(&idle_lock);
	}
	ZSTD_freeCCtx(cctx);
	free(e);
}

static ZSTD_CCtx *idle_take(void)
{
	ZSTD_CCtx *cctx = NULL;
	pthread_mutex_lock(&idle_lock);
	if (idle_count > 0)
		cctx = idle[--idle_count];
	pthread_mutex_unlock(&idle_lock);
	return cctx;
}

static const codec_step zstd_enc = { "zstd", enc_step, enc_free, false };

sink *codec_zstd_compress_new(int level, sink *next)
{
	encoder *e = xcalloc(1, sizeof(*e));
	e->cctx = idle_take();
	if (e->cctx != NULL) {
		ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_compressionLevel, level);
		return codec_driver_new(&zstd_enc, e, false, 0, next);
	}
	ZSTD_CCtx *cctx = e->cctx = ZSTD_createCCtx();
	if (cctx == NULL)
		codec_fatal("zstd compression context");
	/* both values are valid (level clamped to 1..22), so these cannot fail */
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	/*
	 * One stream usually compresses one large file at a time: zstd's own worker threads let
	 * it use every core, as `zstd -T0` does. The frames stay standard (any decoder reads
	 * them). A libzstd without thread support refuses the setting and stays single-threaded.
	 */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus > 1) {
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_nbWorkers, (int)(cpus > 4 ? 4 : cpus));
		/* Small jobs keep the buffers of every worker within the memory target. */
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_jobSize, 1 << 20);
		/*
		 * No overlap: by default each 1 MiB job first loads the previous job's last 256 KiB
		 * as history. Without it zstd used 10% less CPU on WAL segments and 20% less on a
		 * pgbench table, and compressed both slightly better; 1% worse on machine code
		 * (docs/PERFORMANCE.md, "WAL latency").
		 */
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_overlapLog, 1);
	}
	return codec_driver_new(&zstd_enc, e, false, 0, next);
}

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
