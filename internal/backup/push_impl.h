/* backup-internal: the state shared by the walker and the packers of one backup-push. */
#ifndef WALC_INTERNAL_BACKUP_PUSH_IMPL_H
#define WALC_INTERNAL_BACKUP_PUSH_IMPL_H

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#include "internal/backup/backup.h"
#include "internal/pipe/pipe.h"

/* One file or directory found by the walker, sent to a packer. */
typedef struct walk_entry {
	char *path;	  /* absolute path to read */
	char *member; /* tar member name: "/base/1/1259" */
	struct stat st;
} walk_entry;

typedef struct push_state {
	repo *r;
	const config *cfg;
	char *pgdata; /* absolute, symlinks resolved */
	char *name;	  /* backup name */
	chan *entries;
	group *g;
	rate *disk;	   /* WALG_DISK_RATE_LIMIT, or NULL */
	int part_seq; /* atomic: last part number used */
	pthread_mutex_t lock; /* guards the JSON below */
	json_t *files;		  /* Files of files_metadata.json */
	json_t *tar_sets;	  /* TarFileSets */
	json_t *spec;		  /* tablespace spec, or NULL */
	/* counters, updated atomically */
	uint64_t uncompressed; /* tar member content */
	uint64_t compressed;   /* bytes stored */
	uint64_t catalog;	   /* stat sizes of everything walked */
	uint64_t read_bytes;
	uint64_t nfiles;
} push_state;

void walk_entry_free(walk_entry *e);
/* Walks PGDATA and its tablespaces, sending walk_entry* to st->entries, then closes it. */
err_code walk_pgdata(void *arg);
/* Takes entries and packs them into tar partitions until the channel is drained. */
err_code pack_entries(void *arg);
/* The Files record of one entry, in WAL-G's shape. */
json_t *file_record(const struct stat *st);
/* Stores one small tar object (pg_control, backup_label) with the given members. */
err_code pack_small_tar(push_state *st, const char *base, const char *const *names,
						const char *const *data, const size_t *lens, int n, uint32_t mode,
						char **key_out);

#endif
