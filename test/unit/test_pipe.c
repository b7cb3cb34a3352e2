/* Unit tests for internal/pipe: channel, buffer pool and worker group, plus a many-thread run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "internal/pipe/pipe.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* cmocka's asserts longjmp, so helper threads only record results; the test thread checks. */

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void *item(uintptr_t v)
{
	return (void *)v;
}

static void send_ok(chan *c, uintptr_t v)
{
	assert_true(chan_send(c, item(v)));
}

static void recv_expect(chan *c, uintptr_t v)
{
	void *got = item(12345);
	assert_true(chan_recv(c, &got));
	assert_ptr_equal(got, item(v));
}

/* One blocking call made on a helper thread, so the test thread can watch it block. */
typedef struct op {
	pthread_t tid;
	chan *c;
	pool *p;
	budget *b;
	size_t size;	   /* budget_get_unless: bytes asked */
	atomic_bool *stop; /* and its stop flag */
	void *item;
	atomic_bool started;
	atomic_bool done;
	bool ok;   /* chan_send / chan_recv result, read after join */
	void *got; /* chan_recv item or pool_get buffer, read after join */
} op;

static void *op_send(void *arg)
{
	op *o = arg;
	atomic_store(&o->started, true);
	o->ok = chan_send(o->c, o->item);
	atomic_store(&o->done, true);
	return NULL;
}

static void *op_recv(void *arg)
{
	op *o = arg;
	atomic_store(&o->started, true);
	o->ok = chan_recv(o->c, &o->got);
	atomic_store(&o->done, true);
	return NULL;
}

static void *op_get(void *arg)
{
	op *o = arg;
	atomic_store(&o->started, true);
	o->got = pool_get(o->p);
	atomic_store(&o->done, true);
	return NULL;
}

/* Start the call and give it time to reach its wait: it must still be blocked afterwards. */
static void *op_budget_get(void *arg)
{
	op *o = arg;
	atomic_store(&o->started, true);
	o->got = budget_get_unless(o->b, o->size, o->stop);
	atomic_store(&o->done, true);
	return NULL;
}

static void op_start_blocked(op *o, void *(*fn)(void *))
{
	assert_int_equal(pthread_create(&o->tid, NULL, fn, o), 0);
	while (!atomic_load(&o->started))
		sleep_ms(1);
	sleep_ms(50);
	assert_false(atomic_load(&o->done));
}

static void op_join(op *o)
{
	assert_int_equal(pthread_join(o->tid, NULL), 0);
	assert_true(atomic_load(&o->done));
}

/* ------------------------------------------------------------------------------------------ */
/* chan                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void test_chan_fifo(void **state)
{
	(void)state;
	chan *c = chan_new(4);

	/* Several rounds and an uneven interleave, so the ring wraps at different offsets. */
	for (uintptr_t round = 0; round < 3; round++) {
		for (uintptr_t i = 1; i <= 4; i++)
			send_ok(c, round * 10 + i);
		for (uintptr_t i = 1; i <= 4; i++)
			recv_expect(c, round * 10 + i);
	}
	send_ok(c, 1);
	send_ok(c, 2);
	recv_expect(c, 1);
	send_ok(c, 3);
	send_ok(c, 4);
	send_ok(c, 0); /* NULL is an ordinary item */
	recv_expect(c, 2);
	recv_expect(c, 3);
	recv_expect(c, 4);
	recv_expect(c, 0);
	chan_free(c);

	/* Capacity 0 behaves as 1 rather than deadlocking every sender. */
	c = chan_new(0);
	send_ok(c, 7);
	recv_expect(c, 7);
	chan_free(c);
	chan_free(NULL);
}

static void test_chan_send_blocks_while_full(void **state)
{
	(void)state;
	chan *c = chan_new(2);
	op o = {.c = c, .item = item(3)};

	send_ok(c, 1);
	send_ok(c, 2);
	op_start_blocked(&o, op_send);
	recv_expect(c, 1); /* makes room: the blocked send completes */
	op_join(&o);
	assert_true(o.ok);
	recv_expect(c, 2);
	recv_expect(c, 3);
	chan_free(c);
}

static void test_chan_recv_blocks_while_empty(void **state)
{
	(void)state;
	chan *c = chan_new(2);
	op o = {.c = c};

	op_start_blocked(&o, op_recv);
	send_ok(c, 42);
	op_join(&o);
	assert_true(o.ok);
	assert_ptr_equal(o.got, item(42));
	chan_free(c);
}

static void test_chan_close_drains(void **state)
{
	(void)state;
	chan *c = chan_new(4);
	void *got;

	send_ok(c, 1);
	send_ok(c, 2);
	send_ok(c, 3);
	chan_close(c);
	assert_false(chan_send(c, item(4)));
	recv_expect(c, 1);
	recv_expect(c, 2);
	recv_expect(c, 3);
	assert_false(chan_recv(c, &got));
	assert_false(chan_recv(c, &got));
	chan_free(c);

	/* Close wakes a blocked receiver with false... */
	c = chan_new(1);
	op r = {.c = c};
	op_start_blocked(&r, op_recv);
	chan_close(c);
	op_join(&r);
	assert_false(r.ok);
	chan_free(c);

	/* ...and a blocked sender, whose item is not taken; what was queued still drains. */
	c = chan_new(1);
	send_ok(c, 1);
	op s = {.c = c, .item = item(2)};
	op_start_blocked(&s, op_send);
	chan_close(c);
	op_join(&s);
	assert_false(s.ok);
	recv_expect(c, 1);
	assert_false(chan_recv(c, &got));
	chan_free(c);
}

static void test_chan_cancel_unblocks(void **state)
{
	(void)state;
	chan *full = chan_new(1);
	chan *empty = chan_new(1);
	op s = {.c = full, .item = item(2)};
	op r = {.c = empty};
	void *got;

	send_ok(full, 1);
	op_start_blocked(&s, op_send);
	op_start_blocked(&r, op_recv);
	chan_cancel(full);
	chan_cancel(empty);
	op_join(&s);
	op_join(&r);
	assert_false(s.ok);
	assert_false(r.ok);
	/* Unlike close, cancel fails at once even with an item still queued. */
	assert_false(chan_recv(full, &got));
	assert_false(chan_send(full, item(3)));
	assert_false(chan_send(empty, item(3)));
	chan_free(full);
	chan_free(empty);
}

/* ------------------------------------------------------------------------------------------ */
/* pool                                                                                       */
/* ------------------------------------------------------------------------------------------ */

static void test_pool_blocks_until_put(void **state)
{
	(void)state;
	pool *p = pool_new(3, 4096);
	void *b[3];

	assert_int_equal(pool_buf_size(p), 4096);
	for (int i = 0; i < 3; i++) {
		b[i] = pool_get(p);
		assert_non_null(b[i]);
		memset(b[i], i, 4096); /* the whole size is usable (ASan checks) */
		for (int j = 0; j < i; j++)
			assert_ptr_not_equal(b[i], b[j]);
	}
	op o = {.p = p};
	op_start_blocked(&o, op_get);
	pool_put(p, b[1]);
	op_join(&o);
	assert_ptr_equal(o.got, b[1]);
	pool_put(p, b[0]);
	pool_put(p, b[1]);
	pool_put(p, b[2]);
	/* All returned: count of them can be taken again without blocking. */
	for (int i = 0; i < 3; i++)
		assert_non_null(b[i] = pool_get(p));
	for (int i = 0; i < 3; i++)
		pool_put(p, b[i]);
	pool_free(p);
	pool_free(NULL);
}

static void test_pool_cancel(void **state)
{
	(void)state;
	pool *p = pool_new(1, 64);
	void *b = pool_get(p);
	op o = {.p = p};

	assert_non_null(b);
	op_start_blocked(&o, op_get);
	pool_cancel(p);
	op_join(&o);
	assert_null(o.got);
	pool_put(p, b); /* returning still works, so owners can clean up after a cancel */
	assert_null(pool_get(p));
	pool_free(p);

	/* A buffer stranded in a cancelled channel is still freed by pool_free (LSan checks). */
	p = pool_new(2, 64);
	assert_non_null(pool_get(p));
	pool_cancel(p);
	pool_free(p);
}

/* ------------------------------------------------------------------------------------------ */
/* budget                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Buffers of different sizes up to the limit, then a wait until one comes back. */
static void test_budget_waits_for_room(void **state)
{
	(void)state;
	budget *b = budget_new(10000);
	void *a = budget_get_unless(b, 4000, NULL);
	void *c = budget_get_unless(b, 6000, NULL);
	assert_non_null(a);
	assert_non_null(c);
	memset(a, 1, 4000); /* the whole size is usable (ASan checks) */
	memset(c, 2, 6000);

	op o = {.b = b, .size = 3000};
	op_start_blocked(&o, op_budget_get);
	budget_put(b, a);
	op_join(&o);
	assert_ptr_equal(o.got, a); /* the smallest idle buffer that holds it, reused */
	budget_put(b, o.got);
	budget_put(b, c);
	budget_free(b);
	budget_free(NULL);
}

/* Idle buffers too small for a request are freed to make room for it. */
static void test_budget_frees_idle_for_larger(void **state)
{
	(void)state;
	budget *b = budget_new(10000);
	void *small[2];
	for (int i = 0; i < 2; i++)
		assert_non_null(small[i] = budget_get_unless(b, 4000, NULL));
	for (int i = 0; i < 2; i++)
		budget_put(b, small[i]);
	/* 8000 allocated and idle: 9000 fits only once both are freed. */
	void *big = budget_get_unless(b, 9000, NULL);
	assert_non_null(big);
	memset(big, 3, 9000);

	/* With big busy, 2000 more would pass the limit: it waits... */
	op o = {.b = b, .size = 2000};
	op_start_blocked(&o, op_budget_get);
	budget_put(b, big);
	op_join(&o);
	assert_ptr_equal(o.got, big); /* ...and then takes the idle one rather than allocating */
	budget_put(b, o.got);
	budget_free(b);
}

/* A request over the whole limit is given when nothing else is allocated; stop wakes waiters. */
static void test_budget_oversize_and_stop(void **state)
{
	(void)state;
	budget *b = budget_new(1000);
	void *huge = budget_get_unless(b, 5000, NULL);
	assert_non_null(huge);
	memset(huge, 4, 5000);

	atomic_bool stop;
	atomic_init(&stop, false);
	op o = {.b = b, .size = 10, .stop = &stop};
	op_start_blocked(&o, op_budget_get);
	atomic_store(&stop, true);
	budget_wake(b);
	op_join(&o);
	assert_null(o.got);
	assert_null(budget_get_unless(b, 10, &stop)); /* already stopped: NULL at once */
	budget_put(b, huge);
	budget_free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* group                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static void cancel_chan_cb(void *arg)
{
	chan_cancel(arg);
}

static void count_cb(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
}

static err_code count_worker(void *arg)
{
	atomic_fetch_add((atomic_int *)arg, 1);
	return E_OK;
}

typedef struct fail_arg {
	err_code code;
	const char *msg; /* NULL: return the code without setting a message */
	chan *after; /* non-NULL: wait until this channel is cancelled, then fail */
} fail_arg;

static err_code fail_worker(void *arg)
{
	fail_arg *f = arg;
	void *got;

	if (f->after != NULL)
		while (chan_recv(f->after, &got))
			;
	if (f->msg == NULL)
		return f->code;
	return err_set(f->code, "%s (%d)", f->msg, 7);
}

/* Blocks on a channel that only the group's on_cancel callback cancels, then stops. */
typedef struct waiter_arg {
	group *g;
	chan *c;
	atomic_int *saw_cancel;
} waiter_arg;

static err_code waiter_worker(void *arg)
{
	waiter_arg *w = arg;
	void *got;

	while (chan_recv(w->c, &got))
		;
	if (!group_cancelled(w->g))
		return err_set(E_FAIL, "channel failed without the group being cancelled");
	atomic_fetch_add(w->saw_cancel, 1);
	return err_set(E_CANCELLED, "waiter cancelled");
}

static void test_group_all_ok(void **state)
{
	(void)state;
	group *g = group_new();
	atomic_int ran = 0, cancels = 0;

	group_on_cancel(g, count_cb, &cancels);
	for (int i = 0; i < 8; i++)
		assert_int_equal(group_go(g, count_worker, &ran), E_OK);
	assert_int_equal(group_wait(g), E_OK);
	assert_int_equal(atomic_load(&ran), 8);
	assert_int_equal(atomic_load(&cancels), 0);
	assert_false(group_cancelled(g));
	assert_int_equal(group_wait(g), E_OK); /* nothing left to join */
	group_free(g);
	group_free(NULL);
}

static void test_group_one_fails_others_cancelled(void **state)
{
	(void)state;
	group *g = group_new();
	chan *c = chan_new(1);
	atomic_int saw_cancel = 0, cancels = 0;
	waiter_arg w = {.g = g, .c = c, .saw_cancel = &saw_cancel};
	fail_arg f = {.code = E_IO, .msg = "disk on fire"};

	group_on_cancel(g, cancel_chan_cb, c);
	group_on_cancel(g, count_cb, &cancels);
	for (int i = 0; i < 4; i++)
		assert_int_equal(group_go(g, waiter_worker, &w), E_OK);
	assert_int_equal(group_go(g, fail_worker, &f), E_OK);
	err_set(E_NOTFOUND, "stale error in the waiting thread");
	assert_int_equal(group_wait(g), E_IO);
	assert_int_equal(err_last(), E_IO);
	assert_string_equal(err_msg(), "disk on fire (7)");
	assert_int_equal(atomic_load(&saw_cancel), 4);
	assert_int_equal(atomic_load(&cancels), 1);
	assert_true(group_cancelled(g));
	group_free(g);
	chan_free(c);
}

static void test_group_first_error_wins(void **state)
{
	(void)state;
	group *g = group_new();
	chan *c = chan_new(1);
	atomic_int saw_cancel = 0, cancels = 0;
	waiter_arg w = {.g = g, .c = c, .saw_cancel = &saw_cancel};
	fail_arg first = {.code = E_CORRUPT, .msg = "first"};
	fail_arg later = {.code = E_IO, .msg = "second", .after = c};

	group_on_cancel(g, cancel_chan_cb, c);
	group_on_cancel(g, count_cb, &cancels);
	/* The later failures can only happen after the first one cancelled the channel. */
	assert_int_equal(group_go(g, fail_worker, &later), E_OK);
	assert_int_equal(group_go(g, waiter_worker, &w), E_OK);
	assert_int_equal(group_go(g, fail_worker, &first), E_OK);
	assert_int_equal(group_wait(g), E_CORRUPT);
	assert_string_equal(err_msg(), "first (7)");
	assert_int_equal(atomic_load(&saw_cancel), 1);

	/* An error reported after the fact changes nothing and cancels nothing again. */
	group_fail(g, E_CONFIG, "too late");
	err_clear();
	assert_int_equal(group_wait(g), E_CORRUPT);
	assert_string_equal(err_msg(), "first (7)");
	assert_int_equal(atomic_load(&cancels), 1);
	group_free(g);
	chan_free(c);
}

static void test_group_fail_external(void **state)
{
	(void)state;
	group *g = group_new();
	chan *c = chan_new(1);
	atomic_int saw_cancel = 0, cancels = 0, late = 0;
	waiter_arg w = {.g = g, .c = c, .saw_cancel = &saw_cancel};

	group_on_cancel(g, cancel_chan_cb, c);
	group_on_cancel(g, count_cb, &cancels);
	for (int i = 0; i < 3; i++)
		assert_int_equal(group_go(g, waiter_worker, &w), E_OK);
	assert_false(group_cancelled(g));
	group_fail(g, E_CONFIG, "stop requested");
	assert_true(group_cancelled(g));
	assert_int_equal(atomic_load(&cancels), 1);
	/* Registered after the cancel: runs at once, exactly once. */
	group_on_cancel(g, count_cb, &late);
	assert_int_equal(atomic_load(&late), 1);
	assert_int_equal(group_wait(g), E_CONFIG);
	assert_string_equal(err_msg(), "stop requested");
	assert_int_equal(atomic_load(&saw_cancel), 3);
	assert_int_equal(atomic_load(&cancels), 1);
	assert_int_equal(atomic_load(&late), 1);
	group_free(g);
	chan_free(c);
}

/* cpu_yield on a thread of its own, so that the test program keeps its priority. */
typedef struct yield_run {
	int before, after, started; /* nice values: the thread's, then a thread it started */
	bool lowered, capped;
} yield_run;

static err_code read_nice(void *arg)
{
	*(int *)arg = getpriority(PRIO_PROCESS, (id_t)gettid());
	return E_OK;
}

static void *yield_thread(void *arg)
{
	yield_run *y = arg;
	y->before = getpriority(PRIO_PROCESS, (id_t)gettid());
	y->lowered = cpu_yield(3);
	y->after = getpriority(PRIO_PROCESS, (id_t)gettid());
	group *g = group_new();
	if (group_go(g, read_nice, &y->started) == E_OK)
		group_wait(g);
	group_free(g);
	y->capped = cpu_yield(40) || getpriority(PRIO_PROCESS, (id_t)gettid()) == 19;
	return NULL;
}

static void test_cpu_yield(void **state)
{
	(void)state;
	int main_before = getpriority(PRIO_PROCESS, (id_t)gettid());
	yield_run y = { 0 };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, yield_thread, &y), 0);
	pthread_join(t, NULL);
	/* run under nice, the test may start near the bottom: 19 is as low as it goes */
	assert_int_equal(y.lowered, y.before < 19);
	assert_int_equal(y.after, y.before + 3 > 19 ? 19 : y.before + 3);
	assert_int_equal(y.started, y.after); /* threads started afterwards take it */
	assert_true(y.capped);
	/* The other threads, this one included, keep theirs. */
	assert_int_equal(getpriority(PRIO_PROCESS, (id_t)gettid()), main_before);
}

static void test_group_code_without_message(void **state)
{
	(void)state;
	group *g = group_new();
	fail_arg f = {.code = E_NOTFOUND};

	assert_int_equal(group_go(g, fail_worker, &f), E_OK);
	assert_int_equal(group_wait(g), E_NOTFOUND);
	assert_string_equal(err_msg(), err_name(E_NOTFOUND));
	group_free(g);
}

/* Checks the stack walc asked for, uses a good part of it, and starts a nested worker. */
typedef struct stack_arg {
	group *g;
	atomic_int ran;
} stack_arg;

static err_code stack_child(void *arg)
{
	stack_arg *s = arg;
	volatile unsigned char big[256 * 1024]; /* more than musl's 128 KiB default stack */

	memset((void *)(uintptr_t)big, 1, sizeof(big));
	atomic_fetch_add(&s->ran, big[sizeof(big) - 1]);
	return E_OK;
}

static err_code stack_parent(void *arg)
{
	stack_arg *s = arg;
	pthread_attr_t attr;
	size_t size = 0;

	if (pthread_getattr_np(pthread_self(), &attr) != 0)
		return err_set(E_FAIL, "pthread_getattr_np failed");
	pthread_attr_getstacksize(&attr, &size);
	pthread_attr_destroy(&attr);
	if (size < PIPE_THREAD_STACK)
		return err_set(E_FAIL, "stack is %zu bytes, want %u", size, PIPE_THREAD_STACK);
	atomic_fetch_add(&s->ran, 1);
	/* group_wait must also join workers started by workers. */
	sleep_ms(20);
	return group_go(s->g, stack_child, s);
}

static void test_group_stack_and_nested_go(void **state)
{
	(void)state;
	stack_arg s = {.g = group_new()};

	assert_int_equal(group_go(s.g, stack_parent, &s), E_OK);
	assert_int_equal(group_wait(s.g), E_OK);
	assert_int_equal(atomic_load(&s.ran), 2);
	group_free(s.g);
}

/* ------------------------------------------------------------------------------------------ */
/* stress: many producers and consumers through one small channel                             */
/* ------------------------------------------------------------------------------------------ */

/*
 * Plain items fill the channel; pooled items are bounded by the 8 buffers, so every item costs
 * two thread wake-ups: fewer of those keep the run to about a second.
 */
enum {
	STRESS_PRODUCERS = 8,
	STRESS_CONSUMERS = 8,
	STRESS_ITEMS = 100000,
	STRESS_POOL_ITEMS = 10000,
	STRESS_BUF = 64,
};

typedef struct stress {
	chan *c;
	pool *p; /* NULL: items travel as plain integers, so the channel itself fills up */
	uint64_t items; /* per producer */
	atomic_int producers_left;
} stress;

typedef struct stress_worker {
	stress *s;
	uint64_t first; /* producer: items first .. first + s->items - 1 */
	uint64_t sum; /* consumer: read by the test thread after group_wait */
	uint64_t count;
} stress_worker;

static void stress_cancel_cb(void *arg)
{
	stress *s = arg;
	chan_cancel(s->c);
	if (s->p != NULL)
		pool_cancel(s->p);
}

static err_code stress_producer(void *arg)
{
	stress_worker *w = arg;
	stress *s = w->s;

	for (uint64_t v = w->first; v < w->first + s->items; v++) {
		void *it = item((uintptr_t)v);
		if (s->p != NULL) {
			/* The value at both ends: a buffer handed out twice would mix them up. */
			uint64_t *buf = pool_get(s->p);
			if (buf == NULL)
				return err_set(E_CANCELLED, "producer cancelled");
			buf[0] = v;
			buf[STRESS_BUF / sizeof(uint64_t) - 1] = ~v;
			it = buf;
		}
		if (!chan_send(s->c, it)) {
			if (s->p != NULL)
				pool_put(s->p, it);
			return err_set(E_CANCELLED, "producer cancelled");
		}
	}
	if (atomic_fetch_sub(&s->producers_left, 1) == 1)
		chan_close(s->c);
	return E_OK;
}

static err_code stress_consumer(void *arg)
{
	stress_worker *w = arg;
	stress *s = w->s;
	void *it;

	while (chan_recv(s->c, &it)) {
		uint64_t v = (uintptr_t)it;
		if (s->p != NULL) {
			uint64_t *buf = it;
			v = buf[0];
			uint64_t check = buf[STRESS_BUF / sizeof(uint64_t) - 1];
			pool_put(s->p, buf);
			if (check != ~v)
				return err_set(E_CORRUPT, "item %llu: buffer reused while in flight",
							   (unsigned long long)v);
		}
		w->sum += v;
		w->count++;
	}
	return E_OK;
}

static void stress_run(bool use_pool)
{
	stress s = {
		.c = chan_new(16),
		.p = use_pool ? pool_new(8, STRESS_BUF) : NULL,
		.items = use_pool ? STRESS_POOL_ITEMS : STRESS_ITEMS,
	};
	stress_worker prod[STRESS_PRODUCERS], cons[STRESS_CONSUMERS];
	group *g = group_new();
	uint64_t sum = 0, count = 0;
	const uint64_t n = STRESS_PRODUCERS * s.items;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	atomic_init(&s.producers_left, STRESS_PRODUCERS);
	group_on_cancel(g, stress_cancel_cb, &s);
	memset(prod, 0, sizeof(prod));
	memset(cons, 0, sizeof(cons));
	for (int i = 0; i < STRESS_CONSUMERS; i++) {
		cons[i].s = &s;
		assert_int_equal(group_go(g, stress_consumer, &cons[i]), E_OK);
	}
	for (int i = 0; i < STRESS_PRODUCERS; i++) {
		prod[i].s = &s;
		prod[i].first = (uint64_t)i * s.items + 1;
		assert_int_equal(group_go(g, stress_producer, &prod[i]), E_OK);
	}
	assert_int_equal(group_wait(g), E_OK);
	for (int i = 0; i < STRESS_CONSUMERS; i++) {
		sum += cons[i].sum;
		count += cons[i].count;
	}
	/* Items are exactly 1..n: each delivered once, none lost, none duplicated. */
	assert_int_equal(count, n);
	assert_int_equal(sum, n * (n + 1) / 2);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	print_message("stress (%s): %llu items in %.2f s\n", use_pool ? "pool" : "chan",
				  (unsigned long long)count,
				  (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	group_free(g);
	chan_free(s.c);
	pool_free(s.p);
}

static void test_stress_chan(void **state)
{
	(void)state;
	stress_run(false);
}

static void test_stress_pool(void **state)
{
	(void)state;
	stress_run(true);
}

/* Threads taking and returning buffers of changing sizes: none is handed to two at once. */
typedef struct budget_user {
	budget *b;
	unsigned seed;
} budget_user;

static err_code budget_stress_user(void *arg)
{
	budget_user *u = arg;
	unsigned char mark = (unsigned char)(u->seed & 0xff);
	for (int i = 0; i < 2000; i++) {
		size_t size = 1 + (size_t)rand_r(&u->seed) % 3000;
		unsigned char *buf = budget_get_unless(u->b, size, NULL);
		if (buf == NULL)
			return err_set(E_IO, "no buffer");
		memset(buf, mark, size);
		for (size_t j = 0; j < size; j += 97)
			if (buf[j] != mark)
				return err_set(E_CORRUPT, "buffer shared by two users");
		budget_put(u->b, buf);
	}
	return E_OK;
}

static void test_stress_budget(void **state)
{
	(void)state;
	budget *b = budget_new(8000);
	budget_user users[4];
	group *g = group_new();
	for (int i = 0; i < 4; i++) {
		users[i] = (budget_user){ b, (unsigned)i + 1 };
		assert_int_equal(group_go(g, budget_stress_user, &users[i]), E_OK);
	}
	assert_int_equal(group_wait(g), E_OK);
	group_free(g);
	budget_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chan_fifo),
		cmocka_unit_test(test_chan_send_blocks_while_full),
		cmocka_unit_test(test_chan_recv_blocks_while_empty),
		cmocka_unit_test(test_chan_close_drains),
		cmocka_unit_test(test_chan_cancel_unblocks),
		cmocka_unit_test(test_pool_blocks_until_put),
		cmocka_unit_test(test_pool_cancel),
		cmocka_unit_test(test_budget_waits_for_room),
		cmocka_unit_test(test_budget_frees_idle_for_larger),
		cmocka_unit_test(test_budget_oversize_and_stop),
		cmocka_unit_test(test_group_all_ok),
		cmocka_unit_test(test_group_one_fails_others_cancelled),
		cmocka_unit_test(test_group_first_error_wins),
		cmocka_unit_test(test_group_fail_external),
		cmocka_unit_test(test_cpu_yield),
		cmocka_unit_test(test_group_code_without_message),
		cmocka_unit_test(test_group_stack_and_nested_go),
		cmocka_unit_test(test_stress_chan),
		cmocka_unit_test(test_stress_pool),
		cmocka_unit_test(test_stress_budget),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
