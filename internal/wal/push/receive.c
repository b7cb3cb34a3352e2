/*
 * wal-receive: WAL streamed over physical replication from a slot (WALG_SLOTNAME), each
 * segment stored once complete as wal-push stores it, as WAL-G's wal-receive does. The slot is
 * told a segment is flushed only once the segment is in the repository, so the server keeps
 * every byte not yet stored, across restarts of walc and of the server. When the server's
 * timeline ends (a promoted standby), the part of the segment received on it is stored as
 * <segment>.partial and the new timeline's history file beside it, then streaming goes on.
 * A slot that lost WAL before it was stored (invalidated past max_slot_wal_keep_size, or a
 * restart point the server no longer has) stops it with the gap named and recorded for
 * wal-verify: streaming on from the server's position would leave a hole nobody sees.
 */
#include "internal/wal/wal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/catalog/catalog.h"
#include "internal/wal/wal_impl.h"

#define STATUS_EVERY_S 10 /* standby status updates, as WAL-G and pg_receivewal send them */
#define WAIT_MS 1000	  /* longest wait for a message: cancellation is seen this soon */
#define HISTORY_MAX 64	  /* timeline switches a history file may list */

typedef struct receiver {
	repo *r;
	const wal_settings *cfg;
	pg_session *s;
	uint64_t seg_size;
	uint32_t tli;
	uint64_t seg_start; /* the LSN where the buffered segment starts */
	unsigned char *buf; /* seg_size bytes */
	size_t have;
	time_t status_due;
	const char *slot;
	uint64_t server_lsn; /* the server's WAL end, as last told */
	char *state_dir;	 /* the journal of segments dropped past WALG_WAL_BACKLOG_MAX */
	wal_backlog_fn report;
	void *report_arg;
} receiver;

/*
 * The slot lost WAL walc had not stored: the archive misses everything from the segment after
 * its newest (or from the slot's restart point) to the one before the server's position, as
 * far as known. Streaming from the server's position would hide that hole, so it is an error.
 */
static err_code lost_wal(receiver *v, uint32_t tli, uint64_t restart_lsn, const char *why)
{
	uint32_t have_tli = 0;
	uint64_t newest = 0, first = 0;
	bool found = false, known = true;
	TRY(wal_newest_upto(v->r, v->seg_size, tli, &have_tli, &newest, &found));
	if (found)
		first = newest + 1;
	else if (restart_lsn != 0)
		first = restart_lsn / v->seg_size;
	else
		known = false;
	uint64_t now = v->server_lsn / v->seg_size;
	char from[WAL_NAME_LEN + 1] = "", to[WAL_NAME_LEN + 1] = "", at[WAL_NAME_LEN + 1];
	if (known)
		wal_name_format(from, found ? have_tli : tli, first, v->seg_size);
	wal_name_format(to, tli, now > 0 ? now - 1 : 0, v->seg_size);
	wal_name_format(at, tli, now, v->seg_size);
	/* so that wal-verify reports them lost, not on their way */
	if (known && first < now && wal_lost_record(v->r, tli, from, to, why) != E_OK) {
		log_warn("wal-receive: the lost WAL could not be recorded in " WAL_LOST_OBJECT ": %s",
				 err_msg());
		err_clear();
	}
	return err_set(E_NOTFOUND,
				   "wal-receive: replication slot \"%s\" %s: the archive misses the WAL from %s "
				   "to %s at most (the server is at %s): a restore cannot cross that gap; take a "
				   "new base backup, then drop the slot (SELECT pg_drop_replication_slot('%s')) "
				   "for wal-receive to create it anew",
				   v->slot, why, known ? from : "its last stored segment on", to, at, v->slot);
}

/* stored: a segment was just stored, the slot may move to its end (v->seg_start now). */
static err_code send_status(receiver *v, bool stored)
{
	v->status_due = time(NULL) + STATUS_EVERY_S;
	return pg_wal_stream_status(v->s, v->seg_start + v->have, stored ? v->seg_start : 0);
}

/* wal-push's upload of what came, with its metadata timed now (as WAL-G: the server's
 * pg_wal, where the file's own time is, may be on another machine). */
static err_code push_received(receiver *v, const char *name, const void *buf, size_t len)
{
	TRY(wal_push_mem(v->r, v->cfg, name, buf, len));
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return wal_metadata_store(v->r, v->cfg, name, now.tv_sec, now.tv_nsec);
}

/* The buffered segment as wal_005/<name>, or what came of it as <name>.partial. */
static err_code store_segment(receiver *v, bool partial)
{
	char name[WAL_NAME_LEN + sizeof(".partial")];
	wal_name_format(name, v->tli, v->seg_start / v->seg_size, v->seg_size);
	if (partial) {
		/* as PostgreSQL keeps a .partial: full size, zeros after the timeline's end */
		strcat(name, ".partial");
		memset(v->buf + v->have, 0, v->seg_size - v->have);
	}
	return push_received(v, name, v->buf, v->seg_size);
}

/* Timeline tli's history file from the server, checked and stored; *text when wanted. */
static err_code store_history(receiver *v, uint32_t tli, char **text, size_t *len)
{
	char *t = NULL, name[32];
	size_t n = 0;
	TRY(pg_timeline_history(v->s, tli, &t, &n));
	const char *bad = pg_history_check(t, n, tli);
	snprintf(name, sizeof(name), "%08X.history", tli);
	err_code rc = bad ? err_set(E_CORRUPT, "wal-receive: the server's %s: %s", name, bad)
					  : push_received(v, name, t, n);
	if (rc == E_OK && text != NULL) {
		*text = t;
		*len = n;
	} else {
		free(t);
	}
	return rc;
}

/*
 * A complete segment: stored, or past WALG_WAL_BACKLOG_MAX (the server keeps more than that
 * for the slot from its start) dropped, recorded in the journal first; either way the slot
 * may then move past it. Before a store, the gaps dropped earlier are recorded in the
 * repository, so that nothing after a gap is stored before the gap is known.
 */
static err_code complete_segment(receiver *v)
{
	uint64_t limit = v->cfg->wal_backlog_max_bytes;
	uint64_t held = v->server_lsn > v->seg_start ? v->server_lsn - v->seg_start : v->seg_size;
	wal_backlog b = { .bytes = held, .files = (held + v->seg_size - 1) / v->seg_size,
					  .limit = limit };
	bool dropped = false;
	if (limit > 0 && held > limit) {
		char name[WAL_NAME_LEN + 1], *size = xasprintf("%.0f MiB", (double)held / 1048576);
		char *max = xasprintf("%.0f MiB", (double)limit / 1048576);
		wal_name_format(name, v->tli, v->seg_start / v->seg_size, v->seg_size);
		char *why = xasprintf("the server kept %s of WAL for replication slot %s, over "
							  "WALG_WAL_BACKLOG_MAX (%s)",
							  size, v->slot, max);
		const char *names[] = { name };
		dropped = wal_dropped_add(v->state_dir, repo_describe(v->r), names, 1,
								  v->seg_size, "wal-receive", why) == E_OK;
		if (!dropped) {
			log_error("wal-receive: WALG_WAL_BACKLOG_MAX: cannot record the dropped WAL, so "
					  "nothing is dropped: %s",
					  err_msg());
			err_clear();
		}
		free(why);
		free(size);
		free(max);
	}
	if (!dropped) {
		TRY(wal_dropped_flush(v->r, v->state_dir));
		TRY(store_segment(v, false));
	}
	wal_backlog_note(v->state_dir, v->r, &b, dropped, "the server's pg_wal (for the slot)",
					 v->report, v->report_arg);
	return E_OK;
}

/* XLogData: appended to the segment, each segment stored as it completes. */
static err_code take(receiver *v, const pg_wal_msg *m)
{
	if (m->start != v->seg_start + v->have) {
		char want[32], got[32];
		pg_lsn_format(v->seg_start + v->have, want);
		pg_lsn_format(m->start, got);
		return err_set(E_CORRUPT, "wal-receive: the server sent WAL from %s where %s was next",
					   got, want);
	}
	const unsigned char *p = m->data;
	size_t left = m->len;
	while (left > 0) {
		size_t n = v->seg_size - v->have < left ? v->seg_size - v->have : left;
		memcpy(v->buf + v->have, p, n);
		v->have += n;
		p += n;
		left -= n;
		if (v->have == v->seg_size) {
			TRY(complete_segment(v));
			v->seg_start += v->seg_size;
			v->have = 0;
			TRY(send_status(v, true));
		}
	}
	return E_OK;
}

/*
 * Streams timeline v->tli from v->seg_start until the server ends it (*next_tli, where the
 * next one starts) or walc is asked to stop (*next_tli 0).
 */
static err_code stream_timeline(receiver *v, const char *slot, uint32_t *next_tli,
								uint64_t *next_lsn)
{
	char at[32];
	pg_lsn_format(v->seg_start, at);
	log_info("wal-receive: streaming timeline %u from %s (slot %s)", v->tli, at, slot);
	TRY(pg_wal_stream_start(v->s, slot, v->tli, v->seg_start));
	v->have = 0;
	*next_tli = 0;
	TRY(send_status(v, false));
	for (;;) {
		if (cancel_requested() != 0) {
			log_info("wal-receive: stopping; the slot keeps what was not stored (from %s)", at);
			return E_OK;
		}
		if (time(NULL) >= v->status_due)
			TRY(send_status(v, false));
		pg_wal_msg m;
		TRY(pg_wal_stream_next(v->s, WAIT_MS, &m));
		if (m.server_end > v->server_lsn)
			v->server_lsn = m.server_end;
		if (m.kind == PG_WAL_DATA) {
			TRY(take(v, &m));
			pg_lsn_format(v->seg_start, at);
		} else if (m.kind == PG_WAL_KEEPALIVE && m.reply) {
			TRY(send_status(v, false));
		} else if (m.kind == PG_WAL_END) {
			break;
		}
	}
	/* a shutdown ends the stream too: the segment under way goes on after the restart */
	err_code frc = pg_wal_stream_finish(v->s, next_tli, next_lsn);
	if (frc == E_NOTFOUND) {
		char *why = xasprintf("needs WAL the server no longer has (%s)", err_msg());
		err_clear();
		err_code rc = lost_wal(v, v->tli, v->seg_start + v->have, why);
		free(why);
		return rc;
	}
	if (frc != E_OK || *next_tli == 0) {
		char *why = xstrdup(frc != E_OK ? err_msg() : "");
		err_code rc = err_set(E_IO,
							  "wal-receive: the server ended replication (shutting down?); the "
							  "slot keeps the WAL from %s%s%s",
							  at, why[0] ? ": " : "", why);
		free(why);
		return rc;
	}
	if (*next_tli <= v->tli || *next_lsn < v->seg_start)
		return err_set(E_CORRUPT, "wal-receive: the server's timeline %u ended with next "
								  "timeline %u, which does not follow",
					   v->tli, *next_tli);
	return v->have > 0 ? store_segment(v, true) : E_OK;
}

/* The timeline of lsn in the server's history (tli's history file, stored on the way). */
static err_code start_timeline(receiver *v, uint32_t tli, uint64_t lsn, uint32_t *out)
{
	*out = tli;
	if (tli < 2)
		return E_OK;
	char *text = NULL;
	size_t len = 0, n = 0;
	TRY(store_history(v, tli, &text, &len));
	pg_history_entry e[HISTORY_MAX];
	const char *bad = pg_history_parse(text, len, tli, e, HISTORY_MAX, &n);
	free(text);
	if (bad != NULL)
		return err_set(E_CORRUPT, "wal-receive: timeline %u's history: %s", tli, bad);
	for (size_t i = 0; i < n; i++)
		if (lsn < e[i].switch_lsn) {
			*out = e[i].parent;
			break;
		}
	return E_OK;
}

/* PostgreSQL's rule for slot names; the name also goes into replication commands unquoted. */
static err_code check_slot_name(const char *slot)
{
	size_t n = strlen(slot);
	if (n == 0 || n > 63 || strspn(slot, "abcdefghijklmnopqrstuvwxyz0123456789_") != n)
		return err_set(E_CONFIG,
					   "WALG_SLOTNAME: expected 1 to 63 lower-case letters, digits or _, got "
					   "\"%s\"",
					   slot);
	return E_OK;
}

/*
 * The slot, if it exists, from an SQL session: pg_replication_slots needs no privilege, unlike
 * the server facts an SQL session would give (the replication session gives those).
 */
static err_code read_slot(const char *slot, pg_slot_info *info)
{
	pg_session *sql = NULL;
	TRY(pg_connect(false, &sql));
	err_code rc = pg_slot_read(sql, slot, info);
	pg_disconnect(sql);
	return rc;
}

err_code wal_receive(repo *r, const wal_settings *cfg, wal_backlog_fn report, void *arg)
{
	const char *slot = cfg->slot_name;
	pg_slot_info si;
	/* checked here, not with the other settings: a name only this command uses */
	TRY(check_slot_name(slot));
	TRY(read_slot(slot, &si));
	bool exists = si.exists;
	uint64_t restart = si.restart_lsn;

	receiver v = { .r = r, .slot = slot, .report = report, .report_arg = arg };
	{
		char *wal_dir = cfg->pg->pgdata ? xasprintf("%s/pg_wal", cfg->pg->pgdata) : xstrdup("/tmp");
		v.state_dir = wal_state_dir(wal_dir);
		free(wal_dir);
	}
	pg_server_info ri;
	TRY(pg_connect(true, &v.s));
	err_code rc = pg_server_info_get(v.s, &ri);
	uint64_t seg_size = ri.wal_segsize;
	/* PostgreSQL's segments are a power of two from 1 MiB to 1 GiB: the buffer is one of them */
	if (rc == E_OK && (seg_size < (UINT64_C(1) << 20) || seg_size > (UINT64_C(1) << 30) ||
					   (seg_size & (seg_size - 1)) != 0))
		rc = err_set(E_CORRUPT, "wal-receive: the server's WAL segment size (SHOW "
								"wal_segment_size) is unreadable or not 1 MiB to 1 GiB");
	if (rc == E_OK)
		rc = catalog_check_cluster(r, ri.system_id, cfg->catalog, "wal-receive");
	/* wal-push's header check reads segments of this size */
	pg_settings pg = *cfg->pg;
	pg.pg_wal_size_mb = (long)(seg_size >> 20);
	wal_settings own = *cfg;
	own.pg = &pg;
	v.cfg = &own;
	v.seg_size = seg_size;
	v.server_lsn = ri.xlogpos;
	/* invalidated (max_slot_wal_keep_size): its WAL is gone, and so is its restart LSN */
	if (rc == E_OK && exists && strcmp(si.wal_status, "lost") == 0)
		rc = lost_wal(&v, ri.timeline, restart,
					  "was invalidated (wal_status lost: the server removed WAL it kept for "
					  "the slot, max_slot_wal_keep_size)");
	if (rc == E_OK && exists && strcmp(si.wal_status, "unreserved") == 0)
		log_warn("wal-receive: replication slot %s is past max_slot_wal_keep_size (wal_status "
				 "unreserved): the server may remove WAL it still needs at its next checkpoint",
				 slot);
	uint64_t start = exists && restart != 0 ? restart : ri.xlogpos;
	if (rc == E_OK && !exists) {
		rc = pg_slot_create(v.s, slot);
		if (rc == E_OK)
			log_info("wal-receive: created physical replication slot %s", slot);
	}
	if (rc == E_OK)
		rc = start_timeline(&v, ri.timeline, start, &v.tli);
	pg_server_info_free(&ri);
	v.buf = rc == E_OK ? xmalloc(seg_size) : NULL;
	v.seg_start = rc == E_OK ? start - start % seg_size : 0;
	while (rc == E_OK) {
		uint32_t next_tli;
		uint64_t next_lsn;
		rc = stream_timeline(&v, slot, &next_tli, &next_lsn);
		if (rc != E_OK || next_tli == 0)
			break;
		log_info("wal-receive: timeline %u ended; timeline %u follows", v.tli, next_tli);
		v.tli = next_tli;
		v.seg_start = next_lsn - next_lsn % seg_size;
		rc = store_history(&v, next_tli, NULL, NULL);
	}
	free(v.buf);
	free(v.state_dir);
	pg_disconnect(v.s);
	return rc;
}
