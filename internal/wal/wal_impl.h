/*
 * wal-internal: the index of what wal_005/ holds, per timeline (segments, history), that
 * wal-show, wal-verify and recovery targets read.
 */
#ifndef WALC_INTERNAL_WAL_WAL_IMPL_H
#define WALC_INTERNAL_WAL_WAL_IMPL_H

#include "internal/core/core.h"
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

/* Lists wal_005/ (and with backups, counts each timeline's backups); timelines sorted by id. */
err_code wal_index_build(repo *r, const config *cfg, bool backups, wal_index *ix);
void wal_index_free(wal_index *ix);
bool wal_index_has(const wal_index *ix, uint32_t tli, uint64_t segno);
/* The timeline that holds segment s on the way to timeline cur, from cur's history. */
uint32_t wal_index_tli_for(const wal_index *ix, uint32_t cur, uint64_t s);
/* Timeline id's entry, or NULL. */
const timeline *wal_index_timeline(const wal_index *ix, uint32_t id);

#endif
