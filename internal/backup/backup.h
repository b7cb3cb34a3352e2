/*
 * backup: base backups in WAL-G's layout: backup-push, backup-fetch, backup-list, and the
 * sentinel, metadata.json and files_metadata.json they read and write.
 */
#ifndef WALC_INTERNAL_BACKUP_BACKUP_H
#define WALC_INTERNAL_BACKUP_BACKUP_H

#include <jansson.h>

#include "internal/catalog/catalog.h"
#include "internal/core/core.h"
#include "internal/repo/repo.h"
#include "internal/wal/wal.h"

/* What backup reads of the settings; WAL's, and through them the cluster's, are wal's. */
typedef struct backup_settings {
	const wal_settings *wal;		/* the backup's own WAL, PGDATA, WALG_PG_WAL_SIZE */
	long upload_disk_concurrency;	/* WALG_UPLOAD_DISK_CONCURRENCY */
	long tar_size_threshold;		/* WALG_TAR_SIZE_THRESHOLD, bytes */
	long alive_check_ms;			/* WALG_ALIVE_CHECK_INTERVAL, 0 = off */
	long stop_backup_timeout_ms;	/* WALG_STOP_BACKUP_TIMEOUT, 0 = wait */
	char *sentinel_user_data;		/* WALG_SENTINEL_USER_DATA, JSON text */
	long delta_max_steps;			/* WALG_DELTA_MAX_STEPS, 0 = full backups only */
	char *delta_origin;				/* WALG_DELTA_ORIGIN: LATEST or LATEST_FULL */
	bool delta_origin_full;			/* ... it is LATEST_FULL */
	char *delta_from_name;			/* WALG_DELTA_FROM_NAME */
	char *delta_from_user_data;		/* WALG_DELTA_FROM_USER_DATA */
	bool without_files_metadata;	/* WALG_WITHOUT_FILES_METADATA */
	bool disable_partial_restore;	/* WALG_DISABLE_PARTIAL_RESTORE */
	bool verify_page_checksums;		/* WALG_VERIFY_PAGE_CHECKSUMS */
	bool store_all_corrupt_blocks;	/* WALG_STORE_ALL_CORRUPT_BLOCKS */
	long disk_rate_limit;			/* WALG_DISK_RATE_LIMIT, bytes/s, 0 = none */
	char *remote_compression;		/* WALG_REMOTE_COMPRESSION (walc extension), NULL = none */
} backup_settings;

/* backup-push */
typedef struct push_options {
	const char *pgdata;	   /* data directory; NULL = remote mode */
	bool full;
	bool permanent;
	const char *user_data; /* JSON text, or NULL */
	const char *delta_from_name;	  /* --delta-from-name */
	const char *delta_from_user_data; /* --delta-from-user-data */
	bool verify;					  /* --verify */
	bool store_all_corrupt;			  /* --store-all-corrupt */
	bool without_files_metadata;	  /* --without-files-metadata */
	/*
	 * catchup-push (into the repository handle's folder, catchup_005/): a delta of the pages
	 * changed since catchup_from_lsn, every relation file an increment, no file skipped, the
	 * server's configuration files left out.
	 */
	bool catchup;
	uint64_t catchup_from_lsn;
} push_options;
err_code backup_push(repo *r, const backup_settings *cfg, const push_options *opt);

/* backup-fetch */
typedef struct fetch_options {
	const char *dest;
	const char *name;		  /* name or LATEST, or NULL with user_data */
	const char *user_data;	  /* --target-user-data: the backup with this user data (JSON) */
	const char *mask;		  /* --mask: only files whose path matches this glob */
	const char *restore_only; /* --restore-only: databases and tables (WAL-G's partial restore) */
	const char *restore_spec; /* path or NULL */
	bool original_tablespaces; /* tablespaces at the locations the backup recorded */
	bool fsync;
	int concurrency;
	bool delta;	 /* DEST holds an old copy: fetch only what differs */
	bool force;	 /* delta restore onto another cluster's directory (or a crashed server's) */
	/* Point-in-time recovery: the target (name is then NULL), with what recovery needs. */
	recovery_target *target; /* its timeline is set to the one the archive proves */
	const backup_settings *cfg;
	const char *restore_command; /* the command, as postgresql.conf takes it */
	const char *target_action;	 /* recovery_target_action */
	bool keep_archiving;		 /* with a target: leave the backup's archiving settings */
} fetch_options;
err_code backup_fetch(repo *r, const fetch_options *opt);
/*
 * The backup a target needs: the newest whose end is before it (by LSN, and by time for a
 * time), on the timelines recovery follows to the newest (or to t->timeline when set); names
 * and transactions are first found in the WAL. E_NOTFOUND, saying what is missing, when the
 * archive does not reach it; E_CONFIG when two timelines' histories both hold it (a branch
 * before the target, its parent's WAL past it) and t->timeline does not choose. Sets
 * t->timeline to the timeline the proof followed.
 */
err_code backup_pick_for_target(repo *r, const backup_settings *cfg, recovery_target *t,
								char **name, target_reach *reach);
/*
 * Appends restore_command and the target to dest's postgresql.auto.conf, with archiving
 * turned off unless keep_archiving (said in one line); recovery.signal.
 */
err_code backup_write_recovery(const char *dest, const recovery_target *t,
							   const char *restore_command, const char *action,
							   bool keep_archiving);
/* A plain restore: one line when the restored configuration archives (a new primary's risk). */
void backup_note_archiving(const char *dest);

/* catchup-fetch: the repository handle addresses catchup_005/ */
typedef struct catchup_options {
	const char *dest; /* the standby's data directory, stopped */
	const char *name;
	int concurrency;
} catchup_options;
/*
 * Applies catchup backup name onto dest, a cleanly stopped data directory of the backup's
 * cluster holding every change before the backup's LSN (or what an interrupted catchup-fetch
 * left): each file and increment is read and checked before the first of dest's files
 * changes; pg_control comes back last.
 */
err_code backup_catchup_fetch(repo *r, const catchup_options *opt);

/* backup-verify */
typedef struct backup_verify_options {
	const char *name; /* NAME or LATEST; NULL with all */
	bool all;
	bool wal;		  /* also the WAL from the stop to the next backup or the newest segment */
	bool json;
	int concurrency;
	uint64_t seg_size;
	bool record; /* keep each backup's outcome with it (catalog_verified_put) */
} backup_verify_options;
/*
 * Reads every object of the backup (or each backup) and its delta chain without writing
 * anything but, with record, each backup's outcome (walc_verified.json), and the WAL its
 * restore needs; one line per problem on out, then a summary (or one JSON document).
 * *problems counts them. An error only when the check itself could not run.
 */
err_code backup_verify(repo *r, const backup_verify_options *o, uint64_t *problems, FILE *out);

/* delete */
typedef enum delete_mode {
	DELETE_RETAIN,
	DELETE_BEFORE,
	DELETE_EVERYTHING,
	DELETE_TARGET,
	DELETE_GARBAGE,
} delete_mode;
typedef enum delete_modifier { MOD_NONE, MOD_FULL, MOD_FIND_FULL, MOD_ARCHIVES, MOD_BACKUPS } delete_modifier;
typedef struct delete_options {
	delete_mode mode;
	delete_modifier modifier;
	int count;			   /* retain N */
	const char *after;	   /* retain --after NAME|TIME */
	const char *point;	   /* before NAME|TIME; target NAME */
	const char *user_data; /* target --target-user-data */
	bool force;			   /* everything FORCE */
	bool confirm;		   /* otherwise a dry run */
	bool without_backup_check; /* garbage: even with no non-permanent backup */
	bool use_sentinel_time;	   /* a time compares with backups' start times, not sentinels' */
	/*
	 * retain's calendar buckets: the newest backup of each of the last N days (ISO weeks,
	 * months, years) that have one, in the process's time zone (time_zone names it); 0: none.
	 */
	int daily, weekly, monthly, yearly;
	const char *time_zone;
	/*
	 * retain: WAL kept continuous only for this long back (from the newest backup that ended
	 * before it); older kept backups keep their own WAL only. 0: no thinning. pitr_window is
	 * the text given, recorded for backup-fetch's refusal of targets before it.
	 */
	long pitr_window_s;
	const char *pitr_window;
	/* before planning: backup-verify backups newest first until one passes (its record kept) */
	bool verify;
} delete_options;
/*
 * Lists (dry run) or deletes what the mode selects; one line per object on out. retain with
 * buckets or a window prints its plan first: each backup, kept or not and why, its WAL.
 */
err_code backup_delete(repo *r, const backup_settings *cfg, const delete_options *o, FILE *out);

/* rekey (walc only) */
typedef struct rekey_options {
	const char *const *names; /* backups (or LATEST) whose objects are rekeyed; none: all */
	size_t nnames;
	int concurrency;
} rekey_options;
/*
 * Re-encrypts every encrypted object (WAL files, tar partitions, manifests; of the named
 * backups only, when names are given) that an older key of the ring opens with the current
 * key: each copied whole into walc_rekey/KEY first, then put back under KEY atomically once
 * its bytes decrypt with the current key alone to the plaintext the old object held. Objects
 * of the current key are left alone (a rerun finishes a killed run); one that no key opens is
 * a problem (one line on out, counted in *problems) and is left as it is. Once the whole
 * repository is done without problems, its cluster marker records the current key's method.
 */
err_code backup_rekey(repo *r, const rekey_options *o, uint64_t *problems, FILE *out);

/* backup-mark: permanent (with its chain) or, with impermanent, not. */
err_code backup_mark(repo *r, const char *name, bool impermanent);

/* backup-list */
typedef struct list_options {
	bool pretty;
	bool json;
	bool detail;
	/*
	 * With detail, json and cfg: each backup's recovery window, from the archived WAL (read
	 * whole along the newest timeline's history: asked for, never by default).
	 */
	bool windows;
	const backup_settings *cfg;
} list_options;
err_code backup_list(repo *r, const list_options *opt, FILE *out);

/* copy (WAL-G's): backups and their WAL from one repository into another, as stored */
typedef struct copy_options {
	const char *backup_name; /* a name or LATEST, with its bases; NULL: every backup */
	bool with_history;		 /* WAL from the backups' start through the newest archived */
	int concurrency;
	uint64_t seg_size; /* WALG_PG_WAL_SIZE: tried first when finding a backup's segments */
} copy_options;
typedef struct copy_result {
	size_t backups;
	uint64_t copied, copied_bytes, present, server_side;
	double lag_seconds; /* how long the oldest object copied had been in the source (0: none) */
} copy_result;
/*
 * Copies what from holds of the backups (every object of each, and of its delta's bases) and
 * the WAL each needs (its start to its end; to the newest with with_history; every timeline
 * history) into to, unchanged, each object checked after its copy (repo_copy_object). Sentinels
 * go last, a base's before its deltas'. Objects to holds already (same size) are not copied;
 * metadata.json and sentinels that differ are replaced, any other that differs is an error
 * before anything is copied, as is a to of another cluster (its marker).
 */
err_code backup_copy(repo *from, repo *to, const copy_options *o, copy_result *out);

#endif
