/*
 * WAL-G's DatabasesByNames: backup-push records each database's relations in
 * files_metadata.json as the server lists them, so that backup-fetch --restore-only
 * (restore/partial.c) can find what a database or a table is made of.
 */
#include "internal/backup/push/push_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

/*
 * WAL-G's shape, written as the rows come (root first, then what is restored with it): each
 * relation that has no inheritance parent by name, and under it, as "subtables", its
 * partitions and inheritors, and (walc) the indexes and TOAST tables of it and of them, so
 * that a table restored alone comes with them (WAL-G restores a table's subtables). An index
 * or TOAST table is also listed by its own name, as WAL-G lists it; those wait in `later`
 * until their root's entry is closed.
 */
typedef struct dbn_writer {
	push_state *st;
	membuf text;  /* what is being built, flushed into files_metadata.json as it grows */
	membuf later; /* top-level entries of the current root's group */
	uint32_t root;
	bool in_group, in_entry, in_subs, any;
	const char *db;
	size_t skipped; /* names that are not UTF-8 */
} dbn_writer;

static void text_add(membuf *m, const char *s)
{
	membuf_add(m, s, strlen(s));
}

/* "name":{"oid":N,"relfilenode":N into m, after a comma unless first; false if not UTF-8. */
static bool entry_open(membuf *m, const pg_relation *r, bool first)
{
	json_t *name = json_string(r->name);
	char *quoted = name != NULL ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
	json_decref(name);
	if (quoted == NULL)
		return false;
	char nums[64];
	snprintf(nums, sizeof(nums), ":{\"oid\":%u,\"relfilenode\":%u", r->oid, r->relfilenode);
	if (!first)
		text_add(m, ",");
	text_add(m, quoted);
	text_add(m, nums);
	free(quoted);
	return true;
}

static void group_end(dbn_writer *w)
{
	if (w->in_subs)
		text_add(&w->text, "}");
	if (w->in_entry)
		text_add(&w->text, "}");
	membuf_add(&w->text, w->later.data, w->later.len);
	w->any |= w->later.len > 0 || w->in_entry;
	w->later.len = 0;
	w->in_group = w->in_entry = w->in_subs = false;
}

static err_code on_relation(void *arg, const pg_relation *r)
{
	dbn_writer *w = arg;
	if (!w->in_group || r->root != w->root) {
		if (w->in_group)
			group_end(w);
		w->in_group = true;
		w->root = r->root;
		if (r->oid == r->root) { /* a group without its root (no storage) lists no subtables */
			w->in_entry = entry_open(&w->text, r, !w->any);
			w->skipped += !w->in_entry;
			return E_OK;
		}
	}
	if (w->in_entry) {
		text_add(&w->text, w->in_subs ? "," : ",\"subtables\":{");
		w->in_subs = true;
		if (entry_open(&w->text, r, true))
			text_add(&w->text, "}");
		else
			w->skipped++;
	}
	/* an index or TOAST table has no inheritance parent: WAL-G lists it by its name too */
	if (r->parent == 0 && entry_open(&w->later, r, !w->any && w->later.len == 0 && !w->in_entry))
		text_add(&w->later, "}");
	if (w->text.len >= ((size_t)1 << 20)) {
		TRY(fmeta_text(w->st, (const char *)w->text.data, w->text.len));
		w->text.len = 0;
	}
	return E_OK;
}

err_code push_databases_by_names(push_state *st, pg_session *s)
{
	pg_database *d = NULL;
	size_t n = 0;
	err_code rc = pg_databases_read(s, &d, &n);
	if (rc == E_OK)
		rc = fmeta_member(st, "DatabasesByNames");
	dbn_writer w = { .st = st, .text = { .max = SIZE_MAX }, .later = { .max = SIZE_MAX } };
	if (rc == E_OK)
		rc = fmeta_text(st, "{", 1);
	bool first = true;
	for (size_t i = 0; rc == E_OK && i < n; i++) {
		json_t *name = json_string(d[i].name);
		char *quoted = name != NULL ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
		json_decref(name);
		if (quoted == NULL) {
			log_warn("database %s: its name is not UTF-8; --restore-only will not find it",
					 d[i].name);
			continue;
		}
		char head[64];
		snprintf(head, sizeof(head), ":{\"oid\":%u,\"tables_new\":{", d[i].oid);
		w.text.len = w.later.len = 0;
		w.any = w.in_group = w.in_entry = w.in_subs = false;
		if (!first)
			text_add(&w.text, ",");
		text_add(&w.text, quoted);
		text_add(&w.text, head);
		free(quoted);
		bool started;
		w.db = d[i].name;
		rc = pg_relations_each(d[i].name, on_relation, &w, &started);
		if (rc != E_OK && !started) {
			/* nothing of it written: the backup stays whole without its names */
			log_warn("%s: --restore-only will not find it in this backup", err_msg());
			err_clear();
			rc = E_OK;
			continue;
		}
		if (rc == E_OK && w.in_group)
			group_end(&w);
		text_add(&w.text, "}}");
		if (rc == E_OK)
			rc = fmeta_text(st, (const char *)w.text.data, w.text.len);
		first = false;
	}
	if (rc == E_OK)
		rc = fmeta_text(st, "}", 1);
	if (w.skipped > 0)
		log_warn("%zu relation names are not UTF-8: --restore-only will not find them",
				 w.skipped);
	free(w.text.data);
	free(w.later.data);
	pg_databases_free(d, n);
	return rc == E_OK ? E_OK : err_wrap(rc, "recording the databases' relations");
}
