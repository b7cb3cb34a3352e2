/* crypt-internal: key files and what the key ring needs of the libsodium framing. */
#ifndef WALC_INTERNAL_CRYPT_CRYPT_IMPL_H
#define WALC_INTERNAL_CRYPT_CRYPT_IMPL_H

#include "internal/crypt/crypt.h"

/*
 * A key file's bytes, up to max (more is E_CONFIG naming var and path), into *out (len bytes
 * to wipe and free); *loose when others may read the file.
 */
err_code crypt_file_read(const char *path, const char *var, size_t max, unsigned char **out,
						 size_t *len, bool *loose);
/* A libsodium key from a key file's text: surrounding whitespace trimmed, then transformed. */
err_code crypt_key_from_text(const unsigned char *text, size_t len, const char *transform,
							 unsigned char key[CRYPT_KEY_BYTES], const char *var);
/*
 * Whether key opens a libsodium stream whose first n bytes are head: its header and first
 * chunk (the rest of head when the object is shorter than CRYPT_HEAD_BYTES) authenticate.
 */
bool crypt_key_opens(const unsigned char key[CRYPT_KEY_BYTES], const unsigned char *head,
					 size_t n);

#endif
