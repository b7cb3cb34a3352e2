/* daemon-internal: counters the socket side updates and the HTTP side renders. */
#ifndef WALC_INTERNAL_DAEMON_METRICS_H
#define WALC_INTERNAL_DAEMON_METRICS_H

#include "internal/daemon/daemon.h"

void metrics_archived(const char *name, uint64_t bytes, double seconds);
void metrics_failed(void);
void metrics_fetched(bool found);
/*
 * Serves /metrics and /healthz on addr ("host:port") from a thread of its own; the backlog is
 * that of cfg->pg->pgdata's pg_wal (both borrowed until metrics_stop).
 */
err_code metrics_start(repo *r, const wal_settings *cfg, const char *addr);
void metrics_stop(void);

#endif
