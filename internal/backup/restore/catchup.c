/*
 * catchup-fetch: a catchup backup (catchup-push's, WAL-G's or walc's: the pages changed since
 * the standby's LSN, every other file whole) applied onto the standby's stopped data directory,
 * which then recovers from the backup's start like any restored backup and streams again.
 *
 * The standby's files are the base the increments apply to, and nothing else has them: so
 * nothing of them is changed until the whole backup has been read and checked. First every
 * file and increment is written beside its place (extract.h's stage mode) and held to its
 * size and checksum; then, with pg_control removed and the restore marker made (a server
 * cannot start on a mix), each staged file replaces its original, each increment is written
 * into its file, relation files the primary no longer has are removed, and pg_control comes
 * back last.
 */
#include "internal/backup/restore/fetch_impl.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INC_HEADER 16

typedef struct staged_item {
	char *rel;
	member_kind kind;
	uint32_t mode;
} staged_item;

typedef struct staging {
	pthread_mutex_t lock;
	staged_item *it;
	size_t n, cap;
} staging;

static void on_staged(void *arg, const char *rel, member_kind kind, uint32_t mode)
{
	staging *s = arg;
	pthread_mutex_lock(&s->lock);
	if (s->n == s->cap)
		s->it = xrealloc(s->it, (s->cap = s->cap ? 2 * s->cap : 1024) * sizeof(*s->it));
	s->it[s->n++] = (staged_item){ xstrdup(rel), kind, mode };
	pthread_mutex_unlock(&s->lock);
}

static char *staged_path(const char *dest, const staged_item *it)
{
	return xasprintf("%s/%s%s", dest, it->rel,
					 it->kind == MEMBER_INCREMENT ? EXTRACT_STAGED_INC
					 : it->kind == MEMBER_FILE	  ? EXTRACT_STAGED
												  : "");
}

/* A first phase that failed leaves the destination as it was: files, then directories made. */
static void unstage(const char *dest, staging *s)
{
	for (size_t i = 0; i < s->n; i++) {
		char *p = staged_path(dest, &s->it[i]);
		if (s->it[i].kind != MEMBER_DIR && unlink(p) != 0 && errno != ENOENT)
			log_warn("removing %s: %s", p, strerror(errno));
		free(p);
	}
	for (size_t i = s->n; i-- > 0;) {
		char *p = staged_path(dest, &s->it[i]);
		if (s->it[i].kind == MEMBER_DIR && rmdir(p) != 0 && errno != ENOENT)
			log_warn("removing %s: %s", p, strerror(errno));
		free(p);
	}
}

static void staging_free(staging *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->it[i].rel);
	free(s->it);
	pthread_mutex_destroy(&s->lock);
}

/* What the destination holds: every change before `reached`, on `timeline`. */
typedef struct local_state {
	uint64_t system_id;
	uint64_t reached;
	uint32_t timeline;
	bool interrupted; /* an earlier catchup-fetch's marker stands for its pg_control */
} local_state;

#define MARK_SYSID "system_identifier "
#define MARK_REACHED "catchup_reached "
#define MARK_TLI "catchup_timeline "

/* An interrupted catchup-fetch's marker (*found), with what its cluster held before. */
static err_code read_marker(const char *dest, local_state *out, bool *found)
{
	char *path = xasprintf("%s/" RESTORE_MARKER, dest);
	FILE *f = fopen(path, "r");
	*found = f != NULL;
	if (f == NULL) {
		free(path);
		return E_OK;
	}
	char line[256];
	int got = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long long v;
		if (strncmp(line, MARK_SYSID, strlen(MARK_SYSID)) == 0 &&
			sscanf(line + strlen(MARK_SYSID), "%llu", &v) == 1) {
			out->system_id = v;
			got |= 1;
		} else if (strncmp(line, MARK_REACHED, strlen(MARK_REACHED)) == 0 &&
				   sscanf(line + strlen(MARK_REACHED), "%llu", &v) == 1) {
			out->reached = v;
			got |= 2;
		} else if (strncmp(line, MARK_TLI, strlen(MARK_TLI)) == 0 &&
				   sscanf(line + strlen(MARK_TLI), "%llu", &v) == 1) {
			out->timeline = (uint32_t)v;
			got |= 4;
		}
	}
	fclose(f);
	err_code rc = got == 7 ? E_OK
						   : err_set(E_CONFIG, "catchup-fetch: %s holds an interrupted restore "
											   "that was no catchup-fetch (%s): finish it with "
											   "backup-fetch --delta",
									 dest, path);
	out->interrupted = true;
	free(path);
	return rc;
}

/*
 * From pg_control: a cluster shut down cleanly holds every change up to its shutdown
 * checkpoint; a standby shut down cleanly, up to its minimum recovery point (where replay
 * had got when its buffers were last written) or its restart point's REDO. Any other state
 * (crashed, running) may hold torn pages that only its own WAL would repair.
 */
static err_code read_local(const char *dest, local_state *out)
{
	pg_control_info ctl;
	TRY(pg_control_load(dest, &ctl));
	out->system_id = ctl.system_id;
	out->timeline = ctl.timeline;
	if (ctl.state == PG_STATE_SHUTDOWNED) {
		out->reached = ctl.checkpoint;
	} else if (ctl.state == PG_STATE_SHUTDOWNED_IN_RECOVERY) {
		out->reached = ctl.min_recovery > ctl.redo ? ctl.min_recovery : ctl.redo;
		if (ctl.min_recovery != 0 && ctl.min_recovery_tli > out->timeline)
			out->timeline = ctl.min_recovery_tli;
	} else {
		return err_set(E_CONFIG, "catchup-fetch: %s was not shut down cleanly (pg_control: %s): "
								 "start it and stop it again first",
					   dest, pg_control_state_name(ctl.state));
	}
	return E_OK;
}

/* Where timeline tli ends in the history of timeline of (from the archive), *end. */
static err_code timeline_end(repo *r, uint32_t of, uint32_t tli, uint64_t *end)
{
	pg_history_entry *e = NULL;
	size_t n = 0;
	err_code rc = wal_history_load(r, of, NULL, &e, &n);
	if (rc == E_NOTFOUND) {
		free(e);
		err_clear();
		return err_set(E_CONFIG, "catchup-fetch: the backup is on timeline %u, the destination "
								 "on timeline %u, and %08X.history is not archived: nothing "
								 "shows that the destination is on the backup's history",
					   of, tli, of);
	}
	bool found = false;
	for (size_t i = 0; rc == E_OK && i < n && !found; i++)
		if (e[i].parent == tli) {
			*end = e[i].switch_lsn;
			found = true;
		}
	if (rc == E_OK && !found)
		rc = err_set(E_CONFIG, "catchup-fetch: the destination's timeline %u is not in the "
							   "history of the backup's timeline %u",
					 tli, of);
	free(e);
	return rc;
}

/*
 * The destination may take the backup: a stopped data directory of the backup's cluster that
 * holds every change before the backup's LSN, on the timeline the backup was taken on or one
 * it branched from before that directory's end.
 */
static err_code check_dest(repo *r, const char *dest, const level *l, local_state *ls)
{
	TRY(placement_check_stopped(dest, false, "catchup-fetch"));
	bool marked;
	TRY(read_marker(dest, ls, &marked));
	if (marked)
		log_info("catchup-fetch: %s holds an interrupted catchup-fetch: applying this one "
				 "instead",
				 dest);
	else
		TRY(read_local(dest, ls));
	const backup_sentinel *s = &l->s;
	if (s->have_system_id && s->system_id != ls->system_id)
		return err_set(E_CONFIG, "catchup-fetch: %s belongs to another cluster (system "
								 "identifier %llu, the backup's is %llu)",
					   dest, (unsigned long long)ls->system_id,
					   (unsigned long long)s->system_id);
	char a[32], b[32];
	pg_lsn_format(s->delta_lsn, a);
	pg_lsn_format(ls->reached, b);
	if (s->delta_lsn > ls->reached)
		return err_set(E_CONFIG, "catchup-fetch: %s holds the changes up to %s only, and %s "
								 "holds those since %s: what lies between is in neither (run "
								 "catchup-push --from-lsn with %s or less)",
					   dest, b, l->name, a, b);
	unsigned tli = 0;
	sscanf(l->name, "base_%8X", &tli);
	if (tli != 0 && tli < ls->timeline)
		return err_set(E_CONFIG, "catchup-fetch: %s is on timeline %u, past the backup's "
								 "timeline %u",
					   dest, ls->timeline, tli);
	if (tli > ls->timeline) {
		uint64_t end = 0;
		TRY(timeline_end(r, tli, ls->timeline, &end));
		char e[32];
		pg_lsn_format(end, e);
		if (ls->reached > end)
			return err_set(E_CONFIG, "catchup-fetch: %s went on on timeline %u to %s, past the "
									 "point %s where the backup's timeline %u left it: it has "
									 "changes the primary never had (pg_rewind it first)",
						   dest, ls->timeline, b, e, tli);
	}
	return E_OK;
}

/* A staged increment written into its file (made when the destination lacked it). */
static err_code apply_increment(const char *target, const char *staged, uint32_t mode)
{
	int in = open(staged, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return err_errno(E_IO, errno, "opening %s", staged);
	unsigned char head[INC_HEADER];
	err_code rc = pread(in, head, sizeof(head), 0) == (ssize_t)sizeof(head)
		? E_OK
		: err_set(E_IO, "%s: short increment header", staged);
	uint64_t size = 0;
	uint32_t n = 0;
	if (rc == E_OK) {
		memcpy(&size, head + 4, 8);
		memcpy(&n, head + 12, 4);
		size = le64toh(size);
		n = le32toh(n);
	}
	uint32_t *blocks = xcalloc(n ? n : 1, sizeof(*blocks));
	if (rc == E_OK && pread(in, blocks, (size_t)n * 4, INC_HEADER) != (ssize_t)n * 4)
		rc = err_set(E_IO, "%s: short block list", staged);
	int out = -1;
	if (rc == E_OK) {
		out = open(target, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (out < 0 && errno == ENOENT) /* phase one saw that it holds every page */
			out = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (out < 0)
			rc = err_errno(E_IO, errno, "opening %s", target);
	}
	if (rc == E_OK && ftruncate(out, (off_t)size) != 0)
		rc = err_errno(E_IO, errno, "resizing %s", target);
	unsigned char *page = xmalloc(PG_PAGE_SIZE);
	off_t at = INC_HEADER + (off_t)n * 4;
	for (uint32_t i = 0; rc == E_OK && i < n; i++, at += PG_PAGE_SIZE) {
		uint32_t blk = le32toh(blocks[i]);
		if (pread(in, page, PG_PAGE_SIZE, at) != PG_PAGE_SIZE)
			rc = err_set(E_IO, "%s: short page %u", staged, i);
		else if ((uint64_t)blk * PG_PAGE_SIZE + PG_PAGE_SIZE > size)
			rc = err_set(E_CORRUPT, "%s: block %u past the file's size", staged, blk);
		else if (pwrite(out, page, PG_PAGE_SIZE, (off_t)blk * PG_PAGE_SIZE) != PG_PAGE_SIZE)
			rc = err_errno(E_IO, errno, "writing %s", target);
	}
	if (out >= 0 && close(out) != 0 && rc == E_OK)
		rc = err_errno(E_IO, errno, "closing %s", target);
	close(in);
	free(page);
	free(blocks);
	if (rc == E_OK && unlink(staged) != 0)
		rc = err_errno(E_IO, errno, "removing %s", staged);
	return rc;
}

static bool relation_name(const char *name)
{
	size_t d = strspn(name, "0123456789");
	if (d == 0)
		return false;
	const char *p = name + d;
	if (strncmp(p, "_fsm", 4) == 0 || strncmp(p, "_vm", 3) == 0 || strncmp(p, "_init", 5) == 0)
		p = strchr(p, '.') ? strchr(p, '.') : p + strlen(p);
	if (*p == '.') {
		p++;
		size_t s = strspn(p, "0123456789");
		if (s == 0)
			return false;
		p += s;
	}
	return *p == '\0';
}

/*
 * Relation files the primary no longer has (dropped since the LSN) are removed: the standby
 * replays from the backup's start, past the drop, and a relation that later took the same
 * file name would grow on top of the old pages.
 */
static void prune_relations(const char *dir, const char *member, int depth,
							const file_table *files, size_t *removed)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		char *path = xasprintf("%s/%s", dir, de->d_name);
		char *mem = xasprintf("%s/%s", member, de->d_name);
		struct stat sb;
		/* links followed only where tablespaces are: pg_tblspc/<oid> */
		bool tablespace = strcmp(member, "/pg_tblspc") == 0;
		int got = tablespace ? stat(path, &sb) : lstat(path, &sb);
		if (got == 0 && S_ISDIR(sb.st_mode) && depth > 0) {
			prune_relations(path, mem, depth - 1, files, removed);
		} else if (got == 0 && S_ISREG(sb.st_mode) && relation_name(de->d_name) &&
				   !file_table_find(files, mem, NULL)) {
			fetch_remove(path, removed);
		}
		free(path);
		free(mem);
	}
	closedir(d);
}

/* Every file system the destination spans: it, and each tablespace it links to. */
static err_code sync_all(const char *dest)
{
	TRY(fetch_sync_tree(dest));
	char *dir = xasprintf("%s/pg_tblspc", dest);
	DIR *d = opendir(dir);
	err_code rc = E_OK;
	struct dirent *de;
	while (d != NULL && rc == E_OK && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		char *p = xasprintf("%s/%s", dir, de->d_name);
		rc = fetch_sync_tree(p);
		free(p);
	}
	if (d != NULL)
		closedir(d);
	free(dir);
	return rc;
}

/* The second phase: the destination changes, pg_control last. */
static err_code apply(const char *dest, const level *l, const local_state *ls, staging *s)
{
	TRY(sync_all(dest));
	char *text = xasprintf("walc catchup-fetch of %s, not complete while this file exists\n"
						   MARK_SYSID "%llu\n" MARK_REACHED "%llu\n" MARK_TLI "%u\n",
						   l->name, (unsigned long long)ls->system_id,
						   (unsigned long long)ls->reached, ls->timeline);
	err_code rc = placement_mark(dest, text);
	free(text);
	TRY(rc);
	char *control = xasprintf("%s/global/pg_control", dest);
	if (unlink(control) != 0 && errno != ENOENT)
		rc = err_errno(E_IO, errno, "removing %s", control);
	const staged_item *ctl = NULL;
	size_t whole = 0, increments = 0, removed = 0;
	for (size_t i = 0; rc == E_OK && i < s->n; i++) {
		const staged_item *it = &s->it[i];
		if (it->kind == MEMBER_DIR)
			continue;
		if (strcmp(it->rel, "global/pg_control") == 0) {
			ctl = it;
			continue;
		}
		char *target = xasprintf("%s/%s", dest, it->rel);
		char *staged = staged_path(dest, it);
		if (it->kind == MEMBER_INCREMENT) {
			rc = apply_increment(target, staged, it->mode);
			increments++;
		} else {
			rc = rename(staged, target) == 0 ? E_OK
											 : err_errno(E_IO, errno, "renaming %s", staged);
			whole++;
		}
		free(target);
		free(staged);
	}
	if (rc == E_OK) {
		static const char *const roots[][2] = { { "base", "/base" },
												{ "global", "/global" },
												{ "pg_tblspc", "/pg_tblspc" } };
		for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
			char *p = xasprintf("%s/%s", dest, roots[i][0]);
			prune_relations(p, roots[i][1], 3, files_of(l), &removed);
			free(p);
		}
	}
	if (rc == E_OK && ctl == NULL)
		rc = err_set(E_CORRUPT, "backup %s holds no pg_control", l->name);
	if (rc == E_OK)
		rc = sync_all(dest);
	if (rc == E_OK) {
		char *staged = staged_path(dest, ctl);
		rc = rename(staged, control) == 0 ? E_OK : err_errno(E_IO, errno, "renaming %s", staged);
		free(staged);
	}
	if (rc == E_OK)
		rc = fsync_parent_dir(control);
	free(control);
	placement p = { .dest = xstrdup(dest), .dest_exists = true };
	if (rc == E_OK)
		rc = placement_finish(&p);
	placement_free(&p);
	if (rc == E_OK)
		rc = sync_all(dest);
	if (rc == E_OK)
		log_info("catchup-fetch: %zu files replaced, %zu written page by page, %zu relation "
				 "files the primary no longer has removed",
				 whole, increments, removed);
	else
		err_wrap(rc, "catchup-fetch stopped while applying %s to %s (pg_control is removed "
					 "until a catchup-fetch completes: run it again)",
				 l->name, dest);
	return rc;
}

err_code backup_catchup_fetch(repo *r, const catchup_options *opt)
{
	chain c = { xcalloc(1, sizeof(level)), 1 };
	level *l = &c.lv[0];
	char *dest = realpath(opt->dest, NULL);
	err_code rc = dest != NULL ? E_OK : err_errno(E_CONFIG, errno, "catchup-fetch: %s", opt->dest);
	if (rc == E_OK)
		rc = catalog_resolve(r, opt->name, &l->name);
	if (rc == E_OK)
		rc = load_level(r, l);
	if (rc == E_OK && (!l->s.is_delta || l->s.delta_from[0] != '\0'))
		rc = err_set(E_CONFIG, "catchup-fetch: %s is no catchup backup (catchup-push writes "
							   "them: a delta since an LSN)",
					 l->name);
	if (rc == E_OK && !l->has_files)
		rc = err_set(E_CORRUPT, "catchup backup %s has no files metadata: its increments "
								"cannot be told from whole files",
					 l->name);
	if (rc == E_OK)
		rc = fetch_check_control(r, l->name);
	local_state ls = { 0 };
	if (rc == E_OK)
		rc = check_dest(r, dest, l, &ls);
	staging s = { .n = 0 };
	pthread_mutex_init(&s.lock, NULL);
	if (rc == E_OK) {
		char a[32], b[32];
		pg_lsn_format(l->s.delta_lsn, a);
		pg_lsn_format(ls.reached, b);
		log_info("catchup-fetch: %s (changes since %s) onto %s (which holds the changes up to "
				 "%s)",
				 l->name, a, dest, b);
		l->ex = (extract_level){ .r = r,
								 .dest = dest,
								 .files = files_of(l),
								 .skip_tablespace_map = true,
								 .backup = l->name,
								 .stage = true,
								 .staged = on_staged,
								 .staged_arg = &s };
		rc = fetch_level(r, l, opt->concurrency, true);
		if (rc != E_OK)
			unstage(dest, &s);
	}
	if (rc == E_OK)
		rc = apply(dest, l, &ls, &s);
	if (rc == E_OK)
		log_info("catchup %s applied to %s: start it as a standby (standby.signal and "
				 "primary_conninfo, as before) and it recovers from the backup's start, then "
				 "streams",
				 l->name, dest);
	staging_free(&s);
	chain_free(&c);
	free(dest);
	return rc;
}
