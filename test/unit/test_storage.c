/* Unit tests for the file-system storage and WAL names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/pg/pg.h"
#include "internal/storage/storage.h"


static void put(storage *st, const char *key, const char *data)
{
	sink *s;
	assert_int_equal(storage_put(st, key, &s), E_OK);
	assert_int_equal(sink_write(s, data, strlen(data)), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const obj_info *)a)->key, ((const obj_info *)b)->key);
}

static void test_fs_roundtrip(void **state)
{
	(void)state;
	storage *st;
	assert_int_equal(storage_fs_open(unit_dir, &st), E_OK);
	put(st, "wal_005/a.lz4", "hello");
	put(st, "basebackups_005/b/tar_partitions/part_001.tar", "x");

	membuf mb = { 0 };
	sink *m = membuf_sink_new(&mb);
	assert_int_equal(storage_get(st, "wal_005/a.lz4", m), E_OK);
	assert_int_equal(mb.len, 5);
	assert_memory_equal(mb.data, "hello", 5);
	sink_free(m);
	free(mb.data);

	obj_info info;
	assert_int_equal(storage_stat(st, "wal_005/a.lz4", &info), E_OK);
	assert_int_equal(info.size, 5);
	assert_int_equal(storage_stat(st, "wal_005/missing", &info), E_NOTFOUND);
	m = null_sink_new();
	assert_int_equal(storage_get(st, "wal_005/missing", m), E_NOTFOUND);
	sink_free(m);

	obj_list l;
	assert_int_equal(storage_list(st, "", true, &l), E_OK);
	assert_int_equal(l.len, 2);
	qsort(l.items, l.len, sizeof(*l.items), cmp_key);
	assert_string_equal(l.items[0].key, "basebackups_005/b/tar_partitions/part_001.tar");
	assert_string_equal(l.items[1].key, "wal_005/a.lz4");
	obj_list_free(&l);
	assert_int_equal(storage_list(st, "basebackups_005/", false, &l), E_OK);
	assert_int_equal(l.len, 0);
	obj_list_free(&l);
	assert_int_equal(storage_list(st, "nothing_here/", true, &l), E_OK);
	assert_int_equal(l.len, 0);
	obj_list_free(&l);

	assert_int_equal(storage_remove(st, "wal_005/a.lz4"), E_OK);
	assert_int_equal(storage_remove(st, "wal_005/a.lz4"), E_OK);
	assert_int_equal(storage_stat(st, "wal_005/a.lz4", &info), E_NOTFOUND);
	storage_free(st);
}

/* Many deletes at once: every key goes (absent ones too), folders they empty go, others stay. */
static void test_fs_remove_many(void **state)
{
	(void)state;
	storage *st;
	assert_int_equal(storage_fs_open(unit_dir, &st), E_OK);
	enum { N = 300 };
	char *keys[N + 1];
	for (int i = 0; i < N; i++) {
		keys[i] = xasprintf("%s/%03d", i < 200 ? "wal_005" : i < 250 ? "m/a/b" : "m/c", i);
		sink *s;
		assert_int_equal(storage_put(st, keys[i], &s), E_OK);
		assert_int_equal(sink_finish(s), E_OK);
		sink_free(s);
	}
	keys[N] = xstrdup("wal_005/absent");
	sink *s;
	assert_int_equal(storage_put(st, "m/c/kept", &s), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_int_equal(storage_remove_many(st, (const char *const *)keys, N + 1), E_OK);
	obj_list l;
	assert_int_equal(storage_list(st, "", true, &l), E_OK);
	assert_int_equal(l.len, 1);
	assert_string_equal(l.items[0].key, "m/c/kept");
	obj_list_free(&l);
	struct stat sb;
	char *gone = xasprintf("%s/m/a", unit_dir), *left = xasprintf("%s/m/c", unit_dir);
	assert_int_equal(stat(gone, &sb), -1);
	assert_int_equal(stat(left, &sb), 0);
	free(gone);
	free(left);
	for (int i = 0; i <= N; i++)
		free(keys[i]);
	assert_int_equal(storage_remove(st, "m/c/kept"), E_OK);
	storage_free(st);
}

static void test_fs_abort_leaves_nothing(void **state)
{
	(void)state;
	storage *st;
	sink *s;
	assert_int_equal(storage_fs_open(unit_dir, &st), E_OK);
	assert_int_equal(storage_put(st, "wal_005/x", &s), E_OK);
	assert_int_equal(sink_write(s, "partial", 7), E_OK);
	sink_free(s);
	obj_list l;
	assert_int_equal(storage_list(st, "wal_005", false, &l), E_OK);
	assert_int_equal(l.len, 0);
	obj_list_free(&l);
	char *cmd = xasprintf("test -z \"$(ls -A %s/wal_005)\"", unit_dir);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	storage_free(st);
}

static void test_keys_refused(void **state)
{
	(void)state;
	storage *st;
	sink *s;
	assert_int_equal(storage_fs_open(unit_dir, &st), E_OK);
	assert_int_equal(storage_put(st, "../x", &s), E_CONFIG);
	assert_int_equal(storage_put(st, "/etc/passwd", &s), E_CONFIG);
	assert_int_equal(storage_put(st, "a/../../b", &s), E_CONFIG);
	assert_int_equal(storage_put(st, "a/./b", &s), E_CONFIG);
	assert_int_equal(storage_put(st, "", &s), E_CONFIG);
	assert_int_equal(storage_check_key("wal_005/..hidden"), E_OK);
	storage_free(st);
}

static void test_wal_names(void **state)
{
	(void)state;
	assert_true(wal_is_segment_name("000000010000000000000023"));
	assert_false(wal_is_segment_name("00000001000000000000002g"));
	assert_false(wal_is_segment_name("0000000100000000000000230"));
	assert_true(wal_is_archive_name("00000002.history"));
	assert_true(wal_is_archive_name("000000010000000000000024.00000028.backup"));
	assert_true(wal_is_archive_name("000000010000000000000024.partial"));
	assert_false(wal_is_archive_name("../../etc/passwd"));
	assert_false(wal_is_archive_name("00000002.history/.."));
	assert_false(wal_is_archive_name("000000010000000000000024.partial.lz4"));
	assert_false(wal_is_archive_name(""));

	uint32_t tli;
	uint64_t segno;
	char out[WAL_NAME_LEN + 1];
	assert_int_equal(wal_name_parse("0000000200000001000000FF", 16u << 20, &tli, &segno), E_OK);
	assert_int_equal(tli, 2);
	assert_int_equal(segno, 256 + 255);
	wal_name_format(out, tli, segno + 1, 16u << 20);
	assert_string_equal(out, "000000020000000200000000");
	/* 1 MiB segments: 4096 per xlogid. */
	assert_int_equal(wal_name_parse("000000010000000000000FFF", 1u << 20, &tli, &segno), E_OK);
	wal_name_format(out, tli, segno + 1, 1u << 20);
	assert_string_equal(out, "000000010000000100000000");
	assert_int_equal(wal_name_parse("000000010000000000000100", 16u << 20, &tli, &segno),
					 E_CONFIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fs_roundtrip, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_fs_remove_many, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_fs_abort_leaves_nothing, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_keys_refused, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test(test_wal_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
