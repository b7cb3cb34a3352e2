/*
 * The long-running verbs: the daemon (WAL-G's socket protocol for the archive module, and
 * optional metrics) and wal-receive (WAL over physical replication); and the daemon's client.
 */
#include "cmd/walc/commands.h"
#include "cmd/walc/pushgw.h"
#include "internal/daemon/daemon.h"
#include "internal/storage/storage.h"
#include "internal/wal/wal.h"

#include <string.h>

int cmd_daemon(const config *cfg, const args *a)
{
	/* One stuck request must not end the daemon: no whole-process deadline here. */
	repo *push = NULL, *fetch = NULL;
	const char *target = cfg->storage.target_storage;
	/* One repository serves both unless failover storages make writing and reading differ. */
	bool two = storage_has_failovers(&cfg->storage) || target != NULL;
	err_code rc = config_repo_open(cfg, REPO_WRITE, target, &push);
	if (rc == E_OK && two)
		rc = config_repo_open(cfg, REPO_READ, target, &fetch);
	if (rc == E_OK)
		rc = daemon_run(push, two ? fetch : push, &cfg->wal, a->pos[0], cfg->metrics_address);
	repo_close(fetch);
	repo_close(push);
	return command_fail(rc);
}

static void report_backlog(void *arg, const wal_backlog *b)
{
	pushgw_backlog(arg, "wal-receive", b);
}

int cmd_wal_receive(const config *cfg, const args *a)
{
	(void)a;
	repo *r = NULL;
	err_code rc = config_repo_open(cfg, REPO_WRITE, cfg->storage.target_storage, &r);
	if (rc == E_OK)
		rc = wal_receive(r, &cfg->wal, report_backlog, (void *)(uintptr_t)cfg);
	repo_close(r);
	return command_fail(rc);
}

int cmd_daemon_client(const config *cfg, const args *a)
{
	(void)cfg;
	long op_ms = 60000, connect_ms = 5000;
	const char *verb = a->pos[1];
	char type = strcmp(verb, "wal-push") == 0 ? DAEMON_PUSH
		: strcmp(verb, "wal-fetch") == 0	  ? DAEMON_FETCH
											  : 0;
	int want = type == DAEMON_PUSH ? 1 : 2;
	err_code rc = E_OK;
	if (type == 0)
		rc = err_set(E_CONFIG, "daemon-client: unsupported command %s (wal-push or wal-fetch)", verb);
	else if (a->npos - 2 != want)
		rc = err_set(E_CONFIG, "daemon-client: %s takes %s", verb,
					 want == 1 ? "one file name" : "a file name and a destination");
	if (rc == E_OK && arg(a, "timeout") != NULL)
		rc = config_parse_duration("--timeout", arg(a, "timeout"), &op_ms);
	if (rc == E_OK && arg(a, "connection-timeout") != NULL)
		rc = config_parse_duration("--connection-timeout", arg(a, "connection-timeout"), &connect_ms);
	char answer = 0;
	if (rc == E_OK)
		rc = daemon_ask(a->pos[0], type, a->pos + 2, want, connect_ms, op_ms, &answer);
	if (rc != E_OK)
		return command_fail(rc);
	if (answer == DAEMON_OK)
		return 0;
	if (answer == DAEMON_MISSING) {
		log_info("daemon-client: the archive has no %s", a->pos[2]);
		return EXIT_NOT_FOUND;
	}
	log_error("daemon-client: %s %s failed in the daemon (answer %c); its log says why", verb,
			  a->pos[2], answer >= 0x20 && answer < 0x7f ? answer : '?');
	return 1;
}
