/* crypt's OpenPGP internals shared by the key loader (pgpkey.c) and the sinks (pgp.c). */
#ifndef WALC_INTERNAL_CRYPT_PGP_IMPL_H
#define WALC_INTERNAL_CRYPT_PGP_IMPL_H

#include "internal/crypt/crypt.h"

#include <pthread.h>
#include <rnp/rnp.h>
#include <rnp/rnp_err.h>

#define PGP_IDLE_MAX 16

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
	/* Unlocked secret keys, made by the first decryption (pgp_keys_take). */
	pthread_mutex_t mu;
	bool unlocked;
	err_code unlock_rc;
	char unlock_msg[256];
	pgp_buf sec;
	/*
	 * Decryption contexts holding them, kept for the next stream: librnp checks a secret
	 * key's material on its first use in a context (for RSA, primality tests: about 0.2 s
	 * for 3072 bits), which a new context per object would pay every time.
	 */
	rnp_ffi_t idle[PGP_IDLE_MAX];
	int nidle;
	/* Every key id (primary keys and subkeys), for telling whom a message is encrypted to. */
	uint64_t *ids;
	size_t nids;
	/* The key ring's older keys: decryption contexts hold their secret keys too. */
	pgp_keys *older;
};

/* Chains older's keys (taking ownership) behind k's: k's decryption contexts hold them all. */
void pgp_keys_join(pgp_keys *k, pgp_keys *older);
/* Whether k (or, with ring, any of its older keys) has a key or subkey of this id. */
bool pgp_keys_has_id(const pgp_keys *k, uint64_t id, bool ring);
/*
 * The key ids of the public-key session key packets an OpenPGP message starts with (up to
 * max; its first n bytes suffice): how many, 0 when it starts with none.
 */
size_t pgp_recipients(const unsigned char *head, size_t n, uint64_t *ids, size_t max);

/* A librnp context whose diagnostics go to /dev/null (to stderr at DEVEL). NULL on failure. */
rnp_ffi_t pgp_ffi_new(void);
/* Imports binary or armored keys (public and secret) from memory into ffi. */
rnp_result_t pgp_import(rnp_ffi_t ffi, const unsigned char *buf, size_t len);
/*
 * A decryption context with the unlocked secret keys: an idle one, or a new one. The first
 * call unlocks the keys (every protected one with the passphrase) and the outcome is kept:
 * E_CONFIG naming the variables when there is no secret key, no passphrase for a protected
 * one, or a wrong passphrase.
 */
err_code pgp_keys_take(pgp_keys *k, rnp_ffi_t *out);
/* Back for the next stream, once no operation uses it. */
void pgp_keys_give(pgp_keys *k, rnp_ffi_t ffi);

#endif
