/*
 * walc: PostgreSQL backup and WAL archiving in WAL-G's repository format. main reads the
 * command line (global options anywhere, as WAL-G's cobra does), the optional WAL-G
 * configuration file, then the configuration once, and runs one verb. It owns what acts on
 * the whole process: signals, the log's file descriptor, the environment.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/walc/commands.h"
#include "cmd/walc/conffile.h"

#define MAX_FLAGS 64

/* Global options: before or after the verb, as WAL-G accepts them. */
typedef struct globals {
	const char *config_file; /* --config */
	bool turbo;				 /* --turbo: accepted, walc has no throttles to lift */
	bool help;
	config_pair flags[MAX_FLAGS]; /* --walg-s3-prefix=..., --pghost ... */
	size_t nflags;
	char *rest[256]; /* everything else, the verb first */
	int nrest;
} globals;

static err_code take_setting_flag(globals *g, const command *cmd, int argc, char **argv, int *i,
								  bool *taken)
{
	const char *w = argv[*i];
	*taken = false;
	if (!str_has_prefix(w, "--") || w[2] == '\0')
		return E_OK;
	const char *name = w + 2, *eq = strchr(name, '=');
	char flag[128];
	snprintf(flag, sizeof(flag), "%.*s", (int)(eq ? eq - name : (long)strlen(name)), name);
	/* The verb's own options come first (wal-verify --timeline is not a setting). */
	if (cmd != NULL)
		for (const opt *o = cmd->opts; o != NULL && o->name != NULL; o++)
			if (strcmp(o->name, flag) == 0)
				return E_OK;
	bool is_bool;
	const char *setting = config_flag_setting(flag, &is_bool);
	if (setting == NULL)
		return E_OK;
	const char *value;
	if (eq != NULL)
		value = eq + 1;
	else if (is_bool && (*i + 1 >= argc || argv[*i + 1][0] == '-' ||
						 config_parse_bool("", argv[*i + 1], false, &(bool){ false }) != E_OK))
		value = "true";
	else if (*i + 1 < argc)
		value = argv[++*i];
	else
		return err_set(E_CONFIG, "--%s needs a value (the setting %s)", flag, setting);
	err_clear();
	if (g->nflags == MAX_FLAGS)
		return err_set(E_CONFIG, "too many setting flags");
	g->flags[g->nflags++] = (config_pair){ setting, value };
	*taken = true;
	return E_OK;
}

static err_code split_globals(int argc, char **argv, globals *g)
{
	memset(g, 0, sizeof(*g));
	const command *cmd = NULL;
	for (int i = 1; i < argc; i++) {
		const char *w = argv[i];
		if (strcmp(w, "--") == 0) {
			for (; i < argc && g->nrest < 256; i++)
				g->rest[g->nrest++] = argv[i];
			break;
		}
		if (strcmp(w, "--config") == 0 && i + 1 < argc) {
			g->config_file = argv[++i];
			continue;
		}
		if (str_has_prefix(w, "--config=")) {
			g->config_file = w + strlen("--config=");
			continue;
		}
		if (strcmp(w, "--turbo") == 0) {
			g->turbo = true;
			continue;
		}
		if (strcmp(w, "--help") == 0 || (strcmp(w, "-h") == 0)) {
			g->help = true;
			continue;
		}
		bool taken;
		TRY(take_setting_flag(g, cmd, argc, argv, &i, &taken));
		if (taken)
			continue;
		if (g->nrest == 256)
			return err_set(E_CONFIG, "too many arguments");
		if (cmd == NULL && w[0] != '-')
			cmd = command_find(w);
		g->rest[g->nrest++] = argv[i];
	}
	return E_OK;
}

static const char *argv0 = "walc";

const char *self_path(void)
{
	static char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	if (n <= 0)
		return argv0;
	path[n] = '\0';
	return path;
}

static void on_signal(int sig)
{
	cancel_request(sig);
}

/*
 * Commands that run long stop cleanly on SIGINT and SIGTERM: the handler only asks for
 * cancellation, which their loops and transfers watch (no SA_RESTART: a blocked accept()
 * returns so the daemon can stop).
 */
static void cancel_on_signals(void)
{
	struct sigaction sa = { 0 };
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* WALG_LOG_DESTINATION: the log (stderr) appended to a file, as WAL-G does. */
static err_code redirect_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return err_errno(E_CONFIG, errno, "WALG_LOG_DESTINATION: %s", path);
	err_code rc = dup2(fd, STDERR_FILENO) < 0
		? err_errno(E_CONFIG, errno, "WALG_LOG_DESTINATION: %s", path)
		: E_OK;
	close(fd);
	return rc;
}

/*
 * WAL-G writes its merged settings back into its environment, so that libpq (PG*) and the
 * other readers of the environment see a file's or a flag's values: so does walc. PGAPPNAME
 * goes as walc resolved it (its default included), for libpq to name walc's sessions.
 */
static void export_settings(const globals *g, const conffile *f, const config *cfg)
{
	for (size_t i = 0; i < g->nflags; i++)
		setenv(g->flags[i].name, g->flags[i].value, 1);
	for (size_t i = 0; i < f->n; i++)
		if (getenv(f->pairs[i].name) == NULL)
			setenv(f->pairs[i].name, f->pairs[i].value, 0);
	setenv("PGAPPNAME", cfg->pg_appname, 1);
}

int main(int argc, char **argv)
{
	config cfg;
	globals g;
	conffile file;

	signal(SIGPIPE, SIG_IGN);
	argv0 = argv[0];
	log_setup(LOG_INFO, false, "walc");
	if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-v") == 0))
		return cmd_version(NULL, NULL);
	if (split_globals(argc, argv, &g) != E_OK)
		return command_fail(E_CONFIG);
	if (g.nrest == 0) {
		if (g.help)
			return cmd_help(NULL, NULL);
		fprintf(stderr, "usage: walc COMMAND [ARGS]; see walc help\n");
		return 1;
	}
	const command *cmd = command_find(g.rest[0]);
	if (cmd == NULL) {
		log_error("unknown command \"%s\"; see walc help", g.rest[0]);
		return 1;
	}
	/*
	 * Run once a WAL segment by archive_command and restore_command, these two fill fresh
	 * buffers at once (a wal-push's CPU here was half first touches of memory): huge pages,
	 * asked for before the first allocation, which the process's first memory segment keeps.
	 * Not for the long commands (backup-push, daemon): their peak RSS would grow.
	 */
	bool per_segment = strcmp(cmd->name, "wal-push") == 0 || strcmp(cmd->name, "wal-fetch") == 0;
	if (per_segment)
		mem_use_huge_pages();
	log_setup(LOG_INFO, false, cmd->name);
	/* Help and usage need no configuration at all: `walc backup-push --help` works anywhere. */
	if (g.help) {
		command_print_help(cmd, stdout);
		return 0;
	}
	args a;
	if (args_parse(cmd, g.nrest - 1, g.rest + 1, &a) != E_OK)
		return command_usage(cmd, err_msg());
	if (cmd->words_ok != NULL && !cmd->words_ok(&a))
		return command_usage(cmd, NULL);
	if (cmd->run == cmd_help || cmd->run == cmd_version)
		return cmd->run(NULL, &a);

	err_code rc = conffile_load(g.config_file, &file);
	if (rc == E_OK) {
		config_sources src = { g.flags, g.nflags, file.pairs, file.n, file.path };
		rc = config_load_from(&cfg, cmd->needs_storage, &src);
	} else {
		memset(&cfg, 0, sizeof(cfg));
	}
	/* The log's shape comes first, so that warnings and the error below have it. */
	if (cfg.log.loaded) {
		if (cfg.log.destination != NULL) {
			err_code lrc = redirect_log(cfg.log.destination);
			if (lrc != E_OK && rc == E_OK)
				rc = lrc;
		}
		log_setup(cfg.log.level, cfg.log.json, cmd->name);
		log_claim_stderr();
	}
	/*
	 * Unknown names are reported even when another setting is wrong; by the commands that
	 * run once a WAL segment (and by the prefetcher they start) only at DEVEL level, so that
	 * a harmless name does not add lines to PostgreSQL's log with every segment.
	 */
	config_warn_unknown(per_segment || cmd->run == cmd_wal_prefetch);
	if (g.turbo)
		log_debug("--turbo has no effect in walc (it has no throttles beyond the rate limits "
				  "you set)");
	if (rc != E_OK) {
		/* `walc env` still lists what is set, so the mistake can be found. */
		if (cmd->run == cmd_env && cfg.log.loaded)
			cmd_env(NULL, &a);
		int code = command_fail(rc);
		config_free(&cfg);
		conffile_free(&file);
		return code;
	}
	if (cmd->run == cmd_backup_push || cmd->run == cmd_daemon || cmd->run == cmd_wal_receive ||
		cmd->run == cmd_copy)
		cancel_on_signals();
	/* env shows where each value came from, which exporting would hide. */
	if (cmd->run != cmd_env)
		export_settings(&g, &file, &cfg);
	config_log_env();

	int code = cmd->run(&cfg, &a);
	config_free(&cfg);
	conffile_free(&file);
	return code;
}
