/* Atomic file writing as a sink: temporary name, fsync, rename, fsync of the directory. */
#include "internal/core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_ulong file_tmp_seq;

typedef struct file_sink {
	sink base;
	int fd;
	char *path;
	char *tmp;
	bool durable;
	bool replace;
	bool done;
} file_sink;

static err_code file_write(sink *s, const void *buf, size_t len)
{
	file_sink *f = (file_sink *)s;
	return fd_write_all(f->fd, buf, len, f->path);
}

static err_code file_finish(sink *s)
{
	file_sink *f = (file_sink *)s;
	if (f->durable && fsync(f->fd) != 0)
		return err_errno(E_IO, errno, "fsync of %s", f->tmp);
	int rc = close(f->fd);
	f->fd = -1;
	if (rc != 0)
		return err_errno(E_IO, errno, "closing %s", f->tmp);
	if (f->replace) {
		if (rename(f->tmp, f->path) != 0)
			return err_errno(E_IO, errno, "renaming %s to %s", f->tmp, f->path);
	} else {
		/* link() fails if the target appeared meanwhile: never clobber a file we didn't make. */
		if (link(f->tmp, f->path) != 0)
			return err_errno(errno == EEXIST ? E_EXISTS : E_IO, errno, "creating %s", f->path);
		unlink(f->tmp);
	}
	f->done = true;
	return f->durable ? fsync_parent_dir(f->path) : E_OK;
}

static void file_free(sink *s)
{
	file_sink *f = (file_sink *)s;
	if (f->fd >= 0)
		close(f->fd);
	if (!f->done)
		unlink(f->tmp);
	free(f->path);
	free(f->tmp);
	free(f);
}

static const sink_ops file_ops = { file_write, file_finish, file_free };

/*
 * A hidden temporary beside the target (same file system, so the rename is atomic), named
 * so that a killed writer's leftovers can be found and told from a running one's: PID.
 */
static char *temp_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	unsigned long seq = (unsigned long)atomic_fetch_add(&file_tmp_seq, 1);
	return slash ? xasprintf("%.*s/.%s" FILE_TMP_MARK "%d.%lu", (int)(slash - path), path,
							 slash + 1, (int)getpid(), seq)
				 : xasprintf(".%s" FILE_TMP_MARK "%d.%lu", path, (int)getpid(), seq);
}

/* The temporary, its folder created when asked: a deletion emptying the folder may race us. */
static err_code open_temp(const char *path, const char *tmp, const file_sink_opts *o, int *fd)
{
	for (int attempt = 0;; attempt++) {
		const char *slash = strrchr(path, '/');
		if (o->make_parents && slash != NULL && slash != path) {
			char *dir = xasprintf("%.*s", (int)(slash - path), path);
			err_code rc = mkdir_p_owned(dir, 0755, o->owner);
			free(dir);
			TRY(rc);
		}
		*fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, o->mode ? o->mode : 0600);
		if (*fd >= 0) {
			if (o->owner != NULL && o->owner->set &&
				fchown(*fd, (uid_t)o->owner->uid, (gid_t)o->owner->gid) != 0)
				errno = 0; /* best effort, as for folders */
			return E_OK;
		}
		if (errno != ENOENT || !o->make_parents || attempt == 2)
			return err_errno(E_IO, errno, "creating %s", tmp);
	}
}

err_code file_sink_open(const char *path, const file_sink_opts *o, sink **out)
{
	*out = NULL;
	/* Fail before any work when the file is there already (finish checks again, atomically). */
	if (!o->replace && access(path, F_OK) == 0)
		return err_set(E_EXISTS, "%s already exists", path);
	char *tmp = temp_name(path);
	int fd;
	err_code rc = open_temp(path, tmp, o, &fd);
	if (rc != E_OK) {
		free(tmp);
		return rc;
	}
	file_sink *f = xcalloc(1, sizeof(*f));
	f->base.ops = &file_ops;
	f->fd = fd;
	f->path = xstrdup(path);
	f->tmp = tmp;
	f->durable = o->durable;
	f->replace = o->replace;
	*out = &f->base;
	return E_OK;
}

err_code file_sink_new(const char *path, bool durable, bool replace, sink **out)
{
	file_sink_opts o = { .durable = durable, .replace = replace };
	return file_sink_open(path, &o, out);
}
