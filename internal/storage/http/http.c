/*
 * The one request path of the HTTP object stores: every request has a connect timeout and a
 * low-speed timeout (httpxfer.c sends each attempt), and is retried here with exponential
 * backoff and full jitter on connection errors, timeouts, 5xx, 429 and the store's throttling
 * codes; credentials are refreshed on an expired-token answer. A GET that streams into a sink
 * resumes with a Range request where a broken connection left it, pinned to the object it
 * started reading.
 */
#include "internal/storage/http/http_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ------------------------------------------------------------------------------------------ */
/* Backoff                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static uint64_t rng_next(void)
{
	static __thread uint64_t s;
	if (s == 0) {
		if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s) || s == 0)
			s = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull | 1;
	}
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

static long backoff_cap_ms(const http_retry *r, int attempt)
{
	long cap = r->base_ms;
	for (int i = 0; i < attempt && cap < r->cap_ms; i++)
		cap *= 2;
	return cap < r->cap_ms ? cap : r->cap_ms;
}

long http_retry_budget_ms(const http_retry *r)
{
	long total = 0;
	for (int i = 0; i < r->max_retries; i++)
		total += backoff_cap_ms(r, i);
	return total;
}

long http_backoff_ms(const http_retry *r, int attempt)
{
	return (long)(rng_next() % (uint64_t)(backoff_cap_ms(r, attempt) + 1));
}

/* Sleeps ms, waking early when req (with a cancel flag only) or cancel asks to stop. */
static bool sleep_unless(long ms, const http_request *req, const atomic_bool *cancel)
{
	for (;;) {
		if (req != NULL ? http_stop_asked(req) : http_cancelled(cancel))
			return false;
		if (ms <= 0)
			return true;
		long step = ms < 50 ? ms : 50;
		struct timespec ts = { step / 1000, (step % 1000) * 1000000L };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		ms -= step;
	}
}

bool http_sleep_ms(long ms, const atomic_bool *cancel)
{
	return sleep_unless(ms, NULL, cancel);
}

/* ------------------------------------------------------------------------------------------ */
/* Answers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static bool curl_retryable(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_SEND_FAIL_REWIND:
		return true;
	default:
		return false;
	}
}

/* Throttling and request timeouts are sometimes sent as 400 or 503 with these codes (S3). */
static bool s3_style_retryable(const http_response *r)
{
	return strcmp(r->code, "SlowDown") == 0 || strcmp(r->code, "RequestTimeout") == 0 ||
		   strcmp(r->code, "Throttling") == 0 || strcmp(r->code, "ThrottlingException") == 0 ||
		   strcmp(r->code, "RequestThrottled") == 0 || strcmp(r->code, "InternalError") == 0;
}

static bool status_retryable(const http_auth *auth, const http_response *r)
{
	/* 501 and 505 say what was asked is not there to be had: asking again changes nothing. */
	if ((r->status >= 500 && r->status != 501 && r->status != 505) || r->status == 429)
		return true;
	if (auth != NULL && auth->ops->retryable != NULL)
		return auth->ops->retryable(r);
	return s3_style_retryable(r);
}

static void parse_error(const http_auth *auth, http_response *r)
{
	if (r->status < 300)
		return;
	if (auth != NULL && auth->ops->parse_error != NULL)
		auth->ops->parse_error(r);
	else if (r->body.len > 0)
		xml_error((const char *)r->body.data, r->body.len, r->code, sizeof(r->code),
				  r->message, sizeof(r->message));
}

static const char *store_name(const http_auth *auth)
{
	return auth != NULL && auth->ops->name != NULL ? auth->ops->name : "http";
}

static void log_request(const char *name, const http_request *req, const http_kvs *hdrs,
						int attempt)
{
	if (!log_enabled(LOG_DEBUG))
		return;
	char line[2048];
	size_t at = 0;
	for (size_t i = 0; i < hdrs->n && at < sizeof(line) - 1; i++) {
		int w = snprintf(line + at, sizeof(line) - at, "%s%s: %s", i ? ", " : "",
						 hdrs->v[i].name,
						 http_header_is_secret(hdrs->v[i].name) ? "--HIDDEN--" : hdrs->v[i].value);
		if (w < 0)
			break;
		at += (size_t)w;
	}
	if (at >= sizeof(line))
		at = sizeof(line) - 1;
	line[at] = '\0';
	log_debug("%s request: %s %s (attempt %d, %zu-byte body) headers: %s", name, req->method,
			  req->url, attempt + 1, req->body_len, line);
}
err_code http_do(http_client *h, const http_auth *auth, http_request *req, http_response *resp)
{
	memset(resp, 0, sizeof(*resp));
	xfer x = { 0 };
	x.req = req;
	x.resp = resp;
	bool want_range = req->into != NULL && req->range_len > 0;
	x.limit = want_range ? req->range_len : UINT64_MAX;
	char errbuf[CURL_ERROR_SIZE];
	char last[512] = "";
	http_response first = { 0 }; /* the answer a resumed GET must match */
	char *pinned = NULL;		 /* the URL a resumed GET reads, when the store pins by URL */
	const char *url = req->url;
	uint64_t total = 0;
	bool have_total = false, refreshed = false, refresh = false;
	const http_retry *rt = &h->retry;
	const char *name = store_name(auth);
	err_code out = E_OK;

	for (int attempt = 0;; attempt++) {
		if (http_stop_asked(req)) {
			out = err_set(E_CANCELLED, "%s: cancelled", req->what);
			break;
		}
		if (req->into != NULL && have_total && x.delivered == total && x.delivered > 0)
			break; /* the connection broke after the last byte */
		if (want_range && x.delivered == x.limit)
			break;

		http_kvs hdrs = { 0 };
		if (req->host != NULL)
			http_kvs_add(&hdrs, "host", req->host);
		for (size_t i = 0; i < req->headers.n; i++)
			http_kvs_add(&hdrs, req->headers.v[i].name, req->headers.v[i].value);
		x.ranged = req->into != NULL && (x.delivered > 0 || want_range);
		x.range_from = (want_range ? req->range_off : 0) + x.delivered;
		x.skip = 0;
		if (x.ranged) {
			char range[64];
			if (want_range)
				snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)x.range_from,
						 (unsigned long long)(req->range_off + req->range_len - 1));
			else
				snprintf(range, sizeof(range), "bytes=%llu-", (unsigned long long)x.range_from);
			http_kvs_add(&hdrs, "range", range);
			free(pinned);
			pinned = NULL;
			if (auth != NULL && auth->ops->pin != NULL)
				pinned = auth->ops->pin(&first, req->url, &hdrs);
			else if (first.etag[0] != '\0')
				http_kvs_add(&hdrs, "if-match", first.etag);
			url = pinned != NULL ? pinned : req->url;
		}
		if (auth != NULL && auth->ops->authorize != NULL) {
			err_code rc = auth->ops->authorize(auth->arg, req, &hdrs, refresh);
			if (rc == E_OK && refresh)
				log_info("%s: credentials expired (%s); refreshed them", req->what, last);
			refresh = false;
			if (rc != E_OK) {
				http_kvs_free(&hdrs);
				/* Never E_NOTFOUND: wal-fetch would report a missing segment. */
				out = err_wrap(rc == E_NOTFOUND ? E_CONFIG : rc, "%s", req->what);
				break;
			}
		}
		log_request(name, req, &hdrs, attempt);

		/* Fresh answer record for this attempt. */
		http_response_free(resp);
		x.checked = x.to_sink = x.too_big = x.bad_range = false;
		x.sink_rc = x.hook_rc = E_OK;
		uint64_t before = x.delivered;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CURLcode cc = http_attempt(h, &x, &hdrs, url, errbuf);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		http_kvs_free(&hdrs);
		long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;

		if (x.hook_rc != E_OK) {
			out = x.hook_rc;
			break;
		}
		if (x.sink_rc != E_OK) {
			out = x.sink_rc; /* the consumer failed: its message stands */
			break;
		}
		if (cc == CURLE_ABORTED_BY_CALLBACK && x.stalled) {
			cc = CURLE_OPERATION_TIMEDOUT;
			snprintf(errbuf, CURL_ERROR_SIZE, "no data moved for %ld s (the low-speed timeout)",
					 h->retry.low_speed_time);
		} else if (cc == CURLE_ABORTED_BY_CALLBACK) {
			out = err_set(E_CANCELLED, "%s: cancelled", req->what);
			break;
		}
		if (x.too_big) {
			out = err_set(E_CORRUPT, "%s: answer larger than %u bytes", req->what, HTTP_BODY_MAX);
			break;
		}
		if (x.bad_range) {
			out = err_set(E_IO, "%s: resuming at byte %llu got HTTP %ld without the requested "
								"range",
						  req->what, (unsigned long long)x.range_from, resp->status);
			break;
		}
		/* the answer later attempts must match: the whole object's, or a range's first */
		if (x.to_sink && ((!x.ranged && resp->status == 200) ||
						  (want_range && resp->status == 206 && first.etag[0] == '\0' &&
						   first.generation[0] == '\0'))) {
			snprintf(first.etag, sizeof(first.etag), "%s", resp->etag);
			snprintf(first.generation, sizeof(first.generation), "%s", resp->generation);
			if (resp->have_length) {
				total = resp->content_length;
				have_total = true;
			}
		}
		if (cc == CURLE_OK)
			parse_error(auth, resp);
		log_debug("%s answer: %s %s: %s%ld%s%s (%ld ms)", name, req->method, req->url,
				  cc == CURLE_OK ? "HTTP " : "", cc == CURLE_OK ? resp->status : (long)cc,
				  resp->code[0] ? " " : "", resp->code, ms);

		bool retry;
		if (cc != CURLE_OK) {
			if (!curl_retryable(cc)) {
				out = err_set(E_IO, "%s: %s", req->what,
							  errbuf[0] ? errbuf : curl_easy_strerror(cc));
				break;
			}
			snprintf(last, sizeof(last), "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
			retry = true;
		} else if (x.ranged && (resp->status == 412 || (pinned != NULL && resp->status == 404))) {
			out = err_set(E_IO, "%s: the object changed while it was being read (%s %s)",
						  req->what, first.generation[0] ? "generation" : "ETag",
						  first.generation[0] ? first.generation : first.etag);
			break;
		} else if (auth != NULL && auth->ops->expired != NULL && auth->ops->expired(resp) &&
				   !refreshed) {
			refreshed = refresh = true;
			snprintf(last, sizeof(last), "%s", resp->code[0] ? resp->code : "HTTP 401");
			attempt--; /* a refresh is not a failure */
			continue;
		} else if (status_retryable(auth, resp)) {
			snprintf(last, sizeof(last), "HTTP %ld%s%s", resp->status,
					 resp->code[0] ? " " : "", resp->code);
			retry = true;
		} else {
			retry = false;
		}
		if (!retry)
			break;
		/* A GET that made progress starts a fresh budget: it resumes, it does not repeat. */
		if (x.delivered > before)
			attempt = 0;
		if (attempt >= rt->max_retries) {
			out = err_set(E_IO, "%s: gave up after %d attempts; last error: %s", req->what,
						  attempt + 1, last);
			break;
		}
		long wait = http_backoff_ms(rt, attempt);
		log_warn("%s: %s; retry %d of %d in %ld ms%s", req->what, last, attempt + 1,
				 rt->max_retries, wait,
				 x.delivered > 0 && req->into ? " (resuming with a Range request)" : "");
		if (!sleep_unless(wait, req, NULL)) {
			out = err_set(E_CANCELLED, "%s: cancelled", req->what);
			break;
		}
	}
	free(pinned);
	if (out == E_OK && want_range && resp->status >= 200 && resp->status < 300 &&
		x.delivered != x.limit)
		out = err_set(E_CORRUPT, "%s: %llu of the %llu bytes asked for at %llu", req->what,
					  (unsigned long long)x.delivered, (unsigned long long)x.limit,
					  (unsigned long long)req->range_off);
	return out;
}

/* ------------------------------------------------------------------------------------------ */
/* A plain request outside the stores                                                         */
/* ------------------------------------------------------------------------------------------ */

/* Answers are plain text, not a store's XML: only their status says anything. */
static void plain_error(http_response *resp)
{
	(void)resp;
}

static bool plain_retryable(const http_response *resp)
{
	(void)resp;
	return false;
}

static const http_store_ops plain_ops = { .name = "http", .parse_error = plain_error,
										  .retryable = plain_retryable };

/* u's part (URL-decoded), or NULL when it has none. */
static char *url_part(CURLU *u, CURLUPart part)
{
	char *v = NULL;
	if (curl_url_get(u, part, &v, CURLU_URLDECODE) != CURLUE_OK)
		return NULL;
	char *out = xstrdup(v);
	curl_free(v);
	return out;
}

/*
 * Splits url into the URL without user and password (*bare) and the Basic authorization
 * they make (*basic, NULL without a user); false when url does not parse. A URL without a
 * scheme is http's, as the Prometheus client WAL-G pushes with takes it.
 */
static bool url_split(const char *url, char **bare, char **basic)
{
	CURLU *u = curl_url();
	char *b = NULL;
	*basic = NULL;
	if (u == NULL || curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME) != CURLUE_OK) {
		curl_url_cleanup(u);
		return false;
	}
	char *user = url_part(u, CURLUPART_USER);
	char *pass = url_part(u, CURLUPART_PASSWORD);
	bool ok = curl_url_set(u, CURLUPART_USER, NULL, 0) == CURLUE_OK &&
			  curl_url_set(u, CURLUPART_PASSWORD, NULL, 0) == CURLUE_OK &&
			  curl_url_get(u, CURLUPART_URL, &b, 0) == CURLUE_OK;
	curl_url_cleanup(u);
	if (ok) {
		*bare = xstrdup(b);
		if (user != NULL) {
			char *pair = xasprintf("%s:%s", user, pass != NULL ? pass : "");
			char *enc = http_base64(pair, strlen(pair));
			*basic = xasprintf("Basic %s", enc);
			free(enc);
			http_wipe_free(pair);
		}
	}
	curl_free(b);
	free(user);
	http_wipe_free(pass);
	return ok;
}

char *storage_url_shown(const char *url)
{
	char *bare, *basic;
	if (!url_split(url, &bare, &basic))
		return xstrdup("(an unparsable URL)");
	http_wipe_free(basic);
	return bare;
}

err_code storage_http_send(const storage_http_msg *m, const char *store_ca,
						   const tls_settings *tls)
{
	char *url, *basic;
	if (!url_split(m->url, &url, &basic))
		return err_set(E_CONFIG, "%s: cannot parse the URL", m->method);
	http_retry rt = { .max_retries = m->max_retries, .base_ms = 100, .cap_ms = 2000,
					  .connect_timeout = m->attempt_s < 10 ? m->attempt_s : 10,
					  .low_speed_time = m->attempt_s, .attempt_timeout = m->attempt_s };
	http_client h;
	err_code rc = http_global_init();
	if (rc == E_OK)
		rc = http_client_init(&h, store_ca, tls, &rt);
	if (rc != E_OK) {
		http_wipe_free(basic);
		free(url);
		return rc;
	}
	char *what = xasprintf("%s %s", m->method, url);
	http_request req = { .method = m->method, .url = url, .what = what, .body = m->body,
						 .body_len = m->body_len, .past_cancel = true };
	if (m->content_type != NULL)
		http_kvs_add(&req.headers, "content-type", m->content_type);
	if (basic != NULL)
		http_kvs_add(&req.headers, "authorization", basic);
	http_auth auth = { &plain_ops, NULL };
	http_response resp;
	rc = http_do(&h, &auth, &req, &resp);
	if (rc == E_OK && resp.status / 100 != 2)
		rc = err_set(E_IO, "%s: HTTP %ld", what, resp.status);
	http_response_free(&resp);
	http_kvs_free(&req.headers);
	http_client_free(&h);
	http_wipe_free(basic);
	free(what);
	free(url);
	return rc;
}
