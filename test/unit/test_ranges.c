/*
 * Ranged reads of a partition (part_ranges): the frames holding the needed members, merged
 * where they touch; the whole partition when a needed member has no frame, or when the frames
 * would cover most of it anyway.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "internal/backup/restore/fetch_impl.h"

/*
 * One partition of 10000 bytes whose TarFileSets list names /a, /b, ... in order, with these
 * frame offsets (-1: none recorded, -2: not in Files at all); need: the letters needed.
 */
static bool ranges_of(part_frames *p, const long *frames, size_t n, const char *need,
					  byte_range **r, size_t *nr)
{
	part_frames_start(p, 10000);
	for (size_t i = 0; i < n; i++) {
		file_rec rec = { .frame = frames[i] < 0 ? 0 : (uint64_t)frames[i],
						 .flags = frames[i] < 0 ? 0 : FILE_FRAME };
		part_frames_add(p, frames[i] == -2 ? NULL : &rec, strchr(need, 'a' + (int)i) != NULL);
	}
	return part_ranges(p, r, nr);
}

/* Needing names reads exactly one range, [off, off + len). */
static void expect_one(part_frames *p, const long *frames, size_t n, const char *need,
					   uint64_t off, uint64_t len, size_t nmembers)
{
	byte_range *r;
	size_t nr;
	assert_true(ranges_of(p, frames, n, need, &r, &nr));
	assert_int_equal(nr, 1);
	assert_int_equal(r[0].off, off);
	assert_int_equal(r[0].len, len);
	assert_int_equal(r[0].members, nmembers);
	free(r);
}

static void test_ranges(void **state)
{
	(void)state;
	/* frames: [0,100) a b, [100,400) c, [400,500) d e, [500,10000) f */
	static const long frames[] = { 0, 0, 100, 400, 400, 500 };
	part_frames p = { 0 };
	byte_range *r;
	size_t n;

	/* b and e: two frames apart */
	assert_true(ranges_of(&p, frames, 6, "be", &r, &n));
	assert_int_equal(n, 2);
	assert_int_equal(r[0].off, 0);
	assert_int_equal(r[0].len, 100);
	assert_int_equal(r[1].off, 400);
	assert_int_equal(r[1].len, 100);
	assert_int_equal(r[0].members, 1);
	assert_int_equal(r[1].members, 1);
	free(r);

	/* a, c, d: touching frames merge into one read (the same state reused, as per list) */
	expect_one(&p, frames, 6, "dac", 0, 500, 3);

	/* f: its frame runs to the end, more than 90% of the object: read whole */
	assert_false(ranges_of(&p, frames, 6, "f", &r, &n));
	assert_null(r);

	/* nothing needed: no ranges (the caller skips the partition) */
	assert_false(ranges_of(&p, frames, 6, "", &r, &n));
	assert_int_equal(p.needed, 0);

	/* a needed member without a frame (a WAL-G backup, a remote one): whole */
	static const long some[] = { 0, 0, -1, 400, 400, 500 };
	assert_false(ranges_of(&p, some, 6, "c", &r, &n));
	assert_int_equal(p.needed, 1);
	/* ...but one without a frame that is not needed changes nothing */
	expect_one(&p, some, 6, "d", 400, 100, 1);
	/* a needed member not in Files: whole */
	static const long absent[] = { 0, 0, -2, 400, 400, 500 };
	assert_false(ranges_of(&p, absent, 6, "c", &r, &n));

	/* an offset at or past the object's end is not a frame: whole */
	static const long bad[] = { 0, 0, 100, 20000, 400, 500 };
	assert_false(ranges_of(&p, bad, 6, "d", &r, &n));
	part_frames_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
