/* Verbs that describe walc itself: help, env, version. */
#include <stdio.h>

#include "cmd/walc/commands.h"

#ifndef WALC_VERSION
#define WALC_VERSION "0.0.0"
#endif
#ifndef WALC_GIT_REV
#define WALC_GIT_REV "unknown"
#endif

int cmd_version(const config *cfg, const args *a)
{
	(void)cfg;
	(void)a;
	printf("walc %s (%s), WAL-G repository format (basebackups_005, wal_005)\n", WALC_VERSION,
		   WALC_GIT_REV);
	return 0;
}

int cmd_env(const config *cfg, const args *a)
{
	(void)cfg;
	(void)a;
	config_print_env(stdout);
	return 0;
}

int cmd_help(const config *cfg, const args *a)
{
	(void)cfg;
	if (a != NULL && a->npos >= 1) {
		const command *c = command_find(a->pos[0]);
		if (c == NULL) {
			log_error("unknown command \"%s\"; see walc help", a->pos[0]);
			return 1;
		}
		command_print_help(c, stdout);
		return 0;
	}
	printf("walc: PostgreSQL backup and WAL archiving in WAL-G's repository format.\n"
		   "Configured by environment variables (walc env lists them), or WAL-G's JSON\n"
		   "configuration file (--config FILE, WALG_CONFIG_PATH, ~/.walg.json) and per-setting\n"
		   "flags (--walg-s3-prefix=...). walc help COMMAND shows a command's arguments.\n\n"
		   "Commands:\n");
	for (const command *const *c = command_all(); *c != NULL; c++)
		if ((*c)->summary != NULL)
			printf("  %-13s %s\n", (*c)->name, (*c)->summary);
	return 0;
}
