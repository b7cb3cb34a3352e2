/* The backup verbs: backup-push, backup-fetch, backup-list. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "cmd/walc/commands.h"
#include "cmd/walc/pushgw.h"
#include "internal/backup/backup.h"
#include "internal/pg/pg.h"

/*
 * backup-push, backup-fetch and backup-verify free big buffers (parts, codec windows, name
 * lists, a level's file table) while they run. glibc raises its mmap threshold to the largest
 * buffer freed, so later ones come from per-thread arenas that fragment and stay resident: a
 * fixed threshold gives them back to the system (measured at 200,000 files: backup-push
 * peaked at 26 MiB with the default, 21 with this; a delta chain's backup-fetch at 77 and 52,
 * its backup-verify at 87 and 62). musl, the static build's libc, maps big allocations and
 * returns them already.
 */
static void return_big_buffers(void)
{
#ifdef __GLIBC__
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
#endif
}

int cmd_backup_push(const config *cfg, const args *a)
{
	return_big_buffers();
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
	double start = command_clock();
	repo *r = NULL;
	err_code rc = config_repo_open(cfg, REPO_WRITE, target_storage(cfg, a), &r);
	bool opened = rc == E_OK;
	if (rc == E_OK) {
		repo_limit_network(r, (uint64_t)cfg->network_rate_limit);
		rc = backup_push(r, &cfg->backup, &opt);
	}
	int code = command_fail(rc);
	pushgw_run(opened ? r : NULL, cfg, "backup-push", rc == E_OK, command_clock() - start, NULL,
			   0);
	repo_close(r);
	return code;
}

/* restore_command text: shell-quoted, with PostgreSQL's % escaped. */
static void put_quoted(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++)
		fputs(*s == '\'' ? "'\\''" : *s == '%' ? "%%" : (char[]){ *s, 0 }, f);
	fputc('\'', f);
}

typedef struct env_words {
	FILE *f;
	const config *cfg;
} env_words;

static void add_setting(const char *name, const char *value, bool secret, void *arg)
{
	env_words *w = arg;
	if (strcmp(name, "PGDATA") == 0) /* the server runs it in its own data directory */
		return;
	if (secret) {
		log_info("restore_command does not carry %s: PostgreSQL's environment must set it, "
				 "or give --restore-command",
				 name);
		return;
	}
	fprintf(w->f, " %s=", name);
	/* The server runs it from its data directory: the file prefix must be absolute. */
	put_quoted(w->f, strcmp(name, "WALG_FILE_PREFIX") == 0 && w->cfg->storage.file_prefix
						 ? w->cfg->storage.file_prefix
						 : value);
}

/* This walc, with the settings it runs with (but secrets), fetching %f into %p. */
static char *default_restore_command(const config *cfg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (f == NULL)
		return xstrdup("walc wal-fetch \"%f\" \"%p\"");
	env_words w = { f, cfg };
	fputs("env", f);
	config_each_set(add_setting, &w);
	char *self = realpath("/proc/self/exe", NULL);
	fputc(' ', f);
	put_quoted(f, self ? self : "walc");
	free(self);
	fputs(" wal-fetch \"%f\" \"%p\"", f);
	fclose(f);
	return text;
}

static const char *const target_kinds[] = { "time", "lsn", "name", "xid" };

/* At most one --target-KIND: parsed into *t (*given false when none). */
static err_code parse_target(const args *a, recovery_target *t, bool *given)
{
	*given = false;
	for (size_t i = 0; i < sizeof(target_kinds) / sizeof(target_kinds[0]); i++) {
		char opt[32];
		snprintf(opt, sizeof(opt), "target-%s", target_kinds[i]);
		const char *v = arg(a, opt);
		if (v == NULL)
			continue;
		if (*given)
			return err_set(E_CONFIG, "backup-fetch: give one recovery target, not several");
		TRY(recovery_target_parse(target_kinds[i], v, t));
		*given = true;
	}
	const char *action = arg(a, "target-action"), *tli = arg(a, "target-timeline");
	if (!*given && (action != NULL || tli != NULL || arg(a, "restore-command") != NULL ||
					arg_set(a, "keep-archiving")))
		return err_set(E_CONFIG, "backup-fetch: --target-action, --target-timeline, "
								 "--restore-command and --keep-archiving go with a recovery "
								 "target (--target-time, -lsn, -name or -xid)");
	if (tli != NULL) {
		long v;
		TRY(config_parse_long("--target-timeline", tli, 0, 1, 0x7fffffffL, &v));
		t->timeline = (uint32_t)v;
	}
	if (action != NULL && strcmp(action, "promote") != 0 && strcmp(action, "pause") != 0 &&
		strcmp(action, "shutdown") != 0)
		return err_set(E_CONFIG,
					   "backup-fetch --target-action: \"%s\", expected promote, pause or shutdown",
					   action);
	return E_OK;
}

int cmd_backup_fetch(const config *cfg, const args *a)
{
	return_big_buffers();
	fetch_options opt = { .dest = a->pos[0],
						  .name = a->npos > 1 ? a->pos[1] : NULL,
						  .user_data = arg(a, "target-user-data"),
						  .mask = arg(a, "mask"),
						  .restore_spec = arg(a, "restore-spec"),
						  .original_tablespaces = arg_set(a, "original-tablespaces"),
						  .fsync = !cfg->tar_disable_fsync,
						  .concurrency = (int)cfg->storage.download_concurrency,
						  .delta = cfg->delta_restore || arg_set(a, "delta"),
						  .force = arg_set(a, "force") };
	recovery_target target;
	bool targeted;
	err_code rc = parse_target(a, &target, &targeted);
	if (rc != E_OK)
		return command_fail(rc);
	if (targeted && (opt.name != NULL || opt.user_data != NULL))
		return command_fail(err_set(E_CONFIG, "backup-fetch: a recovery target picks the "
											  "backup itself: give no NAME or --target-user-data"));
	char *restore_command = NULL;
	if (targeted) {
		restore_command = arg(a, "restore-command") ? xstrdup(arg(a, "restore-command"))
													: default_restore_command(cfg);
		opt.target = &target;
		opt.cfg = &cfg->backup;
		opt.restore_command = restore_command;
		opt.target_action = arg(a, "target-action") ? arg(a, "target-action") : "promote";
		opt.keep_archiving = arg_set(a, "keep-archiving");
		opt.name = NULL;
	} else if (opt.user_data == NULL && opt.name == NULL) {
		opt.user_data = cfg->fetch_target_user_data;
	}
	if (opt.mask != NULL && opt.delta)
		rc = err_set(E_CONFIG, "backup-fetch: --mask and --delta cannot be combined (a delta "
							   "restore removes the files the backup does not have)");
	if (rc == E_OK && opt.restore_spec != NULL && opt.original_tablespaces)
		rc = err_set(E_CONFIG, "backup-fetch: --restore-spec and --original-tablespaces cannot "
							   "be combined (the spec says where each tablespace goes)");
	opt.restore_only = arg(a, "restore-only");
	if (rc == E_OK && opt.restore_only != NULL && opt.delta)
		rc = err_set(E_CONFIG, "backup-fetch: --restore-only and --delta cannot be combined (a "
							   "delta restore removes the files a partial restore skips)");
	if (rc == E_OK && !targeted && (opt.name == NULL) == (opt.user_data == NULL))
		rc = err_set(E_CONFIG, opt.name == NULL
								   ? "backup-fetch: name a backup (NAME or LATEST) or give "
									 "--target-user-data"
								   : "backup-fetch: give NAME or --target-user-data, not both");
	repo *r = NULL;
	if (rc == E_OK) {
		rc = config_repo_open(cfg, REPO_READ, target_storage(cfg, a), &r);
		if (rc == E_OK) {
			repo_limit_network(r, (uint64_t)cfg->network_rate_limit);
			rc = backup_fetch(r, &opt);
		}
		repo_close(r);
	}
	free(restore_command);
	return command_fail(rc);
}

int cmd_backup_verify(const config *cfg, const args *a)
{
	return_big_buffers();
	backup_verify_options opt = { .name = a->npos > 0 ? a->pos[0] : NULL,
								  .all = arg_set(a, "all"),
								  .wal = arg_set(a, "wal"),
								  .json = arg_set(a, "json"),
								  .concurrency = (int)cfg->storage.download_concurrency,
								  .seg_size = (uint64_t)cfg->pg.pg_wal_size_mb << 20,
								  .record = true };
	err_code rc = E_OK;
	if (opt.all == (opt.name != NULL))
		rc = err_set(E_CONFIG, opt.all ? "backup-verify: give NAME or --all, not both"
									   : "backup-verify: name a backup (NAME or LATEST) or give "
										 "--all");
	if (rc != E_OK)
		return command_fail(rc);
	repo *r = NULL;
	uint64_t problems = 0;
	double start = command_clock();
	rc = config_repo_open(cfg, REPO_READ, target_storage(cfg, a), &r);
	bool opened = rc == E_OK;
	if (rc == E_OK) {
		repo_limit_network(r, (uint64_t)cfg->network_rate_limit);
		rc = backup_verify(r, &opt, &problems, stdout);
	}
	/* a run that found damage ran: walc_verify_problems says what it found */
	metric found = { "walc_verify_problems", "Problems the last backup-verify run found.",
					 (double)problems };
	pushgw_run(opened ? r : NULL, cfg, "backup-verify", rc == E_OK, command_clock() - start,
			   &found, 1);
	repo_close(r);
	if (rc == E_OK && problems > 0) {
		log_error("backup-verify: %llu problem%s found", (unsigned long long)problems,
				  problems == 1 ? "" : "s");
		return 1;
	}
	return command_fail(rc);
}

int cmd_backup_list(const config *cfg, const args *a)
{
	list_options opt = { .pretty = arg_set(a, "pretty"),
						 .json = arg_set(a, "json"),
						 .detail = arg_set(a, "detail"),
						 .windows = arg_set(a, "recovery-windows"),
						 .cfg = &cfg->backup };
	if (opt.windows && !(opt.detail && opt.json))
		return command_fail(
			err_set(E_CONFIG, "backup-list --recovery-windows goes with --detail --json"));
	repo *r = NULL;
	err_code rc = config_repo_open(cfg, REPO_READ, target_storage(cfg, a), &r);
	if (rc == E_OK)
		rc = backup_list(r, &opt, stdout);
	repo_close(r);
	return command_fail(rc);
}

/* WAL-G's --from-lsn is a decimal number; PostgreSQL's X/Y form is taken too. */
static err_code parse_from_lsn(const char *text, uint64_t *lsn)
{
	if (strchr(text, '/') != NULL)
		return pg_lsn_parse(text, lsn) == E_OK
			? E_OK
			: err_set(E_CONFIG, "catchup-push --from-lsn: \"%s\" is not an LSN", text);
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (text[0] == '\0' || text[0] == '-' || *end != '\0' || errno != 0)
		return err_set(E_CONFIG, "catchup-push --from-lsn: \"%s\" is not an LSN (a decimal "
								 "number, or X/Y)",
					   text);
	*lsn = v;
	return E_OK;
}

/* The repository, its backups those of catchup_005/. */
/* catchup_005/ of the storage a reader (or, push, a writer) uses, as for backups */
static err_code open_catchup(const config *cfg, const args *a, repo_use use, repo **r)
{
	err_code rc = config_repo_open(cfg, use, target_storage(cfg, a), r);
	if (rc == E_OK) {
		repo_set_backups(*r, REPO_CATCHUP_DIR);
		repo_limit_network(*r, (uint64_t)cfg->network_rate_limit);
	}
	return rc;
}

int cmd_catchup_push(const config *cfg, const args *a)
{
	return_big_buffers();
	push_options opt = { .pgdata = a->pos[0], .catchup = true };
	err_code rc = arg(a, "from-lsn") != NULL
		? parse_from_lsn(arg(a, "from-lsn"), &opt.catchup_from_lsn)
		: err_set(E_CONFIG, "catchup-push: give --from-lsn, the standby's LSN");
	if (rc != E_OK)
		return command_fail(rc);
	repo *r = NULL;
	rc = open_catchup(cfg, a, REPO_WRITE, &r);
	if (rc == E_OK)
		rc = backup_push(r, &cfg->backup, &opt);
	repo_close(r);
	return command_fail(rc);
}

int cmd_catchup_fetch(const config *cfg, const args *a)
{
	return_big_buffers();
	catchup_options opt = { .dest = a->pos[0],
							.name = a->pos[1],
							.concurrency = (int)cfg->storage.download_concurrency };
	repo *r = NULL;
	err_code rc = open_catchup(cfg, a, REPO_READ, &r);
	if (rc == E_OK)
		rc = backup_catchup_fetch(r, &opt);
	repo_close(r);
	return command_fail(rc);
}

int cmd_catchup_list(const config *cfg, const args *a)
{
	list_options opt = { .pretty = arg_set(a, "pretty"),
						 .json = arg_set(a, "json"),
						 .detail = arg_set(a, "detail"),
						 .cfg = &cfg->backup };
	err_code rc = E_OK;
	if (arg_set(a, "recovery-windows"))
		rc = err_set(E_CONFIG, "catchup-list: --recovery-windows is backup-list's");
	repo *r = NULL;
	if (rc == E_OK) {
		rc = open_catchup(cfg, a, REPO_READ, &r);
		if (rc == E_OK)
			rc = backup_list(r, &opt, stdout);
		repo_close(r);
	}
	return command_fail(rc);
}

int cmd_catchup_unsupported(const config *cfg, const args *a)
{
	(void)cfg;
	return command_fail(err_set(E_CONFIG, "%s: walc does not speak WAL-G's direct catchup "
										  "transfer (Go's gob encoding over an unauthenticated "
										  "TCP connection); use catchup-push on the primary and "
										  "catchup-fetch on the standby",
									  a->cmd->name));
}
