/* pg-internal: the libpq connection behind a pg_session and the query helpers of pg's files. */
#ifndef WALC_INTERNAL_PG_SESSION_IMPL_H
#define WALC_INTERNAL_PG_SESSION_IMPL_H

#include <libpq-fe.h>

#include "internal/pg/pg.h"

struct pg_session {
	PGconn *conn;
	bool replication;
	char *copybuf; /* the WAL stream's last message, freed at the next (stream.c) */
};

/* libpq's message for conn, trailing newlines dropped, as "what: message" (E_IO). */
err_code pg_conn_error(PGconn *conn, const char *what);
/* One row, one column; *out is a new string ("" for NULL). */
err_code pg_query_value(pg_session *s, const char *sql, char **out);
/* Every row: *out to PQclear. */
err_code pg_query_rows(pg_session *s, const char *sql, PGresult **out);
/* A statement whose result is not needed. */
err_code pg_exec(pg_session *s, const char *sql);
/* Parameterised query returning the first row's columns as new strings. */
err_code pg_query_row(pg_session *s, const char *sql, int nparams, const char *const *params,
					  int ncols, char **cols);

#endif
