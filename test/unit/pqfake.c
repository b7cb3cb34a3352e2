/*
 * The scripted libpq of test/unit/pqfake.h: libpq's functions that pg's SQL and replication
 * sessions call, answering from the script. Linked into a test program before libpq, so these
 * definitions are the ones its libwalc.a objects reach.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/pqfake.h"

#define PQFAKE_ERROR_MAX 512

struct pg_conn {
	ConnStatusType status;
	char *error; /* PQerrorMessage's: the last result's error, or the refusal */
	const pq_step *sent; /* a PQsendQuery whose results are being read */
	int next_row;
};

struct pg_result {
	const pq_step *step;
	ExecStatusType status;
	int row0, nrows; /* the step's rows this result holds */
};

static const pq_step *script;
static size_t script_len, script_at;
static int server_version;
static const char *server_version_text;
static char *last_copy;
static int last_copy_len;

static const char *const kind_names[] = { "a connection", "a query", "a query in single-row mode",
										  "a result", "copy data" };

void pq_script(const pq_step *steps, size_t n, int version, const char *version_text)
{
	script = steps;
	script_len = n;
	script_at = 0;
	server_version = version;
	server_version_text = version_text;
}

void pq_done(void)
{
	if (script_at != script_len)
		fail_msg("libpq fake: step %zu of %zu (%s%s%s) was never taken", script_at + 1,
				 script_len, kind_names[script[script_at].kind],
				 script[script_at].text ? ": " : "",
				 script[script_at].text ? script[script_at].text : "");
	free(last_copy);
	last_copy = NULL;
}

const char *pq_last_copy(int *len)
{
	*len = last_copy_len;
	return last_copy;
}

/* libpq hands out its results' strings as char *; the script's are constants, never written. */
static char *unconst(const char *s)
{
	char *p;
	memcpy(&p, &s, sizeof(p));
	return p;
}

static bool next_is(pq_kind kind)
{
	return script_at < script_len && script[script_at].kind == kind;
}

/* The next step, which must be of kind: what walc did is named when it is not. */
static const pq_step *take(pq_kind kind, const char *what)
{
	if (!next_is(kind))
		fail_msg("libpq fake: walc made %s (%s) where the script has %s", kind_names[kind],
				 what ? what : "", script_at < script_len ? kind_names[script[script_at].kind]
														  : "nothing more");
	return &script[script_at++];
}

/* got is what want says: the same text, or one that starts with want's text before "...". */
static void assert_sent(const char *got, const char *want)
{
	size_t n = strlen(want);
	if (n > 3 && strcmp(want + n - 3, "...") == 0 && strncmp(got, want, n - 3) == 0)
		return;
	assert_string_equal(got, want);
}

static PGresult *result_of(PGconn *conn, const pq_step *st, ExecStatusType status, int row0,
						   int nrows)
{
	PGresult *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	r->step = st;
	r->status = status;
	r->row0 = row0;
	r->nrows = nrows;
	if (conn != NULL)
		snprintf(conn->error, PQFAKE_ERROR_MAX, "%s", st->error ? st->error : "");
	return r;
}

/* ------------------------------------------------------------------------------------------ */
/* Connections                                                                                */
/* ------------------------------------------------------------------------------------------ */

PGconn *PQconnectdbParams(const char *const *keywords, const char *const *values,
						  int expand_dbname)
{
	char got[512] = "";
	size_t at = 0;
	for (int i = 0; keywords[i] != NULL; i++)
		if (values[i] != NULL)
			at += (size_t)snprintf(got + at, sizeof(got) - at, "%s%s=%s", at ? " " : "",
								   keywords[i], values[i]);
	if (expand_dbname)
		snprintf(got + at, sizeof(got) - at, "%sexpand", at ? " " : "");
	const pq_step *st = take(PQ_CONNECT, got);
	assert_string_equal(got, st->text);
	PGconn *c = calloc(1, sizeof(*c));
	assert_non_null(c);
	c->error = calloc(1, PQFAKE_ERROR_MAX);
	assert_non_null(c->error);
	c->status = st->error != NULL ? CONNECTION_BAD : CONNECTION_OK;
	if (st->error != NULL)
		snprintf(c->error, PQFAKE_ERROR_MAX, "%s\n", st->error);
	return c;
}

ConnStatusType PQstatus(const PGconn *conn)
{
	return conn->status;
}

char *PQerrorMessage(const PGconn *conn)
{
	return conn->error;
}

void PQfinish(PGconn *conn)
{
	if (conn != NULL)
		free(conn->error);
	free(conn);
}

int PQserverVersion(const PGconn *conn)
{
	(void)conn;
	return server_version;
}

const char *PQparameterStatus(const PGconn *conn, const char *paramName)
{
	(void)conn;
	return strcmp(paramName, "server_version") == 0 ? server_version_text : NULL;
}

PQnoticeProcessor PQsetNoticeProcessor(PGconn *conn, PQnoticeProcessor proc, void *arg)
{
	(void)conn, (void)proc, (void)arg;
	return NULL;
}

int PQsocket(const PGconn *conn)
{
	(void)conn;
	return -1; /* poll() leaves it out and waits its timeout */
}

int PQconsumeInput(PGconn *conn)
{
	(void)conn;
	return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Queries and results                                                                        */
/* ------------------------------------------------------------------------------------------ */

PGresult *PQexec(PGconn *conn, const char *query)
{
	const pq_step *st = take(PQ_QUERY, query);
	assert_sent(query, st->text);
	assert_null(st->param);
	return result_of(conn, st, st->status, 0, st->nrows);
}

PGresult *PQexecParams(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
					   const char *const *paramValues, const int *paramLengths,
					   const int *paramFormats, int resultFormat)
{
	(void)paramTypes, (void)paramLengths, (void)paramFormats;
	const pq_step *st = take(PQ_QUERY, command);
	assert_sent(command, st->text);
	assert_int_equal(nParams, st->param != NULL ? 1 : 0);
	if (st->param != NULL)
		assert_string_equal(paramValues[0], st->param);
	assert_int_equal(resultFormat, 0);
	return result_of(conn, st, st->status, 0, st->nrows);
}

int PQsendQuery(PGconn *conn, const char *query)
{
	const pq_step *st = take(PQ_SEND, query);
	assert_sent(query, st->text);
	conn->sent = st->ncols > 0 ? st : NULL;
	conn->next_row = 0;
	return 1;
}

int PQisBusy(PGconn *conn)
{
	(void)conn;
	return 0; /* every answer is there at once */
}

int PQsetSingleRowMode(PGconn *conn)
{
	assert_non_null(conn->sent);
	return 1;
}

PGresult *PQgetResult(PGconn *conn)
{
	const pq_step *st = conn->sent;
	if (st == NULL) {
		if (!next_is(PQ_RESULT))
			return NULL;
		st = take(PQ_RESULT, NULL);
		return result_of(conn, st, st->status, 0, st->nrows);
	}
	if (conn->next_row < st->nrows)
		return result_of(conn, st, PGRES_SINGLE_TUPLE, conn->next_row++, 1);
	conn->sent = NULL; /* the query's last result: its status with no rows; then NULL */
	return result_of(conn, st, st->status, st->nrows, 0);
}

ExecStatusType PQresultStatus(const PGresult *res)
{
	return res != NULL ? res->status : PGRES_FATAL_ERROR;
}

char *PQresStatus(ExecStatusType status)
{
	static char name[32];
	snprintf(name, sizeof(name), "status %d", (int)status);
	return name;
}

char *PQresultErrorMessage(const PGresult *res)
{
	return unconst(res->step->error != NULL ? res->step->error : "");
}

char *PQresultErrorField(const PGresult *res, int fieldcode)
{
	return fieldcode == PG_DIAG_SQLSTATE ? unconst(res->step->sqlstate) : NULL;
}

int PQntuples(const PGresult *res)
{
	return res->nrows;
}

int PQnfields(const PGresult *res)
{
	return res->step->ncols;
}

static const char *cell(const PGresult *res, int row, int col)
{
	assert_true(row >= 0 && row < res->nrows && col >= 0 && col < res->step->ncols);
	return res->step->cells[(res->row0 + row) * res->step->ncols + col];
}

char *PQgetvalue(const PGresult *res, int tup_num, int field_num)
{
	const char *v = cell(res, tup_num, field_num);
	return unconst(v != NULL ? v : "");
}

int PQgetisnull(const PGresult *res, int tup_num, int field_num)
{
	return cell(res, tup_num, field_num) == NULL;
}

int PQgetlength(const PGresult *res, int tup_num, int field_num)
{
	return (int)strlen(PQgetvalue(res, tup_num, field_num));
}

void PQclear(PGresult *res)
{
	free(res);
}

void PQfreemem(void *ptr)
{
	free(ptr);
}

/* ------------------------------------------------------------------------------------------ */
/* COPY (the replication stream)                                                              */
/* ------------------------------------------------------------------------------------------ */

int PQgetCopyData(PGconn *conn, char **buffer, int async)
{
	(void)conn, (void)async;
	const pq_step *st = take(PQ_COPY, NULL);
	if (st->copy_len <= 0)
		return st->copy_len;
	*buffer = malloc((size_t)st->copy_len);
	assert_non_null(*buffer);
	memcpy(*buffer, st->text, (size_t)st->copy_len);
	return st->copy_len;
}

int PQputCopyData(PGconn *conn, const char *buffer, int nbytes)
{
	(void)conn;
	free(last_copy);
	last_copy = malloc((size_t)nbytes);
	assert_non_null(last_copy);
	memcpy(last_copy, buffer, (size_t)nbytes);
	last_copy_len = nbytes;
	return 1;
}

int PQputCopyEnd(PGconn *conn, const char *errormsg)
{
	(void)conn, (void)errormsg;
	return 1;
}

int PQflush(PGconn *conn)
{
	(void)conn;
	return 0;
}
