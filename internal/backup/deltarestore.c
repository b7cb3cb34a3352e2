/*
 * Delta restore: bring an existing (stopped) data directory back to a backup by rewriting only
 * the files whose content differs. Each whole file a walc backup stores carries its XXH3-128
 * checksum in files_metadata.json; a local file with the same size and checksum is kept, one
 * that differs (changed, corrupted, missing) is restored, and anything the backup does not
 * have is removed. Parts whose files are all intact are never downloaded.
 */
#include "internal/backup/fetch_impl.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/pipe/pipe.h"

#define HASH_WORKERS 2

/* Members restored from their own tars regardless (never listed in Files). */
static const char *const always[] = { "/global/pg_control", "backup_label", "tablespace_map",
									  NULL };

static err_code check_stopped_and_ours(const char *dest, const chain *c, bool force)
{
	char *pid = xasprintf("%s/postmaster.pid", dest);
	bool running = access(pid, F_OK) == 0;
	free(pid);
	if (running)
		return err_set(E_CONFIG, "backup-fetch --delta: %s has a postmaster.pid: stop the "
								 "cluster first",
					   dest);
	const backup_sentinel *top = &c->lv[c->n - 1].s;
	char *ctl = xasprintf("%s/global/pg_control", dest);
	int fd = open(ctl, O_RDONLY | O_CLOEXEC);
	free(ctl);
	if (fd < 0)
		return E_OK; /* nothing recognisable here: every file will be restored */
	uint64_t sysid = 0;
	ssize_t n = read(fd, &sysid, sizeof(sysid));
	close(fd);
	if (n == sizeof(sysid) && top->have_system_id && le64toh(sysid) != top->system_id && !force)
		return err_set(E_CONFIG,
					   "backup-fetch --delta: %s belongs to another cluster (system identifier "
					   "%llu, the backup's is %llu); use --force to overwrite it",
					   dest, (unsigned long long)le64toh(sysid),
					   (unsigned long long)top->system_id);
	return E_OK;
}

/* The checksum the restore result would have: follow IsSkipped down the chain. */
static const char *expected_sum(const chain *c, const char *member, uint64_t *size)
{
	for (size_t i = c->n; i-- > 0;) {
		const json_t *rec = json_object_get(files_of(&c->lv[i]), member);
		if (rec == NULL || json_is_true(catalog_json_get(rec, "IsIncremented")))
			return NULL; /* pages applied on a base: no whole-file sum to compare */
		if (json_is_true(catalog_json_get(rec, "IsSkipped")))
			continue;
		const char *sum = json_string_value(json_object_get(rec, "Checksum"));
		json_t *sz = json_object_get(rec, "Size");
		if (sum == NULL || !json_is_integer(sz))
			return NULL;
		*size = (uint64_t)json_integer_value(sz);
		return sum;
	}
	return NULL;
}

typedef struct probe {
	const char *member;
	const char *sum;
	uint64_t size;
	bool intact;
} probe;

typedef struct hash_job {
	const char *dest;
	probe *p;
	size_t n;
	size_t next; /* atomic */
} hash_job;

static err_code hash_worker(void *arg)
{
	hash_job *j = arg;
	for (;;) {
		size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (i >= j->n)
			return E_OK;
		probe *p = &j->p[i];
		char *path = xasprintf("%s%s", j->dest, p->member);
		char sum[HASH_TEXT_LEN + 1];
		uint64_t size;
		struct stat sb;
		/* Size first: a different size needs no hashing. */
		p->intact = lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
			(uint64_t)sb.st_size == p->size && hash_file(path, sum, &size) == E_OK &&
			size == p->size && strcmp(sum, p->sum) == 0;
		err_clear();
		free(path);
	}
}

static bool keep_name(const json_t *files, const char *member)
{
	if (json_object_get(files, member) != NULL)
		return true;
	for (size_t i = 0; always[i] != NULL; i++)
		if (strcmp(member, always[i]) == 0 ||
			(member[0] == '/' && strcmp(member + 1, always[i]) == 0))
			return true;
	return false;
}

/* Removes what the backup does not have; tablespace links of the spec are followed. */
static void prune(const char *dir, const char *member, const json_t *files,
				  const json_t *spec, size_t *removed)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char *path = xasprintf("%s/%s", dir, de->d_name);
		char *mem = xasprintf("%s/%s", strcmp(member, "/") == 0 ? "" : member, de->d_name);
		struct stat sb;
		if (lstat(path, &sb) != 0) {
			free(path);
			free(mem);
			continue;
		}
		bool tblspc_link = S_ISLNK(sb.st_mode) && strcmp(member, "/pg_tblspc") == 0 &&
			catalog_json_get(spec, de->d_name) != NULL;
		if (tblspc_link) {
			prune(path, mem, files, spec, removed);
		} else if (S_ISDIR(sb.st_mode)) {
			prune(path, mem, files, spec, removed);
			if (!keep_name(files, mem) && rmdir(path) == 0)
				(*removed)++;
		} else if (!keep_name(files, mem)) {
			if (unlink(path) == 0)
				(*removed)++;
			else
				log_warn("removing %s: %s", path, strerror(errno));
		}
		free(path);
		free(mem);
	}
	closedir(d);
}

err_code delta_restore_prepare(const fetch_options *opt, const char *dest, chain *c,
							   const json_t *spec)
{
	TRY(check_stopped_and_ours(dest, c, opt->force));
	level *top = &c->lv[c->n - 1];
	const json_t *files = files_of(top);
	if (!json_is_object(files))
		return err_set(E_CORRUPT, "backup %s has no files metadata: delta restore needs it",
					   top->name);

	/* Hash the local copies of every file whose backed-up checksum is known. */
	size_t n = 0, cap = json_object_size(files);
	probe *p = xcalloc(cap ? cap : 1, sizeof(*p));
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)(uintptr_t)files, k, v)
	{
		uint64_t size = 0;
		const char *sum = expected_sum(c, k, &size);
		if (sum != NULL)
			p[n++] = (probe){ k, sum, size, false };
	}
	hash_job job = { dest, p, n, 0 };
	group *g = group_new();
	for (int i = 0; i < HASH_WORKERS; i++)
		group_go(g, hash_worker, &job);
	err_code rc = group_wait(g);
	group_free(g);
	if (rc != E_OK) {
		free(p);
		return rc;
	}

	/* Every level now supplies only what is not intact; the top one, explicitly. */
	size_t intact = 0;
	json_t *top_need = json_object();
	json_object_foreach((json_t *)(uintptr_t)files, k, v)
		json_object_set_new(top_need, k, json_true());
	for (size_t i = 0; always[i] != NULL; i++)
		json_object_set_new(top_need, always[i], json_true());
	for (size_t i = 0; i < n; i++) {
		if (!p[i].intact)
			continue;
		intact++;
		json_object_del(top_need, p[i].member);
		for (size_t l = 0; l + 1 < c->n; l++)
			if (c->lv[l].need != NULL)
				json_object_del(c->lv[l].need, p[i].member);
	}
	json_decref(top->need);
	top->need = top_need;

	size_t removed = 0;
	prune(dest, "/", files, spec, &removed);
	log_info("delta restore: %zu of %zu files intact, %zu to restore, %zu local entries "
			 "removed",
			 intact, json_object_size(files), json_object_size(top_need), removed);
	free(p);
	return E_OK;
}
