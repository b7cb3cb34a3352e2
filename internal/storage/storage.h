/*
 * storage: one interface over object stores (put a stream, get a stream, stat, list, delete),
 * with the file system, the HTTP object stores (S3, GCS, Azure Blob) and SFTP as backends. Keys are '/'-separated, relative to the
 * repository root (prefix plus WALG_STORAGE_PREFIX). Every object is complete or absent.
 */
#ifndef WALC_INTERNAL_STORAGE_STORAGE_H
#define WALC_INTERNAL_STORAGE_STORAGE_H

#include <time.h>

#include "internal/core/core.h"

typedef struct storage storage;


typedef struct obj_info {
	char *key;		/* relative to the listed prefix's root (full key) */
	uint64_t size;
	time_t mtime;
	long mtime_nsec;
	const char *where; /* with failover storages, the name of the one that holds it; else NULL */
} obj_info;

typedef struct obj_list {
	obj_info *items;
	size_t len;
	size_t cap;
} obj_list;

typedef struct storage_ops {
	err_code (*put)(storage *st, const char *key, sink **out);
	err_code (*get)(storage *st, const char *key, sink *into);
	err_code (*stat)(storage *st, const char *key, obj_info *info);
	err_code (*list)(storage *st, const char *prefix, bool recursive, obj_list *out);
	err_code (*remove)(storage *st, const char *key);
	const char *(*describe)(storage *st); /* for messages: "/path" or "s3://bucket/path" */
	void (*free)(storage *st);
	/* Optional: as put, but finish fails with E_EXISTS if key appeared meanwhile. */
	err_code (*put_new)(storage *st, const char *key, sink **out);
	/* Optional: the hidden temporaries of unfinished puts below prefix (file system). */
	err_code (*list_temporaries)(storage *st, const char *prefix, obj_list *out);
	/* Optional: deletes many objects in batched requests (S3, Azure, GCS), or on several
	 * threads (the file system). */
	err_code (*remove_many)(storage *st, const char *const *keys, size_t n);
	/* Optional: as put, for a long stream (storage_put_long). */
	err_code (*put_long)(storage *st, const char *key, sink **out);
	/* Optional: makes the repository's own folder, if the store has one (storage_prepare_write). */
	err_code (*prepare_write)(storage *st);
	/* Optional: until which time each of n objects is locked (storage_locked_until). */
	err_code (*locked_until)(storage *st, const char *const *keys, size_t n, time_t *until);
	/* Optional: len bytes of an object from offset (storage_get_range). */
	err_code (*get_range)(storage *st, const char *key, uint64_t offset, uint64_t len,
						  sink *into);
	/*
	 * Optional: the MD5 of an object's content as the store keeps it (S3's ETag of a single
	 * PUT, Azure's Content-MD5): *known false when it keeps none for this object.
	 */
	err_code (*md5)(storage *st, const char *key, unsigned char out[16], bool *known);
	/*
	 * Optional: copy src's key into st inside the store (S3 CopyObject); *done false when it
	 * cannot here (another endpoint, customer keys, refused), and nothing was changed.
	 */
	err_code (*copy_from)(storage *st, storage *src, const char *key, uint64_t size, bool *done);
	/* Optional: storage_recheck, storage_name, storage_prefer (failover storages). */
	void (*recheck)(storage *st);
	const char *(*name)(storage *st);
	void (*prefer)(storage *st, const char *name);
} storage_ops;

struct storage {
	const storage_ops *ops;
};

/*
 * HTTPS trust (tls.c): store_ca, a store's own CA setting, when set; else SSL_CERT_FILE and
 * SSL_CERT_DIR of set as Go programs take them; else the system's bundle. E_CONFIG, naming the
 * variable, when they name nothing usable. Every libcurl handle walc makes takes it; apply
 * sets a handle's options (the object must outlive the handle's transfers).
 */
typedef struct storage_tls storage_tls;
err_code storage_tls_new(const char *store_ca, const tls_settings *set, storage_tls **out);
void storage_tls_apply(const storage_tls *t, void *curl);
void storage_tls_free(storage_tls *t);

/*
 * One request outside any store (the Pushgateway's pushes) on the stores' HTTP core: its
 * timeouts, its retries with backoff (connection errors, 5xx and 429: max_retries after the
 * first attempt, each attempt at most attempt_s seconds) and its trust (store_ca, else tls, as
 * storage_tls_new takes them). A user and password in url go as Basic authentication and never
 * into a message: messages name storage_url_shown(url). It is sent even after a signal asked
 * walc to stop (it reports how a run ended). E_OK on a 2xx answer; else an error naming the URL
 * and the last answer's HTTP status or the last connection error.
 */
typedef struct storage_http_msg {
	const char *method; /* "POST", "PUT" */
	const char *url;
	const char *content_type;
	const char *body; /* body_len bytes, borrowed */
	size_t body_len;
	int max_retries;
	long attempt_s;
} storage_http_msg;
err_code storage_http_send(const storage_http_msg *m, const char *store_ca,
						   const tls_settings *tls);
/* url without its user and password, for messages (a new string). */
char *storage_url_shown(const char *url);

/* Opens the storage the configuration names (file system, S3, GCS, Azure Blob or SFTP). */
err_code storage_open(const storage_settings *cfg, storage **out);

/*
 * How a command uses WAL-G's failover storages (WALG_FAILOVER_STORAGES, failover.c): the
 * main storage, named "default", then the named others in WAL-G's order (by name), seen as one
 * storage. Which are alive is checked as WAL-G checks (WALG_FAILOVER_STORAGES_CHECK*) at the
 * first operation; a storage that is not is warned about and left out.
 */
typedef enum storage_use {
	/* The first alive storage alone (wal-push, backup-push): every operation goes there. */
	STORAGE_WRITE,
	/*
	 * Every alive storage as one: an object is read from the first that holds it, listings
	 * are the union (each key once, as the first holding it has it, obj_info.where naming
	 * it), a put updates the object wherever it is (else stores it in the first), removals
	 * reach every one.
	 */
	STORAGE_READ,
	/* As STORAGE_READ, but every storage must be alive (retention: none may be left out). */
	STORAGE_EVERY,
} storage_use;
/*
 * The storage a command uses: as storage_open when there are no failover storages, else as
 * use says. target (else WALG_TARGET_STORAGE; NULL or "" for none) names the one storage to
 * use alone ("default": the main one), which must be alive. Errors name the setting at fault.
 */
err_code storage_open_use(const storage_settings *cfg, storage_use use, const char *target, storage **out);
bool storage_has_failovers(const storage_settings *cfg);
/* The names of the storages configured, "default" first, in WAL-G's order. */
err_code storage_names(const storage_settings *cfg, char ***names, size_t *n);
/*
 * For a writer that runs long (the daemon), before each piece of work: the next operation
 * checks again which storage is the first alive when an operation on the one in use failed
 * or it was chosen longer than WALG_FAILOVER_STORAGES_CACHE_LIFETIME ago. A no-op elsewhere.
 */
void storage_recheck(storage *st);
/* WAL-G's name of the storage writes go to: a failover storage's, else "default". */
const char *storage_name(storage *st);
/*
 * A reader's reads look in the storage named first (the one a backup's sentinel was listed in,
 * so that its objects come from there, as WAL-G reads a backup); NULL: the usual order. A
 * no-op without failover storages.
 */
void storage_prefer(storage *st, const char *name);
/* The file-system backend rooted at root (absolute). */
err_code storage_fs_open(const char *root, storage **out);

/*
 * Start writing key: returns a sink whose finish() publishes the object atomically and whose
 * free() without finish discards it. Nothing is visible under key before finish succeeds.
 */
err_code storage_put(storage *st, const char *key, sink **out);
/*
 * As storage_put, for a stream expected to be long (a tar partition): stores that upload in
 * parts start with small ones, so the upload runs beside the stream from its first MiB
 * instead of waiting for a whole part; short objects (WAL) keep one request with storage_put.
 */
err_code storage_put_long(storage *st, const char *key, sink **out);
/*
 * As storage_put, for keys that must never be replaced (WAL-G's protected WAL names): finish
 * fails with E_EXISTS when another writer published key first. Backends without an atomic
 * create check before writing, which narrows the race but cannot close it.
 */
err_code storage_put_new(storage *st, const char *key, sink **out);
/* Stream the object into `into` (not finished by this call). E_NOTFOUND when absent. */
err_code storage_get(storage *st, const char *key, sink *into);
/*
 * Streams len bytes of the object from offset into `into` (not finished by this call):
 * E_CORRUPT when it is shorter. Only where storage_has_range says so.
 */
bool storage_has_range(const storage *st);
err_code storage_get_range(storage *st, const char *key, uint64_t offset, uint64_t len,
						   sink *into);
/* E_NOTFOUND when absent. info->key is left NULL. */
err_code storage_stat(storage *st, const char *key, obj_info *info);
/*
 * Objects whose key starts with prefix. prefix names a folder ("wal_005/"): recursive lists
 * everything below it, otherwise only its direct objects. A missing folder is an empty list.
 */
err_code storage_list(storage *st, const char *prefix, bool recursive, obj_list *out);
/*
 * The temporaries of puts that were never finished or discarded below prefix, with their
 * last change and, in temp_pid, the writer's process id (0 when unknown): file storage
 * writes each object under a hidden name first, and a killed writer leaves it. Stores that
 * publish atomically by themselves have none. storage_remove deletes one.
 */
err_code storage_list_temporaries(storage *st, const char *prefix, obj_list *out);
/* The process id a temporary's key names, 0 when it names none. */
long storage_temporary_pid(const char *key);
/*
 * Whether a file's name (no folder) is an unfinished upload's: walc's hidden
 * ".NAME.walc-tmp.PID.SEQ", or the "NAME.tmp.YYYYMMDDTHHMMSSZ-HEX16" that WAL-G after v3.0.9
 * writes on the file system and SFTP. Listings leave them out.
 */
bool storage_is_temporary(const char *name);
/* Deleting an absent object succeeds. */
err_code storage_remove(storage *st, const char *key);
/*
 * Deletes keys with the store's batch requests, several at once (WALG_UPLOAD_CONCURRENCY),
 * or one by one where it has none. Absent keys succeed. On failure some may be gone.
 */
err_code storage_remove_many(storage *st, const char *const *keys, size_t n);
/*
 * Before a writer's first read: the repository may not exist yet, as a new archive's does
 * not (its first write makes it). A reader of an absent file repository gets an error, not
 * "does not exist" (a mistyped prefix must not look like the end of the archive), so a writer
 * that reads first (the cluster marker) makes the repository's folder here. No-op elsewhere.
 */
err_code storage_prepare_write(storage *st);
/*
 * until[i]: the time until which keys[i] may not be deleted (S3 Object Lock), 0 when it may.
 * Stores without locks, and buckets without Object Lock, answer 0 for every key without
 * asking per object.
 */
err_code storage_locked_until(storage *st, const char *const *keys, size_t n, time_t *until);
const char *storage_describe(storage *st);
void storage_free(storage *st);

void obj_list_add(obj_list *l, const char *key, uint64_t size, time_t mtime, long nsec);
void obj_list_free(obj_list *l);

/*
 * Copies object key (size bytes, as listed) from src to dst as stored, nothing decoded:
 * inside the store when both are one S3 endpoint (*server_side), else streamed (paced by net
 * when not NULL: WALG_NETWORK_RATE_LIMIT). Then dst's
 * copy is checked: its size, and its content's MD5 where dst's store keeps one (the bytes
 * read are also held to src's MD5 where src keeps one). E_CORRUPT, naming the object, when
 * they differ; the copy is then removed.
 */
typedef struct rate rate;
err_code storage_copy(storage *src, storage *dst, const char *key, uint64_t size, rate *net,
					  bool *server_side);

/* Refuses keys that could leave the repository: empty, absolute, "..", NUL-free by type. */
err_code storage_check_key(const char *key);

#endif
