/*
 * Recovery targets: whether the archived WAL, read forward along the newest timeline's
 * history, reaches a time, LSN, restore point or transaction the way PostgreSQL's recovery
 * would stop at it (recoveryStopsBefore/After with recovery_target_inclusive on).
 */
#include "internal/wal/wal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/pg/pg.h"
#include "internal/wal/wal_impl.h"

typedef struct scan {
	const recovery_target *t;
	target_reach *out;
} scan;

static bool reaches(const recovery_target *t, const wal_record *rec)
{
	bool xact_end = rec->kind == WAL_REC_COMMIT || rec->kind == WAL_REC_ABORT;
	switch (t->kind) {
	case TARGET_TIME:
		return xact_end && rec->time_us > t->time_us;
	case TARGET_LSN:
		return rec->lsn >= t->lsn;
	case TARGET_NAME:
		return rec->kind == WAL_REC_RESTORE_POINT && strcmp(rec->name, t->name) == 0;
	case TARGET_XID:
		return xact_end && !rec->prepared && rec->xid == t->xid;
	}
	return false;
}

static bool on_record(const wal_record *rec, void *arg)
{
	scan *s = arg;
	if (rec->kind == WAL_REC_COMMIT) {
		s->out->last_commit_us = rec->time_us;
		s->out->last_commit_lsn = rec->lsn;
	}
	if (!reaches(s->t, rec))
		return true;
	s->out->reached = true;
	s->out->lsn = rec->lsn;
	s->out->time_us = rec->time_us;
	return false;
}

/* A sink feeding a segment's bytes to the reader, which it does not own. */
typedef struct reader_sink {
	sink base;
	wal_reader *rd;
} reader_sink;

static err_code rs_write(sink *s, const void *buf, size_t len)
{
	return wal_reader_feed(((reader_sink *)s)->rd, buf, len);
}

static err_code rs_finish(sink *s)
{
	(void)s;
	return E_OK;
}

static void rs_free(sink *s)
{
	free(s);
}

static const sink_ops reader_sink_ops = { rs_write, rs_finish, rs_free };

err_code wal_feed_archived(repo *r, const char *name, wal_reader *rd)
{
	char *base = xasprintf(REPO_WAL_DIR "%s", name), *key = NULL;
	err_code rc = repo_find(r, base, &key);
	free(base);
	if (rc != E_OK)
		return rc;
	reader_sink *s = xcalloc(1, sizeof(*s));
	s->base.ops = &reader_sink_ops;
	s->rd = rd;
	rc = repo_get(r, key, &s->base);
	free(key);
	return rc;
}

/* Whether the index holds any segment after seg on the path to timeline newest. */
static bool later_segments(const wal_index *ix, uint32_t newest, uint64_t seg)
{
	for (size_t i = 0; i < ix->n; i++) {
		const timeline *tl = &ix->tl[i];
		if (tl->nsegs > 0 && tl->segs[tl->nsegs - 1] > seg &&
			wal_index_tli_for(ix, newest, tl->segs[tl->nsegs - 1]) == tl->id)
			return true;
	}
	return false;
}

/* The archive as read once: wal_005/'s index and the path recovery follows through it. */
struct wal_archive {
	repo *r;
	wal_index ix;
	wal_path path;
	wal_lost lost; /* the gaps walc_wal_lost.json records */
};

/* The path to timeline id, from the index's history files. */
static void path_to(const wal_index *ix, uint32_t id, wal_path *out)
{
	memset(out, 0, sizeof(*out));
	uint32_t rev[WAL_PATH_MAX];
	uint64_t begin[WAL_PATH_MAX];
	size_t n = 0;
	while (n < WAL_PATH_MAX) {
		const timeline *tl = wal_index_timeline(ix, id);
		rev[n] = id;
		begin[n] = tl != NULL && tl->has_history ? tl->switch_lsn : 0;
		n++;
		if (tl == NULL || !tl->has_history || tl->parent == 0 || tl->parent >= id)
			break;
		id = tl->parent;
	}
	for (size_t i = 0; i < n; i++) {
		out->tli[i] = rev[n - 1 - i];
		out->begin[i] = begin[n - 1 - i];
	}
	out->n = n;
}

err_code wal_archive_open(repo *r, const wal_settings *cfg, wal_archive **out)
{
	wal_archive *a = xcalloc(1, sizeof(*a));
	a->r = r;
	err_code rc = wal_index_build(r, cfg, false, &a->ix);
	if (rc == E_OK) {
		rc = wal_lost_read(r, a->ix.segsize, &a->lost);
		if (rc != E_OK)
			wal_index_free(&a->ix);
	}
	if (rc != E_OK) {
		free(a);
		return rc;
	}
	path_to(&a->ix, a->ix.n > 0 ? a->ix.tl[a->ix.n - 1].id : 1, &a->path);
	*out = a;
	return E_OK;
}

err_code wal_archive_follow(wal_archive *a, uint32_t tli)
{
	const timeline *tl = wal_index_timeline(&a->ix, tli);
	if (tl == NULL || (tl->nsegs == 0 && !tl->has_history))
		return err_set(E_NOTFOUND, "timeline %u: the archive holds none of its WAL", tli);
	path_to(&a->ix, tli, &a->path);
	return E_OK;
}

void wal_archive_close(wal_archive *a)
{
	if (a == NULL)
		return;
	wal_index_free(&a->ix);
	wal_lost_free(&a->lost);
	free(a);
}

const wal_path *wal_archive_path(const wal_archive *a)
{
	return &a->path;
}

char *wal_archive_gap_at(const wal_archive *a, uint64_t lsn)
{
	uint64_t seg = (lsn + a->ix.segsize - 1) / a->ix.segsize;
	const wal_lost_gap *g =
		wal_lost_at(&a->lost, wal_index_tli_for(&a->ix, a->path.tli[a->path.n - 1], seg), seg);
	return g != NULL ? wal_lost_describe(g, a->ix.segsize) : NULL;
}

/* The object holding the record or page where reading ended, for messages. */
static void stop_object(wal_archive *a, uint32_t newest, const wal_ending *e, char *out)
{
	uint64_t seg = e->lsn / a->ix.segsize;
	char name[WAL_NAME_LEN + 1], *base, *key = NULL;
	wal_name_format(name, wal_index_tli_for(&a->ix, newest, seg), seg, a->ix.segsize);
	base = xasprintf(REPO_WAL_DIR "%s", name);
	if (repo_find(a->r, base, &key) != E_OK)
		err_clear();
	snprintf(out, WAL_OBJECT_MAX, "%s", key ? key : base);
	free(key);
	free(base);
}

/* Why a reader ended, and where, for a run or a target that stops there. */
static void note_stop(wal_archive *a, uint32_t newest, const wal_reader *rd, wal_ending *stop,
					  char *object)
{
	wal_reader_end(rd, stop);
	if (stop->kind != WAL_END_NONE)
		stop_object(a, newest, stop, object);
}

err_code wal_reach_target(wal_archive *a, uint64_t from_lsn, const recovery_target *t,
						  target_reach *out)
{
	memset(out, 0, sizeof(*out));
	repo *r = a->r;
	const wal_index *ix = &a->ix;
	out->timeline = a->path.tli[a->path.n - 1];
	scan s = { t, out };
	wal_reader *rd = wal_reader_new(ix->segsize, from_lsn, on_record, &s);
	err_code rc = E_OK;
	uint64_t end = from_lsn;
	for (uint64_t seg = from_lsn / ix->segsize;; seg++) {
		uint32_t tli = wal_index_tli_for(ix, out->timeline, seg);
		char name[WAL_NAME_LEN + 1];
		wal_name_format(name, tli, seg, ix->segsize);
		if (!wal_index_has(ix, tli, seg)) {
			snprintf(out->missing, sizeof(out->missing), "%s", name);
			out->gap = later_segments(ix, out->timeline, seg);
			char *lost = wal_archive_gap_at(a, seg * ix->segsize);
			snprintf(out->lost, sizeof(out->lost), "%s", lost ? lost : "");
			free(lost);
			break;
		}
		log_debug("reading %s for the recovery target", name);
		rc = wal_feed_archived(r, name, rd);
		if (rc != E_OK || wal_reader_done(rd, &end))
			break;
	}
	wal_reader_done(rd, &end);
	out->end_lsn = end;
	if (!out->reached)
		note_stop(a, out->timeline, rd, &out->stop, out->stop_object);
	wal_reader_free(rd);
	return rc;
}

/* Windows: each record extends the current run; commits and restore points are noted. */
static bool window_record(const wal_record *rec, void *arg)
{
	wal_windows *w = arg;
	wal_run *run = &w->runs[w->nruns - 1];
	if (rec->kind == WAL_REC_COMMIT) {
		run->last_commit_us = rec->time_us;
		run->last_commit_lsn = rec->lsn;
	} else if (rec->kind == WAL_REC_RESTORE_POINT) {
		w->points = xrealloc(w->points, (w->npoints + 1) * sizeof(*w->points));
		wal_restore_point *p = &w->points[w->npoints++];
		memcpy(p->name, rec->name, sizeof(p->name));
		p->time_us = rec->time_us;
		p->lsn = rec->lsn;
	}
	return true;
}

static void run_close(wal_archive *a, wal_windows *w, wal_reader **rd)
{
	if (*rd == NULL)
		return;
	wal_run *run = &w->runs[w->nruns - 1];
	wal_reader_done(*rd, &run->end_lsn);
	note_stop(a, w->timeline, *rd, &run->stop, run->stop_object);
	if (run->stop.kind == WAL_END_DAMAGED) {
		char at[32];
		pg_lsn_format(run->stop.lsn, at);
		log_warn("the archived WAL is damaged at %s in %s (%s): recovery cannot go past it",
				 at, run->stop_object, run->stop.why);
	}
	wal_reader_free(*rd);
	*rd = NULL;
}

err_code wal_read_windows(wal_archive *a, wal_windows *out)
{
	memset(out, 0, sizeof(*out));
	repo *r = a->r;
	const wal_index *ix = &a->ix;
	out->timeline = a->path.tli[a->path.n - 1];
	uint64_t first = UINT64_MAX, last = 0;
	for (size_t i = 0; i < ix->n; i++)
		for (size_t j = 0; j < ix->tl[i].nsegs; j++) {
			uint64_t seg = ix->tl[i].segs[j];
			if (wal_index_tli_for(ix, out->timeline, seg) != ix->tl[i].id)
				continue;
			first = seg < first ? seg : first;
			last = seg > last ? seg : last;
		}
	wal_reader *rd = NULL;
	err_code rc = E_OK;
	for (uint64_t seg = first; rc == E_OK && first != UINT64_MAX && seg <= last; seg++) {
		uint32_t tli = wal_index_tli_for(ix, out->timeline, seg);
		char name[WAL_NAME_LEN + 1];
		wal_name_format(name, tli, seg, ix->segsize);
		if (!wal_index_has(ix, tli, seg)) {
			run_close(a, out, &rd);
			continue;
		}
		if (rd == NULL) {
			out->runs = xrealloc(out->runs, (out->nruns + 1) * sizeof(*out->runs));
			out->runs[out->nruns++] = (wal_run){ .start_lsn = seg * ix->segsize };
			rd = wal_reader_new(ix->segsize, seg * ix->segsize, window_record, out);
		}
		rc = wal_feed_archived(r, name, rd);
		uint64_t end;
		if (rc == E_OK && wal_reader_done(rd, &end))
			run_close(a, out, &rd); /* invalid WAL: the run ends; a later segment starts another */
	}
	run_close(a, out, &rd);
	if (rc != E_OK)
		wal_windows_free(out);
	return rc;
}

void wal_windows_free(wal_windows *w)
{
	free(w->runs);
	free(w->points);
	memset(w, 0, sizeof(*w));
}

const wal_run *wal_windows_run_at(const wal_windows *w, uint64_t lsn)
{
	for (size_t i = 0; i < w->nruns; i++)
		if (lsn >= w->runs[i].start_lsn && lsn <= w->runs[i].end_lsn)
			return &w->runs[i];
	return NULL;
}

err_code wal_show_restore_points(repo *r, const wal_settings *cfg, bool json, FILE *out)
{
	wal_archive *a;
	TRY(wal_archive_open(r, cfg, &a));
	wal_windows w;
	err_code rc = wal_read_windows(a, &w);
	const wal_path path = *wal_archive_path(a);
	wal_archive_close(a);
	if (rc != E_OK)
		return rc;
	static const char *const hdr[] = { "NAME", "TIME", "LSN", "TLI" };
	static const bool right[] = { false, false, true, true };
	table *t = table_new(4, hdr, right);
	json_t *arr = json_array();
	for (size_t i = 0; rc == E_OK && i < w.npoints; i++) {
		const wal_restore_point *p = &w.points[i];
		char when[64], lsn[32], tli[16];
		time_t sec = (time_t)(p->time_us / 1000000);
		struct tm tm;
		gmtime_r(&sec, &tm);
		strftime(when, 32, "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%06ldZ",
				 (long)(p->time_us % 1000000));
		pg_lsn_format(p->lsn, lsn);
		snprintf(tli, sizeof(tli), "%u", wal_path_tli_at(&path, p->lsn));
		const char *cells[] = { p->name, when, lsn, tli };
		table_add(t, cells);
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:i}", "name", p->name, "time",
											 when, "lsn", lsn, "timeline",
											 (json_int_t)wal_path_tli_at(&path, p->lsn)));
	}
	if (rc == E_OK && json) {
		char *s = json_dumps(arr, JSON_INDENT(2));
		fprintf(out, "%s\n", s);
		free(s);
	} else if (rc == E_OK) {
		table_print(t, out, false);
	}
	json_decref(arr);
	table_free(t);
	wal_windows_free(&w);
	return rc;
}

uint32_t wal_path_tli_at(const wal_path *p, uint64_t lsn)
{
	uint32_t tli = p->n > 0 ? p->tli[0] : 1;
	for (size_t i = 1; i < p->n; i++)
		if (lsn >= p->begin[i])
			tli = p->tli[i];
	return tli;
}

err_code recovery_target_parse(const char *kind, const char *value, recovery_target *out)
{
	memset(out, 0, sizeof(*out));
	if (strcmp(kind, "time") == 0) {
		out->kind = TARGET_TIME;
		time_t sec;
		long nsec;
		const char *why = time_parse_target(value, &sec, &nsec);
		if (why != NULL)
			return err_set(E_CONFIG, "--target-time: \"%s\": %s", value, why);
		out->time_us = (int64_t)sec * 1000000 + nsec / 1000;
	} else if (strcmp(kind, "lsn") == 0) {
		out->kind = TARGET_LSN;
		if (pg_lsn_parse(value, &out->lsn) != E_OK)
			return err_set(E_CONFIG, "--target-lsn: \"%s\" is not an LSN (such as 0/3000028)",
						   value);
	} else if (strcmp(kind, "name") == 0) {
		out->kind = TARGET_NAME;
		if (value[0] == '\0' || strlen(value) > 63)
			return err_set(E_CONFIG, "--target-name: a restore point name has 1 to 63 bytes");
		out->name = value;
	} else if (strcmp(kind, "xid") == 0) {
		out->kind = TARGET_XID;
		char *end;
		unsigned long long x = strtoull(value, &end, 10);
		if (value[0] < '0' || value[0] > '9' || *end != '\0' || x < 3 || x > UINT32_MAX)
			return err_set(E_CONFIG, "--target-xid: \"%s\" is not a transaction id", value);
		out->xid = (uint32_t)x;
	} else {
		return err_set(E_CONFIG, "unknown recovery target kind \"%s\"", kind);
	}
	out->text = value;
	return E_OK;
}
