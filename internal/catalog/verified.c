/*
 * What has been proven of a backup, and what retention thinned: backup-verify's record kept
 * with each backup, and the point-in-time window a thinning delete leaves. Both are small
 * plain JSON objects WAL-G never reads.
 */
#include "internal/catalog/catalog_impl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static char *verified_key(repo *r, const char *name)
{
	return xasprintf("%s%s/" CATALOG_VERIFIED, repo_backups(r), name);
}

static json_t *lsn_json(uint64_t lsn)
{
	char text[32];
	snprintf(text, sizeof(text), "%" PRIX64 "/%" PRIX64, lsn >> 32, lsn & 0xffffffffu);
	return json_string(text);
}

static bool lsn_parse(const json_t *v, uint64_t *out)
{
	unsigned hi, lo;
	const char *s = json_string_value(v);
	char tail;
	if (s == NULL || sscanf(s, "%X/%X%c", &hi, &lo, &tail) != 2)
		return false;
	*out = (uint64_t)hi << 32 | lo;
	return true;
}

err_code catalog_verified_put(repo *r, const char *name, const backup_sentinel *s,
							  const verify_record *v)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "backup", json_string(name));
	json_object_set_new(doc, "start_lsn", lsn_json(s->lsn));
	json_object_set_new(doc, "finish_lsn", lsn_json(s->finish_lsn));
	json_object_set_new(doc, "verified_at", json_string(v->at_text));
	json_object_set_new(doc, "result", json_string(v->passed ? "passed" : "failed"));
	json_object_set_new(doc, "problems", json_integer((json_int_t)v->problems));
	if (v->first_problem != NULL)
		json_object_set_new(doc, "first_problem", json_string(v->first_problem));
	if (v->checked != NULL)
		json_object_set(doc, "checked", v->checked);
	char *key = verified_key(r, name);
	err_code rc = catalog_put_json(r, key, doc);
	free(key);
	json_decref(doc);
	return rc;
}

/* A record that parses and names this backup's LSNs, into out. */
static bool record_of(const json_t *doc, const backup_sentinel *s, verify_record *out)
{
	uint64_t start, finish;
	const char *result = json_string_value(json_object_get(doc, "result"));
	const char *at = json_string_value(json_object_get(doc, "verified_at"));
	json_t *problems = json_object_get(doc, "problems");
	long nsec;
	if (!lsn_parse(json_object_get(doc, "start_lsn"), &start) ||
		!lsn_parse(json_object_get(doc, "finish_lsn"), &finish) || result == NULL ||
		at == NULL || !time_parse_rfc3339(at, &out->at, &nsec) || !json_is_integer(problems) ||
		json_integer_value(problems) < 0)
		return false;
	if (start != s->lsn || finish != s->finish_lsn)
		return false;
	out->passed = strcmp(result, "passed") == 0 && json_integer_value(problems) == 0;
	out->problems = (uint64_t)json_integer_value(problems);
	out->at_text = xstrdup(at);
	const char *first = json_string_value(json_object_get(doc, "first_problem"));
	out->first_problem = first != NULL ? xstrdup(first) : NULL;
	out->checked = json_incref(json_object_get(doc, "checked"));
	return true;
}

err_code catalog_verified_get(repo *r, const char *name, const backup_sentinel *s,
							  verify_record *out, bool *found)
{
	memset(out, 0, sizeof(*out));
	*found = false;
	char *key = verified_key(r, name);
	json_t *doc = NULL;
	err_code rc = catalog_read_optional(r, key, &doc);
	if (rc == E_CORRUPT) { /* not JSON, too large: as if never verified */
		log_warn("%s: %s; the backup counts as not verified", key, err_msg());
		err_clear();
		rc = E_OK;
	}
	if (rc == E_OK && doc != NULL) {
		*found = record_of(doc, s, out);
		if (!*found)
			log_warn("%s does not record a verification of this backup (another backup's "
					 "LSNs, or a field missing); the backup counts as not verified",
					 key);
	}
	json_decref(doc);
	free(key);
	return rc;
}

void catalog_verified_free(verify_record *v)
{
	free(v->at_text);
	free(v->first_problem);
	json_decref(v->checked);
	memset(v, 0, sizeof(*v));
}

err_code catalog_newest_verified(repo *r, char **name, time_t *finish, verify_record *rec,
								 bool *found)
{
	backup_refs refs;
	*found = false;
	*name = NULL;
	*finish = 0;
	memset(rec, 0, sizeof(*rec));
	TRY(catalog_backups_ordered(r, &refs));
	err_code rc = E_OK;
	for (size_t i = refs.len; rc == E_OK && !*found && i-- > 0;) {
		backup_sentinel s;
		rc = catalog_sentinel_read(r, refs.items[i].name, &s);
		if (rc == E_NOTFOUND || rc == E_CORRUPT) {
			err_clear();
			rc = E_OK;
			continue;
		}
		bool have = false;
		if (rc == E_OK)
			rc = catalog_verified_get(r, refs.items[i].name, &s, rec, &have);
		if (rc == E_OK && have && rec->passed) {
			*found = true;
			*name = xstrdup(refs.items[i].name);
			long nsec;
			if (s.finish_time == NULL || !time_parse_rfc3339(s.finish_time, finish, &nsec))
				*finish = 0;
		} else {
			catalog_verified_free(rec);
		}
		catalog_sentinel_free(&s);
	}
	catalog_backups_free(&refs);
	return rc;
}

err_code catalog_window_put(repo *r, const retention_window *w)
{
	json_t *doc = json_object();
	json_object_set_new(doc, "pitr_window", json_string(w->window));
	json_object_set_new(doc, "recorded", json_string(w->recorded));
	json_object_set_new(doc, "from_backup", json_string(w->from_backup));
	json_object_set_new(doc, "from_time", json_string(w->from_text));
	json_object_set_new(doc, "from_lsn", lsn_json(w->from_lsn));
	err_code rc = catalog_put_json(r, CATALOG_RETENTION_WINDOW, doc);
	json_decref(doc);
	return rc;
}

err_code catalog_window_get(repo *r, retention_window *out, bool *found)
{
	json_t *doc = NULL;
	memset(out, 0, sizeof(*out));
	*found = false;
	err_code rc = catalog_read_optional(r, CATALOG_RETENTION_WINDOW, &doc);
	if (rc == E_CORRUPT) {
		log_warn("%s", err_msg());
		err_clear();
		return E_OK;
	}
	TRY(rc);
	if (doc == NULL)
		return E_OK;
	const char *window = json_string_value(json_object_get(doc, "pitr_window"));
	const char *recorded = json_string_value(json_object_get(doc, "recorded"));
	const char *from = json_string_value(json_object_get(doc, "from_backup"));
	const char *at = json_string_value(json_object_get(doc, "from_time"));
	long nsec;
	if (window != NULL && recorded != NULL && from != NULL && at != NULL &&
		time_parse_rfc3339(at, &out->from_time, &nsec) &&
		lsn_parse(json_object_get(doc, "from_lsn"), &out->from_lsn)) {
		*found = true;
		out->window = xstrdup(window);
		out->recorded = xstrdup(recorded);
		out->from_backup = xstrdup(from);
		out->from_text = xstrdup(at);
	} else {
		log_warn(CATALOG_RETENTION_WINDOW " cannot be read (a field missing or malformed): "
				 "point-in-time targets are not checked against the window it records");
	}
	json_decref(doc);
	return E_OK;
}

void catalog_window_free(retention_window *w)
{
	free(w->window);
	free(w->recorded);
	free(w->from_backup);
	free(w->from_text);
	memset(w, 0, sizeof(*w));
}
