/*
 * rekey (walc only): the repository's objects re-encrypted from older keys of the ring
 * (WALG_OLD_KEY_PATHS) to the current key, on every storage of a failover configuration.
 */
#include <stdlib.h>

#include "cmd/walc/commands.h"
#include "internal/backup/backup.h"
#include "internal/storage/storage.h"

/* One storage (target; NULL: the configuration's only one). */
static err_code rekey_storage(const config *cfg, const args *a, const char *target,
							  uint64_t *problems)
{
	repo *r = NULL;
	rekey_options o = { .names = a->pos, .nnames = (size_t)a->npos,
						.concurrency = (int)cfg->storage.upload_concurrency };
	err_code rc = config_repo_open(cfg, REPO_READ, target, &r);
	if (rc == E_OK) {
		repo_limit_network(r, (uint64_t)cfg->network_rate_limit);
		rc = backup_rekey(r, &o, problems, stdout);
	}
	repo_close(r);
	return rc;
}

int cmd_rekey(const config *cfg, const args *a)
{
	uint64_t problems = 0, more;
	err_code rc = E_OK;
	if (storage_has_failovers(&cfg->storage)) {
		/* each storage alone: a backup copied into two is rekeyed in both */
		char **names = NULL;
		size_t n = 0;
		rc = storage_names(&cfg->storage, &names, &n);
		for (size_t i = 0; rc == E_OK && i < n; i++) {
			log_info("rekey: storage %s", names[i]);
			rc = rekey_storage(cfg, a, names[i], &more);
			problems += more;
		}
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
	} else {
		rc = rekey_storage(cfg, a, NULL, &problems);
	}
	if (rc == E_OK && problems > 0) {
		log_error("rekey: %llu object%s left as %s (see PROBLEM lines)",
				  (unsigned long long)problems, problems == 1 ? "" : "s",
				  problems == 1 ? "it was" : "they were");
		return 1;
	}
	return command_fail(rc);
}
