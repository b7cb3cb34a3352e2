/*
 * Failover storages, as WAL-G has them (WALG_FAILOVER_STORAGES): the main storage ("default")
 * and named others, in WAL-G's order, seen by a command as one storage. A writer uses the
 * first that is alive; a reader sees every alive one merged (an object from the first that
 * holds it, listings the union, updates wherever the object is, deletes everywhere).
 */
#include "internal/storage/storage.h"

#include <ctype.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pipe/pipe.h"

#define DEFAULT_NAME "default"
/* WAL-G's name for the object its write check stores, so that both tools clean up each other's. */
#define CHECK_OBJECT "wal-g_storage_check"
#define MAX_MEMBERS 32

typedef struct member {
	char *name;
	storage *st;	  /* NULL when it could not be opened (a file system's root that is a file) */
	char *open_error; /* ... why */
	atomic_int busy; /* alive checks still running on it (one timed out) */
} member;

typedef struct failover {
	storage base;
	storage_use use;
	member *m;
	size_t n;
	bool checks;
	long timeout_ms;
	uint64_t check_bytes;
	long lifetime_ms;
	pthread_mutex_t lock;
	/* STORAGE_READ, STORAGE_EVERY: which members are alive, once checked */
	bool checked;
	bool *alive;
	char *failed_msg; /* the check's error, given to every operation after it */
	char *desc;
	atomic_int preferred; /* a reader's member read first (storage_prefer), -1 for none */
	/* STORAGE_WRITE: the member in use, -1 before the first operation */
	int chosen;
	double chosen_at;
	bool rechecking; /* storage_recheck was called: an old or failed choice is made again */
	atomic_bool failed;
} failover;

/* ------------------------------------------------------------------------------------------ */
/* Configuration: WALG_FAILOVER_STORAGES parsed into its entries, as written                  */
/* ------------------------------------------------------------------------------------------ */

void storage_entries_free(storage_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < e[i].n; k++) {
			free((char *)(uintptr_t)e[i].pairs[k].name);
			free((char *)(uintptr_t)e[i].pairs[k].value);
		}
		free(e[i].pairs);
		free(e[i].name);
	}
	free(e);
}

/* WAL-G orders failovers by "NAME#HASH", which is the order of "NAME#". */
static int entry_cmp(const void *a, const void *b)
{
	const char *x = ((const storage_entry *)a)->name, *y = ((const storage_entry *)b)->name;
	for (;; x++, y++) {
		unsigned char cx = *x ? (unsigned char)*x : '#', cy = *y ? (unsigned char)*y : '#';
		if (cx != cy || (*x == '\0' && *y == '\0'))
			return (cx > cy) - (cx < cy);
		if (*x == '\0' || *y == '\0')
			return *x == '\0' ? -1 : 1;
	}
}

static err_code entry_value(const char *where, const char *key, const json_t *v, char **out)
{
	*out = NULL;
	if (json_is_string(v))
		*out = xstrdup(json_string_value(v));
	else if (json_is_integer(v))
		*out = xasprintf("%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		*out = xasprintf("%.17g", json_real_value(v));
	else if (json_is_boolean(v))
		*out = xstrdup(json_is_true(v) ? "true" : "false");
	else if (!json_is_null(v))
		return err_set(E_CONFIG, "%s: %s must be a string, a number or true/false", where, key);
	return E_OK;
}

/* WALG_FAILOVER_STORAGES, a JSON object of named objects of settings, in WAL-G's order. */
static err_code parse_entries(const char *text, storage_entry **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	json_error_t jerr;
	json_t *doc = json_loads(text, 0, &jerr);
	if (doc == NULL || !json_is_object(doc)) {
		json_decref(doc);
		return err_set(E_CONFIG, "WALG_FAILOVER_STORAGES: expected a JSON object of named "
								 "storages ({\"NAME\": {\"WALG_S3_PREFIX\": \"s3://...\"}}), %s",
					   doc == NULL ? jerr.text : "got another JSON value");
	}
	if (json_object_size(doc) >= MAX_MEMBERS) {
		json_decref(doc);
		return err_set(E_CONFIG, "WALG_FAILOVER_STORAGES: at most %d storages", MAX_MEMBERS - 1);
	}
	storage_entry *e = xcalloc(json_object_size(doc) + 1, sizeof(*e));
	size_t k = 0;
	err_code rc = E_OK;
	const char *name;
	json_t *settings;
	json_object_foreach(doc, name, settings)
	{
		char *where = xasprintf("WALG_FAILOVER_STORAGES \"%s\"", name);
		if (name[0] == '\0' || strcasecmp(name, DEFAULT_NAME) == 0)
			rc = err_set(E_CONFIG, "%s: the name is %s", where,
						 name[0] ? "reserved for the main storage" : "empty");
		else if (!json_is_object(settings))
			rc = err_set(E_CONFIG, "%s: expected a JSON object of settings", where);
		if (rc == E_OK) {
			e[k].name = xstrdup(name);
			e[k].pairs = xcalloc(json_object_size(settings) + 1, sizeof(*e[k].pairs));
			const char *key;
			json_t *v;
			json_object_foreach(settings, key, v)
			{
				char *value;
				rc = entry_value(where, key, v, &value);
				if (rc != E_OK)
					break;
				if (value == NULL)
					continue;
				/* viper's keys are case-insensitive */
				char *upper = xstrdup(key);
				for (char *p = upper; *p; p++)
					*p = (char)toupper((unsigned char)*p);
				e[k].pairs[e[k].n++] = (config_pair){ upper, value };
			}
			k++;
		}
		free(where);
		if (rc != E_OK)
			break;
	}
	json_decref(doc);
	if (rc != E_OK) {
		storage_entries_free(e, k);
		return rc;
	}
	xqsort(e, k, sizeof(*e), entry_cmp);
	*out = e;
	*n = k;
	return E_OK;
}

/*
 * A storage that cannot be opened for what it finds (E_IO: a file system's root that is a
 * file) is a dead member, as one that fails its check; a mistake in its settings an error.
 */
static err_code open_member(const storage_settings *cfg, member *m)
{
	err_code rc = storage_open(cfg, &m->st);
	if (rc == E_IO) {
		m->open_error = xstrdup(err_msg());
		err_clear();
		return E_OK;
	}
	return rc;
}

/* false when a check that timed out still runs on it: then it is left to the process's end. */
static bool member_free(member *m)
{
	if (atomic_load(&m->busy) != 0)
		return false;
	storage_free(m->st);
	free(m->name);
	free(m->open_error);
	return true;
}

/* Opens every storage, the main one first: n members into *out. */
static err_code open_members(const storage_settings *cfg, member **out, size_t *n)
{
	const storage_failover *fo = cfg->failovers;
	*out = NULL;
	*n = 0;
	if (cfg->failovers == NULL) {
		/* Entries nobody resolved would be left out in silence: reads would miss their objects. */
		storage_entry *e;
		size_t ne;
		TRY(storage_entries(cfg, &e, &ne));
		storage_entries_free(e, ne);
		if (ne > 0)
			return err_set(E_CONFIG, "WALG_FAILOVER_STORAGES: its %zu storage(s) were not "
									 "resolved before opening", ne);
	}
	member *m = xcalloc(cfg->nfailovers + 1, sizeof(*m));
	m[0].name = xstrdup(DEFAULT_NAME);
	err_code rc = open_member(cfg, &m[0]);
	size_t k = 1;
	for (size_t i = 0; rc == E_OK && i < cfg->nfailovers; i++, k++) {
		m[k].name = xstrdup(fo[i].name);
		rc = open_member(&fo[i].settings, &m[k]);
		if (rc != E_OK)
			err_wrap(rc, "WALG_FAILOVER_STORAGES \"%s\"", fo[i].name);
	}
	if (rc != E_OK) {
		for (size_t i = 0; i < k; i++)
			member_free(&m[i]);
		free(m);
		return rc;
	}
	*out = m;
	*n = k;
	return E_OK;
}

bool storage_has_failovers(const storage_settings *cfg)
{
	return cfg->failover_storages != NULL && cfg->failover_storages[0] != '\0';
}

err_code storage_entries(const storage_settings *s, storage_entry **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	return storage_has_failovers(s) ? parse_entries(s->failover_storages, out, n) : E_OK;
}

err_code storage_names(const storage_settings *cfg, char ***names, size_t *n)
{
	storage_entry *e;
	size_t ne;
	TRY(storage_entries(cfg, &e, &ne));
	*names = xcalloc(ne + 1, sizeof(**names));
	(*names)[0] = xstrdup(DEFAULT_NAME);
	for (size_t i = 0; i < ne; i++)
		(*names)[i + 1] = xstrdup(e[i].name);
	*n = ne + 1;
	storage_entries_free(e, ne);
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Alive checks, WAL-G's: a listing of the root; a writer's also stores and removes an object */
/* ------------------------------------------------------------------------------------------ */

typedef struct check_job {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int refs; /* the waiter and the thread: the last one frees it */
	bool done;
	err_code rc;
	char msg[512];
	member *mem;
	bool write;
	uint64_t bytes;
} check_job;

static err_code check_write(storage *st, uint64_t bytes)
{
	sink *s;
	TRY(storage_put(st, CHECK_OBJECT, &s));
	unsigned char buf[8192];
	uint64_t x = (uint64_t)(uintptr_t)&buf ^ 0x9e3779b97f4a7c15ull;
	err_code rc = E_OK;
	for (uint64_t left = bytes; rc == E_OK && left > 0;) {
		for (size_t i = 0; i < sizeof(buf); i += 8) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			memcpy(buf + i, &x, 8);
		}
		size_t n = left < sizeof(buf) ? (size_t)left : sizeof(buf);
		rc = sink_write(s, buf, n);
		left -= n;
	}
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	TRY(rc);
	return storage_remove(st, CHECK_OBJECT);
}

static void job_release(check_job *j)
{
	pthread_mutex_lock(&j->lock);
	bool last = --j->refs == 0;
	pthread_mutex_unlock(&j->lock);
	if (last) {
		pthread_mutex_destroy(&j->lock);
		pthread_cond_destroy(&j->cv);
		free(j);
	}
}

static void *check_thread(void *arg)
{
	check_job *j = arg;
	obj_list l;
	err_code rc = storage_list(j->mem->st, "", false, &l);
	obj_list_free(&l);
	if (rc == E_OK && j->write)
		rc = check_write(j->mem->st, j->bytes);
	/*
	 * The thread is detached and the process may end as soon as the waiter is told: OpenSSL's
	 * state of this thread (the error queue a failed connection fills) goes now, not in a
	 * thread-exit handler that may never run.
	 */
	OPENSSL_thread_stop();
	/*
	 * The member may be freed once this is 0: it is the thread's last use of it, before the
	 * waiter learns the check is done.
	 */
	atomic_fetch_sub(&j->mem->busy, 1);
	pthread_mutex_lock(&j->lock);
	j->rc = rc;
	snprintf(j->msg, sizeof(j->msg), "%s", rc == E_OK ? "" : err_msg());
	j->done = true;
	pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->lock);
	err_clear();
	job_release(j);
	return NULL;
}

/*
 * Checks members idx[0..k) at once within the timeout: alive[i] for each, and for a dead one
 * a warning naming it and why. A check that outlives the timeout goes on alone, its member
 * kept (failover_free leaves it).
 */
static void check_members(failover *f, const size_t *idx, size_t k, bool write, bool *alive)
{
	check_job **jobs = xcalloc(k, sizeof(*jobs));
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PIPE_THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (size_t i = 0; i < k; i++) {
		check_job *j = xcalloc(1, sizeof(*j));
		pthread_mutex_init(&j->lock, NULL);
		pthread_cond_init(&j->cv, NULL);
		j->refs = 2;
		j->mem = &f->m[idx[i]];
		j->write = write;
		j->bytes = f->check_bytes;
		atomic_fetch_add(&j->mem->busy, 1);
		pthread_t t;
		if (j->mem->st == NULL) {
			atomic_fetch_sub(&j->mem->busy, 1);
			j->refs = 1;
			j->done = true;
			j->rc = E_IO;
			snprintf(j->msg, sizeof(j->msg), "%s", j->mem->open_error);
		} else if (pthread_create(&t, &attr, check_thread, j) != 0) {
			atomic_fetch_sub(&j->mem->busy, 1);
			j->refs = 1;
			j->done = true;
			j->rc = E_FAIL;
			snprintf(j->msg, sizeof(j->msg), "cannot start a thread for its check");
		}
		jobs[i] = j;
	}
	pthread_attr_destroy(&attr);
	struct timespec deadline = time_in_ms(CLOCK_REALTIME, f->timeout_ms);
	for (size_t i = 0; i < k; i++) {
		check_job *j = jobs[i];
		pthread_mutex_lock(&j->lock);
		while (!j->done && pthread_cond_timedwait(&j->cv, &j->lock, &deadline) == 0)
			;
		alive[i] = j->done && j->rc == E_OK;
		if (!alive[i])
			log_warn("storage \"%s\" (%s) is not alive: %s", j->mem->name,
					 j->mem->st ? storage_describe(j->mem->st) : "not opened",
					 j->done ? j->msg : "its check took longer than "
										"WALG_FAILOVER_STORAGES_CHECK_TIMEOUT");
		pthread_mutex_unlock(&j->lock);
		job_release(j);
	}
	free(jobs);
}

/* ------------------------------------------------------------------------------------------ */
/* Which members an operation uses                                                            */
/* ------------------------------------------------------------------------------------------ */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* STORAGE_WRITE: the first alive member, in order, checked one after another. */
static err_code choose(failover *f, member **out)
{
	pthread_mutex_lock(&f->lock);
	int before = f->chosen;
	if (f->chosen >= 0 && f->rechecking &&
		(atomic_load(&f->failed) || (now_s() - f->chosen_at) * 1000 > (double)f->lifetime_ms))
		f->chosen = -1;
	f->rechecking = false;
	err_code rc = E_OK;
	if (f->chosen < 0) {
		for (size_t i = 0; i < f->n && f->chosen < 0; i++) {
			bool alive = true;
			if ((f->checks && f->n > 1) || f->m[i].st == NULL)
				check_members(f, &i, 1, true, &alive);
			if (alive)
				f->chosen = (int)i;
		}
		if (f->chosen < 0) {
			rc = err_set(E_IO, "no storage is alive (the main one and WALG_FAILOVER_STORAGES; "
							   "see the warnings above)");
		} else {
			f->chosen_at = now_s();
			atomic_store(&f->failed, false);
			/* said when it is not the main storage, and when the daemon changes storage */
			if (f->chosen > 0 || (before >= 0 && before != f->chosen))
				log_info("writing to storage \"%s\" (%s)", f->m[f->chosen].name,
						 storage_describe(f->m[f->chosen].st));
		}
	}
	if (rc == E_OK)
		*out = &f->m[f->chosen];
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* STORAGE_READ, STORAGE_EVERY: which members are alive, checked at once the first time. */
static err_code check_all(failover *f)
{
	pthread_mutex_lock(&f->lock);
	if (!f->checked) {
		f->checked = true;
		f->alive = xcalloc(f->n, sizeof(*f->alive));
		size_t *idx = xcalloc(f->n, sizeof(*idx));
		size_t k = 0;
		for (size_t i = 0; i < f->n; i++) {
			f->alive[i] = true;
			if ((f->checks && f->n > 1) || f->m[i].st == NULL)
				idx[k++] = i;
		}
		bool *alive = xcalloc(f->n, sizeof(*alive));
		check_members(f, idx, k, f->use == STORAGE_EVERY, alive);
		for (size_t i = 0; i < k; i++)
			f->alive[idx[i]] = alive[i];
		free(alive);
		free(idx);
		size_t up = 0;
		char *dead = xstrdup("");
		for (size_t i = 0; i < f->n; i++) {
			up += f->alive[i];
			if (!f->alive[i]) {
				char *d = xasprintf("%s%s\"%s\"", dead, dead[0] ? ", " : "", f->m[i].name);
				free(dead);
				dead = d;
			}
		}
		if (up == 0)
			f->failed_msg = xstrdup("no storage is alive (the main one and "
									"WALG_FAILOVER_STORAGES; see the warnings above)");
		else if (f->use == STORAGE_EVERY && up < f->n)
			f->failed_msg = xasprintf(
				"storage %s is not alive: this command works on every storage at once, so "
				"that none loses what another's backups need; run it again when it is back "
				"(or without it in WALG_FAILOVER_STORAGES)",
				dead);
		free(dead);
		char *desc = xstrdup("");
		for (size_t i = 0; i < f->n; i++)
			if (f->alive[i]) {
				char *d = xasprintf("%s%s%s (%s)", desc, desc[0] ? ", " : "storages ",
									f->m[i].name, storage_describe(f->m[i].st));
				free(desc);
				desc = d;
			}
		f->desc = desc;
	}
	err_code rc = f->failed_msg ? err_set(E_IO, "%s", f->failed_msg) : E_OK;
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* The members an operation goes to, in order (at most f->n). */
static err_code used(failover *f, member **out, size_t *n)
{
	*n = 0;
	if (f->use == STORAGE_WRITE) {
		TRY(choose(f, &out[0]));
		*n = 1;
		return E_OK;
	}
	TRY(check_all(f));
	int first = atomic_load(&f->preferred);
	if (first >= 0 && f->alive[first])
		out[(*n)++] = &f->m[first];
	for (size_t i = 0; i < f->n; i++)
		if (f->alive[i] && (int)i != first)
			out[(*n)++] = &f->m[i];
	return E_OK;
}

/* An operation's outcome, noted: a writer's next choice after storage_recheck follows it. */
static err_code note(failover *f, err_code rc)
{
	if (f->use == STORAGE_WRITE && rc != E_OK && rc != E_NOTFOUND && rc != E_EXISTS)
		atomic_store(&f->failed, true);
	return rc;
}

#define USED(f, mem, n)                                                                       \
	member *mem[MAX_MEMBERS];                                                                 \
	size_t n;                                                                                 \
	TRY(used((f), mem, &n))

/* ------------------------------------------------------------------------------------------ */
/* Reads: the first member that holds the object                                              */
/* ------------------------------------------------------------------------------------------ */

static err_code notfound(failover *f, const char *key)
{
	return err_set(E_NOTFOUND, "object %s does not exist in %s", key, storage_describe(&f->base));
}

static err_code fo_get(storage *st, const char *key, sink *into)
{
	failover *f = (failover *)st;
	USED(f, mem, n);
	for (size_t i = 0; i < n; i++) {
		err_code rc = note(f, storage_get(mem[i]->st, key, into));
		if (rc != E_NOTFOUND)
			return rc;
		err_clear();
	}
	return notfound(f, key);
}

static err_code fo_get_range(storage *st, const char *key, uint64_t offset, uint64_t len,
							 sink *into)
{
	failover *f = (failover *)st;
	USED(f, mem, n);
	for (size_t i = 0; i < n; i++) {
		err_code rc = note(f, storage_get_range(mem[i]->st, key, offset, len, into));
		if (rc != E_NOTFOUND)
			return rc;
		err_clear();
	}
	return notfound(f, key);
}

/* The first member holding key: *at its index in mem (of n), with its info. E_NOTFOUND else. */
static err_code find(failover *f, member **mem, size_t n, const char *key, size_t *at,
					 obj_info *info)
{
	for (size_t i = 0; i < n; i++) {
		err_code rc = note(f, storage_stat(mem[i]->st, key, info));
		if (rc == E_OK) {
			*at = i;
			info->where = mem[i]->name;
			return E_OK;
		}
		if (rc != E_NOTFOUND)
			return rc;
		err_clear();
	}
	return notfound(f, key);
}

static err_code fo_stat(storage *st, const char *key, obj_info *info)
{
	failover *f = (failover *)st;
	USED(f, mem, n);
	size_t at;
	return find(f, mem, n, key, &at, info);
}

typedef struct tagged {
	obj_info info;
	size_t member;
} tagged;

static int tagged_cmp(const void *a, const void *b)
{
	const tagged *x = a, *y = b;
	int c = strcmp(x->info.key, y->info.key);
	return c ? c : (x->member > y->member) - (x->member < y->member);
}

/* Every member's list, merged: each key once, as the first member holding it has it. */
static err_code merged(failover *f, bool temporaries, const char *prefix, bool recursive,
					   obj_list *out)
{
	USED(f, mem, n);
	tagged *all = NULL;
	size_t len = 0, cap = 0;
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < n; i++) {
		obj_list l;
		rc = note(f, temporaries ? storage_list_temporaries(mem[i]->st, prefix, &l)
								 : storage_list(mem[i]->st, prefix, recursive, &l));
		if (rc != E_OK) {
			obj_list_free(&l);
			break;
		}
		if (len + l.len > cap) {
			cap = len + l.len + 64;
			all = xrealloc(all, cap * sizeof(*all));
		}
		for (size_t k = 0; k < l.len; k++) {
			all[len].info = l.items[k];
			all[len].info.where = mem[i]->name;
			all[len++].member = i;
		}
		free(l.items); /* the keys moved into all */
	}
	if (rc == E_OK && n > 1)
		xqsort(all, len, sizeof(*all), tagged_cmp);
	for (size_t k = 0; k < len; k++) {
		bool dup = k > 0 && n > 1 && strcmp(all[k].info.key, all[k - 1].info.key) == 0;
		if (rc == E_OK && !dup) {
			obj_list_add(out, all[k].info.key, all[k].info.size, all[k].info.mtime,
						 all[k].info.mtime_nsec);
			out->items[out->len - 1].where = all[k].info.where;
		}
	}
	for (size_t k = 0; k < len; k++)
		free(all[k].info.key);
	free(all);
	return rc;
}

static err_code fo_list(storage *st, const char *prefix, bool recursive, obj_list *out)
{
	return merged((failover *)st, false, prefix, recursive, out);
}

static err_code fo_list_temporaries(storage *st, const char *prefix, obj_list *out)
{
	return merged((failover *)st, true, prefix, false, out);
}

/* ------------------------------------------------------------------------------------------ */
/* Writes                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* One stream into several puts (an object updated in every storage that holds it). */
typedef struct tee_sink {
	sink base;
	sink **outs;
	size_t n;
	failover *f;
} tee_sink;

static err_code tee_write(sink *s, const void *buf, size_t len)
{
	tee_sink *t = (tee_sink *)s;
	for (size_t i = 0; i < t->n; i++)
		TRY(note(t->f, sink_write(t->outs[i], buf, len)));
	return E_OK;
}

static err_code tee_finish(sink *s)
{
	tee_sink *t = (tee_sink *)s;
	for (size_t i = 0; i < t->n; i++)
		TRY(note(t->f, sink_finish(t->outs[i])));
	return E_OK;
}

static void tee_free(sink *s)
{
	tee_sink *t = (tee_sink *)s;
	for (size_t i = 0; i < t->n; i++)
		sink_free(t->outs[i]);
	free(t->outs);
	free(t);
}

static const sink_ops tee_ops = { tee_write, tee_finish, tee_free };

typedef enum { PUT_PLAIN, PUT_LONG, PUT_NEW } put_kind;

static err_code put_one(storage *st, put_kind kind, const char *key, sink **out)
{
	return kind == PUT_NEW	 ? storage_put_new(st, key, out)
		: kind == PUT_LONG ? storage_put_long(st, key, out)
						   : storage_put(st, key, out);
}

/*
 * A writer's put goes to its storage; a reader's updates the object in every storage that
 * holds it, or stores it in the first (WAL-G's "update all found"); put_new refuses an object
 * any of them holds.
 */
static err_code fo_put_kind(storage *st, put_kind kind, const char *key, sink **out)
{
	failover *f = (failover *)st;
	*out = NULL;
	USED(f, mem, n);
	sink **outs = xcalloc(n, sizeof(*outs));
	size_t k = 0;
	err_code rc = E_OK;
	if (f->use == STORAGE_WRITE || n == 1) {
		rc = note(f, put_one(mem[0]->st, kind, key, &outs[k]));
		k += rc == E_OK;
	} else {
		for (size_t i = 0; rc == E_OK && i < n; i++) {
			obj_info info;
			rc = note(f, storage_stat(mem[i]->st, key, &info));
			if (rc == E_NOTFOUND) {
				err_clear();
				rc = E_OK;
				continue;
			}
			if (rc == E_OK && kind == PUT_NEW)
				rc = err_set(E_EXISTS, "%s already exists in storage \"%s\"", key, mem[i]->name);
			if (rc == E_OK)
				rc = note(f, put_one(mem[i]->st, kind, key, &outs[k]));
			k += rc == E_OK;
		}
		if (rc == E_OK && k == 0) {
			rc = note(f, put_one(mem[0]->st, kind, key, &outs[k]));
			k += rc == E_OK;
		}
	}
	if (rc != E_OK) {
		for (size_t i = 0; i < k; i++)
			sink_free(outs[i]);
		free(outs);
		return rc;
	}
	tee_sink *t = xcalloc(1, sizeof(*t));
	t->base.ops = &tee_ops;
	t->outs = outs;
	t->n = k;
	t->f = f;
	*out = &t->base;
	return E_OK;
}

static err_code fo_put(storage *st, const char *key, sink **out)
{
	return fo_put_kind(st, PUT_PLAIN, key, out);
}

static err_code fo_put_long(storage *st, const char *key, sink **out)
{
	return fo_put_kind(st, PUT_LONG, key, out);
}

static err_code fo_put_new(storage *st, const char *key, sink **out)
{
	return fo_put_kind(st, PUT_NEW, key, out);
}

/* Deletes reach every storage used: a reader's (retention's) are WAL-G's "delete from all". */
static err_code fo_remove(storage *st, const char *key)
{
	failover *f = (failover *)st;
	USED(f, mem, n);
	for (size_t i = 0; i < n; i++)
		TRY(note(f, storage_remove(mem[i]->st, key)));
	return E_OK;
}

static err_code fo_remove_many(storage *st, const char *const *keys, size_t nkeys)
{
	failover *f = (failover *)st;
	USED(f, mem, n);
	for (size_t i = 0; i < n; i++)
		TRY(note(f, storage_remove_many(mem[i]->st, keys, nkeys)));
	return E_OK;
}

/* Locked until the latest of the storages' locks. */
static err_code fo_locked_until(storage *st, const char *const *keys, size_t nkeys,
								time_t *until)
{
	failover *f = (failover *)st;
	USED(f, mem, n);
	time_t *one = xcalloc(nkeys, sizeof(*one));
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < n; i++) {
		rc = note(f, storage_locked_until(mem[i]->st, keys, nkeys, one));
		for (size_t k = 0; rc == E_OK && k < nkeys; k++)
			if (one[k] > until[k])
				until[k] = one[k];
	}
	free(one);
	return rc;
}

static const char *fo_describe(storage *st)
{
	failover *f = (failover *)st;
	if (f->use == STORAGE_WRITE) {
		int c = f->chosen;
		return c >= 0 ? storage_describe(f->m[c].st) : "failover storages";
	}
	return f->desc != NULL ? f->desc : "failover storages";
}

static const char *fo_name(storage *st)
{
	failover *f = (failover *)st;
	member *m;
	if (f->use != STORAGE_WRITE && f->n > 1)
		return DEFAULT_NAME;
	if (choose(f, &m) != E_OK) {
		err_clear();
		return DEFAULT_NAME;
	}
	return m->name;
}

static void fo_prefer(storage *st, const char *name)
{
	failover *f = (failover *)st;
	int at = -1;
	for (size_t i = 0; name != NULL && i < f->n; i++)
		if (strcmp(f->m[i].name, name) == 0)
			at = (int)i;
	atomic_store(&f->preferred, at);
}

static void fo_recheck(storage *st)
{
	failover *f = (failover *)st;
	pthread_mutex_lock(&f->lock);
	f->rechecking = true;
	pthread_mutex_unlock(&f->lock);
}

static void fo_free(storage *st)
{
	failover *f = (failover *)st;
	bool all = true;
	for (size_t i = 0; i < f->n; i++)
		all &= member_free(&f->m[i]);
	if (all)
		free(f->m);
	free(f->alive);
	free(f->failed_msg);
	free(f->desc);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static const storage_ops failover_ops = {
	.put = fo_put,
	.get = fo_get,
	.stat = fo_stat,
	.list = fo_list,
	.remove = fo_remove,
	.describe = fo_describe,
	.free = fo_free,
	.put_new = fo_put_new,
	.list_temporaries = fo_list_temporaries,
	.remove_many = fo_remove_many,
	.put_long = fo_put_long,
	.locked_until = fo_locked_until,
	.get_range = fo_get_range,
	.recheck = fo_recheck,
	.name = fo_name,
	.prefer = fo_prefer,
};

err_code storage_open_use(const storage_settings *cfg, storage_use use, const char *target, storage **out)
{
	*out = NULL;
	if (target == NULL || target[0] == '\0')
		target = cfg->target_storage;
	if (!storage_has_failovers(cfg) &&
		(target == NULL || target[0] == '\0' || strcmp(target, DEFAULT_NAME) == 0))
		return storage_open(cfg, out);
	member *m;
	size_t n;
	if (storage_has_failovers(cfg)) {
		TRY(open_members(cfg, &m, &n));
	} else {
		m = xcalloc(1, sizeof(*m));
		m[0].name = xstrdup(DEFAULT_NAME);
		n = 1;
		err_code rc = open_member(cfg, &m[0]);
		if (rc != E_OK) {
			member_free(&m[0]);
			free(m);
			return rc;
		}
	}
	failover *f = xcalloc(1, sizeof(*f));
	f->base.ops = &failover_ops;
	f->use = use;
	f->m = m;
	f->n = n;
	f->checks = cfg->failover_check;
	f->timeout_ms = cfg->failover_check_timeout_ms;
	f->check_bytes = cfg->failover_check_bytes;
	f->lifetime_ms = cfg->failover_cache_lifetime_ms;
	f->chosen = -1;
	atomic_store(&f->preferred, -1);
	pthread_mutex_init(&f->lock, NULL);
	if (target != NULL && target[0] != '\0') {
		/* The one named, alone, if it is alive: WAL-G's --target-storage. */
		size_t at = n;
		for (size_t i = 0; i < n; i++)
			if (strcmp(m[i].name, target) == 0)
				at = i;
		err_code rc = E_OK;
		if (at == n) {
			char *names = xstrdup("");
			for (size_t i = 0; i < n; i++) {
				char *s = xasprintf("%s%s%s", names, i ? ", " : "", m[i].name);
				free(names);
				names = s;
			}
			rc = err_set(E_CONFIG, "storage \"%s\" (--target-storage, WALG_TARGET_STORAGE) is "
								   "not configured; the storages are %s",
						 target, names);
			free(names);
		} else {
			bool alive = true;
			if (f->checks)
				check_members(f, &at, 1, use != STORAGE_READ, &alive);
			if (!alive)
				rc = err_set(E_IO, "storage \"%s\" is not alive (see the warning above)", target);
		}
		if (rc != E_OK) {
			fo_free(&f->base);
			return rc;
		}
		/* the others are of no use: only the target stays */
		for (size_t i = 0; i < n; i++)
			if (i != at)
				member_free(&m[i]);
		if (at != 0) {
			m[0].name = m[at].name;
			m[0].st = m[at].st;
			m[0].open_error = m[at].open_error;
			atomic_store(&m[0].busy, atomic_load(&m[at].busy));
		}
		f->n = 1;
		f->checks = false;
	}
	*out = &f->base;
	return E_OK;
}

void storage_prefer(storage *st, const char *name)
{
	if (st->ops->prefer != NULL)
		st->ops->prefer(st, name);
}

const char *storage_name(storage *st)
{
	return st->ops->name != NULL ? st->ops->name(st) : DEFAULT_NAME;
}

void storage_recheck(storage *st)
{
	if (st != NULL && st->ops->recheck != NULL)
		st->ops->recheck(st);
}
