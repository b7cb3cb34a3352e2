/*
 * The Pushgateway push of the commands whose pods end before any scrape (backup-push, delete,
 * copy, backup-verify) and of the archiving commands' backlog: the daemon module makes the
 * text, this POSTs it (here, above storage, whose HTTPS trust it shares).
 */
#include "cmd/walc/commands.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "internal/daemon/daemon.h"
#include "internal/storage/storage.h"

/* The Pushgateway group: job "walc" unless the URL names its own (/metrics/job/...), then the
 * command as a label, so that backup-push and delete keep their metrics apart. */
static char *push_url(const char *base, const char *command)
{
	size_t n = strlen(base);
	while (n > 0 && base[n - 1] == '/')
		n--;
	const char *job = strstr(base, "/metrics/job/") != NULL ? "" : "/metrics/job/walc";
	return xasprintf("%.*s%s/command/%s", (int)n, base, job, command);
}

static size_t push_discard(char *p, size_t size, size_t n, void *u)
{
	(void)p, (void)u;
	return size * n;
}

void metrics_push(repo *r, const config *cfg, const char *command, bool ok, double seconds)
{
	metrics_push_with(r, cfg, command, ok, seconds, NULL, 0);
}

/* One POST of body to command's group; timeout_s bounds it (a warning when it fails). */
static void post(const config *cfg, const char *command, const char *body, long timeout_s)
{
	char *url = push_url(cfg->pushgateway_url, command);
	CURL *h = curl_easy_init();
	struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: text/plain; version=0.0.4");
	long status = 0;
	CURLcode c = CURLE_FAILED_INIT;
	/* Trusted as the stores are; S3_CA_CERT_FILE, which it took before SSL_CERT_FILE, wins. */
	storage_tls *tls = NULL;
	if (storage_tls_new(cfg->storage.s3.ca_cert_file, &cfg->storage.tls, &tls) != E_OK) {
		log_warn("metrics: %s", err_msg());
		err_clear();
	}
	if (h != NULL && hdr != NULL && tls != NULL) {
		curl_easy_setopt(h, CURLOPT_URL, url);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout_s);
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, timeout_s < 10 ? timeout_s : 10L);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, push_discard);
		storage_tls_apply(tls, h);
		c = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	}
	/* The URL may carry a user and password: logs show it without them. */
	char *shown = NULL;
	CURLU *u = curl_url();
	if (u == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
		curl_url_set(u, CURLUPART_USER, NULL, 0) != CURLUE_OK ||
		curl_url_set(u, CURLUPART_PASSWORD, NULL, 0) != CURLUE_OK ||
		curl_url_get(u, CURLUPART_URL, &shown, 0) != CURLUE_OK)
		shown = NULL;
	curl_url_cleanup(u);
	const char *what = shown ? shown : "the Pushgateway";
	if (c != CURLE_OK)
		log_warn("WALG_PUSHGATEWAY_URL: pushing metrics to %s failed: %s", what,
				 curl_easy_strerror(c));
	else if (status / 100 != 2)
		log_warn("WALG_PUSHGATEWAY_URL: %s answered HTTP %ld", what, status);
	else
		log_info("metrics pushed to %s", what);
	curl_free(shown);
	curl_slist_free_all(hdr);
	curl_easy_cleanup(h);
	storage_tls_free(tls);
	free(url);
}

void metrics_push_with(repo *r, const config *cfg, const char *command, bool ok, double seconds,
					   const metric *extra, size_t nextra)
{
	if (cfg->pushgateway_url == NULL || *cfg->pushgateway_url == '\0')
		return;
	char *body = metrics_run_text(r, ok, seconds, extra, nextra);
	post(cfg, command, body, 30);
	free(body);
}

void metrics_push_backlog(const config *cfg, const char *command, const wal_backlog *b)
{
	if (cfg->pushgateway_url == NULL || *cfg->pushgateway_url == '\0')
		return;
	char *body = metrics_backlog_push_text(b);
	/* from an archiving call: a Pushgateway that does not answer must not hold it long */
	post(cfg, command, body, 5);
	free(body);
}
