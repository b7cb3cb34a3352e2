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

/* ------------------------------------------------------------------------------------------ */
/* Failover storages (failover.c): the main storage and named others, seen as one            */
/* ------------------------------------------------------------------------------------------ */

/* A configuration: the main storage in unit_dir/a, "zed" in unit_dir/z, "bee" in unit_dir/b. */
static void failover_config(config *c)
{
	char *main_prefix = xasprintf("%s/a", unit_dir);
	char *json = xasprintf("{\"zed\": {\"WALG_FILE_PREFIX\": \"%s/z\"}, "
						   "\"bee\": {\"walg_file_prefix\": \"%s/b\"}}",
						   unit_dir, unit_dir);
	setenv("WALG_FILE_PREFIX", main_prefix, 1);
	setenv("WALG_FAILOVER_STORAGES", json, 1);
	setenv("WALG_FAILOVER_STORAGES_CHECK_SIZE", "100", 1);
	assert_int_equal(config_load(c, true), E_OK);
	/* resolved as cmd resolves them before opening (config_free frees them) */
	storage_settings resolved;
	assert_int_equal(config_failovers(&c->storage, &resolved), E_OK);
	c->storage.failovers = resolved.failovers;
	c->storage.nfailovers = resolved.nfailovers;
	unsetenv("WALG_FILE_PREFIX");
	unsetenv("WALG_FAILOVER_STORAGES");
	unsetenv("WALG_FAILOVER_STORAGES_CHECK_SIZE");
	free(main_prefix);
	free(json);
}


/* A plain storage on unit_dir/name, made. */
static storage *plain(const char *name)
{
	char *root = xasprintf("%s/%s", unit_dir, name);
	assert_int_equal(mkdir_p(root, 0755), E_OK);
	storage *st;
	assert_int_equal(storage_fs_open(root, &st), E_OK);
	free(root);
	return st;
}

static char *get_text(storage *st, const char *key, err_code want)
{
	membuf mb = { 0 };
	sink *m = membuf_sink_new(&mb);
	assert_int_equal(storage_get(st, key, m), want);
	sink_free(m);
	membuf_add(&mb, "", 1);
	return (char *)mb.data;
}

static bool exists(storage *st, const char *key)
{
	obj_info info;
	err_code rc = storage_stat(st, key, &info);
	err_clear();
	return rc == E_OK;
}

/* WAL-G's order: default first, then by name; each entry's prefix its own. */
static void test_failover_names(void **state)
{
	(void)state;
	config c;
	failover_config(&c);
	char **names;
	size_t n;
	assert_int_equal(storage_names(&c.storage, &names, &n), E_OK);
	assert_int_equal(n, 3);
	assert_string_equal(names[0], "default");
	assert_string_equal(names[1], "bee");
	assert_string_equal(names[2], "zed");
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	config_free(&c);
}

/* Entries never resolved are an error, not storages left out of every read in silence. */
static void test_failover_unresolved(void **state)
{
	(void)state;
	config c;
	failover_config(&c);
	storage_failover *fo = c.storage.failovers;
	size_t n = c.storage.nfailovers;
	c.storage.failovers = NULL;
	c.storage.nfailovers = 0;
	storage *st = NULL;
	assert_int_equal(storage_open_use(&c.storage, STORAGE_READ, NULL, &st), E_CONFIG);
	assert_null(st);
	assert_non_null(strstr(err_msg(), "WALG_FAILOVER_STORAGES: its 2 storage(s) were not resolved"));
	c.storage.failovers = fo;
	c.storage.nfailovers = n;
	config_free(&c);
}

/* Readers: an object from the first storage that holds it; listings the union, each key once. */
static void test_failover_read(void **state)
{
	(void)state;
	storage *a = plain("a"), *b = plain("b"), *z = plain("z");
	put(a, "wal_005/1", "a1");
	put(b, "wal_005/1", "b1");
	put(b, "wal_005/2", "b2");
	put(z, "wal_005/3", "z3");
	config c;
	failover_config(&c);
	storage *st;
	assert_int_equal(storage_open_use(&c.storage, STORAGE_READ, NULL, &st), E_OK);
	char *v = get_text(st, "wal_005/1", E_OK);
	assert_string_equal(v, "a1");
	free(v);
	/* a backup's objects come from where its sentinel is: that storage first */
	storage_prefer(st, "bee");
	v = get_text(st, "wal_005/1", E_OK);
	assert_string_equal(v, "b1");
	free(v);
	storage_prefer(st, NULL);
	v = get_text(st, "wal_005/3", E_OK);
	assert_string_equal(v, "z3");
	free(v);
	free(get_text(st, "wal_005/4", E_NOTFOUND));
	err_clear();
	obj_info info;
	assert_int_equal(storage_stat(st, "wal_005/2", &info), E_OK);
	assert_string_equal(info.where, "bee");
	obj_list l;
	assert_int_equal(storage_list(st, "wal_005/", false, &l), E_OK);
	assert_int_equal(l.len, 3);
	assert_string_equal(l.items[0].key, "wal_005/1");
	assert_string_equal(l.items[0].where, "default");
	assert_int_equal(l.items[0].size, 2);
	assert_string_equal(l.items[2].where, "zed");
	obj_list_free(&l);
	/* an update goes wherever the object is; a new object to the first */
	put(st, "wal_005/1", "new");
	v = get_text(a, "wal_005/1", E_OK);
	assert_string_equal(v, "new");
	free(v);
	v = get_text(b, "wal_005/1", E_OK);
	assert_string_equal(v, "new");
	free(v);
	put(st, "wal_005/5", "five");
	assert_true(exists(a, "wal_005/5"));
	assert_false(exists(b, "wal_005/5") || exists(z, "wal_005/5"));
	sink *s;
	assert_int_equal(storage_put_new(st, "wal_005/3", &s), E_EXISTS);
	err_clear();
	/* removals reach every storage */
	const char *keys[] = { "wal_005/1", "wal_005/3" };
	assert_int_equal(storage_remove_many(st, keys, 2), E_OK);
	assert_false(exists(a, "wal_005/1") || exists(b, "wal_005/1") || exists(z, "wal_005/3"));
	assert_true(exists(b, "wal_005/2"));
	storage_free(st);
	/* --target-storage: that one alone */
	assert_int_equal(storage_open_use(&c.storage, STORAGE_READ, "zed", &st), E_OK);
	assert_false(exists(st, "wal_005/2"));
	storage_free(st);
	assert_int_equal(storage_open_use(&c.storage, STORAGE_READ, "nope", &st), E_CONFIG);
	assert_non_null(strstr(err_msg(), "the storages are default, bee, zed"));
	err_clear();
	config_free(&c);
	storage_free(a);
	storage_free(b);
	storage_free(z);
}

/*
 * A storage that cannot be listed is dead (its root a symbolic link to itself), and so is one
 * that cannot be opened (a file as its root).
 */
static void kill_storage(const char *name, bool as_file)
{
	char *root = xasprintf("%s/%s", unit_dir, name);
	unit_rmtree(root);
	if (as_file) {
		FILE *f = fopen(root, "w");
		assert_non_null(f);
		fclose(f);
	} else {
		assert_int_equal(symlink(root, root), 0);
	}
	free(root);
}

/* Writers: the first alive storage in order; its write check leaves nothing behind. */
static void test_failover_write(void **state)
{
	(void)state;
	storage *b = plain("b"), *z = plain("z");
	config c;
	failover_config(&c);
	storage *st, *a = plain("a");
	assert_int_equal(storage_open_use(&c.storage, STORAGE_WRITE, NULL, &st), E_OK);
	put(st, "wal_005/1", "1");
	assert_true(exists(a, "wal_005/1"));
	assert_false(exists(a, "wal-g_storage_check"));
	storage_free(st);
	storage_free(a);
	kill_storage("a", false);
	assert_int_equal(storage_open_use(&c.storage, STORAGE_WRITE, NULL, &st), E_OK);
	put(st, "wal_005/2", "2");
	assert_true(exists(b, "wal_005/2"));
	assert_false(exists(z, "wal_005/2") || exists(b, "wal-g_storage_check"));
	assert_non_null(strstr(storage_describe(st), "/b"));
	storage_free(st);
	/* without alive checks, WAL-G's: the main storage, alive or not */
	c.storage.failover_check = false;
	assert_int_equal(storage_open_use(&c.storage, STORAGE_WRITE, NULL, &st), E_OK);
	sink *s;
	assert_int_not_equal(storage_put(st, "wal_005/3", &s), E_OK);
	err_clear();
	storage_free(st);
	c.storage.failover_check = true;
	/* readers leave it out; retention refuses to run without it */
	assert_int_equal(storage_open_use(&c.storage, STORAGE_READ, NULL, &st), E_OK);
	char *v = get_text(st, "wal_005/2", E_OK);
	assert_string_equal(v, "2");
	free(v);
	storage_free(st);
	assert_int_equal(storage_open_use(&c.storage, STORAGE_EVERY, NULL, &st), E_OK);
	obj_list l;
	assert_int_equal(storage_list(st, "wal_005/", false, &l), E_IO);
	assert_non_null(strstr(err_msg(), "storage \"default\" is not alive"));
	err_clear();
	obj_list_free(&l);
	storage_free(st);
	kill_storage("b", true);
	kill_storage("z", false);
	assert_int_equal(storage_open_use(&c.storage, STORAGE_WRITE, NULL, &st), E_OK);
	assert_int_equal(storage_put(st, "wal_005/4", &s), E_IO);
	assert_non_null(strstr(err_msg(), "no storage is alive"));
	err_clear();
	storage_free(st);
	config_free(&c);
	storage_free(b);
	storage_free(z);
}

/*
 * A writer that runs long (the daemon) keeps its storage until an operation on it fails, or
 * WALG_FAILOVER_STORAGES_CACHE_LIFETIME passes, and storage_recheck is called.
 */
static void test_failover_recheck(void **state)
{
	(void)state;
	storage *b = plain("b"), *z = plain("z"), *a = plain("a");
	config c;
	failover_config(&c);
	storage *st;
	assert_int_equal(storage_open_use(&c.storage, STORAGE_WRITE, NULL, &st), E_OK);
	put(st, "wal_005/1", "1");
	assert_string_equal(storage_name(st), "default");
	kill_storage("a", false);
	sink *s;
	storage_recheck(st); /* nothing failed yet, and the choice is new: kept */
	assert_int_not_equal(storage_put(st, "wal_005/2", &s), E_OK);
	err_clear();
	storage_recheck(st); /* after a failure: the next alive one */
	put(st, "wal_005/2", "2");
	assert_true(exists(b, "wal_005/2"));
	assert_string_equal(storage_name(st), "bee");
	storage_free(st);
	/* the main storage back: taken again once the choice is older than the lifetime */
	char *root = xasprintf("%s/a", unit_dir);
	unlink(root);
	free(root);
	storage_free(a);
	a = plain("a");
	c.storage.failover_cache_lifetime_ms = 0;
	assert_int_equal(storage_open_use(&c.storage, STORAGE_WRITE, NULL, &st), E_OK);
	put(st, "wal_005/3", "3");
	assert_true(exists(a, "wal_005/3"));
	kill_storage("a", false);
	storage_recheck(st);
	put(st, "wal_005/4", "4");
	assert_true(exists(b, "wal_005/4"));
	storage_free(st);
	config_free(&c);
	storage_free(a);
	storage_free(b);
	storage_free(z);
}

/* An object copied as stored and checked; a read that does not match its listing is not kept. */
static void test_copy_checked(void **state)
{
	(void)state;
	storage *a = plain("a"), *b = plain("b");
	put(a, "wal_005/1.lz4", "segment");
	bool inside = true;
	assert_int_equal(storage_copy(a, b, "wal_005/1.lz4", 7, NULL, &inside), E_OK);
	assert_false(inside);
	char *v = get_text(b, "wal_005/1.lz4", E_OK);
	assert_string_equal(v, "segment");
	free(v);
	/* listed with 9 bytes, 7 read: nothing published */
	put(a, "wal_005/2.lz4", "segment");
	assert_int_equal(storage_copy(a, b, "wal_005/2.lz4", 9, NULL, &inside), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "wal_005/2.lz4"));
	err_clear();
	assert_false(exists(b, "wal_005/2.lz4"));
	assert_int_equal(storage_copy(a, b, "wal_005/3.lz4", 1, NULL, &inside), E_NOTFOUND);
	err_clear();
	assert_false(exists(b, "wal_005/3.lz4"));
	storage_free(a);
	storage_free(b);
}

/* An entry's storage settings replace the main ones; where it is never comes from them. */
static void test_failover_settings(void **state)
{
	(void)state;
	setenv("AWS_REGION", "eu-west-1", 1);
	setenv("WALG_STORAGE_PREFIX", "sub", 1);
	config c;
	failover_config(&c);
	config_pair p[] = { { "WALG_S3_PREFIX", "s3://bucket/x" }, { "AWS_ENDPOINT", "http://h:1" } };
	storage_settings own;
	assert_int_equal(config_for_storage(&c.storage, "entry", p, 2, 0, &own), E_OK);
	assert_null(own.file_prefix);
	assert_string_equal(own.s3_prefix, "s3://bucket/x");
	assert_string_equal(own.s3.region, "eu-west-1");
	assert_string_equal(own.s3.endpoint, "http://h:1");
	assert_string_equal(own.storage_prefix, "sub");
	config_storage_free(&own);
	/* a copy's file: its own WALG_STORAGE_PREFIX or none */
	assert_int_equal(config_for_storage(&c.storage, "file", p, 1, CFS_FILE, &own), E_OK);
	assert_null(own.storage_prefix);
	assert_null(own.s3.endpoint);
	config_storage_free(&own);
	config_pair none[] = { { "AWS_REGION", "x" } };
	assert_int_equal(config_for_storage(&c.storage, "entry", none, 1, 0, &own), E_CONFIG);
	assert_non_null(strstr(err_msg(), "entry: no storage prefix"));
	err_clear();
	config_storage_free(&own);
	config_free(&c);
	unsetenv("AWS_REGION");
	unsetenv("WALG_STORAGE_PREFIX");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fs_roundtrip, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_fs_remove_many, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_fs_abort_leaves_nothing, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_keys_refused, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test(test_wal_names),
		cmocka_unit_test_setup_teardown(test_failover_names, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_failover_unresolved, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_failover_read, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_failover_write, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_failover_recheck, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_copy_checked, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_failover_settings, unit_dir_setup, unit_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
