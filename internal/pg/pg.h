/*
 * pg: PostgreSQL knowledge that needs no server: WAL file names, LSNs and segment arithmetic.
 */
#ifndef WALC_INTERNAL_PG_PG_H
#define WALC_INTERNAL_PG_PG_H

#include "internal/core/core.h"

#define WAL_NAME_LEN 24

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
 * (PostgreSQL 9.x and later), the long-header flag, the page size (8192) and seg_size.
 */
#define WAL_LONG_HEADER_LEN 40
bool wal_header_sysid(const unsigned char *buf, size_t len, uint64_t seg_size, uint64_t *sysid);

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

/* LSNs: "X/Y" text as PostgreSQL prints them. */
err_code pg_lsn_parse(const char *text, uint64_t *lsn);
void pg_lsn_format(uint64_t lsn, char out[32]);

/*
 * A libpq session configured by the PG* environment. replication opens a physical
 * replication connection (BASE_BACKUP). Errors name the server and libpq's message.
 */
typedef struct pg_session pg_session;
err_code pg_connect(bool replication, pg_session **out);
void pg_disconnect(pg_session *s);
/* One row, one column; *out is a new string ("" for NULL). */
err_code pg_query_value(pg_session *s, const char *sql, char **out);
/* A statement whose result is not needed. */
err_code pg_exec(pg_session *s, const char *sql);
/* SELECT 1, for alive checks. */
err_code pg_ping(pg_session *s);
int pg_server_version(pg_session *s);
/* Parameterised query returning the first row's columns as new strings. */
err_code pg_query_row(pg_session *s, const char *sql, int nparams, const char *const *params,
					  int ncols, char **cols);

/* Non-exclusive base backup on this session (PG 15+: pg_backup_start / pg_backup_stop). */
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

/* The libpq connection, for modules that speak the replication protocol. */
void *pg_session_conn(pg_session *s);

#endif
