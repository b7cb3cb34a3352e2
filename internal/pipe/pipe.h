/*
 * pipe: the pieces of a bounded streaming pipeline. Bounded channels of pointers between
 * threads, a fixed pool of large buffers and a byte budget of buffers of any size (the only
 * sources of big buffers, so memory is bounded), and a worker group where the first error
 * cancels the rest.
 */
#ifndef WALC_INTERNAL_PIPE_PIPE_H
#define WALC_INTERNAL_PIPE_PIPE_H

#include "internal/core/core.h"

#include <stdatomic.h>

/* Stack size given to every thread walc starts (musl's default is only 128 KiB). */
#define PIPE_THREAD_STACK (1u << 20)

/* Channel: FIFO of void* with a fixed capacity; many senders and receivers. */
typedef struct chan chan;
chan *chan_new(size_t capacity);
/* Blocks while full. false when the channel is closed or cancelled (item not taken). */
bool chan_send(chan *c, void *item);
/* Blocks while empty. false when closed and drained, or cancelled. */
bool chan_recv(chan *c, void **item);
/* No more sends; receivers drain what is queued, then get false. */
void chan_close(chan *c);
/* Wake every waiter; every later send and recv fails at once. */
void chan_cancel(chan *c);
/* Hands every item still queued to fn, even after a cancel (which drops them otherwise). */
void chan_drain(chan *c, void (*fn)(void *item));
void chan_free(chan *c);

/* Buffer pool: count buffers of size bytes each, allocated up front. */
typedef struct pool pool;
pool *pool_new(size_t count, size_t size);
/* Blocks until a buffer is free; NULL when cancelled. */
void *pool_get(pool *p);
/* A free buffer, or NULL at once when there is none. */
void *pool_try_get(pool *p);
void pool_put(pool *p, void *buf);
size_t pool_buf_size(const pool *p);
void pool_cancel(pool *p);
void pool_free(pool *p);

/*
 * Memory budget: buffers of any size whose total, in use or idle for reuse, stays within bytes
 * (a single buffer over it is given when nothing else is allocated). For users whose pieces
 * grow, where a pool of equal buffers would be sized by the largest.
 */
typedef struct budget budget;
budget *budget_new(size_t bytes);
/* Blocks until size bytes fit; NULL once *stop is set (stop may be NULL: never). */
void *budget_get_unless(budget *b, size_t size, const atomic_bool *stop);
void budget_put(budget *b, void *buf);
/* Makes every waiter look at its stop flag. */
void budget_wake(budget *b);
void budget_free(budget *b);

/* Worker group: run functions on threads; the first error wins and cancels the others. */
typedef struct group group;
typedef err_code (*group_fn)(void *arg);
group *group_new(void);
/* Run on cancel (first error or group_fail), e.g. chan_cancel on the group's channels. */
void group_on_cancel(group *g, void (*fn)(void *arg), void *arg);
/* Start fn(arg) on a new thread. */
err_code group_go(group *g, group_fn fn, void *arg);
/* Record an error from outside a worker and cancel. */
void group_fail(group *g, err_code code, const char *msg);
bool group_cancelled(group *g);
/*
 * Wait for every thread. Returns the first error, with its message copied into the calling
 * thread's error record; E_OK when all succeeded.
 */
err_code group_wait(group *g);
void group_free(group *g);

/*
 * Lowers the CPU priority of the calling thread by steps nice values (at most to 19), and so of
 * every thread it starts from then on: Linux keeps a nice value per thread and a new thread
 * takes its creator's. For a stage that must leave the cores to another process it depends on
 * (the server compressing a remote backup's stream). Best effort: on failure nothing changes.
 * false when the priority was not lowered.
 */
bool cpu_yield(int steps);

/*
 * Rate limiter shared by threads: a token bucket of bytes per second with a burst of one
 * second's worth plus 64 KiB, as WAL-G's. rate_new(0) never waits.
 */
typedef struct rate rate;
rate *rate_new(uint64_t bytes_per_sec);
/* Sleeps until n bytes may pass. */
void rate_take(rate *r, size_t n);
void rate_free(rate *r);
/* A sink that paces the bytes passing through (borrows r, owns next). */
sink *rate_sink_new(rate *r, sink *next);

#endif
