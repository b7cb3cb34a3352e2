/* Whether the process that wrote a claim or an intent is gone (catalog_impl.h). */
#include "internal/catalog/catalog_impl.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t here_once = PTHREAD_ONCE_INIT;
static char here_host[256], here_boot[128], here_ns[128];

static void read_here(void)
{
	gethostname(here_host, sizeof(here_host) - 1);
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	if (f != NULL) {
		if (fgets(here_boot, sizeof(here_boot), f) == NULL)
			here_boot[0] = '\0';
		fclose(f);
	}
	here_boot[strcspn(here_boot, "\n")] = '\0';
	ssize_t n = readlink("/proc/self/ns/pid", here_ns, sizeof(here_ns) - 1);
	here_ns[n > 0 ? n : 0] = '\0';
}

proc_rec proc_here(void)
{
	pthread_once(&here_once, read_here);
	return (proc_rec){ here_host, (long)getpid(), here_boot, here_ns };
}

void proc_rec_json(const proc_rec *p, json_t *o)
{
	json_object_set_new(o, "hostname", json_string(p->hostname));
	json_object_set_new(o, "pid", json_integer(p->pid));
	json_object_set_new(o, "boot_id", json_string(p->boot_id));
	json_object_set_new(o, "pid_namespace", json_string(p->pid_ns));
}

proc_rec proc_rec_from_json(const json_t *o)
{
	json_t *pid = json_object_get(o, "pid");
	return (proc_rec){ json_string_value(json_object_get(o, "hostname")),
					   json_is_integer(pid) ? (long)json_integer_value(pid) : 0,
					   json_string_value(json_object_get(o, "boot_id")),
					   json_string_value(json_object_get(o, "pid_namespace")) };
}

/* A process that has exited and waits to be reaped (forever, under an init that does not). */
static bool zombie(long pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')' */
	const char *close = strrchr(buf, ')');
	return close != NULL && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

bool proc_gone(const proc_rec *p)
{
	proc_rec me = proc_here();
	if (p->hostname == NULL || p->boot_id == NULL || p->pid_ns == NULL || p->pid <= 0 ||
		me.boot_id[0] == '\0' || me.pid_ns[0] == '\0')
		return false;
	if (strcmp(p->hostname, me.hostname) != 0 || strcmp(p->boot_id, me.boot_id) != 0 ||
		strcmp(p->pid_ns, me.pid_ns) != 0)
		return false;
	if (kill((pid_t)p->pid, 0) != 0)
		return errno == ESRCH;
	return zombie(p->pid);
}
