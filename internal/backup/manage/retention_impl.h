/*
 * backup-internal: retention planning as plain data. retention.c loads backups, claims and
 * listings from the repository and carries a plan out; retplan.c decides, touching nothing.
 */
#ifndef WALC_INTERNAL_BACKUP_RETENTION_IMPL_H
#define WALC_INTERNAL_BACKUP_RETENTION_IMPL_H

#include "internal/backup/backup.h"

typedef struct retain_backup {
	char *name;
	backup_sentinel s;
	bool permanent;
	backup_ref ref; /* its place in the order LATEST follows (ref.name is name) */
	time_t sec;		/* start time, or the sentinel's mtime */
	long nsec;
	time_t pick_sec; /* what a time given to delete compares with (see load_one) */
	long pick_nsec;
	uint32_t tli;
	uint64_t seg;	  /* start segment number */
	uint64_t end_seg; /* segment holding finish LSN - 1 */
	time_t finish_sec; /* its end (the sentinel's finish time, else sec) */
	int cal[4];		   /* its start's day, ISO week, month, year (retain_calendar) */
	bool verified;	   /* its backup-verify passed (walc_verified.json) */
	char *verified_at; /* when, for messages */
	bool keep;
	bool gone;	 /* selected for deletion */
	bool onward; /* kept with the WAL from its start to now; else only its own range */
	char *why;	 /* why it is kept, for the plan's table */
} retain_backup;

/* A backup whose sentinel cannot be read: neither counted nor deleted (but by everything). */
typedef struct retain_skipped {
	char *name;
	bool permanent; /* metadata.json says so */
} retain_skipped;

typedef struct retain_set {
	retain_backup *b; /* oldest first (retain_sort) */
	size_t n;
	retain_skipped *skipped;
	size_t nskipped;
	uint64_t segsize;
	claim_list running; /* pushes still writing: their base, objects and WAL are kept */
	claim_list stale;	/* claims of pushes that died: their objects are garbage */
	bool use_start_time; /* --use-sentinel-time */
} retain_set;
void retain_set_free(retain_set *st);
/* Orders as catalog_backup_cmp does (LATEST is the last). */
void retain_sort(retain_set *st);
retain_backup *retain_find(const retain_set *st, const char *name);
/* The first 24-hex-digit run of name as a WAL position (backup names, WAL object keys). */
bool retain_position(const char *name, uint64_t segsize, uint32_t *tli, uint64_t *seg);
/* A start and finish LSN's segments, as b's seg and end_seg (the name gives the start). */
void retain_set_range(retain_backup *b, uint64_t segsize);
/*
 * Each backup's calendar periods (cal: day, ISO week, month, year of its start time) in the
 * process's time zone (TZ); the text of one ("2026-03-04", "2026-W10", "2026-03", "2026").
 */
enum { CAL_DAY, CAL_WEEK, CAL_MONTH, CAL_YEAR };
void retain_calendar(retain_set *st);
void retain_period_text(int kind, int value, char out[16]);
/* The newest backup whose verification passed, or NULL. */
retain_backup *retain_newest_verified(const retain_set *st);

/* What a delete mode asks the plan to cover; act false: nothing to do (said why). */
typedef struct retain_scope {
	bool act;
	bool backups, wal, orphans, every;
	/* retain with --pitr-window: WAL is continuous from window_from's start (thinned before) */
	const retain_backup *window_from;
} retain_scope;
/*
 * Marks what the mode keeps and deletes, as WAL-G chooses it (reference §14) with walc's
 * rules: every ancestor of a kept delta and the base of a running delta push are kept, and so
 * is the newest backup whose verification passed, with the WAL from it to now (delete target
 * of it is refused, delete everything without FORCE too); deleting what a running push needs
 * is refused (E_EXISTS). retain with calendar buckets or a point-in-time window keeps the
 * newest backup of each period and thins the WAL before the window (see select_gfs). now
 * judges times.
 */
err_code retain_select(retain_set *st, const delete_options *o, time_t now, retain_scope *sc);

/* The repository as listed for the plan; a list the scope does not cover may be empty. */
typedef struct retain_listing {
	repo_objs backups;	  /* under basebackups_005/, recursively */
	repo_objs wal;		  /* under wal_005/ */
	repo_objs temporaries; /* hidden temporaries of writers no longer alive */
	const repo_obj *marker; /* the cluster marker, or NULL */
	const repo_obj *window; /* the point-in-time window's record, or NULL */
	time_t now;
} retain_listing;

typedef struct retain_plan {
	repo_objs del; /* in order: sentinels before the rest of their backups */
	uint64_t bytes;
} retain_plan;
/* Backups marked gone, orphans of failed pushes, and WAL no kept backup can need. */
void retain_plan_objects(const retain_set *st, const retain_scope *sc, const retain_listing *l,
						 retain_plan *p);

/*
 * Hidden temporaries below dir of writers killed mid-object (file storage), added to out; not
 * those of a process alive here: a running writer's temporary grows as it writes.
 */
err_code retain_dead_temporaries(repo *r, const char *dir, repo_objs *out);

/* Refusing a delete that would remove what a running push needs: one line naming it. */
err_code retain_running_error(const claim_info *c, const char *why);

#endif
