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

/*
 * The chain ending at backup name, full first, each level's files_metadata.json loaded; a
 * lone full backup's only when lone_full_meta (nothing in it is needed to restore a full
 * backup whole, and it holds a record of every file).
 */
err_code load_chain(repo *r, const char *name, bool lone_full_meta, chain *c);
void chain_free(chain *c);
const json_t *files_of(const level *l);

/*
 * A level's tar partitions as listed: the ordinary ones (keys, n), and the backup_label and
 * pg_control partitions (NULL when absent) that a restore takes last. Keys point into tars.
 */
typedef struct level_parts {
	obj_list tars;
	const char **keys;
	size_t n;
	const char *label, *control;
} level_parts;
err_code level_parts_list(repo *r, const char *name, level_parts *out);
void level_parts_free(level_parts *p);

/*
 * The reading pipeline of backup-fetch and backup-verify: fn(arg, key) for every key on up to
 * concurrency threads, no more than fit the decoding memory budget; the first error stops
 * the others and is returned.
 */
typedef err_code (*part_fn)(void *arg, const char *key);
err_code parts_run(const char *const *keys, size_t n, int concurrency, part_fn fn, void *arg);
err_code link_tablespaces(const char *dest, const json_t *spec);

/*
 * The stored byte ranges of a partition of size bytes (members: its TarFileSets entry) that
 * hold the members need names, each starting a compression frame, merged where they touch
 * (ranges.c). false when it is read whole: no need set, a needed member with no recorded
 * frame, or ranges covering most of it anyway.
 */
typedef struct byte_range {
	uint64_t off, len;
	size_t members; /* needed members whose frames lie in it: a read must meet them all */
} byte_range;
bool part_ranges(const json_t *members, const json_t *files, const json_t *need, uint64_t size,
				 byte_range **out, size_t *n);

/*
 * Delta restore (backup-fetch --delta) before any extraction: refuses a running cluster or
 * one of another system identifier (unless forced), hashes the local files in parallel,
 * removes what the backup does not have, and narrows every level's need to the files whose
 * local copy differs from the backup's.
 */
err_code delta_restore_prepare(const fetch_options *opt, const char *dest, chain *c,
							   const json_t *spec);

#endif
