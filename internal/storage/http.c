/*
 * The one request path of the HTTP object stores: one libcurl easy handle per request in
 * flight, taken from a small stack of idle handles so connections are reused across requests
 * and threads; every request has a connect timeout and a low-speed timeout, and is retried
 * with exponential backoff and full jitter on connection errors, timeouts, 5xx, 429 and the
 * store's throttling codes. A GET that streams into a sink resumes with a Range request where
 * a broken connection left it, pinned to the object it started reading.
 */
#include "internal/storage/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#define HTTP_DEFAULT_CA "/etc/ssl/certs/ca-certificates.crt"
#define HTTP_MAX_IDLE_HANDLES 64

static http_hook test_hook;
static void *test_hook_arg;
static time_t test_now;

void http_set_test_hook(http_hook hook, void *arg, time_t fixed_now)
{
	test_hook = hook;
	test_hook_arg = arg;
	test_now = fixed_now;
}

time_t http_now(void)
{
	return test_now ? test_now : time(NULL);
}

void http_answer_body(http_answer *a, const void *s, size_t len)
{
	free(a->body.data);
	a->body.data = xmalloc(len + 1);
	if (len > 0)
		memcpy(a->body.data, s, len);
	a->body.data[len] = '\0';
	a->body.len = len;
	a->body.cap = len + 1;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_ALL);
}

err_code http_global_init(void)
{
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return err_set(E_FAIL, "curl_global_init failed: %s", curl_easy_strerror(curl_init_rc));
	return E_OK;
}

void http_client_init(http_client *h, const char *ca_file, const http_retry *retry)
{
	memset(h, 0, sizeof(*h));
	h->ca_file = xstrdup(ca_file != NULL ? ca_file : HTTP_DEFAULT_CA);
	h->retry = *retry;
	pthread_mutex_init(&h->mu, NULL);
}

void http_client_free(http_client *h)
{
	if (h->ca_file == NULL)
		return;
	for (size_t i = 0; i < h->nidle; i++)
		curl_easy_cleanup(h->idle[i]);
	free(h->idle);
	free(h->ca_file);
	pthread_mutex_destroy(&h->mu);
	memset(h, 0, sizeof(*h));
}

static CURL *handle_get(http_client *h)
{
	CURL *c = NULL;
	pthread_mutex_lock(&h->mu);
	if (h->nidle > 0)
		c = h->idle[--h->nidle];
	pthread_mutex_unlock(&h->mu);
	if (c == NULL)
		c = curl_easy_init();
	else
		curl_easy_reset(c); /* keeps the connection cache */
	if (c == NULL) {
		log_error("out of memory creating a libcurl handle");
		abort();
	}
	return c;
}

static void handle_put(http_client *h, CURL *c)
{
	pthread_mutex_lock(&h->mu);
	if (h->nidle < HTTP_MAX_IDLE_HANDLES) {
		if (h->nidle == h->cap) {
			h->cap = h->cap ? h->cap * 2 : 8;
			h->idle = xrealloc(h->idle, h->cap * sizeof(*h->idle));
		}
		h->idle[h->nidle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&h->mu);
	if (c != NULL)
		curl_easy_cleanup(c);
}

void http_response_free(http_response *r)
{
	free(r->body.data);
	free(r->location);
	memset(r, 0, sizeof(*r));
}

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

/* Sleeps ms, waking early when cancelled. false when cancelled. */
static bool cancelled(const atomic_bool *cancel)
{
	return (cancel != NULL && atomic_load(cancel)) || cancel_requested() != 0;
}

static bool sleep_ms(long ms, const atomic_bool *cancel)
{
	while (ms > 0) {
		if (cancelled(cancel))
			return false;
		long step = ms < 50 ? ms : 50;
		struct timespec ts = { step / 1000, (step % 1000) * 1000000L };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		ms -= step;
	}
	return !cancelled(cancel);
}

/* ------------------------------------------------------------------------------------------ */
/* One transfer                                                                               */
/* ------------------------------------------------------------------------------------------ */

typedef struct xfer {
	http_request *req;
	http_response *resp;
	size_t up_off;			/* request body bytes sent */
	uint64_t delivered;		/* response bytes pushed into req->into, over all attempts */
	uint64_t skip;			/* bytes to drop (a server that ignored our Range) */
	uint64_t range_from;	/* this attempt asked for bytes range_from- */
	bool ranged;
	bool to_sink;			/* this answer's body goes to req->into */
	bool checked;			/* to_sink decided for this answer */
	err_code sink_rc;		/* error of req->into, which stops the transfer */
	err_code hook_rc;		/* error of the test hook */
	bool too_big;
	bool bad_range;
	uint64_t cr_start;		/* Content-Range of this answer */
	bool have_cr;
	/* stall detection: no byte moved either way for low_speed_time seconds */
	curl_off_t moved;
	struct timespec last_move;
	long stall_limit;
	bool stalled;
} xfer;

static size_t read_cb(char *buf, size_t size, size_t n, void *ud)
{
	xfer *x = ud;
	size_t want = size * n, left = x->req->body_len - x->up_off;
	if (want > left)
		want = left;
	if (want == 0)
		return 0;
	memcpy(buf, (const char *)x->req->body + x->up_off, want);
	x->up_off += want;
	return want;
}

/* curl rewinds the body when it must send it again (a reused connection that was closed). */
static int seek_cb(void *ud, curl_off_t offset, int origin)
{
	xfer *x = ud;
	if (origin != SEEK_SET || offset < 0 || (size_t)offset > x->req->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	x->up_off = (size_t)offset;
	return CURL_SEEKFUNC_OK;
}

static void set_str(char *dst, size_t sz, const char *v, size_t n)
{
	while (n > 0 && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	while (n > 0 && (*v == ' ' || *v == '\t'))
		v++, n--;
	if (n >= sz)
		n = sz - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static bool hdr_is(const char *buf, size_t nl, const char *name)
{
	return nl == strlen(name) && strncasecmp(buf, name, nl) == 0;
}

static size_t header_cb(char *buf, size_t size, size_t n, void *ud)
{
	xfer *x = ud;
	size_t len = size * n;
	http_response *r = x->resp;
	if (len > 5 && strncmp(buf, "HTTP/", 5) == 0) {
		/* A new answer (after a 100 Continue, or the first): forget the previous one's. */
		const char *sp = memchr(buf, ' ', len);
		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->etag[0] = r->request_id[0] = r->bucket_region[0] = r->generation[0] = '\0';
		r->range[0] = r->code[0] = r->content_md5[0] = '\0';
		free(r->location);
		r->location = NULL;
		r->have_length = false;
		r->content_length = 0;
		r->last_modified = 0;
		x->have_cr = false;
		x->checked = false;
		return len;
	}
	const char *colon = memchr(buf, ':', len);
	if (colon == NULL)
		return len;
	size_t nl = (size_t)(colon - buf);
	const char *v = colon + 1;
	size_t vl = len - nl - 1;
	char val[256];
	set_str(val, sizeof(val), v, vl);
	if (hdr_is(buf, nl, "etag"))
		set_str(r->etag, sizeof(r->etag), v, vl);
	else if (hdr_is(buf, nl, "x-amz-request-id") || hdr_is(buf, nl, "x-ms-request-id") ||
			 hdr_is(buf, nl, "x-guploader-uploadid"))
		set_str(r->request_id, sizeof(r->request_id), v, vl);
	else if (hdr_is(buf, nl, "x-amz-bucket-region"))
		set_str(r->bucket_region, sizeof(r->bucket_region), v, vl);
	else if (hdr_is(buf, nl, "x-ms-error-code"))
		set_str(r->code, sizeof(r->code), v, vl);
	else if (hdr_is(buf, nl, "x-goog-generation"))
		set_str(r->generation, sizeof(r->generation), v, vl);
	else if (hdr_is(buf, nl, "content-md5"))
		set_str(r->content_md5, sizeof(r->content_md5), v, vl);
	else if (hdr_is(buf, nl, "range"))
		set_str(r->range, sizeof(r->range), v, vl);
	else if (hdr_is(buf, nl, "location")) {
		char loc[2048];
		set_str(loc, sizeof(loc), v, vl);
		free(r->location);
		r->location = xstrdup(loc);
	} else if (hdr_is(buf, nl, "content-length")) {
		char *end;
		r->content_length = strtoull(val, &end, 10);
		r->have_length = end != val;
	} else if (hdr_is(buf, nl, "last-modified")) {
		if (!http_parse_date(val, &r->last_modified))
			r->last_modified = 0;
	} else if (hdr_is(buf, nl, "content-range")) {
		unsigned long long a;
		if (sscanf(val, "bytes %llu-", &a) == 1) {
			x->cr_start = a;
			x->have_cr = true;
		}
	}
	return len;
}

static size_t write_cb(char *buf, size_t size, size_t n, void *ud)
{
	xfer *x = ud;
	size_t len = size * n;
	http_response *r = x->resp;
	if (!x->checked) {
		x->checked = true;
		x->to_sink = x->req->into != NULL && r->status >= 200 && r->status < 300;
		if (x->to_sink && x->ranged) {
			if (r->status == 200) {
				x->skip = x->range_from; /* Range ignored: the whole object again */
			} else if (r->status != 206 || !x->have_cr || x->cr_start != x->range_from) {
				x->bad_range = true;
				return 0;
			}
		}
	}
	if (x->to_sink) {
		size_t off = 0;
		if (x->skip > 0) {
			off = x->skip < len ? (size_t)x->skip : len;
			x->skip -= off;
		}
		if (off < len) {
			err_code rc = sink_write(x->req->into, buf + off, len - off);
			if (rc != E_OK) {
				x->sink_rc = rc;
				return 0;
			}
			x->delivered += len - off;
		}
		return len;
	}
	if (len > HTTP_BODY_MAX - r->body.len) {
		x->too_big = true;
		return 0;
	}
	membuf *mb = &r->body;
	if (mb->len + len + 1 > mb->cap) {
		size_t cap = mb->cap ? mb->cap : 4096;
		while (cap < mb->len + len + 1)
			cap *= 2;
		mb->data = xrealloc(mb->data, cap);
		mb->cap = cap;
	}
	memcpy(mb->data + mb->len, buf, len);
	mb->len += len;
	mb->data[mb->len] = '\0';
	return len;
}

/*
 * Called about once a second even when nothing moves: cancellation, and the stall timeout
 * (curl's own low-speed check averages over a window, so it fires seconds late).
 */
static int progress_cb(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)dt, (void)ut;
	xfer *x = ud;
	if (cancelled(x->req->cancel))
		return 1;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (dn + un != x->moved) {
		x->moved = dn + un;
		x->last_move = now;
	} else if (now.tv_sec - x->last_move.tv_sec >= x->stall_limit) {
		x->stalled = true;
		return 1;
	}
	return 0;
}

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

/*
 * One attempt. Returns the curl code; the answer is in resp (status, headers, body when not
 * streamed to the sink).
 */
static CURLcode attempt_once(http_client *h, xfer *x, const http_kvs *hdrs, char *errbuf)
{
	http_request *req = x->req;
	struct curl_slist *list = NULL;
	for (size_t i = 0; i < hdrs->n; i++) {
		/* A line break in a value (from credentials, say) would inject a header: drop it. */
		if (strpbrk(hdrs->v[i].value, "\r\n") != NULL || strpbrk(hdrs->v[i].name, "\r\n:") != NULL) {
			log_error("refusing header %s: it contains a line break", hdrs->v[i].name);
			curl_slist_free_all(list);
			return CURLE_BAD_FUNCTION_ARGUMENT;
		}
		char *line = xasprintf("%s: %s", hdrs->v[i].name, hdrs->v[i].value);
		list = curl_slist_append(list, line);
		free(line);
	}
	list = curl_slist_append(list, "Expect:");
	list = curl_slist_append(list, "Accept:");
	list = curl_slist_append(list, "User-Agent: walc");

	CURL *c = handle_get(h); /* after the checks above, which return without it */
	curl_easy_setopt(c, CURLOPT_URL, req->url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, h->retry.connect_timeout);
	if (h->retry.attempt_timeout > 0)
		curl_easy_setopt(c, CURLOPT_TIMEOUT, h->retry.attempt_timeout);
	/* The progress callback enforces low_speed_time; curl's check is the backstop. */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, h->retry.low_speed_time * 2);
	x->moved = 0;
	x->stalled = false;
	x->stall_limit = h->retry.low_speed_time;
	clock_gettime(CLOCK_MONOTONIC, &x->last_move);
	curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024);
	curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 512L * 1024);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);

	x->up_off = 0;
	curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, seek_cb);
	curl_easy_setopt(c, CURLOPT_SEEKDATA, x);
	if (strcmp(req->method, "GET") == 0) {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(req->method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(req->method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
	} else if (strcmp(req->method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	} else {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
		if (req->body_len > 0) {
			curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
			curl_easy_setopt(c, CURLOPT_READDATA, x);
			curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
		}
	}
	errbuf[0] = '\0';
	CURLcode cc = curl_easy_perform(c);
	if (cc == CURLE_OK && x->resp->status == 0) {
		long st = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
		x->resp->status = st;
	}
	/* A broken or timed-out connection must not be reused: curl closes those itself. */
	handle_put(h, c);
	curl_slist_free_all(list);
	return cc;
}

/*
 * The test seam: the hook's answer goes through the same callbacks a network answer does, so
 * header parsing, sinks, Range checks and broken connections are the real code's.
 */
static CURLcode attempt_hook(xfer *x, const http_kvs *hdrs)
{
	http_answer a = { 0 };
	err_code rc = test_hook(test_hook_arg, x->req, hdrs, &a);
	CURLcode cc = CURLE_OK;
	if (rc != E_OK) {
		x->hook_rc = rc;
		cc = CURLE_ABORTED_BY_CALLBACK;
	} else if (a.refuse) {
		cc = CURLE_COULDNT_CONNECT;
	} else {
		char line[4096];
		int n = snprintf(line, sizeof(line), "HTTP/1.1 %ld Fake\r\n", a.status);
		header_cb(line, 1, (size_t)n, x);
		bool have_len = false;
		for (size_t i = 0; i < a.headers.n; i++) {
			n = snprintf(line, sizeof(line), "%s: %s\r\n", a.headers.v[i].name,
						 a.headers.v[i].value);
			have_len |= strcasecmp(a.headers.v[i].name, "content-length") == 0;
			header_cb(line, 1, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1, x);
		}
		if (!have_len && strcmp(x->req->method, "HEAD") != 0) {
			n = snprintf(line, sizeof(line), "content-length: %zu\r\n", a.body.len);
			header_cb(line, 1, (size_t)n, x);
		}
		size_t give = a.cut > 0 && a.cut < a.body.len ? a.cut : a.body.len;
		/* In pieces, as the network delivers them. */
		for (size_t off = 0; off < give && cc == CURLE_OK;) {
			size_t k = give - off < 65536 ? give - off : 65536;
			if (write_cb((char *)a.body.data + off, 1, k, x) != k)
				cc = CURLE_WRITE_ERROR;
			off += k;
		}
		if (cc == CURLE_OK && a.cut > 0 && a.cut < a.body.len)
			cc = CURLE_PARTIAL_FILE;
	}
	http_kvs_free(&a.headers);
	free(a.body.data);
	return cc;
}

err_code http_do(http_client *h, const http_auth *auth, http_request *req, http_response *resp)
{
	memset(resp, 0, sizeof(*resp));
	xfer x = { 0 };
	x.req = req;
	x.resp = resp;
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
		if (cancelled(req->cancel)) {
			out = err_set(E_CANCELLED, "%s: cancelled", req->what);
			break;
		}
		if (req->into != NULL && have_total && x.delivered == total && x.delivered > 0)
			break; /* the connection broke after the last byte */

		http_kvs hdrs = { 0 };
		if (req->host != NULL)
			http_kvs_add(&hdrs, "host", req->host);
		for (size_t i = 0; i < req->headers.n; i++)
			http_kvs_add(&hdrs, req->headers.v[i].name, req->headers.v[i].value);
		x.ranged = req->into != NULL && x.delivered > 0;
		x.range_from = x.delivered;
		x.skip = 0;
		if (x.ranged) {
			char range[64];
			snprintf(range, sizeof(range), "bytes=%llu-", (unsigned long long)x.delivered);
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
		CURLcode cc;
		if (test_hook != NULL) {
			cc = attempt_hook(&x, &hdrs);
			errbuf[0] = '\0';
		} else {
			const char *saved = req->url;
			req->url = url;
			cc = attempt_once(h, &x, &hdrs, errbuf);
			req->url = saved;
		}
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
		if (x.to_sink && !x.ranged && resp->status == 200) {
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
		long wait = (long)(rng_next() % (uint64_t)(backoff_cap_ms(rt, attempt) + 1));
		log_warn("%s: %s; retry %d of %d in %ld ms%s", req->what, last, attempt + 1,
				 rt->max_retries, wait,
				 x.delivered > 0 && req->into ? " (resuming with a Range request)" : "");
		if (!sleep_ms(wait, req->cancel)) {
			out = err_set(E_CANCELLED, "%s: cancelled", req->what);
			break;
		}
	}
	free(pinned);
	return out;
}
