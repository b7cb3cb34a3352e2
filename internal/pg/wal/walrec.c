/*
 * WAL records read as a byte stream of consecutive segments, decoded only as far as recovery
 * targets need: where each record starts and ends, its transaction, and the time and name of
 * transaction ends and restore points. Pages are checked as PostgreSQL's reader checks them
 * (magic, flags, address, timeline, continuation lengths), record headers by their length,
 * resource manager and back-link, and whole records by their CRC-32C. The valid WAL ends where
 * a header stops matching (zeros, a recycled segment's stale bytes); a record whose header is
 * right and whose checksum is not is damage, told apart from that end.
 */
#include "internal/pg/bytes_impl.h"
#include "internal/pg/pg.h"
#include "internal/pg/wal/walpage_impl.h"

#include <stdlib.h>
#include <string.h>

#define WAL_PAGE 8192
#define SHORT_PHD 24
#define LONG_PHD 40
#define REC_HEADER WAL_REC_HEADER
#define REC_CRC_AT 20 /* offsetof(XLogRecord, xl_crc) */
/* PostgreSQL's largest record (XLogRecordMaxSize, 16+), and its resource managers' ids. */
#define REC_MAX ((uint32_t)1020 << 20)
#define RM_MAX_BUILTIN 31
#define RM_MIN_CUSTOM 128
/* Records of the two resource managers decoded are kept whole up to this size. */
#define KEEP_MAX ((size_t)4 << 20)
#define RM_XLOG 0
#define RM_XACT 1
#define XLOG_CHECKPOINT_SHUTDOWN 0x00
#define XLOG_CHECKPOINT_ONLINE 0x10
#define XLOG_SWITCH 0x40
#define XLOG_RESTORE_POINT 0x70
#define XACT_OPMASK 0x70
#define XACT_COMMIT 0x00
#define XACT_ABORT 0x20
#define XACT_COMMIT_PREPARED 0x30
#define XACT_ABORT_PREPARED 0x40
/* Seconds from the Unix epoch to PostgreSQL's (2000-01-01). */
#define PG_EPOCH_OFFSET INT64_C(946684800)
#define CRC_INIT 0xFFFFFFFFu

struct wal_reader {
	uint64_t seg_size;
	uint64_t pos; /* LSN of the next byte */
	uint16_t magic; /* of the first page */
	uint32_t tli;	/* of the last page */
	bool (*on_record)(const wal_record *rec, void *arg);
	void *arg;
	bool stopped;
	wal_ending end;
	uint64_t end_lsn;  /* end of the last valid record */
	uint64_t prev_lsn; /* start of the last record whose header was valid, 0 before the first */
	bool started;	   /* past the continuation the reading may start in */
	/* page header being collected */
	unsigned char phd[LONG_PHD];
	size_t phd_len, phd_need;
	uint64_t cont_left; /* bytes of that continuation still to come */
	uint64_t skip_left; /* padding after a record */
	uint64_t seg_left;	/* the rest of a segment after a switch record, headers and all */
	wal_seam seam;		/* the head, as it is read; the tail is filled in when asked */
	/* record being collected */
	bool in_rec;
	uint64_t rec_lsn;
	uint64_t rec_prev; /* prev_lsn when it began */
	uint32_t rec_len;  /* xl_tot_len, once the header is in */
	uint64_t rec_got;
	unsigned char hdr[REC_HEADER];
	uint32_t crc; /* register over the bytes after the header */
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
	r->seam.seg_start = r->pos;
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
	return r->stopped || r->end.kind != WAL_END_NONE;
}

void wal_reader_end(const wal_reader *r, wal_ending *out)
{
	*out = r->end;
}

static void end_of_wal(wal_reader *r, wal_end_kind kind, uint64_t at, const char *why)
{
	if (r->end.kind == WAL_END_NONE)
		r->end = (wal_ending){ kind, at, why };
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)pg_le(p, 4);
}

/* Checks a whole page header; sets up the continuation it announces. */
static void page_header(wal_reader *r)
{
	uint64_t page = r->pos - r->phd_len;
	uint16_t magic = (uint16_t)pg_le(r->phd, 2), info = (uint16_t)pg_le(r->phd + 2, 2);
	uint32_t tli = le32(r->phd + 4);
	uint64_t addr = pg_le(r->phd + 8, 8);
	uint32_t rem = le32(r->phd + 16);
	bool is_long = (info & XLP_LONG_HEADER) != 0;
	const char *bad = NULL;
	if (magic < WAL_MAGIC_PG13 || (r->magic != 0 && magic != r->magic))
		bad = "page magic is not the WAL's";
	else if ((info & ~wal_flags_known(magic)) != 0)
		bad = "unknown page flags";
	else if (addr != page)
		bad = "page address is not its place"; /* a recycled segment's stale page, typically */
	else if (is_long != (page % r->seg_size == 0))
		bad = "long page header misplaced";
	else if (is_long && (pg_le(r->phd + 32, 4) != r->seg_size || pg_le(r->phd + 36, 4) != WAL_PAGE))
		bad = "long page header: wrong segment or page size";
	else if (tli == 0 || tli < r->tli)
		bad = "page timeline goes back";
	if (bad != NULL) {
		end_of_wal(r, WAL_END_INVALID, page, bad);
		return;
	}
	r->magic = magic;
	r->tli = tli;
	if (info & wal_flag_overwrite(magic)) {
		/*
		 * The record the last page began was never finished: it is abandoned, and the next
		 * one links back to the record before it, as PostgreSQL's reader expects.
		 */
		if (r->in_rec)
			r->prev_lsn = r->rec_prev;
		r->in_rec = false;
		if (!r->started) {
			r->seam.head_overwrite = true;
			r->cont_left = 0;
		}
	}
	bool cont = (info & XLP_FIRST_IS_CONTRECORD) != 0;
	if (r->in_rec) {
		uint32_t total = r->rec_len != 0 ? r->rec_len : r->rec_got >= 4 ? le32(r->hdr) : 0;
		if (!cont)
			end_of_wal(r, WAL_END_INVALID, r->rec_lsn, "record not continued on the next page");
		else if (total != 0 && rem != total - r->rec_got)
			end_of_wal(r, WAL_END_INVALID, r->rec_lsn, "continuation length does not match");
	} else if (!r->started) {
		/* Mid-record, as at the start of the first segment read: the head, read apart. */
		if (r->cont_left == 0 && cont) { /* the first page: started is set once it is read */
			if (rem == 0)
				end_of_wal(r, WAL_END_INVALID, page, "continuation length does not match");
			r->seam.head_rem = rem;
			r->cont_left = rem;
		} else if (r->cont_left != 0 && (!cont || rem != r->cont_left)) {
			end_of_wal(r, WAL_END_INVALID, page, "continuation length does not match");
		}
	} else if (cont) {
		end_of_wal(r, WAL_END_INVALID, page, "continuation where a record begins");
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

/* A whole record: its checksum, then what it means to recovery targets. */
static void record_done(wal_reader *r)
{
	uint32_t crc = pg_crc32c_update(r->crc, r->hdr, REC_CRC_AT) ^ CRC_INIT;
	if (crc != le32(r->hdr + REC_CRC_AT)) {
		end_of_wal(r, WAL_END_DAMAGED, r->rec_lsn, "record checksum mismatch");
		return;
	}
	wal_record rec = { .lsn = r->rec_lsn, .end_lsn = r->pos };
	const unsigned char *h = r->hdr;
	rec.xid = le32(h + 4);
	rec.info = h[16];
	rec.rmid = h[17];
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
		} else if (rec.rmid == RM_XLOG && len >= 8 &&
				   ((rec.info & 0xf0) == XLOG_CHECKPOINT_SHUTDOWN ||
					(rec.info & 0xf0) == XLOG_CHECKPOINT_ONLINE)) {
			rec.kind = WAL_REC_CHECKPOINT; /* CheckPoint starts with redo */
			rec.redo = pg_le(data, 8);
		}
	}
	if (rec.rmid == RM_XLOG && (rec.info & 0xf0) == XLOG_SWITCH)
		r->seg_left = (r->seg_size - r->pos % r->seg_size) % r->seg_size;
	else
		r->skip_left = (8 - r->pos % 8) % 8; /* MAXALIGN */
	if (!r->on_record(&rec, r->arg))
		r->stopped = true;
}

/*
 * A whole record header, checked as PostgreSQL checks one before reading the rest: a length
 * (zeros end the WAL), a resource manager, and the back-link to the record before.
 */
static err_code header_done(wal_reader *r)
{
	uint32_t len = le32(r->hdr);
	uint64_t prev = pg_le(r->hdr + 8, 8);
	unsigned rmid = r->hdr[17];
	const char *bad = NULL;
	if (len < REC_HEADER)
		bad = "invalid record length";
	else if (len > REC_MAX)
		bad = "record length too large";
	else if (rmid > RM_MAX_BUILTIN && rmid < RM_MIN_CUSTOM)
		bad = "invalid resource manager";
	else if (r->rec_prev != 0 && prev != r->rec_prev)
		bad = "record back-link does not point to the record before";
	if (bad != NULL) {
		r->in_rec = false;
		end_of_wal(r, WAL_END_INVALID, r->rec_lsn, bad);
		return E_OK;
	}
	if (r->rec_prev == 0 && r->seam.first_lsn == 0) {
		r->seam.first_lsn = r->rec_lsn;
		r->seam.first_prev = prev;
	}
	r->prev_lsn = r->rec_lsn;
	r->rec_len = len;
	r->keep = rmid == RM_XLOG || rmid == RM_XACT;
	if (r->keep && len > KEEP_MAX)
		return err_set(E_FAIL, "WAL record at %llX/%llX is %u bytes, over %zu",
					   (unsigned long long)(r->rec_lsn >> 32),
					   (unsigned long long)(r->rec_lsn & 0xffffffff), len, KEEP_MAX);
	if (r->keep) {
		size_t want = len < 256 ? 256 : len;
		if (want > r->rec_cap) {
			r->rec_cap = want * 2 < KEEP_MAX ? want * 2 : KEEP_MAX;
			r->rec = xrealloc(r->rec, r->rec_cap);
		}
		memcpy(r->rec, r->hdr, REC_HEADER);
	}
	return E_OK;
}

/* Bytes of a record: the header first, alone, then the rest (kept when decoded). */
static err_code record_bytes(wal_reader *r, const unsigned char *p, size_t n)
{
	if (!r->in_rec) {
		r->in_rec = true;
		r->started = true;
		r->rec_lsn = r->pos;
		r->rec_prev = r->prev_lsn;
		r->rec_len = 0;
		r->rec_got = 0;
		r->crc = CRC_INIT;
		r->keep = false;
	}
	if (r->rec_got < REC_HEADER) {
		size_t take = n < REC_HEADER - r->rec_got ? n : (size_t)(REC_HEADER - r->rec_got);
		memcpy(r->hdr + r->rec_got, p, take);
		r->rec_got += take;
		r->pos += take;
		if (r->rec_got == REC_HEADER)
			TRY(header_done(r));
		if (!r->in_rec || r->rec_len != REC_HEADER)
			return E_OK;
	} else {
		size_t take = n < r->rec_len - r->rec_got ? n : (size_t)(r->rec_len - r->rec_got);
		r->crc = pg_crc32c_update(r->crc, p, take);
		if (r->keep)
			memcpy(r->rec + r->rec_got, p, take);
		r->rec_got += take;
		r->pos += take;
	}
	if (r->rec_got == r->rec_len) {
		r->in_rec = false;
		record_done(r);
	}
	return E_OK;
}

/* The continuation the reading starts in: its first bytes kept, the rest checksummed. */
static void head_bytes(wal_reader *r, const unsigned char *p, size_t n)
{
	wal_seam *s = &r->seam;
	if (s->head_len < REC_HEADER) {
		size_t take = n < REC_HEADER - s->head_len ? n : (size_t)(REC_HEADER - s->head_len);
		memcpy(s->head_first + s->head_len, p, take);
		s->head_len += take;
		p += take;
		n -= take;
	}
	s->head_crc = pg_crc32c_update(s->head_crc, p, n);
	s->head_len += n;
}

err_code wal_reader_feed(wal_reader *r, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	while (len > 0 && !r->stopped && r->end.kind == WAL_END_NONE) {
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
		if (r->cont_left > 0) {
			if (n > r->cont_left)
				n = (size_t)r->cont_left;
			head_bytes(r, p, n);
			r->cont_left -= n;
			r->pos += n, p += n, len -= n;
			if (r->cont_left == 0) {
				r->started = true;
				r->skip_left = (8 - r->pos % 8) % 8;
			}
			continue;
		}
		if (r->skip_left > 0) {
			if (n > r->skip_left)
				n = (size_t)r->skip_left;
			r->skip_left -= n;
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

void wal_reader_seam(const wal_reader *r, wal_seam *out)
{
	*out = r->seam;
	out->last_lsn = r->in_rec ? r->rec_lsn : r->prev_lsn;
	out->tail_open = r->in_rec;
	if (r->in_rec) {
		out->tail_lsn = r->rec_lsn;
		out->tail_prev = r->rec_prev;
		out->tail_hdr_len = (uint32_t)(r->rec_got < REC_HEADER ? r->rec_got : REC_HEADER);
		memcpy(out->tail_hdr, r->hdr, out->tail_hdr_len);
		out->tail_crc = r->crc;
		out->tail_got = r->rec_got;
	}
}

/* What the carried record's header lacks, from the head's first bytes. */
static const char *finish_header(wal_stitch *st, const wal_seam *s, size_t *used)
{
	*used = 0;
	if (st->hdr_len == REC_HEADER)
		return NULL;
	size_t need = REC_HEADER - st->hdr_len;
	if (s->head_len < need)
		return "record header cut short at the segment's end";
	memcpy(st->hdr + st->hdr_len, s->head_first, need);
	st->hdr_len = REC_HEADER;
	*used = need;
	uint32_t len = le32(st->hdr);
	if (len < REC_HEADER || len > REC_MAX)
		return "invalid record length";
	if (st->prev != 0 && pg_le(st->hdr + 8, 8) != st->prev)
		return "record back-link does not point to the record before";
	return NULL;
}

const char *wal_stitch_next(wal_stitch *st, const wal_seam *s, uint64_t *at)
{
	*at = st->lsn;
	const char *bad = NULL;
	if (!st->known)
		goto adopt;
	if (s->head_overwrite && st->open) {
		/* PostgreSQL abandoned the record the segment before began: the next links past it */
		st->last = st->prev;
		st->open = false;
	}
	if (st->open) {
		if (s->head_rem == 0)
			return "record not continued in the next segment";
		size_t used;
		if ((bad = finish_header(st, s, &used)) != NULL)
			return bad;
		uint32_t total = le32(st->hdr);
		if (st->got >= total || s->head_rem != total - st->got)
			return "continuation length does not match";
		size_t kept = s->head_len < REC_HEADER ? (size_t)s->head_len : REC_HEADER;
		st->crc = pg_crc32c_update(st->crc, s->head_first + used, kept - used);
		if (s->head_len > REC_HEADER)
			st->crc = pg_crc32c_shift(st->crc, s->head_len - REC_HEADER) ^ s->head_crc;
		st->got += s->head_len;
		if (st->got < total)
			return NULL; /* it goes on into the segment after */
		uint32_t crc = pg_crc32c_update(st->crc, st->hdr, REC_CRC_AT) ^ CRC_INIT;
		if (crc != le32(st->hdr + REC_CRC_AT))
			return "record checksum mismatch";
		st->last = st->lsn;
		st->open = false;
	} else if (s->head_rem != 0) {
		*at = s->seg_start;
		return "segment continues a record the one before did not begin";
	}
	if (s->first_lsn != 0 && s->first_prev != st->last) {
		*at = s->first_lsn;
		return "record back-link does not point to the record before";
	}
adopt:;
	uint64_t before = st->known ? st->last : 0;
	st->known = true;
	if (s->first_lsn != 0 || s->tail_open)
		st->last = s->last_lsn;
	if (s->tail_open) {
		st->open = true;
		st->lsn = s->tail_lsn;
		/* the segment's first record: the one before is the last of the segment before */
		st->prev = s->tail_prev != 0 ? s->tail_prev : before;
		st->hdr_len = s->tail_hdr_len;
		memcpy(st->hdr, s->tail_hdr, s->tail_hdr_len);
		st->crc = s->tail_crc;
		st->got = s->tail_got;
	}
	return NULL;
}
