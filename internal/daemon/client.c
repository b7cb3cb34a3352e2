/*
 * The daemon's client side, as WAL-G's walg-daemon-client speaks it, so that scripts written
 * for that program (archive_command = 'walg-daemon-client SOCKET wal-push %f') run with walc:
 * one framed request, one answer byte.
 */
#include "internal/daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define MSG_MAX 65535

/* type, u16 length of the whole message; one argument bare, several counted and sized. */
static err_code encode(char type, const char *const *argv, int argc, unsigned char *buf,
					   size_t *len)
{
	size_t at = 3;
	if (argc == 1) {
		size_t n = strlen(argv[0]);
		if (at + n > MSG_MAX)
			return err_set(E_CONFIG, "daemon-client: argument too long");
		memcpy(buf + at, argv[0], n);
		at += n;
	} else if (argc > 1) {
		buf[at++] = (unsigned char)argc;
		for (int i = 0; i < argc; i++) {
			size_t n = strlen(argv[i]);
			if (at + 2 + n > MSG_MAX)
				return err_set(E_CONFIG, "daemon-client: arguments too long");
			buf[at++] = (unsigned char)(n >> 8);
			buf[at++] = (unsigned char)n;
			memcpy(buf + at, argv[i], n);
			at += n;
		}
	}
	buf[0] = (unsigned char)type;
	buf[1] = (unsigned char)(at >> 8);
	buf[2] = (unsigned char)at;
	*len = at;
	return E_OK;
}

static err_code connect_within(int fd, const struct sockaddr_un *addr, long ms, const char *path)
{
	int flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	int r = connect(fd, (const struct sockaddr *)addr, sizeof(*addr));
	if (r != 0 && (errno == EINPROGRESS || errno == EAGAIN)) {
		struct pollfd p = { fd, POLLOUT, 0 };
		int err = 0;
		socklen_t el = sizeof(err);
		r = poll(&p, 1, (int)ms);
		if (r == 0)
			return err_set(E_IO, "daemon-client: no connection to %s within %ld ms", path, ms);
		if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0)
			return err_errno(E_IO, r < 0 ? errno : err, "daemon-client: connecting to %s", path);
		r = 0;
	}
	if (r != 0)
		return err_errno(E_IO, errno, "daemon-client: connecting to %s", path);
	fcntl(fd, F_SETFL, flags);
	return E_OK;
}

err_code daemon_ask(const char *socket_path, char type, const char *const *argv, int argc,
					long connect_ms, long op_ms, char *answer)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	if (strlen(socket_path) >= sizeof(addr.sun_path))
		return err_set(E_CONFIG, "daemon-client: socket path %s is too long", socket_path);
	strcpy(addr.sun_path, socket_path);
	unsigned char buf[MSG_MAX];
	size_t len = 0;
	TRY(encode(type, argv, argc, buf, &len));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(E_IO, errno, "daemon-client: socket");
	err_code rc = connect_within(fd, &addr, connect_ms, socket_path);
	if (rc == E_OK) {
		struct timeval tv = { op_ms / 1000, (op_ms % 1000) * 1000 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		rc = fd_write_all(fd, buf, len, socket_path);
	}
	if (rc == E_OK) {
		ssize_t n;
		do
			n = read(fd, answer, 1);
		while (n < 0 && errno == EINTR);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			rc = err_set(E_IO, "daemon-client: no answer from %s within %ld ms", socket_path,
						 op_ms);
		else if (n < 0)
			rc = err_errno(E_IO, errno, "daemon-client: reading from %s", socket_path);
		else if (n == 0)
			rc = err_set(E_IO, "daemon-client: %s closed the connection without answering",
						 socket_path);
	}
	close(fd);
	return rc;
}
