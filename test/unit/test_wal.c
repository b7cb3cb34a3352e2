/*
 * wal, over a file repository in a temporary directory and a pg_wal made by hand: the bound on
 * the WAL waiting for archiving (WALG_WAL_BACKLOG_MAX: what is dropped, the journal of drops,
 * the gaps recorded); wal-push (each codec, encrypted, what it refuses, overwrite protection,
 * background uploads and their markers), wal-fetch and its prefetch, wal-show and wal-verify,
 * backup-verify's WAL check, WAL metadata; wal-receive against a scripted server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "internal/catalog/catalog.h"
#include "internal/codec/codec.h"
#include "internal/repo/repo_impl.h"
#include "internal/storage/storage.h"
#include "internal/wal/wal_impl.h"
#include "test/unit/pqfake.h"
#include "test/unit/unit.h"

#define MIB ((uint64_t)1 << 20)

static bool not_b(void *arg, const char *name)
{
	(void)arg;
	return strcmp(name, "00000001000000000000000B") != 0;
}

/* Oldest first, segments only, past what may not go, until what is left fits. */
static void test_pick(void **state)
{
	(void)state;
	wal_waiting w[] = { { "00000001000000000000000A", MIB, 0 },
						{ "00000002.history", 100, 0 },
						{ "00000001000000000000000B", MIB, 0 },
						{ "00000001000000000000000C", MIB, 0 },
						{ "00000001000000000000000D", MIB, 0 },
						{ "00000001000000000000000E", MIB, 0 } };
	size_t n = sizeof(w) / sizeof(w[0]);
	uint64_t bytes = 5 * MIB + 100;
	bool drop[6];
	assert_int_equal(wal_backlog_pick(w, n, bytes, 0, NULL, NULL, drop), 0);
	assert_int_equal(wal_backlog_pick(w, n, bytes, 6 * MIB, NULL, NULL, drop), 0);
	/* 3 MiB may wait: the three oldest segments go, never the history file */
	assert_int_equal(wal_backlog_pick(w, n, bytes, 3 * MIB, NULL, NULL, drop), 3);
	assert_true(drop[0] && !drop[1] && drop[2] && drop[3] && !drop[4] && !drop[5]);
	/* B may not go: C and D go in its place */
	assert_int_equal(wal_backlog_pick(w, n, bytes, 3 * MIB, not_b, NULL, drop), 3);
	assert_true(drop[0] && !drop[1] && !drop[2] && drop[3] && drop[4] && !drop[5]);
}

/* unit_dir/dir/name suffix */
static char *path_in(const char *dir, const char *name, const char *suffix)
{
	return xasprintf("%s/%s/%s%s", unit_dir, dir, name, suffix);
}

/* A file of size bytes (sparse) at unit_dir/rel. */
static void make_file(const char *rel, uint64_t size)
{
	char *p = xasprintf("%s/%s", unit_dir, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(ftruncate(fileno(f), (off_t)size), 0);
	fclose(f);
	free(p);
}

static bool exists(const char *dir, const char *name, const char *suffix)
{
	char *p = path_in(dir, name, suffix);
	bool yes = access(p, F_OK) == 0;
	free(p);
	return yes;
}

static char *slurp(const char *rel)
{
	char *p = xasprintf("%s/%s", unit_dir, rel);
	FILE *f = fopen(p, "r");
	free(p);
	if (f == NULL)
		return NULL;
	char *buf = xcalloc(1, 1 << 16);
	size_t n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static const char *const SEGS[] = { "000000010000000000000003", "000000010000000000000004",
									"000000010000000000000005", "000000010000000000000006",
									"000000010000000000000007", "000000010000000000000008" };

/* A pg_wal with the six segments of SEGS waiting, and a repository beside it. */
static void setup_pg_wal(config *cfg, repo **r, const char *limit)
{
	const config_pair more[] = { { "WALG_UPLOAD_CONCURRENCY", "2" },
								 { "WALG_WAL_BACKLOG_MAX", limit } };
	unit_cluster_open(cfg, r, more, limit ? 2 : 1);
	for (size_t i = 0; i < 6; i++) {
		char *seg = xasprintf("pgdata/pg_wal/%s", SEGS[i]);
		char *ready = xasprintf("pgdata/pg_wal/archive_status/%s.ready", SEGS[i]);
		make_file(seg, MIB);
		make_file(ready, 0);
		free(seg);
		free(ready);
	}
}

static int reports;
static wal_backlog last_report;
static void on_report(void *arg, const wal_backlog *b)
{
	(void)arg;
	reports++;
	last_report = *b;
}

/*
 * Past the bound the first look drops the oldest segments, the call's own among them: each
 * recorded in the journal, .ready renamed .done but the call's own (PostgreSQL marks it).
 */
static void test_watch_drops(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	setup_pg_wal(&cfg, &r, "2mb");
	char *wal_dir = xasprintf("%s/pgdata/pg_wal", unit_dir);
	wal_backlog b;
	assert_int_equal(wal_backlog_read(&cfg.wal, wal_dir, &b), E_OK);
	assert_int_equal(b.files, 6);
	assert_int_equal(b.bytes, 6 * MIB);
	assert_int_equal(b.limit, 2 * MIB);
	assert_int_equal(b.dropped, 0);

	reports = 0;
	bool self = false;
	wal_watch *w = wal_watch_begin(r, &cfg.wal, wal_dir, SEGS[0], on_report, NULL, &self);
	assert_non_null(w);
	assert_true(self);
	wal_watch_end(w);
	assert_true(exists("pgdata/pg_wal/archive_status", SEGS[0], ".ready"));
	/* as PostgreSQL does once told it is archived */
	char *ready = path_in("pgdata/pg_wal/archive_status", SEGS[0], ".ready");
	char *done = path_in("pgdata/pg_wal/archive_status", SEGS[0], ".done");
	assert_int_equal(rename(ready, done), 0);
	free(ready);
	free(done);
	for (size_t i = 1; i < 4; i++)
		assert_true(exists("pgdata/pg_wal/archive_status", SEGS[i], ".done"));
	for (size_t i = 4; i < 6; i++)
		assert_true(exists("pgdata/pg_wal/archive_status", SEGS[i], ".ready"));
	assert_int_equal(reports, 1);
	assert_int_equal(last_report.dropped, 4);
	assert_int_equal(last_report.files, 2);
	/* one gap of four segments in the journal, not recorded yet */
	char *journal = slurp("pgdata/pg_wal/walc_data/backlog.json");
	assert_non_null(journal);
	json_t *doc = json_loads(journal, 0, NULL);
	assert_non_null(doc);
	json_t *gaps = json_object_get(doc, "gaps");
	assert_int_equal(json_array_size(gaps), 1);
	json_t *g = json_array_get(gaps, 0);
	assert_string_equal(json_string_value(json_object_get(g, "first_segment")), SEGS[0]);
	assert_string_equal(json_string_value(json_object_get(g, "last_segment")), SEGS[3]);
	assert_false(json_is_true(json_object_get(g, "recorded")));
	json_decref(doc);
	free(journal);
	assert_true(wal_dropped_has(wal_dir, SEGS[2]));
	assert_false(wal_dropped_has(wal_dir, SEGS[4]));

	/* the repository learns of it at the next flush, and only once */
	assert_false(exists("repo", "walc_wal_lost.json", ""));
	char *state_dir = wal_state_dir(wal_dir);
	assert_int_equal(wal_dropped_flush(r, state_dir), E_OK);
	wal_lost lost;
	assert_int_equal(wal_lost_read(r, MIB, &lost), E_OK);
	assert_int_equal(lost.n, 1);
	assert_int_equal(lost.gaps[0].first, 3);
	assert_int_equal(lost.gaps[0].last, 6);
	assert_non_null(strstr(lost.gaps[0].why, "over WALG_WAL_BACKLOG_MAX (2 MiB)"));
	const wal_lost_gap *at = wal_lost_at(&lost, 1, 5);
	assert_non_null(at);
	assert_null(wal_lost_at(&lost, 1, 7));
	assert_null(wal_lost_at(&lost, 2, 5));
	char *what = wal_lost_describe(at, MIB);
	assert_non_null(strstr(what, "WAL segments 000000010000000000000003 to "
								 "000000010000000000000006 are recorded lost"));
	free(what);
	wal_lost_free(&lost);
	assert_int_equal(wal_dropped_flush(r, state_dir), E_OK);
	assert_int_equal(wal_lost_read(r, MIB, &lost), E_OK);
	assert_int_equal(lost.n, 1);
	wal_lost_free(&lost);

	/* a later drop of the next segment is a new gap: the first was recorded as it was */
	make_file("pgdata/pg_wal/000000010000000000000009", MIB);
	make_file("pgdata/pg_wal/archive_status/000000010000000000000009.ready", 0);
	w = wal_watch_begin(r, &cfg.wal, wal_dir, "000000010000000000000009", NULL, NULL, &self);
	assert_false(self); /* 7 is older */
	wal_watch_end(w);
	assert_true(exists("pgdata/pg_wal/archive_status", SEGS[4], ".done"));
	assert_int_equal(wal_lost_read_local(r, wal_dir, MIB, &lost), E_OK);
	assert_int_equal(lost.n, 3); /* the repository's one, the journal's two */
	assert_non_null(wal_lost_at(&lost, 1, 7));
	wal_lost_free(&lost);
	assert_int_equal(wal_backlog_read(&cfg.wal, wal_dir, &b), E_OK);
	assert_int_equal(b.dropped, 5);
	assert_int_equal(b.files, 2); /* 8 and 9 */

	free(state_dir);
	free(wal_dir);
	unit_cluster_close(&cfg, r);
}

/* Without the setting nothing is dropped, whatever waits; the warning comes once a minute. */
static void test_watch_unbounded(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	setup_pg_wal(&cfg, &r, NULL);
	char *wal_dir = xasprintf("%s/pgdata/pg_wal", unit_dir);
	/* written ten seconds ago: a burst archiving drains at once is not behind, this is */
	for (size_t i = 0; i < 6; i++) {
		char *seg = xasprintf("%s/%s", wal_dir, SEGS[i]);
		struct timespec ago[2] = { { time(NULL) - 10, 0 }, { time(NULL) - 10, 0 } };
		assert_int_equal(utimensat(AT_FDCWD, seg, ago, 0), 0);
		free(seg);
	}
	reports = 0;
	bool self = true;
	for (int i = 0; i < 3; i++) {
		wal_watch *w = wal_watch_begin(r, &cfg.wal, wal_dir, SEGS[0], on_report, NULL, &self);
		assert_false(self);
		wal_watch_tick(w);
		wal_watch_end(w);
	}
	for (size_t i = 0; i < 6; i++)
		assert_true(exists("pgdata/pg_wal/archive_status", SEGS[i], ".ready"));
	/* six wait, more than WALG_UPLOAD_CONCURRENCY, for 10 s: behind, said once in six looks */
	assert_int_equal(reports, 1);
	assert_int_equal(last_report.files, 6);
	assert_int_equal(last_report.limit, 0);
	assert_false(exists("repo", "walc_wal_lost.json", ""));
	/* not a pg_wal: no watch */
	bool none;
	assert_null(wal_watch_begin(r, &cfg.wal, unit_dir, SEGS[0], NULL, NULL, &none));
	free(wal_dir);
	unit_cluster_close(&cfg, r);
}

/* ------------------------------------------------------------------------------------------ */
/* wal-push, wal-fetch, wal-show and wal-verify over a file repository                         */
/* ------------------------------------------------------------------------------------------ */

#define SYSID UNIT_WAL_SYSID

/* Writes len bytes to unit_dir/rel. */
static void write_file(const char *rel, const void *buf, size_t len)
{
	char *p = xasprintf("%s/%s", unit_dir, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	fclose(f);
	free(p);
}

/* Segment n of timeline 1 (1 MiB segments), written to pg_wal with seed n; its path. */
static char *pg_wal_segment(uint64_t segno, const char *status)
{
	char name[WAL_NAME_LEN + 1];
	wal_name_format(name, 1, segno, MIB);
	char *rel = xasprintf("pgdata/pg_wal/%s", name);
	unsigned char *seg = unit_wal_segment(1, segno, MIB, SYSID, (uint32_t)segno);
	write_file(rel, seg, MIB);
	free(seg);
	if (status != NULL) {
		char *mark = xasprintf("pgdata/pg_wal/archive_status/%s.%s", name, status);
		make_file(mark, 0);
		free(mark);
	}
	char *path = xasprintf("%s/%s", unit_dir, rel);
	free(rel);
	return path;
}

/* The stored object of WAL file name, whatever its extension: NULL when there is none. */
static char *stored(repo *r, const char *name)
{
	obj_list l = { 0 };
	assert_int_equal(storage_list(r->st, "wal_005/", false, &l), E_OK);
	char *key = NULL;
	for (size_t i = 0; i < l.len && key == NULL; i++)
		if (strncmp(l.items[i].key, "wal_005/", 8) == 0 &&
			strncmp(l.items[i].key + 8, name, strlen(name)) == 0)
			key = xstrdup(l.items[i].key);
	obj_list_free(&l);
	return key;
}

/* Fetches name into unit_dir/got/name and compares it with the file at want. */
static void fetch_equal(repo *r, const wal_settings *cfg, const char *name, const char *want)
{
	char *dir = xasprintf("%s/got", unit_dir);
	assert_int_equal(mkdir_p(dir, 0700), E_OK);
	char *dest = xasprintf("%s/%s", dir, name);
	bool prefetch;
	assert_int_equal(wal_fetch(r, cfg, name, dest, &prefetch), E_OK);
	size_t a, b;
	unsigned char *got = read_all(dest, &a), *exp = read_all(want, &b);
	assert_non_null(got);
	assert_non_null(exp);
	assert_int_equal(a, b);
	assert_memory_equal(got, exp, a);
	free(got);
	free(exp);
	free(dest);
	free(dir);
}

/* One segment there and back, through each codec, in the clear and encrypted. */
static void test_push_fetch(void **state)
{
	(void)state;
	const char *const methods[] = { "lz4", "zstd", "brotli", "lzma" };
	for (size_t m = 0; m < 4; m++) {
		config cfg;
		repo *r = NULL;
		config_pair more[] = {
			{ "WALG_COMPRESSION_METHOD", methods[m] },
			{ "WALG_LIBSODIUM_KEY", "0123456789abcdef0123456789abcdef" },
			{ "WALG_LIBSODIUM_KEY_TRANSFORM", "none" },
		};
		unit_cluster_open(&cfg, &r, more, m % 2 ? 3 : 1);
		char *path = pg_wal_segment(3 + m, NULL);
		char name[WAL_NAME_LEN + 1];
		wal_name_format(name, 1, 3 + m, MIB);
		assert_int_equal(wal_push_one(r, &cfg.wal, path), E_OK);
		char *key = stored(r, name);
		assert_non_null(key);
		char *want = xasprintf("wal_005/%s.%s", name, codec_ext(codec_by_name(methods[m])));
		assert_string_equal(key, want);
		free(want);
		free(key);
		fetch_equal(r, &cfg.wal, name, path);
		free(path);
		unit_cluster_close(&cfg, r);
		assert_int_equal(unit_rmtree(unit_dir), 0);
		assert_int_equal(mkdir_p(unit_dir, 0700), E_OK);
	}
}

static char *seg_name(uint64_t segno)
{
	char *name = xmalloc(WAL_NAME_LEN + 1);
	wal_name_format(name, 1, segno, MIB);
	return name;
}

/* What wal-push refuses, and what protection against overwriting allows. */
static void test_push_checks(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	config_pair more[] = { { "WALG_PREVENT_WAL_OVERWRITE", "true" } };
	unit_cluster_open(&cfg, &r, more, 1);
	char *path = pg_wal_segment(3, NULL);
	char *name = seg_name(3);
	assert_int_equal(wal_push_one(r, &cfg.wal, path), E_OK);
	assert_int_equal(wal_push_one(r, &cfg.wal, path), E_OK); /* the same bytes again: done */
	unsigned char *other = unit_wal_segment(1, 3, MIB, SYSID, 99);
	char *rel = xasprintf("pgdata/pg_wal/%s", name);
	write_file(rel, other, MIB);
	assert_int_equal(wal_push_one(r, &cfg.wal, path), E_EXISTS);
	err_clear();
	free(other);
	other = unit_wal_segment(1, 3, MIB, SYSID, 3);
	write_file(rel, other, MIB);
	fetch_equal(r, &cfg.wal, name, path); /* still the first */

	/* not a segment: a header of another segment, a short file, no header */
	free(other);
	other = unit_wal_segment(1, 4, MIB, SYSID, 3);
	write_file(rel, other, MIB);
	assert_int_equal(wal_push_one(r, &cfg.wal, path), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "not a WAL segment: its page address 0/400000 is not its name's"));
	err_clear();
	write_file(rel, other, MIB / 2);
	assert_int_equal(wal_push_one(r, &cfg.wal, path), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "is 524288 bytes, not a 1048576-byte segment"));
	err_clear();
	memset(other, 0, 64);
	write_file(rel, other, MIB);
	assert_int_equal(wal_push_one(r, &cfg.wal, path), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "does not start with a WAL page header"));
	err_clear();

	/* a history file is one for its timeline, and reads back as its entries */
	const char *hist = "1\t0/3000000\tno recovery target specified\n";
	write_file("pgdata/pg_wal/00000002.history", hist, strlen(hist));
	char *hpath = xasprintf("%s/pgdata/pg_wal/00000002.history", unit_dir);
	assert_int_equal(wal_push_one(r, &cfg.wal, hpath), E_OK);
	pg_history_entry *e;
	size_t n;
	assert_int_equal(wal_history_load(r, 2, NULL, &e, &n), E_OK);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].parent, 1);
	assert_true(e[0].switch_lsn == 3 * UINT64_C(0x1000000));
	free(e);
	assert_int_equal(wal_history_load(r, 3, NULL, &e, &n), E_NOTFOUND);
	free(e); /* the caller's, whatever the outcome */
	err_clear();
	write_file("pgdata/pg_wal/00000003.history", "garbage\n", 8);
	free(hpath);
	hpath = xasprintf("%s/pgdata/pg_wal/00000003.history", unit_dir);
	assert_int_equal(wal_push_one(r, &cfg.wal, hpath), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "not a timeline history file for timeline 3"));
	err_clear();

	/* a segment that is not archived: WAL-G's words, and nothing written */
	char *dest = xasprintf("%s/missing", unit_dir);
	bool prefetch;
	assert_int_equal(wal_fetch(r, &cfg.wal, "000000010000000000000009", dest, &prefetch), E_NOTFOUND);
	assert_string_equal(err_msg(), "Archive '000000010000000000000009' does not exist.");
	err_clear();
	assert_int_equal(access(dest, F_OK), -1);

	free(dest);
	free(hpath);
	free(other);
	free(rel);
	free(name);
	free(path);
	unit_cluster_close(&cfg, r);
}

/*
 * archive_command's call uploads other .ready files beside its own (those it finds before its
 * own upload ends: how many depends on timing) and marks each, so that PostgreSQL's call for
 * it returns at once; a marker is used once.
 */
static void test_push_background(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	config_pair more[] = { { "WALG_UPLOAD_CONCURRENCY", "4" } };
	unit_cluster_open(&cfg, &r, more, 1);
	char *paths[5], *names[5];
	for (int i = 0; i < 5; i++) {
		paths[i] = pg_wal_segment(3 + (uint64_t)i, "ready");
		names[i] = seg_name(3 + (uint64_t)i);
	}
	assert_int_equal(wal_push(r, &cfg.wal, paths[0], NULL, NULL), E_OK);
	/* what went in the background is stored and marked, nothing else is marked */
	for (int i = 1; i < 5; i++) {
		char *key = stored(r, names[i]);
		assert_int_equal(key != NULL, wal_marked(&cfg.wal, names[i]));
		free(key);
	}
	/* PostgreSQL's calls for the rest, in order: each stored, every marker used */
	for (int i = 1; i < 4; i++) {
		assert_int_equal(wal_push(r, &cfg.wal, paths[i], NULL, NULL), E_OK);
		assert_false(wal_marked(&cfg.wal, names[i]));
		char *key = stored(r, names[i]);
		assert_non_null(key);
		free(key);
	}
	/* a marker answers alone: the segment it vouches for is not uploaded again */
	char *key7 = stored(r, names[4]);
	if (key7 != NULL)
		assert_int_equal(storage_remove(r->st, key7), E_OK);
	free(key7);
	char *markers = wal_marker_dir(&cfg.wal);
	assert_int_equal(mkdir_p(markers, 0700), E_OK);
	char *mark = xasprintf("%s/%s", markers, names[4]);
	FILE *f = fopen(mark, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(wal_push(r, &cfg.wal, paths[4], NULL, NULL), E_OK);
	assert_false(wal_marked(&cfg.wal, names[4]));
	assert_null(stored(r, names[4]));

	/* PostgreSQL's view: archived once .done, or once neither the file nor .ready is left */
	assert_false(wal_archived(unit_pgdata, names[1]));
	char *ready = path_in("pgdata/pg_wal/archive_status", names[1], ".ready");
	char *done = path_in("pgdata/pg_wal/archive_status", names[1], ".done");
	assert_int_equal(rename(ready, done), 0);
	assert_true(wal_archived(unit_pgdata, names[1]));

	/* backup-push's own WAL: pushed when .ready, left alone when done */
	bool pushed;
	assert_int_equal(wal_push_if_ready(r, &cfg.wal, unit_pgdata, names[1], &pushed), E_OK);
	assert_false(pushed);
	assert_int_equal(wal_push_if_ready(r, &cfg.wal, unit_pgdata, names[4], &pushed), E_OK);
	assert_true(pushed);
	key7 = stored(r, names[4]);
	assert_non_null(key7);

	free(key7);
	free(mark);
	free(markers);
	free(ready);
	free(done);
	for (int i = 0; i < 5; i++) {
		free(paths[i]);
		free(names[i]);
	}
	unit_cluster_close(&cfg, r);
}

/* What a function prints to a stream, as a string to free. */
typedef err_code (*print_fn)(repo *r, const wal_settings *cfg, const void *arg, FILE *out);
static char *printed(print_fn fn, repo *r, const wal_settings *cfg, const void *arg)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	assert_non_null(f);
	assert_int_equal(fn(r, cfg, arg, f), E_OK);
	fclose(f);
	return out;
}

static err_code show_table(repo *r, const wal_settings *cfg, const void *arg, FILE *out)
{
	return wal_show(r, cfg, arg != NULL, true, out);
}

static bool verify_failed;
static err_code verify(repo *r, const wal_settings *cfg, const void *arg, FILE *out)
{
	return wal_verify(r, cfg, arg, &verify_failed, out);
}

/* wal-show's ranges and gaps, and wal-verify's two checks on an archive with a gap. */
static void test_show_verify(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	/* a segment 3 behind the newest is lost, not on its way */
	config_pair more[] = { { "WALG_UPLOAD_CONCURRENCY", "1" },
						   { "WALG_INTEGRITY_MAX_DELAYED_WALS", "0" } };
	unit_cluster_open(&cfg, &r, more, 2);
	for (uint64_t segno = 3; segno <= 8; segno++) {
		if (segno == 6)
			continue;
		char *path = pg_wal_segment(segno, NULL);
		assert_int_equal(wal_push_one(r, &cfg.wal, path), E_OK);
		free(path);
	}
	char *out = printed(show_table, r, &cfg.wal, NULL);
	assert_non_null(strstr(out, "|   1 |          0 |             0/0 | 000000010000000000000003 | "
								"000000010000000000000008 |             6 |              5 | "
								"LOST_SEGMENTS |"));
	free(out);
	out = printed(show_table, r, &cfg.wal, "json");
	json_t *doc = json_loads(out, 0, NULL);
	assert_non_null(doc);
	json_t *tl = json_array_get(doc, 0);
	assert_int_equal(json_integer_value(json_object_get(tl, "segments_count")), 5);
	json_t *missing = json_object_get(tl, "missing_segments");
	assert_int_equal(json_array_size(missing), 1);
	assert_string_equal(json_string_value(json_array_get(missing, 0)), "000000010000000000000006");
	json_decref(doc);
	free(out);

	/* the cluster is writing segment 9: 6 is lost, 9 on its way */
	verify_options o = { .integrity = true, .timeline = true, .at_timeline = 1,
						 .at_lsn = 9 * MIB + 100 };
	verify_failed = false;
	out = printed(verify, r, &cfg.wal, &o);
	assert_true(verify_failed);
	assert_non_null(strstr(out, "[wal-verify] integrity check status: FAILURE\n"));
	assert_non_null(strstr(out, "| 000000010000000000000006 | 000000010000000000000006 |"
								"              1 | MISSING_LOST"));
	assert_non_null(strstr(out, "[wal-verify] timeline check status: OK\n"));
	free(out);
	o.json = true;
	out = printed(verify, r, &cfg.wal, &o);
	doc = json_loads(out, 0, NULL);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "integrity"),
														  "status")),
						"FAILURE");
	json_decref(doc);
	free(out);

	/* once 6 is there, only what is on its way is missing */
	char *path = pg_wal_segment(6, NULL);
	assert_int_equal(wal_push_one(r, &cfg.wal, path), E_OK);
	free(path);
	o.json = false;
	out = printed(verify, r, &cfg.wal, &o);
	assert_false(verify_failed);
	assert_non_null(strstr(out, "| 000000010000000000000003 | 000000010000000000000008 |"
								"              6 | FOUND"));
	free(out);
	unit_cluster_close(&cfg, r);
}

/*
 * wal-fetch's prefetch: the segments after the one served come down into .wal-g/prefetch
 * beside it, and the next wal-fetch takes its segment from there by rename; a damaged file
 * there is left out.
 */
static void test_prefetch(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	config_pair more[] = { { "WALG_DOWNLOAD_CONCURRENCY", "3" } };
	unit_cluster_open(&cfg, &r, more, 1);
	char *paths[5];
	for (int i = 0; i < 5; i++) {
		paths[i] = pg_wal_segment(3 + (uint64_t)i, NULL);
		assert_int_equal(wal_push_one(r, &cfg.wal, paths[i]), E_OK);
	}
	char *name3 = seg_name(3), *name4 = seg_name(4), *name5 = seg_name(5);
	char *dest = xasprintf("%s/pgdata/pg_wal/RECOVERYXLOG", unit_dir);
	bool prefetch;
	assert_int_equal(wal_fetch(r, &cfg.wal, name3, dest, &prefetch), E_OK);
	assert_true(prefetch);
	wal_prefetch(r, &cfg.wal, name3, dest);
	for (uint64_t segno = 4; segno <= 6; segno++) {
		char *name = seg_name(segno);
		assert_true(exists("pgdata/pg_wal/.wal-g/prefetch", name, ""));
		free(name);
	}
	bool taken;
	assert_int_equal(prefetch_take(&cfg.wal, name4, dest, &taken), E_OK);
	assert_true(taken);
	assert_false(exists("pgdata/pg_wal/.wal-g/prefetch", name4, ""));
	size_t a, b;
	unsigned char *got = read_all(dest, &a), *want = read_all(paths[1], &b);
	assert_int_equal(a, b);
	assert_memory_equal(got, want, a);
	free(got);
	free(want);
	/* cut short on disk: not handed over, and gone */
	char *cut = path_in("pgdata/pg_wal/.wal-g/prefetch", name5, "");
	assert_int_equal(truncate(cut, 4096), 0);
	assert_int_equal(prefetch_take(&cfg.wal, name5, dest, &taken), E_OK);
	assert_false(taken);
	assert_int_equal(access(cut, F_OK), -1);
	/* a history file is never prefetched */
	assert_false(wal_prefetch_wanted(r, "00000002.history"));
	free(cut);
	free(dest);
	free(name3);
	free(name4);
	free(name5);
	for (int i = 0; i < 5; i++)
		free(paths[i]);
	unit_cluster_close(&cfg, r);
}

/* Pushes a file of len bytes written as pg_wal/name. */
static void push_bytes(repo *r, const wal_settings *cfg, const char *name, const void *buf, size_t len)
{
	char *rel = xasprintf("pgdata/pg_wal/%s", name);
	write_file(rel, buf, len);
	char *path = xasprintf("%s/%s", unit_dir, rel);
	assert_int_equal(wal_push_one(r, cfg, path), E_OK);
	free(path);
	free(rel);
}

/*
 * A history file is handed to recovery only once a segment of its timeline is archived: a
 * lone one would lead PostgreSQL onto a timeline with no WAL.
 */
static void test_fetch_history(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	unit_cluster_open(&cfg, &r, NULL, 0);
	const char *hist = "1\t0/3000000\tno recovery target specified\n";
	push_bytes(r, &cfg.wal, "00000002.history", hist, strlen(hist));
	char *dest = xasprintf("%s/pgdata/pg_wal/RECOVERYHISTORY", unit_dir);
	bool prefetch;
	assert_int_equal(wal_fetch(r, &cfg.wal, "00000002.history", dest, &prefetch), E_NOTFOUND);
	err_clear();
	assert_int_equal(access(dest, F_OK), -1);
	/* the segment where timeline 2 begins (0/3000000: segment 0x30 of 1 MiB) */
	unsigned char *seg = unit_wal_segment(2, 0x30, MIB, SYSID, 1);
	push_bytes(r, &cfg.wal, "000000020000000000000030", seg, MIB);
	free(seg);
	assert_int_equal(wal_fetch(r, &cfg.wal, "00000002.history", dest, &prefetch), E_OK);
	assert_false(prefetch);
	size_t len;
	unsigned char *got = read_all(dest, &len);
	assert_int_equal(len, strlen(hist));
	assert_memory_equal(got, hist, len);
	free(got);
	free(dest);
	unit_cluster_close(&cfg, r);
}

/* WAL-G's metadata beside the WAL: one object a file, or one a group of 16 with BULK. */
static void test_wal_metadata(void **state)
{
	(void)state;
	const char *const levels[] = { "INDIVIDUAL", "BULK" };
	for (int l = 0; l < 2; l++) {
		config cfg;
		repo *r = NULL;
		config_pair more[] = { { "WALG_UPLOAD_WAL_METADATA", levels[l] } };
		unit_cluster_open(&cfg, &r, more, 1);
		for (uint64_t segno = 0xE; segno <= 0xF; segno++) {
			char *path = pg_wal_segment(segno, NULL);
			assert_int_equal(wal_push(r, &cfg.wal, path, NULL, NULL), E_OK);
			free(path);
		}
		const char *key = l == 0 ? "wal_005/00000001000000000000000E.json"
								 : "wal_005/00000001000000000000000.json";
		json_t *doc = NULL;
		assert_int_equal(catalog_read_json(r, key, 1 << 20, &doc), E_OK);
		assert_non_null(json_object_get(doc, "00000001000000000000000E"));
		assert_int_equal(json_object_size(doc), l == 0 ? 1 : 2);
		json_decref(doc);
		unit_cluster_close(&cfg, r);
		assert_int_equal(unit_rmtree(unit_dir), 0);
		assert_int_equal(mkdir_p(unit_dir, 0700), E_OK);
	}
}

/* Every problem reported, a line each (from any of the check's threads). */
typedef struct problems {
	pthread_mutex_t mu;
	char all[4096];
} problems;

static void on_problem(void *arg, const char *object, const char *what)
{
	problems *p = arg;
	pthread_mutex_lock(&p->mu);
	size_t at = strlen(p->all);
	snprintf(p->all + at, sizeof(p->all) - at, "%s: %s\n", object, what);
	pthread_mutex_unlock(&p->mu);
}

/* backup-verify's WAL check names each segment that is missing, damaged or not of the cluster. */
static void test_check_range(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	unit_cluster_open(&cfg, &r, NULL, 0);
	/* 3 archived (its pages past the first are not WAL), 4 missing */
	unsigned char *seg = unit_wal_segment(1, 3, MIB, SYSID, 3);
	push_bytes(r, &cfg.wal, "000000010000000000000003", seg, MIB);
	free(seg);
	problems p = { .mu = PTHREAD_MUTEX_INITIALIZER };
	uint64_t checked = 0;
	assert_int_equal(wal_check_range(r, MIB, 1, 3, 4, SYSID, 2, on_problem, &p, &checked), E_OK);
	assert_non_null(strstr(p.all, "wal_005/000000010000000000000004: WAL segment missing\n"));
	assert_non_null(strstr(p.all, "000000010000000000000003.lz4: object wal_005/"));
	assert_non_null(strstr(p.all, ": page 1: bad page magic\n"));
	assert_int_equal(checked, 1);
	/* another cluster's system identifier */
	p.all[0] = '\0';
	assert_int_equal(wal_check_range(r, MIB, 1, 3, 3, SYSID + 1, 1, on_problem, &p, &checked),
					 E_OK);
	assert_non_null(strstr(p.all, "page 0: long header: another system identifier\n"));
	uint64_t newest;
	bool found;
	assert_int_equal(wal_newest_segment(r, MIB, 1, &newest, &found), E_OK);
	assert_true(found);
	assert_int_equal(newest, 3);
	uint32_t tli;
	assert_int_equal(wal_newest_upto(r, MIB, 2, &tli, &newest, &found), E_OK);
	assert_true(found);
	assert_int_equal(tli, 1);
	assert_int_equal(wal_newest_segment(r, MIB, 2, &newest, &found), E_OK);
	assert_false(found);
	unit_cluster_close(&cfg, r);
}

/* ------------------------------------------------------------------------------------------ */
/* wal-receive against a scripted server (test/unit/pqfake.h)                                 */
/* ------------------------------------------------------------------------------------------ */

#define CHUNK (256u << 10)
/* test_pgsql checks the slot's SQL whole */
#define SLOT_SQL "SELECT count(*), max(slot_type), ..."

/* A script built as the test goes, the cells of its rows and the messages it hands out. */
typedef struct script {
	pq_step steps[64];
	size_t n;
	const char *cells[128];
	size_t ncells;
	char *owned[32];
	size_t nowned;
} script;

/* n cells kept in the script (a helper's compound literal ends with the helper). */
static const char *const *keep(script *sc, size_t n, const char *const *cells)
{
	assert_true(sc->ncells + n <= 128);
	const char **at = &sc->cells[sc->ncells];
	memcpy(at, cells, n * sizeof(*cells));
	sc->ncells += n;
	return at;
}

static pq_step value(script *sc, const char *sql, const char *v)
{
	return (pq_step){ .kind = PQ_QUERY, .text = sql, .status = PGRES_TUPLES_OK, .ncols = 1,
					  .nrows = 1, .cells = keep(sc, 1, PQ_CELLS(v)) };
}

static void add(script *sc, pq_step st)
{
	assert_true(sc->n < 64);
	sc->steps[sc->n++] = st;
}

static void add_copy(script *sc, unsigned char *msg, size_t len)
{
	assert_true(sc->nowned < 32);
	sc->owned[sc->nowned++] = (char *)msg;
	add(sc, (pq_step){ .kind = PQ_COPY, .text = (const char *)msg, .copy_len = (int)len });
}

static void put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (56 - 8 * i));
}

/* XLogData messages carrying len bytes of WAL from LSN start, in CHUNK pieces. */
static void add_wal(script *sc, uint64_t start, const unsigned char *wal, size_t len)
{
	for (size_t at = 0; at < len; at += CHUNK) {
		size_t n = len - at < CHUNK ? len - at : CHUNK;
		unsigned char *m = xcalloc(1, 25 + n);
		m[0] = 'w';
		put_be64(m + 1, start + at);
		put_be64(m + 9, start + at + n);
		memcpy(m + 25, wal + at, n);
		add_copy(sc, m, 25 + n);
	}
}

/* The replication session's start: its server facts (PostgreSQL 15, 1 MiB segments). */
static void add_replication(script *sc, const char *tli, const char *xlogpos)
{
	add(sc, (pq_step){ .kind = PQ_CONNECT, .text = "replication=true expand" });
	add(sc, (pq_step){ .kind = PQ_QUERY, .text = "IDENTIFY_SYSTEM", .status = PGRES_TUPLES_OK,
					   .ncols = 4, .nrows = 1,
					   .cells = keep(sc, 4, PQ_CELLS("7714482919781331307", tli, xlogpos, NULL)) });
	add(sc, value(sc, "SHOW data_directory", "/d"));
	add(sc, value(sc, "SHOW wal_segment_size", "1MB"));
	add(sc, value(sc, "SHOW archive_mode", "on"));
	add(sc, value(sc, "SHOW archive_command", ""));
	add(sc, value(sc, "SHOW archive_library", ""));
	add(sc, value(sc, "SHOW data_checksums", "on"));
}

static void add_slot(script *sc, const char *count, const char *lsn, const char *status)
{
	add(sc, (pq_step){ .kind = PQ_CONNECT, .text = "expand" });
	add(sc, (pq_step){ .kind = PQ_QUERY, .text = SLOT_SQL, .param = "walc",
					   .status = PGRES_TUPLES_OK, .ncols = 4, .nrows = 1,
					   .cells = keep(sc, 4, PQ_CELLS(count, count[0] == '0' ? NULL : "physical", lsn,
												  status)) });
}

static void script_free(script *sc)
{
	for (size_t i = 0; i < sc->nowned; i++)
		free(sc->owned[i]);
}

/*
 * A new slot on timeline 1: segment 0x30 stored once complete; the timeline ends inside 0x31,
 * stored as .partial with timeline 2's history; timeline 2's 0x31 stored; the server's shutdown
 * ends it, with the slot told only what is stored. Then the slot invalidated: the gap from the
 * newest stored segment to the server's position is recorded lost, and named.
 */
static void test_receive(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	config_pair more[] = { { "WALG_SLOTNAME", "walc" } };
	unit_cluster_open(&cfg, &r, more, 1);
	unsigned char *seg30 = unit_wal_segment(1, 0x30, MIB, SYSID, 30);
	unsigned char *seg31 = unit_wal_segment(1, 0x31, MIB, SYSID, 31);
	unsigned char *seg31b = unit_wal_segment(2, 0x31, MIB, SYSID, 32);
	const char *hist2 = "1\t0/3119000\tno recovery target specified\n";
	script sc = { .n = 0 };
	add_slot(&sc, "0", NULL, NULL);
	add_replication(&sc, "1", "0/3000100");
	add(&sc, (pq_step){ .kind = PQ_QUERY, .text = "CREATE_REPLICATION_SLOT walc PHYSICAL (RESERVE_WAL)",
						.status = PGRES_COMMAND_OK });
	add(&sc, (pq_step){ .kind = PQ_QUERY, .text = "START_REPLICATION SLOT walc PHYSICAL 0/3000000 TIMELINE 1",
						.status = PGRES_COPY_BOTH });
	add_wal(&sc, 0x3000000, seg30, MIB);
	add_wal(&sc, 0x3100000, seg31, 0x19000);
	add(&sc, (pq_step){ .kind = PQ_COPY, .copy_len = -1 });
	add(&sc, (pq_step){ .kind = PQ_RESULT, .status = PGRES_TUPLES_OK, .ncols = 2, .nrows = 1,
						.cells = PQ_CELLS("2", "0/3119000") });
	add(&sc, (pq_step){ .kind = PQ_RESULT, .status = PGRES_COMMAND_OK });
	add(&sc, (pq_step){ .kind = PQ_QUERY, .text = "TIMELINE_HISTORY 2", .status = PGRES_TUPLES_OK,
						.ncols = 2, .nrows = 1, .cells = PQ_CELLS("00000002.history", hist2) });
	add(&sc, (pq_step){ .kind = PQ_QUERY, .text = "START_REPLICATION SLOT walc PHYSICAL 0/3100000 TIMELINE 2",
						.status = PGRES_COPY_BOTH });
	add_wal(&sc, 0x3100000, seg31b, MIB);
	add(&sc, (pq_step){ .kind = PQ_COPY, .copy_len = -1 });
	add(&sc, (pq_step){ .kind = PQ_RESULT, .status = PGRES_COMMAND_OK });
	pq_script(sc.steps, sc.n, 150000, "15.0");
	assert_int_equal(wal_receive(r, &cfg.wal, NULL, NULL), E_IO);
	assert_string_equal(err_msg(), "wal-receive: the server ended replication (shutting down?); "
								   "the slot keeps the WAL from 0/3200000");
	err_clear();
	/* the slot may release only what is stored: the end of timeline 2's 0x31 */
	int len;
	const char *status = pq_last_copy(&len);
	assert_int_equal(len, 34);
	unsigned char want[8];
	put_be64(want, 0x3200000);
	assert_memory_equal(status + 1, want, 8);
	assert_memory_equal(status + 9, want, 8);
	pq_done();

	char *key = stored(r, "000000010000000000000030");
	assert_non_null(key);
	free(key);
	assert_non_null(key = stored(r, "000000010000000000000031.partial"));
	free(key);
	assert_non_null(key = stored(r, "00000002.history"));
	free(key);
	assert_non_null(key = stored(r, "000000020000000000000031"));
	free(key);
	char *dir = xasprintf("%s/got", unit_dir);
	assert_int_equal(mkdir_p(dir, 0700), E_OK);
	char *dest = xasprintf("%s/000000020000000000000031", dir);
	bool prefetch;
	assert_int_equal(wal_fetch(r, &cfg.wal, "000000020000000000000031", dest, &prefetch), E_OK);
	size_t n;
	unsigned char *got = read_all(dest, &n);
	assert_int_equal(n, MIB);
	assert_memory_equal(got, seg31b, MIB);
	free(got);

	/* the slot invalidated while walc was away: 0x32 to 0x34 recorded lost */
	script lost = { .n = 0 };
	add_slot(&lost, "1", NULL, "lost");
	add_replication(&lost, "2", "0/3500000");
	pq_script(lost.steps, lost.n, 150000, "15.0");
	assert_int_equal(wal_receive(r, &cfg.wal, NULL, NULL), E_NOTFOUND);
	assert_non_null(strstr(err_msg(), "wal-receive: replication slot \"walc\" was invalidated"));
	assert_non_null(strstr(err_msg(), "the archive misses the WAL from 000000020000000000000032 "
									  "to 000000020000000000000034 at most"));
	err_clear();
	pq_done();
	wal_lost gaps;
	assert_int_equal(wal_lost_read(r, MIB, &gaps), E_OK);
	assert_int_equal(gaps.n, 1);
	assert_int_equal(gaps.gaps[0].tli, 2);
	assert_int_equal(gaps.gaps[0].first, 0x32);
	assert_int_equal(gaps.gaps[0].last, 0x34);
	wal_lost_free(&gaps);

	/* a slot name that could not go into a replication command unquoted */
	config_pair bad[] = { { "WALG_SLOTNAME", "Walc;" } };
	unit_cluster_close(&cfg, r);
	unit_cluster_open(&cfg, &r, bad, 1);
	assert_int_equal(wal_receive(r, &cfg.wal, NULL, NULL), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALG_SLOTNAME: expected 1 to 63 lower-case letters"));
	err_clear();

	script_free(&sc);
	script_free(&lost);
	free(dest);
	free(dir);
	free(seg30);
	free(seg31);
	free(seg31b);
	unit_cluster_close(&cfg, r);
}

int main(void)
{
	log_setup(LOG_ERROR, false, "test");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick),
		cmocka_unit_test_setup_teardown(test_watch_drops, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_watch_unbounded, unit_dir_setup,
										unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_push_fetch, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_push_checks, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_push_background, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_show_verify, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_prefetch, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_fetch_history, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_wal_metadata, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_check_range, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_receive, unit_dir_setup, unit_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
