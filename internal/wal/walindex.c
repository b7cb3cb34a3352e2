/* The index of wal_005/: segments per timeline, and each timeline's history. */
#include "internal/wal/wal_impl.h"

#include <stdlib.h>
#include <string.h>

#include "internal/catalog/catalog.h"
#include "internal/pg/pg.h"

static timeline *tl_get(wal_index *ix, uint32_t id)
{
	for (size_t i = 0; i < ix->n; i++)
		if (ix->tl[i].id == id)
			return &ix->tl[i];
	ix->tl = xrealloc(ix->tl, (ix->n + 1) * sizeof(timeline));
	timeline *t = &ix->tl[ix->n++];
	memset(t, 0, sizeof(*t));
	t->id = id;
	return t;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_tl(const void *a, const void *b)
{
	const timeline *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The last line of <tli>.history names the parent and where this timeline branched off. */
static err_code read_history(repo *r, const char *key, timeline *t)
{
	membuf mb = { .max = 1u << 20 };
	err_code rc = repo_get(r, key, membuf_sink_new(&mb));
	if (rc == E_OK) {
		enum { MAX_ENTRIES = 4096 };
		pg_history_entry *e = xmalloc(MAX_ENTRIES * sizeof(*e));
		size_t n = 0;
		const char *bad = pg_history_parse((const char *)mb.data, mb.len, t->id, e, MAX_ENTRIES, &n);
		if (bad != NULL) {
			log_warn("%s: %s; timeline %u is taken as having no history", key, bad, t->id);
		} else {
			t->parent = e[n - 1].parent;
			t->switch_lsn = e[n - 1].switch_lsn;
			t->has_history = true;
		}
		free(e);
	}
	free(mb.data);
	return rc;
}

/* The first bytes of an object, decoded: the transfer stops once they are in. */
typedef struct head_sink {
	sink base;
	unsigned char *buf;
	size_t *have;
} head_sink;

static err_code hs_write(sink *s, const void *buf, size_t len)
{
	head_sink *h = (head_sink *)s;
	size_t n = WAL_LONG_HEADER_LEN - *h->have < len ? WAL_LONG_HEADER_LEN - *h->have : len;
	memcpy(h->buf + *h->have, buf, n);
	*h->have += n;
	return *h->have == WAL_LONG_HEADER_LEN ? err_set(E_FAIL, "header read") : E_OK;
}

static err_code hs_finish(sink *s)
{
	(void)s;
	return E_OK;
}

static void hs_free(sink *s)
{
	free(s);
}

static const sink_ops head_sink_ops = { hs_write, hs_finish, hs_free };

size_t wal_object_head(repo *r, const char *key, unsigned char *head)
{
	size_t have = 0;
	head_sink *h = xcalloc(1, sizeof(*h));
	h->base.ops = &head_sink_ops;
	h->buf = head;
	h->have = &have;
	if (repo_get(r, key, &h->base) != E_OK)
		err_clear(); /* stopped once the header was in, or unreadable: have says which */
	return have;
}

/* The system identifier in the long header of segment segno of timeline tli (false: none). */
static bool segment_sysid(repo *r, const wal_index *ix, uint32_t tli, uint64_t segno,
						  uint64_t *sysid)
{
	char name[WAL_NAME_LEN + 1], *key = NULL;
	wal_name_format(name, tli, segno, ix->segsize);
	char *base = xasprintf(REPO_WAL_DIR "%s", name);
	unsigned char head[WAL_LONG_HEADER_LEN];
	size_t have = 0;
	if (repo_find(r, base, &key) == E_OK)
		have = wal_object_head(r, key, head);
	err_clear();
	free(key);
	free(base);
	return have == WAL_LONG_HEADER_LEN &&
		wal_header_sysid(head, sizeof(head), ix->segsize, sysid);
}

/*
 * A history file is archived before its timeline's first segment, and by anyone who can write
 * to the repository: a timeline is followed only once a segment of this cluster backs it (the
 * marker's system identifier, else that of the oldest timeline's segments). The others are
 * left out of the index, saying so.
 */
static err_code drop_unbacked(repo *r, wal_index *ix)
{
	uint64_t cluster;
	TRY(wal_marker_sysid(r, &cluster));
	for (size_t i = 0; cluster == 0 && i < ix->n; i++)
		if (ix->tl[i].nsegs > 0 &&
			!segment_sysid(r, ix, ix->tl[i].id, ix->tl[i].segs[0], &cluster))
			break;
	size_t k = 0;
	for (size_t i = 0; i < ix->n; i++) {
		timeline *t = &ix->tl[i];
		uint64_t sysid = 0;
		bool backed = !t->has_history ||
			(t->nsegs > 0 && segment_sysid(r, ix, t->id, t->segs[0], &sysid) &&
			 (cluster == 0 || sysid == cluster));
		if (backed) {
			ix->tl[k++] = *t;
			continue;
		}
		if (t->nsegs == 0)
			log_warn(REPO_WAL_DIR "%08X.history: no WAL segment of timeline %u is archived; "
					 "the timeline is ignored until one of this cluster's is",
					 t->id, t->id);
		else
			log_warn(REPO_WAL_DIR "%08X.history: timeline %u's WAL is not this cluster's "
					 "(system identifier %llu, the repository's is %llu); the timeline is ignored",
					 t->id, t->id, (unsigned long long)sysid, (unsigned long long)cluster);
		free(t->segs);
	}
	ix->n = k;
	return E_OK;
}

void wal_index_free(wal_index *ix)
{
	for (size_t i = 0; i < ix->n; i++)
		free(ix->tl[i].segs);
	free(ix->tl);
	memset(ix, 0, sizeof(*ix));
}

bool wal_object_is_segment(const char *base)
{
	char name[WAL_NAME_LEN + 1];
	snprintf(name, sizeof(name), "%s", base);
	/* its name alone or with one codec extension: not .partial, .backup, WAL-G's .json */
	const char *rest = strlen(base) >= WAL_NAME_LEN ? base + WAL_NAME_LEN : "?";
	return wal_is_segment_name(name) &&
		(rest[0] == '\0' || (rest[0] == '.' && repo_is_codec_ext(rest + 1)));
}

err_code wal_index_build(repo *r, const wal_settings *cfg, bool backups, wal_index *ix)
{
	repo_objs l;
	memset(ix, 0, sizeof(*ix));
	ix->segsize = (uint64_t)cfg->pg->pg_wal_size_mb << 20;
	TRY(repo_list(r, REPO_WAL_DIR, false, &l));
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < l.len; i++) {
		const char *base = l.items[i].key + strlen(REPO_WAL_DIR);
		char name[64];
		uint32_t tli;
		uint64_t segno;
		snprintf(name, sizeof(name), "%.24s", base);
		if (wal_object_is_segment(base) &&
			wal_name_parse(name, ix->segsize, &tli, &segno) == E_OK) {
			timeline *t = tl_get(ix, tli);
			if (t->nsegs == t->cap)
				t->segs = xrealloc(t->segs, (t->cap = t->cap ? t->cap * 2 : 256) * 8);
			t->segs[t->nsegs++] = segno;
		} else if (strlen(base) >= 16 && strncmp(base + 8, ".history", 8) == 0) {
			unsigned id;
			if (sscanf(base, "%8X", &id) == 1)
				rc = read_history(r, l.items[i].key, tl_get(ix, id));
		}
	}
	repo_objs_free(&l);
	TRY(rc);
	for (size_t i = 0; i < ix->n; i++) {
		timeline *t = &ix->tl[i];
		if (t->nsegs > 0)
			xqsort(t->segs, t->nsegs, 8, cmp_u64);
		size_t k = 0;
		for (size_t j = 0; j < t->nsegs; j++)
			if (k == 0 || t->segs[k - 1] != t->segs[j])
				t->segs[k++] = t->segs[j];
		t->nsegs = k;
	}
	if (ix->n > 0)
		xqsort(ix->tl, ix->n, sizeof(timeline), cmp_tl);
	TRY(drop_unbacked(r, ix));
	if (backups) {
		backup_refs refs;
		TRY(catalog_backups(r, &refs));
		for (size_t i = 0; i < refs.len; i++) {
			unsigned id;
			if (sscanf(refs.items[i].name, "base_%8X", &id) == 1)
				tl_get(ix, id)->backups++;
		}
		catalog_backups_free(&refs);
	}
	if (ix->n > 0)
		xqsort(ix->tl, ix->n, sizeof(timeline), cmp_tl);
	return E_OK;
}

bool wal_index_has(const wal_index *ix, uint32_t tli, uint64_t segno)
{
	for (size_t i = 0; i < ix->n; i++)
		if (ix->tl[i].id == tli)
			return ix->tl[i].nsegs > 0 &&
				   bsearch(&segno, ix->tl[i].segs, ix->tl[i].nsegs, 8, cmp_u64) != NULL;
	return false;
}

/* The timeline that holds segment s on the way to timeline cur, from cur's history. */
uint32_t wal_index_tli_for(const wal_index *ix, uint32_t cur, uint64_t s)
{
	/* Walk from the current timeline back to its ancestors by their switch points. */
	uint32_t t = cur;
	for (int guard = 0; guard < 10000; guard++) {
		const timeline *tl = NULL;
		for (size_t i = 0; i < ix->n; i++)
			if (ix->tl[i].id == t)
				tl = &ix->tl[i];
		if (tl == NULL || !tl->has_history || tl->parent == 0)
			return t;
		if (s >= tl->switch_lsn / ix->segsize)
			return t;
		t = tl->parent;
	}
	return t;
}


const timeline *wal_index_timeline(const wal_index *ix, uint32_t id)
{
	for (size_t i = 0; i < ix->n; i++)
		if (ix->tl[i].id == id)
			return &ix->tl[i];
	return NULL;
}
