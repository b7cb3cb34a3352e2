/*
 * backup-verify's WAL check: the archived segments of a range read whole through the
 * repository's decoders, each page held to pg's WAL page rule and each record to its header
 * checks and CRC-32C, and the timeline's history. Segments are read in parallel, each by a
 * record reader of its own; the records that cross from one segment into the next are checked
 * afterwards, in order, from what each reader kept of them (pg's seams).
 */
#include "internal/wal/wal.h"

#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"
#include "internal/pipe/pipe.h"
#include "internal/wal/wal_impl.h"

#define HISTORY_MAX ((size_t)1 << 20)

/* A sink checking one segment's pages and records as they stream by. */
typedef struct seg_checker {
	sink base;
	pg_wal_check st;
	uint64_t segno, seg_size, sysid, total;
	uint32_t max_tli, index;
	unsigned char page[PG_WAL_PAGE];
	size_t fill;
	const char *problem; /* the first, static text */
	uint32_t problem_page;
	wal_reader *rd;
	err_code rd_rc; /* the reader could not go on (a record too large to decode) */
	char rd_msg[160];
	wal_seam *seam; /* filled in when the segment is whole and sound */
	bool *whole;
} seg_checker;

static bool any_record(const wal_record *rec, void *arg)
{
	(void)rec;
	(void)arg;
	return true;
}

static void check_page(seg_checker *c, const unsigned char *p)
{
	const char *what = pg_wal_page_check(&c->st, p, c->segno, c->seg_size, c->index,
										 c->max_tli, c->sysid);
	if (what != NULL && c->problem == NULL) {
		c->problem = what;
		c->problem_page = c->index;
	}
	c->index++;
}

static err_code sc_write(sink *s, const void *buf, size_t len)
{
	seg_checker *c = (seg_checker *)s;
	const unsigned char *p = buf;
	c->total += len;
	if (c->total > c->seg_size)
		return E_OK; /* reported at finish */
	if (c->rd_rc == E_OK && (c->rd_rc = wal_reader_feed(c->rd, buf, len)) != E_OK) {
		/* kept for finish, which reports it naming the object */
		snprintf(c->rd_msg, sizeof(c->rd_msg), "%s", err_msg());
		err_clear();
	}
	while (len > 0) {
		if (c->fill == 0 && len >= PG_WAL_PAGE) {
			check_page(c, p);
			p += PG_WAL_PAGE;
			len -= PG_WAL_PAGE;
			continue;
		}
		size_t n = PG_WAL_PAGE - c->fill < len ? PG_WAL_PAGE - c->fill : len;
		memcpy(c->page + c->fill, p, n);
		c->fill += n;
		p += n;
		len -= n;
		if (c->fill == PG_WAL_PAGE) {
			check_page(c, c->page);
			c->fill = 0;
		}
	}
	return E_OK;
}

/* What the pages showed, as the stream's end: repo_get reports it naming the object. */
static err_code sc_finish(sink *s)
{
	seg_checker *c = (seg_checker *)s;
	if (c->total != c->seg_size)
		return err_set(E_CORRUPT, "segment is %llu bytes, not %llu", (unsigned long long)c->total,
					   (unsigned long long)c->seg_size);
	if (c->problem != NULL)
		return err_set(E_CORRUPT, "page %u: %s", c->problem_page, c->problem);
	if (c->rd_rc != E_OK)
		return err_set(E_CORRUPT, "records not checked: %s", c->rd_msg);
	wal_ending end;
	wal_reader_end(c->rd, &end);
	char at[32];
	pg_lsn_format(end.lsn, at);
	if (end.kind == WAL_END_DAMAGED)
		return err_set(E_CORRUPT, "WAL record at %s: %s", at, end.why);
	/* An archived segment is written to its end (or to a switch, after which it is skipped). */
	if (end.kind == WAL_END_INVALID)
		return err_set(E_CORRUPT, "the valid WAL ends at %s inside the segment: %s", at, end.why);
	wal_reader_seam(c->rd, c->seam);
	*c->whole = true;
	return E_OK;
}

static void sc_free(sink *s)
{
	wal_reader_free(((seg_checker *)s)->rd);
	free(s);
}

static const sink_ops seg_checker_ops = { sc_write, sc_finish, sc_free };

#define HISTORY_ENTRIES 1024

/* Reads and parses <tli>.history: false (and a problem told) when it cannot be used. */
static bool read_history(repo *r, uint32_t tli, pg_history_entry *e, size_t *n,
						 wal_problem_fn fn, void *arg)
{
	char base[64], *key = NULL;
	snprintf(base, sizeof(base), REPO_WAL_DIR "%08X.history", (unsigned)tli);
	err_code rc = repo_find(r, base, &key);
	if (rc != E_OK) {
		fn(arg, base, rc == E_NOTFOUND ? "timeline history file missing" : err_msg());
		err_clear();
		return false;
	}
	membuf mb = { .max = HISTORY_MAX };
	const char *what = NULL;
	rc = repo_get(r, key, membuf_sink_new(&mb));
	if (rc != E_OK) {
		fn(arg, key, err_msg());
		err_clear();
	} else if ((what = pg_history_parse((const char *)mb.data, mb.len, tli, e, HISTORY_ENTRIES,
										n)) != NULL) {
		fn(arg, key, what);
	}
	free(mb.data);
	free(key);
	return rc == E_OK && what == NULL;
}

/*
 * tli's history file, and each ancestor's: every one present and sound, and each the start of
 * its descendant's (the same parents, switched at the same LSNs).
 */
static void check_history(repo *r, uint32_t tli, wal_problem_fn fn, void *arg)
{
	pg_history_entry *mine = xcalloc(HISTORY_ENTRIES, sizeof(*mine));
	pg_history_entry *theirs = xcalloc(HISTORY_ENTRIES, sizeof(*theirs));
	size_t n, m;
	if (read_history(r, tli, mine, &n, fn, arg)) {
		for (size_t i = n; i-- > 0;) {
			uint32_t p = mine[i].parent;
			if (p == 1)
				break;
			if (!read_history(r, p, theirs, &m, fn, arg))
				continue;
			bool prefix = m == i;
			for (size_t k = 0; prefix && k < m; k++)
				prefix = theirs[k].parent == mine[k].parent &&
					theirs[k].switch_lsn == mine[k].switch_lsn;
			if (!prefix) {
				char base[64], what[128];
				snprintf(base, sizeof(base), REPO_WAL_DIR "%08X.history", (unsigned)p);
				snprintf(what, sizeof(what),
						 "does not agree with timeline %u's history on the timelines before", tli);
				fn(arg, base, what);
			}
		}
	}
	free(mine);
	free(theirs);
}

/* The segments of one range, taken in turn by the workers. */
typedef struct range_job {
	repo *r;
	uint64_t seg_size, sysid, to;
	uint32_t tli;
	wal_problem_fn fn;
	void *arg;
	uint64_t next;	  /* atomic */
	uint64_t checked; /* atomic */
	uint64_t from;
	wal_seam *seams;  /* per segment from `from` on, each written by its worker alone */
	bool *whole;
	char **keys;
	wal_lost lost; /* gaps walc_wal_lost.json records: a missing segment in one says why */
} range_job;

static err_code check_segment(range_job *j, uint64_t seg)
{
	char name[WAL_NAME_LEN + 1], base[64], *key = NULL;
	wal_name_format(name, j->tli, seg, j->seg_size);
	snprintf(base, sizeof(base), REPO_WAL_DIR "%s", name);
	err_code rc = repo_find(j->r, base, &key);
	const wal_lost_gap *g = rc == E_NOTFOUND ? wal_lost_at(&j->lost, j->tli, seg) : NULL;
	if (g != NULL) {
		char *gap = wal_lost_describe(g, j->seg_size);
		char *what = xasprintf("WAL segment missing: %s; recovery cannot cross them", gap);
		j->fn(j->arg, base, what);
		free(what);
		free(gap);
		err_clear();
		return E_OK;
	}
	if (rc != E_OK) {
		j->fn(j->arg, base, rc == E_NOTFOUND ? "WAL segment missing" : err_msg());
		err_clear();
		return E_OK;
	}
	seg_checker *c = xcalloc(1, sizeof(*c));
	c->base.ops = &seg_checker_ops;
	c->segno = seg;
	c->seg_size = j->seg_size;
	c->sysid = j->sysid;
	c->max_tli = j->tli;
	c->rd = wal_reader_new(j->seg_size, seg * j->seg_size, any_record, NULL);
	c->seam = &j->seams[seg - j->from];
	c->whole = &j->whole[seg - j->from];
	rc = repo_get(j->r, key, &c->base);
	j->keys[seg - j->from] = key;
	if (rc == E_CANCELLED)
		return rc;
	__atomic_add_fetch(&j->checked, 1, __ATOMIC_RELAXED);
	if (rc != E_OK) {
		j->fn(j->arg, key, err_msg());
		err_clear();
	}
	return E_OK;
}

/*
 * The records that cross segment boundaries, in order, once every segment is read: a segment
 * missing or unsound breaks the chain, which starts again after it.
 */
static void check_seams(range_job *j, uint64_t to)
{
	wal_stitch st;
	memset(&st, 0, sizeof(st));
	for (uint64_t seg = j->from; seg <= to; seg++) {
		size_t i = (size_t)(seg - j->from);
		if (!j->whole[i]) {
			memset(&st, 0, sizeof(st));
			continue;
		}
		uint64_t at;
		const char *bad = wal_stitch_next(&st, &j->seams[i], &at);
		if (bad == NULL)
			continue;
		/* named by the segment the record begins in, when it was read */
		uint64_t own = at / j->seg_size;
		const char *key = own >= j->from && own <= seg ? j->keys[own - j->from] : j->keys[i];
		char lsn[32], *what;
		pg_lsn_format(at, lsn);
		what = xasprintf("WAL record at %s: %s", lsn, bad);
		j->fn(j->arg, key ? key : j->keys[i], what);
		free(what);
		memset(&st, 0, sizeof(st));
	}
}

static err_code range_worker(void *arg)
{
	range_job *j = arg;
	for (;;) {
		TRY(cancel_check());
		uint64_t seg = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (seg > j->to)
			return E_OK;
		TRY(check_segment(j, seg));
	}
}

#define CHECK_MEMORY_BUDGET ((size_t)40 << 20) /* as backup-fetch's streams */

err_code wal_check_range(repo *r, uint64_t seg_size, uint32_t tli, uint64_t from, uint64_t to,
						 uint64_t sysid, int concurrency, wal_problem_fn fn, void *arg,
						 uint64_t *checked)
{
	*checked = 0;
	if (tli > 1)
		check_history(r, tli, fn, arg);
	if (to < from)
		return E_OK;
	size_t n = (size_t)(to - from + 1);
	range_job j = { r, seg_size, sysid, to, tli, fn, arg, from, 0, from,
					xcalloc(n, sizeof(wal_seam)), xcalloc(n, sizeof(bool)),
					xcalloc(n, sizeof(char *)), { NULL, 0 } };
	if (wal_lost_read(r, seg_size, &j.lost) != E_OK) {
		fn(arg, WAL_LOST_OBJECT, err_msg());
		err_clear();
	}
	/* segments stored with the configured codec, as most are */
	char *typical = repo_key(r, REPO_WAL_DIR "x");
	int fit = (int)(CHECK_MEMORY_BUDGET / repo_decode_memory(typical));
	free(typical);
	if (concurrency > fit)
		concurrency = fit > 0 ? fit : 1;
	if ((uint64_t)concurrency > to - from + 1)
		concurrency = (int)(to - from + 1);
	group *g = group_new();
	for (int i = 0; i < concurrency; i++)
		if (group_go(g, range_worker, &j) != E_OK)
			break;
	err_code rc = group_wait(g);
	group_free(g);
	if (rc == E_OK)
		check_seams(&j, to);
	*checked = j.checked;
	for (size_t i = 0; i < n; i++)
		free(j.keys[i]);
	free(j.keys);
	free(j.whole);
	free(j.seams);
	wal_lost_free(&j.lost);
	return rc;
}

/* The newest segment of timeline tli, or with `older` of tli or a timeline before it. */
static err_code newest(repo *r, uint64_t seg_size, uint32_t tli, bool older, uint32_t *tli_out,
					   uint64_t *segno, bool *found)
{
	repo_objs l;
	*found = false;
	TRY(repo_list(r, REPO_WAL_DIR, false, &l));
	for (size_t i = 0; i < l.len; i++) {
		const char *b = strrchr(l.items[i].key, '/');
		b = b ? b + 1 : l.items[i].key;
		char name[WAL_NAME_LEN + 1];
		uint32_t t;
		uint64_t s;
		if (!wal_object_is_segment(b))
			continue;
		memcpy(name, b, WAL_NAME_LEN);
		name[WAL_NAME_LEN] = '\0';
		if (!wal_is_segment_name(name) || wal_name_parse(name, seg_size, &t, &s) != E_OK) {
			err_clear();
			continue;
		}
		if ((t == tli || (older && t < tli)) &&
			(!*found || t > *tli_out || (t == *tli_out && s > *segno))) {
			*tli_out = t;
			*segno = s;
			*found = true;
		}
	}
	repo_objs_free(&l);
	return E_OK;
}

err_code wal_newest_segment(repo *r, uint64_t seg_size, uint32_t tli, uint64_t *segno,
							bool *found)
{
	uint32_t t;
	return newest(r, seg_size, tli, false, &t, segno, found);
}

err_code wal_newest_upto(repo *r, uint64_t seg_size, uint32_t tli, uint32_t *tli_out,
						 uint64_t *segno, bool *found)
{
	return newest(r, seg_size, tli, true, tli_out, segno, found);
}
