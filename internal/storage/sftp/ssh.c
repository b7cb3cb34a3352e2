/*
 * The SSH transport of SFTP storage: a TCP connection (connect timeout), libssh2's handshake,
 * the host key checked against SSH_KNOWN_HOSTS when it is set, authentication by key or
 * password, and a channel running the "sftp" subsystem whose bytes the SFTP client reads and
 * writes. libssh2 runs non-blocking: every wait is a poll of the socket that watches the
 * cancellation and the stall timeout.
 */
#include "internal/storage/http/http.h"
#include "internal/storage/sftp/sftp.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libssh2.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct ssh_conn {
	int fd;
	LIBSSH2_SESSION *s;
	LIBSSH2_CHANNEL *ch;
	long stall_ms;
	char *what;
} ssh_conn;

static pthread_once_t ssh_once = PTHREAD_ONCE_INIT;
static int ssh_init_rc;

static void ssh_init_once(void)
{
	ssh_init_rc = libssh2_init(0);
}

err_code ssh_global_init(void)
{
	pthread_once(&ssh_once, ssh_init_once);
	return ssh_init_rc == 0 ? E_OK : err_set(E_FAIL, "libssh2_init failed (%d)", ssh_init_rc);
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *ssh_error(ssh_conn *c)
{
	char *msg = NULL;
	libssh2_session_last_error(c->s, &msg, NULL, 0);
	return msg != NULL && msg[0] ? msg : "unknown libssh2 error";
}

/*
 * Waits until the socket can move what libssh2 is blocked on, at most until since + stall:
 * E_IO naming the stall when nothing moved, E_CANCELLED when the run is being stopped.
 */
static err_code ssh_wait(ssh_conn *c, long since, const char *doing)
{
	int dir = libssh2_session_block_directions(c->s);
	short ev = 0;
	if (dir & LIBSSH2_SESSION_BLOCK_INBOUND)
		ev |= POLLIN;
	if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)
		ev |= POLLOUT;
	if (ev == 0)
		ev = POLLIN;
	for (;;) {
		if (cancel_requested() != 0)
			return cancel_check();
		long left = since + c->stall_ms - now_ms();
		if (left <= 0)
			return err_set(E_IO, "%s: %s: nothing moved for %ld s", c->what, doing,
						   c->stall_ms / 1000);
		struct pollfd p = { c->fd, ev, 0 };
		int n = poll(&p, 1, left < 200 ? (int)left : 200);
		if (n > 0)
			return E_OK;
		if (n < 0 && errno != EINTR)
			return err_errno(E_IO, errno, "%s: poll", c->what);
	}
}

/* Runs a libssh2 call until it stops asking to be called again. */
#define SSH_AGAIN(c, doing, rcvar, call)                                                      \
	do {                                                                                      \
		long since_ = now_ms();                                                               \
		while (((rcvar) = (call)) == LIBSSH2_ERROR_EAGAIN) {                                 \
			err_code w_ = ssh_wait((c), since_, (doing));                                     \
			if (w_ != E_OK)                                                                   \
				return w_;                                                                    \
		}                                                                                     \
	} while (0)

/* ------------------------------------------------------------------------------------------ */
/* The byte stream                                                                            */
/* ------------------------------------------------------------------------------------------ */

static err_code ssh_send(void *arg, const void *buf, size_t len)
{
	ssh_conn *c = arg;
	const char *p = buf;
	long since = now_ms();
	while (len > 0) {
		ssize_t n = libssh2_channel_write(c->ch, p, len);
		if (n == LIBSSH2_ERROR_EAGAIN || n == 0) {
			TRY(ssh_wait(c, since, "sending"));
			continue;
		}
		if (n < 0)
			return err_set(E_IO, "%s: the connection broke while sending (%s)", c->what,
						   ssh_error(c));
		p += n;
		len -= (size_t)n;
		since = now_ms();
	}
	return E_OK;
}

static err_code ssh_recv(void *arg, void *buf, size_t cap, size_t *got)
{
	ssh_conn *c = arg;
	long since = now_ms();
	for (;;) {
		ssize_t n = libssh2_channel_read(c->ch, buf, cap);
		if (n > 0) {
			*got = (size_t)n;
			return E_OK;
		}
		if (n == 0 || libssh2_channel_eof(c->ch))
			return err_set(E_IO, "%s: the server closed the SFTP session", c->what);
		if (n != LIBSSH2_ERROR_EAGAIN)
			return err_set(E_IO, "%s: the connection broke while receiving (%s)", c->what,
						   ssh_error(c));
		TRY(ssh_wait(c, since, "waiting for the server's answer"));
	}
}

static void ssh_close(void *arg)
{
	ssh_conn *c = arg;
	if (c == NULL)
		return;
	if (c->s != NULL) {
		/* Non-blocking, libssh2 would leave the channel and the session allocated when the
		 * goodbyes cannot go at once; blocking for a bounded time, they go or fail (a broken
		 * connection fails at once). */
		libssh2_session_set_timeout(c->s, 2000);
		libssh2_session_set_blocking(c->s, 1);
	}
	if (c->ch != NULL)
		libssh2_channel_free(c->ch);
	if (c->s != NULL) {
		libssh2_session_disconnect(c->s, "walc done");
		libssh2_session_free(c->s);
	}
	if (c->fd >= 0)
		close(c->fd);
	free(c->what);
	free(c);
}

/* ------------------------------------------------------------------------------------------ */
/* Connecting                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static err_code tcp_connect(ssh_conn *c, const ssh_target *t)
{
	char port[16];
	snprintf(port, sizeof(port), "%ld", t->port);
	struct addrinfo hints = { 0 }, *ai = NULL;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_family = AF_UNSPEC;
	int g = getaddrinfo(t->host, port, &hints, &ai);
	if (g != 0)
		return err_set(E_IO, "%s: resolving %s: %s", t->what, t->host, gai_strerror(g));
	int err = 0;
	for (struct addrinfo *a = ai; a != NULL; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
						a->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
			err = errno;
			close(fd);
			continue;
		}
		long deadline = now_ms() + t->connect_timeout_ms;
		int n = 0;
		struct pollfd p = { fd, POLLOUT, 0 };
		while (cancel_requested() == 0 && now_ms() < deadline) {
			n = poll(&p, 1, 200);
			if (n > 0 || (n < 0 && errno != EINTR))
				break;
			n = 0;
		}
		socklen_t len = sizeof(err);
		if (n > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			c->fd = fd;
			freeaddrinfo(ai);
			return E_OK;
		}
		if (n <= 0)
			err = n == 0 ? ETIMEDOUT : errno;
		close(fd);
		if (cancel_requested() != 0)
			break;
	}
	freeaddrinfo(ai);
	if (cancel_requested() != 0)
		return cancel_check();
	return err_errno(E_IO, err ? err : ECONNREFUSED, "%s: connecting", t->what);
}

/* "ssh-ed25519 SHA256:..." of the server's host key, as ssh-keygen -l prints it. */
static void key_description(ssh_conn *c, int type, char *out, size_t cap)
{
	static const char *const names[] = { "unknown", "ssh-rsa", "ssh-dss", "ecdsa-sha2-nistp256",
										 "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
										 "ssh-ed25519" };
	const char *name = type >= 0 && type < 7 ? names[type] : "unknown";
	const char *hash = libssh2_hostkey_hash(c->s, LIBSSH2_HOSTKEY_HASH_SHA256);
	char *b64 = hash != NULL ? http_base64(hash, 32) : xstrdup("?");
	size_t n = strlen(b64);
	while (n > 0 && b64[n - 1] == '=')
		b64[--n] = '\0';
	snprintf(out, cap, "%s SHA256:%s", name, b64);
	free(b64);
}

static int known_key_type(int hostkey_type)
{
	switch (hostkey_type) {
	case LIBSSH2_HOSTKEY_TYPE_RSA: return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
	case LIBSSH2_HOSTKEY_TYPE_DSS: return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
	case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
	case LIBSSH2_HOSTKEY_TYPE_ED25519: return LIBSSH2_KNOWNHOST_KEY_ED25519;
	default: return LIBSSH2_KNOWNHOST_KEY_UNKNOWN;
	}
}

/*
 * The host key algorithms to ask for: those of the keys known_hosts holds (any host's), so
 * that the server shows a key of a type the file can vouch for, as OpenSSH's client does.
 */
static void prefer_known_types(ssh_conn *c, LIBSSH2_KNOWNHOSTS *kh)
{
	static const struct {
		int type;
		const char *methods;
	} order[] = {
		{ LIBSSH2_KNOWNHOST_KEY_ED25519, "ssh-ed25519" },
		{ LIBSSH2_KNOWNHOST_KEY_ECDSA_256, "ecdsa-sha2-nistp256" },
		{ LIBSSH2_KNOWNHOST_KEY_ECDSA_384, "ecdsa-sha2-nistp384" },
		{ LIBSSH2_KNOWNHOST_KEY_ECDSA_521, "ecdsa-sha2-nistp521" },
		{ LIBSSH2_KNOWNHOST_KEY_SSHRSA, "ssh-rsa" },
		{ LIBSSH2_KNOWNHOST_KEY_SSHDSS, "ssh-dss" },
	};
	bool have[sizeof(order) / sizeof(order[0])] = { false };
	struct libssh2_knownhost *prev = NULL, *e;
	while (libssh2_knownhost_get(kh, &e, prev) == 0) {
		for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
			if ((e->typemask & LIBSSH2_KNOWNHOST_KEY_MASK) == order[i].type)
				have[i] = true;
		prev = e;
	}
	char prefs[256] = "";
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (have[i])
			snprintf(prefs + strlen(prefs), sizeof(prefs) - strlen(prefs), "%s%s",
					 prefs[0] ? "," : "", order[i].methods);
	if (prefs[0] != '\0')
		libssh2_session_method_pref(c->s, LIBSSH2_METHOD_HOSTKEY, prefs);
}

/* After the handshake: the server's key must be the one known_hosts has for host:port. */
static err_code check_host_key(ssh_conn *c, const ssh_target *t, LIBSSH2_KNOWNHOSTS *kh)
{
	size_t len = 0;
	int type = 0;
	const char *key = libssh2_session_hostkey(c->s, &len, &type);
	if (key == NULL)
		return err_set(E_IO, "%s: the server sent no host key", t->what);
	char desc[160];
	key_description(c, type, desc, sizeof(desc));
	struct libssh2_knownhost *found = NULL;
	int check = libssh2_knownhost_checkp(kh, t->host, (int)t->port, key, len,
										 LIBSSH2_KNOWNHOST_TYPE_PLAIN |
											 LIBSSH2_KNOWNHOST_KEYENC_RAW | known_key_type(type),
										 &found);
	switch (check) {
	case LIBSSH2_KNOWNHOST_CHECK_MATCH:
		return E_OK;
	case LIBSSH2_KNOWNHOST_CHECK_MISMATCH:
		return err_set(E_CONFIG, "SSH_KNOWN_HOSTS: the host key of %s (%s) does not match the one "
								 "%s has for it",
					   t->what, desc, t->known_hosts);
	case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND:
		return err_set(E_CONFIG, "SSH_KNOWN_HOSTS: %s has no key for %s of the type the server "
								 "shows (%s)",
					   t->known_hosts, t->what, desc);
	default:
		return err_set(E_CONFIG, "SSH_KNOWN_HOSTS: checking the host key of %s against %s failed",
					   t->what, t->known_hosts);
	}
}

static bool method_offered(const char *list, const char *m)
{
	size_t n = strlen(m);
	for (const char *p = list; p != NULL && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, m, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

/* The next string (4-byte length first) of an SSH wire encoding. */
static bool next_str(const unsigned char **p, size_t *left, const unsigned char **s, size_t *n)
{
	if (*left < 4)
		return false;
	*n = (size_t)(*p)[0] << 24 | (size_t)(*p)[1] << 16 | (size_t)(*p)[2] << 8 | (*p)[3];
	if (*n > *left - 4)
		return false;
	*s = *p + 4;
	*p += 4 + *n;
	*left -= 4 + *n;
	return true;
}

/*
 * Whether a private key file holds an RSA key: PEM's header says so, and OpenSSH's format
 * keeps the public key in the clear (magic, cipher, kdf, kdf options, count, public key).
 */
static bool key_is_rsa(const char *path)
{
	char *text = NULL;
	if (http_read_small_file(path, 64u << 10, &text) != E_OK) {
		err_clear();
		return false;
	}
	bool rsa = strstr(text, "BEGIN RSA PRIVATE KEY") != NULL;
	const char *b = strstr(text, "BEGIN OPENSSH PRIVATE KEY-----");
	const char *e = b != NULL ? strstr(b, "-----END") : NULL;
	if (!rsa && e != NULL) {
		b += strlen("BEGIN OPENSSH PRIVATE KEY-----");
		char *clean = xmalloc((size_t)(e - b) + 1);
		size_t n = 0;
		for (const char *q = b; q < e; q++)
			if (!isspace((unsigned char)*q))
				clean[n++] = *q;
		clean[n] = '\0';
		unsigned char *bin;
		size_t len;
		static const char magic[] = "openssh-key-v1"; /* with its NUL */
		if (http_base64_decode(clean, &bin, &len)) {
			const unsigned char *p = bin + sizeof(magic), *str, *key;
			size_t left = len >= sizeof(magic) ? len - sizeof(magic) : 0, sn, kn;
			if (len >= sizeof(magic) && memcmp(bin, magic, sizeof(magic)) == 0 &&
				next_str(&p, &left, &str, &sn) && next_str(&p, &left, &str, &sn) &&
				next_str(&p, &left, &str, &sn) && left >= 4) {
				p += 4;
				left -= 4;
				if (next_str(&p, &left, &key, &kn) && next_str(&key, &kn, &str, &sn))
					rsa = sn == 7 && memcmp(str, "ssh-rsa", 7) == 0;
			}
			free(bin);
		}
		free(clean);
	}
	http_wipe_free(text);
	return rsa;
}

/* The key, then the password, as WAL-G offers them. */
static err_code authenticate(ssh_conn *c, const ssh_target *t)
{
	unsigned ulen = (unsigned)strlen(t->user);
	char *list = NULL;
	long since = now_ms();
	while ((list = libssh2_userauth_list(c->s, t->user, ulen)) == NULL &&
		   libssh2_session_last_errno(c->s) == LIBSSH2_ERROR_EAGAIN)
		TRY(ssh_wait(c, since, "authenticating"));
	if (list == NULL) {
		if (libssh2_userauth_authenticated(c->s))
			return E_OK; /* the server took "none" */
		return err_set(E_IO, "%s: asking for authentication methods: %s", t->what, ssh_error(c));
	}
	bool key_refused = false;
	int rc;
	if (t->key_path != NULL && method_offered(list, "publickey")) {
		if (access(t->key_path, R_OK) != 0)
			return err_errno(E_CONFIG, errno, "SSH_PRIVATE_KEY_PATH: %s", t->key_path);
		SSH_AGAIN(c, "authenticating", rc,
				  libssh2_userauth_publickey_fromfile_ex(c->s, t->user, ulen, NULL, t->key_path,
														 t->key_passphrase));
		if (rc == 0)
			return E_OK;
		if (rc != LIBSSH2_ERROR_AUTHENTICATION_FAILED && rc != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED)
			return err_set(E_CONFIG, "SSH_PRIVATE_KEY_PATH: %s: %s", t->key_path, ssh_error(c));
		key_refused = true;
	}
	if (t->password != NULL && method_offered(list, "password")) {
		SSH_AGAIN(c, "authenticating", rc,
				  libssh2_userauth_password_ex(c->s, t->user, ulen, t->password,
											   (unsigned)strlen(t->password), NULL));
		if (rc == 0)
			return E_OK;
		if (rc != LIBSSH2_ERROR_AUTHENTICATION_FAILED && rc != LIBSSH2_ERROR_PASSWORD_EXPIRED)
			return err_set(E_IO, "%s: password authentication: %s", t->what, ssh_error(c));
		return err_set(E_CONFIG, "%s refused %suser %s's password (SSH_PASSWORD)", t->what,
					   key_refused ? "the key SSH_PRIVATE_KEY_PATH and " : "", t->user);
	}
	if (key_refused && key_is_rsa(t->key_path))
		return err_set(E_CONFIG, "SSH_PRIVATE_KEY_PATH: %s refused the key %s for user %s: an "
								 "RSA key, which libssh2 1.10 signs with SHA-1 (ssh-rsa), refused "
								 "by OpenSSH 8.8 and later unless its PubkeyAcceptedAlgorithms "
								 "allows ssh-rsa; use an Ed25519 or ECDSA key",
					   t->what, t->key_path, t->user);
	if (key_refused)
		return err_set(E_CONFIG, "SSH_PRIVATE_KEY_PATH: %s refused the key %s for user %s",
					   t->what, t->key_path, t->user);
	return err_set(E_CONFIG, "%s accepts %s for user %s; walc has %s: set SSH_PRIVATE_KEY_PATH "
							 "or SSH_PASSWORD",
				   t->what, list, t->user,
				   t->key_path != NULL	  ? "a key (SSH_PRIVATE_KEY_PATH)"
				   : t->password != NULL ? "a password (SSH_PASSWORD)"
										 : "neither a key nor a password");
}

static err_code open_channel(ssh_conn *c, const ssh_target *t)
{
	long since = now_ms();
	while ((c->ch = libssh2_channel_open_session(c->s)) == NULL) {
		if (libssh2_session_last_errno(c->s) != LIBSSH2_ERROR_EAGAIN)
			return err_set(E_IO, "%s: opening a channel: %s", t->what, ssh_error(c));
		TRY(ssh_wait(c, since, "opening a channel"));
	}
	int rc;
	SSH_AGAIN(c, "starting sftp", rc,
			  libssh2_channel_process_startup(c->ch, "subsystem", 9, "sftp", 4));
	if (rc != 0)
		return err_set(E_IO, "%s: the server refused the sftp subsystem: %s", t->what,
					   ssh_error(c));
	return E_OK;
}

/* libssh2_knownhost_free, which takes no NULL. */
static void known_free(LIBSSH2_KNOWNHOSTS *kh)
{
	if (kh != NULL)
		libssh2_knownhost_free(kh);
}

/* Everything after the TCP connection; *retryable cleared for refusals a retry cannot fix. */
static err_code ssh_setup(ssh_conn *c, const ssh_target *t, bool *retryable)
{
	c->s = libssh2_session_init();
	if (c->s == NULL)
		return err_set(E_FAIL, "%s: libssh2_session_init failed", t->what);
	libssh2_session_set_blocking(c->s, 0);
	LIBSSH2_KNOWNHOSTS *kh = NULL;
	if (t->known_hosts != NULL) {
		kh = libssh2_knownhost_init(c->s);
		if (kh == NULL)
			return err_set(E_FAIL, "%s: libssh2_knownhost_init failed", t->what);
		err_code k = E_OK;
		if (access(t->known_hosts, R_OK) != 0)
			k = err_errno(E_CONFIG, errno, "SSH_KNOWN_HOSTS: %s", t->known_hosts);
		else if (libssh2_knownhost_readfile(kh, t->known_hosts, LIBSSH2_KNOWNHOST_FILE_OPENSSH) < 0)
			k = err_set(E_CONFIG, "SSH_KNOWN_HOSTS: %s is not a known_hosts file: %s",
						t->known_hosts, ssh_error(c));
		if (k != E_OK) {
			known_free(kh);
			*retryable = false;
			return k;
		}
		prefer_known_types(c, kh);
	}
	int rc;
	long since = now_ms();
	while ((rc = libssh2_session_handshake(c->s, c->fd)) == LIBSSH2_ERROR_EAGAIN) {
		err_code w = ssh_wait(c, since, "the SSH handshake");
		if (w != E_OK) {
			known_free(kh);
			return w;
		}
	}
	if (rc != 0) {
		known_free(kh);
		if (rc == LIBSSH2_ERROR_KEX_FAILURE) {
			/* no algorithm in common: the same on every attempt */
			*retryable = false;
			return err_set(E_IO, "%s: SSH handshake: %s (no key exchange, cipher or host key "
								 "algorithm in common with libssh2 %s; an RSA host key alone "
								 "needs ssh-rsa in the server's HostKeyAlgorithms)",
						   t->what, ssh_error(c), LIBSSH2_VERSION);
		}
		return err_set(E_IO, "%s: SSH handshake: %s", t->what, ssh_error(c));
	}
	if (kh != NULL) {
		err_code k = check_host_key(c, t, kh);
		known_free(kh);
		if (k != E_OK) {
			*retryable = false;
			return k;
		}
	}
	err_code a = authenticate(c, t);
	if (a != E_OK) {
		*retryable = a != E_CONFIG;
		return a;
	}
	err_code o = open_channel(c, t);
	if (o != E_OK && strstr(err_msg(), "refused the sftp subsystem") != NULL)
		*retryable = false;
	return o;
}

err_code ssh_connect(const ssh_target *t, sftp_io *io, bool *retryable)
{
	*retryable = true;
	ssh_conn *c = xcalloc(1, sizeof(*c));
	c->fd = -1;
	c->stall_ms = t->stall_ms;
	c->what = xstrdup(t->what);
	err_code rc = tcp_connect(c, t);
	if (rc == E_OK)
		rc = ssh_setup(c, t, retryable);
	if (rc != E_OK) {
		if (rc == E_CANCELLED)
			*retryable = false;
		ssh_close(c);
		return rc;
	}
	*io = (sftp_io){ ssh_send, ssh_recv, ssh_close, c };
	return E_OK;
}
