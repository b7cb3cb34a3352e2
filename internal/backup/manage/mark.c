/*
 * backup-mark: permanence lives in metadata.json (WAL-G reads it there) and, unlike WAL-G,
 * walc updates the sentinel's IsPermanent too so the two never disagree.
 */
#include "internal/backup/backup.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>


static err_code set_flag(repo *r, const char *key, const char *field, bool value)
{
	json_t *doc;
	TRY(catalog_read_json(r, key, CATALOG_JSON_MAX, &doc));
	/* Keep the writer's spelling of the key if it differs in case. */
	const char *k;
	json_t *v;
	const char *use = field;
	json_object_foreach(doc, k, v)
	{
		if (strcasecmp(k, field) == 0)
			use = k;
	}
	json_object_set_new(doc, use, json_boolean(value));
	err_code rc = catalog_put_json(r, key, doc);
	json_decref(doc);
	return rc;
}

static err_code mark_one(repo *r, const char *name, bool permanent)
{
	char *meta = xasprintf(REPO_BACKUP_DIR "%s/metadata.json", name);
	char *sent = xasprintf(REPO_BACKUP_DIR "%s" SENTINEL_SUFFIX, name);
	err_code rc = set_flag(r, meta, "is_permanent", permanent);
	if (rc == E_OK)
		rc = set_flag(r, sent, "IsPermanent", permanent);
	if (rc == E_OK)
		log_info("%s is now %s", name, permanent ? "permanent" : "impermanent");
	free(meta);
	free(sent);
	return rc;
}

err_code backup_mark(repo *r, const char *name, bool impermanent)
{
	char *resolved;
	TRY(catalog_resolve(r, name, &resolved));
	err_code rc = E_OK;
	if (impermanent) {
		/* A permanent delta built directly on it would lose its base. */
		backup_refs refs;
		rc = catalog_backups(r, &refs);
		for (size_t i = 0; rc == E_OK && i < refs.len; i++) {
			backup_sentinel s;
			if (catalog_sentinel_read(r, refs.items[i].name, &s) != E_OK) {
				err_clear();
				continue;
			}
			if (s.is_delta && strcmp(s.delta_from, resolved) == 0 &&
				catalog_permanent(r, refs.items[i].name, NULL))
				rc = err_set(E_CONFIG, "cannot mark %s impermanent: permanent backup %s is based "
									   "on it",
							 resolved, refs.items[i].name);
			catalog_sentinel_free(&s);
		}
		catalog_backups_free(&refs);
		if (rc == E_OK) {
			if (!catalog_permanent(r, resolved, NULL))
				log_warn("%s is already impermanent", resolved);
			rc = mark_one(r, resolved, false);
		}
		free(resolved);
		return rc;
	}
	/* Permanent: the backup and its whole chain down to the full. */
	char *cur = resolved;
	for (int guard = 0; rc == E_OK && cur != NULL && guard < 100000; guard++) {
		backup_sentinel s;
		rc = catalog_sentinel_read(r, cur, &s);
		if (rc != E_OK)
			break;
		if (catalog_permanent(r, cur, NULL))
			log_warn("%s is already permanent", cur);
		rc = mark_one(r, cur, true);
		char *next = s.is_delta ? xstrdup(s.delta_from) : NULL;
		catalog_sentinel_free(&s);
		free(cur);
		cur = next;
	}
	free(cur);
	return rc;
}
