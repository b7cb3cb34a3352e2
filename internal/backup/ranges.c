/*
 * Ranged reads of a partition: which stored bytes hold the members a restore needs. walc's
 * backup-push starts a new compression frame before a member when its rule says so
 * (pack.c) and records each file's frame offset ("FrameOffset"); a frame runs to the next
 * recorded offset, or to the end of the object. The needed members' frames, merged where
 * they touch, are all a restore has to read.
 */
#include "internal/backup/fetch_impl.h"

#include <stdlib.h>

/* Reading more than this share of a partition in pieces gains nothing over reading it whole. */
#define WHOLE_ABOVE 0.9

static int by_offset(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int by_range(const void *a, const void *b)
{
	return by_offset(&((const byte_range *)a)->off, &((const byte_range *)b)->off);
}

/* The frame offset recorded for name, or false. */
static bool frame_of(const json_t *files, const char *name, uint64_t size, uint64_t *off)
{
	const json_t *v = json_object_get(json_object_get(files, name), "FrameOffset");
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		(uint64_t)json_integer_value(v) >= size)
		return false;
	*off = (uint64_t)json_integer_value(v);
	return true;
}

/* The end of the frame starting at off: the next start, or the object's end. */
static uint64_t frame_end(const uint64_t *starts, size_t n, uint64_t off, uint64_t size)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (starts[mid] <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n ? starts[lo] : size;
}

bool part_ranges(const json_t *members, const json_t *files, const json_t *need, uint64_t size,
				 byte_range **out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	if (need == NULL || !json_is_array(members) || size == 0)
		return false;
	size_t nm = json_array_size(members), ns = 0, nr = 0;
	uint64_t *starts = xcalloc(nm + 1, sizeof(*starts));
	byte_range *r = xcalloc(nm + 1, sizeof(*r));
	bool ok = true;
	starts[ns++] = 0;
	size_t i;
	const json_t *m;
	json_array_foreach(members, i, m)
	{
		const char *name = json_string_value(m);
		uint64_t off;
		bool known = name != NULL && frame_of(files, name, size, &off);
		if (known)
			starts[ns++] = off;
		if (name == NULL || json_object_get(need, name) == NULL)
			continue;
		if (!known) {
			ok = false; /* a needed member with no frame: the whole partition */
			break;
		}
		r[nr++].off = off;
	}
	if (ok && nr > 0) {
		qsort(starts, ns, sizeof(*starts), by_offset);
		qsort(r, nr, sizeof(*r), by_range);
		/* r holds one entry per needed member, by offset: each joins the range it falls in */
		size_t merged = 0;
		uint64_t total = 0;
		for (size_t k = 0; k < nr; k++) {
			uint64_t end = frame_end(starts, ns, r[k].off, size);
			if (merged > 0 && r[merged - 1].off + r[merged - 1].len >= r[k].off) {
				byte_range *last = &r[merged - 1];
				if (end > last->off + last->len)
					last->len = end - last->off;
				last->members++;
			} else {
				r[merged++] = (byte_range){ r[k].off, end - r[k].off, 1 };
			}
		}
		for (size_t k = 0; k < merged; k++)
			total += r[k].len;
		nr = merged;
		ok = (double)total <= WHOLE_ABOVE * (double)size;
	}
	free(starts);
	if (!ok || nr == 0) {
		free(r);
		return false;
	}
	*out = r;
	*nout = nr;
	return true;
}
