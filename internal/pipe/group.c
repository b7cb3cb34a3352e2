/* Worker group: threads whose first error is kept, reported once, and cancels the rest. */
#include "internal/pipe/pipe.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

struct worker {
	group *g;
	group_fn fn;
	void *arg;
	pthread_t tid;
	struct worker *next;
};

struct on_cancel {
	void (*fn)(void *arg);
	void *arg;
	struct on_cancel *next;
};

struct group {
	pthread_mutex_t mu;
	atomic_bool cancelled; /* read without the lock by group_cancelled() */
	bool cancelling; /* under mu: callbacks taken, so the list is frozen from then on */
	err_code code; /* the first error */
	char msg[ERR_MSG_MAX];
	struct worker *workers; /* started, not yet joined */
	struct on_cancel *cbs; /* in registration order */
	struct on_cancel **cbs_tail;
};

group *group_new(void)
{
	group *g = xcalloc(1, sizeof(*g));

	pthread_mutex_init(&g->mu, NULL);
	atomic_init(&g->cancelled, false);
	g->cbs_tail = &g->cbs;
	return g;
}

/*
 * Runs the callbacks outside the lock, since they take other locks (chan_cancel) and may call
 * back into the group. Only the thread that sets cancelling runs them, so each runs once.
 */
static void group_cancel_once(group *g)
{
	pthread_mutex_lock(&g->mu);
	bool first = !g->cancelling;
	g->cancelling = true;
	atomic_store(&g->cancelled, true);
	pthread_mutex_unlock(&g->mu);
	if (!first)
		return;
	for (struct on_cancel *cb = g->cbs; cb != NULL; cb = cb->next)
		cb->fn(cb->arg);
}

void group_on_cancel(group *g, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&g->mu);
	if (g->cancelling) {
		/* Too late to join the list: cancel what was registered late right away. */
		pthread_mutex_unlock(&g->mu);
		fn(arg);
		return;
	}
	struct on_cancel *cb = xcalloc(1, sizeof(*cb));
	cb->fn = fn;
	cb->arg = arg;
	*g->cbs_tail = cb;
	g->cbs_tail = &cb->next;
	pthread_mutex_unlock(&g->mu);
}

void group_fail(group *g, err_code code, const char *msg)
{
	pthread_mutex_lock(&g->mu);
	/* Later errors are usually consequences of the first (often E_CANCELLED): keep the first. */
	bool first = g->code == E_OK && code != E_OK;
	if (first) {
		g->code = code;
		snprintf(g->msg, sizeof(g->msg), "%s", msg != NULL ? msg : err_name(code));
	}
	pthread_mutex_unlock(&g->mu);
	if (first)
		group_cancel_once(g);
}

static void *group_run(void *p)
{
	struct worker *w = p;

	err_clear();
	err_code rc = w->fn(w->arg);
	/* The message lives in this thread's error record, so take it before the thread ends. */
	if (rc != E_OK)
		group_fail(w->g, rc, err_last() != E_OK ? err_msg() : err_name(rc));
	return NULL;
}

err_code group_go(group *g, group_fn fn, void *arg)
{
	struct worker *w = xcalloc(1, sizeof(*w));
	pthread_attr_t attr;
	int rc;

	w->g = g;
	w->fn = fn;
	w->arg = arg;
	rc = pthread_attr_init(&attr);
	if (rc == 0) {
		rc = pthread_attr_setstacksize(&attr, PIPE_THREAD_STACK);
		if (rc == 0)
			rc = pthread_create(&w->tid, &attr, group_run, w);
		pthread_attr_destroy(&attr);
	}
	if (rc != 0) {
		free(w);
		err_errno(E_FAIL, rc, "starting a worker thread");
		group_fail(g, E_FAIL, err_msg());
		return E_FAIL;
	}
	/* Listed only once started, so group_wait never joins a thread that does not exist. */
	pthread_mutex_lock(&g->mu);
	w->next = g->workers;
	g->workers = w;
	pthread_mutex_unlock(&g->mu);
	return E_OK;
}

bool group_cancelled(group *g)
{
	return atomic_load(&g->cancelled);
}

err_code group_wait(group *g)
{
	/* One at a time from the list head: a worker may start more workers before it ends. */
	for (;;) {
		pthread_mutex_lock(&g->mu);
		struct worker *w = g->workers;
		if (w != NULL)
			g->workers = w->next;
		pthread_mutex_unlock(&g->mu);
		if (w == NULL)
			break;
		pthread_join(w->tid, NULL);
		free(w);
	}
	pthread_mutex_lock(&g->mu);
	err_code code = g->code;
	if (code != E_OK)
		err_set(code, "%s", g->msg);
	pthread_mutex_unlock(&g->mu);
	return code;
}

void group_free(group *g)
{
	if (g == NULL)
		return;
	assert(g->workers == NULL); /* group_wait first: a running worker still uses g */
	struct on_cancel *next;
	for (struct on_cancel *cb = g->cbs; cb != NULL; cb = next) {
		next = cb->next;
		free(cb);
	}
	pthread_mutex_destroy(&g->mu);
	free(g);
}

bool cpu_yield(int steps)
{
	/* PRIO_PROCESS with a thread id names that thread alone on Linux. */
	id_t self = (id_t)gettid();
	errno = 0;
	int now = getpriority(PRIO_PROCESS, self);
	if (now == -1 && errno != 0)
		return false;
	int want = now + steps > 19 ? 19 : now + steps;
	return want > now && setpriority(PRIO_PROCESS, self, want) == 0;
}
