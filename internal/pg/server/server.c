/* What commands ask the server before and around their work: settings, identity, WAL state. */
#include "internal/pg/server/session_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static err_code parse_u64(const char *sql, const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	*out = strtoull(v, &end, 10);
	if (errno == 0 && end != v && *end == '\0')
		return E_OK;
	return err_set(E_IO, "query \"%s\" returned \"%s\", not a number", sql, v);
}

static err_code query_u64(pg_session *s, const char *sql, uint64_t *out)
{
	char *v;
	TRY(pg_query_value(s, sql, &v));
	err_code rc = parse_u64(sql, v, out);
	free(v);
	return rc;
}

/* A setting that may not exist on this major, or not be shown to this role: NULL then. */
static char *show_optional(pg_session *s, const char *name)
{
	char *sql = xasprintf("SHOW %s", name), *v = NULL;
	if (pg_query_value(s, sql, &v) != E_OK) {
		err_clear();
		v = NULL;
	}
	free(sql);
	return v;
}

static bool show_on(pg_session *s, const char *name)
{
	char *v = show_optional(s, name);
	bool on = v != NULL && strcmp(v, "on") == 0;
	free(v);
	return on;
}

/* IDENTIFY_SYSTEM: systemid, timeline, xlogpos, dbname. */
static err_code identify(pg_session *s, pg_server_info *out)
{
	PGresult *res = PQexec(s->conn, "IDENTIFY_SYSTEM");
	err_code rc = E_OK;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQnfields(res) < 2)
		rc = pg_conn_error(s->conn, "IDENTIFY_SYSTEM");
	else if ((rc = parse_u64("IDENTIFY_SYSTEM", PQgetvalue(res, 0, 0), &out->system_id)) == E_OK) {
		out->timeline = (uint32_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
		if (PQnfields(res) >= 3)
			rc = pg_lsn_parse(PQgetvalue(res, 0, 2), &out->xlogpos);
	}
	PQclear(res);
	return rc;
}

/* SHOW wal_segment_size as the server prints it ("16MB", "1GB"), in bytes; 0 if not that. */
static uint64_t segsize_bytes(const char *v)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(v, &end, 10);
	if (errno != 0 || end == v || n == 0 || n > 1024)
		return 0;
	uint64_t unit = strcmp(end, "MB") == 0 ? UINT64_C(1) << 20
		: strcmp(end, "GB") == 0		   ? UINT64_C(1) << 30
		: strcmp(end, "kB") == 0		   ? UINT64_C(1) << 10
										   : 0;
	return n * unit;
}

err_code pg_server_info_get(pg_session *s, pg_server_info *out)
{
	memset(out, 0, sizeof(*out));
	out->version = PQserverVersion(s->conn);
	if (s->replication) {
		TRY(identify(s, out));
		out->data_dir = show_optional(s, "data_directory");
		if (out->data_dir == NULL)
			out->data_dir = xstrdup("");
		char *seg = show_optional(s, "wal_segment_size");
		out->wal_segsize = seg ? segsize_bytes(seg) : 0;
		free(seg);
	} else {
		TRY(pg_query_value(s, "SHOW data_directory", &out->data_dir));
		TRY(query_u64(s, "SELECT system_identifier FROM pg_control_system()", &out->system_id));
		TRY(query_u64(s, "SELECT bytes_per_wal_segment FROM pg_control_init()",
					  &out->wal_segsize));
	}
	out->archive_mode = show_optional(s, "archive_mode");
	out->archive_command = show_optional(s, "archive_command");
	out->archive_library = out->version >= 150000 ? show_optional(s, "archive_library") : NULL;
	out->data_checksums = show_on(s, "data_checksums");
	out->summarize_wal = out->version >= 170000 && show_on(s, "summarize_wal");
	return E_OK;
}

void pg_server_info_free(pg_server_info *i)
{
	free(i->data_dir);
	free(i->archive_mode);
	free(i->archive_command);
	free(i->archive_library);
	memset(i, 0, sizeof(*i));
}

err_code pg_checkpoint_timeline(pg_session *s, uint32_t *tli)
{
	uint64_t v;
	TRY(query_u64(s, "SELECT timeline_id FROM pg_control_checkpoint()", &v));
	*tli = (uint32_t)v;
	return E_OK;
}

err_code pg_archiver_failing(pg_session *s, char **failing)
{
	return pg_query_value(s,
						  "SELECT CASE WHEN last_failed_time > coalesce(last_archived_time, "
						  "'-infinity') THEN last_failed_wal || ' at ' || last_failed_time "
						  "ELSE '' END FROM pg_stat_archiver",
						  failing);
}

err_code pg_wal_position(pg_session *s, uint32_t *tli, uint64_t *lsn)
{
	char *standby = NULL, *l = NULL, *t = NULL;
	err_code rc = pg_query_value(s, "SELECT pg_is_in_recovery()", &standby);
	bool on_standby = rc == E_OK && strcmp(standby, "t") == 0;
	if (rc == E_OK)
		rc = pg_query_value(s,
							on_standby ? "SELECT COALESCE(pg_last_wal_receive_lsn(), "
										 "pg_last_wal_replay_lsn())"
									   : "SELECT pg_current_wal_lsn()",
							&l);
	/* After a promotion pg_control_checkpoint() lags until the next checkpoint. */
	if (rc == E_OK)
		rc = pg_query_value(s,
							on_standby ? "SELECT timeline_id FROM pg_control_checkpoint()"
									   : "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_"
										 "lsn()), 1, 8))::bit(32)::int",
							&t);
	if (rc == E_OK)
		rc = pg_lsn_parse(l, lsn);
	if (rc == E_OK)
		*tli = (uint32_t)strtoul(t, NULL, 10);
	free(standby);
	free(l);
	free(t);
	return rc;
}
