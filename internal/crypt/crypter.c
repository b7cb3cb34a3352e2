/*
 * The one encryption method a configuration names. WAL-G takes the first it finds (OpenPGP
 * before libsodium, reference §2.3); walc refuses two, since the one ignored was meant too.
 */
#include "internal/crypt/crypt.h"

#include <sodium.h>
#include <stdlib.h>

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
