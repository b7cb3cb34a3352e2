/*
 * The daemon's HTTP side: /metrics in Prometheus text exposition and /healthz, on a TCP port.
 * One small thread; the last backup is read from storage at most once a minute, the WAL waiting
 * in pg_wal at each scrape.
 * And the Pushgateway's texts of backup-push, delete and the archiving commands, whose pods end
 * before any scrape (cmd sends them, through storage's HTTP core).
 */
#include "internal/daemon/metrics.h"

#include <sys/time.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal/catalog/catalog.h"
#include "internal/pipe/pipe.h"

#define BACKUP_CACHE_S 60

static pthread_mutex_t m_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t m_archived, m_archived_bytes, m_failed, m_fetched, m_fetch_missing;
static double m_archive_seconds;
static char m_last_segment[64];
static time_t m_last_time;
static int m_fd = -1;
static pthread_t m_thread;
static repo *m_repo;
static const wal_settings *m_cfg;
static char *m_wal_dir;
static time_t m_backup_checked;
static double m_backup_time, m_backup_bytes, m_verified_time;

void metrics_archived(const char *name, uint64_t bytes, double seconds)
{
	pthread_mutex_lock(&m_lock);
	m_archived++;
	m_archived_bytes += bytes;
	m_archive_seconds += seconds;
	snprintf(m_last_segment, sizeof(m_last_segment), "%s", name);
	m_last_time = time(NULL);
	pthread_mutex_unlock(&m_lock);
}

void metrics_failed(void)
{
	pthread_mutex_lock(&m_lock);
	m_failed++;
	pthread_mutex_unlock(&m_lock);
}

void metrics_fetched(bool found)
{
	pthread_mutex_lock(&m_lock);
	if (found)
		m_fetched++;
	else
		m_fetch_missing++;
	pthread_mutex_unlock(&m_lock);
}

/* The newest backup's finish time (0 when unknown), stored and uncompressed sizes. */
static bool newest_backup(repo *r, double *finish, double *stored, double *uncompressed)
{
	char *name = NULL;
	backup_sentinel s;
	bool found = catalog_resolve(r, "LATEST", &name) == E_OK &&
				 catalog_sentinel_read(r, name, &s) == E_OK;
	if (found) {
		time_t sec;
		long nsec;
		bool timed = s.finish_time && time_parse_rfc3339(s.finish_time, &sec, &nsec);
		*finish = timed ? (double)sec : 0;
		*stored = (double)s.compressed_size;
		*uncompressed = (double)s.uncompressed_size;
		catalog_sentinel_free(&s);
	}
	err_clear();
	free(name);
	return found;
}

/*
 * The finish time of the newest backup whose verification passed (0 when none did); false
 * when the repository could not be read.
 */
static bool newest_verified(repo *r, double *finish)
{
	char *name = NULL;
	time_t at = 0;
	verify_record rec;
	bool found = false;
	bool read = catalog_newest_verified(r, &name, &at, &rec, &found) == E_OK;
	*finish = found ? (double)at : 0;
	catalog_verified_free(&rec);
	free(name);
	err_clear();
	return read;
}

/* The newest backup's finish time and size, refreshed at most once a minute. */
static void refresh_backup(void)
{
	time_t now = time(NULL);
	if (now - m_backup_checked < BACKUP_CACHE_S)
		return;
	m_backup_checked = now;
	double finish, stored, uncompressed;
	if (newest_backup(m_repo, &finish, &stored, &uncompressed)) {
		if (finish > 0)
			m_backup_time = finish;
		m_backup_bytes = stored;
	}
	double verified;
	if (newest_verified(m_repo, &verified))
		m_verified_time = verified;
}

/*
 * The backlog's figures, as /metrics and the Pushgateway both give them. The Pushgateway's are
 * all gauges of the last report; the dropped count is a counter on /metrics.
 */
static char *backlog_text(const wal_backlog *b, bool counter)
{
	return xasprintf(
		"# HELP walc_wal_backlog_bytes WAL waiting in pg_wal for archiving.\n"
		"# TYPE walc_wal_backlog_bytes gauge\n"
		"walc_wal_backlog_bytes %llu\n"
		"# HELP walc_wal_backlog_files WAL files waiting in pg_wal for archiving.\n"
		"# TYPE walc_wal_backlog_files gauge\n"
		"walc_wal_backlog_files %llu\n"
		"# HELP walc_wal_backlog_oldest_seconds How long the oldest WAL file waiting has waited.\n"
		"# TYPE walc_wal_backlog_oldest_seconds gauge\n"
		"walc_wal_backlog_oldest_seconds %.0f\n"
		"# HELP walc_wal_backlog_limit_bytes WALG_WAL_BACKLOG_MAX (0: no limit).\n"
		"# TYPE walc_wal_backlog_limit_bytes gauge\n"
		"walc_wal_backlog_limit_bytes %llu\n"
		"# HELP walc_wal_dropped_segments_total WAL segments dropped unarchived past WALG_WAL_BACKLOG_MAX.\n"
		"# TYPE walc_wal_dropped_segments_total %s\n"
		"walc_wal_dropped_segments_total %llu\n",
		(unsigned long long)b->bytes, (unsigned long long)b->files, b->oldest_s,
		(unsigned long long)b->limit, counter ? "counter" : "gauge",
		(unsigned long long)b->dropped);
}

static char *render(void)
{
	wal_backlog b;
	char *backlog = NULL;
	if (wal_backlog_read(m_cfg, m_wal_dir, &b) == E_OK) {
		backlog = backlog_text(&b, true);
	} else {
		log_warn("metrics: %s", err_msg());
		err_clear();
	}
	pthread_mutex_lock(&m_lock);
	refresh_backup();
	double lag = m_last_time ? (double)(time(NULL) - m_last_time) : -1;
	char *out = xasprintf(
		"# HELP walc_wal_archived_total WAL files archived by this daemon.\n"
		"# TYPE walc_wal_archived_total counter\n"
		"walc_wal_archived_total %llu\n"
		"# HELP walc_wal_archived_bytes_total Bytes of WAL files archived.\n"
		"# TYPE walc_wal_archived_bytes_total counter\n"
		"walc_wal_archived_bytes_total %llu\n"
		"# HELP walc_wal_archive_failures_total Archive requests that failed.\n"
		"# TYPE walc_wal_archive_failures_total counter\n"
		"walc_wal_archive_failures_total %llu\n"
		"# HELP walc_wal_archive_seconds_total Time spent archiving.\n"
		"# TYPE walc_wal_archive_seconds_total counter\n"
		"walc_wal_archive_seconds_total %.6f\n"
		"# HELP walc_wal_fetched_total WAL files restored, by outcome.\n"
		"# TYPE walc_wal_fetched_total counter\n"
		"walc_wal_fetched_total{result=\"found\"} %llu\n"
		"walc_wal_fetched_total{result=\"missing\"} %llu\n"
		"# HELP walc_last_archived_info The last WAL file archived.\n"
		"# TYPE walc_last_archived_info gauge\n"
		"walc_last_archived_info{file=\"%s\"} 1\n"
		"# HELP walc_last_archived_timestamp_seconds When the last WAL file was archived.\n"
		"# TYPE walc_last_archived_timestamp_seconds gauge\n"
		"walc_last_archived_timestamp_seconds %lld\n"
		"# HELP walc_archive_lag_seconds Seconds since the last WAL file was archived (-1: none yet).\n"
		"# TYPE walc_archive_lag_seconds gauge\n"
		"walc_archive_lag_seconds %.0f\n"
		"# HELP walc_last_backup_timestamp_seconds Finish time of the newest backup (0: none).\n"
		"# TYPE walc_last_backup_timestamp_seconds gauge\n"
		"walc_last_backup_timestamp_seconds %.0f\n"
		"# HELP walc_last_backup_stored_bytes Stored size of the newest backup.\n"
		"# TYPE walc_last_backup_stored_bytes gauge\n"
		"walc_last_backup_stored_bytes %.0f\n"
		"# HELP walc_verified_backup_timestamp_seconds Finish time of the newest backup whose backup-verify passed (0: none).\n"
		"# TYPE walc_verified_backup_timestamp_seconds gauge\n"
		"walc_verified_backup_timestamp_seconds %.0f\n"
		"# HELP walc_verified_backup_age_seconds Seconds since the newest backup whose backup-verify passed ended (-1: none).\n"
		"# TYPE walc_verified_backup_age_seconds gauge\n"
		"walc_verified_backup_age_seconds %.0f\n",
		(unsigned long long)m_archived, (unsigned long long)m_archived_bytes,
		(unsigned long long)m_failed, m_archive_seconds, (unsigned long long)m_fetched,
		(unsigned long long)m_fetch_missing, m_last_segment, (long long)m_last_time, lag,
		m_backup_time, m_backup_bytes, m_verified_time,
		m_verified_time > 0 ? (double)time(NULL) - m_verified_time : -1);
	pthread_mutex_unlock(&m_lock);
	if (backlog != NULL) {
		char *all = xasprintf("%s%s", out, backlog);
		free(out);
		free(backlog);
		out = all;
	}
	return out;
}

static void respond(int fd, const char *status, const char *type, const char *body)
{
	char *head = xasprintf("HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
						   "Connection: close\r\n\r\n",
						   status, type, strlen(body));
	if (fd_write_all(fd, head, strlen(head), "metrics client") == E_OK)
		fd_write_all(fd, body, strlen(body), "metrics client");
	err_clear();
	free(head);
}

static void *serve_http(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept4(m_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			break; /* closed by metrics_stop */
		}
		struct timeval tv = { 5, 0 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		char req[1024];
		ssize_t n = read(fd, req, sizeof(req) - 1);
		req[n > 0 ? n : 0] = '\0';
		if (str_has_prefix(req, "GET /metrics")) {
			char *body = render();
			respond(fd, "200 OK", "text/plain; version=0.0.4", body);
			free(body);
		} else if (str_has_prefix(req, "GET /healthz")) {
			respond(fd, "200 OK", "text/plain", "ok\n");
		} else {
			respond(fd, "404 Not Found", "text/plain", "not found\n");
		}
		close(fd);
	}
	return NULL;
}

err_code metrics_start(repo *r, const wal_settings *cfg, const char *addr)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	if (colon == NULL || colon == addr || (size_t)(colon - addr) >= sizeof(host))
		return err_set(E_CONFIG, "WALG_METRICS_ADDRESS: expected host:port, got \"%s\"", addr);
	snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
							  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai;
	int gai = getaddrinfo(host, colon + 1, &hints, &ai);
	if (gai != 0)
		return err_set(E_CONFIG, "WALG_METRICS_ADDRESS %s: %s", addr, gai_strerror(gai));
	m_fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(m_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (m_fd < 0 || bind(m_fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(m_fd, 16) != 0) {
		err_code rc = err_errno(E_IO, errno, "metrics: listening on %s", addr);
		freeaddrinfo(ai);
		if (m_fd >= 0)
			close(m_fd);
		m_fd = -1;
		return rc;
	}
	freeaddrinfo(ai);
	m_repo = r;
	m_cfg = cfg;
	free(m_wal_dir);
	m_wal_dir = xasprintf("%s/pg_wal", cfg->pg->pgdata);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, PIPE_THREAD_STACK);
	int prc = pthread_create(&m_thread, &attr, serve_http, NULL);
	pthread_attr_destroy(&attr);
	if (prc != 0) {
		close(m_fd);
		m_fd = -1;
		return err_set(E_FAIL, "metrics: cannot start its thread");
	}
	return E_OK;
}

void metrics_stop(void)
{
	if (m_fd < 0)
		return;
	shutdown(m_fd, SHUT_RDWR);
	close(m_fd);
	pthread_join(m_thread, NULL);
	m_fd = -1;
	free(m_wal_dir);
	m_wal_dir = NULL;
}

static char *push_append(char *body, const char *name, const char *help, double value)
{
	char *out = xasprintf("%s# HELP %s %s\n# TYPE %s gauge\n%s %.15g\n", body, name, help, name,
						  name, value);
	free(body);
	return out;
}

char *metrics_run_text(repo *r, bool ok, double seconds, const metric *extra, size_t nextra)
{
	char *b = xstrdup("");
	b = push_append(b, "walc_run_success", "1 if the last run of the command succeeded, else 0.",
					ok ? 1 : 0);
	b = push_append(b, "walc_run_duration_seconds", "How long the last run took.", seconds);
	b = push_append(b, "walc_run_timestamp_seconds", "When the last run ended.",
					(double)time(NULL));
	if (!ok || r == NULL)
		return b;
	b = push_append(b, "walc_run_last_success_timestamp_seconds",
					"When the last successful run ended.", (double)time(NULL));
	for (size_t i = 0; i < nextra; i++)
		b = push_append(b, extra[i].name, extra[i].help, extra[i].value);
	backup_refs refs;
	if (catalog_backups(r, &refs) == E_OK) {
		b = push_append(b, "walc_backups", "Backups in the repository after the run.",
						(double)refs.len);
		catalog_backups_free(&refs);
	}
	double vfinish;
	if (newest_verified(r, &vfinish)) {
		b = push_append(b, "walc_verified_backup_timestamp_seconds",
						"Finish time of the newest backup whose backup-verify passed (0: none).",
						vfinish);
		b = push_append(b, "walc_verified_backup_age_seconds",
						"Seconds since the newest backup whose backup-verify passed ended "
						"(-1: none).",
						vfinish > 0 ? (double)time(NULL) - vfinish : -1);
	}
	double finish, stored, uncompressed;
	if (newest_backup(r, &finish, &stored, &uncompressed)) {
		if (finish > 0)
			b = push_append(b, "walc_last_backup_timestamp_seconds",
							"Finish time of the newest backup.", finish);
		b = push_append(b, "walc_last_backup_stored_bytes", "Stored size of the newest backup.",
						stored);
		b = push_append(b, "walc_last_backup_uncompressed_bytes",
						"Size of the newest backup before compression.", uncompressed);
	}
	err_clear();
	return b;
}

char *metrics_backlog_text(const wal_backlog *b)
{
	return backlog_text(b, false);
}
