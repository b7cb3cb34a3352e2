/*
 * The databases and relations a partial restore chooses among (WAL-G's DatabasesByNames):
 * each database that allows connections, read on a session of its own.
 */
#include "internal/pg/session_impl.h"

#include <stdlib.h>
#include <string.h>

/* Relations with storage (or partitioned tables, the roots of partitions), with the table an
 * index or TOAST table serves; mapped catalogs' file number from their path. */
#define RELATIONS_SQL                                                                          \
	"SELECT c.oid, c.relfilenode, CASE WHEN c.relfilenode OPERATOR(pg_catalog.=) 0 THEN "      \
	"pg_catalog.pg_relation_filepath(c.oid) END, n.nspname, c.relname, c.relkind, "            \
	"COALESCE((SELECT i.inhparent FROM pg_catalog.pg_inherits i WHERE i.inhrelid "             \
	"OPERATOR(pg_catalog.=) c.oid ORDER BY i.inhseqno LIMIT 1), 0), "                          \
	"COALESCE((SELECT x.indrelid FROM pg_catalog.pg_index x WHERE x.indexrelid "               \
	"OPERATOR(pg_catalog.=) c.oid), (SELECT t.oid FROM pg_catalog.pg_class t WHERE "           \
	"t.reltoastrelid OPERATOR(pg_catalog.=) c.oid LIMIT 1), 0) "                               \
	"FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON c.relnamespace "             \
	"OPERATOR(pg_catalog.=) n.oid ORDER BY c.oid"

static uint32_t u32(const char *s)
{
	return (uint32_t)strtoul(s, NULL, 10);
}

static err_code relations(const char *db, pg_relation **out, size_t *n)
{
	pg_session *s = NULL;
	PGresult *res = NULL;
	*out = NULL;
	*n = 0;
	TRY(pg_connect_db(db, &s));
	err_code rc = pg_query_rows(s, RELATIONS_SQL, &res);
	int rows = rc == E_OK ? PQntuples(res) : 0;
	pg_relation *r = xcalloc((size_t)rows + 1, sizeof(*r));
	for (int i = 0; i < rows; i++) {
		uint32_t file = u32(PQgetvalue(res, i, 1));
		const char *path = PQgetvalue(res, i, 2);
		char kind = PQgetvalue(res, i, 5)[0];
		if (file == 0 && path[0] != '\0') { /* a mapped catalog: its number ends the path */
			const char *slash = strrchr(path, '/');
			file = u32(slash ? slash + 1 : path);
		}
		if (file == 0 && kind != 'p')
			continue; /* no storage: views, foreign tables, partitioned indexes */
		pg_relation *e = &r[(*n)++];
		e->oid = u32(PQgetvalue(res, i, 0));
		e->relfilenode = file;
		e->name = xasprintf("%s.%s", PQgetvalue(res, i, 3), PQgetvalue(res, i, 4));
		e->kind = kind;
		e->parent = u32(PQgetvalue(res, i, 6));
		e->owner = u32(PQgetvalue(res, i, 7));
	}
	PQclear(res);
	pg_disconnect(s);
	*out = r;
	return rc == E_OK ? E_OK : err_wrap(rc, "database %s", db);
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
	/* a database that cannot be read is left out, with a warning: the backup stays whole */
	for (int i = 0; i < rows; i++)
		if (relations(d[i].name, &d[i].rels, &d[i].n) != E_OK) {
			log_warn("%s: --restore-only will not find it in this backup", err_msg());
			d[i].unread = true;
		}
	return E_OK;
}

void pg_databases_free(pg_database *d, size_t n)
{
	for (size_t i = 0; i < n && d != NULL; i++) {
		for (size_t k = 0; k < d[i].n; k++)
			free(d[i].rels[k].name);
		free(d[i].rels);
		free(d[i].name);
	}
	free(d);
}
