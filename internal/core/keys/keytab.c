/*
 * A sorted table of 128-bit keys with a few numbers each (core.h), in a few bytes a key when
 * neighbouring keys share their first half and differ little in the second, as the keys of a
 * folder's relation files do (pg_name_key): a restore of a cluster of 200,000 files then holds
 * a megabyte or two per backup, where records of 32 bytes a file took 6.4 MB.
 *
 * Keys are stored sorted, 64 to a block, each block's first key in an index searched by
 * bisection; within a block a key is the difference from the previous one in a variable-length
 * integer when the first halves are equal, else written whole, and each is followed by its
 * numbers as variable-length integers. Keys come in any order, so they are sorted in runs of
 * RUN_KEYS that are encoded as they fill, then merged into one table at the end.
 */
#include "internal/core/core.h"

#include <stdlib.h>
#include <string.h>

#define RUN_KEYS 16384u /* a run's raw records: 640 KiB */
#define BLOCK_KEYS 64u
#define VARINT_MAX 10 /* a uint64_t in 7-bit groups */
#define REC_MAX (VARINT_MAX + 2 * sizeof(uint64_t) + KEYTAB_FIELDS * VARINT_MAX)

typedef struct raw {
	uint64_t key[2];
	uint64_t f[KEYTAB_FIELDS];
} raw;

typedef struct block {
	uint64_t key[2]; /* the block's first key */
	uint64_t off;	 /* where its records start in bytes */
} block;

/* Sorted records, encoded: a run while adding, then the whole table. */
typedef struct run {
	block *blocks;
	size_t nblocks;
	unsigned char *bytes;
	size_t nbytes;
	size_t n; /* keys */
} run;

struct keytab {
	unsigned nfields;
	raw *raw; /* the run being filled */
	size_t nraw, raw_cap;
	run *runs;
	size_t nruns;
	run table; /* once finished */
	bool twice; /* a key was added twice */
};

static int key_cmp(const uint64_t a[2], const uint64_t b[2])
{
	return hash128_cmp(a, b);
}

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

/* ---- writing: two passes, the first only counting (out has no arrays), the second filling */

typedef struct writer {
	unsigned nfields;
	run *out;
	size_t nblocks, nbytes, n;
	raw prev;	 /* the record last written */
	raw pending; /* the record to write next, held until the one after differs */
	bool have_pending, twice;
} writer;

static void writer_emit(writer *w, const raw *r)
{
	run *o = w->out;
	unsigned char buf[REC_MAX];
	size_t len = 0;
	if (w->n % BLOCK_KEYS == 0) {
		if (o->blocks != NULL)
			o->blocks[w->nblocks] = (block){ { r->key[0], r->key[1] }, w->nbytes };
		w->nblocks++;
	} else if (r->key[0] == w->prev.key[0] && r->key[1] - w->prev.key[1] < (UINT64_C(1) << 63)) {
		len += varint_put(buf, (r->key[1] - w->prev.key[1]) << 1); /* even: a difference */
	} else {
		buf[len++] = 1; /* odd: the key whole */
		memcpy(buf + len, r->key, sizeof(r->key));
		len += sizeof(r->key);
	}
	for (unsigned i = 0; i < w->nfields; i++)
		len += varint_put(buf + len, r->f[i]);
	if (o->bytes != NULL)
		memcpy(o->bytes + w->nbytes, buf, len);
	w->nbytes += len;
	w->n++;
	w->prev = *r;
}

/* A key given twice, in one run or in two, is kept once with every number 0. */
static void writer_add(writer *w, const raw *r)
{
	if (w->have_pending && key_cmp(w->pending.key, r->key) == 0) {
		memset(w->pending.f, 0, sizeof(w->pending.f));
		w->twice = true;
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

/* ---- reading a run in order -------------------------------------------------------------- */

typedef struct cursor {
	const run *r;
	unsigned nfields;
	size_t blk, at;
	const unsigned char *p, *end; /* the current block's unread records */
	raw cur;
	bool valid;
} cursor;

static void fields_get(cursor *c)
{
	for (unsigned i = 0; i < c->nfields; i++)
		c->cur.f[i] = varint_get(&c->p);
}

static void cursor_enter(cursor *c, size_t blk)
{
	const run *r = c->r;
	c->blk = blk;
	c->at = blk * BLOCK_KEYS;
	c->p = r->bytes + r->blocks[blk].off;
	c->end = r->bytes + (blk + 1 < r->nblocks ? r->blocks[blk + 1].off : r->nbytes);
	c->cur.key[0] = r->blocks[blk].key[0];
	c->cur.key[1] = r->blocks[blk].key[1];
	fields_get(c);
}

static void cursor_start(cursor *c, const run *r, unsigned nfields)
{
	*c = (cursor){ .r = r, .nfields = nfields, .valid = r->nblocks > 0 };
	if (c->valid)
		cursor_enter(c, 0);
}

static void cursor_next(cursor *c)
{
	if (c->p < c->end) {
		uint64_t token = varint_get(&c->p);
		if (token & 1) {
			memcpy(c->cur.key, c->p, sizeof(c->cur.key));
			c->p += sizeof(c->cur.key);
		} else {
			c->cur.key[1] += token >> 1;
		}
		fields_get(c);
		c->at++;
	} else if (c->blk + 1 < c->r->nblocks) {
		cursor_enter(c, c->blk + 1);
	} else {
		c->valid = false;
	}
}

/* ---- building ---------------------------------------------------------------------------- */

typedef void (*feed_fn)(void *src, writer *w);

/* Encodes what feed gives, in two passes: one to size the arrays, one to fill them. */
static run encode(keytab *t, feed_fn feed, void *src)
{
	run out = { 0 };
	writer w = { .nfields = t->nfields, .out = &out };
	feed(src, &w);
	writer_flush(&w);
	size_t nblocks = w.nblocks, nbytes = w.nbytes;
	out.blocks = xmalloc((nblocks ? nblocks : 1) * sizeof(*out.blocks));
	out.bytes = xmalloc(nbytes ? nbytes : 1);
	w = (writer){ .nfields = t->nfields, .out = &out };
	feed(src, &w);
	writer_flush(&w);
	out.nblocks = nblocks;
	out.nbytes = nbytes;
	out.n = w.n;
	t->twice |= w.twice;
	return out;
}

static void feed_raw(void *src, writer *w)
{
	const keytab *t = src;
	for (size_t i = 0; i < t->nraw; i++)
		writer_add(w, &t->raw[i]);
}

static void run_free(run *r)
{
	free(r->blocks);
	free(r->bytes);
	memset(r, 0, sizeof(*r));
}

static void flush_raw(keytab *t)
{
	if (t->nraw == 0)
		return;
	xqsort(t->raw, t->nraw, sizeof(*t->raw), hash128_cmp);
	t->runs = xrealloc(t->runs, (t->nruns + 1) * sizeof(*t->runs));
	t->runs[t->nruns++] = encode(t, feed_raw, t);
	t->nraw = 0;
}

/* The runs merged: a heap of cursors, smallest key on top. */
typedef struct merge {
	cursor *c;
	size_t n;
	const keytab *t;
} merge;

static void heap_down(merge *m, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, min = i;
		if (l < m->n && key_cmp(m->c[l].cur.key, m->c[min].cur.key) < 0)
			min = l;
		if (r < m->n && key_cmp(m->c[r].cur.key, m->c[min].cur.key) < 0)
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
	for (size_t i = 0; i < m->t->nruns; i++) {
		cursor_start(&m->c[m->n], &m->t->runs[i], m->t->nfields);
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

keytab *keytab_new(unsigned nfields)
{
	if (nfields > KEYTAB_FIELDS)
		abort(); /* a caller's mistake, not input */
	keytab *t = xcalloc(1, sizeof(*t));
	t->nfields = nfields;
	return t;
}

void keytab_add(keytab *t, const uint64_t key[2], const uint64_t *fields)
{
	if (t->nraw == t->raw_cap) {
		t->raw_cap = t->raw_cap ? 2 * t->raw_cap : 64;
		t->raw = xrealloc(t->raw, t->raw_cap * sizeof(*t->raw));
	}
	raw *r = &t->raw[t->nraw++];
	*r = (raw){ { key[0], key[1] }, { 0 } };
	if (t->nfields > 0)
		memcpy(r->f, fields, t->nfields * sizeof(*fields));
	if (t->nraw == RUN_KEYS)
		flush_raw(t);
}

bool keytab_finish(keytab *t)
{
	flush_raw(t);
	free(t->raw);
	t->raw = NULL;
	t->nraw = t->raw_cap = 0;
	if (t->nruns == 1) {
		t->table = t->runs[0];
	} else if (t->nruns > 1) {
		merge m = { xmalloc(t->nruns * sizeof(cursor)), 0, t };
		t->table = encode(t, feed_merge, &m);
		free(m.c);
		for (size_t i = 0; i < t->nruns; i++)
			run_free(&t->runs[i]);
	}
	free(t->runs);
	t->runs = NULL;
	t->nruns = 0;
	return t->twice;
}

size_t keytab_count(const keytab *t)
{
	return t != NULL ? t->table.n : 0;
}

bool keytab_find(const keytab *t, const uint64_t key[2], uint64_t *fields, size_t *at)
{
	if (t == NULL || t->table.nblocks == 0)
		return false;
	/* the last block whose first key is at or before key */
	size_t lo = 0, hi = t->table.nblocks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (key_cmp(t->table.blocks[mid].key, key) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	cursor c = { .r = &t->table, .nfields = t->nfields, .valid = true };
	cursor_enter(&c, lo - 1);
	for (;;) {
		int cmp = key_cmp(c.cur.key, key);
		if (cmp == 0) {
			if (fields != NULL && t->nfields > 0)
				memcpy(fields, c.cur.f, t->nfields * sizeof(*fields));
			if (at != NULL)
				*at = c.at;
			return true;
		}
		if (cmp > 0 || c.p >= c.end)
			return false;
		cursor_next(&c);
	}
}

void keytab_each(const keytab *t, keytab_fn fn, void *arg)
{
	if (t == NULL)
		return;
	cursor c;
	for (cursor_start(&c, &t->table, t->nfields); c.valid; cursor_next(&c))
		fn(arg, c.cur.key, c.cur.f, c.at);
}

void keytab_free(keytab *t)
{
	if (t == NULL)
		return;
	free(t->raw);
	for (size_t i = 0; i < t->nruns; i++)
		run_free(&t->runs[i]);
	free(t->runs);
	run_free(&t->table);
	free(t);
}
