/*
 * Packers: each takes entries from the walker and streams them into its own tar partition
 * (read -> tar -> compress -> encrypt -> storage), rolling over to a new part once the
 * partition holds more than WALG_TAR_SIZE_THRESHOLD bytes of content, as WAL-G does.
 */
#include "internal/backup/push/push_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal/pg/pg.h"
#include "internal/tar/tar.h"

#define READ_CHUNK (1u << 20) /* at least DELTA_SCAN_CHUNK */
/*
 * Frames for ranged reads (backup-fetch --delta reads only the files it restores): a member
 * starts a new compression frame when the frame under way holds FRAME_MIN bytes of tar, or
 * when the member itself is that large, so a big file shares its frame with nothing and small
 * ones share theirs with at most about FRAME_MIN of neighbours. Each file's record keeps the
 * offset its frame starts at ("FrameOffset", a walc field WAL-G ignores); the object stays one
 * stream of concatenated frames, which WAL-G reads as before.
 */
#define FRAME_MIN (1u << 20)


/* MTime as WAL-G writes it: RFC 3339 with nanoseconds in the local zone. */
static char *mtime_text(const struct stat *sb)
{
	struct tm tm;
	char date[64], zone[8];
	localtime_r(&sb->st_mtim.tv_sec, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);
	char frac[16] = "";
	if (sb->st_mtim.tv_nsec != 0) {
		snprintf(frac, sizeof(frac), ".%09ld", sb->st_mtim.tv_nsec);
		for (int i = 9; i > 1 && frac[i] == '0'; i--)
			frac[i] = '\0';
	}
	if (strcmp(zone, "+0000") == 0)
		return xasprintf("%s%sZ", date, frac);
	return xasprintf("%s%s%.3s:%s", date, frac, zone, zone + 3);
}

json_t *file_record(const struct stat *sb, delta_kind kind)
{
	json_t *o = json_object();
	char *mt = mtime_text(sb);
	json_object_set_new(o, "IsIncremented", json_boolean(kind == DELTA_INCREMENT));
	json_object_set_new(o, "IsSkipped", json_boolean(kind == DELTA_SKIP));
	json_object_set_new(o, "MTime", json_string(mt));
	json_object_set_new(o, "UpdatesCount", json_integer(0));
	free(mt);
	return o;
}

static const char *base_of(const char *key)
{
	const char *slash = strrchr(key, '/');
	return slash ? slash + 1 : key;
}

err_code part_open(push_state *st, part *p)
{
	int n = __atomic_add_fetch(&st->part_seq, 1, __ATOMIC_RELAXED);
	char *base = xasprintf("%s%s/tar_partitions/part_%03d.tar", repo_backups(st->r), st->name, n);
	sink *s = NULL;
	p->stored = 0;
	err_code rc = repo_put_long(st->r, base, &p->stored, &s, &p->key);
	free(base);
	TRY(rc);
	p->frames = repo_frames_allowed(st->r);
	p->frame_in = 0;
	p->frame_at = 0;
	p->framed = s;
	p->tw = tar_writer_new(s);
	memset(&p->members, 0, sizeof(p->members));
	p->content = 0;
	return E_OK;
}

void part_discard(part *p)
{
	tar_writer_free(p->tw);
	namelist_free(&p->members);
	free(p->key);
	memset(p, 0, sizeof(*p));
}

err_code part_close(push_state *st, part *p)
{
	err_code rc = tar_writer_finish(p->tw);
	if (rc == E_OK) {
		__atomic_add_fetch(&st->compressed, p->stored, __ATOMIC_RELAXED);
		fmeta_part(st, base_of(p->key), &p->members);
		push_published(st, p->key);
		log_debug("stored %s", p->key);
	}
	part_discard(p);
	return rc;
}

/* Corrupt pages of one file, for files_metadata.json and the log. */
typedef struct corrupt {
	uint32_t count;
	json_t *some;
	char checksum[HASH_TEXT_LEN + 1]; /* of the whole content stored, "" if not whole */
} corrupt;

/*
 * pg's page rule on each whole page read; a page that fails is read again once, as
 * PostgreSQL's base backup does, since a write racing the read can tear it.
 */
static void verify_pages(push_state *st, const walk_entry *e, int fd, const unsigned char *buf,
						 size_t len, uint64_t offset, corrupt *c)
{
	uint32_t base = pg_relation_first_block(e->member);
	for (size_t off = 0; off + PG_PAGE_SIZE <= len; off += PG_PAGE_SIZE) {
		uint32_t blk = (uint32_t)((offset + off) / PG_PAGE_SIZE);
		pg_page_verdict v = pg_page_verify(buf + off, base + blk, true, st->start_lsn);
		if (v < PG_PAGE_BAD_HEADER)
			continue;
		unsigned char again[PG_PAGE_SIZE];
		if (pread(fd, again, PG_PAGE_SIZE, (off_t)(offset + off)) == PG_PAGE_SIZE &&
			(v = pg_page_verify(again, base + blk, true, st->start_lsn)) < PG_PAGE_BAD_HEADER)
			continue;
		if (c->some == NULL)
			c->some = json_array();
		if (c->count < 10 || st->store_all)
			json_array_append_new(c->some, json_integer(blk));
		c->count++;
		log_warn("corrupt page: %s block %u (%s)", e->path, blk, pg_page_verdict_text(v));
	}
}

static bool verifying(const push_state *st, const walk_entry *e)
{
	return st->verify && delta_is_paged(e->member, (uint64_t)e->st.st_size) &&
		!str_has_suffix(e->member, "pg_internal.init");
}

/* An increment member, counted and paced like any file content; its own checksum in c. */
static err_code pack_increment(push_state *st, part *p, const walk_entry *e, int fd,
							   const uint32_t *blocks, uint32_t n, unsigned char *buf, corrupt *c)
{
	tar_entry te = { .name = e->member, .type = TAR_FILE, .mode = e->st.st_mode & 07777,
					 .mtime = e->st.st_mtim.tv_sec, .uid = e->st.st_uid, .gid = e->st.st_gid };
	uint64_t member_size = delta_increment_size(n);
	rate_take(st->disk, (size_t)n * PG_PAGE_SIZE);
	hasher *h = hasher_new();
	err_code rc = delta_write_increment(p->tw, &te, fd, e->path, (uint64_t)e->st.st_size, blocks,
										n, buf, h);
	if (rc == E_OK)
		hasher_text(h, c->checksum);
	hasher_free(h);
	TRY(rc);
	p->content += member_size;
	__atomic_add_fetch(&st->read_bytes, (uint64_t)n * PG_PAGE_SIZE, __ATOMIC_RELAXED);
	__atomic_add_fetch(&st->uncompressed, member_size, __ATOMIC_RELAXED);
	return E_OK;
}

/* File content as of the walk: a file that shrank is zero-filled, one that grew is cut. */
static err_code pack_file(push_state *st, part *p, const walk_entry *e, unsigned char *buf,
						  delta_kind *kind, corrupt *c)
{
	int fd = open(e->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) {
			*kind = DELTA_SKIP;
			log_warn("%s vanished during the backup; skipped", e->path);
			return E_OK;
		}
		return err_errno(E_IO, errno, "opening %s", e->path);
	}
	uint64_t size = (uint64_t)e->st.st_size, done = 0;
	c->checksum[0] = '\0';
	if (*kind == DELTA_INCREMENT) {
		uint32_t *blocks, n;
		bool usable;
		err_code rc = delta_scan(fd, e->path, size, st->delta.lsn, buf, &blocks, &n, &usable);
		if (rc == E_OK && usable) {
			if (verifying(st, e))
				for (uint32_t i = 0; i < n; i++)
					if (pread(fd, buf, PG_PAGE_SIZE, (off_t)blocks[i] * PG_PAGE_SIZE) ==
						PG_PAGE_SIZE)
						verify_pages(st, e, fd, buf, PG_PAGE_SIZE,
									 (uint64_t)blocks[i] * PG_PAGE_SIZE, c);
			rc = pack_increment(st, p, e, fd, blocks, n, buf, c);
		}
		free(blocks);
		if (rc != E_OK || usable) {
			close(fd);
			if (rc == E_OK)
				__atomic_add_fetch(&st->nfiles, 1, __ATOMIC_RELAXED);
			return rc;
		}
		*kind = DELTA_WHOLE;
	}
	tar_entry te = { .name = e->member, .type = TAR_FILE, .size = size,
					 .mode = e->st.st_mode & 07777, .mtime = e->st.st_mtim.tv_sec,
					 .uid = e->st.st_uid, .gid = e->st.st_gid };
	err_code rc = tar_writer_begin(p->tw, &te);
	hasher *h = hasher_new();
	while (rc == E_OK && done < size) {
		/* A 1 GiB segment read at a rate limit takes long: stop at the next chunk. */
		if (group_cancelled(st->g)) {
			rc = err_set(E_CANCELLED, "backup cancelled");
			break;
		}
		if ((rc = push_stopped(st)) != E_OK)
			break;
		size_t want = size - done < READ_CHUNK ? (size_t)(size - done) : READ_CHUNK;
		ssize_t n = read(fd, buf, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = err_errno(E_IO, errno, "reading %s", e->path);
			break;
		}
		if (n == 0) {
			memset(buf, 0, want);
			n = (ssize_t)want;
		} else {
			rate_take(st->disk, (size_t)n);
		}
		if (verifying(st, e))
			verify_pages(st, e, fd, buf, (size_t)n, done, c);
		hasher_update(h, buf, (size_t)n);
		rc = tar_writer_write(p->tw, buf, (size_t)n);
		done += (uint64_t)n;
		__atomic_add_fetch(&st->read_bytes, (uint64_t)n, __ATOMIC_RELAXED);
	}
	close(fd);
	if (rc == E_OK)
		hasher_text(h, c->checksum);
	hasher_free(h);
	if (rc == E_OK)
		rc = tar_writer_end(p->tw);
	if (rc == E_OK) {
		p->content += size;
		__atomic_add_fetch(&st->uncompressed, size, __ATOMIC_RELAXED);
		__atomic_add_fetch(&st->nfiles, 1, __ATOMIC_RELAXED);
	}
	return rc;
}

/* frame: the offset of the member's frame in its part, or -1 when not recorded. */
static err_code record(push_state *st, const walk_entry *e, delta_kind kind, corrupt *c,
					   int64_t frame)
{
	json_t *rec = file_record(&e->st, kind);
	if (frame >= 0)
		json_object_set_new(rec, "FrameOffset", json_integer((json_int_t)frame));
	/*
	 * walc extensions (WAL-G ignores them): the whole content's checksum, which restores and
	 * delta restore check; a skipped file has none here (delta restore takes the one of the
	 * backup that stored it). An increment's is of its own stored bytes (IncrementChecksum):
	 * the pages it leaves out are the base's copies, checked at the base's own level, and a
	 * sum of the file as read now would not match base + increment (a page can change without
	 * its LSN moving, hint bits).
	 */
	if (c->checksum[0] != '\0' && kind == DELTA_INCREMENT) {
		json_object_set_new(rec, "IncrementChecksum", json_string(c->checksum));
	} else if (c->checksum[0] != '\0' && S_ISREG(e->st.st_mode)) {
		json_object_set_new(rec, "Checksum", json_string(c->checksum));
		json_object_set_new(rec, "Size", json_integer((json_int_t)e->st.st_size));
	}
	if (c->count > 0) {
		json_t *cb = json_object();
		json_object_set_new(cb, "CorruptBlocksCount", json_integer(c->count));
		json_object_set_new(cb, "SomeCorruptBlocks", c->some);
		c->some = NULL;
		json_object_set_new(rec, "CorruptBlocks", cb);
		__atomic_add_fetch(&st->corrupt_blocks, c->count, __ATOMIC_RELAXED);
	}
	return fmeta_file(st, e->member, rec);
}

/* FRAME_MIN's rule, before a member of size bytes: end the frame under way if it is due. */
static err_code frame_cut(part *p, uint64_t size)
{
	if (p->frame_in == 0 || (p->frame_in < FRAME_MIN && size < FRAME_MIN))
		return E_OK;
	TRY(tar_writer_flush(p->tw));
	TRY(repo_end_frame(p->key, p->framed));
	p->frame_in = 0;
	p->frame_at = p->stored; /* everything before the cut went through the counter */
	return E_OK;
}

static err_code pack_one(push_state *st, part *p, const walk_entry *e, unsigned char *buf)
{
	delta_kind kind = S_ISDIR(e->st.st_mode) ? DELTA_WHOLE
											 : delta_classify(&st->delta, e->member, &e->st);
	corrupt c = { 0, NULL, "" };
	if (kind == DELTA_SKIP)
		return record(st, e, kind, &c, -1);
	if (p->tw == NULL)
		TRY(part_open(st, p));
	int64_t frame = -1;
	if (p->frames) {
		uint64_t size = S_ISREG(e->st.st_mode) ? (uint64_t)e->st.st_size : 0;
		TRY(frame_cut(p, size));
		frame = (int64_t)p->frame_at;
	}
	uint64_t tar_before = tar_writer_offset(p->tw);
	if (S_ISDIR(e->st.st_mode)) {
		tar_entry te = { .name = e->member, .type = TAR_DIR, .mode = e->st.st_mode & 07777,
						 .mtime = e->st.st_mtim.tv_sec, .uid = e->st.st_uid,
						 .gid = e->st.st_gid };
		TRY(tar_writer_begin(p->tw, &te));
		TRY(tar_writer_end(p->tw));
	} else {
		err_code rc = pack_file(st, p, e, buf, &kind, &c);
		if (rc != E_OK) {
			json_decref(c.some);
			return rc;
		}
		if (kind == DELTA_SKIP) /* vanished */
			return E_OK;
	}
	p->frame_in += tar_writer_offset(p->tw) - tar_before;
	if (st->fmeta != NULL)
		namelist_add(&p->members, e->member);
	if (strcmp(e->member, "/") != 0)
		TRY(record(st, e, kind, &c, frame));
	if (p->content > (uint64_t)st->cfg->tar_size_threshold)
		return part_close(st, p);
	return E_OK;
}

err_code pack_entries(void *arg)
{
	push_state *st = arg;
	unsigned char *buf = xmalloc(READ_CHUNK);
	part p = { 0 };
	err_code rc = E_OK;
	void *item;

	while (chan_recv(st->entries, &item)) {
		walk_entry *e = item;
		rc = pack_one(st, &p, e, buf);
		walk_entry_free(e);
		if (rc != E_OK)
			break;
	}
	if (rc == E_OK && group_cancelled(st->g))
		rc = err_set(E_CANCELLED, "backup cancelled");
	if (rc == E_OK && p.tw != NULL)
		rc = part_close(st, &p);
	part_discard(&p);
	free(buf);
	return rc;
}

err_code pack_small_tar(push_state *st, const char *base, const char *const *names,
						const char *const *data, const size_t *lens, int n, uint32_t mode,
						char **key_out)
{
	char *full = xasprintf("%s%s/tar_partitions/%s", repo_backups(st->r), st->name, base);
	sink *s = NULL;
	char *key = NULL;
	err_code rc = repo_put(st->r, full, &st->compressed, &s, &key);
	free(full);
	TRY(rc);
	tar_writer *tw = tar_writer_new(s);
	for (int i = 0; rc == E_OK && i < n; i++) {
		tar_entry te = { .name = names[i], .type = TAR_FILE, .size = lens[i], .mode = mode,
						 .mtime = time(NULL) };
		rc = tar_writer_begin(tw, &te);
		if (rc == E_OK)
			rc = tar_writer_write(tw, data[i], lens[i]);
		if (rc == E_OK)
			rc = tar_writer_end(tw);
		__atomic_add_fetch(&st->uncompressed, lens[i], __ATOMIC_RELAXED);
	}
	if (rc == E_OK)
		rc = tar_writer_finish(tw);
	tar_writer_free(tw);
	if (rc == E_OK)
		push_published(st, key);
	if (rc == E_OK && key_out != NULL)
		*key_out = key;
	else
		free(key);
	return rc;
}
