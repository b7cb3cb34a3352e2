/* The wal-push and wal-fetch verbs. */
#include "cmd/walc/commands.h"
#include "internal/wal/wal.h"

static int usage(const char *u)
{
	log_error("usage: walc %s", u);
	return 1;
}

int cmd_wal_push(const config *cfg, int argc, char **argv)
{
	repo r;
	if (argc != 2)
		return usage(command_find("wal-push")->usage);
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = wal_push(&r, cfg, argv[1]);
	repo_close(&r);
	return command_fail(rc);
}

int cmd_wal_fetch(const config *cfg, int argc, char **argv)
{
	repo r;
	if (argc != 3)
		return usage(command_find("wal-fetch")->usage);
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = wal_fetch(&r, cfg, argv[1], argv[2]);
	repo_close(&r);
	int code = command_fail(rc);
	return rc == E_NOTFOUND ? EXIT_NOT_FOUND : code;
}
