/*
 * What a WAL file must be before wal-push stores it or wal-fetch hands it to PostgreSQL: a
 * segment (or .partial) is one, by size and long page header, of this repository's cluster; a
 * history file parses as one for its timeline; a backup history file is one. WAL-G takes any
 * bytes under any of these names.
 */
#include "internal/wal/wal_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/catalog/catalog.h"
#include "internal/pg/pg.h"

uint64_t wal_configured_seg_size(const wal_settings *cfg)
{
	return cfg->pg->pg_wal_size_set ? (uint64_t)cfg->pg->pg_wal_size_mb << 20 : 0;
}

/*
 * The marker as read last, for a minute: the prefetcher and the daemon check every segment
 * they fetch, and a repository written by WAL-G alone has no marker to find each time.
 */
#define MARKER_TTL_S 60
static err_code read_marker(repo *r, uint64_t *sysid);
static pthread_mutex_t marker_lock = PTHREAD_MUTEX_INITIALIZER;
static char *marker_repo;
static uint64_t marker_sysid;
static time_t marker_at;

static time_t mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

err_code wal_marker_sysid(repo *r, uint64_t *sysid)
{
	const char *where = repo_describe(r);
	pthread_mutex_lock(&marker_lock);
	bool fresh = marker_repo != NULL && strcmp(marker_repo, where) == 0 &&
		mono_now() - marker_at < MARKER_TTL_S;
	*sysid = marker_sysid;
	pthread_mutex_unlock(&marker_lock);
	if (fresh)
		return E_OK;
	TRY(read_marker(r, sysid));
	pthread_mutex_lock(&marker_lock);
	free(marker_repo);
	marker_repo = xstrdup(where);
	marker_sysid = *sysid;
	marker_at = mono_now();
	pthread_mutex_unlock(&marker_lock);
	return E_OK;
}

err_code wal_read_json(repo *r, const char *key, json_t **doc)
{
	*doc = NULL;
	err_code rc = catalog_read_json(r, key, CATALOG_JSON_MAX, doc);
	if (rc == E_NOTFOUND) {
		err_clear();
		return E_OK;
	}
	return rc;
}

static err_code read_marker(repo *r, uint64_t *sysid)
{
	*sysid = 0;
	json_t *doc;
	TRY(wal_read_json(r, CATALOG_CLUSTER_MARKER, &doc));
	if (doc == NULL)
		return E_OK;
	const char *text = json_string_value(json_object_get(doc, "system_identifier"));
	char *end = NULL;
	unsigned long long v = text != NULL ? strtoull(text, &end, 10) : 0;
	if (text != NULL && end != text && *end == '\0')
		*sysid = v;
	json_decref(doc);
	return E_OK;
}

wal_file_kind wal_file_kind_of(const char *name)
{
	size_t n = strlen(name);
	if (wal_is_segment_name(name))
		return WAL_FILE_SEGMENT;
	if (!wal_is_archive_name(name))
		return WAL_FILE_OTHER;
	if (str_has_suffix(name, ".partial"))
		return WAL_FILE_SEGMENT;
	if (n == 16 && str_has_suffix(name, ".history"))
		return WAL_FILE_HISTORY;
	return WAL_FILE_BACKUP;
}

#define BACKUP_LABEL_START "START WAL LOCATION: "

size_t wal_file_head_need(const char *name)
{
	switch (wal_file_kind_of(name)) {
	case WAL_FILE_SEGMENT:
		return WAL_LONG_HEADER_LEN;
	case WAL_FILE_HISTORY:
		return WAL_FILE_CHECK_MAX;
	case WAL_FILE_BACKUP:
		return strlen(BACKUP_LABEL_START);
	case WAL_FILE_OTHER:
		break;
	}
	return 0;
}

/*
 * The cluster a restore_command destination belongs to: PostgreSQL runs it in the data
 * directory with pg_wal/RECOVERYXLOG, the daemon with PGDATA/pg_wal/...: pg_control is then
 * in ../global beside it.
 */
static bool dest_cluster(const char *dest, uint64_t *sysid)
{
	const char *slash = strrchr(dest, '/');
	char *path = slash ? xasprintf("%.*s/../global/pg_control", (int)(slash - dest), dest)
					   : xstrdup("../global/pg_control");
	unsigned char buf[PG_PAGE_SIZE];
	bool on, ok = false;
	FILE *f = fopen(path, "rb");
	if (f != NULL) {
		ok = fread(buf, 1, sizeof(buf), f) == sizeof(buf) &&
			pg_control_checksums(buf, sizeof(buf), &on);
		fclose(f);
	}
	free(path);
	if (ok) /* ControlFileData starts with system_identifier */
		memcpy(sysid, buf, sizeof(*sysid));
	return ok;
}

err_code wal_cluster_ok(repo *r, uint64_t sysid, const char *dest, bool *ok, uint64_t *ours)
{
	uint64_t restoring = 0;
	TRY(wal_marker_sysid(r, ours));
	/*
	 * A repository that changed clusters (WALG_ALLOW_SYSTEM_ID_CHANGE) still holds the old
	 * one's WAL, which a restore of an old backup needs: the cluster being recovered says.
	 */
	*ok = *ours == 0 || sysid == *ours ||
		(dest != NULL && dest_cluster(dest, &restoring) && restoring == sysid);
	return E_OK;
}

err_code wal_file_check(repo *r, const wal_settings *cfg, const char *name,
						const unsigned char *buf, size_t len, uint64_t size, const char *dest)
{
	char why[128] = "";
	switch (wal_file_kind_of(name)) {
	case WAL_FILE_SEGMENT: {
		uint64_t sysid, ours = 0;
		bool ok = true;
		if (!wal_segment_check(name, buf, len, size, wal_configured_seg_size(cfg), &sysid, why))
			return err_set(E_CORRUPT, "not a WAL segment: %s", why);
		if (dest != NULL)
			TRY(wal_cluster_ok(r, sysid, dest, &ok, &ours));
		if (!ok)
			return err_set(E_CORRUPT,
						   "a WAL segment of cluster %llu, not of this repository's cluster %llu "
						   "(" CATALOG_CLUSTER_MARKER ")",
						   (unsigned long long)sysid, (unsigned long long)ours);
		return E_OK;
	}
	case WAL_FILE_HISTORY: {
		unsigned tli = 0;
		sscanf(name, "%8X", &tli);
		const char *bad = len == size ? pg_history_check((const char *)buf, len, tli)
									  : "larger than a history file walc reads";
		if (bad != NULL)
			return err_set(E_CORRUPT, "not a timeline history file for timeline %u: %s", tli, bad);
		return E_OK;
	}
	case WAL_FILE_BACKUP:
		if (len < strlen(BACKUP_LABEL_START) ||
			memcmp(buf, BACKUP_LABEL_START, strlen(BACKUP_LABEL_START)) != 0)
			return err_set(E_CORRUPT, "not a backup history file (no \"" BACKUP_LABEL_START
									  "\" line first)");
		return E_OK;
	case WAL_FILE_OTHER:
		break;
	}
	return E_OK;
}

/* A sink in front of a fetched file's: what passes is checked before the file is made. */
typedef struct check_sink {
	sink base;
	sink *next;
	repo *r;
	const wal_settings *cfg;
	char *name, *dest;
	unsigned char *head;
	size_t need, have;
	uint64_t total;
} check_sink;

static err_code ck_write(sink *s, const void *buf, size_t len)
{
	check_sink *c = (check_sink *)s;
	if (c->have < c->need) {
		size_t n = c->need - c->have < len ? c->need - c->have : len;
		memcpy(c->head + c->have, buf, n);
		c->have += n;
	}
	c->total += len;
	return sink_write(c->next, buf, len);
}

static err_code ck_finish(sink *s)
{
	check_sink *c = (check_sink *)s;
	TRY(wal_file_check(c->r, c->cfg, c->name, c->head, c->have, c->total, c->dest));
	return sink_finish(c->next);
}

static void ck_free(sink *s)
{
	check_sink *c = (check_sink *)s;
	sink_free(c->next);
	free(c->head);
	free(c->name);
	free(c->dest);
	free(c);
}

static const sink_ops check_sink_ops = { ck_write, ck_finish, ck_free };

static sink *check_sink_new(repo *r, const wal_settings *cfg, const char *name, const char *dest,
							sink *next)
{
	check_sink *c = xcalloc(1, sizeof(*c));
	c->base.ops = &check_sink_ops;
	c->next = next;
	c->r = r;
	c->cfg = cfg;
	c->name = xstrdup(name);
	c->dest = xstrdup(dest);
	c->need = wal_file_head_need(name);
	c->head = xmalloc(c->need ? c->need : 1);
	return &c->base;
}

err_code wal_checked_file_new(repo *r, const wal_settings *cfg, const char *name, const char *dest,
							  const char *path, bool durable, sink **out)
{
	sink *file;
	TRY(file_sink_new(path, durable, durable, &file));
	*out = check_sink_new(r, cfg, name, dest, file);
	return E_OK;
}
