/* The wal-push and wal-fetch verbs. */
#include <string.h>

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

int cmd_wal_show(const config *cfg, int argc, char **argv)
{
	bool detailed = false, without_backups = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--detailed-json") == 0)
			detailed = true;
		else if (strcmp(argv[i], "--without-backups") == 0)
			without_backups = true;
		else
			return usage(command_find("wal-show")->usage);
	}
	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = wal_show(&r, cfg, detailed, without_backups, stdout);
	repo_close(&r);
	return command_fail(rc);
}

int cmd_wal_verify(const config *cfg, int argc, char **argv)
{
	bool integrity = false, timeline = false, json = false, failed = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "integrity") == 0)
			integrity = true;
		else if (strcmp(argv[i], "timeline") == 0)
			timeline = true;
		else if (strcmp(argv[i], "--json") == 0)
			json = true;
		else
			return usage(command_find("wal-verify")->usage);
	}
	if (!integrity && !timeline)
		return usage(command_find("wal-verify")->usage);
	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = wal_verify(&r, cfg, integrity, timeline, json, &failed, stdout);
	repo_close(&r);
	if (rc == E_OK && failed) {
		log_error("wal-verify: a check reported FAILURE");
		return 1;
	}
	return command_fail(rc);
}
