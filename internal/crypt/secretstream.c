/*
 * Encrypt and decrypt sinks for WAL-G's libsodium framing: a 24-byte secretstream header, then
 * 8192-byte plaintext chunks (8209 bytes encrypted), the last one tagged FINAL.
 */
#include "internal/crypt/crypt_impl.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define HDR_BYTES crypto_secretstream_xchacha20poly1305_HEADERBYTES
#define ABYTES crypto_secretstream_xchacha20poly1305_ABYTES
#define CT_CHUNK (CRYPT_CHUNK + ABYTES)
#define TAG_MESSAGE crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
#define TAG_FINAL crypto_secretstream_xchacha20poly1305_TAG_FINAL

_Static_assert(HDR_BYTES == 24 && ABYTES == 17, "WAL-G's framing assumes these sizes");
_Static_assert(CRYPT_HEAD_BYTES == HDR_BYTES + CT_CHUNK, "a stream's header and first chunk");

bool crypt_key_opens(const unsigned char key[CRYPT_KEY_BYTES], const unsigned char *head,
					 size_t n)
{
	crypto_secretstream_xchacha20poly1305_state st;
	unsigned char plain[CRYPT_CHUNK], tag;
	unsigned long long mlen;
	size_t clen = n > CRYPT_HEAD_BYTES ? CT_CHUNK : n - HDR_BYTES;
	bool ok = n >= HDR_BYTES + ABYTES &&
		crypto_secretstream_xchacha20poly1305_init_pull(&st, head, key) == 0 &&
		crypto_secretstream_xchacha20poly1305_pull(&st, plain, &mlen, &tag, head + HDR_BYTES,
												   clen, NULL, 0) == 0;
	sodium_memzero(&st, sizeof(st));
	sodium_memzero(plain, sizeof(plain));
	return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* Encrypt                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct enc_sink {
	sink base;
	crypto_secretstream_xchacha20poly1305_state st;
	unsigned char hdr[HDR_BYTES];
	bool hdr_sent;
	chunker chunks; /* plaintext cut into CRYPT_CHUNK pieces, in plain */
	unsigned char plain[CRYPT_CHUNK];
	unsigned char out[CT_CHUNK];
} enc_sink;

/* The header goes out lazily so that an empty stream still gets one, from finish. */
static err_code enc_header(enc_sink *e)
{
	if (e->hdr_sent)
		return E_OK;
	e->hdr_sent = true;
	return sink_write(e->base.next, e->hdr, sizeof(e->hdr));
}

static err_code enc_push(enc_sink *e, const unsigned char *m, size_t mlen, unsigned char tag)
{
	unsigned long long clen;
	TRY(enc_header(e));
	if (crypto_secretstream_xchacha20poly1305_push(&e->st, e->out, &clen, m, mlen, NULL, 0,
												   tag) != 0)
		return err_set(E_FAIL, "libsodium: encrypting a chunk failed");
	return sink_write(e->base.next, e->out, (size_t)clen);
}

/* Every full chunk is a MESSAGE as soon as it is complete. */
static err_code enc_chunk(void *arg, const unsigned char *m, size_t mlen)
{
	return enc_push(arg, m, mlen, TAG_MESSAGE);
}

static err_code enc_write(sink *s, const void *buf, size_t len)
{
	return chunker_write(&((enc_sink *)s)->chunks, buf, len);
}

static err_code enc_finish(sink *s)
{
	enc_sink *e = (enc_sink *)s;
	/* Always a FINAL chunk, empty when the plaintext filled its last chunk exactly. */
	TRY(enc_push(e, e->plain, e->chunks.fill, TAG_FINAL));
	e->chunks.fill = 0;
	return sink_finish(s->next);
}

static void enc_free(sink *s)
{
	enc_sink *e = (enc_sink *)s;
	sink_free(s->next);
	sodium_memzero(e, sizeof(*e));
	free(e);
}

static const sink_ops enc_ops = { enc_write, enc_finish, enc_free };

sink *crypt_encrypt_new(const unsigned char key[CRYPT_KEY_BYTES], sink *next)
{
	enc_sink *e = xcalloc(1, sizeof(*e));
	e->base.ops = &enc_ops;
	e->base.next = next;
	/* init_push cannot fail; the state keeps what it needs, so the key is not kept. */
	crypto_secretstream_xchacha20poly1305_init_push(&e->st, e->hdr, key);
	e->chunks = (chunker){ .size = CRYPT_CHUNK, .buf = e->plain, .put = enc_chunk, .arg = e };
	return &e->base;
}

/* ------------------------------------------------------------------------------------------ */
/* Decrypt                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct dec_sink {
	sink base;
	crypto_secretstream_xchacha20poly1305_state st;
	unsigned char key[CRYPT_KEY_BYTES];
	size_t hdr_fill;
	bool final_seen;
	err_code failed; /* an earlier write failed: the stream position is lost */
	uint64_t chunks;	/* chunks pulled so far, for messages */
	chunker pieces; /* ciphertext cut into CT_CHUNK pieces, in in */
	unsigned char hdr[HDR_BYTES];
	unsigned char in[CT_CHUNK];
	unsigned char plain[CRYPT_CHUNK];
} dec_sink;

static err_code dec_pull(dec_sink *d, const unsigned char *c, size_t clen)
{
	unsigned long long mlen;
	unsigned char tag;

	if (crypto_secretstream_xchacha20poly1305_pull(&d->st, d->plain, &mlen, &tag, c, clen, NULL,
												   0) != 0)
		return err_set(E_CORRUPT,
					   "libsodium: corrupted chunk %" PRIu64 " (wrong key or tampered data)",
					   d->chunks);
	d->chunks++;
	d->final_seen = tag == TAG_FINAL;
	return sink_write(d->base.next, d->plain, (size_t)mlen);
}

/* A whole ciphertext chunk; nothing may come after the FINAL one. */
static err_code dec_chunk(void *arg, const unsigned char *c, size_t clen)
{
	dec_sink *d = arg;
	if (d->final_seen)
		return err_set(E_CORRUPT, "libsodium: data after the final chunk");
	return dec_pull(d, c, clen);
}

static err_code dec_write_inner(dec_sink *d, const unsigned char *p, size_t len)
{
	if (d->hdr_fill < HDR_BYTES) {
		d->hdr_fill += take_bytes(d->hdr + d->hdr_fill, HDR_BYTES - d->hdr_fill, &p, &len);
		if (d->hdr_fill < HDR_BYTES)
			return E_OK;
		if (crypto_secretstream_xchacha20poly1305_init_pull(&d->st, d->hdr, d->key) != 0)
			return err_set(E_CORRUPT, "libsodium: invalid stream header");
	}
	/*
	 * Chunks are pulled as soon as they are complete: the tag says whether one is the last, so
	 * a full-size chunk never has to wait for the next write to learn that.
	 */
	if (len > 0 && d->final_seen)
		return err_set(E_CORRUPT, "libsodium: data after the final chunk");
	return chunker_write(&d->pieces, p, len);
}

static err_code dec_write(sink *s, const void *buf, size_t len)
{
	dec_sink *d = (dec_sink *)s;
	if (d->failed != E_OK)
		return err_set(d->failed, "libsodium: stream already failed");
	d->failed = dec_write_inner(d, buf, len);
	return d->failed;
}

static err_code dec_finish(sink *s)
{
	dec_sink *d = (dec_sink *)s;
	if (d->failed != E_OK)
		return err_set(d->failed, "libsodium: stream already failed");
	if (d->hdr_fill < HDR_BYTES)
		return err_set(E_CORRUPT, "libsodium: stream truncated: header is %zu of %zu bytes",
					   d->hdr_fill, (size_t)HDR_BYTES);
	/* The short last chunk; dec_chunk refused anything after a FINAL. */
	TRY(chunker_flush(&d->pieces));
	if (!d->final_seen)
		return err_set(E_CORRUPT, "libsodium: stream truncated: no final chunk");
	return sink_finish(s->next);
}

static void dec_free(sink *s)
{
	dec_sink *d = (dec_sink *)s;
	sink_free(s->next);
	sodium_memzero(d, sizeof(*d));
	free(d);
}

static const sink_ops dec_ops = { dec_write, dec_finish, dec_free };

sink *crypt_decrypt_new(const unsigned char key[CRYPT_KEY_BYTES], sink *next)
{
	dec_sink *d = xcalloc(1, sizeof(*d));
	d->base.ops = &dec_ops;
	d->base.next = next;
	/* A copy, because the pull state can only be set up once the header has arrived. */
	memcpy(d->key, key, CRYPT_KEY_BYTES);
	d->pieces = (chunker){ .size = CT_CHUNK, .buf = d->in, .put = dec_chunk, .arg = d };
	return &d->base;
}
