/* backup-internal: extracting one tar partition into the destination directory. */
#ifndef WALC_INTERNAL_BACKUP_EXTRACT_H
#define WALC_INTERNAL_BACKUP_EXTRACT_H

#include "internal/backup/backup.h"

/* What one backup of a chain contributes, shared read-only by its extraction workers. */
typedef struct extract_level {
	const char *dest;		/* destination directory, absolute, no trailing slash */
	const json_t *need;		/* member names to take (object used as a set); NULL = all */
	const json_t *files;	/* this backup's Files (IsIncremented) or NULL */
	bool skip_tablespace_map;
	const char *backup;		/* name, for messages */
	const char *mask;		/* only members matching this glob ("/" + --mask), or NULL */
} extract_level;

/* A sink that extracts a tar stream into lvl->dest (borrows lvl). */
sink *extract_sink_new(const extract_level *lvl);

/* Refuses names that could leave the destination; returns the relative path in out. */
err_code extract_safe_path(const char *member, char *out, size_t outlen);

#endif
