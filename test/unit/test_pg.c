/*
 * pg: WAL names, LSNs, the WAL long header, data pages and pg_control, against bytes PostgreSQL
 * 15, 18 and 19 wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal/codec/codec.h"
#include "internal/pg/pg.h"
#include "test/unit/unit.h"

#define SEG16 (UINT64_C(16) << 20)
#define SEG1 (UINT64_C(1) << 20)
#define SEG1G (UINT64_C(1) << 30)

/* test/unit/data (see its README): run from the repository root, as make test does. */
static unsigned char *read_data(const char *name, size_t want)
{
	char *path = xasprintf("test/unit/data/%s", name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	unsigned char *buf = xmalloc(want);
	assert_int_equal(fread(buf, 1, want, f), want);
	assert_int_equal(fgetc(f), EOF);
	fclose(f);
	free(path);
	return buf;
}

static void test_segment_names(void **state)
{
	(void)state;
	assert_true(wal_is_segment_name("000000010000000000000001"));
	assert_true(wal_is_segment_name("0000000A00000B2C000000FF"));
	assert_false(wal_is_segment_name("00000001000000000000001"));	 /* 23 digits */
	assert_false(wal_is_segment_name("0000000100000000000000010")); /* 25 */
	assert_false(wal_is_segment_name("00000001000000000000000a"));	 /* lower case */
	assert_false(wal_is_segment_name("00000001000000000000000G"));
	assert_false(wal_is_segment_name(""));
}

static void test_archive_names(void **state)
{
	(void)state;
	assert_true(wal_is_archive_name("000000010000000000000001"));
	assert_true(wal_is_archive_name("00000002.history"));
	assert_true(wal_is_archive_name("000000010000000000000001.partial"));
	assert_true(wal_is_archive_name("000000010000000000000002.00000028.backup"));
	assert_false(wal_is_archive_name("00000002.History"));
	assert_false(wal_is_archive_name("0000002.history"));
	assert_false(wal_is_archive_name("000000010000000000000001.partia"));
	assert_false(wal_is_archive_name("000000010000000000000002.0000028.backup"));
	assert_false(wal_is_archive_name("000000010000000000000002x00000028.backup"));
	assert_false(wal_is_archive_name("../000000010000000000000001"));
	assert_false(wal_is_archive_name("pg_wal/000000010000000000000001"));
}

static void test_file_names(void **state)
{
	(void)state;
	assert_true(wal_is_file_name("000000010000000000000001"));
	assert_true(wal_is_file_name("any name.txt"));
	assert_false(wal_is_file_name(""));
	assert_false(wal_is_file_name("."));
	assert_false(wal_is_file_name(".."));
	assert_false(wal_is_file_name("a/b"));
	assert_false(wal_is_file_name("line\nbreak"));
	assert_false(wal_is_file_name("del\x7f"));
	char longname[300];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_false(wal_is_file_name(longname));
	longname[255] = '\0';
	assert_true(wal_is_file_name(longname));
}

static void test_name_parse_and_format(void **state)
{
	(void)state;
	uint32_t tli;
	uint64_t seg;
	char out[WAL_NAME_LEN + 1];

	/* 16 MiB segments: 256 per "xlogid"; the name's middle part counts those. */
	assert_int_equal(wal_name_parse("0000000300000002000000A1", SEG16, &tli, &seg), E_OK);
	assert_int_equal(tli, 3);
	assert_int_equal(seg, 2 * 256 + 0xA1);
	wal_name_format(out, tli, seg, SEG16);
	assert_string_equal(out, "0000000300000002000000A1");
	/* the last segment of an xlogid, then the first of the next */
	wal_name_format(out, 1, 255, SEG16);
	assert_string_equal(out, "0000000100000000000000FF");
	wal_name_format(out, 1, 256, SEG16);
	assert_string_equal(out, "000000010000000100000000");
	/* 16 MiB names cannot have a low part of 0x100 or more */
	assert_int_equal(wal_name_parse("000000010000000000000100", SEG16, &tli, &seg), E_CONFIG);
	err_clear();
	/* but 1 MiB segments can (4096 per xlogid), and 1 GiB ones only 0..3 */
	assert_int_equal(wal_name_parse("000000010000000000000100", SEG1, &tli, &seg), E_OK);
	assert_int_equal(seg, 0x100);
	assert_int_equal(wal_name_parse("000000010000000500000003", SEG1G, &tli, &seg), E_OK);
	assert_int_equal(seg, 5 * 4 + 3);
	assert_int_equal(wal_name_parse("000000010000000500000004", SEG1G, &tli, &seg), E_CONFIG);
	err_clear();
	assert_int_equal(wal_name_parse("00000001000000000000001.", SEG16, &tli, &seg), E_CONFIG);
	assert_non_null(strstr(err_msg(), "not a WAL segment name"));
	err_clear();
	/* every segment of a range round-trips */
	for (uint64_t s = 0; s < 5000; s += 7) {
		wal_name_format(out, 7, s, SEG16);
		assert_int_equal(wal_name_parse(out, SEG16, &tli, &seg), E_OK);
		assert_int_equal(tli, 7);
		assert_int_equal(seg, s);
	}
}

static void test_lsn(void **state)
{
	(void)state;
	uint64_t lsn;
	char out[32];
	assert_int_equal(pg_lsn_parse("16/B374D848", &lsn), E_OK);
	assert_int_equal(lsn, UINT64_C(0x16B374D848));
	pg_lsn_format(lsn, out);
	assert_string_equal(out, "16/B374D848");
	assert_int_equal(pg_lsn_parse("0/0", &lsn), E_OK);
	assert_int_equal(lsn, 0);
	pg_lsn_format(UINT64_MAX, out);
	assert_string_equal(out, "FFFFFFFF/FFFFFFFF");
	assert_int_equal(pg_lsn_parse("0/1a", &lsn), E_OK); /* PostgreSQL reads either case */
	assert_int_equal(lsn, 0x1a);
	const char *bad[] = { "", "16", "16/", "/5", "16/B374D848 ", "16/B374D848x", "G/1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		assert_int_equal(pg_lsn_parse(bad[i], &lsn), E_CORRUPT);
		assert_non_null(strstr(err_msg(), "is not an LSN"));
		err_clear();
	}
}

/* The first 40 bytes of 000000010000000000000001 of a cluster whose system id is known. */
static void test_wal_long_header(void **state)
{
	(void)state;
	unsigned char *h = read_data("pg15-wal-long-header.bin", WAL_LONG_HEADER_LEN);
	uint64_t sysid = 0;
	assert_true(wal_header_sysid(h, WAL_LONG_HEADER_LEN, SEG16, &sysid));
	assert_int_equal(sysid, UINT64_C(7714482919781331307));
	/* another segment size, a short buffer, no long-header flag, an old magic: no header */
	assert_false(wal_header_sysid(h, WAL_LONG_HEADER_LEN, SEG1, &sysid));
	assert_false(wal_header_sysid(h, WAL_LONG_HEADER_LEN - 1, SEG16, &sysid));
	unsigned char c[WAL_LONG_HEADER_LEN];
	memcpy(c, h, sizeof(c));
	c[2] &= (unsigned char)~0x02;
	assert_false(wal_header_sysid(c, sizeof(c), SEG16, &sysid));
	memcpy(c, h, sizeof(c));
	c[0] = 0x60, c[1] = 0xD0; /* 0xD060: before 9.2 */
	assert_false(wal_header_sysid(c, sizeof(c), SEG16, &sysid));
	memcpy(c, h, sizeof(c));
	c[37] = 0x40; /* a 16 KiB block size */
	assert_false(wal_header_sysid(c, sizeof(c), SEG16, &sysid));
	/* zeros (a recycled or preallocated file) are not a segment */
	memset(c, 0, sizeof(c));
	assert_false(wal_header_sysid(c, sizeof(c), SEG16, &sysid));
	free(h);
}

/*
 * Block 3 of pg_class of a cluster made with initdb -k: its stored checksum is what
 * PostgreSQL computed, so pg_page_checksum must reproduce it for block number 3 only.
 */
static void test_page_checksum(void **state)
{
	(void)state;
	unsigned char *page = read_data("pg15-pg_class-block3.bin", PG_PAGE_SIZE);
	uint16_t stored = pg_page_stored_checksum(page);
	assert_int_not_equal(stored, 0);
	assert_int_equal(pg_page_checksum(page, 3), stored);
	assert_int_not_equal(pg_page_checksum(page, 4), stored);
	/* the block number of the 1 GiB segment's pages counts from the relation's start */
	assert_int_not_equal(pg_page_checksum(page, 3 + PG_SEGMENT_PAGES), stored);
	/* the checksum field itself does not take part; any other byte does */
	unsigned char *copy = xmalloc(PG_PAGE_SIZE);
	memcpy(copy, page, PG_PAGE_SIZE);
	copy[8] ^= 0xFF;
	assert_int_equal(pg_page_checksum(copy, 3), stored);
	memcpy(copy, page, PG_PAGE_SIZE);
	copy[PG_PAGE_SIZE - 100] ^= 0x01;
	assert_int_not_equal(pg_page_checksum(copy, 3), stored);
	free(copy);
	free(page);
}

static void test_page_header(void **state)
{
	(void)state;
	unsigned char *page = read_data("pg15-pg_class-block3.bin", PG_PAGE_SIZE);
	assert_true(pg_page_header_valid(page));
	assert_false(pg_page_is_new(page));
	assert_int_equal(pg_page_lsn(page), UINT64_C(0x0159B398));
	unsigned char *p = xmalloc(PG_PAGE_SIZE);
	/* lower above upper */
	memcpy(p, page, PG_PAGE_SIZE);
	p[12] = 0x00, p[13] = 0x20, p[14] = 0x10, p[15] = 0x01;
	assert_false(pg_page_header_valid(p));
	/* special beyond the page */
	memcpy(p, page, PG_PAGE_SIZE);
	p[16] = 0x01, p[17] = 0x21;
	assert_false(pg_page_header_valid(p));
	/* unknown flag bits */
	memcpy(p, page, PG_PAGE_SIZE);
	p[10] |= 0x80;
	assert_false(pg_page_header_valid(p));
	/* a layout version no release wrote, and another page size */
	memcpy(p, page, PG_PAGE_SIZE);
	p[18] = 6;
	assert_false(pg_page_header_valid(p));
	memcpy(p, page, PG_PAGE_SIZE);
	p[19] = 0x40;
	assert_false(pg_page_header_valid(p));
	/* no LSN */
	memcpy(p, page, PG_PAGE_SIZE);
	memset(p, 0, 8);
	assert_false(pg_page_header_valid(p));
	/* a page never initialised */
	memset(p, 0, PG_PAGE_SIZE);
	assert_true(pg_page_is_new(p));
	assert_false(pg_page_header_valid(p));
	free(p);
	free(page);
}

/* A 1 MiB segment of the WAL-G fixtures (PostgreSQL 15, zstd), decompressed. */
static void fixture_segment(const char *name, membuf *mb)
{
	char *path = xasprintf("test/fixtures/walg-v3.0.9/zstd/repo/wal_005/%s.zst", name);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	memset(mb, 0, sizeof(*mb));
	sink *s = codec_decompress_new(codec_by_name("zstd"), membuf_sink_new(mb));
	unsigned char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		assert_int_equal(sink_write(s, buf, n), E_OK);
	fclose(f);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	free(path);
	assert_int_equal(mb->len, SEG1);
}

typedef struct seen {
	size_t records, commits;
	uint64_t last_lsn, last_end;
	int64_t first_commit_us, last_commit_us;
	bool ordered;
} seen;

static bool count_record(const wal_record *rec, void *arg)
{
	seen *s = arg;
	if (rec->lsn < s->last_end || rec->end_lsn < rec->lsn + 24)
		s->ordered = false;
	s->last_lsn = rec->lsn;
	s->last_end = rec->end_lsn;
	s->records++;
	if (rec->kind == WAL_REC_COMMIT) {
		if (s->commits++ == 0)
			s->first_commit_us = rec->time_us;
		if (rec->time_us < s->last_commit_us)
			s->ordered = false;
		s->last_commit_us = rec->time_us;
	}
	return true;
}

/* Records of three consecutive segments (the first ends with a switch), whatever the pieces fed. */
static void test_wal_records(void **state)
{
	(void)state;
	const char *names[] = { "00000001000000000000002D", "00000001000000000000002E",
							"00000001000000000000002F" };
	membuf segs[3];
	for (int i = 0; i < 3; i++)
		fixture_segment(names[i], &segs[i]);
	seen whole = { .ordered = true };
	for (size_t piece = 1; piece <= SEG1; piece = piece * 7 + 1) {
		seen s = { .ordered = true };
		wal_reader *r = wal_reader_new(SEG1, UINT64_C(0x2D) << 20, count_record, &s);
		for (int i = 0; i < 3; i++)
			for (size_t off = 0; off < segs[i].len; off += piece)
				assert_int_equal(wal_reader_feed(r, segs[i].data + off,
												 segs[i].len - off < piece ? segs[i].len - off
																		   : piece),
								 E_OK);
		uint64_t end;
		wal_reader_done(r, &end);
		wal_reader_free(r);
		assert_true(s.ordered);
		assert_true(s.records > 100);
		assert_true(s.commits > 0);
		/* The fixtures were made in 2026: commit times say so. */
		assert_true(s.first_commit_us > INT64_C(1767225600) * 1000000);
		assert_true(s.last_commit_us < INT64_C(1798761600) * 1000000);
		assert_true(end > (UINT64_C(0x2F) << 20) || s.last_end == end);
		if (whole.records == 0)
			whole = s;
		assert_int_equal(s.records, whole.records);
		assert_int_equal(s.commits, whole.commits);
		assert_int_equal(s.last_lsn, whole.last_lsn);
	}
	/* A segment that is not the next one (here the first again) ends the valid WAL. */
	seen s = { .ordered = true };
	wal_reader *r = wal_reader_new(SEG1, UINT64_C(0x2D) << 20, count_record, &s);
	assert_int_equal(wal_reader_feed(r, segs[0].data, segs[0].len), E_OK);
	size_t first = s.records;
	assert_int_equal(wal_reader_feed(r, segs[0].data, segs[0].len), E_OK);
	uint64_t end;
	assert_true(wal_reader_done(r, &end));
	assert_int_equal(s.records, first);
	assert_true(end <= UINT64_C(0x2E) << 20);
	wal_reader_free(r);
	/* Zeros are no WAL at all. */
	unsigned char *zeros = xcalloc(1, 65536);
	r = wal_reader_new(SEG1, 0, count_record, &s);
	assert_int_equal(wal_reader_feed(r, zeros, 65536), E_OK);
	assert_true(wal_reader_done(r, &end));
	assert_int_equal(end, 0);
	wal_reader_free(r);
	free(zeros);
	for (int i = 0; i < 3; i++)
		free(segs[i].data);
}

typedef struct ckpts {
	size_t n;
	uint64_t lsn, redo; /* the first */
} ckpts;

static bool on_checkpoint(const wal_record *rec, void *arg)
{
	ckpts *c = arg;
	if (rec->kind == WAL_REC_CHECKPOINT && c->n++ == 0) {
		c->lsn = rec->lsn;
		c->redo = rec->redo;
	}
	return true;
}

/* Segment 24 holds the checkpoint WAL-G's backup began with: its REDO is the backup's start. */
static void test_wal_checkpoint(void **state)
{
	(void)state;
	membuf seg;
	fixture_segment("000000010000000000000024", &seg);
	ckpts c = { 0 };
	wal_reader *r = wal_reader_new(SEG1, UINT64_C(0x24) << 20, on_checkpoint, &c);
	assert_int_equal(wal_reader_feed(r, seg.data, seg.len), E_OK);
	wal_reader_free(r);
	free(seg.data);
	assert_true(c.n >= 1);
	assert_int_equal(c.redo, (UINT64_C(0x24) << 20) + 0x28); /* the .backup file's offset */
	assert_true(c.lsn >= c.redo);
}

/* PostgreSQL's CRC-32C: the standard check value, and registers combined without the bytes. */
static void test_crc32c(void **state)
{
	(void)state;
	assert_int_equal(pg_crc32c_update(0xFFFFFFFFu, "123456789", 9) ^ 0xFFFFFFFFu, 0xE3069283u);
	unsigned char *b = pattern(70000, 7);
	for (size_t cut = 0; cut < 70000; cut = cut * 3 + 1) {
		uint32_t whole = pg_crc32c_update(0x12345678u, b, 70000);
		uint32_t a = pg_crc32c_update(0x12345678u, b, cut);
		uint32_t tail = pg_crc32c_update(0, b + cut, 70000 - cut);
		assert_int_equal(pg_crc32c_shift(a, 70000 - cut) ^ tail, whole);
	}
	free(b);
}

/* Every record of a segment, with where each starts and ends. */
typedef struct rec_list {
	size_t n;
	uint64_t lsn[20000], end[20000];
} rec_list;

static bool list_record(const wal_record *rec, void *arg)
{
	rec_list *l = arg;
	if (l->n < 20000) {
		l->lsn[l->n] = rec->lsn;
		l->end[l->n] = rec->end_lsn;
		l->n++;
	}
	return true;
}

/* Reads buf as the segment starting at start; *end and *why as the reader left them. */
static size_t read_segments(const unsigned char *buf, size_t len, uint64_t start, rec_list *l,
							uint64_t *end, wal_ending *why)
{
	memset(l, 0, sizeof(*l));
	wal_reader *r = wal_reader_new(SEG1, start, list_record, l);
	assert_int_equal(wal_reader_feed(r, buf, len), E_OK);
	wal_reader_done(r, end);
	wal_reader_end(r, why);
	wal_reader_free(r);
	return l->n;
}

/*
 * Record checksums on PostgreSQL's WAL (the fixtures' segments): all pass; one flipped byte in
 * a record's data, on its first page or on the page it continues on, is damage at that
 * record; a zero-filled or stale tail is the end of the WAL, not damage.
 */
static void test_wal_record_crc(void **state)
{
	(void)state;
	membuf seg;
	fixture_segment("00000001000000000000002D", &seg);
	uint64_t start = UINT64_C(0x2D) << 20, end;
	wal_ending why;
	rec_list *l = xmalloc(sizeof(*l));
	size_t n = read_segments(seg.data, seg.len, start, l, &end, &why);
	assert_true(n > 100);
	assert_int_equal(why.kind, WAL_END_NONE);
	unsigned char *bad = xmalloc(seg.len);

	/* a byte inside a record wholly on one page */
	size_t k = n / 2;
	while ((l->lsn[k] / 8192) != ((l->end[k] - 1) / 8192) || l->end[k] - l->lsn[k] < 40)
		k++;
	memcpy(bad, seg.data, seg.len);
	bad[l->lsn[k] - start + 30] ^= 0x10;
	assert_int_equal(read_segments(bad, seg.len, start, l, &end, &why), k);
	assert_int_equal(why.kind, WAL_END_DAMAGED);
	assert_int_equal(why.lsn, l->end[k - 1] + (8 - l->end[k - 1] % 8) % 8);
	assert_int_equal(end, l->end[k - 1]);

	/* a byte of a record's part on the next page */
	read_segments(seg.data, seg.len, start, l, &end, &why);
	for (k = 1; k < n && (l->lsn[k] / 8192 == (l->end[k] - 1) / 8192 ||
						  (l->end[k] - 1) % 8192 < 24 + 8);
		 k++)
		;
	assert_true(k < n);
	uint64_t lsn = l->lsn[k], rec_end = l->end[k];
	memcpy(bad, seg.data, seg.len);
	bad[rec_end - 1 - start] ^= 0x01;
	assert_int_equal(read_segments(bad, seg.len, start, l, &end, &why), k);
	assert_int_equal(why.kind, WAL_END_DAMAGED);
	assert_int_equal(why.lsn, lsn);
	/* the same byte unchanged but the record's header: its back-link is the end, not damage */
	memcpy(bad, seg.data, seg.len);
	bad[lsn - start + 8] ^= 0x08;
	read_segments(bad, seg.len, start, l, &end, &why);
	assert_int_equal(why.kind, WAL_END_INVALID);
	assert_int_equal(why.lsn, lsn);

	/* zeros from a record boundary on: the end of the WAL written, where the last record ended */
	read_segments(seg.data, seg.len, start, l, &end, &why);
	k = n / 3;
	uint64_t cut = l->end[k] + (8 - l->end[k] % 8) % 8;
	memcpy(bad, seg.data, seg.len);
	memset(bad + (cut - start), 0, seg.len - (cut - start));
	assert_int_equal(read_segments(bad, seg.len, start, l, &end, &why), k + 1);
	assert_int_equal(why.kind, WAL_END_INVALID);
	assert_int_equal(end, cut - (cut - l->end[k]));
	/* a recycled segment's stale pages from a page on: the end too */
	membuf old;
	fixture_segment("00000001000000000000002C", &old);
	uint64_t page = (l->end[n / 3] / 8192 + 1) * 8192 - start;
	memcpy(bad, seg.data, seg.len);
	memcpy(bad + page, old.data + page, seg.len - page);
	read_segments(bad, seg.len, start, l, &end, &why);
	assert_int_equal(why.kind, WAL_END_INVALID);
	assert_true(end <= start + page);
	free(old.data);
	free(bad);
	free(l);
	free(seg.data);
}

/*
 * Synthetic WAL laid out as PostgreSQL lays it out (page headers, continuation lengths,
 * MAXALIGNed records with back-links and CRC-32C), so that records cross segment boundaries
 * where the tests want them: the fixtures' segments all end with a switch. The checksum itself
 * is PostgreSQL's (test_wal_record_crc checks it on PostgreSQL's records).
 */
#define GEN_SEGS 4
typedef struct wgen {
	unsigned char *buf;
	uint64_t start, pos;
	uint64_t rec_total, rec_left;
	unsigned next_flags; /* added to the next page header's */
	uint16_t magic;		 /* of every page; 0: PostgreSQL 15's */
} wgen;

static void gen_put(wgen *g, const unsigned char *p, size_t n)
{
	while (n > 0) {
		if (g->pos % 8192 == 0) {
			unsigned char *h = g->buf + (g->pos - g->start);
			bool is_long = g->pos % SEG1 == 0, cont = g->rec_left > 0 && g->rec_left < g->rec_total;
			uint32_t rem = cont ? (uint32_t)g->rec_left : 0;
			uint16_t magic = g->magic != 0 ? g->magic : 0xD110;
			h[0] = (unsigned char)magic, h[1] = (unsigned char)(magic >> 8);
			h[2] = (unsigned char)((cont ? 1 : 0) | (is_long ? 2 : 0) | g->next_flags);
			g->next_flags = 0;
			h[4] = 1; /* timeline */
			for (int i = 0; i < 8; i++)
				h[8 + i] = (unsigned char)(g->pos >> (8 * i));
			for (int i = 0; i < 4; i++)
				h[16 + i] = (unsigned char)(rem >> (8 * i));
			if (is_long) {
				h[24] = 42;				  /* system identifier */
				h[34] = 0x10;			  /* 1 MiB segments */
				h[37] = 0x20;			  /* 8192-byte pages */
			}
			g->pos += is_long ? 40 : 24;
		}
		size_t room = 8192 - g->pos % 8192, k = n < room ? n : room;
		memcpy(g->buf + (g->pos - g->start), p, k);
		g->pos += k, p += k, n -= k, g->rec_left -= k;
	}
}

/* One record of len bytes (body's first) linking back to prev, cut after `write` bytes. */
static uint64_t gen_record(wgen *g, uint32_t len, uint64_t prev, const unsigned char *body,
						   uint32_t write)
{
	unsigned char h[24] = { 0 };
	for (int i = 0; i < 4; i++)
		h[i] = (unsigned char)(len >> (8 * i));
	for (int i = 0; i < 8; i++)
		h[8 + i] = (unsigned char)(prev >> (8 * i));
	h[17] = 10; /* heap */
	uint32_t crc = pg_crc32c_update(0xFFFFFFFFu, body, len - 24);
	crc = pg_crc32c_update(crc, h, 20) ^ 0xFFFFFFFFu;
	for (int i = 0; i < 4; i++)
		h[20 + i] = (unsigned char)(crc >> (8 * i));
	g->rec_total = g->rec_left = len;
	uint64_t at = g->pos % 8192 == 0 ? g->pos + (g->pos % SEG1 == 0 ? 40 : 24) : g->pos;
	gen_put(g, h, 24);
	gen_put(g, body, write - 24);
	return at;
}

/* Records of random sizes (seeded) until the last segment is half full; their LSNs in l. */
static void gen_wal(wgen *g, uint32_t seed, rec_list *l)
{
	memset(g->buf, 0, GEN_SEGS * SEG1);
	g->pos = g->start;
	l->n = 0;
	uint64_t prev = 0;
	uint32_t x = seed * 2654435761u + 7;
	unsigned char *body = pattern(1400000, seed);
	while (g->pos < g->start + (GEN_SEGS - 1) * SEG1 + SEG1 / 2) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		uint32_t len = 24 + x % 380;
		if (seed % 4 == 0 && l->n == 3000)
			len = 1300000; /* crosses a whole segment */
		prev = l->lsn[l->n] = gen_record(g, len, prev, body, len);
		l->end[l->n] = g->pos;
		l->n++;
		g->pos += (8 - g->pos % 8) % 8;
	}
	free(body);
}

/* Each segment read by a reader of its own, stitched in order: the first problem. */
static const char *stitch_all(const wgen *g, uint64_t *at)
{
	wal_stitch st;
	memset(&st, 0, sizeof(st));
	for (int i = 0; i < GEN_SEGS; i++) {
		seen s = { .ordered = true };
		wal_reader *r = wal_reader_new(SEG1, g->start + (uint64_t)i * SEG1, count_record, &s);
		assert_int_equal(wal_reader_feed(r, g->buf + (size_t)i * SEG1, SEG1), E_OK);
		wal_ending why;
		wal_reader_end(r, &why);
		/* alone, each segment is whole; the last one's zeros end its WAL */
		assert_int_equal(why.kind, i < GEN_SEGS - 1 ? WAL_END_NONE : WAL_END_INVALID);
		wal_seam seam;
		wal_reader_seam(r, &seam);
		wal_reader_free(r);
		const char *bad = wal_stitch_next(&st, &seam, at);
		if (bad != NULL)
			return bad;
	}
	return NULL;
}

/*
 * Records crossing from one segment into the next (headers split across the boundary, and
 * one record longer than a segment) pass when read whole and when stitched; a flipped byte of
 * one, on either side, is found by the stitch, at that record.
 */
static void test_wal_stitch(void **state)
{
	(void)state;
	wgen g = { .buf = xmalloc(GEN_SEGS * SEG1), .start = UINT64_C(0x40) << 20 };
	rec_list *l = xmalloc(sizeof(*l)), *got = xmalloc(sizeof(*got));
	int split_headers = 0, long_ones = 0;
	for (uint32_t seed = 1; seed <= 48; seed++) {
		gen_wal(&g, seed, l);
		uint64_t end, at;
		wal_ending why;
		size_t n = read_segments(g.buf, GEN_SEGS * SEG1, g.start, got, &end, &why);
		assert_int_equal(n, l->n);
		assert_int_equal(why.kind, WAL_END_INVALID); /* the zeros after the last */
		assert_int_equal(end, l->end[l->n - 1]);
		assert_null(stitch_all(&g, &at));
		/* the first record crossing each boundary */
		for (uint64_t b = 1; b < GEN_SEGS; b++) {
			uint64_t edge = g.start + b * SEG1;
			size_t k = 0;
			while (k < l->n && l->end[k] <= edge)
				k++;
			if (k == l->n || l->lsn[k] >= edge)
				continue;
			split_headers += edge - l->lsn[k] < 24;
			long_ones += l->end[k] - l->lsn[k] > SEG1;
			/* its last byte, then a byte of it before the boundary */
			uint64_t spots[2] = { l->end[k] - 1, edge - 1 };
			for (int i = 0; i < 2; i++) {
				if (spots[i] < l->lsn[k] + 24)
					continue; /* a header byte: the header checks say so, not the checksum */
				g.buf[spots[i] - g.start] ^= 0x20;
				const char *bad = stitch_all(&g, &at);
				assert_non_null(bad);
				assert_string_equal(bad, "record checksum mismatch");
				assert_int_equal(at, l->lsn[k]);
				g.buf[spots[i] - g.start] ^= 0x20;
			}
			if (edge - l->lsn[k] <= 8) {
				/* a back-link cut by the boundary, changed on its far side (after the long header) */
				uint64_t byte = edge + 40 + (12 - (edge - l->lsn[k]));
				g.buf[byte - g.start] ^= 0x01;
				const char *bad = stitch_all(&g, &at);
				assert_non_null(bad);
				assert_string_equal(bad, "record back-link does not point to the record before");
				g.buf[byte - g.start] ^= 0x01;
			}
		}
	}
	assert_true(split_headers > 0);
	assert_true(long_ones > 0);
	free(got);
	free(l);
	free(g.buf);
}

/*
 * A record PostgreSQL never finished (the segment after it lost in a crash): the next segment
 * starts with XLP_FIRST_IS_OVERWRITE_CONTRECORD and a record linking back past it, flag whose
 * bit is the page magic's release's. Returns what reading the two segments as one stream gave
 * (its records, how it ended) and whether stitching them apart passed.
 */
static size_t overwritten(uint16_t magic, unsigned flag, size_t *before, wal_ending *why,
						  bool *stitched)
{
	wgen g = { .buf = xcalloc(1, GEN_SEGS * SEG1), .start = UINT64_C(0x40) << 20, .magic = magic };
	unsigned char *body = pattern(20000, 9);
	uint64_t prev = 0, edge = g.start + SEG1;
	size_t n = 0;
	while (g.pos == 0 || g.pos < edge - 3000) {
		if (g.pos == 0)
			g.pos = g.start;
		prev = gen_record(&g, 200, prev, body, 200);
		g.pos += (8 - g.pos % 8) % 8;
		n++;
	}
	/* begun, never finished: the rest of the segment, and its continuation lost */
	gen_record(&g, 10000, prev, body, (uint32_t)(edge - g.pos));
	assert_int_equal(g.pos, edge);
	g.rec_left = 0;
	g.next_flags = flag;
	for (int i = 0; i < 50; i++) {
		prev = gen_record(&g, 300, prev, body, 300);
		g.pos += (8 - g.pos % 8) % 8;
	}
	rec_list *l = xmalloc(sizeof(*l));
	uint64_t end, at;
	size_t got = read_segments(g.buf, 2 * SEG1, g.start, l, &end, why);
	wal_stitch st;
	memset(&st, 0, sizeof(st));
	*stitched = true;
	for (int i = 0; i < 2; i++) {
		wal_reader *r = wal_reader_new(SEG1, g.start + (uint64_t)i * SEG1, list_record, l);
		l->n = 0;
		assert_int_equal(wal_reader_feed(r, g.buf + (size_t)i * SEG1, SEG1), E_OK);
		wal_seam seam;
		wal_reader_seam(r, &seam);
		wal_reader_free(r);
		if (wal_stitch_next(&st, &seam, &at) != NULL)
			*stitched = false;
	}
	*before = n;
	free(l);
	free(body);
	free(g.buf);
	return got;
}

/*
 * Neither the stream reader nor the stitch calls an overwritten record damage or the end, on
 * 15's pages (0x0008) and on 19's (0x0004, which was XLP_BKP_REMOVABLE before 19 and says
 * nothing of records there); a flag the release does not define ends the WAL.
 */
static void test_wal_overwrite(void **state)
{
	(void)state;
	size_t n, got;
	wal_ending why;
	bool stitched;
	static const struct {
		uint16_t magic;
		unsigned flag;
	} ok[] = { { 0xD110, 0x0008 }, { 0xD118, 0x0008 }, { 0xD122, 0x0004 } };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		got = overwritten(ok[i].magic, ok[i].flag, &n, &why, &stitched);
		assert_int_equal(got, n + 50);
		assert_int_equal(why.kind, WAL_END_INVALID); /* the zeros after the last record */
		assert_true(why.lsn > (UINT64_C(0x41) << 20));
		assert_true(stitched);
	}
	/* 18's 0x0004 is no overwrite: the record begun is not continued */
	got = overwritten(0xD118, 0x0004, &n, &why, &stitched);
	assert_int_equal(got, n);
	assert_int_equal(why.kind, WAL_END_INVALID);
	assert_string_equal(why.why, "record not continued on the next page");
	assert_false(stitched);
	/* 19 has no 0x0008 */
	got = overwritten(0xD122, 0x0008, &n, &why, &stitched);
	assert_int_equal(got, n);
	assert_int_equal(why.kind, WAL_END_INVALID);
	assert_string_equal(why.why, "unknown page flags");
}

/* What wal-push and wal-fetch hold a file named as a segment to, on a fixture's segment. */
static void test_segment_check(void **state)
{
	(void)state;
	membuf seg;
	fixture_segment("00000001000000000000002D", &seg);
	const char *name = "00000001000000000000002D";
	uint64_t sysid = 0;
	char why[128];
	assert_true(wal_segment_check(name, seg.data, 40, SEG1, 0, &sysid, why));
	assert_true(sysid != 0);
	assert_true(wal_segment_check(name, seg.data, 40, SEG1, SEG1, &sysid, why));
	assert_true(wal_segment_check("00000001000000000000002D.partial", seg.data, 40, SEG1, 0,
								  &sysid, why));
	/* a later timeline's first segment starts with its parent's pages */
	assert_true(wal_segment_check("00000002000000000000002D", seg.data, 40, SEG1, 0, &sysid, why));
	/* WALG_PG_WAL_SIZE says otherwise; the size is not the header's; another segment's name */
	assert_false(wal_segment_check(name, seg.data, 40, SEG1, SEG16, &sysid, why));
	assert_false(wal_segment_check(name, seg.data, 40, 50000, 0, &sysid, why));
	assert_non_null(strstr(why, "50000 bytes"));
	assert_false(wal_segment_check("00000001000000000000002E", seg.data, 40, SEG1, 0, &sysid, why));
	assert_non_null(strstr(why, "page address"));
	/* zeros, random bytes, a file shorter than a header */
	unsigned char *zeros = xcalloc(1, 40), *noise = pattern(40, 3);
	assert_false(wal_segment_check(name, zeros, 40, SEG1, 0, &sysid, why));
	assert_false(wal_segment_check(name, noise, 40, SEG1, 0, &sysid, why));
	assert_false(wal_segment_check(name, seg.data, 20, 20, 0, &sysid, why));
	/* a header claiming a segment size PostgreSQL does not allow */
	memcpy(noise, seg.data, 40);
	noise[34] = 0x30; /* 3 MiB */
	assert_false(wal_segment_check(name, noise, 40, 3 * SEG1, 0, &sysid, why));
	free(zeros);
	free(noise);
	free(seg.data);
	/* 19's segment, and 19's page with a flag 19 does not have */
	unsigned char *h = read_data("pg19-wal-long-header.bin", WAL_LONG_HEADER_LEN);
	name = "000000010000000000000002";
	assert_true(wal_segment_check(name, h, 40, 4 * SEG1, 0, &sysid, why));
	assert_true(sysid == UINT64_C(7716072902753761244));
	h[2] |= 0x08;
	assert_false(wal_segment_check(name, h, 40, 4 * SEG1, 0, &sysid, why));
	free(h);
}

/* The page rule backup-push --verify and backup-verify share, on PostgreSQL's page. */
static void test_page_verify(void **state)
{
	(void)state;
	unsigned char *page = read_data("pg15-pg_class-block3.bin", PG_PAGE_SIZE);
	unsigned char *p = xmalloc(PG_PAGE_SIZE);
	assert_int_equal(pg_page_verify(page, 3, true, 0), PG_PAGE_OK);
	assert_int_equal(pg_page_verify(page, 4, true, 0), PG_PAGE_BAD_CHECKSUM);
	assert_int_equal(pg_page_verify(page, 4, false, 0), PG_PAGE_OK); /* no data checksums */
	assert_string_equal(pg_page_verdict_text(PG_PAGE_BAD_CHECKSUM), "checksum mismatch");
	/* changed at or after the backup's start: maybe torn, replay rewrites it, not checked */
	assert_int_equal(pg_page_verify(page, 4, true, 0x0159B398), PG_PAGE_RECENT);
	assert_int_equal(pg_page_verify(page, 4, true, 0x0159B399), PG_PAGE_BAD_CHECKSUM);
	/* a flipped tuple byte */
	memcpy(p, page, PG_PAGE_SIZE);
	p[5000] ^= 1;
	assert_int_equal(pg_page_verify(p, 3, true, 0), PG_PAGE_BAD_CHECKSUM);
	/* header insanity wins over the checksum, and is found without checksums */
	memcpy(p, page, PG_PAGE_SIZE);
	p[16] = 0x01, p[17] = 0x21; /* special beyond the page */
	assert_int_equal(pg_page_verify(p, 3, false, 0), PG_PAGE_BAD_HEADER);
	memcpy(p, page, PG_PAGE_SIZE);
	p[16] = 0xF4, p[17] = 0x1F; /* special 8180: not MAXALIGNed */
	assert_int_equal(pg_page_verify(p, 3, false, 0), PG_PAGE_BAD_HEADER);
	memcpy(p, page, PG_PAGE_SIZE);
	p[10] |= 0x80;
	assert_int_equal(pg_page_verify(p, 3, false, 0), PG_PAGE_BAD_HEADER);
	assert_string_equal(pg_page_verdict_text(PG_PAGE_BAD_HEADER), "invalid page header");
	/* new pages: all zeros is fine, pd_upper 0 with anything else is not */
	memset(p, 0, PG_PAGE_SIZE);
	assert_int_equal(pg_page_verify(p, 3, true, 0), PG_PAGE_NEW);
	p[PG_PAGE_SIZE - 1] = 1;
	assert_int_equal(pg_page_verify(p, 3, true, 0), PG_PAGE_BAD_HEADER);
	assert_string_equal(pg_page_verdict_text(PG_PAGE_OK), "");
	/* segment N of a relation starts at block N x 131072 */
	assert_int_equal(pg_relation_first_block("/base/5/16384"), 0);
	assert_int_equal(pg_relation_first_block("/base/5/16384.2"), 2 * PG_SEGMENT_PAGES);
	assert_int_equal(pg_relation_first_block("/base/5.1/16384"), 0);
	free(p);
	free(page);
}

/* pg_control PostgreSQL 15 wrote with initdb -k, and 19 without; each with the setting changed. */
static void test_control_checksums(void **state)
{
	(void)state;
	unsigned char *c = read_data("pg15-pg_control.bin", PG_PAGE_SIZE);
	bool on = false;
	assert_true(pg_control_checksums(c, PG_PAGE_SIZE, &on));
	assert_true(on);
	/* data_checksum_version: 44 bytes after floatFormat (1234567.0) */
	double marker = 1234567.0;
	size_t at = 0;
	while (memcmp(c + at, &marker, 8) != 0)
		at += 8;
	memset(c + at + 44, 0, 4);
	assert_true(pg_control_checksums(c, PG_PAGE_SIZE, &on));
	assert_false(on);
	/* no marker, or too short: not a pg_control */
	assert_false(pg_control_checksums(c, at + 40, &on));
	memset(c + at, 0, 8);
	assert_false(pg_control_checksums(c, PG_PAGE_SIZE, &on));
	free(c);
	/* 19's, made without checksums: its version is 52 bytes after floatFormat */
	c = read_data("pg19-pg_control.bin", PG_PAGE_SIZE);
	for (at = 0; memcmp(c + at, &marker, 8) != 0;)
		at += 8;
	assert_true(pg_control_checksums(c, PG_PAGE_SIZE, &on));
	assert_false(on);
	c[at + 52] = 1;
	assert_true(pg_control_checksums(c, PG_PAGE_SIZE, &on));
	assert_true(on);
	free(c);
}

/*
 * What pg_controldata said of each major's pg_control (test/unit/data/README.md): 19 moved the
 * segment size and the checksum version (a field before them is new). Any byte changed fails
 * the CRC; a pg_control_version walc has no layout for is not read at all.
 */
static void test_control_read(void **state)
{
	(void)state;
	static const struct {
		const char *file;
		uint64_t sysid, checkpoint, seg_size;
		uint32_t version;
		bool checksums;
	} want[] = {
		{ "pg15-pg_control.bin", UINT64_C(7714508765364775802), 0x1752990, 16u << 20, 1300, true },
		{ "pg18-pg_control.bin", UINT64_C(7716072873857065267), 0x1765D28, 16u << 20, 1800, true },
		{ "pg19-pg_control.bin", UINT64_C(7716072902753761244), 0x8DEBC0, 4u << 20, 1905, false },
	};
	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		unsigned char *c = read_data(want[k].file, PG_PAGE_SIZE);
		pg_control_info i;
		bool on = !want[k].checksums;
		assert_true(pg_control_read(c, PG_PAGE_SIZE, &i));
		assert_true(i.system_id == want[k].sysid);
		assert_int_equal(i.version, want[k].version);
		assert_int_equal(i.state, PG_STATE_SHUTDOWNED);
		assert_string_equal(pg_control_state_name(i.state), "shut down");
		assert_int_equal(i.checkpoint, want[k].checkpoint);
		assert_int_equal(i.redo, want[k].checkpoint);
		assert_int_equal(i.timeline, 1);
		assert_int_equal(i.min_recovery, 0);
		assert_int_equal(i.seg_size, want[k].seg_size);
		assert_true(pg_control_checksums(c, PG_PAGE_SIZE, &on));
		assert_int_equal(on, want[k].checksums);
		c[40] ^= 1;
		assert_false(pg_control_read(c, PG_PAGE_SIZE, &i));
		c[40] ^= 1;
		assert_false(pg_control_read(c, 200, &i)); /* cut short */
		c[8] = 0x07, c[9] = 0x07; /* pg_control_version 1799: no layout */
		assert_false(pg_control_read(c, PG_PAGE_SIZE, &i));
		assert_false(pg_control_checksums(c, PG_PAGE_SIZE, &on));
		free(c);
	}
	/* the next major's: a layout walc cannot know yet */
	unsigned char *c = read_data("pg19-pg_control.bin", PG_PAGE_SIZE);
	bool on;
	c[8] = 0xD0, c[9] = 0x07; /* 2000 */
	assert_false(pg_control_checksums(c, PG_PAGE_SIZE, &on));
	free(c);
}

static void wal_page(unsigned char *p, uint16_t info, uint32_t tli, uint64_t addr)
{
	memset(p, 0, PG_WAL_PAGE);
	p[0] = 0x10, p[1] = 0xD1; /* PostgreSQL 15's magic */
	p[2] = (unsigned char)info;
	memcpy(p + 4, &tli, 4);
	memcpy(p + 8, &addr, 8);
	p[100] = 0x42; /* some record bytes */
}

static void test_wal_page_check(void **state)
{
	(void)state;
	unsigned char *h = read_data("pg15-wal-long-header.bin", WAL_LONG_HEADER_LEN);
	unsigned char p[PG_WAL_PAGE];
	uint64_t sysid = UINT64_C(7714482919781331307);
	pg_wal_check c = { 0 };
	/* PostgreSQL's first page of segment 1 (16 MiB segments) */
	memset(p, 0, sizeof(p));
	memcpy(p, h, WAL_LONG_HEADER_LEN);
	p[100] = 1;
	assert_null(pg_wal_page_check(&c, p, 1, SEG16, 0, 1, sysid));
	assert_non_null(pg_wal_page_check(&(pg_wal_check){ 0 }, p, 1, SEG16, 0, 1, sysid + 1));
	assert_non_null(pg_wal_page_check(&(pg_wal_check){ 0 }, p, 2, SEG16, 0, 1, 0)); /* address */
	assert_non_null(pg_wal_page_check(&(pg_wal_check){ 0 }, p, 1, SEG1, 0, 1, 0)); /* size */
	/* the next pages: short headers at their own address */
	wal_page(p, 0, 1, SEG16 + PG_WAL_PAGE);
	assert_null(pg_wal_page_check(&c, p, 1, SEG16, 1, 1, sysid));
	wal_page(p, 0x0001, 1, SEG16 + 2 * PG_WAL_PAGE);
	assert_null(pg_wal_page_check(&c, p, 1, SEG16, 2, 3, sysid));
	assert_string_equal(pg_wal_page_check(&c, p, 1, SEG16, 3, 3, sysid),
						"page address is not its place in the segment");
	wal_page(p, 0, 2, SEG16 + 4 * PG_WAL_PAGE);
	assert_string_equal(pg_wal_page_check(&c, p, 1, SEG16, 4, 1, sysid),
						"page timeline is not the backup's or an ancestor's");
	assert_null(pg_wal_page_check(&c, p, 1, SEG16, 4, 2, sysid));
	wal_page(p, 0, 1, SEG16 + 5 * PG_WAL_PAGE);
	assert_string_equal(pg_wal_page_check(&c, p, 1, SEG16, 5, 2, sysid), "page timeline goes back");
	wal_page(p, 0x0010, 2, SEG16 + 6 * PG_WAL_PAGE);
	assert_string_equal(pg_wal_page_check(&c, p, 1, SEG16, 6, 2, sysid), "unknown page flags");
	wal_page(p, 0x0002, 2, SEG16 + 6 * PG_WAL_PAGE);
	assert_non_null(pg_wal_page_check(&c, p, 1, SEG16, 6, 2, sysid)); /* long header inside */
	wal_page(p, 0, 2, SEG16 + 6 * PG_WAL_PAGE);
	p[0] = 0x13; /* another release's magic */
	assert_string_equal(pg_wal_page_check(&c, p, 1, SEG16, 6, 2, sysid), "bad page magic");
	/* zeros end the WAL in a segment; a header after them does not belong */
	memset(p, 0, sizeof(p));
	assert_null(pg_wal_page_check(&c, p, 1, SEG16, 7, 2, sysid));
	assert_true(c.ended);
	wal_page(p, 0, 2, SEG16 + 8 * PG_WAL_PAGE);
	assert_non_null(pg_wal_page_check(&c, p, 1, SEG16, 8, 2, sysid));
	/* a segment cannot start empty */
	memset(p, 0, sizeof(p));
	assert_non_null(pg_wal_page_check(&(pg_wal_check){ 0 }, p, 1, SEG16, 0, 1, 0));
	free(h);
	/* 19's segment 2 (4 MiB segments), whose pages define no 0x0008 */
	h = read_data("pg19-wal-long-header.bin", WAL_LONG_HEADER_LEN);
	sysid = UINT64_C(7716072902753761244);
	c = (pg_wal_check){ 0 };
	memset(p, 0, sizeof(p));
	memcpy(p, h, WAL_LONG_HEADER_LEN);
	p[100] = 1;
	assert_null(pg_wal_page_check(&c, p, 2, 4 * SEG1, 0, 1, sysid));
	wal_page(p, 0x0004, 1, 8 * SEG1 + PG_WAL_PAGE); /* XLP_FIRST_IS_OVERWRITE_CONTRECORD */
	p[0] = 0x22;
	assert_null(pg_wal_page_check(&c, p, 2, 4 * SEG1, 1, 1, sysid));
	wal_page(p, 0x0008, 1, 8 * SEG1 + 2 * PG_WAL_PAGE);
	p[0] = 0x22;
	assert_string_equal(pg_wal_page_check(&c, p, 2, 4 * SEG1, 2, 1, sysid), "unknown page flags");
	free(h);
}

static void test_history_check(void **state)
{
	(void)state;
	const char *good = "1\t0/3000060\tno recovery target specified\n\n"
					   "2\t0/5000000\tbefore 2026-01-01 00:00:00+00\n";
	assert_null(pg_history_check(good, strlen(good), 3));
	assert_non_null(pg_history_check(good, strlen(good), 2)); /* parent 2 of timeline 2 */
	const char *c1 = "# comment\n1\t0/3000060\n";
	assert_null(pg_history_check(c1, strlen(c1), 2));
	assert_string_equal(pg_history_check("", 0, 2), "no parent timeline");
	const char *dec = "2\t0/3000000\n1\t0/5000000\n";
	assert_string_equal(pg_history_check(dec, strlen(dec), 3), "parent timelines do not increase");
	const char *back = "1\t0/5000000\n2\t0/3000000\n";
	assert_string_equal(pg_history_check(back, strlen(back), 3), "switch LSNs go back");
	const char *bad = "1\tzz\n";
	assert_string_equal(pg_history_check(bad, strlen(bad), 2), "a switch LSN is malformed");
	const char *nolsn = "1\n";
	assert_non_null(pg_history_check(nolsn, strlen(nolsn), 2));
	const char *text = "x\t0/1\n";
	assert_non_null(pg_history_check(text, strlen(text), 2));
	char longline[400];
	memset(longline, '1', sizeof(longline));
	assert_string_equal(pg_history_check(longline, sizeof(longline), 2), "line too long");
	/* parsed: the parents and switch points, in order; a bound on how many are kept */
	pg_history_entry e[2];
	size_t n;
	assert_null(pg_history_parse(good, strlen(good), 3, e, 2, &n));
	assert_int_equal(n, 2);
	assert_int_equal(e[0].parent, 1);
	assert_int_equal(e[0].switch_lsn, UINT64_C(0x3000060));
	assert_int_equal(e[1].parent, 2);
	assert_int_equal(e[1].switch_lsn, UINT64_C(0x5000000));
	assert_non_null(pg_history_parse(good, strlen(good), 3, e, 1, &n));
}

/* The replication stream's messages, as walsender.c writes them. */
static void test_wal_msg_parse(void **state)
{
	(void)state;
	unsigned char w[25 + 3] = { 'w' };
	w[8] = 0x10;		   /* start 0/10 */
	w[9 + 6] = 0x01;	   /* server end 0/100 */
	w[25] = 1, w[26] = 2, w[27] = 3;
	pg_wal_msg m;
	assert_int_equal(pg_wal_msg_parse(w, sizeof(w), &m), E_OK);
	assert_int_equal(m.kind, PG_WAL_DATA);
	assert_int_equal(m.start, 0x10);
	assert_int_equal(m.server_end, 0x100);
	assert_int_equal(m.len, 3);
	assert_ptr_equal(m.data, w + 25);
	/* no WAL at all is a valid (empty) XLogData */
	assert_int_equal(pg_wal_msg_parse(w, 25, &m), E_OK);
	assert_int_equal(m.len, 0);
	assert_int_equal(pg_wal_msg_parse(w, 24, &m), E_CORRUPT);
	/* a start so high that the data would pass the end of the LSN space */
	memset(w + 1, 0xff, 8);
	assert_int_equal(pg_wal_msg_parse(w, sizeof(w), &m), E_CORRUPT);

	unsigned char k[18] = { 'k' };
	k[8] = 0x20;
	assert_int_equal(pg_wal_msg_parse(k, sizeof(k), &m), E_OK);
	assert_int_equal(m.kind, PG_WAL_KEEPALIVE);
	assert_int_equal(m.server_end, 0x20);
	assert_false(m.reply);
	k[17] = 1;
	assert_int_equal(pg_wal_msg_parse(k, sizeof(k), &m), E_OK);
	assert_true(m.reply);
	assert_int_equal(pg_wal_msg_parse(k, sizeof(k) - 1, &m), E_CORRUPT);
	assert_int_equal(pg_wal_msg_parse(k, 0, &m), E_CORRUPT);
	k[0] = 'x';
	assert_int_equal(pg_wal_msg_parse(k, sizeof(k), &m), E_CORRUPT);
	err_clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_segment_names),	 cmocka_unit_test(test_archive_names),
		cmocka_unit_test(test_file_names),		 cmocka_unit_test(test_name_parse_and_format),
		cmocka_unit_test(test_lsn),				 cmocka_unit_test(test_wal_long_header),
		cmocka_unit_test(test_page_checksum),	 cmocka_unit_test(test_page_header),
		cmocka_unit_test(test_wal_records),	 cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_wal_record_crc),	 cmocka_unit_test(test_wal_stitch),
		cmocka_unit_test(test_segment_check),	 cmocka_unit_test(test_wal_overwrite),
		cmocka_unit_test(test_page_verify),		 cmocka_unit_test(test_control_checksums),
		cmocka_unit_test(test_control_read),	 cmocka_unit_test(test_wal_checkpoint),
		cmocka_unit_test(test_wal_page_check),	 cmocka_unit_test(test_history_check),
		cmocka_unit_test(test_wal_msg_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
