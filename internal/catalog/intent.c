/*
 * Retention's intent: before deleting backups, delete writes which ones into a root object;
 * a delta push reads it after claiming its name. Each writes first and reads the other's
 * record second, so at least one of them sees the other: retention spares the base of a push
 * it sees, and a push whose base is listed stops. A record whose delete is gone from this
 * machine (killed mid-run), or is older than an hour, no longer counts.
 */
#include "internal/catalog/catalog_impl.h"

#include <stdlib.h>
#include <string.h>

#define INTENT_KEY "walc_deleting.json"
#define INTENT_VALID_S 3600 /* a record older than this is a crashed delete's */

err_code catalog_deleting_begin(repo *r, const char *const *names, size_t n)
{
	char *when = time_now_rfc3339();
	json_t *doc = json_object(), *list = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, json_string(names[i]));
	json_object_set_new(doc, "backups", list);
	proc_rec here = proc_here();
	proc_rec_json(&here, doc);
	json_object_set_new(doc, "started", json_string(when));
	free(when);
	err_code rc = catalog_put_json(r, INTENT_KEY, doc);
	json_decref(doc);
	return rc;
}

void catalog_deleting_end(repo *r)
{
	if (repo_remove(r, INTENT_KEY) != E_OK)
		err_clear();
}

err_code catalog_deleting(repo *r, const char *name, char **who)
{
	json_t *doc = NULL;
	*who = NULL;
	TRY(catalog_read_optional(r, INTENT_KEY, &doc));
	if (doc == NULL)
		return E_OK;
	const char *started = json_string_value(json_object_get(doc, "started"));
	time_t sec;
	long nsec;
	bool current = started != NULL && time_parse_rfc3339(started, &sec, &nsec) &&
		time(NULL) - sec < INTENT_VALID_S;
	bool listed = false;
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(doc, "backups"), i, v)
		listed |= json_is_string(v) && strcmp(json_string_value(v), name) == 0;
	proc_rec by = proc_rec_from_json(doc);
	if (current && listed && proc_gone(&by)) {
		log_info("the delete that started %s (pid %ld on this host) is gone: its intent "
				 "(" INTENT_KEY ") no longer counts",
				 started, by.pid);
		current = false;
	}
	if (current && listed)
		*who = xasprintf("a delete started %s on %s (pid %ld)", started,
						 by.hostname ? by.hostname : "?", by.pid);
	json_decref(doc);
	return E_OK;
}
