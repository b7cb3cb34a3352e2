/*
 * s3: the private interface between the S3 adapter's files: SigV4 signing (s3sign.c), S3 XML
 * (s3xml.c), credentials (s3cred.c) and the storage operations (s3.c; writes and batched
 * deletes in s3put.c), all on the HTTP object-store core (http.h). Only storage.c and tests
 * include it.
 */
#ifndef WALC_INTERNAL_STORAGE_S3_H
#define WALC_INTERNAL_STORAGE_S3_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "internal/core/core.h"
#include "internal/storage/http/http.h"
#include "internal/storage/storage.h"

/* Opens the S3 backend for cfg->s3_prefix, reading and validating the S3_* / AWS_* variables. */
err_code storage_s3_open(const storage_settings *cfg, storage **out);


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

/* The canonical query string: parameters encoded, sorted by name then value. */
char *s3_canonical_query(const http_kvs *query);

/*
 * Signs a request. headers must hold "host" and every other header to be signed (all that are
 * passed here are signed); the signer adds x-amz-date, x-amz-content-sha256,
 * x-amz-security-token (with a session token) and authorization. canonical_uri is the path
 * exactly as sent (already encoded). payload_hash is a hex SHA-256 or S3_UNSIGNED_PAYLOAD.
 * When canonical_out is not NULL it receives the canonical request (for tests).
 */
void s3_sign(const s3_creds *creds, const char *region, const char *service, time_t now,
			 const char *method, const char *canonical_uri, const http_kvs *query, http_kvs *headers,
			 const char *payload_hash, char **canonical_out);

/* ------------------------------------------------------------------------------------------ */
/* S3 XML answers (s3xml.c)                                                                   */
/* ------------------------------------------------------------------------------------------ */

typedef struct s3_list_page {
	obj_list items; /* keys as stored (URL-decoded when the server encoded them) */
	bool truncated;
	char *next_token;
} s3_list_page;
err_code s3_xml_list(const char *doc, size_t len, s3_list_page *out);
void s3_list_page_free(s3_list_page *p);

/* InitiateMultipartUploadResult/UploadId */
err_code s3_xml_upload_id(const char *doc, size_t len, char **upload_id);
/* A quiet DeleteObjects request body for keys (below root, which is prefixed to each). */
char *s3_xml_delete_request(const char *root, const char *const *keys, size_t n, size_t *len);
/* DeleteResult: the number of <Error> entries; the first one's key and code into first. */
err_code s3_xml_delete_errors(const char *doc, size_t len, size_t *nerrors, char **first);
/* AssumeRoleWithWebIdentityResponse credentials. */
err_code s3_xml_sts_creds(const char *doc, size_t len, s3_creds *out);

/* ------------------------------------------------------------------------------------------ */
/* Credentials (s3cred.c)                                                                     */
/* ------------------------------------------------------------------------------------------ */

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
	http_client *http;
} s3_credprov;

/* Decides the source from the settings, copying what it needs (no network yet). */
err_code s3_credprov_init(s3_credprov *p, const s3_settings *set, const char *region,
						  http_client *http);
/* Current credentials, fetched or refreshed when needed. force: refresh now (ExpiredToken). */
err_code s3_credprov_get(s3_credprov *p, bool force, s3_creds *out);
void s3_credprov_free(s3_credprov *p);

/* ------------------------------------------------------------------------------------------ */
/* The S3 storage (s3.c), its uploads and batched deletes (s3put.c)                           */
/* ------------------------------------------------------------------------------------------ */

typedef struct s3_storage {
	storage base;
	char *bucket;
	char *root;		  /* key prefix, "" or ending in '/' */
	char *describe;	  /* s3://bucket/root */
	char *scheme;	  /* http or https */
	char *hostport;	  /* endpoint host[:port] */
	bool path_style;
	char *region;
	char *sse;		  /* AES256 / aws:kms or NULL */
	char *sse_kms_id;
	char *ssec_key_b64;	 /* S3_SSE_C: customer key, base64 */
	char *ssec_md5_b64;
	char *storage_class;
	char *lock_mode;	/* S3 Object Lock on every new object (S3_RETENTION_*), or NULL */
	long lock_seconds;
	int bucket_locks;	/* the bucket has Object Lock: 1 yes, 0 no, -1 not asked yet */
	bool detect_region; /* AWS without AWS_REGION: ask the bucket where it lives */
	atomic_int bucket_seen; /* a HEAD of the bucket answered 200 or 403 */
	size_t part_size;
	int concurrency;
	size_t delete_batch; /* keys per DeleteObjects request */
	budget *parts; /* buffers for multipart parts after the first, shared by every upload */
	http_client http;
	s3_credprov creds;
	bool creds_init;
	http_auth auth;
} s3_storage;

/* A request to the bucket (s3key NULL) or an object (full key); c->query set before. */
void s3_call_init(s3_storage *s, http_call *c, const char *method, const char *s3key);
/* Sends it (signed, with retries). */
err_code s3_call(s3_storage *s, http_call *c);
/* The error for an unexpected answer, naming the bucket and the S3 error code. */
err_code s3_answer_error(s3_storage *s, const char *what, const http_response *r);
/* SSE-C: the customer key goes with every write and read of the object's data. */
void s3_add_ssec_headers(const s3_storage *s, http_kvs *h);
char *s3_full_key(const s3_storage *s, const char *key);
err_code s3_put_open(storage *st, const char *key, sink **out);
/* A put that never replaces an existing object. */
err_code s3_put_new(storage *st, const char *key, sink **out);
/* storage_put_long: the first parts 5 MiB (S3's least), growing to S3_MAX_PART_SIZE. */
err_code s3_put_long(storage *st, const char *key, sink **out);
/* DeleteObjects, S3_DELETE_BATCH_SIZE (1000) keys a request, WALG_UPLOAD_CONCURRENCY at once. */
err_code s3_remove_many(storage *st, const char *const *keys, size_t n);
err_code s3_locked_until(storage *st, const char *const *keys, size_t n, time_t *until);
/* storage_copy inside one endpoint (CopyObject). */
err_code s3_copy_from(storage *st, storage *src_st, const char *key, uint64_t size, bool *done);

#endif
