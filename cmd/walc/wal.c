/* The WAL verbs: wal-push, wal-fetch, wal-show, wal-verify. */
#include <stdlib.h>
#include <string.h>

#include "cmd/walc/commands.h"
#include "internal/pg/pg.h"
#include "internal/wal/wal.h"

int cmd_wal_push(const config *cfg, const args *a)
{
	repo r;
	err_code rc = check_target_storage(arg(a, "target-storage"), "--target-storage");
	if (rc != E_OK)
		return command_fail(rc);
	rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = wal_push(&r, cfg, a->pos[0]);
	repo_close(&r);
	return command_fail(rc);
}

int cmd_wal_fetch(const config *cfg, const args *a)
{
	repo r;
	err_code rc = check_target_storage(arg(a, "target-storage"), "--target-storage");
	if (rc != E_OK)
		return command_fail(rc);
	rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = wal_fetch(&r, cfg, a->pos[0], a->pos[1]);
	repo_close(&r);
	int code = command_fail(rc);
	return rc == E_NOTFOUND ? EXIT_NOT_FOUND : code;
}

int cmd_wal_show(const config *cfg, const args *a)
{
	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = wal_show(&r, cfg, arg_set(a, "detailed-json"), arg_set(a, "without-backups"),
					  stdout);
	repo_close(&r);
	return command_fail(rc);
}

bool wal_verify_words_ok(const args *a)
{
	for (int i = 0; i < a->npos; i++)
		if (strcmp(a->pos[i], "integrity") != 0 && strcmp(a->pos[i], "timeline") != 0)
			return false;
	return true;
}

int cmd_wal_verify(const config *cfg, const args *a)
{
	verify_options o = { .json = arg_set(a, "json"), .backup_name = arg(a, "backup-name") };
	for (int i = 0; i < a->npos; i++) {
		o.integrity |= strcmp(a->pos[i], "integrity") == 0;
		o.timeline |= strcmp(a->pos[i], "timeline") == 0;
	}
	const char *tli = arg(a, "timeline"), *lsn = arg(a, "lsn");
	/* WAL-G: --timeline and --lsn together replace the cluster's position. */
	if ((tli == NULL) != (lsn == NULL)) {
		log_error("wal-verify: --timeline and --lsn go together");
		return 1;
	}
	if (tli != NULL) {
		long t;
		err_code prc = config_parse_long("--timeline", tli, 0, 1, 0x7fffffffL, &t);
		if (prc == E_OK)
			prc = pg_lsn_parse(lsn, &o.at_lsn);
		if (prc != E_OK)
			return command_fail(err_wrap(prc, "wal-verify"));
		o.at_timeline = (uint32_t)t;
	}
	bool failed = false;
	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = wal_verify(&r, cfg, &o, &failed, stdout);
	repo_close(&r);
	if (rc == E_OK && failed) {
		log_error("wal-verify: a check reported FAILURE");
		return 1;
	}
	return command_fail(rc);
}
