/*
 * Remote mode: BASE_BACKUP commands per major, server-side compression specs, the INCREMENTAL
 * file parser on hostile headers, and INCREMENTAL -> WAL-G increment conversion checked by
 * applying the result to a base file as backup-fetch does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#include <endian.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/backup/restore/extract.h"
#include "internal/backup/push/push_impl.h"
#include "internal/pg/pg.h"

static void test_command_per_major(void **state)
{
	(void)state;
	char cmd[512];
	pg_bb_options o = { .label = "walc", .max_rate = 20u << 20 };
	assert_int_equal(pg_bb_command(130016, &o, cmd, sizeof(cmd)), E_OK);
	assert_string_equal(cmd, "BASE_BACKUP LABEL 'walc' FAST TABLESPACE_MAP MAX_RATE 20480");
	o.max_rate = 1000; /* below PostgreSQL's 32 kB/s floor: the floor */
	assert_int_equal(pg_bb_command(140000, &o, cmd, sizeof(cmd)), E_OK);
	assert_string_equal(cmd, "BASE_BACKUP LABEL 'walc' FAST TABLESPACE_MAP MAX_RATE 32");
	o.max_rate = 0;
	assert_int_equal(pg_bb_command(150020, &o, cmd, sizeof(cmd)), E_OK);
	assert_string_equal(cmd, "BASE_BACKUP (LABEL 'walc', CHECKPOINT 'fast', TABLESPACE_MAP, "
							 "WAIT true, MANIFEST 'no')");
	o.max_rate = 4ull << 40; /* past the ceiling */
	o.manifest = o.incremental = true;
	assert_int_equal(pg_bb_compression_parse("V", "zstd:level=5,workers=2", &o), E_OK);
	assert_int_equal(pg_bb_command(170012, &o, cmd, sizeof(cmd)), E_OK);
	assert_string_equal(cmd, "BASE_BACKUP (LABEL 'walc', CHECKPOINT 'fast', TABLESPACE_MAP, "
							 "WAIT true, MANIFEST 'yes', MANIFEST_CHECKSUMS 'NONE', INCREMENTAL, "
							 "MAX_RATE 1048576, "
							 "COMPRESSION 'zstd', COMPRESSION_DETAIL 'level=5,workers=2')");
	/* what an older major cannot do is refused, never silently dropped */
	assert_int_equal(pg_bb_command(160000, &o, cmd, sizeof(cmd)), E_CONFIG);
	o.manifest = o.incremental = false;
	assert_int_equal(pg_bb_command(140000, &o, cmd, sizeof(cmd)), E_CONFIG);
	o.compression = NULL;
	o.label = "it's";
	assert_int_equal(pg_bb_command(170000, &o, cmd, sizeof(cmd)), E_CONFIG);
	err_clear();
}

static void test_compression_spec(void **state)
{
	(void)state;
	pg_bb_options o = { 0 };
	assert_int_equal(pg_bb_compression_parse("V", NULL, &o), E_OK);
	assert_null(o.compression);
	assert_int_equal(pg_bb_compression_parse("V", "none", &o), E_OK);
	assert_null(o.compression);
	assert_int_equal(pg_bb_compression_parse("V", "lz4:9", &o), E_OK);
	assert_string_equal(o.compression, "lz4");
	assert_int_equal(o.compression_level, 9);
	assert_int_equal(pg_bb_compression_parse("V", "zstd", &o), E_OK);
	assert_int_equal(o.compression_level, 0);
	assert_int_equal(pg_bb_compression_parse("V", "zstd:workers=4", &o), E_OK);
	assert_int_equal(o.compression_workers, 4);
	const char *bad[] = { "gzip", "zstd:", "zstd:23", "lz4:level=13", "lz4:workers=2",
						  "zstd:level=", "zstd:levels=3", "zstd:level=3,", "zstd:x", "zst" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(pg_bb_compression_parse("WALG_REMOTE_COMPRESSION", bad[i], &o),
						 E_CONFIG);
		assert_non_null(strstr(err_msg(), "WALG_REMOTE_COMPRESSION"));
	}
	err_clear();
}

/* An INCREMENTAL file as PostgreSQL 17 writes it; padded: the header rounded to a page. */
static unsigned char *incr_file(uint32_t trunc, const uint32_t *blocks, uint32_t n, bool padded,
								size_t *len)
{
	size_t head = 12 + 4 * (size_t)n;
	if (padded && n > 0)
		head = (head + PG_PAGE_SIZE - 1) / PG_PAGE_SIZE * PG_PAGE_SIZE;
	*len = head + (size_t)n * PG_PAGE_SIZE;
	unsigned char *f = xcalloc(1, *len);
	uint32_t v[3] = { htole32(PG_INCR_MAGIC), htole32(n), htole32(trunc) };
	memcpy(f, v, 12);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t b = htole32(blocks[i]);
		memcpy(f + 12 + 4 * i, &b, 4);
		memset(f + head + (size_t)i * PG_PAGE_SIZE, 'A' + (int)blocks[i], PG_PAGE_SIZE);
	}
	return f;
}

static err_code parse_all(const unsigned char *f, size_t len, size_t chunk, pg_incr **out)
{
	pg_incr *p = pg_incr_new(len);
	size_t off = 0, used = 0;
	err_code rc = E_OK;
	while (rc == E_OK && off < len && !pg_incr_ready(p)) {
		size_t n = len - off < chunk ? len - off : chunk;
		rc = pg_incr_feed(p, f + off, n, &used);
		off += used;
	}
	*out = p;
	return rc;
}

static void test_incr_parser(void **state)
{
	(void)state;
	uint32_t blocks[] = { 3, 0, 9 };
	for (int padded = 0; padded < 2; padded++) {
		size_t len;
		unsigned char *f = incr_file(12, blocks, 3, padded, &len);
		for (size_t chunk = 1; chunk <= 8192; chunk *= 8) {
			pg_incr *p;
			assert_int_equal(parse_all(f, len, chunk, &p), E_OK);
			assert_true(pg_incr_ready(p));
			assert_int_equal(pg_incr_nblocks(p), 3);
			assert_int_equal(pg_incr_truncation(p), 12);
			assert_int_equal(pg_incr_blocks(p)[2], 9);
			pg_incr_free(p);
		}
		free(f);
	}
	/* no blocks: just the 12 bytes, never padded */
	size_t len;
	unsigned char *f = incr_file(5, NULL, 0, true, &len);
	assert_int_equal(len, 12);
	pg_incr *p;
	assert_int_equal(parse_all(f, len, 100, &p), E_OK);
	assert_true(pg_incr_ready(p));
	pg_incr_free(p);
	free(f);
}

static void expect_refused(unsigned char *f, size_t len, size_t member, const char *why)
{
	pg_incr *p = pg_incr_new(member);
	size_t used;
	err_code rc = pg_incr_feed(p, f, len, &used);
	assert_int_equal(rc, E_CORRUPT);
	assert_non_null(strstr(err_msg(), why));
	pg_incr_free(p);
	err_clear();
}

static void test_incr_parser_hostile(void **state)
{
	(void)state;
	uint32_t two[] = { 1, 1 }, big[] = { PG_RELSEG_BLOCKS };
	size_t len;
	unsigned char *f = incr_file(4, two, 2, true, &len);
	expect_refused(f, len, len, "twice");
	expect_refused(f, len, len + 1, "bytes long");
	f[0] ^= 1;
	expect_refused(f, len, len, "magic");
	free(f);
	f = incr_file(4, big, 1, true, &len);
	expect_refused(f, len, len, "lists block");
	free(f);
	/* a count past a segment is refused before anything is allocated for it */
	uint32_t head[3] = { htole32(PG_INCR_MAGIC), htole32(0xFFFFFFFFu), htole32(1) };
	expect_refused((unsigned char *)head, 12, 1ull << 40, "claims");
	head[1] = htole32(1);
	head[2] = htole32(PG_RELSEG_BLOCKS + 1);
	expect_refused((unsigned char *)head, 12, 1ull << 40, "truncation");
}

/* Converts an INCREMENTAL file and applies the increment to a base of nbase pages ('a'+i). */
static unsigned char *convert_apply(const unsigned char *f, size_t len, uint32_t nbase,
									off_t *size)
{
	char *dir = unit_tmpdir();
	char *path = xasprintf("%s/rel", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	unsigned char page[PG_PAGE_SIZE];
	for (uint32_t i = 0; i < nbase; i++) {
		memset(page, 'a' + (int)i, sizeof(page));
		assert_int_equal(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	}
	close(fd);

	membuf mb = { 0 };
	tar_writer *tw = tar_writer_new(membuf_sink_new(&mb));
	tar_entry te = { .name = "/rel", .mode = 0600 };
	incr_conv *c = incr_conv_new(len, &te);
	for (size_t off = 0; off < len; off += 1000)
		assert_int_equal(incr_conv_write(c, tw, f + off, len - off < 1000 ? len - off : 1000), E_OK);
	assert_int_equal(incr_conv_end(c, tw), E_OK);
	char sum[HASH_TEXT_LEN + 1];
	incr_conv_sum(c, sum);
	incr_conv_free(c);
	assert_int_equal(tar_writer_finish(tw), E_OK);
	tar_writer_free(tw);

	/* IncrementChecksum, as remote.c records it: the extractor holds the member to it */
	json_t *rec = json_pack("{s:b, s:s}", "IsIncremented", 1, "IncrementChecksum", sum);
	file_table files = { .keep_sums = true };
	assert_int_equal(file_table_add(&files, "/rel", rec), E_OK);
	assert_int_equal(file_table_end(&files, "files"), E_OK);
	json_decref(rec);
	extract_level lvl = { .dest = dir, .files = &files, .backup = "unit" };
	sink *x = extract_sink_new(&lvl, NULL);
	assert_int_equal(sink_write(x, mb.data, mb.len), E_OK);
	assert_int_equal(sink_finish(x), E_OK);
	sink_free(x);
	file_table_free(&files);
	free(mb.data);

	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	*size = sb.st_size;
	unsigned char *out = xmalloc((size_t)sb.st_size + 1);
	fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, out, (size_t)sb.st_size), (ssize_t)sb.st_size);
	close(fd);
	assert_int_equal(unit_rmtree(dir), 0);
	free(path);
	free(dir);
	return out;
}

static void expect_page(const unsigned char *file, uint32_t blk, unsigned char fill)
{
	for (size_t i = 0; i < PG_PAGE_SIZE; i++)
		if (file[(size_t)blk * PG_PAGE_SIZE + i] != fill)
			fail_msg("block %u byte %zu: %d, expected %d", blk, i,
					 file[(size_t)blk * PG_PAGE_SIZE + i], fill);
}

/*
 * pg_combinebackup's reconstruction: max(truncation, last block + 1) blocks; below the
 * truncation length unsent blocks are the base's (zero past its end), above it zero pages.
 */
static void test_conversion_reconstructs(void **state)
{
	(void)state;
	/* base of 4 pages, truncation 6, blocks 1 and 7: 8 pages */
	uint32_t b1[] = { 1, 7 };
	size_t len;
	off_t size;
	unsigned char *f = incr_file(6, b1, 2, true, &len);
	unsigned char *out = convert_apply(f, len, 4, &size);
	assert_int_equal(size, 8 * PG_PAGE_SIZE);
	expect_page(out, 0, 'a');
	expect_page(out, 1, 'A' + 1);
	expect_page(out, 2, 'c');
	expect_page(out, 3, 'd');
	expect_page(out, 4, 0);
	expect_page(out, 5, 0);
	expect_page(out, 6, 0);
	expect_page(out, 7, 'A' + 7);
	free(out);
	free(f);
	/* base of 10 pages truncated to 3, block 1 changed */
	uint32_t b2[] = { 1 };
	f = incr_file(3, b2, 1, false, &len);
	out = convert_apply(f, len, 10, &size);
	assert_int_equal(size, 3 * PG_PAGE_SIZE);
	expect_page(out, 0, 'a');
	expect_page(out, 1, 'A' + 1);
	expect_page(out, 2, 'c');
	free(out);
	free(f);
	/* unchanged relation: no blocks, the base as it was up to the truncation length */
	f = incr_file(2, NULL, 0, true, &len);
	out = convert_apply(f, len, 2, &size);
	assert_int_equal(size, 2 * PG_PAGE_SIZE);
	expect_page(out, 1, 'b');
	free(out);
	free(f);
}

static void test_names_and_label(void **state)
{
	(void)state;
	char *real = NULL;
	assert_true(incr_member_name("base/5/INCREMENTAL.16384", &real));
	assert_string_equal(real, "base/5/16384");
	free(real);
	assert_true(incr_member_name("PG_17_1/5/INCREMENTAL.16384_vm.1", &real));
	assert_string_equal(real, "PG_17_1/5/16384_vm.1");
	free(real);
	assert_false(incr_member_name("base/5/16384", &real));
	assert_false(incr_member_name("base/5/INCREMENTAL.", &real));
	assert_false(incr_member_name("INCREMENTAL/5/16384", &real));

	const char *text = "START WAL LOCATION: 0/9000028 (file 000000010000000000000009)\n"
					   "CHECKPOINT LOCATION: 0/9000080\n"
					   "INCREMENTAL FROM LSN: 0/7000028\n"
					   "INCREMENTAL FROM TLI: 1\n"
					   "START TIMELINE: 1\n";
	membuf mb = { .data = (unsigned char *)xstrdup(text), .len = strlen(text) };
	incr_strip_label(&mb);
	assert_int_equal(mb.len, strlen(text) - strlen("INCREMENTAL FROM LSN: 0/7000028\n"
												   "INCREMENTAL FROM TLI: 1\n"));
	assert_memory_equal(mb.data + mb.len - strlen("START TIMELINE: 1\n"), "START TIMELINE: 1\n",
						strlen("START TIMELINE: 1\n"));
	assert_null(memmem(mb.data, mb.len, "INCREMENTAL", 11));
	free(mb.data);
}

static void test_supported_majors(void **state)
{
	(void)state;
	assert_int_equal(pg_check_version(130000, "13.0"), E_OK);
	assert_int_equal(pg_check_version(180006, "18.6"), E_OK);
	assert_int_equal(pg_check_version(190000, "19rc1"), E_OK);
	assert_int_equal(pg_check_version(190009, "19.9"), E_OK);
	assert_int_equal(pg_check_version(120022, "12.22"), E_CONFIG);
	assert_non_null(strstr(err_msg(), "PostgreSQL 12.22"));
	assert_int_equal(pg_check_version(200000, "20devel"), E_CONFIG);
	assert_string_equal(err_msg(), "PostgreSQL 20devel (server_version_num 200000) is not "
								   "supported: walc supports PostgreSQL 13 to 19");
	assert_null(strchr(err_msg(), '\n'));
	err_clear();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_command_per_major),
		cmocka_unit_test(test_compression_spec),
		cmocka_unit_test(test_incr_parser),
		cmocka_unit_test(test_incr_parser_hostile),
		cmocka_unit_test(test_conversion_reconstructs),
		cmocka_unit_test(test_names_and_label),
		cmocka_unit_test(test_supported_majors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
