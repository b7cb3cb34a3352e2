/* The repository's encryption: the chains around objects, and what callers may ask of the key. */
#include "internal/repo/repo.h"

#include <stdlib.h>

#include "internal/repo/repo_impl.h"

bool repo_encrypted(const repo *r)
{
	return r->crypt != NULL;
}

const char *repo_crypt_name(const repo *r)
{
	return r->crypt != NULL ? crypter_name(r->crypt) : NULL;
}

bool repo_crypt_reads(const repo *r, const char *method)
{
	return r->crypt != NULL && crypter_reads(r->crypt, method);
}

const char *repo_crypt_vars(const char *method)
{
	return crypter_vars(method);
}

sink *repo_encrypt_new(repo *r, sink *next)
{
	return r->crypt != NULL ? crypter_encrypt_new(r->crypt, next) : next;
}

sink *repo_decrypt_new(repo *r, sink *next)
{
	return r->crypt != NULL ? crypter_decrypt_new(r->crypt, next) : next;
}

sink *repo_decrypt_current_new(repo *r, sink *next)
{
	return crypter_decrypt_current_new(r->crypt, next);
}

err_code repo_probe_key(repo *r, const char *key, uint64_t size, repo_key_of *out)
{
	static const repo_key_of of[] = { [CRYPT_KEY_CURRENT] = REPO_KEY_CURRENT,
									  [CRYPT_KEY_OLD] = REPO_KEY_OLD,
									  [CRYPT_KEY_NONE] = REPO_KEY_NONE };
	membuf head = { .max = CRYPT_HEAD_BYTES };
	uint64_t n = size < CRYPT_HEAD_BYTES ? size : CRYPT_HEAD_BYTES;
	sink *s = membuf_sink_new(&head);
	err_code rc = n > 0 ? storage_get_range(r->st, key, 0, n, s) : E_OK;
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	if (rc == E_OK)
		*out = of[crypter_probe(r->crypt, head.data, head.len)];
	free(head.data);
	return rc;
}
