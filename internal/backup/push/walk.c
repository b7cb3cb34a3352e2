/*
 * The walker: PGDATA, WAL-G's exclusions (§7.2), and each tablespace's tree under
 * /pg_tblspc/<oid>. Only names and stat results travel to the packers. Each directory is
 * walked in the order the file system lists it, not sorted as WAL-G does: sorting needs the
 * whole listing in memory, and a database directory can hold hundreds of thousands of
 * relation files. Nothing depends on the order; a directory still comes before its contents.
 */
#include "internal/backup/push/push_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Directories stored empty: their contents are rebuilt or irrelevant at restore. */
static const char *const excluded_dirs[] = {
	"log",		   "pg_log",	  "pg_xlog",	 "pg_wal",	   "pgsql_tmp",	   "pg_dynshmem",
	"pg_notify",   "pg_replslot", "pg_serial",	 "pg_stat_tmp", "pg_snapshots", "pg_subtrans",
	NULL,
};
static const char *const excluded_files[] = {
	"postgresql.auto.conf.tmp", "postmaster.pid", "postmaster.opts", "recovery.conf",
	"standby.signal",			NULL,
};

/* catchup-push leaves the server's own configuration to the standby (WAL-G's rule). */
static const char *const catchup_files[] = { "pg_hba.conf", "postgresql.conf",
											 "postgresql.auto.conf", NULL };

static bool in_list(const char *const *list, const char *name)
{
	for (size_t i = 0; list[i] != NULL; i++)
		if (strcmp(list[i], name) == 0)
			return true;
	return false;
}

void walk_entry_free(walk_entry *e)
{
	if (e == NULL)
		return;
	free(e->path);
	free(e->member);
	free(e);
}

static err_code emit(push_state *st, const char *path, const char *member, const struct stat *sb)
{
	walk_entry *e = xcalloc(1, sizeof(*e));
	e->path = xstrdup(path);
	e->member = xstrdup(member);
	e->st = *sb;
	__atomic_add_fetch(&st->catalog, (uint64_t)sb->st_size, __ATOMIC_RELAXED);
	if (!chan_send(st->entries, e)) {
		walk_entry_free(e);
		return err_set(E_CANCELLED, "backup cancelled");
	}
	return E_OK;
}

static err_code walk_dir(push_state *st, const char *dir, const char *member, bool root);

void spec_add_tablespace(push_state *st, const char *base_prefix, const char *oid,
						 const char *loc)
{
	pthread_mutex_lock(&st->lock);
	if (st->spec == NULL) {
		st->spec = json_object();
		json_object_set_new(st->spec, "base_prefix", json_string(base_prefix));
		json_object_set_new(st->spec, "tablespaces", json_array());
	}
	json_array_append_new(json_object_get(st->spec, "tablespaces"), json_string(oid));
	json_t *one = json_object();
	json_object_set_new(one, "loc", json_string(loc));
	char *rel = xasprintf("pg_tblspc/%s", oid);
	json_object_set_new(one, "link", json_string(rel));
	free(rel);
	json_object_set_new(st->spec, oid, one);
	pthread_mutex_unlock(&st->lock);
}

static err_code add_tablespace(push_state *st, const char *link, const char *oid)
{
	char *loc = realpath(link, NULL);
	if (loc == NULL)
		return err_errno(E_IO, errno, "resolving tablespace link %s", link);
	spec_add_tablespace(st, st->pgdata, oid, loc);

	char *member = xasprintf("/pg_tblspc/%s", oid);
	err_code rc = walk_dir(st, loc, member, false);
	free(member);
	free(loc);
	return rc;
}

/*
 * pg_wal on a disk of its own (initdb --waldir, a WAL volume): stored as the empty directory
 * WAL-G stores, with the mode of the directory it points to, so that a restore has one.
 */
static err_code wal_link(push_state *st, const char *path, const char *member)
{
	struct stat sb;
	if (stat(path, &sb) != 0)
		return err_errno(E_IO, errno, "following %s", path);
	if (!S_ISDIR(sb.st_mode))
		return err_set(E_IO, "%s links to something that is not a directory", path);
	return emit(st, path, member, &sb);
}

static err_code walk_child(push_state *st, const char *dir, const char *member, const char *name)
{
	char *path = xasprintf("%s/%s", dir, name);
	char *mem = xasprintf("%s/%s", strcmp(member, "/") == 0 ? "" : member, name);
	struct stat sb;
	err_code rc = E_OK;

	if (lstat(path, &sb) != 0) {
		if (errno == ENOENT)
			log_warn("%s vanished during the backup; skipped", path);
		else
			rc = err_errno(E_IO, errno, "stat of %s", path);
	} else if (S_ISDIR(sb.st_mode)) {
		rc = emit(st, path, mem, &sb);
		if (rc == E_OK && !in_list(excluded_dirs, name))
			rc = walk_dir(st, path, mem, false);
	} else if (S_ISREG(sb.st_mode)) {
		/* pg_control gets its own tar, written after the data. */
		bool control = strcmp(mem, "/global/pg_control") == 0;
		if (!control && !in_list(excluded_files, name) &&
			!(st->delta.catchup && in_list(catchup_files, name)))
			rc = emit(st, path, mem, &sb);
	} else if (S_ISLNK(sb.st_mode) && strcmp(member, "/pg_tblspc") == 0) {
		rc = add_tablespace(st, path, name);
	} else if (S_ISLNK(sb.st_mode) && strcmp(mem, "/pg_wal") == 0) {
		rc = wal_link(st, path, mem);
	} else if (S_ISLNK(sb.st_mode)) {
		log_warn("%s is a symbolic link: the backup holds neither it nor what it points to", path);
	} else {
		log_debug("skipping %s: not a regular file or directory", path);
	}
	free(mem);
	free(path);
	return rc;
}

static err_code walk_dir(push_state *st, const char *dir, const char *member, bool root)
{
	DIR *d = opendir(dir);
	if (d == NULL) {
		if (errno == ENOENT && !root) {
			log_warn("%s vanished during the backup; skipped", dir);
			return E_OK;
		}
		return err_errno(E_IO, errno, "listing %s", dir);
	}
	err_code rc = E_OK;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (de == NULL) {
			if (errno != 0)
				rc = err_errno(E_IO, errno, "listing %s", dir);
			break;
		}
		const char *name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (group_cancelled(st->g))
			rc = err_set(E_CANCELLED, "backup cancelled");
		else
			rc = walk_child(st, dir, member, name);
		if (rc != E_OK)
			break;
	}
	closedir(d);
	return rc;
}

err_code walk_pgdata(void *arg)
{
	push_state *st = arg;
	struct stat sb;
	err_code rc;
	if (stat(st->pgdata, &sb) != 0)
		rc = err_errno(E_IO, errno, "stat of %s", st->pgdata);
	else
		rc = emit(st, st->pgdata, "/", &sb);
	/* root=true only for PGDATA's own listing; tablespace trees are walked as non-root. */
	if (rc == E_OK)
		rc = walk_dir(st, st->pgdata, "/", true);
	chan_close(st->entries);
	return rc;
}
