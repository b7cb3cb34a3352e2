/*
 * wal-show and wal-verify: what WAL the repository holds, per timeline, with gaps; and
 * whether everything a restore of the oldest backup needs up to now is there.
 */
#include "internal/wal/wal.h"

#include <stdlib.h>
#include <string.h>

#include "internal/catalog/catalog.h"
#include "internal/pg/pg.h"
#include "internal/wal/wal_impl.h"

static json_t *missing_list(const timeline *t, uint64_t segsize)
{
	json_t *a = json_array();
	for (size_t j = 1; j < t->nsegs; j++)
		for (uint64_t s = t->segs[j - 1] + 1; s < t->segs[j]; s++) {
			char n[WAL_NAME_LEN + 1];
			wal_name_format(n, t->id, s, segsize);
			json_array_append_new(a, json_string(n));
		}
	return a;
}

/*
 * WAL-G's "backups" of each timeline (the one of the backup's start segment), with their
 * details as backup-list --detail --json gives them; removed where empty, as WAL-G omits it.
 */
static err_code add_backups(repo *r, json_t *timelines)
{
	backup_refs refs;
	TRY(catalog_backups(r, &refs));
	err_code rc = E_OK;
	size_t k;
	json_t *tl;
	for (size_t i = 0; rc == E_OK && i < refs.len; i++) {
		unsigned id;
		if (sscanf(refs.items[i].name, "base_%8X", &id) != 1)
			continue;
		json_array_foreach(timelines, k, tl)
		{
			if (json_integer_value(json_object_get(tl, "id")) != (json_int_t)id)
				continue;
			char *key = xasprintf(REPO_BACKUP_DIR "%s/metadata.json", refs.items[i].name);
			json_t *meta = NULL;
			rc = catalog_read_json(r, key, CATALOG_JSON_MAX, &meta);
			free(key);
			if (rc == E_NOTFOUND) {
				err_clear();
				rc = E_OK;
			}
			if (rc == E_OK)
				json_array_append_new(json_object_get(tl, "backups"),
									  catalog_backup_json(&refs.items[i], meta));
			json_decref(meta);
			break;
		}
	}
	catalog_backups_free(&refs);
	json_array_foreach(timelines, k, tl)
	{
		if (json_array_size(json_object_get(tl, "backups")) == 0)
			json_object_del(tl, "backups");
	}
	return rc;
}

/*
 * The recorded gaps of timeline tl that matter: from its first archived segment on (an older
 * one lies before what the archive still holds). Each is a WARNING, and a member of the JSON.
 */
static json_t *recorded_lost(const timeline *tl, const wal_lost *lost, uint64_t segsize,
							 bool *any)
{
	json_t *a = json_array();
	*any = false;
	for (size_t i = 0; i < lost->n; i++) {
		const wal_lost_gap *g = &lost->gaps[i];
		if (g->tli != tl->id || (tl->nsegs > 0 && g->last < tl->segs[0]))
			continue;
		char first[WAL_NAME_LEN + 1], last[WAL_NAME_LEN + 1];
		wal_name_format(first, g->tli, g->first, segsize);
		wal_name_format(last, g->tli, g->last, segsize);
		char *what = wal_lost_describe(g, segsize);
		log_warn("wal-show: %s: recovery cannot cross them", what);
		free(what);
		json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "first_segment", first,
										   "last_segment", last, "reason", g->why));
		*any = true;
	}
	return a;
}

err_code wal_show(repo *r, const wal_settings *cfg, bool detailed_json, bool without_backups,
				  FILE *out)
{
	wal_index ix;
	TRY(wal_index_build(r, cfg, !without_backups, &ix));
	wal_lost lost;
	err_code lrc = wal_lost_read(r, ix.segsize, &lost);
	if (lrc != E_OK) {
		wal_index_free(&ix);
		return lrc;
	}
	static const char *const hdr[] = { "TLI",			"PARENT TLI",	  "SWITCHPOINT LSN",
									   "START SEGMENT", "END SEGMENT",	  "SEGMENT RANGE",
									   "SEGMENTS COUNT", "STATUS",		  "BACKUPS COUNT" };
	static const bool right[] = { true, true, true, false, false, true, true, false, true };
	table *t = table_new(without_backups ? 8 : 9, hdr, right);
	json_t *arr = json_array();
	for (size_t i = 0; i < ix.n; i++) {
		const timeline *tl = &ix.tl[i];
		char id[16], parent[16], lsn[32], start[32] = "", end[32] = "", range[32], count[32],
			bk[16];
		uint64_t span = tl->nsegs ? tl->segs[tl->nsegs - 1] - tl->segs[0] + 1 : 0;
		bool recorded;
		json_t *gaps = recorded_lost(tl, &lost, ix.segsize, &recorded);
		const char *status = span == tl->nsegs && !recorded ? "OK" : "LOST_SEGMENTS";
		snprintf(id, sizeof(id), "%u", tl->id);
		snprintf(parent, sizeof(parent), "%u", tl->parent);
		pg_lsn_format(tl->switch_lsn, lsn);
		if (tl->nsegs) {
			wal_name_format(start, tl->id, tl->segs[0], ix.segsize);
			wal_name_format(end, tl->id, tl->segs[tl->nsegs - 1], ix.segsize);
		}
		snprintf(range, sizeof(range), "%llu", (unsigned long long)span);
		snprintf(count, sizeof(count), "%zu", tl->nsegs);
		snprintf(bk, sizeof(bk), "%d", tl->backups);
		const char *cells[] = { id, parent, lsn, start, end, range, count, status, bk };
		table_add(t, cells);
		json_t *o = json_object();
		json_object_set_new(o, "id", json_integer(tl->id));
		json_object_set_new(o, "parent_id", json_integer(tl->parent));
		json_object_set_new(o, "switch_point_lsn", json_integer((json_int_t)tl->switch_lsn));
		json_object_set_new(o, "start_segment", json_string(start));
		json_object_set_new(o, "end_segment", json_string(end));
		json_object_set_new(o, "segments_count", json_integer((json_int_t)tl->nsegs));
		json_object_set_new(o, "missing_segments", missing_list(tl, ix.segsize));
		/* walc's: the gaps walc_wal_lost.json records (WAL-G has no such member) */
		json_object_set_new(o, "recorded_lost", gaps);
		if (detailed_json && !without_backups)
			json_object_set_new(o, "backups", json_array());
		json_object_set_new(o, "segment_range_size", json_integer((json_int_t)span));
		json_object_set_new(o, "status", json_string(status));
		json_array_append_new(arr, o);
	}
	err_code rc = E_OK;
	if (detailed_json && !without_backups)
		rc = add_backups(r, arr);
	if (rc == E_OK && detailed_json) {
		char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		fprintf(out, "%s\n", s);
		free(s);
	} else if (rc == E_OK) {
		table_print(t, out, true);
	}
	json_decref(arr);
	table_free(t);
	wal_lost_free(&lost);
	wal_index_free(&ix);
	return rc;
}

/* wal-verify */

typedef struct run {
	uint32_t tli;
	uint64_t start, end;
	const char *status;
} run;

static const char *seg_status(const wal_index *ix, const wal_lost *lost, const wal_settings *cfg,
							  long uploads, uint32_t tli, uint64_t s, uint64_t last)
{
	if (wal_index_has(ix, tli, s))
		return "FOUND";
	if (wal_lost_has(lost, tli, s))
		return "MISSING_LOST"; /* wal-receive found it gone from the server */
	uint64_t behind = last - s;
	if (behind < (uint64_t)uploads)
		return "MISSING_UPLOADING";
	if (behind < (uint64_t)cfg->integrity_max_delayed_wals)
		return "MISSING_DELAYED";
	return "MISSING_LOST";
}

static void add_run(json_t *details, const run *r, uint64_t segsize)
{
	char a[32], b[32];
	wal_name_format(a, r->tli, r->start, segsize);
	wal_name_format(b, r->tli, r->end, segsize);
	json_t *o = json_object();
	json_object_set_new(o, "timeline_id", json_integer(r->tli));
	json_object_set_new(o, "start_segment", json_string(a));
	json_object_set_new(o, "end_segment", json_string(b));
	json_object_set_new(o, "segments_count", json_integer((json_int_t)(r->end - r->start + 1)));
	json_object_set_new(o, "status", json_string(r->status));
	json_array_append_new(details, o);
}

/*
 * Runs of consecutive segments with one status, as WAL-G's details list them. With no
 * backup to start from (no_backup), the scan starts at the timeline's first segment and, as
 * in WAL-G, what is missing before the first segment found is only a warning: the archive
 * may simply begin later.
 */
static json_t *integrity(const wal_index *ix, const wal_lost *gone, const wal_settings *cfg,
						 long uploads, uint32_t cur_tli, uint64_t first, uint64_t last,
						 bool no_backup, const char **overall)
{
	json_t *details = json_array();
	run cur = { 0 };
	bool have = false, lost = false, missing = false, found = false;
	for (uint64_t s = first; first <= last && s <= last; s++) {
		uint32_t tli = wal_index_tli_for(ix, cur_tli, s);
		const char *st = seg_status(ix, gone, cfg, uploads, tli, s, last);
		found |= strcmp(st, "FOUND") == 0;
		lost |= strcmp(st, "MISSING_LOST") == 0 && (found || !no_backup);
		missing |= strcmp(st, "FOUND") != 0;
		if (have && cur.tli == tli && strcmp(cur.status, st) == 0 && cur.end + 1 == s) {
			cur.end = s;
			continue;
		}
		if (have)
			add_run(details, &cur, ix->segsize);
		cur = (run){ tli, s, s, st };
		have = true;
	}
	if (have)
		add_run(details, &cur, ix->segsize);
	*overall = lost ? "FAILURE" : missing ? "WARNING" : "OK";
	return details;
}

/* The last segment the cluster has finished: the one before its insert (or receive) point. */
static err_code current_position(uint32_t *tli, uint64_t *segno, uint64_t segsize)
{
	pg_session *s;
	uint64_t l = 0;
	TRY(pg_connect(false, &s));
	err_code rc = pg_wal_position(s, tli, &l);
	/* The segment being written cannot be archived yet: check up to the one before. */
	if (rc == E_OK)
		*segno = l / segsize > 0 ? l / segsize - 1 : 0;
	pg_disconnect(s);
	return rc;
}

/*
 * Whether a backup starting at segment seg of timeline tli can be restored forward to the
 * current timeline: tli is cur or an ancestor of it (by the history files), and the backup
 * began on tli after tli began and before the timeline that followed branched off.
 */
static bool reaches(wal_index *ix, uint32_t cur, uint32_t tli, uint64_t seg)
{
	const timeline *own = NULL;
	for (size_t i = 0; i < ix->n; i++)
		if (ix->tl[i].id == tli)
			own = &ix->tl[i];
	if (own != NULL && own->has_history && seg < own->switch_lsn / ix->segsize)
		return false;
	uint32_t child = 0, at = cur;
	for (int guard = 0; at != 0 && guard < 100000; guard++) {
		if (at == tli) {
			if (child == 0)
				return true;
			for (size_t i = 0; i < ix->n; i++)
				if (ix->tl[i].id == child)
					return seg <= ix->tl[i].switch_lsn / ix->segsize;
			return true;
		}
		const timeline *t = NULL;
		for (size_t i = 0; i < ix->n; i++)
			if (ix->tl[i].id == at)
				t = &ix->tl[i];
		if (t == NULL || !t->has_history)
			return false;
		child = at;
		at = t->parent;
	}
	return false;
}

/*
 * Where integrity starts: the named backup's start, or the earliest backup that is not
 * permanent (a permanent one keeps only its own WAL after delete garbage) and reaches the
 * current timeline (WAL-G's findEarliestBackup). *first stays at cur_seg, and *none is set,
 * when none does.
 */
static err_code integrity_start(repo *r, wal_index *ix, const verify_options *o, uint32_t cur_tli,
								uint64_t *first, bool *none)
{
	backup_refs refs;
	TRY(catalog_backups(r, &refs));
	err_code rc = E_OK;
	const char *picked = NULL;
	bool found = false;
	for (size_t i = 0; i < refs.len; i++) {
		const char *name = refs.items[i].name;
		uint32_t t;
		uint64_t s;
		char seg[WAL_NAME_LEN + 1];
		snprintf(seg, sizeof(seg), "%.24s", name + strlen("base_"));
		if (!str_has_prefix(name, "base_") || wal_name_parse(seg, ix->segsize, &t, &s) != E_OK)
			continue;
		if (o->backup_name != NULL) {
			if (strcmp(name, o->backup_name) == 0) {
				*first = s;
				found = true;
				picked = name;
			}
			continue;
		}
		if (s >= *first || !reaches(ix, cur_tli, t, s))
			continue;
		backup_sentinel bs;
		bool perm = false;
		if (catalog_sentinel_read(r, name, &bs) == E_OK) {
			perm = catalog_permanent(r, name, &bs);
			catalog_sentinel_free(&bs);
		}
		err_clear();
		if (perm) {
			log_info("wal-verify: %s is permanent, not eligible as the earliest backup", name);
			continue;
		}
		*first = s;
		picked = name;
	}
	/*
	 * After `delete retain --pitr-window` the older backups keep only their own WAL: the WAL
	 * is continuous from the window's first backup on, and integrity is checked from there.
	 */
	retention_window w;
	bool windowed = false;
	if (rc == E_OK && o->backup_name == NULL && picked != NULL)
		rc = catalog_window_get(r, &w, &windowed);
	for (size_t i = 0; rc == E_OK && windowed && i < refs.len; i++) {
		uint32_t t;
		uint64_t s;
		char seg[WAL_NAME_LEN + 1];
		snprintf(seg, sizeof(seg), "%.24s", refs.items[i].name + strlen("base_"));
		if (strcmp(refs.items[i].name, w.from_backup) == 0 &&
			wal_name_parse(seg, ix->segsize, &t, &s) == E_OK && s > *first &&
			reaches(ix, cur_tli, t, s)) {
			log_info("wal-verify: the WAL before %s was thinned by delete retain --pitr-window "
					 "%s (" CATALOG_RETENTION_WINDOW ")",
					 w.from_backup, w.window);
			*first = s;
			picked = refs.items[i].name;
		}
		err_clear();
	}
	if (windowed)
		catalog_window_free(&w);
	if (o->backup_name != NULL && !found)
		rc = err_set(E_NOTFOUND, "wal-verify: backup %s does not exist in %s", o->backup_name,
					 repo_describe(r));
	else if (picked != NULL)
		log_info("wal-verify: checking from backup %s", picked);
	*none = picked == NULL;
	catalog_backups_free(&refs);
	return rc;
}

err_code wal_verify(repo *r, const wal_settings *cfg, const verify_options *o, bool *failed,
					FILE *out)
{
	wal_index ix;
	uint32_t cur_tli = 0;
	uint64_t cur_seg = 0;
	uint64_t segsize = (uint64_t)cfg->pg->pg_wal_size_mb << 20;
	*failed = false;
	if (o->at_timeline != 0) {
		cur_tli = o->at_timeline;
		cur_seg = o->at_lsn / segsize;
	} else {
		TRY(current_position(&cur_tli, &cur_seg, segsize));
	}
	TRY(wal_index_build(r, cfg, false, &ix));
	json_t *res = json_object();
	if (o->integrity) {
		uint64_t first = cur_seg;
		bool no_backup = false;
		err_code rc = integrity_start(r, &ix, o, cur_tli, &first, &no_backup);
		/* No backup to start from: WAL-G scans back to the first segment a cluster writes. */
		if (rc == E_OK && no_backup) {
			log_warn("wal-verify: no backup to start from: checking from the first segment");
			first = 1;
		}
		if (rc != E_OK) {
			json_decref(res);
			wal_index_free(&ix);
			return rc;
		}
		const char *overall;
		wal_lost lost;
		rc = wal_lost_read(r, segsize, &lost);
		if (rc != E_OK) {
			json_decref(res);
			wal_index_free(&ix);
			return rc;
		}
		for (size_t i = 0; i < lost.n; i++) {
			char a[WAL_NAME_LEN + 1], b[WAL_NAME_LEN + 1];
			wal_name_format(a, lost.gaps[i].tli, lost.gaps[i].first, segsize);
			wal_name_format(b, lost.gaps[i].tli, lost.gaps[i].last, segsize);
			log_info("wal-verify: %s to %s are recorded lost in " WAL_LOST_OBJECT, a, b);
		}
		json_t *details = integrity(&ix, &lost, cfg, repo_upload_concurrency(r), cur_tli, first,
									cur_seg, no_backup, &overall);
		wal_lost_free(&lost);
		json_t *o = json_object();
		json_object_set_new(o, "status", json_string(overall));
		json_object_set_new(o, "details", details);
		json_object_set_new(res, "integrity", o);
		*failed |= strcmp(overall, "FAILURE") == 0;
	}
	if (o->timeline) {
		uint32_t highest = 0;
		for (size_t i = 0; i < ix.n; i++)
			if (ix.tl[i].nsegs > 0 || ix.tl[i].has_history)
				highest = ix.tl[i].id > highest ? ix.tl[i].id : highest;
		const char *st = highest == cur_tli ? "OK" : highest < cur_tli ? "WARNING" : "FAILURE";
		json_t *o = json_object();
		json_object_set_new(o, "status", json_string(st));
		json_t *d = json_object();
		json_object_set_new(d, "current_timeline_id", json_integer(cur_tli));
		json_object_set_new(d, "highest_storage_timeline_id", json_integer(highest));
		json_object_set_new(o, "details", d);
		json_object_set_new(res, "timeline", o);
		*failed |= strcmp(st, "FAILURE") == 0;
	}
	if (o->json) {
		char *s = json_dumps(res, JSON_PRESERVE_ORDER);
		fprintf(out, "%s\n", s);
		free(s);
	} else {
		json_t *in = json_object_get(res, "integrity");
		if (in != NULL) {
			fprintf(out, "[wal-verify] integrity check status: %s\n",
					json_string_value(json_object_get(in, "status")));
			fprintf(out, "[wal-verify] integrity check details:\n");
			static const char *const hdr[] = { "TLI", "START", "END", "SEGMENTS COUNT",
											   "STATUS" };
			static const bool right[] = { true, false, false, true, false };
			table *t = table_new(5, hdr, right);
			size_t i;
			json_t *d;
			json_array_foreach(json_object_get(in, "details"), i, d)
			{
				char tli[16], cnt[32];
				snprintf(tli, sizeof(tli), "%lld",
						 (long long)json_integer_value(json_object_get(d, "timeline_id")));
				snprintf(cnt, sizeof(cnt), "%lld",
						 (long long)json_integer_value(json_object_get(d, "segments_count")));
				const char *cells[] = {
					tli, json_string_value(json_object_get(d, "start_segment")),
					json_string_value(json_object_get(d, "end_segment")), cnt,
					json_string_value(json_object_get(d, "status"))
				};
				table_add(t, cells);
			}
			table_print(t, out, true);
			table_free(t);
		}
		json_t *tl = json_object_get(res, "timeline");
		if (tl != NULL) {
			json_t *d = json_object_get(tl, "details");
			fprintf(out,
					"[wal-verify] timeline check status: %s\n  current timeline: %lld, highest "
					"timeline in storage: %lld\n",
					json_string_value(json_object_get(tl, "status")),
					(long long)json_integer_value(json_object_get(d, "current_timeline_id")),
					(long long)json_integer_value(
						json_object_get(d, "highest_storage_timeline_id")));
		}
	}
	json_decref(res);
	wal_index_free(&ix);
	return E_OK;
}
