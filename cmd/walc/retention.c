/* The retention verbs: delete and backup-mark. */
#include <stdlib.h>
#include <string.h>

#include "cmd/walc/commands.h"
#include "internal/backup/backup.h"

static int usage(const char *verb)
{
	log_error("usage: walc %s", command_find(verb)->usage);
	return 1;
}

static bool parse_count(const char *s, int *out)
{
	char *end;
	long n = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || n < 1 || n > 1000000)
		return false;
	*out = (int)n;
	return true;
}

int cmd_delete(const config *cfg, int argc, char **argv)
{
	delete_options o = { 0 };
	const char *pos[4];
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--confirm") == 0)
			o.confirm = true;
		else if (strcmp(argv[i], "--use-sentinel-time") == 0)
			continue; /* walc always orders by start time (WAL-G's opt-in) */
		else if (strcmp(argv[i], "--after") == 0 && i + 1 < argc)
			o.after = argv[++i];
		else if (strcmp(argv[i], "--target-user-data") == 0 && i + 1 < argc)
			o.user_data = argv[++i];
		else if (argv[i][0] == '-' || npos == 4)
			return usage("delete");
		else
			pos[npos++] = argv[i];
	}
	if (npos == 0)
		return usage("delete");
	int k = 1;
	const char *mode = pos[0];
	if (k < npos && strcmp(pos[k], "FULL") == 0)
		o.modifier = MOD_FULL, k++;
	else if (k < npos && strcmp(pos[k], "FIND_FULL") == 0)
		o.modifier = MOD_FIND_FULL, k++;
	if (strcmp(mode, "retain") == 0) {
		o.mode = DELETE_RETAIN;
		if (k + 1 != npos || !parse_count(pos[k], &o.count))
			return usage("delete");
	} else if (strcmp(mode, "before") == 0) {
		o.mode = DELETE_BEFORE;
		if (o.modifier == MOD_FULL || k + 1 != npos)
			return usage("delete");
		o.point = pos[k];
	} else if (strcmp(mode, "everything") == 0) {
		o.mode = DELETE_EVERYTHING;
		o.force = k < npos && strcmp(pos[k], "FORCE") == 0;
		if (o.modifier != MOD_NONE || npos > 2 || (npos == 2 && !o.force))
			return usage("delete");
	} else if (strcmp(mode, "target") == 0) {
		o.mode = DELETE_TARGET;
		if (o.modifier == MOD_FULL || (o.user_data == NULL) == (k + 1 != npos))
			return usage("delete");
		o.point = k < npos ? pos[k] : NULL;
	} else if (strcmp(mode, "garbage") == 0) {
		o.mode = DELETE_GARBAGE;
		if (o.modifier != MOD_NONE || npos > 2)
			return usage("delete");
		if (npos == 2 && strcmp(pos[1], "ARCHIVES") == 0)
			o.modifier = MOD_ARCHIVES;
		else if (npos == 2 && strcmp(pos[1], "BACKUPS") == 0)
			o.modifier = MOD_BACKUPS;
		else if (npos == 2)
			return usage("delete");
	} else {
		return usage("delete");
	}
	if (o.after != NULL && o.mode != DELETE_RETAIN)
		return usage("delete");

	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = backup_delete(&r, cfg, &o, stdout);
	repo_close(&r);
	return command_fail(rc);
}

int cmd_backup_mark(const config *cfg, int argc, char **argv)
{
	const char *name = NULL;
	bool impermanent = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-i") == 0 || strcmp(argv[i], "--impermanent") == 0)
			impermanent = true;
		else if (argv[i][0] == '-' || name != NULL)
			return usage("backup-mark");
		else
			name = argv[i];
	}
	if (name == NULL)
		return usage("backup-mark");
	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc == E_OK)
		rc = backup_mark(&r, name, impermanent);
	repo_close(&r);
	return command_fail(rc);
}
