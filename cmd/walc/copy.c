/*
 * copy: WAL-G's `copy --from FILE --to FILE`: backups and their WAL from the repository one
 * configuration file names into the one another names, as stored. With --every it runs again
 * and again: a second repository that keeps up with the first (docs/ARCHITECTURE.md, "A
 * second repository").
 */
#include <string.h>
#include <time.h>

#include "cmd/walc/commands.h"
#include "cmd/walc/pushgw.h"
#include "cmd/walc/conffile.h"
#include "internal/backup/backup.h"

/* The repository a copy file names: its storage settings, the rest of the configuration's. */
static err_code open_side(const config *cfg, const char *flag, const char *path, bool reading,
						  repo **out)
{
	*out = NULL;
	if (path == NULL || path[0] == '\0')
		return err_set(E_CONFIG, "copy: %s FILE is required (a WAL-G configuration file)", flag);
	conffile f;
	TRY(conffile_load(path, &f));
	char *what = xasprintf("copy %s %s", flag, path);
	/* The rest of the configuration is borrowed from cfg for the opening. */
	config own = *cfg;
	err_code rc = config_for_storage(&cfg->storage, what, f.pairs, f.n, CFS_FILE, &own.storage);
	if (rc == E_OK)
		rc = config_repo_open(&own, reading ? REPO_READ : REPO_WRITE, NULL, out);
	if (rc != E_OK && !str_has_prefix(err_msg(), what))
		err_wrap(rc, "%s", what);
	config_storage_free(&own.storage);
	free(what);
	conffile_free(&f);
	return rc;
}

/* One copy, its outcome pushed to the Pushgateway with the lag it measured. */
static err_code pass(const config *cfg, const args *a, const copy_options *o)
{
	repo *from = NULL, *to = NULL;
	double start = command_clock();
	copy_result res;
	memset(&res, 0, sizeof(res));
	err_code rc = open_side(cfg, "--from", arg(a, "from"), true, &from);
	bool opened = false;
	if (rc == E_OK) {
		rc = open_side(cfg, "--to", arg(a, "to"), false, &to);
		opened = rc == E_OK;
		if (rc == E_OK) {
			repo_limit_network(to, (uint64_t)cfg->network_rate_limit);
			rc = backup_copy(from, to, o, &res);
		}
	}
	if (rc != E_OK)
		log_error("%s", err_msg());
	const metric m[] = {
		{ "walc_copy_lag_seconds",
		  "How long the oldest object the run copied had been in the first repository (0: the "
		  "second held everything already).",
		  res.lag_seconds },
		{ "walc_copy_objects", "Objects the run copied.", (double)res.copied },
		{ "walc_copy_bytes", "Bytes the run copied.", (double)res.copied_bytes },
		{ "walc_copy_backups", "Backups the run copied or found copied.", (double)res.backups },
	};
	pushgw_run(opened ? to : NULL, cfg, "copy", rc == E_OK, command_clock() - start, m,
			   sizeof(m) / sizeof(m[0]));
	repo_close(to);
	repo_close(from);
	return rc;
}

int cmd_copy(const config *cfg, const args *a)
{
	copy_options o = { .backup_name = arg(a, "backup-name"),
					   .with_history = arg_set(a, "with-history"),
					   .concurrency = (int)cfg->storage.upload_concurrency,
					   .seg_size = (uint64_t)cfg->pg.pg_wal_size_mb << 20 };
	if (arg_set(a, "with-history") && arg_set(a, "without-history"))
		return command_fail(err_set(E_CONFIG, "copy: --with-history and --without-history "
											  "contradict each other"));
	long every_ms = 0;
	if (arg(a, "every") != NULL) {
		err_code rc = config_parse_duration("copy --every", arg(a, "every"), &every_ms);
		if (rc == E_OK && every_ms < 1000)
			rc = err_set(E_CONFIG, "copy --every: at least 1s, got \"%s\"", arg(a, "every"));
		if (rc != E_OK)
			return command_fail(rc);
	}
	if (every_ms == 0) {
		err_code rc = pass(cfg, a, &o);
		return rc == E_OK ? 0 : 1;
	}
	/* A pass that fails is reported (log, Pushgateway) and the next one tries again. */
	while (cancel_requested() == 0) {
		double started = command_clock();
		pass(cfg, a, &o);
		err_clear();
		while (cancel_requested() == 0 && (command_clock() - started) * 1000 < (double)every_ms) {
			struct timespec ts = { 0, 200 * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	log_info("copy: stopped");
	return 0;
}
