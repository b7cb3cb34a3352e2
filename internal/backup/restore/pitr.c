/*
 * Point-in-time recovery in one backup-fetch: the backup a recovery target needs (the newest
 * whose end is before the target, by LSN and time, on the timelines recovery follows), the
 * proof that the archive holds the WAL from it to the target, and, after the restore, the
 * settings that make PostgreSQL recover to the target.
 */
#include "internal/backup/backup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/backup/restore/fetch_impl.h"
#include "internal/catalog/catalog.h"
#include "internal/pg/pg.h"

typedef struct candidate {
	char *name;
	uint64_t start_lsn, finish_lsn;
	int64_t finish_us;
	bool empty; /* holds no objects: nothing to restore */
} candidate;

typedef struct candidates {
	candidate *c;
	size_t n;
} candidates;

static void candidates_free(candidates *cs)
{
	for (size_t i = 0; i < cs->n; i++)
		free(cs->c[i].name);
	free(cs->c);
}

static int64_t rfc3339_us(const char *text)
{
	time_t sec;
	long nsec;
	if (text == NULL || !time_parse_rfc3339(text, &sec, &nsec))
		return INT64_MAX; /* unknown: never "before" a target time */
	return (int64_t)sec * 1000000 + nsec / 1000;
}

/* The backups on the path recovery follows (their start and end on its timelines). */
static err_code list_candidates(repo *r, const wal_path *path, candidates *out)
{
	memset(out, 0, sizeof(*out));
	backup_refs refs;
	TRY(catalog_backups(r, &refs));
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < refs.len; i++) {
		unsigned tli;
		if (sscanf(refs.items[i].name, "base_%8X", &tli) != 1)
			continue;
		backup_sentinel s;
		rc = catalog_sentinel_read(r, refs.items[i].name, &s);
		if (rc == E_NOTFOUND ||
			catalog_sentinel_skip(rc, refs.items[i].name, "it is not a candidate")) {
			err_clear();
			rc = E_OK;
			continue;
		}
		if (rc != E_OK)
			break;
		if (wal_path_tli_at(path, s.lsn) == (uint32_t)tli &&
			wal_path_tli_at(path, s.finish_lsn) == (uint32_t)tli &&
			s.finish_lsn != 0) {
			out->c = xrealloc(out->c, (out->n + 1) * sizeof(candidate));
			out->c[out->n++] = (candidate){ xstrdup(refs.items[i].name), s.lsn, s.finish_lsn,
											rfc3339_us(s.finish_time), false };
		}
		catalog_sentinel_free(&s);
	}
	catalog_backups_free(&refs);
	if (rc != E_OK)
		candidates_free(out);
	return rc;
}

/* The newest candidate (by end LSN) that ends at or before lsn and, with a time, before it. */
static candidate *newest_before(const candidates *cs, uint64_t lsn, int64_t time_us)
{
	candidate *best = NULL;
	for (size_t i = 0; i < cs->n; i++) {
		candidate *c = &cs->c[i];
		if (c->empty || c->finish_lsn > lsn || (time_us != 0 && c->finish_us >= time_us))
			continue;
		if (best == NULL || c->finish_lsn > best->finish_lsn)
			best = c;
	}
	return best;
}

/*
 * newest_before among the backups that hold objects: one of a sentinel and metadata only (a
 * volume snapshot's, which StackGres writes by hand) has nothing backup-fetch can restore.
 */
static err_code restorable_before(repo *r, candidates *cs, uint64_t lsn, int64_t time_us,
								  const candidate **out)
{
	for (;;) {
		candidate *c = newest_before(cs, lsn, time_us);
		*out = c;
		if (c == NULL)
			return E_OK;
		level_parts lp;
		TRY(level_parts_list(r, c->name, &lp));
		c->empty = lp.tars.len == 0;
		level_parts_free(&lp);
		if (!c->empty)
			return E_OK;
		log_info("recovery target: passing over %s, which holds no objects (a sentinel and "
				 "metadata only, as a volume snapshot's)",
				 c->name);
	}
}

static void format_time(int64_t us, char out[48])
{
	time_t sec = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	char buf[32];
	strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(out, 48, "%s.%06ld+00", buf, (long)(us % 1000000));
}

/* Why the WAL read does not reach the target: a missing segment, or where the WAL ends. */
static err_code unreachable(const recovery_target *t, const char *from, const target_reach *x)
{
	char end[32], last[48] = "none";
	pg_lsn_format(x->end_lsn, end);
	if (x->last_commit_us != 0)
		format_time(x->last_commit_us, last);
	if (x->stop.kind == WAL_END_DAMAGED) {
		char at[32];
		pg_lsn_format(x->stop.lsn, at);
		return err_set(E_CORRUPT,
					   "backup-fetch: target %s is not reachable from %s: the WAL record at %s "
					   "in %s is damaged (%s); the archived WAL is valid only up to %s (last "
					   "commit: %s)",
					   t->text, from, at, x->stop_object, x->stop.why, end, last);
	}
	if (x->lost[0] != '\0')
		return err_set(E_NOTFOUND,
					   "backup-fetch: target %s is not reachable from %s: WAL segment %s is "
					   "missing from the archive: %s; recovery cannot cross that gap (the "
					   "archived WAL ends at %s, last commit: %s)",
					   t->text, from, x->missing, x->lost, end, last);
	if (x->missing[0] != '\0' && x->gap)
		return err_set(E_NOTFOUND,
					   "backup-fetch: target %s is not reachable from %s: WAL segment %s is "
					   "missing from the archive (later segments exist)",
					   t->text, from, x->missing);
	if (x->stop.kind == WAL_END_INVALID)
		return err_set(E_NOTFOUND,
					   "backup-fetch: target %s is not reachable from %s: the archived WAL of "
					   "timeline %u ends at %s in %s (%s) (last commit: %s)",
					   t->text, from, x->timeline, end, x->stop_object, x->stop.why, last);
	return err_set(E_NOTFOUND,
				   "backup-fetch: target %s is not reachable from %s: the archived WAL of "
				   "timeline %u ends at %s%s%s (last commit: %s)",
				   t->text, from, x->timeline, end, x->missing[0] ? ", before segment " : "",
				   x->missing, last);
}

/*
 * Two histories after the target: a timeline on the path branched before it while its parent's
 * archived WAL reaches it too (a test restore that archived its new timeline, an old primary
 * that went on writing). Which one is meant only the operator knows (--target-timeline).
 */
static err_code check_branches(wal_archive *a, const recovery_target *t,
							   const target_reach *reach)
{
	const wal_path path = *wal_archive_path(a);
	err_code rc = E_OK;
	for (size_t i = path.n; rc == E_OK && i-- > 1;) {
		uint64_t branch = path.begin[i];
		if (reach->reached && reach->lsn < branch)
			continue; /* reached before the branch: one history */
		target_reach other = { 0 };
		rc = wal_archive_follow(a, path.tli[i - 1]);
		if (rc == E_OK)
			rc = wal_reach_target(a, branch, t, &other);
		if (rc == E_OK && other.reached && other.lsn >= branch) {
			char at[32], there[32];
			pg_lsn_format(branch, at);
			pg_lsn_format(other.lsn, there);
			rc = err_set(E_CONFIG,
						 "backup-fetch: target %s is after timeline %u branched from timeline "
						 "%u at %s, and timeline %u's archived WAL reaches it too (at %s): two "
						 "histories hold it; choose one with --target-timeline %u or "
						 "--target-timeline %u",
						 t->text, path.tli[i], path.tli[i - 1], at, path.tli[i - 1], there,
						 path.tli[path.n - 1], path.tli[i - 1]);
		}
	}
	err_code back = wal_archive_follow(a, path.tli[path.n - 1]);
	return rc != E_OK ? rc : back;
}

/* A target before the point-in-time window a thinning delete left: its WAL is gone. */
static err_code outside_window(const recovery_target *t, const retention_window *w)
{
	char from[32];
	pg_lsn_format(w->from_lsn, from);
	return err_set(E_NOTFOUND,
				   "backup-fetch: target %s is outside the point-in-time window: delete retain "
				   "--pitr-window %s (planned %s) kept the archived WAL continuous only from "
				   "the end of backup %s (%s, LSN %s); an older backup restores to its own end "
				   "(backup-fetch DEST NAME)",
				   t->text, w->window, w->recorded, w->from_backup, w->from_text, from);
}

/* Whether target t (at lsn, when found in the WAL; else 0) falls before the window w. */
static bool before_window(const recovery_target *t, uint64_t lsn, const retention_window *w)
{
	if (t->kind == TARGET_TIME)
		return t->time_us < (int64_t)w->from_time * 1000000;
	if (t->kind == TARGET_LSN)
		return t->lsn < w->from_lsn;
	return lsn != 0 && lsn < w->from_lsn;
}

/* backup_pick_for_target, once the window w (NULL: none) cannot refuse the target. */
static err_code pick(repo *r, const backup_settings *cfg, recovery_target *t, char **name,
					 target_reach *reach, const retention_window *w)
{
	wal_archive *a;
	TRY(wal_archive_open(r, cfg->wal, &a));
	err_code rc = t->timeline != 0 ? wal_archive_follow(a, t->timeline) : E_OK;
	if (rc != E_OK) {
		wal_archive_close(a);
		return err_wrap(rc, "backup-fetch --target-timeline %u", t->timeline);
	}
	const wal_path *path = wal_archive_path(a);
	candidates cs;
	rc = list_candidates(r, path, &cs);
	if (rc != E_OK) {
		wal_archive_close(a);
		return rc;
	}
	const candidate *pick = NULL;
	if (cs.n == 0) {
		rc = err_set(E_NOTFOUND, "backup-fetch: no backup on timeline %u or its ancestors",
					 path->tli[path->n - 1]);
	} else if (t->kind == TARGET_TIME || t->kind == TARGET_LSN) {
		rc = t->kind == TARGET_TIME ? restorable_before(r, &cs, UINT64_MAX, t->time_us, &pick)
									: restorable_before(r, &cs, t->lsn, 0, &pick);
		if (rc == E_OK && pick == NULL) {
			char end[32];
			pg_lsn_format(cs.c[0].finish_lsn, end);
			rc = err_set(E_NOTFOUND,
						 "backup-fetch: target %s is before the end of every backup (the "
						 "oldest, %s, ends at %s)",
						 t->text, cs.c[0].name, end);
		}
		if (rc == E_OK)
			rc = wal_reach_target(a, pick->start_lsn, t, reach);
		if (rc == E_OK && t->timeline == 0)
			rc = check_branches(a, t, reach);
		if (rc == E_OK && !reach->reached)
			rc = unreachable(t, pick->name, reach);
	} else {
		/*
		 * A name or a transaction: found in the WAL from the oldest backup on (from the
		 * window's first backup when the WAL before it was thinned).
		 */
		const candidate *oldest = &cs.c[0];
		for (size_t i = 1; i < cs.n; i++)
			if (cs.c[i].start_lsn < oldest->start_lsn)
				oldest = &cs.c[i];
		for (size_t i = 0; w != NULL && i < cs.n; i++)
			if (strcmp(cs.c[i].name, w->from_backup) == 0)
				oldest = &cs.c[i];
		rc = wal_reach_target(a, oldest->start_lsn, t, reach);
		if (rc == E_OK && t->timeline == 0)
			rc = check_branches(a, t, reach);
		if (rc == E_OK && !reach->reached && w != NULL)
			rc = outside_window(t, w); /* or later than the archive: the window says which */
		if (rc == E_OK && !reach->reached)
			rc = unreachable(t, oldest->name, reach);
		if (rc == E_OK)
			rc = restorable_before(r, &cs, reach->lsn, 0, &pick);
		if (rc == E_OK && pick == NULL) {
			char at[32];
			pg_lsn_format(reach->lsn, at);
			rc = err_set(E_NOTFOUND,
						 "backup-fetch: target %s (at %s) is before the end of every backup",
						 t->text, at);
		}
	}
	if (rc == E_OK && pick != NULL) {
		char at[32];
		pg_lsn_format(reach->lsn, at);
		log_info("recovery target %s: backup %s, the archived WAL reaches it at %s on "
				 "timeline %u",
				 t->text, pick->name, at, reach->timeline);
		*name = xstrdup(pick->name);
		/* what was proven is what recovery follows, not whatever history is newest then */
		t->timeline = reach->timeline;
	}
	candidates_free(&cs);
	wal_archive_close(a);
	return rc;
}

err_code backup_pick_for_target(repo *r, const backup_settings *cfg, recovery_target *t,
								char **name, target_reach *reach)
{
	*name = NULL;
	retention_window w;
	bool windowed;
	TRY(catalog_window_get(r, &w, &windowed));
	err_code wrc = windowed && before_window(t, 0, &w) ? outside_window(t, &w) : E_OK;
	if (wrc == E_OK) {
		wrc = pick(r, cfg, t, name, reach, windowed ? &w : NULL);
		if (wrc == E_OK && windowed && before_window(t, reach->lsn, &w)) {
			free(*name);
			*name = NULL;
			wrc = outside_window(t, &w);
		}
	}
	catalog_window_free(&w);
	return wrc;
}

/* Appends s to out as a single-quoted postgresql.conf value. */
static void conf_quote(FILE *out, const char *s)
{
	fputc('\'', out);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', out);
		fputc(*s, out);
	}
	fputc('\'', out);
}

/* The major version a restored directory's PG_VERSION names, 0 when unreadable. */
static int dest_major(const char *dest)
{
	char *path = xasprintf("%s/PG_VERSION", dest);
	FILE *f = fopen(path, "r");
	free(path);
	int major = 0;
	if (f != NULL) {
		if (fscanf(f, "%d", &major) != 1)
			major = 0;
		fclose(f);
	}
	return major;
}

/*
 * A cluster started from a PITR restore promotes into a new timeline and, with the backup's
 * archive_command, archives that timeline into the repository it came from, where a later
 * recovery to a time after the branch (recovery_target_timeline = 'latest') follows it.
 */
static void write_archiving_off(FILE *f, const char *dest)
{
	fputs("# Archiving off: started as restored, this cluster would archive its new timeline "
		  "into\n# the repository it was restored from, and later recoveries there could follow "
		  "it.\n# To archive, point archive_command at a new prefix and remove these lines "
		  "(or restore\n# with backup-fetch --keep-archiving).\n"
		  "archive_mode = 'off'\narchive_command = ''\n",
		  f);
	/* An unknown name in postgresql.auto.conf stops the server before 15. */
	if (dest_major(dest) >= 15)
		fputs("archive_library = ''\n", f);
}

err_code backup_write_recovery(const char *dest, const recovery_target *t,
							   const char *restore_command, const char *action,
							   bool keep_archiving)
{
	static const char *const setting[] = { [TARGET_TIME] = "recovery_target_time",
										   [TARGET_LSN] = "recovery_target_lsn",
										   [TARGET_NAME] = "recovery_target_name",
										   [TARGET_XID] = "recovery_target_xid" };
	char value[48];
	const char *v = t->text;
	if (t->kind == TARGET_TIME) {
		format_time(t->time_us, value);
		v = value;
	} else if (t->kind == TARGET_LSN) {
		pg_lsn_format(t->lsn, value);
		v = value;
	}
	char *path = xasprintf("%s/postgresql.auto.conf", dest);
	FILE *f = fopen(path, "a");
	err_code rc = E_OK;
	if (f == NULL) {
		rc = err_errno(E_IO, errno, "backup-fetch: %s", path);
	} else {
		fprintf(f, "# recovery to %s, written by walc backup-fetch\nrestore_command = ",
				t->text);
		conf_quote(f, restore_command);
		fprintf(f, "\n%s = ", setting[t->kind]);
		conf_quote(f, v);
		if (t->timeline != 0)
			fprintf(f, "\nrecovery_target_timeline = '%u'\nrecovery_target_action = ",
					t->timeline);
		else
			fprintf(f, "\nrecovery_target_timeline = 'latest'\nrecovery_target_action = ");
		conf_quote(f, action);
		fputc('\n', f);
		if (!keep_archiving)
			write_archiving_off(f, dest);
		if (fflush(f) != 0 || fsync(fileno(f)) != 0)
			rc = err_errno(E_IO, errno, "backup-fetch: writing %s", path);
		if (fclose(f) != 0 && rc == E_OK)
			rc = err_errno(E_IO, errno, "backup-fetch: writing %s", path);
	}
	if (rc == E_OK && !keep_archiving)
		log_info("archiving turned off in %s (archive_mode = off): this cluster would archive "
				 "its new timeline into the repository it came from; archive to a new prefix, "
				 "or restore with --keep-archiving to keep the backup's settings",
				 path);
	free(path);
	if (rc != E_OK)
		return rc;
	path = xasprintf("%s/recovery.signal", dest);
	FILE *sig = fopen(path, "w");
	if (sig == NULL || fclose(sig) != 0)
		rc = err_errno(E_IO, errno, "backup-fetch: %s", path);
	free(path);
	return rc;
}

/* Whether a postgresql.conf value turns archive_mode on (on, always, or a true boolean). */
static bool archive_mode_on(const char *value)
{
	static const char *const on[] = { "on", "always", "true", "yes", "1" };
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++)
		if (strcasecmp(value, on[i]) == 0)
			return true;
	return false;
}

/* The last archive_mode a configuration file sets: 1 on, 0 off, -1 not set (or unreadable). */
static int conf_archive_mode(const char *path)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	int mode = -1;
	char line[1024];
	while (fgets(line, sizeof(line), f) != NULL) {
		char value[64];
		if (sscanf(line, " archive_mode = '%63[^']'", value) == 1 ||
			sscanf(line, " archive_mode = %63[A-Za-z0-9]", value) == 1)
			mode = archive_mode_on(value) ? 1 : 0;
	}
	fclose(f);
	return mode;
}

void backup_note_archiving(const char *dest)
{
	static const char *const files[] = { "postgresql.auto.conf", "postgresql.conf" };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char *path = xasprintf("%s/%s", dest, files[i]);
		int mode = conf_archive_mode(path);
		free(path);
		if (mode == 0)
			return;
		if (mode == 1) {
			log_info("the restored configuration archives WAL (archive_mode in %s): a cluster "
					 "started from it as a new primary must archive to a new prefix, not into "
					 "the repository it came from",
					 files[i]);
			return;
		}
	}
}
