/* The sink interface and the small sinks every module needs: memory, null, compare-with-file. */
#include "internal/core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_CHUNK (1u << 20)

err_code sink_write(sink *s, const void *buf, size_t len)
{
	if (len == 0)
		return E_OK;
	return s->ops->write(s, buf, len);
}

err_code sink_finish(sink *s)
{
	return s->ops->finish(s);
}

void sink_free(sink *s)
{
	if (s != NULL)
		s->ops->free(s);
}

/* membuf */

typedef struct membuf_sink {
	sink base;
	membuf *mb;
} membuf_sink;

err_code membuf_add(membuf *mb, const void *buf, size_t len)
{
	if (len > mb->max - mb->len)
		return err_set(E_CORRUPT, "data larger than the %zu-byte limit", mb->max);
	if (mb->len + len > mb->cap) {
		size_t cap = mb->cap ? mb->cap : 4096;
		while (cap < mb->len + len)
			cap *= 2;
		if (cap > mb->max)
			cap = mb->max;
		mb->data = xrealloc(mb->data, cap);
		mb->cap = cap;
	}
	memcpy(mb->data + mb->len, buf, len);
	mb->len += len;
	return E_OK;
}

static err_code membuf_write(sink *s, const void *buf, size_t len)
{
	return membuf_add(((membuf_sink *)s)->mb, buf, len);
}

static err_code plain_finish(sink *s)
{
	(void)s;
	return E_OK;
}

static void plain_free(sink *s)
{
	free(s);
}

static const sink_ops membuf_ops = { membuf_write, plain_finish, plain_free };

sink *membuf_sink_new(membuf *into)
{
	membuf_sink *s = xcalloc(1, sizeof(*s));
	s->base.ops = &membuf_ops;
	s->mb = into;
	if (into->max == 0)
		into->max = SIZE_MAX;
	return &s->base;
}

/* tap: a pass-through that reports how many bytes went by (counting, pacing) */

typedef struct tap_sink {
	sink base;
	void (*on_bytes)(void *arg, const void *buf, size_t len);
	void *arg;
} tap_sink;

static err_code tap_write(sink *s, const void *buf, size_t len)
{
	tap_sink *t = (tap_sink *)s;
	t->on_bytes(t->arg, buf, len);
	return sink_write(s->next, buf, len);
}

static err_code tap_finish(sink *s)
{
	return sink_finish(s->next);
}

static void tap_free(sink *s)
{
	sink_free(s->next);
	free(s);
}

static const sink_ops tap_ops = { tap_write, tap_finish, tap_free };

sink *tap_sink_new(void (*on_bytes)(void *arg, const void *buf, size_t len), void *arg, sink *next)
{
	tap_sink *t = xcalloc(1, sizeof(*t));
	t->base.ops = &tap_ops;
	t->base.next = next;
	t->on_bytes = on_bytes;
	t->arg = arg;
	return &t->base;
}

static void add_count(void *arg, const void *buf, size_t len)
{
	(void)buf;
	__atomic_add_fetch((uint64_t *)arg, len, __ATOMIC_RELAXED);
}

sink *count_sink_new(uint64_t *counter, sink *next)
{
	return tap_sink_new(add_count, counter, next);
}

/* null */

static err_code null_write(sink *s, const void *buf, size_t len)
{
	(void)s;
	(void)buf;
	(void)len;
	return E_OK;
}

static const sink_ops null_ops = { null_write, plain_finish, plain_free };

sink *null_sink_new(void)
{
	sink *s = xcalloc(1, sizeof(*s));
	s->ops = &null_ops;
	return s;
}

/* compare: equal only if every byte matches and both end together */

typedef struct compare_sink {
	sink base;
	int fd;
	bool differs;
	bool *equal;
	char *path;
	unsigned char buf[65536];
} compare_sink;

static err_code compare_write(sink *s, const void *buf, size_t len)
{
	compare_sink *c = (compare_sink *)s;
	const unsigned char *p = buf;
	while (!c->differs && len > 0) {
		size_t want = len < sizeof(c->buf) ? len : sizeof(c->buf);
		ssize_t n = read(c->fd, c->buf, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return err_errno(E_IO, errno, "reading %s", c->path);
		}
		if (n == 0 || memcmp(c->buf, p, (size_t)n) != 0) {
			c->differs = true;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	return E_OK;
}

static err_code compare_finish(sink *s)
{
	compare_sink *c = (compare_sink *)s;
	if (!c->differs) {
		unsigned char one;
		ssize_t n;
		do
			n = read(c->fd, &one, 1);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return err_errno(E_IO, errno, "reading %s", c->path);
		if (n > 0)
			c->differs = true;
	}
	*c->equal = !c->differs;
	return E_OK;
}

static void compare_free(sink *s)
{
	compare_sink *c = (compare_sink *)s;
	if (c->fd >= 0)
		close(c->fd);
	free(c->path);
	free(c);
}

static const sink_ops compare_ops = { compare_write, compare_finish, compare_free };

sink *compare_sink_new(const char *path, bool *equal)
{
	compare_sink *c = xcalloc(1, sizeof(*c));
	c->base.ops = &compare_ops;
	c->equal = equal;
	*equal = false;
	c->path = xstrdup(path);
	c->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (c->fd < 0)
		c->differs = true; /* reported by the caller, who opened it first */
	return &c->base;
}

typedef struct compare_mem_sink {
	sink base;
	const unsigned char *want;
	size_t left;
	bool differs;
	bool *equal;
} compare_mem_sink;

static err_code compare_mem_write(sink *s, const void *buf, size_t len)
{
	compare_mem_sink *c = (compare_mem_sink *)s;
	if (c->differs || len == 0)
		return E_OK;
	if (len > c->left || memcmp(c->want, buf, len) != 0) {
		c->differs = true;
		return E_OK;
	}
	c->want += len;
	c->left -= len;
	return E_OK;
}

static err_code compare_mem_finish(sink *s)
{
	compare_mem_sink *c = (compare_mem_sink *)s;
	*c->equal = !c->differs && c->left == 0;
	return E_OK;
}

static void compare_mem_free(sink *s)
{
	free(s);
}

static const sink_ops compare_mem_ops = { compare_mem_write, compare_mem_finish,
										  compare_mem_free };

sink *compare_mem_sink_new(const void *buf, size_t len, bool *equal)
{
	compare_mem_sink *c = xcalloc(1, sizeof(*c));
	c->base.ops = &compare_mem_ops;
	c->want = buf;
	c->left = len;
	c->equal = equal;
	*equal = false;
	return &c->base;
}

/* Up to limit bytes (UINT64_MAX: to the end); *got: how many came. */
static err_code write_fd_upto(sink *s, int fd, const char *what, uint64_t limit, uint64_t *got)
{
	unsigned char *buf = xmalloc(FILE_CHUNK);
	err_code rc = E_OK;
	*got = 0;
	while (*got < limit) {
		size_t want = limit - *got < FILE_CHUNK ? (size_t)(limit - *got) : FILE_CHUNK;
		ssize_t n = read(fd, buf, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = err_errno(E_IO, errno, "reading %s", what);
			break;
		}
		if (n == 0)
			break;
		*got += (uint64_t)n;
		rc = sink_write(s, buf, (size_t)n);
		if (rc != E_OK)
			break;
	}
	free(buf);
	return rc;
}

err_code sink_write_fd(sink *s, int fd, const char *what)
{
	uint64_t got;
	return write_fd_upto(s, fd, what, UINT64_MAX, &got);
}

err_code sink_write_file_range(sink *s, const char *path, uint64_t offset, uint64_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_errno(errno == ENOENT ? E_NOTFOUND : E_IO, errno, "opening %s", path);
	uint64_t got = 0;
	err_code rc = lseek(fd, (off_t)offset, SEEK_SET) < 0
		? err_errno(E_IO, errno, "seeking in %s", path)
		: write_fd_upto(s, fd, path, len, &got);
	close(fd);
	if (rc == E_OK && got < len)
		rc = err_set(E_CORRUPT, "%s ends at %llu, before the %llu bytes asked for at %llu", path,
					 (unsigned long long)(offset + got), (unsigned long long)len,
					 (unsigned long long)offset);
	return rc;
}

err_code sink_write_file(sink *s, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_errno(errno == ENOENT ? E_NOTFOUND : E_IO, errno, "opening %s", path);
	err_code rc = sink_write_fd(s, fd, path);
	close(fd);
	return rc;
}
