/* backup-internal: the delta chain backup-fetch restores, shared with delta restore. */
#ifndef WALC_INTERNAL_BACKUP_FETCH_IMPL_H
#define WALC_INTERNAL_BACKUP_FETCH_IMPL_H

#include "internal/backup/extract.h"

typedef struct level {
	char *name;
	backup_sentinel s;
	json_t *meta; /* files_metadata.json root or NULL */
	json_t *need; /* owned set of member names, NULL = every member */
	extract_level ex;
} level;

typedef struct chain {
	level *lv; /* lv[0] is the full backup */
	size_t n;
} chain;

const json_t *files_of(const level *l);
err_code link_tablespaces(const char *dest, const json_t *spec);

/*
 * Delta restore (backup-fetch --delta) before any extraction: refuses a running cluster or
 * one of another system identifier (unless forced), hashes the local files in parallel,
 * removes what the backup does not have, and narrows every level's need to the files whose
 * local copy differs from the backup's.
 */
err_code delta_restore_prepare(const fetch_options *opt, const char *dest, chain *c,
							   const json_t *spec);

#endif
