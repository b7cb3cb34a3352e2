/* Bounded FIFO of pointers between threads: the backpressure between pipeline stages. */
#include "internal/pipe/pipe.h"

#include <pthread.h>
#include <stdlib.h>

struct chan {
	pthread_mutex_t mu;
	pthread_cond_t not_full;
	pthread_cond_t not_empty;
	void **items; /* ring of cap slots; len queued from head */
	size_t cap;
	size_t head;
	size_t len;
	bool closed;
	bool cancelled;
};

chan *chan_new(size_t capacity)
{
	chan *c = xcalloc(1, sizeof(*c));
	/* No rendezvous channels: a zero capacity would make every send block forever. */
	c->cap = capacity ? capacity : 1;
	c->items = xcalloc(c->cap, sizeof(*c->items));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->not_full, NULL);
	pthread_cond_init(&c->not_empty, NULL);
	return c;
}

bool chan_send(chan *c, void *item)
{
	bool ok = false;

	pthread_mutex_lock(&c->mu);
	while (c->len == c->cap && !c->closed && !c->cancelled)
		pthread_cond_wait(&c->not_full, &c->mu);
	if (!c->closed && !c->cancelled) {
		c->items[(c->head + c->len) % c->cap] = item;
		c->len++;
		pthread_cond_signal(&c->not_empty);
		ok = true;
	}
	pthread_mutex_unlock(&c->mu);
	return ok;
}

bool chan_recv(chan *c, void **item)
{
	bool ok = false;

	pthread_mutex_lock(&c->mu);
	while (c->len == 0 && !c->closed && !c->cancelled)
		pthread_cond_wait(&c->not_empty, &c->mu);
	/* Cancelled means stop now: what is still queued is abandoned to the owner's cleanup. */
	if (!c->cancelled && c->len > 0) {
		*item = c->items[c->head];
		c->head = (c->head + 1) % c->cap;
		c->len--;
		pthread_cond_signal(&c->not_full);
		ok = true;
	}
	pthread_mutex_unlock(&c->mu);
	return ok;
}

void chan_close(chan *c)
{
	pthread_mutex_lock(&c->mu);
	c->closed = true;
	pthread_cond_broadcast(&c->not_full);
	pthread_cond_broadcast(&c->not_empty);
	pthread_mutex_unlock(&c->mu);
}

void chan_cancel(chan *c)
{
	pthread_mutex_lock(&c->mu);
	c->cancelled = true;
	pthread_cond_broadcast(&c->not_full);
	pthread_cond_broadcast(&c->not_empty);
	pthread_mutex_unlock(&c->mu);
}

void chan_free(chan *c)
{
	if (c == NULL)
		return;
	pthread_cond_destroy(&c->not_empty);
	pthread_cond_destroy(&c->not_full);
	pthread_mutex_destroy(&c->mu);
	free(c->items);
	free(c);
}

void chan_drain(chan *c, void (*fn)(void *item))
{
	pthread_mutex_lock(&c->mu);
	while (c->len > 0) {
		void *item = c->items[c->head];
		c->head = (c->head + 1) % c->cap;
		c->len--;
		fn(item);
	}
	pthread_cond_broadcast(&c->not_full);
	pthread_mutex_unlock(&c->mu);
}
