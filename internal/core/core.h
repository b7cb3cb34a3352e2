/*
 * core: errors, logging, the sink (stream) interface, name/value pairs of settings and small
 * string helpers.
 * Everything else in walc builds on this header; it depends on libc only.
 */
#ifndef WALC_INTERNAL_CORE_CORE_H
#define WALC_INTERNAL_CORE_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* ------------------------------------------------------------------------------------------ */
/* Errors                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/*
 * Every fallible function returns an err_code: 0 is success. The detail (a one-line message
 * naming what failed) lives in a per-thread record, set by err_set() at the place of failure.
 */
typedef enum err_code {
	E_OK = 0,
	E_FAIL,			/* anything not covered below */
	E_CONFIG,		/* bad configuration or arguments */
	E_IO,			/* local or remote I/O failure */
	E_NOTFOUND,		/* object or file does not exist */
	E_CORRUPT,		/* data failed a format, checksum or authentication check */
	E_EXISTS,		/* object exists with different content */
	E_CANCELLED,	/* stopped because another worker failed or a signal came */
} err_code;

#define ERR_MSG_MAX 1024

/* Sets this thread's error record and returns code, so callers write `return err_set(...)`. */
err_code err_set(err_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* As err_set, appending ": strerror(errnum)". */
err_code err_errno(err_code code, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Prefixes the current message with more context ("reading X: <old message>"). */
err_code err_wrap(err_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *err_msg(void);
err_code err_last(void);
void err_clear(void);
const char *err_name(err_code code);

#define TRY(expr)                                                                             \
	do {                                                                                      \
		err_code try_rc_ = (expr);                                                            \
		if (try_rc_ != E_OK)                                                                  \
			return try_rc_;                                                                   \
	} while (0)

/*
 * Cancellation of the whole run: cmd asks for it (a signal handler, a deadline); long loops,
 * retries and transfers below look and stop with E_CANCELLED. Safe in a signal handler.
 */
#define CANCEL_DEADLINE (-1) /* the reason when a deadline, not a signal, stopped the run */
void cancel_request(int reason);
/* 0, or the reason: the signal number or CANCEL_DEADLINE. */
int cancel_requested(void);
/* E_CANCELLED with a message saying why, or E_OK when nothing asked to stop. */
err_code cancel_check(void);

/* ------------------------------------------------------------------------------------------ */
/* Logging: WAL-G's line format on stderr, or one JSON object per line.                        */
/* ------------------------------------------------------------------------------------------ */

typedef enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARNING, LOG_ERROR } log_level;

/* level: minimum level printed; json: JSON lines; command: added to every JSON line. */
void log_setup(log_level level, bool json, const char *command);
bool log_enabled(log_level level);
/*
 * Keeps stderr's descriptor for the log alone, below DEVEL level: libraries that print to
 * the stderr stream on their own (Debian's librnp is built without NDEBUG and prints its
 * diagnostics there) would break the line format. Only the stream moves (to /dev/null), so
 * sanitizer and crash reports, written to descriptor 2, still show. glibc only (musl's stderr
 * is const; the static build's librnp is quiet). For the program's main, after log_setup.
 */
void log_claim_stderr(void);
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A message with structured fields: NULL-terminated key, value string pairs. Text mode prints
 * them as key=value after the message; JSON mode as members of the object.
 */
void log_fields(log_level level, const char *msg, ...) __attribute__((sentinel));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

/* ------------------------------------------------------------------------------------------ */
/* Sinks: the one stream interface. A chain of filters, each pushing bytes into the next.     */
/* ------------------------------------------------------------------------------------------ */

typedef struct sink sink;

typedef struct sink_ops {
	/* Consume len bytes (borrowed). */
	err_code (*write)(sink *s, const void *buf, size_t len);
	/* End of stream: flush, verify, then finish the next sink. Called at most once. */
	err_code (*finish)(sink *s);
	/* Release this sink and the rest of the chain. A sink freed unfinished aborts its work. */
	void (*free)(sink *s);
} sink_ops;

struct sink {
	const sink_ops *ops;
	sink *next; /* owned */
};

err_code sink_write(sink *s, const void *buf, size_t len);
err_code sink_finish(sink *s);
void sink_free(sink *s); /* NULL is a no-op */

/* A sink that appends into a growable memory buffer capped at max bytes. */
typedef struct membuf {
	unsigned char *data;
	size_t len;
	size_t cap;
	size_t max;
} membuf;
sink *membuf_sink_new(membuf *into); /* borrows into; the caller frees into->data */
/* Appends len bytes; E_CORRUPT past max (which must be set: membuf_sink_new sets 0 to none). */
err_code membuf_add(membuf *mb, const void *buf, size_t len);
/* A pass-through sink calling on_bytes(arg, buf, len) for every write (borrows arg, owns next). */
sink *tap_sink_new(void (*on_bytes)(void *arg, const void *buf, size_t len), void *arg, sink *next);
/* A sink that adds the bytes passing through to *counter (atomically) and forwards them. */
sink *count_sink_new(uint64_t *counter, sink *next);
/*
 * Progress of a long transfer (progress.c): bytes of total (0: unknown), files, logged at
 * most every ten seconds by progress_add from any thread, with the rate and the time left;
 * progress_log logs it now (the last line). progress_bytes suits tap_sink_new.
 */
typedef struct progress {
	const char *what; /* "backup-fetch base_...", borrowed */
	uint64_t total;
	uint64_t done, files; /* atomic */
	int64_t started_ms, last_ms;
} progress;
void progress_start(progress *p, const char *what, uint64_t total);
void progress_add(progress *p, uint64_t bytes, uint64_t files);
void progress_bytes(void *arg, const void *buf, size_t len);
void progress_log(progress *p);
/* A sink that discards. */
sink *null_sink_new(void);
/* A sink that compares the stream with a file's bytes: *equal set at finish. Borrows path. */
sink *compare_sink_new(const char *path, bool *equal);
/* The same against len bytes in memory (borrowed). */
sink *compare_mem_sink_new(const void *buf, size_t len, bool *equal);
/*
 * A sink that writes path atomically: a hidden temporary in the same directory, fsync (when
 * durable), rename at finish, fsync of the directory. Freed unfinished, it leaves nothing.
 * Refuses to replace an existing path unless replace is set.
 */
err_code file_sink_new(const char *path, bool durable, bool replace, sink **out);
/*
 * Who a new file or folder is given to (chown; set false: nobody). uid or gid (unsigned)-1
 * leaves that one. A failing chown leaves the creator's (a writer that may not give its files
 * away).
 */
typedef struct file_owner {
	bool set;
	unsigned uid, gid;
} file_owner;
/*
 * The same with every choice: mode of the new file (0 = 0600), its folders created, the file
 * and the folders made given to owner (NULL: kept).
 */
typedef struct file_sink_opts {
	bool durable;
	bool replace;
	unsigned mode;
	bool make_parents;
	const file_owner *owner;
} file_sink_opts;
err_code file_sink_open(const char *path, const file_sink_opts *o, sink **out);
/* In the hidden temporary's name of an unfinished file: ".NAME.walc-tmp.PID.SEQ". */
#define FILE_TMP_MARK ".walc-tmp."
/* Push a whole file through a sink in chunks (does not finish the sink). */
err_code sink_write_file(sink *s, const char *path);
/* The same from an open descriptor until its end (standard input); what names it in errors. */
err_code sink_write_fd(sink *s, int fd, const char *what);
/* len bytes of a file from offset on; E_CORRUPT when the file ends first. */
err_code sink_write_file_range(sink *s, const char *path, uint64_t offset, uint64_t len);

/*
 * Chunker: feeds put() pieces of exactly size bytes (but the last), or with pass_large
 * gathers small writes into pieces of up to size bytes and passes bigger writes on whole.
 * hold_last: a full piece waits until more bytes come, so the caller decides at the end
 * (chunker_flush) what the last one is. buf is fixed, or with get() fresh for every piece
 * (the piece's buffer is then the consumer's).
 */
typedef struct chunker {
	size_t size;
	bool hold_last;
	bool pass_large;
	unsigned char *buf;
	size_t fill;
	err_code (*get)(void *arg, unsigned char **buf);
	err_code (*put)(void *arg, const unsigned char *data, size_t len);
	void *arg;
} chunker;
err_code chunker_write(chunker *c, const void *data, size_t len);
/* Passes on what is held, if anything. */
err_code chunker_flush(chunker *c);

/* ------------------------------------------------------------------------------------------ */
/* Settings: each module's header defines its own part; cmd reads them all from one table.   */
/* ------------------------------------------------------------------------------------------ */

/* A setting's name and value as written (a flag, a file's entry, a failover storage's). */
typedef struct config_pair {
	const char *name;
	const char *value;
} config_pair;

/* How the log looks: what cmd's main gives log_setup, read before any other setting. */
typedef struct log_settings {
	char *level_name;	/* WALG_LOG_LEVEL */
	log_level level;
	char *format;		/* WALG_LOG_FORMAT */
	bool json;
	char *destination;	/* WALG_LOG_DESTINATION, NULL = stderr */
	bool loaded;		/* the four above are valid even when loading failed later */
} log_settings;

/* ------------------------------------------------------------------------------------------ */
/* Checksums: XXH3-128 of file content, as "xxh3-128:<32 hex digits>"                        */
/* ------------------------------------------------------------------------------------------ */

#define HASH_TEXT_LEN 41 /* "xxh3-128:" + 32 hex digits */

typedef struct hasher hasher;
hasher *hasher_new(void);
void hasher_update(hasher *h, const void *buf, size_t len);
/* Writes the text form; the hasher can be freed or reset after. */
void hasher_text(hasher *h, char out[HASH_TEXT_LEN + 1]);
void hasher_free(hasher *h);
/* The text form of a sum v (high half first), and back: false unless text is that form. */
void hash_text_format(const uint64_t v[2], char out[HASH_TEXT_LEN + 1]);
bool hash_text_parse(const char *text, uint64_t v[2]);
/* XXH3-128 of len bytes, high half first: a name's key in tables that do not keep names. */
void hash128(const void *data, size_t len, uint64_t out[2]);
/* qsort/bsearch order of two hash128 values, or of records that start with one. */
int hash128_cmp(const void *a, const void *b);
/*
 * A sorted table of 128-bit keys, each with nfields (up to KEYTAB_FIELDS) numbers (keytab.c):
 * a few bytes a key when keys come in close runs, as pg_name_key's do for a folder's relation
 * files, 17 or more when they are hashes. Filled in any order, then finished once; what a
 * restore or a delta push keeps of a backup's files, or a set of names with no numbers.
 */
#define KEYTAB_FIELDS 3
typedef struct keytab keytab;
keytab *keytab_new(unsigned nfields);
void keytab_add(keytab *t, const uint64_t key[2], const uint64_t *fields);
/* Sorts what was added; a key added twice is kept once with every number 0, and true returned. */
bool keytab_finish(keytab *t);
/* Keys in the finished table; 0 for NULL. */
size_t keytab_count(const keytab *t);
/* Whether t (NULL: empty) has key; then its numbers and its place in key order, when asked. */
bool keytab_find(const keytab *t, const uint64_t key[2], uint64_t *fields, size_t *at);
typedef void (*keytab_fn)(void *arg, const uint64_t key[2], const uint64_t *fields, size_t at);
/* fn for every key in order. */
void keytab_each(const keytab *t, keytab_fn fn, void *arg);
void keytab_free(keytab *t);
/* Hashes a whole file; E_NOTFOUND when it does not exist. */
err_code hash_file(const char *path, char out[HASH_TEXT_LEN + 1], uint64_t *size);

/* ------------------------------------------------------------------------------------------ */
/* Tables: WAL-G's two shapes, space-padded columns or a framed ASCII table                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct table table;
/* right: per column, align right (numbers); NULL = all left. Borrows headers and right. */
table *table_new(int ncols, const char *const *headers, const bool *right);
/* Takes ncols strings (copied). */
void table_add(table *t, const char *const *cells);
/* framed: +---+ borders; otherwise columns padded with spaces, last column unpadded. */
void table_print(const table *t, FILE *out, bool framed);
void table_free(table *t);

/* ------------------------------------------------------------------------------------------ */
/* Strings and small helpers                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Allocation that aborts on out-of-memory: there is nothing sensible left to do. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* qsort for any n: qsort's pointer may not be NULL even with nothing to sort, and an empty
 * list's is. */
void xqsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * From now on, memory is asked of the system in transparent huge pages where it gives them on
 * request (THP "madvise"), so fresh buffers fault in 2 MiB at a time instead of 4 KiB. Only
 * the static binary's allocator (mimalloc) does so; elsewhere a no-op. Call it before the
 * first allocation, and only in a short process that fills its buffers at once: mimalloc
 * gives such memory back only a whole 32 MiB segment at a time, so a long command's peak RSS
 * would grow.
 */
void mem_use_huge_pages(void);

/*
 * Fixed-size records gathered in 1 MiB blocks, for a table whose length is known only once it
 * is read (a base's Files): adding never copies, so the peak is the records plus a block
 * rather than the old and new arrays of a realloc that copies (mimalloc's, in the static
 * build, cannot grow in place). recs_take hands the records over as one exact array.
 */
typedef struct recs {
	size_t size; /* bytes a record: set before the first recs_add */
	size_t n;	 /* records added */
	char **blocks;
	size_t nblocks;
} recs;
/* A new record, zeroed, the n-th. */
void *recs_add(recs *r);
/* The n records in one allocation, in order (NULL when none); r is left empty. */
void *recs_take(recs *r);
void recs_free(recs *r);

/* RFC 3339 with optional fraction and zone ("Z", "+01:00") -> seconds and nanoseconds. */
bool time_parse_rfc3339(const char *s, time_t *sec, long *nsec);
/*
 * A time as an operator types it for recovery_target_time: RFC 3339, or PostgreSQL's
 * timestamptz output ("2026-12-06 02:04:42.777878+00": a space, an offset of hours, hours and
 * minutes with or without a colon), or either with " UTC". NULL when it parses, else why not.
 */
const char *time_parse_target(const char *s, time_t *sec, long *nsec);
/* -1, 0 or 1 as (sec1, nsec1) is before, at or after (sec2, nsec2). */
int time_cmp(time_t sec1, long nsec1, time_t sec2, long nsec2);
/* Now as WAL-G writes backup times: UTC with microseconds, "2026-11-29T23:42:29.586708Z". */
char *time_now_rfc3339(void);
/* A time in UTC as Go's RFC3339Nano prints it: the fraction without trailing zeros, or none. */
char *time_format_rfc3339(time_t sec, long nsec);
/* clock's time ms milliseconds from now: the deadline of a timed wait (pthread_cond_timedwait). */
struct timespec time_in_ms(clockid_t clock, long ms);

bool str_has_prefix(const char *s, const char *prefix);
bool str_has_suffix(const char *s, const char *suffix);

/* Write all of buf to fd, retrying on EINTR and short writes. */
err_code fd_write_all(int fd, const void *buf, size_t len, const char *what);
/* fsync the directory holding path. */
err_code fsync_parent_dir(const char *path);
/* Fill a fixed buffer from a stream: copies min(room, *len) bytes of *p to dst, advances *p and
 * shrinks *len past them; returns how many. */
size_t take_bytes(unsigned char *dst, size_t room, const unsigned char **p, size_t *len);
/* mkdir -p with mode. */
err_code mkdir_p(const char *path, unsigned mode);
/* The same, each folder it makes given to owner (NULL: kept). */
err_code mkdir_p_owned(const char *path, unsigned mode, const file_owner *owner);
/* mkdir -p of the folder holding path (nothing for a bare name or one under "/"). */
err_code mkdir_parent(const char *path, unsigned mode);

#endif
