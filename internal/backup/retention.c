/*
 * delete: retention over a repository of full and delta backups and their WAL (reference
 * §14), with walc's differences: backups are ordered by their start time from metadata (name
 * only as a fallback) so a timeline reset cannot invert retention; every ancestor of a kept
 * delta is kept; WAL is deleted only where no kept backup can need it; `everything` removes
 * only basebackups_005/ and wal_005/. A dry run unless confirm is set.
 */
#include "internal/backup/backup.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/pg/pg.h"



typedef struct bk {
	char *name;
	backup_sentinel s;
	bool permanent;
	time_t sec; /* start time, or the sentinel's mtime */
	long nsec;
	uint32_t tli;
	uint64_t seg;	   /* start segment number */
	uint64_t end_seg;  /* segment holding finish LSN - 1 */
	bool keep;
	bool gone;		   /* selected for deletion */
} bk;

typedef struct set {
	bk *b;
	size_t n;
	uint64_t segsize;
	claim_list running; /* pushes still writing: their base, objects and WAL are kept */
	claim_list stale;	/* claims of pushes that died: their objects are garbage */
} set;

static int by_time(const void *a, const void *b)
{
	const bk *x = a, *y = b;
	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	if (x->nsec != y->nsec)
		return x->nsec < y->nsec ? -1 : 1;
	return strcmp(x->name, y->name);
}

static bool token24(const char *s, uint32_t *tli, uint64_t *seg, uint64_t segsize)
{
	for (const char *p = s; *p; p++) {
		size_t n = 0;
		while (p[n] && ((p[n] >= '0' && p[n] <= '9') || (p[n] >= 'A' && p[n] <= 'F')))
			n++;
		if (n >= 24) {
			char name[WAL_NAME_LEN + 1];
			snprintf(name, sizeof(name), "%.24s", p);
			return wal_name_parse(name, segsize, tli, seg) == E_OK;
		}
		if (n > 0)
			p += n - 1;
	}
	return false;
}

static void set_free(set *st)
{
	for (size_t i = 0; i < st->n; i++) {
		free(st->b[i].name);
		catalog_sentinel_free(&st->b[i].s);
	}
	free(st->b);
	catalog_claims_free(&st->running);
	catalog_claims_free(&st->stale);
	memset(st, 0, sizeof(*st));
}

static bk *find(set *st, const char *name);

static void move_claim(claim_list *to, claim_info *c)
{
	to->items = xrealloc(to->items, (to->len + 1) * sizeof(*to->items));
	to->items[to->len++] = *c;
	memset(c, 0, sizeof(*c));
}

/*
 * Sorts a listing of claims into pushes to spare (running) and dead ones (stale). A claim
 * whose sentinel appeared after the backups were listed is a push that finished meanwhile:
 * for this plan it is still running, so that its base is not deleted under it.
 */
static err_code sort_claims(repo *r, set *st, claim_list *all, claim_list *running,
							claim_list *stale)
{
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < all->len; i++) {
		claim_info *c = &all->items[i];
		if (c->state == CLAIM_RUNNING) {
			move_claim(running, c);
		} else if (c->state == CLAIM_DEAD) {
			move_claim(stale, c);
		} else if (find(st, c->name) == NULL) {
			claim_info full;
			rc = catalog_claim_read(r, c->key, &full);
			if (rc == E_OK) {
				full.state = CLAIM_RUNNING;
				move_claim(running, &full);
			} else if (rc == E_NOTFOUND || rc == E_CORRUPT) {
				err_clear();
				rc = E_OK;
			}
		}
	}
	catalog_claims_free(all);
	return rc;
}

static err_code load(repo *r, const config *cfg, set *st)
{
	backup_refs refs;
	claim_list claims;
	memset(st, 0, sizeof(*st));
	st->segsize = (uint64_t)cfg->pg_wal_size_mb << 20;
	/* Claims before backups: a push that finishes in between is seen as running. */
	TRY(catalog_claims(r, &claims));
	err_code lrc = catalog_backups(r, &refs);
	if (lrc != E_OK) {
		catalog_claims_free(&claims);
		return lrc;
	}
	st->b = xcalloc(refs.len ? refs.len : 1, sizeof(bk));
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < refs.len; i++) {
		bk *b = &st->b[st->n];
		b->name = xstrdup(refs.items[i].name);
		b->sec = refs.items[i].mtime;
		b->nsec = refs.items[i].mtime_nsec;
		st->n++;
		rc = catalog_sentinel_read(r, b->name, &b->s);
		if (rc == E_NOTFOUND) { /* deleted since the listing (by another delete) */
			err_clear();
			rc = E_OK;
			free(b->name);
			memset(b, 0, sizeof(*b));
			st->n--;
			continue;
		}
		if (rc != E_OK)
			break;
		b->permanent = catalog_permanent(r, b->name, &b->s);
		const char *start = b->s.start_time;
		time_t sec;
		long nsec;
		if (start != NULL && time_parse_rfc3339(start, &sec, &nsec)) {
			b->sec = sec;
			b->nsec = nsec;
		}
		if (!token24(b->name, &b->tli, &b->seg, st->segsize))
			rc = err_set(E_CORRUPT, "backup name %s has no WAL segment in it", b->name);
		uint64_t fin = b->s.finish_lsn > 0 ? b->s.finish_lsn - 1 : 0;
		b->end_seg = fin / st->segsize > b->seg ? fin / st->segsize : b->seg;
	}
	catalog_backups_free(&refs);
	if (rc == E_OK)
		qsort(st->b, st->n, sizeof(bk), by_time);
	if (rc == E_OK)
		rc = sort_claims(r, st, &claims, &st->running, &st->stale);
	else
		catalog_claims_free(&claims);
	return rc;
}

static bk *find(set *st, const char *name)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(st->b[i].name, name) == 0)
			return &st->b[i];
	return NULL;
}

/* A kept delta needs its whole chain, and a running delta push its base. */
static void keep_ancestors(set *st)
{
	for (size_t i = 0; i < st->running.len; i++) {
		bk *base = st->running.items[i].delta_from ? find(st, st->running.items[i].delta_from)
												   : NULL;
		if (base != NULL && !base->keep) {
			log_info("keeping %s: backup-push of %s (host %s) is based on it", base->name,
					 st->running.items[i].name,
					 st->running.items[i].hostname ? st->running.items[i].hostname : "?");
			base->keep = true;
		}
	}
	for (size_t i = 0; i < st->n; i++) {
		bk *b = &st->b[i];
		for (int guard = 0; b != NULL && b->keep && b->s.is_delta && guard < 100000; guard++) {
			bk *parent = find(st, b->s.delta_from);
			if (parent == NULL)
				break;
			parent->keep = true;
			b = parent;
		}
	}
}

/*
 * WAL a kept backup may need: from its start onward, on its timeline or a later one (recovery
 * follows promotions). A permanent backup out of the window pins only its own range.
 */
static bool wal_needed(const set *st, uint32_t tli, uint64_t seg)
{
	for (size_t i = 0; i < st->n; i++) {
		const bk *b = &st->b[i];
		if (!b->keep)
			continue;
		if (b->permanent && !b->gone && b->tli == tli && seg >= b->seg && seg <= b->end_seg)
			return true;
		if (!b->permanent && tli >= b->tli && seg >= b->seg)
			return true;
	}
	for (size_t i = 0; i < st->running.len; i++) {
		const claim_info *c = &st->running.items[i];
		if (tli >= c->timeline && seg >= c->start_lsn / st->segsize)
			return true;
	}
	return false;
}

/* How a folder without a sentinel is claimed: 1 running push, -1 dead push, 0 no claim. */
static int claimed(const set *st, const char *name)
{
	for (size_t i = 0; i < st->running.len; i++)
		if (strcmp(st->running.items[i].name, name) == 0)
			return 1;
	for (size_t i = 0; i < st->stale.len; i++)
		if (strcmp(st->stale.items[i].name, name) == 0)
			return -1;
	return 0;
}

/*
 * Whether mtime predates the start of every kept backup (not counting permanent ones out of
 * the window), to the nanosecond: a push that ended the same second a kept one began counts.
 */
static bool before_kept(const set *st, time_t sec, long nsec)
{
	for (size_t i = 0; i < st->n; i++) {
		const bk *b = &st->b[i];
		if (b->keep && !b->permanent &&
			(sec > b->sec || (sec == b->sec && nsec >= b->nsec)))
			return false;
	}
	return true;
}

typedef struct plan {
	obj_list del;
	uint64_t bytes;
} plan;

static void plan_add(plan *p, const obj_info *o)
{
	obj_list_add(&p->del, o->key, o->size, o->mtime, o->mtime_nsec);
	p->bytes += o->size;
}

/*
 * Hidden temporaries of writers killed mid-object (file storage): untouched for an hour and
 * not of a process alive here. A running writer's temporary grows as it writes.
 */
#define TEMP_MIN_AGE_S 3600

static err_code plan_temporaries(repo *r, bool backups, bool wal, plan *p)
{
	const char *dirs[2] = { backups ? REPO_BACKUP_DIR : NULL, wal ? REPO_WAL_DIR : NULL };
	time_t now = time(NULL);
	for (int d = 0; d < 2; d++) {
		if (dirs[d] == NULL)
			continue;
		obj_list t;
		TRY(storage_list_temporaries(r->st, dirs[d], &t));
		for (size_t i = 0; i < t.len; i++) {
			long pid = storage_temporary_pid(t.items[i].key);
			bool alive = pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
			if (now - t.items[i].mtime >= TEMP_MIN_AGE_S && !alive)
				plan_add(p, &t.items[i]);
		}
		obj_list_free(&t);
	}
	return E_OK;
}

/* Backups marked gone (sentinel first, then the folder) and WAL nobody kept needs. */
static err_code plan_objects(repo *r, set *st, bool backups, bool wal, bool orphans, bool every,
						   plan *p)
{
	obj_list objs;
	memset(p, 0, sizeof(*p));
	if (backups) {
		TRY(storage_list(r->st, REPO_BACKUP_DIR, true, &objs));
		/* Sentinels first: a backup stops existing before its parts go. */
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < objs.len; i++) {
				const char *rest = objs.items[i].key + strlen(REPO_BACKUP_DIR);
				bool sentinel = str_has_suffix(rest, SENTINEL_SUFFIX);
				if ((pass == 0) != sentinel)
					continue;
				size_t n = sentinel ? strlen(rest) - strlen(SENTINEL_SUFFIX) : strcspn(rest, "/");
				char *name = xasprintf("%.*s", (int)n, rest);
				bk *b = find(st, name);
				uint32_t tli;
				uint64_t seg;
				/*
				 * An object of no backup (a failed push) goes only if older than every kept
				 * backup's start: a push still running writes objects newer than that.
				 */
				int by = b == NULL ? claimed(st, name) : 0;
				bool orphan = b == NULL && orphans && by <= 0 &&
					(by < 0 ||
					 (before_kept(st, objs.items[i].mtime, objs.items[i].mtime_nsec) &&
					  token24(name, &tli, &seg, st->segsize) && !wal_needed(st, tli, seg)));
				if ((every && by <= 0) || (b != NULL ? b->gone : orphan))
					plan_add(p, &objs.items[i]);
				free(name);
			}
		obj_list_free(&objs);
	}
	if (orphans)
		TRY(plan_temporaries(r, backups, wal, p));
	if (every) {
		/* An emptied repository belongs to no cluster any more. */
		obj_info info;
		if (storage_stat(r->st, CATALOG_CLUSTER_MARKER, &info) == E_OK) {
			info.key = (char *)(uintptr_t)CATALOG_CLUSTER_MARKER;
			plan_add(p, &info);
		}
		err_clear();
	}
	if (wal) {
		TRY(storage_list(r->st, REPO_WAL_DIR, false, &objs));
		for (size_t i = 0; i < objs.len; i++) {
			uint32_t tli;
			uint64_t seg;
			const char *base = objs.items[i].key + strlen(REPO_WAL_DIR);
			/* Objects without a segment (timeline histories) are never removed. */
			if (every || (token24(base, &tli, &seg, st->segsize) && !wal_needed(st, tli, seg)))
				plan_add(p, &objs.items[i]);
		}
		obj_list_free(&objs);
	}
	return E_OK;
}

static err_code execute(repo *r, plan *p, bool confirm, FILE *out);

/*
 * Before backups are deleted: record which (the intent a delta push checks after claiming its
 * name), then look again for pushes that started since the plan was made with one of them as
 * their base. Between the two records one side always sees the other.
 */
static err_code announce(repo *r, set *st, bool *announced)
{
	const char **names = xcalloc(st->n ? st->n : 1, sizeof(*names));
	size_t n = 0;
	*announced = false;
	for (size_t i = 0; i < st->n; i++)
		if (st->b[i].gone)
			names[n++] = st->b[i].name;
	err_code rc = E_OK;
	if (n > 0) {
		rc = catalog_deleting_begin(r, names, n);
		*announced = rc == E_OK;
	}
	claim_list all, running = { 0 }, stale = { 0 };
	if (rc == E_OK && n > 0 && (rc = catalog_claims(r, &all)) == E_OK &&
		(rc = sort_claims(r, st, &all, &running, &stale)) == E_OK) {
		for (size_t i = 0; rc == E_OK && i < running.len; i++) {
			bk *base = running.items[i].delta_from ? find(st, running.items[i].delta_from) : NULL;
			if (base != NULL && base->gone)
				rc = err_set(E_EXISTS, "backup-push of %s, based on %s, started meanwhile; "
									   "nothing was deleted: run delete again",
							 running.items[i].name, base->name);
		}
	}
	catalog_claims_free(&running);
	catalog_claims_free(&stale);
	free(names);
	return rc;
}

/* Plans what the flags select and lists or deletes it. */
static err_code plan_and_run(repo *r, set *st, bool backups, bool wal, bool orphans, bool every,
							 bool confirm, FILE *out)
{
	plan p;
	bool announced = false;
	err_code rc = plan_objects(r, st, backups, wal, orphans, every, &p);
	if (rc == E_OK && confirm)
		rc = announce(r, st, &announced);
	if (rc == E_OK)
		rc = execute(r, &p, confirm, out);
	if (announced)
		catalog_deleting_end(r);
	obj_list_free(&p.del);
	return rc;
}

/* Delete commands that would remove what a running push needs are refused. */
static err_code running_push_error(const claim_info *c, const char *why)
{
	return err_set(E_EXISTS, "backup-push of %s (host %s, pid %ld, started %s) is running%s; "
							 "nothing was deleted",
				   c->name, c->hostname ? c->hostname : "?", c->pid,
				   c->started ? c->started : "?", why);
}

static err_code execute(repo *r, plan *p, bool confirm, FILE *out)
{
	if (confirm) {
		/* Batched where the store has batch deletes (S3 DeleteObjects, Azure Blob Batch). */
		const char **keys = xcalloc(p->del.len + 1, sizeof(*keys));
		for (size_t i = 0; i < p->del.len; i++)
			keys[i] = p->del.items[i].key;
		err_code rc = storage_remove_many(r->st, keys, p->del.len);
		free(keys);
		TRY(rc);
	}
	for (size_t i = 0; i < p->del.len; i++)
		fprintf(out, "%s %s\n", confirm ? "deleted" : "would delete", p->del.items[i].key);
	log_info("%s %zu objects (%.1f MiB)%s", confirm ? "deleted" : "would delete", p->del.len,
			 (double)p->bytes / 1048576, confirm ? "" : "; add --confirm to delete them");
	return E_OK;
}

/* Everything older than target goes, except permanent backups and what kept ones need. */
static err_code delete_older(repo *r, set *st, size_t target, bool confirm, FILE *out)
{
	for (size_t i = 0; i < st->n; i++) {
		st->b[i].keep = i >= target || st->b[i].permanent;
		st->b[i].gone = false;
	}
	keep_ancestors(st);
	for (size_t i = 0; i < st->n; i++)
		st->b[i].gone = !st->b[i].keep;
	log_info("keeping %s and everything newer", st->b[target].name);
	/* Leftovers of failed pushes older than what is kept go too, as in WAL-G. */
	return plan_and_run(r, st, true, true, true, false, confirm, out);
}

static err_code delta_target_error(const bk *b)
{
	return err_set(E_CONFIG,
				   "%s is a delta backup: the backups it is based on cannot be deleted. "
				   "Consider the FIND_FULL option",
				   b->name);
}

static size_t full_of(set *st, size_t i)
{
	const char *full = st->b[i].s.is_delta ? st->b[i].s.delta_full_name : st->b[i].name;
	for (size_t k = 0; k < st->n; k++)
		if (strcmp(st->b[k].name, full) == 0)
			return k;
	return i;
}

/* The oldest backup at or after a time, or the named one. */
static err_code resolve_point(set *st, const char *what, size_t *out)
{
	time_t sec;
	long nsec;
	for (size_t i = 0; i < st->n; i++)
		if (str_has_prefix(st->b[i].name, what) && strlen(what) >= 5) {
			*out = i;
			return E_OK;
		}
	if (!time_parse_rfc3339(what, &sec, &nsec))
		return err_set(E_CONFIG, "\"%s\" is neither a backup name nor an RFC 3339 time", what);
	if (sec > time(NULL))
		return err_set(E_CONFIG, "%s is in the future", what);
	for (size_t i = 0; i < st->n; i++)
		if (st->b[i].sec > sec || (st->b[i].sec == sec && st->b[i].nsec >= nsec)) {
			*out = i;
			return E_OK;
		}
	return err_set(E_NOTFOUND, "no backup at or after %s", what);
}

err_code backup_delete(repo *r, const config *cfg, const delete_options *o, FILE *out)
{
	set st;
	err_code rc = load(r, cfg, &st);
	if (rc != E_OK) {
		set_free(&st);
		return rc;
	}
	size_t target = 0;
	switch (o->mode) {
	case DELETE_RETAIN: {
		if (o->count < 1) {
			rc = err_set(E_CONFIG, "delete retain: the count must be at least 1");
			break;
		}
		/* Walk newest to oldest counting backups (or fulls only). */
		size_t seen = 0;
		bool found = false;
		for (size_t i = st.n; i-- > 0;) {
			if (o->modifier == MOD_FULL && st.b[i].s.is_delta)
				continue;
			if (++seen == (size_t)o->count) {
				target = i;
				found = true;
				break;
			}
		}
		if (!found) {
			log_info("No backup found for deletion: fewer than %d backups", o->count);
			break;
		}
		if (o->modifier == MOD_FIND_FULL)
			target = full_of(&st, target);
		/* WAL-G takes the older of the two targets, and only that one must not be a delta. */
		if (o->after != NULL) {
			size_t a;
			rc = resolve_point(&st, o->after, &a);
			if (rc != E_OK)
				break;
			if (o->modifier != MOD_NONE || st.b[a].s.is_delta)
				a = full_of(&st, a);
			target = a < target ? a : target;
		}
		if (st.b[target].s.is_delta) {
			rc = delta_target_error(&st.b[target]);
			break;
		}
		rc = delete_older(r, &st, target, o->confirm, out);
		break;
	}
	case DELETE_BEFORE:
		rc = resolve_point(&st, o->point, &target);
		if (rc != E_OK)
			break;
		if (o->modifier == MOD_FIND_FULL)
			target = full_of(&st, target);
		else if (st.b[target].s.is_delta) {
			rc = delta_target_error(&st.b[target]);
			break;
		}
		rc = delete_older(r, &st, target, o->confirm, out);
		break;
	case DELETE_EVERYTHING: {
		bool any_permanent = false;
		for (size_t i = 0; i < st.n; i++)
			any_permanent |= st.b[i].permanent;
		if (any_permanent && !o->force) {
			rc = err_set(E_CONFIG, "delete everything: permanent backups exist; use "
								   "`delete everything FORCE` to delete them too");
			break;
		}
		if (st.running.len > 0) {
			rc = running_push_error(&st.running.items[0], "");
			break;
		}
		for (size_t i = 0; i < st.n; i++) {
			st.b[i].keep = false;
			st.b[i].gone = true;
		}
		rc = plan_and_run(r, &st, true, true, true, true, o->confirm, out);
		break;
	}
	case DELETE_TARGET: {
		bk *t = NULL;
		if (o->user_data != NULL) {
			json_error_t jerr;
			json_t *want = json_loads(o->user_data, JSON_DECODE_ANY, &jerr);
			if (want == NULL) {
				rc = err_set(E_CONFIG, "--target-user-data is not valid JSON: %s", jerr.text);
				break;
			}
			for (size_t i = 0; i < st.n; i++)
				if (json_equal(st.b[i].s.user_data, want)) {
					if (t != NULL) {
						rc = err_set(E_CONFIG, "more than one backup has that user data");
						break;
					}
					t = &st.b[i];
				}
			json_decref(want);
			if (rc != E_OK)
				break;
		} else {
			t = find(&st, o->point);
		}
		if (t == NULL) {
			rc = err_set(E_NOTFOUND, "delete target: backup %s not found",
						 o->point ? o->point : "with that user data");
			break;
		}
		if (o->modifier == MOD_FIND_FULL)
			t = &st.b[full_of(&st, (size_t)(t - st.b))];
		/* The target and everything built on it, transitively. */
		for (size_t i = 0; i < st.n; i++)
			st.b[i].gone = &st.b[i] == t;
		for (bool grew = true; grew;) {
			grew = false;
			for (size_t i = 0; i < st.n; i++) {
				bk *b = &st.b[i];
				bk *parent = b->s.is_delta ? find(&st, b->s.delta_from) : NULL;
				if (!b->gone && parent != NULL && parent->gone)
					b->gone = grew = true;
			}
		}
		for (size_t i = 0; i < st.n; i++) {
			st.b[i].keep = !st.b[i].gone;
			if (st.b[i].gone && st.b[i].permanent) {
				rc = err_set(E_CONFIG, "delete target: %s is permanent", st.b[i].name);
				break;
			}
		}
		for (size_t i = 0; rc == E_OK && i < st.running.len; i++) {
			bk *base = st.running.items[i].delta_from ? find(&st, st.running.items[i].delta_from)
													  : NULL;
			if (base != NULL && base->gone)
				rc = running_push_error(&st.running.items[i], ", based on it");
		}
		if (rc != E_OK)
			break;
		rc = plan_and_run(r, &st, true, false, false, false, o->confirm, out);
		break;
	}
	case DELETE_GARBAGE: {
		/* Nothing kept is touched: only leftovers older than the oldest non-permanent backup. */
		bool any = false;
		for (size_t i = 0; i < st.n; i++) {
			st.b[i].keep = true;
			st.b[i].gone = false;
			any |= !st.b[i].permanent;
		}
		if (!any && !o->without_backup_check) {
			log_info("delete garbage: no non-permanent backup, nothing to do "
					 "(--without-backup-check deletes garbage anyway)");
			break;
		}
		if (!any)
			log_info("delete garbage: no non-permanent backup; deleting garbage anyway "
					 "(--without-backup-check): what no permanent backup needs");
		rc = plan_and_run(r, &st, o->modifier != MOD_ARCHIVES, o->modifier != MOD_BACKUPS,
						  true, false, o->confirm, out);
		break;
	}
	}
	set_free(&st);
	return rc;
}
