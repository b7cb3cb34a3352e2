/* Verbs that describe walc itself: help, env, version. */
#include <stdio.h>

#include "cmd/walc/commands.h"

#ifndef WALC_VERSION
#define WALC_VERSION "0.0.0"
#endif
#ifndef WALC_GIT_REV
#define WALC_GIT_REV "unknown"
#endif

int cmd_version(const config *cfg, int argc, char **argv)
{
	(void)cfg;
	(void)argc;
	(void)argv;
	printf("walc %s (%s), WAL-G repository format (basebackups_005, wal_005)\n", WALC_VERSION,
		   WALC_GIT_REV);
	return 0;
}

int cmd_env(const config *cfg, int argc, char **argv)
{
	(void)cfg;
	(void)argc;
	(void)argv;
	config_print_env(stdout);
	return 0;
}

void command_print_help(const command *c, FILE *out)
{
	fprintf(out, "usage: walc %s\n\n%s\n", c->usage, c->help);
}

int cmd_help(const config *cfg, int argc, char **argv)
{
	(void)cfg;
	if (argc >= 2) {
		const command *c = command_find(argv[1]);
		if (c == NULL) {
			log_error("unknown command \"%s\"; see walc help", argv[1]);
			return 1;
		}
		command_print_help(c, stdout);
		return 0;
	}
	printf("walc: PostgreSQL backup and WAL archiving in WAL-G's repository format.\n"
		   "Configured only by environment variables (walc env lists them).\n"
		   "walc help COMMAND shows a command's arguments.\n\nCommands:\n");
	for (const command *const *c = command_all(); *c != NULL; c++)
		printf("  %-13s %s\n", (*c)->name, (*c)->summary);
	return 0;
}
