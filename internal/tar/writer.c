/*
 * Tar writer: USTAR headers as Go's archive/tar writes them, with a PAX header only for what
 * USTAR cannot hold, so that WAL-G, GNU tar and Go all read the result.
 */
#include "internal/tar/tar.h"

#include <stdlib.h>
#include <string.h>

#define WRITER_BUF (64u * 1024)

struct tar_writer {
	sink *next;
	chunker out;		/* headers and small writes gathered; big content goes straight on */
	uint64_t offset;	/* stream bytes produced, buffered or not */
	uint64_t size;		/* declared size of the open member */
	uint64_t written;	/* content bytes written to it so far */
	bool in_entry;
	bool finished;
	err_code failed;	/* sticky: the stream is no longer well formed */
};

/* A growable PAX record block; names are capped, so it stays a few KiB. */
typedef struct pax_buf {
	char *data;
	size_t len;
} pax_buf;

static const unsigned char zero_blocks[2 * TAR_BLOCK];

static err_code to_next(void *arg, const unsigned char *data, size_t len)
{
	return sink_write(((tar_writer *)arg)->next, data, len);
}

static err_code flush(tar_writer *w)
{
	return chunker_flush(&w->out);
}

static err_code emit(tar_writer *w, const void *buf, size_t len)
{
	w->offset += len;
	return chunker_write(&w->out, buf, len);
}

/* Marks the writer failed so that a half-written stream is never finished as if whole. */
static err_code fail(tar_writer *w, err_code rc)
{
	if (rc != E_OK && w->failed == E_OK)
		w->failed = rc;
	return rc;
}

static err_code pad(tar_writer *w, uint64_t size)
{
	size_t rem = (size_t)(size % TAR_BLOCK);
	return rem ? emit(w, zero_blocks, TAR_BLOCK - rem) : E_OK;
}

static size_t ndigits(size_t n)
{
	size_t d = 1;
	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

/* Appends "<len> key=value\n", where len counts the whole record including its own digits. */
static void pax_add(pax_buf *p, const char *key, const char *val)
{
	size_t n = strlen(key) + strlen(val) + 3;
	size_t total = n + ndigits(n);
	if (ndigits(total) > ndigits(n))
		total++;
	p->data = xrealloc(p->data, p->len + total + 1);
	int k = snprintf(p->data + p->len, total + 1, "%zu %s=%s\n", total, key, val);
	p->len += (size_t)k;
}

/* Octal digits in all but the last byte, which is NUL. False if v does not fit. */
static bool put_octal(unsigned char *f, size_t n, uint64_t v)
{
	if ((n - 1) * 3 < 64 && v >> ((n - 1) * 3) != 0)
		return false;
	f[n - 1] = 0;
	for (size_t i = n - 1; i-- > 0;) {
		f[i] = (unsigned char)('0' + (v & 7));
		v >>= 3;
	}
	return true;
}

/* GNU base-256: high bit set, big-endian two's complement in the rest; Go and GNU read it. */
static void put_base256(unsigned char *f, size_t n, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (size_t i = n; i-- > 1;) {
		f[i] = (unsigned char)(u & 0xff);
		u = v < 0 ? (u >> 8) | ((uint64_t)0xff << 56) : u >> 8;
	}
	f[0] = v < 0 ? 0xff : 0x80;
}

/* A numeric field: octal when it fits, else base-256 plus a PAX record that PAX readers use. */
static void put_num(unsigned char *f, size_t n, int64_t v, const char *key, pax_buf *pax)
{
	if (v >= 0 && put_octal(f, n, (uint64_t)v))
		return;
	put_base256(f, n, v);
	if (pax != NULL) {
		char val[32];
		snprintf(val, sizeof(val), "%lld", (long long)v);
		pax_add(pax, key, val);
	}
}

static void put_checksum(unsigned char *h)
{
	unsigned sum = 0;
	memset(h + 148, ' ', 8);
	for (size_t i = 0; i < TAR_BLOCK; i++)
		sum += h[i];
	put_octal(h + 148, 7, sum); /* "%06o\0 ", the form Go and GNU write */
	h[155] = ' ';
}

/*
 * Splits name into USTAR prefix and name at a '/', as Go's splitUSTARPath does: the prefix
 * must be non-empty (so a leading "/" alone cannot be the split) and both parts must fit.
 */
static bool split_ustar(const char *name, size_t len, size_t *cut)
{
	size_t limit = len;
	if (len <= 100)
		return false;
	if (limit > 156)
		limit = 156;
	else if (name[limit - 1] == '/')
		limit--;
	size_t i = limit;
	while (i > 0 && name[i - 1] != '/')
		i--;
	if (i <= 1)
		return false;
	i--; /* index of the '/' */
	size_t nlen = len - i - 1;
	if (nlen == 0 || nlen > 100 || i > 155)
		return false;
	*cut = i;
	return true;
}

static void header_common(unsigned char *h, uint32_t mode, int64_t mtime, uint32_t uid,
						  uint32_t gid, pax_buf *pax)
{
	put_num(h + 100, 8, mode & 07777, "mode", NULL);
	put_num(h + 108, 8, uid, "uid", pax);
	put_num(h + 116, 8, gid, "gid", pax);
	put_num(h + 136, 12, mtime, "mtime", pax);
	memcpy(h + 257, "ustar\0" "00", 8);
	put_octal(h + 329, 8, 0);
	put_octal(h + 337, 8, 0);
}

static err_code write_pax(tar_writer *w, const char *name, int64_t mtime, const pax_buf *pax)
{
	unsigned char h[TAR_BLOCK];
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	memset(h, 0, sizeof(h));
	/* Go names it "<dir>/PaxHeaders.0/<base>"; readers ignore it, so a short form will do. */
	snprintf((char *)h, 100, "PaxHeaders.0/%.86s", base);
	header_common(h, 0644, mtime >= 0 && mtime < ((int64_t)1 << 33) ? mtime : 0, 0, 0, NULL);
	put_octal(h + 124, 12, pax->len);
	h[156] = 'x';
	put_checksum(h);
	TRY(emit(w, h, sizeof(h)));
	TRY(emit(w, pax->data, pax->len));
	return pad(w, pax->len);
}

static err_code begin(tar_writer *w, const tar_entry *e)
{
	unsigned char h[TAR_BLOCK];
	pax_buf pax = { NULL, 0 };
	const char *link = e->linkname ? e->linkname : "";
	size_t nlen = e->name ? strlen(e->name) : 0;
	size_t llen = strlen(link);
	uint64_t size = e->type == TAR_FILE ? e->size : 0;
	char type;
	size_t cut;
	err_code rc;

	switch (e->type) {
	case TAR_FILE: type = '0'; break;
	case TAR_DIR: type = '5'; break;
	case TAR_SYMLINK: type = '2'; break;
	case TAR_HARDLINK: type = '1'; break;
	default: return err_set(E_FAIL, "tar: cannot write member type %d", (int)e->type);
	}
	if (nlen == 0)
		return err_set(E_FAIL, "tar: empty member name");
	/* Never write what our own reader would refuse. */
	if (nlen > TAR_NAME_MAX || llen > TAR_NAME_MAX)
		return err_set(E_FAIL, "tar: name or link target of %s longer than %d bytes", e->name,
					   TAR_NAME_MAX);
	if (size > TAR_SIZE_MAX)
		return err_set(E_FAIL, "tar: member %s size %llu too large", e->name,
					   (unsigned long long)size);

	memset(h, 0, sizeof(h));
	if (nlen <= 100) {
		memcpy(h, e->name, nlen);
	} else if (split_ustar(e->name, nlen, &cut)) {
		memcpy(h + 345, e->name, cut);
		memcpy(h, e->name + cut + 1, nlen - cut - 1);
	} else {
		memcpy(h, e->name, 100);
		pax_add(&pax, "path", e->name);
	}
	memcpy(h + 157, link, llen <= 100 ? llen : 100);
	if (llen > 100)
		pax_add(&pax, "linkpath", link);
	header_common(h, e->mode, e->mtime, e->uid, e->gid, &pax);
	put_num(h + 124, 12, (int64_t)size, "size", &pax);
	h[156] = (unsigned char)type;
	put_checksum(h);

	rc = pax.len ? write_pax(w, e->name, e->mtime, &pax) : E_OK;
	free(pax.data);
	TRY(rc);
	TRY(emit(w, h, sizeof(h)));
	w->size = size;
	w->written = 0;
	w->in_entry = true;
	return E_OK;
}

tar_writer *tar_writer_new(sink *next)
{
	tar_writer *w = xcalloc(1, sizeof(*w));
	w->next = next;
	w->out = (chunker){ .size = WRITER_BUF, .pass_large = true, .buf = xmalloc(WRITER_BUF),
						.put = to_next, .arg = w };
	return w;
}

static err_code check_usable(const tar_writer *w)
{
	if (w->failed != E_OK)
		return err_set(w->failed, "tar: writer used after an error");
	if (w->finished)
		return err_set(E_FAIL, "tar: writer used after finish");
	return E_OK;
}

err_code tar_writer_begin(tar_writer *w, const tar_entry *e)
{
	TRY(check_usable(w));
	if (w->in_entry)
		return err_set(E_FAIL, "tar: begin of %s inside another member", e->name);
	uint64_t before = w->offset;
	err_code rc = begin(w, e);
	/* Refusals happen before any byte is emitted and leave the stream intact. */
	if (rc != E_OK && w->offset != before)
		fail(w, rc);
	return rc;
}

err_code tar_writer_write(tar_writer *w, const void *buf, size_t len)
{
	TRY(check_usable(w));
	if (!w->in_entry)
		return err_set(E_FAIL, "tar: content written outside a member");
	if (len > w->size - w->written)
		return err_set(E_FAIL, "tar: content exceeds the declared size %llu",
					   (unsigned long long)w->size);
	w->written += len;
	return fail(w, emit(w, buf, len));
}

err_code tar_writer_end(tar_writer *w)
{
	TRY(check_usable(w));
	if (!w->in_entry)
		return err_set(E_FAIL, "tar: end outside a member");
	w->in_entry = false;
	if (w->written != w->size)
		return fail(w, err_set(E_FAIL, "tar: member got %llu of its %llu declared bytes",
							   (unsigned long long)w->written, (unsigned long long)w->size));
	return fail(w, pad(w, w->size));
}

err_code tar_writer_flush(tar_writer *w)
{
	TRY(check_usable(w));
	if (w->in_entry)
		return fail(w, err_set(E_FAIL, "tar: flush inside a member"));
	return fail(w, flush(w));
}

err_code tar_writer_finish(tar_writer *w)
{
	TRY(check_usable(w));
	if (w->in_entry)
		return fail(w, err_set(E_FAIL, "tar: finish inside a member"));
	w->finished = true;
	TRY(fail(w, emit(w, zero_blocks, sizeof(zero_blocks))));
	TRY(fail(w, flush(w)));
	return fail(w, sink_finish(w->next));
}

uint64_t tar_writer_offset(const tar_writer *w)
{
	return w->offset;
}

void tar_writer_free(tar_writer *w)
{
	if (w == NULL)
		return;
	sink_free(w->next);
	free(w->out.buf);
	free(w);
}
