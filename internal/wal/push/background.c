/*
 * wal-push's parallel archiving: while the requested file uploads, other files PostgreSQL has
 * marked .ready upload too, and each success leaves WAL-G's marker
 * (<PGDATA>/pg_wal/walg_data/walg_archive_status/<name>) so PostgreSQL's own call for that
 * file returns at once. A background failure is only logged: without a marker PostgreSQL
 * simply archives that file itself later.
 */
#include "internal/wal/wal.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal/pg/pg.h"
#include "internal/pipe/pipe.h"
#include "internal/wal/wal_impl.h"

#define SCAN_EVERY_MS 100

/* WAL-G's marker folder: shared by every configuration on one data directory. */
char *wal_marker_dir(const wal_settings *cfg)
{
	if (cfg->pg->pgdata != NULL)
		return xasprintf("%s/pg_wal/walg_data/walg_archive_status", cfg->pg->pgdata);
	return xstrdup("/tmp/walg_data/walg_archive_status");
}

/* Markers are keyed by the name without its last extension, as WAL-G does. */
static char *marker_path(const wal_settings *cfg, const char *name)
{
	char *dir = wal_marker_dir(cfg);
	const char *dot = strrchr(name, '.');
	char *p = dot ? xasprintf("%s/%.*s", dir, (int)(dot - name), name)
				  : xasprintf("%s/%s", dir, name);
	free(dir);
	return p;
}

/* A background upload's marker: the file is stored, PostgreSQL's call for it returns at once. */
bool wal_marked(const wal_settings *cfg, const char *name)
{
	char *marker = marker_path(cfg, name);
	bool marked = access(marker, F_OK) == 0;
	free(marker);
	return marked;
}

/* Between two looks at the backlog: with a bound, often enough that little WAL comes between. */
#define WATCH_EVERY_MS 1000
#define WATCH_BOUND_EVERY_MS 250

/* What became of a file this call took: uploading (or queued), uploaded, dropped. */
enum { TAKEN_BUSY, TAKEN_STORED, TAKEN_DROPPED };
typedef struct taken_file {
	char *name;
	int state;
} taken_file;

typedef struct bg {
	repo *r;
	const wal_settings *cfg;
	char *wal_dir;		 /* where the files are: the pushed path's directory */
	const char *main_name;
	chan *names;
	group *g;
	int budget;
	int workers; /* uploaders wanted at most */
	int started; /* uploaders started, by the scanner only */
	/* lock guards main_done and watch_done (signalled on wake, so that the scanner and the
	 * watch stop at once rather than after their pause: a push with no backlog must not wait
	 * for them) and taken */
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool main_done;
	bool watch_done; /* every upload of the call has ended */
	taken_file *taken;
	size_t ntaken;
	wal_watch *watch; /* the backlog's, or NULL */
	char *state_dir;  /* its journal of drops, or NULL */
} bg;

/* The entry of name, or NULL (lock held). */
static taken_file *taken_of(bg *b, const char *name)
{
	for (size_t i = 0; i < b->ntaken; i++)
		if (strcmp(b->taken[i].name, name) == 0)
			return &b->taken[i];
	return NULL;
}

/* Takes name for an upload: false when this call took it already (or dropped it). */
static bool take(bg *b, const char *name)
{
	pthread_mutex_lock(&b->lock);
	bool fresh = taken_of(b, name) == NULL;
	if (fresh) {
		b->taken = xrealloc(b->taken, (b->ntaken + 1) * sizeof(*b->taken));
		b->taken[b->ntaken++] = (taken_file){ xstrdup(name), TAKEN_BUSY };
	}
	pthread_mutex_unlock(&b->lock);
	return fresh;
}

/*
 * The backlog's watch may drop any file but the main one, an upload's too (queued, or under
 * way: then whatever it stores is not marked, PostgreSQL having been told it is archived),
 * unless that upload is already stored and marked.
 */
static bool claim(void *arg, const char *name)
{
	bg *b = arg;
	if (strcmp(name, b->main_name) == 0)
		return false;
	pthread_mutex_lock(&b->lock);
	taken_file *t = taken_of(b, name);
	if (t == NULL) {
		b->taken = xrealloc(b->taken, (b->ntaken + 1) * sizeof(*b->taken));
		t = &b->taken[b->ntaken++];
		*t = (taken_file){ xstrdup(name), TAKEN_BUSY };
	}
	bool ok = t->state != TAKEN_STORED;
	if (ok)
		t->state = TAKEN_DROPPED;
	pthread_mutex_unlock(&b->lock);
	return ok;
}

/* An upload's end: false when name was dropped meanwhile, else it is stored from now on. */
static bool stored(bg *b, const char *name)
{
	pthread_mutex_lock(&b->lock);
	taken_file *t = taken_of(b, name);
	bool ok = t == NULL || t->state != TAKEN_DROPPED;
	if (ok && t != NULL)
		t->state = TAKEN_STORED;
	pthread_mutex_unlock(&b->lock);
	return ok;
}

static bool dropped(bg *b, const char *name)
{
	pthread_mutex_lock(&b->lock);
	taken_file *t = taken_of(b, name);
	bool gone = t != NULL && t->state == TAKEN_DROPPED;
	pthread_mutex_unlock(&b->lock);
	return gone;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static err_code upload(void *arg);

/*
 * Uploaders start when there is something to upload: a push with no backlog, the common case,
 * starts none instead of WALG_UPLOAD_CONCURRENCY - 1 idle threads.
 */
static bool hand_over(bg *b, const char *name)
{
	if (b->started < b->workers) {
		if (group_go(b->g, upload, b) != E_OK) {
			log_warn("background uploads stopped: %s", err_msg());
			return false;
		}
		b->started++;
	}
	return chan_send(b->names, xstrdup(name));
}

static bool main_ended(bg *b)
{
	pthread_mutex_lock(&b->lock);
	bool ended = b->main_done;
	pthread_mutex_unlock(&b->lock);
	return ended;
}

/* Pauses ms; false once *until_set (main_done or watch_done) is. */
static bool pause_until(bg *b, const bool *until_set, long ms)
{
	struct timespec until = time_in_ms(CLOCK_MONOTONIC, ms);
	pthread_mutex_lock(&b->lock);
	while (!*until_set && pthread_cond_timedwait(&b->wake, &b->lock, &until) == 0)
		;
	bool go_on = !*until_set;
	pthread_mutex_unlock(&b->lock);
	return go_on;
}

static bool pause_scan(bg *b)
{
	return pause_until(b, &b->main_done, SCAN_EVERY_MS);
}

/*
 * A look at the backlog each second, however long the uploads take (a store that does not
 * answer keeps them for as long as their retries last), until the last has ended.
 */
static err_code watch_loop(void *arg)
{
	bg *b = arg;
	long every = b->cfg->wal_backlog_max_bytes > 0 ? WATCH_BOUND_EVERY_MS : WATCH_EVERY_MS;
	while (pause_until(b, &b->watch_done, every))
		wal_watch_tick(b->watch);
	return E_OK;
}

/* .ready files, oldest name first, until the main upload ends or the budget is spent. */
static err_code scan(void *arg)
{
	bg *b = arg;
	char *status = xasprintf("%s/archive_status", b->wal_dir);
	while (b->budget > 0 && !main_ended(b)) {
		struct dirent **list;
		int n = scandir(status, &list, NULL, by_name);
		for (int i = 0; i < n; i++) {
			char *name = list[i]->d_name;
			size_t len = strlen(name);
			if (b->budget > 0 && len > 6 && strcmp(name + len - 6, ".ready") == 0) {
				name[len - 6] = '\0';
				/* one an earlier call uploaded waits for PostgreSQL's call, not another upload */
				if (strcmp(name, b->main_name) != 0 && wal_is_archive_name(name) &&
					!wal_marked(b->cfg, name) && take(b, name)) {
					b->budget--;
					if (!hand_over(b, name))
						b->budget = 0;
				}
			}
			free(list[i]);
		}
		if (n >= 0)
			free(list);
		if (!pause_scan(b))
			break;
	}
	free(status);
	chan_close(b->names);
	return E_OK;
}

static void mark_done(bg *b, const char *name)
{
	if (b->cfg->pg_ready_rename) {
		char *ready = xasprintf("%s/archive_status/%s.ready", b->wal_dir, name);
		char *done = xasprintf("%s/archive_status/%s.done", b->wal_dir, name);
		if (rename(ready, done) != 0)
			log_warn("renaming %s: %s", ready, strerror(errno));
		free(ready);
		free(done);
		return;
	}
	char *dir = wal_marker_dir(b->cfg);
	char *marker = marker_path(b->cfg, name);
	if (mkdir_p(dir, 0700) == E_OK) {
		FILE *f = fopen(marker, "w");
		if (f != NULL)
			fclose(f);
		else
			log_warn("creating marker %s: %s", marker, strerror(errno));
	} else {
		log_warn("%s", err_msg());
	}
	free(marker);
	free(dir);
}

/*
 * The gaps this call's watch dropped, recorded before an upload and again right after one: a
 * drop during a long upload (a store that came back) is then recorded at once, not by the
 * next call.
 */
static err_code recorded(bg *b)
{
	return b->state_dir != NULL ? wal_dropped_flush(b->r, b->state_dir) : E_OK;
}

static err_code upload(void *arg)
{
	bg *b = arg;
	void *item;
	/* The main upload and the uploaders fill the cores already: more threads only cost. */
	if (1 + b->workers >= sysconf(_SC_NPROCESSORS_ONLN))
		repo_compress_here();
	while (chan_recv(b->names, &item)) {
		char *name = item;
		char *path = xasprintf("%s/%s", b->wal_dir, name);
		if (dropped(b, name))
			log_debug("%s was dropped before its background upload", name);
		else if (recorded(b) != E_OK || wal_push_one(b->r, b->cfg, path) != E_OK)
			log_msg(dropped(b, name) ? LOG_DEBUG : LOG_WARNING,
					"background upload of %s failed (PostgreSQL will archive it again): %s",
					name, err_msg());
		else if (stored(b, name))
			mark_done(b, name);
		if (recorded(b) != E_OK)
			log_warn("%s", err_msg());
		err_clear();
		free(path);
		free(name);
	}
	return E_OK;
}

/*
 * WAL-G stores a file's metadata when PostgreSQL archives it, never from a background upload:
 * the time is the file's last change.
 */
static err_code push_metadata(repo *r, const wal_settings *cfg, const char *path, const char *name)
{
	struct stat sb;
	if (cfg->upload_wal_metadata == NULL || strcmp(cfg->upload_wal_metadata, "NOMETADATA") == 0)
		return E_OK;
	if (stat(path, &sb) != 0)
		return err_errno(E_IO, errno, "WALG_UPLOAD_WAL_METADATA: %s", path);
	return wal_metadata_store(r, cfg, name, sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
}

/*
 * Before anything is uploaded from pg_wal: the backlog's first look (which may drop this very
 * file: *done), and the gaps dropped earlier recorded in the repository, so that nothing after
 * a gap is stored before the gap is known. *watch: the backlog's watch, or NULL outside pg_wal.
 */
static err_code before_upload(repo *r, const wal_settings *cfg, const char *wal_dir,
							  const char *name, wal_backlog_fn report, void *arg, wal_watch **watch,
							  bool *done)
{
	*watch = NULL;
	*done = false;
	if (wal_dropped_has(wal_dir, name)) {
		log_info("%s was dropped unarchived earlier (WALG_WAL_BACKLOG_MAX): nothing to store",
				 name);
		*done = true;
		return E_OK;
	}
	*watch = wal_watch_begin(r, cfg, wal_dir, name, report, arg, done);
	if (*watch == NULL || *done)
		return E_OK;
	char *dir = wal_state_dir(wal_dir);
	err_code rc = wal_dropped_flush(r, dir);
	free(dir);
	return rc == E_OK ? E_OK : err_wrap(rc, "wal-push %s", name);
}

err_code wal_push(repo *r, const wal_settings *cfg, const char *path, wal_backlog_fn report,
				  void *arg)
{
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;

	/* Already uploaded by an earlier call's background work. */
	char *marker = marker_path(cfg, name);
	if (wal_is_archive_name(name) && unlink(marker) == 0) {
		/* Its upload was logged then: one line a segment in PostgreSQL's log, as WAL-G. */
		log_debug("%s was already archived in the background", name);
		free(marker);
		return push_metadata(r, cfg, path, name);
	}
	free(marker);
	if (!wal_is_archive_name(name)) {
		TRY(wal_push_one(r, cfg, path));
		return push_metadata(r, cfg, path, name);
	}

	char *wal_dir = slash ? xasprintf("%.*s", (int)(slash - path), path) : xstrdup(".");
	wal_watch *watch;
	bool done;
	err_code prc = before_upload(r, cfg, wal_dir, name, report, arg, &watch, &done);
	if (prc != E_OK || done) {
		wal_watch_end(watch);
		free(wal_dir);
		return prc;
	}
	int workers = (int)repo_upload_concurrency(r) - 1;
	int budget = cfg->total_bg_uploaded_limit - 1;
	if (workers <= 0 || budget <= 0)
		workers = budget = 0;
	if (workers == 0 && watch == NULL) {
		free(wal_dir);
		TRY(wal_push_one(r, cfg, path));
		return push_metadata(r, cfg, path, name);
	}

	bg b = { .r = r, .cfg = cfg, .main_name = name, .budget = budget, .watch = watch };
	b.state_dir = watch != NULL ? wal_state_dir(wal_dir) : NULL;
	b.workers = workers < budget ? workers : budget;
	b.wal_dir = wal_dir;
	b.names = chan_new(workers > 0 ? (size_t)workers : 1);
	if (watch != NULL)
		wal_watch_claims(watch, claim, &b);
	pthread_mutex_init(&b.lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b.wake, &ca);
	pthread_condattr_destroy(&ca);
	group *g = group_new(), *wg = NULL;
	b.g = g;
	group_go(g, scan, &b);
	if (watch != NULL) {
		wg = group_new();
		group_go(wg, watch_loop, &b);
	}

	err_code rc = wal_push_one(r, cfg, path);
	if (rc == E_OK)
		rc = recorded(&b);
	if (rc == E_OK)
		rc = push_metadata(r, cfg, path, name);
	char *saved = rc != E_OK ? xstrdup(err_msg()) : NULL;
	pthread_mutex_lock(&b.lock);
	b.main_done = true;
	pthread_cond_broadcast(&b.wake);
	pthread_mutex_unlock(&b.lock);
	group_wait(g); /* in-flight background uploads finish; their failures were logged */
	group_free(g);
	pthread_mutex_lock(&b.lock);
	b.watch_done = true;
	pthread_cond_broadcast(&b.wake);
	pthread_mutex_unlock(&b.lock);
	if (wg != NULL)
		group_wait(wg);
	group_free(wg);
	chan_free(b.names);
	for (size_t i = 0; i < b.ntaken; i++)
		free(b.taken[i].name);
	free(b.taken);
	pthread_cond_destroy(&b.wake);
	pthread_mutex_destroy(&b.lock);
	wal_watch_end(watch);
	free(b.state_dir);
	free(b.wal_dir);
	if (saved != NULL) {
		err_set(rc, "%s", saved);
		free(saved);
	}
	return rc;
}
