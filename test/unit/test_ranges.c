/*
 * Ranged reads of a partition (part_ranges): the frames holding the needed members, merged
 * where they touch; the whole partition when a needed member has no frame, when there is no
 * need set, or when the frames would cover most of it anyway.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "internal/backup/fetch_impl.h"

/* Files entries with frame offsets (-1: none) and the partition's member list. */
static void make(const char *const *names, const long *frames, size_t n, json_t **files,
				 json_t **members)
{
	*files = json_object();
	*members = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *rec = json_object();
		if (frames[i] >= 0)
			json_object_set_new(rec, "FrameOffset", json_integer(frames[i]));
		json_object_set_new(*files, names[i], rec);
		json_array_append_new(*members, json_string(names[i]));
	}
}

static json_t *need_of(const char *const *names)
{
	json_t *need = json_object();
	for (; *names != NULL; names++)
		json_object_set_new(need, *names, json_true());
	return need;
}

/* Needing names reads exactly one range, [off, off + len). */
static void expect_one(const json_t *members, const json_t *files, const char *const *names,
					   uint64_t off, uint64_t len, size_t nmembers)
{
	json_t *need = need_of(names);
	byte_range *r;
	size_t n;
	assert_true(part_ranges(members, files, need, 10000, &r, &n));
	assert_int_equal(n, 1);
	assert_int_equal(r[0].off, off);
	assert_int_equal(r[0].len, len);
	assert_int_equal(r[0].members, nmembers);
	free(r);
	json_decref(need);
}

static void test_ranges(void **state)
{
	(void)state;
	/* frames: [0,100) a b, [100,400) c, [400,500) d e, [500,10000) f */
	static const char *const names[] = { "/a", "/b", "/c", "/d", "/e", "/f" };
	static const long frames[] = { 0, 0, 100, 400, 400, 500 };
	json_t *files, *members;
	make(names, frames, 6, &files, &members);
	byte_range *r;
	size_t n;

	/* b and e: two frames apart */
	json_t *need = need_of((const char *const[]){ "/b", "/e", NULL });
	assert_true(part_ranges(members, files, need, 10000, &r, &n));
	assert_int_equal(n, 2);
	assert_int_equal(r[0].off, 0);
	assert_int_equal(r[0].len, 100);
	assert_int_equal(r[1].off, 400);
	assert_int_equal(r[1].len, 100);
	assert_int_equal(r[0].members, 1);
	assert_int_equal(r[1].members, 1);
	free(r);
	json_decref(need);

	/* a, c, d: touching frames merge into one read */
	expect_one(members, files, (const char *const[]){ "/d", "/a", "/c", NULL }, 0, 500, 3);

	/* f: its frame runs to the end, more than 90% of the object: read whole */
	need = need_of((const char *const[]){ "/f", NULL });
	assert_false(part_ranges(members, files, need, 10000, &r, &n));
	assert_null(r);
	json_decref(need);

	/* no need set: a whole restore */
	assert_false(part_ranges(members, files, NULL, 10000, &r, &n));
	json_decref(files);
	json_decref(members);

	/* a needed member without a frame (a WAL-G backup, a remote one): whole */
	static const long some[] = { 0, 0, -1, 400, 400, 500 };
	make(names, some, 6, &files, &members);
	need = need_of((const char *const[]){ "/c", NULL });
	assert_false(part_ranges(members, files, need, 10000, &r, &n));
	json_decref(need);
	/* ...but one without a frame that is not needed changes nothing */
	expect_one(members, files, (const char *const[]){ "/d", NULL }, 400, 100, 1);
	json_decref(files);
	json_decref(members);

	/* an offset at or past the object's end is not a frame: whole */
	static const long bad[] = { 0, 0, 100, 20000, 400, 500 };
	make(names, bad, 6, &files, &members);
	need = need_of((const char *const[]){ "/d", NULL });
	assert_false(part_ranges(members, files, need, 10000, &r, &n));
	json_decref(need);
	json_decref(files);
	json_decref(members);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
