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

/* S3 settings (each also read as WALG_NAME and WALE_NAME, as WAL-G does). */
typedef struct s3_settings {
	char *endpoint;				/* AWS_ENDPOINT, else from WALE_S3_ENDPOINT */
	char *wale_endpoint;		/* WALE_S3_ENDPOINT as given, when it is the endpoint */
	char *region;				/* AWS_REGION, NULL = us-east-1 or detected on AWS */
	bool force_path_style;		/* AWS_S3_FORCE_PATH_STYLE */
	char *sse;					/* S3_SSE: AES256 or aws:kms */
	char *sse_kms_id;			/* S3_SSE_KMS_ID */
	char *sse_c;				/* S3_SSE_C, 32 bytes */
	char *storage_class;		/* S3_STORAGE_CLASS */
	long retention_period;		/* S3_RETENTION_PERIOD: Object Lock seconds, -1 = off */
	char *retention_mode;		/* S3_RETENTION_MODE: GOVERNANCE or COMPLIANCE */
	char *ca_cert_file;			/* S3_CA_CERT_FILE */
	long max_part_size;			/* S3_MAX_PART_SIZE */
	long max_retries;			/* S3_MAX_RETRIES */
	long connect_timeout;		/* S3_CONNECT_TIMEOUT, seconds */
	long low_speed_timeout;		/* S3_LOW_SPEED_TIMEOUT, seconds */
	long delete_batch_size;		/* S3_DELETE_BATCH_SIZE: keys per DeleteObjects request */
	/* credentials, as the AWS SDK reads them (no WALG_ forms) */
	char *access_key;			/* AWS_ACCESS_KEY_ID or AWS_ACCESS_KEY */
	char *secret_key;			/* AWS_SECRET_ACCESS_KEY or AWS_SECRET_KEY */
	char *session_token;		/* AWS_SESSION_TOKEN */
	char *web_identity_token_file; /* AWS_WEB_IDENTITY_TOKEN_FILE */
	char *role_arn;				/* AWS_ROLE_ARN */
	char *role_session_name;	/* AWS_ROLE_SESSION_NAME */
	char *sts_endpoint;			/* AWS_STS_ENDPOINT */
	char *shared_credentials_file; /* AWS_SHARED_CREDENTIALS_FILE */
	char *profile;				/* AWS_PROFILE or AWS_DEFAULT_PROFILE */
	char *container_relative_uri; /* AWS_CONTAINER_CREDENTIALS_RELATIVE_URI */
	char *container_full_uri;	/* AWS_CONTAINER_CREDENTIALS_FULL_URI */
	char *container_token;		/* AWS_CONTAINER_AUTHORIZATION_TOKEN */
	char *container_token_file; /* AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, re-read each time */
	bool ec2_metadata_disabled; /* AWS_EC2_METADATA_DISABLED */
	char *ec2_metadata_endpoint; /* AWS_EC2_METADATA_SERVICE_ENDPOINT */
	char *ec2_metadata_mode;	/* AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE: IPv4 or IPv6 */
	char *home;					/* HOME, for ~/.aws/credentials */
} s3_settings;

/* Azure Blob Storage settings (the AZURE_STORAGE_* and buffer ones also as WALG_, WALE_). */
typedef struct az_settings {
	char *account;				/* AZURE_STORAGE_ACCOUNT */
	char *access_key;			/* AZURE_STORAGE_ACCESS_KEY (Shared Key) */
	char *sas_token;			/* AZURE_STORAGE_SAS_TOKEN */
	char *endpoint_suffix;		/* AZURE_ENDPOINT_SUFFIX, e.g. core.windows.net */
	char *environment_name;		/* AZURE_ENVIRONMENT_NAME */
	long buffer_size;			/* AZURE_BUFFER_SIZE: block size, bytes */
	long max_buffers;			/* AZURE_MAX_BUFFERS: blocks in flight */
	long try_timeout;			/* AZURE_TRY_TIMEOUT: minutes per attempt */
	char *api_version;			/* AZURE_BLOB_STORE_API_VERSION (x-ms-version) */
	long max_retries;			/* AZURE_MAX_RETRIES (walc) */
	char *ca_cert_file;			/* AZURE_CA_CERT_FILE (walc) */
	/* Azure AD, as the Azure SDK reads them */
	char *client_id;			/* AZURE_CLIENT_ID */
	char *tenant_id;			/* AZURE_TENANT_ID */
	char *client_secret;		/* AZURE_CLIENT_SECRET */
	char *federated_token_file; /* AZURE_FEDERATED_TOKEN_FILE (AKS workload identity) */
	char *authority_host;		/* AZURE_AUTHORITY_HOST */
	char *imds_endpoint;		/* AZURE_IMDS_ENDPOINT (walc): managed identity endpoint */
} az_settings;

/* Google Cloud Storage settings (GCS_* also as WALG_GCS_*, WALE_GCS_*). */
typedef struct gcs_settings {
	char *credentials_file;		/* GOOGLE_APPLICATION_CREDENTIALS: service-account JSON */
	long context_timeout;		/* GCS_CONTEXT_TIMEOUT, seconds */
	bool normalize_prefix;		/* GCS_NORMALIZE_PREFIX */
	char *encryption_key;		/* GCS_ENCRYPTION_KEY: base64 of a 32-byte key */
	long max_chunk_size;		/* GCS_MAX_CHUNK_SIZE, bytes */
	long max_retries;			/* GCS_MAX_RETRIES */
	char *emulator_host;		/* STORAGE_EMULATOR_HOST: host:port, plain HTTP, no auth */
	char *metadata_host;		/* GCE_METADATA_HOST (default metadata.google.internal) */
	char *endpoint;				/* GCS_ENDPOINT (walc): base URL, authenticated */
} gcs_settings;

/* SFTP storage settings (also as WALG_SSH_*, WALE_SSH_*). */
typedef struct ssh_settings {
	long port;					/* SSH_PORT */
	char *username;				/* SSH_USERNAME, NULL: the OS user's name */
	char *password;				/* SSH_PASSWORD */
	char *private_key_path;		/* SSH_PRIVATE_KEY_PATH */
	char *key_passphrase;		/* SSH_PRIVATE_KEY_PASSPHRASE (walc) */
	char *known_hosts;			/* SSH_KNOWN_HOSTS (walc): the host key must match, NULL: any */
	long max_retries;			/* SSH_MAX_RETRIES (walc) */
} ssh_settings;

/* Trust for HTTPS as Go programs such as WAL-G take it (crypto/x509 on Linux). */
typedef struct tls_settings {
	char *cert_file; /* SSL_CERT_FILE: a CA bundle in place of the system's */
	char *cert_dir;	 /* SSL_CERT_DIR: ':'-separated directories in place of the system's */
} tls_settings;

/* Where a repository is and how its stores are reached: all that storage_open reads. */
typedef struct storage_settings {
	char *file_prefix;		/* WALG_FILE_PREFIX, normalised to an absolute path */
	char *s3_prefix;		/* WALG_S3_PREFIX */
	char *gs_prefix;		/* WALG_GS_PREFIX */
	char *az_prefix;		/* WALG_AZ_PREFIX */
	char *ssh_prefix;		/* WALG_SSH_PREFIX */
	char *storage_prefix;	/* WALG_STORAGE_PREFIX */
	char *failover_storages; /* WALG_FAILOVER_STORAGES: JSON, parsed by storage */
	bool failover_check;	/* WALG_FAILOVER_STORAGES_CHECK */
	long failover_check_timeout_ms; /* WALG_FAILOVER_STORAGES_CHECK_TIMEOUT */
	char *failover_check_size;		/* WALG_FAILOVER_STORAGES_CHECK_SIZE, as given */
	uint64_t failover_check_bytes;	/* ... in bytes */
	long failover_cache_lifetime_ms; /* WALG_FAILOVER_STORAGES_CACHE_LIFETIME */
	char *target_storage;	/* WALG_TARGET_STORAGE, NULL: none */
	/* WALG_FAILOVER_STORAGES' entries with their settings, which the caller resolves */
	struct storage_failover *failovers;
	size_t nfailovers;
	long upload_concurrency;	/* WALG_UPLOAD_CONCURRENCY */
	long download_concurrency;	/* WALG_DOWNLOAD_CONCURRENCY */
	s3_settings s3;
	az_settings az;
	gcs_settings gcs;
	ssh_settings ssh;
	tls_settings tls;
} storage_settings;

/* A failover storage: its name and its own settings (storage_entries' entry, resolved). */
typedef struct storage_failover {
	char *name;
	storage_settings settings;
} storage_failover;

/*
 * WALG_FAILOVER_STORAGES as written: each entry's name and its settings' names (upper case)
 * and values, in WAL-G's order. The caller turns each into a storage_failover (storage does
 * not know how a setting is parsed). None when it is unset. storage_entries_free them.
 */
typedef struct storage_entry {
	char *name;
	config_pair *pairs;
	size_t n;
} storage_entry;
err_code storage_entries(const storage_settings *s, storage_entry **out, size_t *n);
void storage_entries_free(storage_entry *e, size_t n);


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
 * use says, the failover storages being cfg->failovers (storage_entries resolved by the
 * caller). target (else WALG_TARGET_STORAGE; NULL or "" for none) names the one storage to
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
