/*
 * The progress of a long transfer (a restore, a verify), logged at most every ten seconds by
 * whichever thread adds to it: bytes of the expected total, files, the rate and the time
 * left, so that an operator watching a restore of hours sees it move and when it will end.
 */
#include "internal/core/core.h"

#include <time.h>

#define PROGRESS_EVERY_MS 10000

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void progress_start(progress *p, const char *what, uint64_t total)
{
	p->what = what;
	p->total = total;
	p->done = p->files = 0;
	p->started_ms = p->last_ms = now_ms();
}

void progress_log(progress *p)
{
	uint64_t done = __atomic_load_n(&p->done, __ATOMIC_RELAXED);
	uint64_t files = __atomic_load_n(&p->files, __ATOMIC_RELAXED);
	double secs = (double)(now_ms() - p->started_ms) / 1000.0;
	double rate = secs > 0 ? (double)done / secs : 0;
	char of[64] = "", left[48] = "";
	if (p->total > 0) {
		snprintf(of, sizeof(of), " of %.1f MiB (%.0f%%)", (double)p->total / 1048576.0,
				 done < p->total ? 100.0 * (double)done / (double)p->total : 100.0);
		if (rate > 0 && done < p->total)
			snprintf(left, sizeof(left), ", about %.0f s left",
					 (double)(p->total - done) / rate);
	}
	log_info("%s: %.1f MiB%s, %llu files, %.1f MiB/s%s", p->what, (double)done / 1048576.0, of,
			 (unsigned long long)files, rate / 1048576.0, left);
}

void progress_add(progress *p, uint64_t bytes, uint64_t files)
{
	if (p == NULL)
		return;
	__atomic_add_fetch(&p->done, bytes, __ATOMIC_RELAXED);
	__atomic_add_fetch(&p->files, files, __ATOMIC_RELAXED);
	int64_t now = now_ms(), last = __atomic_load_n(&p->last_ms, __ATOMIC_RELAXED);
	/* One thread wins the turn to log; the others go on. */
	if (now - last >= PROGRESS_EVERY_MS &&
		__atomic_compare_exchange_n(&p->last_ms, &last, now, false, __ATOMIC_RELAXED,
									__ATOMIC_RELAXED))
		progress_log(p);
}

void progress_bytes(void *arg, const void *buf, size_t len)
{
	(void)buf;
	progress_add(arg, len, 0);
}
