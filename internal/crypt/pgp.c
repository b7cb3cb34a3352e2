/*
 * OpenPGP encrypt and decrypt sinks over librnp. librnp pulls its input through a callback
 * until EOF, so each sink runs the librnp operation on a thread of its own between two bounded
 * rings: the caller copies its bytes into the input ring, the worker's output lands in the
 * output ring, and the caller passes that on downstream, on its own thread. Memory per sink is
 * the two rings and librnp's small stream buffers, whatever the object's size.
 */
#include "internal/crypt/pgp_impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pipe/pipe.h"

#define RING_CAP (256u * 1024u)

typedef struct ring {
	unsigned char *buf;
	size_t head, len;
} ring;

/* Copies as much of p as fits; returns how much. */
static size_t ring_put(ring *r, const unsigned char *p, size_t n)
{
	size_t done = 0;
	if (n > RING_CAP - r->len)
		n = RING_CAP - r->len;
	while (done < n) {
		size_t tail = (r->head + r->len) % RING_CAP;
		size_t k = RING_CAP - tail < n - done ? RING_CAP - tail : n - done;
		memcpy(r->buf + tail, p + done, k);
		r->len += k;
		done += k;
	}
	return n;
}

static size_t ring_get(ring *r, unsigned char *p, size_t n)
{
	size_t done = 0;
	if (n > r->len)
		n = r->len;
	while (done < n) {
		size_t k = RING_CAP - r->head < n - done ? RING_CAP - r->head : n - done;
		memcpy(p + done, r->buf + r->head, k);
		r->head = (r->head + k) % RING_CAP;
		r->len -= k;
		done += k;
	}
	return n;
}

/*
 * The outer packet framing of a message, followed on the caller's side so that decryption can
 * tell a truncated object from a tampered one and refuse bytes after the message's end
 * (librnp stops reading there and would ignore them). Only lengths are followed; librnp
 * checks everything else.
 */
enum frame_state { F_TAG, F_LEN, F_BODY, F_END, F_UNKNOWN };

typedef struct pgp_frame {
	enum frame_state state;
	unsigned tag;
	bool new_format, partial;
	unsigned char len[5];
	unsigned have, need;
	uint64_t body; /* bytes left in the current body or partial chunk */
	uint64_t packets;
} pgp_frame;

/* Packets that end a message: encrypted data (SED, SEIPD, AEAD), literal, compressed. */
static bool frame_terminal(unsigned tag)
{
	return tag == 9 || tag == 18 || tag == 20 || tag == 8 || tag == 11;
}

static void frame_body_done(pgp_frame *f)
{
	if (f->partial) {
		f->state = F_LEN;
		f->have = 0;
		f->need = 1;
	} else {
		f->packets++;
		f->state = frame_terminal(f->tag) ? F_END : F_TAG;
	}
}

static void frame_len_done(pgp_frame *f)
{
	const unsigned char *b = f->len;
	if (!f->new_format)
		f->body = f->need == 1 ? b[0]
				: f->need == 2 ? (uint64_t)b[0] << 8 | b[1]
							   : (uint64_t)b[0] << 24 | (uint64_t)b[1] << 16 | b[2] << 8 | b[3];
	else if (f->need == 2)
		f->body = ((uint64_t)(b[0] - 192) << 8) + b[1] + 192;
	else if (f->need == 5)
		f->body = (uint64_t)b[1] << 24 | (uint64_t)b[2] << 16 | b[3] << 8 | b[4];
	f->state = F_BODY;
	if (f->body == 0)
		frame_body_done(f);
}

/* Follows p; returns how many of its bytes belong to the message (fewer once it has ended). */
static size_t frame_scan(pgp_frame *f, const unsigned char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		switch (f->state) {
		case F_UNKNOWN:
			return n;
		case F_END:
			return i;
		case F_TAG: {
			unsigned b = p[i++];
			if (!(b & 0x80)) {
				f->state = F_UNKNOWN; /* not OpenPGP: librnp says so */
				return n;
			}
			f->new_format = b & 0x40;
			f->partial = false;
			f->have = 0;
			if (f->new_format) {
				f->tag = b & 0x3f;
				f->need = 1;
			} else {
				f->tag = (b >> 2) & 0x0f;
				if ((b & 3) == 3) {
					f->state = F_UNKNOWN; /* old format, length up to the end */
					return n;
				}
				f->need = (b & 3) == 0 ? 1 : (b & 3) == 1 ? 2 : 4;
			}
			f->state = F_LEN;
			break;
		}
		case F_LEN:
			f->len[f->have++] = p[i++];
			if (f->new_format && f->have == 1) {
				unsigned o = f->len[0];
				f->partial = o >= 224 && o < 255;
				if (o < 192 || f->partial) {
					f->body = f->partial ? (uint64_t)1 << (o & 0x1f) : o;
					f->state = F_BODY;
					if (f->body == 0)
						frame_body_done(f);
					break;
				}
				f->need = o < 224 ? 2 : 5;
			}
			if (f->have == f->need)
				frame_len_done(f);
			break;
		case F_BODY: {
			size_t k = n - i < f->body ? n - i : (size_t)f->body;
			i += k;
			f->body -= k;
			if (f->body == 0)
				frame_body_done(f);
			break;
		}
		}
	}
	return n;
}

typedef struct pgp_sink {
	sink base;
	bool decrypt;
	const char *var;	 /* the key's variable, for messages */
	err_code failed;	 /* caller side: the first error, repeated by every later call */
	char failed_msg[ERR_MSG_MAX];
	rnp_ffi_t ffi;
	pgp_keys *pool;		 /* decryption: where ffi goes back to */
	pthread_t th;
	bool started;
	pgp_frame frame;	 /* decryption only */
	/* shared with the worker, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	ring in, out;
	bool in_eof;		 /* the caller has no more input */
	bool abort;			 /* the caller gave up: the worker's callbacks fail */
	bool done;			 /* the worker has finished */
	rnp_result_t rc;	 /* the librnp operation's result */
	char why[200];		 /* the worker's own finding (protection mode, recipients) */
	err_code why_code;
} pgp_sink;

/* ------------------------------------------------------------------------------------------ */
/* Worker side                                                                                */
/* ------------------------------------------------------------------------------------------ */

static bool in_read(void *ctx, void *buf, size_t len, size_t *nread)
{
	pgp_sink *s = ctx;
	pthread_mutex_lock(&s->mu);
	while (s->in.len == 0 && !s->in_eof && !s->abort)
		pthread_cond_wait(&s->cv, &s->mu);
	bool ok = !s->abort;
	*nread = ok ? ring_get(&s->in, buf, len) : 0;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return ok;
}

static bool out_write(void *ctx, const void *buf, size_t len)
{
	pgp_sink *s = ctx;
	const unsigned char *p = buf;
	pthread_mutex_lock(&s->mu);
	while (len > 0 && !s->abort) {
		size_t n = ring_put(&s->out, p, len);
		p += n;
		len -= n;
		pthread_cond_broadcast(&s->cv);
		if (len > 0)
			pthread_cond_wait(&s->cv, &s->mu);
	}
	bool ok = !s->abort;
	pthread_mutex_unlock(&s->mu);
	return ok;
}

__attribute__((format(printf, 3, 4)))
static void set_why(pgp_sink *s, err_code code, const char *fmt, ...)
{
	va_list ap;
	if (s->why_code != E_OK)
		return;
	s->why_code = code;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
}

static rnp_result_t run_encrypt(pgp_sink *s, rnp_input_t in, rnp_output_t out)
{
	rnp_op_encrypt_t op = NULL;
	rnp_identifier_iterator_t it = NULL;
	const char *fp;
	rnp_result_t rc = rnp_op_encrypt_create(&op, s->ffi, in, out);
	if (rc == RNP_SUCCESS)
		rc = rnp_identifier_iterator_create(s->ffi, &it, "fingerprint");
	/* Every primary key is a recipient; librnp picks its encryption subkey, as WAL-G's
	 * EncryptionKey() does. */
	while (rc == RNP_SUCCESS && rnp_identifier_iterator_next(it, &fp) == RNP_SUCCESS &&
		   fp != NULL) {
		rnp_key_handle_t h = NULL;
		bool primary = false;
		if (rnp_locate_key(s->ffi, "fingerprint", fp, &h) != RNP_SUCCESS || h == NULL)
			continue;
		rnp_key_is_primary(h, &primary);
		if (primary)
			rc = rnp_op_encrypt_add_recipient(op, h);
		rnp_key_handle_destroy(h);
	}
	rnp_identifier_iterator_destroy(it);
	/* What WAL-G's openpgp.Encrypt(w, keys, nil, nil, nil) writes (see crypt.h). */
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_set_armor(op, false);
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_set_cipher(op, "AES128");
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_set_aead(op, "None");
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_set_compression(op, "Uncompressed", 0);
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_set_file_name(op, "");
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_set_file_mtime(op, 0);
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_execute(op);
	rnp_op_encrypt_destroy(op);
	return rc;
}

/* The key ids a message is encrypted for, for the wrong-key message. */
static void note_recipients(pgp_sink *s, rnp_op_verify_t op)
{
	size_t n = 0;
	char ids[160] = "";
	if (rnp_op_verify_get_recipient_count(op, &n) != RNP_SUCCESS || n == 0)
		return;
	for (size_t i = 0; i < n && i < 8; i++) {
		rnp_recipient_handle_t r = NULL;
		char *id = NULL;
		if (rnp_op_verify_get_recipient_at(op, i, &r) != RNP_SUCCESS ||
			rnp_recipient_get_keyid(r, &id) != RNP_SUCCESS)
			continue;
		size_t at = strlen(ids);
		snprintf(ids + at, sizeof(ids) - at, "%s%s", at ? ", " : "", id);
		rnp_buffer_destroy(id);
	}
	set_why(s, E_CONFIG,
			"OpenPGP: no secret key in %s can decrypt this object (it is encrypted for key %s)",
			s->var, ids);
}

static rnp_result_t run_decrypt(pgp_sink *s, rnp_input_t in, rnp_output_t out)
{
	rnp_op_verify_t op = NULL;
	char *mode = NULL;
	bool valid = false;
	rnp_result_t rc = rnp_op_verify_create(&op, s->ffi, in, out);
	/* WAL-G never signs and never looks at signatures. */
	if (rc == RNP_SUCCESS)
		rc = rnp_op_verify_set_flags(op, RNP_VERIFY_IGNORE_SIGS_ON_DECRYPT);
	if (rc == RNP_SUCCESS)
		rc = rnp_op_verify_execute(op);
	if (rc == RNP_ERROR_NO_SUITABLE_KEY || rc == RNP_ERROR_KEY_NOT_FOUND ||
		rc == RNP_ERROR_DECRYPT_FAILED)
		note_recipients(s, op);
	/*
	 * Only an integrity-protected message counts: SEIPD with its MDC checked (or AEAD). A
	 * plain literal or an unprotected SED packet (which WAL-G refuses too) is not accepted.
	 */
	if (rc == RNP_SUCCESS && rnp_op_verify_get_protection_info(op, &mode, NULL, &valid) ==
								 RNP_SUCCESS &&
		(mode == NULL || strcmp(mode, "none") == 0 || strcmp(mode, "cfb") == 0 || !valid)) {
		set_why(s, E_CORRUPT, "OpenPGP: the object is not an integrity-protected encrypted "
							  "message (protection: %s)",
				mode ? mode : "unknown");
		rc = RNP_ERROR_BAD_FORMAT;
	}
	rnp_buffer_destroy(mode);
	rnp_op_verify_destroy(op);
	return rc;
}

static void *worker(void *arg)
{
	pgp_sink *s = arg;
	rnp_input_t in = NULL;
	rnp_output_t out = NULL;
	rnp_result_t rc = rnp_input_from_callback(&in, in_read, NULL, s);
	if (rc == RNP_SUCCESS)
		rc = rnp_output_to_callback(&out, out_write, NULL, s);
	if (rc == RNP_SUCCESS)
		rc = s->decrypt ? run_decrypt(s, in, out) : run_encrypt(s, in, out);
	if (rc == RNP_SUCCESS)
		rc = rnp_output_finish(out);
	rnp_output_destroy(out);
	rnp_input_destroy(in);
	pthread_mutex_lock(&s->mu);
	s->rc = rc;
	s->done = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Caller side                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* Records the error now in this thread's record as the sink's own. */
static err_code fail(pgp_sink *s, err_code code)
{
	if (s->failed == E_OK) {
		s->failed = code;
		snprintf(s->failed_msg, sizeof(s->failed_msg), "%s", err_msg());
	}
	return code;
}

/* The worker's failure as this thread's error. Called once the worker is done. */
static err_code worker_error(pgp_sink *s)
{
	const char *what = s->rc == RNP_ERROR_GENERIC ? "integrity check failed"
												  : rnp_result_to_string(s->rc);
	if (!s->decrypt)
		return fail(s, err_set(E_FAIL, "OpenPGP: encryption failed: %s", what));
	/* At the end of the input, an unfinished message explains any failure. */
	bool ended = s->in_eof && s->frame.state != F_END && s->frame.state != F_UNKNOWN;
	if (ended && s->frame.state == F_TAG && s->frame.packets == 0)
		return fail(s, err_set(E_CORRUPT, "OpenPGP: the object is empty"));
	if (ended)
		return fail(s, err_set(E_CORRUPT, "OpenPGP: the object is truncated (it ends inside "
										  "the message)"));
	if (s->why_code != E_OK)
		return fail(s, err_set(s->why_code, "%s", s->why));
	if (s->rc == RNP_ERROR_NO_SUITABLE_KEY || s->rc == RNP_ERROR_KEY_NOT_FOUND)
		return fail(s, err_set(E_CONFIG, "OpenPGP: no secret key in %s can decrypt this object",
							   s->var));
	if (s->frame.state == F_UNKNOWN)
		return fail(s, err_set(E_CORRUPT, "OpenPGP: the object is not an OpenPGP message (%s)",
							   what));
	return fail(s, err_set(E_CORRUPT, "OpenPGP: the object was tampered with or is corrupt (%s)",
						   what));
}

/*
 * Passes what the output ring holds downstream. Called with mu held; drops it for the
 * downstream write, during which the worker only appends behind the piece being passed.
 */
static err_code drain(pgp_sink *s)
{
	while (s->out.len > 0) {
		size_t n = RING_CAP - s->out.head < s->out.len ? RING_CAP - s->out.head : s->out.len;
		const unsigned char *p = s->out.buf + s->out.head;
		pthread_mutex_unlock(&s->mu);
		err_code rc = sink_write(s->base.next, p, n);
		pthread_mutex_lock(&s->mu);
		if (rc != E_OK) {
			s->abort = true; /* the worker stops at its next callback */
			pthread_cond_broadcast(&s->cv);
			return fail(s, rc);
		}
		s->out.head = (s->out.head + n) % RING_CAP;
		s->out.len -= n;
		pthread_cond_broadcast(&s->cv);
	}
	return E_OK;
}

static err_code already_failed(pgp_sink *s)
{
	return err_set(s->failed, "%s", s->failed_msg);
}

static err_code pgp_write(sink *base, const void *buf, size_t len)
{
	pgp_sink *s = (pgp_sink *)base;
	const unsigned char *p = buf;
	if (s->failed != E_OK)
		return already_failed(s);
	bool trailing = false;
	if (s->decrypt) {
		size_t keep = frame_scan(&s->frame, p, len);
		trailing = keep < len;
		len = keep;
	}
	err_code rc = E_OK;
	pthread_mutex_lock(&s->mu);
	while (rc == E_OK && !s->done) {
		size_t n = ring_put(&s->in, p, len);
		p += n;
		len -= n;
		if (n > 0)
			pthread_cond_broadcast(&s->cv);
		if (s->out.len > 0)
			rc = drain(s);
		else if (len > 0)
			pthread_cond_wait(&s->cv, &s->mu); /* input full, nothing to pass on yet */
		else
			break;
	}
	/* The worker stops early only on failure, or on a message that ended before its input. */
	if (rc == E_OK && s->done) {
		rc = drain(s);
		if (rc == E_OK && s->rc != RNP_SUCCESS)
			rc = worker_error(s);
		else if (rc == E_OK && (len > 0 || s->in.len > 0))
			trailing = true;
	}
	pthread_mutex_unlock(&s->mu);
	if (rc == E_OK && trailing)
		rc = fail(s, err_set(E_CORRUPT, "OpenPGP: the object has data after the end of the "
										"message"));
	return rc;
}

static err_code pgp_finish(sink *base)
{
	pgp_sink *s = (pgp_sink *)base;
	if (s->failed != E_OK)
		return already_failed(s);
	err_code rc = E_OK;
	pthread_mutex_lock(&s->mu);
	s->in_eof = true;
	pthread_cond_broadcast(&s->cv);
	while (rc == E_OK && (!s->done || s->out.len > 0)) {
		if (s->out.len > 0)
			rc = drain(s);
		else
			pthread_cond_wait(&s->cv, &s->mu);
	}
	bool leftover = s->in.len > 0;
	pthread_mutex_unlock(&s->mu);
	if (rc != E_OK)
		return rc;
	pthread_join(s->th, NULL);
	s->started = false;
	if (s->rc != RNP_SUCCESS)
		return worker_error(s);
	if (leftover)
		return fail(s, err_set(E_CORRUPT, "OpenPGP: the object has data after the end of the "
										  "message"));
	return sink_finish(s->base.next);
}

static void pgp_free(sink *base)
{
	pgp_sink *s = (pgp_sink *)base;
	if (s->started) {
		pthread_mutex_lock(&s->mu);
		s->abort = true;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->th, NULL);
	}
	/* No operation is left on it once the worker has been joined. */
	if (s->ffi != NULL && s->pool != NULL)
		pgp_keys_give(s->pool, s->ffi);
	else if (s->ffi != NULL)
		rnp_ffi_destroy(s->ffi);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	/* Both rings may hold plaintext. */
	if (s->in.buf != NULL)
		rnp_buffer_clear(s->in.buf, RING_CAP);
	if (s->out.buf != NULL)
		rnp_buffer_clear(s->out.buf, RING_CAP);
	free(s->in.buf);
	free(s->out.buf);
	sink_free(s->base.next);
	free(s);
}

static const sink_ops pgp_ops = { pgp_write, pgp_finish, pgp_free };

static pgp_sink *sink_alloc(bool decrypt, const char *var, sink *next)
{
	pgp_sink *s = xcalloc(1, sizeof(*s));
	s->base.ops = &pgp_ops;
	s->base.next = next;
	s->decrypt = decrypt;
	s->var = var;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	return s;
}

/* Starts the worker on s->ffi, which holds the keys. */
static void sink_start(pgp_sink *s)
{
	s->in.buf = xmalloc(RING_CAP);
	s->out.buf = xmalloc(RING_CAP);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PIPE_THREAD_STACK);
	int e = pthread_create(&s->th, &attr, worker, s);
	pthread_attr_destroy(&attr);
	if (e != 0)
		fail(s, err_errno(E_FAIL, e, "OpenPGP: starting a thread"));
	else
		s->started = true;
}

sink *pgp_encrypt_new(const pgp_keys *k, sink *next)
{
	pgp_sink *s = sink_alloc(false, k->var, next);
	rnp_result_t rr;
	if (k->enc_rc != E_OK) {
		fail(s, err_set(k->enc_rc, "%s", k->enc_msg));
	} else if ((s->ffi = pgp_ffi_new()) == NULL) {
		fail(s, err_set(E_FAIL, "librnp: cannot create a context"));
	} else if ((rr = pgp_import(s->ffi, k->pub.data, k->pub.len)) != RNP_SUCCESS) {
		fail(s, err_set(E_FAIL, "OpenPGP: librnp cannot import the keys again: %s",
						rnp_result_to_string(rr)));
	} else {
		sink_start(s);
	}
	return &s->base;
}

sink *pgp_decrypt_new(pgp_keys *k, sink *next)
{
	pgp_sink *s = sink_alloc(true, k->var, next);
	if (pgp_keys_take(k, &s->ffi) != E_OK) {
		fail(s, err_last());
	} else {
		s->pool = k;
		sink_start(s);
	}
	return &s->base;
}
