/* The command table: each verb's entry point, usage and help, shared by main and help. */
#ifndef WALC_CMD_WALC_COMMANDS_H
#define WALC_CMD_WALC_COMMANDS_H

#include "internal/core/core.h"

/* WAL-G's exit code for "archive does not exist" in wal-fetch. */
#define EXIT_NOT_FOUND 74

typedef struct command {
	const char *name;
	const char *usage;
	const char *summary;
	const char *help;
	bool needs_storage;
	/* argv[0] is the command name. Returns the process exit code. */
	int (*run)(const config *cfg, int argc, char **argv);
} command;

const command *command_find(const char *name);
const command *const *command_all(void);

int cmd_wal_push(const config *cfg, int argc, char **argv);
int cmd_wal_fetch(const config *cfg, int argc, char **argv);
int cmd_backup_push(const config *cfg, int argc, char **argv);
int cmd_backup_fetch(const config *cfg, int argc, char **argv);
int cmd_backup_list(const config *cfg, int argc, char **argv);
int cmd_wal_show(const config *cfg, int argc, char **argv);
int cmd_wal_verify(const config *cfg, int argc, char **argv);
int cmd_delete(const config *cfg, int argc, char **argv);
int cmd_backup_mark(const config *cfg, int argc, char **argv);
int cmd_st(const config *cfg, int argc, char **argv);
int cmd_daemon(const config *cfg, int argc, char **argv);
int cmd_env(const config *cfg, int argc, char **argv);
int cmd_help(const config *cfg, int argc, char **argv);
int cmd_version(const config *cfg, int argc, char **argv);

/* `walc help COMMAND`: usage and help text. */
void command_print_help(const command *c, FILE *out);

/* Logs the current error as one line and returns the exit code for it. */
int command_fail(err_code rc);

#endif
