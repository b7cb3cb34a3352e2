/* libpq sessions from the PG* environment, with errors that name the server. */
#include "internal/pg/server/session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void chomp(char *s)
{
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
}

err_code pg_conn_error(PGconn *conn, const char *what)
{
	char *msg = xstrdup(PQerrorMessage(conn));
	chomp(msg);
	/* The message names host and port; never the password, which libpq does not echo. */
	err_code rc = err_set(E_IO, "%s: %s", what, msg);
	free(msg);
	return rc;
}

/* Server notices ("all required WAL segments have been archived") belong in our log. */
static void on_notice(void *arg, const char *message)
{
	(void)arg;
	char *m = xstrdup(message);
	chomp(m);
	log_debug("server: %s", m);
	free(m);
}

/* dbname: an SQL session's database, NULL for PGDATABASE's (or the fallback below). */
static err_code connect_to(bool replication, const char *dbname, pg_session **out)
{
	/*
	 * The session's name is PGAPPNAME, which libpq reads itself: cmd puts the setting (its
	 * default included) into the environment, as WAL-G does.
	 */
	const char *keys[] = { "replication", NULL, NULL };
	const char *vals[] = { "true", NULL, NULL };
	if (!replication) {
		keys[0] = dbname != NULL ? "dbname" : NULL;
		vals[0] = dbname;
	}
	*out = NULL;
	/* a database's name is a name, never a connection string (CREATE DATABASE "host=...") */
	PGconn *conn = PQconnectdbParams(keys, vals, dbname == NULL);
	if (conn == NULL)
		return err_set(E_IO, "connecting to PostgreSQL: out of memory");
	/*
	 * walc's SQL sessions read only what is the same in every database (backup start and
	 * stop, WAL positions, slots). Without PGDATABASE libpq takes the role's name, which a
	 * role made for backups (walc_backup) seldom has: then the postgres database will do.
	 */
	const char *db = dbname != NULL ? dbname : getenv("PGDATABASE");
	if (!replication && (db == NULL || db[0] == '\0') && PQstatus(conn) != CONNECTION_OK &&
		strstr(PQerrorMessage(conn), "\" does not exist") != NULL) {
		PQfinish(conn);
		const char *k2[] = { "dbname", NULL };
		const char *v2[] = { "postgres", NULL };
		conn = PQconnectdbParams(k2, v2, 1);
		if (conn == NULL)
			return err_set(E_IO, "connecting to PostgreSQL: out of memory");
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		err_code rc = pg_conn_error(conn, "connecting to PostgreSQL (PGHOST, PGPORT, PGUSER)");
		PQfinish(conn);
		return rc;
	}
	err_code rc = pg_check_version(PQserverVersion(conn), PQparameterStatus(conn, "server_version"));
	if (rc != E_OK) {
		PQfinish(conn);
		return rc;
	}
	PQsetNoticeProcessor(conn, on_notice, NULL);
	pg_session *s = xcalloc(1, sizeof(*s));
	s->conn = conn;
	s->replication = replication;
	*out = s;
	return E_OK;
}

err_code pg_connect(bool replication, pg_session **out)
{
	return connect_to(replication, NULL, out);
}

err_code pg_connect_db(const char *dbname, pg_session **out)
{
	return connect_to(false, dbname, out);
}

void pg_disconnect(pg_session *s)
{
	if (s == NULL)
		return;
	if (s->copybuf != NULL)
		PQfreemem(s->copybuf);
	PQfinish(s->conn);
	free(s);
}

static err_code result_error(PGconn *conn, PGresult *res, const char *sql)
{
	char *msg = xstrdup(res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
	chomp(msg);
	err_code rc = err_set(E_IO, "query \"%.60s\" failed: %s", sql, msg);
	free(msg);
	return rc;
}

err_code pg_query_value(pg_session *s, const char *sql, char **out)
{
	*out = NULL;
	PGresult *res = PQexec(s->conn, sql);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		err_code rc = result_error(s->conn, res, sql);
		PQclear(res);
		return rc;
	}
	int rows = PQntuples(res);
	if (rows != 1 || PQnfields(res) < 1) {
		PQclear(res);
		return err_set(E_IO, "query \"%.60s\" returned %d rows", sql, rows);
	}
	*out = xstrdup(PQgetisnull(res, 0, 0) ? "" : PQgetvalue(res, 0, 0));
	PQclear(res);
	return E_OK;
}

err_code pg_query_rows(pg_session *s, const char *sql, PGresult **out)
{
	*out = PQexec(s->conn, sql);
	if (PQresultStatus(*out) == PGRES_TUPLES_OK)
		return E_OK;
	err_code rc = result_error(s->conn, *out, sql);
	PQclear(*out);
	*out = NULL;
	return rc;
}

err_code pg_exec(pg_session *s, const char *sql)
{
	PGresult *res = PQexec(s->conn, sql);
	ExecStatusType st = PQresultStatus(res);
	err_code rc = E_OK;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		rc = result_error(s->conn, res, sql);
	PQclear(res);
	return rc;
}

err_code pg_ping(pg_session *s)
{
	return pg_exec(s, "SELECT 1");
}

int pg_server_version(pg_session *s)
{
	return PQserverVersion(s->conn);
}

err_code pg_check_version(int num, const char *text)
{
	int major = num / 10000;
	if (major >= PG_MIN_MAJOR && major <= PG_MAX_MAJOR)
		return E_OK;
	return err_set(E_CONFIG, "PostgreSQL %s (server_version_num %d) is not supported: walc supports "
							 "PostgreSQL %d to %d",
				   text != NULL ? text : "?", num, PG_MIN_MAJOR, PG_MAX_MAJOR);
}
