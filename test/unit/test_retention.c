/*
 * Retention planning on plain data: backups, claims and listings in, a plan out, for every
 * delete mode, permanence, delta chains, timelines and running pushes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal/backup/manage/retention_impl.h"
#include "internal/pg/pg.h"

#define SEG (UINT64_C(16) << 20)
#define NOW 1800000000 /* 2027-01-15 */
#define HOUR 3600

static retain_set st;
static retain_listing lst;
static retain_plan plan;

static int setup(void **state)
{
	(void)state;
	memset(&st, 0, sizeof(st));
	memset(&lst, 0, sizeof(lst));
	memset(&plan, 0, sizeof(plan));
	st.segsize = SEG;
	st.b = xcalloc(400, sizeof(*st.b));
	lst.now = NOW;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	retain_set_free(&st);
	repo_objs_free(&lst.backups);
	repo_objs_free(&lst.wal);
	repo_objs_free(&lst.temporaries);
	repo_objs_free(&plan.del);
	return 0;
}

/* A backup starting in segment seg of timeline tli at time sec, ending one segment later. */
static retain_backup *backup(uint32_t tli, uint64_t seg, time_t sec)
{
	retain_backup *b = &st.b[st.n++];
	char wal[WAL_NAME_LEN + 1];
	wal_name_format(wal, tli, seg, SEG);
	b->name = xasprintf("base_%s", wal);
	b->sec = sec;
	b->finish_sec = sec + 60;
	b->pick_sec = sec; /* times given to delete compare with start times here */
	assert_true(retain_position(b->name, SEG, &b->tli, &b->seg));
	/* the order's key, as the name gives it (for segments below 256) and the sentinel's time */
	b->ref = (backup_ref){ .tli = tli, .seg = seg, .mtime = sec + 60 };
	b->s.lsn = seg * SEG + 40;
	b->s.finish_lsn = (seg + 1) * SEG + 100;
	retain_set_range(b, SEG);
	/* and its objects in the listing */
	char *k = xasprintf(REPO_BACKUP_DIR "%s" SENTINEL_SUFFIX, b->name);
	repo_objs_add(&lst.backups, k, 500, sec + 60, 0);
	free(k);
	k = xasprintf(REPO_BACKUP_DIR "%s/tar_partitions/part_1.tar.lz4", b->name);
	repo_objs_add(&lst.backups, k, 1000, sec + 30, 0);
	free(k);
	return b;
}

static retain_backup *delta(uint32_t tli, uint64_t seg, time_t sec, const retain_backup *from)
{
	char *from_name = xstrdup(from->name);
	char *full = xstrdup(from->s.is_delta ? from->s.delta_full_name : from->name);
	retain_backup *b = backup(tli, seg, sec);
	b->s.is_delta = true;
	b->s.delta_from = from_name;
	b->s.delta_full_name = full;
	return b;
}

/* WAL segments first..last of timeline tli, and a timeline history. */
static void wal(uint32_t tli, uint64_t first, uint64_t last)
{
	for (uint64_t s = first; s <= last; s++) {
		char name[WAL_NAME_LEN + 1];
		wal_name_format(name, tli, s, SEG);
		char *k = xasprintf(REPO_WAL_DIR "%s.lz4", name);
		repo_objs_add(&lst.wal, k, 100, NOW - 10 * HOUR, 0);
		free(k);
	}
	char *h = xasprintf(REPO_WAL_DIR "%08X.history.lz4", tli);
	repo_objs_add(&lst.wal, h, 10, NOW - 10 * HOUR, 0);
	free(h);
}

static void running_claim(const char *name, uint32_t tli, uint64_t seg, const char *delta_from)
{
	st.running.items = xrealloc(st.running.items, (st.running.len + 1) * sizeof(claim_info));
	claim_info *c = &st.running.items[st.running.len++];
	memset(c, 0, sizeof(*c));
	c->state = CLAIM_RUNNING;
	c->name = xstrdup(name);
	c->hostname = xstrdup("db-0");
	c->pid = 42;
	c->timeline = tli;
	c->start_lsn = seg * SEG;
	c->delta_from = delta_from ? xstrdup(delta_from) : NULL;
}

static bool planned(const char *key)
{
	for (size_t i = 0; i < plan.del.len; i++)
		if (strcmp(plan.del.items[i].key, key) == 0)
			return true;
	return false;
}

static bool planned_backup(const char *name, const char *rest)
{
	char *key = xasprintf(REPO_BACKUP_DIR "%s%s", name, rest);
	bool found = planned(key);
	free(key);
	return found;
}

static bool wal_planned(uint32_t tli, uint64_t seg)
{
	char name[WAL_NAME_LEN + 1];
	wal_name_format(name, tli, seg, SEG);
	char *key = xasprintf(REPO_WAL_DIR "%s.lz4", name);
	bool found = planned(key);
	free(key);
	return found;
}

static bool sentinel_planned(const retain_backup *b)
{
	return planned_backup(b->name, SENTINEL_SUFFIX);
}

static bool part_planned(const retain_backup *b)
{
	return planned_backup(b->name, "/tar_partitions/part_1.tar.lz4");
}

static void run(const delete_options *o, err_code want)
{
	retain_scope sc;
	retain_sort(&st);
	err_code rc = retain_select(&st, o, NOW, &sc);
	assert_int_equal(rc, want);
	if (rc == E_OK && sc.act) {
		repo_objs_free(&plan.del); /* an earlier run's */
		retain_plan_objects(&st, &sc, &lst, &plan);
	}
}

/* st.b is sorted by run(): find a backup again by its start segment. */
static retain_backup *at(uint64_t seg)
{
	for (size_t i = 0; i < st.n; i++)
		if (st.b[i].seg == seg)
			return &st.b[i];
	fail_msg("no backup at segment %llu", (unsigned long long)seg);
	return NULL;
}

static void test_retain_fulls(void **state)
{
	(void)state;
	backup(1, 10, NOW - 4 * HOUR);
	backup(1, 20, NOW - 3 * HOUR);
	backup(1, 30, NOW - 2 * HOUR);
	backup(1, 40, NOW - 1 * HOUR);
	wal(1, 5, 45);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 2 }, E_OK);
	assert_true(sentinel_planned(at(10)) && part_planned(at(10)));
	assert_true(sentinel_planned(at(20)) && part_planned(at(20)));
	assert_false(sentinel_planned(at(30)) || part_planned(at(30)));
	assert_false(sentinel_planned(at(40)));
	/* WAL before the oldest kept backup's start goes; from its start on, it stays */
	for (uint64_t s = 5; s < 30; s++)
		assert_true(wal_planned(1, s));
	for (uint64_t s = 30; s <= 45; s++)
		assert_false(wal_planned(1, s));
	assert_false(planned(REPO_WAL_DIR "00000001.history.lz4"));
	/* every sentinel of the plan comes before any other object of a backup */
	bool parts = false;
	for (size_t i = 0; i < plan.del.len; i++) {
		const char *k = plan.del.items[i].key;
		if (!str_has_prefix(k, REPO_BACKUP_DIR))
			continue;
		if (str_has_suffix(k, SENTINEL_SUFFIX))
			assert_false(parts);
		else
			parts = true;
	}
	assert_int_equal(plan.bytes, 2 * 1500 + 25 * 100);
}

/*
 * Ordered by position, not by the clocks of the hosts that took the backups: the older backup
 * taken on a host 400 days ahead is still the older one (LATEST agrees).
 */
static void test_order_by_position(void **state)
{
	(void)state;
	backup(1, 10, NOW + 400 * 24 * HOUR);
	backup(1, 20, NOW - 2 * HOUR);
	backup(2, 15, NOW - 3 * HOUR); /* a later timeline is newer, whatever its segment */
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 2 }, E_OK);
	assert_true(sentinel_planned(at(10)));
	assert_false(sentinel_planned(at(20)) || sentinel_planned(at(15)));
	assert_string_equal(st.b[st.n - 1].name, "base_00000002000000000000000F");
}

/* Another cluster's backups (a new cluster in the prefix) come first, by time. */
static void test_order_other_cluster(void **state)
{
	(void)state;
	backup(1, 900, NOW - 3 * HOUR)->ref.other_cluster = true; /* the old cluster, high segment */
	backup(1, 10, NOW - 2 * HOUR);
	backup(1, 20, NOW - 1 * HOUR);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 2 }, E_OK);
	assert_true(sentinel_planned(at(900)));
	assert_false(sentinel_planned(at(10)) || sentinel_planned(at(20)));
}

/* A backup whose sentinel cannot be read is neither counted nor deleted, but by everything. */
static void test_skipped_backup(void **state)
{
	(void)state;
	backup(1, 10, NOW - 3 * HOUR);
	backup(1, 20, NOW - 2 * HOUR);
	const char *bad = "base_000000010000000000000005";
	st.skipped = xcalloc(1, sizeof(*st.skipped));
	st.skipped[0] = (retain_skipped){ xstrdup(bad), false };
	st.nskipped = 1;
	repo_objs_add(&lst.backups, REPO_BACKUP_DIR "base_000000010000000000000005" SENTINEL_SUFFIX,
				 10, NOW - 5 * HOUR, 0);
	repo_objs_add(&lst.backups, REPO_BACKUP_DIR "base_000000010000000000000005/metadata.json", 10,
				 NOW - 5 * HOUR, 0);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 1 }, E_OK);
	assert_true(sentinel_planned(at(10)));
	assert_false(planned_backup(bad, SENTINEL_SUFFIX) || planned_backup(bad, "/metadata.json"));
	repo_objs_free(&plan.del);
	memset(&plan, 0, sizeof(plan));
	run(&(delete_options){ .mode = DELETE_GARBAGE }, E_OK);
	assert_false(planned_backup(bad, "/metadata.json"));
	st.skipped[0].permanent = true;
	run(&(delete_options){ .mode = DELETE_EVERYTHING }, E_CONFIG);
	err_clear();
	repo_objs_free(&plan.del);
	memset(&plan, 0, sizeof(plan));
	run(&(delete_options){ .mode = DELETE_EVERYTHING, .force = true }, E_OK);
	assert_true(planned_backup(bad, SENTINEL_SUFFIX) && planned_backup(bad, "/metadata.json"));
}

static void test_retain_and_deltas(void **state)
{
	(void)state;
	retain_backup *f1 = backup(1, 10, NOW - 5 * HOUR);
	delta(1, 12, NOW - 4 * HOUR, f1);
	retain_backup *f2 = backup(1, 20, NOW - 3 * HOUR);
	retain_backup *d2 = delta(1, 22, NOW - 2 * HOUR, f2);
	delta(1, 24, NOW - 1 * HOUR, d2);
	wal(1, 10, 30);

	/* the second newest is a delta: refused, the FIND_FULL hint given */
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 2 }, E_CONFIG);
	assert_non_null(strstr(err_msg(), "is a delta backup"));
	assert_non_null(strstr(err_msg(), "FIND_FULL"));
	err_clear();
	/* FIND_FULL moves the target to its full: the second chain is kept whole */
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 2, .modifier = MOD_FIND_FULL },
		E_OK);
	assert_true(sentinel_planned(at(10)) && sentinel_planned(at(12)));
	assert_false(sentinel_planned(at(20)) || sentinel_planned(at(22)) || sentinel_planned(at(24)));
	assert_true(wal_planned(1, 19));
	assert_false(wal_planned(1, 20));
}

static void test_retain_full_counts_fulls(void **state)
{
	(void)state;
	retain_backup *f1 = backup(1, 10, NOW - 5 * HOUR);
	delta(1, 12, NOW - 4 * HOUR, f1);
	retain_backup *f2 = backup(1, 20, NOW - 3 * HOUR);
	delta(1, 22, NOW - 2 * HOUR, f2);
	backup(1, 30, NOW - 1 * HOUR);
	/* FULL 2: the two newest fulls and every delta on them */
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 2, .modifier = MOD_FULL }, E_OK);
	assert_true(sentinel_planned(at(10)) && sentinel_planned(at(12)));
	assert_false(sentinel_planned(at(20)) || sentinel_planned(at(22)) || sentinel_planned(at(30)));
}

/* A kept delta keeps its whole chain, even below the retention target. */
static void test_kept_delta_keeps_chain(void **state)
{
	(void)state;
	retain_backup *f1 = backup(1, 10, NOW - 4 * HOUR);
	backup(1, 15, NOW - 3 * HOUR);
	retain_backup *f3 = backup(1, 20, NOW - 2 * HOUR);
	(void)f3;
	/* a delta on the oldest full, newer than everything */
	delta(1, 30, NOW - 1 * HOUR, f1);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 2 }, E_OK);
	assert_false(sentinel_planned(at(10))); /* the kept delta's base */
	assert_true(sentinel_planned(at(15)));
	assert_false(sentinel_planned(at(20)) || sentinel_planned(at(30)));
}

static void test_permanent(void **state)
{
	(void)state;
	retain_backup *p = backup(1, 10, NOW - 4 * HOUR);
	p->permanent = true;
	backup(1, 20, NOW - 3 * HOUR);
	backup(1, 30, NOW - 2 * HOUR);
	wal(1, 8, 35);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 1 }, E_OK);
	assert_false(sentinel_planned(at(10)) || part_planned(at(10)));
	assert_true(sentinel_planned(at(20)));
	/* the permanent backup pins only its own WAL: start to finish */
	assert_true(wal_planned(1, 9));
	assert_false(wal_planned(1, 10) || wal_planned(1, 11));
	assert_true(wal_planned(1, 12) && wal_planned(1, 29));
	assert_false(wal_planned(1, 30));
}

/* WAL a kept backup needs: its timeline and later ones, from its start on. */
static void test_timelines(void **state)
{
	(void)state;
	backup(1, 10, NOW - 3 * HOUR);
	backup(2, 20, NOW - 2 * HOUR); /* after a promotion */
	wal(1, 10, 25);
	wal(2, 18, 25);
	wal(3, 22, 25);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 1 }, E_OK);
	assert_true(sentinel_planned(at(10)));
	/* timeline 1 is not followed by a backup on 2; 2 and 3 are from segment 20 on */
	for (uint64_t s = 10; s <= 25; s++)
		assert_true(wal_planned(1, s));
	assert_true(wal_planned(2, 18) && wal_planned(2, 19));
	assert_false(wal_planned(2, 20) || wal_planned(2, 25));
	assert_false(wal_planned(3, 22) || wal_planned(3, 25));
	assert_false(planned(REPO_WAL_DIR "00000002.history.lz4"));
}

static void test_running_push(void **state)
{
	(void)state;
	retain_backup *f1 = backup(1, 10, NOW - 3 * HOUR);
	backup(1, 20, NOW - 2 * HOUR);
	wal(1, 10, 40);
	/* a delta push on the oldest full is writing; its objects have no sentinel yet */
	running_claim("base_000000010000000000000028_D_000000010000000000000010", 1, 40, f1->name);
	repo_objs_add(&lst.backups,
				 REPO_BACKUP_DIR "base_000000010000000000000028_D_000000010000000000000010/"
								 "tar_partitions/part_1.tar.lz4",
				 10, NOW - 10 * HOUR, 0);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 1 }, E_OK);
	assert_false(sentinel_planned(at(10))); /* its base */
	assert_false(planned(REPO_BACKUP_DIR "base_000000010000000000000028_D_000000010000000000000010/"
										 "tar_partitions/part_1.tar.lz4"));
	assert_false(wal_planned(1, 10) || wal_planned(1, 40));

	/* delete everything and delete target of its base are refused, naming the push */
	run(&(delete_options){ .mode = DELETE_EVERYTHING }, E_EXISTS);
	assert_non_null(strstr(err_msg(), "(host db-0, pid 42"));
	err_clear();
	run(&(delete_options){ .mode = DELETE_TARGET, .point = at(10)->name }, E_EXISTS);
	assert_non_null(strstr(err_msg(), "is running, based on it"));
	err_clear();
}

/* A failed push's folder: gone when its claim is dead, or when older than what is kept. */
static void test_orphans(void **state)
{
	(void)state;
	backup(1, 20, NOW - 2 * HOUR);
	backup(1, 30, NOW - 1 * HOUR);
	repo_objs_add(&lst.backups, REPO_BACKUP_DIR "base_000000010000000000000005/part", 1,
				 NOW - 10 * HOUR, 0);
	repo_objs_add(&lst.backups, REPO_BACKUP_DIR "base_000000010000000000000035/part", 1,
				 NOW - 10 * 60, 0);
	repo_objs_add(&lst.backups, REPO_BACKUP_DIR "base_000000010000000000000036/part", 1,
				 NOW - 10 * 60, 0);
	st.stale.items = xcalloc(1, sizeof(claim_info));
	st.stale.len = 1;
	st.stale.items[0].name = xstrdup("base_000000010000000000000036");
	/* temporaries of dead writers: an old one and one still fresh */
	repo_objs_add(&lst.temporaries, REPO_WAL_DIR ".x.walc-tmp.1.1", 1, NOW - 2 * HOUR, 0);
	repo_objs_add(&lst.temporaries, REPO_WAL_DIR ".y.walc-tmp.1.2", 1, NOW - 60, 0);
	run(&(delete_options){ .mode = DELETE_GARBAGE }, E_OK);
	assert_true(planned(REPO_BACKUP_DIR "base_000000010000000000000005/part"));
	assert_false(planned(REPO_BACKUP_DIR "base_000000010000000000000035/part"));
	assert_true(planned(REPO_BACKUP_DIR "base_000000010000000000000036/part"));
	assert_true(planned(REPO_WAL_DIR ".x.walc-tmp.1.1"));
	assert_false(planned(REPO_WAL_DIR ".y.walc-tmp.1.2"));
	assert_false(sentinel_planned(at(20)) || sentinel_planned(at(30)));
}

static void test_garbage_modifiers(void **state)
{
	(void)state;
	backup(1, 20, NOW - 2 * HOUR);
	wal(1, 10, 22);
	repo_objs_add(&lst.backups, REPO_BACKUP_DIR "base_000000010000000000000005/part", 1,
				 NOW - 10 * HOUR, 0);
	run(&(delete_options){ .mode = DELETE_GARBAGE, .modifier = MOD_ARCHIVES }, E_OK);
	assert_true(wal_planned(1, 19));
	assert_false(wal_planned(1, 20));
	assert_false(planned(REPO_BACKUP_DIR "base_000000010000000000000005/part"));
	repo_objs_free(&plan.del);
	run(&(delete_options){ .mode = DELETE_GARBAGE, .modifier = MOD_BACKUPS }, E_OK);
	assert_false(wal_planned(1, 19));
	assert_true(planned(REPO_BACKUP_DIR "base_000000010000000000000005/part"));
}

static void test_garbage_only_permanent(void **state)
{
	(void)state;
	retain_backup *p = backup(1, 20, NOW - 2 * HOUR);
	p->permanent = true;
	wal(1, 10, 25);
	run(&(delete_options){ .mode = DELETE_GARBAGE }, E_OK);
	assert_int_equal(plan.del.len, 0); /* nothing to do without --without-backup-check */
	run(&(delete_options){ .mode = DELETE_GARBAGE, .without_backup_check = true }, E_OK);
	assert_true(wal_planned(1, 19) && wal_planned(1, 22));
	assert_false(wal_planned(1, 20) || wal_planned(1, 21));
	assert_false(sentinel_planned(at(20)));
}

static void test_before(void **state)
{
	(void)state;
	backup(1, 10, NOW - 3 * HOUR);
	retain_backup *f2 = backup(1, 20, NOW - 2 * HOUR);
	delta(1, 22, NOW - 1 * HOUR, f2);
	/* by name */
	run(&(delete_options){ .mode = DELETE_BEFORE, .point = "base_000000010000000000000014" },
		E_OK);
	assert_true(sentinel_planned(at(10)));
	assert_false(sentinel_planned(at(20)));
	repo_objs_free(&plan.del);
	/* by time: the oldest backup at or after it is kept */
	char when[64];
	time_t t = NOW - 2 * HOUR - 1;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	run(&(delete_options){ .mode = DELETE_BEFORE, .point = when }, E_OK);
	assert_true(sentinel_planned(at(10)));
	assert_false(sentinel_planned(at(20)));
	/* a delta as the point needs FIND_FULL */
	run(&(delete_options){ .mode = DELETE_BEFORE, .point = "base_000000010000000000000016" },
		E_CONFIG);
	err_clear();
	repo_objs_free(&plan.del);
	run(&(delete_options){ .mode = DELETE_BEFORE, .modifier = MOD_FIND_FULL,
						   .point = "base_000000010000000000000016" },
		E_OK);
	assert_true(sentinel_planned(at(10)));
	assert_false(sentinel_planned(at(20)));
	/* the future, nonsense, nothing after */
	t = NOW + HOUR;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	run(&(delete_options){ .mode = DELETE_BEFORE, .point = when }, E_CONFIG);
	assert_non_null(strstr(err_msg(), "is in the future"));
	err_clear();
	run(&(delete_options){ .mode = DELETE_BEFORE, .point = "yesterday" }, E_CONFIG);
	assert_non_null(strstr(err_msg(), "neither a backup name nor a time"));
	err_clear();
	t = NOW - 10;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	run(&(delete_options){ .mode = DELETE_BEFORE, .point = when }, E_NOTFOUND);
	err_clear();
}

static void test_retain_after(void **state)
{
	(void)state;
	backup(1, 10, NOW - 4 * HOUR);
	backup(1, 20, NOW - 3 * HOUR);
	backup(1, 30, NOW - 2 * HOUR);
	backup(1, 40, NOW - 1 * HOUR);
	/* retain 1 --after the second: the older of the two targets wins */
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 1,
						   .after = "base_000000010000000000000014" },
		E_OK);
	assert_true(sentinel_planned(at(10)));
	assert_false(sentinel_planned(at(20)) || sentinel_planned(at(30)));
	repo_objs_free(&plan.del);
	/* retain 3 --after the newest: retain's target is older */
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 3,
						   .after = "base_000000010000000000000028" },
		E_OK);
	assert_true(sentinel_planned(at(10)));
	assert_false(sentinel_planned(at(20)));
}

static void test_retain_fewer(void **state)
{
	(void)state;
	backup(1, 10, NOW - 1 * HOUR);
	wal(1, 5, 12);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 3 }, E_OK);
	assert_int_equal(plan.del.len, 0);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 0 }, E_CONFIG);
	err_clear();
}

static void test_everything(void **state)
{
	(void)state;
	retain_backup *p = backup(1, 10, NOW - 2 * HOUR);
	p->permanent = true;
	backup(1, 20, NOW - 1 * HOUR);
	wal(1, 10, 22);
	repo_obj marker = { (char *)(uintptr_t)CATALOG_CLUSTER_MARKER, 50, NOW - HOUR, 0, NULL };
	lst.marker = &marker;
	run(&(delete_options){ .mode = DELETE_EVERYTHING }, E_CONFIG);
	assert_non_null(strstr(err_msg(), "FORCE"));
	err_clear();
	run(&(delete_options){ .mode = DELETE_EVERYTHING, .force = true }, E_OK);
	/* every backup object, every WAL object (histories too) and the cluster marker */
	assert_int_equal(plan.del.len, lst.backups.len + lst.wal.len + 1);
	assert_true(planned(CATALOG_CLUSTER_MARKER));
	assert_true(planned(REPO_WAL_DIR "00000001.history.lz4"));
}

static void test_target(void **state)
{
	(void)state;
	retain_backup *f1 = backup(1, 10, NOW - 4 * HOUR);
	retain_backup *d1 = delta(1, 12, NOW - 3 * HOUR, f1);
	delta(1, 14, NOW - 2 * HOUR, d1);
	backup(1, 20, NOW - 1 * HOUR);
	st.b[3].s.user_data = json_pack("{s:s}", "job", "nightly");
	wal(1, 10, 22);
	/* the target and what is built on it; never WAL */
	run(&(delete_options){ .mode = DELETE_TARGET, .point = d1->name }, E_OK);
	assert_false(sentinel_planned(at(10)));
	assert_true(sentinel_planned(at(12)) && sentinel_planned(at(14)));
	assert_false(sentinel_planned(at(20)));
	assert_false(wal_planned(1, 10));
	repo_objs_free(&plan.del);
	/* FIND_FULL: the whole chain */
	run(&(delete_options){ .mode = DELETE_TARGET, .modifier = MOD_FIND_FULL,
						   .point = "base_00000001000000000000000E" },
		E_OK);
	assert_true(sentinel_planned(at(10)) && sentinel_planned(at(12)) && sentinel_planned(at(14)));
	repo_objs_free(&plan.del);
	/* by user data */
	run(&(delete_options){ .mode = DELETE_TARGET, .user_data = "{\"job\": \"nightly\"}" }, E_OK);
	assert_true(sentinel_planned(at(20)));
	assert_int_equal(plan.del.len, 2);
	run(&(delete_options){ .mode = DELETE_TARGET, .user_data = "{\"job\": \"weekly\"}" },
		E_NOTFOUND);
	err_clear();
	run(&(delete_options){ .mode = DELETE_TARGET, .user_data = "{job" }, E_CONFIG);
	assert_non_null(strstr(err_msg(), "not valid JSON"));
	err_clear();
	run(&(delete_options){ .mode = DELETE_TARGET, .point = "base_000000010000000000000099" },
		E_NOTFOUND);
	err_clear();
	/* a permanent backup among what would go */
	at(14)->permanent = true;
	run(&(delete_options){ .mode = DELETE_TARGET, .point = at(12)->name }, E_CONFIG);
	assert_non_null(strstr(err_msg(), "is permanent"));
	err_clear();
}

/* A backup whose backup-verify passed. */
static void verified(retain_backup *b)
{
	b->verified = true;
	b->verified_at = xstrdup("2027-01-15T00:00:00Z");
}

/*
 * The newest verified backup is kept whatever the count says, with the WAL from it to now;
 * the damaged ones between it and what the count keeps go.
 */
static void test_verified_kept(void **state)
{
	(void)state;
	backup(1, 10, NOW - 7 * HOUR);
	verified(backup(1, 20, NOW - 6 * HOUR)); /* older: not the newest verified */
	verified(backup(1, 30, NOW - 5 * HOUR));
	for (int i = 0; i < 4; i++)
		backup(1, 40 + 10 * (uint64_t)i, NOW - (4 - i) * HOUR);
	wal(1, 5, 75);
	run(&(delete_options){ .mode = DELETE_RETAIN, .count = 2 }, E_OK);
	assert_true(sentinel_planned(at(10)) && sentinel_planned(at(20)));
	assert_false(sentinel_planned(at(30)));
	assert_true(sentinel_planned(at(40)) && sentinel_planned(at(50)));
	assert_false(sentinel_planned(at(60)) || sentinel_planned(at(70)));
	for (uint64_t s = 5; s < 30; s++)
		assert_true(wal_planned(1, s));
	for (uint64_t s = 30; s <= 75; s++) /* from the verified one's start to now */
		assert_false(wal_planned(1, s));
	assert_true(strstr(at(30)->why, "newest verified") != NULL);
}

/* The same in before and garbage; a verified delta keeps its chain. */
static void test_verified_modes(void **state)
{
	(void)state;
	retain_backup *f = backup(1, 10, NOW - 5 * HOUR);
	verified(delta(1, 20, NOW - 4 * HOUR, f));
	backup(1, 30, NOW - 3 * HOUR);
	backup(1, 40, NOW - 2 * HOUR);
	wal(1, 5, 45);
	run(&(delete_options){ .mode = DELETE_BEFORE, .point = at(40)->name }, E_OK);
	assert_false(sentinel_planned(at(10)) || sentinel_planned(at(20)));
	assert_true(sentinel_planned(at(30)));
	for (uint64_t s = 5; s < 10; s++)
		assert_true(wal_planned(1, s));
	for (uint64_t s = 10; s < 12; s++) /* the full's own range: kept as the delta's base */
		assert_false(wal_planned(1, s));
	for (uint64_t s = 20; s <= 45; s++)
		assert_false(wal_planned(1, s));
	/* a permanent verified backup pins the WAL from it to now, not only its own range */
	repo_objs_free(&plan.del);
	memset(&plan, 0, sizeof(plan));
	at(20)->permanent = true;
	run(&(delete_options){ .mode = DELETE_GARBAGE }, E_OK);
	for (uint64_t s = 20; s <= 45; s++)
		assert_false(wal_planned(1, s));
}

/* delete target of the newest verified backup (or of its base) and everything are refused. */
static void test_verified_refusals(void **state)
{
	(void)state;
	retain_backup *f = backup(1, 10, NOW - 3 * HOUR);
	verified(delta(1, 20, NOW - 2 * HOUR, f));
	backup(1, 30, NOW - 1 * HOUR);
	run(&(delete_options){ .mode = DELETE_TARGET, .point = at(20)->name }, E_CONFIG);
	assert_non_null(strstr(err_msg(), "newest backup that passed backup-verify"));
	err_clear();
	run(&(delete_options){ .mode = DELETE_TARGET, .point = at(10)->name }, E_CONFIG);
	assert_non_null(strstr(err_msg(), "built on the target"));
	err_clear();
	run(&(delete_options){ .mode = DELETE_TARGET, .point = at(30)->name }, E_OK);
	assert_true(sentinel_planned(at(30)));
	run(&(delete_options){ .mode = DELETE_EVERYTHING }, E_CONFIG);
	assert_non_null(strstr(err_msg(), "FORCE"));
	err_clear();
	run(&(delete_options){ .mode = DELETE_EVERYTHING, .force = true }, E_OK);
}

static time_t utc(int y, int mo, int d, int h, int mi)
{
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi };
	return timegm(&tm);
}

static bool kept_on(int y, int mo, int d)
{
	time_t day = utc(y, mo, d, 0, 0);
	for (size_t i = 0; i < st.n; i++)
		if (st.b[i].sec >= day && st.b[i].sec < day + 86400)
			return st.b[i].keep;
	fail_msg("no backup on %04d-%02d-%02d", y, mo, d);
	return false;
}

/*
 * A simulated year, 2025-07-01 to 2026-06-30, a backup every day at 02:00 UTC: a full on
 * Sundays, a delta of the day before on the other days. daily 7, weekly 4, monthly 6, yearly
 * 2 keep exactly the newest backup of each period and the chains of the deltas among them.
 */
static void test_gfs_year(void **state)
{
	(void)state;
	setenv("TZ", "UTC", 1);
	tzset();
	retain_backup *prev = NULL;
	time_t first = utc(2025, 7, 1, 2, 0);
	for (int day = 0; day < 365; day++) {
		time_t t = first + (time_t)day * 86400;
		struct tm tm;
		gmtime_r(&t, &tm);
		uint64_t seg = 10 + 3 * (uint64_t)day;
		prev = tm.tm_wday == 0 || prev == NULL ? backup(1, seg, t) : delta(1, seg, t, prev);
	}
	wal(1, 5, 10 + 3 * 365);
	const time_t now = utc(2026, 6, 30, 12, 0);
	retain_scope sc;
	retain_sort(&st);
	delete_options o = { .mode = DELETE_RETAIN, .daily = 7, .weekly = 4, .monthly = 6, .yearly = 2 };
	assert_int_equal(retain_select(&st, &o, now, &sc), E_OK);
	assert_null(sc.window_from);
	/* what each bucket keeps, and the chain of each delta kept (back to its Sunday full) */
	static const int keep[][3] = {
		/* daily 7 (Wed 06-24 is a delta: its chain back to Sun 06-21) */
		{ 2026, 6, 21 }, { 2026, 6, 22 }, { 2026, 6, 23 }, { 2026, 6, 24 }, { 2026, 6, 25 },
		{ 2026, 6, 26 }, { 2026, 6, 27 }, { 2026, 6, 28 }, { 2026, 6, 29 }, { 2026, 6, 30 },
		/* weekly 4: the weeks' last backups are Sundays 06-28, 06-21, 06-14 and Tue 06-30 */
		{ 2026, 6, 14 },
		/* monthly 6: 05-31 (Sun), 04-30 (Thu, from 04-26), 03-31 (Tue, from 03-29),
		   02-28 (Sat, from 02-22), 01-31 (Sat, from 01-25) */
		{ 2026, 5, 31 }, { 2026, 4, 26 }, { 2026, 4, 27 }, { 2026, 4, 28 }, { 2026, 4, 29 },
		{ 2026, 4, 30 }, { 2026, 3, 29 }, { 2026, 3, 30 }, { 2026, 3, 31 }, { 2026, 2, 22 },
		{ 2026, 2, 23 }, { 2026, 2, 24 }, { 2026, 2, 25 }, { 2026, 2, 26 }, { 2026, 2, 27 },
		{ 2026, 2, 28 }, { 2026, 1, 25 }, { 2026, 1, 26 }, { 2026, 1, 27 }, { 2026, 1, 28 },
		{ 2026, 1, 29 }, { 2026, 1, 30 }, { 2026, 1, 31 },
		/* yearly 2: 2026's newest (06-30), 2025's newest (Wed 12-31, from Sun 12-28) */
		{ 2025, 12, 28 }, { 2025, 12, 29 }, { 2025, 12, 30 }, { 2025, 12, 31 },
	};
	size_t nkeep = sizeof(keep) / sizeof(keep[0]), kept = 0;
	for (size_t i = 0; i < nkeep; i++)
		assert_true(kept_on(keep[i][0], keep[i][1], keep[i][2]));
	for (size_t i = 0; i < st.n; i++) {
		kept += st.b[i].keep;
		assert_true(st.b[i].keep != st.b[i].gone);
		/* a kept delta's base is kept: no month keeps a delta whose base went */
		if (st.b[i].keep && st.b[i].s.is_delta)
			assert_true(retain_find(&st, st.b[i].s.delta_from)->keep);
	}
	assert_int_equal(kept, nkeep);
	assert_non_null(strstr(at(10 + 3 * 364)->why, "daily 2026-06-30"));
	assert_non_null(strstr(at(10 + 3 * 364)->why, "weekly 2026-W27"));
	assert_non_null(strstr(at(10 + 3 * 364)->why, "monthly 2026-06"));
	assert_non_null(strstr(at(10 + 3 * 364)->why, "yearly 2026"));
	/* no window: WAL continuous from the oldest kept backup (12-28) on */
	retain_plan_objects(&st, &sc, &lst, &plan);
	uint64_t oldest = 10 + 3 * (uint64_t)((utc(2025, 12, 28, 2, 0) - first) / 86400);
	assert_true(wal_planned(1, oldest - 1));
	assert_false(wal_planned(1, oldest));

	/* FULL: only full backups fill the buckets (the month's last full, not its last delta) */
	for (size_t i = 0; i < st.n; i++) {
		free(st.b[i].why);
		st.b[i].why = NULL;
	}
	o.modifier = MOD_FULL;
	assert_int_equal(retain_select(&st, &o, now, &sc), E_OK);
	assert_true(kept_on(2026, 4, 26) && !kept_on(2026, 4, 30) && !kept_on(2026, 4, 27));
	assert_true(kept_on(2026, 6, 28) && !kept_on(2026, 6, 30));
	for (size_t i = 0; i < st.n; i++)
		assert_false(st.b[i].keep && st.b[i].s.is_delta);
}

/* Days, weeks and months are the operator's: 23:30 UTC on 01-31 is February in Berlin. */
static void test_gfs_time_zone(void **state)
{
	(void)state;
	backup(1, 10, utc(2026, 1, 31, 22, 30)); /* 23:30 in Berlin: January */
	backup(1, 20, utc(2026, 1, 31, 23, 30)); /* 00:30 on 02-01 in Berlin */
	backup(1, 30, utc(2026, 2, 2, 10, 0));
	delete_options o = { .mode = DELETE_RETAIN, .monthly = 2 };
	setenv("TZ", "UTC", 1);
	tzset();
	run(&o, E_OK);
	assert_true(!at(10)->keep && at(20)->keep && at(30)->keep);
	setenv("TZ", "Europe/Berlin", 1);
	tzset();
	repo_objs_free(&plan.del);
	memset(&plan, 0, sizeof(plan));
	for (size_t i = 0; i < st.n; i++) {
		free(st.b[i].why);
		st.b[i].why = NULL;
	}
	run(&o, E_OK);
	assert_true(at(10)->keep && !at(20)->keep && at(30)->keep);
	assert_non_null(strstr(at(10)->why, "monthly 2026-01"));
	setenv("TZ", "UTC", 1);
	tzset();
}

/*
 * A point-in-time window of 3 days: WAL continuous from the newest backup that ended before
 * it; a kept backup before that keeps only its own WAL; the window starts earlier when the
 * newest verified backup is older.
 */
static void test_gfs_window(void **state)
{
	(void)state;
	setenv("TZ", "UTC", 1);
	tzset();
	const time_t day = 86400;
	for (int i = 0; i < 10; i++) /* daily fulls at 02:00, segments 10, 20, ..., 100 */
		backup(1, 10 + 10 * (uint64_t)i, NOW - (10 - i) * day);
	wal(1, 5, 105);
	delete_options o = { .mode = DELETE_RETAIN, .weekly = 2, .pitr_window_s = 3 * day,
						 .pitr_window = "3d" };
	retain_scope sc;
	retain_sort(&st);
	assert_int_equal(retain_select(&st, &o, NOW, &sc), E_OK);
	retain_plan_objects(&st, &sc, &lst, &plan);
	/* the window starts at NOW - 3d: the backup of NOW - 3d ended 60 s later, so the one of
	 * NOW - 4d (segment 70) is its base */
	assert_non_null(sc.window_from);
	assert_int_equal(sc.window_from->seg, 70);
	assert_true(at(70)->keep && at(70)->onward);
	assert_non_null(strstr(at(70)->why, "point-in-time window"));
	for (uint64_t s = 70; s <= 105; s++)
		assert_false(wal_planned(1, s));
	/* backups in the window that no bucket keeps go; their WAL stays */
	size_t kept = 0;
	for (size_t i = 0; i < st.n; i++)
		kept += st.b[i].keep;
	for (size_t i = 0; i < st.n; i++)
		if (st.b[i].keep && st.b[i].seg < 70) {
			/* before the window: its own range only */
			assert_false(st.b[i].onward);
			assert_false(wal_planned(1, st.b[i].seg) || wal_planned(1, st.b[i].end_seg));
			assert_true(wal_planned(1, st.b[i].end_seg + 1));
		}
	assert_true(kept >= 2 && kept < 10);
	for (uint64_t s = 5; s < 10; s++)
		assert_true(wal_planned(1, s));

	/* an older verified backup: the WAL is continuous from it */
	repo_objs_free(&plan.del);
	memset(&plan, 0, sizeof(plan));
	for (size_t i = 0; i < st.n; i++) {
		free(st.b[i].why);
		st.b[i].why = NULL;
	}
	verified(at(20));
	assert_int_equal(retain_select(&st, &o, NOW, &sc), E_OK);
	retain_plan_objects(&st, &sc, &lst, &plan);
	assert_int_equal(sc.window_from->seg, 20);
	for (uint64_t s = 20; s <= 105; s++)
		assert_false(wal_planned(1, s));
	assert_true(wal_planned(1, 19));
	/* FIND_FULL and --after do not go with it */
	o.modifier = MOD_FIND_FULL;
	assert_int_equal(retain_select(&st, &o, NOW, &sc), E_CONFIG);
	err_clear();
}

static void test_positions(void **state)
{
	(void)state;
	uint32_t tli;
	uint64_t seg;
	assert_true(retain_position("base_000000020000000100000003_D_000000010000000000000001", SEG,
								&tli, &seg));
	assert_int_equal(tli, 2);
	assert_int_equal(seg, 256 + 3);
	assert_true(retain_position("000000010000000000000007.00000028.backup.lz4", SEG, &tli, &seg));
	assert_int_equal(seg, 7);
	assert_false(retain_position("00000002.history.lz4", SEG, &tli, &seg));
	assert_false(retain_position("base_00000001000000000000000", SEG, &tli, &seg));
	assert_false(retain_position("base_000000010000000000000100", SEG, &tli, &seg));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_retain_fulls),	   T(test_order_by_position), T(test_order_other_cluster), T(test_skipped_backup), T(test_retain_and_deltas),
		T(test_retain_full_counts_fulls), T(test_kept_delta_keeps_chain), T(test_permanent),
		T(test_timelines),		   T(test_running_push),		T(test_orphans),
		T(test_garbage_modifiers), T(test_garbage_only_permanent), T(test_before),
		T(test_retain_after),	   T(test_retain_fewer),		T(test_everything),
		T(test_target),			   T(test_positions),
		T(test_verified_kept),	   T(test_verified_modes),		T(test_verified_refusals),
		T(test_gfs_year),		   T(test_gfs_time_zone),		T(test_gfs_window),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
