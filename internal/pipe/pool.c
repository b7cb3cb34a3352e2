/* Fixed pool of large buffers: the only big allocations in a pipeline, so memory is bounded. */
#include "internal/pipe/pipe.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

struct pool {
	pthread_mutex_t mu;
	pthread_cond_t returned;
	void **all;  /* every buffer, so pool_free needs none returned from a cancelled channel */
	void **idle; /* stack of nidle buffers ready to hand out */
	size_t count;
	size_t nidle;
	size_t size;
	bool cancelled;
};

pool *pool_new(size_t count, size_t size)
{
	pool *p = xcalloc(1, sizeof(*p));

	assert(count > 0);
	p->count = count;
	p->size = size;
	p->all = xcalloc(count, sizeof(*p->all));
	p->idle = xcalloc(count, sizeof(*p->idle));
	/* Separate allocations (not one slab) so sanitizers catch a write past one buffer. */
	for (size_t i = 0; i < count; i++)
		p->all[i] = p->idle[i] = xmalloc(size);
	p->nidle = count;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->returned, NULL);
	return p;
}

void *pool_try_get(pool *p)
{
	void *buf = NULL;

	pthread_mutex_lock(&p->mu);
	if (p->nidle > 0 && !p->cancelled)
		buf = p->idle[--p->nidle];
	pthread_mutex_unlock(&p->mu);
	return buf;
}

void *pool_get(pool *p)
{
	void *buf = NULL;

	pthread_mutex_lock(&p->mu);
	while (p->nidle == 0 && !p->cancelled)
		pthread_cond_wait(&p->returned, &p->mu);
	if (!p->cancelled)
		buf = p->idle[--p->nidle];
	pthread_mutex_unlock(&p->mu);
	return buf;
}

#ifndef NDEBUG
static bool pool_owns(const pool *p, const void *buf)
{
	for (size_t i = 0; i < p->count; i++)
		if (p->all[i] == buf)
			return true;
	return false;
}

static bool pool_is_idle(const pool *p, const void *buf)
{
	for (size_t i = 0; i < p->nidle; i++)
		if (p->idle[i] == buf)
			return true;
	return false;
}
#endif

void pool_put(pool *p, void *buf)
{
	pthread_mutex_lock(&p->mu);
	assert(pool_owns(p, buf) && !pool_is_idle(p, buf));
	p->idle[p->nidle++] = buf;
	pthread_cond_signal(&p->returned);
	pthread_mutex_unlock(&p->mu);
}

size_t pool_buf_size(const pool *p)
{
	return p->size;
}

void pool_cancel(pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->cancelled = true;
	pthread_cond_broadcast(&p->returned);
	pthread_mutex_unlock(&p->mu);
}

void pool_free(pool *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->count; i++)
		free(p->all[i]);
	pthread_cond_destroy(&p->returned);
	pthread_mutex_destroy(&p->mu);
	free(p->all);
	free(p->idle);
	free(p);
}
