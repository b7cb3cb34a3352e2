/* wal-fetch: one WAL file from the repository into the path PostgreSQL gave. */
#include "internal/wal/wal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"
#include "internal/wal/wal_impl.h"

typedef struct fetch_dest {
	repo *r;
	const config *cfg;
	const char *name, *dest;
} fetch_dest;

/*
 * A file only once it is whole (file_sink_new), durable: PostgreSQL replays it at once; and
 * only once it is what its name says (a segment of this cluster...), whatever the codec.
 */
static err_code open_dest(void *arg, sink **out)
{
	fetch_dest *d = arg;
	sink *file;
	TRY(file_sink_new(d->dest, true, true, &file));
	*out = wal_check_sink_new(d->r, d->cfg, d->name, file);
	return E_OK;
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
	fetch_dest d = { r, cfg, name, dest };
	err_code rc = repo_get_found(r, base, open_dest, &d, &key);
	free(base);
	if (rc == E_NOTFOUND)
		return err_set(E_NOTFOUND, "Archive '%s' does not exist.", name);
	if (rc == E_OK) {
		log_fields(LOG_DEBUG, "restored WAL file", "file", name, "object", key, "dest", dest,
				   (const char *)NULL);
		*prefetch = wal_prefetch_wanted(cfg, name);
	} else if (rc != E_CANCELLED) {
		err_wrap(rc, "wal-fetch %s: nothing written to %s", name, dest);
	}
	free(key);
	return rc;
}
