/* Allocation, string and file-system helpers shared by every module. */
#include "internal/core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void oom(void)
{
	static const char msg[] = "ERROR: out of memory\n";
	ssize_t r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)r;
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (p == NULL)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t m)
{
	void *p = calloc(n ? n : 1, m ? m : 1);
	if (p == NULL)
		oom();
	return p;
}

void xqsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (q == NULL)
		oom();
	return q;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (p == NULL)
		oom();
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *out = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&out, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom();
	return out;
}

bool str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_has_suffix(const char *s, const char *suffix)
{
	size_t ls = strlen(s), lx = strlen(suffix);
	return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

err_code fd_write_all(int fd, const void *buf, size_t len, const char *what)
{
	const unsigned char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return err_errno(E_IO, errno, "writing %s", what);
		}
		p += n;
		len -= (size_t)n;
	}
	return E_OK;
}

err_code fsync_parent_dir(const char *path)
{
	char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	if (slash == NULL) {
		free(dir);
		dir = xstrdup(".");
	} else if (slash == dir) {
		slash[1] = '\0';
	} else {
		*slash = '\0';
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err_code rc = err_errno(E_IO, errno, "opening directory %s", dir);
		free(dir);
		return rc;
	}
	err_code rc = E_OK;
	if (fsync(fd) != 0 && errno != EINVAL)
		rc = err_errno(E_IO, errno, "fsync of directory %s", dir);
	close(fd);
	free(dir);
	return rc;
}

err_code mkdir_p(const char *path, unsigned mode)
{
	return mkdir_p_owned(path, mode, NULL);
}

err_code mkdir_p_owned(const char *path, unsigned mode, const file_owner *owner)
{
	char *p = xstrdup(path);
	size_t len = strlen(p);
	while (len > 1 && p[len - 1] == '/')
		p[--len] = '\0';
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, (mode_t)mode) == 0) {
				if (owner != NULL && owner->set &&
					chown(p, (uid_t)owner->uid, (gid_t)owner->gid) != 0)
					errno = 0; /* best effort: the folder stays its creator's */
			} else if (errno != EEXIST) {
				err_code rc = err_errno(E_IO, errno, "creating directory %s", p);
				free(p);
				return rc;
			}
			*s = c;
			if (c == '\0')
				break;
		}
	}
	struct stat st;
	if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
		err_code rc = err_set(E_IO, "%s exists and is not a directory", p);
		free(p);
		return rc;
	}
	free(p);
	return E_OK;
}

/* RFC 3339 with optional fraction and zone -> seconds and nanoseconds since the epoch. */
bool time_parse_rfc3339(const char *s, time_t *sec, long *nsec)
{
	/* the operator's forms are a superset, and a stored time is one of them */
	return time_parse_target(s, sec, nsec) == NULL;
}

const char *time_parse_target(const char *s, time_t *sec, long *nsec)
{
	struct tm tm = { 0 };
	char buf[64];
	if (strlen(s) >= sizeof(buf))
		return "too long";
	strcpy(buf, s);
	if (strlen(buf) > 10 && buf[10] == ' ')
		buf[10] = 'T';
	const char *p = strptime(buf, "%Y-%m-%dT%H:%M:%S", &tm);
	if (p == NULL)
		return "expected a date and time such as 2026-12-02T02:47:00Z or 2026-12-02 02:47:00+00";
	long frac = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (digits++ < 9)
				frac = frac * 10 + (*p - '0');
		for (; digits < 9; digits++)
			frac *= 10;
	}
	while (*p == ' ')
		p++;
	long off = 0;
	if (*p == '+' || *p == '-') {
		/* hh, hhmm or hh:mm */
		const char *d = p + 1;
		int h, m = 0, n = 0;
		if (sscanf(d, "%2d%n", &h, &n) != 1 || n != 2)
			return "expected an offset such as +00, +0100 or +01:00";
		d += 2;
		if (*d == ':')
			d++;
		if (*d != '\0' && (sscanf(d, "%2d%n", &m, &n) != 1 || n != 2 || d[2] != '\0'))
			return "expected an offset such as +00, +0100 or +01:00";
		if (h > 15 || m > 59)
			return "the offset is out of range";
		off = (h * 3600L + m * 60L) * (*p == '-' ? -1 : 1);
	} else if (strcmp(p, "Z") == 0 || strcmp(p, "UTC") == 0 || strcmp(p, "GMT") == 0) {
		off = 0;
	} else if (*p == '\0') {
		return "it has no time zone, which PostgreSQL would take from the server's TimeZone: "
			   "add one, such as Z or +00";
	} else {
		return "expected a time zone such as Z, +00, +01:00 or UTC";
	}
	*sec = timegm(&tm) - off;
	*nsec = frac;
	return NULL;
}

char *time_now_rfc3339(void)
{
	struct timeval tv;
	struct tm tm;
	char buf[64];
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return xasprintf("%s.%06ldZ", buf, (long)tv.tv_usec);
}

char *time_format_rfc3339(time_t sec, long nsec)
{
	struct tm tm;
	char buf[64], frac[24] = "";
	gmtime_r(&sec, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	if (nsec > 0) {
		snprintf(frac, sizeof(frac), ".%09ld", nsec);
		for (size_t n = strlen(frac); frac[n - 1] == '0'; n--)
			frac[n - 1] = '\0';
	}
	return xasprintf("%s%sZ", buf, frac);
}

struct timespec time_in_ms(clockid_t clock, long ms)
{
	struct timespec t;
	clock_gettime(clock, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

err_code mkdir_parent(const char *path, unsigned mode)
{
	char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	err_code rc = E_OK;
	if (slash != NULL && slash != dir) {
		*slash = '\0';
		rc = mkdir_p(dir, mode);
	}
	free(dir);
	return rc;
}

size_t take_bytes(unsigned char *dst, size_t room, const unsigned char **p, size_t *len)
{
	size_t n = room < *len ? room : *len;
	memcpy(dst, *p, n);
	*p += n;
	*len -= n;
	return n;
}

int time_cmp(time_t sec1, long nsec1, time_t sec2, long nsec2)
{
	if (sec1 != sec2)
		return sec1 < sec2 ? -1 : 1;
	if (nsec1 != nsec2)
		return nsec1 < nsec2 ? -1 : 1;
	return 0;
}
