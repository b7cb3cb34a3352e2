/*
 * The one encryption method a configuration names. WAL-G takes the first it finds (OpenPGP
 * before libsodium, reference §2.3); walc refuses two, since the one ignored was meant too.
 */
#include "internal/crypt/crypt.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

typedef enum crypt_kind { KIND_SODIUM, KIND_PGP } crypt_kind;

struct crypter {
	crypt_kind kind;
	unsigned char key[CRYPT_KEY_BYTES];
	pgp_keys *pgp;
};

/* a's name when va is set, else b's when vb is, else NULL. */
static const char *set_var(const char *a, const char *va, const char *b, const char *vb)
{
	if (va != NULL && va[0] != '\0')
		return a;
	if (vb != NULL && vb[0] != '\0')
		return b;
	return NULL;
}

err_code crypter_load(const config *cfg, crypter **out)
{
	*out = NULL;
	const char *sodium = set_var("WALG_LIBSODIUM_KEY", cfg->libsodium_key,
								 "WALG_LIBSODIUM_KEY_PATH", cfg->libsodium_key_path);
	const char *pgp = set_var("WALG_PGP_KEY", cfg->pgp_key, "WALG_PGP_KEY_PATH", cfg->pgp_key_path);
	if (sodium != NULL && pgp != NULL)
		return err_set(E_CONFIG,
					   "%s and %s are both set: walc encrypts with one method, unset one (WAL-G "
					   "would use OpenPGP and ignore %s)",
					   sodium, pgp, sodium);
	crypter *c = xcalloc(1, sizeof(*c));
	err_code rc;
	if (pgp != NULL) {
		c->kind = KIND_PGP;
		rc = pgp_keys_load(cfg, &c->pgp);
	} else {
		bool have = false;
		c->kind = KIND_SODIUM;
		rc = crypt_key_load(cfg, c->key, &have);
		if (rc == E_OK && !have) {
			/* Nothing configured: the passphrase alone is warned about by pgp_keys_load. */
			pgp_keys *none = NULL;
			rc = pgp_keys_load(cfg, &none);
			pgp_keys_free(none);
			crypter_free(c);
			return rc;
		}
	}
	if (rc != E_OK) {
		crypter_free(c);
		return rc;
	}
	*out = c;
	return E_OK;
}

void crypter_free(crypter *c)
{
	if (c == NULL)
		return;
	pgp_keys_free(c->pgp);
	sodium_memzero(c, sizeof(*c));
	free(c);
}

const char *crypter_name(const crypter *c)
{
	return c->kind == KIND_PGP ? "OpenPGP" : "libsodium";
}

sink *crypter_encrypt_new(const crypter *c, sink *next)
{
	return c->kind == KIND_PGP ? pgp_encrypt_new(c->pgp, next) : crypt_encrypt_new(c->key, next);
}

sink *crypter_decrypt_new(crypter *c, sink *next)
{
	return c->kind == KIND_PGP ? pgp_decrypt_new(c->pgp, next) : crypt_decrypt_new(c->key, next);
}

const char *crypter_vars(const char *method)
{
	return strcmp(method, "OpenPGP") == 0 ? "WALG_PGP_KEY or WALG_PGP_KEY_PATH"
										   : "WALG_LIBSODIUM_KEY or WALG_LIBSODIUM_KEY_PATH";
}

/*
 * An OpenPGP message's first packet as WAL-G's crypter (go-crypto) or gpg writes one: a
 * public-key encrypted session key (tag 1, version 3 or 6) or a symmetric one (tag 3, version
 * 4 to 6), in the old or new packet format; or ASCII armor.
 */
static bool pgp_start(const unsigned char *b, size_t n)
{
	static const char armor[] = "-----BEGIN PGP MESSAGE-----";
	if (n >= sizeof(armor) - 1 && memcmp(b, armor, sizeof(armor) - 1) == 0)
		return true;
	if (n < 4 || !(b[0] & 0x80))
		return false;
	unsigned tag;
	size_t at; /* the packet's first body byte */
	if (b[0] & 0x40) {
		tag = b[0] & 0x3f;
		at = b[1] < 192 ? 2 : b[1] < 224 ? 3 : b[1] == 255 ? 6 : 0;
	} else {
		tag = (b[0] >> 2) & 0x0f;
		static const size_t len_bytes[4] = { 1, 2, 4, 0 };
		at = len_bytes[b[0] & 3] ? 1 + len_bytes[b[0] & 3] : 0;
	}
	if (at == 0 || at >= n)
		return false;
	unsigned version = b[at];
	return (tag == 1 && (version == 3 || version == 6)) ||
		(tag == 3 && version >= 4 && version <= 6);
}

/*
 * Uniform bytes: a chi-square statistic over the byte values of at most 4 KiB within six
 * standard deviations of its mean (255) for random data. Compressed data passes too, hence
 * the codec's header; text, tar headers and WAL pages are far off.
 */
static bool uniform(const unsigned char *b, size_t n)
{
	if (n > 4096)
		n = 4096;
	if (n < 256)
		return false;
	size_t count[256] = { 0 };
	for (size_t i = 0; i < n; i++)
		count[b[i]]++;
	double e = (double)n / 256, chi = 0;
	for (int v = 0; v < 256; v++)
		chi += ((double)count[v] - e) * ((double)count[v] - e) / e;
	return chi < 255 + 6 * 22.6;
}

const char *crypt_sniff(const unsigned char *buf, size_t n, const unsigned char *magic,
						size_t magic_len, bool plain)
{
	if (pgp_start(buf, n))
		return "OpenPGP";
	bool headed = magic != NULL && magic_len > 0;
	if (headed && n >= magic_len && memcmp(buf, magic, magic_len) == 0)
		return NULL;
	return (headed || plain) && uniform(buf, n) ? "libsodium" : NULL;
}
