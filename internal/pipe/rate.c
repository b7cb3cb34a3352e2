/* A token bucket in bytes per second, shared by every thread of one command. */
#include "internal/pipe/pipe.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct rate {
	pthread_mutex_t lock;
	double per_sec;
	double burst;
	double tokens;
	double last; /* seconds, monotonic */
};

static double now_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

rate *rate_new(uint64_t bytes_per_sec)
{
	rate *r = xcalloc(1, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	r->per_sec = (double)bytes_per_sec;
	r->burst = r->per_sec + 65536;
	r->tokens = r->burst;
	r->last = now_sec();
	return r;
}

void rate_take(rate *r, size_t n)
{
	if (r == NULL || r->per_sec <= 0)
		return;
	pthread_mutex_lock(&r->lock);
	double t = now_sec();
	r->tokens += (t - r->last) * r->per_sec;
	if (r->tokens > r->burst)
		r->tokens = r->burst;
	r->last = t;
	/* Go into debt and sleep it off, so a request larger than the burst still passes. */
	r->tokens -= (double)n;
	double wait = r->tokens < 0 ? -r->tokens / r->per_sec : 0;
	pthread_mutex_unlock(&r->lock);
	if (wait > 0) {
		struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
		nanosleep(&ts, NULL);
	}
}

void rate_free(rate *r)
{
	if (r == NULL)
		return;
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static void take(void *arg, const void *buf, size_t len)
{
	(void)buf;
	rate_take(arg, len);
}

sink *rate_sink_new(rate *r, sink *next)
{
	return tap_sink_new(take, r, next);
}
