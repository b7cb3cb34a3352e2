/*
 * backup-verify: backup-fetch's reading pipeline (parts_run, the member reader) with a
 * checker in place of the file writer. Every object of the chain is read and decoded, every
 * file's size and checksum compared with files_metadata.json, every page of a relation file
 * held to pg's page rule, and the WAL from the backup's start to its stop read the same way.
 */
#include "internal/backup/restore/fetch_impl.h"
#include "internal/backup/push/push_impl.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/pg/pg.h"
#include "internal/wal/wal.h"

#define CONTROL_READ 8192
#define PROBLEMS_PER_FILE 100 /* lines for one file's pages; the rest are counted */

/* One verify run: counters, problems, progress. */
typedef struct vrun {
	pthread_mutex_t lock;
	FILE *out;
	bool json;
	json_t *problems; /* with json */
	uint64_t nproblems;
	/* the backup being verified */
	const char *backup;
	uint64_t objects, files, pages, wal_segments; /* atomic */
	progress prog; /* bytes of the files read, of the backups' sizes */
	char *what;	   /* the progress line's name */
	char *first;   /* the backup's first problem, for its record */
} vrun;

static void problem(vrun *v, const char *object, const char *file, int64_t block,
					const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void problem(vrun *v, const char *object, const char *file, int64_t block,
					const char *fmt, ...)
{
	char what[ERR_MSG_MAX + 64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&v->lock);
	v->nproblems++;
	if (v->first == NULL)
		v->first = file != NULL ? xasprintf("%s: %s: %s", object, file, what)
								: xasprintf("%s: %s", object, what);
	if (v->json) {
		json_t *p = json_object();
		json_object_set_new(p, "backup", json_string(v->backup));
		json_object_set_new(p, "object", json_string(object));
		if (file != NULL)
			json_object_set_new(p, "file", json_string(file));
		if (block >= 0)
			json_object_set_new(p, "block", json_integer(block));
		json_object_set_new(p, "problem", json_string(what));
		json_array_append_new(v->problems, p);
	} else {
		fprintf(v->out, "PROBLEM %s", object);
		if (file != NULL)
			fprintf(v->out, ": %s", file);
		if (block >= 0)
			fprintf(v->out, " block %lld", (long long)block);
		fprintf(v->out, ": %s\n", what);
		fflush(v->out);
	}
	pthread_mutex_unlock(&v->lock);
}

/* What one level of the chain checks against, shared by its workers. */
typedef struct vlevel {
	vrun *v;
	repo *r;
	const level *l;
	const level *base; /* the level l is a delta of; NULL for a full */
	const file_table *files;
	held held; /* what the partitions read held */
	bool checksums;
	unsigned char control[CONTROL_READ];
	size_t control_len;
} vlevel;

/* One object's checker: the member reader's consumer. */
typedef struct checker {
	vlevel *vl;
	const char *key;
	char *name;
	member_kind kind;
	bool paged;
	bool control; /* global/pg_control: keep its first bytes */
	uint32_t first_block;
	uint32_t bad_pages;
	unsigned char page[PG_PAGE_SIZE];
	size_t page_len;
	uint64_t page_at;
} checker;

static err_code ck_begin(void *ctx, const tar_entry *e, const char *rel, member_kind kind,
						 bool *take)
{
	checker *c = ctx;
	vrun *v = c->vl->v;
	free(c->name);
	c->name = xstrdup(e->name);
	*take = kind != MEMBER_DIR;
	if (!*take)
		return E_OK;
	__atomic_add_fetch(&v->files, 1, __ATOMIC_RELAXED);
	progress_add(&v->prog, 0, 1);
	c->kind = kind;
	c->page_len = 0;
	c->bad_pages = 0;
	c->control = strcmp(rel, "global/pg_control") == 0;
	c->first_block = pg_relation_first_block(e->name);
	c->paged = kind == MEMBER_INCREMENT ||
		(delta_is_paged(e->name, e->size) && !str_has_suffix(e->name, "pg_internal.init"));
	return E_OK;
}

/* The member reader holds each file to its size and checksum; a difference is a problem. */
static err_code ck_mismatch(void *ctx, const char *member, const char *what)
{
	checker *c = ctx;
	problem(c->vl->v, c->key, member, -1, "%s", what);
	return E_OK;
}

static err_code ck_increment(void *ctx, uint64_t file_size, uint32_t npages,
							 const uint32_t *blocks)
{
	(void)ctx;
	(void)file_size;
	(void)npages;
	(void)blocks;
	return E_OK;
}

static void check_page(checker *c, const unsigned char *page, uint64_t at)
{
	vlevel *vl = c->vl;
	uint32_t blk = (uint32_t)(at / PG_PAGE_SIZE);
	pg_page_verdict verdict =
		pg_page_verify(page, c->first_block + blk, vl->checksums, vl->l->s.lsn);
	__atomic_add_fetch(&vl->v->pages, 1, __ATOMIC_RELAXED);
	if (verdict < PG_PAGE_BAD_HEADER)
		return;
	if (c->bad_pages++ < PROBLEMS_PER_FILE)
		problem(vl->v, c->key, c->name, blk, "%s", pg_page_verdict_text(verdict));
}

static err_code ck_data(void *ctx, uint64_t offset, const void *buf, size_t len)
{
	checker *c = ctx;
	const unsigned char *p = buf;
	progress_add(&c->vl->v->prog, len, 0);
	if (c->control && offset < CONTROL_READ) {
		size_t n = CONTROL_READ - offset < len ? (size_t)(CONTROL_READ - offset) : len;
		memcpy(c->vl->control + offset, p, n);
		if (offset + n > c->vl->control_len)
			c->vl->control_len = (size_t)(offset + n);
	}
	if (!c->paged)
		return E_OK;
	while (len > 0) {
		if (c->page_len == 0 && len >= PG_PAGE_SIZE && offset % PG_PAGE_SIZE == 0) {
			check_page(c, p, offset);
			p += PG_PAGE_SIZE;
			len -= PG_PAGE_SIZE;
			offset += PG_PAGE_SIZE;
			continue;
		}
		if (c->page_len == 0)
			c->page_at = offset;
		size_t n = PG_PAGE_SIZE - c->page_len < len ? PG_PAGE_SIZE - c->page_len : len;
		memcpy(c->page + c->page_len, p, n);
		c->page_len += n;
		p += n;
		len -= n;
		offset += n;
		if (c->page_len == PG_PAGE_SIZE) {
			check_page(c, c->page, c->page_at);
			c->page_len = 0;
		}
	}
	return E_OK;
}

static err_code ck_end(void *ctx)
{
	checker *c = ctx;
	vrun *v = c->vl->v;
	if (c->bad_pages > PROBLEMS_PER_FILE)
		problem(v, c->key, c->name, -1, "%u bad pages in all (the first %d listed)",
				c->bad_pages, PROBLEMS_PER_FILE);
	return E_OK;
}

static const member_ops check_ops = { ck_begin, ck_increment, ck_data, ck_end, ck_mismatch };

/* One object: decode and check it all; a failure of the stream is a problem of the object. */
static err_code verify_object(void *arg, const char *key)
{
	vlevel *vl = arg;
	checker *c = xcalloc(1, sizeof(*c));
	c->vl = vl;
	c->key = key;
	log_debug("verifying %s", key);
	err_code rc = repo_get(vl->r, key, member_reader_new(&check_ops, c, vl->files, &vl->held));
	__atomic_add_fetch(&vl->v->objects, 1, __ATOMIC_RELAXED);
	if (rc != E_OK && rc != E_CANCELLED)
		problem(vl->v, key, c->name, -1, "%s", err_msg());
	free(c->name);
	free(c);
	err_clear();
	return rc == E_CANCELLED ? rc : E_OK;
}

/* files_metadata.json read again (the table keeps no names) for what must be named. */
typedef struct listed {
	vlevel *vl;
	const level_parts *lp;
	bool in_list;	/* inside a TarFileSets list */
	bool missing;	/* its partition is not stored */
	char **unseen;	/* Files entries no partition read held, when met */
	size_t n, cap;
} listed;

static void mark_seen(vlevel *vl, const char *member)
{
	file_rec f;
	if (file_table_find(vl->files, member, &f))
		vl->held.files[f.idx] = 1;
}

/* f: the member's entry, NULL when Files does not list it */
static bool rec_seen(const vlevel *vl, const file_rec *f)
{
	return f == NULL || (f->flags & FILE_SKIPPED) || vl->held.files[f->idx];
}

static bool was_seen(const vlevel *vl, const char *member)
{
	file_rec f;
	return rec_seen(vl, file_table_find(vl->files, member, &f) ? &f : NULL);
}

/*
 * Every partition TarFileSets names is stored. A missing one is one problem; its members are
 * not listed again as files no partition holds.
 */
static err_code listed_part(void *arg, const char *part, const char *member)
{
	listed *ls = arg;
	if (!ls->in_list) {
		ls->in_list = true;
		ls->missing = true;
		for (size_t i = 0; i < ls->lp->tars.len && ls->missing; i++)
			ls->missing = strcmp(strrchr(ls->lp->tars.items[i].key, '/') + 1, part) != 0;
	}
	if (member != NULL) {
		if (ls->missing)
			mark_seen(ls->vl, member);
		return E_OK;
	}
	if (ls->missing) {
		char obj[1024];
		snprintf(obj, sizeof(obj), REPO_BACKUP_DIR "%s/tar_partitions/%s", ls->vl->l->name, part);
		problem(ls->vl->v, obj, NULL, -1, "tar partition missing (files_metadata.json lists it)");
	}
	ls->in_list = false;
	return E_OK;
}

/* A delta's increments and unchanged files have a file under that name in its base. */
static void check_base(vlevel *vl, const file_rec *f, const uint64_t key[2], const char *name)
{
	if (f == NULL || !(f->flags & (FILE_INCREMENTED | FILE_SKIPPED)) ||
		file_table_find_key(files_of(vl->base), key, NULL))
		return;
	char obj[512];
	snprintf(obj, sizeof(obj), REPO_BACKUP_DIR "%s/files_metadata.json", vl->l->name);
	problem(vl->v, obj, name, -1, "%s, but its base %s has no such file",
			(f->flags & FILE_INCREMENTED) ? "an increment" : "unchanged since the base",
			vl->base->name);
}

/*
 * Every file files_metadata.json says this backup stored is in one of its partitions, and a
 * delta's base has the files it builds on.
 */
static err_code listed_file(void *arg, const char *name, const json_t *rec)
{
	listed *ls = arg;
	(void)rec;
	uint64_t key[2];
	file_rec entry;
	pg_name_key(name, key);
	const file_rec *f = file_table_find_key(ls->vl->files, key, &entry) ? &entry : NULL;
	if (ls->vl->base != NULL && files_of(ls->vl->base) != NULL)
		check_base(ls->vl, f, key, name);
	if (strcmp(name, "/") == 0 || rec_seen(ls->vl, f))
		return E_OK;
	if (ls->n == ls->cap) {
		ls->cap = ls->cap ? ls->cap * 2 : 16;
		ls->unseen = xrealloc(ls->unseen, ls->cap * sizeof(*ls->unseen));
	}
	ls->unseen[ls->n++] = xstrdup(name);
	return E_OK;
}

static err_code check_listed(vlevel *vl, const level_parts *lp)
{
	listed ls = { vl, lp, false, false, NULL, 0, 0 };
	char obj[512];
	snprintf(obj, sizeof(obj), REPO_BACKUP_DIR "%s/files_metadata.json", vl->l->name);
	err_code rc = catalog_files_each(vl->r, vl->l->name, listed_file, listed_part, &ls);
	if (rc != E_OK && rc != E_CANCELLED) {
		problem(vl->v, obj, NULL, -1, "%s", err_msg());
		err_clear();
		rc = E_OK;
	}
	/* TarFileSets may follow Files: a missing partition's members are known only now */
	for (size_t i = 0; i < ls.n; i++) {
		if (rc == E_OK && !was_seen(vl, ls.unseen[i]))
			problem(vl->v, obj, ls.unseen[i], -1, "listed as stored, but no tar partition holds it");
		free(ls.unseen[i]);
	}
	free(ls.unseen);
	return rc;
}

static void crosscheck_problem(void *arg, const char *object, const char *what)
{
	problem(arg, object, NULL, -1, "%s", what);
}

static err_code verify_level(repo *r, const backup_verify_options *o, vrun *v, const level *l,
							 const level *base)
{
	int concurrency = o->concurrency;
	vlevel *vl = xcalloc(1, sizeof(*vl));
	vl->v = v;
	vl->r = r;
	vl->l = l;
	vl->base = base;
	vl->files = files_of(l);
	vl->held.files = xcalloc(vl->files ? vl->files->n + 1 : 1, 1);
	level_parts lp;
	err_code rc = level_parts_list(r, l->name, &lp);
	if (rc != E_OK)
		goto out;
	log_info("verifying %s: %zu tar partitions", l->name, lp.tars.len);
	/* pg_control first: whether the cluster has data checksums decides what pages must pass. */
	if (lp.control == NULL) {
		char obj[512];
		snprintf(obj, sizeof(obj), REPO_BACKUP_DIR "%s/tar_partitions/", l->name);
		problem(v, obj, NULL, -1, "no pg_control.tar");
	} else {
		rc = verify_object(vl, lp.control);
		if (rc == E_OK && !pg_control_checksums(vl->control, vl->control_len, &vl->checksums))
			problem(v, lp.control, "/global/pg_control", -1,
					"not a pg_control walc can read: page checksums not checked");
		if (rc == E_OK)
			log_info("%s: data checksums %s", l->name,
					 vl->checksums ? "on: every page's checksum is checked"
								   : "off: page headers are checked");
	}
	if (rc == E_OK && lp.label != NULL)
		lp.keys[lp.n++] = lp.label;
	if (rc == E_OK)
		rc = parts_run(lp.keys, lp.n, concurrency, verify_object, vl);
	if (rc == E_OK && vl->files != NULL)
		rc = check_listed(vl, &lp);
	/* The sentinel's LSNs and identity: what the next delta push builds on. */
	if (rc == E_OK)
		rc = backup_crosscheck(r, l->name, &l->s, o->seg_size, crosscheck_problem, v, NULL);
	level_parts_free(&lp);
out:
	free(vl->held.files);
	free(vl);
	return rc;
}

static void wal_problem(void *arg, const char *object, const char *what)
{
	problem(arg, object, NULL, -1, "%s", what);
}

/* The start segment a backup's name encodes: base_<24 hex>[_D_...]. */
static bool name_segment(const char *name, uint64_t seg_size, uint32_t *tli, uint64_t *seg)
{
	char seg_name[WAL_NAME_LEN + 1];
	if (strncmp(name, "base_", 5) != 0 || strlen(name) < 5 + WAL_NAME_LEN)
		return false;
	memcpy(seg_name, name + 5, WAL_NAME_LEN);
	seg_name[WAL_NAME_LEN] = '\0';
	if (!wal_is_segment_name(seg_name) || wal_name_parse(seg_name, seg_size, tli, seg) != E_OK) {
		err_clear();
		return false;
	}
	return true;
}

/* With --wal: the segment before the next backup's start on tli, or the newest one archived. */
static err_code wal_end(repo *r, const backup_verify_options *o, uint32_t tli, uint64_t stop,
						uint64_t *end)
{
	bool found;
	uint64_t newest;
	TRY(wal_newest_segment(r, o->seg_size, tli, &newest, &found));
	*end = found && newest > stop ? newest : stop;
	backup_refs refs;
	TRY(catalog_backups(r, &refs));
	for (size_t i = 0; i < refs.len; i++) {
		uint32_t t;
		uint64_t s;
		if (name_segment(refs.items[i].name, o->seg_size, &t, &s) && t == tli && s > stop &&
			s - 1 < *end)
			*end = s - 1 < stop ? stop : s - 1;
	}
	catalog_backups_free(&refs);
	return E_OK;
}

/* Whether a thinning delete kept only the own WAL of this backup (before its window). */
static bool thinned_after(repo *r, const backup_verify_options *o, const char *name,
						  uint32_t tli, uint64_t start)
{
	retention_window w;
	bool windowed = false, before = false;
	uint32_t wtli;
	uint64_t wstart;
	if (catalog_window_get(r, &w, &windowed) == E_OK && windowed)
		before = strcmp(name, w.from_backup) != 0 &&
			name_segment(w.from_backup, o->seg_size, &wtli, &wstart) && wtli == tli &&
			start < wstart;
	err_clear();
	catalog_window_free(&w);
	return before;
}

static err_code verify_wal(repo *r, const backup_verify_options *o, vrun *v, const level *top)
{
	uint32_t tli;
	uint64_t start;
	if (!name_segment(top->name, o->seg_size, &tli, &start)) {
		problem(v, top->name, NULL, -1, "the name does not say the start segment: WAL not checked");
		return E_OK;
	}
	uint64_t stop = top->s.finish_lsn > 0 ? (top->s.finish_lsn - 1) / o->seg_size : start;
	if (stop < start)
		stop = start;
	uint64_t end = stop;
	if (o->wal && thinned_after(r, o, top->name, tli, start))
		log_info("%s: the WAL after its end was thinned by delete retain --pitr-window: "
				 "checked to its stop segment only",
				 top->name);
	else if (o->wal)
		TRY(wal_end(r, o, tli, stop, &end));
	uint64_t checked;
	TRY(wal_check_range(r, o->seg_size, tli, start, end, top->s.have_system_id ? top->s.system_id : 0,
						o->concurrency, wal_problem, v, &checked));
	v->wal_segments = checked;
	return E_OK;
}

/*
 * A backup that lists no files and has no tar partition: its sentinel and metadata were
 * written by hand for a copy kept elsewhere (StackGres does so for a volume snapshot, with
 * files_metadata.json {"Files":{}}). A backup walc or WAL-G made always lists files.
 */
static err_code metadata_only(repo *r, const chain *c, bool *out)
{
	*out = false;
	const file_table *files = c->n == 1 ? files_of(&c->lv[0]) : NULL;
	if (files == NULL || files->n != 0)
		return E_OK;
	level_parts lp;
	TRY(level_parts_list(r, c->lv[0].name, &lp));
	*out = lp.tars.len == 0;
	level_parts_free(&lp);
	return E_OK;
}

/* What one verification read, as its record keeps it. */
static json_t *checked_json(const backup_verify_options *o, const vrun *v, const chain *c)
{
	json_t *names = json_array();
	for (size_t i = 0; i < c->n; i++)
		json_array_append_new(names, json_string(c->lv[i].name));
	return json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:s}", "chain", names, "objects",
					 (json_int_t)v->objects, "files", (json_int_t)v->files, "pages",
					 (json_int_t)v->pages, "bytes", (json_int_t)v->prog.done, "wal_segments",
					 (json_int_t)v->wal_segments, "wal",
					 o->wal ? "from the start to the next backup or the newest segment"
							: "from the start to the stop segment");
}

/*
 * Keeps the outcome with the backup, for retention and backup-list. A repository this run
 * cannot write to (a reader's credentials) still gets its verification: a warning says the
 * result was not kept.
 */
static void record(repo *r, const backup_verify_options *o, const vrun *v, const chain *c,
				   const char *name, uint64_t found)
{
	backup_sentinel own = { 0 };
	const backup_sentinel *s = c->n > 0 ? &c->lv[c->n - 1].s : NULL;
	if (s == NULL && catalog_sentinel_read(r, name, &own) == E_OK)
		s = &own;
	err_clear();
	if (s == NULL)
		return;
	verify_record rec = { .passed = found == 0, .problems = found, .at = time(NULL),
						  .at_text = time_now_rfc3339(), .first_problem = v->first,
						  .checked = checked_json(o, v, c) };
	if (catalog_verified_put(r, name, s, &rec) != E_OK) {
		log_warn("backup-verify %s: the result is not kept with the backup: %s", name,
				 err_msg());
		err_clear();
	}
	free(rec.at_text);
	json_decref(rec.checked);
	catalog_sentinel_free(&own);
}

static err_code verify_one(repo *r, const backup_verify_options *o, vrun *v, const char *name,
						   json_t *summaries)
{
	chain c = { 0 };
	bool meta_only = false;
	uint64_t before = v->nproblems;
	v->backup = name;
	v->objects = v->files = v->pages = v->wal_segments = 0;
	free(v->first);
	v->first = NULL;
	free(v->what);
	v->what = xasprintf("backup-verify %s", name);
	progress_start(&v->prog, v->what, 0);
	err_code rc = load_chain(r, name, &c);
	if (rc != E_OK) {
		/* A chain that cannot be read is this backup's problem, not the end of --all. */
		if (rc == E_CANCELLED)
			goto out;
		problem(v, name, NULL, -1, "%s", err_msg());
		err_clear();
		rc = E_OK;
		goto summary;
	}
	for (size_t i = 0; i < c.n; i++)
		v->prog.total += c.lv[i].s.uncompressed_size;
	if (c.n > 1)
		log_info("%s is a delta: verifying %zu backups from %s", name, c.n, c.lv[0].name);
	rc = metadata_only(r, &c, &meta_only);
	if (rc == E_OK && meta_only)
		log_info("%s: metadata only, no objects (a copy kept outside the repository, such as "
				 "a volume snapshot): its WAL is checked, and it is not recorded as verified "
				 "(its files were never read)",
				 name);
	for (size_t i = 0; rc == E_OK && !meta_only && i < c.n; i++)
		rc = verify_level(r, o, v, &c.lv[i], i > 0 ? &c.lv[i - 1] : NULL);
	if (rc == E_OK)
		rc = verify_wal(r, o, v, &c.lv[c.n - 1]);
	if (rc != E_OK)
		goto out;
summary:;
	uint64_t found = v->nproblems - before;
	/* what retention keeps as proven must have been read whole */
	if (o->record && !meta_only)
		record(r, o, v, &c, name, found);
	if (o->json) {
		json_t *s = json_object();
		json_object_set_new(s, "name", json_string(name));
		json_object_set_new(s, "chain", json_integer((json_int_t)c.n));
		json_object_set_new(s, "objects", json_integer((json_int_t)v->objects));
		json_object_set_new(s, "files", json_integer((json_int_t)v->files));
		json_object_set_new(s, "pages", json_integer((json_int_t)v->pages));
		json_object_set_new(s, "wal_segments", json_integer((json_int_t)v->wal_segments));
		json_object_set_new(s, "bytes", json_integer((json_int_t)v->prog.done));
		json_object_set_new(s, "problems", json_integer((json_int_t)found));
		if (meta_only)
			json_object_set_new(s, "metadata_only", json_true());
		json_array_append_new(summaries, s);
	} else if (meta_only) {
		fprintf(v->out,
				"backup %s: %s: metadata only, no objects; %llu WAL segments read; %llu "
				"problem%s\n",
				name, found ? "FAILED" : "OK", (unsigned long long)v->wal_segments,
				(unsigned long long)found, found == 1 ? "" : "s");
	} else {
		fprintf(v->out,
				"backup %s: %s: %llu objects, %llu files, %llu pages, %llu WAL segments read; "
				"%llu problem%s\n",
				name, found ? "FAILED" : "OK", (unsigned long long)v->objects,
				(unsigned long long)v->files, (unsigned long long)v->pages,
				(unsigned long long)v->wal_segments, (unsigned long long)found,
				found == 1 ? "" : "s");
	}
out:
	chain_free(&c);
	return rc;
}

err_code backup_verify(repo *r, const backup_verify_options *o, uint64_t *problems, FILE *out)
{
	vrun v = { .out = out, .json = o->json };
	pthread_mutex_init(&v.lock, NULL);
	v.problems = json_array();
	json_t *summaries = json_array();
	backup_refs refs = { 0 };
	char *one = NULL;
	err_code rc;
	if (o->all) {
		rc = catalog_backups(r, &refs);
		for (size_t i = 0; rc == E_OK && i < refs.len; i++)
			rc = verify_one(r, o, &v, refs.items[i].name, summaries);
	} else {
		rc = catalog_resolve(r, o->name, &one);
		if (rc == E_OK)
			rc = verify_one(r, o, &v, one, summaries);
	}
	if (rc == E_OK && o->json) {
		json_t *doc = json_object();
		json_object_set_new(doc, "backups", summaries);
		json_object_set_new(doc, "problems", v.problems);
		summaries = v.problems = NULL;
		json_dumpf(doc, out, JSON_INDENT(2));
		fputc('\n', out);
		json_decref(doc);
	} else if (rc == E_OK && o->all && refs.len == 0) {
		fprintf(out, "no backups to verify\n");
	}
	*problems = v.nproblems;
	catalog_backups_free(&refs);
	free(one);
	json_decref(summaries);
	json_decref(v.problems);
	pthread_mutex_destroy(&v.lock);
	free(v.what);
	free(v.first);
	return rc;
}
