/*
 * wal-fetch's prefetch: after a segment is served, a detached child (made by fork, so walc
 * need not be on PATH) downloads the next WALG_DOWNLOAD_CONCURRENCY segments at once into
 * <dir>/.wal-g/prefetch/. Each file appears there only complete (written under a temporary
 * name, then renamed), and a later wal-fetch takes it by rename after checking its size and
 * WAL page magic, so a prefetcher killed midway can never hand PostgreSQL a short file.
 */
#include "internal/wal/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal/pg/pg.h"
#include "internal/pipe/pipe.h"
#include "internal/wal/wal_impl.h"

#define WAIT_RUNNING_MS 2000
#define POLL_MS 5

char *prefetch_dir(const wal_settings *cfg, const char *dest)
{
	if (cfg->prefetch_dir != NULL) {
		size_t n = strlen(cfg->prefetch_dir);
		while (n > 1 && cfg->prefetch_dir[n - 1] == '/')
			n--;
		return xasprintf("%.*s/.wal-g/prefetch", (int)n, cfg->prefetch_dir);
	}
	const char *slash = strrchr(dest, '/');
	if (slash == NULL)
		return xstrdup(".wal-g/prefetch");
	return xasprintf("%.*s/.wal-g/prefetch", (int)(slash - dest), dest);
}

static uint64_t seg_size(const wal_settings *cfg)
{
	return (uint64_t)cfg->pg->pg_wal_size_mb << 20;
}

/* A file there may be left from another configuration, or be damaged on disk since. */
static bool looks_complete(const wal_settings *cfg, const char *name, const char *path)
{
	struct stat sb;
	unsigned char head[WAL_LONG_HEADER_LEN];
	if (stat(path, &sb) != 0)
		return false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, head, sizeof(head));
	close(fd);
	bool ok = n == (ssize_t)sizeof(head) &&
		wal_file_check(NULL, cfg, name, head, sizeof(head), (uint64_t)sb.st_size, NULL) == E_OK;
	err_clear();
	return ok;
}

static bool running_alive(const char *running)
{
	char buf[32] = "";
	int fd = open(running, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	pid_t pid = n > 0 ? (pid_t)strtol(buf, NULL, 10) : 0;
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Moves a prefetched copy into place; a copy across file systems when rename cannot. */
static err_code hand_over(const char *from, const char *dest)
{
	if (rename(from, dest) == 0)
		return E_OK;
	if (errno != EXDEV)
		return err_errno(E_IO, errno, "moving %s to %s", from, dest);
	sink *out;
	TRY(file_sink_new(dest, true, true, &out));
	err_code rc = sink_write_file(out, from);
	if (rc == E_OK)
		rc = sink_finish(out);
	sink_free(out);
	unlink(from);
	return rc;
}

err_code prefetch_take(const wal_settings *cfg, const char *name, const char *dest, bool *taken)
{
	*taken = false;
	if (!wal_is_segment_name(name))
		return E_OK;
	char *dir = prefetch_dir(cfg, dest);
	char *ready = xasprintf("%s/%s", dir, name);
	char *running = xasprintf("%s/running/%s", dir, name);
	err_code rc = E_OK;
	/* Being downloaded by a live prefetcher: wait a little rather than fetch it twice. */
	for (int waited = 0; waited < WAIT_RUNNING_MS && access(ready, F_OK) != 0 &&
		 running_alive(running);
		 waited += POLL_MS) {
		struct timespec ts = { 0, POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (access(ready, F_OK) == 0) {
		if (looks_complete(cfg, name, ready)) {
			rc = hand_over(ready, dest);
			*taken = rc == E_OK;
			if (*taken)
				log_debug("%s served from the prefetch directory", name);
		} else {
			log_warn("ignoring prefetched %s: wrong size or not WAL", ready);
			unlink(ready);
		}
	}
	free(running);
	free(ready);
	free(dir);
	return rc;
}

/* The child's work */

typedef struct job {
	repo *r;
	const wal_settings *cfg;
	char *dir;
	const char *dest; /* where wal-fetch put the segment asked for */
	chan *names;
	/* atomic: the lowest segment found missing, where the archive ends (UINT64_MAX: none).
	 * Workers take names in any order: one that finds N+2 missing must not stop another
	 * from fetching N+1. */
	uint64_t end;
} job;

static uint64_t segno_of(const job *j, const char *name)
{
	uint32_t tli;
	uint64_t segno;
	if (wal_name_parse(name, seg_size(j->cfg), &tli, &segno) != E_OK)
		return UINT64_MAX;
	return segno;
}

static void archive_ends_at(job *j, uint64_t segno)
{
	uint64_t cur = __atomic_load_n(&j->end, __ATOMIC_RELAXED);
	while (segno < cur && !__atomic_compare_exchange_n(&j->end, &cur, segno, false,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/*
 * The prefetch directory is a cache of the archive: its files are not synced. What goes there
 * is checked as wal-fetch checks what it hands over.
 */
typedef struct ready_file {
	job *j;
	const char *name, *path;
} ready_file;

static err_code open_ready(void *arg, sink **out)
{
	ready_file *f = arg;
	return wal_checked_file_new(f->j->r, f->j->cfg, f->name, f->j->dest, f->path, false, out);
}

static err_code fetch_one(job *j, const char *name)
{
	char *ready = xasprintf("%s/%s", j->dir, name);
	char *running = xasprintf("%s/running/%s", j->dir, name);
	char *base = xasprintf(REPO_WAL_DIR "%s", name);
	int fd = -1;

	if (access(ready, F_OK) == 0)
		goto out; /* already here */
	fd = open(running, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		goto out; /* another prefetcher has it */
	dprintf(fd, "%d\n", (int)getpid());
	ready_file f = { j, name, ready };
	err_code rc = repo_get_found(j->r, base, open_ready, &f, NULL);
	if (rc == E_NOTFOUND) {
		archive_ends_at(j, segno_of(j, name));
		log_debug("prefetch: %s is not archived (yet)", name);
	} else if (rc != E_OK) {
		log_debug("prefetch of %s failed: %s", name, err_msg());
		err_clear();
	}
out:
	if (fd >= 0) {
		close(fd);
		unlink(running);
	}
	free(base);
	free(running);
	free(ready);
	return E_OK;
}

static err_code worker(void *arg)
{
	job *j = arg;
	void *item;
	while (chan_recv(j->names, &item)) {
		if (segno_of(j, item) < __atomic_load_n(&j->end, __ATOMIC_RELAXED))
			fetch_one(j, item);
		free(item);
	}
	return E_OK;
}

/* Files for segments before the one just requested will never be asked for again. */
static void clean_older(const char *dir, uint32_t tli, uint64_t segno, uint64_t segsize)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		uint32_t t;
		uint64_t s;
		if (!wal_is_segment_name(de->d_name) ||
			wal_name_parse(de->d_name, segsize, &t, &s) != E_OK)
			continue;
		if (t < tli || (t == tli && s < segno)) {
			char *p = xasprintf("%s/%s", dir, de->d_name);
			unlink(p);
			free(p);
		}
	}
	closedir(d);
}

void wal_prefetch(repo *r, const wal_settings *cfg, const char *name, const char *dest)
{
	uint32_t tli;
	uint64_t segno, segsize = seg_size(cfg);
	if (wal_name_parse(name, segsize, &tli, &segno) != E_OK)
		return;
	job j = { .r = r, .cfg = cfg, .dir = prefetch_dir(cfg, dest), .dest = dest, .end = UINT64_MAX };
	char *running = xasprintf("%s/running", j.dir);
	if (mkdir_p(running, 0700) != E_OK) {
		free(running);
		free(j.dir);
		return;
	}
	clean_older(j.dir, tli, segno, segsize);
	clean_older(running, tli, segno, segsize);
	int n = (int)repo_download_concurrency(r);
	j.names = chan_new((size_t)n);
	group *g = group_new();
	for (int i = 0; i < n; i++)
		group_go(g, worker, &j);
	for (int i = 1; i <= n; i++) {
		char next[WAL_NAME_LEN + 1];
		wal_name_format(next, tli, segno + (uint64_t)i, segsize);
		if (!chan_send(j.names, xstrdup(next)))
			break;
	}
	chan_close(j.names);
	group_wait(g);
	group_free(g);
	chan_free(j.names);
	free(running);
	free(j.dir);
}

bool wal_prefetch_wanted(const repo *r, const char *name)
{
	return repo_download_concurrency(r) > 1 && wal_is_segment_name(name);
}
