/*
 * pg: PostgreSQL knowledge: WAL file names, LSNs, pages and file formats; and the server
 * itself, through libpq, which no other module uses (sessions, facts, backups, BASE_BACKUP).
 */
#ifndef WALC_INTERNAL_PG_PG_H
#define WALC_INTERNAL_PG_PG_H

#include "internal/core/core.h"

#define WAL_NAME_LEN 24

/* The cluster walc works on, as the modules above pg read it (wal, backup, daemon). */
typedef struct pg_settings {
	char *pgdata;			/* PGDATA */
	long pg_wal_size_mb;	/* WALG_PG_WAL_SIZE */
	bool pg_wal_size_set;	/* ... was given, not defaulted: it then overrides pg_control's */
} pg_settings;

/* 24 upper-case hex digits: timeline, then the segment as two 8-digit halves. */
bool wal_is_segment_name(const char *name);
/*
 * A name PostgreSQL archives or asks to restore: a segment, "<seg>.partial",
 * "<seg>.<8 hex>.backup" or "<8 hex>.history". Anything else (paths, "..") is refused.
 */
bool wal_is_archive_name(const char *name);
/*
 * A name wal-push and wal-fetch take, as WAL-G does (it archives any file under its base
 * name): not empty, no '/', not "." or "..", no control character.
 */
bool wal_is_file_name(const char *name);
/* Parses a segment name with seg_size bytes per segment. */
err_code wal_name_parse(const char *name, uint64_t seg_size, uint32_t *tli, uint64_t *segno);
void wal_name_format(char out[WAL_NAME_LEN + 1], uint32_t tli, uint64_t segno, uint64_t seg_size);

/*
 * The system identifier in the long header that starts every WAL segment (and .partial file):
 * false when buf (at least the first 40 bytes) does not start with one. Checks the magic
 * (PostgreSQL 9.x and later), the long-header flag, the page size (8192) and seg_size (0: any).
 */
#define WAL_LONG_HEADER_LEN 40
bool wal_header_sysid(const unsigned char *buf, size_t len, uint64_t seg_size, uint64_t *sysid);
/*
 * Whether a file of size bytes, whose first head_len bytes are head, is what its name (a
 * segment's, or "<segment>.partial") says: a long page header (magic of PostgreSQL 9.2 or
 * later, known flags, 8192-byte pages, a segment size PostgreSQL allows: seg_size when not 0,
 * else the header's own, and size equal to it), the page address of the name's segment and a
 * timeline not above the name's. Then *sysid is the header's system identifier; else why says
 * what is wrong.
 */
bool wal_segment_check(const char *name, const unsigned char *head, size_t head_len,
					   uint64_t size, uint64_t seg_size, uint64_t *sysid, char why[128]);

/*
 * WAL records, read from the stream of consecutive segments as far as recovery targets need:
 * a callback for each record (false stops the reading), with the time and transaction of
 * transaction ends and the name of restore points. Reading starts at the segment holding
 * start_lsn, at its first record boundary. Every page header is checked as PostgreSQL's
 * reader checks it (one magic, known flags, the page's own address, the long header's sizes,
 * a timeline that never goes back, continuation lengths), every record header (length,
 * resource manager, back-link) and every record's CRC-32C. The valid WAL ends where pages or
 * headers stop matching (zeros, or a recycled segment's old bytes), or at a record whose
 * header is right but whose checksum is not: wal_reader_done then says so, end_lsn is where
 * the last valid record ended, and wal_reader_end says why (damage is told apart).
 */
typedef enum wal_rec_kind {
	WAL_REC_OTHER,
	WAL_REC_COMMIT,		   /* a transaction's commit (prepared or not) */
	WAL_REC_ABORT,		   /* its abort */
	WAL_REC_RESTORE_POINT, /* pg_create_restore_point */
	WAL_REC_CHECKPOINT,	   /* a checkpoint (online or shutdown) */
} wal_rec_kind;
typedef struct wal_record {
	uint64_t lsn, end_lsn;
	uint32_t xid; /* the record's transaction (0 for prepared ones' ends) */
	uint8_t rmid, info;
	wal_rec_kind kind;
	bool prepared;
	int64_t time_us; /* transaction ends and restore points: Unix time, microseconds */
	char name[65];	 /* restore points */
	uint64_t redo;	 /* checkpoints: the REDO location */
} wal_record;
typedef struct wal_reader wal_reader;
wal_reader *wal_reader_new(uint64_t seg_size, uint64_t start_lsn,
						   bool (*on_record)(const wal_record *rec, void *arg), void *arg);
/* Bytes of the stream, in order: the segments from start_lsn's one, whole and consecutive. */
err_code wal_reader_feed(wal_reader *r, const void *buf, size_t len);
/* Stopped by the callback, or at the end of the valid WAL. */
bool wal_reader_done(const wal_reader *r, uint64_t *end_lsn);
void wal_reader_free(wal_reader *r);
typedef enum wal_end_kind {
	WAL_END_NONE,	 /* not ended (maybe stopped by the callback) */
	WAL_END_INVALID, /* pages or a record header stop matching: where PostgreSQL's WAL ends */
	WAL_END_DAMAGED, /* a record with a sound header and back-link fails its checksum */
} wal_end_kind;
typedef struct wal_ending {
	wal_end_kind kind;
	uint64_t lsn;	 /* the record, or the page, at fault */
	const char *why; /* static text */
} wal_ending;
void wal_reader_end(const wal_reader *r, wal_ending *out);

/*
 * Segments read apart (backup-verify reads them in parallel), each by a reader of its own fed
 * that one segment: a record that crosses from one segment into the next is checked once both
 * are read, from what each reader kept of it (wal_reader_seam), in segment order
 * (wal_stitch_next). Nothing of the record's bytes is kept but its header: its checksum is
 * carried as a CRC register and combined (pg_crc32c_shift).
 */
#define WAL_REC_HEADER 24
typedef struct wal_seam {
	uint64_t seg_start;
	/* head: the end of a record begun in the segment before */
	uint32_t head_rem;	 /* the first page's xlp_rem_len (0: the segment starts a record) */
	bool head_overwrite; /* the first page says the record before was abandoned */
	uint64_t head_len;	 /* continuation bytes read in this segment */
	unsigned char head_first[WAL_REC_HEADER]; /* the first of them */
	uint32_t head_crc; /* CRC register, from 0, over the ones after head_first */
	uint64_t first_lsn, first_prev; /* the first record begun here and its back-link (0: none) */
	uint64_t last_lsn;				/* the last record begun here */
	/* tail: the record still open at the segment's end */
	bool tail_open;
	uint64_t tail_lsn, tail_prev;
	unsigned char tail_hdr[WAL_REC_HEADER];
	uint32_t tail_hdr_len, tail_crc;
	uint64_t tail_got; /* its bytes read, header included */
} wal_seam;
void wal_reader_seam(const wal_reader *r, wal_seam *out);
/* What is carried from segment to segment; zeroed before the first, and after a gap. */
typedef struct wal_stitch {
	bool known; /* a segment was read before */
	uint64_t last; /* the last record begun before */
	bool open;	   /* a record is still open: */
	uint64_t lsn, prev;
	unsigned char hdr[WAL_REC_HEADER];
	uint32_t hdr_len, crc;
	uint64_t got;
} wal_stitch;
/* The next segment's seam: NULL when it continues what came before, else why not (*at: LSN). */
const char *wal_stitch_next(wal_stitch *st, const wal_seam *s, uint64_t *at);

/*
 * PostgreSQL's CRC-32C as a register (COMP_CRC32C without the initial and final inversions):
 * update adds bytes; shift gives the register as it would be after len more zero bytes, so
 * that update(c, A then B) = shift(update(c, A), |B|) ^ update(0, B).
 */
uint32_t pg_crc32c_update(uint32_t crc, const void *buf, size_t len);
uint32_t pg_crc32c_shift(uint32_t crc, uint64_t len);

/* Data pages (BLCKSZ 8192): WAL-G's validity rule (reference §8.2) on the page header. */
#define PG_PAGE_SIZE 8192
#define PG_SEGMENT_PAGES ((1u << 30) / PG_PAGE_SIZE) /* pages in a 1 GiB relation segment */
/* A page never initialised: pd_upper is 0 (all zeros, or just extended). */
bool pg_page_is_new(const unsigned char *page);
/* Header fields consistent: flags, lower <= upper <= special <= size, LSN set, version. */
bool pg_page_header_valid(const unsigned char *page);
uint64_t pg_page_lsn(const unsigned char *page);
/*
 * PostgreSQL's page checksum (pg_checksum_page) for block number blkno counted from the start
 * of the relation fork (segment number x PG_SEGMENT_PAGES + page index).
 */
uint16_t pg_page_checksum(const unsigned char *page, uint32_t blkno);
uint16_t pg_page_stored_checksum(const unsigned char *page);

/*
 * The one rule for a data page read from a relation file, used by backup-push --verify and
 * backup-verify, PostgreSQL's (PageIsVerified, and its base backup's): a page with pd_upper 0
 * must be all zeros (new); any other needs a sane header (flags, lower <= upper <= special <=
 * 8192, special aligned); with data checksums its checksum must match blkno. A page whose LSN
 * is at or past start_lsn (the backup's start; 0 = none) is not checksummed: a write during
 * the backup may have torn it, and recovery rewrites it from WAL's full-page image.
 */
typedef enum pg_page_verdict {
	PG_PAGE_OK,
	PG_PAGE_NEW,		  /* all zeros */
	PG_PAGE_RECENT,		  /* changed since start_lsn: checksum not checked */
	PG_PAGE_BAD_HEADER,	  /* problems from here on */
	PG_PAGE_BAD_CHECKSUM,
} pg_page_verdict;
pg_page_verdict pg_page_verify(const unsigned char *page, uint32_t blkno, bool checksums,
							   uint64_t start_lsn);
/* "invalid page header" or "checksum mismatch" for the problems, "" otherwise. */
const char *pg_page_verdict_text(pg_page_verdict v);
/*
 * A member name's key in a keytab ("/base/16384/16385_fsm.2"): for a relation file's name as
 * PostgreSQL writes it, its folder's hash (63 bits) and its relfilenode, fork and segment,
 * exact; for any other name its XXH3-128 (127 bits). Distinct names get distinct keys unless
 * two folders' or two other names' hashes collide.
 */
void pg_name_key(const char *name, uint64_t key[2]);
/* The relation block number of a file's first page: segment N of "16384.N" starts at N GiB. */
uint32_t pg_relation_first_block(const char *path);

/*
 * pg_control (PostgreSQL 9.4 to 19): whether the cluster has data checksums. The field is
 * found after floatFormat, whose fixed value marks the layout, where the file's
 * pg_control_version puts it; false when buf is not a pg_control file walc can read (another
 * version, or too short).
 */
bool pg_control_checksums(const unsigned char *buf, size_t len, bool *on);
/*
 * What pg_control (13 to 19) says of a stopped cluster: false unless buf is one whose CRC
 * holds. state is DBState: PG_STATE_SHUTDOWNED after a clean shutdown, ..._IN_RECOVERY after a
 * standby's.
 */
#define PG_STATE_SHUTDOWNED 1
#define PG_STATE_SHUTDOWNED_IN_RECOVERY 2
typedef struct pg_control_info {
	uint64_t system_id;
	uint32_t version; /* pg_control_version */
	int state;
	uint64_t checkpoint; /* the latest checkpoint record (a clean shutdown's is the WAL's end) */
	uint64_t redo;		 /* its REDO location */
	uint32_t timeline;	 /* its TimeLineID: the cluster's timeline */
	uint64_t min_recovery; /* minimum recovery ending location (0: none) */
	uint32_t min_recovery_tli;
	uint64_t seg_size; /* bytes per WAL segment */
} pg_control_info;
bool pg_control_read(const unsigned char *buf, size_t len, pg_control_info *out);
/* DATADIR/global/pg_control read: errors name the file. */
err_code pg_control_load(const char *datadir, pg_control_info *out);
/* pg_controldata's words for a state ("shut down in recovery"). */
const char *pg_control_state_name(int state);
/*
 * Whether a server runs on a data directory, by its postmaster.pid: none, a live process (or
 * one of another user), a process that is gone (a crashed server's, or one this host cannot
 * see), or a file naming no process. *pid: the pid named (0 when none).
 */
typedef enum pg_pid_state { PG_PID_NONE, PG_PID_LIVE, PG_PID_GONE, PG_PID_UNREADABLE } pg_pid_state;
pg_pid_state pg_postmaster_state(const char *datadir, long *pid);

/*
 * WAL pages, checked the way PostgreSQL's reader validates them (XLogReaderValidatePageHeader)
 * one segment at a time: the same magic on every page, only known flags, the long header on
 * the first page (segment size, block size and, when sysid is not 0, the system), the page's
 * own address, and a timeline that never decreases and never passes max_tli. All-zero pages
 * end the WAL written in the segment; a header after them is a problem. Returns NULL when the
 * page is fine, else what is wrong (static text).
 */
#define PG_WAL_PAGE 8192
typedef struct pg_wal_check {
	uint16_t magic; /* of the first page seen, 0 before */
	uint32_t tli;	/* of the last page */
	bool ended;		/* an all-zero page was seen in this segment */
} pg_wal_check;
const char *pg_wal_page_check(pg_wal_check *c, const unsigned char *page, uint64_t segno,
							  uint64_t seg_size, uint32_t index, uint32_t max_tli,
							  uint64_t sysid);

/*
 * A timeline history file (<tli>.history) for timeline tli: NULL when every line names a
 * parent timeline below tli, the parents increase, the switch LSNs do not decrease and there
 * is at least one; else what is wrong (static text).
 */
const char *pg_history_check(const char *text, size_t len, uint32_t tli);
/* The same, keeping up to max entries in out (more is a problem); *n entries read. */
typedef struct pg_history_entry {
	uint32_t parent;
	uint64_t switch_lsn;
} pg_history_entry;
const char *pg_history_parse(const char *text, size_t len, uint32_t tli, pg_history_entry *out,
							 size_t max, size_t *n);

/* LSNs: "X/Y" text as PostgreSQL prints them. */
err_code pg_lsn_parse(const char *text, uint64_t *lsn);
void pg_lsn_format(uint64_t lsn, char out[32]);

/*
 * The majors walc speaks to: pg_connect refuses any other with one line naming the server's
 * version. pg_check_version is that rule (text: server_version, for the message).
 */
#define PG_MIN_MAJOR 13
#define PG_MAX_MAJOR 19
err_code pg_check_version(int version_num, const char *text);

/*
 * A libpq session configured by the PG* environment. replication opens a physical
 * replication connection (BASE_BACKUP). Errors name the server and libpq's message. pg is the
 * only module that speaks libpq: everything a command needs from the server is a function here.
 */
typedef struct pg_session pg_session;
err_code pg_connect(bool replication, pg_session **out);
void pg_disconnect(pg_session *s);
/* SELECT 1, for alive checks. */
err_code pg_ping(pg_session *s);
int pg_server_version(pg_session *s);

/*
 * What a backup checks before it starts. On an SQL session data_dir, system_id and
 * wal_segsize are required (an error otherwise) and timeline is 0; on a replication session
 * they come from IDENTIFY_SYSTEM and SHOW (data_dir "" when the server will not say). The
 * archive settings are NULL where the server has no such setting (archive_library before 15)
 * or would not show it. Free with pg_server_info_free.
 */
typedef struct pg_server_info {
	int version; /* server_version_num */
	char *data_dir;
	uint64_t system_id;
	uint64_t wal_segsize; /* replication session: SHOW wal_segment_size's, 0 if unreadable */
	uint32_t timeline;	  /* IDENTIFY_SYSTEM's (replication session) */
	uint64_t xlogpos;	  /* IDENTIFY_SYSTEM's: the WAL flushed so far (replication session) */
	char *archive_mode, *archive_command, *archive_library;
	bool data_checksums;
	bool summarize_wal; /* 17+: WAL summaries are kept (incremental backups) */
} pg_server_info;
err_code pg_server_info_get(pg_session *s, pg_server_info *out);
void pg_server_info_free(pg_server_info *i);
/*
 * What --restore-only chooses among, as WAL-G records it (DatabasesByNames): every database
 * that allows connections (pg_databases_read), and each one's relations that have storage, and
 * partitioned tables (pg_relations_each): fn(arg, relation) for each, row by row, ordered by
 * root (the relation each is restored with: the top of its chain of owners and inheritance
 * parents), the root first. *started once a row came (an error before it left nothing half
 * done). Names are "schema.relname", valid until fn returns.
 */
typedef struct pg_relation {
	const char *name;
	uint32_t oid, relfilenode;
	char kind;		 /* relkind */
	uint32_t parent; /* the inheritance parent (partitions, inherited tables), or 0 */
	uint32_t root;	 /* itself for a root */
} pg_relation;
typedef struct pg_database {
	char *name;
	uint32_t oid;
} pg_database;
err_code pg_databases_read(pg_session *s, pg_database **out, size_t *n);
void pg_databases_free(pg_database *d, size_t n);
typedef err_code (*pg_relation_fn)(void *arg, const pg_relation *r);
err_code pg_relations_each(const char *dbname, pg_relation_fn fn, void *arg, bool *started);
/* An SQL session to database dbname (a name, never a connection string). */
err_code pg_connect_db(const char *dbname, pg_session **out);
/* The timeline of the last checkpoint (pg_control_checkpoint), what a standby's backup is on. */
err_code pg_checkpoint_timeline(pg_session *s, uint32_t *tli);
/* pg_stat_archiver: "<wal> at <time>" when the last attempt failed, else "" (a new string). */
err_code pg_archiver_failing(pg_session *s, char **failing);
/*
 * Where the cluster's WAL is now: the insert point on a primary, the receive (or replay) point
 * on a standby, with the timeline being written (a primary's stays right after a promotion).
 */
err_code pg_wal_position(pg_session *s, uint32_t *tli, uint64_t *lsn);

/* Non-exclusive base backup on this session (pg_backup_start, or pg_start_backup before 15). */
typedef struct pg_backup_start_info {
	uint64_t lsn;
	char walfile[WAL_NAME_LEN + 1]; /* segment of the start, "" on a standby */
	bool in_recovery;
} pg_backup_start_info;
err_code pg_backup_begin(pg_session *s, const char *label, pg_backup_start_info *out);
/*
 * stop_timeout_ms 0 waits for WAL archiving as long as it takes. wait_archive false returns
 * at once (the caller waits for the archive itself).
 */
err_code pg_backup_end(pg_session *s, long stop_timeout_ms, bool wait_archive, char **labelfile,
					   char **spcmap, uint64_t *lsn);

/*
 * BASE_BACKUP on a replication session, the way pg_basebackup of the server's major speaks
 * it: the parenthesised options from 15, the old keywords before. Every major's stream is
 * handed over in one shape: archive_begin, its bytes, archive_end, per archive ("base.tar"
 * with oid NULL, "<oid>.tar" for a tablespace, with the compression's extension when the
 * server compresses), each a complete tar stream; then the manifest's bytes when one was
 * asked for.
 */
typedef struct pg_bb_options {
	const char *label;
	uint64_t max_rate;		 /* bytes/s, 0 = unlimited (MAX_RATE, in kB/s, 32 to 1048576) */
	bool manifest;			 /* 17+ only here: what an incremental backup uploads next time */
	bool incremental;		 /* 17+: after pg_upload_manifest on this session */
	const char *compression; /* 15+: "zstd", "lz4" or "gzip" on the server; NULL = none */
	int compression_level;	 /* 0 = the server's default */
	int compression_workers; /* zstd only; 0 = none */
	/*
	 * Once the data has come, how long the server may send nothing (it waits for its archiver
	 * to archive the backup's WAL) before the backup fails naming the segment; 0 = no limit.
	 * Either way the wait is said in one line after a few seconds.
	 */
	long stop_timeout_ms;
} pg_bb_options;
/*
 * Server-side compression as pg_basebackup's --compress=server-... spells it: "zstd", "lz4",
 * "none" or NULL, then optionally ":LEVEL" or ":level=N[,workers=N]" (workers: zstd only).
 * Sets o's compression fields; errors name `var`.
 */
err_code pg_bb_compression_parse(const char *var, const char *spec, pg_bb_options *o);
/* The command for a server of version_num; E_CONFIG when an option needs a later major. */
err_code pg_bb_command(int version_num, const pg_bb_options *o, char *out, size_t cap);

typedef struct pg_bb_handler {
	err_code (*started)(void *ctx, uint64_t start_lsn, uint32_t tli);
	err_code (*tablespace)(void *ctx, const char *oid, const char *location);
	err_code (*archive_begin)(void *ctx, const char *name, const char *oid);
	err_code (*archive_data)(void *ctx, const void *buf, size_t len);
	err_code (*archive_end)(void *ctx);
	err_code (*manifest)(void *ctx, const void *buf, size_t len); /* may be NULL */
	err_code (*poll)(void *ctx); /* between messages: an error stops the backup */
} pg_bb_handler;

typedef struct pg_bb_result {
	uint64_t end_lsn;
	uint64_t wire_bytes; /* CopyData payload received */
	bool refused;		 /* the server failed the command before it started (nothing sent) */
} pg_bb_result;
err_code pg_base_backup(pg_session *s, const pg_bb_options *o, const pg_bb_handler *h,
						void *ctx, pg_bb_result *res);
/* UPLOAD_MANIFEST (17+): the prior backup's manifest, for an INCREMENTAL BASE_BACKUP next. */
err_code pg_upload_manifest(pg_session *s, const void *buf, size_t len);

/*
 * Physical replication, as pg_receivewal uses it (wal-receive). The slot is read on an SQL
 * session (every major has pg_replication_slots), the rest happens on a replication session.
 * slot names are checked by the caller (lower-case letters, digits, _): they go in unquoted.
 */
/*
 * A physical slot of that name (exists); restart_lsn 0 when it has reserved no WAL (never, or
 * no more: an invalidated slot's is gone too); wal_status as pg_replication_slots says it
 * ("reserved", "extended", "unreserved", "lost"; "" for none).
 */
typedef struct pg_slot_info {
	bool exists;
	uint64_t restart_lsn;
	char wal_status[16];
} pg_slot_info;
err_code pg_slot_read(pg_session *s, const char *slot, pg_slot_info *out);
/* CREATE_REPLICATION_SLOT slot PHYSICAL RESERVE_WAL. */
err_code pg_slot_create(pg_session *s, const char *slot);
/* TIMELINE_HISTORY tli: the history file's content (a new string of *len bytes). */
err_code pg_timeline_history(pg_session *s, uint32_t tli, char **content, size_t *len);
/* START_REPLICATION SLOT slot PHYSICAL lsn TIMELINE tli: the stream is open after E_OK. */
err_code pg_wal_stream_start(pg_session *s, const char *slot, uint32_t tli, uint64_t lsn);

typedef enum pg_wal_msg_kind {
	PG_WAL_DATA = 1,   /* XLogData */
	PG_WAL_KEEPALIVE,  /* the server's keepalive */
	PG_WAL_END,		   /* the server ended the stream (its timeline ended, or it stops) */
	PG_WAL_IDLE		   /* nothing came within the wait */
} pg_wal_msg_kind;
typedef struct pg_wal_msg {
	pg_wal_msg_kind kind;
	uint64_t start;		 /* DATA: the LSN of data[0] */
	uint64_t server_end; /* DATA, KEEPALIVE: the server's WAL end */
	const unsigned char *data; /* DATA: borrowed until the next call on the session */
	size_t len;
	bool reply; /* KEEPALIVE: the server wants a status update now */
} pg_wal_msg;
/* One CopyData message of the stream, untrusted bytes; out->data points into buf. */
err_code pg_wal_msg_parse(const unsigned char *buf, size_t len, pg_wal_msg *out);
/* The next message, waiting up to wait_ms for one (PG_WAL_IDLE if none came). */
err_code pg_wal_stream_next(pg_session *s, int wait_ms, pg_wal_msg *out);
/*
 * Standby status update: received up to written; flushed, when not 0, is where the slot may
 * move to (everything before it is stored). A shutting-down server waits for the client to
 * confirm everything it sent, flushed if the last update said a flush position, written
 * otherwise: so flushed is given only when it moves, and 0 the rest of the time.
 */
err_code pg_wal_stream_status(pg_session *s, uint64_t written, uint64_t flushed);
/*
 * After PG_WAL_END: ends our side of the stream and reads the server's last results, where its
 * next timeline starts when a timeline ended (*next_tli 0 otherwise). E_NOTFOUND when the
 * server ended it because it no longer has the WAL asked for.
 */
err_code pg_wal_stream_finish(pg_session *s, uint32_t *next_tli, uint64_t *next_lsn);

/*
 * PostgreSQL 17's INCREMENTAL.<relfile> files: magic, block count, truncation length (in
 * blocks), the block numbers (relative to the 1 GiB segment), padding to a page when there are
 * blocks, then the pages. A push parser for untrusted bytes: feed the member's bytes; once
 * the header is complete (pg_incr_ready), everything after it is the pages, in list order.
 */
#define PG_INCR_MAGIC 0xd3ae1f0du
#define PG_RELSEG_BLOCKS PG_SEGMENT_PAGES
typedef struct pg_incr pg_incr;
/* member_size: the tar member's size, which the header must agree with. */
pg_incr *pg_incr_new(uint64_t member_size);
void pg_incr_free(pg_incr *p);
/* Consumes header bytes from buf; *used < len once the header is complete. E_CORRUPT names why. */
err_code pg_incr_feed(pg_incr *p, const void *buf, size_t len, size_t *used);
bool pg_incr_ready(const pg_incr *p);
/* Valid once ready: the blocks are distinct, below PG_RELSEG_BLOCKS, in the file's order. */
uint32_t pg_incr_nblocks(const pg_incr *p);
uint32_t pg_incr_truncation(const pg_incr *p);
const uint32_t *pg_incr_blocks(const pg_incr *p);

#endif
