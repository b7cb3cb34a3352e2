/*
 * libFuzzer target for files_metadata.json read as a stream (catalog's reader of Files and
 * TarFileSets), fed in two pieces split where the first byte says, into the delta push's
 * table of its base and the restore's file table: the scanner's bracket and string tracking,
 * jansson on each entry and name, the tables' sorts and lookups; every name added to the delta
 * push's table must be found in it.
 */
#include <stdlib.h>
#include <string.h>

#include "internal/backup/push/push_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KEPT_NAMES 64

typedef struct tables {
	delta_base d;
	file_table t;
	size_t found;
	char *names[KEPT_NAMES]; /* the first names added, each of which must be found */
	size_t nnames;
} tables;

static err_code add_file(void *arg, const char *name, const json_t *rec)
{
	tables *b = arg;
	TRY(delta_add_file(&b->d, name, rec));
	if (b->nnames < KEPT_NAMES)
		b->names[b->nnames++] = xstrdup(name);
	return file_table_add(&b->t, name, rec);
}

static err_code set_member(void *arg, const char *part, const char *member)
{
	tables *b = arg;
	(void)part;
	if (member != NULL && file_table_find(&b->t, member, NULL))
		b->found++;
	return E_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	size_t split = data[0] % size;
	data++;
	size--;
	if (split > size)
		split = size;
	tables b = { .d = { .active = true, .start = 1700000000 }, .t = { .keep_sums = true } };
	sink *s = catalog_files_sink_new("fuzz", add_file, set_member, &b);
	err_code rc = sink_write(s, data, split);
	if (rc == E_OK)
		rc = sink_write(s, data + split, size - split);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	if (rc == E_OK) {
		delta_files_finish(&b.d);
		struct stat sb = { 0 };
		(void)delta_classify(&b.d, "/base/1/1", &sb);
		uint64_t key[2];
		for (size_t i = 0; i < b.nnames; i++) {
			pg_name_key(b.names[i], key);
			if (!keytab_find(b.d.files, key, NULL, NULL))
				abort(); /* a name the base has, not found */
		}
		if (file_table_end(&b.t, "fuzz") == E_OK) {
			for (size_t i = 0; i < b.nnames; i++)
				if (!file_table_find(&b.t, b.names[i], NULL))
					abort(); /* a name the table has, not found */
		}
	}
	err_clear();
	delta_free(&b.d);
	file_table_free(&b.t);
	for (size_t i = 0; i < b.nnames; i++)
		free(b.names[i]);
	return 0;
}
