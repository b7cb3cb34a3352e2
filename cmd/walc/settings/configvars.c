/*
 * Every setting walc reads, and every WAL-G v3.0.9 setting (its internal/config/config.go) it
 * does not implement, with what walc does about each. This table drives loading, validation,
 * defaults, `walc env`, the hidden per-setting flags and the unknown-variable warning: each
 * default is written here once.
 */
#include "cmd/walc/settings/config_impl.h"

#include <limits.h>

#define FIELD_AT(field) offsetof(config, field)
#define TEXT(n, field, fl, def, help) { n, V_TEXT, def, 0, 0, NULL, fl, FIELD_AT(field), NULL, help }
#define BOOL(n, field, fl, def, help) { n, V_BOOL, def, 0, 0, NULL, fl, FIELD_AT(field), NULL, help }
#define INT(n, field, fl, def, lo, hi, help) \
	{ n, V_INT, def, lo, hi, NULL, fl, FIELD_AT(field), NULL, help }
#define DURATION(n, field, fl, def, help) \
	{ n, V_DURATION, def, 0, 0, NULL, fl, FIELD_AT(field), NULL, help }
#define CHOICE(n, field, fl, def, choices, help) \
	{ n, V_CHOICE, def, 0, 0, choices, fl, FIELD_AT(field), NULL, help }
#define LIBPQ(n, fl, help) { n, V_TEXT, NULL, 0, 0, NULL, fl, NO_FIELD, NULL, help }
#define REFUSED(n, fl, off_value, why) { n, V_REFUSED, off_value, 0, 0, NULL, fl, NO_FIELD, NULL, why }
#define WARN(n) { n, V_WARN, NULL, 0, 0, NULL, 0, NO_FIELD, NULL, NULL }
#define NOOP(n) { n, V_NOOP, NULL, 0, 0, NULL, 0, NO_FIELD, NULL, NULL }
/* A name an operator's scripts write beside WAL-G's settings and read themselves. */
#define OPERATOR(n, fl, why) { n, V_NOOP, NULL, 0, 0, NULL, fl, NO_FIELD, NULL, why }
#define S3(field) FIELD_AT(storage.s3.field)

#define NO_GPG                                                                                \
	"walc does not read gpg keyrings; export the key into WALG_PGP_KEY_PATH (WAL-G v3.0.9 "  \
	"stores plaintext with only this set)"
#define NO_ENVELOPE "walc does not support envelope encryption; use WALG_PGP_KEY or WALG_LIBSODIUM_KEY"
#define NO_KMS                                                                                \
	"walc does not support KMS client-side encryption; use WALG_LIBSODIUM_KEY (or "          \
	"S3_SSE=aws:kms for server-side encryption)"
#define NO_STORE                                                                              \
	"walc supports WALG_FILE_PREFIX, WALG_S3_PREFIX, WALG_GS_PREFIX, WALG_AZ_PREFIX and "      \
	"WALG_SSH_PREFIX storage"

const config_var config_vars[] = {
	{ "WALG_CONFIG_PATH", V_TEXT, NULL, 0, 0, NULL, 0, NO_FIELD, NULL,
	  "WAL-G configuration file (JSON) read below the environment; default ~/.walg.json" },
	/* storage */
	TEXT("WALG_FILE_PREFIX", storage.file_prefix, F_WALE | F_WHERE, NULL,
		 "file-system repository: an absolute path or file://localhost/abs/path"),
	TEXT("WALG_S3_PREFIX", storage.s3_prefix, F_WALE | F_WHERE, NULL, "S3 repository: s3://bucket/path"),
	TEXT("WALG_GS_PREFIX", storage.gs_prefix, F_WALE | F_WHERE, NULL,
		 "Google Cloud Storage repository: gs://bucket/path"),
	TEXT("WALG_AZ_PREFIX", storage.az_prefix, F_WALE | F_WHERE, NULL,
		 "Azure Blob Storage repository: azure://container/path"),
	TEXT("WALG_SSH_PREFIX", storage.ssh_prefix, F_WALE | F_WHERE, NULL,
		 "SFTP repository: ssh://host/path (no path: the login folder)"),
	TEXT("WALG_STORAGE_PREFIX", storage.storage_prefix, F_STORE, NULL, "extra folder below the repository prefix"),
	/* failover storages, as WAL-G's (docs/STORAGE.md, "Failover storages") */
	TEXT("WALG_FAILOVER_STORAGES", storage.failover_storages, F_SECRET | F_RAW, NULL,
		 "more storages, as JSON: {\"NAME\": {\"WALG_S3_PREFIX\": \"s3://...\", ...}, ...}; "
		 "writes go to the first alive of the main storage then these by name, reads find "
		 "an object in any"),
	BOOL("WALG_FAILOVER_STORAGES_CHECK", storage.failover_check, 0, "true",
		 "check that a storage is alive (it lists; a writer also stores and removes an object) "
		 "before using it"),
	DURATION("WALG_FAILOVER_STORAGES_CHECK_TIMEOUT", storage.failover_check_timeout_ms, 0, "30s",
			 "a storage whose check takes longer is not alive"),
	TEXT("WALG_FAILOVER_STORAGES_CHECK_SIZE", storage.failover_check_size, 0, "1mb",
		 "bytes of the object a writer's check stores (100, 1kb, 1mb ...)"),
	DURATION("WALG_FAILOVER_STORAGES_CACHE_LIFETIME", storage.failover_cache_lifetime_ms, 0, "15m",
			 "the daemon checks the storages again after this long, or after a failure"),
	TEXT("WALG_TARGET_STORAGE", storage.target_storage, 0, NULL,
		 "the storage commands use alone, by name (\"default\": the main one), as "
		 "--target-storage"),
	/* compression and encryption */
	CHOICE("WALG_COMPRESSION_METHOD", repo.compression, 0, "lz4", "lz4|zstd|brotli|lzma|none",
		   "lz4, zstd, brotli, lzma or none"),
	INT("WALG_COMPRESSION_LEVEL", repo.compression_level, F_EXT, "0", 0, 22,
		"codec level, 0 = WAL-G's default (lz4 1-12, zstd 1-22, brotli 0-11, lzma 0-9)"),
	CHOICE("WALG_ZSTD_LEVEL", repo.zstd_level, 0, NULL, "fastest|default|better|best",
		   "zstd level by WAL-G's name: fastest (1), default (3), better (7) or best (11)"),
	TEXT("WALG_LIBSODIUM_KEY", crypt.libsodium_key, F_SECRET | F_RAW, NULL,
		 "libsodium encryption key material"),
	TEXT("WALG_LIBSODIUM_KEY_PATH", crypt.libsodium_key_path, 0, NULL, "file holding the libsodium key"),
	CHOICE("WALG_LIBSODIUM_KEY_TRANSFORM", crypt.libsodium_key_transform, 0, "none", "none|hex|base64",
		   "how the key material becomes 32 bytes: none, hex or base64"),
	TEXT("WALG_PGP_KEY", crypt.pgp_key, F_SECRET | F_RAW, NULL,
		 "OpenPGP: armored key text (\\n escapes allowed); public to push, secret to fetch"),
	TEXT("WALG_PGP_KEY_PATH", crypt.pgp_key_path, 0, NULL, "OpenPGP: file holding the armored key"),
	TEXT("WALG_PGP_KEY_PASSPHRASE", crypt.pgp_key_passphrase, F_SECRET | F_RAW, NULL,
		 "OpenPGP: passphrase of a protected secret key"),
	TEXT("WALG_OLD_KEY_PATHS", crypt.old_key_paths, F_EXT, NULL,
		 "older keys reads also try (key rotation, walc rekey): comma-separated files, each a "
		 "libsodium key ([hex:|base64:|none:]PATH; default WALG_LIBSODIUM_KEY_TRANSFORM) or an "
		 "armored OpenPGP secret key; writes use the current key only"),
	TEXT("WALG_OLD_PGP_KEY_PASSPHRASE", crypt.old_pgp_key_passphrase, F_EXT | F_SECRET | F_RAW, NULL,
		 "passphrase of the protected OpenPGP keys in WALG_OLD_KEY_PATHS (default: "
		 "WALG_PGP_KEY_PASSPHRASE)"),
	/* WAL */
	BOOL("WALG_PREVENT_WAL_OVERWRITE", wal.prevent_wal_overwrite, 0, "false",
		 "refuse to overwrite an archived WAL file with different content"),
	INT("WALG_UPLOAD_CONCURRENCY", storage.upload_concurrency, 0, "16", 1, 1024, "parallel uploads"),
	INT("WALG_DOWNLOAD_CONCURRENCY", storage.download_concurrency, 0, "10", 1, 1024,
		"parallel downloads"),
	INT("TOTAL_BG_UPLOADED_LIMIT", wal.total_bg_uploaded_limit, 0, "32", 1, 100000,
		"wal-push: at most this many - 1 other .ready files uploaded by one call"),
	BOOL("PG_READY_RENAME", wal.pg_ready_rename, 0, "false",
		 "wal-push: rename archive_status/X.ready to X.done after a background upload"),
	TEXT("WALG_PREFETCH_DIR", wal.prefetch_dir, 0, NULL,
		 "wal-fetch: where prefetched segments wait (default: beside the destination)"),
	INT("WALG_INTEGRITY_MAX_DELAYED_WALS", wal.integrity_max_delayed_wals, 0, "0", 0, 1000000,
		"wal-verify: missing segments this close to the current one are only delayed"),
	TEXT("WALG_METRICS_ADDRESS", metrics_address, F_EXT, NULL,
		 "daemon serves /metrics and /healthz on this host:port"),
	CHOICE("WALG_UPLOAD_WAL_METADATA", wal.upload_wal_metadata, 0, "NOMETADATA",
		   "NOMETADATA|INDIVIDUAL|BULK",
		   "wal-push and wal-receive also store WAL-G's metadata object of each WAL file: "
		   "INDIVIDUAL (wal_005/<name>.json) or BULK (one per 16 segments, at the one ending in F)"),
	TEXT("WALG_SLOTNAME", wal.slot_name, 0, "walg",
		 "wal-receive: the physical replication slot it streams from (created if missing)"),
	TEXT("WALG_PUSHGATEWAY_URL", pushgateway_url, F_EXT, NULL,
		 "backup-push and delete push their outcome, duration and sizes to this Prometheus "
		 "Pushgateway (http://host:9091, or a URL ending in /metrics/job/NAME[/LABEL/VALUE...])"),
	DURATION("WALG_WAL_PUSH_TIMEOUT", wal_push_timeout_ms, F_EXT, "10m",
			 "wal-push gives up (exit 1, PostgreSQL retries) after this long"),
	TEXT("WALG_WAL_BACKLOG_MAX", wal.wal_backlog_max, F_EXT, NULL,
		 "the most WAL that may wait for archiving (256mb, 4gb ...; off when unset): past it "
		 "wal-push, the daemon and wal-receive drop the oldest segments unstored, log an ERROR "
		 "and record the gap in walc_wal_lost.json; recovery cannot cross it"),
	BOOL("WALG_ALLOW_SYSTEM_ID_CHANGE", catalog.allow_system_id_change, F_EXT, "false",
		 "let a cluster with another system identifier write to this repository (it replaces "
		 "the old cluster's WAL of the same names)"),
	/* backups */
	BOOL("WALG_TAR_DISABLE_FSYNC", tar_disable_fsync, 0, "false",
		 "backup-fetch: skip syncing restored files to disk"),
	BOOL("WALG_DELTA_RESTORE", delta_restore, F_EXT, "false",
		 "backup-fetch --delta by default (rewrite only files that differ)"),
	TEXT("WALG_FETCH_TARGET_USER_DATA", fetch_target_user_data, F_RAW, NULL,
		 "backup-fetch: restore the backup with this user data (JSON)"),
	INT("WALG_UPLOAD_DISK_CONCURRENCY", backup.upload_disk_concurrency, 0, "1", 1, 256,
		"backup-push: files read and packed in parallel"),
	INT("WALG_TAR_SIZE_THRESHOLD", backup.tar_size_threshold, 0, "1073741823", 1, LONG_MAX,
		"backup-push: start a new tar partition past this many bytes of file content"),
	DURATION("WALG_ALIVE_CHECK_INTERVAL", backup.alive_check_ms, 0, "1m",
			 "backup-push: how often the PostgreSQL session is checked (0 = never)"),
	DURATION("WALG_STOP_BACKUP_TIMEOUT", backup.stop_backup_timeout_ms, 0, "0",
			 "backup-push: how long the end of a backup may wait for its WAL to be archived "
			 "(pg_backup_stop, BASE_BACKUP, a standby's primary; 0 = no limit)"),
	TEXT("WALG_SENTINEL_USER_DATA", backup.sentinel_user_data, F_RAW, NULL,
		 "backup-push: JSON stored as the backup's user data"),
	INT("WALG_DISK_RATE_LIMIT", backup.disk_rate_limit, 0, "0", 0, LONG_MAX,
		"backup-push: bytes per second read from disk (0 = no limit)"),
	TEXT("WALG_REMOTE_COMPRESSION", backup.remote_compression, F_EXT, "none",
		 "backup-push without PGDATA asks PostgreSQL 15+ to compress the stream: none, zstd or "
		 "lz4, optionally :LEVEL or :level=N,workers=N"),
	INT("WALG_NETWORK_RATE_LIMIT", network_rate_limit, 0, "0", 0, LONG_MAX,
		"backup-push and backup-fetch: bytes per second to or from storage (0 = no limit)"),
	INT("WALG_DELTA_MAX_STEPS", backup.delta_max_steps, 0, "0", 0, 1000,
		"backup-push: deltas allowed between full backups (0 = always full)"),
	CHOICE("WALG_DELTA_ORIGIN", backup.delta_origin, 0, "LATEST", "LATEST|LATEST_FULL",
		   "backup-push: base of a delta: LATEST backup or the LATEST_FULL one"),
	TEXT("WALG_DELTA_FROM_NAME", backup.delta_from_name, 0, NULL, "backup-push: base a delta on this backup"),
	TEXT("WALG_DELTA_FROM_USER_DATA", backup.delta_from_user_data, F_RAW, NULL,
		 "backup-push: base a delta on the backup with this user data"),
	BOOL("WALG_DISABLE_PARTIAL_RESTORE", backup.disable_partial_restore, 0, "false",
		 "backup-push: record no database and table names (backup-fetch --restore-only refuses "
		 "such a backup; no session to each database)"),
	BOOL("WALG_WITHOUT_FILES_METADATA", backup.without_files_metadata, 0, "false",
		 "backup-push: store no files_metadata.json (always a full backup; no delta restore)"),
	BOOL("WALG_VERIFY_PAGE_CHECKSUMS", backup.verify_page_checksums, 0, "false",
		 "backup-push: check every data page's checksum and record corrupt blocks"),
	BOOL("WALG_STORE_ALL_CORRUPT_BLOCKS", backup.store_all_corrupt_blocks, 0, "false",
		 "backup-push: record every corrupt block number, not just the first 10 per file"),
	INT("WALG_PG_WAL_SIZE", pg.pg_wal_size_mb, 0, "16", 1, 1024, "WAL segment size in MiB"),
	/* logging */
	CHOICE("WALG_LOG_LEVEL", log.level_name, 0, "NORMAL", "NORMAL|DEVEL|ERROR",
		   "NORMAL, DEVEL (adds debug lines) or ERROR"),
	CHOICE("WALG_LOG_FORMAT", log.format, F_EXT, "text", "text|json",
		   "text or json (one object per line)"),
	TEXT("WALG_LOG_DESTINATION", log.destination, 0, NULL, "file the log is appended to, or stderr"),
	/* PostgreSQL (libpq reads the PG* variables; walc sets the ones from a file or flag) */
	TEXT("PGDATA", pg.pgdata, 0, NULL, "PostgreSQL data directory"),
	TEXT("PGAPPNAME", pg_appname, 0, "walc", "application_name of walc's sessions"),
	LIBPQ("PGHOST", 0, "libpq: server host or socket directory"),
	LIBPQ("PGPORT", 0, "libpq: server port"),
	LIBPQ("PGUSER", 0, "libpq: user (needed when the uid has no /etc/passwd entry)"),
	LIBPQ("PGPASSWORD", F_SECRET | F_RAW, "libpq: password"),
	LIBPQ("PGPASSFILE", 0, "libpq: password file"),
	LIBPQ("PGDATABASE", 0, "libpq: database"),
	LIBPQ("PGSSLMODE", 0, "libpq: TLS mode"),
	LIBPQ("PGSSLCERT", 0, "libpq: client certificate"),
	LIBPQ("PGSSLKEY", 0, "libpq: client key"),
	LIBPQ("PGSSLROOTCERT", 0, "libpq: CA certificate"),
	/* S3 (storage settings: also WALG_ and WALE_ forms) */
	TEXT("AWS_ENDPOINT", storage.s3.endpoint, F_ALIAS, NULL, "S3 endpoint http(s)://host[:port] (default AWS)"),
	TEXT("WALE_S3_ENDPOINT", storage.s3.wale_endpoint, F_STORE, NULL,
		 "WAL-E's form of the S3 endpoint, SCHEME+CONVENTION://host[:port] (CONVENTION path, "
		 "virtualhost or subdomain): used when AWS_ENDPOINT is not set"),
	TEXT("AWS_REGION", storage.s3.region, F_ALIAS, NULL, "S3 region (us-east-1, or detected on AWS)"),
	BOOL("AWS_S3_FORCE_PATH_STYLE", storage.s3.force_path_style, F_ALIAS, "false", "S3 path-style URLs"),
	TEXT("S3_SSE", storage.s3.sse, F_ALIAS, NULL, "server-side encryption: AES256 or aws:kms"),
	TEXT("S3_SSE_KMS_ID", storage.s3.sse_kms_id, F_ALIAS, NULL, "KMS key id for aws:kms"),
	TEXT("S3_SSE_C", storage.s3.sse_c, F_ALIAS | F_SECRET | F_RAW, NULL, "SSE-C customer key (32 bytes)"),
	TEXT("S3_STORAGE_CLASS", storage.s3.storage_class, F_ALIAS, NULL, "storage class of new objects (STANDARD)"),
	INT("S3_RETENTION_PERIOD", storage.s3.retention_period, F_ALIAS, "-1", -1, 3155760000L,
		"S3 Object Lock: seconds each new object is locked for, -1 (or 0) = off"),
	CHOICE("S3_RETENTION_MODE", storage.s3.retention_mode, F_ALIAS, "GOVERNANCE", "GOVERNANCE|COMPLIANCE",
		   "S3 Object Lock mode of new objects: GOVERNANCE or COMPLIANCE"),
	TEXT("S3_CA_CERT_FILE", storage.s3.ca_cert_file, F_ALIAS, NULL,
		 "CA bundle for https (default: the system's)"),
	INT("S3_MAX_PART_SIZE", storage.s3.max_part_size, F_ALIAS, "20971520", 5242880, 5368709120L,
		"multipart part size, 5 MiB to 5 GiB"),
	INT("S3_MAX_RETRIES", storage.s3.max_retries, F_ALIAS, "15", 0, 100, "retries of a failed request"),
	INT("S3_CONNECT_TIMEOUT", storage.s3.connect_timeout, F_ALIAS | F_EXT, "10", 1, 600,
		"connect timeout, seconds"),
	INT("S3_LOW_SPEED_TIMEOUT", storage.s3.low_speed_timeout, F_ALIAS | F_EXT, "30", 1, 3600,
		"abandon a transfer after this many seconds without progress"),
	INT("S3_DELETE_BATCH_SIZE", storage.s3.delete_batch_size, F_ALIAS, "1000", 1, 1000,
		"keys per DeleteObjects request (retention, delete, st rm)"),
	/* AWS credentials, as the AWS SDK reads them */
	{ "AWS_ACCESS_KEY_ID", V_TEXT, NULL, 0, 0, NULL, F_SECRET | F_STORE, S3(access_key), "AWS_ACCESS_KEY",
	  "S3 access key id (or AWS_ACCESS_KEY)" },
	{ "AWS_SECRET_ACCESS_KEY", V_TEXT, NULL, 0, 0, NULL, F_SECRET | F_RAW | F_STORE, S3(secret_key),
	  "AWS_SECRET_KEY", "S3 secret key (or AWS_SECRET_KEY)" },
	TEXT("AWS_SESSION_TOKEN", storage.s3.session_token, F_SECRET | F_RAW | F_STORE, NULL, "S3 session token"),
	TEXT("AWS_WEB_IDENTITY_TOKEN_FILE", storage.s3.web_identity_token_file, F_STORE, NULL,
		 "web identity token file (EKS IRSA)"),
	TEXT("AWS_ROLE_ARN", storage.s3.role_arn, F_STORE, NULL, "role assumed with the web identity token"),
	TEXT("AWS_ROLE_SESSION_NAME", storage.s3.role_session_name, F_STORE, "walc", "STS session name"),
	TEXT("AWS_STS_ENDPOINT", storage.s3.sts_endpoint, F_STORE, NULL,
		 "STS URL (default https://sts.REGION.amazonaws.com/)"),
	TEXT("AWS_SHARED_CREDENTIALS_FILE", storage.s3.shared_credentials_file, F_STORE, NULL,
		 "shared credentials file (default ~/.aws/credentials)"),
	{ "AWS_PROFILE", V_TEXT, NULL, 0, 0, NULL, F_STORE, S3(profile), "AWS_DEFAULT_PROFILE",
	  "profile in the shared credentials file (default: default)" },
	TEXT("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", storage.s3.container_relative_uri, F_STORE, NULL,
		 "ECS credentials endpoint (path on 169.254.170.2)"),
	TEXT("AWS_CONTAINER_CREDENTIALS_FULL_URI", storage.s3.container_full_uri, F_STORE, NULL,
		 "container credentials endpoint (ECS, EKS Pod Identity)"),
	TEXT("AWS_CONTAINER_AUTHORIZATION_TOKEN", storage.s3.container_token, F_SECRET | F_RAW | F_STORE, NULL,
		 "container credentials token"),
	TEXT("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", storage.s3.container_token_file, F_STORE, NULL,
		 "file with the container credentials token, read at every refresh (EKS Pod Identity)"),
	BOOL("AWS_EC2_METADATA_DISABLED", storage.s3.ec2_metadata_disabled, F_STORE, "false",
		 "skip EC2 instance metadata"),
	TEXT("AWS_EC2_METADATA_SERVICE_ENDPOINT", storage.s3.ec2_metadata_endpoint, F_STORE,
		 "http://169.254.169.254", "EC2 instance metadata URL"),
	CHOICE("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", storage.s3.ec2_metadata_mode, F_STORE, "IPv4", "IPv4|IPv6",
		   "IPv6: the instance metadata's default URL is http://[fd00:ec2::254]"),
	TEXT("HOME", storage.s3.home, 0, NULL, "home directory (~/.aws/credentials, ~/.walg.json)"),
	/* Azure Blob Storage (storage settings: also WALG_ and WALE_ forms) */
	TEXT("AZURE_STORAGE_ACCOUNT", storage.az.account, F_ALIAS, NULL, "Azure storage account name"),
	TEXT("AZURE_STORAGE_ACCESS_KEY", storage.az.access_key, F_ALIAS | F_SECRET | F_RAW, NULL,
		 "Azure storage account key (Shared Key)"),
	TEXT("AZURE_STORAGE_SAS_TOKEN", storage.az.sas_token, F_ALIAS | F_SECRET | F_RAW, NULL,
		 "Azure shared access signature (query string, with or without '?')"),
	TEXT("AZURE_ENDPOINT_SUFFIX", storage.az.endpoint_suffix, F_ALIAS, "core.windows.net",
		 "Azure Blob endpoint: https://ACCOUNT.blob.SUFFIX/"),
	INT("AZURE_BUFFER_SIZE", storage.az.buffer_size, F_ALIAS, "8388608", 1024, 4194304000L,
		"Azure block size for uploads, bytes"),
	INT("AZURE_MAX_BUFFERS", storage.az.max_buffers, F_ALIAS, "4", 1, 1024,
		"Azure blocks uploaded at once per object"),
	INT("AZURE_TRY_TIMEOUT", storage.az.try_timeout, F_ALIAS, "5", 1, 10080,
		"Azure: minutes one attempt of a request may take"),
	TEXT("AZURE_BLOB_STORE_API_VERSION", storage.az.api_version, F_ALIAS, "2021-12-02",
		 "Azure Blob API version sent as x-ms-version"),
	INT("AZURE_MAX_RETRIES", storage.az.max_retries, F_ALIAS | F_EXT, "10", 0, 100,
		"Azure: retries of a failed request"),
	TEXT("AZURE_CA_CERT_FILE", storage.az.ca_cert_file, F_ALIAS | F_EXT, NULL,
		 "Azure: CA bundle for https (default: the system's)"),
	TEXT("AZURE_CLIENT_ID", storage.az.client_id, F_STORE, NULL,
		 "Azure AD application or managed identity client id"),
	TEXT("AZURE_TENANT_ID", storage.az.tenant_id, F_STORE, NULL, "Azure AD tenant"),
	TEXT("AZURE_CLIENT_SECRET", storage.az.client_secret, F_SECRET | F_RAW | F_STORE, NULL,
		 "Azure AD application secret (service principal)"),
	TEXT("AZURE_FEDERATED_TOKEN_FILE", storage.az.federated_token_file, F_STORE, NULL,
		 "Azure AD federated token file (AKS workload identity), read at every refresh"),
	TEXT("AZURE_AUTHORITY_HOST", storage.az.authority_host, F_STORE, "https://login.microsoftonline.com/",
		 "Azure AD token endpoint host"),
	TEXT("AZURE_IMDS_ENDPOINT", storage.az.imds_endpoint, F_EXT | F_STORE, "http://169.254.169.254",
		 "Azure managed identity: instance metadata URL"),
	/* HTTPS trust of every store, as Go's crypto/x509 reads it */
	TEXT("SSL_CERT_FILE", storage.tls.cert_file, F_STORE, NULL,
		 "CA bundle trusted for https in place of the system's (a store's own CA setting wins)"),
	TEXT("SSL_CERT_DIR", storage.tls.cert_dir, F_STORE, NULL,
		 "':'-separated directories of CA certificates trusted for https in place of the system's"),
	/* Google Cloud Storage (GCS_* settings: also WALG_ and WALE_ forms) */
	TEXT("GOOGLE_APPLICATION_CREDENTIALS", storage.gcs.credentials_file, F_SECRET | F_STORE, NULL,
		 "GCS: service-account JSON key file (default: the metadata server's tokens)"),
	INT("GCS_CONTEXT_TIMEOUT", storage.gcs.context_timeout, F_ALIAS, "3600", 1, 604800,
		"GCS: seconds one request may take"),
	BOOL("GCS_NORMALIZE_PREFIX", storage.gcs.normalize_prefix, F_ALIAS, "true",
		 "GCS: collapse repeated slashes in WALG_GS_PREFIX (false keeps WAL-E's)"),
	TEXT("GCS_ENCRYPTION_KEY", storage.gcs.encryption_key, F_ALIAS | F_SECRET | F_RAW, NULL,
		 "GCS customer-supplied encryption key: base64 of 32 bytes"),
	INT("GCS_MAX_CHUNK_SIZE", storage.gcs.max_chunk_size, F_ALIAS, "52428800", 262144, 5368709120L,
		"GCS upload chunk size, bytes (a multiple of 256 KiB)"),
	INT("GCS_MAX_RETRIES", storage.gcs.max_retries, F_ALIAS, "16", 0, 100, "GCS: retries of a failed request"),
	TEXT("STORAGE_EMULATOR_HOST", storage.gcs.emulator_host, F_STORE, NULL,
		 "GCS emulator host:port (plain HTTP, no credentials)"),
	TEXT("GCE_METADATA_HOST", storage.gcs.metadata_host, F_STORE, "metadata.google.internal",
		 "GCS: metadata server host[:port] for tokens (GKE Workload Identity, GCE)"),
	TEXT("GCS_ENDPOINT", storage.gcs.endpoint, F_ALIAS | F_EXT, NULL,
		 "GCS JSON API base URL (default https://storage.googleapis.com), with credentials"),

	/* SFTP (storage settings: also WALG_ and WALE_ forms) */
	INT("SSH_PORT", storage.ssh.port, F_ALIAS, "22", 1, 65535, "SFTP: the SSH server's port"),
	TEXT("SSH_USERNAME", storage.ssh.username, F_ALIAS, NULL,
		 "SFTP: the user to log in as (default: the OS user's name)"),
	TEXT("SSH_PASSWORD", storage.ssh.password, F_ALIAS | F_SECRET | F_RAW, NULL,
		 "SFTP: password authentication"),
	TEXT("SSH_PRIVATE_KEY_PATH", storage.ssh.private_key_path, F_ALIAS, NULL,
		 "SFTP: private key file (OpenSSH or PEM), tried before the password"),
	TEXT("SSH_PRIVATE_KEY_PASSPHRASE", storage.ssh.key_passphrase, F_ALIAS | F_EXT | F_SECRET | F_RAW,
		 NULL, "SFTP: passphrase of SSH_PRIVATE_KEY_PATH"),
	TEXT("SSH_KNOWN_HOSTS", storage.ssh.known_hosts, F_ALIAS | F_EXT, NULL,
		 "SFTP: OpenSSH known_hosts file the server's host key must match (unset: any key, as "
		 "WAL-G)"),
	INT("SSH_MAX_RETRIES", storage.ssh.max_retries, F_ALIAS | F_EXT, "15", 0, 100,
		"SFTP: retries of an operation whose connection broke"),

	/* WAL-G's settings that walc refuses: they change what is stored or how it is protected. */
	REFUSED("WALG_GPG_KEY_ID", F_KEY_ID, NULL, NO_GPG),
	REFUSED("WALE_GPG_KEY_ID", F_KEY_ID, NULL, NO_GPG),
	REFUSED("WALG_ENVELOPE_PGP_KEY", F_SECRET | F_RAW, NULL, NO_ENVELOPE),
	REFUSED("WALG_ENVELOPE_PGP_KEY_PATH", 0, NULL, NO_ENVELOPE),
	REFUSED("WALG_ENVELOPE_PGP_YC_CSE_KMS_KEY_ID", 0, NULL, NO_ENVELOPE),
	REFUSED("WALG_ENVELOPE_PGP_YC_SERVICE_ACCOUNT_KEY_FILE", 0, NULL, NO_ENVELOPE),
	REFUSED("WALG_ENVELOPE_PGP_YC_ENDPOINT", 0, NULL, NO_ENVELOPE),
	REFUSED("WALG_CSE_KMS_ID", 0, NULL, NO_KMS),
	REFUSED("WALG_CSE_KMS_REGION", 0, NULL, NO_KMS),
	REFUSED("YC_CSE_KMS_KEY_ID", 0, NULL, NO_KMS),
	REFUSED("YC_SERVICE_ACCOUNT_KEY_FILE", 0, NULL, NO_KMS),
	REFUSED("AZURE_ENVIRONMENT_NAME", F_ALIAS, "AzurePublicCloud",
			"walc reaches other Azure clouds through AZURE_ENDPOINT_SUFFIX (e.g. "
			"core.usgovcloudapi.net)"),
	REFUSED("WALG_SWIFT_PREFIX", F_WALE, NULL, NO_STORE),
	REFUSED("WALG_OSS_PREFIX", F_WALE, NULL, NO_STORE),
	REFUSED("WALG_PG_WAL_PAGE_SIZE", 0, "8192", "walc reads WAL pages of 8192 bytes only"),
	REFUSED("WALG_PG_BLOCK_SIZE", 0, "8192", "walc reads data pages of 8192 bytes only"),
	REFUSED("S3_ENDPOINT_SOURCE", F_ALIAS, NULL, "walc does not support S3 endpoint sources"),
	REFUSED("S3_REQUEST_ADDITIONAL_HEADERS", F_ALIAS | F_RAW, NULL,
			"walc does not send additional S3 request headers"),
	REFUSED("S3_USE_YC_SESSION_TOKEN", F_ALIAS, NULL, "walc does not support Yandex session tokens"),

	/* WAL-G's settings walc does not implement whose absence changes nothing stored. */
	WARN("WALG_STATSD_ADDRESS"),
	WARN("WALG_STATSD_EXTRA_TAGS"),
	/* WAL-G's settings for what walc does not have (composers, the Go runtime, ...). */
	NOOP("WALG_USE_REVERSE_UNPACK"),
	NOOP("WALG_SKIP_REDUNDANT_TARS"),
	NOOP("WALG_USE_RATING_COMPOSER"),
	NOOP("WALG_USE_COPY_COMPOSER"),
	NOOP("WALG_USE_DATABASE_COMPOSER"),
	NOOP("WALG_USE_WAL_DELTA"),
	NOOP("WALG_FORCE_WAL_DELTA"),
	NOOP("WALG_SERIALIZER_TYPE"),
	NOOP("WALG_UPLOAD_QUEUE"),
	NOOP("WALG_DIRECT_IO"),
	NOOP("WALG_DIRECT_IO_BLOCK_COUNT"),
	NOOP("WALG_DOWNLOAD_FILE_RETRIES"),
	NOOP("WALG_DAEMON_WAL_UPLOAD_TIMEOUT"),
	NOOP("WALG_STREAM_CREATE_COMMAND"),
	NOOP("WALG_STREAM_RESTORE_COMMAND"),
	NOOP("WALG_ENVELOPE_CACHE_EXPIRATION"),
	NOOP("WALG_FAILOVER_STORAGES_CACHE_EMA_ALIVE_LIMIT"),
	NOOP("WALG_FAILOVER_STORAGES_CACHE_EMA_DEAD_LIMIT"),
	NOOP("WALG_FAILOVER_STORAGES_CACHE_EMA_ALPHA_ALIVE_MAX"),
	NOOP("WALG_FAILOVER_STORAGES_CACHE_EMA_ALPHA_ALIVE_MIN"),
	NOOP("WALG_FAILOVER_STORAGES_CACHE_EMA_ALPHA_DEAD_MAX"),
	NOOP("WALG_FAILOVER_STORAGES_CACHE_EMA_ALPHA_DEAD_MIN"),
	{ "S3_LOG_LEVEL", V_NOOP, NULL, 0, 0, NULL, F_ALIAS, NO_FIELD, NULL,
	  "WAL-G's AWS SDK log level; walc's S3 requests log at WALG_LOG_LEVEL=DEVEL" },
	{ "GOMAXPROCS", V_NOOP, NULL, 0, 0, NULL, 0, NO_FIELD, NULL,
	  "tunes WAL-G's Go runtime, which walc does not have" },
	{ "GODEBUG", V_NOOP, NULL, 0, 0, NULL, 0, NO_FIELD, NULL,
	  "tunes WAL-G's Go runtime, which walc does not have" },

	/*
	 * Names operators write into WAL-G's environment for their own scripts (Spilo's
	 * configure_spilo.py, for one): read by the scripts, by neither WAL-G nor walc.
	 */
	OPERATOR("WALG_DISABLE_S3_SSE", 0,
			 "Spilo's: tells Spilo not to set WALG_S3_SSE"),
	OPERATOR("WALE_DISABLE_S3_SSE", 0, "Spilo's and WAL-E's, as WALG_DISABLE_S3_SSE"),
	OPERATOR("WALG_BACKUP_COMPRESSION_METHOD", 0,
			 "Spilo's: its backup script passes it on as WALG_COMPRESSION_METHOD"),
	OPERATOR("WALG_BACKUP_FROM_REPLICA", 0,
			 "Spilo's: its backup script decides on which member to back up"),
	OPERATOR("USE_WALG_BACKUP", 0, "Spilo's: its scripts run wal-g instead of WAL-E"),
	OPERATOR("USE_WALG_RESTORE", 0, "Spilo's: its scripts run wal-g instead of WAL-E"),
	OPERATOR("BACKUP_NUM_TO_RETAIN", 0, "Spilo's: the backups its backup script keeps"),
	OPERATOR("AWS_INSTANCE_PROFILE", 0,
			 "WAL-E's: walc asks the EC2 instance metadata for credentials whenever no keys "
			 "are set"),
	OPERATOR("WALE_LOG_DESTINATION", 0, "WAL-E's: walc logs to WALG_LOG_DESTINATION"),
};

const size_t config_nvars = sizeof(config_vars) / sizeof(config_vars[0]);
