/* The retention verbs: delete and backup-mark. */
#include <stdlib.h>
#include <string.h>

#include "cmd/walc/commands.h"
#include "internal/backup/backup.h"
#include "internal/daemon/daemon.h"

static bool parse_count(const char *s, int *out)
{
	char *end;
	long n = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || n < 1 || n > 1000000)
		return false;
	*out = (int)n;
	return true;
}

/* The mode words after "delete": retain [FULL|FIND_FULL] N, before ..., and so on. */
static bool parse_mode(const args *a, delete_options *o)
{
	const char *const *pos = a->pos;
	int npos = a->npos, k = 1;
	const char *mode = pos[0];
	if (k < npos && strcmp(pos[k], "FULL") == 0)
		o->modifier = MOD_FULL, k++;
	else if (k < npos && strcmp(pos[k], "FIND_FULL") == 0)
		o->modifier = MOD_FIND_FULL, k++;
	if (strcmp(mode, "retain") == 0) {
		o->mode = DELETE_RETAIN;
		return k + 1 == npos && parse_count(pos[k], &o->count);
	}
	if (strcmp(mode, "before") == 0) {
		o->mode = DELETE_BEFORE;
		o->point = k < npos ? pos[k] : NULL;
		return o->modifier != MOD_FULL && k + 1 == npos;
	}
	if (strcmp(mode, "everything") == 0) {
		o->mode = DELETE_EVERYTHING;
		o->force = k < npos && strcmp(pos[k], "FORCE") == 0;
		return o->modifier == MOD_NONE && npos <= 2 && (npos < 2 || o->force);
	}
	if (strcmp(mode, "target") == 0) {
		o->mode = DELETE_TARGET;
		o->point = k < npos ? pos[k] : NULL;
		return o->modifier != MOD_FULL && (o->user_data == NULL) == (k + 1 == npos);
	}
	if (strcmp(mode, "garbage") == 0) {
		o->mode = DELETE_GARBAGE;
		if (o->modifier != MOD_NONE || npos > 2)
			return false;
		if (npos == 2 && strcmp(pos[1], "ARCHIVES") == 0)
			o->modifier = MOD_ARCHIVES;
		else if (npos == 2 && strcmp(pos[1], "BACKUPS") == 0)
			o->modifier = MOD_BACKUPS;
		return npos == 1 || o->modifier != MOD_NONE;
	}
	return false;
}

bool delete_words_ok(const args *a)
{
	delete_options o = { .after = arg(a, "after"), .user_data = arg(a, "target-user-data") };
	return parse_mode(a, &o) && (o.after == NULL || o.mode == DELETE_RETAIN);
}

int cmd_delete(const config *cfg, const args *a)
{
	delete_options o = { .confirm = arg_set(a, "confirm"),
						 .after = arg(a, "after"),
						 .user_data = arg(a, "target-user-data"),
						 .without_backup_check = arg_set(a, "without-backup-check"),
						 .use_sentinel_time = arg_set(a, "use-sentinel-time") };
	parse_mode(a, &o); /* checked by delete_words_ok */
	double start = command_clock();
	repo r;
	/* Every storage, whatever WALG_TARGET_STORAGE says: none may lose what another needs. */
	err_code rc = repo_open_use(cfg, STORAGE_EVERY, NULL, &r);
	bool opened = rc == E_OK;
	if (rc == E_OK)
		rc = backup_delete(&r, cfg, &o, stdout);
	int code = command_fail(rc);
	metrics_push(opened ? &r : NULL, cfg, "delete", rc == E_OK, command_clock() - start);
	repo_close(&r);
	return code;
}

int cmd_backup_mark(const config *cfg, const args *a)
{
	repo r;
	/* Every alive storage: the backup's objects are updated wherever they are. */
	err_code rc = repo_open_use(cfg, STORAGE_READ, NULL, &r);
	if (rc == E_OK)
		rc = backup_mark(&r, a->pos[0], arg_set(a, "impermanent"));
	repo_close(&r);
	return command_fail(rc);
}
