/*
 * pg-internal: a WAL page header's magic and flags (xlog_internal.h), the one place that knows
 * which release gives a flag which bit.
 */
#ifndef WALC_INTERNAL_PG_WALPAGE_IMPL_H
#define WALC_INTERNAL_PG_WALPAGE_IMPL_H

#include <stdint.h>

#define WAL_MAGIC_PG92 0xD061 /* every later release has a higher magic */
#define WAL_MAGIC_PG13 0xD106
#define WAL_MAGIC_PG15 0xD110 /* full-page images say their compression in 3 bits */
#define WAL_MAGIC_PG18 0xD118
#define WAL_MAGIC_PG19 0xD122

#define XLP_FIRST_IS_CONTRECORD 0x0001
#define XLP_LONG_HEADER 0x0002

/*
 * PostgreSQL 19 dropped XLP_BKP_REMOVABLE (0x0004, set on most pages before) and moved
 * XLP_FIRST_IS_OVERWRITE_CONTRECORD from 0x0008 to its bit: read with 18's rules, 19's
 * overwritten record would look unfinished, and 0x0008 on a 19 page would pass.
 */
static inline uint16_t wal_flags_known(uint16_t magic)
{
	return magic > WAL_MAGIC_PG18 ? 0x0007 : 0x000F;
}

static inline uint16_t wal_flag_overwrite(uint16_t magic)
{
	return magic > WAL_MAGIC_PG18 ? 0x0004 : 0x0008;
}

#endif
