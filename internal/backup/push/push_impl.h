/* backup-internal: the state shared by the walker and the packers of one backup-push. */
#ifndef WALC_INTERNAL_BACKUP_PUSH_IMPL_H
#define WALC_INTERNAL_BACKUP_PUSH_IMPL_H

#include <pthread.h>
#include <sys/stat.h>

#include "internal/backup/backup.h"
#include "internal/pipe/pipe.h"
#include "internal/tar/tar.h"

/* The base of a delta backup, chosen before the backup starts. */
typedef struct delta_base {
	bool active;
	bool catchup; /* catchup-push's: no base backup, every relation file an increment since lsn */
	char *name;		 /* DeltaFrom */
	char *full_name; /* DeltaFullName */
	int count;		 /* DeltaCount of the new backup */
	uint64_t lsn;	 /* the base's start LSN: pages at or past it changed since */
	uint64_t finish_lsn;
	bool have_system_id;
	uint64_t system_id;
	time_t start; /* the base's start time, 0 when unknown */
	long start_nsec;
	/*
	 * Its Files as delta_add_file reads them: each name's pg_name_key with one number, a
	 * 32-bit fingerprint of its MTime (0: unknown or listed twice, never skipped), about 6
	 * bytes a relation file. A file is skipped for an equal fingerprint only if it also
	 * predates the base's start (delta_classify): a file changed since has a later mtime, and
	 * one changed and then given an old mtime is taken for unchanged only if the two MTimes'
	 * fingerprints collide, a chance of 1 in 2^32. A skipped file's record needs nothing
	 * more: delta restore finds its checksum by following IsSkipped down the chain.
	 */
	keytab *files;
} delta_base;

typedef enum delta_kind { DELTA_WHOLE, DELTA_INCREMENT, DELTA_SKIP } delta_kind;

/* Seconds a file must predate its base backup's start before an equal mtime skips it. */
#define DELTA_MTIME_MARGIN 10

err_code delta_choose(repo *r, const backup_settings *cfg, const push_options *opt, delta_base *d);
/* catchup-push's base: the pages changed since from_lsn, of every relation file. */
void delta_catchup(uint64_t from_lsn, delta_base *d);
err_code delta_check(const delta_base *d, uint64_t system_id, uint64_t start_lsn);
void delta_free(delta_base *d);

/*
 * backup name's sentinel s against what PostgreSQL recorded in the backup itself (crosscheck.c):
 * the start LSN against backup_label's START WAL LOCATION, the name's timeline against its
 * START TIMELINE (and the start segment), the system identifier against pg_control, the
 * finish LSN against the STOP WAL LOCATION of the .backup history file in wal_005 (when there
 * is one), all three against metadata.json. fn(arg, object, what) for each disagreement and
 * each record that cannot be read; only a cancellation is returned. A record the configured
 * key cannot decrypt (OpenPGP without a usable secret key) is left unchecked: *locked (when
 * not NULL) says why, or is NULL. seg_size: the WAL segment size.
 */
typedef void (*crosscheck_fn)(void *arg, const char *object, const char *what);
err_code backup_crosscheck(repo *r, const char *name, const backup_sentinel *s, uint64_t seg_size,
						   crosscheck_fn fn, void *arg, char **locked);
/*
 * The base's table, filled from catalog_files_each (a catalog_file_fn taking d), then
 * finished once every entry is in; a name recorded twice is never skipped.
 */
err_code delta_add_file(void *d, const char *name, const json_t *rec);
void delta_files_finish(delta_base *d);
bool delta_is_paged(const char *member, uint64_t size);
delta_kind delta_classify(const delta_base *d, const char *member, const struct stat *sb);
/*
 * Pages of a paged file to store: new ones and those whose LSN is at or past since_lsn, read
 * through the first DELTA_SCAN_CHUNK bytes of buf (a packer's read buffer). *usable is false
 * when a page has an invalid header (store the file whole).
 *
 * A scan's own buffer, allocated and freed for each file, made the push's peak RSS swing by
 * its size (1 MiB each at a time); smaller ones stay resident in the allocator (mimalloc's
 * medium pages). The first 128 KiB of a packer's buffer are touched by its reads anyway.
 */
#define DELTA_SCAN_CHUNK (16u * PG_PAGE_SIZE)
err_code delta_scan(int fd, const char *path, uint64_t size, uint64_t since_lsn,
					unsigned char *buf, uint32_t **blocks, uint32_t *n, bool *usable);
/* Bytes of an increment member holding n pages. */
uint64_t delta_increment_size(uint32_t n);
/*
 * Writes one increment member (reference §8.3) for the pages `blocks` of fd: te gives the
 * name, mode and times; its type and size are set here. buf holds at least one page. h (or
 * NULL) hashes the member's bytes as written: its IncrementChecksum.
 */
err_code delta_write_increment(tar_writer *tw, tar_entry *te, int fd, const char *path,
							   uint64_t file_size, const uint32_t *blocks, uint32_t n,
							   unsigned char *buf, hasher *h);
/* Part of an increment member's content: written, and hashed into h (or NULL). */
err_code delta_put(tar_writer *tw, hasher *h, const void *buf, size_t len);

/* One file or directory found by the walker, sent to a packer. */
typedef struct walk_entry {
	char *path;	  /* absolute path to read */
	char *member; /* tar member name: "/base/1/1259" */
	struct stat st;
} walk_entry;

/*
 * Names packed by front coding (fmeta.c): each keeps only what differs from the one before,
 * a few bytes a name in walk order.
 */
typedef struct namelist {
	unsigned char *data;
	size_t len, cap;
	char *last; /* the name added last */
	size_t last_len, last_cap;
	size_t count;
} namelist;
void namelist_add(namelist *l, const char *name);
void namelist_each(const namelist *l, void (*fn)(void *arg, const char *name), void *arg);
void namelist_free(namelist *l);

typedef struct fmeta fmeta;

typedef struct push_state {
	repo *r;
	const backup_settings *cfg;
	char *pgdata; /* absolute, symlinks resolved */
	char *name;	  /* backup name */
	const char *remote_data_dir; /* the server's, in remote mode (borrowed) */
	char *manifest_key;			 /* remote mode on 17+: the stored server manifest */
	chan *entries;
	group *g;
	rate *disk;	   /* WALG_DISK_RATE_LIMIT, or NULL */
	delta_base delta;
	int part_seq; /* atomic: last part number used */
	pthread_mutex_t lock; /* guards fmeta, spec and published */
	bool no_files_metadata; /* WALG_WITHOUT_FILES_METADATA */
	fmeta *fmeta;			/* files_metadata.json being written, or NULL */
	json_t *spec;			/* tablespace spec, or NULL */
	/* counters, updated atomically */
	uint64_t uncompressed; /* tar member content */
	uint64_t compressed;   /* bytes stored */
	uint64_t catalog;	   /* stat sizes of everything walked */
	uint64_t read_bytes;
	uint64_t nfiles;
	uint64_t corrupt_blocks;
	bool verify;	 /* check page checksums */
	bool archiving;	 /* the server archives WAL (archive_mode on, a command or library) */
	bool in_recovery;	/* the backup runs on a standby */
	uint32_t timeline;	/* of the backup's start segment */
	uint64_t start_lsn; /* the backup's start: pages written since are not checksummed */
	bool store_all; /* record every corrupt block, not just 10 per file */
	claim *claim;	/* this push's claim on its name, once it has one */
	bool claim_lost; /* atomic: set by the claim's renewal thread; the push must stop */
	json_t *published; /* keys of the objects this push stored (guarded by lock) */
	bool mixed;		   /* another writer's objects are in the folder: leave it alone */
	char *gap_before;  /* the newest recorded WAL gap before the backup's start, described */
	uint64_t gap_last; /* ... and its last segment */
} push_state;

typedef struct push_state push_state;

/* One tar partition being written by one thread. */
typedef struct part {
	tar_writer *tw;
	sink *framed; /* under tw: the writer repo_put_long made, where frames are ended */
	char *key;
	namelist members; /* its TarFileSets entry */
	uint64_t content;
	uint64_t stored;   /* bytes of this object so far (at a cut: the next frame's offset) */
	bool frames;	   /* members start frames of their own (pack.c's cut rule) */
	uint64_t frame_in; /* tar bytes since the last cut */
	uint64_t frame_at; /* offset of the frame under way */
} part;
err_code part_open(push_state *st, part *p);
/* Finishes (publishes) the part and records its members. */
err_code part_close(push_state *st, part *p);
/* Drops an unfinished part: nothing of it becomes visible. */
void part_discard(part *p);

void walk_entry_free(walk_entry *e);
/* cmd asked to stop (a signal) or the push lost its claim: long loops stop, the reason set. */
err_code push_stopped(push_state *st);
/*
 * Claims st->name before the backup's first object (two writers never mix objects under one
 * name); lsn and tli are the backup's start, for retention running meanwhile.
 */
err_code push_claim(push_state *st, uint64_t lsn, uint32_t tli);
/* Records a key this push stored (thread-safe), for the check before the sentinel. */
void push_published(push_state *st, const char *key);
/* Records tablespace oid at loc in the sentinel's Spec (thread-safe). */
void spec_add_tablespace(push_state *st, const char *base_prefix, const char *oid,
						 const char *loc);
/* Walks PGDATA and its tablespaces, sending walk_entry* to st->entries, then closes it. */
err_code walk_pgdata(void *arg);
/* Takes entries and packs them into tar partitions until the channel is drained. */
err_code pack_entries(void *arg);
/* The Files record of one entry, in WAL-G's shape. */
json_t *file_record(const struct stat *st, delta_kind kind);

/*
 * files_metadata.json, streamed (fmeta.c). fmeta_open starts it once the push has claimed its
 * name (nothing when WALG_WITHOUT_FILES_METADATA); fmeta_file writes one Files record, taking
 * rec (thread-safe); fmeta_part keeps a closed partition's names for TarFileSets, taking them;
 * fmeta_finish ends and publishes it; fmeta_free discards one that was not finished.
 */
err_code fmeta_open(push_state *st);
err_code fmeta_file(push_state *st, const char *member, json_t *rec);
void fmeta_part(push_state *st, const char *base, namelist *names);
err_code fmeta_finish(push_state *st);
void fmeta_free(fmeta *f);
/*
 * Another root member of files_metadata.json after Files (fmeta_member), its text written as
 * it comes (fmeta_text): WAL-G reads the document by its keys, in any order.
 */
err_code fmeta_member(push_state *st, const char *key);
err_code fmeta_text(push_state *st, const char *text, size_t len);
/*
 * WAL-G's DatabasesByNames (dbnames.c), into files_metadata.json as the relations are read:
 * every database that allows connections, its relations by name with their files; a database
 * that cannot be read is left out with a warning.
 */
err_code push_databases_by_names(push_state *st, pg_session *s);
/* Stores one small tar object (pg_control, backup_label) with the given members. */
err_code pack_small_tar(push_state *st, const char *base, const char *const *names,
						const char *const *data, const size_t *lens, int n, uint32_t mode,
						char **key_out);
/* pg_control's own tar, written after the data. */
err_code push_store_control(push_state *st, const char *control, size_t len);
/*
 * A backup taken on a standby: the standby archives nothing, so the backup is complete only
 * once the primary has archived its WAL (start to stop segment of timeline tli) into this
 * repository. Waits for it, checking storage, up to WALG_STOP_BACKUP_TIMEOUT (0: as long as it
 * takes), saying what it waits for; the error names the segment still missing.
 */
err_code push_wait_stored(push_state *st, uint64_t start_lsn, uint64_t end_lsn, uint32_t tli);
/* After the stop: backup_label, then the JSON with the sentinel last. */
err_code push_store_tail(push_state *st, backup_sentinel *sen, const char *label,
						 const char *spcmap);
/* --add-user-data or WALG_SENTINEL_USER_DATA, parsed (NULL text: *out NULL). */
err_code push_parse_user_data(const char *text, json_t **out);

/* backup-push over a replication connection (BASE_BACKUP), into the same layout. */
err_code push_remote_all(const backup_settings *cfg, const push_options *opt, push_state *st,
						 backup_sentinel *sen);

/*
 * Remote deltas (remote_incr.c). The server's manifest of a remote backup on 17+ is stored
 * beside its metadata, outside tar_partitions/ (WAL-G extracts that folder wholesale and
 * ignores other objects): what the next incremental backup uploads.
 */
#define REMOTE_MANIFEST "walc_backup_manifest"
typedef struct pg_server_info pg_server_info;
err_code remote_delta_choose(push_state *st, const push_options *opt, const pg_server_info *si,
							 membuf *manifest);
/* The manifest of backup name, if it has one (*found), into `into` (capped). */
err_code remote_manifest_read(repo *r, const char *name, membuf *into, bool *found);
/* A writer for this backup's manifest object; sets st->manifest_key. */
err_code remote_manifest_open(push_state *st, sink **out);
/* "dir/INCREMENTAL.16384" -> "dir/16384" (*real, to free); false for other names. */
bool incr_member_name(const char *name, char **real);
/* Drops backup_label's "INCREMENTAL FROM ..." lines. */
void incr_strip_label(membuf *label);
/*
 * One INCREMENTAL.<relfile> member converted into one WAL-G increment member, streaming:
 * te gives the output member's name (borrowed until the first write), mode and times.
 */
typedef struct incr_conv incr_conv;
incr_conv *incr_conv_new(uint64_t member_size, const tar_entry *te);
err_code incr_conv_write(incr_conv *c, tar_writer *tw, const void *buf, size_t len);
/* Zero pages past the truncation length, then the member's end. */
err_code incr_conv_end(incr_conv *c, tar_writer *tw);
/* The increment member's size (once begun). */
uint64_t incr_conv_stored(const incr_conv *c);
/* The checksum of the increment member's bytes (once ended): its IncrementChecksum. */
void incr_conv_sum(incr_conv *c, char out[HASH_TEXT_LEN + 1]);
void incr_conv_free(incr_conv *c);

#endif
