/* Unit tests for internal/crypt: WAL-G's libsodium framing, key derivation, key loading. */
#include "internal/crypt/crypt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#define CT_CHUNK (CRYPT_CHUNK + 17)
#define FIXTURE "zstd-libsodium-base64"
#define FIXTURE_WAL "repo/wal_005/000000010000000000000024.zst"

static const unsigned char key_a[CRYPT_KEY_BYTES] = {
	1,	2,	3,	4,	5,	6,	7,	8,	9,	10, 11, 12, 13, 14, 15, 16,
	17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
};
static const unsigned char key_b[CRYPT_KEY_BYTES] = { 0xff };

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Write sizes that straddle every boundary of the framing. */
static const size_t odd_sizes[] = { 1, 7, 8191, 3, 8209, 100003, 24, 8193, 17, 16 };

static err_code feed(sink *s, const unsigned char *p, size_t n, enum feed_mode mode)
{
	return feed_sizes(s, p, n, mode, odd_sizes, sizeof(odd_sizes) / sizeof(odd_sizes[0]));
}

static void encrypt_buf(const unsigned char *key, const unsigned char *pt, size_t n,
						enum feed_mode mode, membuf *ct)
{
	memset(ct, 0, sizeof(*ct));
	sink *s = crypt_encrypt_new(key, membuf_sink_new(ct));
	assert_int_equal(feed(s, pt, n, mode), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
}

/* Runs ct through a decrypt sink; returns the first error of write or finish. */
static err_code decrypt_buf(const unsigned char *key, const unsigned char *ct, size_t n,
							enum feed_mode mode, membuf *pt, int *finishes)
{
	probe pr;
	sink *s = crypt_decrypt_new(key, probe_new(&pr));
	return run_probe(s, &pr, ct, n, mode, odd_sizes, sizeof(odd_sizes) / sizeof(odd_sizes[0]), pt,
					 finishes);
}

static size_t ct_len(size_t n)
{
	return 24 + (n / CRYPT_CHUNK + 1) * 17 + n;
}

/* Checks the framing with libsodium directly: MESSAGE chunks of 8209 bytes, then one FINAL. */
static void check_framing(const unsigned char *ct, size_t len, const unsigned char *pt, size_t n)
{
	crypto_secretstream_xchacha20poly1305_state st;
	unsigned char *plain = xmalloc(CRYPT_CHUNK);
	size_t pos = 24, off = 0;

	assert_true(len >= 24);
	assert_int_equal(crypto_secretstream_xchacha20poly1305_init_pull(&st, ct, key_a), 0);
	for (;;) {
		size_t c = len - pos < CT_CHUNK ? len - pos : CT_CHUNK;
		unsigned long long mlen;
		unsigned char tag;
		assert_int_equal(crypto_secretstream_xchacha20poly1305_pull(&st, plain, &mlen, &tag,
																	ct + pos, c, NULL, 0),
						 0);
		assert_memory_equal(plain, pt + off, mlen);
		pos += c;
		off += mlen;
		if (pos == len) {
			assert_int_equal(tag, crypto_secretstream_xchacha20poly1305_TAG_FINAL);
			assert_int_equal(mlen, n % CRYPT_CHUNK);
			break;
		}
		assert_int_equal(c, CT_CHUNK);
		assert_int_equal(tag, crypto_secretstream_xchacha20poly1305_TAG_MESSAGE);
	}
	assert_int_equal(off, n);
	free(plain);
}

/* A file of the WAL-G v3.0.9 fixtures: test/fixtures/walg-v3.0.9 (run from the repository root,
 * as make does), or the directory in WALC_FIXTURES_WALG. */
static char *fixture_path(const char *rel)
{
	const char *dir = getenv("WALC_FIXTURES_WALG");
	return xasprintf("%s/%s", dir && dir[0] ? dir : "test/fixtures/walg-v3.0.9", rel);
}

static char *write_temp(const char *content, size_t len, unsigned mode)
{
	char *path = xstrdup("/tmp/walc-test-crypt-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(fd_write_all(fd, content, len, path), E_OK);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

/* ------------------------------------------------------------------------------------------ */
/* Streams                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static void test_round_trips(void **state)
{
	(void)state;
	static const size_t sizes[] = {
		0, 1, 8191, 8192, 8193, 3 * 8192, (1u << 20) + 5,
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *pt = pattern(n, (uint32_t)i);
		membuf ct, ct2, out;
		encrypt_buf(key_a, pt, n, ODD, &ct);
		assert_int_equal(ct.len, ct_len(n));
		check_framing(ct.data, ct.len, pt, n);

		/* The header is random: the same plaintext never encrypts the same way twice. */
		encrypt_buf(key_a, pt, n, WHOLE, &ct2);
		assert_int_equal(ct2.len, ct.len);
		assert_memory_not_equal(ct.data, ct2.data, 24);
		check_framing(ct2.data, ct2.len, pt, n);
		free(ct2.data);

		enum feed_mode modes[] = { WHOLE, ODD, BYTES };
		for (size_t m = 0; m < 3; m++) {
			if (modes[m] == BYTES && n > 3 * 8192)
				continue;
			int finishes;
			assert_int_equal(decrypt_buf(key_a, ct.data, ct.len, modes[m], &out, &finishes),
							 E_OK);
			check_plain(&out, finishes, pt, n);
		}
		free(ct.data);
		free(pt);
	}
}

/* Ciphertext goes to next as soon as a chunk fills, not at finish; finish reaches next once. */
static void test_encrypt_streams(void **state)
{
	(void)state;
	probe pr;
	unsigned char *pt = pattern(CRYPT_CHUNK + 5, 9);
	sink *s = crypt_encrypt_new(key_a, probe_new(&pr));
	assert_int_equal(sink_write(s, pt, 10), E_OK);
	assert_int_equal(pr.mb.len, 0);
	assert_int_equal(sink_write(s, pt + 10, CRYPT_CHUNK - 10), E_OK);
	assert_int_equal(pr.mb.len, 24 + CT_CHUNK);
	assert_int_equal(sink_write(s, pt + CRYPT_CHUNK, 5), E_OK);
	assert_int_equal(pr.mb.len, 24 + CT_CHUNK);
	assert_int_equal(pr.finishes, 0);
	assert_int_equal(sink_finish(s), E_OK);
	assert_int_equal(pr.finishes, 1);
	assert_int_equal(pr.mb.len, ct_len(CRYPT_CHUNK + 5));
	check_framing(pr.mb.data, pr.mb.len, pt, CRYPT_CHUNK + 5);
	sink_free(s);
	assert_true(pr.freed);
	free(pr.mb.data);
	free(pt);

	/* Freed unfinished: no finish downstream, chain still released. */
	s = crypt_encrypt_new(key_a, probe_new(&pr));
	assert_int_equal(sink_write(s, "abc", 3), E_OK);
	sink_free(s);
	assert_int_equal(pr.finishes, 0);
	assert_true(pr.freed);
	free(pr.mb.data);
}

static void test_truncated(void **state)
{
	(void)state;
	size_t n = 3 * 8192;
	unsigned char *pt = pattern(n, 3);
	membuf ct;
	encrypt_buf(key_a, pt, n, WHOLE, &ct);

	/* At every chunk boundary, including right after the header and before the empty FINAL. */
	for (size_t k = 0; k <= 3; k++) {
		int finishes = -1;
		assert_int_equal(decrypt_buf(key_a, ct.data, 24 + k * CT_CHUNK, ODD, NULL, &finishes),
						 E_CORRUPT);
		assert_non_null(strstr(err_msg(), "no final chunk"));
		assert_int_equal(finishes, 0);
	}
	/* Inside the header, including an empty stream. */
	static const size_t short_hdr[] = { 0, 1, 23 };
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(decrypt_buf(key_a, ct.data, short_hdr[i], WHOLE, NULL, NULL),
						 E_CORRUPT);
		assert_non_null(strstr(err_msg(), "header"));
	}
	/* Mid-chunk, including the last byte of the FINAL chunk and a stub shorter than its tag. */
	static const size_t cuts[] = { 25, 24 + 100, 24 + CT_CHUNK + 16, 24 + 2 * CT_CHUNK + 8000 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
		assert_int_equal(decrypt_buf(key_a, ct.data, cuts[i], ODD, NULL, NULL), E_CORRUPT);
	assert_int_equal(decrypt_buf(key_a, ct.data, ct.len - 1, WHOLE, NULL, NULL), E_CORRUPT);
	free(ct.data);
	free(pt);

	/* The same for a short FINAL chunk. */
	encrypt_buf(key_a, pt = pattern(100, 4), 100, WHOLE, &ct);
	assert_int_equal(decrypt_buf(key_a, ct.data, ct.len - 1, WHOLE, NULL, NULL), E_CORRUPT);
	assert_int_equal(decrypt_buf(key_a, ct.data, 24, WHOLE, NULL, NULL), E_CORRUPT);
	free(ct.data);
	free(pt);
}

static void test_flipped_byte(void **state)
{
	(void)state;
	size_t n = 3 * 8192 + 100;
	unsigned char *pt = pattern(n, 5);
	membuf ct;
	encrypt_buf(key_a, pt, n, WHOLE, &ct);
	size_t where[] = { 0, 11, 23, 24, 24 + CT_CHUNK - 1, ct.len / 2, ct.len - 17, ct.len - 1 };
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		for (unsigned bit = 0; bit < 8; bit += 7) {
			ct.data[where[i]] ^= (unsigned char)(1u << bit);
			err_code rc = decrypt_buf(key_a, ct.data, ct.len, ODD, NULL, NULL);
			ct.data[where[i]] ^= (unsigned char)(1u << bit);
			assert_int_equal(rc, E_CORRUPT);
		}
	}
	assert_int_equal(decrypt_buf(key_a, ct.data, ct.len, ODD, NULL, NULL), E_OK);
	free(ct.data);
	free(pt);
}

static void test_wrong_key(void **state)
{
	(void)state;
	unsigned char *pt = pattern(5000, 6);
	membuf ct;
	encrypt_buf(key_a, pt, 5000, WHOLE, &ct);
	int finishes = -1;
	assert_int_equal(decrypt_buf(key_b, ct.data, ct.len, WHOLE, NULL, &finishes), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "wrong key or tampered data"));
	assert_int_equal(finishes, 0);
	free(ct.data);
	free(pt);
}

static void test_data_after_final(void **state)
{
	(void)state;
	static const size_t sizes[] = { 0, 100, 2 * 8192 };
	for (size_t i = 0; i < 3; i++) {
		size_t n = sizes[i];
		unsigned char *pt = pattern(n, 7);
		membuf ct, other;
		encrypt_buf(key_a, pt, n, WHOLE, &ct);
		encrypt_buf(key_a, pt, n, WHOLE, &other);
		/* One stray byte, and a whole second stream (valid chunks of its own). */
		unsigned char *cat = xmalloc(ct.len + other.len);
		memcpy(cat, ct.data, ct.len);
		memcpy(cat + ct.len, other.data, other.len);
		assert_int_equal(decrypt_buf(key_a, cat, ct.len + 1, ODD, NULL, NULL), E_CORRUPT);
		assert_int_equal(decrypt_buf(key_a, cat, ct.len + other.len, WHOLE, NULL, NULL),
						 E_CORRUPT);
		assert_int_equal(decrypt_buf(key_a, cat, ct.len + other.len, BYTES, NULL, NULL),
						 E_CORRUPT);
		free(cat);
		free(other.data);
		free(ct.data);
		free(pt);
	}
}

/* A stream whose chunks are framed by hand with libsodium, tags chosen by the test. */
static membuf handmade(const unsigned char *tags, const size_t *lens, size_t count)
{
	crypto_secretstream_xchacha20poly1305_state st;
	membuf mb = { 0 };
	sink *s = membuf_sink_new(&mb);
	unsigned char hdr[24], out[CT_CHUNK], *pt = pattern(CRYPT_CHUNK, 8);
	crypto_secretstream_xchacha20poly1305_init_push(&st, hdr, key_a);
	assert_int_equal(sink_write(s, hdr, 24), E_OK);
	for (size_t i = 0; i < count; i++) {
		unsigned long long clen;
		crypto_secretstream_xchacha20poly1305_push(&st, out, &clen, pt, lens[i], NULL, 0,
												   tags[i]);
		assert_int_equal(sink_write(s, out, (size_t)clen), E_OK);
	}
	sink_free(s);
	free(pt);
	return mb;
}

static void test_handmade_framing(void **state)
{
	(void)state;
	const unsigned char M = crypto_secretstream_xchacha20poly1305_TAG_MESSAGE;
	const unsigned char F = crypto_secretstream_xchacha20poly1305_TAG_FINAL;
	membuf mb, out;

	/* A short last chunk without FINAL: truncated as far as we can tell. */
	mb = handmade((const unsigned char[]){ M, M }, (const size_t[]){ CRYPT_CHUNK, 10 }, 2);
	assert_int_equal(decrypt_buf(key_a, mb.data, mb.len, ODD, NULL, NULL), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "no final chunk"));
	free(mb.data);

	/* A full-size FINAL at the very end authenticates as the end: accepted. */
	mb = handmade((const unsigned char[]){ M, F }, (const size_t[]){ CRYPT_CHUNK, CRYPT_CHUNK },
				  2);
	assert_int_equal(decrypt_buf(key_a, mb.data, mb.len, BYTES, &out, NULL), E_OK);
	assert_int_equal(out.len, 2 * CRYPT_CHUNK);
	free(out.data);
	free(mb.data);

	/* A full-size FINAL followed by another chunk. */
	mb = handmade((const unsigned char[]){ F, F }, (const size_t[]){ CRYPT_CHUNK, 0 }, 2);
	assert_int_equal(decrypt_buf(key_a, mb.data, mb.len, WHOLE, NULL, NULL), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "after the final chunk"));
	free(mb.data);
}

/* After an error the sink refuses everything, even bytes that would otherwise be fine. */
static void test_error_is_sticky(void **state)
{
	(void)state;
	membuf ct;
	unsigned char *pt = pattern(10, 9);
	encrypt_buf(key_a, pt, 10, WHOLE, &ct);
	probe pr;
	sink *s = crypt_decrypt_new(key_b, probe_new(&pr));
	assert_int_equal(sink_write(s, ct.data, ct.len), E_OK); /* FINAL chunk waits for finish */
	assert_int_equal(sink_finish(s), E_CORRUPT);
	sink_free(s);
	free(pr.mb.data);

	unsigned char *big = pattern(CRYPT_CHUNK, 10);
	free(ct.data);
	encrypt_buf(key_a, big, CRYPT_CHUNK, WHOLE, &ct);
	s = crypt_decrypt_new(key_b, probe_new(&pr));
	assert_int_equal(sink_write(s, ct.data, 24 + CT_CHUNK), E_CORRUPT);
	assert_int_equal(sink_write(s, ct.data + 24 + CT_CHUNK, 17), E_CORRUPT);
	assert_int_equal(sink_finish(s), E_CORRUPT);
	assert_int_equal(pr.finishes, 0);
	assert_int_equal(pr.mb.len, 0);
	sink_free(s);
	free(pr.mb.data);
	free(ct.data);
	free(big);
	free(pt);
}

/* ------------------------------------------------------------------------------------------ */
/* Key derivation                                                                             */
/* ------------------------------------------------------------------------------------------ */

static const char hex_a[] = "0102030405060708090a0b0c0d0e0f10"
							"1112131415161718191A1B1C1D1E1F20";

static void expect_config_error(const char *material, size_t len, const char *transform,
								const char *want)
{
	unsigned char key[CRYPT_KEY_BYTES];
	memset(key, 0x55, sizeof(key));
	assert_int_equal(crypt_key_derive(material, len, transform, key, "VAR"), E_CONFIG);
	const char *msg = err_msg();
	if (strstr(msg, want) == NULL)
		fail_msg("message \"%s\" lacks \"%s\"", msg, want);
	assert_true(str_has_prefix(msg, transform && strcmp(transform, "rot13") == 0
										? "WALG_LIBSODIUM_KEY_TRANSFORM: "
										: "VAR: "));
	/* The material itself must never be echoed. */
	if (len >= 8) {
		char head[9];
		memcpy(head, material, 8);
		head[8] = '\0';
		assert_null(strstr(msg, head));
	}
	static const unsigned char zero[CRYPT_KEY_BYTES];
	assert_memory_equal(key, zero, sizeof(key)); /* wiped on failure */
}

static void test_derive_hex(void **state)
{
	(void)state;
	unsigned char key[CRYPT_KEY_BYTES];
	assert_int_equal(crypt_key_derive(hex_a, 64, "hex", key, "VAR"), E_OK);
	assert_memory_equal(key, key_a, sizeof(key));

	expect_config_error(hex_a, 62, "hex", "hex key must decode to 32 bytes, got 31");
	char longer[67];
	memcpy(longer, hex_a, 64);
	memcpy(longer + 64, "ab", 3);
	expect_config_error(longer, 66, "hex", "hex key must decode to 32 bytes, got 33");
	expect_config_error("", 0, "hex", "got 0");
	expect_config_error(hex_a, 63, "hex", "not valid hex");
	char bad[65];
	memcpy(bad, hex_a, 65);
	bad[40] = 'g';
	expect_config_error(bad, 64, "hex", "not valid hex");
	/* A trailing newline (inline key pasted from a file) is not hex, as in WAL-G. */
	char nl[66];
	memcpy(nl, hex_a, 64);
	memcpy(nl + 64, "\n", 2);
	expect_config_error(nl, 65, "hex", "not valid hex");
}

static void test_derive_base64(void **state)
{
	(void)state;
	unsigned char key[CRYPT_KEY_BYTES];
	char b64[sodium_base64_ENCODED_LEN(CRYPT_KEY_BYTES, sodium_base64_VARIANT_ORIGINAL) + 1];
	sodium_bin2base64(b64, sizeof(b64), key_a, sizeof(key_a), sodium_base64_VARIANT_ORIGINAL);
	assert_int_equal(strlen(b64), 44);
	assert_int_equal(crypt_key_derive(b64, 44, "base64", key, "VAR"), E_OK);
	assert_memory_equal(key, key_a, sizeof(key));

	/* Go's decoder skips CR and LF, so WAL-G accepts them; so do we. */
	char nl[48];
	memcpy(nl, b64, 44);
	memcpy(nl + 44, "\r\n", 3);
	memset(key, 0, sizeof(key));
	assert_int_equal(crypt_key_derive(nl, 46, "base64", key, "VAR"), E_OK);
	assert_memory_equal(key, key_a, sizeof(key));

	char b31[64];
	sodium_bin2base64(b31, sizeof(b31), key_a, 31, sodium_base64_VARIANT_ORIGINAL);
	expect_config_error(b31, strlen(b31), "base64", "base64 key must decode to 32 bytes, got 31");
	char b33[64];
	unsigned char k33[33] = { 7 };
	sodium_bin2base64(b33, sizeof(b33), k33, 33, sodium_base64_VARIANT_ORIGINAL);
	expect_config_error(b33, strlen(b33), "base64", "got 33");
	expect_config_error(b64, 43, "base64", "not valid base64"); /* padding missing */
	char bad[45];
	memcpy(bad, b64, 45);
	bad[10] = '*';
	expect_config_error(bad, 44, "base64", "not valid base64");
}

static void test_derive_none(void **state)
{
	(void)state;
	static const char material[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCD"; /* 40 bytes */
	unsigned char key[CRYPT_KEY_BYTES], want[CRYPT_KEY_BYTES];

	expect_config_error(material, 24, "none", "key is 24 bytes, at least 25 required");
	expect_config_error(material, 24, NULL, "at least 25 required");
	expect_config_error(material, 0, "", "key is 0 bytes");

	static const size_t ok[] = { 25, 31, 32, 40 };
	for (size_t i = 0; i < 4; i++) {
		size_t n = ok[i];
		memset(want, 0, sizeof(want));
		memcpy(want, material, n < 32 ? n : 32);
		memset(key, 0xaa, sizeof(key));
		assert_int_equal(crypt_key_derive(material, n, i % 2 ? "" : "none", key, "VAR"), E_OK);
		assert_memory_equal(key, want, sizeof(key));
	}
}

typedef struct derive_call {
	const char *material;
	size_t len;
	err_code rc;
} derive_call;

static void run_derive(void *arg)
{
	derive_call *c = arg;
	unsigned char key[CRYPT_KEY_BYTES];
	c->rc = crypt_key_derive(c->material, c->len, "none", key, "VAR");
}

/* Padding and truncation are warned about, without the key. */
static void test_derive_none_warnings(void **state)
{
	(void)state;
	static const char material[] = "SECRETSECRETSECRETSECRETSECRETSECRETSECRET";
	derive_call c = { material, 25, E_FAIL };
	char *log = capture_stderr(run_derive, &c);
	assert_int_equal(c.rc, E_OK);
	assert_non_null(strstr(log, "WARNING: "));
	assert_non_null(strstr(log, "VAR: key of 25 bytes is right-padded with zero bytes to 32"));
	assert_null(strstr(log, "SECRET"));
	free(log);

	c.len = 40;
	log = capture_stderr(run_derive, &c);
	assert_int_equal(c.rc, E_OK);
	assert_non_null(strstr(log, "VAR: key longer than 32 bytes is truncated to 32"));
	assert_null(strstr(log, "SECRET"));
	free(log);

	c.len = 32;
	log = capture_stderr(run_derive, &c);
	assert_int_equal(c.rc, E_OK);
	assert_string_equal(log, "");
	free(log);
}

static void test_derive_unknown_transform(void **state)
{
	(void)state;
	expect_config_error(hex_a, 64, "rot13", "");
	assert_string_equal(err_msg(), "WALG_LIBSODIUM_KEY_TRANSFORM: unknown transform \"rot13\", "
								   "expected none, hex or base64");
	unsigned char key[CRYPT_KEY_BYTES];
	assert_int_equal(crypt_key_derive(hex_a, 64, "HEX", key, "VAR"), E_CONFIG);
}

/* ------------------------------------------------------------------------------------------ */
/* Key loading from the environment                                                           */
/* ------------------------------------------------------------------------------------------ */

/* crypt_key_load on the settings the environment holds, parsed by the table as main does. */
static err_code load_env(unsigned char key[CRYPT_KEY_BYTES], bool *have)
{
	config cfg;
	*have = false;
	err_code rc = config_load(&cfg, false);
	if (rc == E_OK)
		rc = crypt_key_load(&cfg.crypt, key, have);
	config_free(&cfg);
	return rc;
}

static void test_load_none_set(void **state)
{
	(void)state;
	unsigned char key[CRYPT_KEY_BYTES];
	bool have = true;
	assert_int_equal(load_env(key, &have), E_OK);
	assert_false(have);

	setenv("WALG_LIBSODIUM_KEY", "", 1);
	setenv("WALG_LIBSODIUM_KEY_PATH", "", 1);
	have = true;
	assert_int_equal(load_env(key, &have), E_OK);
	assert_false(have);
}

static void test_load_key_wins(void **state)
{
	(void)state;
	unsigned char key[CRYPT_KEY_BYTES];
	bool have = false;
	char *path = write_temp("00000000000000000000000000000000"
							"00000000000000000000000000000000\n",
							65, 0600);
	setenv("WALG_LIBSODIUM_KEY", hex_a, 1);
	setenv("WALG_LIBSODIUM_KEY_PATH", path, 1);
	setenv("WALG_LIBSODIUM_KEY_TRANSFORM", "hex", 1);
	assert_int_equal(load_env(key, &have), E_OK);
	assert_true(have);
	assert_memory_equal(key, key_a, sizeof(key));

	/* KEY is used as given: a trailing newline breaks hex, and the error names KEY. */
	char *nl = xasprintf("%s\n", hex_a);
	setenv("WALG_LIBSODIUM_KEY", nl, 1);
	assert_int_equal(load_env(key, &have), E_CONFIG);
	assert_false(have);
	assert_true(str_has_prefix(err_msg(), "WALG_LIBSODIUM_KEY: not valid hex"));
	free(nl);

	/* An empty KEY falls back to the file. */
	setenv("WALG_LIBSODIUM_KEY", "", 1);
	assert_int_equal(load_env(key, &have), E_OK);
	assert_true(have);
	static const unsigned char zero[CRYPT_KEY_BYTES];
	assert_memory_equal(key, zero, sizeof(key));
	unlink(path);
	free(path);
}

static void test_load_path_trims(void **state)
{
	(void)state;
	unsigned char key[CRYPT_KEY_BYTES];
	bool have = false;
	char b64[sodium_base64_ENCODED_LEN(CRYPT_KEY_BYTES, sodium_base64_VARIANT_ORIGINAL) + 1];
	sodium_bin2base64(b64, sizeof(b64), key_a, sizeof(key_a), sodium_base64_VARIANT_ORIGINAL);
	char *content = xasprintf(" \t\r\n%s\r\n\n ", b64);
	char *path = write_temp(content, strlen(content), 0600);
	setenv("WALG_LIBSODIUM_KEY_PATH", path, 1);
	setenv("WALG_LIBSODIUM_KEY_TRANSFORM", "base64", 1);
	assert_int_equal(load_env(key, &have), E_OK);
	assert_true(have);
	assert_memory_equal(key, key_a, sizeof(key));
	unlink(path);
	free(path);
	free(content);

	/* Hex needs the trim (it does not skip newlines); none would count them as key bytes. */
	content = xasprintf("%s\n", hex_a);
	path = write_temp(content, strlen(content), 0400);
	setenv("WALG_LIBSODIUM_KEY_PATH", path, 1);
	setenv("WALG_LIBSODIUM_KEY_TRANSFORM", "hex", 1);
	memset(key, 0, sizeof(key));
	assert_int_equal(load_env(key, &have), E_OK);
	assert_memory_equal(key, key_a, sizeof(key));
	unlink(path);
	free(path);
	free(content);

	path = write_temp("\n  abcdefghijklmnopqrstuvwxy  \n", 31, 0600); /* 25 bytes inside */
	setenv("WALG_LIBSODIUM_KEY_PATH", path, 1);
	unsetenv("WALG_LIBSODIUM_KEY_TRANSFORM");
	assert_int_equal(load_env(key, &have), E_OK);
	unsigned char want[CRYPT_KEY_BYTES] = { 0 };
	memcpy(want, "abcdefghijklmnopqrstuvwxy", 25);
	assert_memory_equal(key, want, sizeof(key));

	/* A transform error from a file names the path variable. */
	setenv("WALG_LIBSODIUM_KEY_TRANSFORM", "hex", 1);
	assert_int_equal(load_env(key, &have), E_CONFIG);
	assert_false(have);
	assert_true(str_has_prefix(err_msg(), "WALG_LIBSODIUM_KEY_PATH: "));
	unlink(path);
	free(path);
}

static void test_load_missing_file(void **state)
{
	(void)state;
	unsigned char key[CRYPT_KEY_BYTES];
	bool have = true;
	setenv("WALG_LIBSODIUM_KEY_PATH", "/nonexistent/walc/key", 1);
	assert_int_equal(load_env(key, &have), E_CONFIG);
	assert_false(have);
	assert_string_equal(err_msg(), "WALG_LIBSODIUM_KEY_PATH: cannot read /nonexistent/walc/key: "
								   "No such file or directory");

	/* A directory opens but does not read. */
	setenv("WALG_LIBSODIUM_KEY_PATH", "/tmp", 1);
	assert_int_equal(load_env(key, &have), E_CONFIG);
	assert_true(str_has_prefix(err_msg(), "WALG_LIBSODIUM_KEY_PATH: cannot read /tmp: "));
}

static void test_load_unknown_transform(void **state)
{
	(void)state;
	unsigned char key[CRYPT_KEY_BYTES];
	bool have = true;
	setenv("WALG_LIBSODIUM_KEY", hex_a, 1);
	setenv("WALG_LIBSODIUM_KEY_TRANSFORM", "b64", 1);
	assert_int_equal(load_env(key, &have), E_CONFIG);
	assert_false(have);
	assert_string_equal(err_msg(), "WALG_LIBSODIUM_KEY_TRANSFORM: expected one of none,hex,base64, "
								   "got \"b64\"");
}

static void run_load(void *arg)
{
	unsigned char key[CRYPT_KEY_BYTES];
	bool have;
	*(err_code *)arg = load_env(key, &have);
}

static void test_load_permissions_warning(void **state)
{
	(void)state;
	char *path = write_temp(hex_a, 64, 0644);
	setenv("WALG_LIBSODIUM_KEY_PATH", path, 1);
	setenv("WALG_LIBSODIUM_KEY_TRANSFORM", "hex", 1);
	err_code rc = E_FAIL;
	char *log = capture_stderr(run_load, &rc);
	assert_int_equal(rc, E_OK);
	char *want = xasprintf("WALG_LIBSODIUM_KEY_PATH: %s is readable by others", path);
	assert_non_null(strstr(log, want));
	assert_null(strstr(log, "0102030405"));
	free(want);
	free(log);

	/* a group may read it (a Kubernetes Secret for the pod's fsGroup): no warning */
	assert_int_equal(chmod(path, 0640), 0);
	rc = E_FAIL;
	log = capture_stderr(run_load, &rc);
	assert_int_equal(rc, E_OK);
	assert_string_equal(log, "");
	free(log);

	assert_int_equal(chmod(path, 0600), 0);
	rc = E_FAIL;
	log = capture_stderr(run_load, &rc);
	assert_int_equal(rc, E_OK);
	assert_string_equal(log, "");
	free(log);
	unlink(path);
	free(path);
}

/* ------------------------------------------------------------------------------------------ */
/* Interoperability with WAL-G v3.0.9 output                                                  */
/* ------------------------------------------------------------------------------------------ */

static void load_fixture_key(const char *file, const char *transform, unsigned char *key)
{
	char *path = fixture_path(FIXTURE "/");
	char *kpath = xasprintf("%s%s", path, file);
	if (access(kpath, R_OK) != 0)
		fail_msg("fixture key %s missing (WALC_FIXTURES_WALG)", kpath);
	setenv("WALG_LIBSODIUM_KEY_PATH", kpath, 1);
	setenv("WALG_LIBSODIUM_KEY_TRANSFORM", transform, 1);
	bool have = false;
	if (load_env(key, &have) != E_OK)
		fail_msg("loading %s: %s", kpath, err_msg());
	assert_true(have);
	free(kpath);
	free(path);
}

static void test_walg_fixture(void **state)
{
	(void)state;
	unsigned char kb64[CRYPT_KEY_BYTES], khex[CRYPT_KEY_BYTES];
	load_fixture_key("libsodium-base64.key", "base64", kb64);
	load_fixture_key("libsodium-hex.key", "hex", khex);
	assert_memory_equal(kb64, khex, CRYPT_KEY_BYTES);

	char *path = fixture_path(FIXTURE "/" FIXTURE_WAL);
	size_t len = 0;
	unsigned char *ct = read_all(path, &len);
	if (ct == NULL)
		fail_msg("fixture %s missing (WALC_FIXTURES_WALG)", path);
	assert_true(len > 24 + 17);

	const unsigned char *keys[] = { kb64, khex };
	for (size_t i = 0; i < 2; i++) {
		enum feed_mode modes[] = { WHOLE, ODD, BYTES };
		for (size_t m = 0; m < 3; m++) {
			membuf out;
			err_code rc = decrypt_buf(keys[i], ct, len, modes[m], &out, NULL);
			if (rc != E_OK)
				fail_msg("decrypting %s: %s", path, err_msg());
			assert_int_equal(out.len, len - 24 - (out.len / CRYPT_CHUNK + 1) * 17);
			assert_true(out.len >= 4);
			assert_memory_equal(out.data, "\x28\xb5\x2f\xfd", 4);
			free(out.data);
		}
	}
	size_t where[] = { 0, 24, len / 2, len - 1 };
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		ct[where[i]] ^= 0x01;
		assert_int_equal(decrypt_buf(kb64, ct, len, WHOLE, NULL, NULL), E_CORRUPT);
		ct[where[i]] ^= 0x01;
	}
	free(ct);
	free(path);
}

/* ------------------------------------------------------------------------------------------ */
/* The key ring (WALG_OLD_KEY_PATHS)                                                          */
/* ------------------------------------------------------------------------------------------ */

static char *hex_file(const unsigned char *key)
{
	char hex[2 * CRYPT_KEY_BYTES + 2];
	sodium_bin2hex(hex, sizeof(hex), key, CRYPT_KEY_BYTES);
	strcat(hex, "\n");
	return write_temp(hex, strlen(hex), 0600);
}

/* Runs ct through c's ring decryptor (or current-key decryptor), fed in odd pieces. */
static err_code ring_decrypt(crypter *c, bool current, const unsigned char *ct, size_t n,
							 membuf *pt)
{
	probe pr;
	sink *s = current ? crypter_decrypt_current_new(c, probe_new(&pr))
					  : crypter_decrypt_new(c, probe_new(&pr));
	return run_probe(s, &pr, ct, n, ODD, odd_sizes, sizeof(odd_sizes) / sizeof(odd_sizes[0]), pt,
					 NULL);
}

/*
 * B current, A older: objects of A and of B both decrypt, whatever their size (none, inside
 * the first chunk, exactly one, more); the probe tells which key they are of; a third key's
 * object and a tampered one of A are refused; writes use B.
 */
static void test_ring(void **state)
{
	(void)state;
	unsigned char key_c[CRYPT_KEY_BYTES];
	randombytes_buf(key_c, sizeof(key_c));
	char *a = hex_file(key_a), *b = hex_file(key_b);
	char *old = xasprintf("hex:%s", a);
	setenv("WALG_LIBSODIUM_KEY_PATH", b, 1);
	setenv("WALG_LIBSODIUM_KEY_TRANSFORM", "hex", 1);
	setenv("WALG_OLD_KEY_PATHS", old, 1);
	crypter *c = NULL;
	assert_int_equal(crypter_load_env(&c), E_OK);
	assert_true(crypter_has_ring(c));
	static const size_t sizes[] = { 0, 100, CRYPT_CHUNK, CRYPT_CHUNK + 1, 100003 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *pt = pattern(n, (uint32_t)i);
		membuf ct, out;
		encrypt_buf(key_a, pt, n, WHOLE, &ct);
		assert_int_equal(crypter_probe(c, ct.data, ct.len < CRYPT_HEAD_BYTES ? ct.len : CRYPT_HEAD_BYTES),
						 CRYPT_KEY_OLD);
		assert_int_equal(ring_decrypt(c, false, ct.data, ct.len, &out), E_OK);
		assert_int_equal(out.len, n);
		assert_memory_equal(out.data, pt, n);
		free(out.data);
		assert_int_equal(ring_decrypt(c, true, ct.data, ct.len, NULL), E_CORRUPT);
		err_clear();
		ct.data[ct.len - 1] ^= 1; /* the last chunk: the ring does not hide tampering */
		assert_int_equal(ring_decrypt(c, false, ct.data, ct.len, NULL), E_CORRUPT);
		err_clear();
		free(ct.data);

		memset(&ct, 0, sizeof(ct));
		sink *s = crypter_encrypt_new(c, membuf_sink_new(&ct));
		assert_int_equal(feed(s, pt, n, ODD), E_OK);
		assert_int_equal(sink_finish(s), E_OK);
		sink_free(s);
		assert_int_equal(crypter_probe(c, ct.data, ct.len < CRYPT_HEAD_BYTES ? ct.len : CRYPT_HEAD_BYTES),
						 CRYPT_KEY_CURRENT);
		assert_int_equal(decrypt_buf(key_b, ct.data, ct.len, WHOLE, NULL, NULL), E_OK);
		assert_int_equal(ring_decrypt(c, true, ct.data, ct.len, NULL), E_OK);
		free(ct.data);

		encrypt_buf(key_c, pt, n, WHOLE, &ct);
		assert_int_equal(crypter_probe(c, ct.data, ct.len < CRYPT_HEAD_BYTES ? ct.len : CRYPT_HEAD_BYTES),
						 CRYPT_KEY_NONE);
		assert_int_equal(ring_decrypt(c, false, ct.data, ct.len, NULL), E_CORRUPT);
		assert_non_null(strstr(err_msg(), "no key of the ring"));
		err_clear();
		free(ct.data);
		free(pt);
	}
	crypter_free(c);

	/* older keys need a current key; entries must name readable files */
	unsetenv("WALG_LIBSODIUM_KEY_PATH");
	assert_int_equal(crypter_load_env(&c), E_CONFIG);
	assert_non_null(strstr(err_msg(), "no current key"));
	setenv("WALG_LIBSODIUM_KEY_PATH", b, 1);
	char *bad = xasprintf("%s,,%s", a, a);
	setenv("WALG_OLD_KEY_PATHS", bad, 1);
	assert_int_equal(crypter_load_env(&c), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALG_OLD_KEY_PATHS: an empty entry"));
	setenv("WALG_OLD_KEY_PATHS", "/nonexistent/key", 1);
	assert_int_equal(crypter_load_env(&c), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALG_OLD_KEY_PATHS: cannot read /nonexistent/key"));
	setenv("WALG_OLD_KEY_PATHS", old + 4, 1); /* hex text read as base64: not 32 bytes */
	setenv("WALG_LIBSODIUM_KEY_TRANSFORM", "base64", 1);
	setenv("WALG_LIBSODIUM_KEY", "", 1);
	unsetenv("WALG_LIBSODIUM_KEY_PATH");
	setenv("WALG_LIBSODIUM_KEY", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", 1);
	assert_int_equal(crypter_load_env(&c), E_CONFIG);
	assert_non_null(strstr(err_msg(), a));
	err_clear();
	unlink(a);
	unlink(b);
	free(a);
	free(b);
	free(old);
	free(bad);
}

/* The fuzz seeds are fixed key (32 bytes) + a valid stream: keep them that way. */
static void test_fuzz_corpus_valid(void **state)
{
	(void)state;
	const char *dir = "test/fuzz/corpus/fuzz_secretstream";
	DIR *d = opendir(dir);
	if (d == NULL)
		fail_msg("%s: %s", dir, strerror(errno));
	int seen = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char *path = xasprintf("%s/%s", dir, e->d_name);
		size_t len = 0;
		unsigned char *data = read_all(path, &len);
		assert_non_null(data);
		assert_true(len >= CRYPT_KEY_BYTES + 24 + 17);
		if (decrypt_buf(data, data + CRYPT_KEY_BYTES, len - CRYPT_KEY_BYTES, ODD, NULL, NULL) !=
			E_OK)
			fail_msg("%s: %s", path, err_msg());
		seen++;
		free(data);
		free(path);
	}
	closedir(d);
	assert_true(seen >= 3);
}

int main(void)
{
	if (crypt_init() != E_OK)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_encrypt_streams),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_flipped_byte),
		cmocka_unit_test(test_wrong_key),
		cmocka_unit_test(test_data_after_final),
		cmocka_unit_test(test_handmade_framing),
		cmocka_unit_test(test_error_is_sticky),
		cmocka_unit_test(test_derive_hex),
		cmocka_unit_test(test_derive_base64),
		cmocka_unit_test(test_derive_none),
		cmocka_unit_test(test_derive_none_warnings),
		cmocka_unit_test(test_derive_unknown_transform),
		cmocka_unit_test_setup(test_load_none_set, setup_env),
		cmocka_unit_test_setup(test_load_key_wins, setup_env),
		cmocka_unit_test_setup(test_load_path_trims, setup_env),
		cmocka_unit_test_setup(test_load_missing_file, setup_env),
		cmocka_unit_test_setup(test_load_unknown_transform, setup_env),
		cmocka_unit_test_setup(test_load_permissions_warning, setup_env),
		cmocka_unit_test_setup(test_walg_fixture, setup_env),
		cmocka_unit_test(test_fuzz_corpus_valid),
		cmocka_unit_test_setup(test_ring, setup_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
