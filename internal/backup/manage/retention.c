/*
 * delete: retention over a repository of full and delta backups and their WAL. This file
 * reads the repository into plain data, has retplan.c decide, records the intent, and
 * deletes (or, without confirm, lists) what the plan holds.
 */
#include "internal/backup/manage/retention_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/pg/pg.h"

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
static err_code sort_claims(repo *r, retain_set *st, claim_list *all, claim_list *running,
							claim_list *stale)
{
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < all->len; i++) {
		claim_info *c = &all->items[i];
		if (c->state == CLAIM_RUNNING) {
			move_claim(running, c);
		} else if (c->state == CLAIM_DEAD) {
			move_claim(stale, c);
		} else if (retain_find(st, c->name) == NULL) {
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

static void skip(repo *r, retain_set *st, const char *name)
{
	st->skipped = xrealloc(st->skipped, (st->nskipped + 1) * sizeof(*st->skipped));
	st->skipped[st->nskipped++] = (retain_skipped){ xstrdup(name),
													catalog_permanent(r, name, NULL) };
}

#define SKIPPED_WHY "it is neither counted nor deleted, nor is WAL kept for it"

/* One listed backup into st (or its skipped list); E_OK when gone since the listing. */
static err_code load_one(repo *r, retain_set *st, const backup_ref *ref, bool have_sysid,
						 uint64_t sysid)
{
	retain_backup *b = &st->b[st->n];
	memset(b, 0, sizeof(*b));
	err_code rc = catalog_sentinel_read(r, ref->name, &b->s);
	if (rc == E_NOTFOUND) { /* deleted since the listing (by another delete) */
		err_clear();
		return E_OK;
	}
	if (catalog_sentinel_skip(rc, ref->name, SKIPPED_WHY)) {
		skip(r, st, ref->name);
		return E_OK;
	}
	TRY(rc);
	b->name = xstrdup(ref->name);
	st->n++;
	if (!retain_position(b->name, st->segsize, &b->tli, &b->seg)) {
		log_warn("skipping backup %s: its name holds no WAL segment; " SKIPPED_WHY, b->name);
		catalog_sentinel_free(&b->s);
		free(b->name);
		st->n--;
		skip(r, st, ref->name);
		return E_OK;
	}
	b->ref = *ref;
	b->ref.name = b->name;
	b->ref.other_cluster = have_sysid && b->s.have_system_id && b->s.system_id != sysid;
	b->sec = ref->mtime;
	b->nsec = ref->mtime_nsec;
	b->permanent = catalog_permanent(r, b->name, &b->s);
	time_t sec;
	long nsec;
	if (b->s.start_time != NULL && time_parse_rfc3339(b->s.start_time, &sec, &nsec)) {
		b->sec = sec;
		b->nsec = nsec;
	}
	/*
	 * The time `before TIME` and `--after TIME` compare, as WAL-G takes it: when the sentinel
	 * was written (backup-list's time, so that a time copied from there finds its backup), or
	 * the start time with --use-sentinel-time.
	 */
	b->pick_sec = st->use_start_time ? b->sec : ref->mtime;
	b->pick_nsec = st->use_start_time ? b->nsec : ref->mtime_nsec;
	b->finish_sec = b->sec;
	if (b->s.finish_time != NULL && time_parse_rfc3339(b->s.finish_time, &sec, &nsec))
		b->finish_sec = sec;
	retain_set_range(b, st->segsize);
	verify_record v;
	bool found;
	TRY(catalog_verified_get(r, b->name, &b->s, &v, &found));
	b->verified = found && v.passed;
	if (b->verified)
		b->verified_at = xstrdup(v.at_text);
	catalog_verified_free(&v);
	return E_OK;
}

static err_code load(repo *r, const backup_settings *cfg, bool use_start_time, retain_set *st)
{
	backup_refs refs;
	claim_list claims;
	memset(st, 0, sizeof(*st));
	st->use_start_time = use_start_time;
	st->segsize = (uint64_t)cfg->wal->pg->pg_wal_size_mb << 20;
	/* Claims before backups: a push that finishes in between is seen as running. */
	TRY(catalog_claims(r, &claims));
	bool have_sysid;
	uint64_t sysid = 0;
	err_code rc = catalog_marker_sysid(r, &have_sysid, &sysid);
	if (rc == E_OK)
		rc = catalog_backups(r, &refs);
	if (rc != E_OK) {
		catalog_claims_free(&claims);
		return rc;
	}
	st->b = xcalloc(refs.len ? refs.len : 1, sizeof(retain_backup));
	for (size_t i = 0; rc == E_OK && i < refs.len; i++)
		rc = load_one(r, st, &refs.items[i], have_sysid, sysid);
	catalog_backups_free(&refs);
	if (rc == E_OK)
		retain_sort(st);
	if (rc == E_OK)
		rc = sort_claims(r, st, &claims, &st->running, &st->stale);
	else
		catalog_claims_free(&claims);
	return rc;
}

/*
 * Before backups are deleted: record which (the intent a delta push checks after claiming its
 * name), then look again for pushes that started since the plan was made with one of them as
 * their base. Between the two records one side always sees the other.
 */
static err_code announce(repo *r, retain_set *st, bool *announced)
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
			retain_backup *base = retain_find(st, running.items[i].delta_from);
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

static void utc_text(time_t t, char out[32])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The backup a key of basebackups_005/ belongs to (its folder or its sentinel), or NULL. */
static char *backup_of(const char *key)
{
	if (strncmp(key, REPO_BACKUP_DIR, strlen(REPO_BACKUP_DIR)) != 0)
		return NULL;
	const char *name = key + strlen(REPO_BACKUP_DIR);
	size_t n = strcspn(name, "/");
	if (name[n] != '/' && str_has_suffix(name, SENTINEL_SUFFIX))
		n = strlen(name) - strlen(SENTINEL_SUFFIX);
	return n > 0 ? xasprintf("%.*s", (int)n, name) : NULL;
}

static bool listed(char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

/*
 * S3 Object Lock: an object whose retention has not run out cannot be deleted yet (a delete
 * would only hide it behind a delete marker). Such objects stay and are said to stay; a
 * backup with one keeps all of its objects, the sentinel with them, so it stays whole and
 * listed until a later delete can remove it all.
 */
static err_code spare_locked(repo *r, retain_plan *p, FILE *out)
{
	const char **keys = xcalloc(p->del.len + 1, sizeof(*keys));
	time_t *until = xcalloc(p->del.len + 1, sizeof(*until));
	for (size_t i = 0; i < p->del.len; i++)
		keys[i] = p->del.items[i].key;
	err_code rc = repo_locked_until(r, keys, p->del.len, until);
	char **held = NULL;
	size_t nheld = 0;
	time_t last = 0;
	for (size_t i = 0; rc == E_OK && i < p->del.len; i++) {
		if (until[i] == 0)
			continue;
		last = until[i] > last ? until[i] : last;
		char *b = backup_of(keys[i]);
		if (b != NULL && !listed(held, nheld, b)) {
			held = xrealloc(held, (nheld + 1) * sizeof(*held));
			held[nheld++] = b;
		} else {
			free(b);
		}
	}
	repo_objs kept = { 0 };
	size_t spared = 0;
	for (size_t i = 0; rc == E_OK && last != 0 && i < p->del.len; i++) {
		repo_obj *o = &p->del.items[i];
		char *b = backup_of(o->key);
		bool hold = until[i] != 0 || (b != NULL && listed(held, nheld, b));
		free(b);
		if (!hold) {
			repo_objs_add(&kept, o->key, o->size, o->mtime, o->mtime_nsec);
			continue;
		}
		spared++;
		p->bytes -= o->size;
		char when[32];
		utc_text(until[i], when);
		if (until[i] != 0)
			fprintf(out, "kept %s (locked until %s)\n", o->key, when);
		else
			fprintf(out, "kept %s (its backup has locked objects)\n", o->key);
	}
	if (rc == E_OK && last != 0) {
		char when[32];
		utc_text(last, when);
		log_warn("%zu objects kept (%zu backups whole): S3 Object Lock forbids deleting them "
				 "before their retention ends, the last at %s",
				 spared, nheld, when);
		repo_objs_free(&p->del);
		p->del = kept;
	}
	for (size_t i = 0; i < nheld; i++)
		free(held[i]);
	free(held);
	free(until);
	free(keys);
	return rc;
}

/*
 * delete --verify: the proof retention keeps is made now, before anything goes: backups are
 * verified newest first until one passes (each outcome recorded with its backup).
 */
static err_code verify_newest(repo *r, retain_set *st, FILE *out)
{
	for (size_t i = st->n; i-- > 0;) {
		retain_backup *b = &st->b[i];
		backup_verify_options vo = { .name = b->name,
									 .concurrency = (int)repo_download_concurrency(r),
									 .seg_size = st->segsize,
									 .record = true };
		uint64_t problems = 0;
		log_info("delete --verify: verifying %s", b->name);
		TRY(backup_verify(r, &vo, &problems, out));
		b->verified = problems == 0;
		free(b->verified_at);
		b->verified_at = b->verified ? time_now_rfc3339() : NULL;
		if (b->verified)
			return E_OK;
	}
	log_warn("delete --verify: no backup passed backup-verify");
	return E_OK;
}

/* The WAL a kept backup holds on to, as the plan prints it. */
static char *wal_kept_text(const retain_set *st, const retain_backup *b)
{
	char first[WAL_NAME_LEN + 1], last[WAL_NAME_LEN + 1];
	if (!b->keep)
		return xstrdup("-");
	wal_name_format(first, b->tli, b->seg, st->segsize);
	if (b->onward)
		return xasprintf("%s onward", first);
	wal_name_format(last, b->tli, b->end_seg, st->segsize);
	return xasprintf("%s to %s", first, last);
}

/*
 * retain with calendar buckets or a window: the plan as a table, oldest first (each backup's
 * start in the operator's time zone, kept or not and why, the WAL it keeps), then the window.
 */
static void print_plan(const retain_set *st, const delete_options *o, const retain_scope *sc,
					   FILE *out)
{
	char start_hdr[64];
	snprintf(start_hdr, sizeof(start_hdr), "start (%s)", o->time_zone ? o->time_zone : "UTC");
	const char *const hdr[] = { "backup", start_hdr, "kept", "why", "wal_kept" };
	table *t = table_new(5, hdr, NULL);
	for (size_t i = 0; i < st->n; i++) {
		const retain_backup *b = &st->b[i];
		struct tm tm;
		char when[40];
		localtime_r(&b->sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S%z", &tm);
		char *wal = wal_kept_text(st, b);
		const char *cells[] = { b->name, when, b->keep ? "yes" : "no",
								b->keep && b->why ? b->why : "-", wal };
		table_add(t, cells);
		free(wal);
	}
	table_print(t, out, false);
	table_free(t);
	if (sc->window_from != NULL)
		fprintf(out, "point-in-time recovery: from the end of %s (%s) to now; before it, each "
					 "kept backup to its own end only (--pitr-window %s)\n",
				sc->window_from->name,
				sc->window_from->s.finish_time ? sc->window_from->s.finish_time : "?",
				o->pitr_window);
}

/* What backup-fetch holds point-in-time targets to once the WAL before the window is gone. */
static err_code record_window(repo *r, const delete_options *o, const retain_backup *from)
{
	char *now = time_now_rfc3339(), *at = time_format_rfc3339(from->finish_sec, 0);
	retention_window w = { .window = (char *)(uintptr_t)o->pitr_window,
						   .recorded = now,
						   .from_backup = from->name,
						   .from_text = at,
						   .from_lsn = from->s.finish_lsn };
	err_code rc = catalog_window_put(r, &w);
	free(now);
	free(at);
	return rc;
}

static err_code execute(repo *r, retain_plan *p, bool confirm, FILE *out)
{
	TRY(spare_locked(r, p, out));
	if (confirm) {
		/* Batched where the store has batch deletes (S3 DeleteObjects, Azure Blob Batch). */
		const char **keys = xcalloc(p->del.len + 1, sizeof(*keys));
		for (size_t i = 0; i < p->del.len; i++)
			keys[i] = p->del.items[i].key;
		err_code rc = repo_remove_many(r, keys, p->del.len);
		free(keys);
		TRY(rc);
	}
	for (size_t i = 0; i < p->del.len; i++)
		fprintf(out, "%s %s\n", confirm ? "deleted" : "would delete", p->del.items[i].key);
	log_info("%s %zu objects (%.1f MiB)%s", confirm ? "deleted" : "would delete", p->del.len,
			 (double)p->bytes / 1048576, confirm ? "" : "; add --confirm to delete them");
	return E_OK;
}


err_code retain_dead_temporaries(repo *r, const char *dir, repo_objs *out)
{
	repo_objs t;
	TRY(repo_list_temporaries(r, dir, &t));
	for (size_t i = 0; i < t.len; i++) {
		long pid = repo_temporary_pid(t.items[i].key);
		bool alive = pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
		if (!alive)
			repo_objs_add(out, t.items[i].key, t.items[i].size, t.items[i].mtime,
						 t.items[i].mtime_nsec);
	}
	repo_objs_free(&t);
	return E_OK;
}

static err_code list_temporaries(repo *r, const retain_scope *sc, repo_objs *out)
{
	memset(out, 0, sizeof(*out));
	if (sc->backups)
		TRY(retain_dead_temporaries(r, REPO_BACKUP_DIR, out));
	if (sc->wal)
		TRY(retain_dead_temporaries(r, REPO_WAL_DIR, out));
	return E_OK;
}

/* What the plan needs to see of the repository, for the scope; marker: room for two. */
static err_code list_repo(repo *r, const retain_scope *sc, retain_listing *l, repo_obj *marker)
{
	memset(l, 0, sizeof(*l));
	l->now = time(NULL);
	if (sc->backups)
		TRY(repo_list(r, REPO_BACKUP_DIR, true, &l->backups));
	if (sc->orphans)
		TRY(list_temporaries(r, sc, &l->temporaries));
	if (sc->every) {
		if (repo_stat(r, CATALOG_CLUSTER_MARKER, &marker[0]) == E_OK) {
			marker[0].key = (char *)(uintptr_t)CATALOG_CLUSTER_MARKER;
			l->marker = &marker[0];
		}
		err_clear();
		if (repo_stat(r, CATALOG_RETENTION_WINDOW, &marker[1]) == E_OK) {
			marker[1].key = (char *)(uintptr_t)CATALOG_RETENTION_WINDOW;
			l->window = &marker[1];
		}
		err_clear();
	}
	if (sc->wal)
		TRY(repo_list(r, REPO_WAL_DIR, false, &l->wal));
	return E_OK;
}

static void listing_free(retain_listing *l)
{
	repo_objs_free(&l->backups);
	repo_objs_free(&l->wal);
	repo_objs_free(&l->temporaries);
}

/* Plans what the scope covers and lists or deletes it. */
static err_code plan_and_run(repo *r, retain_set *st, const retain_scope *sc,
							 const delete_options *o, FILE *out)
{
	retain_listing l;
	repo_obj marker[2];
	retain_plan p = { 0 };
	bool announced = false, confirm = o->confirm;
	err_code rc = list_repo(r, sc, &l, marker);
	if (rc == E_OK) {
		retain_plan_objects(st, sc, &l, &p);
		if (o->mode == DELETE_RETAIN &&
			(sc->window_from != NULL || o->daily || o->weekly || o->monthly || o->yearly))
			print_plan(st, o, sc, out);
		if (confirm)
			rc = announce(r, st, &announced);
		/* recorded before the WAL goes: a target the deletion makes unreachable is refused */
		if (rc == E_OK && confirm && sc->window_from != NULL)
			rc = record_window(r, o, sc->window_from);
	}
	if (rc == E_OK)
		rc = execute(r, &p, confirm, out);
	if (announced)
		catalog_deleting_end(r);
	repo_objs_free(&p.del);
	listing_free(&l);
	return rc;
}

err_code backup_delete(repo *r, const backup_settings *cfg, const delete_options *o, FILE *out)
{
	retain_set st;
	retain_scope sc;
	err_code rc = load(r, cfg, o->use_sentinel_time, &st);
	if (rc == E_OK && o->verify)
		rc = verify_newest(r, &st, out);
	if (rc == E_OK)
		rc = retain_select(&st, o, time(NULL), &sc);
	if (rc == E_OK && sc.act)
		rc = plan_and_run(r, &st, &sc, o, out);
	retain_set_free(&st);
	return rc;
}
