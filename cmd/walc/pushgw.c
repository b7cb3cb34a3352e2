/*
 * The Pushgateway (WALG_PUSHGATEWAY_URL): each run's metrics, which the daemon module writes,
 * sent through storage's HTTP core, so that they are retried and trusted as the stores are.
 */
#include <stdlib.h>
#include <string.h>

#include "cmd/walc/pushgw.h"
#include "internal/storage/storage.h"

/*
 * The Pushgateway group: job "walc" unless the URL names its own (/metrics/job/...), then the
 * command as a label, so that backup-push and delete keep their metrics apart.
 */
static char *push_url(const char *base, const char *command)
{
	size_t n = strlen(base);
	while (n > 0 && base[n - 1] == '/')
		n--;
	const char *job = strstr(base, "/metrics/job/") != NULL ? "" : "/metrics/job/walc";
	return xasprintf("%.*s%s/command/%s", (int)n, base, job, command);
}

/*
 * One POST of body to command's group, retried; each attempt at most attempt_s seconds. A
 * warning when it fails: a push never changes the command's outcome.
 */
static void post(const config *cfg, const char *command, const char *body, int retries,
				 long attempt_s)
{
	char *url = push_url(cfg->pushgateway_url, command);
	storage_http_msg m = { .method = "POST", .url = url,
						   .content_type = "text/plain; version=0.0.4", .body = body,
						   .body_len = strlen(body), .max_retries = retries,
						   .attempt_s = attempt_s };
	/* Trusted as the stores are; S3_CA_CERT_FILE, which it took before SSL_CERT_FILE, wins. */
	if (storage_http_send(&m, cfg->storage.s3.ca_cert_file, &cfg->storage.tls) == E_OK) {
		char *shown = storage_url_shown(url);
		log_info("metrics pushed to %s", shown);
		free(shown);
	} else {
		log_warn("WALG_PUSHGATEWAY_URL: pushing metrics failed: %s", err_msg());
		err_clear();
	}
	free(url);
}

void pushgw_run(repo *r, const config *cfg, const char *command, bool ok, double seconds,
				const metric *extra, size_t nextra)
{
	if (cfg->pushgateway_url == NULL || *cfg->pushgateway_url == '\0')
		return;
	char *body = metrics_run_text(r, ok, seconds, extra, nextra);
	/* at most about 30 s in all, as a run's push always took */
	post(cfg, command, body, 3, 7);
	free(body);
}

void pushgw_backlog(const config *cfg, const char *command, const wal_backlog *b)
{
	if (cfg->pushgateway_url == NULL || *cfg->pushgateway_url == '\0')
		return;
	char *body = metrics_backlog_text(b);
	/*
	 * From an archiving call, which runs once a segment: a Pushgateway that does not answer
	 * must not hold it over 5 s, nor add more than one line a segment to PostgreSQL's log
	 * (the next call reports the backlog again), so no retry.
	 */
	post(cfg, command, body, 0, 4);
	free(body);
}
