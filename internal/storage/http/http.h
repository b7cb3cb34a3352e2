/*
 * http: the private interface of the HTTP object-store core that the S3, GCS and Azure Blob
 * adapters share: name/value lists, encodings, XML (xml.c), the one request path with retries
 * (http.c; one attempt in httpxfer.c), uploads in parts (upload.c), bearer tokens (token.c)
 * and parallel batches. Only the storage files and tests include it; the rest of walc sees
 * storage.h.
 */
#ifndef WALC_INTERNAL_STORAGE_HTTP_H
#define WALC_INTERNAL_STORAGE_HTTP_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "internal/core/core.h"
#include "internal/pipe/pipe.h"
#include "internal/storage/storage.h"

/* ------------------------------------------------------------------------------------------ */
/* Small containers and encodings (httputil.c)                                                */
/* ------------------------------------------------------------------------------------------ */

/* Ordered name/value pairs: HTTP headers (names lower-case) or query parameters (raw). */
typedef struct http_kv {
	char *name;
	char *value;
} http_kv;

typedef struct http_kvs {
	http_kv *v;
	size_t n;
	size_t cap;
} http_kvs;

void http_kvs_add(http_kvs *l, const char *name, const char *value);
/* The value for name (case-insensitive), or NULL. */
const char *http_kvs_get(const http_kvs *l, const char *name);
void http_kvs_free(http_kvs *l);

/* RFC 3986 percent-encoding: A-Z a-z 0-9 - . _ ~ kept, '/' kept when asked. */
char *http_uri_encode(const char *s, bool keep_slash);
/* Decodes %XX (and nothing else); NULL on a malformed escape. */
char *http_uri_decode(const char *s);
/* "a=1&b=2" from query (encoded, in the order given). "" when empty. */
char *http_query_string(const http_kvs *query);
void http_hex(const unsigned char *d, size_t n, char *out); /* lower-case, NUL-ended */
void http_sha256_hex(const void *data, size_t len, char out[65]);
/* Base64 of the MD5 of data (Content-MD5). */
void http_md5_base64(const void *data, size_t len, char out[25]);
char *http_base64(const void *data, size_t len);
/* base64url without padding (JWT). */
char *http_base64url(const void *data, size_t len);
/* Standard base64 (padding optional) into a new buffer; false when s is not base64. */
bool http_base64_decode(const char *s, unsigned char **out, size_t *len);
void http_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
					  unsigned char out[32]);
/* XML text escaping (&, <, >, quotes). */
char *http_xml_escape(const char *s);
/* "2024-01-02T03:04:05.678Z" (ISO 8601, UTC). */
bool http_parse_iso8601(const char *s, time_t *t, long *nsec);
/* "Tue, 02 Jan 2024 03:04:05 GMT" (RFC 7231). */
bool http_parse_date(const char *s, time_t *t);
/* True for header names whose values are secret (masked in logs). */
bool http_header_is_secret(const char *name);
/* Reads a small file (credentials, tokens) whole; E_NOTFOUND when absent. */
err_code http_read_small_file(const char *path, size_t max, char **out);
/* Overwrites and frees a secret string. */
void http_wipe_free(char *s);

/* ------------------------------------------------------------------------------------------ */
/* XML (xml.c): expat with a size cap, no DTDs, bounded depth and text.                        */
/* ------------------------------------------------------------------------------------------ */

#define HTTP_BODY_MAX (8u << 20)   /* largest answer body kept in memory */
#define XML_TEXT_MAX (64u << 10) /* largest text of one element */

/*
 * Calls cb at the end of each element with its path ("/ListBucketResult/Contents/Key", local
 * names) and its text (NUL-terminated, only direct character data). E_CORRUPT on malformed
 * XML, a DOCTYPE, too deep nesting or too much text.
 */
typedef void (*xml_cb)(void *ctx, const char *path, const char *text);
err_code xml_parse(const char *doc, size_t len, xml_cb cb, void *ctx);

/* <Error><Code>..</Code><Message>..</Message></Error>: true when doc is one. */
bool xml_error(const char *doc, size_t len, char *code, size_t codesz, char *msg,
			   size_t msgsz);

/* ------------------------------------------------------------------------------------------ */
/* Requests (http.c, httpxfer.c): libcurl handles kept for reuse, retries, backoff, jitter.   */
/* ------------------------------------------------------------------------------------------ */

typedef struct http_retry {
	int max_retries;	  /* retries after the first attempt */
	long base_ms;		  /* first backoff cap */
	long cap_ms;		  /* largest backoff */
	long connect_timeout; /* seconds */
	long low_speed_time;  /* seconds without progress before a transfer is abandoned */
	long attempt_timeout; /* seconds one attempt may take in all, 0 = no limit */
} http_retry;

typedef struct http_client {
	storage_tls *tls;
	http_retry retry;
	pthread_mutex_t mu;
	void **idle; /* CURL * ready for reuse */
	size_t nidle;
	size_t cap;
} http_client;

/* store_ca and tls as storage_tls_new takes them. */
err_code http_client_init(http_client *h, const char *store_ca, const tls_settings *tls,
						  const http_retry *retry);
void http_client_free(http_client *h);
/* curl_global_init, once per process (before any thread uses libcurl). */
err_code http_global_init(void);

typedef struct http_response {
	long status;
	membuf body;			/* error bodies and small answers (capped at HTTP_BODY_MAX) */
	char etag[128];
	char code[64];			/* the store's error code (body or header), when there is one */
	char message[256];
	char request_id[96];
	char bucket_region[32]; /* x-amz-bucket-region */
	char generation[32];	/* x-goog-generation */
	char range[64];			/* Range (a GCS resumable upload's 308) */
	char lock_until[40];	/* x-amz-object-lock-retain-until-date (S3 Object Lock) */
	char content_md5[32];	/* Content-MD5 (Azure) */
	char *location;			/* Location (a GCS resumable upload session) */
	uint64_t content_length;
	bool have_length;
	time_t last_modified;
} http_response;

void http_response_free(http_response *r);
/* http_response_free after overwriting the body (an answer that carried credentials). */
void http_response_wipe(http_response *r);

typedef struct http_request {
	const char *method;
	const char *url;		  /* full URL, path encoded as canonical_uri */
	const char *host;		  /* Host header value, or NULL (curl's from the URL) */
	const char *canonical_uri;
	const http_kvs *query;	  /* may be NULL */
	http_kvs headers;		  /* extra headers to send (and sign) */
	const void *body;
	size_t body_len;
	const char *what;		  /* for messages: "GET s3://bucket/key" */
	sink *into;				  /* 2xx bodies go here (with Range resume); else into resp.body */
	/* with into: range_len > 0 asks for range_len bytes from range_off (a ranged read);
	 * fewer in a finished answer is E_CORRUPT */
	uint64_t range_off, range_len;
	const atomic_bool *cancel;
	/* a report of how the run ended (its failure too): sent even after a signal cancelled it */
	bool past_cancel;
} http_request;

/*
 * What a store adds to the core: how a request is authenticated, and what its answers mean.
 * Every member may be NULL (no authentication; S3-style XML errors; 5xx and 429 retried).
 */
typedef struct http_store_ops {
	const char *name; /* "s3", "gcs", "azure": in log lines */
	/* Adds authentication to one attempt's headers; refresh: the credentials just expired. */
	err_code (*authorize)(void *arg, const http_request *req, http_kvs *hdrs, bool refresh);
	/* Fills resp->code and resp->message from an error answer. */
	void (*parse_error)(http_response *resp);
	/* Retryable answers beyond 5xx and 429 (throttling codes sent as 400 or 403). */
	bool (*retryable)(const http_response *resp);
	/* The credentials expired: refresh them and send again (once). */
	bool (*expired)(const http_response *resp);
	/*
	 * A GET broken mid-body resumes with Range from where it broke; pin keeps a changed
	 * object from being spliced: headers (If-Match) or a new URL (NULL: the same one).
	 */
	char *(*pin)(const http_response *first, const char *url, http_kvs *hdrs);
} http_store_ops;

typedef struct http_auth {
	const http_store_ops *ops;
	void *arg;
} http_auth;

/*
 * Sends req with retries: connection errors, timeouts, 5xx, 429 and the store's throttling
 * codes are retried with exponential backoff and full jitter; a 2xx GET streaming into
 * req->into resumes with Range; expired credentials are refreshed once. Other answers are
 * returned as they are (resp->status). E_OK means an HTTP answer was received (any status);
 * E_IO when retries ran out, E_CANCELLED when req->cancel was set, or the error of req->into.
 * auth may be NULL.
 */
err_code http_do(http_client *h, const http_auth *auth, http_request *req, http_response *resp);

/*
 * One request with everything it owns, so an adapter sets a request up in one call and tears
 * it down in one: the strings the request points to, its query and its answer.
 */
typedef struct http_call {
	http_request req;
	http_response resp;
	http_kvs query;
	char *url, *host, *curi, *what;
} http_call;
/* Sets method and the owned strings (taken: freed by http_call_free); query is c->query. */
void http_call_set(http_call *c, const char *method, char *url, char *host, char *curi,
				   char *what);
void http_call_free(http_call *c);

/* The wait before retry attempt+1: uniform in [0, min(cap_ms, base_ms x 2^attempt)] ms. */
long http_backoff_ms(const http_retry *r, int attempt);
/* Sleeps ms, waking early when cancel (or a signal) asks to stop: false then. */
bool http_sleep_ms(long ms, const atomic_bool *cancel);
/* Milliseconds of the worst-case total backoff for a retry configuration. */
long http_retry_budget_ms(const http_retry *r);
/* The clock requests are signed with (fixed by the test seam). */
time_t http_now(void);

/*
 * The test seam, below the retry loop: when set, each attempt's request (with its final,
 * authenticated headers) goes to hook instead of libcurl, and the hook's answer is fed to the
 * same header and body parsing a network answer gets. cut > 0 breaks the connection after
 * that many body bytes; refuse fails the attempt as a refused connection. Signing uses the
 * clock at fixed_now when that is not 0. For unit tests and the signature cross-check only.
 */
typedef struct http_answer {
	long status;
	http_kvs headers;
	membuf body;
	size_t cut;
	bool refuse;
} http_answer;
typedef err_code (*http_hook)(void *arg, const http_request *req, const http_kvs *headers,
							  http_answer *a);
void http_set_test_hook(http_hook hook, void *arg, time_t fixed_now);
/* For hooks: the answer's body is s (copied). */
void http_answer_body(http_answer *a, const void *s, size_t len);

/* ------------------------------------------------------------------------------------------ */
/* Uploads in parts (upload.c)                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef struct http_part {
	int num;		 /* from 1 */
	uint64_t offset; /* of its first byte in the object */
	unsigned char *buf;
	size_t len;
	bool last;		 /* the object's final part */
	char *id;		 /* the store's name for it (ETag, block id): set by ops->part */
	void *up;		 /* upload.c's: where buf goes back */
} http_part;

/*
 * A store's upload protocol. An object that fits in one part is one request (single);
 * otherwise begin, then part for each (on uploader threads, several at once unless the
 * configuration says 1), then complete with every part in order; abort after any failure.
 */
typedef struct http_upload_ops {
	err_code (*single)(void *arg, const unsigned char *buf, size_t len);
	err_code (*begin)(void *arg);
	err_code (*part)(void *arg, http_part *part, const atomic_bool *cancel);
	err_code (*complete)(void *arg, http_part *const *parts, int nparts);
	void (*abort)(void *arg);
	void (*free)(void *arg);
} http_upload_ops;

typedef struct http_upload_cfg {
	size_t part_size;
	/* 0, or the size of every part while max_parts leaves room (doubling every twentieth
	 * of max_parts up to part_size): a long stream's upload starts after first_part bytes
	 * rather than a whole part, and more parts fit in flight in the same memory */
	size_t first_part;
	int concurrency; /* parts in flight; 1 sends them one after another, in order */
	int max_parts;
	budget *shared;	 /* buffers for parts after the first, shared by every upload */
	const char *what; /* for messages */
} http_upload_cfg;

/*
 * A sink that uploads what is written to it: finish publishes (single or complete), free
 * without finish aborts. Takes ownership of arg (ops->free). Memory: one buffer of its own,
 * the rest from cfg->shared.
 */
sink *http_upload_new(const http_upload_ops *ops, void *arg, const http_upload_cfg *cfg);
/* The size of the part after the first n parts of an upload with cfg. */
size_t http_part_size_after(const http_upload_cfg *cfg, int n);

/* ------------------------------------------------------------------------------------------ */
/* Listings and conditional puts (upload.c)                                                    */
/* ------------------------------------------------------------------------------------------ */

/* What a listing asks of a store: the objects below prefix (a full key: root and the folder). */
typedef struct http_listing {
	void *store;
	const char *prefix;
	bool recursive; /* every level, or the folder's own objects */
} http_listing;
/*
 * One page of a store's listing: the request for the page after token (NULL: the first),
 * its objects (full keys) into items and the next page's token into *next (NULL: the last).
 */
typedef err_code (*http_page_fn)(const http_listing *l, const char *token, int page,
								 obj_list *items, char **next);
/*
 * storage_list for every store: prefix (relative to root) read as a folder, every page
 * fetched, the objects below root added to out with root cut off (folder markers, keys ending
 * in '/', skipped); a server that repeats its token is an error, not a loop, naming the
 * request as request (such as "ListObjectsV2 s3://bucket/") followed by the full prefix.
 */
err_code http_list(void *store, const char *root, const char *prefix, bool recursive,
				   const char *request, http_page_fn fn, obj_list *out);
/* put_new's check before writing: E_OK when key is absent, E_EXISTS when present. */
err_code http_check_absent(storage *st, const char *key);

/* ------------------------------------------------------------------------------------------ */
/* Work in parallel (upload.c): n items, batch at a time, up to width batches in flight.       */
/* ------------------------------------------------------------------------------------------ */

typedef err_code (*http_batch_fn)(void *arg, size_t from, size_t n);
err_code http_batches(size_t n, size_t batch, int width, http_batch_fn fn, void *arg);

/* ------------------------------------------------------------------------------------------ */
/* Bearer tokens (token.c): OAuth2 access tokens cached, refreshed before they expire.         */
/* ------------------------------------------------------------------------------------------ */

typedef struct http_token {
	char *value;
	time_t expires; /* 0 = unknown: refreshed on an expired-token answer only */
} http_token;

typedef err_code (*http_token_fetch)(void *arg, http_token *out);

typedef struct http_token_cache {
	pthread_mutex_t mu;
	http_token cur;
	time_t obtained;
	http_token_fetch fetch;
	void *arg;
	const char *what; /* for messages: "GCS metadata server token" */
} http_token_cache;

void http_token_cache_init(http_token_cache *c, http_token_fetch fetch, void *arg,
						   const char *what);
/* Adds "authorization: Bearer ..." to hdrs, fetching a token first when needed. */
err_code http_token_authorize(http_token_cache *c, http_kvs *hdrs, bool refresh);
void http_token_cache_free(http_token_cache *c);
void http_token_free(http_token *t);
/*
 * An OAuth2 token answer: {"access_token": ..., "expires_in": N or "N", "expires_on": ...}
 * (Google, Azure AD, the metadata servers). E_CORRUPT when it is none.
 */
err_code http_token_parse(const char *doc, size_t len, time_t now, http_token *out);
/* POST form or GET with headers to a token endpoint, through the core with its retries. */
err_code http_token_request(http_client *h, const char *method, const char *url,
							const char *form, const http_kvs *headers, const char *what,
							http_token *out);

#endif
