/*
 * The codec driver: one streaming filter for every method. It feeds the method's step
 * function from write() until the input is taken and the output buffer came back short
 * (libraries hold decoded bytes back while the buffer is full), flushes full buffers to the
 * next sink, and at finish() ends an encoder's stream or requires a decoder's to have ended:
 * a truncated object, an empty one and garbage after a single-stream format are E_CORRUPT.
 */
#include "internal/codec/codec_impl.h"

#include <stdlib.h>

typedef struct driver {
	sink base;
	const codec_step *step;
	void *state;
	bool decoding;
	bool seen_input;
	bool ended;
	bool cut; /* an encoder ended a frame (codec_driver_end_frame) */
	size_t len; /* bytes in buf */
	size_t cap;
	unsigned char buf[]; /* cap bytes */
} driver;

static err_code flush(driver *d)
{
	err_code rc = sink_write(d->base.next, d->buf, d->len);
	d->len = 0;
	return rc;
}

/*
 * One step into the buffer. *full: the buffer was filled (the library may hold more back);
 * *moved: the step consumed or produced something. A step that cannot move with an empty
 * buffer would loop for ever: an error.
 */
static err_code run(driver *d, codec_io *io, bool finishing, bool *full, bool *moved)
{
	size_t in_before = io->in_len;
	io->out = d->buf + d->len;
	io->out_room = d->cap - d->len;
	size_t room = io->out_room;
	bool ended = false;
	TRY(d->step->step(d->state, io, finishing, &ended));
	size_t produced = room - io->out_room;
	d->len += produced;
	*moved = produced > 0 || io->in_len < in_before;
	/* a call that moved nothing reports no boundary: keep what the last one said */
	if (*moved || ended)
		d->ended = ended;
	*full = io->out_room == 0;
	if (*full)
		return flush(d);
	return E_OK;
}

/* Nothing moved with input (or an end) still due: room is what the step lacks. */
static err_code make_room(driver *d)
{
	if (d->len == 0)
		return err_set(E_FAIL, "%s: the library made no progress", d->step->name);
	return flush(d);
}

static err_code driver_write(sink *s, const void *buf, size_t len)
{
	driver *d = (driver *)s;
	if (len == 0)
		return E_OK;
	codec_io io = { buf, len, NULL, 0 };
	d->seen_input = true;
	for (;;) {
		if (d->decoding && d->ended && d->step->single_stream) {
			if (io.in_len > 0)
				return err_set(E_CORRUPT, "%s: garbage after the end of the stream",
							   d->step->name);
			return E_OK;
		}
		bool full, moved;
		TRY(run(d, &io, false, &full, &moved));
		if (full)
			continue;
		if (io.in_len == 0)
			return E_OK;
		if (!moved)
			TRY(make_room(d));
	}
}

/* An encoder's step called finishing until it reports the end of its stream. */
static err_code end_stream(driver *d)
{
	/* no input, but a real pointer: steps advance it by zero */
	static const unsigned char nothing[1];
	codec_io io = { nothing, 0, NULL, 0 };
	while (!d->ended) {
		bool full, moved;
		TRY(run(d, &io, true, &full, &moved));
		if (!full && !moved && !d->ended)
			TRY(make_room(d));
	}
	return E_OK;
}

err_code codec_driver_end_frame(sink *s)
{
	driver *d = (driver *)s;
	if (d->decoding)
		return err_set(E_FAIL, "%s: a decoder has no frames to end", d->step->name);
	if (!d->seen_input)
		return E_OK; /* nothing since the last end: no empty frame */
	TRY(end_stream(d));
	/* the next write begins a new stream, which finish then ends */
	d->seen_input = false;
	d->ended = false;
	d->cut = true;
	return flush(d);
}

static err_code driver_finish(sink *s)
{
	driver *d = (driver *)s;
	if (d->decoding) {
		/* WAL-G never writes an empty object: even empty input compresses to a stream */
		if (!d->seen_input)
			return err_set(E_CORRUPT, "%s stream is empty", d->step->name);
		if (!d->ended)
			return err_set(E_CORRUPT, "%s stream truncated", d->step->name);
	} else if (d->seen_input || !d->cut) {
		/* an empty input is still one (empty) stream; nothing after a cut adds none */
		TRY(end_stream(d));
	}
	TRY(flush(d));
	return sink_finish(d->base.next);
}

static void driver_free(sink *s)
{
	driver *d = (driver *)s;
	d->step->free(d->state);
	sink_free(d->base.next);
	free(d);
}

static const sink_ops driver_ops = { driver_write, driver_finish, driver_free };

sink *codec_driver_new(const codec_step *step, void *state, bool decoding, size_t out_size,
					   sink *next)
{
	size_t cap = out_size > 0 ? out_size : CODEC_BUF_SIZE;
	driver *d = xmalloc(sizeof(*d) + cap);
	d->cap = cap;
	d->base.ops = &driver_ops;
	d->base.next = next;
	d->step = step;
	d->state = state;
	d->decoding = decoding;
	d->seen_input = false;
	d->ended = false;
	d->cut = false;
	d->len = 0;
	return &d->base;
}
