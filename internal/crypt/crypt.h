/*
 * crypt: the two encryption methods walc shares with WAL-G, as sinks, and their keys:
 * libsodium crypto_secretstream_xchacha20poly1305 in WAL-G's framing (24-byte header,
 * 8192-byte plaintext chunks, FINAL tag on the last; WALG_LIBSODIUM_KEY[_PATH|_TRANSFORM]) and
 * OpenPGP messages as WAL-G's openpgp crypter writes them (over librnp; WALG_PGP_KEY[_PATH],
 * WALG_PGP_KEY_PASSPHRASE). A crypter is the one method a configuration names.
 */
#ifndef WALC_INTERNAL_CRYPT_CRYPT_H
#define WALC_INTERNAL_CRYPT_CRYPT_H

#include "internal/core/core.h"

/* The keys, as named: all that crypter_load reads (crypt reads and derives the material). */
typedef struct crypt_settings {
	char *libsodium_key;			/* WALG_LIBSODIUM_KEY */
	char *libsodium_key_path;		/* WALG_LIBSODIUM_KEY_PATH */
	char *libsodium_key_transform;	/* WALG_LIBSODIUM_KEY_TRANSFORM */
	char *pgp_key;					/* WALG_PGP_KEY */
	char *pgp_key_path;				/* WALG_PGP_KEY_PATH */
	char *pgp_key_passphrase;		/* WALG_PGP_KEY_PASSPHRASE */
	char *old_key_paths;			/* WALG_OLD_KEY_PATHS (walc extension): older keys */
	char *old_pgp_key_passphrase;	/* WALG_OLD_PGP_KEY_PASSPHRASE (walc extension) */
} crypt_settings;

#define CRYPT_KEY_BYTES 32
#define CRYPT_CHUNK 8192

/* sodium_init(); call once before threads start. */
err_code crypt_init(void);

/*
 * Loads the key from the parsed settings the way WAL-G does (reference §11.1):
 * cfg->libsodium_key (WALG_LIBSODIUM_KEY) used exactly as given, else the file at
 * cfg->libsodium_key_path with surrounding whitespace trimmed; then the transform
 * (cfg->libsodium_key_transform: none, hex, base64; NULL = none). *have_key is false when
 * neither is set. Errors are E_CONFIG naming the variable; a "none" key that is padded or
 * truncated is warned.
 */
err_code crypt_key_load(const crypt_settings *cfg, unsigned char key[CRYPT_KEY_BYTES], bool *have_key);

/* The transform alone, for tests: material -> 32-byte key. */
err_code crypt_key_derive(const char *material, size_t len, const char *transform,
						  unsigned char key[CRYPT_KEY_BYTES], const char *var);

/* Encrypt into next (takes ownership of next). Borrows key for the sink's lifetime. */
sink *crypt_encrypt_new(const unsigned char key[CRYPT_KEY_BYTES], sink *next);
/*
 * Decrypt into next (takes ownership of next). write() fails with E_CORRUPT on a chunk that
 * does not authenticate; finish() fails with E_CORRUPT unless a FINAL chunk ended the stream
 * and nothing followed it (stricter than WAL-G).
 */
sink *crypt_decrypt_new(const unsigned char key[CRYPT_KEY_BYTES], sink *next);

/* ------------------------------------------------------------------------------------------ */
/* OpenPGP                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/*
 * Keys from one armored key text, as WAL-G reads it: the first armor block only, every
 * transferable key in it. Encryption is to every primary key (each one's encryption subkey);
 * a secret key serves for encryption through its public part, with no passphrase needed.
 * Secret keys are unlocked on the first decryption, once per process: every protected one
 * must accept the passphrase. Thread-safe; key material and passphrase are wiped at free.
 */
typedef struct pgp_keys pgp_keys;

/*
 * text: the key text (borrowed). var names its source in messages (WALG_PGP_KEY or
 * WALG_PGP_KEY_PATH); passphrase may be NULL. Fails with E_CONFIG when the text holds no
 * armored OpenPGP key librnp accepts. The text is checked here; nothing is unlocked yet.
 */
err_code pgp_keys_parse(const char *text, size_t len, const char *passphrase, const char *var,
						pgp_keys **out);
/*
 * From the parsed settings, as WAL-G reads them: cfg->pgp_key (WALG_PGP_KEY; every
 * two-character "\n" becomes a newline) wins over the file at cfg->pgp_key_path;
 * cfg->pgp_key_passphrase with trailing CR and LF removed. *out is NULL when neither key is set.
 */
err_code pgp_keys_load(const crypt_settings *cfg, pgp_keys **out);
void pgp_keys_free(pgp_keys *k); /* NULL is a no-op */
/* Some secret key is present (possibly still locked). */
bool pgp_keys_have_secret(const pgp_keys *k);

/*
 * Encrypt into next (takes ownership of next; borrows k for the sink's lifetime): one binary
 * OpenPGP message, a PKESK per recipient, SEIPD v1 with MDC, AES-128, no compression packet,
 * a literal data packet (format 'b', no name, date 0), no signature.
 */
sink *pgp_encrypt_new(const pgp_keys *k, sink *next);
/*
 * Decrypt into next (same ownership). Plaintext goes downstream as it is decrypted, but only
 * finish() says it is authentic: it fails with E_CORRUPT on a tampered, truncated or
 * unprotected message and on bytes after its end, and only then finishes next. A key that
 * cannot decrypt (wrong key, public key only, wrong or missing passphrase) fails the first
 * write or finish with E_CONFIG, before any plaintext. Each sink runs librnp on a thread of
 * its own; downstream writes happen on the caller's thread.
 */
sink *pgp_decrypt_new(pgp_keys *k, sink *next);

/* ------------------------------------------------------------------------------------------ */
/* The configured method                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct crypter crypter;

/*
 * Reads whichever method the settings configure (libsodium or OpenPGP): the current key,
 * which every write uses, and the key ring's older keys (cfg->old_key_paths,
 * WALG_OLD_KEY_PATHS: libsodium keys and OpenPGP secret keys alike), which reads try too.
 * *out is NULL when none is. Both methods configured at once is E_CONFIG naming the variables
 * (WAL-G would quietly prefer OpenPGP), and so are older keys without a current one. Borrows
 * cfg for the call only. Call crypt_init() first.
 */
err_code crypter_load(const crypt_settings *cfg, crypter **out);
void crypter_free(crypter *c); /* NULL is a no-op */
const char *crypter_name(const crypter *c); /* "libsodium" or "OpenPGP": the current key's */
/*
 * Encrypt with the current key / decrypt with any key of the ring (the current one first)
 * into next (takes ownership of next; borrows c).
 */
sink *crypter_encrypt_new(const crypter *c, sink *next);
sink *crypter_decrypt_new(crypter *c, sink *next);
/* Decrypt with the current key alone: how rekey checks what it wrote. */
sink *crypter_decrypt_current_new(crypter *c, sink *next);
/* Whether older keys are configured. */
bool crypter_has_ring(const crypter *c);
/* Whether reads hold a key of method (a crypter_name), current or older. */
bool crypter_reads(const crypter *c, const char *method);

/*
 * Which key of the ring an object is encrypted with, from its first CRYPT_HEAD_BYTES (all of
 * it when shorter): a libsodium stream's header and first chunk authenticate with the key, an
 * OpenPGP message's session keys are for its key ids (the current key: for no other).
 */
#define CRYPT_HEAD_BYTES (24 + CRYPT_CHUNK + 17)
typedef enum crypt_key_of { CRYPT_KEY_CURRENT, CRYPT_KEY_OLD, CRYPT_KEY_NONE } crypt_key_of;
crypt_key_of crypter_probe(const crypter *c, const unsigned char *head, size_t n);
/* The variables that configure a method by its crypter_name ("WALG_PGP_KEY or ..."). */
const char *crypter_vars(const char *method);

/*
 * The encryption the first n bytes of an object show, for an object read without a key:
 * "OpenPGP" for a message's first packet (a public-key or symmetric session key packet, or
 * armor), "libsodium" for bytes that are uniformly random (a secretstream's header and
 * chunks) where the codec promised a header (magic: the codec's first bytes, NULL for a
 * codec without a header, in which case only OpenPGP is recognised unless plain says the
 * content is never random itself). NULL when nothing shows.
 */
const char *crypt_sniff(const unsigned char *buf, size_t n, const unsigned char *magic,
						size_t magic_len, bool plain);

#endif
