/* WAL-G's configuration file, read into name/value pairs (JSON; other formats refused). */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/walc/conffile.h"

#define CONFFILE_MAX (1u << 20)

/* What viper (WAL-G's configuration library) reads besides JSON, by extension. */
static const char *const other_formats[] = { "yaml", "yml", "toml", "hcl", "tfvars", "env",
											 "dotenv", "properties", "props", "prop", "ini",
											 NULL };

static err_code refuse_format(const char *path)
{
	return err_set(E_CONFIG, "%s: walc reads WAL-G configuration files in JSON only; convert it "
							 "to JSON with the same keys (or to environment variables)",
				   path);
}

static const char *extension(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *dot = strrchr(slash ? slash : path, '.');
	return dot ? dot + 1 : "";
}

static char *value_text(const json_t *v)
{
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	if (json_is_integer(v))
		return xasprintf("%lld", (long long)json_integer_value(v));
	if (json_is_real(v))
		return xasprintf("%.17g", json_real_value(v));
	if (json_is_boolean(v))
		return xstrdup(json_is_true(v) ? "true" : "false");
	/* Nested settings (WALG_FAILOVER_STORAGES, WALG_STATSD_EXTRA_TAGS) keep their JSON. */
	return json_dumps(v, JSON_COMPACT);
}

static err_code read_json(const char *path, conffile *out)
{
	json_error_t jerr;
	struct stat sb;
	if (stat(path, &sb) != 0)
		return err_errno(E_CONFIG, errno, "configuration file %s", path);
	if (sb.st_size > (off_t)CONFFILE_MAX)
		return err_set(E_CONFIG, "configuration file %s is larger than 1 MiB", path);
	json_t *doc = json_load_file(path, 0, &jerr);
	if (doc == NULL)
		return err_set(E_CONFIG, "configuration file %s: %s (line %d)", path, jerr.text, jerr.line);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return err_set(E_CONFIG, "configuration file %s: expected a JSON object", path);
	}
	out->path = xstrdup(path);
	out->pairs = xcalloc(json_object_size(doc) + 1, sizeof(*out->pairs));
	const char *key;
	json_t *v;
	json_object_foreach(doc, key, v)
	{
		if (json_is_null(v))
			continue;
		char *name = xstrdup(key);
		for (char *p = name; *p; p++)
			*p = (char)toupper((unsigned char)*p);
		out->pairs[out->n].name = name;
		out->pairs[out->n].value = value_text(v);
		out->n++;
	}
	json_decref(doc);
	return E_OK;
}

err_code conffile_load(const char *explicit_path, conffile *out)
{
	memset(out, 0, sizeof(*out));
	const char *path = explicit_path;
	if (path == NULL || path[0] == '\0')
		path = getenv("WALG_CONFIG_PATH");
	if (path != NULL && path[0] != '\0') {
		const char *ext = extension(path);
		for (size_t i = 0; other_formats[i] != NULL; i++)
			if (strcasecmp(ext, other_formats[i]) == 0)
				return refuse_format(path);
		return read_json(path, out);
	}
	/* WAL-G's default: $HOME/.walg.<any format it reads>. */
	const char *home = getenv("HOME");
	if (home == NULL || home[0] == '\0')
		return E_OK;
	char *json = xasprintf("%s/.walg.json", home);
	if (access(json, F_OK) == 0) { /* viper looks for JSON first */
		err_code rc = read_json(json, out);
		free(json);
		return rc;
	}
	free(json);
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && other_formats[i] != NULL; i++) {
		char *other = xasprintf("%s/.walg.%s", home, other_formats[i]);
		if (access(other, F_OK) == 0)
			rc = refuse_format(other);
		free(other);
	}
	return rc;
}

void conffile_free(conffile *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free((char *)(uintptr_t)f->pairs[i].name);
		free((char *)(uintptr_t)f->pairs[i].value);
	}
	free(f->pairs);
	free(f->path);
	memset(f, 0, sizeof(*f));
}
