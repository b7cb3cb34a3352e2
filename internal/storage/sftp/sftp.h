/*
 * sftp: the private interface of SFTP storage (WALG_SSH_PREFIX): an SFTP version 3 client of
 * walc's own (sftpproto.c) on an SSH channel that libssh2 carries (ssh.c), and the store on
 * top (sftp.c). The client speaks OpenSSH's extensions, posix-rename@openssh.com above all,
 * which no SFTP library in Debian bookworm exposes. Only the storage files, tests and fuzz
 * targets include it.
 */
#ifndef WALC_INTERNAL_STORAGE_SFTP_H
#define WALC_INTERNAL_STORAGE_SFTP_H

#include <stdint.h>

#include "internal/core/core.h"
#include "internal/storage/storage.h"

/* ------------------------------------------------------------------------------------------ */
/* The protocol (draft-ietf-secsh-filexfer-02, and OpenSSH's PROTOCOL file)                    */
/* ------------------------------------------------------------------------------------------ */

enum {
	SSH_FXP_INIT = 1,
	SSH_FXP_VERSION = 2,
	SSH_FXP_OPEN = 3,
	SSH_FXP_CLOSE = 4,
	SSH_FXP_READ = 5,
	SSH_FXP_WRITE = 6,
	SSH_FXP_LSTAT = 7,
	SSH_FXP_FSTAT = 8,
	SSH_FXP_OPENDIR = 11,
	SSH_FXP_READDIR = 12,
	SSH_FXP_REMOVE = 13,
	SSH_FXP_MKDIR = 14,
	SSH_FXP_RMDIR = 15,
	SSH_FXP_STAT = 17,
	SSH_FXP_RENAME = 18,
	SSH_FXP_STATUS = 101,
	SSH_FXP_HANDLE = 102,
	SSH_FXP_DATA = 103,
	SSH_FXP_NAME = 104,
	SSH_FXP_ATTRS = 105,
	SSH_FXP_EXTENDED = 200,
	SSH_FXP_EXTENDED_REPLY = 201,
};

enum {
	SSH_FX_OK = 0,
	SSH_FX_EOF = 1,
	SSH_FX_NO_SUCH_FILE = 2,
	SSH_FX_PERMISSION_DENIED = 3,
	SSH_FX_FAILURE = 4,
	SSH_FX_BAD_MESSAGE = 5,
	SSH_FX_NO_CONNECTION = 6,
	SSH_FX_CONNECTION_LOST = 7,
	SSH_FX_OP_UNSUPPORTED = 8,
};

#define SSH_FXF_READ 0x01u
#define SSH_FXF_WRITE 0x02u
#define SSH_FXF_CREAT 0x08u
#define SSH_FXF_TRUNC 0x10u
#define SSH_FXF_EXCL 0x20u

#define SSH_FILEXFER_ATTR_SIZE 0x01u
#define SSH_FILEXFER_ATTR_UIDGID 0x02u
#define SSH_FILEXFER_ATTR_PERMISSIONS 0x04u
#define SSH_FILEXFER_ATTR_ACMODTIME 0x08u
#define SSH_FILEXFER_ATTR_EXTENDED 0x80000000u

/* The OpenSSH extensions a server offered in its VERSION. */
#define SFTP_EXT_POSIX_RENAME 0x1u /* posix-rename@openssh.com: rename(2), replacing */
#define SFTP_EXT_FSYNC 0x2u		   /* fsync@openssh.com */
#define SFTP_EXT_HARDLINK 0x4u	   /* hardlink@openssh.com */

/* Largest packet accepted from a server (OpenSSH's own client's limit). */
#define SFTP_PACKET_MAX (256u << 10)
/* Largest handle (the draft's limit). */
#define SFTP_HANDLE_MAX 256

typedef struct sftp_attrs {
	uint32_t flags; /* SSH_FILEXFER_ATTR_*: which fields below the server sent */
	uint64_t size;
	uint32_t uid, gid;
	uint32_t perm; /* with the file type bits (S_IFREG, S_IFDIR) as OpenSSH sends them */
	uint32_t atime, mtime;
} sftp_attrs;

/* One reply of a server, pointing into the packet it was parsed from. */
typedef struct sftp_reply {
	uint8_t type;
	uint32_t id;
	uint32_t code;			   /* STATUS */
	const char *msg;		   /* STATUS: the server's message (msg_len bytes, not NUL-ended) */
	size_t msg_len;
	const unsigned char *data; /* HANDLE, DATA: the string; NAME: the entries; EXTENDED_REPLY */
	size_t len;
	uint32_t count;			   /* NAME: entries, each checked to fit the packet */
	sftp_attrs attrs;		   /* ATTRS */
} sftp_reply;

/*
 * Parses one packet's payload (after its length): E_CORRUPT, with the reason, for anything
 * but a well-formed reply of a type a client receives.
 */
err_code sftp_parse_reply(const unsigned char *p, size_t len, sftp_reply *r);
/* A VERSION payload: the version and the SFTP_EXT_* offered. E_CORRUPT when malformed. */
err_code sftp_parse_version(const unsigned char *p, size_t len, uint32_t *version, unsigned *ext);

/* The entries of a NAME reply, in order. */
typedef struct sftp_names {
	const unsigned char *p;
	size_t left;
	uint32_t count;
} sftp_names;
void sftp_names_begin(sftp_names *it, const sftp_reply *r);
/* The next entry's name (name_len bytes, not NUL-ended) and attributes; false after the last. */
bool sftp_names_next(sftp_names *it, const char **name, size_t *name_len, sftp_attrs *a);

/* ------------------------------------------------------------------------------------------ */
/* A session (sftpproto.c): requests and replies over a byte transport                         */
/* ------------------------------------------------------------------------------------------ */

/*
 * The byte stream under a session: an SSH channel running the sftp subsystem (ssh.c), or a
 * test's server. send and recv block, within the transport's stall timeout; recv returns at
 * least one byte. Their failures are the connection's end (E_IO) or a cancellation.
 */
typedef struct sftp_io {
	err_code (*send)(void *arg, const void *buf, size_t len);
	err_code (*recv)(void *arg, void *buf, size_t cap, size_t *got);
	void (*close)(void *arg); /* frees arg */
	void *arg;
} sftp_io;

typedef struct sftp_handle {
	unsigned char b[SFTP_HANDLE_MAX];
	size_t len;
} sftp_handle;

typedef struct sftp_session sftp_session;

/*
 * INIT and VERSION over io, which the session then owns (closed by sftp_session_free, also
 * on failure). what names the server in messages ("ssh://host:22").
 */
err_code sftp_session_start(const sftp_io *io, const char *what, sftp_session **out);
void sftp_session_free(sftp_session *s);
/* The transport failed or the server broke the protocol: the session is of no further use. */
bool sftp_session_broken(const sftp_session *s);
unsigned sftp_session_ext(const sftp_session *s);
/* Marks the session unusable (a reply that made no sense for the request it answered). */
void sftp_session_break(sftp_session *s);
/* The status code of the last request the server refused (SSH_FX_*). */
uint32_t sftp_session_status(const sftp_session *s);

/*
 * Requests answered one at a time. A refusal is E_NOTFOUND for NO_SUCH_FILE, E_IO otherwise
 * (sftp_session_status tells which), with the server's message; a broken transport is E_IO and
 * sftp_session_broken.
 */
err_code sftp_open(sftp_session *s, const char *path, uint32_t pflags, uint32_t mode,
				   sftp_handle *h);
err_code sftp_opendir(sftp_session *s, const char *path, sftp_handle *h);
err_code sftp_close(sftp_session *s, const sftp_handle *h);
err_code sftp_lstat(sftp_session *s, const char *path, sftp_attrs *a);
err_code sftp_stat(sftp_session *s, const char *path, sftp_attrs *a); /* follows links */
err_code sftp_fstat(sftp_session *s, const sftp_handle *h, sftp_attrs *a);
err_code sftp_mkdir(sftp_session *s, const char *path, uint32_t mode);
err_code sftp_rmdir(sftp_session *s, const char *path);
err_code sftp_remove(sftp_session *s, const char *path);
/* posix: posix-rename@openssh.com (replaces to); else the draft's RENAME (OpenSSH: never). */
err_code sftp_rename(sftp_session *s, const char *from, const char *to, bool posix);
err_code sftp_fsync(sftp_session *s, const sftp_handle *h);
/* The next entries of a directory: *r a NAME reply, valid until the next request; *eof at end. */
err_code sftp_readdir(sftp_session *s, const sftp_handle *h, sftp_reply *r, bool *eof);

/* Pipelined requests: sent now, their replies taken in any order with sftp_recv. */
err_code sftp_send_write(sftp_session *s, const sftp_handle *h, uint64_t off, const void *data,
						 size_t len, uint32_t *id);
err_code sftp_send_read(sftp_session *s, const sftp_handle *h, uint64_t off, uint32_t len,
						uint32_t *id);
err_code sftp_send_remove(sftp_session *s, const char *path, uint32_t *id);
/* The next reply, whichever it answers; valid until the next call on s. */
err_code sftp_recv(sftp_session *s, sftp_reply *r);
/* E_OK for a STATUS OK reply, else the error a refusal is (as above), naming what. */
err_code sftp_reply_check(sftp_session *s, const sftp_reply *r, const char *what);

/* ------------------------------------------------------------------------------------------ */
/* The SSH transport (ssh.c)                                                                   */
/* ------------------------------------------------------------------------------------------ */

typedef struct ssh_target {
	const char *host;
	long port;
	const char *user;
	const char *password;		/* or NULL */
	const char *key_path;		/* or NULL */
	const char *key_passphrase; /* or NULL */
	const char *known_hosts;	/* or NULL: any host key is taken, as WAL-G does */
	long connect_timeout_ms;
	long stall_ms;				/* a transfer with no byte moved this long fails */
	const char *what;			/* "ssh://host:port" */
} ssh_target;

/* libssh2_init, once per process (before any thread uses libssh2). */
err_code ssh_global_init(void);
/*
 * A TCP connection, the SSH handshake, the host key checked against known_hosts when set,
 * authentication (the key, then the password) and a channel running the sftp subsystem: *io
 * is its byte stream. On failure *retryable says whether another attempt may succeed (a
 * refused connection, a handshake cut short), or not (a host key or credentials refused).
 */
err_code ssh_connect(const ssh_target *t, sftp_io *io, bool *retryable);

/* ------------------------------------------------------------------------------------------ */
/* The store (sftp.c)                                                                          */
/* ------------------------------------------------------------------------------------------ */

err_code storage_sftp_open(const storage_settings *cfg, storage **out);

/*
 * The test seam: when set, the store's connections come from connect instead of ssh_connect
 * (a test's server on a local folder); *retryable as ssh_connect sets it. For unit tests.
 */
typedef err_code (*sftp_connector)(void *arg, sftp_io *io, bool *retryable);
void sftp_set_test_connector(sftp_connector connect, void *arg);

#endif
