/*
 * File-system storage: objects are files under the root. Writes go to a hidden temporary
 * name beside the target, are fsynced, renamed into place and the directory fsynced, so a
 * reader sees the whole object or nothing.
 */
#include "internal/storage/storage.h"

#include <dirent.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static atomic_ulong fs_tmp_seq;

typedef struct fs_storage {
	storage base;
	char *root;
} fs_storage;

static char *fs_path(fs_storage *fs, const char *key)
{
	return xasprintf("%s/%s", fs->root, key);
}

/* put */

typedef struct fs_put {
	sink base;
	int fd;
	char *tmp;
	char *path;
	bool done;
	bool exclusive; /* publish with link(): never replace */
} fs_put;

static err_code fs_put_write(sink *s, const void *buf, size_t len)
{
	fs_put *p = (fs_put *)s;
	return fd_write_all(p->fd, buf, len, p->path);
}

static err_code fs_put_finish(sink *s)
{
	fs_put *p = (fs_put *)s;
	if (fsync(p->fd) != 0)
		return err_errno(E_IO, errno, "fsync of %s", p->tmp);
	if (close(p->fd) != 0) {
		p->fd = -1;
		return err_errno(E_IO, errno, "closing %s", p->tmp);
	}
	p->fd = -1;
	if (p->exclusive) {
		if (link(p->tmp, p->path) != 0)
			return errno == EEXIST ? err_set(E_EXISTS, "%s already exists", p->path)
								   : err_errno(E_IO, errno, "creating %s", p->path);
		unlink(p->tmp);
	} else if (rename(p->tmp, p->path) != 0) {
		return err_errno(E_IO, errno, "renaming %s to %s", p->tmp, p->path);
	}
	p->done = true;
	return fsync_parent_dir(p->path);
}

static void fs_put_free(sink *s)
{
	fs_put *p = (fs_put *)s;
	if (p->fd >= 0)
		close(p->fd);
	if (!p->done)
		unlink(p->tmp);
	free(p->tmp);
	free(p->path);
	free(p);
}

static const sink_ops fs_put_ops = { fs_put_write, fs_put_finish, fs_put_free };

static err_code fs_put_start(storage *st, const char *key, bool exclusive, sink **out)
{
	fs_storage *fs = (fs_storage *)st;
	char *path = fs_path(fs, key);
	/* Fail before any work when the object is already there (finish re-checks atomically). */
	if (exclusive && access(path, F_OK) == 0) {
		err_code rc = err_set(E_EXISTS, "%s already exists", path);
		free(path);
		return rc;
	}
	char *slash = strrchr(path, '/');
	/* Hidden temporary beside the target: same file system, so rename is atomic. */
	char *tmp = xasprintf("%.*s/.%s" STORAGE_TMP_MARK "%d.%lx", (int)(slash - path), path, slash + 1,
						  (int)getpid(), (unsigned long)atomic_fetch_add(&fs_tmp_seq, 1));
	int fd = -1;
	err_code rc = E_OK;
	/* A deletion emptying the folder may remove it between mkdir and open: try again. */
	for (int attempt = 0; fd < 0 && attempt < 3; attempt++) {
		*slash = '\0';
		rc = mkdir_p(path, 0755);
		*slash = '/';
		if (rc != E_OK)
			break;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
		if (fd < 0 && errno != ENOENT)
			break;
	}
	if (rc != E_OK) {
		free(tmp);
		free(path);
		return rc;
	}
	if (fd < 0) {
		rc = err_errno(E_IO, errno, "creating %s", tmp);
		free(tmp);
		free(path);
		return rc;
	}
	fs_put *p = xcalloc(1, sizeof(*p));
	p->base.ops = &fs_put_ops;
	p->fd = fd;
	p->tmp = tmp;
	p->path = path;
	p->exclusive = exclusive;
	*out = &p->base;
	return E_OK;
}

static err_code fs_put_open(storage *st, const char *key, sink **out)
{
	return fs_put_start(st, key, false, out);
}

static err_code fs_put_new(storage *st, const char *key, sink **out)
{
	return fs_put_start(st, key, true, out);
}

/*
 * An absent object in an absent repository is a configuration mistake, not the end of the
 * archive: wal-fetch must not answer "does not exist" (exit 74) for a mistyped prefix.
 */
static err_code fs_absent(fs_storage *fs, const char *path)
{
	struct stat sb;
	if (stat(fs->root, &sb) != 0)
		return err_errno(E_IO, errno, "repository %s", fs->root);
	return err_set(E_NOTFOUND, "object %s does not exist", path);
}

/* get */

static err_code fs_get(storage *st, const char *key, sink *into)
{
	fs_storage *fs = (fs_storage *)st;
	char *path = fs_path(fs, key);
	err_code rc = sink_write_file(into, path);
	if (rc == E_NOTFOUND)
		rc = fs_absent(fs, path);
	free(path);
	return rc;
}

static err_code fs_stat(storage *st, const char *key, obj_info *info)
{
	fs_storage *fs = (fs_storage *)st;
	char *path = fs_path(fs, key);
	struct stat sb;
	err_code rc = E_OK;
	if (stat(path, &sb) != 0)
		/* ENOTDIR: a path component is a file, so the repository itself is broken. */
		rc = errno == ENOENT ? fs_absent(fs, path) : err_errno(E_IO, errno, "stat of %s", path);
	else if (!S_ISREG(sb.st_mode))
		rc = err_set(E_NOTFOUND, "%s is not a regular file", path);
	else {
		info->size = (uint64_t)sb.st_size;
		info->mtime = sb.st_mtim.tv_sec;
		info->mtime_nsec = sb.st_mtim.tv_nsec;
	}
	free(path);
	return rc;
}

/* list */

static err_code fs_list_dir(fs_storage *fs, const char *rel, bool recursive, obj_list *out)
{
	char *dirpath = rel[0] ? xasprintf("%s/%s", fs->root, rel) : xstrdup(fs->root);
	DIR *d = opendir(dirpath);
	if (d == NULL) {
		err_code rc = errno == ENOENT
			? E_OK
			: err_errno(E_IO, errno, "listing %s", dirpath);
		free(dirpath);
		return rc;
	}
	err_code rc = E_OK;
	struct dirent *de;
	while (rc == E_OK && (errno = 0, de = readdir(d)) != NULL) {
		/* Hidden names are in-flight temporaries (or not ours). */
		if (de->d_name[0] == '.')
			continue;
		char *key = rel[0] ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		char *path = xasprintf("%s/%s", dirpath, de->d_name);
		struct stat sb;
		if (lstat(path, &sb) == 0) {
			if (S_ISREG(sb.st_mode))
				obj_list_add(out, key, (uint64_t)sb.st_size, sb.st_mtim.tv_sec,
							 sb.st_mtim.tv_nsec);
			else if (S_ISDIR(sb.st_mode) && recursive)
				rc = fs_list_dir(fs, key, recursive, out);
		} else if (errno != ENOENT) {
			rc = err_errno(E_IO, errno, "stat of %s", path);
		}
		free(path);
		free(key);
	}
	if (rc == E_OK && errno != 0)
		rc = err_errno(E_IO, errno, "listing %s", dirpath);
	closedir(d);
	free(dirpath);
	return rc;
}

/* Hidden temporaries (".NAME.walc-tmp.PID.SEQ") below rel, at any depth. */
static err_code fs_temps_dir(fs_storage *fs, const char *rel, obj_list *out)
{
	char *dirpath = rel[0] ? xasprintf("%s/%s", fs->root, rel) : xstrdup(fs->root);
	DIR *d = opendir(dirpath);
	if (d == NULL) {
		err_code rc = errno == ENOENT ? E_OK : err_errno(E_IO, errno, "listing %s", dirpath);
		free(dirpath);
		return rc;
	}
	err_code rc = E_OK;
	struct dirent *de;
	while (rc == E_OK && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char *key = rel[0] ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		char *path = xasprintf("%s/%s", dirpath, de->d_name);
		struct stat sb;
		if (lstat(path, &sb) == 0) {
			if (S_ISREG(sb.st_mode) && de->d_name[0] == '.' &&
				strstr(de->d_name, STORAGE_TMP_MARK) != NULL)
				obj_list_add(out, key, (uint64_t)sb.st_size, sb.st_mtim.tv_sec,
							 sb.st_mtim.tv_nsec);
			else if (S_ISDIR(sb.st_mode) && de->d_name[0] != '.')
				rc = fs_temps_dir(fs, key, out);
		}
		free(path);
		free(key);
	}
	closedir(d);
	free(dirpath);
	return rc;
}

static err_code fs_list_temporaries(storage *st, const char *prefix, obj_list *out)
{
	fs_storage *fs = (fs_storage *)st;
	char *rel = xstrdup(prefix);
	size_t n = strlen(rel);
	while (n > 0 && rel[n - 1] == '/')
		rel[--n] = '\0';
	err_code rc = fs_temps_dir(fs, rel, out);
	free(rel);
	return rc;
}

static err_code fs_list(storage *st, const char *prefix, bool recursive, obj_list *out)
{
	fs_storage *fs = (fs_storage *)st;
	char *rel = xstrdup(prefix);
	size_t n = strlen(rel);
	while (n > 0 && rel[n - 1] == '/')
		rel[--n] = '\0';
	err_code rc = fs_list_dir(fs, rel, recursive, out);
	free(rel);
	return rc;
}

/*
 * Object stores have no folders; on a file system the folders a deletion emptied go too
 * (up to the root, never a folder holding anything, hidden temporaries included).
 */
static void remove_empty_parents(fs_storage *fs, char *path)
{
	size_t root = strlen(fs->root);
	for (char *slash = strrchr(path, '/'); slash != NULL && (size_t)(slash - path) > root;
		 slash = strrchr(path, '/')) {
		*slash = '\0';
		if (rmdir(path) != 0)
			break;
	}
}

static err_code fs_remove(storage *st, const char *key)
{
	fs_storage *fs = (fs_storage *)st;
	char *path = fs_path(fs, key);
	err_code rc = E_OK;
	if (unlink(path) != 0 && errno != ENOENT)
		rc = err_errno(E_IO, errno, "removing %s", path);
	if (rc == E_OK)
		remove_empty_parents(fs, path);
	free(path);
	return rc;
}

static const char *fs_describe(storage *st)
{
	return ((fs_storage *)st)->root;
}

static void fs_free(storage *st)
{
	fs_storage *fs = (fs_storage *)st;
	free(fs->root);
	free(fs);
}

static const storage_ops fs_ops = {
	fs_put_open, fs_get, fs_stat, fs_list, fs_remove, fs_describe, fs_free, fs_put_new,
	fs_list_temporaries,
};

err_code storage_fs_open(const char *root, storage **out)
{
	*out = NULL;
	if (root[0] != '/')
		return err_set(E_CONFIG, "file storage root %s is not absolute", root);
	struct stat sb;
	if (stat(root, &sb) == 0 && !S_ISDIR(sb.st_mode))
		return err_set(E_IO, "repository %s is not a directory", root);
	fs_storage *fs = xcalloc(1, sizeof(*fs));
	fs->base.ops = &fs_ops;
	fs->root = xstrdup(root);
	size_t n = strlen(fs->root);
	while (n > 1 && fs->root[n - 1] == '/')
		fs->root[--n] = '\0';
	*out = &fs->base;
	return E_OK;
}
