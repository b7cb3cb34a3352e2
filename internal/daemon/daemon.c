/*
 * The daemon's socket side: accept, read one framed message at a time, archive or restore
 * with the same code as wal-push and wal-fetch, answer one byte. A connection is closed after
 * an 'F' or 'f' is answered, as WAL-G's daemon does; 'C' keeps it open.
 */
#include "internal/daemon/daemon.h"

#include <sys/time.h>
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal/pg/pg.h"
#include "internal/pipe/pipe.h"
#include "internal/wal/wal.h"

#define MSG_MAX 65535
#define IO_TIMEOUT_S 30

#include "internal/daemon/metrics.h"


err_code daemon_parse(const unsigned char *buf, size_t len, daemon_request *out)
{
	memset(out, 0, sizeof(*out));
	if (len < 3)
		return err_set(E_CORRUPT, "daemon: message shorter than its header");
	size_t total = (size_t)buf[1] << 8 | buf[2];
	if (total != len)
		return err_set(E_CORRUPT, "daemon: message length %zu, header says %zu", len, total);
	out->type = (char)buf[0];
	const unsigned char *body = buf + 3;
	size_t n = len - 3;
	switch (out->type) {
	case DAEMON_CHECK:
		return E_OK;
	case DAEMON_PUSH:
		if (n == 0 || n >= sizeof(out->name))
			return err_set(E_CORRUPT, "daemon: bad WAL file name length %zu", n);
		if (memchr(body, '\0', n) != NULL)
			return err_set(E_CORRUPT, "daemon: NUL in a WAL file name");
		memcpy(out->name, body, n);
		break;
	case DAEMON_FETCH: {
		/* 1 byte argument count, then per argument a u16 big-endian length and its bytes. */
		if (n < 1 || body[0] != 2)
			return err_set(E_CORRUPT, "daemon: wal-fetch needs 2 arguments");
		size_t at = 1;
		char *dst[2] = { out->name, out->dest };
		size_t cap[2] = { sizeof(out->name), sizeof(out->dest) };
		for (int i = 0; i < 2; i++) {
			if (at + 2 > n)
				return err_set(E_CORRUPT, "daemon: truncated wal-fetch arguments");
			size_t l = (size_t)body[at] << 8 | body[at + 1];
			at += 2;
			if (l == 0 || l >= cap[i] || at + l > n || memchr(body + at, '\0', l) != NULL)
				return err_set(E_CORRUPT, "daemon: bad wal-fetch argument");
			memcpy(dst[i], body + at, l);
			at += l;
		}
		if (at != n)
			return err_set(E_CORRUPT, "daemon: trailing bytes after wal-fetch arguments");
		break;
	}
	default:
		return err_set(E_CORRUPT, "daemon: unknown message type 0x%02x", buf[0]);
	}
	if (!wal_is_file_name(out->name))
		return err_set(E_CORRUPT, "daemon: \"%s\" is not a WAL file name", out->name);
	return E_OK;
}

static bool read_full(int fd, unsigned char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = read(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

typedef struct conn {
	int fd;
	repo *push;	 /* the first alive storage, with failover storages */
	repo *fetch; /* every alive one */
	const wal_settings *cfg;
} conn;

static char answer_push(conn *c, const daemon_request *q)
{
	char *path = xasprintf("%s/pg_wal/%s", c->cfg->pg->pgdata, q->name);
	struct timespec t0, t1;
	struct stat sb;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	repo_recheck(c->push);
	err_code rc = wal_push(c->push, c->cfg, path, NULL, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc == E_OK) {
		metrics_archived(q->name, stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0,
						 (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	} else {
		metrics_failed();
		log_error("daemon: archiving %s: %s", q->name, err_msg());
	}
	free(path);
	return rc == E_OK ? DAEMON_OK : DAEMON_ERROR;
}

/*
 * Where a fetched file may be written: a file directly in PGDATA/pg_wal, named relative to
 * PGDATA (PostgreSQL's %p, "pg_wal/RECOVERYXLOG") or absolutely, as WAL-G's daemon takes it.
 * Paths are compared a component at a time, never as strings: "/data_evil/pg_wal/x" shares
 * "/data"'s first bytes but not its components. NULL when dest is anywhere else.
 */
char *daemon_fetch_path(const char *pgdata, const char *dest)
{
	const char *p = dest;
	if (*p == '/') {
		/* Each of PGDATA's components in turn ("//" and "/." skipped on both sides). */
		const char *d = pgdata;
		for (;;) {
			while (*d == '/' || (d[0] == '.' && (d[1] == '/' || d[1] == '\0')))
				d++;
			while (*p == '/' || (p[0] == '.' && (p[1] == '/' || p[1] == '\0')))
				p++;
			if (*d == '\0')
				break;
			size_t n = strcspn(d, "/");
			if (strncmp(d, p, n) != 0 || (p[n] != '/' && p[n] != '\0'))
				return NULL;
			d += n;
			p += n;
		}
	}
	while (*p == '/' || (p[0] == '.' && p[1] == '/'))
		p++;
	if (strncmp(p, "pg_wal/", 7) != 0)
		return NULL;
	const char *name = p + 7;
	while (*name == '/')
		name++;
	if (name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
		strcmp(name, "..") == 0)
		return NULL;
	size_t n = strlen(pgdata);
	while (n > 1 && pgdata[n - 1] == '/')
		n--;
	return xasprintf("%.*s/pg_wal/%s", (int)n, pgdata, name);
}

static char answer_fetch(conn *c, const daemon_request *q, char **prefetch_dest)
{
	char *dest = daemon_fetch_path(c->cfg->pg->pgdata, q->dest);
	if (dest == NULL) {
		log_error("daemon: refusing destination %s: only a file in %s/pg_wal is written",
				  q->dest, c->cfg->pg->pgdata);
		return DAEMON_ERROR;
	}
	bool prefetch = false;
	err_code rc = wal_fetch(c->fetch, c->cfg, q->name, dest, &prefetch);
	char answer = rc == E_OK ? DAEMON_OK : rc == E_NOTFOUND ? DAEMON_MISSING : DAEMON_ERROR;
	if (rc == E_OK && prefetch) {
		*prefetch_dest = dest;
		dest = NULL;
	}
	metrics_fetched(rc == E_OK);
	if (rc != E_OK && rc != E_NOTFOUND)
		log_error("daemon: restoring %s: %s", q->name, err_msg());
	free(dest);
	return answer;
}

/* Connections still being served: the daemon waits for them before the repository closes. */
static atomic_int active;

static void *serve(void *arg)
{
	conn *c = arg;
	unsigned char *buf = xmalloc(MSG_MAX);
	char *prefetch_dest = NULL, prefetch_name[sizeof(((daemon_request *)0)->name)] = "";
	for (;;) {
		if (!read_full(c->fd, buf, 3))
			break;
		size_t total = (size_t)buf[1] << 8 | buf[2];
		if (total < 3 || !read_full(c->fd, buf + 3, total - 3)) {
			log_warn("daemon: truncated message");
			break;
		}
		daemon_request q;
		char answer;
		if (daemon_parse(buf, total, &q) != E_OK) {
			log_error("%s", err_msg());
			answer = DAEMON_ERROR;
		} else if (q.type == DAEMON_CHECK) {
			answer = DAEMON_OK;
		} else if (q.type == DAEMON_PUSH) {
			answer = answer_push(c, &q);
		} else {
			answer = answer_fetch(c, &q, &prefetch_dest);
			if (prefetch_dest != NULL)
				snprintf(prefetch_name, sizeof(prefetch_name), "%s", q.name);
		}
		if (write(c->fd, &answer, 1) != 1 || q.type != DAEMON_CHECK || answer == DAEMON_ERROR)
			break;
	}
	close(c->fd);
	/* After the answer: the restore goes on while the next segments arrive (no fork here). */
	if (prefetch_dest != NULL && cancel_requested() == 0)
		wal_prefetch(c->fetch, c->cfg, prefetch_name, prefetch_dest);
	free(prefetch_dest);
	free(buf);
	free(c);
	atomic_fetch_sub(&active, 1);
	return NULL;
}

/*
 * The socket is the daemon's whole authority (any peer may have a segment read from PGDATA
 * or written into pg_wal), so it is made 0600 before listen() whatever the umask: until
 * then a connect() is refused, so no peer gets in between. Run as root for a server of
 * another user, the socket goes to that user, PGDATA's owner.
 */
static err_code listen_on(const char *path, uid_t server_uid, int *out)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(addr.sun_path))
		return err_set(E_CONFIG, "daemon: socket path %s is too long", path);
	strcpy(addr.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(E_IO, errno, "daemon: socket");
	struct stat sb;
	/* A stale socket from an earlier run is in the way; anything else is not ours. */
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode)) {
			close(fd);
			return err_set(E_CONFIG, "daemon: %s exists and is not a socket", path);
		}
		unlink(path);
	}
	err_code rc = E_OK;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
		rc = err_errno(E_IO, errno, "daemon: binding %s", path);
	else if (chmod(path, 0600) != 0)
		rc = err_errno(E_IO, errno, "daemon: chmod 0600 of %s", path);
	else if (geteuid() == 0 && server_uid != 0 && chown(path, server_uid, (gid_t)-1) != 0)
		rc = err_errno(E_IO, errno, "daemon: giving %s to uid %u", path, (unsigned)server_uid);
	else if (lstat(path, &sb) != 0 || !S_ISSOCK(sb.st_mode) || (sb.st_mode & 077) != 0)
		rc = err_set(E_IO, "daemon: %s changed under the daemon", path);
	else if (listen(fd, 64) != 0)
		rc = err_errno(E_IO, errno, "daemon: listening on %s", path);
	if (rc != E_OK) {
		close(fd);
		return rc;
	}
	*out = fd;
	return E_OK;
}

/*
 * Peers the daemon serves: its own user, root, and the user that owns PGDATA (the server's:
 * PostgreSQL runs only as its data directory's owner). The socket's mode already keeps
 * others out; this holds even when the socket's directory or mode is changed later.
 */
static bool peer_allowed(int fd, uid_t server_uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
		log_warn("daemon: refusing a connection: its peer is unknown (%s)", strerror(errno));
		return false;
	}
	if (cr.uid == geteuid() || cr.uid == 0 || cr.uid == server_uid)
		return true;
	log_warn("daemon: refusing a connection from uid %u (pid %ld): only uid %u, %u and root "
			 "are served",
			 (unsigned)cr.uid, (long)cr.pid, (unsigned)geteuid(), (unsigned)server_uid);
	return false;
}

err_code daemon_run(repo *push, repo *fetch, const wal_settings *cfg, const char *socket_path,
					const char *metrics_addr)
{
	if (cfg->pg->pgdata == NULL)
		return err_set(E_CONFIG, "daemon: PGDATA must be set (the files to archive are in "
								 "$PGDATA/pg_wal)");
	struct stat dsb;
	if (stat(cfg->pg->pgdata, &dsb) != 0)
		return err_errno(E_CONFIG, errno, "daemon: PGDATA %s", cfg->pg->pgdata);
	int lfd = -1;
	TRY(listen_on(socket_path, dsb.st_uid, &lfd));
	if (metrics_addr != NULL) {
		err_code rc = metrics_start(fetch, cfg, metrics_addr);
		if (rc != E_OK) {
			close(lfd);
			return rc;
		}
	}
	log_info("daemon listening on %s%s%s", socket_path, metrics_addr ? ", metrics on " : "",
			 metrics_addr ? metrics_addr : "");
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, PIPE_THREAD_STACK);
	/* cmd turns SIGINT and SIGTERM into cancellation; accept() returns EINTR on them. */
	while (cancel_requested() == 0) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EINTR)
				log_warn("daemon: accept: %s", strerror(errno));
			continue;
		}
		if (!peer_allowed(fd, dsb.st_uid)) {
			close(fd);
			continue;
		}
		struct timeval tv = { IO_TIMEOUT_S, 0 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		conn *c = xcalloc(1, sizeof(*c));
		*c = (conn){ fd, push, fetch, cfg };
		pthread_t t;
		atomic_fetch_add(&active, 1);
		if (pthread_create(&t, &attr, serve, c) != 0) {
			atomic_fetch_sub(&active, 1);
			char e = DAEMON_ERROR;
			if (write(fd, &e, 1) < 0) { /* the client sees the error either way */
			}
			close(fd);
			free(c);
		}
	}
	pthread_attr_destroy(&attr);
	close(lfd);
	unlink(socket_path);
	/* Requests in flight finish (their transfers see the cancellation) before r goes. */
	for (int i = 0; atomic_load(&active) > 0 && i < 600; i++) {
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
	metrics_stop();
	log_info("daemon stopped");
	return E_OK;
}
