/*
 * Delta restore: bring an existing (stopped) data directory back to a backup by rewriting only
 * the files whose content differs. Each whole file a walc backup stores carries its XXH3-128
 * checksum in files_metadata.json; a local file with the same size and checksum is kept, one
 * that differs (changed, corrupted, missing) is restored, and anything the backup does not
 * have is removed. Parts whose files are all intact are never downloaded.
 */
#include "internal/backup/restore/fetch_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/pipe/pipe.h"

#define HASH_WORKERS 2
#define PROBE_BATCH 4096 /* local files compared at once */

/*
 * Members restored from their own tars regardless (never listed in Files). tablespace_map is
 * not among them: a restore never writes it, so a stale one is removed.
 */
static const char *const always[] = { "/global/pg_control", "backup_label", NULL };

/* The size and checksum the restore result would have: follow IsSkipped down the chain. */
static const file_sum *expected_sum(const chain *c, const uint64_t key[2])
{
	for (size_t i = c->n; i-- > 0;) {
		const file_table *t = files_of(&c->lv[i]);
		file_rec f;
		if (!file_table_find_key(t, key, &f) || (f.flags & FILE_INCREMENTED))
			return NULL; /* pages applied on a base: no whole-file sum to compare */
		if (f.flags & FILE_SKIPPED)
			continue;
		return (f.flags & FILE_SUM) && (f.flags & FILE_SIZE) ? file_table_sum(t, &f) : NULL;
	}
	return NULL;
}

typedef struct probe {
	char *member;
	uint64_t key[2]; /* its pg_name_key */
	const file_sum *want;
	bool intact;
} probe;

/*
 * The local files to compare, taken in batches as the top backup's Files is read again (the
 * table keeps no names): memory is one batch, whatever the number of files.
 */
typedef struct probes {
	const char *dest;
	const chain *c;
	probe p[PROBE_BATCH];
	size_t n;
	size_t next; /* atomic: the next probe a worker takes */
	keytab *intact; /* keys of the files found intact */
} probes;

static err_code hash_worker(void *arg)
{
	probes *j = arg;
	for (;;) {
		size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (i >= j->n)
			return E_OK;
		probe *p = &j->p[i];
		char *path = xasprintf("%s%s", j->dest, p->member);
		char text[HASH_TEXT_LEN + 1];
		uint64_t size, sum[2];
		struct stat sb;
		/* Size first: a different size needs no hashing. */
		p->intact = lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
			(uint64_t)sb.st_size == p->want->size && hash_file(path, text, &size) == E_OK &&
			size == p->want->size && hash_text_parse(text, sum) && sum[0] == p->want->sum[0] &&
			sum[1] == p->want->sum[1];
		err_clear();
		free(path);
	}
}

static void probe_batch(probes *j)
{
	j->next = 0;
	group *g = group_new();
	for (int i = 0; i < HASH_WORKERS; i++)
		group_go(g, hash_worker, j);
	group_wait(g);
	group_free(g);
	for (size_t i = 0; i < j->n; i++) {
		if (j->p[i].intact)
			keytab_add(j->intact, j->p[i].key, NULL);
		free(j->p[i].member);
	}
	j->n = 0;
}

static err_code probe_file(void *arg, const char *name, const json_t *rec)
{
	probes *j = arg;
	(void)rec;
	uint64_t key[2];
	pg_name_key(name, key);
	const file_sum *want = expected_sum(j->c, key);
	if (want == NULL)
		return E_OK;
	j->p[j->n++] = (probe){ xstrdup(name), { key[0], key[1] }, want, false };
	if (j->n == PROBE_BATCH)
		probe_batch(j);
	return E_OK;
}

static bool keep_name(const file_table *files, const char *member)
{
	if (file_table_find(files, member, NULL))
		return true;
	for (size_t i = 0; always[i] != NULL; i++)
		if (strcmp(member, always[i]) == 0 ||
			(member[0] == '/' && strcmp(member + 1, always[i]) == 0))
			return true;
	return false;
}

/*
 * Removes what the backup does not have. Links are never followed (a link is removed: the
 * backup holds none), but for those the placement made or checked: tablespace locations
 * and the WAL directory, each checked to hold only what that tablespace or WAL holds.
 */
static void prune(const char *dir, const char *member, const file_table *files,
				  const placement *pl, size_t *removed)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		bool root = strcmp(member, "/") == 0;
		if (root && strcmp(de->d_name, RESTORE_MARKER) == 0)
			continue;
		char *path = xasprintf("%s/%s", dir, de->d_name);
		char *mem = xasprintf("%s/%s", root ? "" : member, de->d_name);
		struct stat sb;
		if (lstat(path, &sb) != 0) {
			free(path);
			free(mem);
			continue;
		}
		if (S_ISLNK(sb.st_mode) && placement_follows(pl, member, de->d_name)) {
			prune(path, mem, files, pl, removed);
		} else if (S_ISDIR(sb.st_mode)) {
			prune(path, mem, files, pl, removed);
			if (!keep_name(files, mem) && rmdir(path) == 0)
				(*removed)++;
		} else if (S_ISLNK(sb.st_mode) || !keep_name(files, mem)) {
			fetch_remove(path, removed);
		}
		free(path);
		free(mem);
	}
	closedir(d);
}

typedef struct drop_arg {
	const keytab *drop;
	keytab *kept;
} drop_arg;

static void keep_unless_dropped(drop_arg *a, const uint64_t key[2])
{
	if (!keytab_find(a->drop, key, NULL, NULL))
		keytab_add(a->kept, key, NULL);
}

static void keep_key(void *arg, const uint64_t key[2], const uint64_t *fields, size_t at)
{
	(void)fields;
	(void)at;
	keep_unless_dropped(arg, key);
}

/* s without what drop holds. */
static keytab *keys_without(keytab *s, const keytab *drop)
{
	drop_arg a = { drop, keytab_new(0) };
	keytab_each(s, keep_key, &a);
	keytab_finish(a.kept);
	keytab_free(s);
	return a.kept;
}

static void need_key(void *arg, const uint64_t key[2], const file_rec *f)
{
	(void)f;
	keep_unless_dropped(arg, key);
}

err_code delta_restore_prepare(repo *r, const placement *pl, chain *c)
{
	level *top = &c->lv[c->n - 1];
	const file_table *files = files_of(top);
	if (files == NULL)
		return err_set(E_CORRUPT, "backup %s has no files metadata: delta restore needs it",
					   top->name);

	/* Pruning first: a link it removes must not lead the hashing to files elsewhere. */
	size_t removed = 0;
	prune(pl->dest, "/", files, pl, &removed);

	/* Hash the local copies of every file whose backed-up checksum is known. */
	probes *j = xcalloc(1, sizeof(*j));
	j->dest = pl->dest;
	j->c = c;
	j->intact = keytab_new(0);
	err_code rc = catalog_files_each(r, top->name, probe_file, NULL, j);
	if (rc == E_OK)
		probe_batch(j);
	for (size_t i = 0; i < j->n; i++)
		free(j->p[i].member);
	keytab *intact = j->intact;
	free(j);
	if (rc != E_OK) {
		keytab_free(intact);
		return rc;
	}
	keytab_finish(intact);

	/* Every level now supplies only what is not intact; the top one, explicitly. */
	drop_arg top_need = { intact, keytab_new(0) };
	file_table_each(files, need_key, &top_need);
	for (size_t i = 0; always[i] != NULL; i++) {
		uint64_t key[2];
		pg_name_key(always[i], key);
		keytab_add(top_need.kept, key, NULL);
	}
	keytab_finish(top_need.kept);
	for (size_t l = 0; l + 1 < c->n; l++)
		if (c->lv[l].need != NULL)
			c->lv[l].need = keys_without(c->lv[l].need, intact);
	keytab_free(top->need);
	top->need = top_need.kept;

	log_info("delta restore: %zu of %zu files intact, %zu to restore, %zu local entries "
			 "removed",
			 keytab_count(intact), files->n, files->n - keytab_count(intact), removed);
	keytab_free(intact);
	return E_OK;
}
