/* The WAL verbs: wal-push, wal-fetch, wal-show, wal-verify. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/walc/commands.h"
#include "cmd/walc/pushgw.h"
#include "internal/pg/pg.h"
#include "internal/pipe/pipe.h"
#include "internal/wal/wal.h"

/*
 * A wal-push that hangs would stop PostgreSQL's archiver: at WALG_WAL_PUSH_TIMEOUT the run is
 * cancelled (transfers and retries stop, wal-push fails, PostgreSQL retries); a push stuck
 * where cancellation cannot reach ends the process a little later.
 */
#define DEADLINE_GRACE_MS 10000

static void *deadline(void *arg)
{
	long ms = *(const long *)arg;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	log_error("wal-push did not finish within WALG_WAL_PUSH_TIMEOUT (%ld ms); giving up so "
			  "PostgreSQL retries",
			  ms);
	cancel_request(CANCEL_DEADLINE);
	ts = (struct timespec){ DEADLINE_GRACE_MS / 1000, 0 };
	nanosleep(&ts, NULL);
	log_error("wal-push did not stop %d s after its deadline; exiting", DEADLINE_GRACE_MS / 1000);
	_exit(1);
	return NULL;
}

static void start_deadline(long ms)
{
	static long timeout;
	pthread_t t;
	pthread_attr_t attr;
	timeout = ms;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, PIPE_THREAD_STACK);
	if (pthread_create(&t, &attr, deadline, &timeout) != 0)
		log_warn("could not start the wal-push deadline");
	pthread_attr_destroy(&attr);
}

/* The backlog to the Pushgateway (WALG_PUSHGATEWAY_URL) when wal_push says it is worth it. */
static void report_backlog(void *arg, const wal_backlog *b)
{
	pushgw_backlog(arg, "wal-push", b);
}

int cmd_wal_push(const config *cfg, const args *a)
{
	repo *r = NULL;
	if (cfg->wal_push_timeout_ms > 0)
		start_deadline(cfg->wal_push_timeout_ms);
	err_code rc = config_repo_open(cfg, REPO_WRITE, target_storage(cfg, a), &r);
	if (rc == E_OK)
		rc = wal_push(r, &cfg->wal, a->pos[0], report_backlog, (void *)(uintptr_t)cfg);
	repo_close(r);
	return command_fail(rc);
}

int cmd_wal_fetch(const config *cfg, const args *a)
{
	repo *r = NULL;
	bool prefetch = false;
	const char *target = target_storage(cfg, a);
	err_code rc = config_repo_open(cfg, REPO_READ, target, &r);
	if (rc == E_OK)
		rc = wal_fetch(r, &cfg->wal, a->pos[0], a->pos[1], &prefetch);
	repo_close(r);
	if (rc == E_OK && prefetch)
		spawn_prefetch(a->pos[0], a->pos[1], target);
	int code = command_fail(rc);
	return rc == E_NOTFOUND ? EXIT_NOT_FOUND : code;
}

/*
 * The prefetcher runs as a detached `walc wal-prefetch NAME DEST`, as WAL-G re-executes
 * itself: restore_command returns at once, and no process forks with threads it cannot
 * carry along. The child reads the same configuration (main exported a file's settings).
 */
void spawn_prefetch(const char *name, const char *dest, const char *target)
{
	char *target_opt = target != NULL ? xasprintf("--target-storage=%s", target) : NULL;
	pid_t pid = fork();
	if (pid != 0) {
		if (pid < 0)
			log_debug("prefetch not started: fork: %s", strerror(errno));
		free(target_opt);
		return;
	}
	/* The child: only async-signal-safe calls until exec. */
	setsid();
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		if (!log_enabled(LOG_DEBUG))
			dup2(null, STDERR_FILENO);
	}
	char *const argv[] = { (char *)(uintptr_t)"walc", (char *)(uintptr_t)"wal-prefetch",
						   (char *)(uintptr_t)name, (char *)(uintptr_t)dest, target_opt, NULL };
	execv(self_path(), argv);
	_exit(0);
}

int cmd_wal_prefetch(const config *cfg, const args *a)
{
	repo *r = NULL;
	err_code rc = config_repo_open(cfg, REPO_READ, target_storage(cfg, a), &r);
	if (rc == E_OK)
		wal_prefetch(r, &cfg->wal, a->pos[0], a->pos[1]);
	repo_close(r);
	return command_fail(rc);
}

int cmd_wal_show(const config *cfg, const args *a)
{
	repo *r = NULL;
	err_code rc = config_repo_open(cfg, REPO_READ, NULL, &r);
	if (rc == E_OK && arg_set(a, "restore-points"))
		rc = wal_show_restore_points(r, &cfg->wal, arg_set(a, "detailed-json"), stdout);
	else if (rc == E_OK)
		rc = wal_show(r, &cfg->wal, arg_set(a, "detailed-json"), arg_set(a, "without-backups"),
					  stdout);
	repo_close(r);
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
	repo *r = NULL;
	err_code rc = config_repo_open(cfg, REPO_READ, NULL, &r);
	if (rc == E_OK)
		rc = wal_verify(r, &cfg->wal, &o, &failed, stdout);
	repo_close(r);
	if (rc == E_OK && failed) {
		log_error("wal-verify: a check reported FAILURE");
		return 1;
	}
	return command_fail(rc);
}

int cmd_wal_restore(const config *cfg, const args *a)
{
	repo *r = NULL;
	err_code rc = config_repo_open(cfg, REPO_READ, NULL, &r);
	if (rc == E_OK)
		rc = wal_restore(r, &cfg->wal, a->pos[0], a->pos[1]);
	repo_close(r);
	return command_fail(rc);
}
