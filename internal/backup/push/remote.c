/*
 * backup-push without a data directory: BASE_BACKUP over a replication connection (pg speaks
 * the protocol of each major), each tar archive parsed on the fly and its members re-packed
 * into WAL-G's partitions, so a pod without PGDATA can take backups. On 17+ with WAL summaries
 * a delta is an incremental backup whose INCREMENTAL files become WAL-G increments.
 */
#include "internal/backup/push/push_impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/pg/pg.h"

/*
 * Nice steps below the server when it compresses the stream: of 5, 10 and 19, in a few runs
 * on 2 cores, 10 was the fastest.
 */
#define REMOTE_YIELD 10

/* What one archive of the stream needs while its members are re-packed. */
typedef struct remote {
	push_state *st;
	backup_sentinel *sen;
	bool incremental; /* this BASE_BACKUP is INCREMENTAL */
	part p;
	sink *reader; /* decompressor (server-side compression) and tar reader of the archive */
	char *prefix; /* "" for base.tar, "/pg_tblspc/<oid>" for a tablespace */
	/* current member */
	char *member;
	bool keep;		 /* member written to the part */
	membuf *grab;	 /* or collected: pg_control, backup_label, tablespace_map */
	hasher *hash;	 /* of the member's content, for delta restore */
	incr_conv *inc;	 /* or converted: an INCREMENTAL file */
	struct stat sb;
	sink *manifest; /* the manifest object being written */
	membuf control, label, spcmap;
} remote;

static membuf *grab_for(remote *rm, const char *name)
{
	if (rm->prefix[0] != '\0')
		return NULL;
	if (strcmp(name, "global/pg_control") == 0)
		return &rm->control;
	if (strcmp(name, "backup_label") == 0)
		return &rm->label;
	if (strcmp(name, "tablespace_map") == 0)
		return &rm->spcmap;
	return NULL;
}

static err_code rm_entry(void *ctx, const tar_entry *e)
{
	remote *rm = ctx;
	const char *name = e->name;
	while (str_has_prefix(name, "./"))
		name += 2;
	free(rm->member);
	rm->member = NULL;
	rm->keep = false;
	incr_conv_free(rm->inc);
	rm->inc = NULL;
	rm->grab = grab_for(rm, name);
	if (rm->grab != NULL) {
		rm->grab->len = 0;
		rm->grab->max = 1u << 20;
		return E_OK;
	}
	if (e->type != TAR_FILE && e->type != TAR_DIR)
		return E_OK; /* links come back from the spec; pg_basebackup adds nothing else */
	char *real = NULL;
	if (rm->incremental && e->type == TAR_FILE && incr_member_name(name, &real))
		name = real;
	size_t n = strlen(name);
	while (n > 0 && name[n - 1] == '/')
		n--;
	rm->member = n == 0 && rm->prefix[0] == '\0'
		? xstrdup("/")
		: xasprintf("%s/%.*s", rm->prefix, (int)n, name);
	memset(&rm->sb, 0, sizeof(rm->sb));
	rm->sb.st_mode = (e->type == TAR_DIR ? S_IFDIR : S_IFREG) | (mode_t)e->mode;
	rm->sb.st_size = (off_t)e->size;
	rm->sb.st_mtim.tv_sec = e->mtime;
	if (rm->p.tw == NULL)
		TRY(part_open(rm->st, &rm->p));
	tar_entry te = *e;
	te.name = rm->member;
	hasher_free(rm->hash);
	rm->hash = NULL;
	rm->keep = true;
	__atomic_add_fetch(&rm->st->catalog, e->size, __ATOMIC_RELAXED);
	if (real != NULL) {
		free(real);
		rm->inc = incr_conv_new(e->size, &te); /* its header follows from the content */
		return E_OK;
	}
	TRY(tar_writer_begin(rm->p.tw, &te));
	rm->hash = e->type == TAR_FILE ? hasher_new() : NULL;
	return E_OK;
}

static err_code rm_data(void *ctx, const void *buf, size_t len)
{
	remote *rm = ctx;
	if (rm->grab != NULL) {
		sink *m = membuf_sink_new(rm->grab);
		err_code rc = sink_write(m, buf, len);
		sink_free(m);
		return rc;
	}
	if (!rm->keep)
		return E_OK;
	__atomic_add_fetch(&rm->st->read_bytes, len, __ATOMIC_RELAXED);
	if (rm->inc != NULL)
		return incr_conv_write(rm->inc, rm->p.tw, buf, len);
	if (rm->hash != NULL)
		hasher_update(rm->hash, buf, len);
	return tar_writer_write(rm->p.tw, buf, len);
}

static err_code rm_entry_end(void *ctx)
{
	remote *rm = ctx;
	if (!rm->keep)
		return E_OK;
	rm->keep = false;
	uint64_t stored = (uint64_t)rm->sb.st_size;
	if (rm->inc != NULL) {
		TRY(incr_conv_end(rm->inc, rm->p.tw));
		stored = incr_conv_stored(rm->inc);
	} else
		TRY(tar_writer_end(rm->p.tw));
	if (rm->st->fmeta != NULL)
		namelist_add(&rm->p.members, rm->member);
	if (strcmp(rm->member, "/") != 0) {
		json_t *rec = file_record(&rm->sb, rm->inc ? DELTA_INCREMENT : DELTA_WHOLE);
		char sum[HASH_TEXT_LEN + 1];
		if (rm->inc != NULL) { /* as pack.c's record(): the increment's own bytes */
			incr_conv_sum(rm->inc, sum);
			json_object_set_new(rec, "IncrementChecksum", json_string(sum));
		} else if (rm->hash != NULL) {
			hasher_text(rm->hash, sum);
			json_object_set_new(rec, "Checksum", json_string(sum));
			json_object_set_new(rec, "Size", json_integer((json_int_t)rm->sb.st_size));
		}
		TRY(fmeta_file(rm->st, rm->member, rec));
	}
	if (S_ISREG(rm->sb.st_mode)) {
		rm->p.content += stored;
		__atomic_add_fetch(&rm->st->uncompressed, stored, __ATOMIC_RELAXED);
		__atomic_add_fetch(&rm->st->nfiles, 1, __ATOMIC_RELAXED);
	}
	if (rm->p.content > (uint64_t)rm->st->cfg->tar_size_threshold)
		return part_close(rm->st, &rm->p);
	return E_OK;
}

static const tar_handler remote_handler = { rm_entry, rm_data, rm_entry_end };

/* Remote rule (reference §5.8): the segment holding the start LSN, no -1. */
static err_code bb_started(void *ctx, uint64_t start, uint32_t tli)
{
	remote *rm = ctx;
	push_state *st = rm->st;
	uint64_t segsize = (uint64_t)st->cfg->wal->pg->pg_wal_size_mb << 20;
	char seg[WAL_NAME_LEN + 1], lsn[32];
	wal_name_format(seg, tli, start / segsize, segsize);
	rm->sen->lsn = start;
	st->timeline = tli;
	if (st->delta.active) {
		TRY(delta_check(&st->delta, rm->sen->system_id, start));
		st->name = xasprintf("base_%s_D_%.24s", seg, st->delta.name + strlen("base_"));
		rm->sen->is_delta = true;
		rm->sen->delta_from = xstrdup(st->delta.name);
		rm->sen->delta_full_name = xstrdup(st->delta.full_name);
		rm->sen->delta_count = st->delta.count;
		rm->sen->delta_lsn = st->delta.lsn;
	} else
		st->name = xasprintf("base_%s", seg);
	pg_lsn_format(start, lsn);
	TRY(push_claim(st, start, tli));
	log_info("backup %s started at LSN %s (BASE_BACKUP%s)", st->name, lsn,
			 rm->incremental ? " INCREMENTAL" : "");
	return E_OK;
}

static err_code bb_tablespace(void *ctx, const char *oid, const char *loc)
{
	remote *rm = ctx;
	/* Like WAL-G: the base prefix is the server's data directory, where links go. */
	spec_add_tablespace(rm->st, rm->st->remote_data_dir ? rm->st->remote_data_dir : "", oid,
						loc);
	return E_OK;
}

static err_code bb_archive_begin(void *ctx, const char *name, const char *oid)
{
	remote *rm = ctx;
	const char *ext = strstr(name, ".tar");
	ext = ext[4] == '.' ? ext + 5 : ext + 4;
	if (!repo_is_codec_ext(ext))
		return err_set(E_CORRUPT, "BASE_BACKUP sent \"%s\", compressed in a way walc does not "
								  "decode",
					   name);
	free(rm->prefix);
	rm->prefix = oid ? xasprintf("/pg_tblspc/%s", oid) : xstrdup("");
	rm->reader = tar_reader_new(&remote_handler, rm);
	if (ext[0] != '\0')
		rm->reader = repo_decompress_new(name, rm->reader);
	return E_OK;
}

static err_code bb_archive_data(void *ctx, const void *buf, size_t len)
{
	remote *rm = ctx;
	return sink_write(rm->reader, buf, len);
}

static err_code bb_archive_end(void *ctx)
{
	remote *rm = ctx;
	err_code rc = sink_finish(rm->reader);
	sink_free(rm->reader);
	rm->reader = NULL;
	return rc;
}

static err_code bb_manifest(void *ctx, const void *buf, size_t len)
{
	remote *rm = ctx;
	if (rm->manifest == NULL)
		TRY(remote_manifest_open(rm->st, &rm->manifest));
	return sink_write(rm->manifest, buf, len);
}

static err_code bb_poll(void *ctx)
{
	remote *rm = ctx;
	if (group_cancelled(rm->st->g))
		return err_set(E_CANCELLED, "backup cancelled");
	return push_stopped(rm->st);
}

static const pg_bb_handler bb_handler = { bb_started,	   bb_tablespace, bb_archive_begin,
										  bb_archive_data, bb_archive_end, bb_manifest,
										  bb_poll };

static void remote_reset(remote *rm)
{
	part_discard(&rm->p);
	hasher_free(rm->hash);
	incr_conv_free(rm->inc);
	sink_free(rm->reader);
	sink_free(rm->manifest);
	free(rm->prefix);
	free(rm->member);
	rm->hash = NULL;
	rm->inc = NULL;
	rm->reader = rm->manifest = NULL;
	rm->prefix = rm->member = NULL;
}

/* The stream, then the manifest object published (before the sentinel). */
static err_code stream_backup(pg_session *s, remote *rm, const pg_bb_options *o, pg_bb_result *res)
{
	TRY(pg_base_backup(s, o, &bb_handler, rm, res));
	rm->sen->finish_lsn = res->end_lsn;
	if (rm->p.tw != NULL)
		TRY(part_close(rm->st, &rm->p));
	if (o->manifest) {
		if (rm->manifest == NULL)
			return err_set(E_CORRUPT, "BASE_BACKUP sent no manifest");
		err_code rc = sink_finish(rm->manifest);
		sink_free(rm->manifest);
		rm->manifest = NULL;
		TRY(rc);
		push_published(rm->st, rm->st->manifest_key);
	}
	log_info("backup %s: BASE_BACKUP sent %.1f MiB (%llu bytes)", rm->st->name,
			 (double)res->wire_bytes / 1048576, (unsigned long long)res->wire_bytes);
	return E_OK;
}

static err_code run_remote(const push_options *opt, push_state *st, backup_sentinel *sen,
						   remote *rm)
{
	pg_session *s = NULL;
	pg_server_info si = { 0 };
	membuf base_manifest = { 0 };
	pg_bb_options o = { .label = "walc",
						.max_rate = st->cfg->disk_rate_limit,
						.stop_timeout_ms = st->cfg->stop_backup_timeout_ms };
	err_code rc = pg_bb_compression_parse("WALG_REMOTE_COMPRESSION", st->cfg->remote_compression,
										  &o);
	if (rc == E_OK)
		rc = pg_connect(true, &s);
	if (rc == E_OK)
		rc = pg_server_info_get(s, &si);
	if (rc == E_OK && o.compression != NULL && si.version < 150000)
		rc = err_set(E_CONFIG, "WALG_REMOTE_COMPRESSION: server-side compression needs "
							   "PostgreSQL 15 or later (this server is %d.%d)",
					 si.version / 10000, si.version % 10000);
	if (rc == E_OK)
		rc = catalog_check_cluster(st->r, si.system_id, st->cfg->wal->catalog,
								   "backup-push");
	if (rc == E_OK) {
		sen->system_id = si.system_id;
		sen->have_system_id = true;
		sen->pg_version = si.version;
		sen->data_dir = xstrdup(si.data_dir);
		st->remote_data_dir = sen->data_dir;
		o.manifest = si.version >= 170000;
		rc = remote_delta_choose(st, opt, &si, &base_manifest);
	}
	if (rc == E_OK && st->delta.active) {
		rc = pg_upload_manifest(s, base_manifest.data, base_manifest.len);
		if (rc != E_OK) {
			log_info("taking a full backup: the server refused %s's manifest (%s)",
					 st->delta.name, err_msg());
			err_clear();
			delta_free(&st->delta);
			rc = E_OK;
		}
	}
	free(base_manifest.data);
	/*
	 * The server's one compressing process is the stream's only producer: on cores it shares
	 * with walc (a sidecar, a CronJob on the same node) walc's threads taking their equal share
	 * would slow it, and with it the whole backup (2.16 against 1.8 s at pgbench scale 100 on 2
	 * cores). Below it, they take what it leaves.
	 */
	if (rc == E_OK && o.compression != NULL && cpu_yield(REMOTE_YIELD))
		log_debug("backup %s: walc's threads yield the CPU to the server compressing the stream",
				  st->name);
	pg_bb_result res = { 0 };
	if (rc == E_OK) {
		st->g = group_new(); /* only for cancellation by signal */
		rm->incremental = o.incremental = st->delta.active;
		rc = stream_backup(s, rm, &o, &res);
	}
	if (rc != E_OK && res.refused && st->delta.active) {
		/* No WAL summaries for the whole range, a timeline switch, ...: the server says. */
		log_info("taking a full backup: the server refused an incremental one from %s (%s)",
				 st->delta.name, err_msg());
		err_clear();
		delta_free(&st->delta);
		remote_reset(rm);
		rm->incremental = o.incremental = false;
		rc = stream_backup(s, rm, &o, &res);
	}
	if (rc == E_OK && rm->control.len == 0)
		rc = err_set(E_CORRUPT, "BASE_BACKUP sent no global/pg_control");
	if (rc == E_OK && rm->label.len == 0)
		rc = err_set(E_CORRUPT, "BASE_BACKUP sent no backup_label");
	if (rc == E_OK && rm->incremental)
		incr_strip_label(&rm->label);
	pg_server_info_free(&si);
	pg_disconnect(s);
	if (st->g != NULL) {
		group_wait(st->g);
		group_free(st->g);
		st->g = NULL;
	}
	return rc;
}

/* BASE_BACKUP handed over pg_control, backup_label and tablespace_map: stored as locally. */
err_code push_remote_all(const backup_settings *cfg, const push_options *opt, push_state *st,
						 backup_sentinel *sen)
{
	remote rm = { .st = st, .sen = sen };
	err_code rc = push_parse_user_data(opt->user_data ? opt->user_data : cfg->sentinel_user_data,
									   &sen->user_data);
	if (rc == E_OK) {
		sen->start_time = time_now_rfc3339();
		rc = run_remote(opt, st, sen, &rm);
	}
	/* The server waits for its own archiver; a standby's does not archive (push_wait_stored). */
	if (rc == E_OK && memmem(rm.label.data, rm.label.len, "BACKUP FROM: standby", 20) != NULL)
		rc = push_wait_stored(st, sen->lsn, sen->finish_lsn, st->timeline);
	if (rc == E_OK)
		rc = push_store_control(st, (const char *)rm.control.data, rm.control.len);
	if (rc == E_OK) {
		char *l = xasprintf("%.*s", (int)rm.label.len, (const char *)rm.label.data);
		char *m = xasprintf("%.*s", (int)rm.spcmap.len,
							rm.spcmap.data ? (const char *)rm.spcmap.data : "");
		rc = push_store_tail(st, sen, l, m);
		free(l);
		free(m);
	}
	remote_reset(&rm);
	free(rm.control.data);
	free(rm.label.data);
	free(rm.spcmap.data);
	return rc;
}
