/*
 * Memory budget: buffers of any size under one byte limit, for users whose pieces differ in
 * size (an object store's parts, small first and larger later). A buffer is allocated when
 * first needed and kept for reuse once returned, so the bytes allocated, in use or idle, never
 * exceed the limit: a request that does not fit waits, after idle buffers too small for it
 * have been freed to make room.
 */
#include "internal/pipe/pipe.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct slot {
	void *buf;
	size_t cap;
	bool busy;
} slot;

struct budget {
	pthread_mutex_t mu;
	pthread_cond_t returned;
	slot *slots;
	size_t nslots, cap_slots;
	size_t limit;
	size_t allocated; /* capacity of every buffer, busy or idle */
};

budget *budget_new(size_t bytes)
{
	budget *b = xcalloc(1, sizeof(*b));
	b->limit = bytes;
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->returned, NULL);
	return b;
}

/* The smallest idle buffer that holds size bytes, or NULL. */
static slot *best_idle(budget *b, size_t size)
{
	slot *best = NULL;
	for (size_t i = 0; i < b->nslots; i++) {
		slot *s = &b->slots[i];
		if (!s->busy && s->cap >= size && (best == NULL || s->cap < best->cap))
			best = s;
	}
	return best;
}

/* Frees one idle buffer (all are too small for the waiting request); false when none is idle. */
static bool drop_idle(budget *b)
{
	for (size_t i = 0; i < b->nslots; i++) {
		if (!b->slots[i].busy) {
			free(b->slots[i].buf);
			b->allocated -= b->slots[i].cap;
			b->slots[i] = b->slots[--b->nslots];
			return true;
		}
	}
	return false;
}

static slot *add_slot(budget *b, size_t size)
{
	if (b->nslots == b->cap_slots) {
		b->cap_slots = b->cap_slots ? b->cap_slots * 2 : 8;
		b->slots = xrealloc(b->slots, b->cap_slots * sizeof(*b->slots));
	}
	slot *s = &b->slots[b->nslots++];
	s->buf = xmalloc(size);
	s->cap = size;
	b->allocated += size;
	return s;
}

void *budget_get_unless(budget *b, size_t size, const atomic_bool *stop)
{
	void *buf = NULL;
	pthread_mutex_lock(&b->mu);
	while (!(stop != NULL && atomic_load(stop))) {
		slot *s = best_idle(b, size);
		/* Nothing allocated: one buffer over the limit is let through rather than never. */
		if (s == NULL && (b->allocated + size <= b->limit || b->allocated == 0))
			s = add_slot(b, size);
		if (s != NULL) {
			s->busy = true;
			buf = s->buf;
			break;
		}
		if (!drop_idle(b))
			pthread_cond_wait(&b->returned, &b->mu);
	}
	pthread_mutex_unlock(&b->mu);
	return buf;
}

void budget_put(budget *b, void *buf)
{
	pthread_mutex_lock(&b->mu);
	size_t i = 0;
	while (i < b->nslots && b->slots[i].buf != buf)
		i++;
	assert(i < b->nslots && b->slots[i].busy);
	if (i < b->nslots)
		b->slots[i].busy = false;
	/* Waiters want different sizes: each must look again. */
	pthread_cond_broadcast(&b->returned);
	pthread_mutex_unlock(&b->mu);
}

void budget_wake(budget *b)
{
	pthread_mutex_lock(&b->mu);
	pthread_cond_broadcast(&b->returned);
	pthread_mutex_unlock(&b->mu);
}

void budget_free(budget *b)
{
	if (b == NULL)
		return;
	for (size_t i = 0; i < b->nslots; i++)
		free(b->slots[i].buf);
	free(b->slots);
	pthread_cond_destroy(&b->returned);
	pthread_mutex_destroy(&b->mu);
	free(b);
}
