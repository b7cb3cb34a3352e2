/* wal-fetch: one WAL file from the repository into the path PostgreSQL gave. */
#include "internal/wal/wal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

/* A file only once it is whole (file_sink_new), durable: PostgreSQL replays it at once. */
static err_code open_dest(void *dest, sink **out)
{
	return file_sink_new(dest, true, true, out);
}

err_code wal_fetch(repo *r, const config *cfg, const char *name, const char *dest,
				   bool *prefetch)
{
	*prefetch = false;
	if (!wal_is_file_name(name))
		return err_set(E_CONFIG, "wal-fetch: \"%s\" is not a file name walc restores", name);
	/* Only segments are prefetched. */
	bool taken = false, segment = wal_is_segment_name(name);
	if (segment)
		TRY(prefetch_take(cfg, name, dest, &taken));
	if (taken) {
		*prefetch = wal_prefetch_wanted(cfg, name);
		return E_OK;
	}

	char *base = xasprintf(REPO_WAL_DIR "%s", name);
	char *key = NULL;
	err_code rc = repo_get_found(r, base, open_dest, (void *)(uintptr_t)dest, &key);
	free(base);
	if (rc == E_NOTFOUND)
		return err_set(E_NOTFOUND, "Archive '%s' does not exist.", name);
	if (rc == E_OK) {
		log_fields(LOG_DEBUG, "restored WAL file", "file", name, "object", key, "dest", dest,
				   (const char *)NULL);
		*prefetch = wal_prefetch_wanted(cfg, name);
	}
	free(key);
	return rc;
}
