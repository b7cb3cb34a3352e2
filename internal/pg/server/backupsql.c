/* The SQL side of a non-exclusive base backup, held on one session from start to stop. */
#include "internal/pg/server/session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

err_code pg_query_row(pg_session *s, const char *sql, int nparams, const char *const *params,
					  int ncols, char **cols)
{
	PGresult *res = PQexecParams(s->conn, sql, nparams, NULL, params, NULL, NULL, 0);
	err_code rc = E_OK;
	for (int i = 0; i < ncols; i++)
		cols[i] = NULL;
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		char *msg = xstrdup(PQresultErrorMessage(res));
		size_t n = strlen(msg);
		while (n > 0 && msg[n - 1] == '\n')
			msg[--n] = '\0';
		rc = err_set(E_IO, "query \"%.60s\" failed: %s", sql, msg);
		free(msg);
	} else if (PQntuples(res) != 1 || PQnfields(res) < ncols) {
		rc = err_set(E_IO, "query \"%.60s\" returned %d rows", sql, PQntuples(res));
	} else {
		for (int i = 0; i < ncols; i++)
			cols[i] = xstrdup(PQgetisnull(res, 0, i) ? "" : PQgetvalue(res, 0, i));
	}
	PQclear(res);
	return rc;
}

static void free_cols(char **cols, int n)
{
	for (int i = 0; i < n; i++)
		free(cols[i]);
}

err_code pg_backup_begin(pg_session *s, const char *label, pg_backup_start_info *out)
{
	const char *sql15 = "SELECT CASE WHEN pg_is_in_recovery() THEN '' ELSE "
						"(pg_walfile_name_offset(lsn)).file_name END, lsn::text, "
						"pg_is_in_recovery() FROM pg_backup_start($1, true) lsn";
	const char *sql10 = "SELECT CASE WHEN pg_is_in_recovery() THEN '' ELSE "
						"(pg_walfile_name_offset(lsn)).file_name END, lsn::text, "
						"pg_is_in_recovery() FROM pg_start_backup($1, true, false) lsn";
	char *cols[3];
	memset(out, 0, sizeof(*out));
	TRY(pg_query_row(s, pg_server_version(s) >= 150000 ? sql15 : sql10, 1, &label, 3, cols));
	err_code rc = pg_lsn_parse(cols[1], &out->lsn);
	snprintf(out->walfile, sizeof(out->walfile), "%s", cols[0]);
	out->in_recovery = strcmp(cols[2], "t") == 0;
	free_cols(cols, 3);
	return rc;
}

err_code pg_backup_end(pg_session *s, long stop_timeout_ms, bool wait_archive, char **labelfile,
					   char **spcmap, uint64_t *lsn)
{
	char set[64];
	char *cols[3];
	*labelfile = *spcmap = NULL;
	snprintf(set, sizeof(set), "SET statement_timeout = %ld", stop_timeout_ms);
	TRY(pg_exec(s, set));
	const char *sql = pg_server_version(s) >= 150000
		? (wait_archive ? "SELECT labelfile, spcmapfile, lsn::text FROM pg_backup_stop(true)"
						: "SELECT labelfile, spcmapfile, lsn::text FROM pg_backup_stop(false)")
		: (wait_archive
			   ? "SELECT labelfile, spcmapfile, lsn::text FROM pg_stop_backup(false, true)"
			   : "SELECT labelfile, spcmapfile, lsn::text FROM pg_stop_backup(false, false)");
	err_code rc = pg_query_row(s, sql, 0, NULL, 3, cols);
	if (rc != E_OK) {
		if (stop_timeout_ms > 0 && strstr(err_msg(), "statement timeout") != NULL)
			return err_set(E_IO,
						   "pg_backup_stop did not return within WALG_STOP_BACKUP_TIMEOUT "
						   "(%ld ms): it waits until the backup's WAL is archived; check "
						   "archive_command",
						   stop_timeout_ms);
		return rc;
	}
	rc = pg_lsn_parse(cols[2], lsn);
	*labelfile = cols[0];
	*spcmap = cols[1];
	free(cols[2]);
	if (rc == E_OK)
		rc = pg_exec(s, "SET statement_timeout = 0");
	return rc;
}
