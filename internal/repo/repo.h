/*
 * repo: a WAL-G repository as walc reads and writes it: storage plus the codec and key that
 * turn plain streams into stored objects (compress, then encrypt) and back (decrypt, then
 * decompress by the object's extension). The layers above reach storage, codecs and keys only
 * through it.
 */
#ifndef WALC_INTERNAL_REPO_REPO_H
#define WALC_INTERNAL_REPO_REPO_H

#include <time.h>

#include "internal/core/core.h"

#define REPO_WAL_DIR "wal_005/"
#define REPO_BACKUP_DIR "basebackups_005/"
#define REPO_CATCHUP_DIR "catchup_005/" /* catchup-push's backups, in the same layout */

typedef struct repo repo;

/* An object as a listing or repo_stat shows it. */
typedef struct repo_obj {
	char *key; /* from the repository's root; NULL from repo_stat */
	uint64_t size;
	time_t mtime;
	long mtime_nsec;
	const char *where; /* with failover storages, the name of the one that holds it; else NULL */
} repo_obj;

typedef struct repo_objs {
	repo_obj *items;
	size_t len;
	size_t cap;
} repo_objs;

void repo_objs_add(repo_objs *l, const char *key, uint64_t size, time_t mtime, long nsec);
void repo_objs_free(repo_objs *l);

/*
 * How a command uses WAL-G's failover storages (WALG_FAILOVER_STORAGES): the first alive one
 * alone (a writer), every alive one as one (a reader: reads from the first holding an object,
 * listings their union), or every one, each required alive (retention).
 */
typedef enum repo_use { REPO_WRITE, REPO_READ, REPO_EVERY } repo_use;

/* How objects are compressed: the codec and level of every object written. */
typedef struct repo_settings {
	char *compression;		/* WALG_COMPRESSION_METHOD */
	long compression_level; /* WALG_COMPRESSION_LEVEL (walc extension) or WALG_ZSTD_LEVEL */
	char *zstd_level;		/* WALG_ZSTD_LEVEL: fastest, default, better or best */
} repo_settings;

/*
 * Where the repository is and which keys open it: storage's and crypt's settings, which the
 * layers above repo pass along without reading (their headers are repo's to include).
 */
struct storage_settings;
struct crypt_settings;

/*
 * Validates the codec, level and encryption the settings name and opens the storage: with
 * failover storages, as use says, or only target (a storage's name; NULL for none). Errors
 * name the variable at fault; *out is then NULL.
 */
err_code repo_open_use(const struct storage_settings *st, const struct crypt_settings *keys,
					   const repo_settings *rs, repo_use use, const char *target, repo **out);
/* repo_open_use for a reader. */
err_code repo_open(const struct storage_settings *st, const struct crypt_settings *keys,
				   const repo_settings *rs, repo **out);
/* WALG_UPLOAD_CONCURRENCY and WALG_DOWNLOAD_CONCURRENCY of the storage r was opened on. */
long repo_upload_concurrency(const repo *r);
long repo_download_concurrency(const repo *r);
void repo_close(repo *r); /* NULL is a no-op */
/* Backup commands pace storage traffic; WAL commands never do (WAL-G's rule). */
void repo_limit_network(repo *r, uint64_t bytes_per_sec);
/* Reads paced as repo_limit_network set (next itself when not). Takes ownership of next. */
sink *repo_paced_new(repo *r, sink *next);
/* The folder of the backups this handle reads and writes: REPO_BACKUP_DIR unless set. */
const char *repo_backups(const repo *r);
void repo_set_backups(repo *r, const char *dir); /* borrows dir */
/* For messages: "/path" or "s3://bucket/path". */
const char *repo_describe(repo *r);

/* ------------------------------------------------------------------------------------------ */
/* Objects as stored                                                                          */
/* ------------------------------------------------------------------------------------------ */

/*
 * Objects whose key starts with prefix, a folder ("wal_005/"): recursive lists everything
 * below it, otherwise only its direct objects. A missing folder is an empty list.
 */
err_code repo_list(repo *r, const char *prefix, bool recursive, repo_objs *out);
/* E_NOTFOUND when absent. */
err_code repo_stat(repo *r, const char *key, repo_obj *info);
/* Removing an absent object succeeds. */
err_code repo_remove(repo *r, const char *key);
/* Batched where the store has batch deletes, several at once. On failure some may be gone. */
err_code repo_remove_many(repo *r, const char *const *keys, size_t n);
/* until[i]: until when keys[i] may not be deleted (S3 Object Lock), 0 when it may. */
err_code repo_locked_until(repo *r, const char *const *keys, size_t n, time_t *until);
/*
 * The hidden temporaries of puts never finished below prefix (file storage; none where stores
 * publish atomically), and the writer's process id a temporary's key names (0: none).
 */
err_code repo_list_temporaries(repo *r, const char *prefix, repo_objs *out);
long repo_temporary_pid(const char *key);
/* Before a writer's first read: makes the repository's folder where the store has one. */
err_code repo_prepare_write(repo *r);
/* Failover storages: a long-running writer checks again which one is first alive (daemon). */
void repo_recheck(repo *r);
/* WAL-G's name of the storage writes go to ("default" without failover storages). */
const char *repo_storage_name(repo *r);
/* Reads look first in the failover storage named (NULL: the usual order). */
void repo_prefer(repo *r, const char *name);

typedef enum repo_put_mode {
	REPO_PUT_REPLACE,
	REPO_PUT_NEW,  /* never replacing: finish fails with E_EXISTS if the object appeared */
	REPO_PUT_LONG, /* a long stream (a tar partition): uploaded in parts from its first MiB */
} repo_put_mode;
/*
 * A writer for object key as it is written (sentinels, metadata): nothing compressed or
 * encrypted. finish publishes it whole; free without finish discards it.
 */
err_code repo_put_plain(repo *r, const char *key, repo_put_mode mode, sink **out);
/* Streams object key as stored into `into`, not finished by this call. E_NOTFOUND when absent. */
err_code repo_get_plain(repo *r, const char *key, sink *into);
/*
 * Copies object key (size bytes, as listed) from one repository to another as stored: inside
 * the store where both are one S3 endpoint (*server_side), else streamed and paced as to's
 * network limit says. The copy is checked (size, MD5 where the stores keep one); E_CORRUPT,
 * naming it, when it differs, and it is removed.
 */
err_code repo_copy_object(repo *from, repo *to, const char *key, uint64_t size,
						  bool *server_side);

/* ------------------------------------------------------------------------------------------ */
/* Objects compressed and encrypted                                                           */
/* ------------------------------------------------------------------------------------------ */

/*
 * A writer for object base_key plus the codec's extension: compress, encrypt, publish at
 * finish. *key_out (may be NULL) receives the full key, to free. stored (may be NULL) counts
 * the bytes that reach storage.
 */
err_code repo_put(repo *r, const char *base_key, uint64_t *stored, sink **out, char **key_out);
/* As repo_put, for a long stream (a tar partition): see REPO_PUT_LONG. */
err_code repo_put_long(repo *r, const char *base_key, uint64_t *stored, sink **out, char **key_out);
/* As repo_put, but never replacing: finish fails with E_EXISTS if the object appeared. */
err_code repo_put_new(repo *r, const char *base_key, sink **out, char **key_out);
/* base_key with the configured codec's extension, to free. */
char *repo_key(const repo *r, const char *base_key);
/*
 * Whether repo_put's objects may be written as independent frames that ranged reads start
 * at: the codec has frames, and nothing is encrypted (encryption moves the offsets). Where
 * they may, repo_end_frame on the writer repo_put made for key (what the caller wrote on top
 * flushed first) ends the frame under way, so that the next byte starts one.
 */
bool repo_frames_allowed(const repo *r);
err_code repo_end_frame(const char *key, sink *w);
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
 * (storage that reads ranges, objects in the clear, key's codec with frames).
 */
bool repo_has_range(const repo *r, const char *key);
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
/* Whether ext (no dot) is a codec's extension, "" for none included. */
bool repo_is_codec_ext(const char *ext);
/* Decompression by key's extension (none when it has no known one) into next (owned). */
sink *repo_decompress_new(const char *key, sink *next);
/* Compression with the configured codec and level into next (owned). */
sink *repo_compress_new(const repo *r, sink *next);
/*
 * About how much memory one stream decoding key (by its extension) holds, for callers that
 * bound how many streams run at once.
 */
size_t repo_decode_memory(const char *key);
/* The calling thread compresses by itself, no helper threads (one of several compressing). */
void repo_compress_here(void);

/* ------------------------------------------------------------------------------------------ */
/* Keys                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Whether objects are encrypted, and with which method ("libsodium", "OpenPGP"; NULL: none). */
bool repo_encrypted(const repo *r);
const char *repo_crypt_name(const repo *r);
/* Whether reads hold a key of method, current or older (WALG_OLD_KEY_PATHS). */
bool repo_crypt_reads(const repo *r, const char *method);
/* The variables that configure a method ("WALG_PGP_KEY or ..."). */
const char *repo_crypt_vars(const char *method);
/* The repository's encryption around next (takes ownership), or next itself when none. */
sink *repo_encrypt_new(repo *r, sink *next);
sink *repo_decrypt_new(repo *r, sink *next);
/* Decryption with the current key alone (how rekey checks what it wrote); needs a key. */
sink *repo_decrypt_current_new(repo *r, sink *next);
/* Which key of the ring an object (size bytes) is encrypted with, from its first bytes. */
typedef enum repo_key_of { REPO_KEY_CURRENT, REPO_KEY_OLD, REPO_KEY_NONE } repo_key_of;
err_code repo_probe_key(repo *r, const char *key, uint64_t size, repo_key_of *out);

#endif
