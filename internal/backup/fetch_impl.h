/* backup-internal: the delta chain backup-fetch restores, shared with delta restore. */
#ifndef WALC_INTERNAL_BACKUP_FETCH_IMPL_H
#define WALC_INTERNAL_BACKUP_FETCH_IMPL_H

#include "internal/backup/extract.h"

typedef struct level {
	char *name;
	backup_sentinel s;
	bool has_files;	  /* files_metadata.json was read into files */
	file_table files;
	keytab *need;	  /* owned set of member names' pg_name_key, NULL = every member */
	held held;		  /* what its partitions held, as the restore reads them */
	/* the partitions TarFileSets lists members of, and how many: read with files */
	struct listed_part {
		char *part;
		size_t members;
	} *listed;
	size_t nlisted;
	extract_level ex;
} level;

typedef struct chain {
	level *lv; /* lv[0] is the full backup */
	size_t n;
} chain;

/*
 * The chain ending at backup name, full first, each level's Files read into its table with
 * sizes and checksums: every restore holds what it writes to them.
 */
err_code load_chain(repo *r, const char *name, chain *c);
void chain_free(chain *c);
/* A level's Files, or NULL when it has no files_metadata.json. */
const file_table *files_of(const level *l);

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
 * Ranged reads (ranges.c): a partition of size bytes, its TarFileSets list given member by
 * member (rec: the member's Files record or NULL; needed: whether the restore takes it).
 * part_ranges gives the stored byte ranges holding the needed members, each starting a
 * compression frame, merged where they touch; false when it is read whole: a needed member
 * with no recorded frame, or ranges covering most of it anyway.
 */
typedef struct byte_range {
	uint64_t off, len;
	size_t members; /* needed members whose frames lie in it: a read must meet them all */
} byte_range;
typedef struct part_frames {
	uint64_t size;
	uint64_t *starts; /* every frame start recorded, 0 first */
	uint64_t *want;	  /* the needed members' frame starts */
	size_t ns, nw, cap_s, cap_w;
	size_t needed;	/* needed members */
	bool unframed;	/* a needed member has no frame */
} part_frames;
void part_frames_start(part_frames *p, uint64_t size);
void part_frames_add(part_frames *p, const file_rec *rec, bool needed);
bool part_ranges(part_frames *p, byte_range **out, size_t *n);
void part_frames_free(part_frames *p);

/*
 * Delta restore (backup-fetch --delta) before any extraction: refuses a running cluster or
 * one of another system identifier (unless forced), hashes the local files in parallel,
 * removes what the backup does not have, and narrows every level's need to the files whose
 * local copy differs from the backup's.
 */
err_code delta_restore_prepare(repo *r, const fetch_options *opt, const char *dest, chain *c,
							   const json_t *spec);

#endif
