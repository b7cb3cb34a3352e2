/* repo-internal: the handle's parts, for repo's own files and the unit tests that build one. */
#ifndef WALC_INTERNAL_REPO_REPO_IMPL_H
#define WALC_INTERNAL_REPO_REPO_IMPL_H

#include "internal/codec/codec.h"
#include "internal/crypt/crypt.h"
#include "internal/pipe/pipe.h"
#include "internal/repo/repo.h"
#include "internal/storage/storage.h"

struct repo {
	storage *st;
	const codec *codec; /* for writing */
	int level;
	crypter *crypt; /* libsodium or OpenPGP, NULL when objects are stored in the clear */
	rate *net; /* paces bytes to and from storage (WALG_NETWORK_RATE_LIMIT), or NULL */
	const char *backups; /* the folder of the backups this handle reads and writes; NULL: REPO_BACKUP_DIR */
	long upload_concurrency, download_concurrency; /* the storage settings' */
};

/* The codec for a key's extension (none when it has no known one). */
const codec *repo_codec_for_key(const char *key);

#endif
