/*
 * backup: base backups in WAL-G's layout: backup-push, backup-fetch, backup-list, and the
 * sentinel, metadata.json and files_metadata.json they read and write.
 */
#ifndef WALC_INTERNAL_BACKUP_BACKUP_H
#define WALC_INTERNAL_BACKUP_BACKUP_H

#include <jansson.h>

#include "internal/core/core.h"
#include "internal/repo/repo.h"

#define SENTINEL_SUFFIX "_backup_stop_sentinel.json"

/* What a sentinel says (reference §5.4); JSON kept for fields passed through unchanged. */
typedef struct backup_sentinel {
	uint64_t lsn;
	uint64_t finish_lsn;
	bool is_delta;
	uint64_t delta_lsn;
	char *delta_from;
	char *delta_full_name;
	int delta_count;
	int pg_version;
	bool have_system_id;
	uint64_t system_id;
	uint64_t uncompressed_size;
	uint64_t compressed_size;
	uint64_t data_catalog_size;
	int version;
	bool files_metadata_disabled;
	bool is_permanent;
	char *start_time; /* RFC 3339 */
	char *finish_time;
	char *hostname;
	char *data_dir;
	json_t *spec;		/* tablespace spec or NULL */
	json_t *user_data;	/* or NULL */
} backup_sentinel;

/* One backup as listed: its name, the sentinel's time, and (when read) its sentinel. */
typedef struct backup_ref {
	char *name;
	time_t mtime;
	long mtime_nsec;
} backup_ref;

typedef struct backup_refs {
	backup_ref *items;
	size_t len;
} backup_refs;

/* Every backup with a sentinel, oldest sentinel first (WAL-G's order). */
err_code backup_list_refs(repo *r, backup_refs *out);
void backup_refs_free(backup_refs *l);
/* "LATEST" or a name: the backup that exists under that name. */
err_code backup_resolve(repo *r, const char *name_or_latest, char **name_out);

/* Reads and parses a small JSON object (sentinel, metadata) with a size cap. */
err_code backup_read_json(repo *r, const char *key, size_t max, json_t **out);
/* Stores plain JSON (sentinels and metadata are never compressed or encrypted). */
err_code backup_put_json(repo *r, const char *key, const json_t *doc);
err_code backup_sentinel_read(repo *r, const char *name, backup_sentinel *out);
err_code backup_sentinel_parse(const json_t *root, const char *name, backup_sentinel *out);
json_t *backup_sentinel_json(const backup_sentinel *s);
void backup_sentinel_free(backup_sentinel *s);
/* Case-insensitive member lookup, as Go's encoding/json does when WAL-G reads. */
json_t *json_get_ci(const json_t *obj, const char *key);

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
} push_options;
err_code backup_push(repo *r, const config *cfg, const push_options *opt);

/* backup-fetch */
typedef struct fetch_options {
	const char *dest;
	const char *name;		  /* name or LATEST */
	const char *restore_spec; /* path or NULL */
	bool fsync;
	int concurrency;
	bool delta;	 /* DEST holds an old copy: fetch only what differs */
	bool force;	 /* delta restore onto another cluster's directory */
} fetch_options;
err_code backup_fetch(repo *r, const fetch_options *opt);

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
} delete_options;
/* Lists (dry run) or deletes what the mode selects; one line per object on out. */
err_code backup_delete(repo *r, const config *cfg, const delete_options *o, FILE *out);

/* backup-mark: permanent (with its chain) or, with impermanent, not. */
err_code backup_mark(repo *r, const char *name, bool impermanent);

/* backup-list */
typedef struct list_options {
	bool pretty;
	bool json;
	bool detail;
} list_options;
err_code backup_list(repo *r, const list_options *opt, FILE *out);

#endif
