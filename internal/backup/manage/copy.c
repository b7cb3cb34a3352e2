/*
 * copy: backups and the WAL they need, from one repository to another, as stored (still
 * compressed and encrypted: no key is needed), as WAL-G's copy does. Every object is checked
 * after it is copied (repo_copy_object); a backup's sentinel goes last, after its base's, so an
 * interrupted copy lists no backup it does not hold whole; what the target holds already is
 * not copied again.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/backup/backup.h"
#include "internal/pg/pg.h"
#include "internal/pipe/pipe.h"

/* The order objects are published in: a phase after everything of the one before. */
typedef enum phase { PHASE_PAYLOAD, PHASE_METADATA, PHASE_SENTINEL } phase;

typedef struct entry {
	const char *key; /* borrowed from the source listing */
	uint64_t size;
	time_t mtime;
	phase phase;
	int depth;	  /* sentinels: a full backup 0, its deltas 1, 2, ... */
	bool mutable; /* metadata.json and sentinels change (backup-mark): replaced when they differ */
} entry;

typedef struct plan {
	repo_objs backups, wal; /* the source's basebackups_005/ and wal_005/, sorted */
	repo_objs root;		   /* its cluster marker */
	entry *e;
	size_t n, cap;
	char **names; /* the backups copied */
	size_t nnames;
} plan;

/* Added as found; the same key twice is merged once the plan is complete (plan_dedupe). */
static void plan_add(plan *p, const repo_obj *o, phase ph, int depth, bool mut)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 256;
		p->e = xrealloc(p->e, p->cap * sizeof(*p->e));
	}
	p->e[p->n++] = (entry){ o->key, o->size, o->mtime, ph, depth, mut };
}

static int info_cmp(const void *a, const void *b)
{
	return strcmp(((const repo_obj *)a)->key, ((const repo_obj *)b)->key);
}

/* The first item of a sorted listing whose key is not before key. */
static size_t lower_bound(const repo_objs *l, const char *key)
{
	size_t lo = 0, hi = l->len;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(l->items[mid].key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* key in a sorted listing, or NULL. */
static const repo_obj *find_key(const repo_objs *l, const char *key)
{
	size_t at = lower_bound(l, key);
	return at < l->len && strcmp(l->items[at].key, key) == 0 ? &l->items[at] : NULL;
}

/* A segment's name (or a .history's) without the codec's extension, "" for anything else. */
static void logical_name(const char *key, char out[WAL_NAME_LEN + 9])
{
	const char *base = key + strlen(REPO_WAL_DIR);
	size_t hex = strspn(base, "0123456789ABCDEF");
	out[0] = '\0';
	if (hex == 8 && str_has_prefix(base + 8, ".history"))
		snprintf(out, WAL_NAME_LEN + 9, "%.8s.history", base);
	else if (hex == WAL_NAME_LEN && (base[hex] == '\0' || base[hex] == '.'))
		snprintf(out, WAL_NAME_LEN + 9, "%.24s", base);
}

/* The segment an LSN is in, on tli. */
static void segment_of(uint64_t lsn, uint32_t tli, uint64_t seg_size, char out[WAL_NAME_LEN + 1])
{
	wal_name_format(out, tli, lsn / seg_size, seg_size);
}

typedef struct wal_range {
	char first[WAL_NAME_LEN + 1];
	char last[WAL_NAME_LEN + 1];
	uint64_t seg_size;
} wal_range;

/*
 * The segment size a backup's name was written with: the one whose segment of its start LSN
 * is the name's (WALG_PG_WAL_SIZE first), so that a copy needs no setting to find its WAL.
 * 0 when none is.
 */
static uint64_t segment_size_of(const char *wal_file, uint32_t tli, uint64_t lsn, uint64_t hint)
{
	char name[WAL_NAME_LEN + 1];
	segment_of(lsn, tli, hint, name);
	if (strcmp(name, wal_file) == 0)
		return hint;
	for (uint64_t size = 1u << 20; size <= (uint64_t)1 << 30; size <<= 1) {
		segment_of(lsn, tli, size, name);
		if (strcmp(name, wal_file) == 0)
			return size;
	}
	return 0;
}

/*
 * The backup's objects, its base's first (recursively), and the WAL from its start to its
 * end as WAL-G counts them (the segment before the start LSN to the finish LSN's).
 */
static err_code add_backup(repo *from, plan *p, const char *name, const copy_options *o,
						   int *depth, wal_range **ranges, size_t *nranges, int guard)
{
	if (guard > 1000)
		return err_set(E_CORRUPT, "copy: backup %s: its chain of bases does not end", name);
	char *sentinel_key = xasprintf(REPO_BACKUP_DIR "%s" SENTINEL_SUFFIX, name);
	const repo_obj *sk = find_key(&p->backups, sentinel_key);
	free(sentinel_key);
	if (sk == NULL)
		return err_set(E_NOTFOUND, "copy: backup %s has no sentinel in %s", name,
					   repo_describe(from));
	backup_sentinel s;
	TRY(catalog_sentinel_read(from, name, &s));
	err_code rc = E_OK;
	*depth = 0;
	if (s.is_delta) {
		int base_depth;
		rc = add_backup(from, p, s.delta_from, o, &base_depth, ranges, nranges, guard + 1);
		if (rc != E_OK)
			err_wrap(rc, "copy: the base of %s", name);
		*depth = base_depth + 1;
	}
	char *wal_file = catalog_wal_file_of(name);
	unsigned tli = 0;
	if (strlen(wal_file) != WAL_NAME_LEN || sscanf(wal_file, "%8x", &tli) != 1)
		tli = 0;
	uint64_t seg_size = tli ? segment_size_of(wal_file, tli, s.lsn, o->seg_size) : 0;
	if (rc == E_OK && seg_size == 0)
		rc = err_set(E_CORRUPT, "copy: backup %s: its name does not give the segment of its "
								"start LSN %llX for any WAL segment size",
					 name, (unsigned long long)s.lsn);
	free(wal_file);
	if (rc == E_OK) {
		*ranges = xrealloc(*ranges, (*nranges + 1) * sizeof(**ranges));
		wal_range *w = &(*ranges)[(*nranges)++];
		w->seg_size = seg_size;
		segment_of(s.lsn - 1, tli, seg_size, w->first);
		segment_of(s.finish_lsn, tli, seg_size, w->last);
		char *prefix = xasprintf(REPO_BACKUP_DIR "%s/", name);
		for (size_t i = 0; i < p->backups.len; i++) {
			const repo_obj *b = &p->backups.items[i];
			if (!str_has_prefix(b->key, prefix))
				continue;
			const char *rest = b->key + strlen(prefix);
			/*
			 * A running push's claim is no part of a finished backup, and a verification
			 * proves what was read in this repository, not the copy.
			 */
			if (str_has_prefix(rest, "walc_claim_") || strcmp(rest, CATALOG_VERIFIED) == 0)
				continue;
			bool meta = strcmp(rest, "metadata.json") == 0;
			plan_add(p, b, meta ? PHASE_METADATA : PHASE_PAYLOAD, 0, meta);
		}
		free(prefix);
		plan_add(p, sk, PHASE_SENTINEL, *depth, true);
		bool known = false;
		for (size_t i = 0; i < p->nnames && !known; i++)
			known = strcmp(p->names[i], name) == 0;
		if (!known) {
			p->names = xrealloc(p->names, (p->nnames + 1) * sizeof(*p->names));
			p->names[p->nnames++] = xstrdup(name);
		}
	}
	catalog_sentinel_free(&s);
	return rc;
}

/*
 * Every timeline history, and the segments (with their .backup and .partial files) in a
 * backup's range, or from its start on with history. A segment missing inside a range is an
 * error, as in WAL-G: the copy could not restore that backup.
 */
static err_code add_wal(plan *p, const wal_range *r, size_t nr, const copy_options *o)
{
	for (size_t i = 0; i < p->wal.len; i++) {
		const repo_obj *w = &p->wal.items[i];
		char name[WAL_NAME_LEN + 9];
		logical_name(w->key, name);
		bool take = str_has_suffix(name, ".history");
		for (size_t k = 0; k < nr && !take && name[0]; k++)
			take = strcmp(name, r[k].first) >= 0 &&
				(o->with_history || strcmp(name, r[k].last) <= 0);
		if (take)
			plan_add(p, w, PHASE_PAYLOAD, 0, false);
	}
	for (size_t k = 0; k < nr; k++) {
		uint32_t tli;
		uint64_t first, last;
		TRY(wal_name_parse(r[k].first, r[k].seg_size, &tli, &first));
		TRY(wal_name_parse(r[k].last, r[k].seg_size, &tli, &last));
		for (uint64_t seg = first; seg <= last; seg++) {
			char want[WAL_NAME_LEN + 1];
			wal_name_format(want, tli, seg, r[k].seg_size);
			/* the segment itself (with its codec's extension), not a .backup or .partial */
			char *prefix = xasprintf(REPO_WAL_DIR "%s", want);
			bool found = false;
			for (size_t i = lower_bound(&p->wal, prefix);
				 i < p->wal.len && str_has_prefix(p->wal.items[i].key, prefix) && !found; i++) {
				const char *rest = p->wal.items[i].key + strlen(prefix);
				found = rest[0] == '\0' ||
					(rest[0] == '.' && strchr(rest + 1, '.') == NULL && repo_is_codec_ext(rest + 1));
			}
			free(prefix);
			if (!found)
				return err_set(E_NOTFOUND, "copy: WAL segment %s, which backups need (%s to %s), "
										   "is missing from the source",
							   want, r[k].first, r[k].last);
		}
	}
	return E_OK;
}

static int entry_key_cmp(const void *a, const void *b)
{
	const entry *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	/* the same sentinel from several deltas: the least depth first, which is kept */
	return c ? c : (x->depth > y->depth) - (x->depth < y->depth);
}

static void plan_dedupe(plan *p)
{
	xqsort(p->e, p->n, sizeof(*p->e), entry_key_cmp);
	size_t k = 0;
	for (size_t i = 0; i < p->n; i++)
		if (k == 0 || strcmp(p->e[k - 1].key, p->e[i].key) != 0)
			p->e[k++] = p->e[i];
	p->n = k;
}

static int entry_cmp(const void *a, const void *b)
{
	const entry *x = a, *y = b;
	if (x->phase != y->phase)
		return (x->phase > y->phase) - (x->phase < y->phase);
	if (x->depth != y->depth)
		return (x->depth > y->depth) - (x->depth < y->depth);
	return strcmp(x->key, y->key);
}

typedef struct work {
	repo *from, *to;
	entry **todo;
	size_t n;
	atomic_size_t next;
	atomic_ullong bytes, server_side;
	progress prog;
} work;

static err_code copy_worker(void *arg)
{
	work *w = arg;
	for (;;) {
		TRY(cancel_check());
		size_t i = atomic_fetch_add(&w->next, 1);
		if (i >= w->n)
			return E_OK;
		bool inside;
		TRY(repo_copy_object(w->from, w->to, w->todo[i]->key, w->todo[i]->size, &inside));
		atomic_fetch_add(&w->bytes, w->todo[i]->size);
		atomic_fetch_add(&w->server_side, inside);
		log_debug("copied %s (%llu bytes%s)", w->todo[i]->key,
				  (unsigned long long)w->todo[i]->size, inside ? ", inside the store" : "");
		progress_add(&w->prog, w->todo[i]->size, 1);
	}
}

/* One group of entries at once, on up to concurrency threads. */
static err_code copy_group(work *w, entry **todo, size_t n, int concurrency)
{
	w->todo = todo;
	w->n = n;
	atomic_store(&w->next, 0);
	group *g = group_new();
	for (int i = 0; i < concurrency && (size_t)i < n; i++)
		if (group_go(g, copy_worker, w) != E_OK)
			break;
	err_code rc = group_wait(g);
	group_free(g);
	return rc;
}

/* The target must not be another cluster's repository. */
static err_code same_cluster(repo *from, repo *to)
{
	bool have_from, have_to;
	uint64_t a, b;
	TRY(catalog_marker_sysid(from, &have_from, &a));
	TRY(catalog_marker_sysid(to, &have_to, &b));
	if (have_from && have_to && a != b)
		return err_set(E_CONFIG, "copy: %s holds cluster %llu's backups, %s cluster %llu's: "
								 "copy into an empty prefix or one of the same cluster",
					   repo_describe(to), (unsigned long long)b,
					   repo_describe(from), (unsigned long long)a);
	return E_OK;
}

static err_code plan_build(repo *from, const copy_options *o, plan *p)
{
	TRY(repo_list(from, REPO_BACKUP_DIR, true, &p->backups));
	TRY(repo_list(from, REPO_WAL_DIR, false, &p->wal));
	xqsort(p->backups.items, p->backups.len, sizeof(repo_obj), info_cmp);
	xqsort(p->wal.items, p->wal.len, sizeof(repo_obj), info_cmp);
	char **names = NULL;
	size_t nnames = 0;
	if (o->backup_name != NULL) {
		names = xcalloc(1, sizeof(*names));
		TRY(catalog_resolve(from, o->backup_name, &names[0]));
		nnames = 1;
	} else {
		backup_refs refs;
		TRY(catalog_backups(from, &refs));
		names = xcalloc(refs.len + 1, sizeof(*names));
		for (size_t i = 0; i < refs.len; i++)
			names[nnames++] = xstrdup(refs.items[i].name);
		catalog_backups_free(&refs);
		if (nnames == 0) {
			free(names);
			return err_set(E_NOTFOUND, "copy: %s holds no backup", repo_describe(from));
		}
	}
	wal_range *ranges = NULL;
	size_t nranges = 0;
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < nnames; i++) {
		/* Copying every backup, one whose sentinel cannot be read is left, as retention leaves it. */
		backup_sentinel s;
		err_code src = o->backup_name == NULL ? catalog_sentinel_read(from, names[i], &s) : E_OK;
		if (src == E_OK && o->backup_name == NULL)
			catalog_sentinel_free(&s);
		else if (catalog_sentinel_skip(src, names[i], "it is not copied"))
			continue;
		int depth;
		rc = add_backup(from, p, names[i], o, &depth, &ranges, &nranges, 0);
	}
	if (rc == E_OK)
		rc = add_wal(p, ranges, nranges, o);
	repo_obj marker;
	if (rc == E_OK) {
		if (repo_stat(from, CATALOG_CLUSTER_MARKER, &marker) == E_OK) {
			/* the entries borrow their keys from listings: the marker gets one of its own */
			repo_objs_add(&p->root, CATALOG_CLUSTER_MARKER, marker.size, marker.mtime, 0);
			plan_add(p, &p->root.items[0], PHASE_PAYLOAD, 0, false);
		}
		err_clear();
		plan_dedupe(p);
	}
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(ranges);
	return rc;
}

/* What the target holds of key, by size; false when absent. */
static bool held(const repo_objs *l, const char *key, uint64_t *size)
{
	const repo_obj *o = find_key(l, key);
	if (o != NULL)
		*size = o->size;
	return o != NULL;
}

err_code backup_copy(repo *from, repo *to, const copy_options *o, copy_result *out)
{
	memset(out, 0, sizeof(*out));
	plan p = { 0 };
	repo_objs have_b = { 0 }, have_w = { 0 };
	entry **todo = NULL;
	err_code rc = same_cluster(from, to);
	if (rc == E_OK)
		rc = plan_build(from, o, &p);
	if (rc == E_OK)
		rc = repo_list(to, REPO_BACKUP_DIR, true, &have_b);
	if (rc == E_OK)
		rc = repo_list(to, REPO_WAL_DIR, false, &have_w);
	repo_obj marker;
	if (rc == E_OK && repo_stat(to, CATALOG_CLUSTER_MARKER, &marker) == E_OK)
		repo_objs_add(&have_b, CATALOG_CLUSTER_MARKER, marker.size, marker.mtime, 0);
	if (rc == E_OK) {
		err_clear();
		xqsort(have_b.items, have_b.len, sizeof(repo_obj), info_cmp);
		xqsort(have_w.items, have_w.len, sizeof(repo_obj), info_cmp);
	}
	size_t n = 0;
	uint64_t total = 0;
	time_t oldest = 0;
	if (rc == E_OK) {
		xqsort(p.e, p.n, sizeof(*p.e), entry_cmp);
		todo = xcalloc(p.n + 1, sizeof(*todo));
		/* Conflicts are found before anything is copied. */
		for (size_t i = 0; rc == E_OK && i < p.n; i++) {
			entry *e = &p.e[i];
			uint64_t size;
			bool there = held(str_has_prefix(e->key, REPO_WAL_DIR) ? &have_w : &have_b,
							  e->key, &size);
			if (there && size == e->size) {
				out->present++;
				continue;
			}
			if (there && !e->mutable && strcmp(e->key, CATALOG_CLUSTER_MARKER) != 0)
				rc = err_set(E_EXISTS, "copy: %s in %s has %llu bytes, the source's %llu: "
									   "not replaced",
							 e->key, repo_describe(to), (unsigned long long)size,
							 (unsigned long long)e->size);
			else if (!there || e->mutable) {
				todo[n++] = e;
				total += e->size;
				if (oldest == 0 || e->mtime < oldest)
					oldest = e->mtime;
			}
		}
	}
	if (rc == E_OK) {
		log_info("copy: %zu backup%s; %zu objects (%.1f MiB) to copy, %llu already in %s",
				 p.nnames, p.nnames == 1 ? "" : "s", n, (double)total / 1048576.0,
				 (unsigned long long)out->present, repo_describe(to));
		work w = { .from = from, .to = to };
		progress_start(&w.prog, "copy", total);
		/* Each phase whole before the next; sentinels a depth at a time. */
		for (size_t i = 0; rc == E_OK && i < n;) {
			size_t k = i;
			while (k < n && todo[k]->phase == todo[i]->phase && todo[k]->depth == todo[i]->depth)
				k++;
			rc = copy_group(&w, todo + i, k - i, o->concurrency);
			i = k;
		}
		out->copied = n;
		out->copied_bytes = atomic_load(&w.bytes);
		out->server_side = atomic_load(&w.server_side);
		out->backups = p.nnames;
		out->lag_seconds = n > 0 && rc == E_OK ? difftime(time(NULL), oldest) : 0;
		if (rc == E_OK)
			log_info("copy: %zu objects (%.1f MiB) copied%s and checked; %zu backup%s in %s",
					 n, (double)out->copied_bytes / 1048576.0,
					 out->server_side ? " (inside the store)" : "", p.nnames,
					 p.nnames == 1 ? "" : "s", repo_describe(to));
	}
	free(todo);
	for (size_t i = 0; i < p.nnames; i++)
		free(p.names[i]);
	free(p.names);
	free(p.e);
	repo_objs_free(&p.backups);
	repo_objs_free(&p.wal);
	repo_objs_free(&p.root);
	repo_objs_free(&have_b);
	repo_objs_free(&have_w);
	return rc;
}
