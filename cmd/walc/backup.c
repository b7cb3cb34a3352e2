/* The backup verbs: backup-push, backup-fetch, backup-list. */
#include <string.h>

#include "cmd/walc/commands.h"
#include "internal/backup/backup.h"
#include "internal/daemon/daemon.h"

int cmd_backup_push(const config *cfg, const args *a)
{
	push_options opt = {
		.pgdata = a->npos > 0 ? a->pos[0] : NULL,
		.full = arg_set(a, "full"),
		.permanent = arg_set(a, "permanent"),
		.user_data = arg(a, "add-user-data"),
		.delta_from_name = arg(a, "delta-from-name"),
		.delta_from_user_data = arg(a, "delta-from-user-data"),
		.verify = arg_set(a, "verify"),
		.store_all_corrupt = arg_set(a, "store-all-corrupt"),
		.without_files_metadata = arg_set(a, "without-files-metadata"),
	};
	err_code rc = check_target_storage(arg(a, "target-storage"), "--target-storage");
	if (rc != E_OK)
		return command_fail(rc);
	double start = command_clock();
	repo r;
	rc = repo_open(cfg, &r);
	bool opened = rc == E_OK;
	if (rc == E_OK) {
		repo_limit_network(&r, (uint64_t)cfg->network_rate_limit);
		rc = backup_push(&r, cfg, &opt);
	}
	int code = command_fail(rc);
	metrics_push(opened ? &r : NULL, cfg, "backup-push", rc == E_OK, command_clock() - start);
	repo_close(&r);
	return code;
}

int cmd_backup_fetch(const config *cfg, const args *a)
{
	fetch_options opt = { .dest = a->pos[0],
						  .name = a->npos > 1 ? a->pos[1] : NULL,
						  .user_data = arg(a, "target-user-data"),
						  .mask = arg(a, "mask"),
						  .restore_spec = arg(a, "restore-spec"),
						  .fsync = !cfg->tar_disable_fsync,
						  .concurrency = (int)cfg->download_concurrency,
						  .delta = cfg->delta_restore || arg_set(a, "delta"),
						  .force = arg_set(a, "force") };
	if (opt.user_data == NULL && opt.name == NULL)
		opt.user_data = cfg->fetch_target_user_data;
	err_code rc = check_target_storage(arg(a, "target-storage"), "--target-storage");
	if (rc == E_OK && opt.mask != NULL && opt.delta)
		rc = err_set(E_CONFIG, "backup-fetch: --mask and --delta cannot be combined (a delta "
							   "restore removes the files the backup does not have)");
	if (rc == E_OK && arg_set(a, "restore-only"))
		rc = err_set(E_CONFIG, "backup-fetch --restore-only: walc does not restore single "
							   "databases or tables; restore the whole backup");
	if (rc == E_OK && (opt.name == NULL) == (opt.user_data == NULL))
		rc = err_set(E_CONFIG, opt.name == NULL
								   ? "backup-fetch: name a backup (NAME or LATEST) or give "
									 "--target-user-data"
								   : "backup-fetch: give NAME or --target-user-data, not both");
	if (rc != E_OK)
		return command_fail(rc);
	repo r;
	rc = repo_open(cfg, &r);
	if (rc == E_OK) {
		repo_limit_network(&r, (uint64_t)cfg->network_rate_limit);
		rc = backup_fetch(&r, &opt);
	}
	repo_close(&r);
	return command_fail(rc);
}

int cmd_backup_list(const config *cfg, const args *a)
{
	list_options opt = { .pretty = arg_set(a, "pretty"),
						 .json = arg_set(a, "json"),
						 .detail = arg_set(a, "detail") };
	err_code rc = check_target_storage(arg(a, "target-storage"), "--target-storage");
	if (rc != E_OK)
		return command_fail(rc);
	repo r;
	rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = backup_list(&r, &opt, stdout);
	repo_close(&r);
	return command_fail(rc);
}
