/* backup-internal: the delta chain backup-fetch restores, shared with delta restore. */
#ifndef WALC_INTERNAL_BACKUP_FETCH_IMPL_H
#define WALC_INTERNAL_BACKUP_FETCH_IMPL_H

#include "internal/backup/restore/extract.h"

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
	progress prog; /* of this level's extraction */
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
/* l->name's sentinel and Files (when it has files metadata). */
err_code load_level(repo *r, level *l);
/*
 * Extracts level l (l->ex set up) from its partitions, read in up to concurrency streams; top:
 * the backup restored, whose backup_label and pg_control come last. Every file its Files says
 * it stored must be met.
 */
err_code fetch_level(repo *r, level *l, int concurrency, bool top);
/*
 * Before anything is written: backup name has a pg_control object (in an encrypted repository,
 * one the key decodes), or holds no objects at all (refused).
 */
err_code fetch_check_control(repo *r, const char *name);
/* Removes a file a restore does not keep, counting it; a failure is a warning naming it. */
void fetch_remove(const char *path, size_t *removed);
/* One syncfs of the file system holding path. */
err_code fetch_sync_tree(const char *path);
/* A level's Files, or NULL when it has no files_metadata.json. */
const file_table *files_of(const level *l);

/*
 * A level's tar partitions as listed: the ordinary ones (keys, n), and the backup_label and
 * pg_control partitions (NULL when absent) that a restore takes last. Keys point into tars.
 */
typedef struct level_parts {
	repo_objs tars;
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

/*
 * Where a restore writes (place.c). A tablespace goes inside DEST, at pg_tblspc/OID (as WAL-G
 * puts it), unless --restore-spec or --original-tablespaces places it: then at loc, linked
 * from there.
 */
typedef struct ts_place {
	char *oid;
	char *loc;	   /* as the spec gives it: the link's target */
	char *canon;   /* loc with its links resolved, for comparisons */
	bool in_place; /* the spec puts it at DEST/pg_tblspc/OID itself */
} ts_place;
typedef struct placement {
	char *dest; /* absolute, links resolved; may not exist yet */
	bool dest_exists;
	bool delta;		/* DEST holds a stopped copy of the cluster: --delta applies */
	bool partial;	/* --mask: some files only, no cluster to start */
	ts_place *ts; /* the tablespaces the operator placed */
	size_t n;
	char *waldir; /* --delta: the directory DEST/pg_wal links to, or NULL */
} placement;
/* A restore's file holding the backup's system identifier, there until the restore is whole. */
#define RESTORE_MARKER "walc_restore_incomplete"
/*
 * Settles and checks every place a restore will write, writing nothing: DEST (absent, empty,
 * or for --delta a stopped data directory of the backup's cluster), each placed tablespace's
 * location (apart from DEST and from the others; empty, or for --delta only its
 * PG_<version> folder), and for --delta the links in DEST. Refusals name what they refuse.
 */
err_code placement_plan(const fetch_options *opt, const chain *c, placement *p);
/*
 * No server runs on dir (its postmaster.pid): a live one is refused, and one whose process is
 * gone unless force. what names the command in messages.
 */
err_code placement_check_stopped(const char *dir, bool force, const char *what);
/* DEST's marker of a restore under way, holding text, made durable. */
err_code placement_mark(const char *dest, const char *text);
/* Makes DEST, its marker, the tablespace links; --delta: removes pg_control first. */
err_code placement_prepare(const placement *p, const chain *c);
/* pg_wal and pg_wal/archive_status, which PostgreSQL needs to start. */
err_code placement_wal_dir(const placement *p);
/* Whether --delta's pruning may follow the link DEST<member>/<name>. */
bool placement_follows(const placement *p, const char *member, const char *name);
/* Once everything is extracted: what tablespaces in DEST need, then the marker goes. */
err_code placement_finish(const placement *p);
void placement_free(placement *p);

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
 * backup-fetch --restore-only=spec (partial.c): the members of backup's Files a restore takes
 * (*need, with pg_control and backup_label): every database's system catalogs, the databases
 * and tables spec names (with their subtables), every file that is no relation file; a name
 * that matches nothing is an error.
 */
err_code backup_restore_only(repo *r, const char *backup, const char *spec, keytab **need);

/*
 * Delta restore (backup-fetch --delta) once placement_prepare is done: removes what the
 * backup does not have (never leaving DEST, except through the links p follows), hashes the
 * local files in parallel, and narrows every level's need to the files whose local copy
 * differs from the backup's.
 */
err_code delta_restore_prepare(repo *r, const placement *p, chain *c);

#endif
