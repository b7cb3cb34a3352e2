/*
 * The databases and relations a partial restore chooses among (WAL-G's DatabasesByNames):
 * each database that allows connections, its relations read on a session of its own, row by
 * row, so that memory does not grow with their number.
 */
#include "internal/pg/server/session_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Every relation with storage (and partitioned tables, the roots of partitions), with the
 * relation it is restored with: the top of its chain of owners (the table an index or TOAST
 * table serves) and inheritance parents. Ordered by that root, the root first; mapped
 * catalogs' file number comes from their path.
 */
#define EQ " OPERATOR(pg_catalog.=) "
#define RELATIONS_SQL                                                                         \
	"WITH RECURSIVE r AS (SELECT c.oid, c.relfilenode, c.relkind, c.relname, n.nspname, "      \
	"CASE WHEN c.relfilenode" EQ "0 THEN pg_catalog.pg_relation_filepath(c.oid) END AS path, " \
	"COALESCE((SELECT i.inhparent FROM pg_catalog.pg_inherits i WHERE i.inhrelid" EQ "c.oid " \
	"ORDER BY i.inhseqno LIMIT 1), 0) AS parent, "                                             \
	"COALESCE((SELECT x.indrelid FROM pg_catalog.pg_index x WHERE x.indexrelid" EQ "c.oid), " \
	"(SELECT t.oid FROM pg_catalog.pg_class t WHERE t.reltoastrelid" EQ "c.oid LIMIT 1), 0) " \
	"AS owner FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON c.relnamespace" EQ \
	"n.oid), t AS (SELECT oid, oid AS root, 0 AS depth FROM r WHERE parent" EQ "0 AND owner" EQ \
	"0 UNION ALL SELECT r.oid, t.root, t.depth + 1 FROM r JOIN t ON (CASE WHEN r.owner "       \
	"OPERATOR(pg_catalog.<>) 0 THEN r.owner ELSE r.parent END)" EQ "t.oid WHERE t.depth "     \
	"OPERATOR(pg_catalog.<) 64) "                                                              \
	"SELECT r.oid, r.relfilenode, r.path, r.nspname, r.relname, r.relkind, r.parent, t.root "  \
	"FROM r JOIN t ON r.oid" EQ "t.oid WHERE r.relfilenode OPERATOR(pg_catalog.<>) 0 OR "      \
	"r.path IS NOT NULL OR r.relkind" EQ "'p' "                                                \
	"ORDER BY t.root, r.oid OPERATOR(pg_catalog.<>) t.root, r.oid"

static uint32_t u32(const char *s)
{
	return (uint32_t)strtoul(s, NULL, 10);
}

err_code pg_databases_read(pg_session *s, pg_database **out, size_t *n)
{
	PGresult *res = NULL;
	*out = NULL;
	*n = 0;
	TRY(pg_query_rows(s,
					  "SELECT oid, datname FROM pg_catalog.pg_database WHERE datallowconn ORDER BY oid",
					  &res));
	int rows = PQntuples(res);
	pg_database *d = xcalloc((size_t)rows + 1, sizeof(*d));
	for (int i = 0; i < rows; i++) {
		d[i].oid = u32(PQgetvalue(res, i, 0));
		d[i].name = xstrdup(PQgetvalue(res, i, 1));
	}
	PQclear(res);
	*out = d;
	*n = (size_t)rows;
	return E_OK;
}

void pg_databases_free(pg_database *d, size_t n)
{
	for (size_t i = 0; i < n && d != NULL; i++)
		free(d[i].name);
	free(d);
}

/* One row of RELATIONS_SQL. */
static void relation_of(PGresult *res, pg_relation *r, char *name, size_t cap)
{
	r->oid = u32(PQgetvalue(res, 0, 0));
	r->relfilenode = u32(PQgetvalue(res, 0, 1));
	const char *path = PQgetvalue(res, 0, 2);
	if (r->relfilenode == 0 && path[0] != '\0') { /* a mapped catalog: its number ends the path */
		const char *slash = strrchr(path, '/');
		r->relfilenode = u32(slash ? slash + 1 : path);
	}
	snprintf(name, cap, "%s.%s", PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 4));
	r->name = name;
	r->kind = PQgetvalue(res, 0, 5)[0];
	r->parent = u32(PQgetvalue(res, 0, 6));
	r->root = u32(PQgetvalue(res, 0, 7));
}

err_code pg_relations_each(const char *db, pg_relation_fn fn, void *arg, bool *started)
{
	pg_session *s = NULL;
	*started = false;
	TRY(pg_connect_db(db, &s));
	err_code rc = E_OK;
	if (!PQsendQuery(s->conn, RELATIONS_SQL) || !PQsetSingleRowMode(s->conn))
		rc = pg_conn_error(s->conn, "listing relations");
	char name[2 * 64 + 2]; /* schema.relation: NAMEDATALEN 64 each */
	PGresult *res;
	while ((res = PQgetResult(s->conn)) != NULL) {
		ExecStatusType st = PQresultStatus(res);
		if (rc == E_OK && st == PGRES_SINGLE_TUPLE) {
			pg_relation r;
			relation_of(res, &r, name, sizeof(name));
			*started = true;
			rc = fn(arg, &r);
		} else if (rc == E_OK && st != PGRES_TUPLES_OK) {
			rc = pg_conn_error(s->conn, "listing relations");
		}
		PQclear(res);
	}
	pg_disconnect(s);
	return rc == E_OK ? E_OK : err_wrap(rc, "database %s", db);
}
