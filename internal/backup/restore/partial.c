/*
 * Partial restore, as WAL-G's backup-fetch --restore-only: backup-push records each database's
 * relations (DatabasesByNames in files_metadata.json, push/dbnames.c); a restore takes the
 * system catalogs of every database, the whole of the databases named, the files of the tables
 * named (with what the backup records with them), and skips the other relation files. A
 * skipped relation holds only what WAL replay writes into it.
 */
#include "internal/backup/restore/fetch_impl.h"

#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

#define FIRST_USER_OID 16384 /* below: objects initdb made (FirstNormalObjectId) */

/* One name of --restore-only: DB, DB/TABLE, DB/SCHEMA.TABLE or DB/SCHEMA/TABLE, '*' any. */
typedef struct item {
	char *text;
	regex_t db, table;
	bool has_table;
	bool matched;
} item;

typedef struct chosen_db {
	uint32_t oid;
	bool all;
	uint32_t *files; /* relfilenodes restored, sorted */
	size_t n, cap;
} chosen_db;

typedef struct partial {
	item *items;
	size_t nitems;
	chosen_db *dbs;
	size_t ndbs;
	keytab *need;
	size_t kept, skipped;
} partial;

/* WAL-G's pattern: '*' for anything, the rest as its regular expressions take it. */
static err_code compile(const char *pattern, const char *text, regex_t *re)
{
	size_t n = strlen(pattern);
	char *expr = xmalloc(2 * n + 3), *p = expr;
	*p++ = '^';
	for (size_t i = 0; i < n; i++) {
		if (pattern[i] == '*')
			*p++ = '.';
		*p++ = pattern[i];
	}
	*p++ = '$';
	*p = '\0';
	int bad = regcomp(re, expr, REG_EXTENDED | REG_NOSUB);
	free(expr);
	return bad ? err_set(E_CONFIG, "backup-fetch --restore-only: \"%s\" is not a pattern", text)
			   : E_OK;
}

static err_code parse_item(const char *text, item *it)
{
	memset(it, 0, sizeof(*it));
	it->text = xstrdup(text);
	char *copy = xstrdup(text), *parts[4];
	int n = 0;
	for (char *save = NULL, *t = strtok_r(copy, "/", &save); t != NULL;
		 t = strtok_r(NULL, "/", &save))
		parts[n < 4 ? n : 3] = t, n++;
	err_code rc = E_OK;
	char *table = NULL;
	if (n == 2)
		table = strchr(parts[1], '.') ? xstrdup(parts[1]) : xasprintf("public.%s", parts[1]);
	else if (n == 3 && strchr(parts[1], '.') == NULL && strchr(parts[2], '.') == NULL)
		table = xasprintf("%s.%s", parts[1], parts[2]);
	if (n < 1 || n > 3 || (n > 1 && table == NULL) ||
		(table != NULL && strchr(strchr(table, '.') + 1, '.') != NULL))
		rc = err_set(E_CONFIG, "backup-fetch --restore-only: \"%s\": expected DB, DB/TABLE or "
							   "DB/SCHEMA.TABLE",
					 text);
	if (rc == E_OK)
		rc = compile(parts[0], text, &it->db);
	if (rc == E_OK && table != NULL) {
		rc = compile(table, text, &it->table);
		it->has_table = rc == E_OK;
	}
	free(table);
	free(copy);
	return rc;
}

static bool matches(const regex_t *re, const char *s)
{
	return regexec(re, s, 0, NULL, 0) == 0;
}

static void choose(chosen_db *c, uint32_t file)
{
	if (c->n == c->cap)
		c->files = xrealloc(c->files, (c->cap = c->cap ? 2 * c->cap : 256) * sizeof(uint32_t));
	c->files[c->n++] = file;
}

static uint32_t member_u32(const json_t *o, const char *k)
{
	json_t *v = catalog_json_get(o, k);
	return json_is_integer(v) ? (uint32_t)json_integer_value(v) : 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* One database of DatabasesByNames: what of it is restored. */
static err_code on_database(void *arg, const char *name, const json_t *rec)
{
	partial *p = arg;
	p->dbs = xrealloc(p->dbs, (p->ndbs + 1) * sizeof(*p->dbs));
	chosen_db *c = &p->dbs[p->ndbs++];
	memset(c, 0, sizeof(*c));
	c->oid = member_u32(rec, "oid");
	json_t *tables = catalog_json_get(rec, "tables_new");
	for (size_t i = 0; i < p->nitems; i++)
		if (!p->items[i].has_table && matches(&p->items[i].db, name)) {
			c->all = true;
			p->items[i].matched = true;
		}
	const char *tname;
	json_t *t;
	json_object_foreach(tables, tname, t)
	{
		bool take = member_u32(t, "oid") < FIRST_USER_OID;
		for (size_t i = 0; i < p->nitems; i++)
			if (p->items[i].has_table && matches(&p->items[i].db, name) &&
				matches(&p->items[i].table, tname)) {
				take = true;
				p->items[i].matched = true;
			}
		if (!take)
			continue;
		choose(c, member_u32(t, "relfilenode"));
		/* WAL-G lists no TOAST table with its table: PostgreSQL names it by the table's oid */
		for (int k = 0; k < 2; k++) {
			char *toast = xasprintf("pg_toast.pg_toast_%u%s", member_u32(t, "oid"),
									k ? "_index" : "");
			json_t *tt = json_object_get(tables, toast);
			if (tt != NULL)
				choose(c, member_u32(tt, "relfilenode"));
			free(toast);
		}
		const char *sname;
		json_t *sub;
		json_object_foreach(catalog_json_get(t, "subtables"), sname, sub)
		choose(c, member_u32(sub, "relfilenode"));
	}
	if (c->n > 0)
		xqsort(c->files, c->n, sizeof(uint32_t), cmp_u32);
	return E_OK;
}

/* The number a path component starts with (before '.' or '_'), 0 when none. */
static uint32_t leading_number(const char *s, size_t len)
{
	uint64_t v = 0;
	size_t i = 0;
	for (; i < len && s[i] >= '0' && s[i] <= '9' && v <= UINT32_MAX; i++)
		v = v * 10 + (uint64_t)(s[i] - '0');
	return i > 0 && (i == len || s[i] == '.' || s[i] == '_') && v <= UINT32_MAX ? (uint32_t)v
																			   : 0;
}

/* WAL-G's rule on a member of the base or a tablespace: its database and its relation file. */
static bool restored(const partial *p, const char *member)
{
	if (!str_has_prefix(member, "/base/") && !str_has_prefix(member, "/pg_tblspc/"))
		return true;
	const char *base = strrchr(member, '/');
	const char *dir_end = base, *dir = base;
	while (dir > member && dir[-1] != '/')
		dir--;
	uint32_t file = leading_number(base + 1, strlen(base + 1));
	uint32_t db = dir > member ? leading_number(dir, (size_t)(dir_end - dir)) : 0;
	if (file == 0 || db < FIRST_USER_OID)
		return true;
	for (size_t i = 0; i < p->ndbs; i++)
		if (p->dbs[i].oid == db)
			return p->dbs[i].all ||
				(p->dbs[i].n > 0 &&
				 bsearch(&file, p->dbs[i].files, p->dbs[i].n, sizeof(uint32_t), cmp_u32) != NULL);
	return false; /* a database the backup does not name */
}

static err_code on_file(void *arg, const char *name, const json_t *rec)
{
	partial *p = arg;
	(void)rec;
	uint64_t key[2];
	if (!restored(p, name)) {
		p->skipped++;
		return E_OK;
	}
	p->kept++;
	pg_name_key(name, key);
	keytab_add(p->need, key, NULL);
	return E_OK;
}

static void partial_free(partial *p)
{
	for (size_t i = 0; i < p->nitems; i++) {
		free(p->items[i].text);
		regfree(&p->items[i].db);
		if (p->items[i].has_table)
			regfree(&p->items[i].table);
	}
	free(p->items);
	for (size_t i = 0; i < p->ndbs; i++)
		free(p->dbs[i].files);
	free(p->dbs);
	keytab_free(p->need);
}

err_code backup_restore_only(repo *r, const char *backup, const char *spec, keytab **need)
{
	partial p = { 0 };
	err_code rc = E_OK;
	char *copy = xstrdup(spec);
	for (char *save = NULL, *t = strtok_r(copy, ",", &save); t != NULL && rc == E_OK;
		 t = strtok_r(NULL, ",", &save)) {
		p.items = xrealloc(p.items, (p.nitems + 1) * sizeof(*p.items));
		rc = parse_item(t, &p.items[p.nitems]);
		p.nitems++;
	}
	free(copy);
	if (rc == E_OK && p.nitems == 0)
		rc = err_set(E_CONFIG, "backup-fetch --restore-only: name a database or table");
	bool found = false;
	if (rc == E_OK)
		rc = catalog_dbnames_each(r, backup, on_database, &p, &found);
	if (rc == E_NOTFOUND)
		rc = err_wrap(E_CONFIG, "backup-fetch --restore-only needs the backup's files metadata "
								"(a backup taken with WALG_WITHOUT_FILES_METADATA has none)");
	if (rc == E_OK && !found)
		rc = err_set(E_CONFIG, "backup-fetch --restore-only: backup %s records no databases "
							   "(DatabasesByNames in files_metadata.json: taken with "
							   "WALG_DISABLE_PARTIAL_RESTORE, remotely, or by an older walc)",
					 backup);
	for (size_t i = 0; rc == E_OK && i < p.nitems; i++)
		if (!p.items[i].matched)
			rc = err_set(E_CONFIG, "backup-fetch --restore-only: \"%s\" names no %s in backup "
								   "%s",
						 p.items[i].text, p.items[i].has_table ? "table" : "database", backup);
	if (rc == E_OK) {
		p.need = keytab_new(0);
		rc = catalog_files_each(r, backup, on_file, NULL, &p);
	}
	if (rc == E_OK) {
		static const char *const always[] = { "/global/pg_control", "backup_label" };
		for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++) {
			uint64_t key[2];
			pg_name_key(always[i], key);
			keytab_add(p.need, key, NULL);
		}
		keytab_finish(p.need);
		log_info("backup-fetch --restore-only %s: %zu files restored, %zu relation files of "
				 "other databases and tables skipped (they hold only what WAL replay writes)",
				 spec, p.kept, p.skipped);
		*need = p.need;
		p.need = NULL;
	}
	partial_free(&p);
	return rc;
}
