/*
 * BASE_BACKUP over a replication session, spoken as pg_basebackup of the server's major does:
 * PostgreSQL 15+ sends one CopyOut stream of typed messages (archive headers, data, the
 * manifest); 13 and 14 send one raw CopyOut per tablespace, in the order of the tablespace
 * header (the base directory last), without the tar end-of-archive blocks. Both reach the
 * handler in one shape. After the data the server waits for its archiver to archive the
 * backup's WAL, sending nothing: that wait is watched, said, and bounded.
 */
#include "internal/pg/server/session_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RATE_MIN_KB 32		/* PostgreSQL's MAX_RATE bounds */
#define MAX_RATE_MAX_KB 1048576

static const unsigned char tar_trailer[1024];

static err_code appendf(char *out, size_t cap, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static err_code appendf(char *out, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= cap - *len)
		return err_set(E_FAIL, "BASE_BACKUP command longer than %zu bytes", cap);
	*len += (size_t)n;
	return E_OK;
}

static bool safe_word(const char *s)
{
	/* labels and method names go between single quotes: refuse rather than escape */
	return s != NULL && s[0] != '\0' && strpbrk(s, "'\\\n\r") == NULL && strlen(s) < 64;
}

err_code pg_bb_command(int version, const pg_bb_options *o, char *out, size_t cap)
{
	size_t len = 0;
	const char *label = o->label ? o->label : "walc";
	unsigned long long kb = 0;
	if (!safe_word(label))
		return err_set(E_CONFIG, "BASE_BACKUP label \"%s\" is not a plain word", label);
	if (o->max_rate > 0) {
		kb = o->max_rate / 1024;
		kb = kb < MAX_RATE_MIN_KB ? MAX_RATE_MIN_KB : kb > MAX_RATE_MAX_KB ? MAX_RATE_MAX_KB : kb;
	}
	bool compress = o->compression != NULL && strcmp(o->compression, "none") != 0;
	if (compress && !safe_word(o->compression))
		return err_set(E_CONFIG, "server-side compression \"%s\" is not a method name",
					   o->compression);
	if (version < 150000) {
		if (compress)
			return err_set(E_CONFIG, "server-side compression needs PostgreSQL 15 or later");
		if (o->manifest || o->incremental)
			return err_set(E_CONFIG, "walc asks for backup manifests from PostgreSQL 17 on");
		/* The pre-15 grammar: keywords, the wait for WAL archiving is the default. */
		TRY(appendf(out, cap, &len, "BASE_BACKUP LABEL '%s' FAST TABLESPACE_MAP", label));
		if (kb > 0)
			TRY(appendf(out, cap, &len, " MAX_RATE %llu", kb));
		return E_OK;
	}
	if ((o->incremental || o->manifest) && version < 170000)
		return err_set(E_CONFIG, o->incremental
									 ? "incremental backups need PostgreSQL 17 or later"
									 : "walc asks for backup manifests from PostgreSQL 17 on");
	/*
	 * The manifest only asks for the next INCREMENTAL, which reads its file list and WAL range:
	 * a CRC-32C of every file would be the server's CPU spent for nothing (walc hashes and
	 * records every file itself), on the process that also compresses the stream.
	 */
	TRY(appendf(out, cap, &len,
				"BASE_BACKUP (LABEL '%s', CHECKPOINT 'fast', TABLESPACE_MAP, WAIT true, "
				"MANIFEST '%s'%s",
				label, o->manifest ? "yes" : "no",
				o->manifest ? ", MANIFEST_CHECKSUMS 'NONE'" : ""));
	if (o->incremental)
		TRY(appendf(out, cap, &len, ", INCREMENTAL"));
	if (kb > 0)
		TRY(appendf(out, cap, &len, ", MAX_RATE %llu", kb));
	if (compress) {
		TRY(appendf(out, cap, &len, ", COMPRESSION '%s'", o->compression));
		char detail[64] = "";
		size_t dl = 0;
		if (o->compression_level != 0)
			TRY(appendf(detail, sizeof(detail), &dl, "level=%d", o->compression_level));
		if (o->compression_workers > 0)
			TRY(appendf(detail, sizeof(detail), &dl, "%sworkers=%d", dl ? "," : "",
						o->compression_workers));
		if (dl > 0)
			TRY(appendf(out, cap, &len, ", COMPRESSION_DETAIL '%s'", detail));
	}
	return appendf(out, cap, &len, ")");
}

static bool parse_int(const char *s, size_t len, int lo, int hi, int *out)
{
	int v = 0;
	if (len == 0 || len > 6)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return v >= lo && v <= hi;
}

err_code pg_bb_compression_parse(const char *var, const char *spec, pg_bb_options *o)
{
	o->compression = NULL;
	o->compression_level = o->compression_workers = 0;
	if (spec == NULL || spec[0] == '\0' || strcmp(spec, "none") == 0)
		return E_OK;
	size_t mlen = strcspn(spec, ":");
	int max_level;
	if (mlen == 4 && strncmp(spec, "zstd", 4) == 0) {
		o->compression = "zstd";
		max_level = 22;
	} else if (mlen == 3 && strncmp(spec, "lz4", 3) == 0) {
		o->compression = "lz4";
		max_level = 12;
	} else {
		return err_set(E_CONFIG, "%s: expected none, zstd or lz4 (optionally :LEVEL or "
								 ":level=N,workers=N), got \"%s\"",
					   var, spec);
	}
	if (spec[mlen] == '\0')
		return E_OK;
	const char *d = spec + mlen + 1;
	if (parse_int(d, strlen(d), 1, max_level, &o->compression_level))
		return E_OK;
	if (d[0] == '\0' || d[strlen(d) - 1] == ',')
		return err_set(E_CONFIG, "%s: nothing after \"%.*s\" in \"%s\"", var,
					   (int)(d[0] == '\0' ? mlen + 1 : strlen(spec)), spec, spec);
	while (*d != '\0') {
		size_t len = strcspn(d, ",");
		const char *eq = memchr(d, '=', len);
		size_t klen = eq ? (size_t)(eq - d) : len, vlen = eq ? len - klen - 1 : 0;
		bool ok = eq != NULL;
		if (ok && klen == 5 && strncmp(d, "level", 5) == 0)
			ok = parse_int(eq + 1, vlen, 1, max_level, &o->compression_level);
		else if (ok && klen == 7 && strncmp(d, "workers", 7) == 0)
			ok = o->compression[0] == 'z' && parse_int(eq + 1, vlen, 0, 256,
													   &o->compression_workers);
		else
			ok = false;
		if (!ok)
			return err_set(E_CONFIG, "%s: \"%.*s\" is not level=1..%d%s", var, (int)len, d,
						   max_level, o->compression[0] == 'z' ? " or workers=0..256" : "");
		d += len;
		if (*d == ',')
			d++;
	}
	return E_OK;
}

static err_code result_fail(PGconn *conn, PGresult *res, const char *what)
{
	char *m = xstrdup(res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
	size_t n = strlen(m);
	while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' '))
		m[--n] = '\0';
	if (m[0] == '\0') {
		free(m);
		m = xasprintf("unexpected result %s", res ? PQresStatus(PQresultStatus(res)) : "none");
	}
	err_code rc = err_set(E_IO, "BASE_BACKUP %s: %s", what, m);
	free(m);
	return rc;
}

/* After an error: read what is left so the session could take another command. */
static void drain(PGconn *conn)
{
	PGresult *res;
	while ((res = PQgetResult(conn)) != NULL) {
		if (PQresultStatus(res) == PGRES_COPY_OUT) {
			char *buf;
			int n;
			while ((n = PQgetCopyData(conn, &buf, 0)) > 0)
				PQfreemem(buf);
		}
		PQclear(res);
	}
}

/* The next result that is not the completion of a copy, or of the command. */
static PGresult *next_result(PGconn *conn)
{
	PGresult *res;
	while ((res = PQgetResult(conn)) != NULL && PQresultStatus(res) == PGRES_COMMAND_OK)
		PQclear(res);
	return res;
}

typedef struct stream {
	PGconn *conn;
	const pg_bb_handler *h;
	void *ctx;
	pg_bb_result *res;
	bool in_archive, in_manifest;
	long stop_ms;			  /* the wait's bound, 0 none */
	bool data_seen;			  /* the wait is watched from the first data on */
	struct timespec last_data; /* when the server last sent anything but notices */
	long said_at;			  /* ms into the wait when it was last said, 0 not yet */
	char waiting_for[WAL_NAME_LEN + 1];
} stream;

#define WAIT_SAY_MS 3000	   /* the server silent this long: say what it waits for */
#define WAIT_SAY_AGAIN_MS 60000
#define WAIT_POLL_MS 200

static long ms_since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000L + (now.tv_nsec - t->tv_nsec) / 1000000L;
}

static void got_data(stream *st)
{
	st->data_seen = true;
	st->said_at = 0;
	clock_gettime(CLOCK_MONOTONIC, &st->last_data);
}

/*
 * The segment the server's archiver must archive before the backup ends: the one before its
 * flush position (the stop switched to a new segment), asked on a second session.
 */
static void name_wait(stream *st)
{
	pg_session *s2 = NULL;
	pg_server_info si;
	snprintf(st->waiting_for, sizeof(st->waiting_for), "?");
	if (pg_connect(true, &s2) == E_OK && pg_server_info_get(s2, &si) == E_OK) {
		if (si.wal_segsize > 0 && si.xlogpos > 0)
			wal_name_format(st->waiting_for, si.timeline, (si.xlogpos - 1) / si.wal_segsize,
							si.wal_segsize);
		pg_server_info_free(&si);
	}
	err_clear();
	pg_disconnect(s2);
}

/* Nothing to read yet: wait a little for the server, saying and bounding its stop's wait. */
static err_code wait_input(stream *st)
{
	if (st->h->poll != NULL)
		TRY(st->h->poll(st->ctx));
	struct pollfd pfd = { .fd = PQsocket(st->conn), .events = POLLIN };
	if (poll(&pfd, 1, WAIT_POLL_MS) < 0 && errno != EINTR)
		return err_errno(E_IO, errno, "waiting for BASE_BACKUP data");
	if (!PQconsumeInput(st->conn))
		return pg_conn_error(st->conn, "receiving BASE_BACKUP data");
	if (!st->data_seen)
		return E_OK;
	long idle = ms_since(&st->last_data);
	if (st->stop_ms > 0 && idle >= st->stop_ms) {
		if (st->said_at == 0)
			name_wait(st);
		return err_set(E_IO,
					   "BASE_BACKUP: the server did not archive WAL segment %s within "
					   "WALG_STOP_BACKUP_TIMEOUT (%ld ms): a backup ends once its WAL is "
					   "archived; check the server's archive_command",
					   st->waiting_for, st->stop_ms);
	}
	if (idle >= WAIT_SAY_MS && (st->said_at == 0 || idle - st->said_at >= WAIT_SAY_AGAIN_MS)) {
		if (st->said_at == 0)
			name_wait(st);
		st->said_at = idle;
		log_info("BASE_BACKUP: waiting for the server to archive the backup's WAL, up to "
				 "segment %s (%ld s so far%s)",
				 st->waiting_for, idle / 1000,
				 st->stop_ms > 0 ? ", bounded by WALG_STOP_BACKUP_TIMEOUT" : "");
	}
	return E_OK;
}

/* The next result, waiting as wait_input does. */
static PGresult *get_result(stream *st, err_code *rc)
{
	while (PQisBusy(st->conn))
		if ((*rc = wait_input(st)) != E_OK)
			return NULL;
	return PQgetResult(st->conn);
}

static err_code end_archive(stream *st)
{
	if (!st->in_archive)
		return E_OK;
	st->in_archive = false;
	return st->h->archive_end(st->ctx);
}

static err_code begin_archive(stream *st, const char *name, const char *oid)
{
	TRY(end_archive(st));
	st->in_archive = true;
	return st->h->archive_begin(st->ctx, name, oid);
}

/* One CopyData message of the 15+ stream. */
static err_code message(stream *st, const char *buf, size_t n)
{
	switch (buf[0]) {
	case 'n': { /* archive name \0 tablespace path \0 */
		const char *name = buf + 1;
		const char *nul = memchr(name, '\0', n - 1);
		if (nul == NULL || memchr(nul + 1, '\0', n - 1 - (size_t)(nul + 1 - name)) == NULL)
			return err_set(E_CORRUPT, "malformed BASE_BACKUP archive header");
		size_t digits = strspn(name, "0123456789");
		if (strncmp(name, "base.tar", 8) == 0)
			return begin_archive(st, name, NULL);
		if (digits == 0 || strncmp(name + digits, ".tar", 4) != 0)
			return err_set(E_CORRUPT, "BASE_BACKUP sent an unexpected archive \"%s\"", name);
		char oid[16];
		if (digits >= sizeof(oid))
			return err_set(E_CORRUPT, "BASE_BACKUP sent an unexpected archive \"%s\"", name);
		snprintf(oid, sizeof(oid), "%.*s", (int)digits, name);
		return begin_archive(st, name, oid);
	}
	case 'd':
		if (st->in_manifest)
			return st->h->manifest ? st->h->manifest(st->ctx, buf + 1, n - 1) : E_OK;
		if (!st->in_archive)
			return err_set(E_CORRUPT, "BASE_BACKUP data before an archive header");
		return st->h->archive_data(st->ctx, buf + 1, n - 1);
	case 'm':
		st->in_manifest = true;
		return end_archive(st);
	default: /* 'p': progress, not asked for */
		return E_OK;
	}
}

/* Copies one CopyOut: the 15+ stream (raw false) or one pre-15 tar archive (raw true). */
static err_code copy_out(stream *st, bool raw)
{
	for (;;) {
		if (st->h->poll != NULL)
			TRY(st->h->poll(st->ctx));
		char *buf = NULL;
		int n = PQgetCopyData(st->conn, &buf, 1);
		if (n == 0) {
			TRY(wait_input(st));
			continue;
		}
		if (n == -1)
			return E_OK;
		if (n == -2)
			return pg_conn_error(st->conn, "receiving BASE_BACKUP data");
		got_data(st);
		st->res->wire_bytes += (uint64_t)n;
		err_code rc = raw ? st->h->archive_data(st->ctx, buf, (size_t)n)
			: n < 1		  ? err_set(E_CORRUPT, "empty BASE_BACKUP message")
						  : message(st, buf, (size_t)n);
		PQfreemem(buf);
		TRY(rc);
	}
}

static err_code expect_copy(PGconn *conn)
{
	PGresult *r = next_result(conn);
	err_code rc = PQresultStatus(r) == PGRES_COPY_OUT ? E_OK
													   : result_fail(conn, r, "did not stream");
	PQclear(r);
	return rc;
}

/* 13 and 14: the archives, one per row of the tablespace header, named as 15 names them. */
static err_code old_stream(stream *st, PGresult *spc)
{
	for (int i = 0; i < PQntuples(spc); i++) {
		char name[32];
		const char *oid = PQgetisnull(spc, i, 0) ? NULL : PQgetvalue(spc, i, 0);
		if (oid != NULL && (strlen(oid) > 10 || strspn(oid, "0123456789") != strlen(oid)))
			return err_set(E_CORRUPT, "BASE_BACKUP sent a tablespace oid \"%.20s\"", oid);
		snprintf(name, sizeof(name), "%s.tar", oid ? oid : "base");
		TRY(expect_copy(st->conn));
		TRY(begin_archive(st, name, oid));
		TRY(copy_out(st, true));
		/* The server leaves the end-of-archive blocks to the client before 15. */
		TRY(st->h->archive_data(st->ctx, tar_trailer, sizeof(tar_trailer)));
		TRY(end_archive(st));
	}
	return E_OK;
}

static err_code run(stream *st, int version, uint64_t *start_seen)
{
	PGconn *conn = st->conn;
	PGresult *r = PQgetResult(conn);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) < 2) {
		st->res->refused = true;
		err_code rc = result_fail(conn, r, "refused");
		PQclear(r);
		return rc;
	}
	uint64_t start;
	err_code rc = pg_lsn_parse(PQgetvalue(r, 0, 0), &start);
	uint32_t tli = (uint32_t)strtoul(PQgetvalue(r, 0, 1), NULL, 10);
	PQclear(r);
	TRY(rc);
	*start_seen = start;
	TRY(st->h->started(st->ctx, start, tli));
	r = PQgetResult(conn);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQnfields(r) < 2) {
		rc = result_fail(conn, r, "tablespace header");
		PQclear(r);
		return rc;
	}
	for (int i = 0; rc == E_OK && i < PQntuples(r); i++)
		if (!PQgetisnull(r, i, 0))
			rc = st->h->tablespace(st->ctx, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
	if (rc == E_OK && version < 150000)
		rc = old_stream(st, r);
	PQclear(r);
	TRY(rc);
	if (version >= 150000) {
		TRY(expect_copy(conn));
		TRY(copy_out(st, false));
		TRY(end_archive(st));
	}
	/* After the stream (13 and 14 wait for archiving only now): the end position (a row),
	 * command completions, then nothing. */
	bool have_end = false;
	got_data(st);
	err_code wrc = E_OK;
	while ((r = get_result(st, &wrc)) != NULL) {
		ExecStatusType rs = PQresultStatus(r);
		if (rs == PGRES_TUPLES_OK && PQntuples(r) == 1 && !have_end) {
			rc = pg_lsn_parse(PQgetvalue(r, 0, 0), &st->res->end_lsn);
			have_end = rc == E_OK;
		} else if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK && rc == E_OK) {
			rc = result_fail(conn, r, "failed");
		}
		PQclear(r);
	}
	if (wrc != E_OK)
		return wrc;
	if (rc == E_OK && !have_end)
		rc = err_set(E_IO, "BASE_BACKUP ended without an end position");
	return rc;
}

err_code pg_base_backup(pg_session *s, const pg_bb_options *o, const pg_bb_handler *h,
						void *ctx, pg_bb_result *res)
{
	char cmd[512];
	memset(res, 0, sizeof(*res));
	TRY(pg_bb_command(PQserverVersion(s->conn), o, cmd, sizeof(cmd)));
	log_info("asking the server for %s", cmd);
	if (!PQsendQuery(s->conn, cmd))
		return pg_conn_error(s->conn, "sending BASE_BACKUP");
	stream st = { .conn = s->conn, .h = h, .ctx = ctx, .res = res, .stop_ms = o->stop_timeout_ms };
	uint64_t start = 0;
	err_code rc = run(&st, PQserverVersion(s->conn), &start);
	if (rc != E_OK && res->refused)
		drain(s->conn); /* the session stays usable: the caller may ask for a full backup */
	return rc;
}

err_code pg_upload_manifest(pg_session *s, const void *buf, size_t len)
{
	if (PQserverVersion(s->conn) < 170000)
		return err_set(E_CONFIG, "UPLOAD_MANIFEST needs PostgreSQL 17 or later");
	PGresult *r = PQexec(s->conn, "UPLOAD_MANIFEST");
	if (PQresultStatus(r) != PGRES_COPY_IN) {
		err_code rc = result_fail(s->conn, r, "UPLOAD_MANIFEST");
		PQclear(r);
		drain(s->conn);
		return rc;
	}
	PQclear(r);
	const char *p = buf;
	for (size_t off = 0; off < len;) {
		size_t n = len - off < 65536 ? len - off : 65536;
		if (PQputCopyData(s->conn, p + off, (int)n) != 1)
			return pg_conn_error(s->conn, "sending the manifest");
		off += n;
	}
	if (PQputCopyEnd(s->conn, NULL) != 1)
		return pg_conn_error(s->conn, "ending the manifest");
	err_code rc = E_OK;
	while ((r = PQgetResult(s->conn)) != NULL) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK &&
			rc == E_OK)
			rc = result_fail(s->conn, r, "UPLOAD_MANIFEST");
		PQclear(r);
	}
	return rc;
}
