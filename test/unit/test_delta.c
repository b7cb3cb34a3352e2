/*
 * Delta backups: page selection, the increment format byte for byte, skip rules, paged names,
 * and the member reader backup-fetch and backup-verify share.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <endian.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/unit/unit.h"

#include "internal/backup/restore/extract.h"
#include "internal/backup/push/push_impl.h"
#include "internal/repo/repo_impl.h"
#include "internal/codec/codec.h"
#include "internal/pg/pg.h"

/* A valid heap-page header with the given LSN; the body is a recognisable pattern. */
static void make_page(unsigned char *p, uint64_t lsn, unsigned char fill)
{
	memset(p, fill, PG_PAGE_SIZE);
	uint32_t hi = (uint32_t)(lsn >> 32), lo = (uint32_t)lsn;
	memcpy(p, &hi, 4);
	memcpy(p + 4, &lo, 4);
	uint16_t checksum = 0, flags = 0, lower = 40, upper = 8000, special = 8192,
			 version = 8192 | 4;
	memcpy(p + 8, &checksum, 2);
	memcpy(p + 10, &flags, 2);
	memcpy(p + 12, &lower, 2);
	memcpy(p + 14, &upper, 2);
	memcpy(p + 16, &special, 2);
	memcpy(p + 18, &version, 2);
}

static char *write_pages(const unsigned char *pages, size_t n)
{
	char *path = xstrdup("/tmp/walc-delta-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, pages, n * PG_PAGE_SIZE), (ssize_t)(n * PG_PAGE_SIZE));
	close(fd);
	return path;
}

static void test_scan_and_golden_increment(void **state)
{
	(void)state;
	const uint64_t since = 0x200;
	unsigned char *pages = xcalloc(6, PG_PAGE_SIZE);
	make_page(pages + 0 * PG_PAGE_SIZE, 0x100, 'a');	 /* older: left out */
	make_page(pages + 1 * PG_PAGE_SIZE, 0x300, 'b');	 /* newer */
	/* page 2 stays all zeros: new, included */
	make_page(pages + 3 * PG_PAGE_SIZE, 0x200, 'd');	 /* equal to the base LSN: included */
	make_page(pages + 4 * PG_PAGE_SIZE, 0x1FF, 'e');	 /* older */
	make_page(pages + 5 * PG_PAGE_SIZE, 0x100000000ULL, 'f'); /* high word set */
	char *path = write_pages(pages, 6);
	int fd = open(path, O_RDONLY);
	uint32_t *blocks, n;
	bool usable;
	unsigned char *scan_buf = xmalloc(DELTA_SCAN_CHUNK);
	assert_int_equal(delta_scan(fd, path, 6 * PG_PAGE_SIZE, since, scan_buf, &blocks, &n, &usable),
					 E_OK);
	assert_true(usable);
	assert_int_equal(n, 4);
	assert_int_equal(blocks[0], 1);
	assert_int_equal(blocks[1], 2);
	assert_int_equal(blocks[2], 3);
	assert_int_equal(blocks[3], 5);

	/* The member content, byte for byte (reference §8.3). */
	membuf mb = { 0 };
	tar_writer *tw = tar_writer_new(membuf_sink_new(&mb));
	unsigned char buf[PG_PAGE_SIZE];
	tar_entry te = { .name = "/base/5/16384", .mode = 0600 };
	hasher *h = hasher_new();
	assert_int_equal(
		delta_write_increment(tw, &te, fd, path, 6 * PG_PAGE_SIZE, blocks, n, buf, h), E_OK);
	assert_int_equal(tar_writer_finish(tw), E_OK);
	size_t want_len = 16 + 4 * 4 + 4 * PG_PAGE_SIZE;
	assert_int_equal(te.size, want_len);
	unsigned char *want = xcalloc(1, want_len);
	static const unsigned char head[16] = { 'w', 'i', '1', 0x55, 0, 0, 0, 0, 0, 0, 0, 0,
											4, 0, 0, 0 };
	memcpy(want, head, 16);
	want[4 + 2] = 0; /* 6 * 8192 = 0xC000, little-endian */
	want[4 + 0] = 0x00;
	want[4 + 1] = 0xC0;
	static const unsigned char list[16] = { 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 5, 0, 0, 0 };
	memcpy(want + 16, list, 16);
	for (int i = 0; i < 4; i++)
		memcpy(want + 32 + (size_t)i * PG_PAGE_SIZE, pages + (size_t)blocks[i] * PG_PAGE_SIZE,
			   PG_PAGE_SIZE);
	/* Content follows the 512-byte header. */
	assert_true(mb.len >= 512 + want_len);
	assert_memory_equal(mb.data + 512, want, want_len);
	/* IncrementChecksum: of exactly the member's stored bytes, header and block list too. */
	uint64_t v[2];
	char got[HASH_TEXT_LEN + 1], expect[HASH_TEXT_LEN + 1];
	hash128(want, want_len, v);
	hash_text_format(v, expect);
	hasher_text(h, got);
	assert_string_equal(got, expect);
	hasher_free(h);
	free(want);
	free(blocks);
	free(mb.data);
	tar_writer_free(tw);

	/* A page with a broken header makes the whole file a full copy. */
	pages[4 * PG_PAGE_SIZE + 12] = 0xFF; /* pd_lower past pd_upper */
	pages[4 * PG_PAGE_SIZE + 13] = 0xFF;
	close(fd);
	unlink(path);
	free(path);
	path = write_pages(pages, 6);
	fd = open(path, O_RDONLY);
	assert_int_equal(delta_scan(fd, path, 6 * PG_PAGE_SIZE, since, scan_buf, &blocks, &n, &usable),
					 E_OK);
	assert_false(usable);
	assert_null(blocks);
	close(fd);
	unlink(path);
	free(path);
	free(pages);
	free(scan_buf);
}

/* 1,500 new pages, read in many chunks: every one is listed, past the list's first 1,024. */
static void test_scan_many_pages(void **state)
{
	(void)state;
	char *path = write_pages(NULL, 0);
	int fd = open(path, O_RDWR);
	assert_int_equal(ftruncate(fd, 1500 * PG_PAGE_SIZE), 0);
	unsigned char *buf = xmalloc(DELTA_SCAN_CHUNK);
	uint32_t *blocks, n;
	bool usable;
	assert_int_equal(delta_scan(fd, path, 1500 * PG_PAGE_SIZE, 0x200, buf, &blocks, &n, &usable),
					 E_OK);
	assert_true(usable);
	assert_int_equal(n, 1500);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(blocks[i], i);
	free(blocks);
	free(buf);
	close(fd);
	unlink(path);
	free(path);
}

static void test_paged_names(void **state)
{
	(void)state;
	assert_true(delta_is_paged("/base/5/16384", 8192));
	assert_true(delta_is_paged("/base/5/16384.1", 8192 * 3));
	assert_true(delta_is_paged("/pg_tblspc/16406/PG_15_202209061/5/16407", 8192));
	assert_false(delta_is_paged("/base/5/16384_fsm", 8192));
	assert_false(delta_is_paged("/base/5/16384", 8191));
	assert_false(delta_is_paged("/base/5/16384", 0));
	assert_false(delta_is_paged("/base/5/pg_internal.init", 8192));
	assert_false(delta_is_paged("/pg_xact/0000", 8192));
	assert_false(delta_is_paged("/base/5/16384.", 8192));
}

/* The base's table as delta_choose fills it: from files_metadata.json text, streamed. */
static void base_from(delta_base *d, const char *json)
{
	sink *s = catalog_files_sink_new("files_metadata.json", delta_add_file, NULL, d);
	assert_int_equal(sink_write(s, json, strlen(json)), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	delta_files_finish(d);
}

/* A one-page file last modified at the RFC 3339 time mtime. */
static struct stat page_file_at(const char *mtime)
{
	struct stat sb = { 0 };
	sb.st_size = 8192;
	assert_true(time_parse_rfc3339(mtime, &sb.st_mtim.tv_sec, &sb.st_mtim.tv_nsec));
	return sb;
}

static void test_skip_needs_margin(void **state)
{
	(void)state;
	delta_base d = { .active = true, .start = 1700000000 };
	base_from(&d, "{\"Files\": {\"/base/5/16384\": {\"MTime\": "
				  "\"2023-11-14T22:13:00.123456789Z\"}, \"/base/5/2\": {}}}");
	struct stat sb = page_file_at("2023-11-14T22:13:00.123456789Z");
	time_t sec = sb.st_mtim.tv_sec;
	long nsec = sb.st_mtim.tv_nsec;
	/* 22:13:00 is 20 s before the base's start (22:13:20): old enough to skip. */
	assert_int_equal(delta_classify(&d, "/base/5/16384", &sb), DELTA_SKIP);
	/* Touched within the margin of the base's start: scanned, not trusted. */
	d.start = sec + DELTA_MTIME_MARGIN - 1;
	assert_int_equal(delta_classify(&d, "/base/5/16384", &sb), DELTA_INCREMENT);
	d.start = 1700000000;
	sb.st_mtim.tv_nsec = nsec + 1;
	assert_int_equal(delta_classify(&d, "/base/5/16384", &sb), DELTA_INCREMENT);
	/* Not in the base at all: whole. In it with no MTime: scanned. */
	assert_int_equal(delta_classify(&d, "/base/5/99999", &sb), DELTA_WHOLE);
	assert_int_equal(delta_classify(&d, "/base/5/2", &sb), DELTA_INCREMENT);
	/* Offsets in MTime are honoured. */
	assert_true(time_parse_rfc3339("2023-11-14T23:13:00.123456789+01:00", &sec, &nsec));
	assert_int_equal(sec, sb.st_mtim.tv_sec);
	delta_free(&d);
}

/* A name the base recorded twice is never skipped; one beside it is. */
static void test_base_name_twice(void **state)
{
	(void)state;
	delta_base d = { .active = true, .start = 1700000000 };
	base_from(&d, "{\"Files\": {\"/base/5/1\": {\"MTime\": \"2023-11-14T22:13:00Z\"},"
				  "\"/base/5/2\": {\"MTime\": \"2023-11-14T22:13:00Z\"},"
				  "\"/base/5/2\": {\"MTime\": \"2023-11-14T22:13:00Z\"}}}");
	struct stat sb = page_file_at("2023-11-14T22:13:00Z");
	assert_int_equal(delta_classify(&d, "/base/5/1", &sb), DELTA_SKIP);
	assert_int_equal(delta_classify(&d, "/base/5/2", &sb), DELTA_INCREMENT);
	delta_free(&d);
}

/* The i-th of many names: three folders, even relfilenodes, every fork, some segments. */
static void many_name(size_t i, char *out, size_t len)
{
	static const char *const dirs[] = { "/base/1", "/base/16384",
										"/pg_tblspc/16406/PG_15_202209061/5" };
	static const char *const suffixes[] = { "", "_fsm", "_vm", "_init", ".1", ".37", "_fsm.2" };
	size_t k = i / 3;
	snprintf(out, len, "%s/%zu%s", dirs[i % 3], 2 * (k / 7) + 2, suffixes[k % 7]);
}

/*
 * pg_name_key in a table of more files than one run holds, added in a scrambled order, some
 * twice in different runs: every name is found with its number, a name added twice with 0,
 * and no neighbour or other spelling of a name is taken for it; a folder's relation files
 * are neighbours.
 */
static void test_name_keys_many(void **state)
{
	(void)state;
	enum { N = 3 * 16384 * 7 / 4 };
	char name[96];
	uint64_t key[2], v;
	keytab *t = keytab_new(1);
	for (size_t j = 0; j < N; j++) {
		size_t i = (j * 7919) % N; /* 7919 is prime and does not divide N: a permutation */
		many_name(i, name, sizeof(name));
		pg_name_key(name, key);
		v = i + 1;
		keytab_add(t, key, &v);
		if (i % 1000 == 17)
			keytab_add(t, key, &v); /* again, later: in another run */
	}
	static const char *const others[] = { "/pg_xact/0000", "/base/1/pg_filenode.map" };
	for (size_t i = 0; i < 2; i++) {
		pg_name_key(others[i], key);
		v = 100 + i;
		keytab_add(t, key, &v);
	}
	assert_true(keytab_finish(t));
	for (size_t i = 0; i < N; i++) {
		many_name(i, name, sizeof(name));
		pg_name_key(name, key);
		assert_true(keytab_find(t, key, &v, NULL));
		assert_int_equal(v, i % 1000 == 17 ? 0 : i + 1);
	}
	for (size_t i = 0; i < 2; i++) {
		pg_name_key(others[i], key);
		assert_true(keytab_find(t, key, &v, NULL));
		assert_int_equal(v, 100 + i);
	}
	static const char *const absent[] = {
		"/base/1/3",	 "/base/1/1",	 "/base/1/0",		 "/base/1/02",
		"/base/1/2.0",	 "/base/1/2.01", "/base/1/2_foo",	 "/base/1/2_fsm_vm",
		"/base/1/2 ",	 "/base/1/2.",	 "/base/2/2",		 "/base/16384/99999999",
		"/pg_xact/0001", "2",			 "/base/1//2",		 "/base/1/4294967298",
		"/base/16384/2.9", "/base/1/2_init.1", "/pg_tblspc/16406/PG_15_202209061/6/2",
	};
	for (size_t i = 0; i < sizeof(absent) / sizeof(*absent); i++) {
		pg_name_key(absent[i], key);
		assert_false(keytab_find(t, key, NULL, NULL));
	}
	keytab_free(t);
	uint64_t a[2], b[2];
	pg_name_key("/base/16384/16385", a);
	pg_name_key("/base/16384/16390", b);
	assert_true(a[0] == b[0] && b[1] - a[1] == 5);
}

/* What the member reader passed on, as text: fetch's extractor and verify's checker see this. */
typedef struct seen {
	char log[1024];
	uint64_t bytes;
} seen;

static err_code rec_begin(void *ctx, const tar_entry *e, const char *rel, member_kind kind,
						  bool *take)
{
	seen *s = ctx;
	size_t n = strlen(s->log);
	snprintf(s->log + n, sizeof(s->log) - n, "begin %s %s %d;", e->name, rel, (int)kind);
	*take = strcmp(rel, "skipped") != 0;
	return E_OK;
}

static err_code rec_increment(void *ctx, uint64_t file_size, uint32_t npages,
							  const uint32_t *blocks)
{
	seen *s = ctx;
	size_t n = strlen(s->log);
	snprintf(s->log + n, sizeof(s->log) - n, "inc %llu %u first %u;",
			 (unsigned long long)file_size, npages, npages ? blocks[0] : 0);
	return E_OK;
}

static err_code rec_data(void *ctx, uint64_t offset, const void *buf, size_t len)
{
	seen *s = ctx;
	(void)buf;
	size_t n = strlen(s->log);
	if (offset % PG_PAGE_SIZE == 0 && len >= 1)
		snprintf(s->log + n, sizeof(s->log) - n, "@%llu;", (unsigned long long)offset);
	s->bytes += len;
	return E_OK;
}

static err_code rec_end(void *ctx)
{
	seen *s = ctx;
	strncat(s->log, "end;", sizeof(s->log) - strlen(s->log) - 1);
	return E_OK;
}

static const member_ops rec_ops = { rec_begin, rec_increment, rec_data, rec_end, NULL };

/*
 * The partition the member-reader tests read: a directory, two small files, a backup_label and
 * an increment of pages 1 and 2 of a 3-page relation whose page 0 is older ('a', 'b', 'c');
 * h (or NULL) hashes the increment member's bytes.
 */
static void member_tar(membuf *mb, hasher *h)
{
	unsigned char *pages = xcalloc(3, PG_PAGE_SIZE);
	make_page(pages, 0x100, 'a');
	make_page(pages + PG_PAGE_SIZE, 0x300, 'b');
	make_page(pages + 2 * PG_PAGE_SIZE, 0x300, 'c');
	char *path = write_pages(pages, 3);
	int fd = open(path, O_RDONLY);
	uint32_t blocks[2] = { 1, 2 };
	unsigned char buf[PG_PAGE_SIZE];
	static const struct {
		tar_entry e;
		const char *data;
	} small[] = {
		{ { .name = "/base", .type = TAR_DIR, .mode = 0700 }, NULL },
		{ { .name = "/PG_VERSION", .type = TAR_FILE, .size = 3, .mode = 0600 }, "15\n" },
		{ { .name = "/skipped", .type = TAR_FILE, .size = 2, .mode = 0600 }, "xx" },
		{ { .name = "backup_label", .type = TAR_FILE, .size = 1, .mode = 0600 }, "x" },
	};
	tar_writer *tw = tar_writer_new(membuf_sink_new(mb));
	for (size_t i = 0; i < sizeof(small) / sizeof(*small); i++) {
		assert_int_equal(tar_writer_begin(tw, &small[i].e), E_OK);
		if (small[i].data != NULL)
			assert_int_equal(tar_writer_write(tw, small[i].data, small[i].e.size), E_OK);
		assert_int_equal(tar_writer_end(tw), E_OK);
	}
	tar_entry inc = { .name = "/base/5/16384", .mode = 0600 };
	assert_int_equal(
		delta_write_increment(tw, &inc, fd, path, 3 * PG_PAGE_SIZE, blocks, 2, buf, h), E_OK);
	assert_int_equal(tar_writer_finish(tw), E_OK);
	tar_writer_free(tw);
	close(fd);
	unlink(path);
	free(path);
	free(pages);
}

static void test_member_reader(void **state)
{
	(void)state;
	membuf mb = { 0 };
	member_tar(&mb, NULL);

	json_t *inc_rec = json_pack("{s:b}", "IsIncremented", 1);
	file_table ft = { 0 };
	assert_int_equal(file_table_add(&ft, "/base/5/16384", inc_rec), E_OK);
	assert_int_equal(file_table_end(&ft, "files"), E_OK);
	json_decref(inc_rec);
	const file_table *files = &ft;
	seen s = { 0 };
	sink *r = member_reader_new(&rec_ops, &s, files, NULL);
	assert_int_equal(sink_write(r, mb.data, mb.len), E_OK);
	assert_int_equal(sink_finish(r), E_OK);
	sink_free(r);
	assert_string_equal(s.log, "begin /base base 0;"
							   "begin /PG_VERSION PG_VERSION 1;@0;end;"
							   "begin /skipped skipped 1;"
							   "begin backup_label backup_label 1;@0;end;"
							   "begin /base/5/16384 base/5/16384 2;inc 24576 2 first 1;"
							   "@8192;@16384;end;");
	assert_int_equal(s.bytes, 3 + 1 + 2 * PG_PAGE_SIZE);

	/* The same increment cut short: the header's page count and the member disagree. */
	const unsigned char *magic = memmem(mb.data, mb.len, "wi1\x55", 4);
	assert_non_null(magic);
	unsigned char *hostile = xmalloc(mb.len);
	memcpy(hostile, mb.data, mb.len);
	hostile[(size_t)(magic - mb.data) + 12] = 3; /* claims 3 pages */
	memset(&s, 0, sizeof(s));
	r = member_reader_new(&rec_ops, &s, files, NULL);
	assert_int_equal(sink_write(r, hostile, mb.len), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "/base/5/16384: increment of 3 pages needs"));
	sink_free(r);
	/* Without IsIncremented in Files the member is a plain file. */
	memset(&s, 0, sizeof(s));
	r = member_reader_new(&rec_ops, &s, NULL, NULL);
	assert_int_equal(sink_write(r, mb.data, mb.len), E_OK);
	assert_int_equal(sink_finish(r), E_OK);
	sink_free(r);
	assert_non_null(strstr(s.log, "begin /base/5/16384 base/5/16384 1;@0;"));
	err_clear();
	free(hostile);
	file_table_free(&ft);
	free(mb.data);
}

/* A Files table with sizes and checksums, from JSON text {"name": {...}, ...}. */
static void files_from(file_table *t, const char *json)
{
	json_error_t jerr;
	json_t *doc = json_loads(json, 0, &jerr);
	assert_non_null(doc);
	memset(t, 0, sizeof(*t));
	t->keep_sums = true;
	const char *name;
	json_t *rec;
	json_object_foreach(doc, name, rec)
	{
		assert_int_equal(file_table_add(t, name, rec), E_OK);
	}
	assert_int_equal(file_table_end(t, "unit"), E_OK);
	json_decref(doc);
}

/* The mismatch callback of a checker that reports and goes on (backup-verify's way). */
static err_code rec_mismatch(void *ctx, const char *member, const char *what)
{
	seen *s = ctx;
	size_t n = strlen(s->log);
	snprintf(s->log + n, sizeof(s->log) - n, "MISMATCH %s: %s;", member, what);
	return E_OK;
}

static const member_ops report_ops = { rec_begin, rec_increment, rec_data, rec_end, rec_mismatch };

/* Reads tar bytes with files; returns the reader's result, held and log in h and s. */
static err_code read_with(const membuf *tar, const file_table *files, const member_ops *ops,
						  seen *s, held *h)
{
	memset(s, 0, sizeof(*s));
	if (h != NULL) {
		free(h->files);
		h->files = xcalloc(files->n + 1, 1);
		h->label = false;
	}
	sink *r = member_reader_new(ops, s, files, h);
	err_code rc = sink_write(r, tar->data, tar->len);
	if (rc == E_OK)
		rc = sink_finish(r);
	sink_free(r);
	return rc;
}

/*
 * Each member taken is held to its Files entry as it passes: a whole file's Size and Checksum,
 * an increment's IncrementChecksum (of its stored bytes); the stream fails naming the member,
 * or a reporting checker hears of it and the stream goes on. What the partition held is marked.
 */
static void test_member_checks(void **state)
{
	(void)state;
	membuf mb = { 0 };
	hasher *h = hasher_new();
	member_tar(&mb, h);
	char inc_sum[HASH_TEXT_LEN + 1], pgv_sum[HASH_TEXT_LEN + 1], other[HASH_TEXT_LEN + 1];
	hasher_text(h, inc_sum);
	hasher_free(h);
	uint64_t v[2];
	hash128("15\n", 3, v);
	hash_text_format(v, pgv_sum);
	hash128("16\n", 3, v);
	hash_text_format(v, other);

	char *json = xasprintf("{\"/PG_VERSION\": {\"Size\": 3, \"Checksum\": \"%s\"},"
						   " \"/base/5/16384\": {\"IsIncremented\": true,"
						   " \"IncrementChecksum\": \"%s\"}, \"/gone\": {\"Size\": 1}}",
						   pgv_sum, inc_sum);
	file_table ft;
	files_from(&ft, json);
	free(json);
	seen s;
	held hd = { NULL, false };
	assert_int_equal(read_with(&mb, &ft, &rec_ops, &s, &hd), E_OK);
	file_rec f;
	assert_true(file_table_find(&ft, "/PG_VERSION", &f) && hd.files[f.idx]);
	assert_true(file_table_find(&ft, "/base/5/16384", &f) && hd.files[f.idx]);
	assert_true(file_table_find(&ft, "/gone", &f) && !hd.files[f.idx]);
	assert_true(hd.label);
	file_table_free(&ft);

	/* A whole file's checksum, then its size, disagree: the stream fails naming the file. */
	json = xasprintf("{\"/PG_VERSION\": {\"Size\": 3, \"Checksum\": \"%s\"}}", other);
	files_from(&ft, json);
	free(json);
	assert_int_equal(read_with(&mb, &ft, &rec_ops, &s, NULL), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "/PG_VERSION: content is xxh3-128:"));
	assert_non_null(strstr(err_msg(), "files_metadata.json says xxh3-128:"));
	/* backup-verify's way: reported, the stream goes on to its end */
	assert_int_equal(read_with(&mb, &ft, &report_ops, &s, NULL), E_OK);
	assert_non_null(strstr(s.log, "MISMATCH /PG_VERSION: content is"));
	assert_non_null(strstr(s.log, "begin /base/5/16384"));
	file_table_free(&ft);
	files_from(&ft, "{\"/PG_VERSION\": {\"Size\": 4}}");
	assert_int_equal(read_with(&mb, &ft, &rec_ops, &s, NULL), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "/PG_VERSION: 3 bytes, files_metadata.json says 4"));
	file_table_free(&ft);
	files_from(&ft, "{\"/PG_VERSION\": {\"Checksum\": \"md5:0123\"}}");
	assert_int_equal(read_with(&mb, &ft, &rec_ops, &s, NULL), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "Checksum is not an xxh3-128 sum"));
	file_table_free(&ft);

	/* A flipped byte in the increment's pages: its own checksum catches it. */
	json = xasprintf("{\"/base/5/16384\": {\"IsIncremented\": true, \"IncrementChecksum\": \"%s\"}}",
					 inc_sum);
	files_from(&ft, json);
	free(json);
	unsigned char fill[64];
	memset(fill, 'c', sizeof(fill));
	unsigned char *page_c = memmem(mb.data, mb.len, fill, sizeof(fill));
	assert_non_null(page_c);
	page_c[100] ^= 1;
	assert_int_equal(read_with(&mb, &ft, &rec_ops, &s, NULL), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "/base/5/16384: increment is xxh3-128:"));
	assert_non_null(strstr(err_msg(), "IncrementChecksum says"));
	page_c[100] ^= 1;
	file_table_free(&ft);
	/* Entries that record nothing (WAL-G's) are taken as they are. */
	files_from(&ft, "{\"/PG_VERSION\": {\"IsSkipped\": false},"
					"\"/base/5/16384\": {\"IsIncremented\": true}}");
	assert_int_equal(read_with(&mb, &ft, &rec_ops, &s, NULL), E_OK);
	file_table_free(&ft);

	err_clear();
	free(hd.files);
	free(mb.data);
}

/* A plain object of a file repository. */
static void put_object(repo *r, const char *key, const void *data, size_t len)
{
	sink *s;
	assert_int_equal(storage_put(r->st, key, &s), E_OK);
	assert_int_equal(sink_write(s, data, len), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
}

/* A tar object of one member. */
static void put_tar(repo *r, const char *key, const char *member, const void *data, size_t len)
{
	membuf mb = { 0 };
	tar_writer *tw = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = { .name = member, .type = TAR_FILE, .size = len, .mode = 0600 };
	assert_int_equal(tar_writer_begin(tw, &e), E_OK);
	assert_int_equal(tar_writer_write(tw, data, len), E_OK);
	assert_int_equal(tar_writer_end(tw), E_OK);
	assert_int_equal(tar_writer_finish(tw), E_OK);
	tar_writer_free(tw);
	put_object(r, key, mb.data, mb.len);
	free(mb.data);
}

static void collect(void *arg, const char *object, const char *what)
{
	seen *s = arg;
	size_t n = strlen(s->log);
	snprintf(s->log + n, sizeof(s->log) - n, "%s: %s;", object, what);
}

#define XNAME "base_000000010000000000000002"
#define XDIR "basebackups_005/" XNAME "/tar_partitions/"

/*
 * The sentinel against the backup's own records: backup_label (with and without START
 * TIMELINE, as PostgreSQL before 11 writes it), pg_control, the .backup history file (named by
 * the label's start), metadata.json; absent records and a label the name disagrees with.
 */
static void test_crosscheck(void **state)
{
	(void)state;
	char *root = unit_tmpdir();
	repo r = { 0 };
	r.codec = codec_by_name("none");
	assert_int_equal(storage_fs_open(root, &r.st), E_OK);
	const uint64_t seg = 16u << 20, sysid = 7000000000000000001ull;
	backup_sentinel s = { .lsn = 0x2000028, .finish_lsn = 0x2000100, .have_system_id = true,
						  .system_id = sysid };
	seen got = { 0 };
	/* nothing stored: both tar records are missing */
	assert_int_equal(backup_crosscheck(&r, XNAME, &s, seg, collect, &got, NULL), E_OK);
	assert_non_null(strstr(got.log, XDIR "backup_label.tar: missing"));
	assert_non_null(strstr(got.log, XDIR "pg_control.tar: missing"));

	const char *label = "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n"
						"CHECKPOINT LOCATION: 0/2000060\n";
	put_tar(&r, XDIR "backup_label.tar", "backup_label", label, strlen(label));
	unsigned char control[8192] = { 0 };
	uint64_t le = htole64(sysid);
	memcpy(control, &le, sizeof(le));
	put_tar(&r, XDIR "pg_control.tar", "/global/pg_control", control, sizeof(control));
	const char *hist = "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n"
					   "STOP WAL LOCATION: 0/2000100 (file 000000010000000000000002)\n";
	put_object(&r, "wal_005/000000010000000000000002.00000028.backup", hist, strlen(hist));
	const char *meta = "{\"start_lsn\": 33554472, \"finish_lsn\": 33554688, "
					   "\"system_identifier\": 7000000000000000001}";
	put_object(&r, "basebackups_005/" XNAME "/metadata.json", meta, strlen(meta));
	memset(&got, 0, sizeof(got));
	char *locked = NULL;
	assert_int_equal(backup_crosscheck(&r, XNAME, &s, seg, collect, &got, &locked), E_OK);
	assert_string_equal(got.log, "");
	assert_null(locked);

	/* every field of the sentinel moved: each disagreement said of the sentinel */
	backup_sentinel moved = s;
	moved.lsn += seg;
	moved.finish_lsn += 8;
	moved.system_id++;
	assert_int_equal(backup_crosscheck(&r, XNAME, &moved, seg, collect, &got, NULL), E_OK);
	const char *sen = "basebackups_005/" XNAME "_backup_stop_sentinel.json: ";
	char want[256];
	static const char *const needles[] = {
		"start LSN 0/3000028, but backup_label says START WAL LOCATION 0/2000028",
		"start LSN 0/3000028 is not in segment 000000010000000000000002 that the name gives",
		"system identifier 7000000000000000002, but pg_control says 7000000000000000001",
		"finish LSN 0/2000108, but wal_005/000000010000000000000002.00000028.backup says STOP "
		"WAL LOCATION 0/2000100",
		"start LSN 0/3000028, but basebackups_005/" XNAME "/metadata.json says start_lsn "
		"0/2000028",
	};
	for (size_t i = 0; i < sizeof(needles) / sizeof(*needles); i++) {
		snprintf(want, sizeof(want), "%s%s;", sen, needles[i]);
		if (strstr(got.log, want) == NULL)
			fail_msg("no \"%s\" in: %s", want, got.log);
	}

	/* a label whose START TIMELINE is not the name's */
	const char *label2 = "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n"
						 "START TIMELINE: 2\n";
	put_tar(&r, XDIR "backup_label.tar", "backup_label", label2, strlen(label2));
	memset(&got, 0, sizeof(got));
	assert_int_equal(backup_crosscheck(&r, XNAME, &s, seg, collect, &got, NULL), E_OK);
	assert_non_null(strstr(got.log, "the name says timeline 1, but backup_label says START TIMELINE 2"));

	storage_free(r.st);
	assert_int_equal(unit_rmtree(root), 0);
	free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scan_and_golden_increment),
		cmocka_unit_test(test_scan_many_pages),
		cmocka_unit_test(test_paged_names),
		cmocka_unit_test(test_skip_needs_margin),
		cmocka_unit_test(test_base_name_twice),
		cmocka_unit_test(test_name_keys_many),
		cmocka_unit_test(test_member_reader),
		cmocka_unit_test(test_member_checks),
		cmocka_unit_test(test_crosscheck),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
