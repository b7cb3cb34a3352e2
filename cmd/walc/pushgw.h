/* The Pushgateway (WALG_PUSHGATEWAY_URL): what the verbs publish of their runs. */
#ifndef WALC_CMD_WALC_PUSHGW_H
#define WALC_CMD_WALC_PUSHGW_H

#include "cmd/walc/settings/config.h"
#include "internal/daemon/daemon.h"

/*
 * Publishes one run of a command to the Pushgateway at cfg->pushgateway_url, when set:
 * metrics_run_text of r, ok, seconds and extra, grouped by the command's name. A failed push is
 * a warning only: it never changes the command's outcome.
 */
void pushgw_run(repo *r, const config *cfg, const char *command, bool ok, double seconds,
				const metric *extra, size_t nextra);
/* The WAL backlog an archiving command reported (wal-push, wal-receive), pushed likewise. */
void pushgw_backlog(const config *cfg, const char *command, const wal_backlog *b);

#endif
