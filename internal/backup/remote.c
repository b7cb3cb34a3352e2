/*
 * backup-push without a data directory: BASE_BACKUP over a replication connection (as
 * pg_basebackup does, PostgreSQL 15+ archive stream), each tar archive parsed on the fly and
 * its members re-packed into WAL-G's partitions, so a pod without PGDATA can take backups.
 */
#include "internal/backup/push_impl.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/pg/pg.h"

/* What one archive of the stream needs while its members are re-packed. */
typedef struct remote {
	push_state *st;
	part p;
	sink *reader;	 /* tar reader of the current archive */
	char *prefix;	 /* "" for base.tar, "/pg_tblspc/<oid>" for a tablespace */
	/* current member */
	char *member;
	bool keep;		 /* member written to the part */
	membuf *grab;	 /* or collected: pg_control, backup_label, tablespace_map */
	hasher *hash;	 /* of the member's content, for delta restore */
	struct stat sb;
	/* collected, owned by the caller */
	membuf *control, *label, *spcmap;
} remote;

static membuf *grab_for(remote *rm, const char *name)
{
	if (rm->prefix[0] != '\0')
		return NULL;
	if (strcmp(name, "global/pg_control") == 0)
		return rm->control;
	if (strcmp(name, "backup_label") == 0)
		return rm->label;
	if (strcmp(name, "tablespace_map") == 0)
		return rm->spcmap;
	return NULL;
}

static err_code rm_entry(void *ctx, const tar_entry *e)
{
	remote *rm = ctx;
	const char *name = e->name;
	while (str_has_prefix(name, "./"))
		name += 2;
	free(rm->member);
	rm->member = NULL;
	rm->keep = false;
	rm->grab = grab_for(rm, name);
	if (rm->grab != NULL) {
		rm->grab->len = 0;
		rm->grab->max = 1u << 20;
		return E_OK;
	}
	if (e->type != TAR_FILE && e->type != TAR_DIR)
		return E_OK; /* links come back from the spec; pg_basebackup adds nothing else */
	size_t n = strlen(name);
	while (n > 0 && name[n - 1] == '/')
		n--;
	rm->member = n == 0 && rm->prefix[0] == '\0'
		? xstrdup("/")
		: xasprintf("%s/%.*s", rm->prefix, (int)n, name);
	memset(&rm->sb, 0, sizeof(rm->sb));
	rm->sb.st_mode = (e->type == TAR_DIR ? S_IFDIR : S_IFREG) | (mode_t)e->mode;
	rm->sb.st_size = (off_t)e->size;
	rm->sb.st_mtim.tv_sec = e->mtime;
	if (rm->p.tw == NULL)
		TRY(part_open(rm->st, &rm->p));
	tar_entry te = *e;
	te.name = rm->member;
	TRY(tar_writer_begin(rm->p.tw, &te));
	rm->keep = true;
	hasher_free(rm->hash);
	rm->hash = e->type == TAR_FILE ? hasher_new() : NULL;
	__atomic_add_fetch(&rm->st->catalog, e->size, __ATOMIC_RELAXED);
	return E_OK;
}

static err_code rm_data(void *ctx, const void *buf, size_t len)
{
	remote *rm = ctx;
	if (rm->grab != NULL) {
		sink *m = membuf_sink_new(rm->grab);
		err_code rc = sink_write(m, buf, len);
		sink_free(m);
		return rc;
	}
	if (!rm->keep)
		return E_OK;
	__atomic_add_fetch(&rm->st->read_bytes, len, __ATOMIC_RELAXED);
	if (rm->hash != NULL)
		hasher_update(rm->hash, buf, len);
	return tar_writer_write(rm->p.tw, buf, len);
}

static err_code rm_entry_end(void *ctx)
{
	remote *rm = ctx;
	if (!rm->keep)
		return E_OK;
	rm->keep = false;
	TRY(tar_writer_end(rm->p.tw));
	json_array_append_new(rm->p.members, json_string(rm->member));
	if (strcmp(rm->member, "/") != 0) {
		json_t *rec = file_record(&rm->sb, DELTA_WHOLE);
		if (rm->hash != NULL) {
			char sum[HASH_TEXT_LEN + 1];
			hasher_text(rm->hash, sum);
			json_object_set_new(rec, "Checksum", json_string(sum));
			json_object_set_new(rec, "Size", json_integer((json_int_t)rm->sb.st_size));
		}
		pthread_mutex_lock(&rm->st->lock);
		json_object_set_new(rm->st->files, rm->member, rec);
		pthread_mutex_unlock(&rm->st->lock);
	}
	if (S_ISREG(rm->sb.st_mode)) {
		uint64_t size = (uint64_t)rm->sb.st_size;
		rm->p.content += size;
		__atomic_add_fetch(&rm->st->uncompressed, size, __ATOMIC_RELAXED);
		__atomic_add_fetch(&rm->st->nfiles, 1, __ATOMIC_RELAXED);
	}
	if (rm->p.content > (uint64_t)rm->st->cfg->tar_size_threshold)
		return part_close(rm->st, &rm->p);
	return E_OK;
}

static const tar_handler remote_handler = { rm_entry, rm_data, rm_entry_end };

static err_code conn_fail(PGconn *conn, const char *what)
{
	char *m = xstrdup(PQerrorMessage(conn));
	size_t n = strlen(m);
	while (n > 0 && m[n - 1] == '\n')
		m[--n] = '\0';
	err_code rc = err_set(E_IO, "%s: %s", what, m);
	free(m);
	return rc;
}

static err_code expect_tuples(PGconn *conn, PGresult **res, const char *what)
{
	*res = PQgetResult(conn);
	if (PQresultStatus(*res) != PGRES_TUPLES_OK) {
		char *m = xstrdup(*res ? PQresultErrorMessage(*res) : PQerrorMessage(conn));
		size_t n = strlen(m);
		while (n > 0 && m[n - 1] == '\n')
			m[--n] = '\0';
		err_code rc = err_set(E_IO, "BASE_BACKUP %s: %s", what, m);
		free(m);
		PQclear(*res);
		*res = NULL;
		return rc;
	}
	return E_OK;
}

/* Tablespaces from BASE_BACKUP's header: (spcoid, spclocation, size); base has a NULL oid. */
static void record_tablespaces(push_state *st, PGresult *res)
{
	for (int i = 0; i < PQntuples(res); i++) {
		if (PQgetisnull(res, i, 0))
			continue;
		/* Like WAL-G: the base prefix is the server's data directory, where links go. */
		spec_add_tablespace(st, st->remote_data_dir ? st->remote_data_dir : "",
							PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
	}
}

/* The archive named in an 'n' message: "base.tar" or "<oid>.tar". */
static err_code start_archive(remote *rm, const char *name)
{
	free(rm->prefix);
	if (strcmp(name, "base.tar") == 0)
		rm->prefix = xstrdup("");
	else {
		size_t n = strspn(name, "0123456789");
		if (n == 0 || strcmp(name + n, ".tar") != 0)
			return err_set(E_CORRUPT, "BASE_BACKUP sent an unexpected archive \"%s\"", name);
		rm->prefix = xasprintf("/pg_tblspc/%.*s", (int)n, name);
	}
	rm->reader = tar_reader_new(&remote_handler, rm);
	return E_OK;
}

static err_code end_archive(remote *rm)
{
	if (rm->reader == NULL)
		return E_OK;
	err_code rc = sink_finish(rm->reader);
	sink_free(rm->reader);
	rm->reader = NULL;
	return rc;
}

static err_code copy_stream(PGconn *conn, remote *rm)
{
	for (;;) {
		if (group_cancelled(rm->st->g))
			return err_set(E_CANCELLED, "backup cancelled");
		TRY(push_stopped(rm->st));
		char *buf = NULL;
		int n = PQgetCopyData(conn, &buf, 0);
		if (n == -1)
			break;
		if (n == -2)
			return conn_fail(conn, "receiving BASE_BACKUP data");
		err_code rc = E_OK;
		if (n < 1)
			rc = err_set(E_CORRUPT, "empty BASE_BACKUP message");
		else if (buf[0] == 'n') {
			/* name \0 tablespace path \0 */
			if (memchr(buf + 1, '\0', (size_t)n - 1) == NULL)
				rc = err_set(E_CORRUPT, "malformed BASE_BACKUP archive header");
			else if ((rc = end_archive(rm)) == E_OK)
				rc = start_archive(rm, buf + 1);
		} else if (buf[0] == 'd') {
			rc = rm->reader ? sink_write(rm->reader, buf + 1, (size_t)n - 1)
							: err_set(E_CORRUPT, "BASE_BACKUP data before an archive header");
		} else if (buf[0] == 'm') {
			rc = end_archive(rm); /* a manifest follows; we asked for none */
		}
		PQfreemem(buf);
		if (rc != E_OK)
			return rc;
	}
	return end_archive(rm);
}

static err_code run_base_backup(PGconn *conn, remote *rm, uint64_t *start, uint64_t *end)
{
	uint32_t tli;
	const config *cfg = rm->st->cfg;
	char cmd[256];
	PGresult *res;
	int len = snprintf(cmd, sizeof(cmd),
					   "BASE_BACKUP (LABEL 'walc', CHECKPOINT 'fast', TABLESPACE_MAP, WAIT "
					   "true, MANIFEST 'no'");
	if (cfg->disk_rate_limit > 0) {
		uint64_t kb = cfg->disk_rate_limit / 1024;
		len += snprintf(cmd + len, sizeof(cmd) - (size_t)len, ", MAX_RATE %llu",
						(unsigned long long)(kb < 32 ? 32 : kb > 1048576 ? 1048576 : kb));
	}
	snprintf(cmd + len, sizeof(cmd) - (size_t)len, ")");
	if (!PQsendQuery(conn, cmd))
		return conn_fail(conn, "sending BASE_BACKUP");
	TRY(expect_tuples(conn, &res, "start"));
	err_code rc = pg_lsn_parse(PQgetvalue(res, 0, 0), start);
	tli = (uint32_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	TRY(rc);
	/* Remote rule (reference §5.8): the segment holding the start LSN, no -1. */
	uint64_t segsize = (uint64_t)cfg->pg_wal_size_mb << 20;
	char seg[WAL_NAME_LEN + 1];
	wal_name_format(seg, tli, *start / segsize, segsize);
	rm->st->name = xasprintf("base_%s", seg);
	char lsn[32];
	pg_lsn_format(*start, lsn);
	TRY(push_claim(rm->st, *start, tli));
	log_info("backup %s started at LSN %s (BASE_BACKUP)", rm->st->name, lsn);
	TRY(expect_tuples(conn, &res, "tablespaces"));
	record_tablespaces(rm->st, res);
	PQclear(res);
	res = PQgetResult(conn);
	if (PQresultStatus(res) != PGRES_COPY_OUT) {
		PQclear(res);
		return conn_fail(conn, "BASE_BACKUP did not start streaming");
	}
	PQclear(res);
	TRY(copy_stream(conn, rm));
	/* After the stream: the end position (a row), command completions, then nothing. */
	bool have_end = false;
	err_code rc2 = E_OK;
	while ((res = PQgetResult(conn)) != NULL) {
		ExecStatusType rs = PQresultStatus(res);
		if (rs == PGRES_TUPLES_OK && PQntuples(res) == 1 && !have_end) {
			rc2 = pg_lsn_parse(PQgetvalue(res, 0, 0), end);
			have_end = true;
		} else if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK && rc2 == E_OK) {
			rc2 = err_set(E_IO, "BASE_BACKUP failed: %s", PQresultErrorMessage(res));
		}
		PQclear(res);
	}
	if (rc2 == E_OK && !have_end)
		rc2 = err_set(E_IO, "BASE_BACKUP ended without an end position");
	rc = rc2;
	return rc;
}

static err_code identify(pg_session *s, uint64_t *sysid)
{
	PGresult *res = PQexec(pg_session_conn(s), "IDENTIFY_SYSTEM");
	err_code rc = E_OK;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		rc = conn_fail(pg_session_conn(s), "IDENTIFY_SYSTEM");
	else
		*sysid = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return rc;
}

err_code push_remote(push_state *st, backup_sentinel *sen, membuf *control, membuf *label,
					 membuf *spcmap)
{
	pg_session *s = NULL;
	remote rm = { .st = st, .control = control, .label = label, .spcmap = spcmap };

	err_code rc = pg_connect(true, &s);
	if (rc == E_OK && pg_server_version(s) < 150000)
		rc = err_set(E_CONFIG, "backup-push without PGDATA needs PostgreSQL 15 or later (this "
							   "server is %d); pass the data directory instead",
					 pg_server_version(s));
	if (rc == E_OK)
		rc = identify(s, &sen->system_id);
	if (rc == E_OK)
		rc = catalog_check_cluster(st->r, sen->system_id, st->cfg->allow_system_id_change,
								   "backup-push");
	if (rc == E_OK) {
		sen->have_system_id = true;
		sen->pg_version = pg_server_version(s);
		char *dir = NULL;
		if (pg_query_value(s, "SHOW data_directory", &dir) == E_OK) {
			sen->data_dir = dir;
			st->remote_data_dir = dir;
		}
		err_clear();
		st->g = group_new(); /* only for cancellation by signal */
		rc = run_base_backup(pg_session_conn(s), &rm, &sen->lsn, &sen->finish_lsn);
	}
	if (rc == E_OK && rm.p.tw != NULL)
		rc = part_close(st, &rm.p);
	if (rc == E_OK && control->len == 0)
		rc = err_set(E_CORRUPT, "BASE_BACKUP sent no global/pg_control");
	if (rc == E_OK && label->len == 0)
		rc = err_set(E_CORRUPT, "BASE_BACKUP sent no backup_label");
	part_discard(&rm.p);
	hasher_free(rm.hash);
	sink_free(rm.reader);
	free(rm.prefix);
	free(rm.member);
	pg_disconnect(s);
	if (st->g != NULL) {
		group_wait(st->g);
		group_free(st->g);
		st->g = NULL;
	}
	return rc;
}
