/* Delta backups: page selection, the increment format byte for byte, skip rules, paged names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/backup/push_impl.h"
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
	assert_int_equal(delta_scan(fd, path, 6 * PG_PAGE_SIZE, since, &blocks, &n, &usable), E_OK);
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
	assert_int_equal(delta_write_increment(tw, &te, fd, path, 6 * PG_PAGE_SIZE, blocks, n, buf),
					 E_OK);
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
	assert_int_equal(delta_scan(fd, path, 6 * PG_PAGE_SIZE, since, &blocks, &n, &usable), E_OK);
	assert_false(usable);
	assert_null(blocks);
	close(fd);
	unlink(path);
	free(path);
	free(pages);
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

static void test_skip_needs_margin(void **state)
{
	(void)state;
	delta_base d = { .active = true, .start = 1700000000 };
	json_t *files = json_object();
	json_t *rec = json_object();
	json_object_set_new(rec, "MTime", json_string("2023-11-14T22:13:00.123456789Z"));
	json_object_set_new(files, "/base/5/16384", rec);
	d.files = files;
	struct stat sb = { 0 };
	sb.st_size = 8192;
	time_t sec;
	long nsec;
	assert_true(time_parse_rfc3339("2023-11-14T22:13:00.123456789Z", &sec, &nsec));
	sb.st_mtim.tv_sec = sec;
	sb.st_mtim.tv_nsec = nsec;
	/* 22:13:00 is 20 s before the base's start (22:13:20): old enough to skip. */
	assert_int_equal(delta_classify(&d, "/base/5/16384", &sb), DELTA_SKIP);
	/* Touched within the margin of the base's start: scanned, not trusted. */
	d.start = sec + DELTA_MTIME_MARGIN - 1;
	assert_int_equal(delta_classify(&d, "/base/5/16384", &sb), DELTA_INCREMENT);
	d.start = 1700000000;
	sb.st_mtim.tv_nsec = nsec + 1;
	assert_int_equal(delta_classify(&d, "/base/5/16384", &sb), DELTA_INCREMENT);
	/* Not in the base at all: whole. */
	assert_int_equal(delta_classify(&d, "/base/5/99999", &sb), DELTA_WHOLE);
	/* Offsets in MTime are honoured. */
	assert_true(time_parse_rfc3339("2023-11-14T23:13:00.123456789+01:00", &sec, &nsec));
	assert_int_equal(sec, sb.st_mtim.tv_sec);
	json_decref(files);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scan_and_golden_increment),
		cmocka_unit_test(test_paged_names),
		cmocka_unit_test(test_skip_needs_margin),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
