/*
 * Retention planning (reference §14) on plain data, with walc's differences: backups are
 * ordered as LATEST orders them (timeline and start segment, never the clock of the host that
 * took them; another cluster's backups before the repository's own), so that retention and
 * LATEST agree on the newest; every ancestor of a kept delta is kept; WAL is deleted only where
 * no kept backup can need it; a backup whose sentinel cannot be read is left alone;
 * `everything` removes only basebackups_005/ and wal_005/.
 */
#include "internal/backup/manage/retention_impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

void retain_set_free(retain_set *st)
{
	for (size_t i = 0; i < st->n; i++) {
		free(st->b[i].name);
		free(st->b[i].verified_at);
		free(st->b[i].why);
		catalog_sentinel_free(&st->b[i].s);
	}
	free(st->b);
	for (size_t i = 0; i < st->nskipped; i++)
		free(st->skipped[i].name);
	free(st->skipped);
	catalog_claims_free(&st->running);
	catalog_claims_free(&st->stale);
	memset(st, 0, sizeof(*st));
}

static int by_order(const void *a, const void *b)
{
	const retain_backup *x = a, *y = b;
	return catalog_backup_cmp(&x->ref, &y->ref);
}

void retain_sort(retain_set *st)
{
	for (size_t i = 0; i < st->n; i++)
		st->b[i].ref.name = st->b[i].name;
	if (st->n > 1)
		xqsort(st->b, st->n, sizeof(*st->b), by_order);
}

static const retain_skipped *skipped(const retain_set *st, const char *name)
{
	for (size_t i = 0; i < st->nskipped; i++)
		if (strcmp(st->skipped[i].name, name) == 0)
			return &st->skipped[i];
	return NULL;
}

retain_backup *retain_find(const retain_set *st, const char *name)
{
	for (size_t i = 0; name != NULL && i < st->n; i++)
		if (strcmp(st->b[i].name, name) == 0)
			return &st->b[i];
	return NULL;
}

bool retain_position(const char *name, uint64_t segsize, uint32_t *tli, uint64_t *seg)
{
	for (const char *p = name; *p; p++) {
		size_t n = 0;
		while (p[n] && ((p[n] >= '0' && p[n] <= '9') || (p[n] >= 'A' && p[n] <= 'F')))
			n++;
		if (n >= 24) {
			char seg_name[WAL_NAME_LEN + 1];
			snprintf(seg_name, sizeof(seg_name), "%.24s", p);
			bool ok = wal_name_parse(seg_name, segsize, tli, seg) == E_OK;
			err_clear();
			return ok;
		}
		if (n > 0)
			p += n - 1;
	}
	return false;
}

void retain_set_range(retain_backup *b, uint64_t segsize)
{
	uint64_t fin = b->s.finish_lsn > 0 ? b->s.finish_lsn - 1 : 0;
	b->end_seg = fin / segsize > b->seg ? fin / segsize : b->seg;
}

void retain_calendar(retain_set *st)
{
	for (size_t i = 0; i < st->n; i++) {
		struct tm tm;
		char week[16];
		retain_backup *b = &st->b[i];
		localtime_r(&b->sec, &tm);
		strftime(week, sizeof(week), "%G%V", &tm);
		b->cal[CAL_DAY] = (tm.tm_year + 1900) * 10000 + (tm.tm_mon + 1) * 100 + tm.tm_mday;
		b->cal[CAL_WEEK] = atoi(week);
		b->cal[CAL_MONTH] = (tm.tm_year + 1900) * 100 + tm.tm_mon + 1;
		b->cal[CAL_YEAR] = tm.tm_year + 1900;
	}
}

void retain_period_text(int kind, int v, char out[16])
{
	if (kind == CAL_DAY)
		snprintf(out, 16, "%04d-%02d-%02d", v / 10000 % 10000, v / 100 % 100, v % 100);
	else if (kind == CAL_WEEK)
		snprintf(out, 16, "%04d-W%02d", v / 100 % 10000, v % 100);
	else if (kind == CAL_MONTH)
		snprintf(out, 16, "%04d-%02d", v / 100 % 10000, v % 100);
	else
		snprintf(out, 16, "%04d", v % 10000);
}

retain_backup *retain_newest_verified(const retain_set *st)
{
	for (size_t i = st->n; i-- > 0;)
		if (st->b[i].verified)
			return &st->b[i];
	return NULL;
}

/* Adds a reason to b's list of why it is kept. */
static void add_why(retain_backup *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_why(retain_backup *b, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	char *all = b->why != NULL ? xasprintf("%s, %s", b->why, why) : xstrdup(why);
	free(b->why);
	b->why = all;
}

err_code retain_running_error(const claim_info *c, const char *why)
{
	return err_set(E_EXISTS, "backup-push of %s (host %s, pid %ld, started %s) is running%s; "
							 "nothing was deleted",
				   c->name, c->hostname ? c->hostname : "?", c->pid,
				   c->started ? c->started : "?", why);
}

/* A kept delta needs its whole chain, and a running delta push its base. */
static void keep_ancestors(retain_set *st)
{
	for (size_t i = 0; i < st->running.len; i++) {
		const claim_info *c = &st->running.items[i];
		retain_backup *base = retain_find(st, c->delta_from);
		if (base != NULL && !base->keep) {
			log_info("keeping %s: backup-push of %s (host %s) is based on it", base->name,
					 c->name, c->hostname ? c->hostname : "?");
			base->keep = true;
			add_why(base, "base of the running backup-push of %s", c->name);
		}
	}
	for (size_t i = 0; i < st->n; i++) {
		retain_backup *b = &st->b[i];
		for (size_t guard = 0; b != NULL && b->keep && b->s.is_delta && guard < st->n; guard++) {
			retain_backup *parent = retain_find(st, b->s.delta_from);
			if (parent == NULL)
				break;
			if (!parent->keep)
				add_why(parent, "base of %s", b->name);
			parent->keep = true;
			b = parent;
		}
	}
}

/*
 * The newest backup whose verification passed is kept whatever the mode chose, with the WAL
 * from it to now: the one restore proven to work, and every target after it.
 */
static retain_backup *keep_verified(retain_set *st)
{
	retain_backup *v = retain_newest_verified(st);
	if (v == NULL) {
		log_info("no backup has passed backup-verify (walc_verified.json): retention cannot "
				 "keep a proven one; run backup-verify, or delete --verify");
		return NULL;
	}
	if (v->keep) {
		log_info("%s is the newest verified backup (verified %s): kept, with the WAL from it "
				 "to now",
				 v->name, v->verified_at ? v->verified_at : "?");
	} else {
		log_info("keeping %s: it is the newest verified backup (verified %s), whatever the "
				 "mode selects; and the WAL from it to now",
				 v->name, v->verified_at ? v->verified_at : "?");
		v->keep = true;
	}
	add_why(v, "newest verified (%s)", v->verified_at ? v->verified_at : "?");
	return v;
}

/*
 * After a mode chose what it keeps: the newest verified backup, every ancestor of a kept
 * delta; then which WAL each needs. Without a window (window NULL) every kept backup but a
 * permanent one needs the WAL from its start on; with one, only the window's base and the
 * backups after it do, the older ones their own range.
 */
static void settle(retain_set *st, const retain_backup *window)
{
	retain_backup *v = keep_verified(st);
	keep_ancestors(st);
	for (size_t i = 0; i < st->n; i++) {
		retain_backup *b = &st->b[i];
		b->gone = !b->keep;
		b->onward = b->keep && (window != NULL ? b >= window : !b->permanent);
	}
	if (v != NULL)
		v->onward = true;
}

/* Everything older than target goes, except permanent backups and what kept ones need. */
static void keep_from(retain_set *st, size_t target, retain_scope *sc)
{
	for (size_t i = 0; i < st->n; i++)
		st->b[i].keep = i >= target || st->b[i].permanent;
	log_info("keeping %s and everything newer", st->b[target].name);
	settle(st, NULL);
	/* Leftovers of failed pushes older than what is kept go too, as in WAL-G. */
	*sc = (retain_scope){ .act = true, .backups = true, .wal = true, .orphans = true };
}

static err_code delta_target_error(const retain_backup *b)
{
	return err_set(E_CONFIG,
				   "%s is a delta backup: the backups it is based on cannot be deleted. "
				   "Consider the FIND_FULL option",
				   b->name);
}

static size_t full_of(const retain_set *st, size_t i)
{
	const char *full = st->b[i].s.is_delta ? st->b[i].s.delta_full_name : st->b[i].name;
	for (size_t k = 0; full != NULL && k < st->n; k++)
		if (strcmp(st->b[k].name, full) == 0)
			return k;
	return i;
}

/* The oldest backup at or after a time, or the named one. */
static err_code resolve_point(const retain_set *st, const char *what, time_t now, size_t *out)
{
	time_t sec;
	long nsec;
	for (size_t i = 0; i < st->n; i++)
		if (str_has_prefix(st->b[i].name, what) && strlen(what) >= 5) {
			*out = i;
			return E_OK;
		}
	const char *why = time_parse_target(what, &sec, &nsec);
	if (why != NULL)
		return err_set(E_CONFIG, "\"%s\" is neither a backup name nor a time (%s)", what, why);
	if (sec > now)
		return err_set(E_CONFIG, "%s is in the future", what);
	for (size_t i = 0; i < st->n; i++)
		if (time_cmp(st->b[i].pick_sec, st->b[i].pick_nsec, sec, nsec) >= 0) {
			*out = i;
			return E_OK;
		}
	return err_set(E_NOTFOUND, "no backup at or after %s", what);
}

/*
 * The backup the point-in-time window starts from: the newest that ended at or before its
 * start (so a target at the window's first second has a backup to recover from), else the
 * oldest.
 */
static retain_backup *window_base(retain_set *st, time_t from)
{
	for (size_t i = st->n; i-- > 0;)
		if (st->b[i].finish_sec <= from)
			return &st->b[i];
	log_info("no backup ended before the point-in-time window starts: it reaches back to the "
			 "end of the oldest, %s",
			 st->b[0].name);
	return &st->b[0];
}

/*
 * Grandfather-father-son: the newest backup of each of the last `daily` days, `weekly` ISO
 * weeks, `monthly` months and `yearly` years that have a backup (restic's rule: a period
 * without backups does not use up a count), in the operator's time zone; with FULL only full
 * backups count; the N newest too when N is given. With a point-in-time window, WAL stays
 * continuous from the newest backup that ended before the window (kept too) and every kept
 * backup before that keeps only the WAL from its start to its end: it restores to its
 * consistency point, no further. Kept deltas keep their bases as in every mode.
 */
static err_code select_gfs(retain_set *st, const delete_options *o, time_t now,
						   retain_scope *sc)
{
	static const char *const kinds[4] = { "daily", "weekly", "monthly", "yearly" };
	const int want[4] = { o->daily, o->weekly, o->monthly, o->yearly };
	int used[4] = { 0 }, last[4] = { -1, -1, -1, -1 };
	if (o->modifier == MOD_FIND_FULL)
		return err_set(E_CONFIG, "delete retain: FIND_FULL does not go with calendar buckets or "
								 "--pitr-window (a kept delta always keeps its bases)");
	if (o->after != NULL)
		return err_set(E_CONFIG, "delete retain: --after does not go with calendar buckets or "
								 "--pitr-window");
	if (st->n == 0) {
		log_info("No backup found for deletion");
		return E_OK;
	}
	retain_calendar(st);
	for (size_t i = 0; i < st->n; i++) {
		st->b[i].keep = st->b[i].permanent;
		if (st->b[i].permanent)
			add_why(&st->b[i], "permanent");
	}
	/* N as in retain N: everything from the N-th newest backup (full, with FULL) on */
	int seen = 0;
	for (size_t i = st->n; i-- > 0 && seen < o->count;) {
		st->b[i].keep = true;
		add_why(&st->b[i], "within the %d newest%s", o->count,
				o->modifier == MOD_FULL ? " fulls" : "");
		seen += o->modifier != MOD_FULL || !st->b[i].s.is_delta;
	}
	for (size_t i = st->n; i-- > 0;) {
		retain_backup *b = &st->b[i];
		if (o->modifier == MOD_FULL && b->s.is_delta)
			continue;
		for (int k = 0; k < 4; k++) {
			if (used[k] >= want[k] || b->cal[k] == last[k])
				continue;
			char period[16];
			retain_period_text(k, b->cal[k], period);
			b->keep = true;
			add_why(b, "%s %s", kinds[k], period);
			used[k]++;
			last[k] = b->cal[k];
		}
	}
	retain_backup *base = NULL;
	if (o->pitr_window_s > 0) {
		base = window_base(st, now - o->pitr_window_s);
		base->keep = true;
		add_why(base, "start of the point-in-time window (%s)", o->pitr_window);
	}
	settle(st, base);
	if (base != NULL)
		for (size_t i = 0; i < st->n; i++)
			if (st->b[i].onward && &st->b[i] < base)
				base = &st->b[i]; /* the newest verified, older: WAL continuous from it */
	*sc = (retain_scope){ .act = true, .backups = true, .wal = true, .orphans = true,
						  .window_from = base };
	return E_OK;
}

static err_code select_retain(retain_set *st, const delete_options *o, time_t now,
							  retain_scope *sc)
{
	if (o->daily > 0 || o->weekly > 0 || o->monthly > 0 || o->yearly > 0 || o->pitr_window_s > 0)
		return select_gfs(st, o, now, sc);
	if (o->count < 1)
		return err_set(E_CONFIG, "delete retain: the count must be at least 1");
	/* Walk newest to oldest counting backups (or fulls only). */
	size_t seen = 0, target = 0;
	bool found = false;
	for (size_t i = st->n; i-- > 0;) {
		if (o->modifier == MOD_FULL && st->b[i].s.is_delta)
			continue;
		if (++seen == (size_t)o->count) {
			target = i;
			found = true;
			break;
		}
	}
	if (!found) {
		log_info("No backup found for deletion: fewer than %d backups", o->count);
		return E_OK;
	}
	if (o->modifier == MOD_FIND_FULL)
		target = full_of(st, target);
	/* WAL-G takes the older of the two targets, and only that one must not be a delta. */
	if (o->after != NULL) {
		size_t a;
		TRY(resolve_point(st, o->after, now, &a));
		if (o->modifier != MOD_NONE || st->b[a].s.is_delta)
			a = full_of(st, a);
		target = a < target ? a : target;
	}
	if (st->b[target].s.is_delta)
		return delta_target_error(&st->b[target]);
	keep_from(st, target, sc);
	return E_OK;
}

static err_code select_before(retain_set *st, const delete_options *o, time_t now,
							  retain_scope *sc)
{
	size_t target;
	TRY(resolve_point(st, o->point, now, &target));
	if (o->modifier == MOD_FIND_FULL)
		target = full_of(st, target);
	else if (st->b[target].s.is_delta)
		return delta_target_error(&st->b[target]);
	keep_from(st, target, sc);
	return E_OK;
}

static err_code select_everything(retain_set *st, const delete_options *o, retain_scope *sc)
{
	bool any_permanent = false;
	for (size_t i = 0; i < st->n; i++)
		any_permanent |= st->b[i].permanent;
	for (size_t i = 0; i < st->nskipped; i++)
		any_permanent |= st->skipped[i].permanent;
	if (any_permanent && !o->force)
		return err_set(E_CONFIG, "delete everything: permanent backups exist; use "
								 "`delete everything FORCE` to delete them too");
	const retain_backup *v = retain_newest_verified(st);
	if (v != NULL && !o->force)
		return err_set(E_CONFIG, "delete everything: %s passed backup-verify (%s), the newest "
								 "proven backup; use `delete everything FORCE` to delete it too",
					   v->name, v->verified_at ? v->verified_at : "?");
	if (st->running.len > 0)
		return retain_running_error(&st->running.items[0], "");
	for (size_t i = 0; i < st->n; i++) {
		st->b[i].keep = false;
		st->b[i].gone = true;
	}
	*sc = (retain_scope){ .act = true, .backups = true, .wal = true, .orphans = true,
						  .every = true };
	return E_OK;
}

static err_code find_target(const retain_set *st, const delete_options *o, retain_backup **out)
{
	retain_backup *t = NULL;
	if (o->user_data != NULL) {
		json_error_t jerr;
		json_t *want = json_loads(o->user_data, JSON_DECODE_ANY, &jerr);
		if (want == NULL)
			return err_set(E_CONFIG, "--target-user-data is not valid JSON: %s", jerr.text);
		err_code rc = E_OK;
		for (size_t i = 0; rc == E_OK && i < st->n; i++)
			if (json_equal(st->b[i].s.user_data, want)) {
				if (t != NULL)
					rc = err_set(E_CONFIG, "more than one backup has that user data");
				t = &st->b[i];
			}
		json_decref(want);
		TRY(rc);
	} else {
		t = retain_find(st, o->point);
	}
	/* WAL-G's words for a missing name: operators (CloudNativePG's plugin) match them. */
	if (t == NULL && o->point != NULL)
		return err_set(E_NOTFOUND, "delete target: Backup '%s' does not exist.", o->point);
	if (t == NULL)
		return err_set(E_NOTFOUND, "delete target: no backup has that user data");
	*out = t;
	return E_OK;
}

static err_code select_target(retain_set *st, const delete_options *o, retain_scope *sc)
{
	retain_backup *t;
	TRY(find_target(st, o, &t));
	if (o->modifier == MOD_FIND_FULL)
		t = &st->b[full_of(st, (size_t)(t - st->b))];
	/* The target and everything built on it, transitively. */
	for (size_t i = 0; i < st->n; i++)
		st->b[i].gone = &st->b[i] == t;
	for (bool grew = true; grew;) {
		grew = false;
		for (size_t i = 0; i < st->n; i++) {
			retain_backup *b = &st->b[i];
			retain_backup *parent = b->s.is_delta ? retain_find(st, b->s.delta_from) : NULL;
			if (!b->gone && parent != NULL && parent->gone)
				b->gone = grew = true;
		}
	}
	for (size_t i = 0; i < st->n; i++) {
		st->b[i].keep = !st->b[i].gone;
		if (st->b[i].gone && st->b[i].permanent)
			return err_set(E_CONFIG, "delete target: %s is permanent: nothing deleted "
									 "(backup-mark -i %s first)",
						   st->b[i].name, st->b[i].name);
	}
	for (size_t i = 0; i < st->running.len; i++) {
		retain_backup *base = retain_find(st, st->running.items[i].delta_from);
		if (base != NULL && base->gone)
			return retain_running_error(&st->running.items[i], ", based on it");
	}
	const retain_backup *v = retain_newest_verified(st);
	if (v != NULL && v->gone)
		return err_set(E_CONFIG,
					   "delete target: %s is the newest backup that passed backup-verify (%s)%s: "
					   "nothing deleted (verify a newer backup first)",
					   v->name, v->verified_at ? v->verified_at : "?",
					   v == t ? "" : ", built on the target");
	*sc = (retain_scope){ .act = true, .backups = true };
	return E_OK;
}

/* Nothing kept is touched: only leftovers older than the oldest non-permanent backup. */
static err_code select_garbage(retain_set *st, const delete_options *o, retain_scope *sc)
{
	bool any = false;
	for (size_t i = 0; i < st->n; i++) {
		st->b[i].keep = true;
		any |= !st->b[i].permanent;
	}
	settle(st, NULL);
	if (!any && !o->without_backup_check) {
		log_info("delete garbage: no non-permanent backup, nothing to do "
				 "(--without-backup-check deletes garbage anyway)");
		return E_OK;
	}
	if (!any)
		log_info("delete garbage: no non-permanent backup; deleting garbage anyway "
				 "(--without-backup-check): what no permanent backup needs");
	*sc = (retain_scope){ .act = true, .backups = o->modifier != MOD_ARCHIVES,
						  .wal = o->modifier != MOD_BACKUPS, .orphans = true };
	return E_OK;
}

err_code retain_select(retain_set *st, const delete_options *o, time_t now, retain_scope *sc)
{
	memset(sc, 0, sizeof(*sc));
	switch (o->mode) {
	case DELETE_RETAIN:
		return select_retain(st, o, now, sc);
	case DELETE_BEFORE:
		return select_before(st, o, now, sc);
	case DELETE_EVERYTHING:
		return select_everything(st, o, sc);
	case DELETE_TARGET:
		return select_target(st, o, sc);
	case DELETE_GARBAGE:
		return select_garbage(st, o, sc);
	}
	return err_set(E_CONFIG, "delete: unknown mode");
}

/*
 * WAL a kept backup may need: from its start onward, on its timeline or a later one (recovery
 * follows promotions); a backup kept for itself only (a permanent one, one before the
 * point-in-time window) pins its own range.
 */
static bool wal_needed(const retain_set *st, uint32_t tli, uint64_t seg)
{
	for (size_t i = 0; i < st->n; i++) {
		const retain_backup *b = &st->b[i];
		if (!b->keep)
			continue;
		if (!b->onward && b->tli == tli && seg >= b->seg && seg <= b->end_seg)
			return true;
		if (b->onward && tli >= b->tli && seg >= b->seg)
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
static int claimed(const retain_set *st, const char *name)
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
static bool before_kept(const retain_set *st, time_t sec, long nsec)
{
	for (size_t i = 0; i < st->n; i++) {
		const retain_backup *b = &st->b[i];
		if (b->keep && !b->permanent && time_cmp(sec, nsec, b->sec, b->nsec) >= 0)
			return false;
	}
	return true;
}

static void plan_add(retain_plan *p, const repo_obj *o)
{
	repo_objs_add(&p->del, o->key, o->size, o->mtime, o->mtime_nsec);
	p->bytes += o->size;
}

/*
 * Hidden temporaries of writers killed mid-object (file storage): untouched for an hour. A
 * running writer's temporary grows as it writes.
 */
#define TEMP_MIN_AGE_S 3600

/* Whether an object of backup folder name (no sentinel of a known backup) goes. */
static bool orphan_goes(const retain_set *st, const retain_scope *sc, const char *name,
						const repo_obj *o)
{
	uint32_t tli;
	uint64_t seg;
	int by = claimed(st, name);
	if (sc->every)
		return by <= 0;
	/* An object of no backup (a failed push) goes only if older than every kept backup's
	 * start: a push still running writes objects newer than that. */
	return sc->orphans && by <= 0 &&
		(by < 0 ||
		 (before_kept(st, o->mtime, o->mtime_nsec) &&
		  retain_position(name, st->segsize, &tli, &seg) && !wal_needed(st, tli, seg)));
}

static void plan_backups(const retain_set *st, const retain_scope *sc, const repo_objs *objs,
						 retain_plan *p)
{
	/* Sentinels first: a backup stops existing before its parts go. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < objs->len; i++) {
			const char *rest = objs->items[i].key + strlen(REPO_BACKUP_DIR);
			bool sentinel = str_has_suffix(rest, SENTINEL_SUFFIX);
			if ((pass == 0) != sentinel)
				continue;
			size_t n = sentinel ? strlen(rest) - strlen(SENTINEL_SUFFIX) : strcspn(rest, "/");
			char *name = xasprintf("%.*s", (int)n, rest);
			const retain_backup *b = retain_find(st, name);
			bool goes = b != NULL		   ? b->gone || sc->every
				: skipped(st, name) != NULL ? sc->every
											: orphan_goes(st, sc, name, &objs->items[i]);
			if (goes)
				plan_add(p, &objs->items[i]);
			free(name);
		}
}

void retain_plan_objects(const retain_set *st, const retain_scope *sc, const retain_listing *l,
						 retain_plan *p)
{
	memset(p, 0, sizeof(*p));
	if (sc->backups)
		plan_backups(st, sc, &l->backups, p);
	if (sc->orphans)
		for (size_t i = 0; i < l->temporaries.len; i++)
			if (l->now - l->temporaries.items[i].mtime >= TEMP_MIN_AGE_S)
				plan_add(p, &l->temporaries.items[i]);
	/* An emptied repository belongs to no cluster any more. */
	if (sc->every && l->marker != NULL)
		plan_add(p, l->marker);
	if (sc->every && l->window != NULL)
		plan_add(p, l->window);
	if (sc->wal)
		for (size_t i = 0; i < l->wal.len; i++) {
			uint32_t tli;
			uint64_t seg;
			const char *base = l->wal.items[i].key + strlen(REPO_WAL_DIR);
			/* Objects without a segment (timeline histories) are never removed. */
			if (sc->every ||
				(retain_position(base, st->segsize, &tli, &seg) && !wal_needed(st, tli, seg)))
				plan_add(p, &l->wal.items[i]);
		}
}
