/* Per-thread error record: the one place a failure's detail is kept until it is reported. */
#include "internal/core/core.h"

#include <signal.h>
#include <stdatomic.h>

#include <stdio.h>
#include <string.h>

static _Thread_local err_code err_code_cur;
static _Thread_local char err_buf[ERR_MSG_MAX];

__attribute__((format(printf, 2, 0)))
static err_code err_vset(err_code code, const char *fmt, va_list ap)
{
	vsnprintf(err_buf, sizeof(err_buf), fmt, ap);
	err_code_cur = code;
	return code;
}

err_code err_set(err_code code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(code, fmt, ap);
	va_end(ap);
	return code;
}

err_code err_errno(err_code code, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(code, fmt, ap);
	va_end(ap);
	size_t n = strlen(err_buf);
	snprintf(err_buf + n, sizeof(err_buf) - n, ": %s", strerror(errnum));
	return code;
}

err_code err_wrap(err_code code, const char *fmt, ...)
{
	char old[ERR_MSG_MAX];
	char prefix[ERR_MSG_MAX];
	va_list ap;

	memcpy(old, err_buf, sizeof(old));
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	/* Truncation is fine: the start of the message says what failed. */
	size_t n = strlen(prefix);
	memcpy(err_buf, prefix, n + 1);
	if (old[0] != '\0' && n + 2 < sizeof(err_buf)) {
		memcpy(err_buf + n, ": ", 3);
		strncat(err_buf, old, sizeof(err_buf) - n - 3);
	}
	err_code_cur = code;
	return code;
}

const char *err_msg(void)
{
	return err_buf[0] != '\0' ? err_buf : err_name(err_code_cur);
}

err_code err_last(void)
{
	return err_code_cur;
}

void err_clear(void)
{
	err_code_cur = E_OK;
	err_buf[0] = '\0';
}

const char *err_name(err_code code)
{
	switch (code) {
	case E_OK: return "ok";
	case E_FAIL: return "failed";
	case E_CONFIG: return "bad configuration";
	case E_IO: return "i/o error";
	case E_NOTFOUND: return "not found";
	case E_CORRUPT: return "corrupt data";
	case E_EXISTS: return "already exists";
	case E_CANCELLED: return "cancelled";
	}
	return "unknown error";
}

/* Lock-free, so that a signal handler may set it while threads read it. */
static atomic_int cancel_reason;

void cancel_request(int reason)
{
	int none = 0;
	atomic_compare_exchange_strong(&cancel_reason, &none, reason);
}

int cancel_requested(void)
{
	return atomic_load_explicit(&cancel_reason, memory_order_relaxed);
}

err_code cancel_check(void)
{
	int why = cancel_requested();
	if (why == 0)
		return E_OK;
	if (why == CANCEL_DEADLINE)
		return err_set(E_CANCELLED, "stopped at its deadline");
	return err_set(E_CANCELLED, why == SIGINT ? "interrupted (SIGINT)" : "stopped by a signal");
}
