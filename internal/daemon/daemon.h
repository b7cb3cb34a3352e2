/*
 * daemon: `walc daemon SOCKET` serves WAL-G's socket protocol (reference §15.1) so PostgreSQL's
 * archive module (cmd/walc_archive) archives without a process per segment; optionally
 * Prometheus metrics and a health check over HTTP.
 */
#ifndef WALC_INTERNAL_DAEMON_DAEMON_H
#define WALC_INTERNAL_DAEMON_DAEMON_H

#include "internal/core/core.h"
#include "internal/repo/repo.h"
#include "internal/wal/wal.h"

/* Message types and answers of the socket protocol. */
#define DAEMON_CHECK 'C'
#define DAEMON_PUSH 'F'
#define DAEMON_FETCH 'f'
#define DAEMON_OK 'O'
#define DAEMON_ERROR 'E'
#define DAEMON_MISSING 'N'

/*
 * Runs until SIGINT or SIGTERM: archives into push, restores from fetch (the same repository,
 * opened for writing and for reading: with failover storages, the first alive storage and
 * all of them). metrics_addr ("host:port" or NULL) serves /metrics and /healthz. Requests are
 * served concurrently; one failing never stops the daemon.
 */
err_code daemon_run(repo *push, repo *fetch, const wal_settings *cfg, const char *socket_path,
					const char *metrics_addr);

/* A command's own gauges, pushed with its run's (metrics_run_text). */
typedef struct metric {
	const char *name;
	const char *help;
	double value;
} metric;
/*
 * What the Pushgateway gets for one run of a command ("backup-push", "delete"; docs/DEPLOY.md
 * names the metrics), in Prometheus text: outcome and duration; after a success also the
 * command's gauges (extra) and the repository's newest backup and number of backups (r NULL:
 * the repository did not open). A failure's text names only the run's outcome, so that a POST
 * of it leaves the last success's metrics in place. The caller frees it.
 */
char *metrics_run_text(repo *r, bool ok, double seconds, const metric *extra, size_t nextra);
/*
 * The WAL backlog an archiving command reported (wal-push, wal-receive), as the Pushgateway's
 * gauges of its last report. The caller frees it.
 */
char *metrics_backlog_text(const wal_backlog *b);

/*
 * Parses one request from buf (len bytes): *type, the body, and for 'f' the two arguments.
 * E_CORRUPT on a malformed message. Exposed for tests and fuzzing.
 */
typedef struct daemon_request {
	char type;
	char name[256];
	char dest[4096];
} daemon_request;
err_code daemon_parse(const unsigned char *buf, size_t len, daemon_request *out);

/*
 * The client side, as WAL-G's walg-daemon-client speaks it: one request of type (DAEMON_PUSH
 * with a file name, DAEMON_FETCH with a name and a destination) sent to the daemon at socket,
 * connecting within connect_ms and answered within op_ms; *answer is the daemon's byte.
 * An error when it could not be asked or gave no answer.
 */
err_code daemon_ask(const char *socket_path, char type, const char *const *argv, int argc,
					long connect_ms, long op_ms, char *answer);

/*
 * The file a wal-fetch request's destination names (PGDATA-relative, as PostgreSQL's %p, or
 * absolute), newly allocated; NULL unless it is a file directly in pgdata/pg_wal. Exposed for
 * tests.
 */
char *daemon_fetch_path(const char *pgdata, const char *dest);

#endif
