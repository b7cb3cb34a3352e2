/*
 * wal: the bound on the WAL waiting for archiving (WALG_WAL_BACKLOG_MAX) on a pg_wal made by
 * hand: what is dropped, the journal of drops, and the gaps recorded in a file repository.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "internal/wal/wal_impl.h"

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
	char *repo_dir = xasprintf("%s/repo", unit_dir), *pgdata = xasprintf("%s/pgdata", unit_dir);
	char *status = xasprintf("%s/pgdata/pg_wal/archive_status", unit_dir);
	assert_int_equal(mkdir_p(repo_dir, 0700), E_OK);
	assert_int_equal(mkdir_p(status, 0700), E_OK);
	for (size_t i = 0; i < 6; i++) {
		char *seg = xasprintf("pgdata/pg_wal/%s", SEGS[i]);
		char *ready = xasprintf("pgdata/pg_wal/archive_status/%s.ready", SEGS[i]);
		make_file(seg, MIB);
		make_file(ready, 0);
		free(seg);
		free(ready);
	}
	config_pair pairs[] = { { "WALG_FILE_PREFIX", repo_dir },
							{ "PGDATA", pgdata },
							{ "WALG_PG_WAL_SIZE", "1" },
							{ "WALG_UPLOAD_CONCURRENCY", "2" },
							{ "WALG_WAL_BACKLOG_MAX", limit } };
	config_sources src = { NULL, 0, pairs, limit ? 5 : 4, "test" };
	assert_int_equal(config_load_from(cfg, true, &src), E_OK);
	assert_int_equal(repo_open(cfg, r), E_OK);
	free(repo_dir);
	free(pgdata);
	free(status);
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
	assert_int_equal(wal_backlog_read(&cfg, wal_dir, &b), E_OK);
	assert_int_equal(b.files, 6);
	assert_int_equal(b.bytes, 6 * MIB);
	assert_int_equal(b.limit, 2 * MIB);
	assert_int_equal(b.dropped, 0);

	reports = 0;
	bool self = false;
	wal_watch *w = wal_watch_begin(r, &cfg, wal_dir, SEGS[0], on_report, NULL, &self);
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
	w = wal_watch_begin(r, &cfg, wal_dir, "000000010000000000000009", NULL, NULL, &self);
	assert_false(self); /* 7 is older */
	wal_watch_end(w);
	assert_true(exists("pgdata/pg_wal/archive_status", SEGS[4], ".done"));
	assert_int_equal(wal_lost_read_local(r, wal_dir, MIB, &lost), E_OK);
	assert_int_equal(lost.n, 3); /* the repository's one, the journal's two */
	assert_non_null(wal_lost_at(&lost, 1, 7));
	wal_lost_free(&lost);
	assert_int_equal(wal_backlog_read(&cfg, wal_dir, &b), E_OK);
	assert_int_equal(b.dropped, 5);
	assert_int_equal(b.files, 2); /* 8 and 9 */

	free(state_dir);
	free(wal_dir);
	repo_close(r);
	config_free(&cfg);
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
		wal_watch *w = wal_watch_begin(r, &cfg, wal_dir, SEGS[0], on_report, NULL, &self);
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
	assert_null(wal_watch_begin(r, &cfg, unit_dir, SEGS[0], NULL, NULL, &none));
	free(wal_dir);
	repo_close(r);
	config_free(&cfg);
}

int main(void)
{
	log_setup(LOG_ERROR, false, "test");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pick),
		cmocka_unit_test_setup_teardown(test_watch_drops, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_watch_unbounded, unit_dir_setup,
										unit_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
