/* The backup verbs: backup-fetch, backup-list. */
#include <string.h>

#include "cmd/walc/commands.h"
#include "internal/backup/backup.h"

static int usage(const char *verb)
{
	log_error("usage: walc %s", command_find(verb)->usage);
	return 1;
}

int cmd_backup_push(const config *cfg, int argc, char **argv)
{
	push_options opt = { 0 };
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--full") == 0 || strcmp(argv[i], "-f") == 0)
			opt.full = true;
		else if (strcmp(argv[i], "--permanent") == 0 || strcmp(argv[i], "-p") == 0)
			opt.permanent = true;
		else if (strcmp(argv[i], "--add-user-data") == 0 && i + 1 < argc)
			opt.user_data = argv[++i];
		else if (str_has_prefix(argv[i], "--add-user-data="))
			opt.user_data = argv[i] + strlen("--add-user-data=");
		else if (strcmp(argv[i], "--delta-from-name") == 0 && i + 1 < argc)
			opt.delta_from_name = argv[++i];
		else if (strcmp(argv[i], "--delta-from-user-data") == 0 && i + 1 < argc)
			opt.delta_from_user_data = argv[++i];
		else if (strcmp(argv[i], "--verify") == 0 || strcmp(argv[i], "-v") == 0)
			opt.verify = true;
		else if (strcmp(argv[i], "--store-all-corrupt") == 0 || strcmp(argv[i], "-s") == 0)
			opt.store_all_corrupt = true;
		else if (argv[i][0] == '-' || opt.pgdata != NULL)
			return usage("backup-push");
		else
			opt.pgdata = argv[i];
	}
	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK) {
		repo_limit_network(&r, cfg->network_rate_limit);
		rc = backup_push(&r, cfg, &opt);
	}
	repo_close(&r);
	return command_fail(rc);
}

int cmd_backup_fetch(const config *cfg, int argc, char **argv)
{
	fetch_options opt = { .fsync = !cfg->tar_disable_fsync,
						  .concurrency = cfg->download_concurrency,
						  .delta = cfg->delta_restore };
	const char *pos[2] = { NULL, NULL };
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--restore-spec") == 0 && i + 1 < argc)
			opt.restore_spec = argv[++i];
		else if (str_has_prefix(argv[i], "--restore-spec="))
			opt.restore_spec = argv[i] + strlen("--restore-spec=");
		else if (strcmp(argv[i], "--delta") == 0)
			opt.delta = true;
		else if (strcmp(argv[i], "--force") == 0)
			opt.force = true;
		else if (argv[i][0] == '-' && argv[i][1] != '\0')
			return usage("backup-fetch");
		else if (npos < 2)
			pos[npos++] = argv[i];
		else
			return usage("backup-fetch");
	}
	if (npos != 2)
		return usage("backup-fetch");
	opt.dest = pos[0];
	opt.name = pos[1];

	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK) {
		repo_limit_network(&r, cfg->network_rate_limit);
		rc = backup_fetch(&r, &opt);
	}
	repo_close(&r);
	return command_fail(rc);
}

int cmd_backup_list(const config *cfg, int argc, char **argv)
{
	list_options opt = { 0 };
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--pretty") == 0)
			opt.pretty = true;
		else if (strcmp(argv[i], "--json") == 0)
			opt.json = true;
		else if (strcmp(argv[i], "--detail") == 0)
			opt.detail = true;
		else
			return usage("backup-list");
	}
	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = backup_list(&r, &opt, stdout);
	repo_close(&r);
	return command_fail(rc);
}
