/*
 * Remote deltas from PostgreSQL 17's incremental backups: the base and its manifest chosen,
 * each INCREMENTAL.<relfile> member turned into a WAL-G increment (reference §8.3) of the same
 * relation file, and the backup_label made that of a plain backup, as pg_combinebackup would.
 */
#include "internal/backup/push/push_impl.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

#define MANIFEST_MAX (256u << 20) /* a manifest is ~150 bytes a file */

struct incr_conv {
	pg_incr *parser;
	hasher *h; /* of the increment member's bytes: its IncrementChecksum */
	tar_entry te; /* name borrowed from the caller until the header is written */
	uint32_t *zero;	 /* blocks past the truncation length the server did not send */
	uint32_t nzero;
	bool begun;
	uint64_t pages_left; /* page bytes still expected from the server */
};

incr_conv *incr_conv_new(uint64_t member_size, const tar_entry *te)
{
	incr_conv *c = xcalloc(1, sizeof(*c));
	c->parser = pg_incr_new(member_size);
	c->h = hasher_new();
	c->te = *te;
	return c;
}

void incr_conv_free(incr_conv *c)
{
	if (c == NULL)
		return;
	pg_incr_free(c->parser);
	hasher_free(c->h);
	free(c->zero);
	free(c);
}

/*
 * pg_combinebackup's rule: the file is max(truncation length, last sent block + 1) blocks;
 * below the truncation length an unsent block is the base's, at or above it a zero page. An
 * increment keeps the base's blocks up to its file size, so those zero pages are sent.
 */
static err_code begin_member(incr_conv *c, tar_writer *tw)
{
	uint32_t n = pg_incr_nblocks(c->parser), trunc = pg_incr_truncation(c->parser);
	const uint32_t *b = pg_incr_blocks(c->parser);
	uint32_t len = trunc;
	for (uint32_t i = 0; i < n; i++)
		if (b[i] + 1 > len)
			len = b[i] + 1;
	if (len > trunc) {
		unsigned char *sent = xcalloc((len - trunc + 7) / 8, 1);
		for (uint32_t i = 0; i < n; i++)
			if (b[i] >= trunc)
				sent[(b[i] - trunc) / 8] |= (unsigned char)(1u << ((b[i] - trunc) % 8));
		c->zero = xmalloc((len - trunc) * sizeof(uint32_t));
		for (uint32_t k = trunc; k < len; k++)
			if (!(sent[(k - trunc) / 8] & (1u << ((k - trunc) % 8))))
				c->zero[c->nzero++] = k;
		free(sent);
	}
	unsigned char head[16] = { 'w', 'i', '1', 0x55 };
	uint64_t size_le = htole64((uint64_t)len * PG_PAGE_SIZE);
	uint32_t count_le = htole32(n + c->nzero);
	memcpy(head + 4, &size_le, 8);
	memcpy(head + 12, &count_le, 4);
	c->te.type = TAR_FILE;
	c->te.size = delta_increment_size(n + c->nzero);
	TRY(tar_writer_begin(tw, &c->te));
	c->begun = true;
	TRY(delta_put(tw, c->h, head, sizeof(head)));
	for (uint32_t i = 0; i < n + c->nzero; i++) {
		uint32_t le = htole32(i < n ? b[i] : c->zero[i - n]);
		TRY(delta_put(tw, c->h, &le, 4));
	}
	c->pages_left = (uint64_t)n * PG_PAGE_SIZE;
	return E_OK;
}

err_code incr_conv_write(incr_conv *c, tar_writer *tw, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	if (!c->begun) {
		size_t used;
		TRY(pg_incr_feed(c->parser, p, len, &used));
		p += used;
		len -= used;
		if (!pg_incr_ready(c->parser))
			return E_OK;
		TRY(begin_member(c, tw));
	}
	if (len > c->pages_left)
		return err_set(E_CORRUPT, "incremental file longer than its header says");
	c->pages_left -= len;
	return len ? delta_put(tw, c->h, p, len) : E_OK;
}

err_code incr_conv_end(incr_conv *c, tar_writer *tw)
{
	static const unsigned char zero_page[PG_PAGE_SIZE];
	if (!c->begun || c->pages_left != 0)
		return err_set(E_CORRUPT, "incremental file ended early");
	for (uint32_t i = 0; i < c->nzero; i++)
		TRY(delta_put(tw, c->h, zero_page, sizeof(zero_page)));
	return tar_writer_end(tw);
}

void incr_conv_sum(incr_conv *c, char out[HASH_TEXT_LEN + 1])
{
	hasher_text(c->h, out);
}

uint64_t incr_conv_stored(const incr_conv *c)
{
	return c->begun ? c->te.size : 0;
}

/* "INCREMENTAL.16384" or "INCREMENTAL.16384_vm.1" in the last path element: its real name. */
bool incr_member_name(const char *name, char **real)
{
	const char *slash = strrchr(name, '/');
	const char *base = slash ? slash + 1 : name;
	if (!str_has_prefix(base, "INCREMENTAL.") || base[strlen("INCREMENTAL.")] == '\0')
		return false;
	*real = xasprintf("%.*s%s", (int)(base - name), name, base + strlen("INCREMENTAL."));
	return true;
}

/* A restore without pg_combinebackup must not see the incremental lines: PostgreSQL refuses. */
void incr_strip_label(membuf *label)
{
	size_t out = 0;
	char *d = (char *)label->data;
	for (size_t at = 0; at < label->len;) {
		char *nl = memchr(d + at, '\n', label->len - at);
		size_t end = nl ? (size_t)(nl - d) + 1 : label->len;
		if (!str_has_prefix(d + at, "INCREMENTAL FROM ")) {
			memmove(d + out, d + at, end - at);
			out += end - at;
		}
		at = end;
	}
	label->len = out;
}

static char *manifest_key(const char *name)
{
	return xasprintf(REPO_BACKUP_DIR "%s/" REMOTE_MANIFEST, name);
}

err_code remote_manifest_read(repo *r, const char *name, membuf *into, bool *found)
{
	char *base = manifest_key(name), *key = NULL;
	err_code rc = repo_find(r, base, &key);
	free(base);
	*found = false;
	if (rc == E_NOTFOUND) {
		err_clear();
		return E_OK;
	}
	TRY(rc);
	into->len = 0;
	into->max = MANIFEST_MAX;
	rc = repo_get(r, key, membuf_sink_new(into));
	free(key);
	*found = rc == E_OK;
	return rc;
}

err_code remote_manifest_open(push_state *st, sink **out)
{
	char *base = manifest_key(st->name), *key = NULL;
	err_code rc = repo_put(st->r, base, NULL, out, &key);
	free(base);
	if (rc == E_OK)
		st->manifest_key = key;
	else
		free(key);
	return rc;
}

/*
 * Whether this remote push can be a delta, and of what: PostgreSQL 17+ with summarize_wal,
 * and a base that has the server's manifest. Otherwise a full backup, saying why in one line;
 * an explicit base (--delta-from-*) that cannot be had is an error.
 */
err_code remote_delta_choose(push_state *st, const push_options *opt, const pg_server_info *si,
							 membuf *manifest)
{
	const backup_settings *cfg = st->cfg;
	bool explicit_base = opt->delta_from_name || opt->delta_from_user_data ||
		cfg->delta_from_name || cfg->delta_from_user_data;
	if (opt->full || (cfg->delta_max_steps <= 0 && !explicit_base))
		return E_OK;
	if (si->version < 170000) {
		if (explicit_base)
			return err_set(E_CONFIG, "a delta backup without PGDATA needs PostgreSQL 17 or later "
									 "(incremental backups from WAL summaries); this server is "
									 "%d.%d",
						   si->version / 10000, si->version % 10000);
		log_info("taking a full backup: remote deltas need PostgreSQL 17 or later (this server "
				 "is %d.%d)",
				 si->version / 10000, si->version % 10000);
		return E_OK;
	}
	if (!si->summarize_wal) {
		log_info("taking a full backup: summarize_wal is off on the server (remote deltas are "
				 "incremental backups from WAL summaries)");
		return E_OK;
	}
	TRY(delta_choose(st->r, cfg, opt, &st->delta));
	if (!st->delta.active)
		return E_OK;
	bool found;
	TRY(remote_manifest_read(st->r, st->delta.name, manifest, &found));
	if (!found) {
		log_info("taking a full backup: %s has no server manifest (only remote backups of "
				 "PostgreSQL 17 or later have one)",
				 st->delta.name);
		delta_free(&st->delta);
	}
	return E_OK;
}
