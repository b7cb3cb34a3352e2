/*
 * A scripted libpq for unit tests of pg's SQL (test/unit/pqfake.c, linked ahead of libpq):
 * each call walc makes takes the script's next step, which says what walc must send (the
 * connection's settings, the exact SQL and its parameter) and what the server answers (rows,
 * a status, an error). A call the script does not expect fails the test; every PGresult is
 * allocated, so an unfreed one is a leak under ASan. Include after cmocka.h.
 */
#ifndef WALC_TEST_UNIT_PQFAKE_H
#define WALC_TEST_UNIT_PQFAKE_H

#include <libpq-fe.h>
#include <stddef.h>

typedef enum pq_kind {
	PQ_CONNECT, /* PQconnectdbParams */
	PQ_QUERY,	/* PQexec, PQexecParams */
	PQ_SEND,	/* PQsendQuery, its rows one at a time through PQgetResult (single-row mode);
				 * with no columns, its results are the PQ_RESULT steps that follow */
	PQ_RESULT,	/* PQgetResult with no rows pending: a command's results, one after a COPY */
	PQ_COPY,	/* PQgetCopyData */
} pq_kind;

typedef struct pq_step {
	pq_kind kind;
	/* CONNECT: "key=value ..." of the non-NULL settings, then " expand" when the dbname is
	 * expanded; QUERY, SEND: the SQL, or its start followed by "..." */
	const char *text;
	const char *param; /* QUERY: PQexecParams' one parameter (NULL: PQexec, or none) */
	ExecStatusType status;
	int ncols, nrows;
	const char *const *cells; /* nrows x ncols, row after row; a NULL cell is SQL NULL */
	const char *error;		  /* CONNECT: refused with it; else the result's error message */
	const char *sqlstate;
	int copy_len; /* COPY: PQgetCopyData's answer: text's length, -1 (end) or -2 (error) */
} pq_step;

/* A step's cells, row after row. */
#define PQ_CELLS(...) ((const char *const[]){ __VA_ARGS__ })

/* Starts a script; every connection reports server_version_num version and its text. */
void pq_script(const pq_step *steps, size_t n, int version, const char *version_text);
/* Fails the test unless every step of the script was taken. */
void pq_done(void);
/* The last PQputCopyData's bytes (valid until the next), and its length. */
const char *pq_last_copy(int *len);

#endif
