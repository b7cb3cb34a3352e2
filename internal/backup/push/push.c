/*
 * backup-push (local mode): one libpq session holds a non-exclusive backup while a walker and
 * WALG_UPLOAD_DISK_CONCURRENCY packers stream the data directory into tar partitions; then
 * pg_control, stop, backup_label, metadata, files metadata, and the sentinel last.
 */
#include "internal/backup/push/push_impl.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "internal/pg/pg.h"
#include "internal/wal/wal.h"

#define PROGRESS_EVERY_MS 10000
#define POLL_MS 100

err_code push_stopped(push_state *st)
{
	TRY(cancel_check());
	if (__atomic_load_n(&st->claim_lost, __ATOMIC_ACQUIRE))
		return catalog_claim_check(st->claim);
	return E_OK;
}

static void on_claim_lost(void *arg)
{
	push_state *st = arg;
	__atomic_store_n(&st->claim_lost, true, __ATOMIC_RELEASE);
}

void push_published(push_state *st, const char *key)
{
	pthread_mutex_lock(&st->lock);
	json_array_append_new(st->published, json_string(key));
	pthread_mutex_unlock(&st->lock);
}

err_code push_claim(push_state *st, uint64_t lsn, uint32_t tli)
{
	const char *base = st->delta.active && !st->delta.catchup ? st->delta.name : NULL;
	TRY(catalog_claim(st->r, st->name, lsn, tli, base, on_claim_lost, st, &st->claim));
	TRY(fmeta_open(st));
	if (base == NULL)
		return E_OK;
	/* The base chosen before the claim must not be going away under retention. */
	char *who = NULL;
	TRY(catalog_deleting(st->r, base, &who));
	if (who != NULL) {
		err_code rc = err_set(E_EXISTS, "the base of this delta, %s, is being deleted by %s; "
										"run backup-push again",
							  base, who);
		free(who);
		return rc;
	}
	char *found = NULL;
	err_code rc = catalog_resolve(st->r, base, &found);
	free(found);
	return rc == E_OK ? E_OK : err_wrap(rc, "the base of this delta");
}

/*
 * Before the sentinel: the name is still this push's, everything it stored is there, and
 * nothing else is (a writer that does not claim names, WAL-G, would have mixed objects in).
 */
static err_code verify_objects(push_state *st)
{
	TRY(catalog_claim_seal(st->claim));
	char *folder = xasprintf("%s%s/", repo_backups(st->r), st->name);
	repo_objs l;
	err_code rc = repo_list(st->r, folder, true, &l);
	free(folder);
	TRY(rc);
	size_t seen = 0;
	for (size_t i = 0; rc == E_OK && i < l.len; i++) {
		const char *key = l.items[i].key;
		bool ours = strcmp(key, catalog_claim_key(st->claim)) == 0;
		size_t k;
		json_t *v;
		json_array_foreach(st->published, k, v) if (strcmp(json_string_value(v), key) == 0)
		{
			ours = true;
			seen++;
			break;
		}
		st->mixed |= !ours;
		if (!ours)
			rc = err_set(E_EXISTS, "backup %s: %s was written by another writer; the backup "
								   "is not complete",
						 st->name, key);
	}
	if (rc == E_OK && seen != json_array_size(st->published))
		rc = err_set(E_NOTFOUND, "backup %s: %zu of its objects disappeared from %s while it "
								 "was written (deleted by another command?)",
					 st->name, json_array_size(st->published) - seen,
					 repo_describe(st->r));
	repo_objs_free(&l);
	return rc;
}

/* A failed push removes what it stored, so the name is free again at once. */
static void remove_published(push_state *st)
{
	size_t k;
	json_t *v;
	json_array_foreach(st->published, k, v) if (repo_remove(st->r, json_string_value(v)) != E_OK)
		err_clear();
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* The server must be running on the very directory we read. */
static err_code check_server(const pg_server_info *si, push_state *st)
{
	char *real = realpath(si->data_dir, NULL);
	err_code rc = E_OK;
	if (real == NULL || strcmp(real, st->pgdata) != 0)
		rc = err_set(E_CONFIG,
					 "backup-push: %s is not the server's data directory (the server uses %s)",
					 st->pgdata, si->data_dir);
	free(real);
	TRY(rc);
	long mb = st->cfg->wal->pg->pg_wal_size_mb;
	if (si->wal_segsize != (uint64_t)mb << 20)
		return err_set(E_CONFIG,
					   "WALG_PG_WAL_SIZE: the server's WAL segments are %llu MiB, the setting says "
					   "%ld",
					   (unsigned long long)(si->wal_segsize >> 20), mb);
	return E_OK;
}

/* Warns when archiving is off or unconfigured; true when the server archives. */
static bool check_archiving(const pg_server_info *si)
{
	const char *mode = si->archive_mode, *cmd = si->archive_command, *lib = si->archive_library;
	if (mode != NULL && strcmp(mode, "off") == 0)
		log_warn("archive_mode is off: the backup can only be restored with WAL from elsewhere, "
				 "and pg_backup_stop will not wait for archiving");
	else if (cmd != NULL && lib != NULL && cmd[0] == '\0' && lib[0] == '\0')
		log_warn("archive_command is empty: pg_backup_stop will wait for WAL archiving that "
				 "never happens (set WALG_STOP_BACKUP_TIMEOUT to bound the wait)");
	else
		return mode != NULL;
	return false;
}

static err_code backup_name_for(pg_session *s, const push_state *st,
								const pg_backup_start_info *bs, char **name)
{
	if (!bs->in_recovery) {
		*name = xasprintf("base_%s", bs->walfile);
		return E_OK;
	}
	/* On a standby the server cannot name the segment: WAL-G uses lsn - 1 on its timeline. */
	uint32_t tli;
	TRY(pg_checkpoint_timeline(s, &tli));
	char seg[WAL_NAME_LEN + 1];
	uint64_t segsize = (uint64_t)st->cfg->wal->pg->pg_wal_size_mb << 20;
	wal_name_format(seg, tli, (bs->lsn - 1) / segsize, segsize);
	*name = xasprintf("base_%s", seg);
	return E_OK;
}

typedef struct worker {
	push_state *st;
	err_code (*fn)(void *);
	int *finished;
} worker;

static err_code run_worker(void *arg)
{
	worker *w = arg;
	err_code rc = w->fn(w->st);
	__atomic_add_fetch(w->finished, 1, __ATOMIC_RELEASE);
	return rc;
}

static void free_entry(void *item)
{
	walk_entry_free(item);
}

static void cancel_entries(void *arg)
{
	chan_cancel(arg);
}

static void log_progress(push_state *st, long started)
{
	double secs = (double)(now_ms() - started) / 1000.0;
	uint64_t rd = __atomic_load_n(&st->read_bytes, __ATOMIC_RELAXED);
	uint64_t cat = __atomic_load_n(&st->catalog, __ATOMIC_RELAXED);
	uint64_t cmp = __atomic_load_n(&st->compressed, __ATOMIC_RELAXED);
	double rate = secs > 0 ? (double)rd / secs : 0;
	log_info("backup %s: read %.1f of %.1f MiB found so far, %.1f MiB/s, stored %.1f MiB%s",
			 st->name, (double)rd / 1048576, (double)cat / 1048576, rate / 1048576,
			 (double)cmp / 1048576, "");
}

/* Walk and pack while watching the session and signals; the first failure stops everything. */
static err_code pack_data(pg_session *s, push_state *st)
{
	int nworkers = 1 + st->cfg->upload_disk_concurrency, finished = 0;
	worker *ws = xcalloc((size_t)nworkers, sizeof(*ws));
	st->entries = chan_new(256);
	st->g = group_new();
	group_on_cancel(st->g, cancel_entries, st->entries);
	for (int i = 0; i < nworkers; i++) {
		ws[i] = (worker){ st, i == 0 ? walk_pgdata : pack_entries, &finished };
		if (group_go(st->g, run_worker, &ws[i]) != E_OK) {
			nworkers = i;
			break;
		}
	}
	long started = now_ms(), last_ping = started, last_log = started;
	while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < nworkers) {
		struct timespec ts = { 0, POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
		long t = now_ms();
		if (!group_cancelled(st->g) && push_stopped(st) != E_OK)
			group_fail(st->g, E_CANCELLED, err_msg());
		if (st->cfg->alive_check_ms > 0 && t - last_ping >= st->cfg->alive_check_ms) {
			last_ping = t;
			if (pg_ping(s) != E_OK)
				group_fail(st->g, E_IO, "lost the PostgreSQL session during the backup");
		}
		if (t - last_log >= PROGRESS_EVERY_MS) {
			last_log = t;
			log_progress(st, started);
		}
	}
	err_code rc = group_wait(st->g);
	group_free(st->g);
	st->g = NULL;
	/* Entries still queued after a failure belong to nobody else. */
	chan_drain(st->entries, free_entry);
	chan_free(st->entries);
	free(ws);
	if (rc == E_OK)
		log_progress(st, started);
	return rc;
}

static err_code read_pg_control(const char *pgdata, char **buf, size_t *len)
{
	char *path = xasprintf("%s/global/pg_control", pgdata);
	membuf mb = { .max = 65536 };
	sink *m = membuf_sink_new(&mb);
	err_code rc = sink_write_file(m, path);
	sink_free(m);
	free(path);
	*buf = (char *)mb.data;
	*len = mb.len;
	return rc;
}

static json_t *metadata_json(const backup_sentinel *s, const push_state *st)
{
	json_t *o = json_object();
	json_object_set_new(o, "start_time", json_string(s->start_time));
	json_object_set_new(o, "finish_time", json_string(s->finish_time));
	json_object_set_new(o, "date_fmt", json_string("%Y-%m-%dT%H:%M:%S.%fZ"));
	json_object_set_new(o, "hostname", json_string(s->hostname));
	json_object_set_new(o, "data_dir", json_string(s->data_dir));
	json_object_set_new(o, "pg_version", json_integer(s->pg_version));
	json_object_set_new(o, "start_lsn", json_integer((json_int_t)s->lsn));
	json_object_set_new(o, "finish_lsn", json_integer((json_int_t)s->finish_lsn));
	json_object_set_new(o, "is_permanent", json_boolean(s->is_permanent));
	json_object_set_new(o, "system_identifier", json_integer((json_int_t)s->system_id));
	json_object_set_new(o, "uncompressed_size", json_integer((json_int_t)s->uncompressed_size));
	json_object_set_new(o, "compressed_size", json_integer((json_int_t)s->compressed_size));
	if (s->user_data != NULL)
		json_object_set(o, "user_data", s->user_data);
	/* walc extension, present when pages were verified; WAL-G ignores unknown keys. */
	if (st->verify)
		json_object_set_new(o, "corrupt_blocks", json_integer((json_int_t)st->corrupt_blocks));
	return o;
}

err_code push_parse_user_data(const char *text, json_t **out)
{
	json_error_t jerr;
	*out = NULL;
	if (text == NULL)
		return E_OK;
	*out = json_loads(text, JSON_DECODE_ANY, &jerr);
	if (*out == NULL)
		return err_set(E_CONFIG, "user data (--add-user-data or WALG_SENTINEL_USER_DATA) is not "
								 "valid JSON: %s",
					   jerr.text);
	return E_OK;
}

err_code push_store_control(push_state *st, const char *control, size_t len)
{
	const char *cname[] = { "/global/pg_control" };
	const char *cdata[] = { control };
	return pack_small_tar(st, "pg_control.tar", cname, cdata, &len, 1, 0600, NULL);
}

/*
 * The backup's WAL (start to stop segment) must not be in a gap walc recorded (segments dropped
 * past WALG_WAL_BACKLOG_MAX that PostgreSQL counts as archived, in pg_wal's journal or the
 * repository's walc_wal_lost.json): such a backup could not be restored, so it is not
 * published. Notes the newest gap before it, for the message that it is the first
 * restorable point after that gap.
 */
static err_code check_wal_gaps(push_state *st, const backup_sentinel *sen)
{
	uint64_t segsize = (uint64_t)st->cfg->wal->pg->pg_wal_size_mb << 20;
	uint64_t first = sen->lsn / segsize;
	uint64_t last = sen->finish_lsn > sen->lsn ? (sen->finish_lsn - 1) / segsize : first;
	char *wal_dir = st->pgdata ? xasprintf("%s/pg_wal", st->pgdata) : NULL;
	wal_lost lost;
	err_code rc = wal_lost_read_local(st->r, wal_dir, segsize, &lost);
	free(wal_dir);
	TRY(rc);
	free(st->gap_before);
	st->gap_before = NULL;
	for (uint64_t seg = first; rc == E_OK && seg <= last; seg++) {
		const wal_lost_gap *g = wal_lost_at(&lost, st->timeline, seg);
		if (g == NULL)
			continue;
		char name[WAL_NAME_LEN + 1], *what = wal_lost_describe(g, segsize);
		wal_name_format(name, st->timeline, seg, segsize);
		rc = err_set(E_NOTFOUND,
					 "backup-push: the backup's WAL segment %s was not archived: %s; a backup "
					 "without its WAL cannot be restored",
					 name, what);
		free(what);
	}
	const wal_lost_gap *before = NULL;
	for (size_t i = 0; i < lost.n; i++)
		if (lost.gaps[i].tli == st->timeline && lost.gaps[i].last < first &&
			(before == NULL || lost.gaps[i].last > before->last))
			before = &lost.gaps[i];
	if (rc == E_OK && before != NULL) {
		st->gap_before = wal_lost_describe(before, segsize);
		st->gap_last = before->last;
	}
	wal_lost_free(&lost);
	return rc;
}

/* Says so when no other backup starts after the newest recorded gap before this one. */
static void say_first_after_gap(push_state *st)
{
	if (st->gap_before == NULL)
		return;
	uint64_t segsize = (uint64_t)st->cfg->wal->pg->pg_wal_size_mb << 20;
	backup_refs refs;
	if (catalog_backups(st->r, &refs) != E_OK) {
		err_clear();
		return;
	}
	bool first = true;
	for (size_t i = 0; i < refs.len && first; i++) {
		char seg[WAL_NAME_LEN + 1];
		uint32_t tli;
		uint64_t s;
		const char *name = refs.items[i].name;
		if (strcmp(name, st->name) == 0 || !str_has_prefix(name, "base_") ||
			strlen(name) < 5 + WAL_NAME_LEN)
			continue;
		snprintf(seg, sizeof(seg), "%.24s", name + 5);
		if (wal_name_parse(seg, segsize, &tli, &s) == E_OK && tli == st->timeline &&
			s > st->gap_last)
			first = false;
		err_clear();
	}
	catalog_backups_free(&refs);
	if (first)
		log_info("backup %s is the first restorable point after a gap in the archived WAL: %s; "
				 "recovery to a time before it needs an older backup and stops at the gap",
				 st->name, st->gap_before);
}

err_code push_store_tail(push_state *st, backup_sentinel *sen, const char *label,
						 const char *spcmap)
{
	TRY(check_wal_gaps(st, sen));
	char *key = NULL;
	const char *lname[] = { "backup_label", "tablespace_map" };
	const char *ldata[] = { label, spcmap };
	size_t llen[] = { strlen(label), strlen(spcmap) };
	err_code rc = pack_small_tar(st, "backup_label.tar", lname, ldata, llen, 2, 0600, &key);
	if (rc == E_OK) {
		namelist members = { 0 };
		namelist_add(&members, "backup_label");
		namelist_add(&members, "tablespace_map");
		fmeta_part(st, strrchr(key, '/') + 1, &members);
	}
	free(key);
	TRY(rc);

	sen->finish_time = time_now_rfc3339();
	sen->uncompressed_size = st->uncompressed;
	sen->compressed_size = st->compressed;
	sen->data_catalog_size = st->catalog;
	if (st->spec != NULL)
		sen->spec = json_incref(st->spec);

	char *mkey = xasprintf("%s%s/metadata.json", repo_backups(st->r), st->name);
	json_t *meta = metadata_json(sen, st);
	rc = catalog_put_json(st->r, mkey, meta);
	json_decref(meta);
	if (rc == E_OK)
		push_published(st, mkey);
	free(mkey);
	TRY(rc);

	/* WALG_WITHOUT_FILES_METADATA: the sentinel says so; restores then take every part. */
	TRY(fmeta_finish(st));
	TRY(verify_objects(st));

	char *skey = xasprintf("%s%s" SENTINEL_SUFFIX, repo_backups(st->r), st->name);
	json_t *sj = catalog_sentinel_json(sen);
	rc = catalog_put_json(st->r, skey, sj);
	json_decref(sj);
	free(skey);
	return rc;
}

/*
 * The backup is complete once its WAL (start to stop segment) and its .backup history file
 * are archived. PostgreSQL's own wait in pg_backup_stop waits for the archiver, which runs
 * archive_command once per file, in order, behind any backlog, and looks once a second. walc
 * uploads those of the files that are still .ready to the backup's repository itself, and
 * waits for the archiver only for a file it could not upload. Not when archive_command is
 * failing, though: then the backup waits and fails as PostgreSQL's would, so that broken
 * archiving (and with it point-in-time recovery) is not hidden behind a successful backup.
 *
 * It leaves no wal-push marker and does not touch archive_status: the archiver may archive to
 * another repository than this backup's, so its own call must still run for every file.
 */
static err_code wait_archived(pg_session *s, push_state *st, const backup_sentinel *sen,
							  uint32_t tli)
{
	char *failing = NULL;
	if (pg_archiver_failing(s, &failing) != E_OK) {
		log_warn("reading pg_stat_archiver: %s", err_msg());
		failing = xstrdup("");
	}
	if (*failing != '\0')
		log_warn("archive_command is failing (last failure: %s); waiting for it to archive the "
				 "backup's WAL",
				 failing);
	uint64_t segsize = (uint64_t)st->cfg->wal->pg->pg_wal_size_mb << 20;
	uint64_t first = sen->lsn / segsize, last = (sen->finish_lsn - 1) / segsize;
	size_t n = (size_t)(last - first) + 2;
	char **names = xcalloc(n, sizeof *names);
	bool *ours = xcalloc(n, sizeof *ours);
	for (size_t i = 0; i + 1 < n; i++) {
		names[i] = xmalloc(WAL_NAME_LEN + 1);
		wal_name_format(names[i], tli, first + i, segsize);
	}
	names[n - 1] = xasprintf("%s.%08X.backup", names[0], (unsigned)(sen->lsn % segsize));
	bool push_failed = *failing != '\0';
	size_t pushed_count = 0;
	long waited = 0, limit = st->cfg->stop_backup_timeout_ms;
	err_code rc = E_OK;
	for (;;) {
		const char *busy = NULL;
		for (size_t i = 0; i < n; i++) {
			if (ours[i] || wal_archived(st->pgdata, names[i]))
				continue;
			if (!push_failed) {
				bool pushed;
				if (wal_push_if_ready(st->r, st->cfg->wal, st->pgdata, names[i], &pushed) != E_OK) {
					log_warn("uploading %s: %s; waiting for archive_command instead", names[i],
							 err_msg());
					push_failed = true;
				} else if (pushed) {
					ours[i] = true;
					pushed_count++;
					continue;
				}
			}
			if (busy == NULL)
				busy = names[i];
		}
		if (busy == NULL)
			break;
		if ((rc = push_stopped(st)) != E_OK)
			break;
		/* a file dropped past WALG_WAL_BACKLOG_MAX counts as archived, the .backup after it
		 * waits for a store that may be gone: the drop ends the wait, each second looked at
		 * (a store that cannot be read now does not: the wait goes on, as archiving's) */
		if (waited % 1000 == 0) {
			err_code gap = check_wal_gaps(st, sen);
			if (gap == E_NOTFOUND) {
				rc = gap;
				break;
			}
			if (gap != E_OK)
				err_clear();
		}
		if (limit > 0 && waited >= limit) {
			rc = err_set(E_IO,
						 "WAL file %s was not archived within WALG_STOP_BACKUP_TIMEOUT "
						 "(%ld ms): check archive_command%s%s%s",
						 busy, limit, *failing ? " (last failure: " : "", failing,
						 *failing ? ")" : "");
			break;
		}
		if (waited > 0 && waited % 10000 == 0)
			log_info("still waiting for %s to be archived", busy);
		struct timespec ts = { 0, 20 * 1000000L };
		nanosleep(&ts, NULL);
		waited += 20;
	}
	if (pushed_count > 0)
		log_info("uploaded %zu of the backup's WAL files ahead of the archiver", pushed_count);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(ours);
	free(failing);
	return rc;
}

/* Whether some object is stored for WAL file name. */
static err_code wal_stored(push_state *st, const char *name, bool *stored)
{
	char *base = xasprintf(REPO_WAL_DIR "%s", name), *key = NULL;
	err_code rc = repo_find(st->r, base, &key);
	free(base);
	free(key);
	*stored = rc == E_OK;
	if (rc == E_NOTFOUND) {
		err_clear();
		rc = E_OK;
	}
	return rc;
}

#define STORED_POLL_MS 500
#define STORED_SAY_MS 10000

err_code push_wait_stored(push_state *st, uint64_t start_lsn, uint64_t end_lsn, uint32_t tli)
{
	uint64_t segsize = (uint64_t)st->cfg->wal->pg->pg_wal_size_mb << 20;
	uint64_t seg = start_lsn / segsize, last = (end_lsn > 0 ? end_lsn - 1 : 0) / segsize;
	long limit = st->cfg->stop_backup_timeout_ms, started = now_ms(), said = 0;
	char name[WAL_NAME_LEN + 1], last_name[WAL_NAME_LEN + 1];
	wal_name_format(last_name, tli, last, segsize);
	for (; seg <= last; seg++) {
		wal_name_format(name, tli, seg, segsize);
		for (;;) {
			bool stored;
			TRY(wal_stored(st, name, &stored));
			if (stored)
				break;
			TRY(push_stopped(st));
			long waited = now_ms() - started;
			if (limit > 0 && waited >= limit)
				return err_set(E_IO,
							   "WAL segment %s was not archived into %s within "
							   "WALG_STOP_BACKUP_TIMEOUT (%ld ms): a backup from a standby "
							   "needs the primary to archive its WAL (check the primary's "
							   "archive_command)",
							   name, repo_describe(st->r), limit);
			if (said == 0 || waited - said >= STORED_SAY_MS) {
				said = waited > 0 ? waited : 1;
				log_info("backup from a standby: waiting for the primary to archive WAL segment "
						 "%s into %s (the backup's WAL ends in %s; a segment completes at a WAL "
						 "switch on the primary or at its archive_timeout)",
						 name, repo_describe(st->r), last_name);
			}
			struct timespec ts = { 0, STORED_POLL_MS * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	return E_OK;
}

static err_code finish_local(pg_session *s, push_state *st, backup_sentinel *sen)
{
	char *control, *label = NULL, *spcmap = NULL;
	size_t control_len;
	TRY(read_pg_control(st->pgdata, &control, &control_len));
	err_code rc = push_store_control(st, control, control_len);
	free(control);
	TRY(rc);
	/* On a primary that archives, walc waits for the archive itself (faster, same rule). */
	bool self_wait = st->archiving && !st->in_recovery;
	log_info("calling pg_backup_stop; the backup's WAL must be archived before it is complete");
	TRY(pg_backup_end(s, st->cfg->stop_backup_timeout_ms, !self_wait, &label, &spcmap,
					  &sen->finish_lsn));
	err_code wrc = self_wait		  ? wait_archived(s, st, sen, st->timeline)
		: st->in_recovery ? push_wait_stored(st, sen->lsn, sen->finish_lsn, st->timeline)
						  : E_OK;
	if (wrc != E_OK) {
		free(label);
		free(spcmap);
		return wrc;
	}
	/* what --restore-only chooses among; the backup is whole without it */
	if (st->fmeta != NULL && !st->cfg->disable_partial_restore)
		rc = push_databases_by_names(st, s);
	if (rc == E_OK)
		rc = push_store_tail(st, sen, label, spcmap);
	free(label);
	free(spcmap);
	return rc;
}

static err_code push_local(const backup_settings *cfg, const push_options *opt,
						   push_state *st, backup_sentinel *sen, pg_session **sp)
{
	char *probe;
	st->pgdata = realpath(opt->pgdata, NULL);
	if (st->pgdata == NULL)
		return err_errno(E_CONFIG, errno, "backup-push: %s", opt->pgdata);
	probe = xasprintf("%s/PG_VERSION", st->pgdata);
	bool ok = access(probe, R_OK) == 0;
	free(probe);
	probe = xasprintf("%s/global/pg_control", st->pgdata);
	ok = ok && access(probe, R_OK) == 0;
	free(probe);
	if (!ok)
		return err_set(E_CONFIG, "backup-push: %s is not a PostgreSQL data directory "
								 "(no PG_VERSION or global/pg_control)",
					   st->pgdata);
	TRY(push_parse_user_data(opt->user_data ? opt->user_data : cfg->sentinel_user_data,
							 &sen->user_data));

	sen->data_dir = xstrdup(st->pgdata);
	if (opt->catchup)
		delta_catchup(opt->catchup_from_lsn, &st->delta);
	else
		TRY(delta_choose(st->r, cfg, opt, &st->delta));
	TRY(pg_connect(false, sp));
	pg_session *s = *sp;
	pg_server_info si;
	err_code rc = pg_server_info_get(s, &si);
	if (rc == E_OK)
		rc = check_server(&si, st);
	sen->system_id = si.system_id;
	st->archiving = check_archiving(&si);
	bool checksums = si.data_checksums;
	pg_server_info_free(&si);
	TRY(rc);
	sen->have_system_id = true;
	TRY(catalog_check_cluster(st->r, sen->system_id, cfg->wal->catalog, "backup-push"));
	sen->pg_version = pg_server_version(s);

	sen->start_time = time_now_rfc3339();
	pg_backup_start_info bs;
	TRY(pg_backup_begin(s, sen->start_time, &bs));
	sen->lsn = bs.lsn;
	st->start_lsn = bs.lsn;
	st->in_recovery = bs.in_recovery;
	TRY(delta_check(&st->delta, sen->system_id, bs.lsn));
	TRY(backup_name_for(s, st, &bs, &st->name));
	unsigned tli = 0;
	sscanf(st->name + strlen("base_"), "%8X", &tli);
	st->timeline = tli;
	if (st->delta.active && !st->delta.catchup) {
		char *full = st->name;
		const char *seg = st->delta.name + strlen("base_");
		st->name = xasprintf("%s_D_%.24s", full, seg);
		free(full);
	}
	if (st->delta.active) {
		sen->is_delta = true;
		sen->delta_from = xstrdup(st->delta.name);
		sen->delta_full_name = xstrdup(st->delta.full_name);
		sen->delta_count = st->delta.count;
		sen->delta_lsn = st->delta.lsn;
	}
	TRY(push_claim(st, bs.lsn, st->timeline));
	st->verify = opt->verify || cfg->verify_page_checksums;
	st->store_all = opt->store_all_corrupt || cfg->store_all_corrupt_blocks;
	if (st->verify && !checksums) {
		log_warn("data_checksums is off on this cluster: page checksums are not verified");
		st->verify = false;
	}
	char lsn[32];
	pg_lsn_format(bs.lsn, lsn);
	log_info("backup %s started at LSN %s", st->name, lsn);

	TRY(pack_data(s, st));
	return finish_local(s, st, sen);
}

err_code backup_push(repo *r, const backup_settings *cfg, const push_options *opt)
{
	push_state st = { .r = r, .cfg = cfg };
	backup_sentinel sen = { 0 };
	pg_session *s = NULL;
	char host[256] = "";

	pthread_mutex_init(&st.lock, NULL);
	st.disk = cfg->disk_rate_limit ? rate_new(cfg->disk_rate_limit) : NULL;
	st.published = json_array();
	gethostname(host, sizeof(host) - 1);
	sen.hostname = xstrdup(host);
	sen.is_permanent = opt->permanent;
	sen.files_metadata_disabled = opt->without_files_metadata || cfg->without_files_metadata;
	st.no_files_metadata = sen.files_metadata_disabled;

	err_code rc = opt->pgdata != NULL ? push_local(cfg, opt, &st, &sen, &s)
									  : push_remote_all(cfg, opt, &st, &sen);
	if (rc == E_OK) {
		log_info("wrote backup %s to %s: %llu files, %.1f MiB read, %.1f MiB stored", st.name,
				 repo_describe(r), (unsigned long long)st.nfiles,
				 (double)st.uncompressed / 1048576, (double)st.compressed / 1048576);
		/* WAL-G's words: operators (StackGres) take the backup's name from this line. */
		log_info("Wrote backup with name %s to storage %s", st.name, repo_storage_name(st.r));
		if (st.corrupt_blocks > 0)
			log_warn("backup %s: %llu corrupt pages found (recorded in files_metadata.json)",
					 st.name, (unsigned long long)st.corrupt_blocks);
		say_first_after_gap(&st);
	} else if (st.name != NULL) {
		err_wrap(rc, "backup %s failed (no sentinel written, so it does not exist)", st.name);
		/* Unless the name went to another push: then what is there may be its objects. */
		if (st.claim != NULL && !catalog_claim_lost(st.claim) && !st.mixed) {
			char *msg = xstrdup(err_msg());
			remove_published(&st);
			err_set(rc, "%s", msg);
			free(msg);
		}
	}
	catalog_claim_end(st.claim, rc != E_OK);
	/* Closing the session ends a backup still running on the server. */
	pg_disconnect(s);
	catalog_sentinel_free(&sen);
	fmeta_free(st.fmeta);
	json_decref(st.published);
	json_decref(st.spec);
	delta_free(&st.delta);
	free(st.pgdata);
	free(st.name);
	free(st.gap_before);
	free(st.manifest_key);
	pthread_mutex_destroy(&st.lock);
	rate_free(st.disk);
	return rc;
}
