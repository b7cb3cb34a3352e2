/*
 * wal: archiving and restoring WAL files (segments, .history, .partial, .backup) as
 * PostgreSQL's archive_command and restore_command call them.
 */
#ifndef WALC_INTERNAL_WAL_WAL_H
#define WALC_INTERNAL_WAL_WAL_H

#include "internal/core/core.h"
#include "internal/pg/pg.h"
#include "internal/repo/repo.h"

struct catalog_settings;

/* What wal reads of the settings; the cluster's and the repository's rule are shared. */
typedef struct wal_settings {
	const pg_settings *pg;						/* PGDATA, WALG_PG_WAL_SIZE */
	const struct catalog_settings *catalog;	/* WALG_ALLOW_SYSTEM_ID_CHANGE (catalog's) */
	bool prevent_wal_overwrite;			/* WALG_PREVENT_WAL_OVERWRITE */
	long total_bg_uploaded_limit;		/* TOTAL_BG_UPLOADED_LIMIT */
	bool pg_ready_rename;				/* PG_READY_RENAME */
	char *wal_backlog_max;				/* WALG_WAL_BACKLOG_MAX (walc extension), as given */
	uint64_t wal_backlog_max_bytes;		/* ... in bytes, 0 = no limit */
	char *prefetch_dir;					/* WALG_PREFETCH_DIR */
	long integrity_max_delayed_wals;	/* WALG_INTEGRITY_MAX_DELAYED_WALS */
	char *slot_name;					/* WALG_SLOTNAME, wal-receive's replication slot */
	char *upload_wal_metadata;			/* WALG_UPLOAD_WAL_METADATA: NOMETADATA, INDIVIDUAL, BULK */
} wal_settings;

/*
 * The WAL waiting for archiving in a pg_wal: the files PostgreSQL marked .ready that no
 * wal-push has uploaded yet (a background upload's marker says one has), or for wal-receive
 * what the server keeps for its slot past the segment being received.
 */
typedef struct wal_backlog {
	uint64_t bytes;
	uint64_t files;
	double oldest_s;  /* how long the oldest has waited (since it was last written), 0: none */
	uint64_t dropped; /* segments dropped unarchived there so far, past WALG_WAL_BACKLOG_MAX */
	uint64_t limit;	  /* WALG_WAL_BACKLOG_MAX in bytes, 0: none */
} wal_backlog;
/*
 * Told the backlog when it is worth telling: with the WARNING logged at most once a minute
 * while archiving is behind, when segments were dropped, and once when it has caught up.
 * Called from any thread of the archiving call.
 */
typedef void (*wal_backlog_fn)(void *arg, const wal_backlog *b);
/* The backlog of the pg_wal at wal_dir, for metrics read at any time. */
err_code wal_backlog_read(const wal_settings *cfg, const char *wal_dir, wal_backlog *out);

/*
 * archive_command: stores the file at path as wal_005/<name>.<ext>, and meanwhile uploads
 * other files PostgreSQL has marked .ready (WALG_UPLOAD_CONCURRENCY - 1 at once, at most
 * TOTAL_BG_UPLOADED_LIMIT - 1), leaving WAL-G's markers in walg_data/walg_archive_status so
 * PostgreSQL's later call for them returns at once.
 *
 * The upload itself: stores the file at path as wal_005/<name>.<ext>. With overwrite protection (the setting,
 * or always for .history) an existing object with identical content is success without an
 * upload and different content is E_EXISTS, leaving the stored object as it was.
 */
err_code wal_push(repo *r, const wal_settings *cfg, const char *path, wal_backlog_fn report,
				  void *arg);
/* The upload of one file alone, without markers or background uploads. */
err_code wal_push_one(repo *r, const wal_settings *cfg, const char *path);
/* The same upload of len bytes in memory as WAL file name (a segment, .partial or .history). */
err_code wal_push_mem(repo *r, const wal_settings *cfg, const char *name, const void *buf,
					  size_t len);
/*
 * PostgreSQL has archived pgdata's WAL file name: its .done exists, or neither the file nor
 * its .ready is left.
 */
bool wal_archived(const char *pgdata, const char *name);
/*
 * Uploads pgdata's WAL file name if PostgreSQL marked it .ready (*pushed), without a marker
 * and without touching archive_status: backup-push's own WAL, ahead of a slow archiver.
 */
err_code wal_push_if_ready(repo *r, const wal_settings *cfg, const char *pgdata, const char *name,
						   bool *pushed);
/*
 * Restores WAL file name into dest atomically, whatever extension it was stored with.
 * E_NOTFOUND with "Archive '<name>' does not exist." when there is none; on any failure dest
 * is not created. *prefetch says whether the segments after name should be prefetched now
 * (wal_prefetch, which the caller runs where it fits: a child process, or a thread).
 */
err_code wal_fetch(repo *r, const wal_settings *cfg, const char *name, const char *dest,
				   bool *prefetch);

/*
 * wal-restore: before `pg_rewind -D target --source-pgdata=source`, the WAL it needs from the
 * archive into the two stopped clusters' pg_wal where missing: target's from the last
 * checkpoint before the timelines diverge to its end, source's from that checkpoint's REDO
 * point to its end, and their history files. Refuses clusters that are running, not shut down
 * cleanly, of different systems, or not diverged.
 */
err_code wal_restore(repo *r, const wal_settings *cfg, const char *target, const char *source);

/*
 * Timeline tli's history (its parents and switch points, oldest first; *e to free): from the
 * file at path, or with path NULL from the archive (E_NOTFOUND when it is not there). E_CORRUPT
 * naming the file when it does not parse for tli.
 */
err_code wal_history_load(repo *r, uint32_t tli, const char *path, pg_history_entry **e,
						  size_t *n);

/*
 * wal-receive: streams WAL from the server (PG* settings) through physical slot
 * cfg->slot_name, created if missing, storing each segment once complete and only then
 * reporting it flushed; .partial and the new history file when the server's timeline ends.
 * With WALG_WAL_BACKLOG_MAX, a segment completed while the server keeps more than that for the
 * slot is dropped (recorded lost, reported flushed); report hears the backlog as for wal_push.
 * The journal of drops is <PGDATA>/pg_wal/walc_data, or /tmp/walc_data without PGDATA.
 * Returns E_OK once asked to stop (cancel_requested), an error when streaming cannot go on.
 */
err_code wal_receive(repo *r, const wal_settings *cfg, wal_backlog_fn report, void *arg);

/*
 * WAL recorded lost: gaps in the archive that walc knows of (wal-receive's invalidated slot,
 * segments dropped past WALG_WAL_BACKLOG_MAX), kept in the repository's walc_wal_lost.json.
 */
typedef struct wal_lost_gap {
	uint32_t tli;
	uint64_t first, last;
	char why[256];
} wal_lost_gap;
typedef struct wal_lost {
	wal_lost_gap *gaps;
	size_t n;
} wal_lost;
err_code wal_lost_read(repo *r, uint64_t seg_size, wal_lost *out);
/*
 * The same, with the drops pg_wal's journal at wal_dir holds (recorded in the repository or
 * still waiting for it to be reachable): what a backup of that cluster must check its WAL
 * against.
 */
err_code wal_lost_read_local(repo *r, const char *wal_dir, uint64_t seg_size, wal_lost *out);
/* The gap holding segment segno of timeline tli, or NULL. */
const wal_lost_gap *wal_lost_at(const wal_lost *l, uint32_t tli, uint64_t segno);
/* "WAL segments A to B are recorded lost (why)", newly allocated. */
char *wal_lost_describe(const wal_lost_gap *g, uint64_t seg_size);
void wal_lost_free(wal_lost *l);

/* wal-show: timelines, ranges and gaps in wal_005/, as a table or detailed JSON. */
err_code wal_show(repo *r, const wal_settings *cfg, bool detailed_json, bool without_backups,
				  FILE *out);
/* wal-verify's checks and WAL-G's options for them. */
typedef struct verify_options {
	bool integrity;			 /* every segment from the earliest backup to now is archived */
	bool timeline;			 /* storage's highest timeline is the cluster's */
	bool json;
	const char *backup_name; /* integrity from this backup's start, not the earliest's */
	uint32_t at_timeline;	 /* with at_lsn: "now" is this, not the cluster's position */
	uint64_t at_lsn;
} verify_options;
/*
 * wal-verify. The earliest backup is the oldest non-permanent one on a timeline the current
 * one descends from (WAL-G's rule). *failed when a check says FAILURE.
 */
err_code wal_verify(repo *r, const wal_settings *cfg, const verify_options *o, bool *failed,
					FILE *out);

/* A recovery target, as PostgreSQL's recovery_target_time, _lsn, _name and _xid name one. */
typedef enum target_kind { TARGET_TIME = 1, TARGET_LSN, TARGET_NAME, TARGET_XID } target_kind;
typedef struct recovery_target {
	target_kind kind;
	int64_t time_us; /* Unix time, microseconds */
	uint64_t lsn;
	uint32_t xid;
	const char *name; /* borrowed */
	const char *text; /* the value as given, borrowed */
	uint32_t timeline; /* recovery_target_timeline: the one recovery follows (0: not chosen yet) */
} recovery_target;
/* kind: "time", "lsn", "name" or "xid"; errors name the option --target-KIND. */
err_code recovery_target_parse(const char *kind, const char *value, recovery_target *out);

/*
 * The timelines recovery follows to the newest one in the archive, oldest first, each with
 * the LSN where it begins (0 for the first), from the history files.
 */
#define WAL_PATH_MAX 256
#define WAL_OBJECT_MAX 64 /* "wal_005/<segment>.<extension>" */
typedef struct wal_path {
	size_t n;
	uint32_t tli[WAL_PATH_MAX];
	uint64_t begin[WAL_PATH_MAX];
} wal_path;
/*
 * The archive read once: wal_005/ listed, its history files read. The functions below that
 * take it read WAL through the repository it was opened on.
 */
typedef struct wal_archive wal_archive;
err_code wal_archive_open(repo *r, const wal_settings *cfg, wal_archive **out);
void wal_archive_close(wal_archive *a);
const wal_path *wal_archive_path(const wal_archive *a);
/* Follows timeline tli's history from now on, not the newest's; E_NOTFOUND if it has no WAL. */
err_code wal_archive_follow(wal_archive *a, uint32_t tli);
/*
 * The recorded gap (walc_wal_lost.json) holding the first segment that starts at or after lsn
 * on the path followed (where a run of WAL that ends at lsn would go on), described, newly
 * allocated; NULL when there is none.
 */
char *wal_archive_gap_at(const wal_archive *a, uint64_t lsn);
/* The timeline of the path that holds lsn. */
uint32_t wal_path_tli_at(const wal_path *p, uint64_t lsn);

/* How far the archived WAL goes toward a target. */
typedef struct target_reach {
	bool reached;
	uint64_t lsn;	 /* the record where recovery stops */
	int64_t time_us; /* its time, for transaction ends and restore points */
	uint32_t timeline; /* the one recovery follows (the archive path's last) */
	uint64_t end_lsn;  /* where the valid WAL read ends */
	int64_t last_commit_us; /* the last commit read, and where (0: none) */
	uint64_t last_commit_lsn;
	char missing[WAL_NAME_LEN + 1]; /* the segment that was not in the archive, or "" */
	bool gap;						/* ... while later segments are */
	wal_ending stop;				/* why the valid WAL read ended (NONE: it did not) */
	char stop_object[WAL_OBJECT_MAX]; /* the object holding that record or page */
	char lost[512]; /* the missing segment's recorded gap, described (wal_lost_describe), or "" */
} target_reach;
/*
 * Reads the archived WAL from the segment of from_lsn, along the history of the timeline
 * followed (the newest unless wal_archive_follow said otherwise), until a record reaches the target (PostgreSQL's stopping rule with
 * recovery_target_inclusive on) or the WAL ends: a segment missing, or invalid bytes.
 */
err_code wal_reach_target(wal_archive *a, uint64_t from_lsn, const recovery_target *t,
						  target_reach *out);

/*
 * What the archived WAL lets a restore reach, read whole along the newest timeline's history
 * from its oldest segment: the runs of consecutive segments, each with the last commit read
 * in it, and the restore points. Reads every archived segment on that path.
 */
typedef struct wal_run {
	uint64_t start_lsn, end_lsn; /* end: where the valid WAL of the run ends */
	int64_t last_commit_us;		 /* 0: none */
	uint64_t last_commit_lsn;
	wal_ending stop;				  /* why it ends there, unless a segment is missing (NONE) */
	char stop_object[WAL_OBJECT_MAX]; /* the object holding that record or page */
} wal_run;
typedef struct wal_restore_point {
	char name[65];
	int64_t time_us;
	uint64_t lsn;
} wal_restore_point;
typedef struct wal_windows {
	uint32_t timeline;
	wal_run *runs;
	size_t nruns;
	wal_restore_point *points;
	size_t npoints;
} wal_windows;
err_code wal_read_windows(wal_archive *a, wal_windows *out);
void wal_windows_free(wal_windows *w);
/* wal-show --restore-points: name, time, LSN and timeline of each, as a table or JSON. */
err_code wal_show_restore_points(repo *r, const wal_settings *cfg, bool json, FILE *out);
/* The run holding lsn, or NULL. */
const wal_run *wal_windows_run_at(const wal_windows *w, uint64_t lsn);
/*
 * backup-verify's WAL check: every segment from `from` to `to` (inclusive) of timeline tli is
 * archived, decodes (authenticated, decompressed), is seg_size bytes, and its pages pass pg's
 * WAL page rule (sysid 0 = any system); for tli > 1 its history file exists and is sound.
 * concurrency segments are read at once (fewer if their decoders would not fit the memory
 * budget of backup-fetch's streams). Each problem goes to fn(arg, object, what), from any of
 * those threads, naming the object or segment; the return is an error only for what stops the
 * check itself (cancellation). *checked counts segments read.
 */
typedef void (*wal_problem_fn)(void *arg, const char *object, const char *what);
err_code wal_check_range(repo *r, uint64_t seg_size, uint32_t tli, uint64_t from, uint64_t to,
						 uint64_t sysid, int concurrency, wal_problem_fn fn, void *arg,
						 uint64_t *checked);
/* The newest segment of timeline tli in the archive (*found false when it has none). */
err_code wal_newest_segment(repo *r, uint64_t seg_size, uint32_t tli, uint64_t *segno,
							bool *found);
/* The newest segment of timeline tli or of a timeline before it, and its timeline. */
err_code wal_newest_upto(repo *r, uint64_t seg_size, uint32_t tli, uint32_t *tli_out,
						 uint64_t *segno, bool *found);

/* The prefetch directory for a destination: <WALG_PREFETCH_DIR or dest's dir>/.wal-g/prefetch. */
char *prefetch_dir(const wal_settings *cfg, const char *dest);
/* Serves name from the prefetch directory if a complete copy is there (*taken). */
err_code prefetch_take(const wal_settings *cfg, const char *name, const char *dest, bool *taken);
/* Whether fetching name should be followed by prefetching (WALG_DOWNLOAD_CONCURRENCY > 1). */
bool wal_prefetch_wanted(const repo *r, const char *name);
/* Fetches the WALG_DOWNLOAD_CONCURRENCY segments after name into the prefetch directory. */
void wal_prefetch(repo *r, const wal_settings *cfg, const char *name, const char *dest);

#endif
