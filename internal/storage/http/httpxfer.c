/*
 * One attempt of a request of the HTTP core: one libcurl easy handle per request in flight,
 * taken from a small stack of idle handles so connections are reused across requests and
 * threads, with a connect timeout and a stall timeout; the callbacks that parse the answer's
 * headers, stream its body into the request's sink (checking a resumed answer's range) or
 * keep it, bounded. The unit-test seam answers here, through those same callbacks, so the
 * retry loop of http.c above it is the real one.
 */
#include "internal/storage/http/http_impl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

err_code http_client_init(http_client *h, const char *store_ca, const tls_settings *tls,
						  const http_retry *retry)
{
	memset(h, 0, sizeof(*h));
	TRY(storage_tls_new(store_ca, tls, &h->tls));
	h->retry = *retry;
	pthread_mutex_init(&h->mu, NULL);
	return E_OK;
}

void http_client_free(http_client *h)
{
	if (h->tls == NULL)
		return;
	for (size_t i = 0; i < h->nidle; i++)
		curl_easy_cleanup(h->idle[i]);
	free(h->idle);
	storage_tls_free(h->tls);
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

void http_response_wipe(http_response *r)
{
	if (r->body.data != NULL)
		memset(r->body.data, 0, r->body.len);
	http_response_free(r);
}

bool http_cancelled(const atomic_bool *cancel)
{
	return (cancel != NULL && atomic_load(cancel)) || cancel_requested() != 0;
}

bool http_stop_asked(const http_request *req)
{
	if (req->past_cancel)
		return req->cancel != NULL && atomic_load(req->cancel);
	return http_cancelled(req->cancel);
}

/* ------------------------------------------------------------------------------------------ */
/* One transfer                                                                               */
/* ------------------------------------------------------------------------------------------ */

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
		r->range[0] = r->code[0] = r->content_md5[0] = r->lock_until[0] = '\0';
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
	else if (hdr_is(buf, nl, "x-amz-object-lock-retain-until-date"))
		set_str(r->lock_until, sizeof(r->lock_until), v, vl);
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
		/* a server that ignored the Range sends more than was asked for: drop the rest */
		size_t end = x->limit - x->delivered < len - off ? off + (size_t)(x->limit - x->delivered)
														  : len;
		if (off < end) {
			err_code rc = sink_write(x->req->into, buf + off, end - off);
			if (rc != E_OK) {
				x->sink_rc = rc;
				return 0;
			}
			x->delivered += end - off;
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
	if (http_stop_asked(x->req))
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
	storage_tls_apply(h->tls, c);
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

CURLcode http_attempt(http_client *h, xfer *x, const http_kvs *hdrs, const char *url,
					  char *errbuf)
{
	if (test_hook != NULL) {
		errbuf[0] = '\0';
		return attempt_hook(x, hdrs);
	}
	const char *saved = x->req->url;
	x->req->url = url;
	CURLcode cc = attempt_once(h, x, hdrs, errbuf);
	x->req->url = saved;
	return cc;
}
