/*
 * A delta push's table of its base's files (push_impl.h), about 5 bytes a relation file, so
 * that a cluster of 200,000 files costs a megabyte, not the 4.6 MiB of a 24-byte record each.
 *
 * A relation file's name is a folder and three numbers ("/base/16384/16385_fsm.2": folder,
 * relfilenode 16385, fork fsm, segment 2). Folders are few and are numbered; the files, sorted
 * by (folder, relfilenode, fork and segment), are stored as differences from the previous one
 * in variable-length integers, 64 to a block, with each block's first key in an index searched
 * by bisection. Any other name (pg_xact/0000, postgresql.conf) is kept as its XXH3-128.
 *
 * The base's files come in any order, so they are sorted in runs of RUN_FILES that are encoded
 * as they fill, then merged into one table once the last has come.
 */
#include "internal/backup/push_impl.h"

#include <stdlib.h>
#include <string.h>

#define RUN_FILES 16384u /* a run's raw records: 256 KiB */
#define BLOCK_FILES 64u
#define VARINT_MAX 10 /* a uint64_t in 7-bit groups */

typedef struct rel_rec {
	uint32_t dir, rel, forkseg; /* forkseg: segment << 2 | fork */
	uint32_t fp;				/* the MTime's fingerprint */
} rel_rec;

typedef struct block {
	uint32_t dir, rel, forkseg; /* the block's first key */
	uint64_t off;				/* where its records start in bytes */
} block;

/* Sorted records, encoded: a run while reading, then the whole table. */
typedef struct run {
	block *blocks;
	size_t nblocks;
	unsigned char *bytes;
	size_t nbytes;
} run;

typedef struct other_rec {
	uint64_t name[2];
	uint32_t fp;
} other_rec;

typedef struct dir_slot {
	uint64_t name[2];
	uint32_t id; /* 0: free */
} dir_slot;

struct base_files {
	dir_slot *dirs; /* open addressing on the folder name's hash */
	size_t dir_cap, ndirs;
	rel_rec *raw; /* the run being filled */
	size_t nraw;
	run *runs;
	size_t nruns;
	run table; /* once finished */
	recs adding_others;
	other_rec *others; /* sorted by name hash once finished */
	size_t nothers;
};

static int rec_cmp(const void *pa, const void *pb)
{
	const rel_rec *a = pa, *b = pb;
	if (a->dir != b->dir)
		return a->dir < b->dir ? -1 : 1;
	if (a->rel != b->rel)
		return a->rel < b->rel ? -1 : 1;
	if (a->forkseg != b->forkseg)
		return a->forkseg < b->forkseg ? -1 : 1;
	return 0;
}

/* A canonical decimal number (no sign, no leading zero) up to max, ending at *end. */
static bool parse_number(const char *s, const char **end, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (*p < '1' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > max)
			return false;
	}
	*end = p;
	*out = (uint32_t)v;
	return true;
}

/*
 * name's folder hash and key when its last part is a relation file's name written as
 * PostgreSQL writes them ("16385", "16385_vm", "16385.3"); any other spelling is not, so two
 * names never share a key.
 */
static bool parse_rel(const char *name, uint64_t dir[2], uint32_t *rel, uint32_t *forkseg)
{
	const char *base = strrchr(name, '/');
	const char *p;
	uint32_t fork = 0, seg = 0;
	if (base == NULL || !parse_number(base + 1, &p, UINT32_MAX, rel))
		return false;
	if (*p == '_') {
		static const char *const forks[] = { NULL, "_fsm", "_vm", "_init" };
		for (fork = 1; fork < 4 && !str_has_prefix(p, forks[fork]); fork++)
			;
		if (fork == 4)
			return false;
		p += strlen(forks[fork]);
	}
	if (*p == '.' && !parse_number(p + 1, &p, (1u << 30) - 1, &seg))
		return false;
	if (*p != '\0')
		return false;
	hash128(name, (size_t)(base - name), dir);
	*forkseg = seg << 2 | fork;
	return true;
}

static uint32_t dir_find(const base_files *b, const uint64_t h[2])
{
	if (b->dir_cap == 0)
		return 0;
	for (size_t i = h[0] & (b->dir_cap - 1);; i = (i + 1) & (b->dir_cap - 1)) {
		const dir_slot *s = &b->dirs[i];
		if (s->id == 0 || (s->name[0] == h[0] && s->name[1] == h[1]))
			return s->id;
	}
}

static void dir_put(dir_slot *dirs, size_t cap, const uint64_t h[2], uint32_t id)
{
	size_t i = h[0] & (cap - 1);
	while (dirs[i].id != 0)
		i = (i + 1) & (cap - 1);
	dirs[i] = (dir_slot){ { h[0], h[1] }, id };
}

static uint32_t dir_id(base_files *b, const uint64_t h[2])
{
	uint32_t id = dir_find(b, h);
	if (id != 0)
		return id;
	if (2 * (b->ndirs + 1) > b->dir_cap) {
		size_t cap = b->dir_cap ? 2 * b->dir_cap : 16;
		dir_slot *dirs = xcalloc(cap, sizeof(*dirs));
		for (size_t i = 0; i < b->dir_cap; i++)
			if (b->dirs[i].id != 0)
				dir_put(dirs, cap, b->dirs[i].name, b->dirs[i].id);
		free(b->dirs);
		b->dirs = dirs;
		b->dir_cap = cap;
	}
	id = (uint32_t)++b->ndirs;
	dir_put(b->dirs, b->dir_cap, h, id);
	return id;
}

/* ---- encoding ---------------------------------------------------------------------------- */

static size_t varint_put(unsigned char *out, uint64_t v)
{
	size_t n = 0;
	for (; v >= 0x80; v >>= 7)
		out[n++] = (unsigned char)(v | 0x80);
	out[n++] = (unsigned char)v;
	return n;
}

static uint64_t varint_get(const unsigned char **p)
{
	uint64_t v = 0;
	for (int shift = 0;; shift += 7) {
		unsigned char c = *(*p)++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
}

static void fp_put(unsigned char *out, uint32_t fp)
{
	memcpy(out, &fp, sizeof(fp));
}

static uint32_t fp_get(const unsigned char **p)
{
	uint32_t fp;
	memcpy(&fp, *p, sizeof(fp));
	*p += sizeof(fp);
	return fp;
}

/*
 * Appends sorted records to a run, counting only while out has no arrays (the first of two
 * passes, which sizes them exactly). A key given twice, in one run or in two, is kept once
 * and never skipped: the one rule for a name the base recorded twice.
 */
typedef struct writer {
	run *out;
	size_t nblocks, nbytes, in_block;
	rel_rec prev;	 /* the record last written */
	rel_rec pending; /* the record to write next, held until the one after differs */
	bool have_pending;
} writer;

static void writer_emit(writer *w, const rel_rec *r)
{
	run *o = w->out;
	unsigned char buf[2 * VARINT_MAX + sizeof(uint32_t)];
	size_t n = 0;
	if (w->in_block == 0 || w->in_block == BLOCK_FILES || r->dir != w->prev.dir) {
		if (o->blocks != NULL)
			o->blocks[w->nblocks] = (block){ r->dir, r->rel, r->forkseg, w->nbytes };
		w->nblocks++;
		w->in_block = 0;
	} else {
		/* One byte for a file of a relfilenode up to 15 past the last, without a segment. */
		uint32_t seg = r->forkseg >> 2;
		n += varint_put(buf, (uint64_t)(r->rel - w->prev.rel) << 3 | (r->forkseg & 3) << 1 |
							(seg != 0));
		if (seg != 0)
			n += varint_put(buf + n, seg);
	}
	fp_put(buf + n, r->fp);
	n += sizeof(uint32_t);
	if (o->bytes != NULL)
		memcpy(o->bytes + w->nbytes, buf, n);
	w->nbytes += n;
	w->in_block++;
	w->prev = *r;
}

static void writer_add(writer *w, const rel_rec *r)
{
	if (w->have_pending && rec_cmp(&w->pending, r) == 0) {
		w->pending.fp = 0;
		return;
	}
	if (w->have_pending)
		writer_emit(w, &w->pending);
	w->pending = *r;
	w->have_pending = true;
}

static void writer_flush(writer *w)
{
	if (w->have_pending)
		writer_emit(w, &w->pending);
	w->have_pending = false;
}

/* Reading a run in order. */
typedef struct cursor {
	const run *r;
	size_t blk;
	const unsigned char *p, *end; /* the current block's unread records */
	rel_rec cur;
	bool valid;
} cursor;

static const unsigned char *block_end(const run *r, size_t blk)
{
	return r->bytes + (blk + 1 < r->nblocks ? r->blocks[blk + 1].off : r->nbytes);
}

static void cursor_enter(cursor *c, size_t blk)
{
	const block *b = &c->r->blocks[blk];
	c->blk = blk;
	c->p = c->r->bytes + b->off;
	c->end = block_end(c->r, blk);
	c->cur = (rel_rec){ b->dir, b->rel, b->forkseg, fp_get(&c->p) };
}

static void cursor_start(cursor *c, const run *r)
{
	c->r = r;
	c->valid = r->nblocks > 0;
	if (c->valid)
		cursor_enter(c, 0);
}

static void cursor_next(cursor *c)
{
	if (c->p < c->end) {
		uint64_t token = varint_get(&c->p);
		c->cur.rel += (uint32_t)(token >> 3);
		c->cur.forkseg = (uint32_t)(token >> 1 & 3);
		if (token & 1)
			c->cur.forkseg |= (uint32_t)varint_get(&c->p) << 2;
		c->cur.fp = fp_get(&c->p);
	} else if (c->blk + 1 < c->r->nblocks)
		cursor_enter(c, c->blk + 1);
	else
		c->valid = false;
}

/* ---- building ---------------------------------------------------------------------------- */

typedef void (*feed_fn)(void *src, writer *w);

/* Encodes what feed gives, in two passes: one to size the arrays, one to fill them. */
static run encode(feed_fn feed, void *src)
{
	run out = { 0 };
	writer w = { .out = &out };
	feed(src, &w);
	writer_flush(&w);
	size_t nblocks = w.nblocks, nbytes = w.nbytes;
	out.blocks = xmalloc((nblocks ? nblocks : 1) * sizeof(*out.blocks));
	out.bytes = xmalloc(nbytes ? nbytes : 1);
	w = (writer){ .out = &out };
	feed(src, &w);
	writer_flush(&w);
	out.nblocks = nblocks;
	out.nbytes = nbytes;
	return out;
}

typedef struct sorted_raw {
	const rel_rec *recs;
	size_t n;
} sorted_raw;

static void feed_raw(void *src, writer *w)
{
	const sorted_raw *s = src;
	for (size_t i = 0; i < s->n; i++)
		writer_add(w, &s->recs[i]);
}

static void run_free(run *r)
{
	free(r->blocks);
	free(r->bytes);
	memset(r, 0, sizeof(*r));
}

static void flush_raw(base_files *b)
{
	if (b->nraw == 0)
		return;
	qsort(b->raw, b->nraw, sizeof(*b->raw), rec_cmp);
	sorted_raw s = { b->raw, b->nraw };
	b->runs = xrealloc(b->runs, (b->nruns + 1) * sizeof(*b->runs));
	b->runs[b->nruns++] = encode(feed_raw, &s);
	b->nraw = 0;
}

/* The runs merged: a heap of cursors, smallest key on top. */
typedef struct merge {
	cursor *c;
	size_t n;
	const run *runs;
	size_t nruns;
} merge;

static void heap_down(merge *m, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, min = i;
		if (l < m->n && rec_cmp(&m->c[l].cur, &m->c[min].cur) < 0)
			min = l;
		if (r < m->n && rec_cmp(&m->c[r].cur, &m->c[min].cur) < 0)
			min = r;
		if (min == i)
			return;
		cursor t = m->c[i];
		m->c[i] = m->c[min];
		m->c[min] = t;
		i = min;
	}
}

static void feed_merge(void *src, writer *w)
{
	merge *m = src;
	m->n = 0;
	for (size_t i = 0; i < m->nruns; i++) {
		cursor_start(&m->c[m->n], &m->runs[i]);
		if (m->c[m->n].valid)
			m->n++;
	}
	for (size_t i = m->n; i-- > 0;)
		heap_down(m, i);
	while (m->n > 0) {
		writer_add(w, &m->c[0].cur);
		cursor_next(&m->c[0]);
		if (!m->c[0].valid)
			m->c[0] = m->c[--m->n];
		heap_down(m, 0);
	}
}

base_files *base_files_new(void)
{
	base_files *b = xcalloc(1, sizeof(*b));
	b->adding_others.size = sizeof(other_rec);
	return b;
}

void base_files_add(base_files *b, const char *name, int64_t mtime_ns)
{
	uint64_t dir[2];
	uint32_t rel, forkseg;
	uint32_t fp = base_files_mtime_fp(mtime_ns);
	if (parse_rel(name, dir, &rel, &forkseg)) {
		if (b->raw == NULL)
			b->raw = xmalloc(RUN_FILES * sizeof(*b->raw));
		b->raw[b->nraw++] = (rel_rec){ dir_id(b, dir), rel, forkseg, fp };
		if (b->nraw == RUN_FILES)
			flush_raw(b);
		return;
	}
	other_rec *o = recs_add(&b->adding_others);
	hash128(name, strlen(name), o->name);
	o->fp = fp;
}

void base_files_finish(base_files *b)
{
	flush_raw(b);
	free(b->raw);
	b->raw = NULL;
	if (b->nruns == 1)
		b->table = b->runs[0];
	else if (b->nruns > 1) {
		merge m = { xmalloc(b->nruns * sizeof(cursor)), 0, b->runs, b->nruns };
		b->table = encode(feed_merge, &m);
		free(m.c);
		for (size_t i = 0; i < b->nruns; i++)
			run_free(&b->runs[i]);
	}
	free(b->runs);
	b->runs = NULL;
	b->nruns = 0;

	b->nothers = b->adding_others.n;
	b->others = recs_take(&b->adding_others);
	if (b->nothers > 0)
		qsort(b->others, b->nothers, sizeof(*b->others), hash128_cmp);
	for (size_t i = 1; i < b->nothers; i++)
		if (hash128_cmp(&b->others[i - 1], &b->others[i]) == 0)
			b->others[i - 1].fp = b->others[i].fp = 0;
}

bool base_files_find(const base_files *b, const char *name, uint32_t *fp)
{
	uint64_t dir[2];
	uint32_t rel, forkseg;
	if (!parse_rel(name, dir, &rel, &forkseg)) {
		other_rec key = { { 0, 0 }, 0 };
		hash128(name, strlen(name), key.name);
		const other_rec *o = b->nothers == 0
			? NULL
			: bsearch(&key, b->others, b->nothers, sizeof(*b->others), hash128_cmp);
		if (o != NULL)
			*fp = o->fp;
		return o != NULL;
	}
	rel_rec key = { dir_find(b, dir), rel, forkseg, 0 };
	if (key.dir == 0)
		return false;
	/* the last block whose first key is at or before key */
	size_t lo = 0, hi = b->table.nblocks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const block *m = &b->table.blocks[mid];
		rel_rec first = { m->dir, m->rel, m->forkseg, 0 };
		if (rec_cmp(&first, &key) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	cursor c = { .r = &b->table, .valid = true };
	cursor_enter(&c, lo - 1);
	for (;;) {
		int cmp = rec_cmp(&c.cur, &key);
		if (cmp == 0) {
			*fp = c.cur.fp;
			return true;
		}
		if (cmp > 0 || c.p >= c.end)
			return false;
		cursor_next(&c);
	}
}

uint32_t base_files_mtime_fp(int64_t mtime_ns)
{
	if (mtime_ns == INT64_MIN)
		return 0;
	uint64_t h[2];
	hash128(&mtime_ns, sizeof(mtime_ns), h);
	uint32_t fp = (uint32_t)h[0];
	return fp != 0 ? fp : 1;
}

void base_files_free(base_files *b)
{
	if (b == NULL)
		return;
	free(b->dirs);
	free(b->raw);
	for (size_t i = 0; i < b->nruns; i++)
		run_free(&b->runs[i]);
	free(b->runs);
	run_free(&b->table);
	recs_free(&b->adding_others);
	free(b->others);
	free(b);
}
