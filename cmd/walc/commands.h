/*
 * The command table: each verb's arguments and options as data, its help, and its entry
 * point. One parser (args.c) reads every command line and one usage() prints every verb's.
 */
#ifndef WALC_CMD_WALC_COMMANDS_H
#define WALC_CMD_WALC_COMMANDS_H

#include <time.h>

#include "cmd/walc/settings/config.h"
#include "internal/core/core.h"

/* WAL-G's exit code for "archive does not exist" in wal-fetch. */
#define EXIT_NOT_FOUND 74

/* One option of a verb: --name, -s, with a value or not. */
typedef struct opt {
	const char *name;  /* "full" for --full */
	char shorthand;	   /* 'f' for -f, or 0 */
	const char *value; /* the value's name in usage ("JSON"), or NULL for a flag */
	const char *help;  /* NULL: WAL-G's, accepted without effect (walc does not need it) */
} opt;

#define ARGS_MAX_POS 8
#define ARGS_MAX_OPTS 24

typedef struct command command;

/* A parsed command line: positional arguments, and each option's value ("" for a flag). */
typedef struct args {
	const command *cmd;
	const char *pos[ARGS_MAX_POS];
	int npos;
	const char *val[ARGS_MAX_OPTS];
} args;

struct command {
	const char *name;
	const char *positional; /* usage of the positional arguments: "WAL_NAME DESTINATION" */
	int min_pos, max_pos;
	const opt *opts;		/* ends with { NULL } */
	const char *summary;
	const char *help;
	bool needs_storage;
	/* Returns the process exit code. */
	int (*run)(const config *cfg, const args *a);
	/* Optional: checks the positional words before any configuration is read. */
	bool (*words_ok)(const args *a);
};

const command *command_find(const char *name);
const command *const *command_all(void);

/*
 * Parses argv (the words after the verb) against c's options. A mistake is E_CONFIG with
 * one line saying what is wrong; the caller prints the usage.
 */
err_code args_parse(const command *c, int argc, char **argv, args *out);
/* The option's value ("" for a flag given), or NULL when absent. name must be in the table. */
const char *arg(const args *a, const char *name);
bool arg_set(const args *a, const char *name);
/* `walc help COMMAND`: usage, options and help text. */
void command_print_help(const command *c, FILE *out);
/* Logs one line, why (may be NULL) and "usage: walc ...", and returns 1 (a usage error). */
int command_usage(const command *c, const char *why);

/* Logs the current error as one line and returns the exit code for it. */
int command_fail(err_code rc);

/* Seconds on the monotonic clock, for the durations the verbs report. */
static inline double command_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Publishes one run of a command ("backup-push", "delete") to the Pushgateway at
 * cfg->pushgateway_url (metrics_run_text). A failed push is a warning only: it never changes
 * the command's outcome.
 */
typedef struct repo repo;
typedef struct metric metric;
void metrics_push(repo *r, const config *cfg, const char *command, bool ok, double seconds);
/* metrics_push, with the command's gauges (after a success only). */
void metrics_push_with(repo *r, const config *cfg, const char *command, bool ok, double seconds,
					   const metric *extra, size_t nextra);
/*
 * The WAL backlog an archiving command reported (wal-push, wal-receive), pushed to the
 * Pushgateway as that command's gauges alone (a timeout of seconds: it runs inside archiving).
 */
typedef struct wal_backlog wal_backlog;
void metrics_push_backlog(const config *cfg, const char *command, const wal_backlog *b);

/* The storage a command uses alone: --target-storage, else WALG_TARGET_STORAGE, else NULL. */
const char *target_storage(const config *cfg, const args *a);

int cmd_wal_push(const config *cfg, const args *a);
int cmd_wal_fetch(const config *cfg, const args *a);
int cmd_backup_push(const config *cfg, const args *a);
int cmd_backup_fetch(const config *cfg, const args *a);
int cmd_backup_list(const config *cfg, const args *a);
int cmd_backup_verify(const config *cfg, const args *a);
int cmd_wal_show(const config *cfg, const args *a);
int cmd_wal_verify(const config *cfg, const args *a);
int cmd_delete(const config *cfg, const args *a);
int cmd_backup_mark(const config *cfg, const args *a);
int cmd_st(const config *cfg, const args *a);
int cmd_copy(const config *cfg, const args *a);
int cmd_rekey(const config *cfg, const args *a);
int cmd_daemon(const config *cfg, const args *a);
int cmd_daemon_client(const config *cfg, const args *a);
int cmd_wal_receive(const config *cfg, const args *a);
int cmd_wal_restore(const config *cfg, const args *a);
int cmd_catchup_push(const config *cfg, const args *a);
int cmd_catchup_fetch(const config *cfg, const args *a);
int cmd_catchup_list(const config *cfg, const args *a);
int cmd_catchup_unsupported(const config *cfg, const args *a);
int cmd_env(const config *cfg, const args *a);
int cmd_help(const config *cfg, const args *a);
int cmd_version(const config *cfg, const args *a);
int cmd_wal_prefetch(const config *cfg, const args *a);
/*
 * Starts the detached prefetcher for the segments after name (wal-fetch's follow-up), from
 * the storage target alone when not NULL.
 */
void spawn_prefetch(const char *name, const char *dest, const char *target);
/* This program's path, for re-executing it (/proc/self/exe, else argv[0]). */
const char *self_path(void);
bool delete_words_ok(const args *a);
bool wal_verify_words_ok(const args *a);
bool st_words_ok(const args *a);

#endif
