/*
 * backup-list: WAL-G's columns and order. The plain table pads columns with spaces the way
 * Go's tabwriter does, so `backup-list | tail -n 1 | cut -f 1 -d " "` keeps working.
 */
#include "internal/backup/backup.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/pg/pg.h"

#define NCOLS_MAX 14

typedef struct row {
	const backup_ref *ref;
	json_t *meta;	/* metadata.json or NULL */
	json_t *window; /* its recovery window, or NULL */
	json_t *verified; /* its backup-verify record's outcome, or NULL */
	char *cells[NCOLS_MAX];
} row;

/* "2026-11-29T23:42:29.586708Z" -> "2026-11-29T23:42:29Z", as WAL-G's table prints it. */
static char *short_time(const char *rfc)
{
	if (rfc == NULL)
		return xstrdup("");
	const char *dot = strchr(rfc, '.');
	if (dot == NULL)
		return xstrdup(rfc);
	const char *z = dot;
	while (*z && *z != 'Z' && *z != '+' && *z != '-')
		z++;
	return xasprintf("%.*s%s", (int)(dot - rfc), rfc, z);
}

static const char *meta_str(const json_t *m, const char *k)
{
	const char *s = json_string_value(catalog_json_get(m, k));
	return s ? s : "";
}

static char *meta_lsn(const json_t *m, const char *k)
{
	char buf[32];
	json_t *v = catalog_json_get(m, k);
	pg_lsn_format(json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0, buf);
	return xstrdup(buf);
}

/* The table: plain (WAL-G's default) or framed with row numbers and RFC 850 times. */
static void print_rows(FILE *out, row *rows, size_t n, const char *const *hdr, int ncols,
					   bool pretty)
{
	const char *phdr[NCOLS_MAX + 1] = { "#" };
	for (int c = 0; c < ncols; c++)
		phdr[c + 1] = hdr[c];
	table *t = pretty ? table_new(ncols + 1, phdr, NULL) : table_new(ncols, hdr, NULL);
	for (size_t i = 0; i < n; i++) {
		const char *cells[NCOLS_MAX + 1];
		char idx[32], when[64];
		snprintf(idx, sizeof(idx), "%zu", i);
		if (pretty) {
			struct tm tm;
			gmtime_r(&rows[i].ref->mtime, &tm);
			char day[32], clock[16];
			/* RFC 850 has a two-digit year, which strftime's %y would warn about. */
			strftime(day, sizeof(day), "%A, %d-%b", &tm);
			strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
			snprintf(when, sizeof(when), "%s-%02d %s UTC", day, tm.tm_year % 100, clock);
			cells[0] = idx;
			for (int c = 0; c < ncols; c++)
				cells[c + 1] = c == 1 ? when : rows[i].cells[c];
		} else {
			for (int c = 0; c < ncols; c++)
				cells[c] = rows[i].cells[c];
		}
		table_add(t, cells);
	}
	table_print(t, out, pretty);
	table_free(t);
}

static void print_json(FILE *out, row *rows, size_t n, bool detail, bool windows, bool pretty)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *o = catalog_backup_json(rows[i].ref, detail ? rows[i].meta : NULL);
		if (detail)
			json_object_set(o, "verified", rows[i].verified ? rows[i].verified : json_null());
		if (detail && windows)
			json_object_set(o, "recovery_window", rows[i].window ? rows[i].window : json_null());
		json_array_append_new(arr, o);
	}
	char *s = json_dumps(arr, JSON_PRESERVE_ORDER | (pretty ? JSON_INDENT(4) : JSON_COMPACT));
	fprintf(out, "%s\n", s);
	free(s);
	json_decref(arr);
}

static char *us_time(int64_t us)
{
	return time_format_rfc3339((time_t)(us / 1000000), (long)(us % 1000000) * 1000);
}

/*
 * From the backup's end (its first consistent point) to the last commit the archived WAL
 * after it holds, on the timelines recovery follows; NULL when its WAL is not there.
 */
static json_t *window_of(const wal_archive *a, const wal_windows *w, const backup_ref *ref,
						 const json_t *meta)
{
	const wal_path *path = wal_archive_path(a);
	unsigned tli;
	json_t *fl = catalog_json_get(meta, "finish_lsn");
	if (!json_is_integer(fl) || sscanf(ref->name, "base_%8X", &tli) != 1)
		return NULL;
	uint64_t finish = (uint64_t)json_integer_value(fl);
	const wal_run *run = wal_windows_run_at(w, finish);
	if (run == NULL || wal_path_tli_at(path, finish) != (uint32_t)tli)
		return NULL;
	char from[32], to[32];
	pg_lsn_format(finish, from);
	pg_lsn_format(run->end_lsn, to);
	json_t *o = json_pack("{s:i, s:s, s:O, s:s}", "timeline", (json_int_t)w->timeline,
						  "from_lsn", from, "from_time",
						  catalog_json_get(meta, "finish_time") ? catalog_json_get(meta, "finish_time")
																: json_null(),
						  "to_lsn", to);
	/* a run that ends where a segment is missing, in a gap walc recorded, says so */
	char *gap = run->stop.kind == WAL_END_NONE ? wal_archive_gap_at(a, run->end_lsn) : NULL;
	if (gap != NULL)
		json_object_set_new(o, "ends_at_gap", json_string(gap));
	free(gap);
	if (run->last_commit_us != 0 && run->last_commit_lsn >= finish) {
		char *t = us_time(run->last_commit_us);
		json_object_set_new(o, "to_time", json_string(t));
		free(t);
	} else {
		json_object_set_new(o, "to_time", json_null());
	}
	return o;
}

static void read_windows(repo *r, const list_options *opt, row *rows, size_t n)
{
	wal_archive *a;
	err_code rc = wal_archive_open(r, opt->cfg->wal, &a);
	if (rc == E_OK) {
		wal_windows w;
		rc = wal_read_windows(a, &w);
		for (size_t i = 0; rc == E_OK && i < n; i++)
			if (rows[i].meta != NULL)
				rows[i].window = window_of(a, &w, rows[i].ref, rows[i].meta);
		if (rc == E_OK)
			wal_windows_free(&w);
		wal_archive_close(a);
	}
	if (rc != E_OK) {
		log_warn("backup-list: recovery windows left out: %s", err_msg());
		err_clear();
	}
}

/*
 * Its verification, as backup-list shows it: {"verified_at", "result", "problems"}; NULL when
 * it was never verified. The record must name the LSNs metadata.json (else the sentinel) has.
 */
static err_code verified_of(repo *r, const backup_ref *ref, const json_t *meta, json_t **out)
{
	backup_sentinel s = { 0 };
	json_t *start = catalog_json_get(meta, "start_lsn"), *finish = catalog_json_get(meta, "finish_lsn");
	err_code rc = E_OK;
	*out = NULL;
	if (json_is_integer(start) && json_is_integer(finish)) {
		s.lsn = (uint64_t)json_integer_value(start);
		s.finish_lsn = (uint64_t)json_integer_value(finish);
	} else if ((rc = catalog_sentinel_read(r, ref->name, &s)) != E_OK) {
		if (rc != E_NOTFOUND && rc != E_CORRUPT)
			return rc;
		err_clear();
		return E_OK;
	}
	verify_record v;
	bool found;
	rc = catalog_verified_get(r, ref->name, &s, &v, &found);
	if (rc == E_OK && found)
		*out = json_pack("{s:s, s:s, s:I}", "verified_at", v.at_text, "result",
						 v.passed ? "passed" : "failed", "problems", (json_int_t)v.problems);
	catalog_verified_free(&v);
	catalog_sentinel_free(&s);
	return rc;
}

err_code backup_list(repo *r, const list_options *opt, FILE *out)
{
	static const char *const hdr[] = { "backup_name", "modified",	 "wal_file_name",
									   "storage_name", "start_time", "finish_time",
									   "hostname",	  "data_dir",	 "pg_version",
									   "start_lsn",	  "finish_lsn",	 "is_permanent",
									   "corrupt_blocks", "verified" };
	backup_refs refs;
	/* LATEST's order (the last row is LATEST), whatever the clocks of the hosts were. */
	TRY(catalog_backups_ordered(r, &refs));
	if (refs.len == 0) {
		if (opt->json)
			fprintf(out, "[]\n");
		else
			log_info("No backups found");
		catalog_backups_free(&refs);
		return E_OK;
	}
	row *rows = xcalloc(refs.len, sizeof(*rows));
	err_code rc = E_OK;
	for (size_t i = 0; i < refs.len; i++) {
		rows[i].ref = &refs.items[i];
		if (opt->detail) {
			char *key = xasprintf("%s%s/metadata.json", repo_backups(r), refs.items[i].name);
			rc = catalog_read_json(r, key, CATALOG_JSON_MAX, &rows[i].meta);
			free(key);
			if (rc == E_NOTFOUND || rc == E_CORRUPT) { /* its row says less */
				log_warn("%s", err_msg());
				err_clear();
				rc = E_OK;
			}
			if (rc == E_OK)
				rc = verified_of(r, &refs.items[i], rows[i].meta, &rows[i].verified);
			if (rc != E_OK)
				break;
		}
	}
	/*
	 * The table keeps WAL-G's columns (scripts cut them); JSON carries the windows when asked:
	 * operators list backups often, and the windows read the whole archived WAL.
	 */
	if (rc == E_OK && opt->detail && opt->json && opt->windows && opt->cfg != NULL)
		read_windows(r, opt, rows, refs.len);
	int ncols = opt->detail ? 14 : 4;
	for (size_t i = 0; rc == E_OK && i < refs.len; i++) {
		char **c = rows[i].cells;
		const json_t *m = rows[i].meta;
		c[0] = xstrdup(rows[i].ref->name);
		c[1] = time_format_rfc3339(rows[i].ref->mtime, 0);
		c[2] = catalog_wal_file_of(rows[i].ref->name);
		c[3] = xstrdup(catalog_storage_name(rows[i].ref));
		if (opt->detail) {
			c[4] = short_time(json_string_value(catalog_json_get(m, "start_time")));
			c[5] = short_time(json_string_value(catalog_json_get(m, "finish_time")));
			c[6] = xstrdup(meta_str(m, "hostname"));
			c[7] = xstrdup(meta_str(m, "data_dir"));
			json_t *v = catalog_json_get(m, "pg_version");
			c[8] = xasprintf("%lld", json_is_integer(v) ? (long long)json_integer_value(v) : 0);
			c[9] = meta_lsn(m, "start_lsn");
			c[10] = meta_lsn(m, "finish_lsn");
			c[11] = xstrdup(json_is_true(catalog_json_get(m, "is_permanent")) ? "true" : "false");
			/* walc's extra column: pages that failed --verify ("-" when not verified). */
			json_t *cb = catalog_json_get(m, "corrupt_blocks");
			c[12] = json_is_integer(cb) ? xasprintf("%lld", (long long)json_integer_value(cb))
										: xstrdup("-");
			/* walc's last column: the outcome of backup-verify and when ("-": never) */
			const json_t *ver = rows[i].verified;
			c[13] = ver == NULL
				? xstrdup("-")
				: xasprintf("%s@%s", json_string_value(json_object_get(ver, "result")),
							json_string_value(json_object_get(ver, "verified_at")));
		}
	}
	if (rc == E_OK) {
		if (opt->json)
			print_json(out, rows, refs.len, opt->detail, opt->windows, opt->pretty);
		else
			print_rows(out, rows, refs.len, hdr, ncols, opt->pretty);
	}
	for (size_t i = 0; i < refs.len; i++) {
		for (int c = 0; c < NCOLS_MAX; c++)
			free(rows[i].cells[c]);
		json_decref(rows[i].meta);
		json_decref(rows[i].window);
		json_decref(rows[i].verified);
	}
	free(rows);
	catalog_backups_free(&refs);
	return rc;
}
