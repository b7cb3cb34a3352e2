/*
 * Configuration from the environment: one table of every variable (name, default, secret?,
 * meaning) drives loading, validation, `walc env` and the unknown-variable warning.
 */
#include "internal/core/core.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

typedef struct config_var {
	const char *name;
	const char *def; /* shown by `walc env`; NULL = unset */
	bool secret;
	const char *help;
} config_var;

static const config_var config_vars[] = {
	{ "WALG_FILE_PREFIX", NULL, false,
	  "file-system repository: an absolute path or file://localhost/abs/path" },
	{ "WALG_S3_PREFIX", NULL, false, "S3 repository: s3://bucket/path" },
	{ "WALG_STORAGE_PREFIX", NULL, false, "extra folder below the repository prefix" },
	{ "WALG_COMPRESSION_METHOD", "lz4", false, "lz4, zstd, brotli, lzma or none" },
	{ "WALG_COMPRESSION_LEVEL", "0", false,
	  "walc extension: codec level, 0 = WAL-G's default (lz4 1-12, zstd 1-22, brotli 0-11, "
	  "lzma 0-9)" },
	{ "WALG_LIBSODIUM_KEY", NULL, true, "libsodium encryption key material" },
	{ "WALG_LIBSODIUM_KEY_PATH", NULL, false, "file holding the libsodium key" },
	{ "WALG_LIBSODIUM_KEY_TRANSFORM", "none", false,
	  "how the key material becomes 32 bytes: none, hex or base64" },
	{ "WALG_PGP_KEY", NULL, true,
	  "OpenPGP: armored key text (\\n escapes allowed); public to push, secret to fetch" },
	{ "WALG_PGP_KEY_PATH", NULL, false, "OpenPGP: file holding the armored key" },
	{ "WALG_PGP_KEY_PASSPHRASE", NULL, true, "OpenPGP: passphrase of a protected secret key" },
	{ "WALG_PREVENT_WAL_OVERWRITE", "false", false,
	  "refuse to overwrite an archived WAL file with different content" },
	{ "WALG_UPLOAD_CONCURRENCY", "16", false, "parallel uploads" },
	{ "WALG_DOWNLOAD_CONCURRENCY", "10", false, "parallel downloads" },
	{ "TOTAL_BG_UPLOADED_LIMIT", "32", false,
	  "wal-push: at most this many - 1 other .ready files uploaded by one call" },
	{ "PG_READY_RENAME", "false", false,
	  "wal-push: rename archive_status/X.ready to X.done after a background upload" },
	{ "WALG_PREFETCH_DIR", NULL, false,
	  "wal-fetch: where prefetched segments wait (default: beside the destination)" },
	{ "WALG_INTEGRITY_MAX_DELAYED_WALS", "0", false,
	  "wal-verify: missing segments this close to the current one are only delayed" },
	{ "WALG_METRICS_ADDRESS", NULL, false,
	  "walc extension: daemon serves /metrics and /healthz on this host:port" },
	{ "WALG_WAL_PUSH_TIMEOUT", "10m", false,
	  "walc extension: wal-push gives up (exit 1, PostgreSQL retries) after this long" },
	{ "WALG_TAR_DISABLE_FSYNC", "false", false,
	  "backup-fetch: skip syncing restored files to disk" },
	{ "WALG_DELTA_RESTORE", "false", false,
	  "walc extension: backup-fetch --delta by default (rewrite only files that differ)" },
	{ "WALG_UPLOAD_DISK_CONCURRENCY", "1", false,
	  "backup-push: files read and packed in parallel" },
	{ "WALG_TAR_SIZE_THRESHOLD", "1073741823", false,
	  "backup-push: start a new tar partition past this many bytes of file content" },
	{ "WALG_ALIVE_CHECK_INTERVAL", "1m", false,
	  "backup-push: how often the PostgreSQL session is checked (0 = never)" },
	{ "WALG_STOP_BACKUP_TIMEOUT", "0", false,
	  "backup-push: how long pg_backup_stop may wait for WAL archiving (0 = no limit)" },
	{ "WALG_SENTINEL_USER_DATA", NULL, false, "backup-push: JSON stored as the backup's user data" },
	{ "WALG_DISK_RATE_LIMIT", NULL, false, "backup-push: bytes per second read from disk" },
	{ "WALG_NETWORK_RATE_LIMIT", NULL, false,
	  "backup-push and backup-fetch: bytes per second to or from storage" },
	{ "WALG_DELTA_MAX_STEPS", "0", false,
	  "backup-push: deltas allowed between full backups (0 = always full)" },
	{ "WALG_DELTA_ORIGIN", "LATEST", false,
	  "backup-push: base of a delta: LATEST backup or the LATEST_FULL one" },
	{ "WALG_DELTA_FROM_NAME", NULL, false, "backup-push: base a delta on this backup" },
	{ "WALG_DELTA_FROM_USER_DATA", NULL, false,
	  "backup-push: base a delta on the backup with this user data" },
	{ "WALG_VERIFY_PAGE_CHECKSUMS", "false", false,
	  "backup-push: check every data page's checksum and record corrupt blocks" },
	{ "WALG_STORE_ALL_CORRUPT_BLOCKS", "false", false,
	  "backup-push: record every corrupt block number, not just the first 10 per file" },
	{ "WALG_PG_WAL_SIZE", "16", false, "WAL segment size in MiB" },
	{ "WALG_ALLOW_SYSTEM_ID_CHANGE", "false", false,
	  "walc extension: let a cluster with another system identifier write to this repository "
	  "(it replaces the old cluster's WAL of the same names)" },
	{ "WALG_LOG_LEVEL", "NORMAL", false, "NORMAL, DEVEL (adds debug lines) or ERROR" },
	{ "WALG_LOG_FORMAT", "text", false, "walc extension: text or json (one object per line)" },
	{ "WALG_LOG_DESTINATION", "stderr", false, "file the log is appended to, or stderr" },
	{ "WALG_ZSTD_LEVEL", NULL, false,
	  "zstd level by WAL-G's name: fastest (1), default (3), better (7) or best (11)" },
	{ "PGDATA", NULL, false, "PostgreSQL data directory" },
	{ "PGPASSWORD", NULL, true, "libpq: password for backup-push and wal-verify" },
	/* S3 (also accepted with a WALG_ or WALE_ prefix, as WAL-G does) */
	{ "AWS_ENDPOINT", NULL, false, "S3 endpoint http(s)://host[:port] (default AWS)" },
	{ "AWS_REGION", "us-east-1", false, "S3 region (detected on AWS)" },
	{ "AWS_S3_FORCE_PATH_STYLE", "false", false, "S3 path-style URLs" },
	{ "AWS_ACCESS_KEY_ID", NULL, true, "S3 access key id (or AWS_ACCESS_KEY)" },
	{ "AWS_SECRET_ACCESS_KEY", NULL, true, "S3 secret key (or AWS_SECRET_KEY)" },
	{ "AWS_SESSION_TOKEN", NULL, true, "S3 session token" },
	{ "AWS_WEB_IDENTITY_TOKEN_FILE", NULL, false, "web identity token file (EKS IRSA)" },
	{ "AWS_ROLE_ARN", NULL, false, "role assumed with the web identity token" },
	{ "AWS_ROLE_SESSION_NAME", "walc", false, "STS session name" },
	{ "AWS_STS_ENDPOINT", NULL, false, "STS URL (default https://sts.REGION.amazonaws.com/)" },
	{ "AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials", false, "shared credentials file" },
	{ "AWS_PROFILE", "default", false, "profile in the shared credentials file" },
	{ "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", NULL, false, "ECS credentials endpoint" },
	{ "AWS_CONTAINER_CREDENTIALS_FULL_URI", NULL, false, "ECS credentials endpoint" },
	{ "AWS_CONTAINER_AUTHORIZATION_TOKEN", NULL, true, "ECS credentials token" },
	{ "AWS_EC2_METADATA_DISABLED", "false", false, "skip EC2 instance metadata" },
	{ "AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://169.254.169.254", false,
	  "EC2 instance metadata URL" },
	{ "S3_SSE", NULL, false, "server-side encryption: AES256 or aws:kms" },
	{ "S3_SSE_KMS_ID", NULL, false, "KMS key id for aws:kms" },
	{ "S3_SSE_C", NULL, true, "SSE-C customer key (32 bytes)" },
	{ "S3_STORAGE_CLASS", "STANDARD", false, "storage class of new objects" },
	{ "S3_CA_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt", false, "CA bundle for https" },
	{ "S3_MAX_PART_SIZE", "20971520", false, "multipart part size, 5 MiB to 5 GiB" },
	{ "S3_MAX_RETRIES", "15", false, "retries of a failed request" },
	{ "S3_CONNECT_TIMEOUT", "10", false, "walc extension: connect timeout, seconds" },
	{ "S3_LOW_SPEED_TIMEOUT", "30", false,
	  "walc extension: abandon a transfer after this many seconds without progress" },
};

#define NVARS (sizeof(config_vars) / sizeof(config_vars[0]))

/*
 * WAL-G settings that change what is stored, where it goes or how it is protected, and that
 * walc does not implement. Ignoring one could store plaintext where encryption was asked for,
 * or write somewhere the user does not look, so each is an error before any work. `allowed`
 * is a value that means "off" and is accepted (NULL: any value is refused). alias: the name
 * is also read as WALG_NAME and WALE_NAME, as WAL-G reads storage settings.
 */
typedef struct refused_var {
	const char *name;
	const char *allowed;
	bool alias;
	const char *why;
} refused_var;

#define NO_GPG "walc does not read gpg keyrings; export the key into WALG_PGP_KEY_PATH (WAL-G " \
			   "v3.0.9 stores plaintext with only this set)"
#define NO_ENVELOPE "walc does not support envelope encryption; use WALG_PGP_KEY or " \
					"WALG_LIBSODIUM_KEY"
#define NO_KMS "walc does not support KMS client-side encryption; use WALG_LIBSODIUM_KEY " \
			   "(or S3_SSE=aws:kms for server-side encryption)"
#define NO_STORE "walc supports only WALG_FILE_PREFIX and WALG_S3_PREFIX storage"
#define NO_FAILOVER "walc does not support failover storages"

static const refused_var config_refused[] = {
	{ "WALG_GPG_KEY_ID", NULL, false, NO_GPG },
	{ "WALE_GPG_KEY_ID", NULL, false, NO_GPG },
	{ "WALG_ENVELOPE_PGP_KEY", NULL, false, NO_ENVELOPE },
	{ "WALG_ENVELOPE_PGP_KEY_PATH", NULL, false, NO_ENVELOPE },
	{ "WALG_ENVELOPE_PGP_YC_CSE_KMS_KEY_ID", NULL, false, NO_ENVELOPE },
	{ "WALG_ENVELOPE_PGP_YC_SERVICE_ACCOUNT_KEY_FILE", NULL, false, NO_ENVELOPE },
	{ "WALG_ENVELOPE_PGP_YC_ENDPOINT", NULL, false, NO_ENVELOPE },
	{ "WALG_CSE_KMS_ID", NULL, false, NO_KMS },
	{ "WALG_CSE_KMS_REGION", NULL, false, NO_KMS },
	{ "YC_CSE_KMS_KEY_ID", NULL, false, NO_KMS },
	{ "YC_SERVICE_ACCOUNT_KEY_FILE", NULL, false, NO_KMS },
	{ "WALG_GS_PREFIX", NULL, false, NO_STORE " (Google Cloud Storage is not supported yet)" },
	{ "WALE_GS_PREFIX", NULL, false, NO_STORE " (Google Cloud Storage is not supported yet)" },
	{ "WALG_AZ_PREFIX", NULL, false, NO_STORE " (Azure Blob Storage is not supported yet)" },
	{ "WALE_AZ_PREFIX", NULL, false, NO_STORE " (Azure Blob Storage is not supported yet)" },
	{ "WALG_SWIFT_PREFIX", NULL, false, NO_STORE },
	{ "WALE_SWIFT_PREFIX", NULL, false, NO_STORE },
	{ "WALG_SSH_PREFIX", NULL, false, NO_STORE },
	{ "WALE_SSH_PREFIX", NULL, false, NO_STORE },
	{ "WALG_OSS_PREFIX", NULL, false, NO_STORE },
	{ "WALE_OSS_PREFIX", NULL, false, NO_STORE },
	{ "WALG_FAILOVER_STORAGES", NULL, false, NO_FAILOVER },
	{ "WALG_TARGET_STORAGE", "default", false, NO_FAILOVER " (only \"default\" is accepted)" },
	{ "WALG_UPLOAD_WAL_METADATA", "NOMETADATA", false,
	  "walc does not write WAL metadata objects (only NOMETADATA is accepted)" },
	{ "WALG_PG_WAL_PAGE_SIZE", "8192", false, "walc reads WAL pages of 8192 bytes only" },
	{ "WALG_PG_BLOCK_SIZE", "8192", false, "walc reads data pages of 8192 bytes only" },
	{ "S3_RETENTION_PERIOD", "-1", true, "walc does not set S3 Object Lock retention" },
	{ "S3_RETENTION_MODE", NULL, true, "walc does not set S3 Object Lock retention" },
	{ "S3_ENDPOINT_SOURCE", NULL, true, "walc does not support S3 endpoint sources" },
	{ "S3_REQUEST_ADDITIONAL_HEADERS", NULL, true,
	  "walc does not send additional S3 request headers" },
	{ "S3_USE_YC_SESSION_TOKEN", NULL, true, "walc does not support Yandex session tokens" },
	{ "WALG_CONFIG_PATH", NULL, false,
	  "walc reads its settings from the environment only, so the file's settings would be "
	  "ignored; export them as environment variables" },
};

#define NREFUSED (sizeof(config_refused) / sizeof(config_refused[0]))

/*
 * WAL-G settings walc accepts without acting on them: what they tune does not exist in walc
 * (composers, reverse unpacking, the Go runtime) or is harmless to leave at walc's behaviour.
 * They get no unknown-variable warning; DEVEL logs say they are ignored.
 */
static const char *const config_noop[] = {
	"WALG_USE_REVERSE_UNPACK", "WALG_SKIP_REDUNDANT_TARS", "WALG_USE_RATING_COMPOSER",
	"WALG_USE_COPY_COMPOSER", "WALG_USE_DATABASE_COMPOSER", "WALG_USE_WAL_DELTA",
	"WALG_FORCE_WAL_DELTA", "WALG_SERIALIZER_TYPE", "WALG_UPLOAD_QUEUE", "WALG_DIRECT_IO",
	"WALG_DIRECT_IO_BLOCK_COUNT", "WALG_DISABLE_PARTIAL_RESTORE", "WALG_DOWNLOAD_FILE_RETRIES",
	"WALG_DAEMON_WAL_UPLOAD_TIMEOUT", "WALG_SLOTNAME", "WALG_STREAM_CREATE_COMMAND",
	"WALG_STREAM_RESTORE_COMMAND", "WALG_FAILOVER_STORAGES_CHECK",
	"WALG_FAILOVER_STORAGES_CHECK_TIMEOUT", "WALG_FAILOVER_STORAGES_CHECK_SIZE",
	"WALG_FAILOVER_STORAGES_CACHE_LIFETIME", "WALG_FAILOVER_STORAGES_CACHE_EMA_ALIVE_LIMIT",
	"WALG_FAILOVER_STORAGES_CACHE_EMA_DEAD_LIMIT",
	"WALG_FAILOVER_STORAGES_CACHE_EMA_ALPHA_ALIVE_MAX",
	"WALG_FAILOVER_STORAGES_CACHE_EMA_ALPHA_ALIVE_MIN",
	"WALG_FAILOVER_STORAGES_CACHE_EMA_ALPHA_DEAD_MAX",
	"WALG_FAILOVER_STORAGES_CACHE_EMA_ALPHA_DEAD_MIN", "WALG_ENVELOPE_CACHE_EXPIRATION", NULL,
};

/* WAL-G settings walc does not implement whose absence changes nothing stored: warned. */
static const char *const config_unimplemented[] = {
	"WALG_STATSD_ADDRESS", "WALG_STATSD_EXTRA_TAGS", "WALG_WITHOUT_FILES_METADATA", NULL,
};

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && v[0] != '\0' ? v : NULL;
}

err_code config_parse_bool(const char *name, const char *v, bool def, bool *out)
{
	/* Go's strconv.ParseBool, which WAL-G uses. */
	static const char *const yes[] = { "1", "t", "T", "TRUE", "true", "True" };
	static const char *const no[] = { "0", "f", "F", "FALSE", "false", "False" };

	*out = def;
	if (v == NULL || v[0] == '\0')
		return E_OK;
	for (size_t i = 0; i < 6; i++) {
		if (strcmp(v, yes[i]) == 0)
			return (*out = true), E_OK;
		if (strcmp(v, no[i]) == 0)
			return (*out = false), E_OK;
	}
	return err_set(E_CONFIG, "%s: expected true or false, got \"%s\"", name, v);
}

static err_code parse_bool(const char *name, bool def, bool *out)
{
	return config_parse_bool(name, env(name), def, out);
}

/* Go durations ("1m", "30s", "1h30m", "500ms"); a bare number is seconds. */
static err_code parse_duration(const char *name, long def_ms, long *out)
{
	const char *v = env(name);
	*out = def_ms;
	if (v == NULL)
		return E_OK;
	double total = 0;
	const char *p = v;
	char *end;
	errno = 0;
	double n = strtod(p, &end);
	/* Digits first: strtod would also take "nan", "inf" and hex. */
	if (!(p[0] >= '0' && p[0] <= '9'))
		goto bad;
	if (end != p && *end == '\0' && errno == 0 && n >= 0 && n < 1e9 &&
		strspn(p, "0123456789.") == (size_t)(end - p)) {
		*out = (long)(n * 1000);
		return E_OK;
	}
	while (*p) {
		if (!(p[0] >= '0' && p[0] <= '9'))
			goto bad;
		n = strtod(p, &end);
		/* Plain decimals only: not "0x10", not exponents. */
		if (end == p || !(n >= 0) || strspn(p, "0123456789.") != (size_t)(end - p))
			goto bad;
		p = end;
		double unit;
		if (str_has_prefix(p, "ms")) unit = 1, p += 2;
		else if (str_has_prefix(p, "us")) unit = 1e-3, p += 2;
		else if (str_has_prefix(p, "ns")) unit = 1e-6, p += 2;
		else if (*p == 's') unit = 1e3, p++;
		else if (*p == 'm') unit = 60e3, p++;
		else if (*p == 'h') unit = 3600e3, p++;
		else goto bad;
		total += n * unit;
	}
	if (!(total <= 1e12))
		goto bad;
	*out = (long)total;
	return E_OK;
bad:
	return err_set(E_CONFIG, "%s: expected a duration like 30s, 5m or 1h, got \"%s\"", name, v);
}

err_code config_parse_long(const char *name, const char *v, long def, long min, long max,
							long *out)
{
	char *end;

	*out = def;
	if (v == NULL || v[0] == '\0')
		return E_OK;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0' || n < min || n > max)
		return err_set(E_CONFIG, "%s: expected a whole number from %ld to %ld, got \"%s\"", name,
					   min, max, v);
	*out = n;
	return E_OK;
}

static err_code parse_long(const char *name, long def, long min, long max, long *out)
{
	return config_parse_long(name, env(name), def, min, max, out);
}

/* A value with a control character would break paths and log lines: refuse it early. */
static err_code check_printable(const char *name)
{
	const char *v = getenv(name);
	if (v == NULL)
		return E_OK;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return err_set(E_CONFIG, "%s: contains a control character", name);
	return E_OK;
}

/* WAL-G also reads storage prefixes under their WAL-E names. */
static const char *env_or_wale(const char *walg)
{
	const char *v = env(walg);
	if (v == NULL) {
		char wale[64];
		snprintf(wale, sizeof(wale), "WALE_%s", walg + 5);
		v = env(wale);
	}
	return v;
}

/* The first refused setting that is set (to something but its "off" value). */
static err_code check_refused(void)
{
	for (size_t i = 0; i < NREFUSED; i++) {
		const refused_var *rv = &config_refused[i];
		static const char *const pre[] = { "", "WALG_", "WALE_" };
		for (size_t k = 0; k < (rv->alias ? 3u : 1u); k++) {
			char name[96];
			snprintf(name, sizeof(name), "%s%s", pre[k], rv->name);
			const char *v = env(name);
			if (v == NULL || (rv->allowed != NULL && strcmp(v, rv->allowed) == 0))
				continue;
			return err_set(E_CONFIG, "%s is set, but %s (nothing was done)", name, rv->why);
		}
	}
	return E_OK;
}

static err_code load_file_prefix(config *c)
{
	const char *v = env_or_wale("WALG_FILE_PREFIX");
	if (v == NULL)
		return E_OK;
	TRY(check_printable("WALG_FILE_PREFIX"));
	const char *path = v;
	if (str_has_prefix(v, "file://")) {
		path = v + strlen("file://");
		if (str_has_prefix(path, "localhost/"))
			path += strlen("localhost");
		else if (path[0] != '/')
			return err_set(E_CONFIG,
						   "WALG_FILE_PREFIX: expected file://localhost/abs/path, got \"%s\"", v);
	}
	if (path[0] != '/')
		return err_set(E_CONFIG,
					   "WALG_FILE_PREFIX: expected an absolute path or file://localhost/abs/path, "
					   "got \"%s\"",
					   v);
	c->file_prefix = xstrdup(path);
	size_t n = strlen(c->file_prefix);
	while (n > 1 && c->file_prefix[n - 1] == '/')
		c->file_prefix[--n] = '\0';
	return E_OK;
}

static err_code load_storage(config *c)
{
	TRY(load_file_prefix(c));
	const char *s3 = env_or_wale("WALG_S3_PREFIX");
	if (s3 != NULL) {
		TRY(check_printable("WALG_S3_PREFIX"));
		if (!str_has_prefix(s3, "s3://") || s3[5] == '\0' || s3[5] == '/')
			return err_set(E_CONFIG, "WALG_S3_PREFIX: expected s3://bucket/path, got \"%s\"", s3);
		c->s3_prefix = xstrdup(s3);
	}
	const char *sp = env("WALG_STORAGE_PREFIX");
	if (sp != NULL) {
		TRY(check_printable("WALG_STORAGE_PREFIX"));
		if (strstr(sp, "..") != NULL)
			return err_set(E_CONFIG, "WALG_STORAGE_PREFIX: must not contain \"..\"");
		c->storage_prefix = xstrdup(sp);
	}
	return E_OK;
}

/* WAL-G's names for zstd levels (its encoder's speed classes, as libzstd levels). */
static const struct {
	const char *name;
	int level;
} zstd_levels[] = { { "fastest", 1 }, { "default", 3 }, { "better", 7 }, { "best", 11 } };

static err_code load_compression(config *c)
{
	static const char *const methods[] = { "lz4", "zstd", "brotli", "lzma", "none" };
	const char *method = env("WALG_COMPRESSION_METHOD");
	c->compression = xstrdup(method != NULL ? method : "lz4");
	bool known = false;
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		known |= strcmp(c->compression, methods[i]) == 0;
	if (!known)
		return err_set(E_CONFIG,
					   "WALG_COMPRESSION_METHOD: unknown method \"%s\", expected lz4, zstd, "
					   "brotli, lzma or none",
					   c->compression);
	long n;
	TRY(parse_long("WALG_COMPRESSION_LEVEL", 0, 0, 22, &n));
	c->compression_level = (int)n;
	const char *zl = env("WALG_ZSTD_LEVEL");
	if (zl == NULL)
		return E_OK;
	if (strcmp(c->compression, "zstd") != 0)
		return err_set(E_CONFIG, "WALG_ZSTD_LEVEL is set, but WALG_COMPRESSION_METHOD is %s, "
								 "not zstd",
					   c->compression);
	if (c->compression_level != 0)
		return err_set(E_CONFIG, "WALG_ZSTD_LEVEL and WALG_COMPRESSION_LEVEL are both set: "
								 "set one");
	for (size_t i = 0; i < sizeof(zstd_levels) / sizeof(zstd_levels[0]); i++)
		if (strcasecmp(zl, zstd_levels[i].name) == 0) {
			c->compression_level = zstd_levels[i].level;
			return E_OK;
		}
	return err_set(E_CONFIG,
				   "WALG_ZSTD_LEVEL: expected fastest, default, better or best, got \"%s\"", zl);
}

static err_code load_logging(config *c)
{
	const char *lvl = env("WALG_LOG_LEVEL");
	c->log_level = LOG_INFO;
	if (lvl != NULL) {
		if (strcasecmp(lvl, "NORMAL") == 0)
			c->log_level = LOG_INFO;
		else if (strcasecmp(lvl, "DEVEL") == 0)
			c->log_level = LOG_DEBUG;
		else if (strcasecmp(lvl, "ERROR") == 0)
			c->log_level = LOG_ERROR;
		else
			return err_set(E_CONFIG,
						   "WALG_LOG_LEVEL: expected NORMAL, DEVEL or ERROR, got \"%s\"", lvl);
	}
	const char *fmt = env("WALG_LOG_FORMAT");
	c->log_json = false;
	if (fmt != NULL) {
		if (strcasecmp(fmt, "json") == 0)
			c->log_json = true;
		else if (strcasecmp(fmt, "text") != 0)
			return err_set(E_CONFIG, "WALG_LOG_FORMAT: expected text or json, got \"%s\"", fmt);
	}
	const char *dest = env("WALG_LOG_DESTINATION");
	if (dest != NULL && strcmp(dest, "stderr") != 0) {
		TRY(check_printable("WALG_LOG_DESTINATION"));
		c->log_destination = xstrdup(dest);
	}
	c->logging_loaded = true;
	return E_OK;
}

err_code config_load(config *c, bool need_storage)
{
	long n;

	memset(c, 0, sizeof(*c));
	/* Logging first, so that later messages already have the requested shape. */
	TRY(load_logging(c));
	TRY(check_refused());
	TRY(load_storage(c));
	TRY(load_compression(c));

	TRY(parse_bool("WALG_PREVENT_WAL_OVERWRITE", false, &c->prevent_wal_overwrite));
	TRY(parse_long("WALG_UPLOAD_CONCURRENCY", 16, 1, 1024, &n));
	c->upload_concurrency = (int)n;
	TRY(parse_long("WALG_DOWNLOAD_CONCURRENCY", 10, 1, 1024, &n));
	c->download_concurrency = (int)n;
	TRY(parse_bool("WALG_TAR_DISABLE_FSYNC", false, &c->tar_disable_fsync));
	TRY(parse_bool("WALG_DELTA_RESTORE", false, &c->delta_restore));
	TRY(parse_long("TOTAL_BG_UPLOADED_LIMIT", 32, 1, 100000, &n));
	c->total_bg_uploaded_limit = (int)n;
	TRY(parse_bool("PG_READY_RENAME", false, &c->pg_ready_rename));
	TRY(parse_duration("WALG_WAL_PUSH_TIMEOUT", 600000, &c->wal_push_timeout_ms));
	TRY(parse_long("WALG_INTEGRITY_MAX_DELAYED_WALS", 0, 0, 1000000, &n));
	if (env("WALG_METRICS_ADDRESS") != NULL)
		c->metrics_address = xstrdup(env("WALG_METRICS_ADDRESS"));
	c->integrity_max_delayed_wals = (int)n;
	if (env("WALG_PREFETCH_DIR") != NULL) {
		TRY(check_printable("WALG_PREFETCH_DIR"));
		c->prefetch_dir = xstrdup(env("WALG_PREFETCH_DIR"));
	}
	TRY(parse_long("WALG_UPLOAD_DISK_CONCURRENCY", 1, 1, 256, &n));
	c->upload_disk_concurrency = (int)n;
	TRY(parse_long("WALG_TAR_SIZE_THRESHOLD", 1073741823L, 1, LONG_MAX, &n));
	c->tar_size_threshold = (uint64_t)n;
	TRY(parse_duration("WALG_ALIVE_CHECK_INTERVAL", 60000, &c->alive_check_ms));
	TRY(parse_duration("WALG_STOP_BACKUP_TIMEOUT", 0, &c->stop_backup_timeout_ms));
	TRY(parse_long("WALG_DISK_RATE_LIMIT", 0, 0, LONG_MAX, &n));
	c->disk_rate_limit = (uint64_t)n;
	TRY(parse_long("WALG_NETWORK_RATE_LIMIT", 0, 0, LONG_MAX, &n));
	c->network_rate_limit = (uint64_t)n;
	TRY(parse_long("WALG_DELTA_MAX_STEPS", 0, 0, 1000, &n));
	c->delta_max_steps = (int)n;
	const char *origin = env("WALG_DELTA_ORIGIN");
	if (origin != NULL && strcmp(origin, "LATEST_FULL") == 0)
		c->delta_origin_full = true;
	else if (origin != NULL && strcmp(origin, "LATEST") != 0)
		return err_set(E_CONFIG, "WALG_DELTA_ORIGIN: expected LATEST or LATEST_FULL, got \"%s\"",
					   origin);
	if (env("WALG_DELTA_FROM_NAME") != NULL)
		c->delta_from_name = xstrdup(env("WALG_DELTA_FROM_NAME"));
	if (env("WALG_DELTA_FROM_USER_DATA") != NULL)
		c->delta_from_user_data = xstrdup(env("WALG_DELTA_FROM_USER_DATA"));
	TRY(parse_bool("WALG_VERIFY_PAGE_CHECKSUMS", false, &c->verify_page_checksums));
	TRY(parse_bool("WALG_STORE_ALL_CORRUPT_BLOCKS", false, &c->store_all_corrupt_blocks));
	TRY(parse_bool("WALG_ALLOW_SYSTEM_ID_CHANGE", false, &c->allow_system_id_change));
	const char *ud = env("WALG_SENTINEL_USER_DATA");
	if (ud != NULL)
		c->sentinel_user_data = xstrdup(ud);
	TRY(parse_long("WALG_PG_WAL_SIZE", 16, 1, 1024, &n));
	if ((n & (n - 1)) != 0)
		return err_set(E_CONFIG, "WALG_PG_WAL_SIZE: expected a power of two from 1 to 1024 "
								 "(MiB), got %ld", n);
	c->pg_wal_size_mb = n;

	const char *pgdata = env("PGDATA");
	if (pgdata != NULL) {
		TRY(check_printable("PGDATA"));
		c->pgdata = xstrdup(pgdata);
	}
	/* Last, so that a bad value is reported even when no storage is configured. */
	if (need_storage && c->file_prefix == NULL && c->s3_prefix == NULL)
		return err_set(E_CONFIG, "no storage configured: set WALG_FILE_PREFIX (an absolute "
								 "path) or WALG_S3_PREFIX (s3://bucket/path)");
	return E_OK;
}

void config_free(config *c)
{
	free(c->file_prefix);
	free(c->s3_prefix);
	free(c->storage_prefix);
	free(c->compression);
	free(c->pgdata);
	free(c->sentinel_user_data);
	free(c->prefetch_dir);
	free(c->metrics_address);
	free(c->delta_from_name);
	free(c->delta_from_user_data);
	free(c->log_destination);
	memset(c, 0, sizeof(*c));
}

void config_print_env(FILE *out)
{
	for (size_t i = 0; i < NVARS; i++) {
		const config_var *v = &config_vars[i];
		const char *val = getenv(v->name);
		fprintf(out, "%s=%s\n", v->name,
				val == NULL ? "" : (v->secret ? "--HIDDEN--" : val));
		fprintf(out, "    default: %s\n    %s\n", v->def ? v->def : "(unset)", v->help);
	}
}

void config_log_env(void)
{
	if (!log_enabled(LOG_DEBUG))
		return;
	for (size_t i = 0; i < NVARS; i++) {
		const char *val = getenv(config_vars[i].name);
		if (val != NULL)
			log_debug("%s=%s", config_vars[i].name, config_vars[i].secret ? "--HIDDEN--" : val);
	}
}

static bool same(const char *known, const char *name, size_t len)
{
	return strlen(known) == len && strncmp(known, name, len) == 0;
}

static bool config_known_exactly(const char *name, size_t len)
{
	for (size_t i = 0; i < NVARS; i++)
		if (same(config_vars[i].name, name, len))
			return true;
	for (size_t i = 0; i < NREFUSED; i++)
		if (same(config_refused[i].name, name, len))
			return true;
	return false;
}

static bool config_known(const char *name, size_t len)
{
	/* Storage settings also come as WALG_NAME or WALE_NAME (reference §2.1). */
	if (len > 5 && (strncmp(name, "WALG_", 5) == 0 || strncmp(name, "WALE_", 5) == 0) &&
		config_known_exactly(name + 5, len - 5))
		return true;
	return config_known_exactly(name, len);
}

static bool in_list(const char *const *list, const char *name, size_t len)
{
	for (size_t i = 0; list[i] != NULL; i++)
		if (same(list[i], name, len))
			return true;
	return false;
}

void config_warn_unknown(void)
{
	for (char **e = environ; *e != NULL; e++) {
		if (!str_has_prefix(*e, "WALG_"))
			continue;
		const char *eq = strchr(*e, '=');
		size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
		if (in_list(config_noop, *e, len))
			log_debug("%.*s has no effect in walc (what it tunes does not exist here)",
					  (int)len, *e);
		else if (in_list(config_unimplemented, *e, len))
			log_warn("%.*s is not implemented by walc and ignored", (int)len, *e);
		else if (!config_known(*e, len))
			log_warn("%.*s is unknown to walc and ignored", (int)len, *e);
	}
}
