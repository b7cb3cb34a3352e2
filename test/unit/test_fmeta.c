/*
 * files_metadata.json streamed by backup-push: the packed name lists round-trip, and what
 * fmeta writes to a real file-system store parses back into the Files and TarFileSets it was
 * given, with escaped names, records from several threads, and nothing published on failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/backup/push/push_impl.h"
#include "internal/repo/repo_impl.h"

typedef struct collected {
	char **names;
	size_t n;
} collected;

static void collect(void *arg, const char *name)
{
	collected *c = arg;
	c->names = realloc(c->names, (c->n + 1) * sizeof(*c->names));
	c->names[c->n++] = strdup(name);
}

static void collected_free(collected *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->names[i]);
	free(c->names);
}

static void test_namelist_round_trip(void **state)
{
	(void)state;
	/* Shared prefixes, none, a longer then a shorter name, an empty one, a 300-byte one. */
	char long_name[301];
	memset(long_name, 'x', 300);
	long_name[300] = '\0';
	const char *names[] = { "/base/5/16384", "/base/5/16384.1", "/base/5/16384_fsm", "/global",
							"/base/5/1", "", long_name, long_name, "/base/5/16385" };
	size_t n = sizeof(names) / sizeof(*names);
	namelist l = { 0 };
	for (size_t i = 0; i < n; i++)
		namelist_add(&l, names[i]);
	assert_int_equal(l.count, n);
	collected c = { 0 };
	namelist_each(&l, collect, &c);
	assert_int_equal(c.n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(c.names[i], names[i]);
	collected_free(&c);

	/* Names in walk order take a few bytes each. */
	namelist_free(&l);
	char name[64];
	for (int i = 0; i < 10000; i++) {
		snprintf(name, sizeof(name), "/base/16384/%d", 100000 + i);
		namelist_add(&l, name);
	}
	assert_true(l.len < 10000 * 5);
	collected d = { 0 };
	namelist_each(&l, collect, &d);
	assert_int_equal(d.n, 10000);
	assert_string_equal(d.names[9999], "/base/16384/109999");
	collected_free(&d);
	namelist_free(&l);

	namelist empty = { 0 };
	collected e = { 0 };
	namelist_each(&empty, collect, &e);
	assert_int_equal(e.n, 0);
}

typedef struct fixture {
	char *dir;
	repo r;
	push_state st;
} fixture;

static void fixture_open(fixture *f)
{
	f->dir = unit_tmpdir();
	memset(&f->r, 0, sizeof(f->r));
	assert_int_equal(storage_fs_open(f->dir, &f->r.st), E_OK);
	memset(&f->st, 0, sizeof(f->st));
	f->st.r = &f->r;
	f->st.name = strdup("base_000000010000000000000002");
	f->st.published = json_array();
	pthread_mutex_init(&f->st.lock, NULL);
}

static void fixture_close(fixture *f)
{
	fmeta_free(f->st.fmeta);
	json_decref(f->st.published);
	free(f->st.name);
	pthread_mutex_destroy(&f->st.lock);
	storage_free(f->r.st);
	assert_int_equal(unit_rmtree(f->dir), 0);
	free(f->dir);
}

static json_t *record(int size)
{
	json_t *o = json_object();
	json_object_set_new(o, "IsIncremented", json_false());
	json_object_set_new(o, "Size", json_integer(size));
	return o;
}

typedef struct writer {
	push_state *st;
	int from, n;
} writer;

static void *write_files(void *arg)
{
	writer *w = arg;
	char name[64];
	for (int i = w->from; i < w->from + w->n; i++) {
		snprintf(name, sizeof(name), "/base/5/%d", i);
		assert_int_equal(fmeta_file(w->st, name, record(i)), E_OK);
	}
	return NULL;
}

static json_t *load(const fixture *f)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/basebackups_005/%s/files_metadata.json", f->dir, f->st.name);
	json_error_t jerr;
	json_t *doc = json_load_file(path, 0, &jerr);
	if (doc == NULL)
		fail_msg("%s: %s", path, jerr.text);
	return doc;
}

static void test_fmeta_streams_both_objects(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f);
	assert_int_equal(fmeta_open(&f.st), E_OK);
	/* Four threads, enough records to pass the flush size several times. */
	pthread_t t[4];
	writer w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (writer){ &f.st, 100000 + i * 5000, 5000 };
		assert_int_equal(pthread_create(&t[i], NULL, write_files, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(fmeta_file(&f.st, "/odd \"name\"\\\n", record(7)), E_OK);
	/* Not UTF-8: left out with a warning, as jansson cannot hold it. */
	assert_int_equal(fmeta_file(&f.st, "/bad\xff", record(8)), E_OK);

	namelist a = { 0 }, b = { 0 };
	namelist_add(&a, "/bad\xff"); /* left out of TarFileSets too, commas still right */
	namelist_add(&a, "/");
	namelist_add(&a, "/base/5/100000");
	namelist_add(&a, "/bad\xfe");
	namelist_add(&a, "/odd \"name\"\\\n");
	namelist_add(&b, "backup_label");
	fmeta_part(&f.st, "part_001.tar.lz4", &a);
	fmeta_part(&f.st, "backup_label.tar.lz4", &b);
	assert_int_equal(a.count, 0); /* taken */

	/* Not visible before the end. */
	char path[256];
	snprintf(path, sizeof(path), "%s/basebackups_005/%s/files_metadata.json", f.dir, f.st.name);
	assert_int_not_equal(access(path, F_OK), 0);
	assert_int_equal(fmeta_finish(&f.st), E_OK);
	assert_int_equal(json_array_size(f.st.published), 1);

	json_t *doc = load(&f);
	json_t *files = json_object_get(doc, "Files");
	assert_int_equal(json_object_size(files), 20001);
	json_t *one = json_object_get(files, "/base/5/117777");
	assert_non_null(one);
	assert_int_equal(json_integer_value(json_object_get(one, "Size")), 117777);
	assert_non_null(json_object_get(files, "/odd \"name\"\\\n"));
	json_t *sets = json_object_get(doc, "TarFileSets");
	assert_int_equal(json_object_size(sets), 2);
	json_t *p1 = json_object_get(sets, "part_001.tar.lz4");
	assert_int_equal(json_array_size(p1), 3);
	assert_string_equal(json_string_value(json_array_get(p1, 2)), "/odd \"name\"\\\n");
	assert_string_equal(
		json_string_value(json_array_get(json_object_get(sets, "backup_label.tar.lz4"), 0)),
		"backup_label");
	json_decref(doc);
	fixture_close(&f);
}

static void test_fmeta_disabled_and_discarded(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f);
	/* WALG_WITHOUT_FILES_METADATA: nothing is opened and records are dropped. */
	f.st.no_files_metadata = true;
	assert_int_equal(fmeta_open(&f.st), E_OK);
	assert_null(f.st.fmeta);
	assert_int_equal(fmeta_file(&f.st, "/a", record(1)), E_OK);
	namelist a = { 0 };
	namelist_add(&a, "/a");
	fmeta_part(&f.st, "part_001.tar", &a);
	assert_int_equal(fmeta_finish(&f.st), E_OK);
	assert_int_equal(json_array_size(f.st.published), 0);

	/* A push that fails frees it unfinished: no object, no temporary left behind. */
	f.st.no_files_metadata = false;
	assert_int_equal(fmeta_open(&f.st), E_OK);
	assert_int_equal(fmeta_file(&f.st, "/a", record(1)), E_OK);
	fmeta_free(f.st.fmeta);
	f.st.fmeta = NULL;
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "test -z \"$(find %s -type f)\"", f.dir);
	assert_int_equal(system(cmd), 0);
	fixture_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_namelist_round_trip),
		cmocka_unit_test(test_fmeta_streams_both_objects),
		cmocka_unit_test(test_fmeta_disabled_and_discarded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
