/*
 * Tar reader: a sink that parses USTAR, PAX and GNU tar streams as Go's archive/tar does and
 * calls back per member. Input is untrusted: every size is capped and memory stays bounded.
 */
#include "internal/tar/tar.h"

#include <stdlib.h>
#include <string.h>

typedef enum rd_state {
	RD_HEADER, /* collecting a 512-byte header block */
	RD_DATA,   /* delivering member content */
	RD_EXT,	   /* collecting a PAX or GNU long-name record */
	RD_SKIP,   /* skipping padding or ignored content */
	RD_END,	   /* after the end-of-archive block: only zeros may follow */
} rd_state;

typedef struct tar_reader {
	sink base;
	const tar_handler *h;
	void *ctx;
	rd_state state;
	err_code failed;		/* sticky */
	bool finished;
	bool partial;			/* a run of whole members: may end between two of them */
	uint64_t off;			/* stream offset of the next input byte */
	uint64_t hdr_off;		/* offset of the block being collected */
	unsigned char blk[TAR_BLOCK];
	size_t blen;
	uint64_t remaining;		/* RD_DATA/RD_EXT/RD_SKIP: bytes left in this state */
	uint64_t pad;			/* padding to skip after RD_DATA/RD_EXT */
	/* the extension record being collected */
	char ext_type;
	unsigned char *ext;
	size_t ext_len;
	/* attributes from extension headers, for the next real header */
	bool pending;			/* any extension header seen since the last member */
	bool have_name, gnu_name, have_link, gnu_link;
	bool have_size, have_mtime, have_uid, have_gid;
	uint64_t size;
	int64_t mtime;
	uint32_t uid, gid;
	char name[TAR_NAME_MAX + 1];
	char link[TAR_NAME_MAX + 1];
} tar_reader;

/* ------------------------------------------------------------------------------------------ */
/* Field parsing                                                                              */
/* ------------------------------------------------------------------------------------------ */

static bool is_sp(unsigned char c)
{
	return c == ' ' || c == '\0';
}

/*
 * A numeric header field: GNU base-256 when the high bit is set, else octal surrounded by
 * optional spaces/NULs (empty means 0), as Go's parseNumeric. False on garbage or overflow.
 */
static bool parse_num(const unsigned char *f, size_t n, int64_t *out)
{
	if (f[0] & 0x80) {
		unsigned char inv = (f[0] & 0x40) ? 0xff : 0;
		uint64_t x = 0;
		for (size_t i = 0; i < n; i++) {
			unsigned char c = (unsigned char)(f[i] ^ inv);
			if (i == 0)
				c &= 0x7f;
			if (x >> 56)
				return false;
			x = x << 8 | c;
		}
		if (x >> 63)
			return false;
		*out = inv ? ~(int64_t)x : (int64_t)x;
		return true;
	}
	size_t i = 0;
	uint64_t x = 0;
	while (i < n && is_sp(f[i]))
		i++;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
		if (x >> 60)
			return false;
		x = x << 3 | (uint64_t)(f[i] - '0');
	}
	for (; i < n; i++)
		if (!is_sp(f[i]))
			return false;
	*out = (int64_t)x;
	return true;
}

/* Copies a NUL-terminated-or-full field, appending at dst[at]; returns the new length. */
static size_t copy_field(char *dst, size_t at, const unsigned char *f, size_t n)
{
	size_t len = strnlen((const char *)f, n);
	memcpy(dst + at, f, len);
	dst[at + len] = '\0';
	return at + len;
}

/* Decimal (PAX values). False on anything else or a value above max. */
static bool parse_dec(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t x = 0;
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (uint64_t)(s[i] - '0');
		if (x > max)
			return false;
	}
	*out = x;
	return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Extension records                                                                          */
/* ------------------------------------------------------------------------------------------ */

static err_code set_string(tar_reader *r, char *dst, const char *v, size_t n, const char *what)
{
	if (n > TAR_NAME_MAX)
		return err_set(E_CORRUPT, "tar: %s of %zu bytes at offset %llu is too long", what, n,
					   (unsigned long long)r->hdr_off);
	if (memchr(v, '\0', n) != NULL)
		return err_set(E_CORRUPT, "tar: %s with a NUL byte at offset %llu", what,
					   (unsigned long long)r->hdr_off);
	memcpy(dst, v, n);
	dst[n] = '\0';
	return E_OK;
}

static err_code pax_value(tar_reader *r, const char *k, size_t klen, const char *v, size_t vlen)
{
	uint64_t u;
#define KEY_IS(lit) (klen == sizeof(lit) - 1 && memcmp(k, lit, klen) == 0)
	/* An empty value removes the attribute (POSIX), leaving the USTAR field in force. */
	if (KEY_IS("path")) {
		if (r->gnu_name)
			return E_OK; /* Go lets a GNU long name win */
		r->have_name = vlen > 0;
		return vlen ? set_string(r, r->name, v, vlen, "PAX path") : E_OK;
	}
	if (KEY_IS("linkpath")) {
		if (r->gnu_link)
			return E_OK;
		r->have_link = vlen > 0;
		return vlen ? set_string(r, r->link, v, vlen, "PAX linkpath") : E_OK;
	}
	if (KEY_IS("size")) {
		if (vlen == 0) {
			r->have_size = false;
			return E_OK;
		}
		if (!parse_dec(v, vlen, TAR_SIZE_MAX, &u))
			return err_set(E_CORRUPT, "tar: bad or too large PAX size at offset %llu",
						   (unsigned long long)r->hdr_off);
		r->size = u;
		r->have_size = true;
		return E_OK;
	}
	if (KEY_IS("uid") || KEY_IS("gid")) {
		if (vlen == 0)
			return E_OK;
		if (!parse_dec(v, vlen, UINT32_MAX, &u))
			return err_set(E_CORRUPT, "tar: bad PAX %.3s at offset %llu", k,
						   (unsigned long long)r->hdr_off);
		if (k[0] == 'u') {
			r->uid = (uint32_t)u;
			r->have_uid = true;
		} else {
			r->gid = (uint32_t)u;
			r->have_gid = true;
		}
		return E_OK;
	}
	if (KEY_IS("mtime")) {
		/* Seconds with an optional sign and fraction, floored to whole seconds as Go does. */
		bool neg = vlen > 0 && v[0] == '-', frac = false;
		size_t i = neg ? 1 : 0, j = i;
		while (j < vlen && v[j] != '.')
			j++;
		if (vlen == 0)
			return E_OK;
		bool ok = parse_dec(v + i, j - i, INT64_MAX - 1, &u);
		for (size_t f = j + 1; ok && f < vlen; f++) {
			ok = v[f] >= '0' && v[f] <= '9';
			frac |= v[f] != '0';
		}
		if (!ok)
			return err_set(E_CORRUPT, "tar: bad PAX mtime at offset %llu",
						   (unsigned long long)r->hdr_off);
		r->mtime = neg ? -(int64_t)u - (frac ? 1 : 0) : (int64_t)u;
		r->have_mtime = true;
		return E_OK;
	}
#undef KEY_IS
	return E_OK; /* atime, uname, GNU.sparse.*, SCHILY.*, ...: not needed */
}

/* Records are "<len> <key>=<value>\n", len counting the whole record. */
static err_code parse_pax(tar_reader *r, const char *p, size_t n)
{
	size_t pos = 0;
	while (pos < n) {
		if (p[pos] == '\0') {
			/* Some writers pad the record block with NULs. */
			while (pos < n && p[pos] == '\0')
				pos++;
			if (pos == n)
				break;
			goto bad;
		}
		size_t i = pos;
		uint64_t len = 0;
		while (i < n && p[i] >= '0' && p[i] <= '9' && len <= n) {
			len = len * 10 + (uint64_t)(p[i] - '0');
			i++;
		}
		if (i == pos || i >= n || p[i] != ' ' || len > n - pos || len < i - pos + 3)
			goto bad;
		size_t end = pos + (size_t)len;
		if (p[end - 1] != '\n')
			goto bad;
		const char *k = p + i + 1;
		const char *eq = memchr(k, '=', (size_t)(p + end - 1 - k));
		if (eq == NULL || eq == k)
			goto bad;
		TRY(pax_value(r, k, (size_t)(eq - k), eq + 1, (size_t)(p + end - 1 - (eq + 1))));
		pos = end;
	}
	return E_OK;
bad:
	return err_set(E_CORRUPT, "tar: malformed PAX record at offset %llu",
				   (unsigned long long)r->hdr_off);
}

static err_code ext_done(tar_reader *r)
{
	err_code rc = E_OK;
	const char *p = (const char *)r->ext;
	if (r->ext_type == 'x') {
		rc = parse_pax(r, p, r->ext_len);
	} else {
		/* GNU 'L'/'K': the name, NUL-terminated within the record. */
		size_t n = strnlen(p, r->ext_len);
		bool is_name = r->ext_type == 'L';
		rc = set_string(r, is_name ? r->name : r->link, p, n,
						is_name ? "GNU long name" : "GNU long link");
		if (rc == E_OK && is_name)
			r->have_name = r->gnu_name = true;
		else if (rc == E_OK)
			r->have_link = r->gnu_link = true;
	}
	free(r->ext);
	r->ext = NULL;
	r->ext_len = 0;
	return rc;
}

static void clear_pending(tar_reader *r)
{
	r->pending = false;
	r->have_name = r->gnu_name = r->have_link = r->gnu_link = false;
	r->have_size = r->have_mtime = r->have_uid = r->have_gid = false;
}

/* ------------------------------------------------------------------------------------------ */
/* Headers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static bool checksum_ok(const unsigned char *b)
{
	int64_t want;
	if (!parse_num(b + 148, 8, &want))
		return false;
	/* Some old writers summed signed chars; accept either. */
	int64_t usum = 0, ssum = 0;
	for (size_t i = 0; i < TAR_BLOCK; i++) {
		unsigned char c = (i >= 148 && i < 156) ? ' ' : b[i];
		usum += c;
		ssum += (signed char)c;
	}
	return want == usum || want == ssum;
}

/* Zero bytes that round content up to whole blocks. */
static uint64_t pad_of(uint64_t size)
{
	return (TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK;
}

static err_code corrupt_field(const tar_reader *r, const char *field)
{
	return err_set(E_CORRUPT, "tar: bad %s field at offset %llu", field,
				   (unsigned long long)r->hdr_off);
}

static err_code member(tar_reader *r, const unsigned char *b, uint64_t size)
{
	/* As Go: the "ustar\0" magic alone means a prefix field, whatever the version says. */
	const bool ustar = memcmp(b + 257, "ustar", 6) == 0;
	int64_t mode, uid, gid, mtime;
	tar_entry e;
	char type = (char)b[156];

	if (!parse_num(b + 100, 8, &mode))
		return corrupt_field(r, "mode");
	if (!parse_num(b + 108, 8, &uid) || uid < 0 || uid > UINT32_MAX)
		return corrupt_field(r, "uid");
	if (!parse_num(b + 116, 8, &gid) || gid < 0 || gid > UINT32_MAX)
		return corrupt_field(r, "gid");
	if (!parse_num(b + 136, 12, &mtime))
		return corrupt_field(r, "mtime");

	if (!r->have_name) {
		size_t at = 0;
		/* POSIX prefix; star keeps atime/ctime after a 131-byte prefix, GNU has none. */
		if (ustar && b[345] != '\0') {
			at = copy_field(r->name, 0, b + 345, memcmp(b + 508, "tar\0", 4) == 0 ? 131 : 155);
			r->name[at++] = '/';
		}
		copy_field(r->name, at, b, 100);
	}
	if (!r->have_link)
		copy_field(r->link, 0, b + 157, 100);

	memset(&e, 0, sizeof(e));
	e.name = r->name;
	e.linkname = r->link;
	e.mode = (uint32_t)mode & 07777;
	e.uid = r->have_uid ? r->uid : (uint32_t)uid;
	e.gid = r->have_gid ? r->gid : (uint32_t)gid;
	e.mtime = r->have_mtime ? r->mtime : mtime;
	e.size = r->have_size ? r->size : size;
	switch (type) {
	case '0':
	case '7':
		e.type = TAR_FILE;
		break;
	case '\0':
		/* Pre-POSIX archives marked directories only by a trailing '/'. */
		e.type = str_has_suffix(r->name, "/") ? TAR_DIR : TAR_FILE;
		break;
	case '1': e.type = TAR_HARDLINK; break;
	case '2': e.type = TAR_SYMLINK; break;
	case '5': e.type = TAR_DIR; break;
	default: e.type = TAR_OTHER; break;
	}
	/* As in Go, these are header-only whatever their size field says. */
	if (e.type == TAR_DIR || e.type == TAR_HARDLINK || e.type == TAR_SYMLINK || type == '3' ||
		type == '4' || type == '6')
		e.size = 0;
	clear_pending(r);

	if (r->h->entry)
		TRY(r->h->entry(r->ctx, &e));
	if (e.size == 0) {
		r->state = RD_HEADER;
		return r->h->entry_end ? r->h->entry_end(r->ctx) : E_OK;
	}
	r->state = RD_DATA;
	r->remaining = e.size;
	r->pad = pad_of(e.size);
	return E_OK;
}

static err_code header(tar_reader *r)
{
	const unsigned char *b = r->blk;
	int64_t size;
	size_t i = 0;

	while (i < TAR_BLOCK && b[i] == 0)
		i++;
	if (i == TAR_BLOCK) {
		if (r->pending)
			return err_set(E_CORRUPT, "tar: extended header without a member at offset %llu",
						   (unsigned long long)r->hdr_off);
		r->state = RD_END;
		return E_OK;
	}
	if (!checksum_ok(b))
		return err_set(E_CORRUPT, "tar: bad header checksum at offset %llu",
					   (unsigned long long)r->hdr_off);
	if (!parse_num(b + 124, 12, &size) || size < 0)
		return corrupt_field(r, "size");
	if ((uint64_t)size > TAR_SIZE_MAX)
		return err_set(E_CORRUPT, "tar: member size %lld too large at offset %llu",
					   (long long)size, (unsigned long long)r->hdr_off);

	char type = (char)b[156];
	if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
		if ((uint64_t)size > TAR_EXT_MAX)
			return err_set(E_CORRUPT, "tar: extended header of %lld bytes at offset %llu",
						   (long long)size, (unsigned long long)r->hdr_off);
		if (type == 'g') {
			/* Global PAX headers: Go ignores them when reading, so do we. */
			r->remaining = (uint64_t)size + pad_of((uint64_t)size);
			r->state = r->remaining ? RD_SKIP : RD_HEADER;
			return E_OK;
		}
		r->pending = true;
		r->ext_type = type;
		r->ext = xmalloc((size_t)size + 1);
		r->ext_len = 0;
		r->remaining = (uint64_t)size;
		r->pad = pad_of((uint64_t)size);
		r->state = RD_EXT;
		if (size == 0) {
			TRY(ext_done(r));
			r->state = RD_HEADER;
		}
		return E_OK;
	}
	return member(r, b, (uint64_t)size);
}

/* ------------------------------------------------------------------------------------------ */
/* The sink                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Consumes a prefix of p[0..len) in the current state; sets *used. */
static err_code step(tar_reader *r, const unsigned char *p, size_t len, size_t *used)
{
	size_t n;
	switch (r->state) {
	case RD_HEADER:
		if (r->blen == 0)
			r->hdr_off = r->off;
		n = take_bytes(r->blk + r->blen, TAR_BLOCK - r->blen, &p, &len);
		r->blen += n;
		*used = n;
		if (r->blen < TAR_BLOCK)
			return E_OK;
		r->blen = 0;
		return header(r);
	case RD_DATA:
		n = r->remaining < len ? (size_t)r->remaining : len;
		*used = n;
		r->remaining -= n;
		if (r->h->data)
			TRY(r->h->data(r->ctx, p, n));
		if (r->remaining > 0)
			return E_OK;
		r->remaining = r->pad;
		r->state = r->pad ? RD_SKIP : RD_HEADER;
		return r->h->entry_end ? r->h->entry_end(r->ctx) : E_OK;
	case RD_EXT:
		n = r->remaining < len ? (size_t)r->remaining : len;
		*used = n;
		memcpy(r->ext + r->ext_len, p, n);
		r->ext_len += n;
		r->remaining -= n;
		if (r->remaining > 0)
			return E_OK;
		r->ext[r->ext_len] = '\0';
		r->remaining = r->pad;
		r->state = r->pad ? RD_SKIP : RD_HEADER;
		return ext_done(r);
	case RD_SKIP:
		n = r->remaining < len ? (size_t)r->remaining : len;
		*used = n;
		r->remaining -= n;
		if (r->remaining == 0)
			r->state = RD_HEADER;
		return E_OK;
	case RD_END:
		for (n = 0; n < len; n++)
			if (p[n] != 0)
				return err_set(E_CORRUPT, "tar: data after end of archive at offset %llu",
							   (unsigned long long)(r->off + n));
		*used = len;
		return E_OK;
	}
	return err_set(E_FAIL, "tar: bad reader state");
}

static err_code reader_write(sink *s, const void *buf, size_t len)
{
	tar_reader *r = (tar_reader *)s;
	const unsigned char *p = buf;
	if (r->failed != E_OK)
		return r->failed; /* the first error's message stays in the record */
	if (r->finished)
		return err_set(E_FAIL, "tar: write after finish");
	while (len > 0) {
		size_t used = 0;
		err_code rc = step(r, p, len, &used);
		r->off += used;
		if (rc != E_OK)
			return r->failed = rc;
		p += used;
		len -= used;
	}
	return E_OK;
}

static err_code reader_finish(sink *s)
{
	tar_reader *r = (tar_reader *)s;
	if (r->failed != E_OK)
		return r->failed;
	if (r->finished)
		return err_set(E_FAIL, "tar: finished twice");
	r->finished = true;
	bool between = r->state == RD_HEADER && r->blen == 0 && !r->pending;
	if (r->state != RD_END && !(r->partial && between))
		return r->failed = err_set(E_CORRUPT, "tar: truncated at offset %llu",
								   (unsigned long long)r->off);
	return E_OK;
}

static void reader_free(sink *s)
{
	tar_reader *r = (tar_reader *)s;
	free(r->ext);
	free(r);
}

static const sink_ops reader_ops = { reader_write, reader_finish, reader_free };

sink *tar_reader_new_partial(const tar_handler *h, void *ctx)
{
	sink *s = tar_reader_new(h, ctx);
	((tar_reader *)s)->partial = true;
	return s;
}

sink *tar_reader_new(const tar_handler *h, void *ctx)
{
	tar_reader *r = xcalloc(1, sizeof(*r));
	r->base.ops = &reader_ops;
	r->h = h;
	r->ctx = ctx;
	r->state = RD_HEADER;
	return &r->base;
}
