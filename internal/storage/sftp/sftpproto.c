/*
 * SFTP version 3, client side: packets built and sent over an sftp_io, replies framed,
 * parsed with caps (every length checked against the packet, packets at most
 * SFTP_PACKET_MAX) and matched to requests. Everything a server sends is untrusted here
 * (test/fuzz/fuzz_sftp.c feeds it arbitrary bytes).
 */
#include "internal/storage/sftp/sftp.h"

#include <stdlib.h>
#include <string.h>

struct sftp_session {
	sftp_io io;
	char *what;
	uint32_t next_id;
	unsigned ext;
	bool broken;
	uint32_t status;
	/* received bytes: [in_at, in_len) not yet consumed; the current reply ends at in_at */
	unsigned char *in;
	size_t in_at, in_len, in_cap;
	/* the packet being built */
	unsigned char *out;
	size_t out_len, out_cap;
};

/* ------------------------------------------------------------------------------------------ */
/* Parsing                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct cursor {
	const unsigned char *p;
	size_t left;
	bool bad;
} cursor;

static uint32_t get_u32(cursor *c)
{
	if (c->bad || c->left < 4) {
		c->bad = true;
		return 0;
	}
	uint32_t v = (uint32_t)c->p[0] << 24 | (uint32_t)c->p[1] << 16 | (uint32_t)c->p[2] << 8 |
				 c->p[3];
	c->p += 4;
	c->left -= 4;
	return v;
}

static uint64_t get_u64(cursor *c)
{
	uint64_t hi = get_u32(c);
	return hi << 32 | get_u32(c);
}

static const unsigned char *get_str(cursor *c, size_t *len)
{
	size_t n = get_u32(c);
	if (c->bad || n > c->left) {
		c->bad = true;
		*len = 0;
		return NULL;
	}
	const unsigned char *s = c->p;
	c->p += n;
	c->left -= n;
	*len = n;
	return s;
}

static void get_attrs(cursor *c, sftp_attrs *a)
{
	memset(a, 0, sizeof(*a));
	a->flags = get_u32(c);
	if (a->flags & SSH_FILEXFER_ATTR_SIZE)
		a->size = get_u64(c);
	if (a->flags & SSH_FILEXFER_ATTR_UIDGID) {
		a->uid = get_u32(c);
		a->gid = get_u32(c);
	}
	if (a->flags & SSH_FILEXFER_ATTR_PERMISSIONS)
		a->perm = get_u32(c);
	if (a->flags & SSH_FILEXFER_ATTR_ACMODTIME) {
		a->atime = get_u32(c);
		a->mtime = get_u32(c);
	}
	if (a->flags & SSH_FILEXFER_ATTR_EXTENDED) {
		/* each pair takes 8 bytes at least: the count cannot make this loop long */
		uint32_t n = get_u32(c);
		for (uint32_t i = 0; i < n && !c->bad; i++) {
			size_t len;
			get_str(c, &len);
			get_str(c, &len);
		}
	}
}

err_code sftp_parse_reply(const unsigned char *p, size_t len, sftp_reply *r)
{
	memset(r, 0, sizeof(*r));
	cursor c = { p, len, false };
	if (len < 5)
		return err_set(E_CORRUPT, "SFTP reply of %zu bytes", len);
	r->type = *c.p++;
	c.left--;
	r->id = get_u32(&c);
	switch (r->type) {
	case SSH_FXP_STATUS:
		r->code = get_u32(&c);
		/* the message and its language tag; servers before draft 3 send neither */
		if (!c.bad && c.left > 0) {
			r->msg = (const char *)get_str(&c, &r->msg_len);
			size_t lang;
			if (!c.bad && c.left > 0)
				get_str(&c, &lang);
		}
		break;
	case SSH_FXP_HANDLE:
		r->data = get_str(&c, &r->len);
		if (!c.bad && (r->len == 0 || r->len > SFTP_HANDLE_MAX))
			return err_set(E_CORRUPT, "SFTP handle of %zu bytes", r->len);
		break;
	case SSH_FXP_DATA:
		r->data = get_str(&c, &r->len);
		break;
	case SSH_FXP_NAME:
		r->count = get_u32(&c);
		r->data = c.p;
		r->len = c.left;
		for (uint32_t i = 0; i < r->count && !c.bad; i++) {
			size_t n;
			sftp_attrs a;
			get_str(&c, &n);
			get_str(&c, &n);
			get_attrs(&c, &a);
		}
		break;
	case SSH_FXP_ATTRS:
		get_attrs(&c, &r->attrs);
		break;
	case SSH_FXP_EXTENDED_REPLY:
		r->data = c.p;
		r->len = c.left;
		c.left = 0;
		break;
	default:
		return err_set(E_CORRUPT, "SFTP reply of unknown type %u", r->type);
	}
	if (c.bad)
		return err_set(E_CORRUPT, "SFTP reply of type %u cut short", r->type);
	if (c.left != 0)
		return err_set(E_CORRUPT, "SFTP reply of type %u with %zu bytes too many", r->type,
					   c.left);
	return E_OK;
}

static bool str_is(const unsigned char *s, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(s, want, len) == 0;
}

err_code sftp_parse_version(const unsigned char *p, size_t len, uint32_t *version, unsigned *ext)
{
	cursor c = { p, len, false };
	*ext = 0;
	*version = 0;
	if (len < 5 || p[0] != SSH_FXP_VERSION)
		return err_set(E_CORRUPT, "the server's first SFTP packet is not VERSION");
	c.p++;
	c.left--;
	*version = get_u32(&c);
	while (!c.bad && c.left > 0) {
		size_t nlen, dlen;
		const unsigned char *name = get_str(&c, &nlen);
		const unsigned char *data = get_str(&c, &dlen);
		if (c.bad)
			break;
		/* OpenSSH's PROTOCOL: each of these is offered with version "1" */
		if (!str_is(data, dlen, "1"))
			continue;
		if (str_is(name, nlen, "posix-rename@openssh.com"))
			*ext |= SFTP_EXT_POSIX_RENAME;
		else if (str_is(name, nlen, "fsync@openssh.com"))
			*ext |= SFTP_EXT_FSYNC;
		else if (str_is(name, nlen, "hardlink@openssh.com"))
			*ext |= SFTP_EXT_HARDLINK;
	}
	if (c.bad)
		return err_set(E_CORRUPT, "the server's SFTP VERSION packet is cut short");
	return E_OK;
}

void sftp_names_begin(sftp_names *it, const sftp_reply *r)
{
	it->p = r->data;
	it->left = r->len;
	it->count = r->count;
}

bool sftp_names_next(sftp_names *it, const char **name, size_t *name_len, sftp_attrs *a)
{
	if (it->count == 0)
		return false;
	cursor c = { it->p, it->left, false };
	size_t lon;
	*name = (const char *)get_str(&c, name_len);
	get_str(&c, &lon);
	get_attrs(&c, a);
	if (c.bad) /* sftp_parse_reply checked every entry: only a misuse gets here */
		return false;
	it->p = c.p;
	it->left = c.left;
	it->count--;
	return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Packets out                                                                                */
/* ------------------------------------------------------------------------------------------ */

static void out_room(sftp_session *s, size_t n)
{
	if (s->out_len + n <= s->out_cap)
		return;
	while (s->out_len + n > s->out_cap)
		s->out_cap = s->out_cap ? s->out_cap * 2 : 4096;
	s->out = xrealloc(s->out, s->out_cap);
}

static void put_u32(sftp_session *s, uint32_t v)
{
	out_room(s, 4);
	unsigned char *o = s->out + s->out_len;
	o[0] = (unsigned char)(v >> 24);
	o[1] = (unsigned char)(v >> 16);
	o[2] = (unsigned char)(v >> 8);
	o[3] = (unsigned char)v;
	s->out_len += 4;
}

static void put_u64(sftp_session *s, uint64_t v)
{
	put_u32(s, (uint32_t)(v >> 32));
	put_u32(s, (uint32_t)v);
}

static void put_bytes(sftp_session *s, const void *p, size_t n)
{
	put_u32(s, (uint32_t)n);
	out_room(s, n);
	if (n > 0)
		memcpy(s->out + s->out_len, p, n);
	s->out_len += n;
}

static void put_cstr(sftp_session *s, const char *str)
{
	put_bytes(s, str, strlen(str));
}

/* Starts a request of type; *id gets its id (none for INIT). */
static void begin(sftp_session *s, uint8_t type, uint32_t *id)
{
	s->out_len = 0;
	put_u32(s, 0); /* the length, set by send_packet */
	out_room(s, 1);
	s->out[s->out_len++] = type;
	if (id != NULL) {
		*id = s->next_id++;
		put_u32(s, *id);
	}
}

static err_code send_packet(sftp_session *s)
{
	if (s->broken)
		return err_set(E_IO, "%s: the SFTP session is broken", s->what);
	uint32_t n = (uint32_t)(s->out_len - 4);
	s->out[0] = (unsigned char)(n >> 24);
	s->out[1] = (unsigned char)(n >> 16);
	s->out[2] = (unsigned char)(n >> 8);
	s->out[3] = (unsigned char)n;
	err_code rc = s->io.send(s->io.arg, s->out, s->out_len);
	if (rc != E_OK)
		s->broken = true;
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Packets in                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* Until [in_at, in_len) holds n bytes. */
static err_code fill(sftp_session *s, size_t n)
{
	if (s->in_at == s->in_len)
		s->in_at = s->in_len = 0;
	if (s->in_at + n > s->in_cap) {
		if (s->in_len > s->in_at)
			memmove(s->in, s->in + s->in_at, s->in_len - s->in_at);
		s->in_len -= s->in_at;
		s->in_at = 0;
		if (n + (64u << 10) > s->in_cap) {
			s->in_cap = n + (64u << 10);
			s->in = xrealloc(s->in, s->in_cap);
		}
	}
	/* in_len < in_at + n <= in_cap: there is room for what recv brings */
	while (s->in_len - s->in_at < n) {
		size_t got = 0;
		err_code rc = s->io.recv(s->io.arg, s->in + s->in_len, s->in_cap - s->in_len, &got);
		if (rc != E_OK) {
			s->broken = true;
			return rc;
		}
		s->in_len += got;
	}
	return E_OK;
}

/* The next packet's payload: *p valid until the next call. */
static err_code recv_packet(sftp_session *s, const unsigned char **p, size_t *len)
{
	if (s->broken)
		return err_set(E_IO, "%s: the SFTP session is broken", s->what);
	TRY(fill(s, 4));
	const unsigned char *h = s->in + s->in_at;
	uint32_t n = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
	if (n == 0 || n > SFTP_PACKET_MAX) {
		s->broken = true;
		return err_set(E_CORRUPT, "%s: SFTP packet of %u bytes (at most %u)", s->what, n,
					   SFTP_PACKET_MAX);
	}
	TRY(fill(s, 4 + (size_t)n));
	*p = s->in + s->in_at + 4;
	*len = n;
	s->in_at += 4 + (size_t)n;
	return E_OK;
}

err_code sftp_recv(sftp_session *s, sftp_reply *r)
{
	const unsigned char *p;
	size_t len;
	TRY(recv_packet(s, &p, &len));
	err_code rc = sftp_parse_reply(p, len, r);
	if (rc != E_OK) {
		s->broken = true;
		return err_wrap(rc, "%s", s->what);
	}
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Sessions                                                                                   */
/* ------------------------------------------------------------------------------------------ */

err_code sftp_session_start(const sftp_io *io, const char *what, sftp_session **out)
{
	sftp_session *s = xcalloc(1, sizeof(*s));
	s->io = *io;
	s->what = xstrdup(what);
	s->next_id = 1;
	*out = NULL;
	begin(s, SSH_FXP_INIT, NULL);
	put_u32(s, 3);
	const unsigned char *p;
	size_t len;
	uint32_t version = 0;
	err_code rc = send_packet(s);
	if (rc == E_OK)
		rc = recv_packet(s, &p, &len);
	if (rc == E_OK) {
		rc = sftp_parse_version(p, len, &version, &s->ext);
		if (rc != E_OK)
			rc = err_wrap(rc, "%s", what);
		else if (version < 3)
			rc = err_set(E_IO, "%s speaks SFTP version %u; walc needs 3", what, version);
	}
	if (rc != E_OK) {
		sftp_session_free(s);
		return rc;
	}
	*out = s;
	return E_OK;
}

void sftp_session_free(sftp_session *s)
{
	if (s == NULL)
		return;
	s->io.close(s->io.arg);
	free(s->what);
	free(s->in);
	free(s->out);
	free(s);
}

bool sftp_session_broken(const sftp_session *s)
{
	return s->broken;
}

void sftp_session_break(sftp_session *s)
{
	s->broken = true;
}

unsigned sftp_session_ext(const sftp_session *s)
{
	return s->ext;
}

uint32_t sftp_session_status(const sftp_session *s)
{
	return s->status;
}

static const char *status_name(uint32_t code)
{
	static const char *const names[] = { "OK", "EOF", "no such file", "permission denied",
										 "failure", "bad message", "no connection",
										 "connection lost", "operation unsupported" };
	return code < sizeof(names) / sizeof(names[0]) ? names[code] : "unknown status";
}

err_code sftp_reply_check(sftp_session *s, const sftp_reply *r, const char *what)
{
	if (r->type != SSH_FXP_STATUS) {
		s->broken = true;
		return err_set(E_CORRUPT, "%s: %s: SFTP reply of type %u where a status belongs", s->what,
					   what, r->type);
	}
	s->status = r->code;
	if (r->code == SSH_FX_OK)
		return E_OK;
	/* the server's words, at most a line of them, printable */
	char msg[160];
	size_t n = 0;
	for (size_t i = 0; i < r->msg_len && n < sizeof(msg) - 1; i++)
		msg[n++] = (r->msg[i] >= 0x20 && r->msg[i] < 0x7f) ? r->msg[i] : '?';
	msg[n] = '\0';
	return err_set(r->code == SSH_FX_NO_SUCH_FILE ? E_NOTFOUND : E_IO, "%s: %s (SFTP %s)", what,
				   n > 0 ? msg : status_name(r->code), status_name(r->code));
}

/* Sends the request built and takes its reply, which must answer it. */
static err_code call(sftp_session *s, uint32_t id, sftp_reply *r)
{
	TRY(send_packet(s));
	TRY(sftp_recv(s, r));
	if (r->id != id) {
		s->broken = true;
		return err_set(E_CORRUPT, "%s: SFTP reply to request %u where %u was asked", s->what,
					   r->id, id);
	}
	return E_OK;
}

/* A request answered by a status; what names the object in a refusal. */
static err_code call_status(sftp_session *s, uint32_t id, const char *what)
{
	sftp_reply r;
	TRY(call(s, id, &r));
	return sftp_reply_check(s, &r, what);
}

static err_code call_path(sftp_session *s, uint8_t type, const char *path)
{
	uint32_t id;
	begin(s, type, &id);
	put_cstr(s, path);
	return call_status(s, id, path);
}

/* A reply that is not the one expected: a refusal, or nonsense that ends the session. */
static err_code wrong_reply(sftp_session *s, const sftp_reply *r, const char *what,
							const char *expected)
{
	err_code rc = sftp_reply_check(s, r, what);
	if (rc != E_OK)
		return rc;
	s->broken = true;
	return err_set(E_CORRUPT, "%s: %s: status OK where %s belong", s->what, what, expected);
}

/* A request answered by a handle (or a refusal). */
static err_code call_handle(sftp_session *s, uint32_t id, const char *what, sftp_handle *h)
{
	sftp_reply r;
	TRY(call(s, id, &r));
	if (r.type != SSH_FXP_HANDLE)
		return wrong_reply(s, &r, what, "a handle");
	memcpy(h->b, r.data, r.len);
	h->len = r.len;
	return E_OK;
}

/* A request answered by attributes (or a refusal). */
static err_code call_attrs(sftp_session *s, uint32_t id, const char *what, sftp_attrs *a)
{
	sftp_reply r;
	TRY(call(s, id, &r));
	if (r.type != SSH_FXP_ATTRS)
		return wrong_reply(s, &r, what, "attributes");
	*a = r.attrs;
	return E_OK;
}

err_code sftp_open(sftp_session *s, const char *path, uint32_t pflags, uint32_t mode,
				   sftp_handle *h)
{
	uint32_t id;
	begin(s, SSH_FXP_OPEN, &id);
	put_cstr(s, path);
	put_u32(s, pflags);
	if (pflags & SSH_FXF_CREAT) {
		put_u32(s, SSH_FILEXFER_ATTR_PERMISSIONS);
		put_u32(s, mode);
	} else {
		put_u32(s, 0);
	}
	return call_handle(s, id, path, h);
}

err_code sftp_opendir(sftp_session *s, const char *path, sftp_handle *h)
{
	uint32_t id;
	begin(s, SSH_FXP_OPENDIR, &id);
	put_cstr(s, path);
	return call_handle(s, id, path, h);
}

err_code sftp_close(sftp_session *s, const sftp_handle *h)
{
	uint32_t id;
	begin(s, SSH_FXP_CLOSE, &id);
	put_bytes(s, h->b, h->len);
	return call_status(s, id, "closing a handle");
}

static err_code stat_path(sftp_session *s, uint8_t type, const char *path, sftp_attrs *a)
{
	uint32_t id;
	begin(s, type, &id);
	put_cstr(s, path);
	return call_attrs(s, id, path, a);
}

err_code sftp_lstat(sftp_session *s, const char *path, sftp_attrs *a)
{
	return stat_path(s, SSH_FXP_LSTAT, path, a);
}

err_code sftp_stat(sftp_session *s, const char *path, sftp_attrs *a)
{
	return stat_path(s, SSH_FXP_STAT, path, a);
}

err_code sftp_fstat(sftp_session *s, const sftp_handle *h, sftp_attrs *a)
{
	uint32_t id;
	begin(s, SSH_FXP_FSTAT, &id);
	put_bytes(s, h->b, h->len);
	return call_attrs(s, id, "an open file", a);
}

err_code sftp_mkdir(sftp_session *s, const char *path, uint32_t mode)
{
	uint32_t id;
	begin(s, SSH_FXP_MKDIR, &id);
	put_cstr(s, path);
	put_u32(s, SSH_FILEXFER_ATTR_PERMISSIONS);
	put_u32(s, mode);
	return call_status(s, id, path);
}

err_code sftp_rmdir(sftp_session *s, const char *path)
{
	return call_path(s, SSH_FXP_RMDIR, path);
}

err_code sftp_remove(sftp_session *s, const char *path)
{
	return call_path(s, SSH_FXP_REMOVE, path);
}

err_code sftp_rename(sftp_session *s, const char *from, const char *to, bool posix)
{
	uint32_t id;
	if (posix) {
		begin(s, SSH_FXP_EXTENDED, &id);
		put_cstr(s, "posix-rename@openssh.com");
	} else {
		begin(s, SSH_FXP_RENAME, &id);
	}
	put_cstr(s, from);
	put_cstr(s, to);
	return call_status(s, id, to);
}

err_code sftp_fsync(sftp_session *s, const sftp_handle *h)
{
	uint32_t id;
	begin(s, SSH_FXP_EXTENDED, &id);
	put_cstr(s, "fsync@openssh.com");
	put_bytes(s, h->b, h->len);
	return call_status(s, id, "fsync");
}

err_code sftp_readdir(sftp_session *s, const sftp_handle *h, sftp_reply *r, bool *eof)
{
	uint32_t id;
	*eof = false;
	begin(s, SSH_FXP_READDIR, &id);
	put_bytes(s, h->b, h->len);
	TRY(call(s, id, r));
	if (r->type == SSH_FXP_NAME)
		return E_OK;
	if (r->type == SSH_FXP_STATUS && r->code == SSH_FX_EOF) {
		*eof = true;
		return E_OK;
	}
	return wrong_reply(s, r, "reading a folder", "folder entries");
}

err_code sftp_send_write(sftp_session *s, const sftp_handle *h, uint64_t off, const void *data,
						 size_t len, uint32_t *id)
{
	begin(s, SSH_FXP_WRITE, id);
	put_bytes(s, h->b, h->len);
	put_u64(s, off);
	put_bytes(s, data, len);
	return send_packet(s);
}

err_code sftp_send_read(sftp_session *s, const sftp_handle *h, uint64_t off, uint32_t len,
						uint32_t *id)
{
	begin(s, SSH_FXP_READ, id);
	put_bytes(s, h->b, h->len);
	put_u64(s, off);
	put_u32(s, len);
	return send_packet(s);
}

err_code sftp_send_remove(sftp_session *s, const char *path, uint32_t *id)
{
	begin(s, SSH_FXP_REMOVE, id);
	put_cstr(s, path);
	return send_packet(s);
}
