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
#include "internal/wal/wal.h"

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
err_code wal_index_build(repo *r, const wal_settings *cfg, bool backups, wal_index *ix);
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
err_code wal_file_check(repo *r, const wal_settings *cfg, const char *name,
						const unsigned char *buf, size_t len, uint64_t size, const char *dest);
/* The first WAL_LONG_HEADER_LEN bytes of object key, decoded: how many there were. */
size_t wal_object_head(repo *r, const char *key, unsigned char *head);
/* The segment size WALG_PG_WAL_SIZE sets, 0 when it is not set. */
uint64_t wal_configured_seg_size(const wal_settings *cfg);
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
err_code wal_checked_file_new(repo *r, const wal_settings *cfg, const char *name, const char *dest,
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
char *wal_marker_dir(const wal_settings *cfg);
/* A background upload's marker says WAL file name is already stored. */
bool wal_marked(const wal_settings *cfg, const char *name);

/*
 * The bound on the WAL waiting for archiving (backlog.c). Its state (a journal of drops, the
 * last warning, the count) lives in walc_data beside pg_wal's files: wal_state_dir.
 */
char *wal_state_dir(const char *wal_dir);
/* A file waiting in pg_wal for archiving. */
typedef struct wal_waiting {
	char name[64];
	uint64_t size;
	time_t mtime;
} wal_waiting;
/*
 * Which of the waiting files w (by name: oldest first) to drop, drop[i], so that at most limit
 * of the bytes waiting are left: segments only, those may(arg, name) lets go (may NULL: all),
 * oldest first. Returns how many; none when limit is 0.
 */
size_t wal_backlog_pick(const wal_waiting *w, size_t n, uint64_t bytes, uint64_t limit,
						bool (*may)(void *arg, const char *name), void *arg, bool *drop);
/*
 * Segments names (sorted, seg_size bytes each) dropped from storage's archive: into the
 * journal in state_dir, synced, each run of consecutive ones a gap and an ERROR saying who
 * dropped it and why. Nothing may be answered as archived unless this succeeded.
 */
err_code wal_dropped_add(const char *state_dir, const char *storage, const char *const *names,
						 size_t n, uint64_t seg_size, const char *who, const char *why);
/* Whether the journal of the pg_wal at wal_dir holds segment name as dropped. */
bool wal_dropped_has(const char *wal_dir, const char *name);
/*
 * Records in r's walc_wal_lost.json what the journal in state_dir holds dropped from r and
 * not yet recorded: called before anything is stored, so that nothing after a gap is stored
 * before the gap is known. An error when it cannot be written.
 */
err_code wal_dropped_flush(repo *r, const char *state_dir);
/*
 * The warning (at most once a minute while archiving is behind: more files wait than one call
 * uploads at once, the oldest for a minute, or over half the bound), the INFO when it has caught
 * up, and report when either happened or segments were dropped. where names the pg_wal.
 */
void wal_backlog_note(const char *state_dir, const repo *r, const wal_backlog *b,
					  bool dropped, const char *where, wal_backlog_fn report, void *arg);
/*
 * An archiving call's watch of its pg_wal (wal_dir), for the file name it archives: a first
 * look at once, dropping past the bound the oldest waiting segments, name itself among them
 * (*self_dropped: answer it as archived, store nothing); then a look at each tick, from the
 * uploads' scanner, dropping only what claim lets go (the call's own file never). NULL when
 * wal_dir is not a pg_wal (no archive_status).
 */
typedef struct wal_watch wal_watch;
wal_watch *wal_watch_begin(repo *r, const wal_settings *cfg, const char *wal_dir, const char *name,
						   wal_backlog_fn report, void *arg, bool *self_dropped);
void wal_watch_claims(wal_watch *w, bool (*claim)(void *arg, const char *name), void *arg);
void wal_watch_tick(wal_watch *w);
void wal_watch_end(wal_watch *w);

/*
 * WALG_UPLOAD_WAL_METADATA for WAL file name, made at sec.nsec: nothing for NOMETADATA,
 * wal_005/<name>.json for INDIVIDUAL; for BULK the entry is staged in the marker folder and
 * the group's object stored with the segment whose name ends in F.
 */
err_code wal_metadata_store(repo *r, const wal_settings *cfg, const char *name, time_t sec,
							 long nsec);

/*
 * WAL known lost (wal-receive's invalidated slot): runs of segments recorded in a root object
 * WAL-G ignores, which wal-verify reports as lost.
 */
#define WAL_LOST_OBJECT "walc_wal_lost.json"
/* Adds the segments first to last of timeline tli, and why they are lost. */
err_code wal_lost_record(repo *r, uint32_t tli, const char *first, const char *last,
						 const char *why);
/* Adds a gap to l from its first and last segment names; false when they are not a range. */
bool wal_lost_add(wal_lost *l, uint64_t seg_size, const char *first, const char *last,
				  const char *why);
bool wal_lost_has(const wal_lost *l, uint32_t tli, uint64_t segno);

#endif
