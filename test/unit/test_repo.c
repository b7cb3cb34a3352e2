/* Unit tests for repo: the codec and key chains around a file-system repository. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#include <stdlib.h>
#include <string.h>

#include "internal/repo/repo_impl.h"

/* 32 bytes, hex: the form WALG_LIBSODIUM_KEY_TRANSFORM=hex takes. */
#define KEY_A "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define KEY_B "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

static int teardown(void **state)
{
	int rc = unit_dir_teardown(state);
	unsetenv("WALG_LIBSODIUM_KEY");
	unsetenv("WALG_LIBSODIUM_KEY_TRANSFORM");
	return rc;
}

/* Opens the repository in dir with a codec and, when key is not NULL, a libsodium key. */
static err_code open_repo_in(const char *dir, const char *method, const char *level,
							 const char *key, repo **r)
{
	config_pair file[] = { { "WALG_FILE_PREFIX", dir },
						   { "WALG_COMPRESSION_METHOD", method },
						   { "WALG_COMPRESSION_LEVEL", level } };
	config_sources src = { NULL, 0, file, level ? 3 : 2, "test" };
	if (key != NULL) {
		setenv("WALG_LIBSODIUM_KEY", key, 1);
		setenv("WALG_LIBSODIUM_KEY_TRANSFORM", "hex", 1);
	} else {
		unsetenv("WALG_LIBSODIUM_KEY");
		unsetenv("WALG_LIBSODIUM_KEY_TRANSFORM");
	}
	config cfg;
	err_code rc = config_load_from(&cfg, true, &src);
	if (rc == E_OK)
		rc = config_repo_open(&cfg, REPO_READ, NULL, r);
	config_free(&cfg);
	return rc;
}

static err_code open_repo(const char *method, const char *level, const char *key, repo **r)
{
	return open_repo_in(unit_dir, method, level, key, r);
}

static void put(repo *r, const char *base, const char *data, char **key)
{
	sink *s;
	uint64_t stored = 0;
	assert_int_equal(repo_put(r, base, &stored, &s, key), E_OK);
	assert_int_equal(sink_write(s, data, strlen(data)), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_true(stored > 0);
}

static err_code get(repo *r, const char *key, membuf *mb)
{
	memset(mb, 0, sizeof(*mb));
	return repo_get(r, key, membuf_sink_new(mb));
}

/* The raw stored bytes of key, through storage alone. */
static void raw(repo *r, const char *key, membuf *mb)
{
	memset(mb, 0, sizeof(*mb));
	sink *m = membuf_sink_new(mb);
	assert_int_equal(storage_get(r->st, key, m), E_OK);
	assert_int_equal(sink_finish(m), E_OK);
	sink_free(m);
}

static void test_roundtrip_every_codec(void **state)
{
	(void)state;
	const char *text = "a WAL segment, or something like it, repeated repeated repeated";
	const char *methods[] = { "lz4", "zstd", "brotli", "lzma", "none" };
	const char *keys[] = { "wal_005/s.lz4", "wal_005/s.zst", "wal_005/s.br", "wal_005/s.lzma",
						   "wal_005/s" };
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		repo *r = NULL;
		assert_int_equal(open_repo(methods[i], NULL, NULL, &r), E_OK);
		char *key;
		put(r, "wal_005/s", text, &key);
		assert_string_equal(key, keys[i]);
		membuf mb;
		assert_int_equal(get(r, key, &mb), E_OK);
		assert_int_equal(mb.len, strlen(text));
		assert_memory_equal(mb.data, text, mb.len);
		free(mb.data);
		assert_ptr_equal(repo_codec_for_key(key), r->codec);
		assert_int_equal(storage_remove(r->st, key), E_OK);
		free(key);
		repo_close(r);
	}
}

static void test_find_any_codec(void **state)
{
	(void)state;
	repo *z = NULL, *l = NULL;
	assert_int_equal(open_repo("zstd", NULL, NULL, &z), E_OK);
	char *key;
	put(z, "wal_005/000000010000000000000001", "zstd bytes", &key);
	free(key);
	/* A repository configured for lz4 finds (and reads) what zstd wrote, as after a switch. */
	assert_int_equal(open_repo("lz4", NULL, NULL, &l), E_OK);
	assert_int_equal(repo_find(l, "wal_005/000000010000000000000001", &key), E_OK);
	assert_string_equal(key, "wal_005/000000010000000000000001.zst");
	membuf mb;
	assert_int_equal(get(l, key, &mb), E_OK);
	assert_int_equal(mb.len, strlen("zstd bytes"));
	free(mb.data);
	free(key);
	/* Its own codec's object wins when both exist. */
	put(l, "wal_005/000000010000000000000001", "lz4 bytes", &key);
	free(key);
	assert_int_equal(repo_find(l, "wal_005/000000010000000000000001", &key), E_OK);
	assert_string_equal(key, "wal_005/000000010000000000000001.lz4");
	free(key);
	assert_int_equal(repo_find(l, "wal_005/000000010000000000000002", &key), E_NOTFOUND);
	assert_null(key);
	assert_non_null(strstr(err_msg(), "wal_005/000000010000000000000002"));
	err_clear();
	assert_int_equal(get(l, "wal_005/missing.lz4", &mb), E_NOTFOUND);
	free(mb.data);
	err_clear();
	repo_close(z);
	repo_close(l);
}

/* repo_get_found's opener: counts its calls, and fails when told to. */
typedef struct opener {
	membuf mb;
	int calls;
	err_code fail;
} opener;

static err_code open_membuf(void *arg, sink **out)
{
	opener *o = arg;
	o->calls++;
	if (o->fail != E_OK)
		return err_set(o->fail, "cannot open");
	free(o->mb.data);
	memset(&o->mb, 0, sizeof(o->mb));
	*out = membuf_sink_new(&o->mb);
	return E_OK;
}

/* Read without a stat first: the same objects, the same order, the same misses as repo_find. */
static void test_get_found(void **state)
{
	(void)state;
	repo *z = NULL, *l = NULL;
	char *key;
	assert_int_equal(open_repo("zstd", NULL, NULL, &z), E_OK);
	assert_int_equal(open_repo("lz4", NULL, NULL, &l), E_OK);
	put(z, "wal_005/000000010000000000000001", "zstd bytes", &key);
	free(key);
	opener o = { { 0 }, 0, E_OK };
	/* its own codec's object: one try */
	assert_int_equal(repo_get_found(z, "wal_005/000000010000000000000001", open_membuf, &o, &key),
		E_OK);
	assert_string_equal(key, "wal_005/000000010000000000000001.zst");
	free(key);
	assert_int_equal(o.calls, 1);
	assert_int_equal(o.mb.len, strlen("zstd bytes"));
	assert_memory_equal(o.mb.data, "zstd bytes", o.mb.len);
	/* another codec's: found after the configured one missed */
	o.calls = 0;
	assert_int_equal(repo_get_found(l, "wal_005/000000010000000000000001", open_membuf, &o, NULL),
		E_OK);
	assert_true(o.calls > 1);
	assert_memory_equal(o.mb.data, "zstd bytes", o.mb.len);
	/* the configured codec's wins when both exist */
	put(l, "wal_005/000000010000000000000001", "lz4 bytes", &key);
	free(key);
	assert_int_equal(repo_get_found(l, "wal_005/000000010000000000000001", open_membuf, &o, &key),
		E_OK);
	assert_string_equal(key, "wal_005/000000010000000000000001.lz4");
	free(key);
	assert_memory_equal(o.mb.data, "lz4 bytes", o.mb.len);
	/* none: every key tried, E_NOTFOUND naming the object */
	o.calls = 0;
	key = NULL;
	assert_int_equal(repo_get_found(l, "wal_005/000000010000000000000002", open_membuf, &o, &key),
		E_NOTFOUND);
	assert_null(key);
	assert_int_equal(o.calls, 5);
	assert_non_null(strstr(err_msg(), "wal_005/000000010000000000000002"));
	err_clear();
	/* a destination that cannot be opened is an error, never "no such object" */
	o.fail = E_NOTFOUND;
	assert_int_equal(repo_get_found(l, "wal_005/000000010000000000000001", open_membuf, &o, NULL),
		E_IO);
	err_clear();
	free(o.mb.data);
	repo_close(z);
	repo_close(l);
}

static void test_put_new_never_replaces(void **state)
{
	(void)state;
	repo *r = NULL;
	assert_int_equal(open_repo("lz4", NULL, NULL, &r), E_OK);
	sink *s;
	char *key;
	assert_int_equal(repo_put_new(r, "wal_005/00000002.history", &s, &key), E_OK);
	assert_int_equal(sink_write(s, "first", 5), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	free(key);
	err_code rc = repo_put_new(r, "wal_005/00000002.history", &s, NULL);
	if (rc == E_OK) {
		assert_int_equal(sink_write(s, "second", 6), E_OK);
		rc = sink_finish(s);
		sink_free(s);
	}
	assert_int_equal(rc, E_EXISTS);
	err_clear();
	membuf mb;
	assert_int_equal(get(r, "wal_005/00000002.history.lz4", &mb), E_OK);
	assert_int_equal(mb.len, 5);
	assert_memory_equal(mb.data, "first", 5);
	free(mb.data);
	repo_close(r);
}

static void test_encrypted_objects(void **state)
{
	(void)state;
	const char *text = "secret secret secret secret secret secret secret secret";
	repo *r = NULL;
	assert_int_equal(open_repo("none", NULL, KEY_A, &r), E_OK);
	assert_non_null(r->crypt);
	assert_string_equal(crypter_name(r->crypt), "libsodium");
	char *key;
	put(r, "basebackups_005/b/tar_partitions/part_1.tar", text, &key);
	/* What storage holds is not the plaintext. */
	membuf mb;
	raw(r, key, &mb);
	assert_true(mb.len > strlen(text));
	assert_null(memmem(mb.data, mb.len, "secret", 6));
	free(mb.data);
	assert_int_equal(get(r, key, &mb), E_OK);
	assert_int_equal(mb.len, strlen(text));
	assert_memory_equal(mb.data, text, mb.len);
	free(mb.data);
	repo_close(r);

	/* Another key fails authentication, naming the object. */
	assert_int_equal(open_repo("none", NULL, KEY_B, &r), E_OK);
	err_code rc = get(r, key, &mb);
	assert_int_equal(rc, E_CORRUPT);
	assert_non_null(strstr(err_msg(), key));
	err_clear();
	free(mb.data);
	repo_close(r);
	free(key);
}

/*
 * Read without a key, an encrypted object is said to be one ("encrypted (libsodium), no key
 * configured"), for every codec with a header and for none; a damaged one is not.
 */
static void test_encrypted_without_key(void **state)
{
	(void)state;
	unsigned char *data = pattern(100000, 7);
	/* text-like content: what a segment or a tar holds is not uniform */
	for (size_t i = 0; i < 100000; i++)
		data[i] = (unsigned char)('a' + data[i] % 16);
	static const char *const methods[] = { "zstd", "lz4", "lzma", "none" };
	for (size_t m = 0; m < 4; m++) {
		repo *r = NULL;
		assert_int_equal(open_repo(methods[m], NULL, KEY_A, &r), E_OK);
		char *base = xasprintf("wal_005/00000001000000000000000%zu", m + 1), *key;
		sink *s;
		assert_int_equal(repo_put(r, base, NULL, &s, &key), E_OK);
		assert_int_equal(sink_write(s, data, 100000), E_OK);
		assert_int_equal(sink_finish(s), E_OK);
		sink_free(s);
		repo_close(r);
		assert_int_equal(open_repo(methods[m], NULL, NULL, &r), E_OK);
		membuf mb;
		err_code rc = get(r, key, &mb);
		free(mb.data);
		if (strcmp(methods[m], "none") == 0) {
			/* nothing fails in the clear: whoever checks the content names the object */
			assert_int_equal(rc, E_OK);
		} else {
			assert_int_equal(rc, E_CONFIG);
			assert_non_null(strstr(err_msg(), key));
			assert_non_null(strstr(err_msg(), "is encrypted (libsodium), no key configured"));
			assert_non_null(strstr(err_msg(), "WALG_LIBSODIUM_KEY"));
			err_clear();
		}
		/* A damaged object in the clear is damaged, not "encrypted". */
		char *plain_base = xasprintf("%s.plain", base), *plain_key;
		assert_int_equal(repo_put(r, plain_base, NULL, &s, &plain_key), E_OK);
		assert_int_equal(sink_write(s, data, 100000), E_OK);
		assert_int_equal(sink_finish(s), E_OK);
		sink_free(s);
		char *path = xasprintf("%s/%s", unit_dir, plain_key);
		FILE *f = fopen(path, "r+");
		assert_non_null(f);
		fseek(f, 20, SEEK_SET);
		fputs("garbage in the middle", f);
		fclose(f);
		rc = get(r, plain_key, &mb);
		free(mb.data);
		if (rc != E_OK) {
			assert_null(strstr(err_msg(), "no key configured"));
			err_clear();
		}
		free(path);
		free(plain_base);
		free(plain_key);
		repo_close(r);
		free(base);
		free(key);
	}
	free(data);
}

static void test_open_names_the_variable(void **state)
{
	(void)state;
	repo *r = NULL;
	assert_int_equal(open_repo("gzip", NULL, NULL, &r), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALG_COMPRESSION_METHOD"));
	err_clear();
	assert_int_equal(open_repo("lz4", "99", NULL, &r), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALG_COMPRESSION_LEVEL"));
	err_clear();
	assert_int_equal(open_repo("zstd", "19", NULL, &r), E_OK);
	assert_int_equal(r->level, 19);
	repo_close(r);
}

static void test_codec_for_key(void **state)
{
	(void)state;
	assert_string_equal(codec_name(repo_codec_for_key("a/b/part_001.tar.zst")), "zstd");
	assert_string_equal(codec_name(repo_codec_for_key("wal_005/x.br")), "brotli");
	assert_string_equal(codec_name(repo_codec_for_key("wal_005/00000002.history")), "none");
	/* Only the last component's extension counts. */
	assert_string_equal(codec_name(repo_codec_for_key("dir.lz4/file")), "none");
	assert_string_equal(codec_name(repo_codec_for_key("file.unknown")), "none");
}

/* Frames are entry points only in the clear, and only for a codec that has them. */
static void test_frames_rule(void **state)
{
	(void)state;
	static const struct {
		const char *method, *key;
		bool frames;
	} cases[] = { { "zstd", NULL, true }, { "none", NULL, true }, { "lz4", NULL, false },
				  { "brotli", NULL, false }, { "zstd", KEY_A, false }, { "none", KEY_A, false } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		repo *r = NULL;
		assert_int_equal(open_repo(cases[i].method, NULL, cases[i].key, &r), E_OK);
		assert_int_equal(repo_frames_allowed(r), cases[i].frames);
		/* ranged reads follow the same rule, by the object's own extension */
		assert_int_equal(repo_has_range(r, "b/tar_partitions/part_001.tar.zst"),
						 cases[i].key == NULL);
		assert_false(repo_has_range(r, "b/tar_partitions/part_001.tar.lz4"));
		repo_close(r);
	}
}

static void put_plain(repo *r, const char *key, repo_put_mode mode, const char *text,
					  err_code want)
{
	sink *s = NULL;
	err_code rc = repo_put_plain(r, key, mode, &s);
	if (rc == E_OK) {
		assert_int_equal(sink_write(s, text, strlen(text)), E_OK);
		rc = sink_finish(s);
	}
	sink_free(s);
	assert_int_equal(rc, want);
	err_clear();
}

/* Objects as stored: written and read unchanged, listed, stated, removed. */
static void test_plain_objects(void **state)
{
	(void)state;
	repo *r = NULL;
	assert_int_equal(open_repo("zstd", NULL, KEY_A, &r), E_OK);
	put_plain(r, "basebackups_005/b_backup_stop_sentinel.json", REPO_PUT_REPLACE, "{}", E_OK);
	put_plain(r, "basebackups_005/b/metadata.json", REPO_PUT_NEW, "{\"a\":1}", E_OK);
	put_plain(r, "basebackups_005/b/metadata.json", REPO_PUT_NEW, "{}", E_EXISTS);
	put_plain(r, "basebackups_005/b/files_metadata.json", REPO_PUT_LONG, "{\"Files\":{}}", E_OK);
	membuf mb;
	raw(r, "basebackups_005/b/metadata.json", &mb);
	assert_int_equal(mb.len, 7);
	assert_memory_equal(mb.data, "{\"a\":1}", 7);
	free(mb.data);

	repo_objs l;
	assert_int_equal(repo_list(r, "basebackups_005/", false, &l), E_OK);
	assert_int_equal(l.len, 1);
	assert_string_equal(l.items[0].key, "basebackups_005/b_backup_stop_sentinel.json");
	assert_int_equal(l.items[0].size, 2);
	assert_null(l.items[0].where);
	repo_objs_add(&l, "x", 5, 7, 0);
	assert_int_equal(l.len, 2);
	repo_objs_free(&l);
	assert_int_equal(repo_list(r, "basebackups_005/", true, &l), E_OK);
	assert_int_equal(l.len, 3);
	const char *keys[3];
	for (size_t i = 0; i < l.len; i++)
		keys[i] = l.items[i].key;
	repo_obj info;
	assert_int_equal(repo_stat(r, "basebackups_005/b/metadata.json", &info), E_OK);
	assert_int_equal(info.size, 7);
	assert_true(info.mtime > 0);
	assert_int_equal(repo_remove_many(r, keys, 2), E_OK);
	repo_objs_free(&l);
	assert_int_equal(repo_list(r, "basebackups_005/", true, &l), E_OK);
	assert_int_equal(l.len, 1);
	assert_int_equal(repo_remove(r, l.items[0].key), E_OK);
	assert_int_equal(repo_remove(r, l.items[0].key), E_OK); /* absent: done */
	assert_int_equal(repo_stat(r, l.items[0].key, &info), E_NOTFOUND);
	err_clear();
	repo_objs_free(&l);
	assert_int_equal(repo_list(r, "nothing/", true, &l), E_OK);
	assert_int_equal(l.len, 0);
	repo_objs_free(&l);
	repo_close(r);
}

/* Which key opens an object: the current one's, and none for an object in the clear. */
static void test_probe_key(void **state)
{
	(void)state;
	repo *r = NULL;
	char *enc, *plain;
	assert_int_equal(open_repo("lz4", NULL, NULL, &r), E_OK);
	put(r, "wal_005/000000010000000000000001", "in the clear", &plain);
	repo_close(r);
	assert_int_equal(open_repo("lz4", NULL, KEY_A, &r), E_OK);
	assert_true(repo_encrypted(r));
	assert_string_equal(repo_crypt_name(r), "libsodium");
	assert_true(repo_crypt_reads(r, "libsodium"));
	assert_false(repo_crypt_reads(r, "OpenPGP"));
	put(r, "wal_005/000000010000000000000002", "secret", &enc);
	repo_obj info;
	repo_key_of of = REPO_KEY_OLD;
	assert_int_equal(repo_stat(r, enc, &info), E_OK);
	assert_int_equal(repo_probe_key(r, enc, info.size, &of), E_OK);
	assert_int_equal(of, REPO_KEY_CURRENT);
	assert_int_equal(repo_stat(r, plain, &info), E_OK);
	assert_int_equal(repo_probe_key(r, plain, info.size, &of), E_OK);
	assert_int_equal(of, REPO_KEY_NONE);
	repo_close(r);
	assert_int_equal(open_repo("lz4", NULL, NULL, &r), E_OK);
	assert_false(repo_encrypted(r));
	assert_null(repo_crypt_name(r));
	assert_false(repo_crypt_reads(r, "libsodium"));
	repo_close(r);
	free(enc);
	free(plain);
}

/* A copy between repositories is the object as stored, read back whole at the other end. */
static void test_copy_object(void **state)
{
	(void)state;
	char *there = xasprintf("%s/second", unit_dir);
	repo *from = NULL, *to = NULL;
	char *key;
	assert_int_equal(open_repo("zstd", NULL, KEY_A, &from), E_OK);
	assert_int_equal(open_repo_in(there, "lz4", NULL, KEY_A, &to), E_OK);
	put(from, "wal_005/000000010000000000000003", "copied as it is", &key);
	repo_obj info;
	assert_int_equal(repo_stat(from, key, &info), E_OK);
	bool inside = true;
	assert_int_equal(repo_copy_object(from, to, key, info.size, &inside), E_OK);
	assert_false(inside);
	membuf a, b;
	raw(from, key, &a);
	raw(to, key, &b);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	free(a.data);
	free(b.data);
	assert_int_equal(get(to, key, &b), E_OK);
	assert_int_equal(b.len, strlen("copied as it is"));
	free(b.data);
	repo_close(from);
	repo_close(to);
	free(key);
	free(there);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_roundtrip_every_codec, unit_dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_find_any_codec, unit_dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_found, unit_dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_new_never_replaces, unit_dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_encrypted_objects, unit_dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_encrypted_without_key, unit_dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_names_the_variable, unit_dir_setup, teardown),
		cmocka_unit_test(test_codec_for_key),
		cmocka_unit_test_setup_teardown(test_frames_rule, unit_dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_objects, unit_dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_key, unit_dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy_object, unit_dir_setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
