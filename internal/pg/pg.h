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
/* Parses a segment name with seg_size bytes per segment. */
err_code wal_name_parse(const char *name, uint64_t seg_size, uint32_t *tli, uint64_t *segno);
void wal_name_format(char out[WAL_NAME_LEN + 1], uint32_t tli, uint64_t segno, uint64_t seg_size);

#endif
