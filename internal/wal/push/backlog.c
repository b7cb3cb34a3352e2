/*
 * The WAL waiting in pg_wal for archiving, and its bound (WALG_WAL_BACKLOG_MAX). While archiving
 * is behind: a WARNING at most once a minute, and the same figures to whoever reports them (the
 * Pushgateway, the daemon's /metrics). Past the bound the oldest segments are dropped unstored:
 * written first, synced, to a journal beside pg_wal's files (walc_data/backlog.json), and only
 * then answered as archived; recorded in the repository's walc_wal_lost.json before anything
 * after them is stored there, so that no reader meets the gap unannounced.
 */
#include "internal/wal/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal/catalog/catalog.h"
#include "internal/wal/wal_impl.h"

#define WARN_EVERY_S 60
#define BEHIND_AGE_S 60		/* a file waiting this long means archiving is behind */
#define BEHIND_BURST_S 5	/* with more files than one call uploads at once, this long */
#define JOURNAL_KEEP 1000	/* recorded gaps the journal keeps, for backup-push's check */
#define STATE_FILE "backlog.json"

char *wal_state_dir(const char *wal_dir)
{
	return xasprintf("%s/walc_data", wal_dir);
}

/* ------------------------------------------------------------------------------------------ */
/* The state file: the journal of drops, the last warning, the count of dropped segments.      */
/* ------------------------------------------------------------------------------------------ */

static err_code state_lock(const char *dir, int *fd)
{
	*fd = -1;
	TRY(mkdir_p(dir, 0700));
	char *p = xasprintf("%s/lock", dir);
	err_code rc = E_OK;
	int f = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (f < 0)
		rc = err_errno(E_IO, errno, "%s", p);
	while (rc == E_OK && flock(f, LOCK_EX) != 0)
		if (errno != EINTR)
			rc = err_errno(E_IO, errno, "locking %s", p);
	if (rc != E_OK && f >= 0)
		close(f);
	else
		*fd = f;
	free(p);
	return rc;
}

static void state_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* releases the lock */
}

/*
 * The state as stored, an empty object when there is none. A file that does not parse is
 * moved aside with an ERROR: archiving must go on, and the operator must hear that drops it
 * recorded may not reach the repository.
 */
static json_t *state_read(const char *dir)
{
	char *p = xasprintf("%s/" STATE_FILE, dir);
	json_error_t je;
	json_t *doc = json_load_file(p, 0, &je);
	if (doc == NULL && errno != ENOENT && access(p, F_OK) == 0) {
		char *aside = xasprintf("%s.damaged-%lld", p, (long long)time(NULL));
		log_error("%s does not parse (%s): moved to %s; segments it recorded as dropped may "
				  "not be recorded in the repository: check walc_wal_lost.json there",
				  p, je.text, aside);
		if (rename(p, aside) != 0)
			log_error("renaming %s: %s", p, strerror(errno));
		free(aside);
	} else if (doc != NULL && !json_is_object(doc)) {
		json_decref(doc);
		doc = NULL;
	}
	free(p);
	return doc != NULL ? doc : json_object();
}

static err_code state_write(const char *dir, json_t *doc)
{
	char *p = xasprintf("%s/" STATE_FILE, dir), *tmp = xasprintf("%s.tmp", p);
	char *text = json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	err_code rc = fd < 0 ? err_errno(E_IO, errno, "%s", tmp)
						 : fd_write_all(fd, text, strlen(text), tmp);
	if (rc == E_OK && fsync(fd) != 0)
		rc = err_errno(E_IO, errno, "syncing %s", tmp);
	if (fd >= 0 && close(fd) != 0 && rc == E_OK)
		rc = err_errno(E_IO, errno, "writing %s", tmp);
	if (rc == E_OK && rename(tmp, p) != 0)
		rc = err_errno(E_IO, errno, "renaming %s", tmp);
	if (rc == E_OK)
		rc = fsync_parent_dir(p);
	if (rc != E_OK)
		unlink(tmp);
	free(text);
	free(tmp);
	free(p);
	return rc;
}

static json_int_t state_int(json_t *doc, const char *key)
{
	return json_integer_value(json_object_get(doc, key));
}

static json_t *state_gaps(json_t *doc)
{
	json_t *g = json_object_get(doc, "gaps");
	if (!json_is_array(g)) {
		g = json_array();
		json_object_set_new(doc, "gaps", g);
	}
	return g;
}

/* ------------------------------------------------------------------------------------------ */
/* What waits                                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef struct waitlist {
	wal_waiting *w;
	size_t n;
	uint64_t bytes;
	time_t oldest; /* 0: nothing waits */
} waitlist;

static int ready_only(const struct dirent *d)
{
	return str_has_suffix(d->d_name, ".ready");
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* The files of wal_dir marked .ready and not yet uploaded, by name (oldest first). */
static err_code list_waiting(const wal_settings *cfg, const char *wal_dir, waitlist *out)
{
	memset(out, 0, sizeof(*out));
	char *status = xasprintf("%s/archive_status", wal_dir);
	struct dirent **list;
	int n = scandir(status, &list, ready_only, by_name);
	if (n < 0) {
		err_code rc = err_errno(E_IO, errno, "listing %s", status);
		free(status);
		return rc;
	}
	out->w = xcalloc((size_t)n + 1, sizeof(*out->w));
	for (int i = 0; i < n; i++) {
		char *name = list[i]->d_name;
		name[strlen(name) - strlen(".ready")] = '\0';
		struct stat sb;
		char *path = xasprintf("%s/%s", wal_dir, name);
		/* an orphan .ready (its file removed) is PostgreSQL's to clean up */
		if (strlen(name) < sizeof(out->w[0].name) && wal_is_archive_name(name) &&
			!wal_marked(cfg, name) && stat(path, &sb) == 0) {
			wal_waiting *w = &out->w[out->n++];
			snprintf(w->name, sizeof(w->name), "%s", name);
			w->size = (uint64_t)sb.st_size;
			w->mtime = sb.st_mtime;
			out->bytes += w->size;
			if (out->oldest == 0 || w->mtime < out->oldest)
				out->oldest = w->mtime;
		}
		free(path);
		free(list[i]);
	}
	free(list);
	free(status);
	return E_OK;
}

size_t wal_backlog_pick(const wal_waiting *w, size_t n, uint64_t bytes, uint64_t limit,
						bool (*may)(void *arg, const char *name), void *arg, bool *drop)
{
	size_t picked = 0;
	for (size_t i = 0; i < n; i++) {
		drop[i] = false;
		/* history files are what recovery needs to follow timelines; the rest are small */
		if (limit == 0 || bytes <= limit || !wal_is_segment_name(w[i].name))
			continue;
		if (may != NULL && !may(arg, w[i].name))
			continue;
		drop[i] = true;
		picked++;
		bytes -= w[i].size;
	}
	return picked;
}

static void fill_backlog(const wal_settings *cfg, const waitlist *l, json_t *state, wal_backlog *b)
{
	time_t now = time(NULL);
	b->bytes = l->bytes;
	b->files = l->n;
	b->oldest_s = l->oldest != 0 && now > l->oldest ? (double)(now - l->oldest) : 0;
	b->dropped = state != NULL ? (uint64_t)state_int(state, "dropped") : 0;
	b->limit = cfg->wal_backlog_max_bytes;
}

err_code wal_backlog_read(const wal_settings *cfg, const char *wal_dir, wal_backlog *out)
{
	memset(out, 0, sizeof(*out));
	waitlist l;
	TRY(list_waiting(cfg, wal_dir, &l));
	char *dir = wal_state_dir(wal_dir);
	json_t *state = state_read(dir);
	fill_backlog(cfg, &l, state, out);
	json_decref(state);
	free(dir);
	free(l.w);
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Dropping, and the journal                                                                  */
/* ------------------------------------------------------------------------------------------ */

static char *mib(uint64_t bytes)
{
	return xasprintf("%.0f MiB", (double)bytes / 1048576.0);
}

/*
 * Adds the run tli:first..last to the journal's gaps of storage: extending the last one not yet
 * recorded when it ends just before first, so that a long outage is one gap.
 */
static void journal_add(json_t *gaps, const char *storage, uint32_t tli, const char *first,
						const char *last, uint64_t first_seg, uint64_t seg_size, const char *why)
{
	size_t n = json_array_size(gaps);
	json_t *tail = n > 0 ? json_array_get(gaps, n - 1) : NULL;
	uint32_t t;
	uint64_t end;
	const char *tail_last = json_string_value(json_object_get(tail, "last_segment"));
	if (tail != NULL && !json_is_true(json_object_get(tail, "recorded")) &&
		json_integer_value(json_object_get(tail, "timeline")) == (json_int_t)tli &&
		json_is_string(json_object_get(tail, "storage")) &&
		strcmp(json_string_value(json_object_get(tail, "storage")), storage) == 0 &&
		tail_last != NULL && wal_name_parse(tail_last, seg_size, &t, &end) == E_OK &&
		end + 1 == first_seg) {
		json_object_set_new(tail, "last_segment", json_string(last));
		return;
	}
	err_clear();
	char *when = time_now_rfc3339();
	json_array_append_new(gaps, json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:b}", "storage", storage,
										  "timeline", (json_int_t)tli, "first_segment", first,
										  "last_segment", last, "dropped", when, "reason", why,
										  "recorded", 0));
	free(when);
	/* recorded gaps beyond JOURNAL_KEEP go, oldest first */
	size_t recorded = 0;
	for (size_t i = 0; i < json_array_size(gaps); i++)
		recorded += json_is_true(json_object_get(json_array_get(gaps, i), "recorded"));
	for (size_t i = 0; recorded > JOURNAL_KEEP && i < json_array_size(gaps);) {
		if (json_is_true(json_object_get(json_array_get(gaps, i), "recorded"))) {
			json_array_remove(gaps, i);
			recorded--;
		} else {
			i++;
		}
	}
}

err_code wal_dropped_add(const char *state_dir, const char *storage, const char *const *names,
						 size_t n, uint64_t seg_size, const char *who, const char *why)
{
	if (n == 0)
		return E_OK;
	int lock;
	TRY(state_lock(state_dir, &lock));
	json_t *state = state_read(state_dir);
	json_t *gaps = state_gaps(state);
	/* runs of consecutive segments, each one gap and one ERROR */
	char **msgs = xcalloc(n, sizeof(*msgs));
	size_t nmsgs = 0;
	for (size_t i = 0, j; i < n; i = j) {
		uint32_t tli, t;
		uint64_t first, s;
		j = i + 1;
		if (wal_name_parse(names[i], seg_size, &tli, &first) != E_OK) {
			err_clear();
			continue;
		}
		while (j < n && wal_name_parse(names[j], seg_size, &t, &s) == E_OK && t == tli &&
			   s == first + (j - i))
			j++;
		err_clear();
		journal_add(gaps, storage, tli, names[i], names[j - 1], first, seg_size, why);
		char *size = mib((uint64_t)(j - i) * seg_size);
		msgs[nmsgs++] = xasprintf(
			"%s: dropped WAL without archiving it: %s to %s (%zu segment%s, %s): %s; recovery "
			"cannot cross this gap (recorded in %s/" STATE_FILE ", and in %s's " WAL_LOST_OBJECT
			" before anything after it is stored there); take a new backup once archiving "
			"keeps up",
			who, names[i], names[j - 1], j - i, j - i == 1 ? "" : "s", size, why, state_dir,
			storage);
		free(size);
	}
	json_object_set_new(state, "dropped",
						json_integer(state_int(state, "dropped") + (json_int_t)n));
	err_code rc = state_write(state_dir, state);
	json_decref(state);
	state_unlock(lock);
	for (size_t i = 0; i < nmsgs; i++) {
		if (rc == E_OK)
			log_error("%s", msgs[i]);
		free(msgs[i]);
	}
	free(msgs);
	return rc;
}

/* A journal entry as recorded: what it said when read, to mark it recorded after. */
typedef struct pending {
	uint32_t tli;
	char *first, *last, *why;
} pending;

static bool same_entry(json_t *g, const char *storage, const pending *p)
{
	const char *st = json_string_value(json_object_get(g, "storage"));
	const char *a = json_string_value(json_object_get(g, "first_segment"));
	const char *b = json_string_value(json_object_get(g, "last_segment"));
	return st != NULL && a != NULL && b != NULL && strcmp(st, storage) == 0 &&
		strcmp(a, p->first) == 0 && strcmp(b, p->last) == 0 &&
		!json_is_true(json_object_get(g, "recorded"));
}

err_code wal_dropped_flush(repo *r, const char *state_dir)
{
	char *p = xasprintf("%s/" STATE_FILE, state_dir);
	bool none = access(p, F_OK) != 0;
	free(p);
	if (none)
		return E_OK;
	const char *storage = repo_describe(r);
	json_t *state = state_read(state_dir);
	size_t i, n = 0;
	json_t *g;
	pending *todo = NULL;
	json_array_foreach(state_gaps(state), i, g)
	{
		const char *st = json_string_value(json_object_get(g, "storage"));
		if (st == NULL || strcmp(st, storage) != 0 || json_is_true(json_object_get(g, "recorded")))
			continue;
		todo = xrealloc(todo, (n + 1) * sizeof(*todo));
		const char *why = json_string_value(json_object_get(g, "reason"));
		const char *when = json_string_value(json_object_get(g, "dropped"));
		todo[n++] = (pending){ (uint32_t)json_integer_value(json_object_get(g, "timeline")),
							   xstrdup(json_string_value(json_object_get(g, "first_segment"))),
							   xstrdup(json_string_value(json_object_get(g, "last_segment"))),
							   xasprintf("dropped unarchived at %s: %s", when ? when : "?",
										 why ? why : "") };
	}
	json_decref(state);
	err_code rc = E_OK;
	size_t done = 0;
	for (; rc == E_OK && done < n; done++) {
		rc = wal_lost_record(r, todo[done].tli, todo[done].first, todo[done].last, todo[done].why);
		if (rc != E_OK)
			err_wrap(rc, "recording the WAL dropped from %s to %s in %s before archiving on",
					 todo[done].first, todo[done].last, WAL_LOST_OBJECT);
		else
			log_info("recorded in %s: %s to %s were dropped unarchived", WAL_LOST_OBJECT,
					 todo[done].first, todo[done].last);
	}
	if (rc == E_OK && n > 0) {
		int lock;
		rc = state_lock(state_dir, &lock);
		if (rc == E_OK) {
			state = state_read(state_dir);
			json_array_foreach(state_gaps(state), i, g)
			{
				for (size_t k = 0; k < n; k++)
					if (same_entry(g, storage, &todo[k]))
						json_object_set_new(g, "recorded", json_true());
			}
			rc = state_write(state_dir, state);
			json_decref(state);
			state_unlock(lock);
		}
	}
	for (size_t k = 0; k < n; k++) {
		free(todo[k].first);
		free(todo[k].last);
		free(todo[k].why);
	}
	free(todo);
	return rc;
}

bool wal_dropped_has(const char *wal_dir, const char *name)
{
	if (!wal_is_segment_name(name))
		return false;
	char *dir = wal_state_dir(wal_dir), *p = xasprintf("%s/" STATE_FILE, dir);
	bool found = false;
	if (access(p, F_OK) == 0) {
		json_t *state = state_read(dir);
		size_t i;
		json_t *g;
		/* fixed-width hex: names of one timeline sort as their segments */
		json_array_foreach(state_gaps(state), i, g)
		{
			const char *a = json_string_value(json_object_get(g, "first_segment"));
			const char *b = json_string_value(json_object_get(g, "last_segment"));
			if (a != NULL && b != NULL && strncmp(a, name, 8) == 0 && strcmp(a, name) <= 0 &&
				strcmp(name, b) <= 0)
				found = true;
		}
		json_decref(state);
	}
	free(p);
	free(dir);
	return found;
}

err_code wal_lost_read_local(repo *r, const char *wal_dir, uint64_t seg_size, wal_lost *out)
{
	TRY(wal_lost_read(r, seg_size, out));
	if (wal_dir == NULL)
		return E_OK;
	char *dir = wal_state_dir(wal_dir);
	json_t *state = state_read(dir);
	size_t i;
	json_t *g;
	json_array_foreach(state_gaps(state), i, g)
	{
		const char *why = json_string_value(json_object_get(g, "reason"));
		char *text = xasprintf("dropped unarchived: %s", why ? why : "");
		wal_lost_add(out, seg_size, json_string_value(json_object_get(g, "first_segment")),
					 json_string_value(json_object_get(g, "last_segment")), text);
		free(text);
	}
	json_decref(state);
	free(dir);
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Warnings and reports                                                                       */
/* ------------------------------------------------------------------------------------------ */

/*
 * Behind: more waits than one call uploads at once and the oldest has waited a few seconds (a
 * burst of segments that archiving drains at once is not), one has waited a minute, or the
 * backlog is over half the bound.
 */
static bool behind(const repo *r, const wal_backlog *b)
{
	return (b->files > (uint64_t)repo_upload_concurrency(r) && b->oldest_s >= BEHIND_BURST_S) ||
		b->oldest_s >= BEHIND_AGE_S || (b->limit > 0 && b->bytes > b->limit / 2);
}

void wal_backlog_note(const char *state_dir, const repo *r, const wal_backlog *b,
					  bool dropped, const char *where, wal_backlog_fn report, void *arg)
{
	bool late = behind(r, b);
	json_t *state = state_read(state_dir);
	time_t now = time(NULL);
	bool warn = late && now - (time_t)state_int(state, "warned") >= WARN_EVERY_S;
	bool caught_up = !late && json_is_true(json_object_get(state, "reported"));
	json_decref(state);
	int lock = -1;
	if ((warn || caught_up) && state_lock(state_dir, &lock) == E_OK) {
		/* again under the lock: another archiving call may have said it already */
		state = state_read(state_dir);
		warn = warn && now - (time_t)state_int(state, "warned") >= WARN_EVERY_S;
		caught_up = caught_up && json_is_true(json_object_get(state, "reported"));
		if (warn)
			json_object_set_new(state, "warned", json_integer((json_int_t)now));
		if (warn || caught_up)
			json_object_set_new(state, "reported", json_boolean(warn));
		if ((warn || caught_up) && state_write(state_dir, state) != E_OK) {
			log_warn("%s", err_msg());
			err_clear();
		}
		json_decref(state);
		state_unlock(lock);
	} else if (warn || caught_up) {
		log_warn("%s", err_msg());
		err_clear();
	}
	char *size = mib(b->bytes), *max = mib(b->limit);
	if (warn) {
		char *bound = b->limit > 0
			? xasprintf("past WALG_WAL_BACKLOG_MAX (%s) the oldest segments are dropped "
						"unarchived",
						max)
			: xstrdup("nothing bounds it (WALG_WAL_BACKLOG_MAX is not set): PostgreSQL "
					  "keeps it until archiving catches up or the disk is full");
		log_warn("archiving is behind: %s of WAL (%llu files) waits in %s, the oldest for "
				 "%.0f s; %s",
				 size, (unsigned long long)b->files, where, b->oldest_s, bound);
		free(bound);
	} else if (caught_up) {
		log_info("archiving has caught up: %s of WAL (%llu files) waits in %s", size,
				 (unsigned long long)b->files, where);
	}
	free(size);
	free(max);
	if ((warn || caught_up || dropped) && report != NULL)
		report(arg, b);
}

/* ------------------------------------------------------------------------------------------ */
/* One archiving call's watch                                                                 */
/* ------------------------------------------------------------------------------------------ */

struct wal_watch {
	const repo *r;
	const wal_settings *cfg;
	char *wal_dir, *state_dir, *storage;
	const char *name; /* the file this call archives */
	wal_backlog_fn report;
	void *arg;
	bool (*claim)(void *arg, const char *name);
	void *claim_arg;
	bool self_ok; /* the first look may drop the call's own file */
};

static bool may_drop(void *arg, const char *name)
{
	wal_watch *w = arg;
	if (strcmp(name, w->name) == 0)
		return w->self_ok;
	return w->claim == NULL || w->claim(w->claim_arg, name);
}

/*
 * A look at pg_wal: past the bound the oldest files wait go, recorded first; then the
 * warning or the report when due. *self: the call's own file was dropped.
 */
static void look(wal_watch *w, bool *self)
{
	*self = false;
	waitlist l;
	if (list_waiting(w->cfg, w->wal_dir, &l) != E_OK) {
		log_warn("%s", err_msg());
		err_clear();
		return;
	}
	uint64_t limit = w->cfg->wal_backlog_max_bytes;
	bool *drop = xcalloc(l.n + 1, sizeof(bool));
	size_t n = wal_backlog_pick(l.w, l.n, l.bytes, limit, may_drop, w, drop);
	bool dropped = false;
	if (n > 0) {
		const char **names = xcalloc(n, sizeof(*names));
		uint64_t seg_size = 0, was = l.bytes;
		size_t k = 0;
		for (size_t i = 0; i < l.n; i++)
			if (drop[i]) {
				names[k++] = l.w[i].name;
				seg_size = l.w[i].size;
			}
		char *size = mib(was), *max = mib(limit);
		char *why = xasprintf("%s of WAL (%zu files) waited for archiving, over "
							  "WALG_WAL_BACKLOG_MAX (%s)",
							  size, l.n, max);
		free(size);
		free(max);
		err_code rc = wal_dropped_add(w->state_dir, w->storage, names, n, seg_size, "wal-push",
									  why);
		free(why);
		if (rc != E_OK) {
			/* not recorded, so not dropped: a hole nobody knows of is worse than a full disk */
			log_error("wal-push: WALG_WAL_BACKLOG_MAX: cannot record the dropped WAL, so "
					  "nothing is dropped: %s",
					  err_msg());
			err_clear();
		} else {
			dropped = true;
			for (size_t i = 0; i < l.n; i++) {
				if (!drop[i])
					continue;
				l.bytes -= l.w[i].size;
				if (strcmp(l.w[i].name, w->name) == 0) {
					*self = true; /* PostgreSQL marks it when told it is archived */
					continue;
				}
				char *ready = xasprintf("%s/archive_status/%s.ready", w->wal_dir, l.w[i].name);
				char *done = xasprintf("%s/archive_status/%s.done", w->wal_dir, l.w[i].name);
				if (rename(ready, done) != 0)
					log_warn("renaming %s: %s", ready, strerror(errno));
				free(ready);
				free(done);
			}
			/* what still waits */
			size_t k2 = 0;
			l.oldest = 0;
			for (size_t i = 0; i < l.n; i++) {
				if (drop[i])
					continue;
				l.w[k2++] = l.w[i];
				if (l.oldest == 0 || l.w[i].mtime < l.oldest)
					l.oldest = l.w[i].mtime;
			}
			l.n = k2;
		}
		free(names);
	}
	free(drop);
	wal_backlog b;
	json_t *state = state_read(w->state_dir);
	fill_backlog(w->cfg, &l, state, &b);
	json_decref(state);
	wal_backlog_note(w->state_dir, w->r, &b, dropped, w->wal_dir, w->report, w->arg);
	free(l.w);
}

wal_watch *wal_watch_begin(repo *r, const wal_settings *cfg, const char *wal_dir, const char *name,
						   wal_backlog_fn report, void *arg, bool *self_dropped)
{
	*self_dropped = false;
	struct stat sb;
	char *status = xasprintf("%s/archive_status", wal_dir);
	bool pg_wal = stat(status, &sb) == 0 && S_ISDIR(sb.st_mode);
	free(status);
	if (!pg_wal)
		return NULL;
	wal_watch *w = xcalloc(1, sizeof(*w));
	w->r = r;
	w->cfg = cfg;
	w->wal_dir = xstrdup(wal_dir);
	w->state_dir = wal_state_dir(wal_dir);
	w->storage = xstrdup(repo_describe(r));
	w->name = name;
	w->report = report;
	w->arg = arg;
	w->self_ok = true;
	look(w, self_dropped);
	w->self_ok = false;
	return w;
}

void wal_watch_claims(wal_watch *w, bool (*claim)(void *arg, const char *name), void *arg)
{
	w->claim = claim;
	w->claim_arg = arg;
}

void wal_watch_tick(wal_watch *w)
{
	bool self;
	look(w, &self);
}

void wal_watch_end(wal_watch *w)
{
	if (w == NULL)
		return;
	free(w->wal_dir);
	free(w->state_dir);
	free(w->storage);
	free(w);
}
