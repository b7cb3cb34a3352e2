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

err_code file_sink_new(const char *path, bool durable, bool replace, sink **out)
{
	*out = NULL;
	const char *slash = strrchr(path, '/');
	char *tmp = slash
		? xasprintf("%.*s/.%s.walc-tmp.%d.%lu", (int)(slash - path), path, slash + 1,
					(int)getpid(), (unsigned long)atomic_fetch_add(&file_tmp_seq, 1))
		: xasprintf(".%s.walc-tmp.%d.%lu", path, (int)getpid(),
					(unsigned long)atomic_fetch_add(&file_tmp_seq, 1));
	if (!replace && access(path, F_OK) == 0) {
		free(tmp);
		return err_set(E_EXISTS, "%s already exists", path);
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		err_code rc = err_errno(E_IO, errno, "creating %s", tmp);
		free(tmp);
		return rc;
	}
	file_sink *f = xcalloc(1, sizeof(*f));
	f->base.ops = &file_ops;
	f->fd = fd;
	f->path = xstrdup(path);
	f->tmp = tmp;
	f->durable = durable;
	f->replace = replace;
	*out = &f->base;
	return E_OK;
}
