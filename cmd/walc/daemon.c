/*
 * The long-running verbs: the daemon (WAL-G's socket protocol for the archive module, and
 * optional metrics) and wal-receive (WAL over physical replication).
 */
#include "cmd/walc/commands.h"
#include "internal/daemon/daemon.h"
#include "internal/wal/wal.h"

int cmd_daemon(const config *cfg, const args *a)
{
	/* One stuck request must not end the daemon: no whole-process deadline here. */
	config own = *cfg;
	own.wal_push_timeout_ms = 0;
	repo r;
	err_code rc = repo_open(&own, &r);
	if (rc == E_OK)
		rc = daemon_run(&r, &own, a->pos[0], own.metrics_address);
	repo_close(&r);
	return command_fail(rc);
}

int cmd_wal_receive(const config *cfg, const args *a)
{
	(void)a;
	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = wal_receive(&r, cfg);
	repo_close(&r);
	return command_fail(rc);
}
