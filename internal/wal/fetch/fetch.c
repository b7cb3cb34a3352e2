/* wal-fetch: one WAL file from the repository into the path PostgreSQL gave. */
#include "internal/wal/wal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"
#include "internal/wal/wal_impl.h"

typedef struct fetch_dest {
	repo *r;
	const wal_settings *cfg;
	const char *name, *dest;
} fetch_dest;

/*
 * A file only once it is whole (file_sink_new), durable: PostgreSQL replays it at once; and
 * only once it is what its name says (a segment of this cluster...), whatever the codec.
 */
static err_code open_dest(void *arg, sink **out)
{
	fetch_dest *d = arg;
	return wal_checked_file_new(d->r, d->cfg, d->name, d->dest, d->dest, true, out);
}

/* A history file is read into memory first: it is small, and judged whole. */
static err_code open_mem(void *arg, sink **out)
{
	membuf *mb = arg;
	free(mb->data);
	*mb = (membuf){ .max = WAL_FILE_CHECK_MAX };
	*out = membuf_sink_new(mb);
	return E_OK;
}

/*
 * A segment of timeline tli in the archive: the one its history says it begins with (one
 * request), else any (a listing: a lone history file, or a segment size walc was not told).
 * *key NULL when there is none.
 */
static err_code timeline_segment(repo *r, const wal_settings *cfg, uint32_t tli, uint64_t begin,
								 char **key)
{
	uint64_t seg_size = (uint64_t)cfg->pg->pg_wal_size_mb << 20;
	char seg[WAL_NAME_LEN + 1], prefix[16];
	wal_name_format(seg, tli, begin / seg_size, seg_size);
	char *base = xasprintf(REPO_WAL_DIR "%s", seg);
	err_code rc = repo_find(r, base, key);
	free(base);
	if (rc != E_NOTFOUND)
		return rc;
	err_clear();
	*key = NULL;
	repo_objs l;
	TRY(repo_list(r, REPO_WAL_DIR, false, &l));
	snprintf(prefix, sizeof(prefix), "%08X", tli);
	for (size_t i = 0; i < l.len && *key == NULL; i++) {
		const char *b = l.items[i].key + strlen(REPO_WAL_DIR);
		if (wal_object_is_segment(b) && strncmp(b, prefix, 8) == 0)
			*key = xstrdup(l.items[i].key);
	}
	repo_objs_free(&l);
	return E_OK;
}

/*
 * PostgreSQL follows the newest timeline whose history file restore_command gives it (its
 * default recovery_target_timeline, 'latest'): a history file is given only once a segment of
 * its timeline is archived, of the repository's cluster. A lone history file (a foreign
 * cluster's, or a promotion's whose WAL has not come yet) would lead recovery off the WAL
 * that is there.
 */
static err_code history_backed(repo *r, const wal_settings *cfg, const char *name, const char *dest,
							   const membuf *mb, bool *backed)
{
	unsigned tli = 0;
	sscanf(name, "%8X", &tli);
	pg_history_entry e[64];
	size_t n = 0;
	*backed = false;
	if (pg_history_parse((const char *)mb->data, mb->len, tli, e, 64, &n) != NULL || n == 0)
		return E_OK; /* wal_file_check said what is wrong */
	char *key = NULL;
	TRY(timeline_segment(r, cfg, tli, e[n - 1].switch_lsn, &key));
	if (key == NULL) {
		log_warn("wal-fetch %s: no WAL segment of timeline %u is archived (yet): answering that "
				 "the history file does not exist, so that recovery does not follow a timeline "
				 "with no WAL",
				 name, tli);
		return E_OK;
	}
	unsigned char head[WAL_LONG_HEADER_LEN];
	size_t have = wal_object_head(r, key, head);
	uint64_t sysid = 0, ours = 0;
	bool same = false;
	err_code rc = E_OK;
	if (have == WAL_LONG_HEADER_LEN && wal_header_sysid(head, have, 0, &sysid))
		rc = wal_cluster_ok(r, sysid, dest, &same, &ours);
	*backed = rc == E_OK && same;
	if (rc == E_OK && !*backed)
		log_warn("wal-fetch %s: %s is not a WAL segment of this repository's cluster: answering "
				 "that the history file does not exist",
				 name, key);
	free(key);
	return rc;
}

static err_code fetch_history(repo *r, const wal_settings *cfg, const char *name, const char *dest)
{
	char *base = xasprintf(REPO_WAL_DIR "%s", name), *key = NULL;
	membuf mb = { 0 };
	bool backed = false;
	err_code rc = repo_get_found(r, base, open_mem, &mb, &key);
	free(base);
	if (rc == E_OK)
		rc = wal_file_check(r, cfg, name, mb.data, mb.len, mb.len, NULL);
	if (rc == E_OK)
		rc = history_backed(r, cfg, name, dest, &mb, &backed);
	if (rc == E_OK && !backed)
		rc = E_NOTFOUND;
	sink *file = NULL;
	if (rc == E_OK)
		rc = file_sink_new(dest, true, true, &file);
	if (rc == E_OK)
		rc = sink_write(file, mb.data, mb.len);
	if (rc == E_OK)
		rc = sink_finish(file);
	sink_free(file);
	if (rc != E_OK && rc != E_NOTFOUND && rc != E_CANCELLED)
		err_wrap(rc, "wal-fetch %s: nothing written to %s: object %s", name, dest,
				 key ? key : name);
	free(key);
	free(mb.data);
	return rc;
}

/*
 * A segment recorded lost ends recovery here while later WAL exists: PostgreSQL only hears
 * "not found" and, without a target, promotes as if the archive ended. Its log must say why.
 */
static void warn_if_lost(repo *r, const wal_settings *cfg, const char *name)
{
	wal_lost lost;
	uint32_t tli;
	uint64_t seg, seg_size = (uint64_t)cfg->pg->pg_wal_size_mb << 20;
	if (wal_lost_read(r, seg_size, &lost) != E_OK ||
		wal_name_parse(name, seg_size, &tli, &seg) != E_OK) {
		err_clear();
		return;
	}
	const wal_lost_gap *g = wal_lost_at(&lost, tli, seg);
	if (g != NULL) {
		char *what = wal_lost_describe(g, seg_size);
		log_warn("wal-fetch %s: %s: recovery cannot go past it; WAL after the gap is usable "
				 "only from a backup taken after it",
				 name, what);
		free(what);
	}
	wal_lost_free(&lost);
}

err_code wal_fetch(repo *r, const wal_settings *cfg, const char *name, const char *dest,
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
		*prefetch = wal_prefetch_wanted(r, name);
		return E_OK;
	}

	if (wal_file_kind_of(name) == WAL_FILE_HISTORY) {
		err_code rc = fetch_history(r, cfg, name, dest);
		if (rc == E_NOTFOUND)
			return err_set(E_NOTFOUND, "Archive '%s' does not exist.", name);
		return rc;
	}
	char *base = xasprintf(REPO_WAL_DIR "%s", name);
	char *key = NULL;
	fetch_dest d = { r, cfg, name, dest };
	err_code rc = repo_get_found(r, base, open_dest, &d, &key);
	free(base);
	if (rc == E_NOTFOUND && segment)
		warn_if_lost(r, cfg, name);
	if (rc == E_NOTFOUND)
		return err_set(E_NOTFOUND, "Archive '%s' does not exist.", name);
	if (rc == E_OK) {
		log_fields(LOG_DEBUG, "restored WAL file", "file", name, "object", key, "dest", dest,
				   (const char *)NULL);
		*prefetch = wal_prefetch_wanted(r, name);
	} else if (rc != E_CANCELLED) {
		err_wrap(rc, "wal-fetch %s: nothing written to %s", name, dest);
	}
	free(key);
	return rc;
}
