/*
 * Recovery targets: whether the archived WAL, read forward along the newest timeline's
 * history, reaches a time, LSN, restore point or transaction the way PostgreSQL's recovery
 * would stop at it (recoveryStopsBefore/After with recovery_target_inclusive on).
 */
#include "internal/wal/wal.h"

#include <stdlib.h>
#include <string.h>

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

static err_code feed_segment(repo *r, const char *name, wal_reader *rd)
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

err_code wal_reach_target(repo *r, const config *cfg, uint64_t from_lsn,
						  const recovery_target *t, target_reach *out)
{
	memset(out, 0, sizeof(*out));
	wal_index ix;
	TRY(wal_index_build(r, cfg, false, &ix));
	out->timeline = ix.n > 0 ? ix.tl[ix.n - 1].id : 1;
	scan s = { t, out };
	wal_reader *rd = wal_reader_new(ix.segsize, from_lsn, on_record, &s);
	err_code rc = E_OK;
	uint64_t end = from_lsn;
	for (uint64_t seg = from_lsn / ix.segsize;; seg++) {
		uint32_t tli = wal_index_tli_for(&ix, out->timeline, seg);
		char name[WAL_NAME_LEN + 1];
		wal_name_format(name, tli, seg, ix.segsize);
		if (!wal_index_has(&ix, tli, seg)) {
			snprintf(out->missing, sizeof(out->missing), "%s", name);
			out->gap = later_segments(&ix, out->timeline, seg);
			break;
		}
		log_debug("reading %s for the recovery target", name);
		rc = feed_segment(r, name, rd);
		if (rc != E_OK || wal_reader_done(rd, &end))
			break;
	}
	wal_reader_done(rd, &end);
	out->end_lsn = end;
	wal_reader_free(rd);
	wal_index_free(&ix);
	return rc;
}

err_code wal_timeline_path(repo *r, const config *cfg, wal_path *out)
{
	memset(out, 0, sizeof(*out));
	wal_index ix;
	TRY(wal_index_build(r, cfg, false, &ix));
	uint32_t id = ix.n > 0 ? ix.tl[ix.n - 1].id : 1;
	uint32_t rev[WAL_PATH_MAX];
	uint64_t begin[WAL_PATH_MAX];
	size_t n = 0;
	while (n < WAL_PATH_MAX) {
		const timeline *tl = wal_index_timeline(&ix, id);
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
	wal_index_free(&ix);
	return E_OK;
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
		if (!time_parse_rfc3339(value, &sec, &nsec))
			return err_set(E_CONFIG,
						   "--target-time: \"%s\" is not a time (RFC 3339, such as "
						   "2026-12-02T02:47:00Z or 2026-12-02T02:47:00.5+01:00)",
						   value);
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
