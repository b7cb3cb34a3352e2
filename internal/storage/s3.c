/*
 * S3 storage: WAL-G's WALG_S3_PREFIX repository on AWS S3 or any S3-compatible server. Small
 * objects go up in one PUT; a stream larger than one part becomes a multipart upload whose
 * parts are uploaded in parallel from a fixed buffer pool, completed only when every part
 * succeeded and aborted otherwise, so an object is complete or absent.
 */
#include "internal/storage/s3.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "internal/pipe/pipe.h"

#define MIB (1024ull * 1024)
#define S3_MIN_PART (5 * MIB)
#define S3_MAX_PART (5 * 1024 * MIB)
#define S3_DEFAULT_PART (20 * MIB)
#define S3_PARTS_MEMORY (24 * MIB)
#define S3_MAX_PARTS 10000
#define S3_DELETE_BATCH 1000

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
	bool detect_region; /* AWS without AWS_REGION: ask the bucket where it lives */
	atomic_int bucket_seen; /* a HEAD of the bucket answered 200 or 403 */
	size_t part_size;
	int concurrency;
	pool *parts; /* buffers for multipart parts after the first, shared by every upload */
	s3_http http;
	s3_credprov creds;
	s3_signer signer;
} s3_storage;

static const storage_ops s3_ops;

/* ------------------------------------------------------------------------------------------ */
/* Configuration                                                                              */
/* ------------------------------------------------------------------------------------------ */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_ALL);
}

static char *trim_slashes(const char *s)
{
	while (*s == '/')
		s++;
	size_t n = strlen(s);
	while (n > 0 && s[n - 1] == '/')
		n--;
	char *out = xmalloc(n + 1);
	memcpy(out, s, n);
	out[n] = '\0';
	return out;
}

static bool is_ip_literal(const char *host)
{
	if (host[0] == '[')
		return true;
	for (const char *p = host; *p && *p != ':'; p++)
		if (!isdigit((unsigned char)*p) && *p != '.')
			return false;
	return true;
}

static err_code parse_endpoint(s3_storage *s, const char *ep, const char *used)
{
	const char *rest = ep;
	if (str_has_prefix(ep, "https://")) {
		s->scheme = xstrdup("https");
		rest = ep + 8;
	} else if (str_has_prefix(ep, "http://")) {
		s->scheme = xstrdup("http");
		rest = ep + 7;
	} else if (strstr(ep, "://") != NULL) {
		return err_set(E_CONFIG, "%s: expected http://host[:port] or https://host[:port], got "
								 "\"%s\"",
					   used, ep);
	} else {
		s->scheme = xstrdup("https");
	}
	size_t n = strcspn(rest, "/?#");
	if (n == 0 || (rest[n] != '\0' && strspn(rest + n, "/") != strlen(rest + n)))
		return err_set(E_CONFIG, "%s: expected http://host[:port] or https://host[:port] "
								 "without a path, got \"%s\"",
					   used, ep);
	s->hostport = xmalloc(n + 1);
	memcpy(s->hostport, rest, n);
	s->hostport[n] = '\0';
	for (const char *p = s->hostport; *p; p++)
		if (!isalnum((unsigned char)*p) && strchr(".-_:[]", *p) == NULL)
			return err_set(E_CONFIG, "%s: bad host \"%s\"", used, s->hostport);
	const char *colon = strrchr(s->hostport, ':');
	if (colon != NULL && s->hostport[0] != '[') {
		char *end;
		long port = strtol(colon + 1, &end, 10);
		if (*end != '\0' || port < 1 || port > 65535)
			return err_set(E_CONFIG, "%s: bad port in \"%s\"", used, ep);
	}
	return E_OK;
}

static bool valid_bucket(const char *b)
{
	size_t n = strlen(b);
	if (n < 1 || n > 255)
		return false;
	for (const char *p = b; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
			return false;
	return true;
}

static err_code s3_configure(s3_storage *s, const config *cfg)
{
	const char *pfx = cfg->s3_prefix;
	if (!str_has_prefix(pfx, "s3://"))
		return err_set(E_CONFIG, "WALG_S3_PREFIX: expected s3://bucket/path, got \"%s\"", pfx);
	const char *b = pfx + 5;
	size_t bl = strcspn(b, "/");
	s->bucket = xmalloc(bl + 1);
	memcpy(s->bucket, b, bl);
	s->bucket[bl] = '\0';
	if (!valid_bucket(s->bucket))
		return err_set(E_CONFIG, "WALG_S3_PREFIX: bad bucket name \"%s\" (letters, digits, '.', "
								 "'-' and '_')",
					   s->bucket);
	char *path = trim_slashes(b + bl);
	char *sp = cfg->storage_prefix ? trim_slashes(cfg->storage_prefix) : xstrdup("");
	if (path[0] && sp[0])
		s->root = xasprintf("%s/%s/", path, sp);
	else if (path[0] || sp[0])
		s->root = xasprintf("%s/", path[0] ? path : sp);
	else
		s->root = xstrdup("");
	free(path);
	free(sp);
	size_t rl = strlen(s->root);
	s->describe = xasprintf("s3://%s/%.*s", s->bucket, (int)(rl ? rl - 1 : 0), s->root);

	const s3_settings *set = &cfg->s3;
	const char *region = set->region;
	if (region != NULL) {
		for (const char *p = region; *p; p++)
			if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_')
				return err_set(E_CONFIG, "AWS_REGION: expected a region name like us-east-1, "
										 "got \"%s\"",
							   region);
		s->region = xstrdup(region);
	} else {
		s->region = xstrdup("us-east-1");
	}

	const char *ep = set->endpoint;
	s->detect_region = region == NULL && ep == NULL;
	if (ep != NULL)
		TRY(parse_endpoint(s, ep, "AWS_ENDPOINT"));
	else {
		s->scheme = xstrdup("https");
		s->hostport = xasprintf("s3.%s.amazonaws.com", s->region);
	}
	s->path_style = set->force_path_style;
	/* Virtual-hosted names cannot work on an IP address, nor over TLS with a dotted bucket. */
	if (!s->path_style && is_ip_literal(s->hostport)) {
		log_debug("s3: endpoint %s is an IP address: using path-style requests", s->hostport);
		s->path_style = true;
	}
	if (!s->path_style && strchr(s->bucket, '.') && strcmp(s->scheme, "https") == 0) {
		log_debug("s3: bucket %s has a dot: using path-style requests", s->bucket);
		s->path_style = true;
	}
	if (!s->path_style && (strchr(s->bucket, '_') || strpbrk(s->bucket, "ABCDEFGHIJKLMNOPQRSTUVWXYZ")))
		s->path_style = true;

	const char *sse = set->sse;
	const char *kms = set->sse_kms_id;
	if (sse != NULL) {
		if (strcmp(sse, "AES256") != 0 && strcmp(sse, "aws:kms") != 0)
			return err_set(E_CONFIG, "S3_SSE: expected AES256 or aws:kms, got \"%s\"", sse);
		if (strcmp(sse, "aws:kms") == 0 && kms == NULL)
			return err_set(E_CONFIG, "S3_SSE=aws:kms needs S3_SSE_KMS_ID (the KMS key id)");
		if (strcmp(sse, "AES256") == 0 && kms != NULL)
			return err_set(E_CONFIG, "S3_SSE_KMS_ID is set but S3_SSE is AES256: set "
									 "S3_SSE=aws:kms or unset S3_SSE_KMS_ID");
		s->sse = xstrdup(sse);
	} else if (kms != NULL) {
		return err_set(E_CONFIG, "S3_SSE_KMS_ID is set but S3_SSE is not: set S3_SSE=aws:kms");
	}
	if (kms != NULL) {
		for (const char *p = kms; *p; p++)
			if ((unsigned char)*p < 0x21 || *p == 0x7f)
				return err_set(E_CONFIG, "S3_SSE_KMS_ID: contains a blank or control character");
		s->sse_kms_id = xstrdup(kms);
	}

	const char *ssec = set->sse_c;
	if (ssec != NULL) {
		if (strlen(ssec) != 32)
			return err_set(E_CONFIG, "S3_SSE_C: expected a 32-byte AES-256 customer key, got "
									 "%zu bytes",
						   strlen(ssec));
		if (s->sse != NULL)
			return err_set(E_CONFIG, "S3_SSE_C and S3_SSE are both set: use one of them");
		s->ssec_key_b64 = s3_base64(ssec, 32);
		char md5[25];
		s3_md5_base64(ssec, 32, md5);
		s->ssec_md5_b64 = xstrdup(md5);
	}

	const char *sc = set->storage_class;
	if (sc != NULL) {
		for (const char *p = sc; *p; p++)
			if (!isupper((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '_')
				return err_set(E_CONFIG, "S3_STORAGE_CLASS: expected a storage class like "
										 "STANDARD or STANDARD_IA, got \"%s\"",
							   sc);
		s->storage_class = xstrdup(sc);
	}

	/* The table bounds it (5 MiB to 5 GiB); an unset one (a hand-made config) is the default. */
	s->part_size = set->max_part_size > 0 ? (size_t)set->max_part_size : S3_DEFAULT_PART;
	s->concurrency = cfg->upload_concurrency > 0 ? cfg->upload_concurrency : 16;
	/*
	 * Each upload fills its first part in a buffer of its own (an object that fits is one PUT)
	 * and reuses that buffer for later parts when it is free again; other parts come from one
	 * pool for the whole process, S3_PARTS_MEMORY / part size buffers (at least 1), so a
	 * backup's memory does not grow with the number or length of its streams. Smaller parts
	 * mean more of them in flight in the same memory.
	 */
	size_t nparts = S3_PARTS_MEMORY / s->part_size;
	if (nparts < 1)
		nparts = 1;
	if (nparts > (size_t)s->concurrency)
		nparts = (size_t)s->concurrency;
	s->parts = pool_new(nparts, s->part_size);

	s3_retry rt = { 0 };
	rt.max_retries = (int)set->max_retries;
	rt.connect_timeout = set->connect_timeout > 0 ? set->connect_timeout : 10;
	rt.low_speed_time = set->low_speed_timeout > 0 ? set->low_speed_timeout : 30;
	rt.base_ms = 100;
	rt.cap_ms = 5000;

	const char *ca = set->ca_cert_file;
	if (ca != NULL && access(ca, R_OK) != 0)
		return err_errno(E_CONFIG, errno, "S3_CA_CERT_FILE: cannot read %s", ca);
	s3_http_init(&s->http, ca, &rt);
	TRY(s3_credprov_init(&s->creds, set, s->region, &s->http));
	s->signer.creds = &s->creds;
	s->signer.region = s->region;
	return E_OK;
}

static void s3_free(storage *st)
{
	s3_storage *s = (s3_storage *)st;
	if (s->signer.creds != NULL || s->creds.http != NULL)
		s3_credprov_free(&s->creds);
	s3_http_free(&s->http);
	pool_free(s->parts);
	free(s->bucket);
	free(s->root);
	free(s->describe);
	free(s->scheme);
	free(s->hostport);
	free(s->region);
	free(s->sse);
	free(s->sse_kms_id);
	free(s->ssec_key_b64);
	free(s->ssec_md5_b64);
	free(s->storage_class);
	free(s);
}

static void detect_region(s3_storage *s);

err_code storage_s3_open(const config *cfg, storage **out)
{
	*out = NULL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return err_set(E_FAIL, "curl_global_init failed: %s", curl_easy_strerror(curl_init_rc));
	s3_storage *s = xcalloc(1, sizeof(*s));
	s->base.ops = &s3_ops;
	err_code rc = s3_configure(s, cfg);
	if (rc != E_OK) {
		s3_free(&s->base);
		return rc;
	}
	if (s->detect_region)
		detect_region(s);
	log_debug("s3: %s via %s://%s (%s, region %s), part size %zu, upload concurrency %d, "
			  "%d retries (backoff budget %ld ms)",
			  s->describe, s->scheme, s->hostport, s->path_style ? "path style" : "virtual host",
			  s->region, s->part_size, s->concurrency, s->http.retry.max_retries,
			  s3_retry_budget_ms(&s->http.retry));
	*out = &s->base;
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Requests                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Where a request goes: URL, Host header and canonical URI for an object (or the bucket). */
typedef struct s3_target {
	char *url;
	char *host;
	char *curi;
	char *what;
} s3_target;

static void target_init(s3_storage *s, s3_target *t, const char *method, const char *s3key,
						const s3_kvs *query)
{
	char *ekey = s3key ? s3_uri_encode(s3key, true) : xstrdup("");
	if (s->path_style) {
		t->host = xstrdup(s->hostport);
		t->curi = s3key ? xasprintf("/%s/%s", s->bucket, ekey) : xasprintf("/%s", s->bucket);
	} else {
		t->host = xasprintf("%s.%s", s->bucket, s->hostport);
		t->curi = xasprintf("/%s", ekey);
	}
	free(ekey);
	char *q = s3_canonical_query(query);
	t->url = xasprintf("%s://%s%s%s%s", s->scheme, t->host, t->curi, q[0] ? "?" : "", q);
	free(q);
	t->what = xasprintf("%s s3://%s/%s", method, s->bucket, s3key ? s3key : "");
}

static void target_free(s3_target *t)
{
	free(t->url);
	free(t->host);
	free(t->curi);
	free(t->what);
}

static void request_init(s3_request *r, const s3_target *t, const char *method,
						 const s3_kvs *query)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->url = t->url;
	r->host = t->host;
	r->canonical_uri = t->curi;
	r->query = query;
	r->sign = true;
	r->what = t->what;
}

/*
 * AWS without AWS_REGION (WAL-G asks GetBucketLocation): a HEAD of the bucket answers with
 * x-amz-bucket-region whatever region it was signed for (also with 301 and 403).
 */
static void detect_region(s3_storage *s)
{
	s3_target t;
	target_init(s, &t, "HEAD", NULL, NULL);
	s3_request req;
	request_init(&req, &t, "HEAD", NULL);
	s3_retry saved = s->http.retry;
	if (s->http.retry.max_retries > 2)
		s->http.retry.max_retries = 2;
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	s->http.retry = saved;
	if (rc == E_OK && resp.bucket_region[0] != '\0' && strcmp(resp.bucket_region, s->region) != 0) {
		log_debug("s3: bucket %s is in region %s", s->bucket, resp.bucket_region);
		free(s->region);
		s->region = xstrdup(resp.bucket_region);
		free(s->hostport);
		s->hostport = xasprintf("s3.%s.amazonaws.com", s->region);
		s->signer.region = s->region;
	} else if (rc != E_OK) {
		log_debug("s3: could not ask bucket %s for its region (%s); using %s", s->bucket,
				  err_msg(), s->region);
		err_clear();
	}
	s3_response_free(&resp);
	target_free(&t);
}

/* The error for an unexpected answer, naming the bucket and the S3 error code. */
static err_code answer_error(s3_storage *s, const char *what, const s3_response *r)
{
	const char *hint = "";
	if (strcmp(r->code, "SignatureDoesNotMatch") == 0)
		hint = " (check AWS_SECRET_ACCESS_KEY)";
	else if (strcmp(r->code, "InvalidAccessKeyId") == 0)
		hint = " (check AWS_ACCESS_KEY_ID)";
	else if (strcmp(r->code, "NoSuchBucket") == 0)
		hint = " (the bucket does not exist)";
	else if (strcmp(r->code, "AccessDenied") == 0)
		hint = " (the credentials lack permission for this bucket)";
	else if (strcmp(r->code, "RequestTimeTooSkewed") == 0)
		hint = " (the system clock is off)";
	char region[128] = "";
	if (r->bucket_region[0] && strcmp(r->bucket_region, s->region) != 0)
		snprintf(region, sizeof(region), " (bucket is in region %s: set AWS_REGION=%s)",
				 r->bucket_region, r->bucket_region);
	/* A missing bucket is a configuration problem, never "no such object" (exit 74). */
	bool notfound = r->status == 404 && strcmp(r->code, "NoSuchBucket") != 0;
	return err_set(notfound ? E_NOTFOUND : E_IO, "%s: bucket %s: HTTP %ld %s%s%s%s%s%s%s",
				   what, s->bucket, r->status, r->code[0] ? r->code : "(no S3 error code)",
				   r->message[0] ? ": " : "", r->message, hint, region,
				   r->request_id[0] ? ", request id " : "", r->request_id);
}

static char *full_key(s3_storage *s, const char *key)
{
	return xasprintf("%s%s", s->root, key);
}

/* ------------------------------------------------------------------------------------------ */
/* put: single PUT or parallel multipart upload                                               */
/* ------------------------------------------------------------------------------------------ */

typedef struct s3_part {
	int num;
	unsigned char *buf;
	size_t len;
	pool *from;
	char *etag;
	struct s3_put *put;
} s3_part;

typedef struct s3_put {
	sink base;
	s3_storage *s;
	char *key; /* full S3 key */
	pool *first; /* one buffer: enough for an object that fits in one part */
	unsigned char *buf;
	pool *buf_from;
	size_t len;
	/* multipart */
	char *upload_id;
	s3_part **parts;
	int nparts;
	chan *ch;
	group *g;
	int nworkers;
	atomic_bool cancel;
	bool done;
	bool aborted;
	bool exclusive; /* put_new: never replace an existing object */
} s3_put;

/* SSE-C: the customer key goes with every write and read of the object's data. */
static void add_ssec_headers(const s3_storage *s, s3_kvs *h)
{
	if (s->ssec_key_b64 == NULL)
		return;
	s3_kvs_add(h, "x-amz-server-side-encryption-customer-algorithm", "AES256");
	s3_kvs_add(h, "x-amz-server-side-encryption-customer-key", s->ssec_key_b64);
	s3_kvs_add(h, "x-amz-server-side-encryption-customer-key-md5", s->ssec_md5_b64);
}

static void add_upload_headers(s3_storage *s, s3_kvs *h)
{
	add_ssec_headers(s, h);
	if (s->sse != NULL)
		s3_kvs_add(h, "x-amz-server-side-encryption", s->sse);
	if (s->sse_kms_id != NULL)
		s3_kvs_add(h, "x-amz-server-side-encryption-aws-kms-key-id", s->sse_kms_id);
	if (s->storage_class != NULL)
		s3_kvs_add(h, "x-amz-storage-class", s->storage_class);
}

/*
 * A conditional PUT was refused because the key exists. That object may be ours: a retried
 * PUT whose first answer was lost. Same MD5 (the ETag of a plain single PUT) means it is.
 */
static err_code exists_unless_ours(s3_put *p)
{
	s3_storage *s = p->s;
	s3_target t;
	target_init(s, &t, "HEAD", p->key, NULL);
	s3_request req;
	request_init(&req, &t, "HEAD", NULL);
	add_ssec_headers(s, &req.headers);
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	s3_kvs_free(&req.headers);
	bool ours = false;
	if (rc == E_OK && resp.status == 200 && resp.content_length == p->len) {
		unsigned char md[16];
		unsigned int ml = 0;
		EVP_Digest(p->buf, p->len, md, &ml, EVP_md5(), NULL);
		char hex[35] = "\"";
		for (int i = 0; i < 16; i++)
			snprintf(hex + 1 + 2 * i, 3, "%02x", md[i]);
		hex[33] = '"';
		hex[34] = '\0';
		ours = strcmp(resp.etag, hex) == 0;
	}
	s3_response_free(&resp);
	target_free(&t);
	if (ours)
		return E_OK;
	return err_set(E_EXISTS, "s3://%s/%s already exists", s->bucket, p->key);
}

static err_code put_single(s3_put *p)
{
	s3_storage *s = p->s;
	s3_target t;
	target_init(s, &t, "PUT", p->key, NULL);
	s3_request req;
	request_init(&req, &t, "PUT", NULL);
	req.body = p->buf;
	req.body_len = p->len;
	s3_kvs_add(&req.headers, "content-type", "application/octet-stream");
	add_upload_headers(s, &req.headers);
	if (p->exclusive)
		s3_kvs_add(&req.headers, "if-none-match", "*");
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status == 412 && p->exclusive)
		rc = exists_unless_ours(p);
	else if (rc == E_OK && resp.status != 200)
		rc = answer_error(s, t.what, &resp);
	if (rc == E_OK)
		log_debug("s3: stored %s (%zu bytes, ETag %s)", p->key, p->len, resp.etag);
	s3_response_free(&resp);
	s3_kvs_free(&req.headers);
	target_free(&t);
	return rc;
}

static err_code mp_create(s3_put *p)
{
	s3_storage *s = p->s;
	s3_kvs q = { 0 };
	s3_kvs_add(&q, "uploads", "");
	s3_target t;
	target_init(s, &t, "POST", p->key, &q);
	s3_request req;
	request_init(&req, &t, "POST", &q);
	s3_kvs_add(&req.headers, "content-type", "application/octet-stream");
	add_upload_headers(s, &req.headers);
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status != 200)
		rc = answer_error(s, "CreateMultipartUpload", &resp);
	else if (rc == E_OK) {
		rc = s3_xml_upload_id((const char *)resp.body.data, resp.body.len, &p->upload_id);
		if (rc != E_OK)
			err_wrap(rc, "%s", t.what);
	}
	if (rc == E_OK)
		log_debug("s3: multipart upload of %s started", p->key);
	s3_response_free(&resp);
	s3_kvs_free(&req.headers);
	s3_kvs_free(&q);
	target_free(&t);
	return rc;
}

static err_code mp_upload_part(s3_put *p, s3_part *part)
{
	s3_storage *s = p->s;
	char num[16];
	snprintf(num, sizeof(num), "%d", part->num);
	s3_kvs q = { 0 };
	s3_kvs_add(&q, "partNumber", num);
	s3_kvs_add(&q, "uploadId", p->upload_id);
	s3_target t;
	target_init(s, &t, "PUT", p->key, &q);
	char *what = xasprintf("%s part %d", t.what, part->num);
	s3_request req;
	request_init(&req, &t, "PUT", &q);
	req.what = what;
	req.body = part->buf;
	req.body_len = part->len;
	req.cancel = &p->cancel;
	add_ssec_headers(s, &req.headers);
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status != 200)
		rc = answer_error(s, what, &resp);
	else if (rc == E_OK && resp.etag[0] == '\0')
		rc = err_set(E_IO, "%s: answer has no ETag", what);
	if (rc == E_OK)
		part->etag = xstrdup(resp.etag);
	s3_response_free(&resp);
	s3_kvs_free(&req.headers);
	s3_kvs_free(&q);
	free(what);
	target_free(&t);
	return rc;
}

static err_code mp_worker(void *arg)
{
	s3_put *p = arg;
	void *item;
	while (chan_recv(p->ch, &item)) {
		s3_part *part = item;
		err_code rc = mp_upload_part(p, part);
		pool_put(part->from, part->buf);
		part->buf = NULL;
		if (rc != E_OK)
			return rc;
	}
	return group_cancelled(p->g) ? err_set(E_CANCELLED, "upload cancelled") : E_OK;
}

static void mp_on_cancel(void *arg)
{
	s3_put *p = arg;
	atomic_store(&p->cancel, true);
	chan_cancel(p->ch);
	pool_wake(p->s->parts); /* this upload's producer may wait there; others go on */
}

static void xml_escape_into(char **out, const char *s)
{
	size_t n = 0;
	for (const char *c = s; *c; c++)
		n += *c == '&' ? 5 : (*c == '<' || *c == '>') ? 4 : (*c == '"' || *c == '\'') ? 6 : 1;
	char *o = xmalloc(n + 1), *w = o;
	for (const char *c = s; *c; c++) {
		const char *rep = *c == '&' ? "&amp;" : *c == '<' ? "&lt;" : *c == '>' ? "&gt;" :
			*c == '"' ? "&quot;" : *c == '\'' ? "&apos;" : NULL;
		if (rep) {
			size_t l = strlen(rep);
			memcpy(w, rep, l);
			w += l;
		} else {
			*w++ = *c;
		}
	}
	*w = '\0';
	*out = o;
}

static err_code mp_complete(s3_put *p)
{
	s3_storage *s = p->s;
	size_t cap = 64 + (size_t)p->nparts * 200, len = 0;
	char *body = xmalloc(cap);
	len += (size_t)snprintf(body, cap, "<CompleteMultipartUpload>");
	for (int i = 0; i < p->nparts; i++) {
		char *etag;
		xml_escape_into(&etag, p->parts[i]->etag);
		size_t need = strlen(etag) + 96;
		if (len + need >= cap) {
			cap = (len + need) * 2;
			body = xrealloc(body, cap);
		}
		len += (size_t)snprintf(body + len, cap - len,
								"<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>",
								p->parts[i]->num, etag);
		free(etag);
	}
	if (len + 32 >= cap)
		body = xrealloc(body, cap = len + 32);
	len += (size_t)snprintf(body + len, cap - len, "</CompleteMultipartUpload>");

	s3_kvs q = { 0 };
	s3_kvs_add(&q, "uploadId", p->upload_id);
	s3_target t;
	target_init(s, &t, "POST", p->key, &q);
	s3_request req;
	request_init(&req, &t, "POST", &q);
	req.body = body;
	req.body_len = len;
	s3_kvs_add(&req.headers, "content-type", "application/xml");
	if (p->exclusive)
		s3_kvs_add(&req.headers, "if-none-match", "*");
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status == 412 && p->exclusive)
		rc = err_set(E_EXISTS, "s3://%s/%s already exists", s->bucket, p->key);
	else if (rc == E_OK && resp.status != 200)
		rc = answer_error(s, "CompleteMultipartUpload", &resp);
	/* S3 may answer 200 and still report an error in the body. */
	else if (rc == E_OK && s3_xml_error((const char *)resp.body.data, resp.body.len, resp.code,
										sizeof(resp.code), resp.message, sizeof(resp.message)))
		rc = answer_error(s, "CompleteMultipartUpload", &resp);
	if (rc == E_OK)
		log_debug("s3: stored %s in %d parts", p->key, p->nparts);
	s3_response_free(&resp);
	s3_kvs_free(&req.headers);
	s3_kvs_free(&q);
	target_free(&t);
	free(body);
	return rc;
}

static void mp_abort(s3_put *p)
{
	s3_storage *s = p->s;
	if (p->aborted)
		return;
	p->aborted = true;
	s3_kvs q = { 0 };
	s3_kvs_add(&q, "uploadId", p->upload_id);
	s3_target t;
	target_init(s, &t, "DELETE", p->key, &q);
	s3_request req;
	request_init(&req, &t, "DELETE", &q);
	s3_response resp;
	/* Keep the error that made us abort: the abort's own outcome is only logged. */
	char saved[ERR_MSG_MAX];
	err_code last = err_last();
	snprintf(saved, sizeof(saved), "%s", err_msg());
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status != 204 && resp.status != 200 && resp.status != 404)
		rc = answer_error(s, "AbortMultipartUpload", &resp);
	if (rc != E_OK)
		log_warn("s3: could not abort the multipart upload of %s (upload id %s), it stays "
				 "pending until a lifecycle rule removes it: %s",
				 p->key, p->upload_id, err_msg());
	else
		log_debug("s3: aborted the multipart upload of %s", p->key);
	if (last != E_OK)
		err_set(last, "%s", saved);
	else
		err_clear();
	s3_response_free(&resp);
	s3_kvs_free(&q);
	target_free(&t);
}

/* Hands the full buffer to the uploaders, starting the multipart upload on the first call. */
static err_code mp_send(s3_put *p)
{
	if (p->upload_id == NULL) {
		TRY(mp_create(p));
		p->ch = chan_new((size_t)p->s->concurrency);
		p->g = group_new();
		group_on_cancel(p->g, mp_on_cancel, p);
	}
	if (p->nparts >= S3_MAX_PARTS)
		return err_set(E_IO, "s3://%s/%s: more than %d parts of %zu bytes: raise "
							 "S3_MAX_PART_SIZE",
					   p->s->bucket, p->key, S3_MAX_PARTS, p->s->part_size);
	s3_part *part = xcalloc(1, sizeof(*part));
	part->num = p->nparts + 1;
	part->buf = p->buf;
	part->len = p->len;
	part->from = p->buf_from;
	part->put = p;
	p->parts = xrealloc(p->parts, (size_t)(p->nparts + 1) * sizeof(*p->parts));
	p->parts[p->nparts++] = part;
	p->buf = NULL;
	p->len = 0;
	if (p->nworkers < p->s->concurrency) {
		err_code rc = group_go(p->g, mp_worker, p);
		if (rc != E_OK) {
			pool_put(part->from, part->buf);
			part->buf = NULL;
			return rc;
		}
		p->nworkers++;
	}
	if (!chan_send(p->ch, part)) {
		/* Cancelled: the part never reached a worker. */
		pool_put(part->from, part->buf);
		part->buf = NULL;
		err_code rc = group_wait(p->g);
		return rc != E_OK ? rc : err_set(E_CANCELLED, "upload of %s cancelled", p->key);
	}
	return E_OK;
}

static err_code put_write(sink *sk, const void *data, size_t len)
{
	s3_put *p = (s3_put *)sk;
	const unsigned char *d = data;
	while (len > 0) {
		if (p->buf == NULL) {
			pool *from = p->upload_id == NULL && p->nparts == 0 ? p->first : p->s->parts;
			if (from == p->first && p->first == NULL)
				from = p->first = pool_new(1, p->s->part_size);
			p->buf = from == p->s->parts && p->first != NULL ? pool_try_get(p->first) : NULL;
			if (p->buf != NULL)
				from = p->first;
			else
				p->buf = pool_get_unless(from, &p->cancel);
			p->buf_from = from;
			if (p->buf == NULL) {
				err_code rc = p->g ? group_wait(p->g) : E_OK;
				return rc != E_OK ? rc : err_set(E_CANCELLED, "upload of %s cancelled", p->key);
			}
			p->len = 0;
		}
		p->len += take_bytes(p->buf + p->len, p->s->part_size - p->len, &d, &len);
		if (p->len == p->s->part_size && len > 0)
			TRY(mp_send(p));
	}
	return E_OK;
}

static err_code put_finish(sink *sk)
{
	s3_put *p = (s3_put *)sk;
	err_code rc;
	if (p->upload_id == NULL) {
		rc = put_single(p);
	} else {
		/* The last part (a full buffer is kept back until now so it is never empty). */
		rc = p->buf != NULL && p->len > 0 ? mp_send(p) : E_OK;
		if (p->ch != NULL)
			chan_close(p->ch);
		err_code wrc = group_wait(p->g);
		if (rc == E_OK)
			rc = wrc;
		if (rc == E_OK)
			rc = mp_complete(p);
		if (rc != E_OK)
			mp_abort(p);
	}
	if (rc == E_OK)
		p->done = true;
	return rc;
}

/* Parts left in the channel by a cancel give their buffers back to the shared pool. */
static void part_release(void *item)
{
	s3_part *part = item;
	if (part->buf != NULL)
		pool_put(part->from, part->buf);
	part->buf = NULL;
}

static void put_free(sink *sk)
{
	s3_put *p = (s3_put *)sk;
	if (p->g != NULL) {
		if (!p->done) {
			group_fail(p->g, E_CANCELLED, "upload abandoned");
			group_wait(p->g);
			if (p->upload_id != NULL && !p->done)
				mp_abort(p);
		}
		group_free(p->g);
	}
	if (p->ch != NULL)
		chan_drain(p->ch, part_release);
	if (p->buf != NULL && p->buf_from == p->s->parts)
		pool_put(p->s->parts, p->buf);
	chan_free(p->ch);
	for (int i = 0; i < p->nparts; i++) {
		free(p->parts[i]->etag);
		free(p->parts[i]);
	}
	free(p->parts);
	pool_free(p->first);
	free(p->upload_id);
	free(p->key);
	free(p);
}

static const sink_ops put_ops = { put_write, put_finish, put_free };

static err_code s3_put_open(storage *st, const char *key, sink **out)
{
	s3_storage *s = (s3_storage *)st;
	s3_put *p = xcalloc(1, sizeof(*p));
	p->base.ops = &put_ops;
	p->s = s;
	p->key = full_key(s, key);
	atomic_init(&p->cancel, false);
	*out = &p->base;
	return E_OK;
}

static err_code s3_stat(storage *st, const char *key, obj_info *info);

/*
 * A put that never replaces: refused at once when the key exists, and the upload itself is
 * conditional (If-None-Match: *), so a writer that published first in the meantime wins on
 * servers that honour it (AWS S3; others get the check before writing only).
 */
static err_code s3_put_new(storage *st, const char *key, sink **out)
{
	obj_info info;
	err_code rc = s3_stat(st, key, &info);
	if (rc == E_OK)
		return err_set(E_EXISTS, "%s already exists in %s", key, storage_describe(st));
	if (rc != E_NOTFOUND)
		return rc;
	err_clear();
	TRY(s3_put_open(st, key, out));
	((s3_put *)*out)->exclusive = true;
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* get, stat, list, remove                                                                    */
/* ------------------------------------------------------------------------------------------ */

static err_code s3_get(storage *st, const char *key, sink *into)
{
	s3_storage *s = (s3_storage *)st;
	char *k = full_key(s, key);
	s3_target t;
	target_init(s, &t, "GET", k, NULL);
	s3_request req;
	request_init(&req, &t, "GET", NULL);
	req.into = into;
	add_ssec_headers(s, &req.headers);
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status == 404 && strcmp(resp.code, "NoSuchBucket") != 0)
		rc = err_set(E_NOTFOUND, "object s3://%s/%s does not exist", s->bucket, k);
	else if (rc == E_OK && (resp.status < 200 || resp.status >= 300))
		rc = answer_error(s, t.what, &resp);
	s3_kvs_free(&req.headers);
	s3_response_free(&resp);
	target_free(&t);
	free(k);
	return rc;
}

/*
 * A HEAD answers 404 without a body, for a missing object and a missing bucket alike. The first
 * time, ask the bucket itself, so a wrong bucket name is an error and not "no such object"
 * (which would end a recovery early). 403 on the bucket (a policy allowing object access only)
 * is taken as "it exists".
 */
static err_code bucket_check(s3_storage *s)
{
	if (atomic_load(&s->bucket_seen))
		return E_OK;
	s3_target t;
	target_init(s, &t, "HEAD", NULL, NULL);
	s3_request req;
	request_init(&req, &t, "HEAD", NULL);
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status == 404)
		rc = err_set(E_IO, "bucket %s does not exist (NoSuchBucket) at %s://%s", s->bucket,
					 s->scheme, s->hostport);
	else if (rc == E_OK)
		atomic_store(&s->bucket_seen, 1);
	s3_response_free(&resp);
	target_free(&t);
	return rc;
}

static err_code s3_stat(storage *st, const char *key, obj_info *info)
{
	s3_storage *s = (s3_storage *)st;
	char *k = full_key(s, key);
	s3_target t;
	target_init(s, &t, "HEAD", k, NULL);
	s3_request req;
	request_init(&req, &t, "HEAD", NULL);
	add_ssec_headers(s, &req.headers);
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status == 200) {
		info->size = resp.content_length;
		info->mtime = resp.last_modified;
		info->mtime_nsec = 0;
	} else if (rc == E_OK && resp.status == 404) {
		rc = bucket_check(s);
		if (rc == E_OK)
			rc = err_set(E_NOTFOUND, "object s3://%s/%s does not exist", s->bucket, k);
	} else if (rc == E_OK) {
		/* HEAD answers carry no body: ask for one byte to learn the S3 error code. */
		s3_response r2;
		s3_request req2;
		s3_target t2;
		target_init(s, &t2, "GET", k, NULL);
		request_init(&req2, &t2, "GET", NULL);
		s3_kvs_add(&req2.headers, "range", "bytes=0-0");
		add_ssec_headers(s, &req2.headers);
		if (s3_http_do(&s->http, &s->signer, &req2, &r2) == E_OK && r2.code[0] != '\0')
			rc = answer_error(s, t.what, &r2);
		else
			rc = answer_error(s, t.what, &resp);
		s3_response_free(&r2);
		s3_kvs_free(&req2.headers);
		target_free(&t2);
	}
	s3_kvs_free(&req.headers);
	s3_response_free(&resp);
	target_free(&t);
	free(k);
	return rc;
}

static err_code s3_list(storage *st, const char *prefix, bool recursive, obj_list *out)
{
	s3_storage *s = (s3_storage *)st;
	size_t pl = strlen(prefix);
	char *p = pl == 0 || prefix[pl - 1] == '/' ? xasprintf("%s%s", s->root, prefix)
											   : xasprintf("%s%s/", s->root, prefix);
	size_t rootlen = strlen(s->root);
	char *token = NULL;
	err_code rc = E_OK;
	for (int page = 0; rc == E_OK; page++) {
		s3_kvs q = { 0 };
		s3_kvs_add(&q, "list-type", "2");
		s3_kvs_add(&q, "prefix", p);
		s3_kvs_add(&q, "encoding-type", "url");
		if (!recursive)
			s3_kvs_add(&q, "delimiter", "/");
		if (token != NULL)
			s3_kvs_add(&q, "continuation-token", token);
		s3_target t;
		target_init(s, &t, "GET", NULL, &q);
		char *what = xasprintf("ListObjectsV2 s3://%s/%s (page %d)", s->bucket, p, page + 1);
		s3_request req;
		request_init(&req, &t, "GET", &q);
		req.what = what;
		s3_response resp;
		rc = s3_http_do(&s->http, &s->signer, &req, &resp);
		if (rc == E_OK && resp.status != 200)
			rc = answer_error(s, what, &resp);
		s3_list_page pg = { 0 };
		if (rc == E_OK) {
			rc = s3_xml_list((const char *)resp.body.data, resp.body.len, &pg);
			if (rc != E_OK)
				err_wrap(rc, "%s", what);
		}
		if (rc == E_OK) {
			for (size_t i = 0; i < pg.items.len; i++) {
				const obj_info *o = &pg.items.items[i];
				size_t kl = strlen(o->key);
				/* Keys outside our root, or "folder" markers, are not objects of ours. */
				if (kl <= rootlen || strncmp(o->key, s->root, rootlen) != 0 ||
					o->key[kl - 1] == '/')
					continue;
				obj_list_add(out, o->key + rootlen, o->size, o->mtime, o->mtime_nsec);
			}
			/* A server that hands back the same token would keep us listing forever. */
			if (pg.truncated && token != NULL && strcmp(token, pg.next_token) == 0)
				rc = err_set(E_CORRUPT, "listing %s: the server repeated its continuation token",
							 what);
			free(token);
			token = rc == E_OK && pg.truncated ? xstrdup(pg.next_token) : NULL;
		}
		s3_list_page_free(&pg);
		s3_response_free(&resp);
		s3_kvs_free(&q);
		target_free(&t);
		free(what);
		if (token == NULL)
			break;
	}
	free(token);
	free(p);
	if (rc != E_OK)
		obj_list_free(out);
	return rc;
}

static err_code s3_remove(storage *st, const char *key)
{
	s3_storage *s = (s3_storage *)st;
	char *k = full_key(s, key);
	s3_target t;
	target_init(s, &t, "DELETE", k, NULL);
	s3_request req;
	request_init(&req, &t, "DELETE", NULL);
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status != 204 && resp.status != 200 &&
		!(resp.status == 404 && strcmp(resp.code, "NoSuchBucket") != 0))
		rc = answer_error(s, t.what, &resp);
	s3_response_free(&resp);
	target_free(&t);
	free(k);
	return rc;
}

static err_code delete_batch(s3_storage *s, const char *const *keys, size_t n)
{
	size_t cap = 64, len = 0;
	char *body = xmalloc(cap);
	len = (size_t)snprintf(body, cap, "<Delete><Quiet>true</Quiet>");
	for (size_t i = 0; i < n; i++) {
		char *k = full_key(s, keys[i]), *e;
		xml_escape_into(&e, k);
		size_t need = strlen(e) + 40;
		if (len + need >= cap) {
			cap = (len + need) * 2;
			body = xrealloc(body, cap);
		}
		len += (size_t)snprintf(body + len, cap - len, "<Object><Key>%s</Key></Object>", e);
		free(e);
		free(k);
	}
	if (len + 16 >= cap)
		body = xrealloc(body, cap = len + 16);
	len += (size_t)snprintf(body + len, cap - len, "</Delete>");

	char md5[25];
	s3_md5_base64(body, len, md5);
	s3_kvs q = { 0 };
	s3_kvs_add(&q, "delete", "");
	s3_target t;
	target_init(s, &t, "POST", NULL, &q);
	char *what = xasprintf("DeleteObjects s3://%s (%zu keys)", s->bucket, n);
	s3_request req;
	request_init(&req, &t, "POST", &q);
	req.what = what;
	req.body = body;
	req.body_len = len;
	s3_kvs_add(&req.headers, "content-type", "application/xml");
	s3_kvs_add(&req.headers, "content-md5", md5);
	s3_response resp;
	err_code rc = s3_http_do(&s->http, &s->signer, &req, &resp);
	if (rc == E_OK && resp.status != 200)
		rc = answer_error(s, what, &resp);
	if (rc == E_OK) {
		size_t nerr;
		char *first = NULL;
		rc = s3_xml_delete_errors((const char *)resp.body.data, resp.body.len, &nerr, &first);
		if (rc == E_OK && nerr > 0)
			rc = err_set(E_IO, "%s: %zu keys not deleted, first %s", what, nerr, first);
		else if (rc != E_OK)
			err_wrap(rc, "%s", what);
		free(first);
	}
	s3_response_free(&resp);
	s3_kvs_free(&req.headers);
	s3_kvs_free(&q);
	target_free(&t);
	free(what);
	free(body);
	return rc;
}

err_code s3_remove_many(storage *st, const char *const *keys, size_t n)
{
	if (st->ops != &s3_ops)
		return err_set(E_CONFIG, "s3_remove_many: not an S3 storage");
	for (size_t i = 0; i < n; i++)
		TRY(storage_check_key(keys[i]));
	for (size_t at = 0; at < n; at += S3_DELETE_BATCH) {
		size_t m = n - at < S3_DELETE_BATCH ? n - at : S3_DELETE_BATCH;
		TRY(delete_batch((s3_storage *)st, keys + at, m));
	}
	return E_OK;
}

static const char *s3_describe(storage *st)
{
	return ((s3_storage *)st)->describe;
}

static const storage_ops s3_ops = {
	s3_put_open, s3_get, s3_stat, s3_list, s3_remove, s3_describe, s3_free, s3_put_new, NULL,
};
