/*
 * WAL records read as a byte stream of consecutive segments, decoded only as far as recovery
 * targets need: where each record starts and ends, its transaction, and the time and name of
 * transaction ends and restore points. Pages are checked as PostgreSQL's reader does (magic,
 * address, continuation lengths) and records by their back-links, so the stream's valid WAL
 * ends where a recycled segment's stale bytes or zeros begin.
 */
#include "internal/pg/bytes_impl.h"
#include "internal/pg/pg.h"

#include <stdlib.h>
#include <string.h>

#define WAL_PAGE 8192
#define SHORT_PHD 24
#define LONG_PHD 40
#define REC_HEADER 24
#define XLP_FIRST_IS_CONTRECORD 0x0001
#define XLP_LONG_HEADER 0x0002
#define XLP_FIRST_IS_OVERWRITE_CONTRECORD 0x0008
#define WAL_MAGIC_MIN 0xD106 /* PostgreSQL 13 */
#define WAL_MAGIC_PG15 0xD110
/* Records of the two resource managers decoded are kept whole up to this size. */
#define KEEP_MAX ((size_t)4 << 20)
#define RM_XLOG 0
#define RM_XACT 1
#define XLOG_SWITCH 0x40
#define XLOG_RESTORE_POINT 0x70
#define XACT_OPMASK 0x70
#define XACT_COMMIT 0x00
#define XACT_ABORT 0x20
#define XACT_COMMIT_PREPARED 0x30
#define XACT_ABORT_PREPARED 0x40
/* Seconds from the Unix epoch to PostgreSQL's (2000-01-01). */
#define PG_EPOCH_OFFSET INT64_C(946684800)

struct wal_reader {
	uint64_t seg_size;
	uint64_t pos; /* LSN of the next byte */
	uint16_t magic;
	bool (*on_record)(const wal_record *rec, void *arg);
	void *arg;
	bool stopped, ended;
	uint64_t end_lsn; /* end of the last valid record */
	uint64_t prev_lsn; /* start of the last record, 0 before the first */
	/* page header being collected */
	unsigned char phd[LONG_PHD];
	size_t phd_len, phd_need;
	uint64_t cont_left; /* bytes of a record continued on this page that we skip */
	uint64_t skip_left; /* padding after a record */
	uint64_t seg_left;	/* the rest of a segment after a switch record, headers and all */
	/* record being collected */
	bool in_rec;
	uint64_t rec_lsn;
	uint32_t rec_len; /* xl_tot_len, once its 4 bytes are in */
	uint64_t rec_got;
	unsigned char *rec;
	size_t rec_cap;
	bool keep;
};

wal_reader *wal_reader_new(uint64_t seg_size, uint64_t start_lsn,
						   bool (*on_record)(const wal_record *rec, void *arg), void *arg)
{
	wal_reader *r = xcalloc(1, sizeof(*r));
	r->seg_size = seg_size;
	r->pos = start_lsn - start_lsn % seg_size;
	r->end_lsn = r->pos;
	r->on_record = on_record;
	r->arg = arg;
	return r;
}

void wal_reader_free(wal_reader *r)
{
	if (r != NULL)
		free(r->rec);
	free(r);
}

bool wal_reader_done(const wal_reader *r, uint64_t *end_lsn)
{
	*end_lsn = r->end_lsn;
	return r->stopped || r->ended;
}

static void end_of_wal(wal_reader *r)
{
	r->ended = true;
}

/* Checks a whole page header; sets up the continuation it announces. */
static void page_header(wal_reader *r)
{
	uint64_t page = r->pos - r->phd_len;
	uint16_t magic = (uint16_t)pg_le(r->phd, 2), info = (uint16_t)pg_le(r->phd + 2, 2);
	uint64_t addr = pg_le(r->phd + 8, 8);
	uint32_t rem = (uint32_t)pg_le(r->phd + 16, 4);
	bool is_long = (info & XLP_LONG_HEADER) != 0;
	if (magic < WAL_MAGIC_MIN || addr != page || is_long != (page % r->seg_size == 0)) {
		end_of_wal(r);
		return;
	}
	r->magic = magic;
	if (info & XLP_FIRST_IS_OVERWRITE_CONTRECORD) {
		/* The record the last page began was never finished: it is abandoned. */
		r->in_rec = false;
	}
	if (r->in_rec) {
		uint64_t left = r->rec_len ? r->rec_len - r->rec_got : 0;
		if (!(info & XLP_FIRST_IS_CONTRECORD) || (r->rec_len && rem != left))
			end_of_wal(r);
	} else if (info & XLP_FIRST_IS_CONTRECORD) {
		/* Mid-record, as at the start of the first segment read: skip to the next record. */
		r->cont_left = rem;
	}
}

/* The main data of a record: after its block headers, at its end (xlogrecord.h). */
static bool main_data(const wal_reader *r, const unsigned char **data, uint32_t *len)
{
	const unsigned char *p = r->rec + REC_HEADER, *end = r->rec + r->rec_len;
	uint64_t block_bytes = 0;
	bool pg15 = r->magic >= WAL_MAGIC_PG15;
	while (p < end) {
		unsigned id = *p++;
		if (id == 255 || id == 254) { /* XLR_BLOCK_ID_DATA_SHORT / _LONG */
			int n = id == 255 ? 1 : 4;
			if (end - p < n)
				return false;
			*len = (uint32_t)pg_le(p, n);
			p += n;
			if ((uint64_t)(end - p) != block_bytes + *len)
				return false;
			*data = end - *len;
			return true;
		}
		if (id == 253 || id == 252) { /* origin (2 bytes), top-level xid (4) */
			p += id == 253 ? 2 : 4;
			continue;
		}
		if (id > 32 || end - p < 3)
			return false;
		unsigned fork_flags = p[0];
		block_bytes += pg_le(p + 1, 2);
		p += 3;
		if (fork_flags & 0x10) { /* BKPBLOCK_HAS_IMAGE */
			if (end - p < 5)
				return false;
			unsigned bimg_info = p[4];
			bool compressed = pg15 ? (bimg_info & 0x1c) != 0 : (bimg_info & 0x02) != 0;
			block_bytes += pg_le(p, 2);
			p += 5;
			if ((bimg_info & 0x01) && compressed) /* BKPIMAGE_HAS_HOLE: hole length */
				p += 2;
		}
		p += (fork_flags & 0x80) ? 4 : 16; /* BKPBLOCK_SAME_REL: no RelFileLocator */
	}
	*len = 0;
	*data = end;
	return p == end;
}

static int64_t unix_us(const unsigned char *p)
{
	return (int64_t)pg_le(p, 8) + PG_EPOCH_OFFSET * 1000000;
}

/* A whole record: its back-link checked, then what it means to recovery targets. */
static void record_done(wal_reader *r)
{
	wal_record rec = { .lsn = r->rec_lsn, .end_lsn = r->pos };
	const unsigned char *h = r->rec;
	rec.xid = (uint32_t)pg_le(h + 4, 4);
	uint64_t prev = pg_le(h + 8, 8);
	rec.info = h[16];
	rec.rmid = h[17];
	if (r->prev_lsn != 0 && prev != r->prev_lsn) {
		end_of_wal(r);
		return;
	}
	r->prev_lsn = r->rec_lsn;
	r->end_lsn = r->pos;
	const unsigned char *data;
	uint32_t len;
	if (r->keep && main_data(r, &data, &len)) {
		unsigned op = rec.info & XACT_OPMASK;
		if (rec.rmid == RM_XACT && len >= 8 &&
			(op == XACT_COMMIT || op == XACT_ABORT || op == XACT_COMMIT_PREPARED ||
			 op == XACT_ABORT_PREPARED)) {
			rec.kind = op == XACT_COMMIT || op == XACT_COMMIT_PREPARED ? WAL_REC_COMMIT
																	  : WAL_REC_ABORT;
			rec.prepared = op == XACT_COMMIT_PREPARED || op == XACT_ABORT_PREPARED;
			rec.time_us = unix_us(data);
		} else if (rec.rmid == RM_XLOG && (rec.info & 0xf0) == XLOG_RESTORE_POINT && len >= 72) {
			rec.kind = WAL_REC_RESTORE_POINT;
			rec.time_us = unix_us(data);
			memcpy(rec.name, data + 8, 64);
			rec.name[64] = '\0';
		}
	}
	if (rec.rmid == RM_XLOG && (rec.info & 0xf0) == XLOG_SWITCH)
		r->seg_left = (r->seg_size - r->pos % r->seg_size) % r->seg_size;
	else
		r->skip_left = (8 - r->pos % 8) % 8; /* MAXALIGN */
	if (!r->on_record(&rec, r->arg))
		r->stopped = true;
}

/* Bytes of a record: the header's length first, then the rest (kept when decoded). */
static err_code record_bytes(wal_reader *r, const unsigned char *p, size_t n)
{
	if (!r->in_rec) {
		r->in_rec = true;
		r->rec_lsn = r->pos;
		r->rec_len = 0;
		r->rec_got = 0;
		r->keep = true;
	}
	/* The header first, alone: its length says where the record ends. */
	uint64_t want_total = r->rec_len != 0 ? r->rec_len : REC_HEADER;
	size_t take = n < want_total - r->rec_got ? n : (size_t)(want_total - r->rec_got);
	if (r->keep) {
		size_t want = r->rec_got + take;
		if (want > r->rec_cap) {
			r->rec_cap = want < 256 ? 256 : want * 2 < KEEP_MAX ? want * 2 : KEEP_MAX;
			r->rec = xrealloc(r->rec, r->rec_cap);
		}
		memcpy(r->rec + r->rec_got, p, take);
	}
	r->rec_got += take;
	r->pos += take;
	if (r->rec_len == 0 && r->rec_got >= REC_HEADER) {
		r->rec_len = (uint32_t)pg_le(r->rec, 4);
		if (r->rec_len < REC_HEADER) { /* zeros: the end of what was written */
			r->in_rec = false;
			end_of_wal(r);
			return E_OK;
		}
		unsigned rmid = r->rec[17];
		r->keep = rmid == RM_XLOG || rmid == RM_XACT;
		if (r->keep && r->rec_len > KEEP_MAX)
			return err_set(E_FAIL, "WAL record at %llX/%llX is %u bytes, over %zu",
						   (unsigned long long)(r->rec_lsn >> 32),
						   (unsigned long long)(r->rec_lsn & 0xffffffff), r->rec_len, KEEP_MAX);
	}
	if (r->rec_len != 0 && r->rec_got == r->rec_len) {
		r->in_rec = false;
		record_done(r);
	}
	return E_OK;
}

err_code wal_reader_feed(wal_reader *r, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	while (len > 0 && !r->stopped && !r->ended) {
		if (r->seg_left > 0) {
			size_t n = r->seg_left < len ? (size_t)r->seg_left : len;
			r->seg_left -= n, r->pos += n, p += n, len -= n;
			continue;
		}
		uint64_t in_page = r->pos % WAL_PAGE;
		if (in_page == 0 && r->phd_need == 0) {
			r->phd_need = r->pos % r->seg_size == 0 ? LONG_PHD : SHORT_PHD;
			r->phd_len = 0;
		}
		if (r->phd_need != 0) {
			size_t n = r->phd_need - r->phd_len < len ? r->phd_need - r->phd_len : len;
			memcpy(r->phd + r->phd_len, p, n);
			r->phd_len += n, r->pos += n, p += n, len -= n;
			if (r->phd_len == r->phd_need) {
				r->phd_need = 0;
				page_header(r);
			}
			continue;
		}
		size_t room = (size_t)(WAL_PAGE - in_page), n = room < len ? room : len;
		if (r->cont_left > 0 || r->skip_left > 0) {
			uint64_t *left = r->cont_left > 0 ? &r->cont_left : &r->skip_left;
			if (n > *left)
				n = (size_t)*left;
			*left -= n;
			if (left == &r->cont_left && *left == 0)
				r->skip_left = (8 - (r->pos + n) % 8) % 8;
			r->pos += n, p += n, len -= n;
			continue;
		}
		uint64_t before = r->pos;
		TRY(record_bytes(r, p, n));
		size_t used = (size_t)(r->pos - before);
		p += used, len -= used;
	}
	return E_OK;
}
