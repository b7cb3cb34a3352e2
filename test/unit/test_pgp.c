/*
 * Unit tests for internal/crypt's OpenPGP sinks and keys, against librnp itself and the WAL-G
 * v3.0.9 fixture (test/fixtures/walg-v3.0.9-pgp): round trips, the message format, wrong keys
 * and passphrases, tampered and truncated objects, key text handling, the crypter choice.
 */
#include "internal/codec/codec.h"
#include "internal/crypt/crypt.h"
#include "internal/crypt/pgp_impl.h"

#include <fcntl.h>
#include <pthread.h>
#include <rnp/rnp.h>
#include <rnp/rnp_err.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#define FIXTURE "test/fixtures/walg-v3.0.9-pgp"
#define FIXTURE_PASS "walc pgp fixture passphrase"
#define KEYS "test/unit/pgp/"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static unsigned char *slurp(const char *path, size_t *len)
{
	unsigned char *p = read_all(path, len);
	if (p == NULL)
		fail_msg("cannot read %s (tests run from the repository root)", path);
	return p;
}

static pgp_keys *keys_from(const char *file, const char *pass)
{
	size_t len;
	unsigned char *text = slurp(file, &len);
	pgp_keys *k = NULL;
	err_code rc = pgp_keys_parse((const char *)text, len, pass, "WALG_PGP_KEY_PATH", &k);
	if (rc != E_OK)
		fail_msg("%s: %s", file, err_msg());
	free(text);
	return k;
}

/* Sizes that straddle the rings (256 KiB), librnp's chunks and partial lengths. */
static const size_t odd_sizes[] = { 1, 7, 8191, 3, 65537, 262143, 2, 262145, 100003, 16 };

static err_code feed(sink *s, const unsigned char *p, size_t n, enum feed_mode mode)
{
	return feed_sizes(s, p, n, mode, odd_sizes, sizeof(odd_sizes) / sizeof(odd_sizes[0]));
}

static void encrypt_buf(const pgp_keys *k, const unsigned char *pt, size_t n,
						enum feed_mode mode, membuf *ct)
{
	memset(ct, 0, sizeof(*ct));
	sink *s = pgp_encrypt_new(k, membuf_sink_new(ct));
	if (feed(s, pt, n, mode) != E_OK || sink_finish(s) != E_OK)
		fail_msg("encrypting %zu bytes: %s", n, err_msg());
	sink_free(s);
}

/* Decrypts ct; returns the first error of write or finish. pt and finishes may be NULL. */
static err_code decrypt_buf(pgp_keys *k, const unsigned char *ct, size_t n, enum feed_mode mode,
							membuf *pt, int *finishes)
{
	probe pr;
	sink *s = pgp_decrypt_new(k, probe_new(&pr));
	return run_probe(s, &pr, ct, n, mode, odd_sizes, sizeof(odd_sizes) / sizeof(odd_sizes[0]), pt,
					 finishes);
}

static void expect_msg(const char *want)
{
	if (strstr(err_msg(), want) == NULL)
		fail_msg("message \"%s\" lacks \"%s\"", err_msg(), want);
}

/* Keys shared by the tests: the fixture's RSA key (its S2K is paid once), and two others. */
static pgp_keys *fx_pub, *fx_sec, *plain, *other;

static int setup_keys(void **state)
{
	(void)state;
	log_setup(LOG_ERROR, false, "test");
	fx_pub = keys_from(FIXTURE "/keys/pgp-public.asc", NULL);
	fx_sec = keys_from(FIXTURE "/keys/pgp-secret.asc", FIXTURE_PASS);
	plain = keys_from(KEYS "plain.sec.asc", NULL);
	other = keys_from(KEYS "other.sec.asc", "other passphrase");
	return 0;
}

static int teardown_keys(void **state)
{
	(void)state;
	pgp_keys_free(fx_pub);
	pgp_keys_free(fx_sec);
	pgp_keys_free(plain);
	pgp_keys_free(other);
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Streams                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void test_round_trips(void **state)
{
	(void)state;
	static const size_t sizes[] = {
		0, 1, 100, 8192, 65535, 262143, 262144, 262145, 524288 + 3, (3u << 20) + 7,
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *pt = pattern(n, (uint32_t)i);
		for (int m = WHOLE; m <= ODD; m++) {
			membuf ct, out;
			int finishes;
			encrypt_buf(plain, pt, n, (enum feed_mode)m, &ct);
			assert_true(ct.len > n);
			assert_int_equal(decrypt_buf(plain, ct.data, ct.len, (enum feed_mode)(ODD - m), &out,
										 &finishes),
							 E_OK);
			check_plain(&out, finishes, pt, n);
			free(ct.data);
		}
		free(pt);
	}
}

/* Small messages one byte at a time, both ways: every boundary falls inside a write. */
static void test_byte_by_byte(void **state)
{
	(void)state;
	unsigned char *pt = pattern(3000, 77);
	membuf ct, out;
	encrypt_buf(fx_pub, pt, 3000, BYTES, &ct);
	assert_int_equal(decrypt_buf(fx_sec, ct.data, ct.len, BYTES, &out, NULL), E_OK);
	assert_int_equal(out.len, 3000);
	assert_memory_equal(out.data, pt, 3000);
	free(out.data);
	free(ct.data);
	free(pt);
}

/* An empty plaintext is a valid message; an empty object is not one. */
static void test_empty(void **state)
{
	(void)state;
	membuf ct, out;
	encrypt_buf(fx_pub, (const unsigned char *)"", 0, WHOLE, &ct);
	assert_true(ct.len > 0);
	assert_int_equal(decrypt_buf(fx_sec, ct.data, ct.len, WHOLE, &out, NULL), E_OK);
	assert_int_equal(out.len, 0);
	free(out.data);
	free(ct.data);

	int finishes = -1;
	assert_int_equal(decrypt_buf(fx_sec, NULL, 0, WHOLE, NULL, &finishes), E_CORRUPT);
	expect_msg("OpenPGP: the object is empty");
	assert_int_equal(finishes, 0);
}

/* Plaintext leaves the decryptor while the object is still arriving: nothing is buffered whole. */
static void test_streams(void **state)
{
	(void)state;
	size_t n = 8u << 20;
	unsigned char *pt = pattern(n, 5);
	membuf ct;
	encrypt_buf(plain, pt, n, WHOLE, &ct);
	probe pr;
	sink *s = pgp_decrypt_new(plain, probe_new(&pr));
	assert_int_equal(feed(s, ct.data, ct.len / 2, ODD), E_OK);
	assert_true(pr.mb.len > 0);
	assert_true(pr.mb.len < n / 2 + (1u << 20));
	assert_int_equal(feed(s, ct.data + ct.len / 2, ct.len - ct.len / 2, ODD), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	assert_int_equal(pr.mb.len, n);
	assert_memory_equal(pr.mb.data, pt, n);
	sink_free(s);
	free(pr.mb.data);

	/* And ciphertext leaves the encryptor before the plaintext has ended. */
	membuf mb = { 0 };
	s = pgp_encrypt_new(plain, membuf_sink_new(&mb));
	assert_int_equal(feed(s, pt, n / 2, ODD), E_OK);
	assert_true(mb.len > 0);
	sink_free(s); /* unfinished: abandoned */
	free(mb.data);
	free(ct.data);
	free(pt);
}

/* ------------------------------------------------------------------------------------------ */
/* Format: what WAL-G's openpgp.Encrypt(w, keys, nil, nil, nil) writes                        */
/* ------------------------------------------------------------------------------------------ */

/* The outer packets: tag and length of each, new format (as librnp writes them). */
static size_t packet_at(const unsigned char *p, size_t n, unsigned *tag, size_t *hlen,
						size_t *blen, bool *partial)
{
	assert_true(n >= 2);
	assert_int_equal(p[0] & 0xc0, 0xc0);
	*tag = p[0] & 0x3f;
	unsigned o = p[1];
	*partial = o >= 224 && o < 255;
	if (o < 192) {
		*hlen = 2;
		*blen = o;
	} else if (o < 224) {
		*hlen = 3;
		*blen = ((size_t)(o - 192) << 8) + p[2] + 192;
	} else if (o == 255) {
		*hlen = 6;
		*blen = (size_t)p[2] << 24 | (size_t)p[3] << 16 | (size_t)p[4] << 8 | p[5];
	} else {
		*hlen = 2;
		*blen = (size_t)1 << (o & 0x1f);
	}
	return *hlen + *blen;
}

static void test_format(void **state)
{
	(void)state;
	unsigned char *pt = pattern(100000, 3);
	membuf ct;
	encrypt_buf(fx_pub, pt, 100000, WHOLE, &ct);

	/* A v3 PKESK for the fixture's encryption subkey, then SEIPD version 1, nothing else. */
	unsigned tag;
	size_t hlen, blen;
	bool partial;
	size_t at = packet_at(ct.data, ct.len, &tag, &hlen, &blen, &partial);
	assert_int_equal(tag, 1);
	assert_int_equal(ct.data[hlen], 3);
	static const unsigned char subkey[8] = { 0x47, 0x07, 0x27, 0x2E, 0xB1, 0xF6, 0x6E, 0x0C };
	assert_memory_equal(ct.data + hlen + 1, subkey, 8);
	assert_int_equal(ct.data[hlen + 9], 1); /* RSA */
	packet_at(ct.data + at, ct.len - at, &tag, &hlen, &blen, &partial);
	assert_int_equal(tag, 18);
	assert_int_equal(ct.data[at + hlen], 1);

	/* Decrypted by librnp directly: AES-128 with MDC, a literal packet 'b', no name, date 0. */
	rnp_ffi_t ffi;
	rnp_input_t keys, in;
	rnp_output_t out;
	rnp_op_verify_t op;
	size_t klen;
	unsigned char *ktext = slurp(FIXTURE "/keys/pgp-secret.asc", &klen);
	assert_int_equal(rnp_ffi_create(&ffi, "GPG", "GPG"), RNP_SUCCESS);
	assert_int_equal(rnp_input_from_memory(&keys, ktext, klen, false), RNP_SUCCESS);
	assert_int_equal(rnp_import_keys(ffi, keys, RNP_LOAD_SAVE_SECRET_KEYS, NULL), RNP_SUCCESS);
	rnp_input_destroy(keys);
	rnp_key_handle_t h;
	assert_int_equal(rnp_locate_key(ffi, "keyid", "4707272EB1F66E0C", &h), RNP_SUCCESS);
	assert_int_equal(rnp_key_unprotect(h, FIXTURE_PASS), RNP_SUCCESS);
	rnp_key_handle_destroy(h);
	assert_int_equal(rnp_input_from_memory(&in, ct.data, ct.len, false), RNP_SUCCESS);
	assert_int_equal(rnp_output_to_null(&out), RNP_SUCCESS);
	assert_int_equal(rnp_op_verify_create(&op, ffi, in, out), RNP_SUCCESS);
	assert_int_equal(rnp_op_verify_execute(op), RNP_SUCCESS);
	char *mode, *cipher, *name;
	bool valid;
	uint32_t mtime = 1;
	size_t recipients = 0, sigs = 1;
	assert_int_equal(rnp_op_verify_get_protection_info(op, &mode, &cipher, &valid),
					 RNP_SUCCESS);
	assert_string_equal(mode, "cfb-mdc");
	assert_string_equal(cipher, "AES128");
	assert_true(valid);
	assert_int_equal(rnp_op_verify_get_file_info(op, &name, &mtime), RNP_SUCCESS);
	assert_true(name == NULL || name[0] == '\0');
	assert_int_equal(mtime, 0);
	assert_int_equal(rnp_op_verify_get_recipient_count(op, &recipients), RNP_SUCCESS);
	assert_int_equal(recipients, 1);
	assert_int_equal(rnp_op_verify_get_signature_count(op, &sigs), RNP_SUCCESS);
	assert_int_equal(sigs, 0);
	rnp_buffer_destroy(mode);
	rnp_buffer_destroy(cipher);
	rnp_buffer_destroy(name);
	rnp_op_verify_destroy(op);
	rnp_input_destroy(in);
	rnp_output_destroy(out);
	rnp_ffi_destroy(ffi);
	free(ktext);
	free(ct.data);
	free(pt);
}

/* Every primary key of the text is a recipient: either secret key decrypts. */
static void test_every_recipient(void **state)
{
	(void)state;
	pgp_keys *two = keys_from(KEYS "two.pub.asc", NULL);
	unsigned char *pt = pattern(5000, 4);
	membuf ct, out;
	encrypt_buf(two, pt, 5000, WHOLE, &ct);
	size_t at = 0, pkesk = 0;
	for (;;) {
		unsigned tag;
		size_t hlen, blen;
		bool partial;
		size_t len = packet_at(ct.data + at, ct.len - at, &tag, &hlen, &blen, &partial);
		if (tag != 1)
			break;
		pkesk++;
		at += len;
	}
	assert_int_equal(pkesk, 2);
	assert_int_equal(decrypt_buf(plain, ct.data, ct.len, ODD, &out, NULL), E_OK);
	assert_memory_equal(out.data, pt, 5000);
	free(out.data);
	assert_int_equal(decrypt_buf(other, ct.data, ct.len, ODD, &out, NULL), E_OK);
	assert_memory_equal(out.data, pt, 5000);
	free(out.data);
	assert_int_equal(decrypt_buf(fx_sec, ct.data, ct.len, ODD, NULL, NULL), E_CONFIG);
	free(ct.data);
	free(pt);
	pgp_keys_free(two);
}

/* ------------------------------------------------------------------------------------------ */
/* The WAL-G fixture                                                                          */
/* ------------------------------------------------------------------------------------------ */

/* A WAL segment WAL-G encrypted: decrypts, and its lz4 frame inside decodes to 1 MiB. */
/* An lz4 frame's first bytes. */
static const unsigned char plain_start[] = { 0x04, 0x22, 0x4d, 0x18, 0x64, 0x40, 0xa7 };

static void test_walg_object(void **state)
{
	(void)state;
	size_t len;
	unsigned char *ct = slurp(FIXTURE "/repo/wal_005/00000001000000000000001D.lz4", &len);
	membuf plainbuf = { 0 };
	sink *s = pgp_decrypt_new(fx_sec, codec_decompress_new(codec_by_name("lz4"),
														   membuf_sink_new(&plainbuf)));
	assert_int_equal(feed(s, ct, len, ODD), E_OK);
	if (sink_finish(s) != E_OK)
		fail_msg("%s", err_msg());
	sink_free(s);
	assert_int_equal(plainbuf.len, 1u << 20);
	/* A WAL page header: magic 0xD110 (PostgreSQL 15), little endian. */
	assert_int_equal(plainbuf.data[0], 0x10);
	assert_int_equal(plainbuf.data[1], 0xD1);
	free(plainbuf.data);

	/* The public key alone cannot, and says why. */
	assert_int_equal(decrypt_buf(fx_pub, ct, len, WHOLE, NULL, NULL), E_CONFIG);
	expect_msg("holds no secret key");
	/* Read without a key, its first bytes say OpenPGP, as do walc's own messages'. */
	static const unsigned char lz4_magic[] = { 0x04, 0x22, 0x4d, 0x18 };
	assert_string_equal(crypt_sniff(ct, len, lz4_magic, 4, false), "OpenPGP");
	membuf mine;
	encrypt_buf(fx_pub, (const unsigned char *)"x", 1, WHOLE, &mine);
	assert_string_equal(crypt_sniff(mine.data, mine.len, NULL, 0, false), "OpenPGP");
	free(mine.data);
	/* The plaintext does not. */
	assert_null(crypt_sniff(plain_start, sizeof(plain_start), lz4_magic, 4, false));
	free(ct);
}

/* ------------------------------------------------------------------------------------------ */
/* Failures                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static void test_wrong_key(void **state)
{
	(void)state;
	unsigned char *pt = pattern(300000, 6);
	membuf ct;
	encrypt_buf(fx_pub, pt, 300000, WHOLE, &ct);
	probe pr;
	sink *s = pgp_decrypt_new(other, probe_new(&pr));
	err_code rc = feed(s, ct.data, ct.len, ODD);
	if (rc == E_OK)
		rc = sink_finish(s);
	assert_int_equal(rc, E_CONFIG);
	expect_msg("no secret key in WALG_PGP_KEY_PATH can decrypt this object");
	expect_msg("4707272EB1F66E0C");
	/* Later calls repeat the error; nothing went downstream. */
	assert_int_equal(sink_finish(s), E_CONFIG);
	expect_msg("4707272EB1F66E0C");
	assert_int_equal(pr.mb.len, 0);
	assert_int_equal(pr.finishes, 0);
	sink_free(s);
	free(pr.mb.data);
	free(ct.data);
	free(pt);
}

static void test_passphrase(void **state)
{
	(void)state;
	unsigned char *pt = pattern(1000, 7);
	membuf ct;
	encrypt_buf(other, pt, 1000, WHOLE, &ct); /* a protected secret key encrypts, locked */

	pgp_keys *wrong = keys_from(KEYS "other.sec.asc", "not the passphrase");
	int finishes = -1;
	assert_int_equal(decrypt_buf(wrong, ct.data, ct.len, WHOLE, NULL, &finishes), E_CONFIG);
	expect_msg("WALG_PGP_KEY_PASSPHRASE: wrong passphrase for secret key ");
	assert_null(strstr(err_msg(), "not the passphrase"));
	assert_int_equal(finishes, 0);
	/* Remembered, not retried. */
	assert_int_equal(decrypt_buf(wrong, ct.data, ct.len, WHOLE, NULL, NULL), E_CONFIG);
	expect_msg("wrong passphrase");
	pgp_keys_free(wrong);

	pgp_keys *none = keys_from(KEYS "other.sec.asc", NULL);
	assert_int_equal(decrypt_buf(none, ct.data, ct.len, WHOLE, NULL, NULL), E_CONFIG);
	expect_msg("WALG_PGP_KEY_PASSPHRASE is not set, but secret key ");
	/* Still fine for encrypting: the public part. */
	membuf ct2;
	encrypt_buf(none, pt, 1000, WHOLE, &ct2);
	free(ct2.data);
	pgp_keys_free(none);

	/* An unprotected key ignores a passphrase. */
	pgp_keys *p2 = keys_from(KEYS "plain.sec.asc", "unused");
	encrypt_buf(p2, pt, 1000, WHOLE, &ct2);
	assert_int_equal(decrypt_buf(p2, ct2.data, ct2.len, WHOLE, NULL, NULL), E_OK);
	free(ct2.data);
	pgp_keys_free(p2);
	free(ct.data);
	free(pt);
}

/*
 * Every byte flipped in turn (the first 600, then every 97th). In the encrypted data it is
 * never accepted. In the PKESK a few bits are not bound to anything (an MPI's bit count that
 * librnp reads loosely): there the result is either a failure or the very same plaintext.
 */
static void test_tampered(void **state)
{
	(void)state;
	size_t n = 20000;
	unsigned char *pt = pattern(n, 8);
	membuf ct;
	encrypt_buf(plain, pt, n, WHOLE, &ct);
	unsigned tag;
	size_t hlen, blen;
	bool partial;
	size_t pkesk_end = packet_at(ct.data, ct.len, &tag, &hlen, &blen, &partial);
	assert_int_equal(tag, 1);
	for (size_t i = 0; i < ct.len; i += i < 600 ? 1 : 97) {
		ct.data[i] ^= 0x01;
		int finishes = -1;
		membuf out = { 0 };
		err_code rc = decrypt_buf(plain, ct.data, ct.len, ODD, &out, &finishes);
		if (rc == E_OK && (i >= pkesk_end || out.len != n || memcmp(out.data, pt, n) != 0))
			fail_msg("a flipped byte at %zu of %zu was accepted", i, ct.len);
		assert_int_equal(finishes, rc == E_OK ? 1 : 0);
		free(out.data);
		ct.data[i] ^= 0x01;
	}
	/* The last byte (in the MDC) and one in the middle: the integrity check names it. */
	ct.data[ct.len / 2] ^= 0x80;
	assert_int_equal(decrypt_buf(plain, ct.data, ct.len, WHOLE, NULL, NULL), E_CORRUPT);
	expect_msg("tampered with or is corrupt");
	ct.data[ct.len / 2] ^= 0x80;
	ct.data[ct.len - 1] ^= 0x01;
	assert_int_equal(decrypt_buf(plain, ct.data, ct.len, BYTES, NULL, NULL), E_CORRUPT);
	ct.data[ct.len - 1] ^= 0x01;
	assert_int_equal(decrypt_buf(plain, ct.data, ct.len, WHOLE, NULL, NULL), E_OK);
	free(ct.data);
	free(pt);
}

/* Every cut (the first 400 bytes, then every 37th) fails, and downstream is never finished. */
static void test_truncated(void **state)
{
	(void)state;
	size_t n = 70000; /* more than one partial-length chunk */
	unsigned char *pt = pattern(n, 9);
	membuf ct;
	encrypt_buf(plain, pt, n, WHOLE, &ct);
	for (size_t cut = 0; cut < ct.len; cut += cut < 400 ? 1 : 37) {
		int finishes = -1;
		err_code rc = decrypt_buf(plain, ct.data, cut, ODD, NULL, &finishes);
		if (rc != E_CORRUPT)
			fail_msg("cut at %zu of %zu: %s", cut, ct.len, rc == E_OK ? "accepted" : err_msg());
		assert_int_equal(finishes, 0);
	}
	assert_int_equal(decrypt_buf(plain, ct.data, ct.len - 1, WHOLE, NULL, NULL), E_CORRUPT);
	expect_msg("OpenPGP: the object is truncated");
	assert_int_equal(decrypt_buf(plain, ct.data, ct.len - 100, WHOLE, NULL, NULL), E_CORRUPT);
	expect_msg("truncated");

	/* Bytes after the message: refused too, whether they come with it or later. */
	unsigned char *more = xmalloc(ct.len + 10);
	memcpy(more, ct.data, ct.len);
	memset(more + ct.len, 0xc2, 10);
	assert_int_equal(decrypt_buf(plain, more, ct.len + 1, WHOLE, NULL, NULL), E_CORRUPT);
	expect_msg("data after the end of the message");
	assert_int_equal(decrypt_buf(plain, more, ct.len + 10, BYTES, NULL, NULL), E_CORRUPT);
	free(more);
	free(ct.data);
	free(pt);
}

static void test_not_openpgp(void **state)
{
	(void)state;
	size_t len;
	unsigned char *lz4 = pattern(5000, 10);
	lz4[0] = 0x04; /* an lz4 magic: an unencrypted object */
	lz4[1] = 0x22;
	assert_int_equal(decrypt_buf(plain, lz4, 5000, WHOLE, NULL, NULL), E_CORRUPT);
	expect_msg("not an OpenPGP message");
	free(lz4);

	/* A key file is OpenPGP data, but not an encrypted message. */
	unsigned char *key = slurp(KEYS "other.pub.asc", &len);
	assert_int_equal(decrypt_buf(plain, key, len, WHOLE, NULL, NULL), E_CORRUPT);
	free(key);
}

/* A downstream failure stops the stream at once and is what the caller sees. */
static void test_downstream_error(void **state)
{
	(void)state;
	size_t n = 2u << 20;
	unsigned char *pt = pattern(n, 11);
	membuf ct;
	encrypt_buf(plain, pt, n, WHOLE, &ct);
	probe pr;
	sink *s = pgp_decrypt_new(plain, probe_new(&pr));
	pr.fail_writes = E_IO;
	err_code rc = feed(s, ct.data, ct.len, ODD);
	if (rc == E_OK)
		rc = sink_finish(s);
	assert_int_equal(rc, E_IO);
	expect_msg("probe: refusing");
	sink_free(s);
	free(pr.mb.data);

	/* Encryption too. */
	s = pgp_encrypt_new(plain, probe_new(&pr));
	pr.fail_writes = E_IO;
	rc = feed(s, pt, n, ODD);
	if (rc == E_OK)
		rc = sink_finish(s);
	assert_int_equal(rc, E_IO);
	sink_free(s);
	free(pr.mb.data);

	/* Abandoned half-way (an upstream error): freeing ends the worker. */
	s = pgp_decrypt_new(plain, probe_new(&pr));
	assert_int_equal(feed(s, ct.data, ct.len / 3, ODD), E_OK);
	sink_free(s);
	assert_true(pr.freed);
	assert_int_equal(pr.finishes, 0);
	free(pr.mb.data);
	free(ct.data);
	free(pt);
}

typedef struct par_job {
	pgp_keys *k;
	const membuf *ct;
	err_code rc;
	size_t got;
} par_job;

static void *par_decrypt(void *arg)
{
	par_job *j = arg;
	membuf out;
	for (int i = 0; i < 3; i++) {
		j->rc = decrypt_buf(j->k, j->ct->data, j->ct->len, ODD, &out, NULL);
		j->got = out.len;
		free(out.data);
		if (j->rc != E_OK)
			break;
	}
	return NULL;
}

/* Streams of one key set in parallel threads: the protected key is unlocked once, for all. */
static void test_parallel(void **state)
{
	(void)state;
	pgp_keys *k = keys_from(KEYS "other.sec.asc", "other passphrase");
	size_t n = 700000;
	unsigned char *pt = pattern(n, 12);
	membuf ct;
	encrypt_buf(k, pt, n, WHOLE, &ct);
	pthread_t th[4];
	par_job jobs[4];
	for (int i = 0; i < 4; i++) {
		jobs[i] = (par_job){ k, &ct, E_FAIL, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, par_decrypt, &jobs[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].rc, E_OK);
		assert_int_equal(jobs[i].got, n);
	}
	free(ct.data);
	free(pt);
	pgp_keys_free(k);
}

/* ------------------------------------------------------------------------------------------ */
/* Keys                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static err_code parse_text(const char *text, pgp_keys **k)
{
	return pgp_keys_parse(text, strlen(text), NULL, "WALG_PGP_KEY", k);
}

static void test_key_text(void **state)
{
	(void)state;
	pgp_keys *k = NULL;
	assert_int_equal(parse_text("", &k), E_CONFIG);
	expect_msg("WALG_PGP_KEY: not an ASCII-armored OpenPGP key");
	assert_null(k);
	assert_int_equal(parse_text("mQINBGV... just base64\n", &k), E_CONFIG);
	expect_msg("not an ASCII-armored OpenPGP key");
	assert_int_equal(parse_text("-----BEGIN PGP MESSAGE-----\n\nhQEM\n-----END PGP MESSAGE-----\n",
								&k),
					 E_CONFIG);
	expect_msg("not a PUBLIC KEY BLOCK or PRIVATE KEY BLOCK");
	assert_int_equal(parse_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAASECRETSTUFF\n"
								"-----END PGP PUBLIC KEY BLOCK-----\n",
								&k),
					 E_CONFIG);
	expect_msg("WALG_PGP_KEY: cannot read the OpenPGP key");
	assert_null(strstr(err_msg(), "SECRETSTUFF"));

	/* Binary keys are not armored: refused, as by WAL-G's ReadArmoredKeyRing. */
	size_t len;
	unsigned char *text = slurp(KEYS "plain.sec.asc", &len);
	rnp_input_t in;
	rnp_output_t out;
	uint8_t *bin;
	size_t blen;
	assert_int_equal(rnp_input_from_memory(&in, text, len, false), RNP_SUCCESS);
	assert_int_equal(rnp_output_to_memory(&out, 0), RNP_SUCCESS);
	assert_int_equal(rnp_dearmor(in, out), RNP_SUCCESS);
	assert_int_equal(rnp_output_memory_get_buf(out, &bin, &blen, false), RNP_SUCCESS);
	assert_int_equal(pgp_keys_parse((const char *)bin, blen, NULL, "WALG_PGP_KEY", &k), E_CONFIG);
	expect_msg("not an ASCII-armored OpenPGP key");
	rnp_input_destroy(in);
	rnp_output_destroy(out);

	/* Text around the block (a comment, CRLF line ends) is fine. */
	char *framed = xmalloc(len + 20);
	memcpy(framed, "my key:\r\n", 9);
	memcpy(framed + 9, text, len);
	memcpy(framed + 9 + len, "\r\n", 3);
	free(text);
	assert_int_equal(pgp_keys_parse(framed, strlen(framed), NULL, "WALG_PGP_KEY", &k), E_OK);
	assert_true(pgp_keys_have_secret(k));
	pgp_keys_free(k);
	free(framed);
}

/* Only the first armor block counts, as in WAL-G: a second key after it is not used. */
static void test_first_block_only(void **state)
{
	(void)state;
	size_t a, b;
	unsigned char *first = slurp(KEYS "plain.sec.asc", &a);
	unsigned char *second = slurp(KEYS "other.pub.asc", &b);
	char *both = xmalloc(a + b + 1);
	memcpy(both, first, a);
	memcpy(both + a, second, b);
	both[a + b] = '\0';
	pgp_keys *k = NULL;
	assert_int_equal(pgp_keys_parse(both, a + b, NULL, "WALG_PGP_KEY_PATH", &k), E_OK);
	unsigned char *pt = pattern(100, 13);
	membuf ct;
	encrypt_buf(k, pt, 100, WHOLE, &ct);
	assert_int_equal(decrypt_buf(plain, ct.data, ct.len, WHOLE, NULL, NULL), E_OK);
	assert_int_equal(decrypt_buf(other, ct.data, ct.len, WHOLE, NULL, NULL), E_CONFIG);
	free(ct.data);
	free(pt);
	pgp_keys_free(k);
	free(both);
	free(first);
	free(second);
}

/* Keys that cannot be encrypted to fail encryption at its start, not decryption. */
static void test_unusable_for_encryption(void **state)
{
	(void)state;
	static const char *const files[] = { KEYS "expired.pub.asc", KEYS "sign-only.pub.asc" };
	for (size_t i = 0; i < 2; i++) {
		pgp_keys *k = keys_from(files[i], NULL);
		probe pr;
		sink *s = pgp_encrypt_new(k, probe_new(&pr));
		assert_int_equal(sink_write(s, "abc", 3), E_CONFIG);
		expect_msg("cannot be encrypted to");
		assert_int_equal(sink_finish(s), E_CONFIG);
		assert_int_equal(pr.mb.len, 0);
		sink_free(s);
		free(pr.mb.data);
		pgp_keys_free(k);
	}
}

/* pgp_keys_load / crypter_load on the settings the environment holds, parsed by the table. */
static err_code keys_load_env(pgp_keys **out)
{
	config cfg;
	err_code rc = config_load(&cfg, false);
	if (rc == E_OK)
		rc = pgp_keys_load(&cfg.crypt, out);
	config_free(&cfg);
	return rc;
}

static void test_load_env(void **state)
{
	(void)state;
	pgp_keys *k = (pgp_keys *)&k;
	assert_int_equal(keys_load_env(&k), E_OK);
	assert_null(k);

	/* WALG_PGP_KEY on one line with \n escapes; it wins over WALG_PGP_KEY_PATH. */
	size_t len;
	unsigned char *text = slurp(KEYS "plain.sec.asc", &len);
	char *esc = xmalloc(2 * len + 1), *e = esc;
	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\n') {
			*e++ = '\\';
			*e++ = 'n';
		} else {
			*e++ = (char)text[i];
		}
	}
	*e = '\0';
	setenv("WALG_PGP_KEY", esc, 1);
	setenv("WALG_PGP_KEY_PATH", "/nonexistent/key.asc", 1);
	assert_int_equal(keys_load_env(&k), E_OK);
	assert_non_null(k);
	assert_true(pgp_keys_have_secret(k));
	pgp_keys_free(k);
	free(esc);
	free(text);

	unsetenv("WALG_PGP_KEY");
	assert_int_equal(keys_load_env(&k), E_CONFIG);
	expect_msg("WALG_PGP_KEY_PATH: cannot read /nonexistent/key.asc");

	/* The passphrase loses trailing CR and LF, as WAL-G's settings do. */
	setenv("WALG_PGP_KEY_PATH", KEYS "other.sec.asc", 1);
	setenv("WALG_PGP_KEY_PASSPHRASE", "other passphrase\r\n", 1);
	assert_int_equal(keys_load_env(&k), E_OK);
	unsigned char *pt = pattern(10, 14);
	membuf ct;
	encrypt_buf(k, pt, 10, WHOLE, &ct);
	assert_int_equal(decrypt_buf(k, ct.data, ct.len, WHOLE, NULL, NULL), E_OK);
	free(ct.data);
	free(pt);
	pgp_keys_free(k);
}

static void test_crypter(void **state)
{
	(void)state;
	crypter *c = (crypter *)&c;
	assert_int_equal(crypter_load_env(&c), E_OK);
	assert_null(c);

	setenv("WALG_PGP_KEY_PATH", FIXTURE "/keys/pgp-public.asc", 1);
	assert_int_equal(crypter_load_env(&c), E_OK);
	assert_string_equal(crypter_name(c), "OpenPGP");
	membuf ct = { 0 };
	sink *s = crypter_encrypt_new(c, membuf_sink_new(&ct));
	assert_int_equal(sink_write(s, "x", 1), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_int_equal(decrypt_buf(fx_sec, ct.data, ct.len, WHOLE, NULL, NULL), E_OK);
	free(ct.data);
	crypter_free(c);

	/* Two methods at once: refused, naming both. */
	setenv("WALG_LIBSODIUM_KEY", "0123456789abcdef0123456789abcdef", 1);
	assert_int_equal(crypter_load_env(&c), E_CONFIG);
	expect_msg("WALG_LIBSODIUM_KEY and WALG_PGP_KEY_PATH are both set");
	assert_null(strstr(err_msg(), "0123456789abcdef"));
	unsetenv("WALG_PGP_KEY_PATH");
	setenv("WALG_PGP_KEY", "-----BEGIN PGP PUBLIC KEY BLOCK-----", 1);
	assert_int_equal(crypter_load_env(&c), E_CONFIG);
	expect_msg("WALG_LIBSODIUM_KEY and WALG_PGP_KEY are both set");
	unsetenv("WALG_PGP_KEY");

	assert_int_equal(crypter_load_env(&c), E_OK);
	assert_string_equal(crypter_name(c), "libsodium");
	crypter_free(c);
}

/* The probe's view of an object: the first CRYPT_HEAD_BYTES, or all of it. */
static crypt_key_of probe_of(const crypter *c, const membuf *ct)
{
	return crypter_probe(c, ct->data, ct->len < CRYPT_HEAD_BYTES ? ct->len : CRYPT_HEAD_BYTES);
}

static err_code ring_decrypt(crypter *c, bool current, const membuf *ct)
{
	probe pr;
	sink *s = current ? crypter_decrypt_current_new(c, probe_new(&pr))
					  : crypter_decrypt_new(c, probe_new(&pr));
	return run_probe(s, &pr, ct->data, ct->len, ODD, odd_sizes,
					 sizeof(odd_sizes) / sizeof(odd_sizes[0]), NULL, NULL);
}

/*
 * An OpenPGP ring: the current key (plain) and an older one (the fixture's, protected by
 * WALG_OLD_PGP_KEY_PASSPHRASE). Objects of either decrypt, the probe tells them apart by the
 * session key packets' key ids; a third key's object is refused; a libsodium current key with
 * the older OpenPGP key reads both methods.
 */
static void test_ring(void **state)
{
	(void)state;
	setenv("WALG_PGP_KEY_PATH", KEYS "plain.sec.asc", 1);
	setenv("WALG_OLD_KEY_PATHS", FIXTURE "/keys/pgp-secret.asc", 1);
	setenv("WALG_OLD_PGP_KEY_PASSPHRASE", FIXTURE_PASS, 1);
	crypter *c = NULL;
	assert_int_equal(crypter_load_env(&c), E_OK);
	unsigned char *pt = pattern(70000, 21);
	membuf old, cur, third = { 0 };
	encrypt_buf(fx_pub, pt, 70000, WHOLE, &old);
	encrypt_buf(other, pt, 70000, WHOLE, &third);
	memset(&cur, 0, sizeof(cur));
	sink *s = crypter_encrypt_new(c, membuf_sink_new(&cur));
	assert_int_equal(feed(s, pt, 70000, ODD), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_int_equal(probe_of(c, &old), CRYPT_KEY_OLD);
	assert_int_equal(probe_of(c, &cur), CRYPT_KEY_CURRENT);
	assert_int_equal(probe_of(c, &third), CRYPT_KEY_NONE);
	assert_int_equal(ring_decrypt(c, false, &old), E_OK);
	assert_int_equal(ring_decrypt(c, false, &cur), E_OK);
	assert_int_equal(ring_decrypt(c, true, &cur), E_OK);
	assert_int_equal(ring_decrypt(c, true, &old), E_CONFIG);
	err_clear();
	assert_int_equal(ring_decrypt(c, false, &third), E_CONFIG);
	err_clear();
	uint64_t ids[4];
	assert_int_equal(pgp_recipients(old.data, old.len, ids, 4), 1);
	assert_int_equal(pgp_recipients(pt, 100, ids, 4), 0);
	crypter_free(c);

	/* libsodium current, the OpenPGP key older: both methods read */
	unsetenv("WALG_PGP_KEY_PATH");
	setenv("WALG_LIBSODIUM_KEY", "0123456789abcdef0123456789abcdef", 1);
	assert_int_equal(crypter_load_env(&c), E_OK);
	assert_string_equal(crypter_name(c), "libsodium");
	membuf sod = { 0 };
	s = crypter_encrypt_new(c, membuf_sink_new(&sod));
	assert_int_equal(feed(s, pt, 70000, WHOLE), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_int_equal(probe_of(c, &sod), CRYPT_KEY_CURRENT);
	assert_int_equal(probe_of(c, &old), CRYPT_KEY_OLD);
	assert_int_equal(ring_decrypt(c, false, &sod), E_OK);
	assert_int_equal(ring_decrypt(c, false, &old), E_OK);
	crypter_free(c);

	/* an older key must be able to decrypt: a public key is refused */
	setenv("WALG_OLD_KEY_PATHS", FIXTURE "/keys/pgp-public.asc", 1);
	assert_int_equal(crypter_load_env(&c), E_CONFIG);
	expect_msg("holds no secret key");
	free(old.data);
	free(cur.data);
	free(third.data);
	free(sod.data);
	free(pt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_streams),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_every_recipient),
		cmocka_unit_test(test_walg_object),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_passphrase),
		cmocka_unit_test(test_tampered),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_not_openpgp),
		cmocka_unit_test(test_downstream_error),
		cmocka_unit_test(test_parallel),
		cmocka_unit_test(test_key_text),
		cmocka_unit_test(test_first_block_only),
		cmocka_unit_test(test_unusable_for_encryption),
		cmocka_unit_test_setup(test_load_env, setup_env),
		cmocka_unit_test_setup(test_crypter, setup_env),
		cmocka_unit_test_setup(test_ring, setup_env),
	};
	if (crypt_init() != E_OK)
		return 1;
	return cmocka_run_group_tests(tests, setup_keys, teardown_keys);
}
