/*
 * walc_archive: a PostgreSQL archive module (archive_library = 'walc_archive') that hands each
 * file to `walc daemon` over its UNIX socket (WAL-G's protocol), so archiving costs no process
 * per segment. It never raises an error: any failure is a WARNING and `false`, and PostgreSQL
 * retries the file (an ERROR in the callback would restart the archiver, PG 15).
 */
#include "postgres.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fmgr.h"
#include "utils/guc.h"
#if PG_VERSION_NUM >= 160000
#include "archive/archive_module.h"
#else
#include "postmaster/pgarch.h"
#endif

PG_MODULE_MAGIC;

void _PG_init(void);

static char *walc_socket = NULL;
static int walc_timeout = 300;

void _PG_init(void)
{
	DefineCustomStringVariable("walc_archive.socket", "Socket of the walc daemon.", NULL,
							   &walc_socket, "/var/run/walc/walc.sock", PGC_SIGHUP, 0, NULL, NULL,
							   NULL);
	DefineCustomIntVariable("walc_archive.timeout",
							"Seconds to wait for the walc daemon to archive one file.", NULL,
							&walc_timeout, 300, 1, 86400, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL,
							NULL);
	MarkGUCPrefixReserved("walc_archive");
}

/* Connects, or returns -1 with a WARNING saying why. */
static int connect_daemon(void)
{
	struct sockaddr_un addr;
	int fd;

	if (walc_socket == NULL || strlen(walc_socket) >= sizeof(addr.sun_path)) {
		ereport(WARNING, (errmsg("walc_archive.socket is not set or too long")));
		return -1;
	}
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	strcpy(addr.sun_path, walc_socket);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
		ereport(WARNING, (errmsg("walc_archive: cannot connect to %s: %m", walc_socket)));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Sends one message and waits up to the timeout for the one-byte answer. */
static char ask(int fd, char type, const char *body)
{
	size_t n = strlen(body);
	unsigned char msg[3 + 1024];
	char answer = 0;
	size_t sent = 0;
	time_t deadline = time(NULL) + walc_timeout;

	if (n > sizeof(msg) - 3)
		return 0;
	msg[0] = (unsigned char)type;
	msg[1] = (unsigned char)((n + 3) >> 8);
	msg[2] = (unsigned char)(n + 3);
	memcpy(msg + 3, body, n);
	while (sent < n + 3) {
		ssize_t w = write(fd, msg + sent, n + 3 - sent);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return 0;
		sent += (size_t)w;
	}
	while (time(NULL) < deadline) {
		struct pollfd p = { fd, POLLIN, 0 };
		int r = poll(&p, 1, 1000);
		if (r < 0 && errno != EINTR)
			return 0;
		if (r > 0) {
			ssize_t got = read(fd, &answer, 1);
			return got == 1 ? answer : 0;
		}
	}
	ereport(WARNING, (errmsg("walc_archive: no answer from the walc daemon within %d s",
							 walc_timeout)));
	return 0;
}

static bool walc_check_configured(void)
{
	int fd = connect_daemon();
	char answer;

	if (fd < 0)
		return false;
	answer = ask(fd, 'C', "CHECK");
	close(fd);
	return answer == 'O';
}

static bool walc_archive_file(const char *file, const char *path)
{
	int fd;
	char answer;

	(void)path; /* the daemon archives $PGDATA/pg_wal/<file> */
	fd = connect_daemon();
	if (fd < 0)
		return false;
	answer = ask(fd, 'F', file);
	close(fd);
	if (answer != 'O') {
		ereport(WARNING,
				(errmsg("walc_archive: the walc daemon could not archive \"%s\"", file)));
		return false;
	}
	return true;
}

#if PG_VERSION_NUM >= 160000
static bool check16(ArchiveModuleState *state)
{
	(void)state;
	return walc_check_configured();
}

static bool archive16(ArchiveModuleState *state, const char *file, const char *path)
{
	(void)state;
	return walc_archive_file(file, path);
}

static const ArchiveModuleCallbacks walc_callbacks = {
	.startup_cb = NULL,
	.check_configured_cb = check16,
	.archive_file_cb = archive16,
	.shutdown_cb = NULL,
};

const ArchiveModuleCallbacks *_PG_archive_module_init(void);

const ArchiveModuleCallbacks *_PG_archive_module_init(void)
{
	return &walc_callbacks;
}
#else
void _PG_archive_module_init(ArchiveModuleCallbacks *cb);

void _PG_archive_module_init(ArchiveModuleCallbacks *cb)
{
	cb->check_configured_cb = walc_check_configured;
	cb->archive_file_cb = walc_archive_file;
}
#endif
