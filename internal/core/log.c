/* Logging in WAL-G's line format ("INFO: 2006/01/02 15:04:05.000000 msg") or as JSON lines. */
#include "internal/core/core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static log_level log_min = LOG_INFO;
static bool log_json;
static const char *log_command = "";
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file; /* the log's stream once log_claim_stderr() ran, else stderr */

static const char *const level_names[] = { "DEBUG", "INFO", "WARNING", "ERROR" };

void log_setup(log_level level, bool json, const char *command)
{
	log_min = level;
	log_json = json;
	log_command = command ? command : "";
}

bool log_enabled(log_level level)
{
	return level >= log_min;
}

void log_claim_stderr(void)
{
#ifdef __GLIBC__
	if (log_file != NULL || log_enabled(LOG_DEBUG))
		return;
	FILE *null = fopen("/dev/null", "we");
	if (null == NULL)
		return;
	log_file = stderr;
	stderr = null;
#endif
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

/* Messages are single lines: a newline inside one would forge a second log line. */
static void text_str(FILE *f, const char *s)
{
	for (const char *p = s; *p; p++)
		fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
}

/*
 * A line is formatted in memory and goes out in one write: the log's stream is unbuffered, so
 * formatting straight into it cost a system call per character, and one write keeps lines
 * whole in a WALG_LOG_DESTINATION file that several walc processes append to.
 */
static void emit(log_level level, const char *msg, va_list *fields)
{
	struct timeval tv;
	struct tm tm;
	char when[64];
	char *line = NULL;
	size_t len = 0;

	FILE *dest = log_file != NULL ? log_file : stderr;
	FILE *mem = open_memstream(&line, &len);
	FILE *out = mem != NULL ? mem : dest;
	gettimeofday(&tv, NULL);
	pthread_mutex_lock(&log_lock);
	flockfile(dest);
	if (log_json) {
		gmtime_r(&tv.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		fprintf(out, "{\"level\":\"%s\",\"time\":\"%s.%06ldZ\",\"command\":",
				level_names[level], when, (long)tv.tv_usec);
		json_str(out, log_command);
		fputs(",\"msg\":", out);
		json_str(out, msg);
		if (fields != NULL) {
			const char *k;
			while ((k = va_arg(*fields, const char *)) != NULL) {
				const char *v = va_arg(*fields, const char *);
				fputc(',', out);
				json_str(out, k);
				fputc(':', out);
				json_str(out, v ? v : "");
			}
		}
		fputs("}\n", out);
	} else {
		localtime_r(&tv.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y/%m/%d %H:%M:%S", &tm);
		fprintf(out, "%s: %s.%06ld ", level_names[level], when, (long)tv.tv_usec);
		text_str(out, msg);
		if (fields != NULL) {
			const char *k;
			while ((k = va_arg(*fields, const char *)) != NULL) {
				const char *v = va_arg(*fields, const char *);
				fprintf(out, " %s=", k);
				text_str(out, v ? v : "");
			}
		}
		fputc('\n', out);
	}
	if (mem != NULL && fclose(mem) == 0) {
		fwrite(line, 1, len, dest);
		fflush(dest);
	}
	free(line);
	funlockfile(dest);
	pthread_mutex_unlock(&log_lock);
}

void log_msg(log_level level, const char *fmt, ...)
{
	char msg[4096];
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	emit(level, msg, NULL);
}

void log_fields(log_level level, const char *msg, ...)
{
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, msg);
	emit(level, msg, &ap);
	va_end(ap);
}
