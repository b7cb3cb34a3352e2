/*
 * files_metadata.json's Files as a keytab (catalog.h): filled from the streamed reader, so
 * that a restore of a delta chain holds a few bytes a file per backup (a delta restore and
 * backup-verify 24 more for each entry that records a size or checksum), rather than the
 * document's jansson tree.
 */
#include "internal/catalog/catalog.h"

#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

/* A keytab entry's numbers; the entry's place in Files only when sums are kept. */
enum { F_FLAGS, F_FRAME, F_AT };

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
	if (t->added == UINT32_MAX)
		return err_set(E_CORRUPT, "more than %u files in Files", UINT32_MAX);
	/* built here, added once whole: an entry refused halfway leaves no record behind */
	uint32_t flags = 0;
	uint64_t frame_at = 0;
	file_sum fs = { 0, { 0, 0 } };
	if (!flag(rec, "IsIncremented", FILE_INCREMENTED, &flags) ||
		!flag(rec, "IsSkipped", FILE_SKIPPED, &flags))
		return err_set(E_CORRUPT, "the entry for %s is malformed", name);
	/* FrameOffset and Size are walc's and WAL-G's; an odd value is only not used. */
	const json_t *frame = json_object_get(rec, "FrameOffset"), *size = catalog_json_get(rec, "Size");
	if (json_is_integer(frame) && json_integer_value(frame) >= 0) {
		frame_at = (uint64_t)json_integer_value(frame);
		flags |= FILE_FRAME;
	}
	if (json_is_integer(size) && json_integer_value(size) >= 0) {
		fs.size = (uint64_t)json_integer_value(size);
		flags |= FILE_SIZE;
	}
	/* an increment's pages alone say nothing of the whole file: its sum is its own */
	const json_t *sum =
		catalog_json_get(rec, (flags & FILE_INCREMENTED) ? "IncrementChecksum" : "Checksum");
	if (json_is_string(sum))
		flags |= hash_text_parse(json_string_value(sum), fs.sum) ? FILE_SUM : FILE_SUM_OTHER;
	if (t->recs == NULL)
		t->recs = keytab_new(t->keep_sums ? 3 : 2);
	uint64_t key[2], fields[KEYTAB_FIELDS] = { [F_FLAGS] = flags, [F_FRAME] = frame_at,
											   [F_AT] = t->adding_sums.n };
	pg_name_key(name, key);
	keytab_add(t->recs, key, fields);
	/* only entries that record something: a delta's unchanged files (most of them) do not */
	if (t->keep_sums && (flags & FILE_SUMMED)) {
		t->adding_sums.size = sizeof(file_sum);
		*(file_sum *)recs_add(&t->adding_sums) = fs;
	}
	t->added++;
	return E_OK;
}

err_code file_table_end(file_table *t, const char *what)
{
	t->sums = recs_take(&t->adding_sums);
	if (t->recs == NULL)
		return E_OK;
	/* JSON keeps the last of a name twice, WAL-G too; which of two records is last is lost here */
	bool twice = keytab_finish(t->recs);
	t->n = keytab_count(t->recs);
	if (twice)
		return err_set(E_CORRUPT, "%s: a file is listed twice in Files", what);
	return E_OK;
}

typedef struct named_table {
	file_table *t;
	const char *what;
	catalog_set_fn set_fn; /* the caller's, with its own argument */
	void *set_arg;
} named_table;

/* An entry's error names the object too (the scanner's own errors do already). */
static err_code add_named(void *arg, const char *name, const json_t *rec)
{
	named_table *nt = arg;
	err_code rc = file_table_add(nt->t, name, rec);
	return rc == E_OK ? E_OK : err_wrap(rc, "%s", nt->what);
}

static err_code pass_set(void *arg, const char *part, const char *member)
{
	named_table *nt = arg;
	return nt->set_fn(nt->set_arg, part, member);
}

err_code catalog_file_table(repo *r, const char *backup, bool sums, file_table *out)
{
	return catalog_file_table_sets(r, backup, sums, out, NULL, NULL);
}

err_code catalog_file_table_sets(repo *r, const char *backup, bool sums, file_table *out,
								 catalog_set_fn set_fn, void *arg)
{
	memset(out, 0, sizeof(*out));
	out->keep_sums = sums;
	char *what = xasprintf("%s%s/files_metadata.json", repo_backups(r), backup);
	named_table nt = { out, what, set_fn, arg };
	err_code rc = catalog_files_each(r, backup, add_named, set_fn ? pass_set : NULL, &nt);
	if (rc == E_OK)
		rc = file_table_end(out, what);
	free(what);
	if (rc != E_OK)
		file_table_free(out);
	return rc;
}

static file_rec rec_of(const uint64_t *fields, size_t idx, bool sums)
{
	return (file_rec){ fields[F_FRAME], (uint32_t)fields[F_FLAGS],
					   sums ? (uint32_t)fields[F_AT] : 0, idx };
}

bool file_table_find_key(const file_table *t, const uint64_t key[2], file_rec *out)
{
	uint64_t fields[KEYTAB_FIELDS];
	size_t idx;
	if (t == NULL || !keytab_find(t->recs, key, fields, &idx))
		return false;
	if (out != NULL)
		*out = rec_of(fields, idx, t->keep_sums);
	return true;
}

bool file_table_find(const file_table *t, const char *name, file_rec *out)
{
	uint64_t key[2];
	pg_name_key(name, key);
	return file_table_find_key(t, key, out);
}

typedef struct each_arg {
	const file_table *t;
	file_table_fn fn;
	void *arg;
} each_arg;

static void each_rec(void *arg, const uint64_t key[2], const uint64_t *fields, size_t at)
{
	const each_arg *e = arg;
	file_rec f = rec_of(fields, at, e->t->keep_sums);
	e->fn(e->arg, key, &f);
}

void file_table_each(const file_table *t, file_table_fn fn, void *arg)
{
	if (t == NULL)
		return;
	each_arg e = { t, fn, arg };
	keytab_each(t->recs, each_rec, &e);
}

const file_sum *file_table_sum(const file_table *t, const file_rec *f)
{
	return t->keep_sums && (f->flags & FILE_SUMMED) ? &t->sums[f->at] : NULL;
}

void file_table_free(file_table *t)
{
	keytab_free(t->recs);
	recs_free(&t->adding_sums);
	free(t->sums);
	memset(t, 0, sizeof(*t));
}
