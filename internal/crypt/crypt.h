/*
 * crypt: libsodium crypto_secretstream_xchacha20poly1305 filters in WAL-G's framing (24-byte
 * header, 8192-byte plaintext chunks, FINAL tag on the last) and key loading from
 * WALG_LIBSODIUM_KEY, WALG_LIBSODIUM_KEY_PATH and WALG_LIBSODIUM_KEY_TRANSFORM.
 */
#ifndef WALC_INTERNAL_CRYPT_CRYPT_H
#define WALC_INTERNAL_CRYPT_CRYPT_H

#include "internal/core/core.h"

#define CRYPT_KEY_BYTES 32
#define CRYPT_CHUNK 8192

/* sodium_init(); call once before threads start. */
err_code crypt_init(void);

/*
 * Loads the key the way WAL-G does (reference §11.1): WALG_LIBSODIUM_KEY used exactly as given,
 * else the file at WALG_LIBSODIUM_KEY_PATH with surrounding whitespace trimmed; then the
 * transform (none, hex, base64). *have_key is false when neither variable is set.
 * Errors are E_CONFIG naming the variable; a "none" key that is padded or truncated is warned.
 */
err_code crypt_key_load(unsigned char key[CRYPT_KEY_BYTES], bool *have_key);

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

#endif
