/*
 * File-system storage: objects are files under the root, written as core's file sink writes
 * (a hidden temporary beside the target, fsync, rename, fsync of the directory), so a reader
 * sees the whole object or nothing. Objects and folders belong to the repository's owner
 * whoever writes them (root's writes are given to the owner of the root folder), so that a
 * push run once as root does not lock out the user that archives.
 */
#include "internal/storage/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/pipe/pipe.h"

typedef struct fs_storage {
	storage base;
	char *root;
	file_owner owner; /* the root folder's owner and group, once it exists */
} fs_storage;

static char *fs_path(fs_storage *fs, const char *key)
{
	return xasprintf("%s/%s", fs->root, key);
}

/*
 * New objects and folders go to the owner (when we are root) and group (when we are in it) of
 * the root folder, or of the nearest folder above it before it exists: every user of the
 * repository can read what another wrote, and nobody else can (objects are 0640, folders 0755
 * less the umask).
 */
static void fs_find_owner(fs_storage *fs)
{
	char *p = xstrdup(fs->root);
	struct stat sb;
	while (stat(p, &sb) != 0) {
		char *slash = strrchr(p, '/');
		if (slash == NULL || slash == p) {
			free(p);
			return;
		}
		*slash = '\0';
	}
	free(p);
	fs->owner = (file_owner){ true, geteuid() == 0 ? (unsigned)sb.st_uid : (unsigned)-1,
							  (unsigned)sb.st_gid };
}

static void name_of_uid(unsigned uid, char *out, size_t cap)
{
	struct passwd *pw = getpwuid((uid_t)uid);
	if (pw != NULL)
		snprintf(out, cap, "%s", pw->pw_name);
	else
		snprintf(out, cap, "%u", uid);
}

/*
 * rc, or when what failed at path is that this process may not (want: R_OK or W_OK) read the
 * object, or read or write the nearest folder of it that exists: one line naming that file or
 * folder, its owner and mode, and how to give the repository back to this user.
 */
static err_code fs_denied(fs_storage *fs, const char *path, int want, err_code rc)
{
	if (rc == E_OK || rc == E_NOTFOUND || rc == E_EXISTS || rc == E_CANCELLED)
		return rc;
	char *p = xstrdup(path);
	size_t root = strlen(fs->root);
	bool folder_first = want == W_OK; /* a write makes or replaces a name in the folder */
	for (;;) {
		char *slash = strrchr(p, '/');
		if (folder_first && slash != NULL && (size_t)(slash - p) >= root) {
			*slash = '\0';
			folder_first = false;
			continue;
		}
		struct stat sb;
		if (stat(p, &sb) == 0) {
			int need = S_ISDIR(sb.st_mode) ? want | X_OK : want;
			if (access(p, need) != 0 && errno == EACCES) {
				char me[64], owner[64], group[64];
				name_of_uid((unsigned)geteuid(), me, sizeof(me));
				name_of_uid((unsigned)sb.st_uid, owner, sizeof(owner));
				struct group *gr = getgrgid(sb.st_gid);
				snprintf(group, sizeof(group), "%s", gr ? gr->gr_name : "?");
				if (gr == NULL)
					snprintf(group, sizeof(group), "%u", (unsigned)sb.st_gid);
				rc = err_set(E_IO,
							 "%s %s is owned by %s:%s with mode %04o: walc runs as %s and may "
							 "not %s it; give the repository to the user that archives "
							 "(chown -R %s: %s) or run walc as its owner",
							 S_ISDIR(sb.st_mode) ? "repository folder" : "repository object", p,
							 owner, group, (unsigned)(sb.st_mode & 07777), me,
							 want == W_OK ? "write in" : "read", me, fs->root);
			}
			break;
		}
		if ((errno != EACCES && errno != ENOENT) || slash == NULL || (size_t)(slash - p) < root)
			break;
		*slash = '\0';
	}
	free(p);
	return rc;
}

/* put: core's atomic file sink, with the object's folders made, all the repository's owner's. */
static err_code fs_put_start(storage *st, const char *key, bool exclusive, sink **out)
{
	fs_storage *fs = (fs_storage *)st;
	char *path = fs_path(fs, key);
	file_sink_opts o = { .durable = true, .replace = !exclusive, .mode = 0640,
						 .make_parents = true, .owner = &fs->owner };
	err_code rc = fs_denied(fs, path, W_OK, file_sink_open(path, &o, out));
	free(path);
	return rc;
}

static err_code fs_prepare_write(storage *st)
{
	fs_storage *fs = (fs_storage *)st;
	return fs_denied(fs, fs->root, W_OK, mkdir_p_owned(fs->root, 0755, &fs->owner));
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
	err_code rc = fs_denied(fs, path, R_OK, sink_write_file(into, path));
	if (rc == E_NOTFOUND)
		rc = fs_absent(fs, path);
	free(path);
	return rc;
}

static err_code fs_get_range(storage *st, const char *key, uint64_t offset, uint64_t len,
							 sink *into)
{
	fs_storage *fs = (fs_storage *)st;
	char *path = fs_path(fs, key);
	err_code rc = fs_denied(fs, path, R_OK, sink_write_file_range(into, path, offset, len));
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
		rc = errno == ENOENT ? fs_absent(fs, path)
							 : fs_denied(fs, path, R_OK, err_errno(E_IO, errno, "stat of %s", path));
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
		/* Hidden names are in-flight temporaries (or not ours); WAL-G's are not hidden. */
		if (de->d_name[0] == '.' || storage_is_temporary(de->d_name))
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

/* Temporaries (walc's hidden ".NAME.walc-tmp.PID.SEQ", WAL-G's) below rel, at any depth. */
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
			if (S_ISREG(sb.st_mode) && storage_is_temporary(de->d_name))
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
	char *path = fs_path(fs, rel);
	err_code rc = fs_denied(fs, path, R_OK, fs_list_dir(fs, rel, recursive, out));
	/*
	 * A folder of the repository may not exist yet, the repository itself must: listing its
	 * root is how an operator (st ls, st check read) or an alive check learns it is there,
	 * as WAL-G's listing of a missing folder fails.
	 */
	struct stat sb;
	if (rc == E_OK && rel[0] == '\0' && stat(fs->root, &sb) != 0)
		rc = err_errno(E_IO, errno, "repository %s", fs->root);
	free(path);
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

/* Removes key's file (absent is fine); *path_out, when wanted, gets its path. */
static err_code unlink_key(fs_storage *fs, const char *key, char **path_out)
{
	char *path = fs_path(fs, key);
	err_code rc = E_OK;
	if (unlink(path) != 0 && errno != ENOENT)
		rc = fs_denied(fs, path, W_OK, err_errno(E_IO, errno, "removing %s", path));
	if (path_out != NULL)
		*path_out = path;
	else
		free(path);
	return rc;
}

static err_code fs_remove(storage *st, const char *key)
{
	fs_storage *fs = (fs_storage *)st;
	char *path;
	err_code rc = unlink_key(fs, key, &path);
	if (rc == E_OK)
		remove_empty_parents(fs, path);
	free(path);
	return rc;
}

/*
 * Many deletes (retention) run on FS_REMOVE_THREADS threads: an unlink waits on the file
 * system's journal, and the disk takes many at once (10,000 one-byte files on this project's
 * VMs: 2.1-2.5 s one at a time, 0.9-1.0 s from 16 threads). Folders they empty go afterwards,
 * each tried once in a run of keys that share it.
 */
#define FS_REMOVE_THREADS 8
#define FS_REMOVE_PER_THREAD 64 /* fewer keys than this a thread: fewer threads */

typedef struct fs_removal {
	fs_storage *fs;
	const char *const *keys;
	size_t n;
	size_t next; /* atomic: the next key to take */
	group *g;
} fs_removal;

static err_code remove_some(void *arg)
{
	fs_removal *w = arg;
	while (!group_cancelled(w->g)) {
		size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
		if (i >= w->n)
			break;
		TRY(unlink_key(w->fs, w->keys[i], NULL));
	}
	return E_OK;
}

static bool same_folder(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	return sa != NULL && sb != NULL && sa - a == sb - b && strncmp(a, b, (size_t)(sa - a)) == 0;
}

static err_code fs_remove_many(storage *st, const char *const *keys, size_t n)
{
	fs_storage *fs = (fs_storage *)st;
	fs_removal w = { fs, keys, n, 0, group_new() };
	size_t threads = n / FS_REMOVE_PER_THREAD + 1;
	if (threads > FS_REMOVE_THREADS)
		threads = FS_REMOVE_THREADS;
	for (size_t t = 0; t < threads; t++)
		if (group_go(w.g, remove_some, &w) != E_OK)
			break;
	err_code rc = group_wait(w.g);
	group_free(w.g);
	for (size_t i = 0; rc == E_OK && i < n; i++) {
		if (i + 1 < n && same_folder(keys[i], keys[i + 1]))
			continue;
		char *path = fs_path(fs, keys[i]);
		remove_empty_parents(fs, path);
		free(path);
	}
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
	.put = fs_put_open,
	.get = fs_get,
	.stat = fs_stat,
	.list = fs_list,
	.remove = fs_remove,
	.remove_many = fs_remove_many,
	.describe = fs_describe,
	.free = fs_free,
	.put_new = fs_put_new,
	.list_temporaries = fs_list_temporaries,
	.get_range = fs_get_range,
	.prepare_write = fs_prepare_write,
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
	fs_find_owner(fs);
	*out = &fs->base;
	return E_OK;
}
