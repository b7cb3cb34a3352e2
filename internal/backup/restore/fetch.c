/*
 * backup-fetch: resolve the chain (full, then each delta), work out which files each level
 * must supply, and extract level by level in parallel streams, pg_control last.
 */
#include "internal/backup/restore/fetch_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal/pipe/pipe.h"

#define CHAIN_MAX 1000
#define FETCH_MEMORY_BUDGET ((size_t)40 << 20)

void chain_free(chain *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->lv[i].name);
		catalog_sentinel_free(&c->lv[i].s);
		file_table_free(&c->lv[i].files);
		keytab_free(c->lv[i].need);
		free(c->lv[i].held.files);
		for (size_t k = 0; k < c->lv[i].nlisted; k++)
			free(c->lv[i].listed[k].part);
		free(c->lv[i].listed);
	}
	free(c->lv);
	memset(c, 0, sizeof(*c));
}

/* TarFileSets read with Files: each list's partition and number of members. */
static err_code list_part(void *arg, const char *part, const char *member)
{
	level *l = arg;
	if (l->nlisted == 0 || l->listed[l->nlisted - 1].part != NULL) { /* a new list */
		l->listed = xrealloc(l->listed, (l->nlisted + 1) * sizeof(*l->listed));
		l->listed[l->nlisted++] = (struct listed_part){ NULL, 0 };
	}
	struct listed_part *lp = &l->listed[l->nlisted - 1];
	if (member != NULL)
		lp->members++;
	else
		lp->part = xstrdup(part);
	return E_OK;
}

/* The table checks every entry's flags: a restore trusts them. */
static err_code load_files_meta(repo *r, level *l)
{
	if (l->s.files_metadata_disabled || l->s.version < 2)
		return E_OK;
	TRY(catalog_file_table_sets(r, l->name, true, &l->files, list_part, l));
	l->has_files = true;
	l->held.files = xcalloc(l->files.n + 1, 1);
	return E_OK;
}

err_code load_level(repo *r, level *l)
{
	TRY(catalog_sentinel_read(r, l->name, &l->s));
	return load_files_meta(r, l);
}

/* Newest first while walking DeltaFrom, then reversed so lv[0] is the full. */
err_code load_chain(repo *r, const char *name, chain *c)
{
	size_t cap = 4;
	char *cur = xstrdup(name);
	memset(c, 0, sizeof(*c));
	c->lv = xcalloc(cap, sizeof(level));
	for (;;) {
		if (c->n == CHAIN_MAX) {
			free(cur);
			return err_set(E_CORRUPT, "delta chain of %s is longer than %d backups", name,
						   CHAIN_MAX);
		}
		if (c->n == cap)
			c->lv = xrealloc(c->lv, (cap *= 2) * sizeof(level));
		level *l = &c->lv[c->n];
		memset(l, 0, sizeof(*l));
		l->name = cur;
		c->n++;
		TRY(load_level(r, l));
		if (!l->s.is_delta)
			break;
		cur = xstrdup(l->s.delta_from);
	}
	for (size_t i = 0; i < c->n / 2; i++) {
		level t = c->lv[i];
		c->lv[i] = c->lv[c->n - 1 - i];
		c->lv[c->n - 1 - i] = t;
	}
	return E_OK;
}

const file_table *files_of(const level *l)
{
	return l->has_files ? &l->files : NULL;
}

typedef struct need_arg {
	const level *up;
	keytab *need;
} need_arg;

static void add_need(void *arg, const uint64_t key[2], const file_rec *f)
{
	need_arg *a = arg;
	if ((f->flags & (FILE_SKIPPED | FILE_INCREMENTED)) &&
		(a->up->need == NULL || keytab_find(a->up->need, key, NULL, NULL)))
		keytab_add(a->need, key, NULL);
}

/*
 * Level i supplies the files that level i+1 needs and did not store whole: those marked
 * IsSkipped (take them as they are) or IsIncremented (take the base the pages apply to).
 */
static err_code compute_needs(chain *c)
{
	for (size_t i = c->n - 1; i-- > 0;) {
		const level *up = &c->lv[i + 1];
		if (!up->has_files)
			return err_set(E_CORRUPT, "delta backup %s has no Files in files_metadata.json",
						   up->name);
		need_arg a = { up, keytab_new(0) };
		file_table_each(&up->files, add_need, &a);
		keytab_finish(a.need);
		c->lv[i].need = a.need;
	}
	return E_OK;
}

/* The tar partitions of a level, read in parallel */

typedef struct job_queue {
	part_fn fn;
	void *arg;
	chan *keys;
} job_queue;

static err_code part_worker(void *arg)
{
	job_queue *q = arg;
	void *item;
	while (chan_recv(q->keys, &item)) {
		err_code rc = q->fn(q->arg, item);
		if (rc != E_OK)
			return rc;
	}
	return E_OK;
}

static void cancel_keys(void *arg)
{
	chan_cancel(arg);
}

err_code parts_run(const char *const *keys, size_t n, int concurrency, part_fn fn, void *arg)
{
	if (n == 0)
		return E_OK;
	/*
	 * Each stream holds its decoder's window or blocks (8 MiB for lz4): run only as many at
	 * once as fit a fixed memory budget, whatever WALG_DOWNLOAD_CONCURRENCY allows.
	 */
	size_t per = repo_decode_memory(keys[0]);
	int fit = (int)(FETCH_MEMORY_BUDGET / per);
	if (concurrency > fit)
		concurrency = fit > 0 ? fit : 1;
	chan *ch = chan_new(n + 1);
	for (size_t i = 0; i < n; i++)
		chan_send(ch, (void *)(uintptr_t)keys[i]);
	chan_close(ch);
	group *g = group_new();
	job_queue q = { fn, arg, ch };
	group_on_cancel(g, cancel_keys, ch);
	for (int i = 0; i < concurrency && (size_t)i < n; i++)
		if (group_go(g, part_worker, &q) != E_OK)
			break;
	err_code rc = group_wait(g);
	group_free(g);
	chan_free(ch);
	return rc;
}

static bool is_last_group(const char *base, const char *what)
{
	size_t n = strlen(what);
	return strncmp(base, what, n) == 0 && (base[n] == '\0' || base[n] == '.');
}

err_code level_parts_list(repo *r, const char *name, level_parts *out)
{
	memset(out, 0, sizeof(*out));
	char *prefix = xasprintf("%s%s/tar_partitions/", repo_backups(r), name);
	err_code rc = repo_list(r, prefix, false, &out->tars);
	free(prefix);
	TRY(rc);
	out->keys = xcalloc(out->tars.len + 1, sizeof(char *));
	for (size_t i = 0; i < out->tars.len; i++) {
		const char *key = out->tars.items[i].key, *base = strrchr(key, '/') + 1;
		if (is_last_group(base, "pg_control.tar"))
			out->control = key;
		else if (is_last_group(base, "backup_label.tar"))
			out->label = key;
		else
			out->keys[out->n++] = key;
	}
	return E_OK;
}

void level_parts_free(level_parts *p)
{
	repo_objs_free(&p->tars);
	free(p->keys);
	memset(p, 0, sizeof(*p));
}

/* A partition to extract: whole, skipped, or only the byte ranges holding what is needed. */
typedef struct part_read {
	const char *key;
	uint64_t size;
	bool skip;			/* TarFileSets lists nothing in it that is needed */
	byte_range *ranges; /* NULL: whole */
	size_t n;
} part_read;

typedef struct level_reads {
	const extract_level *ex;
	held *held; /* what the level's partitions held */
	const level_parts *lp;
	part_read *parts;
	size_t n;
	/* while TarFileSets is read: inside a list, and its partition if it is one of ours */
	bool in_list;
	part_read *cur;
	bool missing;  /* the list's partition is not stored at all */
	size_t wanted; /* members of the list the restore takes */
	part_frames pf;
} level_reads;

static err_code extract_whole(const extract_level *ex, held *h, const char *key)
{
	log_debug("extracting %s", key);
	return repo_get_counted(ex->r, key, ex->prog, extract_sink_new(ex, h));
}

static err_code extract_one(void *arg, const char *key)
{
	const level_reads *lr = arg;
	const part_read *p = NULL;
	for (size_t i = 0; i < lr->n && p == NULL; i++)
		if (lr->parts[i].key == key)
			p = &lr->parts[i];
	if (p == NULL || p->ranges == NULL)
		return extract_whole(lr->ex, lr->held, key);
	for (size_t i = 0; i < p->n; i++) {
		const byte_range *b = &p->ranges[i];
		log_debug("extracting %s bytes %llu to %llu", key, (unsigned long long)b->off,
				  (unsigned long long)(b->off + b->len));
		size_t seen = 0;
		TRY(repo_get_range_counted(lr->ex->r, key, b->off, b->len, lr->ex->prog,
								   extract_run_sink_new(lr->ex, lr->held, &seen)));
		/* a frame offset that lies would otherwise leave a needed file unrestored, silently */
		if (seen != b->members)
			return err_set(E_CORRUPT,
						   "%s: bytes %llu to %llu hold %zu of the %zu needed files its "
						   "FrameOffset entries place there",
						   key, (unsigned long long)b->off, (unsigned long long)(b->off + b->len),
						   seen, b->members);
	}
	return E_OK;
}

/*
 * Whether a partition may be read in pieces: the storage reads ranges, the codec has frames,
 * and no --mask narrows what is taken below the need set (those parts are read whole).
 */
static bool rangeable(const extract_level *ex, const char *key)
{
	return ex->mask == NULL && repo_has_range(ex->r, key);
}

static bool is_stored(const level_parts *lp, const char *part)
{
	for (size_t i = 0; i < lp->tars.len; i++)
		if (strcmp(strrchr(lp->tars.items[i].key, '/') + 1, part) == 0)
			return true;
	return false;
}

/* A partition TarFileSets lists, with n files the restore takes, that storage lacks. */
static err_code missing_part(const extract_level *ex, const char *part, size_t n)
{
	return err_set(E_CORRUPT,
				   "tar partition %s%s/tar_partitions/%s is missing from %s "
				   "(files_metadata.json lists it, with %zu files the restore needs)",
				   repo_backups(ex->r), ex->backup, part, repo_describe(ex->r), n);
}

/*
 * One name of a TarFileSets list (NULL: the list ended). A partition is skipped only when its
 * list is known and holds nothing needed; with no list it is read whole. A partition listed
 * twice takes its last list, as a JSON reader would. A listed partition that is not stored
 * fails the restore when it lists anything the restore takes.
 */
static err_code plan_member(void *arg, const char *part, const char *member)
{
	level_reads *lr = arg;
	if (!lr->in_list) {
		lr->in_list = true;
		lr->cur = NULL;
		for (size_t i = 0; i < lr->n && lr->cur == NULL; i++)
			if (strcmp(strrchr(lr->parts[i].key, '/') + 1, part) == 0)
				lr->cur = &lr->parts[i];
		lr->missing = lr->cur == NULL && !is_stored(lr->lp, part);
		lr->wanted = 0;
		if (lr->cur != NULL)
			part_frames_start(&lr->pf, lr->cur->size);
	}
	part_read *p = lr->cur;
	if (member != NULL) {
		uint64_t key[2];
		pg_name_key(member, key);
		bool want = extract_wanted(lr->ex, member, key);
		lr->wanted += want;
		if (p != NULL) {
			file_rec f;
			bool listed = file_table_find_key(lr->ex->files, key, &f);
			part_frames_add(&lr->pf, listed ? &f : NULL, want);
		}
		return E_OK;
	}
	lr->in_list = false;
	if (lr->missing && lr->wanted > 0)
		return missing_part(lr->ex, part, lr->wanted);
	if (p == NULL)
		return E_OK;
	free(p->ranges);
	p->ranges = NULL;
	p->n = 0;
	p->skip = lr->pf.needed == 0;
	if (!p->skip && rangeable(lr->ex, p->key))
		part_ranges(&lr->pf, &p->ranges, &p->n);
	return E_OK;
}

/*
 * Plans every partition's read: when the restore takes only some files of the level (a need
 * set, --mask), from its TarFileSets, read again as a stream; the partitions to read move to
 * the front of lp->keys (lp->n of them). When it takes all, every listed partition must be
 * stored (TarFileSets as load_chain read it).
 */
static err_code plan_reads(level *l, level_parts *lp, level_reads *lr, size_t *skipped,
						   uint64_t *read, uint64_t *stored)
{
	lr->parts = xcalloc(lp->n + 1, sizeof(*lr->parts));
	lr->n = lp->n;
	lr->lp = lp;
	*read = *stored = 0;
	*skipped = 0;
	for (size_t i = 0; i < lp->tars.len; i++)
		*stored += lp->tars.items[i].size;
	for (size_t i = 0; i < lp->n; i++) {
		lr->parts[i].key = lp->keys[i];
		for (size_t j = 0; j < lp->tars.len; j++)
			if (lp->tars.items[j].key == lp->keys[i])
				lr->parts[i].size = lp->tars.items[j].size;
	}
	err_code rc = E_OK;
	if (l->has_files && (l->need != NULL || l->ex.mask != NULL))
		rc = catalog_files_each(l->ex.r, l->name, NULL, plan_member, lr);
	else
		for (size_t i = 0; i < l->nlisted && rc == E_OK; i++)
			if (l->listed[i].members > 0 && !is_stored(lp, l->listed[i].part))
				rc = missing_part(&l->ex, l->listed[i].part, l->listed[i].members);
	part_frames_free(&lr->pf);
	TRY(rc);
	size_t n = 0;
	for (size_t i = 0; i < lr->n; i++) {
		const part_read *p = &lr->parts[i];
		if (p->skip) {
			(*skipped)++;
			continue;
		}
		lp->keys[n++] = p->key;
		if (p->ranges == NULL)
			*read += p->size;
		for (size_t k = 0; k < p->n; k++)
			*read += p->ranges[k].len;
	}
	lp->n = n;
	return E_OK;
}

/* What a level's Files entries say it stored, and no partition read held (see check_held). */
typedef struct unheld {
	const level *l;
	uint64_t root[2]; /* the key of "/": the data directory itself, never extracted */
	size_t n;
	char *first;
} unheld;

/* Stored by this level (not IsSkipped), taken by the restore (need set), and not met. */
static bool is_unheld(const level *l, const uint64_t key[2], const file_rec *f)
{
	return !(f->flags & FILE_SKIPPED) && !l->held.files[f->idx] &&
		(l->need == NULL || keytab_find(l->need, key, NULL, NULL));
}

static void count_unheld(void *arg, const uint64_t key[2], const file_rec *f)
{
	unheld *u = arg;
	if (is_unheld(u->l, key, f) && (key[0] != u->root[0] || key[1] != u->root[1]))
		u->n++;
}

static err_code name_unheld(void *arg, const char *name, const json_t *rec)
{
	unheld *u = arg;
	uint64_t key[2];
	file_rec f;
	(void)rec;
	pg_name_key(name, key);
	if (strcmp(name, "/") != 0 && file_table_find_key(&u->l->files, key, &f) &&
		is_unheld(u->l, key, &f) && extract_wanted(&u->l->ex, name, key) && u->n++ == 0)
		u->first = xstrdup(name);
	return E_OK;
}

/*
 * Every file the level's Files says it stored, and the restore takes, was met in a partition
 * read: one that TarFileSets places wrongly, or a member missing from its partition, would
 * otherwise be left out of the restore without a word. Ranged reads are covered too: they
 * meet every needed member of their frames.
 */
static err_code check_held(const level *l)
{
	if (!l->has_files)
		return E_OK;
	unheld u = { l, { 0, 0 }, 0, NULL };
	pg_name_key("/", u.root);
	file_table_each(&l->files, count_unheld, &u);
	if (u.n == 0)
		return E_OK;
	/* The table keeps no names: Files read again for them (and for --mask, which needs them). */
	u.n = 0;
	err_code rc = catalog_files_each(l->ex.r, l->name, name_unheld, NULL, &u);
	if (rc == E_OK && u.n > 0)
		rc = err_set(E_CORRUPT,
					 "backup %s: files_metadata.json lists %s as stored in this backup, but no "
					 "tar partition held it (%zu such file%s)",
					 l->name, u.first, u.n, u.n > 1 ? "s" : "");
	free(u.first);
	return rc;
}

err_code fetch_level(repo *r, level *l, int concurrency, bool top)
{
	level_parts lp;
	TRY(level_parts_list(r, l->name, &lp));
	l->ex.r = r;
	level_reads lr = { &l->ex, &l->held, NULL, NULL, 0, false, NULL, false, 0, { 0 } };
	uint64_t read, stored;
	size_t skipped;
	err_code rc = plan_reads(l, &lp, &lr, &skipped, &read, &stored);
	char *what = xasprintf("backup-fetch %s", l->name);
	progress_start(&l->prog, what, read);
	l->ex.prog = &l->prog;
	if (rc == E_OK) {
		log_info("restoring %s: %zu tar partitions%s%s; reading %.1f of %.1f MiB stored",
				 l->name, lp.tars.len - skipped,
				 top ? "" : " (files the newer backups did not store)",
				 skipped ? ", the others hold nothing needed" : "", (double)read / 1048576.0,
				 (double)stored / 1048576.0);
		rc = parts_run(lp.keys, lp.n, concurrency, extract_one, &lr);
		progress_log(&l->prog);
	}

	/* Our backup_label overrides any stale one; pg_control last makes the directory usable. */
	if (rc == E_OK && top && lp.label != NULL)
		rc = extract_whole(&l->ex, &l->held, lp.label);
	/* Everything checked before pg_control: a restore that failed never looks complete. */
	if (rc == E_OK)
		rc = check_held(l);
	if (rc == E_OK && top && l->ex.mask == NULL && !l->held.label)
		rc = err_set(E_CORRUPT,
					 "backup %s has no backup_label in any tar partition: PostgreSQL would not "
					 "know where recovery must start",
					 l->name);
	if (rc == E_OK && top) {
		if (lp.control == NULL)
			rc = err_set(E_CORRUPT, "backup %s has no pg_control.tar in %s", l->name,
						 repo_describe(r));
		else
			rc = extract_whole(&l->ex, &l->held, lp.control);
	}
	l->ex.prog = NULL;
	free(what);
	for (size_t i = 0; i < lr.n; i++)
		free(lr.parts[i].ranges);
	free(lr.parts);
	level_parts_free(&lp);
	return rc;
}

void fetch_remove(const char *path, size_t *removed)
{
	if (unlink(path) == 0)
		(*removed)++;
	else
		log_warn("removing %s: %s", path, strerror(errno));
}

err_code fetch_sync_tree(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return err_errno(E_IO, errno, "opening %s", path);
	/* One syncfs instead of an fsync per file: the same durability, far fewer stalls. */
	err_code rc = syncfs(fd) == 0 ? E_OK : err_errno(E_IO, errno, "syncing %s", path);
	close(fd);
	return rc;
}

static err_code fetch_chain(repo *r, const fetch_options *opt, const placement *p, chain *c)
{
	err_code rc = placement_prepare(p, c);
	if (rc == E_OK && p->delta)
		rc = delta_restore_prepare(r, p, c);
	if (rc == E_OK)
		rc = placement_wal_dir(p);

	char *mask = opt->mask != NULL ? xasprintf("/%s", opt->mask) : NULL;
	for (size_t i = 0; rc == E_OK && i < c->n; i++) {
		level *l = &c->lv[i];
		/*
		 * tablespace_map never: PostgreSQL would replace the tablespaces placed here with
		 * links to the locations it records, the source cluster's.
		 */
		l->ex = (extract_level){ .r = r,
								 .dest = p->dest,
								 .need = l->need,
								 .files = files_of(l),
								 .skip_tablespace_map = true,
								 .backup = l->name,
								 .mask = mask,
								 .flush = opt->fsync };
		rc = fetch_level(r, l, opt->concurrency, i == c->n - 1);
	}
	free(mask);
	if (rc == E_OK)
		rc = placement_finish(p);
	if (rc == E_OK && opt->fsync) {
		rc = fetch_sync_tree(p->dest);
		for (size_t i = 0; rc == E_OK && i < p->n; i++)
			if (!p->ts[i].in_place)
				rc = fetch_sync_tree(p->ts[i].loc);
		if (rc == E_OK && p->waldir != NULL)
			rc = fetch_sync_tree(p->waldir);
	}
	return rc;
}

/*
 * Before the destination is made: a backup of no objects at all (a sentinel and metadata
 * only, as StackGres writes for a volume snapshot) is refused, and in an encrypted repository
 * the newest backup's pg_control object (a few KiB) is decoded, so that a wrong key or
 * passphrase fails here.
 */
err_code fetch_check_control(repo *r, const char *name)
{
	char *base = xasprintf("%s%s/tar_partitions/pg_control.tar", repo_backups(r), name);
	char *key = NULL;
	err_code rc = repo_find(r, base, &key);
	free(base);
	if (rc == E_NOTFOUND) {
		err_clear(); /* a missing pg_control alone is reported by the extraction */
		level_parts lp;
		TRY(level_parts_list(r, name, &lp));
		bool empty = lp.tars.len == 0;
		level_parts_free(&lp);
		return empty ? err_set(E_NOTFOUND, "backup %s holds no objects, only its sentinel and "
										   "metadata (as a volume snapshot's): backup-fetch "
										   "cannot restore it",
							   name)
					 : E_OK;
	}
	if (rc == E_OK && repo_encrypted(r))
		rc = repo_get(r, key, null_sink_new());
	free(key);
	return rc;
}

err_code backup_fetch(repo *r, const fetch_options *opt)
{
	char *name = NULL;
	chain c = { 0 };
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* The backup first: a wrong name or a broken chain must not leave a new empty directory. */
	target_reach reach;
	err_code rc = opt->target != NULL ? backup_pick_for_target(r, opt->cfg, opt->target, &name,
															   &reach)
		: opt->name != NULL
		? catalog_resolve(r, opt->name, &name)
		: catalog_find_by_user_data(r, opt->user_data, "backup-fetch --target-user-data", &name);
	if (rc == E_OK)
		rc = load_chain(r, name, &c);
	if (rc == E_OK && opt->restore_only != NULL)
		rc = backup_restore_only(r, name, opt->restore_only, &c.lv[c.n - 1].need);
	if (rc == E_OK)
		rc = compute_needs(&c);
	if (rc == E_OK)
		rc = fetch_check_control(r, name);
	placement p = { 0 };
	if (rc == E_OK)
		rc = placement_plan(opt, &c, &p);
	if (rc == E_OK) {
		if (c.n > 1)
			log_info("%s is a delta: applying %zu backups from %s forward", name, c.n,
					 c.lv[0].name);
		rc = fetch_chain(r, opt, &p, &c);
	}
	if (rc == E_OK && opt->target != NULL)
		rc = backup_write_recovery(p.dest, opt->target, opt->restore_command,
								   opt->target_action, opt->keep_archiving);
	else if (rc == E_OK)
		backup_note_archiving(p.dest);
	if (rc == E_OK) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		log_info("backup %s restored into %s in %.1f s", name, p.dest,
				 (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	}
	placement_free(&p);
	chain_free(&c);
	free(name);
	return rc;
}
