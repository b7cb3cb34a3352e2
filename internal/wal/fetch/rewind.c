/*
 * wal-restore TARGET SOURCE: the WAL a pg_rewind of TARGET from SOURCE needs, from the
 * archive into the two stopped clusters' pg_wal, where it is missing. pg_rewind reads TARGET's
 * WAL from the last checkpoint before the timelines diverge to TARGET's end (to find the
 * blocks TARGET changed), and the rewound cluster replays SOURCE's WAL from that
 * checkpoint's REDO point, which pg_rewind copies from SOURCE's pg_wal. Each file is fetched
 * as wal-fetch fetches one: whole or absent, and what its name says, of this cluster.
 */
#include "internal/wal/wal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/wal/wal_impl.h"

#define HISTORY_MAX 256
#define SEARCH_MAX_SEGMENTS 65536 /* how far back a checkpoint is looked for */
#define READ_CHUNK 65536

typedef struct side {
	const char *what; /* "TARGET" or "SOURCE", for messages */
	char *dir, *waldir;
	pg_control_info ctl;
	wal_path path;
} side;

static void side_free(side *s)
{
	free(s->dir);
	free(s->waldir);
}

static uint64_t seg_end(const side *s, uint64_t seg)
{
	return (seg + 1) * s->ctl.seg_size - 1;
}

/* A segment's name on the side's timeline path: the timeline its last byte is on. */
static void seg_name(const side *s, uint64_t seg, char name[WAL_NAME_LEN + 1])
{
	wal_name_format(name, wal_path_tli_at(&s->path, seg_end(s, seg)), seg, s->ctl.seg_size);
}

static bool present(const side *s, const char *name)
{
	char *path = xasprintf("%s/%s", s->waldir, name);
	struct stat sb;
	bool there = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
	free(path);
	return there;
}

/* name into the side's pg_wal from the archive, unless it is there; *got when fetched. */
static err_code supply(repo *r, const wal_settings *cfg, const side *s, const char *name, bool *got)
{
	*got = false;
	if (present(s, name))
		return E_OK;
	char *dest = xasprintf("%s/%s", s->waldir, name);
	bool prefetch;
	err_code rc = wal_fetch(r, cfg, name, dest, &prefetch);
	free(dest);
	if (rc == E_NOTFOUND)
		return err_set(E_NOTFOUND, "wal-restore: %s is neither in %s nor archived in %s: "
								   "pg_rewind (or the rewound cluster) would stop there",
					   name, s->waldir, repo_describe(r));
	TRY(rc);
	log_info("wal-restore: restored %s into %s", name, s->waldir);
	*got = true;
	return E_OK;
}

static err_code open_side(const char *dir, const char *what, side *s)
{
	memset(s, 0, sizeof(*s));
	s->what = what;
	s->dir = realpath(dir, NULL);
	if (s->dir == NULL)
		return err_errno(E_CONFIG, errno, "wal-restore: %s %s", what, dir);
	long pid;
	switch (pg_postmaster_state(s->dir, &pid)) {
	case PG_PID_LIVE:
		return err_set(E_CONFIG, "wal-restore: a server (pid %ld) runs on %s %s: pg_rewind "
								 "needs both clusters stopped",
					   pid, what, s->dir);
	case PG_PID_UNREADABLE:
		return err_set(E_CONFIG, "wal-restore: %s/postmaster.pid names no process: stop the "
								 "server of %s %s",
					   s->dir, what, s->dir);
	default:
		break;
	}
	TRY(pg_control_load(s->dir, &s->ctl));
	if (s->ctl.state != PG_STATE_SHUTDOWNED && s->ctl.state != PG_STATE_SHUTDOWNED_IN_RECOVERY)
		return err_set(E_CONFIG, "wal-restore: %s %s was not shut down cleanly (pg_control: "
								 "%s): start it and stop it again first, as pg_rewind needs",
					   what, s->dir, pg_control_state_name(s->ctl.state));
	if (s->ctl.seg_size < (1u << 20) || s->ctl.seg_size > (1u << 30) ||
		(s->ctl.seg_size & (s->ctl.seg_size - 1)) != 0)
		return err_set(E_CORRUPT, "wal-restore: %s/global/pg_control: WAL segments of %llu bytes",
					   s->dir, (unsigned long long)s->ctl.seg_size);
	s->waldir = xasprintf("%s/pg_wal", s->dir);
	struct stat sb;
	if (stat(s->waldir, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return err_set(E_CONFIG, "wal-restore: %s has no pg_wal directory", s->dir);
	return E_OK;
}

/*
 * The side's timeline path, from its history file: pg_rewind reads it from the data directory,
 * so one that is missing there is restored first.
 */
static err_code read_path(repo *r, const wal_settings *cfg, side *s)
{
	uint32_t tli = s->ctl.timeline;
	s->path.n = 1;
	s->path.tli[0] = tli;
	s->path.begin[0] = 0;
	if (tli <= 1)
		return E_OK;
	char name[32];
	bool got;
	snprintf(name, sizeof(name), "%08X.history", tli);
	TRY(supply(r, cfg, s, name, &got));
	char *path = xasprintf("%s/%s", s->waldir, name);
	pg_history_entry *e = NULL;
	size_t n = 0;
	err_code rc = wal_history_load(r, tli, path, &e, &n);
	if (rc == E_OK && n + 1 > WAL_PATH_MAX)
		rc = err_set(E_CORRUPT, "wal-restore: %s: more than %d timelines", path, WAL_PATH_MAX - 1);
	for (size_t i = 0; rc == E_OK && i < n; i++) {
		s->path.tli[i] = e[i].parent;
		s->path.begin[i] = i == 0 ? 0 : e[i - 1].switch_lsn;
	}
	if (rc == E_OK) {
		s->path.tli[n] = tli;
		s->path.begin[n] = e[n - 1].switch_lsn;
		s->path.n = n + 1;
	}
	free(e);
	free(path);
	return rc;
}

err_code wal_history_load(repo *r, uint32_t tli, const char *path, pg_history_entry **e,
						  size_t *n)
{
	membuf mb = { .max = WAL_FILE_CHECK_MAX };
	char *what = NULL;
	err_code rc = E_OK;
	*e = xcalloc(HISTORY_MAX, sizeof(**e));
	*n = 0;
	if (path != NULL) {
		what = xstrdup(path);
		sink *m = membuf_sink_new(&mb);
		rc = sink_write_file(m, path);
		sink_free(m);
	} else {
		char *base = xasprintf(REPO_WAL_DIR "%08X.history", tli);
		rc = repo_find(r, base, &what);
		free(base);
		if (rc == E_OK)
			rc = repo_get(r, what, membuf_sink_new(&mb));
	}
	const char *bad = rc == E_OK
		? pg_history_parse((const char *)mb.data, mb.len, tli, *e, HISTORY_MAX, n)
		: NULL;
	if (rc == E_OK && bad != NULL)
		rc = err_set(E_CORRUPT, "%s: %s", what, bad);
	free(mb.data);
	free(what);
	return rc;
}

static uint64_t path_end(const wal_path *p, size_t i)
{
	return i + 1 < p->n ? p->begin[i + 1] : UINT64_MAX;
}

/* Where the two histories part: the LSN and the last timeline they share. */
static err_code diverge(const side *t, const side *s, uint64_t *at, uint32_t *tli)
{
	for (size_t i = 0; i < t->path.n && i < s->path.n; i++) {
		if (t->path.tli[i] != s->path.tli[i]) {
			if (i == 0)
				break;
			*at = t->path.begin[i];
			*tli = t->path.tli[i - 1];
			return E_OK;
		}
		uint64_t te = path_end(&t->path, i), se = path_end(&s->path, i);
		if (te == se && te == UINT64_MAX)
			return err_set(E_CONFIG, "wal-restore: TARGET and SOURCE are both on timeline %u: "
									 "they have not diverged (pg_rewind rewinds a cluster left on "
									 "an older timeline by a failover)",
						   t->ctl.timeline);
		if (te != se) {
			*at = te < se ? te : se;
			*tli = t->path.tli[i];
			return E_OK;
		}
	}
	return err_set(E_CONFIG, "wal-restore: the histories of TARGET (timeline %u) and SOURCE "
							 "(timeline %u) share no timeline",
				   t->ctl.timeline, s->ctl.timeline);
}

/* The last checkpoint record before the divergence, as pg_rewind's search finds it. */
typedef struct ckpt_search {
	uint64_t before;
	bool found;
	uint64_t lsn, redo;
} ckpt_search;

static bool on_record(const wal_record *rec, void *arg)
{
	ckpt_search *c = arg;
	if (rec->lsn >= c->before)
		return false;
	if (rec->kind == WAL_REC_CHECKPOINT) {
		c->found = true;
		c->lsn = rec->lsn;
		c->redo = rec->redo;
	}
	return true;
}

static err_code feed_local(const char *path, wal_reader *rd)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_errno(E_IO, errno, "wal-restore: opening %s", path);
	unsigned char *buf = xmalloc(READ_CHUNK);
	err_code rc = E_OK;
	uint64_t end;
	for (;;) {
		ssize_t n = read(fd, buf, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = err_errno(E_IO, errno, "wal-restore: reading %s", path);
		if (n <= 0 || rc != E_OK)
			break;
		rc = wal_reader_feed(rd, buf, (size_t)n);
		if (rc != E_OK || wal_reader_done(rd, &end))
			break;
	}
	free(buf);
	close(fd);
	return rc;
}

/* Segments first..last of TARGET's path, each its own copy or else the archived one. */
static err_code search_window(repo *r, const side *t, uint64_t first, uint64_t last,
							  ckpt_search *c)
{
	wal_reader *rd = wal_reader_new(t->ctl.seg_size, first * t->ctl.seg_size, on_record, c);
	err_code rc = E_OK;
	uint64_t end;
	for (uint64_t seg = first; seg <= last && rc == E_OK && !wal_reader_done(rd, &end); seg++) {
		char name[WAL_NAME_LEN + 1];
		seg_name(t, seg, name);
		char *path = xasprintf("%s/%s", t->waldir, name);
		if (present(t, name))
			rc = feed_local(path, rd);
		else
			rc = wal_feed_archived(r, name, rd);
		if (rc == E_NOTFOUND)
			err_set(E_NOTFOUND, "wal-restore: %s, which holds TARGET's WAL before the point "
								"the timelines diverge, is neither in %s nor archived",
					name, t->waldir);
		free(path);
	}
	wal_reader_free(rd);
	return rc;
}

static err_code last_checkpoint(repo *r, const side *t, uint64_t diverged, ckpt_search *c)
{
	uint64_t dseg = (diverged > 0 ? diverged - 1 : 0) / t->ctl.seg_size;
	for (uint64_t back = 1;; back *= 2) {
		uint64_t first = dseg > back ? dseg - back : 1;
		*c = (ckpt_search){ .before = diverged };
		TRY(search_window(r, t, first, dseg, c));
		if (c->found)
			return E_OK;
		if (first <= 1 || back >= SEARCH_MAX_SEGMENTS)
			return err_set(E_NOTFOUND, "wal-restore: no checkpoint record in TARGET's WAL "
									   "before the point the timelines diverge");
	}
}

/* Segments from_lsn's to to_lsn's of the side's path into its pg_wal; *got counts them. */
static err_code supply_range(repo *r, const wal_settings *cfg, const side *s, uint64_t from_lsn,
							 uint64_t to_lsn, size_t *got)
{
	for (uint64_t seg = from_lsn / s->ctl.seg_size; seg <= to_lsn / s->ctl.seg_size; seg++) {
		char name[WAL_NAME_LEN + 1];
		bool fetched;
		seg_name(s, seg, name);
		TRY(supply(r, cfg, s, name, &fetched));
		*got += fetched;
	}
	return E_OK;
}

err_code wal_restore(repo *r, const wal_settings *cfg, const char *target, const char *source)
{
	side t, s;
	err_code rc = open_side(target, "TARGET", &t);
	if (rc == E_OK)
		rc = open_side(source, "SOURCE", &s);
	else
		memset(&s, 0, sizeof(s));
	if (rc == E_OK && strcmp(t.dir, s.dir) == 0)
		rc = err_set(E_CONFIG, "wal-restore: TARGET and SOURCE are one directory, %s", t.dir);
	if (rc == E_OK && t.ctl.system_id != s.ctl.system_id)
		rc = err_set(E_CONFIG, "wal-restore: TARGET %s (system identifier %llu) and SOURCE %s "
							   "(%llu) are not copies of one cluster",
					 t.dir, (unsigned long long)t.ctl.system_id, s.dir,
					 (unsigned long long)s.ctl.system_id);
	if (rc == E_OK && t.ctl.seg_size != s.ctl.seg_size)
		rc = err_set(E_CONFIG, "wal-restore: TARGET and SOURCE have WAL segments of different "
							   "sizes");
	if (rc == E_OK)
		rc = read_path(r, cfg, &t);
	if (rc == E_OK)
		rc = read_path(r, cfg, &s);
	uint64_t at = 0;
	uint32_t tli = 0;
	if (rc == E_OK)
		rc = diverge(&t, &s, &at, &tli);
	ckpt_search c = { 0 };
	if (rc == E_OK)
		rc = last_checkpoint(r, &t, at, &c);
	size_t got_t = 0, got_s = 0;
	if (rc == E_OK) {
		char d[32], ck[32], redo[32];
		pg_lsn_format(at, d);
		pg_lsn_format(c.lsn, ck);
		pg_lsn_format(c.redo, redo);
		log_info("wal-restore: the timelines diverge at %s on timeline %u; TARGET's last "
				 "checkpoint before it is at %s (REDO %s)",
				 d, tli, ck, redo);
		/* from the REDO point on both sides: pg_rewind may keep TARGET's older segments */
		rc = supply_range(r, cfg, &t, c.redo, t.ctl.checkpoint, &got_t);
	}
	if (rc == E_OK)
		rc = supply_range(r, cfg, &s, c.redo, s.ctl.checkpoint, &got_s);
	if (rc == E_OK && got_t + got_s == 0)
		log_info("No WAL files to restore");
	else if (rc == E_OK)
		log_info("wal-restore: %zu WAL files restored into %s, %zu into %s", got_t, t.waldir,
				 got_s, s.waldir);
	side_free(&t);
	side_free(&s);
	return rc;
}
