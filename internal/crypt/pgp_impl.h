/* crypt's OpenPGP internals shared by the key loader (pgpkey.c) and the sinks (pgp.c). */
#ifndef WALC_INTERNAL_CRYPT_PGP_IMPL_H
#define WALC_INTERNAL_CRYPT_PGP_IMPL_H

#include "internal/crypt/crypt.h"

#include <pthread.h>
#include <rnp/rnp.h>
#include <rnp/rnp_err.h>

/* A growable byte buffer for key material: wiped whenever it moves and when freed. */
typedef struct pgp_buf {
	unsigned char *data;
	size_t len, cap;
} pgp_buf;

void pgp_buf_wipe(pgp_buf *b);

struct pgp_keys {
	const char *var;	/* WALG_PGP_KEY or WALG_PGP_KEY_PATH (a static string) */
	pgp_buf block;		/* the first armor block of the key text */
	pgp_buf pub;		/* every key's public part, binary: what encryption imports */
	char *passphrase;	/* NULL when unset; wiped once the keys are unlocked */
	int primaries;
	bool have_secret;
	err_code enc_rc;	/* set when some key cannot be encrypted to (expired, no subkey) */
	char enc_msg[256];
	/* Unlocked secret keys, made by the first decryption (pgp_keys_secret). */
	pthread_mutex_t mu;
	bool unlocked;
	err_code unlock_rc;
	char unlock_msg[256];
	pgp_buf sec;
};

/* A librnp context whose diagnostics go to /dev/null (to stderr at DEVEL). NULL on failure. */
rnp_ffi_t pgp_ffi_new(void);
/* Imports binary or armored keys (public and secret) from memory into ffi. */
rnp_result_t pgp_import(rnp_ffi_t ffi, const unsigned char *buf, size_t len);
/*
 * The unlocked secret keys for a decryption: unlocks them on the first call (every protected
 * key with the passphrase) and remembers the outcome. E_CONFIG naming the variables when there
 * is no secret key, no passphrase for a protected one, or a wrong passphrase.
 */
err_code pgp_keys_secret(pgp_keys *k, const pgp_buf **out);

#endif
