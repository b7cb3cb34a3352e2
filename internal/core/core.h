/*
 * core: errors, logging, the sink (stream) interface, configuration and small string helpers.
 * Everything else in walc builds on this header; it depends on libc only.
 */
#ifndef WALC_INTERNAL_CORE_CORE_H
#define WALC_INTERNAL_CORE_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/*
 * Every fallible function returns an err_code: 0 is success. The detail (a one-line message
 * naming what failed) lives in a per-thread record, set by err_set() at the place of failure.
 */
typedef enum err_code {
	E_OK = 0,
	E_FAIL,			/* anything not covered below */
	E_CONFIG,		/* bad configuration or arguments */
	E_IO,			/* local or remote I/O failure */
	E_NOTFOUND,		/* object or file does not exist */
	E_CORRUPT,		/* data failed a format, checksum or authentication check */
	E_EXISTS,		/* object exists with different content */
	E_CANCELLED,	/* stopped because another worker failed or a signal came */
} err_code;

#define ERR_MSG_MAX 1024

/* Sets this thread's error record and returns code, so callers write `return err_set(...)`. */
err_code err_set(err_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* As err_set, appending ": strerror(errnum)". */
err_code err_errno(err_code code, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefixes the current message with more context ("reading X: <old message>"). */
err_code err_wrap(err_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *err_msg(void);
err_code err_last(void);
void err_clear(void);
const char *err_name(err_code code);

#define TRY(expr)                                                                             \
	do {                                                                                      \
		err_code try_rc_ = (expr);                                                            \
		if (try_rc_ != E_OK)                                                                  \
			return try_rc_;                                                                   \
	} while (0)

/*
 * Cancellation of the whole run: cmd asks for it (a signal handler, a deadline); long loops,
 * retries and transfers below look and stop with E_CANCELLED. Safe in a signal handler.
 */
#define CANCEL_DEADLINE (-1) /* the reason when a deadline, not a signal, stopped the run */
void cancel_request(int reason);
/* 0, or the reason: the signal number or CANCEL_DEADLINE. */
int cancel_requested(void);
/* E_CANCELLED with a message saying why, or E_OK when nothing asked to stop. */
err_code cancel_check(void);

/* ------------------------------------------------------------------------------------------ */
/* Logging: WAL-G's line format on stderr, or one JSON object per line.                        */
/* ------------------------------------------------------------------------------------------ */

typedef enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARNING, LOG_ERROR } log_level;

/* level: minimum level printed; json: JSON lines; command: added to every JSON line. */
void log_setup(log_level level, bool json, const char *command);
bool log_enabled(log_level level);
/*
 * Keeps stderr's descriptor for the log alone, below DEVEL level: libraries that print to
 * the stderr stream on their own (Debian's librnp is built without NDEBUG and prints its
 * diagnostics there) would break the line format. Only the stream moves (to /dev/null), so
 * sanitizer and crash reports, written to descriptor 2, still show. glibc only (musl's stderr
 * is const; the static build's librnp is quiet). For the program's main, after log_setup.
 */
void log_claim_stderr(void);
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A message with structured fields: NULL-terminated key, value string pairs. Text mode prints
 * them as key=value after the message; JSON mode as members of the object.
 */
void log_fields(log_level level, const char *msg, ...) __attribute__((sentinel));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/* ------------------------------------------------------------------------------------------ */
/* Sinks: the one stream interface. A chain of filters, each pushing bytes into the next.     */
/* ------------------------------------------------------------------------------------------ */

typedef struct sink sink;

typedef struct sink_ops {
	/* Consume len bytes (borrowed). */
	err_code (*write)(sink *s, const void *buf, size_t len);
	/* End of stream: flush, verify, then finish the next sink. Called at most once. */
	err_code (*finish)(sink *s);
	/* Release this sink and the rest of the chain. A sink freed unfinished aborts its work. */
	void (*free)(sink *s);
} sink_ops;

struct sink {
	const sink_ops *ops;
	sink *next; /* owned */
};

err_code sink_write(sink *s, const void *buf, size_t len);
err_code sink_finish(sink *s);
void sink_free(sink *s); /* NULL is a no-op */

/* A sink that appends into a growable memory buffer capped at max bytes. */
typedef struct membuf {
	unsigned char *data;
	size_t len;
	size_t cap;
	size_t max;
} membuf;
sink *membuf_sink_new(membuf *into); /* borrows into; the caller frees into->data */
/* Appends len bytes; E_CORRUPT past max (which must be set: membuf_sink_new sets 0 to none). */
err_code membuf_add(membuf *mb, const void *buf, size_t len);
/* A pass-through sink calling on_bytes(arg, buf, len) for every write (borrows arg, owns next). */
sink *tap_sink_new(void (*on_bytes)(void *arg, const void *buf, size_t len), void *arg, sink *next);
/* A sink that adds the bytes passing through to *counter (atomically) and forwards them. */
sink *count_sink_new(uint64_t *counter, sink *next);
/*
 * Progress of a long transfer (progress.c): bytes of total (0: unknown), files, logged at
 * most every ten seconds by progress_add from any thread, with the rate and the time left;
 * progress_log logs it now (the last line). progress_bytes suits tap_sink_new.
 */
typedef struct progress {
	const char *what; /* "backup-fetch base_...", borrowed */
	uint64_t total;
	uint64_t done, files; /* atomic */
	int64_t started_ms, last_ms;
} progress;
void progress_start(progress *p, const char *what, uint64_t total);
void progress_add(progress *p, uint64_t bytes, uint64_t files);
void progress_bytes(void *arg, const void *buf, size_t len);
void progress_log(progress *p);
/* A sink that discards. */
sink *null_sink_new(void);
/* A sink that compares the stream with a file's bytes: *equal set at finish. Borrows path. */
sink *compare_sink_new(const char *path, bool *equal);
/* The same against len bytes in memory (borrowed). */
sink *compare_mem_sink_new(const void *buf, size_t len, bool *equal);
/*
 * A sink that writes path atomically: a hidden temporary in the same directory, fsync (when
 * durable), rename at finish, fsync of the directory. Freed unfinished, it leaves nothing.
 * Refuses to replace an existing path unless replace is set.
 */
err_code file_sink_new(const char *path, bool durable, bool replace, sink **out);
/*
 * Who a new file or folder is given to (chown; set false: nobody). uid or gid (unsigned)-1
 * leaves that one. A failing chown leaves the creator's (a writer that may not give its files
 * away).
 */
typedef struct file_owner {
	bool set;
	unsigned uid, gid;
} file_owner;
/*
 * The same with every choice: mode of the new file (0 = 0600), its folders created, the file
 * and the folders made given to owner (NULL: kept).
 */
typedef struct file_sink_opts {
	bool durable;
	bool replace;
	unsigned mode;
	bool make_parents;
	const file_owner *owner;
} file_sink_opts;
err_code file_sink_open(const char *path, const file_sink_opts *o, sink **out);
/* In the hidden temporary's name of an unfinished file: ".NAME.walc-tmp.PID.SEQ". */
#define FILE_TMP_MARK ".walc-tmp."
/* Push a whole file through a sink in chunks (does not finish the sink). */
err_code sink_write_file(sink *s, const char *path);
/* The same from an open descriptor until its end (standard input); what names it in errors. */
err_code sink_write_fd(sink *s, int fd, const char *what);
/* len bytes of a file from offset on; E_CORRUPT when the file ends first. */
err_code sink_write_file_range(sink *s, const char *path, uint64_t offset, uint64_t len);

/*
 * Chunker: feeds put() pieces of exactly size bytes (but the last), or with pass_large
 * gathers small writes into pieces of up to size bytes and passes bigger writes on whole.
 * hold_last: a full piece waits until more bytes come, so the caller decides at the end
 * (chunker_flush) what the last one is. buf is fixed, or with get() fresh for every piece
 * (the piece's buffer is then the consumer's).
 */
typedef struct chunker {
	size_t size;
	bool hold_last;
	bool pass_large;
	unsigned char *buf;
	size_t fill;
	err_code (*get)(void *arg, unsigned char **buf);
	err_code (*put)(void *arg, const unsigned char *data, size_t len);
	void *arg;
} chunker;
err_code chunker_write(chunker *c, const void *data, size_t len);
/* Passes on what is held, if anything. */
err_code chunker_flush(chunker *c);

/* ------------------------------------------------------------------------------------------ */
/* Configuration: one table of every setting (configvars.c), read once into this struct.      */
/* ------------------------------------------------------------------------------------------ */

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
	long upload_concurrency;	/* WALG_UPLOAD_CONCURRENCY */
	long download_concurrency;	/* WALG_DOWNLOAD_CONCURRENCY */
	s3_settings s3;
	az_settings az;
	gcs_settings gcs;
	ssh_settings ssh;
	tls_settings tls;
} storage_settings;

/* The keys, as named: all that crypter_load reads (crypt reads and derives the material). */
typedef struct crypt_settings {
	char *libsodium_key;			/* WALG_LIBSODIUM_KEY */
	char *libsodium_key_path;		/* WALG_LIBSODIUM_KEY_PATH */
	char *libsodium_key_transform;	/* WALG_LIBSODIUM_KEY_TRANSFORM */
	char *pgp_key;					/* WALG_PGP_KEY */
	char *pgp_key_path;				/* WALG_PGP_KEY_PATH */
	char *pgp_key_passphrase;		/* WALG_PGP_KEY_PASSPHRASE */
	char *old_key_paths;			/* WALG_OLD_KEY_PATHS (walc extension): the key ring's older keys */
	char *old_pgp_key_passphrase;	/* WALG_OLD_PGP_KEY_PASSPHRASE (walc extension) */
} crypt_settings;

/* Every setting: each module's part, and what the modules above repo read. */
typedef struct config {
	storage_settings storage;
	crypt_settings crypt;
	/* compression */
	char *compression;		/* WALG_COMPRESSION_METHOD */
	long compression_level; /* WALG_COMPRESSION_LEVEL (walc extension) or WALG_ZSTD_LEVEL */
	char *zstd_level;		/* WALG_ZSTD_LEVEL: fastest, default, better or best */
	/* behaviour */
	bool prevent_wal_overwrite;
	bool tar_disable_fsync;	/* WALG_TAR_DISABLE_FSYNC */
	bool delta_restore;			/* WALG_DELTA_RESTORE: backup-fetch --delta */
	long total_bg_uploaded_limit;	/* TOTAL_BG_UPLOADED_LIMIT */
	bool pg_ready_rename;			/* PG_READY_RENAME */
	long wal_push_timeout_ms;		/* WALG_WAL_PUSH_TIMEOUT, 0 = none */
	char *wal_backlog_max;			/* WALG_WAL_BACKLOG_MAX (walc extension), as given */
	uint64_t wal_backlog_max_bytes;	/* ... in bytes, 0 = no limit */
	char *prefetch_dir;				/* WALG_PREFETCH_DIR */
	long integrity_max_delayed_wals; /* WALG_INTEGRITY_MAX_DELAYED_WALS */
	char *metrics_address;			/* WALG_METRICS_ADDRESS, host:port for the daemon */
	char *pushgateway_url;			/* WALG_PUSHGATEWAY_URL, for backup-push and delete */
	char *slot_name;				/* WALG_SLOTNAME, wal-receive's replication slot */
	char *upload_wal_metadata;		/* WALG_UPLOAD_WAL_METADATA: NOMETADATA, INDIVIDUAL or BULK */
	long upload_disk_concurrency;	/* WALG_UPLOAD_DISK_CONCURRENCY */
	long tar_size_threshold;		/* WALG_TAR_SIZE_THRESHOLD, bytes */
	long alive_check_ms;			/* WALG_ALIVE_CHECK_INTERVAL, 0 = off */
	long stop_backup_timeout_ms;	/* WALG_STOP_BACKUP_TIMEOUT, 0 = wait */
	char *sentinel_user_data;		/* WALG_SENTINEL_USER_DATA, JSON text */
	long delta_max_steps;			/* WALG_DELTA_MAX_STEPS, 0 = full backups only */
	char *delta_origin;				/* WALG_DELTA_ORIGIN: LATEST or LATEST_FULL */
	bool delta_origin_full;			/* ... it is LATEST_FULL */
	char *delta_from_name;			/* WALG_DELTA_FROM_NAME */
	char *delta_from_user_data;		/* WALG_DELTA_FROM_USER_DATA */
	char *fetch_target_user_data;	/* WALG_FETCH_TARGET_USER_DATA */
	bool without_files_metadata;	/* WALG_WITHOUT_FILES_METADATA */
	bool disable_partial_restore;	/* WALG_DISABLE_PARTIAL_RESTORE */
	bool verify_page_checksums;		/* WALG_VERIFY_PAGE_CHECKSUMS */
	bool store_all_corrupt_blocks;	/* WALG_STORE_ALL_CORRUPT_BLOCKS */
	long disk_rate_limit;			/* WALG_DISK_RATE_LIMIT, bytes/s, 0 = none */
	char *remote_compression;		/* WALG_REMOTE_COMPRESSION (walc extension), NULL = none */
	long network_rate_limit;		/* WALG_NETWORK_RATE_LIMIT, bytes/s, 0 = none */
	long pg_wal_size_mb;			/* WALG_PG_WAL_SIZE */
	bool allow_system_id_change;	/* WALG_ALLOW_SYSTEM_ID_CHANGE (walc extension) */
	/* logging */
	char *log_level_name;	/* WALG_LOG_LEVEL */
	log_level log_level;
	char *log_format;		/* WALG_LOG_FORMAT */
	bool log_json;
	char *log_destination;	/* WALG_LOG_DESTINATION, NULL = stderr */
	bool logging_loaded;	/* the four above are valid even when config_load failed later */
	/* postgres */
	char *pgdata;			/* PGDATA */
	char *pg_appname;		/* PGAPPNAME */
} config;

/*
 * Where settings come from besides the environment, as in WAL-G: command-line flags
 * (--walg-s3-prefix=..., highest precedence), then the environment, then a configuration
 * file's entries. The caller (cmd) parses both; config only reads the name/value pairs.
 */
typedef struct config_pair {
	const char *name;
	const char *value;
} config_pair;

typedef struct config_sources {
	const config_pair *flags;
	size_t nflags;
	const config_pair *file;
	size_t nfile;
	const char *file_name; /* for messages, or NULL */
} config_sources;

/*
 * Reads and validates every setting. On a bad value returns E_CONFIG with a message naming
 * the setting (and the file it came from) and what is accepted; a WAL-G setting walc does not
 * implement that would change what is stored or how it is protected is an error too.
 * need_storage: fail when no storage prefix is set (checked last). src may be NULL.
 */
err_code config_load_from(config *out, bool need_storage, const config_sources *src);
/* config_load_from with the environment only. */
err_code config_load(config *out, bool need_storage);
/*
 * Every setting at the table's default, whatever the environment: the configuration tests
 * build on (modules keep no fallbacks of their own for an unset setting). config_free it.
 */
err_code config_defaults(config *out);
void config_free(config *c);
/*
 * The storage settings of another storage (a WALG_FAILOVER_STORAGES entry, a copy --from/--to
 * file): base's, with each storage setting that pairs sets in place of base's, as WAL-G takes
 * them; no failover storages or target of its own. Where the storage is (WALG_FILE_PREFIX,
 * WALG_S3_PREFIX, ...; with CFS_FILE WALG_STORAGE_PREFIX too) comes from pairs only. A
 * refused setting in pairs is an error; any other that is not a storage setting is ignored,
 * with a warning unless CFS_FILE (a whole configuration file). Errors start with what.
 */
#define CFS_FILE 1u
err_code config_for_storage(const storage_settings *base, const char *what,
							const config_pair *pairs, size_t n, unsigned flags,
							storage_settings *out);
/* A copy of src that owns its own strings; config_storage_free it. */
void config_storage_copy(const storage_settings *src, storage_settings *dst);
void config_storage_free(storage_settings *s);
/* One value, for modules with settings of their own: a message names `name` on error. */
err_code config_parse_bool(const char *name, const char *value, bool def, bool *out);
err_code config_parse_long(const char *name, const char *value, long def, long min, long max,
						   long *out);
/* A Go duration ("500ms", "1m30s"; a bare number is seconds) in milliseconds. */
err_code config_parse_duration(const char *name, const char *value, long *ms);
/*
 * The setting a flag name sets ("walg-s3-prefix" or "pghost" -> "WALG_S3_PREFIX",
 * "PGHOST"), as WAL-G exposes every setting as a hidden flag; NULL when none does. *is_bool
 * tells whether the flag may stand without a value.
 */
const char *config_flag_setting(const char *flag, bool *is_bool);
/* Whether name is a setting of the table (any class), so a file's key is not unknown. */
bool config_known(const char *name);
/*
 * Calls fn for every setting walc implements that is set (from a flag, the environment or
 * the configuration file), with the name it was set under and its value. Settings libpq
 * reads itself are left out.
 */
void config_each_set(void (*fn)(const char *name, const char *value, bool secret, void *arg),
					 void *arg);
/* Prints every setting walc reads: value (secrets masked) and its source, default, meaning. */
void config_print_env(FILE *out);
/* At DEVEL level, logs each setting that is set (secrets masked). */
void config_log_env(void);
/*
 * Warns about WALG_* variables (and file entries) walc does not know or does not implement,
 * notes no-op ones at DEVEL level. per_segment: the command runs once a WAL segment
 * (wal-push, wal-fetch), whose log would repeat the warnings with every segment: they are
 * DEVEL lines there too.
 */
void config_warn_unknown(bool per_segment);

/* ------------------------------------------------------------------------------------------ */
/* Checksums: XXH3-128 of file content, as "xxh3-128:<32 hex digits>"                        */
/* ------------------------------------------------------------------------------------------ */

#define HASH_TEXT_LEN 41 /* "xxh3-128:" + 32 hex digits */

typedef struct hasher hasher;
hasher *hasher_new(void);
void hasher_update(hasher *h, const void *buf, size_t len);
/* Writes the text form; the hasher can be freed or reset after. */
void hasher_text(hasher *h, char out[HASH_TEXT_LEN + 1]);
void hasher_free(hasher *h);
/* The text form of a sum v (high half first), and back: false unless text is that form. */
void hash_text_format(const uint64_t v[2], char out[HASH_TEXT_LEN + 1]);
bool hash_text_parse(const char *text, uint64_t v[2]);
/* XXH3-128 of len bytes, high half first: a name's key in tables that do not keep names. */
void hash128(const void *data, size_t len, uint64_t out[2]);
/* qsort/bsearch order of two hash128 values, or of records that start with one. */
int hash128_cmp(const void *a, const void *b);
/*
 * A sorted table of 128-bit keys, each with nfields (up to KEYTAB_FIELDS) numbers (keytab.c):
 * a few bytes a key when keys come in close runs, as pg_name_key's do for a folder's relation
 * files, 17 or more when they are hashes. Filled in any order, then finished once; what a
 * restore or a delta push keeps of a backup's files, or a set of names with no numbers.
 */
#define KEYTAB_FIELDS 3
typedef struct keytab keytab;
keytab *keytab_new(unsigned nfields);
void keytab_add(keytab *t, const uint64_t key[2], const uint64_t *fields);
/* Sorts what was added; a key added twice is kept once with every number 0, and true returned. */
bool keytab_finish(keytab *t);
/* Keys in the finished table; 0 for NULL. */
size_t keytab_count(const keytab *t);
/* Whether t (NULL: empty) has key; then its numbers and its place in key order, when asked. */
bool keytab_find(const keytab *t, const uint64_t key[2], uint64_t *fields, size_t *at);
typedef void (*keytab_fn)(void *arg, const uint64_t key[2], const uint64_t *fields, size_t at);
/* fn for every key in order. */
void keytab_each(const keytab *t, keytab_fn fn, void *arg);
void keytab_free(keytab *t);
/* Hashes a whole file; E_NOTFOUND when it does not exist. */
err_code hash_file(const char *path, char out[HASH_TEXT_LEN + 1], uint64_t *size);

/* ------------------------------------------------------------------------------------------ */
/* Tables: WAL-G's two shapes, space-padded columns or a framed ASCII table                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct table table;
/* right: per column, align right (numbers); NULL = all left. Borrows headers and right. */
table *table_new(int ncols, const char *const *headers, const bool *right);
/* Takes ncols strings (copied). */
void table_add(table *t, const char *const *cells);
/* framed: +---+ borders; otherwise columns padded with spaces, last column unpadded. */
void table_print(const table *t, FILE *out, bool framed);
void table_free(table *t);

/* ------------------------------------------------------------------------------------------ */
/* Strings and small helpers                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Allocation that aborts on out-of-memory: there is nothing sensible left to do. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* qsort for any n: qsort's pointer may not be NULL even with nothing to sort, and an empty
 * list's is. */
void xqsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * From now on, memory is asked of the system in transparent huge pages where it gives them on
 * request (THP "madvise"), so fresh buffers fault in 2 MiB at a time instead of 4 KiB. Only
 * the static binary's allocator (mimalloc) does so; elsewhere a no-op. Call it before the
 * first allocation, and only in a short process that fills its buffers at once: mimalloc
 * gives such memory back only a whole 32 MiB segment at a time, so a long command's peak RSS
 * would grow.
 */
void mem_use_huge_pages(void);

/*
 * Fixed-size records gathered in 1 MiB blocks, for a table whose length is known only once it
 * is read (a base's Files): adding never copies, so the peak is the records plus a block
 * rather than the old and new arrays of a realloc that copies (mimalloc's, in the static
 * build, cannot grow in place). recs_take hands the records over as one exact array.
 */
typedef struct recs {
	size_t size; /* bytes a record: set before the first recs_add */
	size_t n;	 /* records added */
	char **blocks;
	size_t nblocks;
} recs;
/* A new record, zeroed, the n-th. */
void *recs_add(recs *r);
/* The n records in one allocation, in order (NULL when none); r is left empty. */
void *recs_take(recs *r);
void recs_free(recs *r);

/* RFC 3339 with optional fraction and zone ("Z", "+01:00") -> seconds and nanoseconds. */
bool time_parse_rfc3339(const char *s, time_t *sec, long *nsec);
/*
 * A time as an operator types it for recovery_target_time: RFC 3339, or PostgreSQL's
 * timestamptz output ("2026-12-06 02:04:42.777878+00": a space, an offset of hours, hours and
 * minutes with or without a colon), or either with " UTC". NULL when it parses, else why not.
 */
const char *time_parse_target(const char *s, time_t *sec, long *nsec);
/* -1, 0 or 1 as (sec1, nsec1) is before, at or after (sec2, nsec2). */
int time_cmp(time_t sec1, long nsec1, time_t sec2, long nsec2);
/* Now as WAL-G writes backup times: UTC with microseconds, "2026-11-29T23:42:29.586708Z". */
char *time_now_rfc3339(void);
/* A time in UTC as Go's RFC3339Nano prints it: the fraction without trailing zeros, or none. */
char *time_format_rfc3339(time_t sec, long nsec);
/* clock's time ms milliseconds from now: the deadline of a timed wait (pthread_cond_timedwait). */
struct timespec time_in_ms(clockid_t clock, long ms);

bool str_has_prefix(const char *s, const char *prefix);
bool str_has_suffix(const char *s, const char *suffix);

/* Write all of buf to fd, retrying on EINTR and short writes. */
err_code fd_write_all(int fd, const void *buf, size_t len, const char *what);
/* fsync the directory holding path. */
err_code fsync_parent_dir(const char *path);
/* Fill a fixed buffer from a stream: copies min(room, *len) bytes of *p to dst, advances *p and
 * shrinks *len past them; returns how many. */
size_t take_bytes(unsigned char *dst, size_t room, const unsigned char **p, size_t *len);
/* mkdir -p with mode. */
err_code mkdir_p(const char *path, unsigned mode);
/* The same, each folder it makes given to owner (NULL: kept). */
err_code mkdir_p_owned(const char *path, unsigned mode, const file_owner *owner);
/* mkdir -p of the folder holding path (nothing for a bare name or one under "/"). */
err_code mkdir_parent(const char *path, unsigned mode);

#endif
