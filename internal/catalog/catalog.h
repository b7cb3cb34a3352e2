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

/*
 * Size cap of what is read into memory: a sentinel, metadata.json, one entry of
 * files_metadata.json (which is only ever streamed).
 */
#define CATALOG_JSON_MAX ((size_t)16 << 20)

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

/* One backup as listed: its name, its sentinel's time, where its name places it. */
typedef struct backup_ref {
	char *name;
	time_t mtime; /* the sentinel's time in storage */
	long mtime_nsec;
	uint32_t tli; /* the timeline and start segment its name gives (0 when it gives none) */
	uint64_t seg; /* (log << 32) | seg: ordered as the segment's name */
	bool other_cluster; /* its sentinel names another cluster than the repository's marker */
	const char *storage; /* the failover storage whose sentinel was listed (borrowed); NULL: the main one */
} backup_ref;

typedef struct backup_refs {
	backup_ref *items;
	size_t len;
} backup_refs;

/*
 * The order of backups (oldest first) that LATEST, retention and backup-list share: by
 * timeline, then start segment (WAL-G's delete order: the clock of the host that took a backup
 * plays no part), then the sentinel's time and the name. Backups of another cluster than the
 * repository's (other_cluster, after WALG_ALLOW_SYSTEM_ID_CHANGE) come before the rest, by
 * time: their positions are another WAL's.
 */
int catalog_backup_cmp(const backup_ref *a, const backup_ref *b);
/* Every backup with a sentinel, in catalog_backup_cmp's order by name (no sentinel read). */
err_code catalog_backups(repo *r, backup_refs *out);
/*
 * As catalog_backups, with other_cluster set: when the repository records its cluster (the
 * marker), every sentinel is read. An unreadable one counts as the repository's (a WARNING).
 */
err_code catalog_backups_ordered(repo *r, backup_refs *out);
void catalog_backups_free(backup_refs *l);
/*
 * "LATEST" or a name: the backup that exists under that name. LATEST is the newest in
 * catalog_backup_cmp's order whose sentinel can be read (the ones that cannot are skipped
 * with a WARNING naming them). With failover storages, reads then look first in the storage
 * that holds its sentinel (repo_prefer).
 */
err_code catalog_resolve(repo *r, const char *name_or_latest, char **name_out);

/* Reads and parses a small JSON object (sentinel, metadata) with a size cap. */
err_code catalog_read_json(repo *r, const char *key, size_t max, json_t **out);
/* Stores plain JSON (sentinels and metadata are never compressed or encrypted). */
err_code catalog_put_json(repo *r, const char *key, const json_t *doc);
/* As catalog_put_json, but only if key is absent: E_EXISTS when another writer got there. */
err_code catalog_put_json_new(repo *r, const char *key, const json_t *doc);
err_code catalog_sentinel_read(repo *r, const char *name, backup_sentinel *out);
/*
 * A sentinel that cannot be parsed (not JSON, a field missing or of the wrong type: E_CORRUPT)
 * is skipped by whoever lists backups, with one WARNING naming it and saying what follows
 * (why): true then, and the error is cleared.
 */
bool catalog_sentinel_skip(err_code rc, const char *name, const char *why);
err_code catalog_sentinel_parse(const json_t *root, const char *name, backup_sentinel *out);
json_t *catalog_sentinel_json(const backup_sentinel *s);
void catalog_sentinel_free(backup_sentinel *s);
/* Whether a backup is permanent: metadata.json says (backup-mark edits it), else s (or no). */
bool catalog_permanent(repo *r, const char *name, const backup_sentinel *s);
/*
 * The one backup whose user data (metadata.json) equals the JSON text; what names the
 * option in messages. E_NOTFOUND when none does, E_CONFIG when several do.
 */
err_code catalog_find_by_user_data(repo *r, const char *json_text, const char *what,
								   char **name);
/* Case-insensitive member lookup, as Go's encoding/json does when WAL-G reads. */
json_t *catalog_json_get(const json_t *obj, const char *key);
/* The name of the storage holding a backup, as WAL-G's listings print it ("default"). */
const char *catalog_storage_name(const backup_ref *ref);
/* The first 24-hex run of a backup's name: its start segment ("" when none). */
char *catalog_wal_file_of(const char *name);
/*
 * One backup as WAL-G's backup-list --json and wal-show --detailed-json print it (a new
 * object): backup_name, time (the sentinel's), wal_file_name, storage_name, then, when meta
 * (its metadata.json) is given, WAL-G's detail fields in WAL-G's order whatever meta's order,
 * then meta's other members. Operators cut this text by position.
 */
json_t *catalog_backup_json(const backup_ref *ref, json_t *meta);

/*
 * files_metadata.json streamed (files.c): fn(arg, name, rec) for each entry of Files in the
 * order stored, rec that entry's value alone (borrowed for the call, any JSON type: the
 * caller checks it); set_fn(arg, part, member) for each name of each TarFileSets list in
 * order, then set_fn(arg, part, NULL) at the list's end. Either may be NULL. Memory stays one
 * entry (one name of a list) whatever the number of files. The rest of the document is
 * followed to its end but not decoded. E_CORRUPT, naming the object, when the text is not a
 * JSON object with a Files object, or an entry exceeds CATALOG_JSON_MAX; an error of a
 * callback stops the read and is returned.
 */
typedef err_code (*catalog_file_fn)(void *arg, const char *name, const json_t *rec);
typedef err_code (*catalog_set_fn)(void *arg, const char *part, const char *member);
/* The entries of backup's files_metadata.json; E_NOTFOUND when it has none stored. */
err_code catalog_files_each(repo *r, const char *backup, catalog_file_fn fn,
							catalog_set_fn set_fn, void *arg);
/*
 * The same reader for WAL-G's DatabasesByNames (--restore-only's names): fn(arg, database,
 * its {"oid", "tables_new"} object) for each database, *found when the document has it.
 */
err_code catalog_dbnames_each(repo *r, const char *backup, catalog_file_fn fn, void *arg,
							  bool *found);
/* The same reader as a sink, for bytes from elsewhere; what names them in messages. */
sink *catalog_files_sink_new(const char *what, catalog_file_fn fn, catalog_set_fn set_fn,
							 void *arg);

/*
 * files_metadata.json's Files as a keytab keyed by each name's pg_name_key (ftable.c): what a
 * restore or a check looks a member up in, about 5 bytes a relation file (a few more, and 24
 * for its size and checksum, when those are kept and recorded), where a jansson tree
 * takes about 1.3 KB. Names are not kept; a caller that must name files reads Files again.
 */
#define FILE_INCREMENTED 0x01u /* IsIncremented: pages to apply on the base's file */
#define FILE_SKIPPED 0x02u	   /* IsSkipped: unchanged since the base, stored there */
#define FILE_FRAME 0x04u	   /* frame holds FrameOffset */
#define FILE_SIZE 0x08u		   /* Size is recorded */
/*
 * The entry's checksum is recorded as an xxh3-128 text: a whole file's Checksum, or an
 * increment's IncrementChecksum (walc's, of the member's stored bytes: header, block list,
 * pages), which the entry of an increment reads in place of Checksum.
 */
#define FILE_SUM 0x10u
#define FILE_SUM_OTHER 0x20u /* that checksum is some other text: no content ever matches it */
#define FILE_SUMMED (FILE_SIZE | FILE_SUM | FILE_SUM_OTHER) /* entries with a file_sum */

/* One entry, as a lookup gives it. */
typedef struct file_rec {
	uint64_t frame;
	uint32_t flags;
	uint32_t at; /* the index of its file_sum (with sums, and one of FILE_SUMMED, only) */
	size_t idx;	 /* its place in the table, 0 to n - 1 */
} file_rec;

/* Size and Checksum, kept only when the table is read for them. */
typedef struct file_sum {
	uint64_t size;
	uint64_t sum[2];
} file_sum;

typedef struct file_table {
	keytab *recs;
	size_t n;
	bool keep_sums; /* set before filling: sums[at] holds an entry's Size and Checksum */
	file_sum *sums;
	uint32_t added;
	recs adding_sums; /* sums while file_table_add fills them */
} file_table;

/*
 * Backup's Files into out, sorted; with sums, each entry's Size and Checksum too. E_NOTFOUND
 * when it has no files_metadata.json; E_CORRUPT, naming the object, when an entry is not an
 * object, a flag is not true or false, or a name is listed twice.
 */
err_code catalog_file_table(repo *r, const char *backup, bool sums, file_table *out);
/* The same, with set_fn(arg, ...) called for TarFileSets in the same read (catalog_files_each). */
err_code catalog_file_table_sets(repo *r, const char *backup, bool sums, file_table *out,
								 catalog_set_fn set_fn, void *arg);
/* The same steps for bytes from elsewhere: file_table_add per entry, then file_table_end. */
err_code file_table_add(void *table, const char *name, const json_t *rec);
err_code file_table_end(file_table *t, const char *what);
/* Whether t (NULL: no table) lists name, or the name whose pg_name_key is key; then *out. */
bool file_table_find(const file_table *t, const char *name, file_rec *out);
bool file_table_find_key(const file_table *t, const uint64_t key[2], file_rec *out);
typedef void (*file_table_fn)(void *arg, const uint64_t key[2], const file_rec *f);
/* fn for every entry, in key order. */
void file_table_each(const file_table *t, file_table_fn fn, void *arg);
/* f's Size and Checksum, NULL when the table was read without them or f records neither. */
const file_sum *file_table_sum(const file_table *t, const file_rec *f);
void file_table_free(file_table *t);

/*
 * One cluster per repository: the system identifier of the cluster whose WAL and backups the
 * repository holds, recorded by the first walc writer in a root object WAL-G ignores (before
 * that, the newest sentinel's). A writer of another cluster gets E_CONFIG naming both
 * identifiers, unless s->allow_system_id_change, which records the new one.
 * what names the caller in the message ("wal-push 000000010000000000000003"). The marker also
 * records the encryption method (never key material) of the first writer that encrypts: a
 * writer without a key is then refused (E_CONFIG, naming the method and its variables).
 */
#define CATALOG_CLUSTER_MARKER "walc_cluster.json"
typedef struct catalog_settings {
	bool allow_system_id_change; /* WALG_ALLOW_SYSTEM_ID_CHANGE (walc extension) */
} catalog_settings;
err_code catalog_check_cluster(repo *r, uint64_t sysid, const catalog_settings *s,
							   const char *what);
/* The marker's encryption rule alone, for writers of objects that name no cluster. */
err_code catalog_check_encryption(repo *r, const char *what);
/*
 * Once every object is encrypted with this handle's key (rekey): the marker, when there is
 * one, records its method.
 */
err_code catalog_record_encryption(repo *r);
/*
 * The system identifier the marker records, for readers; *have false without a marker (or
 * with one that cannot be read: a WARNING, since readers can do without it).
 */
err_code catalog_marker_sysid(repo *r, bool *have, uint64_t *sysid);

/*
 * Claims: one writer per backup name. A backup-push claims its name (an object created only
 * if absent, basebackups_005/NAME/walc_claim_NNN.json) before its first object and renews it
 * on a thread while it runs; WAL-G ignores these objects.
 */
typedef enum claim_state {
	CLAIM_RUNNING,	/* no sentinel; renewed (by either clock) within 2 minutes, not known gone */
	CLAIM_DEAD,		/* no sentinel, not running: the push died and its objects are garbage */
	CLAIM_COMPLETE, /* the sentinel exists (only name and key are filled in) */
} claim_state;

typedef struct claim_info {
	claim_state state;
	char *name; /* the backup */
	char *key;	/* the claim object */
	int generation;
	char *push_id;
	char *hostname;
	long pid;
	char *boot_id;
	char *pid_ns;
	uint64_t start_lsn;
	uint32_t timeline;
	char *delta_from; /* the base of a delta push, or NULL */
	char *started;	  /* RFC 3339 */
	char *renewed;
	uint64_t renewals;
	time_t renewed_at; /* renewed, parsed; 0 when unreadable */
	time_t stored_at;  /* the claim object's time in storage */
} claim_info;
void catalog_claim_info_free(claim_info *c);

typedef struct claim claim;
/*
 * Claims name for this process. E_EXISTS, with one line naming the other writer, when the
 * backup exists, another push is writing it (checked by watching its renewals for up to 45 s
 * when its clock cannot tell), or objects no walc push claimed are there. The claim of a push
 * that is dead (gone from this machine, or not renewed past its fence) is taken over and the
 * dead push's objects are removed. on_lost(arg), called from the renewal thread when the
 * claim could not be renewed for 30 s or another push took it over, must stop the push.
 */
err_code catalog_claim(repo *r, const char *name, uint64_t start_lsn, uint32_t timeline,
					   const char *delta_from, void (*on_lost)(void *arg), void *arg,
					   claim **out);
/* E_OK while the name is still this push's (asks storage). */
err_code catalog_claim_check(claim *c);
/*
 * Stops renewing, then catalog_claim_check: the last step before the sentinel, so that the
 * sentinel stays the newest object of the backup.
 */
err_code catalog_claim_seal(claim *c);
/* Lost to a takeover or the fence: what this push wrote may belong to another one now. */
bool catalog_claim_lost(claim *c);
const char *catalog_claim_key(const claim *c);
/* For tests: how often a claim is renewed, when its push stops, how long a taker watches. */
void catalog_claim_timing(long renew_ms, long fence_ms, long watch_ms);
/* Stops renewing. drop removes the claim object too (unless it was lost). NULL is a no-op. */
void catalog_claim_end(claim *c, bool drop);

/* The newest claim of every backup folder, in the state one listing shows. */
typedef struct claim_list {
	claim_info *items;
	size_t len;
} claim_list;
err_code catalog_claims(repo *r, claim_list *out);
/* One claim's whole content. */
err_code catalog_claim_read(repo *r, const char *key, claim_info *out);
void catalog_claims_free(claim_list *l);

/*
 * backup-verify's result, kept with the backup in an object WAL-G ignores
 * (basebackups_005/NAME/walc_verified.json): when, what was read, the outcome. Retention
 * keeps the newest backup whose verification passed; backup-list --detail and the metrics
 * show it. A record names the sentinel's start and finish LSN: one left by an earlier backup
 * of the same name (a folder reused after a failed push) does not count.
 */
#define CATALOG_VERIFIED "walc_verified.json"
typedef struct verify_record {
	bool passed;		 /* no problem found */
	uint64_t problems;
	time_t at;			 /* when the verification ended */
	char *at_text;		 /* the same, RFC 3339 */
	char *first_problem; /* NULL when none */
	json_t *checked;	 /* what was read (counts, chain, WAL): owned, may be NULL */
} verify_record;
/* Stores v for backup name (of sentinel s), replacing an earlier record. Borrows v. */
err_code catalog_verified_put(repo *r, const char *name, const backup_sentinel *s,
							  const verify_record *v);
/*
 * The record of backup name: *found false when it has none, or one that does not match s
 * (a WARNING when it is unreadable or another backup's).
 */
err_code catalog_verified_get(repo *r, const char *name, const backup_sentinel *s,
							  verify_record *out, bool *found);
void catalog_verified_free(verify_record *v);
/*
 * The newest backup (catalog_backup_cmp's order) whose verification passed, its sentinel's
 * finish time (0 when it has none) and the record; *found false when none did. Reads records
 * from the newest backup back.
 */
err_code catalog_newest_verified(repo *r, char **name, time_t *finish, verify_record *rec,
								 bool *found);

/*
 * The point-in-time window `delete retain --pitr-window` left (a root object WAL-G ignores,
 * walc_retention.json): WAL is continuous from the end of backup from_backup (from_lsn, at
 * from_time) to now; before it only each kept backup's own WAL is stored.
 */
#define CATALOG_RETENTION_WINDOW "walc_retention.json"
typedef struct retention_window {
	char *window;	   /* as given: "7d" */
	char *recorded;	   /* when the delete that thinned the WAL planned it, RFC 3339 */
	char *from_backup;
	char *from_text;   /* from_time, RFC 3339 */
	time_t from_time;
	uint64_t from_lsn;
} retention_window;
err_code catalog_window_put(repo *r, const retention_window *w);
/* *found false when no delete recorded a window (or the record cannot be read: a WARNING). */
err_code catalog_window_get(repo *r, retention_window *out, bool *found);
void catalog_window_free(retention_window *w);

/*
 * Retention's intent (a root object WAL-G ignores): delete records the backups it is about to
 * remove before it checks for running pushes; a delta push checks its base after claiming.
 */
err_code catalog_deleting_begin(repo *r, const char *const *names, size_t n);
void catalog_deleting_end(repo *r);
/* *who names the delete when one started within the hour is removing backup name, else NULL. */
err_code catalog_deleting(repo *r, const char *name, char **who);

#endif
