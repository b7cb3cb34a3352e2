/*
 * Configuration: one loop over the table of settings (configvars.c) finds each value (a flag,
 * the environment, a configuration file's entry, or the default), parses it by its kind into
 * the config struct and reports a bad one naming the setting; then the rules that involve
 * more than one setting. The same table prints `walc env` and drives the warnings.
 */
#include "cmd/walc/settings/config_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

/* The sources of this process's configuration (read once, so kept here for env and logs). */
static config_sources sources;
/* config_defaults: no setting is found anywhere, so each takes the table's default. */
static bool defaults_only;

typedef struct found {
	const char *value;
	char name[128];	   /* the name it was found under */
	const char *where; /* NULL: the environment; else "flag" or the file's name */
} found;

static const char *in_pairs(const config_pair *p, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(p[i].name, name) == 0 && p[i].value != NULL && p[i].value[0] != '\0')
			return p[i].value;
	return NULL;
}

/* One name in WAL-G's precedence: flag, environment, file. Empty counts as unset. */
static bool find_name(const char *name, found *out)
{
	if (defaults_only)
		return false;
	const char *v = in_pairs(sources.flags, sources.nflags, name);
	out->where = "flag";
	if (v == NULL) {
		v = getenv(name);
		out->where = NULL;
		if (v != NULL && v[0] == '\0')
			v = NULL;
	}
	if (v == NULL) {
		v = in_pairs(sources.file, sources.nfile, name);
		out->where = sources.file_name;
	}
	if (v == NULL)
		return false;
	out->value = v;
	snprintf(out->name, sizeof(out->name), "%s", name);
	return true;
}

/* Finds one name somewhere (the process's sources, or another storage's pairs). */
typedef bool (*name_fn)(const void *arg, const char *name, found *out);

static bool find_global(const void *arg, const char *name, found *out)
{
	(void)arg;
	return find_name(name, out);
}

/* The value of a setting under any of its names (WAL-G's aliasing), or false. */
static bool find_var_by(const config_var *v, name_fn find, const void *arg, found *out)
{
	char alias[128];
	if (find(arg, v->name, out))
		return true;
	if (v->flags & F_ALIAS) {
		snprintf(alias, sizeof(alias), "WALG_%s", v->name);
		if (find(arg, alias, out))
			return true;
		snprintf(alias, sizeof(alias), "WALE_%s", v->name);
		if (find(arg, alias, out))
			return true;
	}
	if ((v->flags & F_WALE) && str_has_prefix(v->name, "WALG_")) {
		snprintf(alias, sizeof(alias), "WALE_%s", v->name + 5);
		if (find(arg, alias, out))
			return true;
	}
	return v->alt != NULL && find(arg, v->alt, out);
}

static bool find_var(const config_var *v, found *out)
{
	return find_var_by(v, find_global, NULL, out);
}

/* "NAME" or "NAME (in FILE)", for messages about a value. */
static const char *label(const found *f)
{
	static __thread char buf[512];
	if (f->where == NULL)
		return f->name;
	snprintf(buf, sizeof(buf), "%s (%s %s)", f->name, strcmp(f->where, "flag") == 0 ? "a" : "in",
			 f->where);
	return buf;
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

/* Go durations ("1m", "30s", "1h30m", "500ms"); a bare number is seconds. */
static err_code parse_duration(const char *name, const char *v, long *out)
{
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

err_code config_parse_duration(const char *name, const char *value, long *ms)
{
	return parse_duration(name, value, ms);
}

/* The canonical spelling of v among "a|b|c", compared case-insensitively. */
static char *choice_of(const char *choices, const char *v)
{
	size_t vl = strlen(v);
	for (const char *p = choices; *p;) {
		size_t n = strcspn(p, "|");
		if (n == vl && strncasecmp(p, v, n) == 0)
			return xasprintf("%.*s", (int)n, p);
		p += n + (p[n] == '|');
	}
	return NULL;
}

/* Parses a value found for v into *field (NULL: a setting read by a library, only checked). */
static err_code parse_into(const config_var *v, const found *f, void *field)
{
	const char *name = label(f);
	if (!(v->flags & F_RAW))
		for (const unsigned char *p = (const unsigned char *)f->value; *p; p++)
			if (*p < 0x20 || *p == 0x7f)
				return err_set(E_CONFIG, "%s: contains a control character", name);
	if (field == NULL)
		return E_OK;
	switch (v->kind) {
	case V_TEXT:
		*(char **)field = xstrdup(f->value);
		return E_OK;
	case V_BOOL:
		return config_parse_bool(name, f->value, false, (bool *)field);
	case V_INT:
		return config_parse_long(name, f->value, 0, v->min, v->max, (long *)field);
	case V_DURATION:
		return parse_duration(name, f->value, (long *)field);
	case V_CHOICE: {
		char *ch = choice_of(v->choices, f->value);
		if (ch == NULL) {
			char *list = xstrdup(v->choices);
			for (char *p = list; *p; p++)
				if (*p == '|')
					*p = ',';
			err_code rc = err_set(E_CONFIG, "%s: expected one of %s, got \"%s\"", name, list,
								  f->value);
			free(list);
			return rc;
		}
		*(char **)field = ch;
		return E_OK;
	}
	default:
		return E_OK;
	}
}

static err_code parse_var(const config_var *v, const found *f, config *c)
{
	return parse_into(v, f, v->off == NO_FIELD ? NULL : (char *)c + v->off);
}

/* A refused setting that is set (to something but its "off" value) stops walc. */
/* Whether an OpenPGP key is given (WALG_PGP_KEY or WALG_PGP_KEY_PATH, any source). */
static bool pgp_key_given(void)
{
	for (size_t i = 0; i < config_nvars; i++) {
		found f;
		if (config_vars[i].kind == V_TEXT &&
			(strcmp(config_vars[i].name, "WALG_PGP_KEY") == 0 ||
			 strcmp(config_vars[i].name, "WALG_PGP_KEY_PATH") == 0) &&
			find_var(&config_vars[i], &f) && f.value[0] != '\0')
			return true;
	}
	return false;
}

static err_code check_refused(const config_var *v, const found *f)
{
	if (v->def != NULL && strcmp(f->value, v->def) == 0)
		return E_OK;
	/* WAL-G encrypts with the key and never reads the id beside it. */
	if ((v->flags & F_KEY_ID) && pgp_key_given())
		return E_OK;
	return err_set(E_CONFIG, "%s is set, but %s (nothing was done)", label(f), v->help);
}

/* WAL-E's file://localhost/abs/path form, trailing slashes dropped. */
static err_code normalise_file_prefix(storage_settings *c)
{
	char *v = c->file_prefix;
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
	char *norm = xstrdup(path);
	size_t n = strlen(norm);
	while (n > 1 && norm[n - 1] == '/')
		norm[--n] = '\0';
	free(c->file_prefix);
	c->file_prefix = norm;
	return E_OK;
}

/* WAL-G's names for zstd levels are its encoder's speed classes, as libzstd levels. */
static err_code zstd_level(repo_settings *c)
{
	static const struct {
		const char *name;
		int level;
	} levels[] = { { "fastest", 1 }, { "default", 3 }, { "better", 7 }, { "best", 11 } };
	if (c->zstd_level == NULL)
		return E_OK;
	if (strcmp(c->compression, "zstd") != 0)
		return err_set(E_CONFIG, "WALG_ZSTD_LEVEL is set, but WALG_COMPRESSION_METHOD is %s, "
								 "not zstd",
					   c->compression);
	if (c->compression_level != 0)
		return err_set(E_CONFIG, "WALG_ZSTD_LEVEL and WALG_COMPRESSION_LEVEL are both set: "
								 "set one");
	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++)
		if (strcmp(c->zstd_level, levels[i].name) == 0)
			c->compression_level = levels[i].level;
	return E_OK;
}

/* Whether a setting was given at all (under any of its names), not just defaulted. */
static bool is_set(const char *name)
{
	for (size_t i = 0; i < config_nvars; i++)
		if (strcmp(config_vars[i].name, name) == 0) {
			found f;
			return find_var(&config_vars[i], &f);
		}
	return false;
}

/*
 * WAL-E's endpoint, SCHEME+CONVENTION://host[:port], which Spilo writes beside AWS_ENDPOINT:
 * the endpoint when AWS_ENDPOINT is not set, its convention the addressing style unless
 * AWS_S3_FORCE_PATH_STYLE says otherwise.
 */
static err_code wale_s3_endpoint(storage_settings *c)
{
	const char *v = c->s3.wale_endpoint;
	if (v != NULL && c->s3.endpoint != NULL) {
		free(c->s3.wale_endpoint);
		c->s3.wale_endpoint = NULL;
		return E_OK;
	}
	if (v == NULL)
		return E_OK;
	const char *plus = strchr(v, '+'), *sep = strstr(v, "://");
	size_t slen = plus ? (size_t)(plus - v) : 0;
	bool http = slen == 4 && strncmp(v, "http", 4) == 0;
	bool https = slen == 5 && strncmp(v, "https", 5) == 0;
	if (plus == NULL || sep == NULL || sep < plus || !(http || https) || sep[3] == '\0')
		return err_set(E_CONFIG, "WALE_S3_ENDPOINT: expected SCHEME+CONVENTION://host[:port] "
								 "(e.g. https+path://host:443), got \"%s\"",
					   v);
	const char *conv = plus + 1;
	size_t clen = (size_t)(sep - conv);
	bool path = clen == 4 && strncmp(conv, "path", 4) == 0;
	if (!path && !(clen == 11 && strncmp(conv, "virtualhost", 11) == 0) &&
		!(clen == 9 && strncmp(conv, "subdomain", 9) == 0))
		return err_set(E_CONFIG, "WALE_S3_ENDPOINT: the convention is path, virtualhost or "
								 "subdomain, got \"%.*s\"",
					   (int)clen, conv);
	c->s3.endpoint = xasprintf("%.*s%s", (int)slen, v, sep);
	if (!is_set("AWS_S3_FORCE_PATH_STYLE"))
		c->s3.force_path_style = path;
	return E_OK;
}

static err_code check_storage(storage_settings *c);

static bool has_storage(const storage_settings *c)
{
	return c->file_prefix != NULL || c->s3_prefix != NULL || c->gs_prefix != NULL ||
		c->az_prefix != NULL || c->ssh_prefix != NULL;
}

/*
 * A size as viper reads WAL-G's (GetSizeInBytes): a whole number of bytes, or one followed by
 * b, kb, mb or gb in any case (kilo = 1024).
 */
static err_code parse_size(const char *name, const char *v, uint64_t *out)
{
	*out = 0;
	if (v == NULL)
		return E_OK;
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	int shift = -1;
	if (end != v && v[0] >= '0' && v[0] <= '9' && errno == 0) {
		if (*end == '\0' || strcasecmp(end, "b") == 0)
			shift = 0;
		else if (strcasecmp(end, "kb") == 0)
			shift = 10;
		else if (strcasecmp(end, "mb") == 0)
			shift = 20;
		else if (strcasecmp(end, "gb") == 0)
			shift = 30;
	}
	if (shift < 0 || n > (1ull << 40) >> shift)
		return err_set(E_CONFIG, "%s: expected a size like 100, 64kb or 1mb, got \"%s\"", name,
					   v);
	*out = (uint64_t)n << shift;
	return E_OK;
}

/* The rules that involve more than one setting, or a setting's meaning beyond its type. */
static err_code finish(config *c, bool need_storage)
{
	s3_settings *s3 = &c->storage.s3;
	TRY(wale_s3_endpoint(&c->storage));
	/* As the AWS SDK: IPv6 mode changes the default instance metadata address only. */
	if (s3->ec2_metadata_mode != NULL && strcmp(s3->ec2_metadata_mode, "IPv6") == 0 &&
		!is_set("AWS_EC2_METADATA_SERVICE_ENDPOINT")) {
		free(s3->ec2_metadata_endpoint);
		s3->ec2_metadata_endpoint = xstrdup("http://[fd00:ec2::254]");
	}
	TRY(check_storage(&c->storage));
	TRY(zstd_level(&c->repo));
	TRY(parse_size("WALG_FAILOVER_STORAGES_CHECK_SIZE", c->storage.failover_check_size,
				   &c->storage.failover_check_bytes));
	TRY(parse_size("WALG_WAL_BACKLOG_MAX", c->wal.wal_backlog_max, &c->wal.wal_backlog_max_bytes));
	if ((c->pg.pg_wal_size_mb & (c->pg.pg_wal_size_mb - 1)) != 0)
		return err_set(E_CONFIG, "WALG_PG_WAL_SIZE: expected a power of two from 1 to 1024 "
								 "(MiB), got %ld",
					   c->pg.pg_wal_size_mb);
	c->pg.pg_wal_size_set = is_set("WALG_PG_WAL_SIZE");
	c->backup.delta_origin_full = strcmp(c->backup.delta_origin, "LATEST_FULL") == 0;
	/* Last, so that a bad value is reported even when no storage is configured. */
	if (need_storage && !has_storage(&c->storage))
		return err_set(E_CONFIG, "no storage configured: set WALG_FILE_PREFIX (an absolute "
								 "path), WALG_S3_PREFIX (s3://bucket/path), WALG_GS_PREFIX "
								 "(gs://bucket/path), WALG_AZ_PREFIX (azure://container/path) "
								 "or WALG_SSH_PREFIX (ssh://host/path)");
	return E_OK;
}

/* Where a storage is, and its prefixes' syntax: the main storage's and every other's. */
static err_code check_storage(storage_settings *c)
{
	if (c->file_prefix != NULL)
		TRY(normalise_file_prefix(c));
	if (c->s3_prefix != NULL &&
		(!str_has_prefix(c->s3_prefix, "s3://") || c->s3_prefix[5] == '\0' ||
		 c->s3_prefix[5] == '/'))
		return err_set(E_CONFIG, "WALG_S3_PREFIX: expected s3://bucket/path, got \"%s\"",
					   c->s3_prefix);
	if (c->gs_prefix != NULL && (!str_has_prefix(c->gs_prefix, "gs://") ||
								 c->gs_prefix[5] == '\0' || c->gs_prefix[5] == '/'))
		return err_set(E_CONFIG, "WALG_GS_PREFIX: expected gs://bucket/path, got \"%s\"",
					   c->gs_prefix);
	if (c->az_prefix != NULL && (!str_has_prefix(c->az_prefix, "azure://") ||
								 c->az_prefix[8] == '\0' || c->az_prefix[8] == '/'))
		return err_set(E_CONFIG, "WALG_AZ_PREFIX: expected azure://container/path, got \"%s\"",
					   c->az_prefix);
	if (c->ssh_prefix != NULL && (!str_has_prefix(c->ssh_prefix, "ssh://") ||
								  c->ssh_prefix[6] == '\0' || c->ssh_prefix[6] == '/'))
		return err_set(E_CONFIG, "WALG_SSH_PREFIX: expected ssh://host/path, got \"%s\"",
					   c->ssh_prefix);
	if (c->storage_prefix != NULL && strstr(c->storage_prefix, "..") != NULL)
		return err_set(E_CONFIG, "WALG_STORAGE_PREFIX: must not contain \"..\"");
	return E_OK;
}

/* Logging first, so that every later message already has the requested shape. */
static err_code load_logging(config *c)
{
	static const char *const names[] = { "WALG_LOG_LEVEL", "WALG_LOG_FORMAT",
										 "WALG_LOG_DESTINATION" };
	for (size_t i = 0; i < config_nvars; i++)
		for (size_t k = 0; k < 3; k++)
			if (strcmp(config_vars[i].name, names[k]) == 0) {
				found f;
				if (find_var(&config_vars[i], &f)) {
					TRY(parse_var(&config_vars[i], &f, c));
				} else if (config_vars[i].def != NULL) {
					f.value = config_vars[i].def;
					snprintf(f.name, sizeof(f.name), "%s", config_vars[i].name);
					f.where = NULL;
					TRY(parse_var(&config_vars[i], &f, c));
				}
			}
	log_settings *l = &c->log;
	l->level = strcmp(l->level_name, "DEVEL") == 0 ? LOG_DEBUG
		: strcmp(l->level_name, "ERROR") == 0		? LOG_ERROR
													: LOG_INFO;
	l->json = strcmp(l->format, "json") == 0;
	if (l->destination != NULL && strcmp(l->destination, "stderr") == 0) {
		free(l->destination);
		l->destination = NULL;
	}
	l->loaded = true;
	return E_OK;
}

err_code config_load_from(config *c, bool need_storage, const config_sources *src)
{
	memset(c, 0, sizeof(*c));
	/* the modules that read another's settings read this config's */
	c->wal.pg = &c->pg;
	c->wal.catalog = &c->catalog;
	c->backup.wal = &c->wal;
	memset(&sources, 0, sizeof(sources));
	if (src != NULL)
		sources = *src;
	TRY(load_logging(c));
	/* Refused settings first: nothing else matters when one of them is set. */
	for (size_t i = 0; i < config_nvars; i++) {
		found f;
		if (config_vars[i].kind == V_REFUSED && find_var(&config_vars[i], &f))
			TRY(check_refused(&config_vars[i], &f));
	}
	for (size_t i = 0; i < config_nvars; i++) {
		const config_var *v = &config_vars[i];
		if (v->kind >= V_REFUSED || str_has_prefix(v->name, "WALG_LOG_"))
			continue;
		found f;
		if (!find_var(v, &f)) {
			if (v->def == NULL)
				continue;
			f.value = v->def;
			snprintf(f.name, sizeof(f.name), "%s", v->name);
			f.where = NULL;
		}
		TRY(parse_var(v, &f, c));
	}
	return finish(c, need_storage);
}

err_code config_load(config *c, bool need_storage)
{
	return config_load_from(c, need_storage, NULL);
}

err_code config_defaults(config *c)
{
	defaults_only = true;
	err_code rc = config_load_from(c, false, NULL);
	defaults_only = false;
	return rc;
}

/*
 * Where v's string is in s, the part of a config at [base, base + size); NULL when v has no
 * string there (another kind, another part, or no field).
 */
static char **string_at(const config_var *v, void *s, size_t base, size_t size)
{
	if (v->off == NO_FIELD || v->off < base || v->off >= base + size ||
		(v->kind != V_TEXT && v->kind != V_CHOICE))
		return NULL;
	return (char **)(void *)((char *)s + (v->off - base));
}

/* Frees the strings of a part of a config (secrets wiped first), then zeroes it. */
static void free_strings(void *s, size_t base, size_t size)
{
	for (size_t i = 0; i < config_nvars; i++) {
		char **p = string_at(&config_vars[i], s, base, size);
		if (p == NULL)
			continue;
		if (*p != NULL && (config_vars[i].flags & F_SECRET))
			memset(*p, 0, strlen(*p));
		free(*p);
	}
	memset(s, 0, size);
}

void config_free(config *c)
{
	config_failovers_free(&c->storage);
	free_strings(c, 0, sizeof(*c));
}

const char *config_flag_setting(const char *flag, bool *is_bool)
{
	for (size_t i = 0; i < config_nvars; i++) {
		const char *n = config_vars[i].name;
		size_t len = strlen(n);
		if (strlen(flag) != len)
			continue;
		bool same = true;
		for (size_t k = 0; k < len && same; k++) {
			char want = n[k] == '_' ? '-' : (char)(n[k] >= 'A' && n[k] <= 'Z' ? n[k] + 32 : n[k]);
			same = flag[k] == want;
		}
		if (same) {
			*is_bool = config_vars[i].kind == V_BOOL;
			return n;
		}
	}
	return NULL;
}

static const config_var *var_named(const char *name, size_t len)
{
	for (size_t i = 0; i < config_nvars; i++) {
		const config_var *v = &config_vars[i];
		if (strlen(v->name) == len && strncmp(v->name, name, len) == 0)
			return v;
		if (v->alt != NULL && strlen(v->alt) == len && strncmp(v->alt, name, len) == 0)
			return v;
	}
	/* Storage settings also come as WALG_NAME or WALE_NAME; WALG_ prefixes as WALE_. */
	if (len > 5 && (strncmp(name, "WALG_", 5) == 0 || strncmp(name, "WALE_", 5) == 0)) {
		for (size_t i = 0; i < config_nvars; i++) {
			const config_var *v = &config_vars[i];
			if ((v->flags & F_ALIAS) && strlen(v->name) == len - 5 &&
				strncmp(v->name, name + 5, len - 5) == 0)
				return v;
			if ((v->flags & F_WALE) && strncmp(name, "WALE_", 5) == 0 &&
				strlen(v->name) == len && strncmp(v->name + 5, name + 5, len - 5) == 0)
				return v;
		}
	}
	return NULL;
}

bool config_known(const char *name)
{
	return var_named(name, strlen(name)) != NULL;
}

static void warn_one(const char *name, size_t len, const char *where, log_level level)
{
	const config_var *v = var_named(name, len);
	char in[512] = "";
	if (where != NULL)
		snprintf(in, sizeof(in), " (in %s)", where);
	if (v == NULL)
		log_msg(level, "%.*s%s is unknown to walc and ignored", (int)len, name, in);
	else if (v->kind == V_WARN)
		log_msg(level, "%.*s%s is not implemented by walc and ignored", (int)len, name, in);
	else if ((v->flags & F_KEY_ID) && pgp_key_given())
		log_msg(level, "%.*s%s is ignored: walc encrypts with the OpenPGP key given, as WAL-G does, "
				"and reads no key id",
				(int)len, name, in);
	else if (v->kind == V_NOOP)
		log_debug("%.*s%s has no effect in walc (%s)", (int)len, name, in,
				  v->help ? v->help : "what it tunes does not exist here");
}

/* How loud warnings about settings are: DEVEL in the commands that run once a segment. */
static log_level warn_level = LOG_WARNING;

void config_warn_unknown(bool per_segment)
{
	log_level level = per_segment ? LOG_DEBUG : LOG_WARNING;
	warn_level = level;
	for (char **e = environ; *e != NULL; e++) {
		if (!str_has_prefix(*e, "WALG_"))
			continue;
		const char *eq = strchr(*e, '=');
		warn_one(*e, eq ? (size_t)(eq - *e) : strlen(*e), NULL, level);
	}
	/* A file's entries are all meant for WAL-G, whatever their prefix. */
	for (size_t i = 0; i < sources.nfile; i++)
		warn_one(sources.file[i].name, strlen(sources.file[i].name), sources.file_name, level);
}

static const char *kind_word(var_kind k)
{
	return k == V_REFUSED ? "refused" : k == V_WARN ? "not implemented" : "no effect";
}

void config_print_env(FILE *out)
{
	for (size_t i = 0; i < config_nvars; i++) {
		const config_var *v = &config_vars[i];
		if (v->kind >= V_REFUSED)
			continue;
		found f;
		bool set = find_var(v, &f);
		fprintf(out, "%s=%s", v->name,
				!set ? "" : (v->flags & F_SECRET) ? "--HIDDEN--" : f.value);
		if (set && (strcmp(f.name, v->name) != 0 || f.where != NULL))
			fprintf(out, "    (as %s)", label(&f));
		fprintf(out, "\n    default: %s\n    %s%s\n", v->def ? v->def : "(unset)",
				(v->flags & F_EXT) ? "walc extension: " : "", v->help);
	}
	/* WAL-G settings walc does not implement: listed when set, with what walc does. */
	for (size_t i = 0; i < config_nvars; i++) {
		const config_var *v = &config_vars[i];
		found f;
		if (v->kind < V_REFUSED || !find_var(v, &f))
			continue;
		fprintf(out, "%s=%s\n    %s%s%s\n", label(&f),
				(v->flags & F_SECRET) ? "--HIDDEN--" : f.value, kind_word(v->kind),
				v->help ? ": " : "", v->help ? v->help : "");
	}
}

void config_each_set(void (*fn)(const char *name, const char *value, bool secret, void *arg),
					 void *arg)
{
	for (size_t i = 0; i < config_nvars; i++) {
		const config_var *v = &config_vars[i];
		found f;
		if (v->kind < V_REFUSED && v->off != NO_FIELD && find_var(v, &f))
			fn(f.name, f.value, (v->flags & F_SECRET) != 0, arg);
	}
}

void config_log_env(void)
{
	if (!log_enabled(LOG_DEBUG))
		return;
	for (size_t i = 0; i < config_nvars; i++) {
		const config_var *v = &config_vars[i];
		found f;
		if (find_var(v, &f))
			log_debug("%s=%s", label(&f), (v->flags & F_SECRET) ? "--HIDDEN--" : f.value);
	}
}

typedef struct pair_set {
	const config_pair *pairs;
	size_t n;
	const char *what;
} pair_set;

static bool find_pair(const void *arg, const char *name, found *out)
{
	const pair_set *ps = arg;
	const char *v = in_pairs(ps->pairs, ps->n, name);
	if (v == NULL)
		return false;
	out->value = v;
	out->where = ps->what;
	snprintf(out->name, sizeof(out->name), "%s", name);
	return true;
}

static bool is_store(const config_var *v)
{
	return (v->flags & (F_ALIAS | F_STORE | F_WHERE)) != 0;
}

/* Where a row's field is in storage_settings, or NO_FIELD when it is not a storage setting. */
static size_t store_off(const config_var *v)
{
	size_t base = offsetof(config, storage);
	if (v->off == NO_FIELD || v->off < base || v->off >= base + sizeof(storage_settings))
		return NO_FIELD;
	return v->off - base;
}

static char **store_string(const config_var *v, storage_settings *s)
{
	return string_at(v, s, offsetof(config, storage), sizeof(*s));
}

static void clear_store_var(const config_var *v, storage_settings *s)
{
	char **p = store_string(v, s);
	if (p != NULL) {
		free(*p);
		*p = NULL;
	}
}

void config_storage_copy(const storage_settings *src, storage_settings *dst)
{
	*dst = *src;
	/* another storage's settings have no failover storages of their own */
	dst->failovers = NULL;
	dst->nfailovers = 0;
	for (size_t i = 0; i < config_nvars; i++) {
		char **p = store_string(&config_vars[i], dst);
		if (p != NULL && *p != NULL)
			*p = xstrdup(*p);
	}
}

void config_storage_free(storage_settings *s)
{
	free_strings(s, offsetof(config, storage), sizeof(*s));
}

/* What a storage's own pairs hold that is not a storage setting: said, never silently used. */
static err_code check_pairs(const pair_set *ps, bool whole_file)
{
	for (size_t i = 0; i < ps->n; i++) {
		const char *name = ps->pairs[i].name;
		const config_var *v = var_named(name, strlen(name));
		found f = { .value = ps->pairs[i].value, .where = ps->what };
		snprintf(f.name, sizeof(f.name), "%s", name);
		if (v != NULL && v->kind == V_REFUSED)
			TRY(check_refused(v, &f));
		else if (whole_file)
			continue;
		else if (v == NULL)
			log_msg(warn_level, "%s (in %s) is unknown to walc and ignored", name, ps->what);
		else if (!is_store(v))
			log_msg(warn_level, "%s (in %s) is ignored: only storage settings are set per "
					"storage, the others come from the main configuration (as in WAL-G)",
					name, ps->what);
	}
	return E_OK;
}

err_code config_for_storage(const storage_settings *base, const char *what,
							const config_pair *pairs, size_t n, unsigned flags,
							storage_settings *out)
{
	pair_set ps = { pairs, n, what };
	bool own_prefix = (flags & CFS_FILE) != 0;
	config_storage_copy(base, out);
	free(out->failover_storages);
	free(out->target_storage);
	out->failover_storages = out->target_storage = NULL;
	TRY(check_pairs(&ps, own_prefix));
	bool endpoint_given = false;
	for (size_t i = 0; i < config_nvars; i++) {
		const config_var *v = &config_vars[i];
		size_t off = store_off(v);
		if (!is_store(v) || off == NO_FIELD)
			continue;
		found f;
		bool place = (v->flags & F_WHERE) ||
			(own_prefix && off == offsetof(storage_settings, storage_prefix));
		if (find_var_by(v, find_pair, &ps, &f)) {
			clear_store_var(v, out);
			TRY(parse_into(v, &f, (char *)out + off));
			endpoint_given |= off == offsetof(storage_settings, s3.endpoint);
		} else if (place) {
			clear_store_var(v, out);
		}
	}
	/* WAL-E's endpoint given here stands for the endpoint, as in the main configuration. */
	if (!endpoint_given && in_pairs(pairs, n, "WALE_S3_ENDPOINT") != NULL) {
		free(out->s3.endpoint);
		out->s3.endpoint = NULL;
	}
	err_code rc = wale_s3_endpoint(out);
	if (rc == E_OK)
		rc = check_storage(out);
	if (rc == E_OK && !has_storage(out))
		rc = err_set(E_CONFIG, "no storage prefix: set WALG_FILE_PREFIX, WALG_S3_PREFIX, "
							   "WALG_GS_PREFIX, WALG_AZ_PREFIX or WALG_SSH_PREFIX");
	return rc != E_OK ? err_wrap(rc, "%s", what) : E_OK;
}

err_code config_failovers(const storage_settings *base, storage_settings *out)
{
	storage_entry *e;
	size_t n;
	*out = *base;
	out->failovers = NULL;
	out->nfailovers = 0;
	TRY(storage_entries(base, &e, &n));
	storage_failover *fo = xcalloc(n + 1, sizeof(*fo));
	err_code rc = E_OK;
	size_t k = 0;
	for (; rc == E_OK && k < n; k++) {
		char *where = xasprintf("WALG_FAILOVER_STORAGES \"%s\"", e[k].name);
		fo[k].name = xstrdup(e[k].name);
		rc = config_for_storage(base, where, e[k].pairs, e[k].n, 0, &fo[k].settings);
		free(where);
	}
	storage_entries_free(e, n);
	out->failovers = fo;
	out->nfailovers = k;
	if (rc != E_OK)
		config_failovers_free(out);
	return rc;
}

void config_failovers_free(storage_settings *s)
{
	for (size_t i = 0; i < s->nfailovers; i++) {
		free(s->failovers[i].name);
		config_storage_free(&s->failovers[i].settings);
	}
	free(s->failovers);
	s->failovers = NULL;
	s->nfailovers = 0;
}

err_code config_repo_open(const config *cfg, repo_use use, const char *target, repo **out)
{
	storage_settings st;
	*out = NULL;
	TRY(config_failovers(&cfg->storage, &st));
	err_code rc = repo_open_use(&st, &cfg->crypt, &cfg->repo, use, target, out);
	config_failovers_free(&st);
	return rc;
}
