/*
 * Tar members to files: directories, whole files, and WAL-G increments applied page by page.
 * Every member name is checked so nothing is written outside the destination, and link
 * members are refused (WAL-G never stores them; tablespace links are made from the spec).
 */
#include "internal/backup/extract.h"

#include <endian.h>
#include <errno.h>
#include <fnmatch.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/tar/tar.h"

#define PAGE_SIZE 8192
#define INC_HEADER 16
#define INC_MAX_PAGES ((1u << 30) / PAGE_SIZE) /* a relation segment is at most 1 GiB */

static const unsigned char inc_magic[4] = { 'w', 'i', '1', 0x55 };

typedef struct extractor {
	sink base;
	sink *reader;
	const extract_level *lvl;
	/* current member */
	char *path;			/* absolute */
	char *final_path;	/* pg_control: written at path, renamed here once complete */
	/*
	 * pg_control written and synced, waiting for the end of the stream: only a stream that
	 * ended well (a decryptor that checked its MDC, a decompressor its checksum) publishes it.
	 */
	char *pending_tmp, *pending_final;
	int fd;
	bool skip;
	bool increment;
	uint32_t mode;
	/* increment parsing */
	unsigned char head[INC_HEADER];
	size_t head_len;
	uint64_t file_size;
	uint32_t npages;
	uint32_t *blocks;
	size_t blocks_got;	/* bytes of the block list received */
	uint32_t page;		/* current page index */
	size_t page_off;	/* bytes of the current page written */
	uint64_t remaining;	/* bytes of member content still expected */
} extractor;

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

static void close_member(extractor *x)
{
	if (x->fd >= 0)
		close(x->fd);
	x->fd = -1;
	free(x->path);
	x->path = NULL;
	free(x->final_path);
	x->final_path = NULL;
	free(x->blocks);
	x->blocks = NULL;
}

static bool needed(const extractor *x, const char *member)
{
	/* --mask, as WAL-G matches it: "/" + mask against the member's name, '*' not across '/'. */
	if (x->lvl->mask != NULL && fnmatch(x->lvl->mask, member, FNM_PATHNAME) != 0)
		return false;
	return x->lvl->need == NULL || json_object_get(x->lvl->need, member) != NULL;
}

static bool is_incremented(const extractor *x, const char *member)
{
	const json_t *f = x->lvl->files ? json_object_get(x->lvl->files, member) : NULL;
	return f != NULL && json_is_true(catalog_json_get(f, "IsIncremented"));
}

static err_code on_entry(void *ctx, const tar_entry *e)
{
	extractor *x = ctx;
	char rel[TAR_NAME_MAX + 1];

	close_member(x);
	x->skip = true;
	x->increment = false;
	x->remaining = e->size;
	TRY(extract_safe_path(e->name, rel, sizeof(rel)));
	if (e->type == TAR_SYMLINK || e->type == TAR_HARDLINK)
		return err_set(E_CORRUPT, "refusing link member \"%s\" -> \"%s\"", e->name,
					   e->linkname ? e->linkname : "");
	if (e->type == TAR_OTHER)
		return E_OK; /* devices, fifos: never part of a data directory worth restoring */
	if (rel[0] == '\0')
		return E_OK; /* the data directory itself */
	if (x->lvl->skip_tablespace_map && strcmp(rel, "tablespace_map") == 0)
		return E_OK;
	x->path = xasprintf("%s/%s", x->lvl->dest, rel);
	if (e->type == TAR_DIR)
		return mkdir_p(x->path, 0700);
	if (!needed(x, e->name))
		return E_OK;
	x->skip = false;
	x->mode = e->mode & 07777 ? e->mode & 07777 : 0600;
	TRY(mkdir_parent(x->path, 0700));
	x->increment = is_incremented(x, e->name);
	if (x->increment) {
		x->head_len = 0;
		x->page = 0;
		x->page_off = 0;
		x->blocks_got = 0;
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

static err_code inc_header(extractor *x)
{
	if (memcmp(x->head, inc_magic, 4) != 0)
		return err_set(E_CORRUPT, "%s: %s", x->path,
					   x->head[2] != '1' ? "unknown increment header" : "invalid increment magic");
	memcpy(&x->file_size, x->head + 4, 8);
	memcpy(&x->npages, x->head + 12, 4);
	x->file_size = le64toh(x->file_size);
	x->npages = le32toh(x->npages);
	if (x->npages > INC_MAX_PAGES || x->file_size > (uint64_t)INC_MAX_PAGES * PAGE_SIZE)
		return err_set(E_CORRUPT, "%s: increment claims %u pages of a %llu-byte file", x->path,
					   x->npages, (unsigned long long)x->file_size);
	uint64_t want = (uint64_t)x->npages * (4 + PAGE_SIZE);
	if (x->remaining != want)
		return err_set(E_CORRUPT, "%s: increment of %u pages needs %llu more bytes, member has %llu",
					   x->path, x->npages, (unsigned long long)want,
					   (unsigned long long)x->remaining);
	if (ftruncate(x->fd, (off_t)x->file_size) != 0)
		return err_errno(E_IO, errno, "resizing %s", x->path);
	x->blocks = xcalloc(x->npages ? x->npages : 1, sizeof(uint32_t));
	return E_OK;
}

static err_code inc_data(extractor *x, const unsigned char *p, size_t len)
{
	while (len > 0) {
		if (x->head_len < INC_HEADER) {
			size_t n = INC_HEADER - x->head_len < len ? INC_HEADER - x->head_len : len;
			memcpy(x->head + x->head_len, p, n);
			x->head_len += n;
			p += n;
			len -= n;
			x->remaining -= n;
			if (x->head_len == INC_HEADER)
				TRY(inc_header(x));
			continue;
		}
		size_t list_bytes = (size_t)x->npages * 4;
		if (x->blocks_got < list_bytes) {
			size_t n = list_bytes - x->blocks_got < len ? list_bytes - x->blocks_got : len;
			memcpy((unsigned char *)x->blocks + x->blocks_got, p, n);
			x->blocks_got += n;
			p += n;
			len -= n;
			x->remaining -= n;
			if (x->blocks_got == list_bytes)
				for (uint32_t i = 0; i < x->npages; i++) {
					x->blocks[i] = le32toh(x->blocks[i]);
					if ((uint64_t)x->blocks[i] * PAGE_SIZE + PAGE_SIZE > x->file_size)
						return err_set(E_CORRUPT, "%s: increment block %u is past the file size",
									   x->path, x->blocks[i]);
				}
			continue;
		}
		size_t n = PAGE_SIZE - x->page_off < len ? PAGE_SIZE - x->page_off : len;
		off_t at = (off_t)x->blocks[x->page] * PAGE_SIZE + (off_t)x->page_off;
		ssize_t w = pwrite(x->fd, p, n, at);
		if (w < 0)
			return err_errno(E_IO, errno, "writing %s", x->path);
		p += w;
		len -= (size_t)w;
		x->remaining -= (size_t)w;
		x->page_off += (size_t)w;
		if (x->page_off == PAGE_SIZE) {
			x->page_off = 0;
			x->page++;
		}
	}
	return E_OK;
}

static err_code on_data(void *ctx, const void *buf, size_t len)
{
	extractor *x = ctx;
	if (x->skip || x->fd < 0)
		return E_OK;
	if (x->increment)
		return inc_data(x, buf, len);
	x->remaining -= len;
	return fd_write_all(x->fd, buf, len, x->path);
}

static err_code on_entry_end(void *ctx)
{
	extractor *x = ctx;
	err_code rc = E_OK;
	if (!x->skip && x->fd >= 0) {
		if (x->increment && x->head_len < INC_HEADER)
			rc = err_set(E_CORRUPT, "%s: increment shorter than its header", x->path);
		else if (!x->increment && fchmod(x->fd, (mode_t)x->mode) != 0)
			rc = err_errno(E_IO, errno, "chmod of %s", x->path);
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
	}
	close_member(x);
	return rc;
}

static const tar_handler extract_handler = { on_entry, on_data, on_entry_end };

static err_code ex_write(sink *s, const void *buf, size_t len)
{
	return sink_write(((extractor *)s)->reader, buf, len);
}

static err_code ex_finish(sink *s)
{
	extractor *x = (extractor *)s;
	TRY(sink_finish(x->reader));
	if (x->pending_tmp != NULL) {
		if (rename(x->pending_tmp, x->pending_final) != 0)
			return err_errno(E_IO, errno, "renaming %s", x->pending_tmp);
		free(x->pending_tmp);
		x->pending_tmp = NULL;
	}
	return E_OK;
}

static void ex_free(sink *s)
{
	extractor *x = (extractor *)s;
	if (x->pending_tmp != NULL)
		unlink(x->pending_tmp);
	free(x->pending_tmp);
	free(x->pending_final);
	close_member(x);
	sink_free(x->reader);
	free(x);
}

static const sink_ops extract_ops = { ex_write, ex_finish, ex_free };

sink *extract_sink_new(const extract_level *lvl)
{
	extractor *x = xcalloc(1, sizeof(*x));
	x->base.ops = &extract_ops;
	x->lvl = lvl;
	x->fd = -1;
	x->reader = tar_reader_new(&extract_handler, x);
	return &x->base;
}
