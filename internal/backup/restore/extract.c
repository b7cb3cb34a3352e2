/*
 * Tar members to files: directories, whole files, and WAL-G increments applied page by page.
 * The member reader checks every name so nothing is written outside the destination, refuses
 * link members (WAL-G never stores them; tablespace links are made from the spec) and parses
 * increments; the extractor writes what it passes on, backup-verify checks it instead. Both
 * get every member held to what files_metadata.json recorded for it, checked as the bytes
 * pass (XXH3 at memory speed), never by reading a written file back.
 */
#include "internal/backup/restore/extract.h"

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <fnmatch.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE_SIZE 8192
#define INC_HEADER 16
#define INC_MAX_PAGES ((1u << 30) / PAGE_SIZE) /* a relation segment is at most 1 GiB */

static const unsigned char inc_magic[4] = { 'w', 'i', '1', 0x55 };

err_code extract_safe_path(const char *member, char *out, size_t outlen)
{
	const char *p = member;
	if (*p == '/')
		p++;
	if (strlen(p) >= outlen)
		return err_set(E_CORRUPT, "tar member name too long");
	if (*p == '/')
		return err_set(E_CORRUPT, "refusing tar member \"%s\": absolute path", member);
	const char *c = p;
	while (*c) {
		const char *slash = strchr(c, '/');
		size_t len = slash ? (size_t)(slash - c) : strlen(c);
		if ((len == 2 && c[0] == '.' && c[1] == '.') || (len == 0 && slash != NULL))
			return err_set(E_CORRUPT, "refusing tar member \"%s\": path leaves the directory",
						   member);
		if (slash == NULL)
			break;
		c = slash + 1;
	}
	strcpy(out, p);
	size_t n = strlen(out);
	while (n > 0 && out[n - 1] == '/')
		out[--n] = '\0';
	return E_OK;
}

/* The member reader */

typedef struct member_reader {
	sink base;
	sink *tar;
	const member_ops *ops;
	void *ctx;
	const file_table *files;
	held *held;
	char *name; /* current member, for messages */
	bool take;
	bool increment;
	file_rec rec;		 /* its Files entry, */
	const file_sum *sum; /* and what that records, or NULL */
	hasher *h;			 /* of the member's bytes, when a checksum is recorded */
	uint64_t offset;	/* of a whole file's next byte */
	/* increment parsing */
	unsigned char head[INC_HEADER];
	size_t head_len;
	uint64_t file_size;
	uint32_t npages;
	uint32_t *blocks;
	size_t blocks_got;	/* bytes of the block list received */
	uint32_t page;		/* current page index */
	size_t page_off;	/* bytes of the current page delivered */
	uint64_t remaining;	/* bytes of member content still expected */
} member_reader;

static void mr_reset(member_reader *m)
{
	free(m->name);
	m->name = NULL;
	free(m->blocks);
	m->blocks = NULL;
	hasher_free(m->h);
	m->h = NULL;
	m->sum = NULL;
	m->take = false;
	m->increment = false;
}

/* A member's content and its Files entry disagree: the consumer's call, else an error. */
static err_code mismatch(member_reader *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static err_code mismatch(member_reader *m, const char *fmt, ...)
{
	char what[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (m->ops->mismatch != NULL)
		return m->ops->mismatch(m->ctx, m->name, what);
	return err_set(E_CORRUPT, "%s: %s", m->name, what);
}

/* The size and checksum recorded for a member taken, once its last byte has passed. */
static err_code check_recorded(member_reader *m)
{
	const file_sum *fs = m->sum;
	if (fs == NULL)
		return E_OK;
	err_code rc = E_OK;
	if (!m->increment && (m->rec.flags & FILE_SIZE) && fs->size != m->offset)
		rc = mismatch(m, "%llu bytes, files_metadata.json says %llu",
					  (unsigned long long)m->offset, (unsigned long long)fs->size);
	if (rc != E_OK || m->h == NULL)
		return rc;
	const char *what = m->increment ? "increment" : "content",
			   *key = m->increment ? "IncrementChecksum" : "Checksum";
	char got[HASH_TEXT_LEN + 1], want[HASH_TEXT_LEN + 1];
	hasher_text(m->h, got);
	if (!(m->rec.flags & FILE_SUM))
		return mismatch(m, "%s is %s, files_metadata.json's %s is not an xxh3-128 sum", what, got,
						key);
	hash_text_format(fs->sum, want);
	if (strcmp(got, want) != 0)
		return mismatch(m, "%s is %s, files_metadata.json%s%s says %s", what, got,
						m->increment ? "'s " : "", m->increment ? key : "", want);
	return E_OK;
}

static err_code mr_entry(void *ctx, const tar_entry *e)
{
	member_reader *m = ctx;
	char rel[TAR_NAME_MAX + 1];

	mr_reset(m);
	m->remaining = e->size;
	TRY(extract_safe_path(e->name, rel, sizeof(rel)));
	if (e->type == TAR_SYMLINK || e->type == TAR_HARDLINK)
		return err_set(E_CORRUPT, "refusing link member \"%s\" -> \"%s\"", e->name,
					   e->linkname ? e->linkname : "");
	if (e->type == TAR_OTHER)
		return E_OK; /* devices, fifos: never part of a data directory worth restoring */
	if (rel[0] == '\0')
		return E_OK; /* the data directory itself */
	/* a directory's name may end in "/" (tar writers differ); Files names it without */
	size_t len = strlen(e->name);
	while (len > 1 && e->name[len - 1] == '/')
		len--;
	char *bare = e->name[len] != '\0' ? xasprintf("%.*s", (int)len, e->name) : NULL;
	bool listed = file_table_find(m->files, bare ? bare : e->name, &m->rec);
	free(bare);
	if (listed && m->held != NULL)
		__atomic_store_n(&m->held->files[m->rec.idx], 1, __ATOMIC_RELAXED);
	if (m->held != NULL && e->type == TAR_FILE && strcmp(rel, "backup_label") == 0)
		__atomic_store_n(&m->held->label, true, __ATOMIC_RELAXED);
	m->increment = e->type == TAR_FILE && listed && (m->rec.flags & FILE_INCREMENTED);
	member_kind kind = e->type == TAR_DIR ? MEMBER_DIR
		: m->increment					  ? MEMBER_INCREMENT
										  : MEMBER_FILE;
	bool take = true;
	TRY(m->ops->begin(m->ctx, e, rel, kind, &take));
	if (!take || kind == MEMBER_DIR)
		return E_OK;
	m->take = true;
	m->name = xstrdup(e->name);
	m->sum = listed ? file_table_sum(m->files, &m->rec) : NULL;
	if (m->sum != NULL && (m->rec.flags & (FILE_SUM | FILE_SUM_OTHER)))
		m->h = hasher_new();
	m->offset = 0;
	m->head_len = 0;
	m->page = 0;
	m->page_off = 0;
	m->blocks_got = 0;
	return E_OK;
}

static err_code inc_header(member_reader *m)
{
	if (memcmp(m->head, inc_magic, 4) != 0)
		return err_set(E_CORRUPT, "%s: %s", m->name,
					   m->head[2] != '1' ? "unknown increment header" : "invalid increment magic");
	memcpy(&m->file_size, m->head + 4, 8);
	memcpy(&m->npages, m->head + 12, 4);
	m->file_size = le64toh(m->file_size);
	m->npages = le32toh(m->npages);
	if (m->npages > INC_MAX_PAGES || m->file_size > (uint64_t)INC_MAX_PAGES * PAGE_SIZE)
		return err_set(E_CORRUPT, "%s: increment claims %u pages of a %llu-byte file", m->name,
					   m->npages, (unsigned long long)m->file_size);
	uint64_t want = (uint64_t)m->npages * (4 + PAGE_SIZE);
	if (m->remaining != want)
		return err_set(E_CORRUPT, "%s: increment of %u pages needs %llu more bytes, member has %llu",
					   m->name, m->npages, (unsigned long long)want,
					   (unsigned long long)m->remaining);
	m->blocks = xcalloc(m->npages ? m->npages : 1, sizeof(uint32_t));
	return E_OK;
}

/* The header and block list read: the file size is checked, the consumer told. */
static err_code inc_ready(member_reader *m)
{
	if (m->sum != NULL && (m->rec.flags & FILE_SIZE) && m->sum->size != m->file_size)
		TRY(mismatch(m, "increment is of a %llu-byte file, files_metadata.json says %llu",
					 (unsigned long long)m->file_size, (unsigned long long)m->sum->size));
	return m->ops->increment(m->ctx, m->file_size, m->npages, m->blocks);
}

static err_code inc_data(member_reader *m, const unsigned char *p, size_t len)
{
	while (len > 0) {
		if (m->head_len < INC_HEADER) {
			size_t n = INC_HEADER - m->head_len < len ? INC_HEADER - m->head_len : len;
			memcpy(m->head + m->head_len, p, n);
			m->head_len += n;
			p += n;
			len -= n;
			m->remaining -= n;
			if (m->head_len == INC_HEADER) {
				TRY(inc_header(m));
				if (m->npages == 0)
					TRY(inc_ready(m));
			}
			continue;
		}
		size_t list_bytes = (size_t)m->npages * 4;
		if (m->blocks_got < list_bytes) {
			size_t n = list_bytes - m->blocks_got < len ? list_bytes - m->blocks_got : len;
			memcpy((unsigned char *)m->blocks + m->blocks_got, p, n);
			m->blocks_got += n;
			p += n;
			len -= n;
			m->remaining -= n;
			if (m->blocks_got == list_bytes) {
				for (uint32_t i = 0; i < m->npages; i++) {
					m->blocks[i] = le32toh(m->blocks[i]);
					if ((uint64_t)m->blocks[i] * PAGE_SIZE + PAGE_SIZE > m->file_size)
						return err_set(E_CORRUPT, "%s: increment block %u is past the file size",
									   m->name, m->blocks[i]);
				}
				TRY(inc_ready(m));
			}
			continue;
		}
		size_t n = PAGE_SIZE - m->page_off < len ? PAGE_SIZE - m->page_off : len;
		uint64_t at = (uint64_t)m->blocks[m->page] * PAGE_SIZE + m->page_off;
		TRY(m->ops->data(m->ctx, at, p, n));
		p += n;
		len -= n;
		m->remaining -= n;
		m->page_off += n;
		if (m->page_off == PAGE_SIZE) {
			m->page_off = 0;
			m->page++;
		}
	}
	return E_OK;
}

static err_code mr_data(void *ctx, const void *buf, size_t len)
{
	member_reader *m = ctx;
	if (!m->take)
		return E_OK;
	if (m->h != NULL)
		hasher_update(m->h, buf, len); /* an increment's stored bytes, or a whole file's */
	if (m->increment)
		return inc_data(m, buf, len);
	m->remaining -= len;
	err_code rc = m->ops->data(m->ctx, m->offset, buf, len);
	m->offset += len;
	return rc;
}

static err_code mr_entry_end(void *ctx)
{
	member_reader *m = ctx;
	err_code rc = E_OK;
	if (m->take) {
		if (m->increment && m->head_len < INC_HEADER)
			rc = err_set(E_CORRUPT, "%s: increment shorter than its header", m->name);
		if (rc == E_OK)
			rc = check_recorded(m);
		err_code rc2 = m->ops->end(m->ctx);
		if (rc == E_OK)
			rc = rc2;
	}
	mr_reset(m);
	return rc;
}

static const tar_handler member_handler = { mr_entry, mr_data, mr_entry_end };

static err_code mr_write(sink *s, const void *buf, size_t len)
{
	return sink_write(((member_reader *)s)->tar, buf, len);
}

static err_code mr_finish(sink *s)
{
	return sink_finish(((member_reader *)s)->tar);
}

static void mr_free(sink *s)
{
	member_reader *m = (member_reader *)s;
	mr_reset(m);
	sink_free(m->tar);
	free(m);
}

static const sink_ops member_reader_ops = { mr_write, mr_finish, mr_free };

static sink *member_reader_make(const member_ops *ops, void *ctx, const file_table *files,
								held *h, bool partial)
{
	member_reader *m = xcalloc(1, sizeof(*m));
	m->base.ops = &member_reader_ops;
	m->ops = ops;
	m->ctx = ctx;
	m->files = files;
	m->held = h;
	m->tar = partial ? tar_reader_new_partial(&member_handler, m)
					 : tar_reader_new(&member_handler, m);
	return &m->base;
}

sink *member_reader_new(const member_ops *ops, void *ctx, const file_table *files, held *h)
{
	return member_reader_make(ops, ctx, files, h, false);
}

/* The extractor: the member reader's output written under the destination */

typedef struct extractor {
	sink *reader; /* the member reader calling back here; owns nothing of ours */
	const extract_level *lvl;
	char *path;			/* absolute */
	char *final_path;	/* pg_control: written at path, renamed here once complete */
	/*
	 * pg_control written and synced, waiting for the end of the stream: only a stream that
	 * ended well (a decryptor that checked its MDC, a decompressor its checksum) publishes it.
	 */
	char *pending_tmp, *pending_final;
	size_t *seen; /* needed members met, or NULL */
	int fd;
	bool increment;
	uint32_t mode;
	uint64_t written, flushed; /* a whole file's bytes so far, and how many went to writeback */
} extractor;

static void close_member(extractor *x)
{
	if (x->fd >= 0)
		close(x->fd);
	x->fd = -1;
	free(x->path);
	x->path = NULL;
	free(x->final_path);
	x->final_path = NULL;
}

bool extract_wanted(const extract_level *lvl, const char *member, const uint64_t key[2])
{
	/* --mask, as WAL-G matches it: "/" + mask against the member's name, '*' not across '/'. */
	if (lvl->mask != NULL && fnmatch(lvl->mask, member, FNM_PATHNAME) != 0)
		return false;
	if (lvl->need == NULL)
		return true;
	uint64_t k[2];
	if (key == NULL) {
		pg_name_key(member, k);
		key = k;
	}
	return keytab_find(lvl->need, key, NULL, NULL);
}

static bool needed(const extractor *x, const char *member)
{
	return extract_wanted(x->lvl, member, NULL);
}

/*
 * The modes of a data directory only, whatever a member says: PostgreSQL's own (0700 and
 * 0600), or with group read when the member has it (initdb --allow-group-access: 0750 and
 * 0640). No setuid, setgid, sticky or execute bit, nothing for others.
 */
static uint32_t data_mode(uint32_t mode, bool dir)
{
	bool group = (mode & 0040) != 0;
	return dir ? (group ? 0750 : 0700) : (group ? 0640 : 0600);
}

static err_code ex_begin(void *ctx, const tar_entry *e, const char *rel, member_kind kind,
						 bool *take)
{
	extractor *x = ctx;
	close_member(x);
	*take = false;
	if (x->seen != NULL && needed(x, e->name))
		(*x->seen)++;
	if (x->lvl->skip_tablespace_map && strcmp(rel, "tablespace_map") == 0)
		return E_OK;
	x->path = xasprintf("%s/%s", x->lvl->dest, rel);
	if (kind == MEMBER_DIR && x->lvl->stage) {
		struct stat sb;
		if (stat(x->path, &sb) != 0) /* made here, removed if the first phase fails */
			x->lvl->staged(x->lvl->staged_arg, rel, MEMBER_DIR, data_mode(e->mode, true));
	}
	if (kind == MEMBER_DIR)
		return mkdir_p(x->path, data_mode(e->mode, true));
	if (!needed(x, e->name))
		return E_OK;
	*take = true;
	x->mode = data_mode(e->mode, false);
	TRY(mkdir_parent(x->path, 0700));
	x->increment = kind == MEMBER_INCREMENT;
	x->written = x->flushed = 0;
	if (x->lvl->stage) {
		x->lvl->staged(x->lvl->staged_arg, rel, kind, x->mode);
		char *staged = xasprintf("%s%s", x->path, x->increment ? EXTRACT_STAGED_INC : EXTRACT_STAGED);
		free(x->path);
		x->path = staged;
		x->fd = open(x->path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		return x->fd < 0 ? err_errno(E_IO, errno, "creating %s", x->path) : E_OK;
	}
	if (x->increment) {
		x->fd = open(x->path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (x->fd < 0)
			return err_errno(E_CORRUPT, errno,
							 "increment for %s but no base file %s from the earlier backup",
							 e->name, x->path);
		return E_OK;
	}
	/*
	 * pg_control comes last and its presence says the restore is complete: a process killed
	 * while writing it must not leave a short one behind, so it is written aside and renamed.
	 */
	if (strcmp(rel, "global/pg_control") == 0) {
		x->final_path = x->path;
		x->path = xasprintf("%s.walc-tmp", x->final_path);
	}
	x->fd = open(x->path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (x->fd < 0)
		return err_errno(E_IO, errno, "creating %s", x->path);
	return E_OK;
}

/*
 * Hands what was written since the last call to writeback, without waiting for it: the disk
 * then works while the next bytes are decompressed, and the restore's closing syncfs finds
 * little left to write (PostgreSQL's own writes do the same, *_flush_after). Durability
 * still comes from that syncfs alone, so a failure here is not an error.
 */
static void start_writeback(extractor *x, bool all)
{
	enum { STEP = 4 << 20 };
	uint64_t n = x->written - x->flushed;
	if (!x->lvl->flush || x->increment || n == 0 || (!all && n < STEP))
		return; /* (a length of 0 would mean "to the end of the file") */
	(void)sync_file_range(x->fd, (off_t)x->flushed, (off_t)n, SYNC_FILE_RANGE_WRITE);
	x->flushed = x->written;
}

/*
 * A staged increment for a file the destination lacks becomes that file: only when it holds
 * every page (a file created since the LSN, whose pages are all newer). Pages older than the
 * LSN in a new file (a file copied whole, CREATE DATABASE ... STRATEGY FILE_COPY) are in
 * neither the destination nor the increment.
 */
static err_code stage_increment(extractor *x, uint64_t file_size, uint32_t npages,
								const uint32_t *blocks)
{
	size_t dlen = strlen(x->path) - strlen(EXTRACT_STAGED_INC);
	char *target = xasprintf("%.*s", (int)dlen, x->path);
	struct stat sb;
	bool missing = lstat(target, &sb) != 0 && errno == ENOENT;
	free(target);
	uint64_t pages = file_size / PAGE_SIZE;
	if (missing) {
		unsigned char *seen = xcalloc(pages ? pages : 1, 1);
		uint64_t distinct = 0;
		for (uint32_t i = 0; i < npages; i++)
			if (blocks[i] < pages && !seen[blocks[i]]++)
				distinct++;
		free(seen);
		if (distinct != pages)
			return err_set(E_CORRUPT,
						   "catchup-fetch: %.*s is not in the destination, and the catchup "
						   "backup holds %llu of its %llu pages (the others were last written "
						   "before its --from-lsn, by a copy of the whole file such as CREATE "
						   "DATABASE ... STRATEGY FILE_COPY): take a new base backup",
						   (int)dlen, x->path, (unsigned long long)distinct,
						   (unsigned long long)pages);
	}
	unsigned char head[INC_HEADER];
	uint64_t size_le = htole64(file_size);
	uint32_t n_le = htole32(npages);
	memcpy(head, inc_magic, 4);
	memcpy(head + 4, &size_le, 8);
	memcpy(head + 12, &n_le, 4);
	TRY(fd_write_all(x->fd, head, sizeof(head), x->path));
	for (uint32_t i = 0; i < npages; i++) {
		uint32_t le = htole32(blocks[i]);
		TRY(fd_write_all(x->fd, &le, 4, x->path));
	}
	return E_OK;
}

static err_code ex_increment(void *ctx, uint64_t file_size, uint32_t npages,
							 const uint32_t *blocks)
{
	extractor *x = ctx;
	if (x->lvl->stage)
		return stage_increment(x, file_size, npages, blocks);
	if (ftruncate(x->fd, (off_t)file_size) != 0)
		return err_errno(E_IO, errno, "resizing %s", x->path);
	return E_OK;
}

static err_code ex_data(void *ctx, uint64_t offset, const void *buf, size_t len)
{
	extractor *x = ctx;
	if (!x->increment || x->lvl->stage) { /* a staged increment's pages follow in list order */
		TRY(fd_write_all(x->fd, buf, len, x->path));
		x->written += len;
		start_writeback(x, false);
		return E_OK;
	}
	const unsigned char *p = buf;
	while (len > 0) {
		ssize_t w = pwrite(x->fd, p, len, (off_t)offset);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return err_errno(E_IO, errno, "writing %s", x->path);
		}
		p += w;
		len -= (size_t)w;
		offset += (uint64_t)w;
	}
	return E_OK;
}

static err_code ex_end(void *ctx)
{
	extractor *x = ctx;
	err_code rc = E_OK;
	if (!x->increment && fchmod(x->fd, (mode_t)x->mode) != 0)
		rc = err_errno(E_IO, errno, "chmod of %s", x->path);
	if (rc == E_OK)
		start_writeback(x, true);
	if (rc == E_OK && x->final_path != NULL && fsync(x->fd) != 0)
		rc = err_errno(E_IO, errno, "syncing %s", x->path);
	if (close(x->fd) != 0 && rc == E_OK)
		rc = err_errno(E_IO, errno, "closing %s", x->path);
	x->fd = -1;
	if (rc == E_OK && x->final_path != NULL) {
		free(x->pending_tmp);
		free(x->pending_final);
		x->pending_tmp = x->path;
		x->pending_final = x->final_path;
		x->path = x->final_path = NULL;
	}
	if (rc == E_OK)
		progress_add(x->lvl->prog, 0, 1);
	close_member(x);
	return rc;
}

static const member_ops extract_member_ops = { ex_begin, ex_increment, ex_data, ex_end, NULL };

/* The extractor rides in front of its member reader: one sink owning both. */
typedef struct extract_sink {
	sink base;
	extractor x;
} extract_sink;

static err_code es_write(sink *s, const void *buf, size_t len)
{
	return sink_write(((extract_sink *)s)->x.reader, buf, len);
}

static err_code es_finish(sink *s)
{
	extractor *x = &((extract_sink *)s)->x;
	TRY(sink_finish(x->reader));
	if (x->pending_tmp != NULL) {
		if (rename(x->pending_tmp, x->pending_final) != 0)
			return err_errno(E_IO, errno, "renaming %s", x->pending_tmp);
		free(x->pending_tmp);
		x->pending_tmp = NULL;
	}
	return E_OK;
}

static void es_free(sink *s)
{
	extract_sink *es = (extract_sink *)s;
	if (es->x.pending_tmp != NULL)
		unlink(es->x.pending_tmp);
	free(es->x.pending_tmp);
	free(es->x.pending_final);
	close_member(&es->x);
	sink_free(es->x.reader);
	free(es);
}

static const sink_ops extract_ops = { es_write, es_finish, es_free };

static sink *extract_make(const extract_level *lvl, held *h, bool partial, size_t *seen)
{
	extract_sink *es = xcalloc(1, sizeof(*es));
	es->base.ops = &extract_ops;
	es->x.lvl = lvl;
	es->x.seen = seen;
	es->x.fd = -1;
	es->x.reader = member_reader_make(&extract_member_ops, &es->x, lvl->files, h, partial);
	return &es->base;
}

sink *extract_sink_new(const extract_level *lvl, held *h)
{
	return extract_make(lvl, h, false, NULL);
}

sink *extract_run_sink_new(const extract_level *lvl, held *h, size_t *seen)
{
	return extract_make(lvl, h, true, seen);
}
