/*
 * catalog: what a repository holds, as backup and wal commands read it: the backups (their
 * sentinels, oldest first, resolved by name or LATEST) and the small JSON objects that
 * describe them. Sentinels and metadata are plain JSON, never compressed or encrypted.
 */
#ifndef WALC_INTERNAL_CATALOG_CATALOG_H
#define WALC_INTERNAL_CATALOG_CATALOG_H

#include <jansson.h>

#include "internal/core/core.h"
#include "internal/repo/repo.h"

/* Size caps of what is read into memory: a sentinel or metadata.json, files_metadata.json. */
#define CATALOG_JSON_MAX ((size_t)16 << 20)
#define CATALOG_FILES_MAX ((size_t)1 << 30)

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
err_code catalog_backups(repo *r, backup_refs *out);
void catalog_backups_free(backup_refs *l);
/* "LATEST" or a name: the backup that exists under that name. */
err_code catalog_resolve(repo *r, const char *name_or_latest, char **name_out);

/* Reads and parses a small JSON object (sentinel, metadata) with a size cap. */
err_code catalog_read_json(repo *r, const char *key, size_t max, json_t **out);
/* Stores plain JSON (sentinels and metadata are never compressed or encrypted). */
err_code catalog_put_json(repo *r, const char *key, const json_t *doc);
err_code catalog_sentinel_read(repo *r, const char *name, backup_sentinel *out);
err_code catalog_sentinel_parse(const json_t *root, const char *name, backup_sentinel *out);
json_t *catalog_sentinel_json(const backup_sentinel *s);
void catalog_sentinel_free(backup_sentinel *s);
/* Case-insensitive member lookup, as Go's encoding/json does when WAL-G reads. */
json_t *catalog_json_get(const json_t *obj, const char *key);

#endif
