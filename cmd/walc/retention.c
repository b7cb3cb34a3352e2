/* The retention verbs: delete and backup-mark. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/walc/commands.h"
#include "cmd/walc/pushgw.h"
#include "internal/backup/backup.h"

static bool parse_count(const char *s, int *out)
{
	char *end;
	long n = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || n < 1 || n > 1000000)
		return false;
	*out = (int)n;
	return true;
}

static const char *const calendar_opts[] = { "daily", "weekly", "monthly", "yearly",
											  "pitr-window", "timezone" };

/* retain's grandfather-father-son options (calendar buckets, window, zone) */
static bool calendar(const args *a)
{
	for (size_t i = 0; i < sizeof(calendar_opts) / sizeof(*calendar_opts); i++)
		if (arg_set(a, calendar_opts[i]))
			return true;
	return false;
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
		/* with calendar buckets or a window, N is optional */
		return (k + 1 == npos && parse_count(pos[k], &o->count)) || (k == npos && calendar(a));
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
	return parse_mode(a, &o) && (o.after == NULL || o.mode == DELETE_RETAIN) &&
		(!calendar(a) || o.mode == DELETE_RETAIN);
}

/* A bucket's count: none, or 1 to 100000. */
static err_code bucket(const args *a, const char *name, int *out)
{
	const char *v = arg(a, name);
	char *end;
	long n = v != NULL ? strtol(v, &end, 10) : 0;
	if (v != NULL && (*v == '\0' || *end != '\0' || n < 1 || n > 100000))
		return err_set(E_CONFIG, "delete retain --%s: expected a count from 1 to 100000, got "
								 "\"%s\"",
					   name, v);
	*out = (int)n;
	return E_OK;
}

/* --pitr-window: days (7d), or a duration as every setting takes one (36h, 90m). */
static err_code window(const char *v, long *seconds)
{
	char *end;
	long ms;
	long days = strtol(v, &end, 10);
	if (end != v && strcmp(end, "d") == 0 && days >= 1 && days <= 36500) {
		*seconds = days * 86400;
		return E_OK;
	}
	TRY(config_parse_duration("delete retain --pitr-window", v, &ms));
	if (ms < 1000)
		return err_set(E_CONFIG, "delete retain --pitr-window: expected at least a second (7d, "
								 "36h), got \"%s\"",
					   v);
	*seconds = ms / 1000;
	return E_OK;
}

/*
 * The time zone calendar buckets are counted in: an IANA name (Europe/Berlin) whose zone file
 * exists, or UTC. Set for the whole process (localtime_r reads it), which only this command's
 * plan uses.
 */
static err_code time_zone(const char *name)
{
	static const char *const dirs[] = { "/usr/share/zoneinfo/", "/share/zoneinfo/",
										"/etc/zoneinfo/" };
	const char *tzdir = getenv("TZDIR");
	bool ok = strcmp(name, "UTC") == 0;
	bool plain = name[0] != '\0' && name[0] != '/' && strstr(name, "..") == NULL;
	for (size_t i = 0; plain && !ok && i < 4; i++) {
		const char *dir = i < 3 ? dirs[i] : tzdir;
		if (dir == NULL)
			continue;
		char *path = xasprintf("%s%s%s", dir, str_has_suffix(dir, "/") ? "" : "/", name);
		ok = access(path, R_OK) == 0;
		free(path);
	}
	if (!ok)
		return err_set(E_CONFIG, "delete retain --timezone: no time zone \"%s\" (an IANA "
								 "name such as Europe/Berlin, or UTC)",
					   name);
	setenv("TZ", name, 1);
	tzset();
	return E_OK;
}

static err_code calendar_options(const args *a, delete_options *o)
{
	TRY(bucket(a, "daily", &o->daily));
	TRY(bucket(a, "weekly", &o->weekly));
	TRY(bucket(a, "monthly", &o->monthly));
	TRY(bucket(a, "yearly", &o->yearly));
	o->pitr_window = arg(a, "pitr-window");
	if (o->pitr_window != NULL)
		TRY(window(o->pitr_window, &o->pitr_window_s));
	o->time_zone = arg(a, "timezone") ? arg(a, "timezone") : "UTC";
	if (calendar(a) && !(o->daily || o->weekly || o->monthly || o->yearly || o->pitr_window))
		return err_set(E_CONFIG, "delete retain --timezone: give calendar buckets (--daily, "
								 "--weekly, --monthly, --yearly) or --pitr-window");
	return calendar(a) ? time_zone(o->time_zone) : E_OK;
}

int cmd_delete(const config *cfg, const args *a)
{
	delete_options o = { .confirm = arg_set(a, "confirm"),
						 .after = arg(a, "after"),
						 .user_data = arg(a, "target-user-data"),
						 .without_backup_check = arg_set(a, "without-backup-check"),
						 .use_sentinel_time = arg_set(a, "use-sentinel-time"),
						 .verify = arg_set(a, "verify") };
	parse_mode(a, &o); /* checked by delete_words_ok */
	double start = command_clock();
	repo *r = NULL;
	err_code rc = calendar_options(a, &o);
	/* Every storage, whatever WALG_TARGET_STORAGE says: none may lose what another needs. */
	if (rc == E_OK)
		rc = config_repo_open(cfg, REPO_EVERY, NULL, &r);
	bool opened = rc == E_OK;
	if (rc == E_OK)
		rc = backup_delete(r, &cfg->backup, &o, stdout);
	int code = command_fail(rc);
	pushgw_run(opened ? r : NULL, cfg, "delete", rc == E_OK, command_clock() - start, NULL,
			   0);
	repo_close(r);
	return code;
}

int cmd_backup_mark(const config *cfg, const args *a)
{
	repo *r = NULL;
	/* Every alive storage: the backup's objects are updated wherever they are. */
	err_code rc = config_repo_open(cfg, REPO_READ, NULL, &r);
	if (rc == E_OK)
		rc = backup_mark(r, a->pos[0], arg_set(a, "impermanent"));
	repo_close(r);
	return command_fail(rc);
}
