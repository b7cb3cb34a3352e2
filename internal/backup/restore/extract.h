/*
 * backup-internal: reading a tar partition member by member (names checked, WAL-G increments
 * parsed), and the two consumers of that reader: the extractor that writes files, and
 * backup-verify's checker that writes nothing.
 */
#ifndef WALC_INTERNAL_BACKUP_EXTRACT_H
#define WALC_INTERNAL_BACKUP_EXTRACT_H

#include "internal/backup/backup.h"
#include "internal/tar/tar.h"

typedef enum member_kind { MEMBER_DIR, MEMBER_FILE, MEMBER_INCREMENT } member_kind;

/* What the member reader calls per member it passes on. Borrowed by the reader. */
typedef struct member_ops {
	/*
	 * A member (never the root, a link or a device): rel is its safe relative path; *take =
	 * false skips its content (and its end).
	 */
	err_code (*begin)(void *ctx, const tar_entry *e, const char *rel, member_kind kind,
					  bool *take);
	/* An increment's header, once its block list is read: the file's size and its pages. */
	err_code (*increment)(void *ctx, uint64_t file_size, uint32_t npages, const uint32_t *blocks);
	/*
	 * Content at offset in the file: in order for a whole file, and for an increment each
	 * page at its block's place, in list order.
	 */
	err_code (*data)(void *ctx, uint64_t offset, const void *buf, size_t len);
	err_code (*end)(void *ctx);
	/*
	 * A member taken disagrees with the Size or checksum its Files entry records (what: how,
	 * one line). NULL: the stream fails there, naming the member.
	 */
	err_code (*mismatch)(void *ctx, const char *member, const char *what);
} member_ops;

/* What the partitions read for one backup held, marked by its member readers on any thread. */
typedef struct held {
	unsigned char *files; /* per entry of the backup's Files (file_rec.idx): a partition held it */
	bool label;			  /* a backup_label file was met */
} held;

/*
 * A sink reading one tar partition of a backup whose files_metadata Files are files (borrowed,
 * NULL = none; IsIncremented says which members are increments): refuses names that leave the
 * directory and link members, parses increments (untrusted bytes: sizes, block numbers and
 * lengths are checked) and calls ops with ctx. Each member taken is held to its Files entry
 * as its bytes pass: a whole file to its Size and Checksum, an increment to the file size
 * and IncrementChecksum recorded. What it meets is marked in h (borrowed, NULL = nothing).
 */
sink *member_reader_new(const member_ops *ops, void *ctx, const file_table *files, held *h);

/* What one backup of a chain contributes, shared read-only by its extraction workers. */
typedef struct extract_level {
	repo *r;				/* where the partitions come from (for backup-fetch's workers) */
	const char *dest;		/* destination directory, absolute, no trailing slash */
	const keytab *need;		/* pg_name_keys of the members to take; NULL = all */
	const file_table *files; /* this backup's Files or NULL */
	bool skip_tablespace_map;
	const char *backup;		/* name, for messages */
	const char *mask;		/* only members matching this glob ("/" + --mask), or NULL */
	bool flush; /* start each file's writeback as it is written (the restore syncs at the end) */
	progress *prog; /* files written are counted here (bytes by the reader of the stream), or NULL */
	/*
	 * catchup-fetch's first phase: nothing in dest is changed. Each file taken is written beside
	 * its place, as <path>EXTRACT_STAGED, and each increment as <path>EXTRACT_STAGED_INC in
	 * WAL-G's increment format; staged(staged_arg, rel, kind, mode) is told of each before it
	 * is written, and of each directory it makes (from any worker). An increment for a file
	 * dest does not have is refused unless it holds every page of the file.
	 */
	bool stage;
	void (*staged)(void *arg, const char *rel, member_kind kind, uint32_t mode);
	void *staged_arg;
} extract_level;
#define EXTRACT_STAGED ".walc-catchup"
#define EXTRACT_STAGED_INC ".walc-catchup-inc"

/* Whether the restore of lvl takes member (key: its pg_name_key, or NULL): --mask, need set. */
bool extract_wanted(const extract_level *lvl, const char *member, const uint64_t key[2]);

/*
 * A sink that extracts a tar stream into lvl->dest (borrows lvl), each file held to its Files
 * entry (member_reader_new); what it meets is marked in h (borrowed, NULL = nothing).
 */
sink *extract_sink_new(const extract_level *lvl, held *h);
/* The same for a run of whole members cut out of a partition (a ranged read), which ends
 * between two members rather than at the end-of-archive block; *seen counts the needed
 * members it met (borrowed). */
sink *extract_run_sink_new(const extract_level *lvl, held *h, size_t *seen);

/* Refuses names that could leave the destination; returns the relative path in out. */
err_code extract_safe_path(const char *member, char *out, size_t outlen);

#endif
