/*
 * Unit tests for SFTP storage: the packet parser on crafted replies, and the store through its
 * test seam against a small SFTP server of the test's own on a temporary folder, which can
 * break its connection after a number of bytes, answer reads short or out of order, and leave
 * out OpenSSH's extensions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "internal/storage/sftp/sftp.h"

/* ------------------------------------------------------------------------------------------ */
/* The test's server                                                                          */
/* ------------------------------------------------------------------------------------------ */

typedef struct fake_opts {
	unsigned ext;			/* extensions offered */
	long break_after;		/* bytes from the client after which a connection dies (0: never) */
	int breaks;				/* how many connections die so */
	uint32_t short_reads;	/* READ answers at most this many bytes (0: all asked) */
	bool reorder;			/* answers to pipelined READs two at a time, swapped */
	int connects;			/* connections made */
	long write_ops;			/* WRITE requests served */
} fake_opts;

static fake_opts fake;

typedef struct fake_conn {
	membuf in, out; /* the client's bytes not yet served; the answers not yet read */
	long received;
	bool dead;
	int fds[16];
	DIR *dirs[16];
	unsigned char held[SFTP_PACKET_MAX + 8]; /* a READ answer held back (reorder) */
	size_t held_len;
} fake_conn;

static void out_u32(membuf *m, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16),
						   (unsigned char)(v >> 8), (unsigned char)v };
	assert_int_equal(membuf_add(m, b, 4), E_OK);
}

static void out_str(membuf *m, const void *p, size_t n)
{
	out_u32(m, (uint32_t)n);
	if (n > 0)
		assert_int_equal(membuf_add(m, p, n), E_OK);
}

static uint32_t rd_u32(const unsigned char **p)
{
	uint32_t v = (uint32_t)(*p)[0] << 24 | (uint32_t)(*p)[1] << 16 | (uint32_t)(*p)[2] << 8 | (*p)[3];
	*p += 4;
	return v;
}

static char *rd_str(const unsigned char **p, size_t *n)
{
	size_t len = rd_u32(p);
	char *s = xmalloc(len + 1);
	memcpy(s, *p, len);
	s[len] = '\0';
	*p += len;
	if (n != NULL)
		*n = len;
	return s;
}

/* One reply packet: type, id, then the body already in b. */
static void reply(fake_conn *c, uint8_t type, uint32_t id, const membuf *b, bool hold)
{
	membuf pk = { 0 };
	pk.max = SFTP_PACKET_MAX + 16;
	out_u32(&pk, (uint32_t)(5 + (b ? b->len : 0)));
	assert_int_equal(membuf_add(&pk, &type, 1), E_OK);
	out_u32(&pk, id);
	if (b != NULL && b->len > 0)
		assert_int_equal(membuf_add(&pk, b->data, b->len), E_OK);
	if (hold && c->held_len == 0) {
		memcpy(c->held, pk.data, pk.len);
		c->held_len = pk.len;
	} else {
		assert_int_equal(membuf_add(&c->out, pk.data, pk.len), E_OK);
		if (c->held_len > 0) {
			assert_int_equal(membuf_add(&c->out, c->held, c->held_len), E_OK);
			c->held_len = 0;
		}
	}
	free(pk.data);
}

static void status(fake_conn *c, uint32_t id, int err)
{
	membuf b = { 0 };
	b.max = 1024;
	uint32_t code = err == 0 ? SSH_FX_OK
		: err == ENOENT	 ? SSH_FX_NO_SUCH_FILE
		: err == EACCES	 ? SSH_FX_PERMISSION_DENIED
		: err == -1		 ? SSH_FX_EOF
						 : SSH_FX_FAILURE;
	out_u32(&b, code);
	const char *msg = err > 0 ? strerror(err) : err == -1 ? "End of file" : "Success";
	out_str(&b, msg, strlen(msg));
	out_str(&b, "", 0);
	reply(c, SSH_FXP_STATUS, id, &b, false);
	free(b.data);
}

static void attrs_of(membuf *b, const struct stat *sb)
{
	out_u32(b, SSH_FILEXFER_ATTR_SIZE | SSH_FILEXFER_ATTR_UIDGID | SSH_FILEXFER_ATTR_PERMISSIONS |
				   SSH_FILEXFER_ATTR_ACMODTIME);
	out_u32(b, 0);
	out_u32(b, (uint32_t)sb->st_size);
	out_u32(b, sb->st_uid);
	out_u32(b, sb->st_gid);
	out_u32(b, sb->st_mode);
	out_u32(b, (uint32_t)sb->st_atime);
	out_u32(b, (uint32_t)sb->st_mtime);
}

static void handle_reply(fake_conn *c, uint32_t id, int h)
{
	membuf b = { 0 };
	b.max = 64;
	char hs[8];
	snprintf(hs, sizeof(hs), "h%d", h);
	out_str(&b, hs, strlen(hs));
	reply(c, SSH_FXP_HANDLE, id, &b, false);
	free(b.data);
}

static int rd_handle(const unsigned char **p)
{
	char *h = rd_str(p, NULL);
	int n = atoi(h + 1);
	free(h);
	return n;
}

static void attrs_reply(fake_conn *c, uint32_t id, int rc, const struct stat *sb)
{
	if (rc != 0) {
		status(c, id, errno);
		return;
	}
	membuf b = { 0 };
	b.max = 1024;
	attrs_of(&b, sb);
	reply(c, SSH_FXP_ATTRS, id, &b, false);
	free(b.data);
}

/* Serves one request packet (p: its payload). */
static void serve(fake_conn *c, const unsigned char *p, size_t len)
{
	uint8_t type = *p++;
	(void)len;
	if (type == SSH_FXP_INIT) {
		membuf b = { 0 };
		b.max = 4096;
		unsigned char t = SSH_FXP_VERSION;
		assert_int_equal(membuf_add(&b, &t, 1), E_OK);
		out_u32(&b, 3);
		static const struct {
			unsigned ext;
			const char *name;
		} exts[] = { { SFTP_EXT_POSIX_RENAME, "posix-rename@openssh.com" },
					 { SFTP_EXT_FSYNC, "fsync@openssh.com" },
					 { SFTP_EXT_HARDLINK, "hardlink@openssh.com" } };
		for (size_t i = 0; i < 3; i++)
			if (fake.ext & exts[i].ext) {
				out_str(&b, exts[i].name, strlen(exts[i].name));
				out_str(&b, "1", 1);
			}
		out_str(&b, "statvfs@openssh.com", 19);
		out_str(&b, "2", 1);
		out_u32(&c->out, (uint32_t)b.len);
		assert_int_equal(membuf_add(&c->out, b.data, b.len), E_OK);
		free(b.data);
		return;
	}
	uint32_t id = rd_u32(&p);
	struct stat sb;
	switch (type) {
	case SSH_FXP_OPEN: {
		char *path = rd_str(&p, NULL);
		uint32_t pf = rd_u32(&p);
		int fl = (pf & SSH_FXF_WRITE) ? ((pf & SSH_FXF_READ) ? O_RDWR : O_WRONLY) : O_RDONLY;
		fl |= (pf & SSH_FXF_CREAT ? O_CREAT : 0) | (pf & SSH_FXF_TRUNC ? O_TRUNC : 0) |
			  (pf & SSH_FXF_EXCL ? O_EXCL : 0);
		int fd = open(path, fl, 0640);
		free(path);
		if (fd < 0) {
			status(c, id, errno);
			break;
		}
		int h = 0;
		while (c->fds[h] > 0)
			h++;
		c->fds[h] = fd;
		handle_reply(c, id, h);
		break;
	}
	case SSH_FXP_OPENDIR: {
		char *path = rd_str(&p, NULL);
		DIR *d = opendir(path);
		free(path);
		if (d == NULL) {
			status(c, id, errno);
			break;
		}
		int h = 0;
		while (c->dirs[h] != NULL)
			h++;
		c->dirs[h] = d;
		handle_reply(c, id, 8 + h);
		break;
	}
	case SSH_FXP_CLOSE: {
		int h = rd_handle(&p);
		if (h >= 8) {
			closedir(c->dirs[h - 8]);
			c->dirs[h - 8] = NULL;
		} else {
			close(c->fds[h]);
			c->fds[h] = 0;
		}
		status(c, id, 0);
		break;
	}
	case SSH_FXP_READ: {
		int h = rd_handle(&p);
		uint32_t hi = rd_u32(&p), lo = rd_u32(&p), n = rd_u32(&p);
		if (fake.short_reads && n > fake.short_reads)
			n = fake.short_reads;
		unsigned char *buf = xmalloc(n);
		ssize_t got = pread(c->fds[h], buf, n, (off_t)((uint64_t)hi << 32 | lo));
		if (got <= 0) {
			status(c, id, got == 0 ? -1 : errno);
		} else {
			membuf b = { 0 };
			b.max = SFTP_PACKET_MAX;
			out_str(&b, buf, (size_t)got);
			reply(c, SSH_FXP_DATA, id, &b, fake.reorder);
			free(b.data);
		}
		free(buf);
		break;
	}
	case SSH_FXP_WRITE: {
		int h = rd_handle(&p);
		uint32_t hi = rd_u32(&p), lo = rd_u32(&p);
		size_t n;
		char *data = rd_str(&p, &n);
		ssize_t put = pwrite(c->fds[h], data, n, (off_t)((uint64_t)hi << 32 | lo));
		free(data);
		__atomic_fetch_add(&fake.write_ops, 1, __ATOMIC_RELAXED);
		status(c, id, put == (ssize_t)n ? 0 : EIO);
		break;
	}
	case SSH_FXP_LSTAT:
	case SSH_FXP_STAT: {
		char *path = rd_str(&p, NULL);
		int rc = type == SSH_FXP_LSTAT ? lstat(path, &sb) : stat(path, &sb);
		free(path);
		attrs_reply(c, id, rc, &sb);
		break;
	}
	case SSH_FXP_FSTAT: {
		int h = rd_handle(&p);
		attrs_reply(c, id, fstat(c->fds[h], &sb), &sb);
		break;
	}
	case SSH_FXP_READDIR: {
		int h = rd_handle(&p);
		DIR *d = c->dirs[h - 8];
		membuf b = { 0 };
		b.max = SFTP_PACKET_MAX;
		out_u32(&b, 0);
		uint32_t count = 0;
		struct dirent *de;
		/* three a reply, so that a listing takes several */
		while (count < 3 && (de = readdir(d)) != NULL) {
			int dfd = dirfd(d);
			if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
				continue;
			out_str(&b, de->d_name, strlen(de->d_name));
			out_str(&b, de->d_name, strlen(de->d_name));
			attrs_of(&b, &sb);
			count++;
		}
		if (count == 0) {
			status(c, id, -1);
		} else {
			b.data[0] = (unsigned char)(count >> 24);
			b.data[1] = (unsigned char)(count >> 16);
			b.data[2] = (unsigned char)(count >> 8);
			b.data[3] = (unsigned char)count;
			reply(c, SSH_FXP_NAME, id, &b, false);
		}
		free(b.data);
		break;
	}
	case SSH_FXP_REMOVE:
	case SSH_FXP_RMDIR: {
		char *path = rd_str(&p, NULL);
		int rc = type == SSH_FXP_REMOVE ? unlink(path) : rmdir(path);
		free(path);
		status(c, id, rc == 0 ? 0 : errno);
		break;
	}
	case SSH_FXP_MKDIR: {
		char *path = rd_str(&p, NULL);
		int rc = mkdir(path, 0755);
		free(path);
		status(c, id, rc == 0 ? 0 : errno);
		break;
	}
	case SSH_FXP_RENAME: { /* OpenSSH's: link, then unlink; never replaces */
		char *from = rd_str(&p, NULL), *to = rd_str(&p, NULL);
		int rc = link(from, to) == 0 ? unlink(from) : -1;
		status(c, id, rc == 0 ? 0 : errno);
		free(from);
		free(to);
		break;
	}
	case SSH_FXP_EXTENDED: {
		char *name = rd_str(&p, NULL);
		if (strcmp(name, "posix-rename@openssh.com") == 0 && (fake.ext & SFTP_EXT_POSIX_RENAME)) {
			char *from = rd_str(&p, NULL), *to = rd_str(&p, NULL);
			status(c, id, rename(from, to) == 0 ? 0 : errno);
			free(from);
			free(to);
		} else if (strcmp(name, "fsync@openssh.com") == 0 && (fake.ext & SFTP_EXT_FSYNC)) {
			int h = rd_handle(&p);
			status(c, id, fsync(c->fds[h]) == 0 ? 0 : errno);
		} else {
			membuf b = { 0 };
			b.max = 256;
			out_u32(&b, SSH_FX_OP_UNSUPPORTED);
			out_str(&b, "unsupported", 11);
			out_str(&b, "", 0);
			reply(c, SSH_FXP_STATUS, id, &b, false);
			free(b.data);
		}
		free(name);
		break;
	}
	default:
		fail_msg("the fake server got request type %u", type);
	}
}

static err_code fake_send(void *arg, const void *buf, size_t len)
{
	fake_conn *c = arg;
	if (c->dead)
		return err_set(E_IO, "fake: the connection is gone");
	c->received += (long)len;
	if (fake.break_after > 0 && fake.breaks > 0 && c->received > fake.break_after) {
		fake.breaks--;
		c->dead = true;
		return err_set(E_IO, "fake: connection cut after %ld bytes", fake.break_after);
	}
	assert_int_equal(membuf_add(&c->in, buf, len), E_OK);
	size_t at = 0;
	while (c->in.len - at >= 4) {
		const unsigned char *h = c->in.data + at;
		uint32_t n = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
		if (c->in.len - at < 4 + (size_t)n)
			break;
		serve(c, h + 4, n);
		at += 4 + (size_t)n;
	}
	memmove(c->in.data, c->in.data + at, c->in.len - at);
	c->in.len -= at;
	return E_OK;
}

static err_code fake_recv(void *arg, void *buf, size_t cap, size_t *got)
{
	fake_conn *c = arg;
	if (c->dead)
		return err_set(E_IO, "fake: the connection is gone");
	if (c->out.len == 0 && c->held_len > 0) { /* nothing else to answer: let it go */
		assert_int_equal(membuf_add(&c->out, c->held, c->held_len), E_OK);
		c->held_len = 0;
	}
	if (c->out.len == 0)
		return err_set(E_IO, "fake: the client waits for an answer to nothing");
	size_t n = c->out.len < cap ? c->out.len : cap;
	memcpy(buf, c->out.data, n);
	memmove(c->out.data, c->out.data + n, c->out.len - n);
	c->out.len -= n;
	*got = n;
	return E_OK;
}

static void fake_close(void *arg)
{
	fake_conn *c = arg;
	for (int i = 0; i < 16; i++) {
		if (c->fds[i] > 0)
			close(c->fds[i]);
		if (c->dirs[i] != NULL)
			closedir(c->dirs[i]);
	}
	free(c->in.data);
	free(c->out.data);
	free(c);
}

static err_code fake_connect(void *arg, sftp_io *io, bool *retryable)
{
	(void)arg;
	*retryable = true;
	fake_conn *c = xcalloc(1, sizeof(*c));
	c->in.max = c->out.max = 64u << 20;
	__atomic_fetch_add(&fake.connects, 1, __ATOMIC_RELAXED);
	*io = (sftp_io){ fake_send, fake_recv, fake_close, c };
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static storage *open_store(const char *root, long retries)
{
	config cfg;
	assert_int_equal(config_defaults(&cfg), E_OK);
	cfg.storage.ssh_prefix = xasprintf("ssh://fake%s", root);
	cfg.storage.ssh.username = xstrdup("walc");
	cfg.storage.ssh.max_retries = retries;
	cfg.storage.upload_concurrency = 4;
	cfg.storage.download_concurrency = 2;
	sftp_set_test_connector(fake_connect, NULL);
	storage *st = NULL;
	assert_int_equal(storage_sftp_open(&cfg.storage, &st), E_OK);
	config_free(&cfg);
	return st;
}

static err_code put_bytes(storage *st, const char *key, const unsigned char *p, size_t n,
						  bool exclusive)
{
	sink *s;
	static const size_t odd[] = { 7777, 100, 65536 }; /* as a compressor hands them on */
	err_code rc = exclusive ? storage_put_new(st, key, &s) : storage_put(st, key, &s);
	if (rc == E_OK)
		rc = feed_sizes(s, p, n, ODD, odd, 3);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	return rc;
}

static unsigned char *get_bytes(storage *st, const char *key, size_t *n, err_code *rc)
{
	membuf mb = { 0 };
	mb.max = 64u << 20;
	sink *m = membuf_sink_new(&mb);
	*rc = storage_get(st, key, m);
	sink_free(m);
	*n = mb.len;
	return mb.data;
}

/* key holds the n bytes of data */
static void expect_object(storage *st, const char *key, const unsigned char *data, size_t n)
{
	size_t got;
	err_code rc;
	unsigned char *back = get_bytes(st, key, &got, &rc);
	assert_int_equal(rc, E_OK);
	assert_int_equal(got, n);
	if (n > 0)
		assert_memory_equal(back, data, n);
	free(back);
}

static size_t count_temps(const char *dir)
{
	char *cmd = xasprintf("find '%s' -name '.*walc-tmp*' | wc -l", dir);
	FILE *f = popen(cmd, "r");
	size_t n = 0;
	assert_int_equal(fscanf(f, "%zu", &n), 1);
	pclose(f);
	free(cmd);
	return n;
}

static void reset_fake(unsigned ext)
{
	memset(&fake, 0, sizeof(fake));
	fake.ext = ext;
}

#define ALL_EXT (SFTP_EXT_POSIX_RENAME | SFTP_EXT_FSYNC | SFTP_EXT_HARDLINK)

/* ------------------------------------------------------------------------------------------ */
/* Tests                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static void test_parse(void **state)
{
	(void)state;
	sftp_reply r;
	/* STATUS with message and language */
	static const unsigned char st[] = { 101, 0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 2, 'n', 'o', 0, 0, 0, 0 };
	assert_int_equal(sftp_parse_reply(st, sizeof(st), &r), E_OK);
	assert_int_equal(r.id, 7);
	assert_int_equal(r.code, SSH_FX_NO_SUCH_FILE);
	assert_int_equal(r.msg_len, 2);
	/* a string longer than the packet, a handle too long, bytes left over, unknown types */
	static const unsigned char longstr[] = { 103, 0, 0, 0, 1, 0, 0, 1, 0, 'x' };
	assert_int_equal(sftp_parse_reply(longstr, sizeof(longstr), &r), E_CORRUPT);
	unsigned char bighandle[4 + 5 + 300] = { 102, 0, 0, 0, 1, 0, 0, 1, 44 };
	assert_int_equal(sftp_parse_reply(bighandle, sizeof(bighandle), &r), E_CORRUPT);
	static const unsigned char extra[] = { 101, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9 };
	assert_int_equal(sftp_parse_reply(extra, sizeof(extra), &r), E_CORRUPT);
	static const unsigned char unknown[] = { 99, 0, 0, 0, 1 };
	assert_int_equal(sftp_parse_reply(unknown, sizeof(unknown), &r), E_CORRUPT);
	/* NAME whose count claims more entries than it holds */
	static const unsigned char name[] = { 104, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1, 'a',
										  0, 0, 0, 1, 'a', 0, 0, 0, 0 };
	assert_int_equal(sftp_parse_reply(name, sizeof(name), &r), E_CORRUPT);
	/* ATTRS with extended pairs whose count is huge: cut short, not a long loop */
	static const unsigned char attrs[] = { 105, 0, 0, 0, 4, 0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff };
	assert_int_equal(sftp_parse_reply(attrs, sizeof(attrs), &r), E_CORRUPT);
	/* VERSION: the extensions walc looks for, at version "1" only */
	uint32_t v;
	unsigned ext;
	static const unsigned char ver[] = {
		2, 0, 0, 0, 3, 0, 0, 0, 24, 'p', 'o', 's', 'i', 'x', '-', 'r', 'e', 'n', 'a', 'm', 'e',
		'@', 'o', 'p', 'e', 'n', 's', 's', 'h', '.', 'c', 'o', 'm', 0, 0, 0, 1, '1',
		0, 0, 0, 17, 'f', 's', 'y', 'n', 'c', '@', 'o', 'p', 'e', 'n', 's', 's', 'h', '.', 'c',
		'o', 'm', 0, 0, 0, 1, '2'
	};
	assert_int_equal(sftp_parse_version(ver, sizeof(ver), &v, &ext), E_OK);
	assert_int_equal(v, 3);
	assert_int_equal(ext, SFTP_EXT_POSIX_RENAME);
	assert_int_equal(sftp_parse_version(ver, sizeof(ver) - 1, &v, &ext), E_CORRUPT);
	err_clear();
}

static void test_roundtrip(void **state)
{
	(void)state;
	reset_fake(ALL_EXT);
	storage *st = open_store(unit_dir, 0);
	size_t n = 3 * 1048576 + 12345;
	unsigned char *data = pattern(n, 1);
	assert_int_equal(put_bytes(st, "wal_005/a.lz4", data, n, false), E_OK);
	assert_int_equal(put_bytes(st, "basebackups_005/b/tar_partitions/part_001.tar", data, 10, false),
					 E_OK);
	assert_int_equal(put_bytes(st, "empty", data, 0, false), E_OK);
	expect_object(st, "wal_005/a.lz4", data, n);
	expect_object(st, "empty", data, 0);
	/* a range, and one past the end */
	membuf mb = { 0 };
	mb.max = 1 << 20;
	sink *m = membuf_sink_new(&mb);
	assert_int_equal(storage_get_range(st, "wal_005/a.lz4", 100000, 70000, m), E_OK);
	assert_int_equal(mb.len, 70000);
	assert_memory_equal(mb.data, data + 100000, 70000);
	assert_int_equal(storage_get_range(st, "wal_005/a.lz4", n - 10, 20, m), E_CORRUPT);
	sink_free(m);
	free(mb.data);

	obj_info info;
	assert_int_equal(storage_stat(st, "wal_005/a.lz4", &info), E_OK);
	assert_int_equal(info.size, n);
	assert_int_equal(storage_stat(st, "wal_005/missing", &info), E_NOTFOUND);
	assert_int_equal(storage_stat(st, "wal_005", &info), E_NOTFOUND); /* a folder */

	/* a listing skips temporaries, walc's and WAL-G's, and other hidden files */
	char *p = xasprintf("%s/wal_005/.b.lz4.walc-tmp.1.1", unit_dir);
	char *q = xasprintf("%s/wal_005/c.lz4.tmp.20260101T000000Z-0123456789abcdef", unit_dir);
	char *r = xasprintf("%s/wal_005/.hidden", unit_dir);
	for (char *f = p; f != NULL; f = f == p ? q : f == q ? r : NULL)
		fclose(fopen(f, "w"));
	obj_list l;
	assert_int_equal(storage_list(st, "", true, &l), E_OK);
	assert_int_equal(l.len, 3);
	obj_list_free(&l);
	assert_int_equal(storage_list(st, "wal_005/", false, &l), E_OK);
	assert_int_equal(l.len, 1);
	assert_string_equal(l.items[0].key, "wal_005/a.lz4");
	obj_list_free(&l);
	assert_int_equal(storage_list(st, "nothing/", true, &l), E_OK);
	assert_int_equal(l.len, 0);
	obj_list_free(&l);
	assert_int_equal(storage_list_temporaries(st, "wal_005/", &l), E_OK);
	assert_int_equal(l.len, 2);
	obj_list_free(&l);
	free(p);
	free(q);
	free(r);

	/* deletes: absent keys succeed, emptied folders go, the root stays */
	const char *keys[] = { "basebackups_005/b/tar_partitions/part_001.tar", "wal_005/none" };
	assert_int_equal(storage_remove_many(st, keys, 2), E_OK);
	char *gone = xasprintf("%s/basebackups_005", unit_dir);
	struct stat sb;
	assert_int_not_equal(stat(gone, &sb), 0);
	assert_int_equal(stat(unit_dir, &sb), 0);
	free(gone);
	assert_int_equal(storage_remove(st, "empty"), E_OK);
	assert_int_equal(storage_stat(st, "empty", &info), E_NOTFOUND);
	storage_free(st);
	free(data);
	err_clear();
}

/* A missing repository folder is an error, never "does not exist" (wal-fetch's exit 74). */
static void test_missing_root(void **state)
{
	(void)state;
	reset_fake(ALL_EXT);
	char *root = xasprintf("%s/nothere", unit_dir);
	storage *st = open_store(root, 0);
	obj_info info;
	assert_int_equal(storage_stat(st, "wal_005/x", &info), E_IO);
	assert_non_null(strstr(err_msg(), "no such folder"));
	storage_free(st);
	free(root);
	err_clear();
}

/* Connections cut mid-upload and mid-read: the upload goes on from the acknowledged bytes,
 * the read from the byte it had reached. */
static void test_resume(void **state)
{
	(void)state;
	size_t n = 2 * 1048576 + 777;
	unsigned char *data = pattern(n, 2);
	reset_fake(ALL_EXT);
	fake.break_after = 700000;
	fake.breaks = 2;
	storage *st = open_store(unit_dir, 3);
	assert_int_equal(put_bytes(st, "big", data, n, false), E_OK);
	assert_int_equal(fake.breaks, 0);
	/* no byte sent three times: each break resends at most the writes in flight */
	assert_true(fake.write_ops < (long)(n / 32768) + 3 * 32 + 2);
	assert_int_equal(count_temps(unit_dir), 0);
	fake.break_after = 3000; /* READ requests: about 25 bytes each */
	fake.breaks = 2;
	fake.short_reads = 10000;
	expect_object(st, "big", data, n);
	assert_int_equal(fake.breaks, 0);
	storage_free(st);
	/* no retries left: the upload fails, and its temporary cannot be removed (the connection
	 * died), so it stays hidden */
	reset_fake(ALL_EXT);
	fake.break_after = 100000;
	fake.breaks = 1;
	st = open_store(unit_dir, 0);
	assert_int_equal(put_bytes(st, "cut", data, n, false), E_IO);
	assert_non_null(strstr(err_msg(), "writing ssh://fake:22"));
	obj_info info;
	assert_int_equal(storage_stat(st, "cut", &info), E_NOTFOUND);
	assert_int_equal(count_temps(unit_dir), 1);
	storage_free(st);
	free(data);
	err_clear();
}

/* Reads answered out of order and short still come out in order. */
static void test_reorder(void **state)
{
	(void)state;
	size_t n = 1048576 + 5;
	unsigned char *data = pattern(n, 3);
	reset_fake(ALL_EXT);
	storage *st = open_store(unit_dir, 0);
	assert_int_equal(put_bytes(st, "obj", data, n, false), E_OK);
	fake.reorder = true;
	fake.short_reads = 20000;
	expect_object(st, "obj", data, n);
	storage_free(st);
	free(data);
}

/* put_new never replaces; put replaces (posix-rename), and without posix-rename too. */
static void test_replace_and_create(void **state)
{
	(void)state;
	unsigned char *a = pattern(5000, 4), *b = pattern(6000, 5);
	for (int with = 1; with >= 0; with--) {
		reset_fake(with ? ALL_EXT : 0);
		storage *st = open_store(unit_dir, 0);
		assert_int_equal(put_bytes(st, "h.history", a, 5000, true), E_OK);
		assert_int_equal(put_bytes(st, "h.history", b, 6000, true), E_EXISTS);
		expect_object(st, "h.history", a, 5000);
		assert_int_equal(put_bytes(st, "h.history", b, 6000, false), E_OK);
		expect_object(st, "h.history", b, 6000);
		assert_int_equal(count_temps(unit_dir), 0);
		assert_int_equal(storage_remove(st, "h.history"), E_OK);
		storage_free(st);
	}
	free(a);
	free(b);
	err_clear();
}

/* WALG_SSH_PREFIX as WAL-G reads it; a user or port in it is refused. */
static void test_prefix(void **state)
{
	(void)state;
	static const char *const bad[] = { "ssh://user@host/p", "ssh://host:2222/p", "ssh:///p",
									   "sftp://host/p", "ssh://[::1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		config cfg;
		assert_int_equal(config_defaults(&cfg), E_OK);
		cfg.storage.ssh_prefix = xstrdup(bad[i]);
		storage *st = NULL;
		assert_int_equal(storage_sftp_open(&cfg.storage, &st), E_CONFIG);
		assert_non_null(strstr(err_msg(), "WALG_SSH_PREFIX"));
		config_free(&cfg);
	}
	static const struct {
		const char *prefix, *sp, *describe;
	} good[] = {
		{ "ssh://h/srv/repo/", NULL, "ssh://h:22/srv/repo" },
		{ "ssh://h", NULL, "ssh://h:22/~/" },
		{ "ssh://h/", "sub", "ssh://h:22/sub" },
		{ "ssh://[::1]/r", NULL, "ssh://[::1]:22/r" },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		config cfg;
		assert_int_equal(config_defaults(&cfg), E_OK);
		cfg.storage.ssh_prefix = xstrdup(good[i].prefix);
		cfg.storage.storage_prefix = good[i].sp ? xstrdup(good[i].sp) : NULL;
		storage *st = NULL;
		assert_int_equal(storage_sftp_open(&cfg.storage, &st), E_OK);
		assert_string_equal(storage_describe(st), good[i].describe);
		storage_free(st);
		config_free(&cfg);
	}
	err_clear();
}

/* Deletes from several threads at once, each on its own session. */
static void test_remove_many(void **state)
{
	(void)state;
	reset_fake(ALL_EXT);
	storage *st = open_store(unit_dir, 0);
	enum { N = 700 };
	char *keys[N];
	for (int i = 0; i < N; i++) {
		keys[i] = xasprintf("wal_005/%08d", i);
		assert_int_equal(put_bytes(st, keys[i], (const unsigned char *)"x", 1, false), E_OK);
	}
	assert_int_equal(storage_remove_many(st, (const char *const *)keys, N), E_OK);
	obj_list l;
	assert_int_equal(storage_list(st, "", true, &l), E_OK);
	assert_int_equal(l.len, 0);
	obj_list_free(&l);
	for (int i = 0; i < N; i++)
		free(keys[i]);
	storage_free(st);
}

int main(void)
{
	log_setup(LOG_ERROR, false, "test_sftp");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test_setup_teardown(test_roundtrip, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_missing_root, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_resume, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_reorder, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_replace_and_create, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test(test_prefix),
		cmocka_unit_test_setup_teardown(test_remove_many, unit_dir_setup, unit_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
