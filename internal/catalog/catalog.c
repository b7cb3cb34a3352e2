/* The catalog: sentinels (WAL-G's JSON, read case-insensitively, written in its order) and backup discovery. */
#include "internal/catalog/catalog_impl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>


json_t *catalog_json_get(const json_t *obj, const char *key)
{
	if (!json_is_object(obj))
		return NULL;
	json_t *v = json_object_get(obj, key);
	if (v != NULL)
		return v;
	const char *k;
	json_t *val;
	void *iter = json_object_iter((json_t *)(uintptr_t)obj);
	while (iter != NULL) {
		k = json_object_iter_key(iter);
		val = json_object_iter_value(iter);
		if (strcasecmp(k, key) == 0)
			return val;
		iter = json_object_iter_next((json_t *)(uintptr_t)obj, iter);
	}
	return NULL;
}

/* A catalog object as stored; a missing one is named with its store. */
static err_code get(repo *r, const char *key, sink *into)
{
	err_code rc = repo_get_plain(r, key, into);
	if (rc == E_NOTFOUND)
		return err_set(E_NOTFOUND, "%s does not exist in %s", key, repo_describe(r));
	return rc;
}

err_code catalog_read_json(repo *r, const char *key, size_t max, json_t **out)
{
	membuf mb = { .max = max };
	*out = NULL;
	sink *m = membuf_sink_new(&mb);
	err_code rc = get(r, key, m);
	sink_free(m);
	if (rc != E_OK) {
		free(mb.data);
		return rc == E_NOTFOUND ? rc : err_wrap(rc, "reading %s", key);
	}
	json_error_t jerr;
	*out = json_loadb((const char *)mb.data, mb.len, 0, &jerr);
	free(mb.data);
	if (*out == NULL)
		return err_set(E_CORRUPT, "%s: invalid JSON at line %d: %s", key, jerr.line, jerr.text);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return err_set(E_CORRUPT, "%s: expected a JSON object", key);
	}
	return E_OK;
}

err_code catalog_read_optional(repo *r, const char *key, json_t **out)
{
	err_code rc = catalog_read_json(r, key, CATALOG_JSON_MAX, out);
	if (rc != E_NOTFOUND)
		return rc;
	err_clear();
	return E_OK;
}

/* The scanner's own errors name the object already: they are not wrapped again. */
err_code catalog_files_each(repo *r, const char *backup, catalog_file_fn fn,
							catalog_set_fn set_fn, void *arg)
{
	char *key = xasprintf("%s%s/files_metadata.json", repo_backups(r), backup);
	sink *s = catalog_files_sink_new(key, fn, set_fn, arg);
	err_code rc = get(r, key, s);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	free(key);
	return rc;
}

/* Typed getters: a present member of the wrong type is corrupt; absent is the default. */

static err_code get_u64(const json_t *o, const char *k, const char *what, bool required,
						uint64_t *out, bool *present)
{
	json_t *v = catalog_json_get(o, k);
	if (present != NULL)
		*present = false;
	if (v == NULL || json_is_null(v)) {
		if (required)
			return err_set(E_CORRUPT, "%s: missing %s", what, k);
		return E_OK;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return err_set(E_CORRUPT, "%s: %s is not a non-negative integer", what, k);
	*out = (uint64_t)json_integer_value(v);
	if (present != NULL)
		*present = true;
	return E_OK;
}

static err_code get_str(const json_t *o, const char *k, const char *what, char **out)
{
	json_t *v = catalog_json_get(o, k);
	if (v == NULL || json_is_null(v))
		return E_OK;
	if (!json_is_string(v))
		return err_set(E_CORRUPT, "%s: %s is not a string", what, k);
	*out = xstrdup(json_string_value(v));
	return E_OK;
}

static err_code get_bool(const json_t *o, const char *k, const char *what, bool *out)
{
	json_t *v = catalog_json_get(o, k);
	if (v == NULL || json_is_null(v))
		return E_OK;
	if (!json_is_boolean(v))
		return err_set(E_CORRUPT, "%s: %s is not true or false", what, k);
	*out = json_is_true(v);
	return E_OK;
}

static err_code parse_fields(const json_t *root, const char *what, backup_sentinel *s)
{
	uint64_t n = 0;
	bool present;

	TRY(get_u64(root, "LSN", what, true, &s->lsn, NULL));
	TRY(get_u64(root, "FinishLSN", what, false, &s->finish_lsn, NULL));
	TRY(get_str(root, "DeltaFrom", what, &s->delta_from));
	s->is_delta = s->delta_from != NULL;
	if (s->is_delta) {
		TRY(get_u64(root, "DeltaLSN", what, false, &s->delta_lsn, &present));
		if (!present) /* older WAL-G wrote DeltaFromLSN */
			TRY(get_u64(root, "DeltaFromLSN", what, true, &s->delta_lsn, NULL));
		TRY(get_str(root, "DeltaFullName", what, &s->delta_full_name));
		if (s->delta_full_name == NULL)
			return err_set(E_CORRUPT, "%s: delta without DeltaFullName", what);
		TRY(get_u64(root, "DeltaCount", what, true, &n, NULL));
		s->delta_count = (int)n;
	}
	TRY(get_u64(root, "PgVersion", what, false, &n, NULL));
	s->pg_version = (int)n;
	TRY(get_u64(root, "SystemIdentifier", what, false, &s->system_id, &s->have_system_id));
	TRY(get_u64(root, "UncompressedSize", what, false, &s->uncompressed_size, NULL));
	TRY(get_u64(root, "CompressedSize", what, false, &s->compressed_size, NULL));
	TRY(get_u64(root, "DataCatalogSize", what, false, &s->data_catalog_size, NULL));
	n = 0;
	TRY(get_u64(root, "Version", what, false, &n, NULL));
	s->version = (int)n;
	TRY(get_bool(root, "FilesMetadataDisabled", what, &s->files_metadata_disabled));
	TRY(get_bool(root, "IsPermanent", what, &s->is_permanent));
	TRY(get_str(root, "StartTime", what, &s->start_time));
	TRY(get_str(root, "FinishTime", what, &s->finish_time));
	TRY(get_str(root, "Hostname", what, &s->hostname));
	TRY(get_str(root, "DataDir", what, &s->data_dir));
	json_t *spec = catalog_json_get(root, "Spec");
	if (spec != NULL && !json_is_null(spec)) {
		if (!json_is_object(spec))
			return err_set(E_CORRUPT, "%s: Spec is not an object", what);
		s->spec = json_incref(spec);
	}
	json_t *ud = catalog_json_get(root, "UserData");
	if (ud != NULL && !json_is_null(ud))
		s->user_data = json_incref(ud);
	return E_OK;
}

err_code catalog_sentinel_parse(const json_t *root, const char *name, backup_sentinel *s)
{
	char what[512];
	memset(s, 0, sizeof(*s));
	snprintf(what, sizeof(what), "sentinel of %s", name);
	err_code rc = parse_fields(root, what, s);
	if (rc != E_OK)
		catalog_sentinel_free(s);
	return rc;
}

err_code catalog_sentinel_read(repo *r, const char *name, backup_sentinel *out)
{
	char *key = xasprintf("%s%s" SENTINEL_SUFFIX, repo_backups(r), name);
	json_t *root;
	memset(out, 0, sizeof(*out));
	err_code rc = catalog_read_json(r, key, CATALOG_JSON_MAX, &root);
	free(key);
	if (rc != E_OK)
		return rc;
	rc = catalog_sentinel_parse(root, name, out);
	json_decref(root);
	return rc;
}

void catalog_sentinel_free(backup_sentinel *s)
{
	free(s->delta_from);
	free(s->delta_full_name);
	free(s->start_time);
	free(s->finish_time);
	free(s->hostname);
	free(s->data_dir);
	json_decref(s->spec);
	json_decref(s->user_data);
	memset(s, 0, sizeof(*s));
}

/* WAL-G's key order (§5.4), so a diff against WAL-G's output is quiet. */
json_t *catalog_sentinel_json(const backup_sentinel *s)
{
	json_t *o = json_object();
	json_object_set_new(o, "LSN", json_integer((json_int_t)s->lsn));
	if (s->is_delta) {
		json_object_set_new(o, "DeltaLSN", json_integer((json_int_t)s->delta_lsn));
		json_object_set_new(o, "DeltaFrom", json_string(s->delta_from));
		json_object_set_new(o, "DeltaFullName", json_string(s->delta_full_name));
		json_object_set_new(o, "DeltaCount", json_integer(s->delta_count));
	}
	json_object_set_new(o, "PgVersion", json_integer(s->pg_version));
	json_object_set_new(o, "FinishLSN", json_integer((json_int_t)s->finish_lsn));
	if (s->have_system_id)
		json_object_set_new(o, "SystemIdentifier", json_integer((json_int_t)s->system_id));
	json_object_set_new(o, "UncompressedSize", json_integer((json_int_t)s->uncompressed_size));
	json_object_set_new(o, "CompressedSize", json_integer((json_int_t)s->compressed_size));
	if (s->data_catalog_size != 0)
		json_object_set_new(o, "DataCatalogSize",
							json_integer((json_int_t)s->data_catalog_size));
	if (s->spec != NULL)
		json_object_set(o, "Spec", s->spec);
	if (s->user_data != NULL)
		json_object_set(o, "UserData", s->user_data);
	if (s->files_metadata_disabled)
		json_object_set_new(o, "FilesMetadataDisabled", json_true());
	json_object_set_new(o, "ChkpNum", json_null());
	json_object_set_new(o, "Version", json_integer(2));
	json_object_set_new(o, "StartTime", json_string(s->start_time ? s->start_time : ""));
	json_object_set_new(o, "FinishTime", json_string(s->finish_time ? s->finish_time : ""));
	json_object_set_new(o, "DateFmt", json_string("%Y-%m-%dT%H:%M:%S.%fZ"));
	json_object_set_new(o, "Hostname", json_string(s->hostname ? s->hostname : ""));
	json_object_set_new(o, "DataDir", json_string(s->data_dir ? s->data_dir : ""));
	json_object_set_new(o, "IsPermanent", json_boolean(s->is_permanent));
	return o;
}

/* Listing */

bool catalog_sentinel_skip(err_code rc, const char *name, const char *why)
{
	if (rc != E_CORRUPT)
		return false;
	log_warn("skipping backup %s: its sentinel cannot be read (%s); %s", name, err_msg(), why);
	err_clear();
	return true;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

int catalog_backup_cmp(const backup_ref *x, const backup_ref *y)
{
	if (x->other_cluster != y->other_cluster)
		return x->other_cluster ? -1 : 1;
	int by_pos = x->tli != y->tli ? cmp_u64(x->tli, y->tli) : cmp_u64(x->seg, y->seg);
	if (by_pos != 0 && !x->other_cluster)
		return by_pos;
	int by_time = time_cmp(x->mtime, x->mtime_nsec, y->mtime, y->mtime_nsec);
	if (by_time != 0)
		return by_time;
	return by_pos != 0 ? by_pos : strcmp(x->name, y->name);
}

static int ref_cmp(const void *a, const void *b)
{
	return catalog_backup_cmp(a, b);
}

/* The timeline and segment the 24 hex digits after "base_" give. */
static void ref_position(backup_ref *ref)
{
	const char *p = ref->name + strlen("base_");
	if (!str_has_prefix(ref->name, "base_") || strspn(p, "0123456789ABCDEF") < 24)
		return;
	char part[9] = "";
	uint64_t v[3];
	for (int i = 0; i < 3; i++) {
		memcpy(part, p + 8 * i, 8);
		v[i] = strtoull(part, NULL, 16);
	}
	ref->tli = (uint32_t)v[0];
	ref->seg = v[1] << 32 | v[2];
}

err_code catalog_backups(repo *r, backup_refs *out)
{
	repo_objs l;
	memset(out, 0, sizeof(*out));
	TRY(repo_list(r, repo_backups(r), false, &l));
	out->items = xcalloc(l.len ? l.len : 1, sizeof(*out->items));
	for (size_t i = 0; i < l.len; i++) {
		const char *base = l.items[i].key + strlen(repo_backups(r));
		if (!str_has_suffix(base, SENTINEL_SUFFIX))
			continue;
		size_t n = strlen(base) - strlen(SENTINEL_SUFFIX);
		if (n == 0)
			continue;
		backup_ref *ref = &out->items[out->len++];
		ref->name = xasprintf("%.*s", (int)n, base);
		ref->mtime = l.items[i].mtime;
		ref->mtime_nsec = l.items[i].mtime_nsec;
		ref->storage = l.items[i].where;
		ref_position(ref);
	}
	repo_objs_free(&l);
	xqsort(out->items, out->len, sizeof(*out->items), ref_cmp);
	return E_OK;
}

/*
 * Whether ref's sentinel names another cluster than sysid; *readable false when it cannot
 * be parsed (skipped, warned) or is gone since the listing.
 */
static err_code read_cluster(repo *r, backup_ref *ref, uint64_t sysid, const char *why,
							 bool *readable)
{
	backup_sentinel s;
	err_code rc = catalog_sentinel_read(r, ref->name, &s);
	*readable = rc == E_OK;
	if (rc == E_NOTFOUND || catalog_sentinel_skip(rc, ref->name, why)) {
		err_clear();
		return E_OK;
	}
	TRY(rc);
	ref->other_cluster = s.have_system_id && s.system_id != sysid;
	catalog_sentinel_free(&s);
	return E_OK;
}

err_code catalog_backups_ordered(repo *r, backup_refs *out)
{
	TRY(catalog_backups(r, out));
	bool have;
	uint64_t sysid;
	err_code rc = catalog_marker_sysid(r, &have, &sysid);
	for (size_t i = 0; rc == E_OK && have && i < out->len; i++) {
		bool readable;
		rc = read_cluster(r, &out->items[i], sysid, "it is listed by its name", &readable);
	}
	if (rc != E_OK) {
		catalog_backups_free(out);
		return rc;
	}
	xqsort(out->items, out->len, sizeof(*out->items), ref_cmp);
	return E_OK;
}

void catalog_backups_free(backup_refs *l)
{
	for (size_t i = 0; i < l->len; i++)
		free(l->items[i].name);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

/*
 * The newest readable backup, in catalog_backup_cmp's order: read from the newest by name
 * down to the first of the repository's cluster, which is then the newest (usually one read).
 */
static err_code latest(repo *r, char **out)
{
	backup_refs refs;
	TRY(catalog_backups(r, &refs));
	bool have;
	uint64_t sysid = 0;
	err_code rc = catalog_marker_sysid(r, &have, &sysid);
	const backup_ref *pick = NULL;
	bool *readable = xcalloc(refs.len ? refs.len : 1, sizeof(*readable));
	size_t i = refs.len;
	while (rc == E_OK && pick == NULL && i-- > 0) {
		rc = read_cluster(r, &refs.items[i], have ? sysid : 0, "LATEST is an older backup",
						  &readable[i]);
		if (!have)
			refs.items[i].other_cluster = false;
		if (rc == E_OK && readable[i] && !refs.items[i].other_cluster)
			pick = &refs.items[i];
	}
	/* Only other clusters' backups: the newest of those. */
	for (size_t k = 0; rc == E_OK && pick == NULL && k < refs.len; k++)
		if (readable[k] && (pick == NULL || catalog_backup_cmp(pick, &refs.items[k]) < 0))
			pick = &refs.items[k];
	if (rc == E_OK && pick == NULL)
		rc = err_set(E_NOTFOUND, "no backups found in %s", repo_describe(r));
	if (rc == E_OK) {
		*out = xstrdup(pick->name);
		repo_prefer(r, pick->storage);
	}
	free(readable);
	catalog_backups_free(&refs);
	return rc;
}

err_code catalog_resolve(repo *r, const char *name, char **out)
{
	*out = NULL;
	if (strcmp(name, "LATEST") == 0)
		return latest(r, out);
	if (strchr(name, '/') != NULL || strstr(name, "..") != NULL)
		return err_set(E_CONFIG, "\"%s\" is not a backup name", name);
	char *key = xasprintf("%s%s" SENTINEL_SUFFIX, repo_backups(r), name);
	repo_obj info;
	err_code rc = repo_stat(r, key, &info);
	free(key);
	if (rc == E_NOTFOUND)
		return err_set(E_NOTFOUND, "backup %s does not exist in %s (no sentinel)", name,
					   repo_describe(r));
	TRY(rc);
	*out = xstrdup(name);
	/* its objects are read from where its sentinel is, as WAL-G reads a backup */
	repo_prefer(r, info.where);
	return E_OK;
}

static err_code put_json(repo *r, const char *key, const json_t *doc, bool exclusive)
{
	char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	sink *s = NULL;
	err_code rc = repo_put_plain(r, key, exclusive ? REPO_PUT_NEW : REPO_PUT_REPLACE, &s);
	if (rc == E_OK)
		rc = sink_write(s, text, strlen(text));
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	free(text);
	return rc;
}

err_code catalog_put_json(repo *r, const char *key, const json_t *doc)
{
	err_code rc = put_json(r, key, doc, false);
	return rc == E_OK ? E_OK : err_wrap(rc, "storing %s", key);
}

err_code catalog_put_json_new(repo *r, const char *key, const json_t *doc)
{
	return put_json(r, key, doc, true);
}

bool catalog_permanent(repo *r, const char *name, const backup_sentinel *s)
{
	char *key = xasprintf("%s%s/metadata.json", repo_backups(r), name);
	json_t *meta = NULL;
	bool perm = s != NULL && s->is_permanent;
	/* metadata.json is authoritative: backup-mark edits it (reference §4.5). */
	if (catalog_read_json(r, key, CATALOG_JSON_MAX, &meta) == E_OK) {
		json_t *p = catalog_json_get(meta, "is_permanent");
		if (json_is_boolean(p))
			perm = json_is_true(p);
	}
	err_clear();
	json_decref(meta);
	free(key);
	return perm;
}

err_code catalog_find_by_user_data(repo *r, const char *json_text, const char *what,
								   char **name)
{
	json_error_t jerr;
	*name = NULL;
	json_t *want = json_loads(json_text, JSON_DECODE_ANY, &jerr);
	if (want == NULL)
		return err_set(E_CONFIG, "%s is not valid JSON: %s", what, jerr.text);
	backup_refs refs;
	err_code rc = catalog_backups(r, &refs);
	for (size_t i = 0; rc == E_OK && i < refs.len; i++) {
		char *key = xasprintf("%s%s/metadata.json", repo_backups(r), refs.items[i].name);
		json_t *meta = NULL;
		bool match = catalog_read_json(r, key, CATALOG_JSON_MAX, &meta) == E_OK &&
			json_equal(catalog_json_get(meta, "user_data"), want);
		err_clear();
		if (match && *name != NULL)
			rc = err_set(E_CONFIG, "%s: more than one backup has that user data (%s, %s)", what,
						 *name, refs.items[i].name);
		else if (match)
			*name = xstrdup(refs.items[i].name);
		json_decref(meta);
		free(key);
	}
	catalog_backups_free(&refs);
	json_decref(want);
	if (rc == E_OK && *name == NULL)
		rc = err_set(E_NOTFOUND, "%s: no backup in %s has that user data", what,
					 repo_describe(r));
	if (rc != E_OK) {
		free(*name);
		*name = NULL;
	}
	return rc;
}

char *catalog_wal_file_of(const char *name)
{
	for (const char *p = name; *p; p++) {
		size_t n = 0;
		while (p[n] && ((p[n] >= '0' && p[n] <= '9') || (p[n] >= 'A' && p[n] <= 'F')))
			n++;
		if (n >= 24)
			return xasprintf("%.24s", p);
		if (n > 0)
			p += n - 1;
	}
	return xstrdup("");
}

const char *catalog_storage_name(const backup_ref *ref)
{
	return ref->storage != NULL ? ref->storage : "default";
}

json_t *catalog_backup_json(const backup_ref *ref, json_t *meta)
{
	static const char *const order[] = { "start_time",		  "finish_time",	   "date_fmt",
										 "hostname",		  "data_dir",		   "pg_version",
										 "start_lsn",		  "finish_lsn",		   "is_permanent",
										 "system_identifier", "uncompressed_size", "compressed_size",
										 "user_data" };
	json_t *o = json_object();
	json_object_set_new(o, "backup_name", json_string(ref->name));
	char *t = time_format_rfc3339(ref->mtime, ref->mtime_nsec);
	json_object_set_new(o, "time", json_string(t));
	free(t);
	char *w = catalog_wal_file_of(ref->name);
	json_object_set_new(o, "wal_file_name", json_string(w));
	free(w);
	json_object_set_new(o, "storage_name", json_string(catalog_storage_name(ref)));
	if (meta == NULL)
		return o;
	for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
		json_t *v = json_object_get(meta, order[k]);
		if (v != NULL)
			json_object_set(o, order[k], v);
	}
	json_object_update_missing(o, meta);
	return o;
}
