/*
 * files_metadata.json's Files as a sorted table of fixed-size records (catalog.h): filled
 * from the streamed reader, so that a restore of a delta chain holds 32 bytes a file per
 * backup, a delta restore and backup-verify 56, rather than the document's jansson tree.
 */
#include "internal/catalog/catalog.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(file_rec) == 32, "a file_rec is 32 bytes: the table's cost per file");

/* A flag member absent, true or false; anything else is corrupt. */
static bool flag(const json_t *rec, const char *key, uint32_t bit, uint32_t *flags)
{
	const json_t *v = catalog_json_get(rec, key);
	if (v != NULL && !json_is_boolean(v))
		return false;
	if (json_is_true(v))
		*flags |= bit;
	return true;
}

err_code file_table_add(void *table, const char *name, const json_t *rec)
{
	file_table *t = table;
	if (!json_is_object(rec))
		return err_set(E_CORRUPT, "the entry for %s is not an object", name);
	if (t->adding.n == UINT32_MAX)
		return err_set(E_CORRUPT, "more than %u files in Files", UINT32_MAX);
	/* built here, added once whole: an entry refused halfway leaves no record behind */
	file_rec r = { .at = (uint32_t)t->adding.n };
	file_sum fs = { 0, { 0, 0 } };
	hash128(name, strlen(name), r.name);
	if (!flag(rec, "IsIncremented", FILE_INCREMENTED, &r.flags) ||
		!flag(rec, "IsSkipped", FILE_SKIPPED, &r.flags))
		return err_set(E_CORRUPT, "the entry for %s is malformed", name);
	/* FrameOffset and Size are walc's and WAL-G's; an odd value is only not used. */
	const json_t *frame = json_object_get(rec, "FrameOffset"), *size = catalog_json_get(rec, "Size");
	if (json_is_integer(frame) && json_integer_value(frame) >= 0) {
		r.frame = (uint64_t)json_integer_value(frame);
		r.flags |= FILE_FRAME;
	}
	if (json_is_integer(size) && json_integer_value(size) >= 0) {
		fs.size = (uint64_t)json_integer_value(size);
		r.flags |= FILE_SIZE;
	}
	const json_t *sum = catalog_json_get(rec, "Checksum");
	if (json_is_string(sum))
		r.flags |= hash_text_parse(json_string_value(sum), fs.sum) ? FILE_SUM : FILE_SUM_OTHER;
	t->adding.size = sizeof(file_rec);
	*(file_rec *)recs_add(&t->adding) = r;
	if (t->keep_sums) {
		t->adding_sums.size = sizeof(file_sum);
		*(file_sum *)recs_add(&t->adding_sums) = fs;
	}
	return E_OK;
}

err_code file_table_end(file_table *t, const char *what)
{
	t->n = t->adding.n;
	t->recs = recs_take(&t->adding);
	t->sums = recs_take(&t->adding_sums);
	if (t->n == 0)
		return E_OK;
	qsort(t->recs, t->n, sizeof(*t->recs), hash128_cmp);
	/* JSON keeps the last of a name twice, WAL-G too; which of two records is last is lost here */
	for (size_t i = 1; i < t->n; i++)
		if (hash128_cmp(t->recs[i - 1].name, t->recs[i].name) == 0)
			return err_set(E_CORRUPT, "%s: a file is listed twice in Files", what);
	return E_OK;
}

typedef struct named_table {
	file_table *t;
	const char *what;
} named_table;

/* An entry's error names the object too (the scanner's own errors do already). */
static err_code add_named(void *arg, const char *name, const json_t *rec)
{
	named_table *nt = arg;
	err_code rc = file_table_add(nt->t, name, rec);
	return rc == E_OK ? E_OK : err_wrap(rc, "%s", nt->what);
}

err_code catalog_file_table(repo *r, const char *backup, bool sums, file_table *out)
{
	memset(out, 0, sizeof(*out));
	out->keep_sums = sums;
	char *what = xasprintf(REPO_BACKUP_DIR "%s/files_metadata.json", backup);
	named_table nt = { out, what };
	err_code rc = catalog_files_each(r, backup, add_named, NULL, &nt);
	if (rc == E_OK)
		rc = file_table_end(out, what);
	free(what);
	if (rc != E_OK)
		file_table_free(out);
	return rc;
}

const file_rec *file_table_find_hash(const file_table *t, const uint64_t name[2])
{
	if (t == NULL || t->n == 0)
		return NULL;
	return bsearch(name, t->recs, t->n, sizeof(*t->recs), hash128_cmp);
}

const file_rec *file_table_find(const file_table *t, const char *name)
{
	uint64_t h[2];
	hash128(name, strlen(name), h);
	return file_table_find_hash(t, h);
}

const file_sum *file_table_sum(const file_table *t, const file_rec *f)
{
	return t->keep_sums ? &t->sums[f->at] : NULL;
}

void file_table_free(file_table *t)
{
	recs_free(&t->adding);
	recs_free(&t->adding_sums);
	free(t->recs);
	free(t->sums);
	memset(t, 0, sizeof(*t));
}
