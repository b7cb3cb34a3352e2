/*
 * WAL known lost: what wal-receive found gone from the server before it was stored (an
 * invalidated slot), and what archiving dropped past WALG_WAL_BACKLOG_MAX, recorded at the
 * repository's root (WAL-G ignores the object) so that wal-verify, wal-show, backup-verify
 * --wal, backup-list's recovery windows and recovery targets name the gap rather than meet a
 * hole they cannot explain.
 */
#include "internal/wal/wal_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/catalog/catalog.h"
#include "internal/pg/pg.h"

err_code wal_lost_record(repo *r, uint32_t tli, const char *first, const char *last,
						 const char *why)
{
	json_t *doc;
	TRY(wal_read_json(r, WAL_LOST_OBJECT, &doc));
	if (doc == NULL)
		doc = json_object();
	json_t *gaps = json_object_get(doc, "gaps");
	if (!json_is_array(gaps)) {
		gaps = json_array();
		json_object_set_new(doc, "gaps", gaps);
	}
	char *when = time_now_rfc3339();
	json_array_append_new(gaps, json_pack("{s:i, s:s, s:s, s:s, s:s}", "timeline",
										  (json_int_t)tli, "first_segment", first,
										  "last_segment", last, "recorded", when, "reason",
										  why));
	free(when);
	err_code rc = catalog_put_json(r, WAL_LOST_OBJECT, doc);
	json_decref(doc);
	return rc;
}

err_code wal_lost_read(repo *r, uint64_t seg_size, wal_lost *out)
{
	memset(out, 0, sizeof(*out));
	json_t *doc;
	TRY(wal_read_json(r, WAL_LOST_OBJECT, &doc));
	if (doc == NULL)
		return E_OK;
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(doc, "gaps"), i, g)
	{
		const char *a = json_string_value(json_object_get(g, "first_segment"));
		const char *b = json_string_value(json_object_get(g, "last_segment"));
		if (!wal_lost_add(out, seg_size, a, b, json_string_value(json_object_get(g, "reason")))) {
			err_clear();
			log_warn(WAL_LOST_OBJECT ": gap %zu is not two segment names; left out", i);
		}
	}
	json_decref(doc);
	return E_OK;
}

bool wal_lost_add(wal_lost *l, uint64_t seg_size, const char *first, const char *last,
				  const char *why)
{
	wal_lost_gap gap;
	uint32_t tli2;
	if (first == NULL || last == NULL || wal_name_parse(first, seg_size, &gap.tli, &gap.first) != E_OK ||
		wal_name_parse(last, seg_size, &tli2, &gap.last) != E_OK || tli2 != gap.tli ||
		gap.last < gap.first)
		return false;
	snprintf(gap.why, sizeof(gap.why), "%s", why ? why : "");
	l->gaps = xrealloc(l->gaps, (l->n + 1) * sizeof(*l->gaps));
	l->gaps[l->n++] = gap;
	return true;
}

const wal_lost_gap *wal_lost_at(const wal_lost *l, uint32_t tli, uint64_t segno)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->gaps[i].tli == tli && segno >= l->gaps[i].first && segno <= l->gaps[i].last)
			return &l->gaps[i];
	return NULL;
}

bool wal_lost_has(const wal_lost *l, uint32_t tli, uint64_t segno)
{
	return wal_lost_at(l, tli, segno) != NULL;
}

char *wal_lost_describe(const wal_lost_gap *g, uint64_t seg_size)
{
	char a[WAL_NAME_LEN + 1], b[WAL_NAME_LEN + 1];
	wal_name_format(a, g->tli, g->first, seg_size);
	wal_name_format(b, g->tli, g->last, seg_size);
	return xasprintf("WAL segments %s to %s are recorded lost (%s)", a, b,
					 g->why[0] ? g->why : "no reason recorded");
}

void wal_lost_free(wal_lost *l)
{
	free(l->gaps);
	memset(l, 0, sizeof(*l));
}
