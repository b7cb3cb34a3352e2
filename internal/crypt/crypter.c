/*
 * The one encryption method a configuration names. WAL-G takes the first it finds (OpenPGP
 * before libsodium, reference §2.3); walc refuses two, since the one ignored was meant too.
 * And the key ring of a rotation: older keys that reads try after the current one, of either
 * method (a repository moving from libsodium to OpenPGP holds both).
 */
#include "internal/crypt/crypt_impl.h"
#include "internal/crypt/pgp_impl.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

typedef enum crypt_kind { KIND_SODIUM, KIND_PGP } crypt_kind;

#define OLD_VAR "WALG_OLD_KEY_PATHS"
#define OLD_FILE_MAX (1024 * 1024)

struct crypter {
	crypt_kind kind;
	unsigned char key[CRYPT_KEY_BYTES];
	pgp_keys *pgp;
	/* reads: every libsodium key, the current one first; every OpenPGP key, as one ring */
	unsigned char (*sodium)[CRYPT_KEY_BYTES];
	size_t nsodium;
	pgp_keys *pgp_ring; /* NULL when no key is OpenPGP; pgp itself when it is the only one */
	bool ring;			/* older keys are configured */
};

static bool pgp_start(const unsigned char *b, size_t n);

static void add_sodium(crypter *c, const unsigned char key[CRYPT_KEY_BYTES])
{
	unsigned char(*keys)[CRYPT_KEY_BYTES] = xcalloc(c->nsodium + 1, CRYPT_KEY_BYTES);
	if (c->nsodium > 0)
		memcpy(keys, c->sodium, c->nsodium * CRYPT_KEY_BYTES);
	memcpy(keys[c->nsodium], key, CRYPT_KEY_BYTES);
	if (c->sodium != NULL) {
		sodium_memzero(c->sodium, c->nsodium * CRYPT_KEY_BYTES);
		free(c->sodium);
	}
	c->sodium = keys;
	c->nsodium++;
}

/* The passphrase of older OpenPGP keys, trailing CR and LF removed as WAL-G reads settings. */
static char *old_passphrase(const crypt_settings *cfg)
{
	const char *p = cfg->old_pgp_key_passphrase && *cfg->old_pgp_key_passphrase
		? cfg->old_pgp_key_passphrase
		: cfg->pgp_key_passphrase;
	size_t n = p != NULL ? strlen(p) : 0;
	while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == '\r'))
		n--;
	return n > 0 ? xasprintf("%.*s", (int)n, p) : NULL;
}

/*
 * One entry of WALG_OLD_KEY_PATHS: [TRANSFORM:]PATH. An armored OpenPGP secret key joins the
 * OpenPGP ring; anything else is a libsodium key, read as WALG_LIBSODIUM_KEY_PATH reads one
 * (with TRANSFORM, else WALG_LIBSODIUM_KEY_TRANSFORM).
 */
static err_code load_old(crypter *c, const crypt_settings *cfg, const char *entry, size_t len)
{
	static const char *const transforms[] = { "hex", "base64", "none" };
	const char *transform = cfg->libsodium_key_transform;
	for (size_t i = 0; i < 3; i++) {
		size_t t = strlen(transforms[i]);
		if (len > t && strncmp(entry, transforms[i], t) == 0 && entry[t] == ':') {
			transform = transforms[i];
			entry += t + 1;
			len -= t + 1;
		}
	}
	char *path = xasprintf("%.*s", (int)len, entry);
	unsigned char *text;
	size_t n;
	bool loose;
	err_code rc = path[0] == '\0'
		? err_set(E_CONFIG, OLD_VAR ": an empty entry (a comma too many?)")
		: crypt_file_read(path, OLD_VAR, OLD_FILE_MAX, &text, &n, &loose);
	if (rc != E_OK) {
		free(path);
		return rc;
	}
	if (memmem(text, n, "-----BEGIN PGP", 14) != NULL) {
		pgp_keys *k = NULL;
		char *pw = old_passphrase(cfg);
		rc = pgp_keys_parse((const char *)text, n, pw, OLD_VAR, &k);
		if (rc == E_OK && !pgp_keys_have_secret(k))
			rc = err_set(E_CONFIG, OLD_VAR ": %s holds no secret key: an older key is there to "
									"read with",
						 path);
		if (rc == E_OK && c->pgp_ring == NULL)
			c->pgp_ring = k;
		else if (rc == E_OK)
			pgp_keys_join(c->pgp_ring, k);
		else
			pgp_keys_free(k);
		if (pw != NULL) {
			sodium_memzero(pw, strlen(pw));
			free(pw);
		}
	} else {
		unsigned char key[CRYPT_KEY_BYTES];
		char *var = xasprintf(OLD_VAR " (%s)", path);
		rc = crypt_key_from_text(text, n, transform, key, var);
		if (rc == E_OK)
			add_sodium(c, key);
		sodium_memzero(key, sizeof(key));
		free(var);
	}
	if (rc == E_OK && loose)
		log_warn(OLD_VAR ": %s is readable by others", path);
	sodium_memzero(text, n);
	free(text);
	free(path);
	return rc;
}

/* With older keys: the current key's place in the ring, then each older key. */
static err_code load_ring(crypter *c, const crypt_settings *cfg)
{
	const char *p = cfg->old_key_paths;
	if (p == NULL || *p == '\0')
		return E_OK;
	c->ring = true;
	if (c->kind == KIND_SODIUM)
		add_sodium(c, c->key);
	else
		TRY(pgp_keys_load(cfg, &c->pgp_ring)); /* its own copy: joined with the older keys */
	for (;;) {
		size_t n = strcspn(p, ",");
		TRY(load_old(c, cfg, p, n));
		if (p[n] == '\0')
			return E_OK;
		p += n + 1;
	}
}

/* a's name when va is set, else b's when vb is, else NULL. */
static const char *set_var(const char *a, const char *va, const char *b, const char *vb)
{
	if (va != NULL && va[0] != '\0')
		return a;
	if (vb != NULL && vb[0] != '\0')
		return b;
	return NULL;
}

err_code crypter_load(const crypt_settings *cfg, crypter **out)
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
			if (rc == E_OK && cfg->old_key_paths != NULL && *cfg->old_key_paths != '\0')
				rc = err_set(E_CONFIG, OLD_VAR " is set, but no current key (WALG_LIBSODIUM_KEY, "
										"WALG_LIBSODIUM_KEY_PATH, WALG_PGP_KEY or "
										"WALG_PGP_KEY_PATH): older keys only add to it");
			return rc;
		}
	}
	if (rc == E_OK)
		rc = load_ring(c, cfg);
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
	pgp_keys_free(c->pgp_ring);
	if (c->sodium != NULL) {
		sodium_memzero(c->sodium, c->nsodium * CRYPT_KEY_BYTES);
		free(c->sodium);
	}
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

sink *crypter_decrypt_current_new(crypter *c, sink *next)
{
	return c->kind == KIND_PGP ? pgp_decrypt_new(c->pgp, next) : crypt_decrypt_new(c->key, next);
}

bool crypter_has_ring(const crypter *c)
{
	return c->ring;
}

bool crypter_reads(const crypter *c, const char *method)
{
	if (strcmp(method, crypter_name(c)) == 0)
		return true;
	return strcmp(method, "OpenPGP") == 0 ? c->pgp_ring != NULL : c->nsodium > 0;
}

/*
 * Reading with the key ring: the object's first bytes (a libsodium stream's header and first
 * chunk) are held until they show which key opens it; then the decryptor of that key takes
 * them and the rest. A libsodium key that authenticates the first chunk is the key (a forgery
 * would have to break the AEAD); an OpenPGP message goes to the OpenPGP ring, whose contexts
 * hold every OpenPGP secret key (librnp finds the one a session key is for).
 */
typedef struct ring_sink {
	sink base; /* base.next: the chosen decryptor, once chosen */
	crypter *c;
	sink *downstream; /* owned until a decryptor takes it */
	size_t fill;
	unsigned char head[CRYPT_HEAD_BYTES];
} ring_sink;

static err_code ring_choose(ring_sink *r)
{
	crypter *c = r->c;
	bool pgp = pgp_start(r->head, r->fill);
	for (size_t i = 0; i < c->nsodium; i++)
		if (crypt_key_opens(c->sodium[i], r->head, r->fill)) {
			r->base.next = crypt_decrypt_new(c->sodium[i], r->downstream);
			break;
		}
	if (r->base.next == NULL && c->pgp_ring != NULL && (pgp || c->nsodium == 0))
		r->base.next = pgp_decrypt_new(c->pgp_ring, r->downstream);
	if (r->base.next == NULL)
		return err_set(E_CORRUPT, "no key of the ring (the current key and " OLD_VAR ") opens "
								  "the object: %s",
					   pgp ? "it is OpenPGP, and no OpenPGP key is in the ring"
						   : "libsodium: its first chunk authenticates with none (wrong key "
							 "or tampered data)");
	r->downstream = NULL;
	return sink_write(r->base.next, r->head, r->fill);
}

static err_code ring_write(sink *s, const void *buf, size_t len)
{
	ring_sink *r = (ring_sink *)s;
	if (r->base.next != NULL)
		return sink_write(r->base.next, buf, len);
	const unsigned char *p = buf;
	r->fill += take_bytes(r->head + r->fill, sizeof(r->head) - r->fill, &p, &len);
	if (r->fill < sizeof(r->head))
		return E_OK;
	TRY(ring_choose(r));
	return len > 0 ? sink_write(r->base.next, p, len) : E_OK;
}

static err_code ring_finish(sink *s)
{
	ring_sink *r = (ring_sink *)s;
	if (r->base.next == NULL)
		TRY(ring_choose(r)); /* an object shorter than a header and a chunk */
	return sink_finish(r->base.next);
}

static void ring_free(sink *s)
{
	ring_sink *r = (ring_sink *)s;
	sink_free(r->base.next);
	sink_free(r->downstream);
	sodium_memzero(r->head, sizeof(r->head));
	free(r);
}

static const sink_ops ring_ops = { ring_write, ring_finish, ring_free };

sink *crypter_decrypt_new(crypter *c, sink *next)
{
	if (!c->ring)
		return crypter_decrypt_current_new(c, next);
	ring_sink *r = xcalloc(1, sizeof(*r));
	r->base.ops = &ring_ops;
	r->c = c;
	r->downstream = next;
	return &r->base;
}

crypt_key_of crypter_probe(const crypter *c, const unsigned char *head, size_t n)
{
	if (c->kind == KIND_SODIUM && crypt_key_opens(c->key, head, n))
		return CRYPT_KEY_CURRENT;
	for (size_t i = 0; i < c->nsodium; i++)
		if (crypt_key_opens(c->sodium[i], head, n))
			return CRYPT_KEY_OLD;
	uint64_t ids[16];
	size_t nids = pgp_recipients(head, n, ids, 16), current = 0, known = 0;
	for (size_t i = 0; i < nids; i++) {
		current += c->kind == KIND_PGP && pgp_keys_has_id(c->pgp, ids[i], false);
		known += c->pgp_ring != NULL && pgp_keys_has_id(c->pgp_ring, ids[i], true);
	}
	/* for the current key alone: an object also encrypted to an older key is rekeyed */
	if (nids > 0 && current == nids)
		return CRYPT_KEY_CURRENT;
	return known > 0 ? CRYPT_KEY_OLD : CRYPT_KEY_NONE;
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
