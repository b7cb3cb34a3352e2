/*
 * repo: a WAL-G repository as walc reads and writes it: storage plus the codec and key that
 * turn plain streams into stored objects (compress, then encrypt) and back (decrypt, then
 * decompress by the object's extension).
 */
#ifndef WALC_INTERNAL_REPO_REPO_H
#define WALC_INTERNAL_REPO_REPO_H

#include "internal/codec/codec.h"
#include "internal/core/core.h"
#include "internal/crypt/crypt.h"
#include "internal/pipe/pipe.h"
#include "internal/storage/storage.h"

#define REPO_WAL_DIR "wal_005/"
#define REPO_BACKUP_DIR "basebackups_005/"
#define REPO_CATCHUP_DIR "catchup_005/" /* catchup-push's backups, in the same layout */

typedef struct repo {
	storage *st;
	const codec *codec; /* for writing */
	int level;
	crypter *crypt; /* libsodium or OpenPGP, NULL when objects are stored in the clear */
	rate *net; /* paces bytes to and from storage (WALG_NETWORK_RATE_LIMIT), or NULL */
	const char *backups; /* the folder of the backups this handle reads and writes; NULL: REPO_BACKUP_DIR */
} repo;

/* The folder of the repository's backups this handle addresses ("basebackups_005/"). */
static inline const char *repo_backups(const repo *r)
{
	return r->backups != NULL ? r->backups : REPO_BACKUP_DIR;
}

/*
 * Validates the codec, level and encryption the configuration names and opens its storage:
 * with failover storages, as use says, or only target (a storage's name; NULL for none; see
 * storage_open_use). Errors name the variable at fault.
 */
err_code repo_open_use(const config *cfg, storage_use use, const char *target, repo *out);
/* repo_open_use for a reader: every alive storage as one. */
err_code repo_open(const config *cfg, repo *out);
void repo_close(repo *r);
/* Backup commands pace storage traffic; WAL commands never do (WAL-G's rule). */
void repo_limit_network(repo *r, uint64_t bytes_per_sec);

/*
 * A writer for object base_key plus the codec's extension: compress, encrypt, publish at
 * finish. *key_out (may be NULL) receives the full key, to free. stored (may be NULL) counts
 * the bytes that reach storage.
 */
err_code repo_put(repo *r, const char *base_key, uint64_t *stored, sink **out, char **key_out);
/* As repo_put, for a long stream (a tar partition): see storage_put_long. */
err_code repo_put_long(repo *r, const char *base_key, uint64_t *stored, sink **out, char **key_out);
/* As repo_put, but never replacing: finish fails with E_EXISTS if the object appeared. */
err_code repo_put_new(repo *r, const char *base_key, sink **out, char **key_out);
/*
 * Streams object key, decoded, into `into` and finishes it. Takes ownership of `into`, freed
 * in every case. Failures name the object.
 */
err_code repo_get(repo *r, const char *key, sink *into);
/* As repo_get, the stored bytes counted toward p (NULL: none) as they arrive. */
err_code repo_get_counted(repo *r, const char *key, progress *p, sink *into);
/*
 * As repo_get, for len stored bytes of key from offset on, which must start a compression
 * frame (a partition's FrameOffset): decoded from there. Only where repo_has_range says so
 * (storage that reads ranges, objects in the clear).
 */
bool repo_has_range(const repo *r);
err_code repo_get_range(repo *r, const char *key, uint64_t offset, uint64_t len, sink *into);
err_code repo_get_range_counted(repo *r, const char *key, uint64_t offset, uint64_t len,
								progress *p, sink *into);
/*
 * Finds the object stored for base_key whatever its extension: the configured codec's first,
 * then the others. E_NOTFOUND when none exists.
 */
err_code repo_find(repo *r, const char *base_key, char **key_out);
/* Makes the sink an object is read into: called once for every key tried. */
typedef err_code (*repo_open_fn)(void *arg, sink **out);
/*
 * repo_find and repo_get in one: GETs each key repo_find would look for, in its order, into
 * a sink open_sink makes, until one exists (a try that finds nothing frees its sink unfinished).
 * One request when the object has the configured codec's extension, where repo_find then
 * repo_get take two. *key_out (may be NULL) the key read. E_NOTFOUND when none exists.
 */
err_code repo_get_found(repo *r, const char *base_key, repo_open_fn open_sink, void *arg,
						char **key_out);
/* The codec for a key's extension (none when it has no known one). */
const codec *repo_codec_for_key(const char *key);
/* The repository's encryption around next (takes ownership), or next itself when none. */
sink *repo_encrypt_new(repo *r, sink *next);
sink *repo_decrypt_new(repo *r, sink *next);

#endif
