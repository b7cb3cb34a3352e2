/*
 * Claims: one writer per backup name. A backup-push creates basebackups_005/NAME/
 * walc_claim_NNN.json exclusively before its first object, renews it while it runs, and stops
 * writing when it cannot. A claim that stopped being renewed belongs to a dead push and is
 * taken over by creating the next generation (exclusively again, so one taker wins), which
 * then removes the dead push's objects. WAL-G ignores these objects.
 */
#include "internal/catalog/catalog_impl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "internal/pipe/pipe.h"

/* Timing (catalog_claim_timing changes it for tests): */
static long CLAIM_RENEW_MS = 10000; /* a running push rewrites its claim this often */
static long CLAIM_FENCE_MS = 30000; /* and stops writing when it could not for this long */
static long CLAIM_WATCH_MS = 45000; /* a claim unchanged this long (> fence) is a dead push's */
#define CLAIM_LIVE_S 30		 /* renewed this recently by our clock: live, no need to watch */
#define CLAIM_RUNNING_S 120 /* retention counts a claim as running this long after renewal */
#define CLAIM_PREFIX "walc_claim_"

struct claim {
	repo *r;
	claim_info info;
	void (*on_lost)(void *arg);
	void *arg;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	bool lost;			 /* taken over, or not renewed within the fence */
	struct timespec ok;	 /* last successful renewal (monotonic) */
	char lost_why[256];
};

void catalog_claim_timing(long renew_ms, long fence_ms, long watch_ms)
{
	CLAIM_RENEW_MS = renew_ms;
	CLAIM_FENCE_MS = fence_ms;
	CLAIM_WATCH_MS = watch_ms;
}

static long ms_since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000L + (now.tv_nsec - t->tv_nsec) / 1000000L;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void catalog_claim_info_free(claim_info *c)
{
	free(c->name);
	free(c->key);
	free(c->push_id);
	free(c->hostname);
	free(c->boot_id);
	free(c->pid_ns);
	free(c->delta_from);
	free(c->started);
	free(c->renewed);
	memset(c, 0, sizeof(*c));
}

void catalog_claims_free(claim_list *l)
{
	for (size_t i = 0; i < l->len; i++)
		catalog_claim_info_free(&l->items[i]);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

static json_t *claim_json(const claim_info *c)
{
	json_t *o = json_object();
	json_object_set_new(o, "backup", json_string(c->name));
	json_object_set_new(o, "generation", json_integer(c->generation));
	json_object_set_new(o, "push_id", json_string(c->push_id));
	proc_rec_json(&(proc_rec){ c->hostname, c->pid, c->boot_id, c->pid_ns }, o);
	json_object_set_new(o, "start_lsn", json_integer((json_int_t)c->start_lsn));
	json_object_set_new(o, "timeline", json_integer(c->timeline));
	json_object_set_new(o, "delta_from", c->delta_from ? json_string(c->delta_from) : json_null());
	json_object_set_new(o, "started", json_string(c->started));
	json_object_set_new(o, "renewed", json_string(c->renewed));
	json_object_set_new(o, "renewals", json_integer((json_int_t)c->renewals));
	return o;
}

static char *str_member(const json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v != NULL ? xstrdup(v) : NULL;
}

static uint64_t int_member(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) && json_integer_value(v) >= 0 ? (uint64_t)json_integer_value(v)
															 : 0;
}

/* Reads the claim at key; a claim that cannot be read counts as one nobody renews. */
static err_code claim_read(repo *r, const char *key, claim_info *out)
{
	json_t *o = NULL;
	memset(out, 0, sizeof(*out));
	TRY(catalog_read_json(r, key, CATALOG_JSON_MAX, &o));
	out->key = xstrdup(key);
	out->name = str_member(o, "backup");
	out->generation = (int)int_member(o, "generation");
	out->push_id = str_member(o, "push_id");
	out->hostname = str_member(o, "hostname");
	out->pid = (long)int_member(o, "pid");
	out->boot_id = str_member(o, "boot_id");
	out->pid_ns = str_member(o, "pid_namespace");
	out->start_lsn = int_member(o, "start_lsn");
	out->timeline = (uint32_t)int_member(o, "timeline");
	out->delta_from = str_member(o, "delta_from");
	out->started = str_member(o, "started");
	out->renewed = str_member(o, "renewed");
	out->renewals = int_member(o, "renewals");
	long nsec;
	if (out->renewed == NULL || !time_parse_rfc3339(out->renewed, &out->renewed_at, &nsec))
		out->renewed_at = 0;
	repo_obj info;
	if (repo_stat(r, key, &info) == E_OK)
		out->stored_at = info.mtime;
	err_clear();
	json_decref(o);
	return E_OK;
}

static err_code put_claim(repo *r, const claim_info *c, bool exclusive)
{
	json_t *doc = claim_json(c);
	err_code rc = exclusive ? catalog_put_json_new(r, c->key, doc)
							: catalog_put_json(r, c->key, doc);
	json_decref(doc);
	return rc;
}

static char *claim_key(const repo *r, const char *name, int generation)
{
	return xasprintf("%s%s/" CLAIM_PREFIX "%03d.json", repo_backups(r), name, generation);
}

/* The generation of a claim key of backup name, or 0 when key is not one. */
static int claim_generation(const repo *r, const char *key, const char *name)
{
	char *prefix = xasprintf("%s%s/" CLAIM_PREFIX, repo_backups(r), name);
	int gen = 0;
	if (str_has_prefix(key, prefix)) {
		const char *p = key + strlen(prefix);
		char *end;
		long g = strtol(p, &end, 10);
		if (end != p && strcmp(end, ".json") == 0 && g > 0 && g < 100000)
			gen = (int)g;
	}
	free(prefix);
	return gen;
}

/* The newest claim of name (*gen 0: none) and whether other objects are there too. */
static err_code survey(repo *r, const char *name, int *gen, size_t *others)
{
	char *folder = xasprintf("%s%s/", repo_backups(r), name);
	repo_objs l;
	err_code rc = repo_list(r, folder, true, &l);
	free(folder);
	TRY(rc);
	*gen = 0;
	*others = 0;
	for (size_t i = 0; i < l.len; i++) {
		int g = claim_generation(r, l.items[i].key, name);
		if (g == 0)
			(*others)++;
		else if (g > *gen)
			*gen = g;
	}
	repo_objs_free(&l);
	return E_OK;
}

static bool sentinel_exists(repo *r, const char *name)
{
	char *key = xasprintf("%s%s" SENTINEL_SUFFIX, repo_backups(r), name);
	repo_obj info;
	bool found = repo_stat(r, key, &info) == E_OK;
	err_clear();
	free(key);
	return found;
}

static void new_info(claim_info *c, const char *name, uint64_t lsn, uint32_t tli,
					 const char *delta_from)
{
	unsigned char rnd[16];
	memset(c, 0, sizeof(*c));
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		for (size_t i = 0; i < sizeof(rnd); i++)
			rnd[i] = (unsigned char)(rand() ^ getpid());
	char id[33];
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(id + 2 * i, 3, "%02x", rnd[i]);
	proc_rec here = proc_here();
	c->name = xstrdup(name);
	c->push_id = xstrdup(id);
	c->hostname = xstrdup(here.hostname);
	c->pid = here.pid;
	c->boot_id = xstrdup(here.boot_id);
	c->pid_ns = xstrdup(here.pid_ns);
	c->start_lsn = lsn;
	c->timeline = tli;
	c->delta_from = delta_from ? xstrdup(delta_from) : NULL;
	c->started = time_now_rfc3339();
	c->renewed = xstrdup(c->started);
}

/* The claim's push ran on this machine, in our pid namespace, and its process is gone. */
static bool gone_here(const claim_info *other)
{
	return proc_gone(&(proc_rec){ other->hostname, other->pid, other->boot_id, other->pid_ns });
}

static err_code busy(const char *name, const claim_info *o)
{
	return err_set(E_EXISTS,
				   "backup %s is being written by another backup-push (host %s, pid %ld, "
				   "started %s); this one stops, nothing was written",
				   name, o->hostname ? o->hostname : "?", o->pid,
				   o->started ? o->started : "?");
}

/*
 * Whether the push holding claim gen is dead: gone from this machine, or not renewed while we
 * watch for longer than its fence. E_EXISTS (busy) when it is alive.
 */
static err_code judge(repo *r, const char *name, int gen, bool *dead)
{
	char *key = claim_key(r, name, gen);
	claim_info o;
	err_code rc = claim_read(r, key, &o);
	*dead = false;
	if (rc == E_NOTFOUND) { /* removed meanwhile: look again */
		err_clear();
		free(key);
		return E_OK;
	}
	if (rc != E_OK) {
		free(key);
		return rc;
	}
	if (gone_here(&o)) {
		log_info("backup %s: the push that claimed it (pid %ld on this host) is gone", name,
				 o.pid);
		*dead = true;
	} else {
		time_t now = time(NULL);
		if (o.renewed_at != 0 && o.renewed_at <= now + CLAIM_LIVE_S &&
			now - o.renewed_at < CLAIM_LIVE_S) {
			rc = busy(name, &o);
		} else {
			log_info("backup %s: claimed by a push on %s last renewed %s; watching it for %ld s",
					 name, o.hostname ? o.hostname : "?", o.renewed ? o.renewed : "?",
					 CLAIM_WATCH_MS / 1000);
			struct timespec t0;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			*dead = true;
			while (ms_since(&t0) < CLAIM_WATCH_MS) {
				sleep_ms(CLAIM_WATCH_MS / 20 + 1);
				claim_info now_c;
				if (claim_read(r, key, &now_c) != E_OK) {
					err_clear();
					*dead = false; /* gone or unreadable: survey again */
					break;
				}
				bool moved = now_c.renewals != o.renewals ||
					(now_c.push_id && o.push_id && strcmp(now_c.push_id, o.push_id) != 0);
				catalog_claim_info_free(&now_c);
				if (moved) {
					*dead = false;
					rc = busy(name, &o);
					break;
				}
			}
		}
	}
	catalog_claim_info_free(&o);
	free(key);
	return rc;
}

/* After a takeover: everything under the backup's folder but our own claim goes. */
static err_code clear_folder(repo *r, const char *name, const char *keep)
{
	char *folder = xasprintf("%s%s/", repo_backups(r), name);
	repo_objs l;
	err_code rc = repo_list(r, folder, true, &l);
	free(folder);
	TRY(rc);
	for (size_t i = 0; rc == E_OK && i < l.len; i++)
		if (strcmp(l.items[i].key, keep) != 0)
			rc = repo_remove(r, l.items[i].key);
	repo_objs_free(&l);
	return rc;
}

static void *renew_loop(void *arg)
{
	claim *c = arg;
	pthread_mutex_lock(&c->lock);
	while (!c->stop && !c->lost) {
		struct timespec until = time_in_ms(CLOCK_REALTIME, CLAIM_RENEW_MS);
		pthread_cond_timedwait(&c->wake, &c->lock, &until);
		if (c->stop)
			break;
		pthread_mutex_unlock(&c->lock);
		err_code rc = catalog_claim_check(c);
		if (rc == E_OK) {
			free(c->info.renewed);
			c->info.renewed = time_now_rfc3339();
			c->info.renewals++;
			rc = put_claim(c->r, &c->info, false);
			if (rc != E_OK)
				log_warn("renewing the claim on backup %s: %s", c->info.name, err_msg());
		}
		pthread_mutex_lock(&c->lock);
		if (rc == E_OK && !c->lost) {
			clock_gettime(CLOCK_MONOTONIC, &c->ok);
		} else if (!c->lost && ms_since(&c->ok) >= CLAIM_FENCE_MS) {
			c->lost = true;
			snprintf(c->lost_why, sizeof(c->lost_why),
					 "the claim on backup %s could not be renewed for %ld s: stopping so that a "
					 "later push can take the name over",
					 c->info.name, CLAIM_FENCE_MS / 1000);
		}
		if (c->lost && c->on_lost != NULL) {
			pthread_mutex_unlock(&c->lock);
			c->on_lost(c->arg);
			pthread_mutex_lock(&c->lock);
		}
		err_clear();
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

err_code catalog_claim(repo *r, const char *name, uint64_t start_lsn, uint32_t timeline,
					   const char *delta_from, void (*on_lost)(void *arg), void *arg,
					   claim **out)
{
	claim_info me;
	*out = NULL;
	new_info(&me, name, start_lsn, timeline, delta_from);
	err_code rc = E_OK;
	bool won = false;
	for (int attempt = 0; rc == E_OK && !won && attempt < 5; attempt++) {
		if (sentinel_exists(r, name)) {
			rc = err_set(E_EXISTS,
						 "backup %s already exists in %s (a backup started in the same WAL "
						 "segment); this push stops, nothing was written",
						 name, repo_describe(r));
			break;
		}
		int gen;
		size_t others;
		rc = survey(r, name, &gen, &others);
		if (rc != E_OK)
			break;
		if (gen == 0 && others > 0) {
			rc = err_set(E_EXISTS,
						 "backup %s has %zu objects in %s that no walc push claimed (WAL-G "
						 "writing it, or a failed push's leftovers); this push stops, nothing "
						 "was written (walc delete garbage removes leftovers)",
						 name, others, repo_describe(r));
			break;
		}
		bool take_over = false;
		if (gen > 0) {
			rc = judge(r, name, gen, &take_over);
			if (rc != E_OK || !take_over)
				continue;
		}
		me.generation = gen + 1;
		free(me.key);
		me.key = claim_key(r, name, me.generation);
		rc = put_claim(r, &me, true);
		if (rc == E_EXISTS) { /* another push got there first: look again */
			err_clear();
			rc = E_OK;
			continue;
		}
		if (rc != E_OK)
			break;
		won = true;
		claim_info back;
		if (claim_read(r, me.key, &back) == E_OK) {
			won = back.push_id != NULL && strcmp(back.push_id, me.push_id) == 0;
			catalog_claim_info_free(&back);
		}
		err_clear();
		if (!won) { /* the store let another writer replace it: theirs now */
			rc = err_set(E_EXISTS, "backup %s: another backup-push claimed it at the same "
								   "moment; this one stops",
						 name);
			break;
		}
		if (take_over) {
			log_info("backup %s: took over from a stopped push; removing what it wrote", name);
			rc = clear_folder(r, name, me.key);
		} else {
			/* A writer that does not claim (WAL-G) may have started meanwhile. */
			rc = survey(r, name, &gen, &others);
			if (rc == E_OK && (others > 0 || gen != me.generation))
				rc = err_set(E_EXISTS, "backup %s: another writer started at the same moment; "
									   "this push stops",
							 name);
			if (rc != E_OK)
				repo_remove(r, me.key);
		}
	}
	if (rc == E_OK && !won)
		rc = err_set(E_EXISTS, "backup %s: could not claim the name in %s", name,
					 repo_describe(r));
	if (rc != E_OK) {
		catalog_claim_info_free(&me);
		return rc;
	}
	claim *c = xcalloc(1, sizeof(*c));
	c->r = r;
	c->info = me;
	c->on_lost = on_lost;
	c->arg = arg;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_cond_init(&c->wake, &ca);
	pthread_condattr_destroy(&ca);
	clock_gettime(CLOCK_MONOTONIC, &c->ok);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PIPE_THREAD_STACK);
	c->thread_started = pthread_create(&c->thread, &attr, renew_loop, c) == 0;
	pthread_attr_destroy(&attr);
	if (!c->thread_started) {
		catalog_claim_end(c, true);
		return err_set(E_FAIL, "starting the claim renewal thread");
	}
	*out = c;
	return E_OK;
}

err_code catalog_claim_check(claim *c)
{
	pthread_mutex_lock(&c->lock);
	bool lost = c->lost || ms_since(&c->ok) >= CLAIM_FENCE_MS;
	if (lost && c->lost_why[0] == '\0')
		snprintf(c->lost_why, sizeof(c->lost_why),
				 "the claim on backup %s was not renewed for %ld s", c->info.name,
				 CLAIM_FENCE_MS / 1000);
	c->lost |= lost;
	pthread_mutex_unlock(&c->lock);
	if (lost)
		return err_set(E_CANCELLED, "%s", c->lost_why);
	char *next = claim_key(c->r, c->info.name, c->info.generation + 1);
	repo_obj info;
	err_code rc = repo_stat(c->r, next, &info);
	free(next);
	if (rc == E_NOTFOUND) {
		/* Our claim still holds our id: a store without atomic create let nobody else in. */
		err_clear();
		claim_info now;
		rc = claim_read(c->r, c->info.key, &now);
		if (rc != E_OK)
			return rc;
		bool ours = now.push_id != NULL && strcmp(now.push_id, c->info.push_id) == 0;
		catalog_claim_info_free(&now);
		if (ours)
			return E_OK;
	} else if (rc != E_OK) {
		return rc;
	}
	pthread_mutex_lock(&c->lock);
	c->lost = true;
	snprintf(c->lost_why, sizeof(c->lost_why),
			 "backup %s was taken over by another push (this one was thought dead)",
			 c->info.name);
	pthread_mutex_unlock(&c->lock);
	return err_set(E_CANCELLED, "%s", c->lost_why);
}

bool catalog_claim_lost(claim *c)
{
	pthread_mutex_lock(&c->lock);
	bool lost = c->lost;
	pthread_mutex_unlock(&c->lock);
	return lost;
}

const char *catalog_claim_key(const claim *c)
{
	return c->info.key;
}

static void stop_renewing(claim *c)
{
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->lock);
	if (c->thread_started)
		pthread_join(c->thread, NULL);
	c->thread_started = false;
}

err_code catalog_claim_seal(claim *c)
{
	stop_renewing(c);
	return catalog_claim_check(c);
}

void catalog_claim_end(claim *c, bool drop)
{
	if (c == NULL)
		return;
	stop_renewing(c);
	/* after a failure: the caller's error stands, whatever the removal does */
	err_code code = err_last();
	char *msg = xstrdup(err_msg());
	if (drop && !c->lost)
		repo_remove(c->r, c->info.key);
	if (code != E_OK)
		err_set(code, "%s", msg);
	else
		err_clear();
	free(msg);

	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
	catalog_claim_info_free(&c->info);
	free(c);
}

/* The newest claim generation of each backup folder. */
typedef struct newest {
	char *name;
	int gen;
	const repo_obj *obj;
} newest;

err_code catalog_claim_read(repo *r, const char *key, claim_info *out)
{
	return claim_read(r, key, out);
}

err_code catalog_claims(repo *r, claim_list *out)
{
	repo_objs l;
	memset(out, 0, sizeof(*out));
	TRY(repo_list(r, repo_backups(r), true, &l));
	newest *nw = xcalloc(l.len ? l.len : 1, sizeof(*nw));
	size_t nn = 0;
	for (size_t i = 0; i < l.len; i++) {
		const char *rest = l.items[i].key + strlen(repo_backups(r));
		const char *slash = strchr(rest, '/');
		if (slash == NULL || !str_has_prefix(slash + 1, CLAIM_PREFIX))
			continue;
		char *name = xasprintf("%.*s", (int)(slash - rest), rest);
		int gen = claim_generation(r, l.items[i].key, name);
		size_t k = 0;
		while (k < nn && strcmp(nw[k].name, name) != 0)
			k++;
		if (gen == 0 || (k < nn && nw[k].gen >= gen)) {
			free(name);
			continue;
		}
		if (k == nn)
			nw[nn++].name = name;
		else
			free(name);
		nw[k].gen = gen;
		nw[k].obj = &l.items[i];
	}
	err_code rc = E_OK;
	time_t now = time(NULL);
	out->items = xcalloc(nn ? nn : 1, sizeof(*out->items));
	for (size_t k = 0; rc == E_OK && k < nn; k++) {
		claim_info c;
		memset(&c, 0, sizeof(c));
		/* A finished backup's claim stays as a record: its content is not needed. */
		char *sentinel = xasprintf("%s%s" SENTINEL_SUFFIX, repo_backups(r), nw[k].name);
		bool complete = false;
		for (size_t i = 0; i < l.len && !complete; i++)
			complete = strcmp(l.items[i].key, sentinel) == 0;
		free(sentinel);
		if (!complete) {
			rc = claim_read(r, nw[k].obj->key, &c);
			if (rc == E_NOTFOUND) { /* finished or removed since the listing */
				err_clear();
				rc = E_OK;
				continue;
			}
			if (rc == E_CORRUPT) { /* half a claim: nobody renews it */
				err_clear();
				rc = E_OK;
				memset(&c, 0, sizeof(c));
				c.stored_at = nw[k].obj->mtime;
			}
			if (rc != E_OK)
				break;
		}
		free(c.name);
		free(c.key);
		c.name = xstrdup(nw[k].name);
		c.key = xstrdup(nw[k].obj->key);
		/* Either clock saying recent is enough: a running push is never touched. */
		time_t last = c.renewed_at > c.stored_at ? c.renewed_at : c.stored_at;
		c.state = complete ? CLAIM_COMPLETE
			: now - last < CLAIM_RUNNING_S && !gone_here(&c) ? CLAIM_RUNNING
																  : CLAIM_DEAD;
		out->items[out->len++] = c;
	}
	for (size_t k = 0; k < nn; k++)
		free(nw[k].name);
	free(nw);
	repo_objs_free(&l);
	if (rc != E_OK)
		catalog_claims_free(out);
	return rc;
}
