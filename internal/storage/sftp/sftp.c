/*
 * SFTP storage (WALG_SSH_PREFIX=ssh://host/path): objects are files below a folder of an SSH
 * server, reached through a bounded pool of SSH sessions (libssh2's are not thread-safe:
 * one operation a session at a time). A put writes a hidden temporary beside the object,
 * fsyncs it (fsync@openssh.com), closes it and renames it over the object with
 * posix-rename@openssh.com, so a reader sees the whole object or none; put_new uses the
 * draft's RENAME, which OpenSSH never lets replace a file. A broken connection is retried
 * with the HTTP stores' backoff: a put goes on writing its temporary where the server's
 * acknowledgements left it, a get reads on from the byte it had reached, pinned to the
 * object's size and time.
 */
#include "internal/storage/http/http.h"
#include "internal/storage/sftp/sftp.h"

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SFTP_CHUNK (32u << 10) /* bytes of one WRITE or READ: every server takes 32 KiB */
#define SFTP_WINDOW 32		   /* WRITEs or READs in flight on one session: 1 MiB */
#define SFTP_REMOVE_BATCH 256  /* keys a worker deletes between two progress marks */
#define SFTP_CONNECT_TIMEOUT_MS 10000
#define SFTP_STALL_MS 30000
#define SFTP_IDLE_MAX_MS 60000 /* an idle session older than this is closed, not reused */
/* Handshakes at once: below OpenSSH's MaxStartups (10), past which sshd drops new connections */
#define SFTP_CONNECTING_MAX 8

typedef struct sftp_conn {
	sftp_session *s;
	long idle_since;
} sftp_conn;

typedef struct sftp_store {
	storage base;
	ssh_target target;
	char *host, *user, *password, *key_path, *key_passphrase, *known_hosts, *target_what;
	char *prefix;	/* prepended to keys: "/srv/repo/", "/" or "" (the login folder) */
	char *rootdir;	/* the repository's folder: "/srv/repo", "/" or "." */
	char *describe; /* ssh://host:port/srv/repo */
	http_retry retry;
	int width;		/* deletes in parallel */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	sftp_conn **idle;
	size_t nidle, open, max;
	size_t connecting; /* sessions being set up */
	atomic_bool root_seen;
	atomic_bool told_rename;
} sftp_store;

static sftp_connector test_connect;
static void *test_connect_arg;

void sftp_set_test_connector(sftp_connector connect, void *arg)
{
	test_connect = connect;
	test_connect_arg = arg;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The thread's error, kept across cleanup that may set or clear it. */
typedef struct saved_err {
	err_code code;
	char msg[ERR_MSG_MAX];
} saved_err;

static void err_save(saved_err *e)
{
	e->code = err_last();
	snprintf(e->msg, sizeof(e->msg), "%s", err_msg());
}

static err_code err_restore(const saved_err *e)
{
	if (e->code == E_OK) {
		err_clear();
		return E_OK;
	}
	return err_set(e->code, "%s", e->msg);
}

static char *obj_path(const sftp_store *st, const char *key)
{
	return xasprintf("%s%s", st->prefix, key);
}

static bool is_reg(const sftp_attrs *a)
{
	/* OpenSSH sends the type bits; a server that sends no mode is taken at its word */
	return !(a->flags & SSH_FILEXFER_ATTR_PERMISSIONS) || (a->perm & S_IFMT) == S_IFREG;
}

static bool is_dir(const sftp_attrs *a)
{
	return (a->flags & SSH_FILEXFER_ATTR_PERMISSIONS) && (a->perm & S_IFMT) == S_IFDIR;
}

/* ------------------------------------------------------------------------------------------ */
/* The pool of sessions                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void conn_free(sftp_conn *c)
{
	if (c != NULL) {
		sftp_session_free(c->s);
		free(c);
	}
}

static err_code conn_new(sftp_store *st, sftp_conn **out, bool *retryable)
{
	sftp_io io;
	err_code rc = test_connect != NULL ? test_connect(test_connect_arg, &io, retryable)
									   : ssh_connect(&st->target, &io, retryable);
	if (rc != E_OK)
		return rc;
	sftp_session *s;
	rc = sftp_session_start(&io, st->target.what, &s);
	if (rc != E_OK)
		return rc;
	sftp_conn *c = xcalloc(1, sizeof(*c));
	c->s = s;
	*out = c;
	log_debug("sftp: new session to %s (extensions:%s%s%s)", st->target.what,
			  (sftp_session_ext(s) & SFTP_EXT_POSIX_RENAME) ? " posix-rename" : "",
			  (sftp_session_ext(s) & SFTP_EXT_FSYNC) ? " fsync" : "",
			  (sftp_session_ext(s) & SFTP_EXT_HARDLINK) ? " hardlink" : "");
	return E_OK;
}

/* A session for one operation: an idle one, a new one while fewer than max are open, or the
 * next one given back. */
static err_code conn_take(sftp_store *st, sftp_conn **out, bool *retryable)
{
	*out = NULL;
	pthread_mutex_lock(&st->mu);
	for (;;) {
		if (st->nidle > 0) {
			sftp_conn *c = st->idle[--st->nidle];
			if (now_ms() - c->idle_since > SFTP_IDLE_MAX_MS) {
				st->open--;
				pthread_mutex_unlock(&st->mu);
				conn_free(c);
				pthread_mutex_lock(&st->mu);
				continue;
			}
			pthread_mutex_unlock(&st->mu);
			*out = c;
			return E_OK;
		}
		if (st->open < st->max && st->connecting < SFTP_CONNECTING_MAX) {
			st->open++;
			st->connecting++;
			break;
		}
		if (cancel_requested() != 0) {
			pthread_mutex_unlock(&st->mu);
			*retryable = false;
			return cancel_check();
		}
		struct timespec until = time_in_ms(CLOCK_REALTIME, 200);
		pthread_cond_timedwait(&st->cv, &st->mu, &until);
	}
	pthread_mutex_unlock(&st->mu);
	err_code rc = conn_new(st, out, retryable);
	pthread_mutex_lock(&st->mu);
	st->connecting--;
	if (rc != E_OK)
		st->open--;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* Gives c back for reuse, or closes it when its session broke. */
static void conn_give(sftp_store *st, sftp_conn *c)
{
	if (c == NULL)
		return;
	bool broken = sftp_session_broken(c->s);
	if (broken)
		conn_free(c);
	pthread_mutex_lock(&st->mu);
	if (broken) {
		st->open--;
	} else {
		c->idle_since = now_ms();
		st->idle[st->nidle++] = c;
	}
	pthread_cond_signal(&st->cv);
	pthread_mutex_unlock(&st->mu);
}

/* ------------------------------------------------------------------------------------------ */
/* Retries                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/*
 * One attempt of an operation on c. fresh: c is new to the operation (its first attempt, or
 * the one after a connection broke), so what lived on the old session (open handles) must be
 * made again. *progress: the attempt moved bytes before it broke, so the retry budget starts
 * over (it resumes, it does not repeat).
 */
typedef err_code (*sftp_op)(sftp_conn *c, void *arg, bool fresh, bool *progress);

/*
 * Runs op until it succeeds, fails for a reason another attempt cannot change (the server
 * refused it, the data is wrong, the run is cancelled), or the retry budget of broken
 * connections is spent: the HTTP stores' budget and backoff (docs/STORAGE.md). held: a
 * session the caller keeps across calls (a put's), or NULL for one taken from the pool and
 * given back.
 */
static err_code sftp_run(sftp_store *st, const char *what, sftp_conn **held, sftp_op op,
						 void *arg)
{
	sftp_conn *mine = NULL;
	sftp_conn **cp = held != NULL ? held : &mine;
	char last[512] = "";
	err_code rc = E_OK;
	for (int attempt = 0;; attempt++) {
		bool retryable = true, progress = false;
		if (cancel_requested() != 0) {
			rc = cancel_check();
			break;
		}
		bool fresh = *cp == NULL;
		if (fresh)
			rc = conn_take(st, cp, &retryable);
		if (*cp != NULL) {
			rc = op(*cp, arg, fresh, &progress);
			retryable = rc != E_OK && sftp_session_broken((*cp)->s) && rc != E_CANCELLED &&
						rc != E_CORRUPT;
			if (rc != E_OK && sftp_session_broken((*cp)->s)) {
				conn_give(st, *cp);
				*cp = NULL;
			}
		}
		if (rc == E_OK)
			break;
		if (!retryable) {
			/* a refusal or bad data names its path; the object goes before it */
			if (rc == E_IO || rc == E_CORRUPT)
				rc = err_wrap(rc, "%s", what);
			break;
		}
		snprintf(last, sizeof(last), "%s", err_msg());
		if (progress)
			attempt = 0;
		if (attempt >= st->retry.max_retries) {
			rc = err_set(E_IO, "%s: gave up after %d attempts; last error: %s", what,
						 attempt + 1, last);
			break;
		}
		long wait = http_backoff_ms(&st->retry, attempt);
		log_warn("%s: %s; retry %d of %d in %ld ms", what, last, attempt + 1,
				 st->retry.max_retries, wait);
		if (!http_sleep_ms(wait, NULL)) {
			rc = cancel_check();
			break;
		}
	}
	if (held == NULL)
		conn_give(st, mine);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Folders and absent objects                                                                 */
/* ------------------------------------------------------------------------------------------ */

/*
 * An absent object in an absent repository is a configuration mistake, not the end of the
 * archive: wal-fetch must not answer "does not exist" (exit 74) for a mistyped prefix.
 */
static err_code absent(sftp_store *st, sftp_conn *c, const char *key)
{
	if (!atomic_load(&st->root_seen)) {
		sftp_attrs a;
		err_code rc = sftp_stat(c->s, st->rootdir, &a);
		if (rc == E_NOTFOUND || (rc == E_OK && !is_dir(&a)))
			return err_set(E_IO, "repository %s: no such folder on the server", st->describe);
		if (rc != E_OK)
			return err_wrap(rc, "repository %s", st->describe);
		atomic_store(&st->root_seen, true);
	}
	return err_set(E_NOTFOUND, "object %s does not exist in %s", key, st->describe);
}

/* mkdir -p of path's folder (relative paths below the login folder). */
static err_code make_parents(sftp_session *s, const char *path)
{
	char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	err_code rc = E_OK;
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		rc = sftp_mkdir(s, dir, 0755);
		if (rc == E_NOTFOUND) {
			err_clear();
			rc = make_parents(s, dir);
			if (rc == E_OK)
				rc = sftp_mkdir(s, dir, 0755);
		}
		if (rc != E_OK && !sftp_session_broken(s)) {
			/* EEXIST is a plain failure in version 3: a folder there is what we wanted */
			sftp_attrs a;
			if (sftp_stat(s, dir, &a) == E_OK && is_dir(&a)) {
				err_clear();
				rc = E_OK;
			} else if (!sftp_session_broken(s)) {
				rc = err_set(E_IO, "creating folder %s: %s", dir, err_msg());
			}
		}
	}
	free(dir);
	return rc;
}

/* A writer makes the repository's folder before its first read (storage_prepare_write). */
static err_code prepare_run(sftp_conn *c, void *arg, bool fresh, bool *progress)
{
	(void)fresh;
	(void)progress;
	return make_parents(c->s, arg);
}

static err_code sftp_prepare_write(storage *base)
{
	sftp_store *st = (sftp_store *)base;
	char *inside = obj_path(st, "x"); /* a name in the folder: its parents are made */
	err_code rc = sftp_run(st, st->describe, NULL, prepare_run, inside);
	free(inside);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* stat                                                                                       */
/* ------------------------------------------------------------------------------------------ */

typedef struct stat_op {
	sftp_store *st;
	const char *key;
	char *path;
	obj_info *info;
} stat_op;

static err_code stat_run(sftp_conn *c, void *arg, bool fresh, bool *progress)
{
	(void)fresh;
	(void)progress;
	stat_op *o = arg;
	sftp_attrs a;
	err_code rc = sftp_stat(c->s, o->path, &a);
	if (rc == E_NOTFOUND)
		return absent(o->st, c, o->key);
	if (rc != E_OK)
		return rc;
	if (!is_reg(&a))
		return err_set(E_NOTFOUND, "%s is not a regular file", o->path);
	o->info->size = a.size;
	o->info->mtime = (time_t)a.mtime;
	o->info->mtime_nsec = 0;
	return E_OK;
}

static err_code sftp_stat_obj(storage *base, const char *key, obj_info *info)
{
	sftp_store *st = (sftp_store *)base;
	stat_op o = { st, key, obj_path(st, key), info };
	char *what = xasprintf("stat of %s/%s", st->describe, key);
	err_code rc = sftp_run(st, what, NULL, stat_run, &o);
	free(what);
	free(o.path);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* get                                                                                        */
/* ------------------------------------------------------------------------------------------ */

typedef struct read_slot {
	uint32_t id;
	uint64_t off;
	uint32_t want, got;
	unsigned char *buf; /* only for a reply that came out of order or short */
	bool busy;
} read_slot;

typedef struct get_op {
	sftp_store *st;
	const char *key;
	char *path;
	sink *into;
	uint64_t from, len; /* len UINT64_MAX: to the end, known at the first FSTAT */
	uint64_t delivered;
	bool pinned;
	sftp_attrs first;
	read_slot slots[SFTP_WINDOW];
	unsigned head;		/* the slot whose bytes go out next */
	uint64_t next;		/* the next offset to ask for */
} get_op;

static err_code read_send(sftp_session *s, const sftp_handle *h, read_slot *r)
{
	r->busy = true;
	return sftp_send_read(s, h, r->off + r->got, r->want - r->got, &r->id);
}

/* Asks for the next piece into slot i when some is left. */
static err_code read_ask(get_op *g, sftp_session *s, const sftp_handle *h, unsigned i)
{
	uint64_t end = g->from + g->len;
	if (g->next >= end)
		return E_OK;
	read_slot *r = &g->slots[i];
	r->off = g->next;
	r->want = (uint32_t)(end - g->next < SFTP_CHUNK ? end - g->next : SFTP_CHUNK);
	r->got = 0;
	g->next += r->want;
	return read_send(s, h, r);
}

/* Takes replies until every slot is idle (after a failure, so the session stays usable); the
 * failure's message stands. */
static void read_drain(get_op *g, sftp_session *s)
{
	saved_err e;
	err_save(&e);
	for (unsigned i = 0; i < SFTP_WINDOW && !sftp_session_broken(s); i++)
		while (g->slots[i].busy && !sftp_session_broken(s)) {
			sftp_reply r;
			if (sftp_recv(s, &r) != E_OK)
				break;
			for (unsigned k = 0; k < SFTP_WINDOW; k++)
				if (g->slots[k].busy && g->slots[k].id == r.id)
					g->slots[k].busy = false;
		}
	err_restore(&e);
}

/* The reading loop: READs pipelined, bytes pushed into the sink in order. */
static err_code read_body(get_op *g, sftp_session *s, const sftp_handle *h, bool *progress)
{
	uint64_t end = g->from + g->len;
	g->next = g->from + g->delivered;
	g->head = 0;
	for (unsigned i = 0; i < SFTP_WINDOW; i++) {
		g->slots[i].busy = false;
		g->slots[i].want = g->slots[i].got = 0;
		TRY(read_ask(g, s, h, i));
	}
	while (g->from + g->delivered < end) {
		sftp_reply r;
		TRY(sftp_recv(s, &r));
		read_slot *slot = NULL;
		unsigned at = 0;
		for (unsigned k = 0; k < SFTP_WINDOW && slot == NULL; k++)
			if (g->slots[k].busy && g->slots[k].id == r.id)
				slot = &g->slots[at = k];
		if (slot == NULL) {
			sftp_session_break(s);
			return err_set(E_CORRUPT, "%s: SFTP reply to a read never asked (%u)", g->path,
						   r.id);
		}
		slot->busy = false;
		if (r.type == SSH_FXP_STATUS && r.code == SSH_FX_EOF)
			return err_set(E_IO, "%s ended at byte %llu of %llu: it changed while it was being "
								 "read",
						   g->path, (unsigned long long)(slot->off + slot->got),
						   (unsigned long long)end);
		if (r.type != SSH_FXP_DATA) {
			err_code rc = sftp_reply_check(s, &r, g->path);
			if (rc != E_OK)
				return rc;
			sftp_session_break(s);
			return err_set(E_CORRUPT, "%s: status OK where data belongs", g->path);
		}
		if (r.len == 0 || r.len > slot->want - slot->got) {
			sftp_session_break(s);
			return err_set(E_CORRUPT, "%s: %zu bytes where at most %u were asked", g->path, r.len,
						   slot->want - slot->got);
		}
		if (at == g->head && slot->got == 0 && r.len == slot->want) {
			/* the usual case: the next piece, whole: straight from the packet */
			TRY(sink_write(g->into, r.data, r.len));
			slot->got = slot->want;
		} else {
			if (slot->buf == NULL)
				slot->buf = xmalloc(SFTP_CHUNK);
			memcpy(slot->buf + slot->got, r.data, r.len);
			slot->got += (uint32_t)r.len;
			if (slot->got < slot->want) { /* a short read: ask for the rest */
				TRY(read_send(s, h, slot));
				continue;
			}
			if (at != g->head)
				continue;
			TRY(sink_write(g->into, slot->buf, slot->want));
		}
		/* the head is out: pass on the ones after it that are complete */
		for (;;) {
			read_slot *hd = &g->slots[g->head];
			g->delivered += hd->want;
			*progress = true;
			hd->got = hd->want = 0;
			TRY(read_ask(g, s, h, g->head));
			g->head = (g->head + 1) % SFTP_WINDOW;
			hd = &g->slots[g->head];
			if (hd->busy || hd->want == 0 || hd->got < hd->want)
				break;
			TRY(sink_write(g->into, hd->buf, hd->want));
		}
	}
	return E_OK;
}

/* Closes h after an operation that ended with rc: a failure to close counts only after a
 * success, and the first error's message stands. */
static err_code close_keeping(sftp_session *s, const sftp_handle *h, err_code rc)
{
	if (sftp_session_broken(s))
		return rc;
	if (rc == E_OK)
		return sftp_close(s, h);
	saved_err e;
	err_save(&e);
	sftp_close(s, h);
	err_restore(&e);
	return rc;
}

static err_code get_run(sftp_conn *c, void *arg, bool fresh, bool *progress)
{
	(void)fresh;
	get_op *g = arg;
	sftp_handle h;
	err_code rc = sftp_open(c->s, g->path, SSH_FXF_READ, 0, &h);
	if (rc == E_NOTFOUND)
		return g->pinned ? err_set(E_IO, "%s was deleted while it was being read", g->path)
						 : absent(g->st, c, g->key);
	if (rc != E_OK)
		return rc;
	sftp_attrs a;
	rc = sftp_fstat(c->s, &h, &a);
	if (rc == E_OK && !g->pinned) {
		g->first = a;
		g->pinned = true;
		if (g->len == UINT64_MAX)
			g->len = a.size;
		else if (g->from + g->len > a.size)
			rc = err_set(E_CORRUPT, "%s has %llu bytes, fewer than the %llu asked for at %llu",
						 g->path, (unsigned long long)a.size, (unsigned long long)g->len,
						 (unsigned long long)g->from);
	} else if (rc == E_OK && (a.size != g->first.size || a.mtime != g->first.mtime)) {
		rc = err_set(E_IO, "%s changed while it was being read (size %llu, then %llu)", g->path,
					 (unsigned long long)g->first.size, (unsigned long long)a.size);
	} else if (rc == E_OK && g->delivered > 0) {
		log_info("%s: resuming at byte %llu", g->path, (unsigned long long)(g->from + g->delivered));
	}
	if (rc == E_OK) {
		rc = read_body(g, c->s, &h, progress);
		if (rc != E_OK)
			read_drain(g, c->s);
	}
	return close_keeping(c->s, &h, rc);
}

static err_code get_common(sftp_store *st, const char *key, uint64_t from, uint64_t len,
						   sink *into)
{
	get_op g = { .st = st, .key = key, .path = obj_path(st, key), .into = into, .from = from,
				 .len = len };
	char *what = xasprintf("reading %s/%s", st->describe, key);
	err_code rc = sftp_run(st, what, NULL, get_run, &g);
	for (unsigned i = 0; i < SFTP_WINDOW; i++)
		free(g.slots[i].buf);
	free(what);
	free(g.path);
	return rc;
}

static err_code sftp_get(storage *base, const char *key, sink *into)
{
	return get_common((sftp_store *)base, key, 0, UINT64_MAX, into);
}

static err_code sftp_get_range(storage *base, const char *key, uint64_t offset, uint64_t len,
							   sink *into)
{
	return get_common((sftp_store *)base, key, offset, len, into);
}

/* ------------------------------------------------------------------------------------------ */
/* put                                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* A piece of the object: chunk k (at offset k * SFTP_CHUNK) is in slot k % SFTP_WINDOW. */
typedef enum { SLOT_FREE, SLOT_READY, SLOT_SENT } slot_state;

typedef struct put_slot {
	unsigned char *buf;
	size_t len;
	uint64_t chunk;
	uint32_t id;
	slot_state state; /* FREE with len > 0: the chunk being filled */
} put_slot;

typedef enum { PUT_WRITING, PUT_CLOSED, PUT_DONE } put_stage;

typedef struct sftp_put {
	sink base;
	sftp_store *st;
	char *key, *path, *tmp, *what;
	bool exclusive;
	sftp_conn *c; /* held while the upload lasts */
	sftp_handle h;
	bool have_handle; /* h is open on c */
	bool created;	  /* the temporary exists on the server */
	bool renaming;	  /* a rename was sent whose answer may have been lost */
	put_slot slots[SFTP_WINDOW];
	uint64_t cur; /* the chunk being filled */
	uint64_t total;
	put_stage stage;
	bool flush_all; /* wait for every WRITE's answer, not only for the next slot */
} sftp_put;

static put_slot *slot_of(sftp_put *p, uint64_t chunk)
{
	return &p->slots[chunk % SFTP_WINDOW];
}

/* The lowest chunk the server has not acknowledged (cur when none is waiting). */
static uint64_t unacked_from(const sftp_put *p)
{
	uint64_t lo = p->cur;
	for (unsigned i = 0; i < SFTP_WINDOW; i++)
		if (p->slots[i].state != SLOT_FREE && p->slots[i].chunk < lo)
			lo = p->slots[i].chunk;
	return lo;
}

/*
 * The temporary on a session new to this upload: created (with its folders) the first time,
 * opened again after a broken connection, when the server must still hold every byte it
 * acknowledged; what was sent and not acknowledged is sent again.
 */
static err_code put_open(sftp_put *p, sftp_session *s)
{
	if (!p->created) {
		err_code rc = E_NOTFOUND;
		for (int i = 0; i < 3 && rc == E_NOTFOUND; i++) {
			rc = sftp_open(s, p->tmp, SSH_FXF_WRITE | SSH_FXF_CREAT | SSH_FXF_TRUNC, 0640, &p->h);
			if (rc == E_NOTFOUND) { /* its folder is missing (or a delete just emptied it) */
				err_clear();
				TRY(make_parents(s, p->tmp));
				rc = E_NOTFOUND;
			}
		}
		TRY(rc);
		p->created = true;
		p->have_handle = true;
		return E_OK;
	}
	err_code rc = sftp_open(s, p->tmp, SSH_FXF_WRITE, 0, &p->h);
	if (rc == E_NOTFOUND)
		return err_set(E_IO, "the temporary %s disappeared during the upload", p->tmp);
	TRY(rc);
	p->have_handle = true;
	sftp_attrs a;
	TRY(sftp_fstat(s, &p->h, &a));
	uint64_t acked = unacked_from(p) * SFTP_CHUNK;
	if (a.size < acked)
		return err_set(E_IO, "the temporary %s holds %llu bytes after the server had "
							 "acknowledged %llu",
					   p->tmp, (unsigned long long)a.size, (unsigned long long)acked);
	unsigned again = 0;
	for (unsigned i = 0; i < SFTP_WINDOW; i++)
		if (p->slots[i].state == SLOT_SENT) {
			p->slots[i].state = SLOT_READY;
			again++;
		}
	log_info("%s: the upload goes on at byte %llu, the last the server acknowledged (%u writes "
			 "sent again)",
			 p->what, (unsigned long long)acked, again);
	return E_OK;
}

static bool put_settled(const sftp_put *p)
{
	if (!p->flush_all)
		return p->slots[p->cur % SFTP_WINDOW].state == SLOT_FREE;
	for (unsigned i = 0; i < SFTP_WINDOW; i++)
		if (p->slots[i].state != SLOT_FREE)
			return false;
	return true;
}

/* Sends what is ready, in order, and takes answers until the slot of chunk cur is free (or,
 * when flushing, until none is waiting). */
static err_code put_push(sftp_conn *c, void *arg, bool fresh, bool *progress)
{
	sftp_put *p = arg;
	if (fresh || !p->have_handle) {
		p->have_handle = false;
		TRY(put_open(p, c->s));
	}
	for (uint64_t k = unacked_from(p); k <= p->cur; k++) {
		put_slot *sl = slot_of(p, k);
		if (sl->chunk != k || sl->state != SLOT_READY)
			continue;
		TRY(sftp_send_write(c->s, &p->h, k * SFTP_CHUNK, sl->buf, sl->len, &sl->id));
		sl->state = SLOT_SENT;
	}
	while (!put_settled(p)) {
		sftp_reply r;
		TRY(sftp_recv(c->s, &r));
		put_slot *sl = NULL;
		for (unsigned i = 0; i < SFTP_WINDOW && sl == NULL; i++)
			if (p->slots[i].state == SLOT_SENT && p->slots[i].id == r.id)
				sl = &p->slots[i];
		if (sl == NULL) {
			sftp_session_break(c->s);
			return err_set(E_CORRUPT, "SFTP reply to a write never sent (%u)", r.id);
		}
		TRY(sftp_reply_check(c->s, &r, p->tmp));
		sl->state = SLOT_FREE;
		sl->len = 0;
		*progress = true;
	}
	return E_OK;
}

static err_code put_write(sink *base, const void *buf, size_t len)
{
	sftp_put *p = (sftp_put *)base;
	const unsigned char *in = buf;
	while (len > 0) {
		put_slot *sl = slot_of(p, p->cur);
		if (sl->buf == NULL)
			sl->buf = xmalloc(SFTP_CHUNK);
		sl->chunk = p->cur;
		size_t n = SFTP_CHUNK - sl->len < len ? SFTP_CHUNK - sl->len : len;
		memcpy(sl->buf + sl->len, in, n);
		sl->len += n;
		in += n;
		len -= n;
		p->total += n;
		if (sl->len < SFTP_CHUNK)
			break;
		sl->state = SLOT_READY;
		p->cur++;
		TRY(sftp_run(p->st, p->what, &p->c, put_push, p));
	}
	return E_OK;
}

/* After every byte is acknowledged: the size checked, fsync, close, then the rename. */
static err_code put_finish_run(sftp_conn *c, void *arg, bool fresh, bool *progress)
{
	sftp_put *p = arg;
	sftp_session *s = c->s;
	if (p->stage == PUT_WRITING) {
		p->flush_all = true;
		TRY(put_push(c, p, fresh, progress));
		sftp_attrs a;
		TRY(sftp_fstat(s, &p->h, &a));
		if (a.size != p->total)
			return err_set(E_IO, "the temporary %s holds %llu bytes, not the %llu written",
						   p->tmp, (unsigned long long)a.size, (unsigned long long)p->total);
		if (sftp_session_ext(s) & SFTP_EXT_FSYNC)
			TRY(sftp_fsync(s, &p->h));
		TRY(sftp_close(s, &p->h));
		p->have_handle = false;
		p->stage = PUT_CLOSED;
	}
	bool posix = !p->exclusive && (sftp_session_ext(s) & SFTP_EXT_POSIX_RENAME);
	bool again = p->renaming;
	p->renaming = true;
	err_code rc = sftp_rename(s, p->tmp, p->path, posix);
	if (rc == E_OK || sftp_session_broken(s)) {
		if (rc == E_OK)
			p->stage = PUT_DONE;
		return rc;
	}
	/* refused: who holds the name now, and is the temporary still there? */
	saved_err refusal;
	err_save(&refusal);
	sftp_attrs tmp, obj;
	err_code trc = sftp_lstat(s, p->tmp, &tmp);
	err_code orc = trc == E_NOTFOUND || trc == E_OK ? sftp_lstat(s, p->path, &obj) : trc;
	if (sftp_session_broken(s))
		return orc;
	if (again && trc == E_NOTFOUND && orc == E_OK && obj.size == p->total) {
		/* the rename of an attempt whose answer was lost had done it */
		err_clear();
		p->stage = PUT_DONE;
		return E_OK;
	}
	if (trc == E_OK && orc == E_OK && p->exclusive)
		return err_set(E_EXISTS, "%s already exists in %s", p->key, p->st->describe);
	if (trc == E_OK && orc == E_OK && !posix) {
		/* no posix-rename: the object is absent between these two requests */
		if (!atomic_exchange(&p->st->told_rename, true))
			log_warn("%s does not offer posix-rename@openssh.com: replacing an object removes "
					 "it first, and it is absent for a moment",
					 p->st->target.what);
		TRY(sftp_remove(s, p->path));
		TRY(sftp_rename(s, p->tmp, p->path, false));
		p->stage = PUT_DONE;
		return E_OK;
	}
	return err_restore(&refusal);
}

static err_code put_finish(sink *base)
{
	sftp_put *p = (sftp_put *)base;
	put_slot *sl = slot_of(p, p->cur);
	if (sl->len > 0) {
		sl->chunk = p->cur;
		sl->state = SLOT_READY;
	}
	err_code rc = sftp_run(p->st, p->what, &p->c, put_finish_run, p);
	if (rc == E_OK)
		log_debug("sftp: stored %s (%llu bytes)", p->path, (unsigned long long)p->total);
	return rc;
}

static void put_free(sink *base)
{
	sftp_put *p = (sftp_put *)base;
	sftp_conn *c = p->c;
	saved_err e;
	err_save(&e);
	if (c != NULL && !sftp_session_broken(c->s) && p->stage != PUT_DONE) {
		/* discarded: the answers still due, then the temporary goes */
		for (unsigned i = 0; i < SFTP_WINDOW && !sftp_session_broken(c->s); i++)
			while (p->slots[i].state == SLOT_SENT && !sftp_session_broken(c->s)) {
				sftp_reply r;
				if (sftp_recv(c->s, &r) != E_OK)
					break;
				for (unsigned k = 0; k < SFTP_WINDOW; k++)
					if (p->slots[k].state == SLOT_SENT && p->slots[k].id == r.id)
						p->slots[k].state = SLOT_FREE;
			}
		if (p->have_handle && !sftp_session_broken(c->s))
			sftp_close(c->s, &p->h);
		if (p->created && !sftp_session_broken(c->s))
			sftp_remove(c->s, p->tmp);
	}
	err_restore(&e);
	conn_give(p->st, c);
	for (unsigned i = 0; i < SFTP_WINDOW; i++)
		free(p->slots[i].buf);
	free(p->key);
	free(p->path);
	free(p->tmp);
	free(p->what);
	free(p);
}

static const sink_ops put_ops = { put_write, put_finish, put_free };

static err_code put_start(storage *base, const char *key, bool exclusive, sink **out)
{
	static atomic_ulong seq;
	sftp_store *st = (sftp_store *)base;
	sftp_put *p = xcalloc(1, sizeof(*p));
	p->base.ops = &put_ops;
	p->st = st;
	p->exclusive = exclusive;
	p->key = xstrdup(key);
	p->path = obj_path(st, key);
	/* the temporary's name is the file storage's: hidden, with this process's id */
	const char *slash = strrchr(key, '/');
	p->tmp = slash ? xasprintf("%s%.*s/.%s" FILE_TMP_MARK "%d.%lu", st->prefix,
							   (int)(slash - key), key, slash + 1, (int)getpid(),
							   (unsigned long)atomic_fetch_add(&seq, 1))
				   : xasprintf("%s.%s" FILE_TMP_MARK "%d.%lu", st->prefix, key, (int)getpid(),
							   (unsigned long)atomic_fetch_add(&seq, 1));
	p->what = xasprintf("writing %s/%s", st->describe, key);
	*out = &p->base;
	return E_OK;
}

static err_code sftp_put_obj(storage *base, const char *key, sink **out)
{
	return put_start(base, key, false, out);
}

static err_code sftp_put_new(storage *base, const char *key, sink **out)
{
	return put_start(base, key, true, out);
}

/* ------------------------------------------------------------------------------------------ */
/* list                                                                                       */
/* ------------------------------------------------------------------------------------------ */

typedef struct list_op {
	sftp_store *st;
	char *top;		 /* the folder listed, relative to the root ("" or "wal_005") */
	bool recursive;
	bool temporaries; /* the unfinished temporaries instead of the objects */
	obj_list *out;
} list_op;

/* One folder's entries: objects (or temporaries) into out, its folders into dirs. */
static err_code list_dir(list_op *o, sftp_session *s, const char *rel, obj_list *dirs)
{
	char *path = rel[0] ? obj_path(o->st, rel) : xstrdup(o->st->rootdir);
	sftp_handle h;
	err_code rc = sftp_opendir(s, path, &h);
	if (rc != E_OK) {
		free(path);
		if (rc != E_NOTFOUND)
			return rc;
		err_clear(); /* a missing folder is an empty list */
		return E_OK;
	}
	for (bool eof = false; rc == E_OK && !eof;) {
		sftp_reply r;
		rc = sftp_readdir(s, &h, &r, &eof);
		if (rc != E_OK || eof)
			break;
		sftp_names it;
		sftp_names_begin(&it, &r);
		const char *n;
		size_t nlen;
		sftp_attrs a;
		while (sftp_names_next(&it, &n, &nlen, &a)) {
			if (nlen == 0 || memchr(n, '/', nlen) != NULL || memchr(n, '\0', nlen) != NULL ||
				(nlen == 1 && n[0] == '.') || (nlen == 2 && n[0] == '.' && n[1] == '.'))
				continue;
			char *name = xasprintf("%.*s", (int)nlen, n);
			char *key = rel[0] ? xasprintf("%s/%s", rel, name) : xstrdup(name);
			bool temp = storage_is_temporary(name);
			if (is_dir(&a) && name[0] != '.' && (o->recursive || o->temporaries))
				obj_list_add(dirs, key, 0, 0, 0);
			else if (!is_dir(&a) && is_reg(&a) && temp == o->temporaries &&
					 (temp || name[0] != '.'))
				obj_list_add(o->out, key, a.size, (time_t)a.mtime, 0);
			free(key);
			free(name);
		}
	}
	rc = close_keeping(s, &h, rc);
	free(path);
	return rc;
}

/* Starts over on every attempt: a listing is a snapshot. */
static err_code list_run(sftp_conn *c, void *arg, bool fresh, bool *progress)
{
	(void)fresh;
	(void)progress;
	list_op *o = arg;
	obj_list_free(o->out);
	obj_list todo = { 0 };
	obj_list_add(&todo, o->top, 0, 0, 0);
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < todo.len; i++)
		rc = list_dir(o, c->s, todo.items[i].key, &todo);
	obj_list_free(&todo);
	return rc;
}

static err_code list_common(storage *base, const char *prefix, bool recursive, bool temporaries,
							obj_list *out)
{
	sftp_store *st = (sftp_store *)base;
	list_op o = { st, xstrdup(prefix), recursive, temporaries, out };
	size_t n = strlen(o.top);
	while (n > 0 && o.top[n - 1] == '/')
		o.top[--n] = '\0';
	char *what = xasprintf("listing %s/%s", st->describe, o.top);
	err_code rc = sftp_run(st, what, NULL, list_run, &o);
	if (rc != E_OK)
		obj_list_free(out);
	free(what);
	free(o.top);
	return rc;
}

static err_code sftp_list(storage *base, const char *prefix, bool recursive, obj_list *out)
{
	return list_common(base, prefix, recursive, false, out);
}

static err_code sftp_list_temporaries(storage *base, const char *prefix, obj_list *out)
{
	return list_common(base, prefix, true, true, out);
}

/* ------------------------------------------------------------------------------------------ */
/* remove                                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct remove_op {
	sftp_store *st;
	const char *const *keys;
	size_t from, n;
	size_t done; /* the first `done` keys are gone */
} remove_op;

/* REMOVEs pipelined, SFTP_WINDOW in flight; an absent object is removed already. */
static err_code remove_run(sftp_conn *c, void *arg, bool fresh, bool *progress)
{
	(void)fresh;
	remove_op *o = arg;
	uint32_t ids[SFTP_WINDOW];
	size_t sent = o->done, acked = o->done;
	bool gone[SFTP_WINDOW] = { false };
	while (acked < o->n) {
		while (sent < o->n && sent - acked < SFTP_WINDOW) {
			char *path = obj_path(o->st, o->keys[o->from + sent]);
			err_code rc = sftp_send_remove(c->s, path, &ids[sent % SFTP_WINDOW]);
			free(path);
			TRY(rc);
			gone[sent % SFTP_WINDOW] = false;
			sent++;
		}
		sftp_reply r;
		TRY(sftp_recv(c->s, &r));
		size_t k = acked;
		while (k < sent && ids[k % SFTP_WINDOW] != r.id)
			k++;
		if (k == sent) {
			sftp_session_break(c->s);
			return err_set(E_CORRUPT, "SFTP reply to a delete never sent (%u)", r.id);
		}
		char *path = obj_path(o->st, o->keys[o->from + k]);
		err_code rc = sftp_reply_check(c->s, &r, path);
		free(path);
		if (rc == E_NOTFOUND) {
			err_clear();
			rc = E_OK;
		}
		TRY(rc);
		gone[k % SFTP_WINDOW] = true;
		while (acked < sent && gone[acked % SFTP_WINDOW]) {
			gone[acked % SFTP_WINDOW] = false;
			acked++;
			o->done = acked;
			*progress = true;
		}
	}
	return E_OK;
}

static err_code remove_keys(sftp_store *st, const char *const *keys, size_t from, size_t n)
{
	remove_op o = { st, keys, from, n, 0 };
	char *what = n == 1 ? xasprintf("deleting %s/%s", st->describe, keys[from])
						: xasprintf("deleting %zu objects in %s", n, st->describe);
	err_code rc = sftp_run(st, what, NULL, remove_run, &o);
	if (rc == E_OK)
		log_debug("sftp: deleted %zu objects, up to %d requests in flight", n, SFTP_WINDOW);
	free(what);
	return rc;
}

static err_code remove_batch(void *arg, size_t from, size_t n)
{
	remove_op *all = arg;
	return remove_keys(all->st, all->keys, from, n);
}

/* The folders the deletes emptied (the file storage's rule: up to the root, never one that
 * holds anything): one session, deepest first, each folder once. */
typedef struct prune_op {
	sftp_store *st;
	char **dirs;
	size_t n;
} prune_op;

static err_code prune_run(sftp_conn *c, void *arg, bool fresh, bool *progress)
{
	(void)fresh;
	(void)progress;
	prune_op *o = arg;
	for (size_t i = 0; i < o->n && !sftp_session_broken(c->s); i++)
		sftp_rmdir(c->s, o->dirs[i]);
	err_clear();
	return E_OK;
}

static int deeper_first(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	size_t dx = 0, dy = 0;
	for (const char *p = x; *p; p++)
		dx += *p == '/';
	for (const char *p = y; *p; p++)
		dy += *p == '/';
	return dx != dy ? (dx < dy ? 1 : -1) : strcmp(x, y);
}

static void prune_folders(sftp_store *st, const char *const *keys, size_t n)
{
	size_t cap = 0;
	prune_op o = { st, NULL, 0 };
	size_t root = strlen(st->prefix);
	for (size_t i = 0; i < n; i++) {
		char *dir = obj_path(st, keys[i]);
		for (;;) {
			char *slash = strrchr(dir, '/');
			if (slash == NULL || slash == dir || (size_t)(slash - dir) < root)
				break;
			*slash = '\0';
			bool seen = false;
			for (size_t k = o.n; k-- > 0 && !seen;)
				seen = strcmp(o.dirs[k], dir) == 0;
			if (seen)
				break; /* and its parents with it */
			if (o.n == cap) {
				cap = cap ? cap * 2 : 64;
				o.dirs = xrealloc(o.dirs, cap * sizeof(*o.dirs));
			}
			o.dirs[o.n++] = xstrdup(dir);
		}
		free(dir);
	}
	if (o.n > 0) {
		xqsort(o.dirs, o.n, sizeof(*o.dirs), deeper_first);
		sftp_run(st, "removing emptied folders", NULL, prune_run, &o);
		err_clear();
	}
	for (size_t i = 0; i < o.n; i++)
		free(o.dirs[i]);
	free(o.dirs);
}

static err_code sftp_remove_obj(storage *base, const char *key)
{
	sftp_store *st = (sftp_store *)base;
	TRY(remove_keys(st, &key, 0, 1));
	prune_folders(st, &key, 1);
	return E_OK;
}

static err_code sftp_remove_many(storage *base, const char *const *keys, size_t n)
{
	sftp_store *st = (sftp_store *)base;
	remove_op all = { st, keys, 0, n, 0 };
	TRY(http_batches(n, SFTP_REMOVE_BATCH, st->width, remove_batch, &all));
	prune_folders(st, keys, n);
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The store                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static const char *sftp_describe(storage *base)
{
	return ((sftp_store *)base)->describe;
}

static void sftp_free(storage *base)
{
	sftp_store *st = (sftp_store *)base;
	for (size_t i = 0; i < st->nidle; i++)
		conn_free(st->idle[i]);
	free(st->idle);
	pthread_mutex_destroy(&st->mu);
	pthread_cond_destroy(&st->cv);
	free(st->host);
	free(st->user);
	http_wipe_free(st->password);
	free(st->key_path);
	http_wipe_free(st->key_passphrase);
	free(st->known_hosts);
	free(st->target_what);
	free(st->prefix);
	free(st->rootdir);
	free(st->describe);
	free(st);
}

static const storage_ops sftp_ops = {
	.prepare_write = sftp_prepare_write,
	.put = sftp_put_obj,
	.get = sftp_get,
	.stat = sftp_stat_obj,
	.list = sftp_list,
	.remove = sftp_remove_obj,
	.describe = sftp_describe,
	.free = sftp_free,
	.put_new = sftp_put_new,
	.list_temporaries = sftp_list_temporaries,
	.remove_many = sftp_remove_many,
	.get_range = sftp_get_range,
};

/*
 * ssh://host/path as WAL-G reads it (Go's url.Parse): the host, then the folder; no folder is
 * the login folder. A user or port in the URL is refused: WAL-G would take them into its
 * address and fail.
 */
static err_code bad_prefix(const char *prefix)
{
	return err_set(E_CONFIG, "WALG_SSH_PREFIX: expected ssh://host/path (the user goes in "
							 "SSH_USERNAME, the port in SSH_PORT), got \"%s\"",
				   prefix);
}

static err_code parse_prefix(sftp_store *st, const char *prefix, const char *storage_prefix)
{
	if (!str_has_prefix(prefix, "ssh://"))
		return bad_prefix(prefix);
	const char *h = prefix + 6, *end;
	if (h[0] == '[') {
		end = strchr(h, ']');
		if (end == NULL || (end[1] != '/' && end[1] != '\0'))
			return bad_prefix(prefix);
		st->host = xasprintf("%.*s", (int)(end - h - 1), h + 1);
		end++;
	} else {
		end = h + strcspn(h, "/");
		st->host = xasprintf("%.*s", (int)(end - h), h);
		if (strpbrk(st->host, "@:?#") != NULL)
			return bad_prefix(prefix);
	}
	if (st->host[0] == '\0')
		return bad_prefix(prefix);
	char *path = xstrdup(end);
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		path[--n] = '\0';
	char *root = storage_prefix != NULL
		? (n == 0 ? xstrdup(storage_prefix)
				  : xasprintf("%s%s%s", path, path[n - 1] == '/' ? "" : "/", storage_prefix))
		: xstrdup(path);
	free(path);
	n = strlen(root);
	while (n > 1 && root[n - 1] == '/')
		root[--n] = '\0';
	st->rootdir = xstrdup(root[0] ? root : ".");
	st->prefix = n == 0 ? xstrdup("") : xasprintf("%s%s", root, strcmp(root, "/") ? "/" : "");
	free(root);
	return E_OK;
}

static char *os_user(void)
{
	struct passwd *pw = getpwuid(geteuid());
	return pw != NULL ? xstrdup(pw->pw_name) : xasprintf("%u", (unsigned)geteuid());
}

err_code storage_sftp_open(const storage_settings *cfg, storage **out)
{
	*out = NULL;
	TRY(ssh_global_init());
	sftp_store *st = xcalloc(1, sizeof(*st));
	st->base.ops = &sftp_ops;
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->cv, NULL);
	err_code rc = parse_prefix(st, cfg->ssh_prefix, cfg->storage_prefix);
	if (rc != E_OK) {
		sftp_free(&st->base);
		return rc;
	}
	const ssh_settings *s = &cfg->ssh;
	st->user = s->username != NULL && s->username[0] ? xstrdup(s->username) : os_user();
	st->password = s->password != NULL && s->password[0] ? xstrdup(s->password) : NULL;
	st->key_path = s->private_key_path != NULL && s->private_key_path[0]
		? xstrdup(s->private_key_path)
		: NULL;
	st->key_passphrase = s->key_passphrase != NULL ? xstrdup(s->key_passphrase) : NULL;
	st->known_hosts = s->known_hosts != NULL && s->known_hosts[0] ? xstrdup(s->known_hosts) : NULL;
	bool v6 = strchr(st->host, ':') != NULL;
	st->target_what = xasprintf("ssh://%s%s%s:%ld", v6 ? "[" : "", st->host, v6 ? "]" : "",
								s->port);
	st->describe = xasprintf("%s%s%s", st->target_what, st->prefix[0] == '/' ? "" : "/~/",
							 strcmp(st->rootdir, ".") ? st->rootdir : "");
	st->target = (ssh_target){ st->host, s->port, st->user, st->password, st->key_path,
							   st->key_passphrase, st->known_hosts, SFTP_CONNECT_TIMEOUT_MS,
							   SFTP_STALL_MS, st->target_what };
	st->retry = (http_retry){ (int)s->max_retries, 100, 5000, SFTP_CONNECT_TIMEOUT_MS / 1000,
							  SFTP_STALL_MS / 1000, 0 };
	st->width = (int)cfg->upload_concurrency;
	/* one session per operation in flight: uploads and downloads of one command at most */
	st->max = (size_t)(cfg->upload_concurrency + cfg->download_concurrency) + 4;
	st->idle = xcalloc(st->max, sizeof(*st->idle));
	log_debug("sftp: %s as %s (%s%s%s), host key %s, at most %zu sessions, %d retries",
			  st->describe, st->user, st->key_path ? "key " : "",
			  st->key_path ? st->key_path : "", st->password ? " password" : "",
			  st->known_hosts ? st->known_hosts : "not checked", st->max, st->retry.max_retries);
	*out = &st->base;
	return E_OK;
}
