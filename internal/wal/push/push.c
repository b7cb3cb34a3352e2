/* wal-push: one WAL file to the repository, compressed then encrypted. */
#include "internal/wal/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal/catalog/catalog.h"
#include "internal/pg/pg.h"
#include "internal/wal/wal_impl.h"

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* What is archived: a file, or bytes in memory (a segment wal-receive streamed). */
typedef struct wal_src {
	const char *name;
	const char *path; /* NULL: buf */
	const unsigned char *buf;
	size_t len;
} wal_src;

static sink *compare_src(const wal_src *src, bool *equal)
{
	return src->path ? compare_sink_new(src->path, equal)
					 : compare_mem_sink_new(src->buf, src->len, equal);
}

/* E_OK + *done when an identical copy is stored; E_EXISTS when a different one is. */
static err_code check_overwrite(repo *r, const wal_src *src, bool *done)
{
	char *base = xasprintf(REPO_WAL_DIR "%s", src->name);
	char *key = NULL;
	err_code rc = repo_find(r, base, &key);
	free(base);
	*done = false;
	if (rc == E_NOTFOUND) {
		err_clear();
		return E_OK;
	}
	if (rc != E_OK)
		return rc;
	bool equal = false;
	rc = repo_get(r, key, compare_src(src, &equal));
	if (rc == E_OK) {
		if (equal) {
			log_info("%s is already archived as %s with identical content; nothing to do",
					 src->name, key);
			*done = true;
		} else {
			rc = err_set(E_EXISTS,
						 "%s is already archived as %s in %s with different content; refusing "
						 "to overwrite it",
						 src->name, key, repo_describe(r));
		}
	}
	free(key);
	return rc;
}

/* A segment's long header names its cluster: it must be the repository's. */
static err_code check_segment_cluster(repo *r, const wal_settings *cfg, const wal_src *src,
									  const char *what)
{
	unsigned char head[WAL_LONG_HEADER_LEN];
	ssize_t n = sizeof(head);
	if (src->path != NULL) {
		int fd = open(src->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return err_errno(E_IO, errno, "wal-push: %s", src->path);
		n = read(fd, head, sizeof(head));
		close(fd);
	} else if (src->len >= sizeof(head)) {
		memcpy(head, src->buf, sizeof(head));
	} else {
		n = 0;
	}
	uint64_t sysid;
	/* Not a WAL header (a test file, a damaged segment): no cluster to compare. */
	if (n != (ssize_t)sizeof(head) ||
		!wal_header_sysid(head, sizeof(head), (uint64_t)cfg->pg->pg_wal_size_mb << 20, &sysid))
		return catalog_check_encryption(r, what);
	return catalog_check_cluster(r, sysid, cfg->catalog, what);
}

static err_code check_cluster(repo *r, const wal_settings *cfg, const wal_src *src)
{
	char *what = xasprintf("wal-push %s", src->name);
	err_code rc = (!wal_is_segment_name(src->name) && !str_has_suffix(src->name, ".partial"))
		? catalog_check_encryption(r, what)
		: check_segment_cluster(r, cfg, src, what);
	free(what);
	return rc;
}

static err_code push_src(repo *r, const wal_settings *cfg, const wal_src *src, long long size)
{
	TRY(check_cluster(r, cfg, src));

	double t0 = now_ms();
	bool protect = cfg->prevent_wal_overwrite || str_has_suffix(src->name, ".history");
	if (protect) {
		bool done;
		TRY(check_overwrite(r, src, &done));
		if (done)
			return E_OK;
	}

	char *base = xasprintf(REPO_WAL_DIR "%s", src->name);
	char *key = NULL;
	sink *s = NULL;
	/* A protected name is created, never replaced: two pushers racing cannot both win. */
	err_code rc = protect ? repo_put_new(r, base, &s, &key) : repo_put(r, base, NULL, &s, &key);
	if (rc == E_OK)
		rc = src->path ? sink_write_file(s, src->path) : sink_write(s, src->buf, src->len);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	if (rc == E_EXISTS) {
		/* Someone published it first: fine if it is the same file, refused otherwise. */
		bool done;
		err_clear();
		rc = check_overwrite(r, src, &done);
		if (rc == E_OK && !done)
			rc = err_set(E_EXISTS, "%s appeared in %s while it was being archived", src->name,
						 repo_describe(r));
		if (rc == E_OK) {
			free(key);
			free(base);
			return E_OK;
		}
	}
	if (rc == E_OK) {
		char ms[32], bytes[32];
		snprintf(ms, sizeof(ms), "%.1f", now_ms() - t0);
		snprintf(bytes, sizeof(bytes), "%lld", size);
		log_fields(LOG_INFO, "archived WAL file", "file", src->name, "object", key, "bytes",
				   bytes, "ms", ms, (const char *)NULL);
	} else {
		err_wrap(rc, "wal-push %s to %s", src->name, repo_describe(r));
	}
	free(key);
	free(base);
	return rc;
}

/*
 * A file named as a WAL file must be one before anything is stored: PostgreSQL would be handed
 * it at restore. The first bytes the check needs are read from the file, or taken from memory.
 */
static err_code check_content(const wal_settings *cfg, const wal_src *src, uint64_t size)
{
	size_t need = wal_file_head_need(src->name);
	if (need == 0)
		return E_OK;
	unsigned char *head = NULL;
	size_t have = 0;
	err_code rc = E_OK;
	if (src->path != NULL) {
		head = xmalloc(need);
		int fd = open(src->path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			rc = err_errno(E_IO, errno, "wal-push: %s", src->path);
		while (rc == E_OK && have < need) {
			ssize_t n = read(fd, head + have, need - have);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				rc = err_errno(E_IO, errno, "wal-push: %s", src->path);
			if (n <= 0)
				break;
			have += (size_t)n;
		}
		if (fd >= 0)
			close(fd);
	}
	if (rc == E_OK)
		rc = wal_file_check(NULL, cfg, src->name, src->path ? head : src->buf,
							src->path ? have : (src->len < need ? src->len : need), size, NULL);
	if (rc == E_CORRUPT)
		err_wrap(rc, "wal-push %s: refused, nothing stored", src->path ? src->path : src->name);
	free(head);
	return rc;
}

err_code wal_push_one(repo *r, const wal_settings *cfg, const char *path)
{
	const char *name = base_name(path);
	struct stat sb;

	if (!wal_is_file_name(name))
		return err_set(E_CONFIG, "wal-push: \"%s\" is not a file name walc archives", path);
	if (stat(path, &sb) != 0)
		return err_errno(errno == ENOENT ? E_NOTFOUND : E_IO, errno, "wal-push: %s", path);
	if (!S_ISREG(sb.st_mode))
		return err_set(E_IO, "wal-push: %s is not a regular file", path);
	wal_src src = { .name = name, .path = path };
	TRY(check_content(cfg, &src, (uint64_t)sb.st_size));
	return push_src(r, cfg, &src, (long long)sb.st_size);
}

err_code wal_push_mem(repo *r, const wal_settings *cfg, const char *name, const void *buf,
					  size_t len)
{
	if (!wal_is_archive_name(name))
		return err_set(E_CONFIG, "wal-push: \"%s\" is not a WAL file name", name);
	wal_src src = { .name = name, .buf = buf, .len = len };
	TRY(check_content(cfg, &src, len));
	return push_src(r, cfg, &src, (long long)len);
}

bool wal_archived(const char *pgdata, const char *name)
{
	char *done = xasprintf("%s/pg_wal/archive_status/%s.done", pgdata, name);
	char *ready = xasprintf("%s/pg_wal/archive_status/%s.ready", pgdata, name);
	char *file = xasprintf("%s/pg_wal/%s", pgdata, name);
	bool busy = access(done, F_OK) != 0 && (access(ready, F_OK) == 0 || access(file, F_OK) == 0);
	free(done);
	free(ready);
	free(file);
	return !busy;
}

err_code wal_push_if_ready(repo *r, const wal_settings *cfg, const char *pgdata, const char *name,
						   bool *pushed)
{
	char *ready = xasprintf("%s/pg_wal/archive_status/%s.ready", pgdata, name);
	char *path = xasprintf("%s/pg_wal/%s", pgdata, name);
	err_code rc = E_OK;
	*pushed = false;
	if (access(ready, F_OK) == 0) {
		/* as wal-push: no segment is stored after a gap not yet recorded */
		char *wal_dir = xasprintf("%s/pg_wal", pgdata), *state = wal_state_dir(wal_dir);
		rc = wal_dropped_flush(r, state);
		if (rc == E_OK)
			rc = wal_push_one(r, cfg, path);
		*pushed = rc == E_OK;
		free(state);
		free(wal_dir);
	}
	free(ready);
	free(path);
	return rc;
}
