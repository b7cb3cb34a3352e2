/*
 * Physical replication for wal-receive: the slot, the timeline history files, and the
 * START_REPLICATION stream (CopyBoth: XLogData and keepalives from the server, standby status
 * updates from us), as pg_receivewal speaks it.
 */
#include "internal/pg/server/session_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* PostgreSQL's epoch (2000-01-01) in Unix seconds: the protocol's timestamps count from it. */
#define PG_EPOCH_UNIX 946684800LL

static uint64_t be64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

err_code pg_wal_msg_parse(const unsigned char *buf, size_t len, pg_wal_msg *out)
{
	memset(out, 0, sizeof(*out));
	if (len < 1)
		return err_set(E_CORRUPT, "replication: empty message");
	switch (buf[0]) {
	case 'w': /* XLogData: start, server's WAL end, send time, then the WAL */
		if (len < 1 + 24)
			return err_set(E_CORRUPT, "replication: XLogData of %zu bytes", len);
		out->kind = PG_WAL_DATA;
		out->start = be64(buf + 1);
		out->server_end = be64(buf + 9);
		out->data = buf + 25;
		out->len = len - 25;
		if (out->start > UINT64_MAX - out->len)
			return err_set(E_CORRUPT, "replication: XLogData past the end of the LSN space");
		return E_OK;
	case 'k': /* keepalive: server's WAL end, send time, reply requested */
		if (len != 1 + 17)
			return err_set(E_CORRUPT, "replication: keepalive of %zu bytes", len);
		out->kind = PG_WAL_KEEPALIVE;
		out->server_end = be64(buf + 1);
		out->reply = buf[17] != 0;
		return E_OK;
	default:
		return err_set(E_CORRUPT, "replication: unknown message type 0x%02x", buf[0]);
	}
}

err_code pg_slot_read(pg_session *s, const char *slot, pg_slot_info *out)
{
	/* slot names are unique: one row of aggregates, whether or not the slot exists */
	char *cols[4] = { NULL, NULL, NULL, NULL };
	const char *params[1] = { slot };
	memset(out, 0, sizeof(*out));
	err_code rc = pg_query_row(s,
							   "SELECT count(*), max(slot_type), max(restart_lsn::text), "
							   "max(wal_status) FROM pg_replication_slots WHERE slot_name = $1",
							   1, params, 4, cols);
	if (rc == E_OK && strcmp(cols[0], "0") != 0) {
		/* a logical slot of that name would make CREATE fail with a less plain message */
		if (strcmp(cols[1], "physical") != 0)
			rc = err_set(E_CONFIG, "WALG_SLOTNAME: slot \"%s\" exists and is not physical",
						 slot);
		else if (cols[2][0] != '\0')
			rc = pg_lsn_parse(cols[2], &out->restart_lsn);
		snprintf(out->wal_status, sizeof(out->wal_status), "%s", cols[3]);
		out->exists = rc == E_OK;
	}
	for (int i = 0; i < 4; i++)
		free(cols[i]);
	return rc;
}

/* A command on a replication session whose rows are not needed. */
static err_code command(pg_session *s, const char *cmd)
{
	PGresult *r = PQexec(s->conn, cmd);
	ExecStatusType st = PQresultStatus(r);
	err_code rc = E_OK;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		rc = pg_conn_error(s->conn, cmd);
	PQclear(r);
	return rc;
}

err_code pg_slot_create(pg_session *s, const char *slot)
{
	char cmd[128];
	/* RESERVE_WAL: the server keeps WAL from now on, before the first START_REPLICATION */
	snprintf(cmd, sizeof(cmd),
			 PQserverVersion(s->conn) >= 150000 ? "CREATE_REPLICATION_SLOT %s PHYSICAL (RESERVE_WAL)"
												: "CREATE_REPLICATION_SLOT %s PHYSICAL RESERVE_WAL",
			 slot);
	return command(s, cmd);
}

err_code pg_timeline_history(pg_session *s, uint32_t tli, char **content, size_t *len)
{
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "TIMELINE_HISTORY %u", tli);
	PGresult *r = PQexec(s->conn, cmd);
	err_code rc = E_OK;
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) != 2) {
		rc = pg_conn_error(s->conn, cmd);
	} else {
		*len = (size_t)PQgetlength(r, 0, 1);
		*content = xmalloc(*len + 1);
		memcpy(*content, PQgetvalue(r, 0, 1), *len);
		(*content)[*len] = '\0';
	}
	PQclear(r);
	return rc;
}

err_code pg_wal_stream_start(pg_session *s, const char *slot, uint32_t tli, uint64_t lsn)
{
	char cmd[160], at[32];
	pg_lsn_format(lsn, at);
	snprintf(cmd, sizeof(cmd), "START_REPLICATION SLOT %s PHYSICAL %s TIMELINE %u", slot, at, tli);
	PGresult *r = PQexec(s->conn, cmd);
	err_code rc = PQresultStatus(r) == PGRES_COPY_BOTH ? E_OK : pg_conn_error(s->conn, cmd);
	PQclear(r);
	return rc;
}

static void drop_message(pg_session *s)
{
	if (s->copybuf != NULL)
		PQfreemem(s->copybuf);
	s->copybuf = NULL;
}

err_code pg_wal_stream_next(pg_session *s, int wait_ms, pg_wal_msg *out)
{
	drop_message(s);
	memset(out, 0, sizeof(*out));
	for (int waited = 0;;) {
		char *buf = NULL;
		int n = PQgetCopyData(s->conn, &buf, 1);
		if (n > 0) {
			s->copybuf = buf;
			return pg_wal_msg_parse((const unsigned char *)buf, (size_t)n, out);
		}
		if (n == -1) { /* the server ended the stream: a timeline ends, or a shutdown */
			out->kind = PG_WAL_END;
			return E_OK;
		}
		if (n == -2)
			return pg_conn_error(s->conn, "receiving WAL");
		if (waited) {
			out->kind = PG_WAL_IDLE;
			return E_OK;
		}
		struct pollfd p = { PQsocket(s->conn), POLLIN, 0 };
		int r = poll(&p, 1, wait_ms);
		if (r < 0 && errno != EINTR)
			return err_errno(E_IO, errno, "waiting for WAL");
		if (r > 0 && PQconsumeInput(s->conn) == 0)
			return pg_conn_error(s->conn, "receiving WAL");
		waited = 1;
	}
}

err_code pg_wal_stream_status(pg_session *s, uint64_t written, uint64_t flushed)
{
	unsigned char msg[1 + 8 * 4 + 1];
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t us = (uint64_t)(now.tv_sec - PG_EPOCH_UNIX) * 1000000u + (uint64_t)now.tv_nsec / 1000u;
	msg[0] = 'r';
	put_be64(msg + 1, written);
	put_be64(msg + 9, flushed); /* what the slot may release; 0: no news */
	put_be64(msg + 17, 0);		/* applied: nothing is */
	put_be64(msg + 25, us);
	msg[33] = 0; /* no reply wanted */
	if (PQputCopyData(s->conn, (const char *)msg, sizeof(msg)) != 1 || PQflush(s->conn) != 0)
		return pg_conn_error(s->conn, "sending the standby status");
	return E_OK;
}

err_code pg_wal_stream_finish(pg_session *s, uint32_t *next_tli, uint64_t *next_lsn)
{
	drop_message(s);
	*next_tli = 0;
	*next_lsn = 0;
	/*
	 * Our CopyDone. A server shutting down may have ended the command already ("no COPY in
	 * progress"): its results below say so, and the caller reports no next timeline.
	 */
	if (PQputCopyEnd(s->conn, NULL) != 1 || PQflush(s->conn) != 0)
		log_debug("ending the WAL stream: %s", PQerrorMessage(s->conn));
	err_code rc = E_OK;
	PGresult *r;
	/* At a timeline's end: a row (next timeline, its start), then the command's completion. */
	while ((r = PQgetResult(s->conn)) != NULL) {
		ExecStatusType st = PQresultStatus(r);
		if (st == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) >= 2 && rc == E_OK) {
			*next_tli = (uint32_t)strtoul(PQgetvalue(r, 0, 0), NULL, 10);
			rc = pg_lsn_parse(PQgetvalue(r, 0, 1), next_lsn);
		} else if (st == PGRES_COPY_BOTH || st == PGRES_COPY_OUT) {
			/* data still in flight after our end: drop it until the stream closes */
			char *buf;
			while (PQgetCopyData(s->conn, &buf, 0) > 0)
				PQfreemem(buf);
		} else if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && rc == E_OK) {
			const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
			rc = pg_conn_error(s->conn, "ending the WAL stream");
			/* 58P01: "requested WAL segment ... has already been removed" */
			if (state != NULL && strcmp(state, "58P01") == 0)
				rc = err_wrap(E_NOTFOUND, "the server no longer has the WAL asked for");
		}
		PQclear(r);
	}
	return rc;
}
