/*
 * s3: the private interface between the S3 backend's files: SigV4 signing (s3sign.c), S3 XML
 * (s3xml.c), credentials (s3cred.c), HTTP requests with retries (s3http.c) and the storage
 * operations (s3.c). Only storage.c and tests include it; the rest of walc sees storage.h.
 */
#ifndef WALC_INTERNAL_STORAGE_S3_H
#define WALC_INTERNAL_STORAGE_S3_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "internal/core/core.h"
#include "internal/storage/storage.h"

/* Opens the S3 backend for cfg->s3_prefix, reading and validating the S3_* / AWS_* variables. */
err_code storage_s3_open(const config *cfg, storage **out);

/*
 * Deletes keys (relative to the repository root) with DeleteObjects, 1000 per request. Absent
 * keys are not an error. st must be an S3 storage.
 */
err_code s3_remove_many(storage *st, const char *const *keys, size_t n);

/* ------------------------------------------------------------------------------------------ */
/* Small containers                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* Ordered name/value pairs: HTTP headers (names lower-case) or query parameters (raw). */
typedef struct s3_kv {
	char *name;
	char *value;
} s3_kv;

typedef struct s3_kvs {
	s3_kv *v;
	size_t n;
	size_t cap;
} s3_kvs;

void s3_kvs_add(s3_kvs *l, const char *name, const char *value);
/* The value for name (case-insensitive), or NULL. */
const char *s3_kvs_get(const s3_kvs *l, const char *name);
void s3_kvs_free(s3_kvs *l);

/* ------------------------------------------------------------------------------------------ */
/* SigV4 (s3sign.c)                                                                           */
/* ------------------------------------------------------------------------------------------ */

#define S3_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
#define S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct s3_creds {
	char *access_key;
	char *secret_key;
	char *token;	/* session token or NULL */
	time_t expires; /* 0 = does not expire */
	const char *source; /* for messages: "environment", "web identity", ... (static string) */
} s3_creds;

void s3_creds_free(s3_creds *c);
void s3_creds_copy(s3_creds *dst, const s3_creds *src);

/* RFC 3986 percent-encoding as SigV4 wants it: A-Z a-z 0-9 - . _ ~ kept, '/' kept when asked. */
char *s3_uri_encode(const char *s, bool keep_slash);
/* Decodes %XX (and nothing else); NULL on a malformed escape. */
char *s3_uri_decode(const char *s);
void s3_sha256_hex(const void *data, size_t len, char out[65]);
/* Base64 of the MD5 of data (Content-MD5). */
void s3_md5_base64(const void *data, size_t len, char out[25]);
char *s3_base64(const void *data, size_t len);

/* The canonical query string: parameters encoded, sorted by name then value. */
char *s3_canonical_query(const s3_kvs *query);

/*
 * Signs a request. headers must hold "host" and every other header to be signed (all that are
 * passed here are signed); the signer adds x-amz-date, x-amz-content-sha256,
 * x-amz-security-token (with a session token) and authorization. canonical_uri is the path
 * exactly as sent (already encoded). payload_hash is a hex SHA-256 or S3_UNSIGNED_PAYLOAD.
 * When canonical_out is not NULL it receives the canonical request (for tests).
 */
void s3_sign(const s3_creds *creds, const char *region, const char *service, time_t now,
			 const char *method, const char *canonical_uri, const s3_kvs *query, s3_kvs *headers,
			 const char *payload_hash, char **canonical_out);

/* True for header names whose values are secret (masked in logs). */
bool s3_header_is_secret(const char *name);

/* ------------------------------------------------------------------------------------------ */
/* XML (s3xml.c): expat with a size cap, no DTDs, bounded depth and text.                      */
/* ------------------------------------------------------------------------------------------ */

#define S3_XML_MAX (8u << 20)		/* largest XML document walc accepts */
#define S3_XML_TEXT_MAX (64u << 10) /* largest text of one element */

/*
 * Calls cb at the end of each element with its path ("/ListBucketResult/Contents/Key", local
 * names) and its text (NUL-terminated, only direct character data). E_CORRUPT on malformed
 * XML, a DOCTYPE, too deep nesting or too much text.
 */
typedef void (*s3_xml_cb)(void *ctx, const char *path, const char *text);
err_code s3_xml_parse(const char *doc, size_t len, s3_xml_cb cb, void *ctx);

/* <Error><Code>..</Code><Message>..</Message></Error>: true when doc is one. */
bool s3_xml_error(const char *doc, size_t len, char *code, size_t codesz, char *msg,
				  size_t msgsz);

typedef struct s3_list_page {
	obj_list items; /* keys as stored (URL-decoded when the server encoded them) */
	bool truncated;
	char *next_token;
} s3_list_page;
err_code s3_xml_list(const char *doc, size_t len, s3_list_page *out);
void s3_list_page_free(s3_list_page *p);

/* InitiateMultipartUploadResult/UploadId */
err_code s3_xml_upload_id(const char *doc, size_t len, char **upload_id);
/* DeleteResult: the number of <Error> entries; the first one's key and code into first. */
err_code s3_xml_delete_errors(const char *doc, size_t len, size_t *nerrors, char **first);
/* AssumeRoleWithWebIdentityResponse credentials. */
err_code s3_xml_sts_creds(const char *doc, size_t len, s3_creds *out);

/* "2024-01-02T03:04:05.678Z" (ISO 8601, UTC). */
bool s3_parse_iso8601(const char *s, time_t *t, long *nsec);
/* "Tue, 02 Jan 2024 03:04:05 GMT" (RFC 7231). */
bool s3_parse_http_date(const char *s, time_t *t);

/* ------------------------------------------------------------------------------------------ */
/* Credentials (s3cred.c)                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct s3_http s3_http;

typedef struct s3_credprov {
	pthread_mutex_t mu;
	s3_creds cur;
	bool have;
	time_t obtained;
	enum { S3_CRED_NONE, S3_CRED_STATIC, S3_CRED_WEBID, S3_CRED_FILE, S3_CRED_IMDS,
		   S3_CRED_ECS } kind;
	/* web identity */
	char *token_file;
	char *role_arn;
	char *session_name;
	char *sts_endpoint;
	/* shared file */
	char *file;
	char *profile;
	/* container (ECS, EKS Pod Identity) and instance metadata endpoints */
	char *ecs_url;
	char *ecs_token;
	char *ecs_token_file; /* read at every refresh: the token rotates */
	char *imds_endpoint;
	/* timeouts and TLS for credential endpoints */
	s3_http *http;
} s3_credprov;

/* Decides the source from the settings, copying what it needs (no network yet). */
err_code s3_credprov_init(s3_credprov *p, const s3_settings *set, const char *region,
						  s3_http *http);
/* Current credentials, fetched or refreshed when needed. force: refresh now (ExpiredToken). */
err_code s3_credprov_get(s3_credprov *p, bool force, s3_creds *out);
void s3_credprov_free(s3_credprov *p);

/* ------------------------------------------------------------------------------------------ */
/* HTTP (s3http.c): libcurl easy handles kept for reuse, retries with backoff and full jitter. */
/* ------------------------------------------------------------------------------------------ */

typedef struct s3_retry {
	int max_retries;	  /* retries after the first attempt */
	long base_ms;		  /* first backoff cap */
	long cap_ms;		  /* largest backoff */
	long connect_timeout; /* seconds */
	long low_speed_time;  /* seconds below 1 byte/s before a transfer is abandoned */
} s3_retry;

struct s3_http {
	char *ca_file;
	s3_retry retry;
	pthread_mutex_t mu;
	void **idle; /* CURL * ready for reuse */
	size_t nidle;
	size_t cap;
};

void s3_http_init(s3_http *h, const char *ca_file, const s3_retry *retry);
void s3_http_free(s3_http *h);

typedef struct s3_response {
	long status;
	membuf body;			/* error bodies and XML answers (capped at S3_XML_MAX) */
	char etag[128];
	char code[64];			/* S3 error code from the body, when there is one */
	char message[256];
	char request_id[96];
	char bucket_region[32]; /* x-amz-bucket-region */
	uint64_t content_length;
	bool have_length;
	time_t last_modified;
} s3_response;

void s3_response_free(s3_response *r);

typedef struct s3_request {
	const char *method;
	const char *url;		  /* full URL, path encoded as canonical_uri */
	const char *host;		  /* Host header value */
	const char *canonical_uri;
	const s3_kvs *query;	  /* may be NULL */
	s3_kvs headers;			  /* extra headers to send and sign */
	const void *body;
	size_t body_len;
	bool sign;				  /* SigV4 with the storage's credentials */
	const char *what;		  /* for messages: "GET s3://bucket/key" */
	sink *into;				  /* 2xx bodies go here (with Range resume); else into resp.body */
	const atomic_bool *cancel;
} s3_request;

/* Signing context for s3_http_do: credentials provider and region. */
typedef struct s3_signer {
	s3_credprov *creds;
	const char *region;
} s3_signer;

/*
 * Sends req with retries: connection errors, timeouts, 5xx, 429 and SlowDown are retried with
 * exponential backoff and full jitter; other answers are returned as they are (resp->status).
 * E_OK means an HTTP answer was received (any status); E_IO when retries ran out,
 * E_CANCELLED when req->cancel was set, or the error of req->into.
 */
err_code s3_http_do(s3_http *h, const s3_signer *sg, s3_request *req, s3_response *resp);

/*
 * Test hook: when set, s3_http_do hands each signed request to hook instead of the network
 * (the hook fills resp, and writes 2xx bodies into req->into itself), and signs with the clock
 * at fixed_now when that is not 0. For unit tests and the signature cross-check only.
 */
typedef err_code (*s3_http_hook)(void *arg, const s3_request *req, const s3_kvs *headers,
								 s3_response *resp);
void s3_http_set_test_hook(s3_http_hook hook, void *arg, time_t fixed_now);

/* Milliseconds of the worst-case total backoff for a retry configuration. */
long s3_retry_budget_ms(const s3_retry *r);

#endif
