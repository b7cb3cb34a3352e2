/*
 * Unit tests for the catalog's writer rules on a file-system repository: claims (one writer
 * per backup name, renewal, takeover of a dead push's claim, loss), the cluster marker and
 * retention's intent; and the streamed reader of files_metadata.json's Files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal/catalog/catalog_impl.h"
#include "internal/pg/pg.h"
#include "internal/repo/repo_impl.h"

#define NAME "base_000000010000000000000003"

static char *root;
static repo r;

static int setup(void **state)
{
	(void)state;
	root = unit_tmpdir();
	memset(&r, 0, sizeof(r));
	r.codec = codec_by_name("none");
	assert_int_equal(storage_fs_open(root, &r.st), E_OK);
	/* Fast timing: renewal every 50 ms, fence 300 ms, watch 500 ms. */
	catalog_claim_timing(50, 300, 500);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	storage_free(r.st);
	int rc = unit_rmtree(root);
	free(root);
	return rc;
}

static void put(const char *key, const char *text)
{
	sink *s;
	assert_int_equal(storage_put(r.st, key, &s), E_OK);
	assert_int_equal(sink_write(s, text, strlen(text)), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
}

static bool exists(const char *key)
{
	obj_info info;
	bool yes = storage_stat(r.st, key, &info) == E_OK;
	err_clear();
	return yes;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* A backup as WAL-G's listings print it: its keys in WAL-G's order, whatever metadata.json's. */
static void test_backup_json(void **state)
{
	(void)state;
	backup_ref ref = { .name = (char *)(uintptr_t)"base_000000010000000000000004_D_000000010000000000000002",
					   .mtime = 1796522682,
					   .mtime_nsec = 777878000 };
	json_t *meta = json_loads("{\"user_data\":\"volume-snapshot\",\"extra\":1,"
							  "\"finish_lsn\":2,\"start_time\":\"t\",\"start_lsn\":1}",
							  0, NULL);
	json_t *o = catalog_backup_json(&ref, meta);
	char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	assert_string_equal(text,
						"{\"backup_name\":\"base_000000010000000000000004_D_000000010000000000000002\","
						"\"time\":\"2026-12-06T02:04:42.777878Z\",\"wal_file_name\":"
						"\"000000010000000000000004\",\"storage_name\":\"default\",\"start_time\":"
						"\"t\",\"start_lsn\":1,\"finish_lsn\":2,\"user_data\":\"volume-snapshot\","
						"\"extra\":1}");
	free(text);
	json_decref(o);
	json_decref(meta);
}

static void test_one_writer(void **state)
{
	(void)state;
	claim *a = NULL, *b = NULL;
	assert_int_equal(catalog_claim(&r, NAME, 0x3000028, 1, NULL, NULL, NULL, &a), E_OK);
	assert_true(exists("basebackups_005/" NAME "/walc_claim_001.json"));
	/* A second push of the same name, while the first renews: refused at once. */
	assert_int_equal(catalog_claim(&r, NAME, 0x3000060, 1, NULL, NULL, NULL, &b), E_EXISTS);
	assert_null(b);
	assert_non_null(strstr(err_msg(), "is being written by another backup-push"));
	claim_list l;
	assert_int_equal(catalog_claims(&r, &l), E_OK);
	assert_int_equal(l.len, 1);
	assert_int_equal(l.items[0].state, CLAIM_RUNNING);
	assert_string_equal(l.items[0].name, NAME);
	assert_int_equal(l.items[0].start_lsn, 0x3000028);
	catalog_claims_free(&l);
	assert_int_equal(catalog_claim_check(a), E_OK);
	catalog_claim_end(a, true);
	assert_false(exists("basebackups_005/" NAME "/walc_claim_001.json"));
	/* Dropped: the name is free again. */
	assert_int_equal(catalog_claim(&r, NAME, 0x3000028, 1, NULL, NULL, NULL, &a), E_OK);
	catalog_claim_end(a, true);
}

static void test_complete_and_foreign(void **state)
{
	(void)state;
	claim *c = NULL;
	put("basebackups_005/" NAME "_backup_stop_sentinel.json", "{}");
	assert_int_equal(catalog_claim(&r, NAME, 1, 1, NULL, NULL, NULL, &c), E_EXISTS);
	assert_non_null(strstr(err_msg(), "already exists"));
	assert_int_equal(storage_remove(r.st, "basebackups_005/" NAME "_backup_stop_sentinel.json"),
					 E_OK);
	/* Objects nobody claimed (WAL-G writing the same name): nothing is written. */
	put("basebackups_005/" NAME "/tar_partitions/part_001.tar.lz4", "x");
	assert_int_equal(catalog_claim(&r, NAME, 1, 1, NULL, NULL, NULL, &c), E_EXISTS);
	assert_non_null(strstr(err_msg(), "that no walc push claimed"));
	assert_false(exists("basebackups_005/" NAME "/walc_claim_001.json"));
}

/* A claim of a push elsewhere that stopped renewing long ago (by both clocks). */
static void dead_claim(int gen)
{
	char *key = xasprintf("basebackups_005/" NAME "/walc_claim_%03d.json", gen);
	put(key, "{\"backup\": \"" NAME "\", \"push_id\": \"dead\", \"hostname\": \"elsewhere\", "
			 "\"pid\": 1, \"renewed\": \"2020-01-01T00:00:00Z\", \"renewals\": 7}");
	char *path = xasprintf("%s/%s", root, key);
	struct timespec old[2] = { { 1577836800, 0 }, { 1577836800, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
	free(path);
	free(key);
}

static void test_take_over_dead(void **state)
{
	(void)state;
	dead_claim(1);
	put("basebackups_005/" NAME "/tar_partitions/part_009.tar.lz4", "dead push's part");
	claim_list l;
	assert_int_equal(catalog_claims(&r, &l), E_OK);
	assert_int_equal(l.len, 1);
	assert_int_equal(l.items[0].state, CLAIM_DEAD);
	catalog_claims_free(&l);
	claim *c = NULL;
	/* Watched for 500 ms without a renewal: taken over, the dead push's objects removed. */
	assert_int_equal(catalog_claim(&r, NAME, 1, 1, NULL, NULL, NULL, &c), E_OK);
	assert_true(exists("basebackups_005/" NAME "/walc_claim_002.json"));
	assert_false(exists("basebackups_005/" NAME "/walc_claim_001.json"));
	assert_false(exists("basebackups_005/" NAME "/tar_partitions/part_009.tar.lz4"));
	assert_int_equal(catalog_claim_check(c), E_OK);
	catalog_claim_end(c, false);
	assert_true(exists("basebackups_005/" NAME "/walc_claim_002.json"));
}

static void test_watched_alive(void **state)
{
	(void)state;
	/* Renewed long ago by its clock, but its renewals still move: it is alive. */
	dead_claim(1);
	claim *c = NULL;
	pid_t child = fork();
	if (child == 0) {
		for (int i = 0; i < 20; i++) {
			char *text = xasprintf("{\"backup\": \"" NAME "\", \"push_id\": \"dead\", "
								   "\"hostname\": \"elsewhere\", \"pid\": 1, \"renewed\": "
								   "\"2020-01-01T00:00:00Z\", \"renewals\": %d}",
								   100 + i);
			put("basebackups_005/" NAME "/walc_claim_001.json", text);
			free(text);
			sleep_ms(40);
		}
		_exit(0);
	}
	assert_int_equal(catalog_claim(&r, NAME, 1, 1, NULL, NULL, NULL, &c), E_EXISTS);
	assert_non_null(strstr(err_msg(), "is being written by another backup-push"));
	assert_false(exists("basebackups_005/" NAME "/walc_claim_002.json"));
	int status;
	waitpid(child, &status, 0);
}

static int lost_calls;
static void on_lost(void *arg)
{
	(void)arg;
	__atomic_add_fetch(&lost_calls, 1, __ATOMIC_RELAXED);
}

static void test_lost_to_takeover(void **state)
{
	(void)state;
	claim *c = NULL;
	lost_calls = 0;
	assert_int_equal(catalog_claim(&r, NAME, 1, 1, NULL, on_lost, NULL, &c), E_OK);
	/* Another push thought us dead and created the next generation. */
	put("basebackups_005/" NAME "/walc_claim_002.json", "{\"push_id\": \"other\"}");
	for (int i = 0; i < 100 && __atomic_load_n(&lost_calls, __ATOMIC_RELAXED) == 0; i++)
		sleep_ms(20);
	assert_int_equal(__atomic_load_n(&lost_calls, __ATOMIC_RELAXED), 1);
	assert_true(catalog_claim_lost(c));
	assert_int_equal(catalog_claim_check(c), E_CANCELLED);
	assert_non_null(strstr(err_msg(), "taken over"));
	/* Lost: dropping must leave the new owner's claim and our old one alone. */
	catalog_claim_end(c, true);
	assert_true(exists("basebackups_005/" NAME "/walc_claim_001.json"));
	assert_true(exists("basebackups_005/" NAME "/walc_claim_002.json"));
}

static const catalog_settings keep_cluster = { false }, change_cluster = { true };

static void test_cluster_marker(void **state)
{
	(void)state;
	assert_int_equal(catalog_check_cluster(&r, 111, &keep_cluster, "wal-push X"), E_OK);
	assert_true(exists(CATALOG_CLUSTER_MARKER));
	assert_int_equal(catalog_check_cluster(&r, 111, &keep_cluster, "wal-push X"), E_OK);
	assert_int_equal(catalog_check_cluster(&r, 222, &keep_cluster, "wal-push Y"), E_CONFIG);
	assert_non_null(strstr(err_msg(), "system identifier is 222"));
	assert_non_null(strstr(err_msg(), "cluster 111"));
	assert_int_equal(catalog_check_cluster(&r, 222, &change_cluster, "wal-push Y"), E_OK);
	assert_int_equal(catalog_check_cluster(&r, 111, &keep_cluster, "wal-push X"), E_CONFIG);
	/* Without a marker, the newest sentinel's identifier counts. */
	assert_int_equal(storage_remove(r.st, CATALOG_CLUSTER_MARKER), E_OK);
	put("basebackups_005/" NAME "_backup_stop_sentinel.json",
		"{\"LSN\": 1, \"FinishLSN\": 2, \"SystemIdentifier\": 333}");
	assert_int_equal(catalog_check_cluster(&r, 444, &keep_cluster, "backup-push"), E_CONFIG);
	assert_non_null(strstr(err_msg(), "its newest backup " NAME));
	assert_false(exists(CATALOG_CLUSTER_MARKER));
	assert_int_equal(catalog_check_cluster(&r, 333, &keep_cluster, "backup-push"), E_OK);
	assert_true(exists(CATALOG_CLUSTER_MARKER));
	/* A marker that is not ours to read is an error, not a pass. */
	put(CATALOG_CLUSTER_MARKER, "{\"system_identifier\": \"x\"}");
	assert_int_equal(catalog_check_cluster(&r, 555, &keep_cluster, "backup-push"), E_CORRUPT);
}

/* The first writer that encrypts records the method; a writer without a key is refused then. */
static void test_marker_encryption(void **state)
{
	(void)state;
	static char key[] = "0123456789abcdef0123456789abcdef";
	config cfg;
	assert_int_equal(config_defaults(&cfg), E_OK);
	cfg.crypt.libsodium_key = xstrdup(key);
	crypter *c = NULL;
	assert_int_equal(crypt_init(), E_OK);
	assert_int_equal(crypter_load(&cfg.crypt, &c), E_OK);
	config_free(&cfg);
	assert_int_equal(catalog_check_cluster(&r, 111, &keep_cluster, "wal-push A"), E_OK);
	assert_int_equal(catalog_check_encryption(&r, "wal-push 00000002.history"), E_OK);
	r.crypt = c;
	assert_int_equal(catalog_check_cluster(&r, 111, &keep_cluster, "wal-push B"), E_OK);
	char *path = xasprintf("%s/" CATALOG_CLUSTER_MARKER, root);
	size_t len;
	unsigned char *bytes = read_all(path, &len);
	char *text = xasprintf("%.*s", (int)len, (const char *)bytes);
	assert_non_null(strstr(text, "\"encryption\":\"libsodium\""));
	assert_null(strstr(text, key)); /* never key material */
	free(text);
	free(bytes);
	r.crypt = NULL;
	assert_int_equal(catalog_check_cluster(&r, 111, &keep_cluster, "wal-push C"), E_CONFIG);
	assert_non_null(strstr(err_msg(), "wal-push C: "));
	assert_non_null(strstr(err_msg(), "encrypted with libsodium"));
	assert_non_null(strstr(err_msg(), "WALG_LIBSODIUM_KEY"));
	assert_int_equal(catalog_check_encryption(&r, "wal-push 00000002.history"), E_CONFIG);
	/* A change of cluster keeps the record. */
	r.crypt = c;
	assert_int_equal(catalog_check_cluster(&r, 222, &change_cluster, "backup-push"), E_OK);
	r.crypt = NULL;
	assert_int_equal(catalog_check_cluster(&r, 222, &keep_cluster, "backup-push"), E_CONFIG);
	err_clear();
	free(path);
	crypter_free(c);
}

static void test_intent(void **state)
{
	(void)state;
	char *who = NULL;
	assert_int_equal(catalog_deleting(&r, NAME, &who), E_OK);
	assert_null(who);
	const char *names[] = { "base_000000010000000000000001", NAME };
	assert_int_equal(catalog_deleting_begin(&r, names, 2), E_OK);
	assert_int_equal(catalog_deleting(&r, NAME, &who), E_OK);
	assert_non_null(who);
	assert_non_null(strstr(who, "a delete started"));
	free(who);
	assert_int_equal(catalog_deleting(&r, "base_000000010000000000000009", &who), E_OK);
	assert_null(who);
	catalog_deleting_end(&r);
	assert_int_equal(catalog_deleting(&r, NAME, &who), E_OK);
	assert_null(who);
	/* A record older than an hour is a crashed delete's: ignored. */
	put("walc_deleting.json", "{\"backups\": [\"" NAME "\"], \"started\": \"2020-01-01T00:00:00Z\"}");
	assert_int_equal(catalog_deleting(&r, NAME, &who), E_OK);
	assert_null(who);
	/* A recent record of a delete on this machine whose process is gone (killed) is dead. */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	assert_true(child > 0);
	assert_int_equal(waitpid(child, NULL, 0), child);
	proc_rec here = proc_here();
	char *when = time_now_rfc3339();
	char *doc = xasprintf("{\"backups\": [\"" NAME "\"], \"hostname\": \"%s\", \"pid\": %ld, "
						  "\"boot_id\": \"%s\", \"pid_namespace\": \"%s\", \"started\": \"%s\"}",
						  here.hostname, (long)child, here.boot_id, here.pid_ns, when);
	put("walc_deleting.json", doc);
	assert_int_equal(catalog_deleting(&r, NAME, &who), E_OK);
	assert_null(who);
	free(doc);
	/* The same record with a live pid (ours) still counts; so does one from another host. */
	doc = xasprintf("{\"backups\": [\"" NAME "\"], \"hostname\": \"%s\", \"pid\": %ld, "
					"\"boot_id\": \"%s\", \"pid_namespace\": \"%s\", \"started\": \"%s\"}",
					here.hostname, (long)getpid(), here.boot_id, here.pid_ns, when);
	put("walc_deleting.json", doc);
	assert_int_equal(catalog_deleting(&r, NAME, &who), E_OK);
	assert_non_null(who);
	free(who);
	free(doc);
	doc = xasprintf("{\"backups\": [\"" NAME "\"], \"hostname\": \"elsewhere\", \"pid\": %ld, "
					"\"boot_id\": \"%s\", \"pid_namespace\": \"%s\", \"started\": \"%s\"}",
					(long)child, here.boot_id, here.pid_ns, when);
	put("walc_deleting.json", doc);
	assert_int_equal(catalog_deleting(&r, NAME, &who), E_OK);
	assert_non_null(who);
	free(who);
	free(doc);
	free(when);
}

/* A sentinel of cluster sysid, its file's time set to mtime (seconds since the epoch). */
static void sentinel_at(const char *name, unsigned long long sysid, time_t mtime)
{
	char *key = xasprintf("basebackups_005/%s_backup_stop_sentinel.json", name);
	char *doc = xasprintf("{\"LSN\": 1, \"FinishLSN\": 2, \"SystemIdentifier\": %llu}", sysid);
	put(key, doc);
	char *path = xasprintf("%s/%s", root, key);
	struct timespec ts[2] = { { mtime, 0 }, { mtime, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	free(path);
	free(doc);
	free(key);
}

static char *latest(void)
{
	char *name = NULL;
	assert_int_equal(catalog_resolve(&r, "LATEST", &name), E_OK);
	return name;
}

/* LATEST and the listing's order: positions, not clocks; the marker's cluster last. */
static void test_order(void **state)
{
	(void)state;
	/* The newer backup was written by a host whose clock was 400 days behind. */
	sentinel_at("base_000000010000000000000010", 7, 1800000000);
	sentinel_at("base_000000010000000000000020", 7, 1800000000 - 400 * 86400);
	char *name = latest();
	assert_string_equal(name, "base_000000010000000000000020");
	free(name);
	backup_refs refs;
	assert_int_equal(catalog_backups_ordered(&r, &refs), E_OK);
	assert_int_equal(refs.len, 2);
	assert_string_equal(refs.items[1].name, "base_000000010000000000000020");
	catalog_backups_free(&refs);
	/* A later timeline is newer. */
	sentinel_at("base_00000002000000000000000C", 7, 1700000000);
	name = latest();
	assert_string_equal(name, "base_00000002000000000000000C");
	free(name);
	/* An unreadable newest sentinel is skipped (with a warning). */
	put("basebackups_005/base_000000020000000000000030_backup_stop_sentinel.json", "{\"LSN\": ");
	name = latest();
	assert_string_equal(name, "base_00000002000000000000000C");
	free(name);
	/* A new cluster (the marker says 9) in the prefix, lower positions: its backups are newer. */
	put(CATALOG_CLUSTER_MARKER, "{\"system_identifier\": \"9\"}");
	sentinel_at("base_000000010000000000000003", 9, 1600000000);
	sentinel_at("base_000000010000000000000004", 9, 1500000000);
	name = latest();
	assert_string_equal(name, "base_000000010000000000000004");
	free(name);
	assert_int_equal(catalog_backups_ordered(&r, &refs), E_OK);
	assert_int_equal(refs.len, 6);
	/* the other cluster's by time, the unreadable one (counted as ours) by position */
	const char *want[] = { "base_00000002000000000000000C", "base_000000010000000000000020",
						   "base_000000010000000000000010", "base_000000010000000000000003",
						   "base_000000010000000000000004", "base_000000020000000000000030" };
	for (size_t i = 0; i < 6; i++)
		assert_string_equal(refs.items[i].name, want[i]);
	catalog_backups_free(&refs);
}

/* Files, streamed: what the reader passed on, one "name=record" line each. */
typedef struct files_seen {
	char text[4096];
	int calls;
	int fail_at; /* the callback fails on this call (1-based), 0 never */
} files_seen;

static err_code seen_file(void *arg, const char *name, const json_t *rec)
{
	files_seen *f = arg;
	if (++f->calls == f->fail_at)
		return err_set(E_IO, "stop here");
	char *r = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	size_t at = strlen(f->text);
	snprintf(f->text + at, sizeof(f->text) - at, "%s=%s\n", name, r);
	free(r);
	return E_OK;
}

/* TarFileSets, streamed: "part<member" per name, "part." at each list's end. */
static err_code seen_set(void *arg, const char *part, const char *member)
{
	files_seen *f = arg;
	if (++f->calls == f->fail_at)
		return err_set(E_IO, "stop here");
	size_t at = strlen(f->text);
	snprintf(f->text + at, sizeof(f->text) - at, "%s%s%s\n", part, member ? "<" : ".",
			 member ? member : "");
	return E_OK;
}

/* Reads text in pieces of `piece` bytes (0: whole); returns the reader's result. */
static err_code read_files(const char *text, size_t piece, files_seen *f)
{
	sink *s = catalog_files_sink_new("fm.json", seen_file, seen_set, f);
	size_t len = strlen(text);
	err_code rc = E_OK;
	for (size_t at = 0; rc == E_OK && at < len;) {
		size_t n = piece == 0 || len - at < piece ? len - at : piece;
		rc = sink_write(s, text + at, n);
		at += n;
	}
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	return rc;
}

static void test_files_stream(void **state)
{
	(void)state;
	/*
	 * Other members before and after Files (strings, arrays and objects holding brackets and
	 * quotes, numbers, literals), Files spelled in another case, names with escapes, records
	 * of every shape, white space everywhere JSON allows it.
	 */
	const char *text =
		" {\"TarFileSets\": {\"part_1.tar\": [\"/a}\", \"/b\\\"{\"] , \"p\\u00e9\" :[ ]},"
		" \"n\": 12, \"t\": true,"
		"\"s\": \"}{][\\\\\", \"files\" :\n{ \"/base/1/1\" : {\"MTime\": \"x\", \"Sub\": "
		"{\"a\": [1, {\"b\": \"}\"}]}},\"/b\\u00e9\\\"\\n\": {\"IsSkipped\": true} ,"
		"\"/c\": 5, \"/d\": {}\n}, \"after\": [[], {}], \"z\": null } \n";
	const char *want = "part_1.tar</a}\n"
					   "part_1.tar</b\"{\n"
					   "part_1.tar.\n"
					   "p\xc3\xa9.\n"
					   "/base/1/1={\"MTime\":\"x\",\"Sub\":{\"a\":[1,{\"b\":\"}\"}]}}\n"
					   "/b\xc3\xa9\"\n={\"IsSkipped\":true}\n"
					   "/c=5\n"
					   "/d={}\n";
	/* Every piece size: a split anywhere, inside a name, an escape or a record, is the same. */
	for (size_t piece = 0; piece < 40; piece++) {
		files_seen f = { 0 };
		assert_int_equal(read_files(text, piece, &f), E_OK);
		assert_string_equal(f.text, want);
	}
	files_seen f = { 0 };
	assert_int_equal(read_files("{\"Files\": {}}", 0, &f), E_OK);
	assert_int_equal(f.calls, 0);
	/* a TarFileSets of null is none, as WAL-G reads it */
	assert_int_equal(read_files("{\"TarFileSets\": null, \"Files\": {}}", 0, &f), E_OK);
	assert_int_equal(f.calls, 0);
	/* without a callback for it, TarFileSets is only followed */
	files_seen g = { 0 };
	sink *s = catalog_files_sink_new("fm.json", seen_file, NULL, &g);
	const char *sets = "{\"TarFileSets\": {\"p\": [\"/a\"]}, \"Files\": {\"/a\": {}}}";
	assert_int_equal(sink_write(s, sets, strlen(sets)), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_string_equal(g.text, "/a={}\n");
}

static void test_files_stream_refuses(void **state)
{
	(void)state;
	const char *bad[] = {
		"",						  /* nothing */
		"[]",					  /* not an object */
		"{\"Files\": {\"/a\": {}}", /* truncated */
		"{\"Files\": {\"/a\": {}}} x", /* text after the end */
		"{\"Other\": {}}",		  /* no Files */
		"{\"Files\": null}",	  /* Files not an object */
		"{\"Files\": [\"/a\"]}",
		"{\"Files\": {\"/a\": {\"x\": }}}", /* a malformed entry, found by jansson */
		"{\"Files\": {\"/a\" {}}}",
		"{\"Files\": {/a: {}}}",
		"{\"Files\": {\"/a\": {},}}", /* a trailing comma */
		"{\"Files\": {}, }",
		"{\"a\" 1, \"Files\": {}}",
		"{\"Files\": {\"/a\": \"\\ud800\"}}", /* a lone surrogate: jansson refuses it */
		"{\"Files\": {\"/a\": 1]}",		 /* an entry's bracket of the wrong kind */
		"{\"Files\": {\"/a\": {\"b\": [1}}}}",
		"{\"T\": [{\"a\": 1]}], \"Files\": {}}", /* the same outside Files */
		"{\"Files\": {}, \"TarFileSets\": {\"p\": \"x\"}}", /* a list that is not one */
		"{\"Files\": {}, \"TarFileSets\": {\"p\": [1]}}",
		"{\"Files\": {}, \"TarFileSets\": {\"p\": [[\"a\"]]}}",
		"{\"Files\": {}, \"TarFileSets\": {\"p\": [\"a\",]}}",
		"{\"Files\": {}, \"TarFileSets\": {\"p\": [\"a\" \"b\"]}}",
		"{\"Files\": {}, \"TarFileSets\": {\"p\": [\"a\"],}}",
		"{\"Files\": {}, \"TarFileSets\": {\"p\" [\"a\"]}}",
		"{\"Files\": {}, \"TarFileSets\": {p: []}}",
		"{\"Files\": {}, \"TarFileSets\": {\"p\": [\"\\ud800\"]}}",
		"{\"Files\": {}, \"TarFileSets\": {\"p\": [\"a\"]}", /* truncated */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		files_seen f = { 0 };
		err_code rc = read_files(bad[i], 3, &f);
		if (rc != E_CORRUPT)
			fail_msg("accepted or wrong code %d: %s", rc, bad[i]);
		assert_non_null(strstr(err_msg(), "fm.json"));
		err_clear();
	}
	/* An entry over the cap is refused before it is held. */
	size_t big = CATALOG_JSON_MAX + 100;
	char *text = malloc(big + 64);
	strcpy(text, "{\"Files\": {\"/a\": \"");
	size_t at = strlen(text);
	memset(text + at, 'x', big);
	strcpy(text + at + big, "\"}}");
	files_seen f = { 0 };
	assert_int_equal(read_files(text, 1 << 20, &f), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "larger than"));
	err_clear();
	free(text);
	/* Depth is bounded, so its record is too. */
	char deep[256] = "{\"Files\": {}, \"T\": ";
	for (int i = 0; i < 70; i++)
		strcat(deep, "[");
	files_seen d = { 0 };
	assert_int_equal(read_files(deep, 0, &d), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "deeper"));
	err_clear();
	/* The callback's error stops the read and is returned with its message. */
	files_seen stop = { .fail_at = 2 };
	assert_int_equal(read_files("{\"Files\": {\"/a\": 1, \"/b\": 2, \"/c\": 3}}", 0, &stop), E_IO);
	assert_int_equal(stop.calls, 2);
	assert_string_equal(err_msg(), "stop here");
	err_clear();
}

/* From a repository: the object of one backup, and a missing one named. */
static void test_files_each(void **state)
{
	(void)state;
	put("basebackups_005/" NAME "/files_metadata.json",
		"{\"Files\": {\"/x\": {\"MTime\": \"m\"}}, \"TarFileSets\": {}}");
	files_seen f = { 0 };
	assert_int_equal(catalog_files_each(&r, NAME, seen_file, NULL, &f), E_OK);
	assert_string_equal(f.text, "/x={\"MTime\":\"m\"}\n");
	assert_int_equal(catalog_files_each(&r, "base_none", seen_file, NULL, &f), E_NOTFOUND);
	assert_non_null(strstr(err_msg(), "base_none/files_metadata.json"));
	err_clear();
}

/* Files as a table: flags, frames, sizes and sums by name; malformed entries refused. */
static void test_file_table(void **state)
{
	(void)state;
	put("basebackups_005/" NAME "/files_metadata.json",
		"{\"Files\": {\"/inc\": {\"IsIncremented\": true, \"isskipped\": false},"
		"\"/skip\": {\"IsSkipped\": true, \"FrameOffset\": -4, \"Size\": \"9\"},"
		"\"/whole\": {\"FrameOffset\": 512, \"Size\": 8192, \"Checksum\": "
		"\"xxh3-128:000000000000000a00000000000000ff\"},"
		"\"/other\": {\"Checksum\": \"md5:x\"}}, \"TarFileSets\": {}}");
	file_table t;
	assert_int_equal(catalog_file_table(&r, NAME, true, &t), E_OK);
	assert_int_equal(t.n, 4);
	file_rec f, g;
	assert_true(file_table_find(&t, "/inc", &f));
	assert_int_equal(f.flags, FILE_INCREMENTED);
	assert_null(file_table_sum(&t, &f)); /* it records no size or checksum: none kept */
	assert_true(file_table_find(&t, "/skip", &f));
	assert_int_equal(f.flags, FILE_SKIPPED); /* a negative frame, a size in quotes: unused */
	assert_true(file_table_find(&t, "/whole", &f));
	assert_int_equal(f.flags, FILE_FRAME | FILE_SIZE | FILE_SUM);
	assert_int_equal(f.frame, 512);
	const file_sum *fs = file_table_sum(&t, &f);
	assert_int_equal(fs->size, 8192);
	assert_true(fs->sum[0] == 10 && fs->sum[1] == 255);
	assert_true(file_table_find(&t, "/other", &g));
	assert_int_equal(g.flags, FILE_SUM_OTHER);
	assert_non_null(file_table_sum(&t, &g));
	assert_false(file_table_find(&t, "/none", &g));
	uint64_t key[2];
	pg_name_key("/whole", key);
	assert_true(file_table_find_key(&t, key, &g));
	assert_true(g.idx == f.idx && g.at == f.at && f.idx < 4);
	file_table_free(&t);
	/* without sums: the same records, no sizes or checksums kept */
	assert_int_equal(catalog_file_table(&r, NAME, false, &t), E_OK);
	assert_true(file_table_find(&t, "/whole", &f));
	assert_int_equal(f.flags, FILE_FRAME | FILE_SIZE | FILE_SUM);
	assert_null(file_table_sum(&t, &f));
	assert_null(t.sums);
	file_table_free(&t);

	const char *bad[] = {
		"{\"Files\": {\"/a\": 1}}",
		"{\"Files\": {\"/a\": {\"IsSkipped\": 1}}}",
		"{\"Files\": {\"/a\": {\"IsIncremented\": \"yes\"}}}",
		"{\"Files\": {\"/a\": {}, \"/b\": {}, \"/a\": {}}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		put("basebackups_005/" NAME "/files_metadata.json", bad[i]);
		if (catalog_file_table(&r, NAME, true, &t) != E_CORRUPT)
			fail_msg("accepted: %s", bad[i]);
		assert_non_null(strstr(err_msg(), NAME "/files_metadata.json"));
		assert_null(t.recs);
		err_clear();
	}
	assert_int_equal(catalog_file_table(&r, "base_none", false, &t), E_NOTFOUND);
	err_clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backup_json),
		cmocka_unit_test_setup_teardown(test_one_writer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_complete_and_foreign, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_over_dead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watched_alive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost_to_takeover, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cluster_marker, setup, teardown),
		cmocka_unit_test_setup_teardown(test_marker_encryption, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order, setup, teardown),
		cmocka_unit_test(test_files_stream),
		cmocka_unit_test(test_files_stream_refuses),
		cmocka_unit_test_setup_teardown(test_files_each, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_table, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
