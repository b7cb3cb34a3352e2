/*
 * zstd compression on every core: the input is cut into 1 MiB pieces, worker threads compress
 * each into a standard frame of its own (XXH64 content checksum, as WAL-G writes them), and
 * the frames go on in input order. A concatenation of frames is one stream to every zstd
 * reader, WAL-G's included. zstd's own worker threads (ZSTD_c_nbWorkers) did the same work
 * inside one frame, with the same 1 MiB jobs and no history between them, but a WAL segment
 * took a third longer and 10% more CPU (33-34 ms against 24-26 ms, make bench's wal section).
 *
 * At the default level and below, a piece whose samples do not compress at level 1 is
 * compressed at level 1: on data that does not compress (random bytes, values compressed
 * before) level 3's match search costs 3 to 4 times level 1's CPU for the same size
 * (docs/PERFORMANCE.md, "Where the time goes"). The choice depends on the piece's
 * bytes alone, so a stream's frames are the same however and wherever it is compressed. A
 * level asked for above the default is kept for every piece.
 */
#include "internal/codec/codec_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

/* Also the most history a frame has: the size of zstd's jobs before, and the ratio they had. */
#define PIECE (1u << 20)
#define WORKERS_MAX 4
#define SLOTS (WORKERS_MAX + 1)
#define SAMPLES 4
#define SAMPLE 8192		  /* a page of a relation file */
#define POOR_PERCENT 80 /* samples that come out at this share of their size or more */
_Static_assert(SAMPLES * SAMPLE + ZSTD_COMPRESSBOUND(SAMPLES * SAMPLE) <= ZSTD_COMPRESSBOUND(PIECE),
			   "a piece's output buffer holds its samples and their frame");

typedef enum { FREE, FILLING, QUEUED, RUNNING, DONE } piece_state;

typedef struct piece {
	piece_state state;
	unsigned char *in; /* PIECE bytes, allocated on first use */
	size_t in_len;
	unsigned char *out; /* ZSTD_compressBound(PIECE) bytes */
	size_t out_len;		/* the frame's size once DONE, or a zstd error code */
	size_t sent;		/* bytes of out already handed on */
} piece;

typedef struct encoder {
	pthread_mutex_t lock;
	pthread_cond_t queued; /* a piece to compress, or stop */
	pthread_cond_t done;   /* a piece became DONE */
	int level;
	int nworkers; /* 0: the caller compresses each piece itself */
	int started;  /* worker threads running */
	bool stop;
	pthread_t threads[WORKERS_MAX];
	ZSTD_CCtx *own; /* the caller's context when nworkers is 0, or for a lone piece */
	/* a ring: pieces head .. head+count-1, oldest first; the newest may be FILLING */
	piece slots[SLOTS];
	size_t nslots, head, count;
	bool any; /* this stream has a piece: even empty input ends as one (empty) frame */
	/*
	 * The last stream ended and everything was handed on: the encoder, threads included, may
	 * serve another stream. One dropped mid-stream is stopped and freed instead.
	 */
	bool clean;
} encoder;

static piece *at(encoder *e, size_t k)
{
	return &e->slots[(e->head + k) % e->nslots];
}

static ZSTD_CCtx *cctx_new(void)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	if (c == NULL)
		codec_fatal("zstd compression context");
	/* valid values, so these cannot fail; the level is set before each piece */
	ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
	return c;
}

/* Whether len bytes at in come out at level 1 at POOR_PERCENT or more of their size. */
static bool poor_at_1(ZSTD_CCtx *c, const unsigned char *in, size_t len, unsigned char *out)
{
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
	size_t n = ZSTD_compress2(c, out, ZSTD_compressBound(len), in, len);
	return !ZSTD_isError(n) && n * 100 >= len * POOR_PERCENT;
}

/*
 * Whether level's match search would buy nothing on p: its first SAMPLE bytes, then SAMPLES
 * stretches spread from its start to its end compressed together, come out at level 1 at
 * POOR_PERCENT or more of their size. Data that compresses is told by the first sample alone,
 * 8 KiB of the piece's 1 MiB at level 1's speed. p->out holds the samples and their frames
 * until the piece's own frame.
 */
static bool poor(ZSTD_CCtx *c, piece *p)
{
	if (p->in_len < PIECE / 4)
		return false; /* a stream's short last piece: not worth a guess */
	unsigned char *in = p->out, *out = p->out + SAMPLES * SAMPLE;
	if (!poor_at_1(c, p->in, SAMPLE, out))
		return false;
	for (size_t i = 0; i < SAMPLES; i++)
		memcpy(in + i * SAMPLE, p->in + i * (p->in_len - SAMPLE) / (SAMPLES - 1), SAMPLE);
	return poor_at_1(c, in, SAMPLES * SAMPLE, out);
}

static void compress_piece(ZSTD_CCtx *c, int level, piece *p)
{
	if (level > 1 && level <= CODEC_ZSTD_LEVEL_DEFAULT && poor(c, p))
		level = 1;
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
	p->out_len = ZSTD_compress2(c, p->out, ZSTD_compressBound(PIECE), p->in, p->in_len);
}

static void *work(void *arg)
{
	encoder *e = arg;
	ZSTD_CCtx *c = cctx_new();
	pthread_mutex_lock(&e->lock);
	for (;;) {
		piece *p = NULL;
		for (size_t k = 0; !e->stop && p == NULL && k < e->count; k++)
			if (at(e, k)->state == QUEUED)
				p = at(e, k);
		if (e->stop)
			break;
		if (p == NULL) {
			pthread_cond_wait(&e->queued, &e->lock);
			continue;
		}
		p->state = RUNNING;
		int level = e->level;
		pthread_mutex_unlock(&e->lock);
		compress_piece(c, level, p);
		pthread_mutex_lock(&e->lock);
		p->state = DONE;
		pthread_cond_broadcast(&e->done);
	}
	pthread_mutex_unlock(&e->lock);
	ZSTD_freeCCtx(c);
	return NULL;
}

/* Set by codec_compress_here: this thread's streams are compressed by the thread itself. */
static _Thread_local bool here;

void codec_compress_here(void)
{
	here = true;
}

/*
 * A full or last piece goes to the workers, started on first need: a stream of one piece
 * (most small objects) is compressed by the caller and starts no thread.
 */
static void queue(encoder *e, piece *p, bool last)
{
	if (e->nworkers == 0 || here || (last && e->count == 1)) {
		if (e->own == NULL)
			e->own = cctx_new();
		compress_piece(e->own, e->level, p);
		p->state = DONE;
		return;
	}
	while (e->started < e->nworkers &&
		   pthread_create(&e->threads[e->started], NULL, work, e) == 0)
		e->started++;
	if (e->started == 0) { /* no thread to be had: this piece is compressed here */
		e->nworkers = 0;
		queue(e, p, last);
		return;
	}
	p->state = QUEUED;
	pthread_cond_signal(&e->queued);
}

/*
 * The piece input goes into: the newest if it has room, else a free slot, else NULL. A full
 * piece is queued only once more input comes, so that a stream of exactly one piece (a 1 MiB
 * WAL segment) is still compressed by the caller.
 */
static piece *filling(encoder *e)
{
	piece *newest = e->count > 0 ? at(e, e->count - 1) : NULL;
	if (newest != NULL && newest->state == FILLING) {
		if (newest->in_len < PIECE)
			return newest;
		queue(e, newest, false);
	}
	if (e->count == e->nslots)
		return NULL;
	piece *p = at(e, e->count++);
	if (p->in == NULL) {
		p->in = xmalloc(PIECE);
		p->out = xmalloc(ZSTD_compressBound(PIECE));
	}
	p->state = FILLING;
	p->in_len = 0;
	p->sent = 0;
	e->any = true;
	return p;
}

/* Hands on the finished frames at the head, in order. *moved: some bytes went out. */
static err_code hand_on(encoder *e, codec_io *io, bool *moved)
{
	while (e->count > 0 && at(e, 0)->state == DONE && io->out_room > 0) {
		piece *p = at(e, 0);
		if (ZSTD_isError(p->out_len))
			return err_set(E_FAIL, "zstd: %s", ZSTD_getErrorName(p->out_len));
		size_t n = p->out_len - p->sent;
		if (n > io->out_room)
			n = io->out_room;
		memcpy(io->out, p->out + p->sent, n);
		p->sent += n;
		io->out += n, io->out_room -= n;
		*moved = *moved || n > 0;
		if (p->sent == p->out_len) {
			p->state = FREE;
			e->head = (e->head + 1) % e->nslots;
			e->count--;
		}
	}
	return E_OK;
}

static err_code step_locked(encoder *e, codec_io *io, bool finishing, bool *ended)
{
	for (;;) {
		bool moved = false;
		TRY(hand_on(e, io, &moved));
		piece *p;
		while (io->in_len > 0 && (p = filling(e)) != NULL) {
			size_t n = PIECE - p->in_len < io->in_len ? PIECE - p->in_len : io->in_len;
			memcpy(p->in + p->in_len, io->in, n);
			p->in_len += n;
			io->in += n, io->in_len -= n;
			moved = true;
		}
		if (finishing && io->in_len == 0) {
			if (!e->any)
				filling(e); /* an empty stream: one empty frame */
			if (e->count > 0 && at(e, e->count - 1)->state == FILLING)
				queue(e, at(e, e->count - 1), true);
			if (e->count == 0) {
				*ended = true;
				e->any = false;
				return E_OK;
			}
		}
		if (io->in_len == 0 && !finishing)
			return E_OK; /* all taken; what is compressing goes out on a later call */
		if (io->out_room == 0)
			return E_OK; /* the driver flushes and calls again */
		if (moved)
			continue;
		/* Nothing can move until the oldest piece is done. */
		while (at(e, 0)->state != DONE)
			pthread_cond_wait(&e->done, &e->lock);
	}
}

static err_code enc_step(void *state, codec_io *io, bool finishing, bool *ended)
{
	encoder *e = state;
	pthread_mutex_lock(&e->lock);
	e->clean = false;
	err_code rc = step_locked(e, io, finishing, ended);
	e->clean = rc == E_OK && *ended;
	pthread_mutex_unlock(&e->lock);
	return rc;
}

/*
 * Encoders a finished stream left, threads and buffers included, kept for the next one: the
 * daemon, or a push of many objects, would otherwise pay for threads and about 8 MiB of
 * buffers again for every object (musl's allocator, before mimalloc, faulted every page in
 * again: the static daemon's CPU per WAL segment fell from 100 to 76 ms when zstd's contexts
 * were kept). At most IDLE_MAX are kept (a segment and the backlog's next, or a backup's
 * packer and its pg_control tar).
 */
#define IDLE_MAX 2

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static encoder *idle[IDLE_MAX];
static size_t idle_count;

static void destroy(encoder *e)
{
	pthread_mutex_lock(&e->lock);
	e->stop = true;
	pthread_cond_broadcast(&e->queued);
	pthread_mutex_unlock(&e->lock);
	/* a worker in the middle of a piece finishes it first: its buffers are freed after */
	for (int i = 0; i < e->started; i++)
		pthread_join(e->threads[i], NULL);
	for (size_t i = 0; i < SLOTS; i++) {
		free(e->slots[i].in);
		free(e->slots[i].out);
	}
	ZSTD_freeCCtx(e->own);
	pthread_cond_destroy(&e->done);
	pthread_cond_destroy(&e->queued);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

static void enc_free(void *state)
{
	encoder *e = state;
	if (e->clean) {
		pthread_mutex_lock(&idle_lock);
		if (idle_count < IDLE_MAX) {
			idle[idle_count++] = e;
			e = NULL;
		}
		pthread_mutex_unlock(&idle_lock);
	}
	if (e != NULL)
		destroy(e);
}

static encoder *encoder_new(void)
{
	pthread_mutex_lock(&idle_lock);
	encoder *e = idle_count > 0 ? idle[--idle_count] : NULL;
	pthread_mutex_unlock(&idle_lock);
	if (e != NULL)
		return e;
	e = xcalloc(1, sizeof(*e));
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->queued, NULL);
	pthread_cond_init(&e->done, NULL);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	e->nworkers = cpus > 1 ? (int)(cpus > WORKERS_MAX ? WORKERS_MAX : cpus) : 0;
	/* one piece filling while each worker compresses one */
	e->nslots = (size_t)e->nworkers + 1;
	return e;
}

static const codec_step zstd_enc = { "zstd", enc_step, enc_free, false };

sink *codec_zstd_compress_new(int level, sink *next)
{
	encoder *e = encoder_new();
	e->level = level; /* valid: codec_compress_new clamps it to 1..22 */
	return codec_driver_new(&zstd_enc, e, false, 0, next);
}
