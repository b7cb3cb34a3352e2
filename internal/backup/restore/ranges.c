/*
 * Ranged reads of a partition: which stored bytes hold the members a restore needs. walc's
 * backup-push starts a new compression frame before a member when its rule says so
 * (pack.c) and records each file's frame offset ("FrameOffset"); a frame runs to the next
 * recorded offset, or to the end of the object. The needed members' frames, merged where
 * they touch, are all a restore has to read.
 */
#include "internal/backup/restore/fetch_impl.h"

#include <stdlib.h>
#include <string.h>

/* Reading more than this share of a partition in pieces gains nothing over reading it whole. */
#define WHOLE_ABOVE 0.9

static int by_offset(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
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

static void push(uint64_t **a, size_t *n, size_t *cap, uint64_t v)
{
	if (*n == *cap) {
		*cap = *cap < 64 ? 64 : *cap * 2;
		*a = xrealloc(*a, *cap * sizeof(**a));
	}
	(*a)[(*n)++] = v;
}

void part_frames_start(part_frames *p, uint64_t size)
{
	p->size = size;
	p->ns = p->nw = p->needed = 0;
	p->unframed = false;
	push(&p->starts, &p->ns, &p->cap_s, 0);
}

void part_frames_add(part_frames *p, const file_rec *rec, bool needed)
{
	/* an offset past the object is not a frame of it: the member counts as unframed */
	bool known = rec != NULL && (rec->flags & FILE_FRAME) && rec->frame < p->size;
	if (known)
		push(&p->starts, &p->ns, &p->cap_s, rec->frame);
	if (!needed)
		return;
	p->needed++;
	if (known)
		push(&p->want, &p->nw, &p->cap_w, rec->frame);
	else
		p->unframed = true;
}

bool part_ranges(part_frames *p, byte_range **out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	if (p->unframed || p->nw == 0 || p->size == 0)
		return false;
	xqsort(p->starts, p->ns, sizeof(*p->starts), by_offset);
	xqsort(p->want, p->nw, sizeof(*p->want), by_offset);
	/* one entry per needed member, by offset: each joins the range it falls in */
	byte_range *r = xcalloc(p->nw, sizeof(*r));
	size_t merged = 0;
	uint64_t total = 0;
	for (size_t k = 0; k < p->nw; k++) {
		uint64_t off = p->want[k], end = frame_end(p->starts, p->ns, off, p->size);
		if (merged > 0 && r[merged - 1].off + r[merged - 1].len >= off) {
			byte_range *last = &r[merged - 1];
			if (end > last->off + last->len)
				last->len = end - last->off;
			last->members++;
		} else {
			r[merged++] = (byte_range){ off, end - off, 1 };
		}
	}
	for (size_t k = 0; k < merged; k++)
		total += r[k].len;
	if ((double)total > WHOLE_ABOVE * (double)p->size) {
		free(r);
		return false;
	}
	*out = r;
	*nout = merged;
	return true;
}

void part_frames_free(part_frames *p)
{
	free(p->starts);
	free(p->want);
	memset(p, 0, sizeof(*p));
}
