/*
 * wal-internal: the index of what wal_005/ holds, per timeline (segments, history), that
 * wal-show, wal-verify and recovery targets read; what a WAL file must be before it is stored
 * or handed over; the WAL recorded lost.
 */
#ifndef WALC_INTERNAL_WAL_WAL_IMPL_H
#define WALC_INTERNAL_WAL_WAL_IMPL_H

#include <jansson.h>

#include "internal/core/core.h"
#include "internal/pg/pg.h"
#include "internal/repo/repo.h"

typedef struct timeline {
	uint32_t id;
	uint32_t parent;
	uint64_t switch_lsn;
	bool has_history;
	uint64_t *segs; /* sorted, unique */
	size_t nsegs;
	size_t cap;
	int backups;
} timeline;

typedef struct wal_index {
	timeline *tl;
	size_t n;
	uint64_t segsize;
} wal_index;

/*
 * Whether an object of wal_005/ (base: its key there) is a segment: its name alone or with a
 * codec's extension, not a .partial, a .backup or WAL-G's metadata (.json).
 */
bool wal_object_is_segment(const char *base);
/* Lists wal_005/ (and with backups, counts each timeline's backups); timelines sorted by id. */
err_code wal_index_build(repo *r, const config *cfg, bool backups, wal_index *ix);
void wal_index_free(wal_index *ix);
bool wal_index_has(const wal_index *ix, uint32_t tli, uint64_t segno);
/* The timeline that holds segment s on the way to timeline cur, from cur's history. */
uint32_t wal_index_tli_for(const wal_index *ix, uint32_t cur, uint64_t s);
/* Timeline id's entry, or NULL. */
const timeline *wal_index_timeline(const wal_index *ix, uint32_t id);

/*
 * The WAL files walc checks by their name (wal-push archives any file, as WAL-G): a segment
 * or .partial, a timeline history file, a backup history file.
 */
typedef enum wal_file_kind {
	WAL_FILE_OTHER,
	WAL_FILE_SEGMENT,
	WAL_FILE_HISTORY,
	WAL_FILE_BACKUP
} wal_file_kind;
wal_file_kind wal_file_kind_of(const char *name);
#define WAL_FILE_CHECK_MAX ((size_t)1 << 20) /* a history file is read whole up to this */
/* How many of a file's first bytes wal_file_check needs (0 for other names). */
size_t wal_file_head_need(const char *name);
/*
 * E_CORRUPT, saying what is wrong, when the file named name, of size bytes and starting with
 * buf (len bytes, wal_file_head_need's or all there are), is not what its name says: a segment
 * by pg's wal_segment_check (WALG_PG_WAL_SIZE where set) and, when dest (where wal-fetch puts
 * it) is given, of the cluster the repository's marker names when there is one (or of the
 * cluster being recovered there, whose pg_control is beside it); a history file that parses
 * for its timeline; a backup history file that starts as PostgreSQL writes one.
 */
err_code wal_file_check(repo *r, const config *cfg, const char *name, const unsigned char *buf,
						size_t len, uint64_t size, const char *dest);
/* The first WAL_LONG_HEADER_LEN bytes of object key, decoded: how many there were. */
size_t wal_object_head(repo *r, const char *key, unsigned char *head);
/* The segment size WALG_PG_WAL_SIZE sets, 0 when it is not set. */
uint64_t wal_configured_seg_size(const config *cfg);
/*
 * *ok when sysid is the cluster's the repository's marker names (*ours; 0 when there is no
 * marker, and any is), or the cluster's being recovered where wal-fetch writes dest (NULL:
 * none).
 */
err_code wal_cluster_ok(repo *r, uint64_t sysid, const char *dest, bool *ok, uint64_t *ours);
/* The system identifier the repository's cluster marker records, 0 when there is none. */
err_code wal_marker_sysid(repo *r, uint64_t *sysid);
/*
 * The file a fetch writes at path (file_sink_new: durable or not), made only once what passed
 * is what name says (wal_file_check, for dest).
 */
err_code wal_checked_file_new(repo *r, const config *cfg, const char *name, const char *dest,
							  const char *path, bool durable, sink **out);
/* Archived WAL file name (a segment), decoded, fed to rd. E_NOTFOUND when not archived. */
err_code wal_feed_archived(repo *r, const char *name, wal_reader *rd);
/* A JSON object at the repository's root; *doc NULL when there is none. */
err_code wal_read_json(repo *r, const char *key, json_t **doc);

/*
 * WAL-G's marker folder (<PGDATA>/pg_wal/walg_data/walg_archive_status, or under /tmp without
 * PGDATA): wal-push's markers of files uploaded in the background, and BULK WAL metadata
 * waiting for its group.
 */
char *wal_marker_dir(const config *cfg);
/*
 * WALG_UPLOAD_WAL_METADATA for WAL file name, made at sec.nsec: nothing for NOMETADATA,
 * wal_005/<name>.json for INDIVIDUAL; for BULK the entry is staged in the marker folder and
 * the group's object stored with the segment whose name ends in F.
 */
err_code wal_metadata_store(repo *r, const config *cfg, const char *name, time_t sec, long nsec);

/*
 * WAL known lost (wal-receive's invalidated slot): runs of segments recorded in a root object
 * WAL-G ignores, which wal-verify reports as lost.
 */
#define WAL_LOST_OBJECT "walc_wal_lost.json"
typedef struct wal_lost_gap {
	uint32_t tli;
	uint64_t first, last;
} wal_lost_gap;
typedef struct wal_lost {
	wal_lost_gap *gaps;
	size_t n;
} wal_lost;
/* Adds the segments first to last of timeline tli, and why they are lost. */
err_code wal_lost_record(repo *r, uint32_t tli, const char *first, const char *last,
						 const char *why);
err_code wal_lost_read(repo *r, uint64_t seg_size, wal_lost *out);
bool wal_lost_has(const wal_lost *l, uint32_t tli, uint64_t segno);
void wal_lost_free(wal_lost *l);

#endif
