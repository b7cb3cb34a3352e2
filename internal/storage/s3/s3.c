/*
 * S3 storage: WAL-G's WALG_S3_PREFIX repository on AWS S3 or any S3-compatible server, as an
 * adapter on the HTTP object-store core: configuration, URL layout (virtual-host or path
 * style), SigV4 on every attempt, S3's error codes, ListObjectsV2 and DeleteObjects. Uploads
 * are in s3put.c.
 */
#include "internal/storage/s3/s3.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "internal/pipe/pipe.h"

#define MIB (1024ull * 1024)
#define S3_PARTS_MEMORY (20 * MIB)

static const storage_ops s3_ops;
static const http_store_ops s3_store_ops;

/* ------------------------------------------------------------------------------------------ */
/* Configuration                                                                              */
/* ------------------------------------------------------------------------------------------ */

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

static err_code s3_configure(s3_storage *s, const storage_settings *cfg)
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
		TRY(parse_endpoint(s, ep, set->wale_endpoint ? "WALE_S3_ENDPOINT" : "AWS_ENDPOINT"));
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
		/*
		 * WAL-G's form of SSE-C is S3_SSE=AES256 (the algorithm) beside the key: the same
		 * as the key alone here. SSE-C cannot go with aws:kms.
		 */
		if (s->sse != NULL && strcmp(s->sse, "AES256") != 0)
			return err_set(E_CONFIG, "S3_SSE_C and S3_SSE=%s are both set: SSE-C is AES256 "
									 "with your key (S3_SSE=AES256 or unset)",
						   s->sse);
		free(s->sse);
		s->sse = NULL;
		s->ssec_key_b64 = http_base64(ssec, 32);
		char md5[25];
		http_md5_base64(ssec, 32, md5);
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

	s->bucket_locks = -1;
	/* WAL-G's 0 locks until the moment of the upload, that is not at all. */
	if (set->retention_period > 0) {
		s->lock_seconds = set->retention_period;
		s->lock_mode = xstrdup(set->retention_mode);
	}

	/* The table bounds it (5 MiB to 5 GiB) and gives every setting here its default. */
	s->part_size = (size_t)set->max_part_size;
	s->concurrency = cfg->upload_concurrency;
	/*
	 * Each upload fills its first part in a buffer of its own (an object that fits is one PUT)
	 * and reuses that buffer for later parts when it is free again and large enough; other
	 * parts take buffers from one budget of S3_PARTS_MEMORY bytes for the whole process, so a
	 * backup's memory does not grow with the number or length of its streams. A partition's
	 * 5 MiB parts put four in flight in it beside the streams' own first buffers.
	 */
	s->parts = budget_new(S3_PARTS_MEMORY);
	s->delete_batch = (size_t)set->delete_batch_size;

	http_retry rt = { 0 };
	rt.max_retries = (int)set->max_retries;
	rt.connect_timeout = set->connect_timeout;
	rt.low_speed_time = set->low_speed_timeout;
	rt.base_ms = 100;
	rt.cap_ms = 5000;

	const char *ca = set->ca_cert_file;
	if (ca != NULL && access(ca, R_OK) != 0)
		return err_errno(E_CONFIG, errno, "S3_CA_CERT_FILE: cannot read %s", ca);
	TRY(http_client_init(&s->http, ca, &cfg->tls, &rt));
	s->creds_init = true;
	TRY(s3_credprov_init(&s->creds, set, s->region, &s->http));
	return E_OK;
}

static void s3_free(storage *st)
{
	s3_storage *s = (s3_storage *)st;
	if (s->creds_init)
		s3_credprov_free(&s->creds);
	http_client_free(&s->http);
	budget_free(s->parts);
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
	free(s->lock_mode);
	free(s);
}

static void detect_region(s3_storage *s);

err_code storage_s3_open(const storage_settings *cfg, storage **out)
{
	*out = NULL;
	TRY(http_global_init());
	s3_storage *s = xcalloc(1, sizeof(*s));
	s->base.ops = &s3_ops;
	s->auth.ops = &s3_store_ops;
	s->auth.arg = s;
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
			  http_retry_budget_ms(&s->http.retry));
	*out = &s->base;
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Requests                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* SigV4 on every attempt, with credentials refreshed when they expire. */
static err_code s3_authorize(void *arg, const http_request *req, http_kvs *hdrs, bool refresh)
{
	s3_storage *s = arg;
	s3_creds cr;
	TRY(s3_credprov_get(&s->creds, refresh, &cr));
	char hash[65];
	if (req->body_len > 0)
		http_sha256_hex(req->body, req->body_len, hash);
	else
		memcpy(hash, S3_EMPTY_SHA256, sizeof(hash));
	s3_sign(&cr, s->region, "s3", http_now(), req->method, req->canonical_uri, req->query, hdrs,
			hash, NULL);
	s3_creds_free(&cr);
	return E_OK;
}

static bool s3_expired(const http_response *r)
{
	return (r->status == 400 || r->status == 403) &&
		   (strcmp(r->code, "ExpiredToken") == 0 || strcmp(r->code, "TokenRefreshRequired") == 0);
}

static const http_store_ops s3_store_ops = { "s3", s3_authorize, NULL, NULL, s3_expired, NULL };

void s3_call_init(s3_storage *s, http_call *c, const char *method, const char *s3key)
{
	char *ekey = s3key ? http_uri_encode(s3key, true) : xstrdup("");
	char *host, *curi;
	if (s->path_style) {
		host = xstrdup(s->hostport);
		curi = s3key ? xasprintf("/%s/%s", s->bucket, ekey) : xasprintf("/%s", s->bucket);
	} else {
		host = xasprintf("%s.%s", s->bucket, s->hostport);
		curi = xasprintf("/%s", ekey);
	}
	free(ekey);
	char *q = s3_canonical_query(&c->query);
	char *url = xasprintf("%s://%s%s%s%s", s->scheme, host, curi, q[0] ? "?" : "", q);
	free(q);
	http_call_set(c, method, url, host, curi,
				  xasprintf("%s s3://%s/%s", method, s->bucket, s3key ? s3key : ""));
}

err_code s3_call(s3_storage *s, http_call *c)
{
	return http_do(&s->http, &s->auth, &c->req, &c->resp);
}

/*
 * AWS without AWS_REGION (WAL-G asks GetBucketLocation): a HEAD of the bucket answers with
 * x-amz-bucket-region whatever region it was signed for (also with 301 and 403).
 */
static void detect_region(s3_storage *s)
{
	http_call c = { 0 };
	s3_call_init(s, &c, "HEAD", NULL);
	http_retry saved = s->http.retry;
	if (s->http.retry.max_retries > 2)
		s->http.retry.max_retries = 2;
	err_code rc = s3_call(s, &c);
	s->http.retry = saved;
	const char *br = c.resp.bucket_region;
	if (rc == E_OK && br[0] != '\0' && strcmp(br, s->region) != 0) {
		log_debug("s3: bucket %s is in region %s", s->bucket, br);
		free(s->region);
		s->region = xstrdup(br);
		free(s->hostport);
		s->hostport = xasprintf("s3.%s.amazonaws.com", s->region);
	} else if (rc != E_OK) {
		log_debug("s3: could not ask bucket %s for its region (%s); using %s", s->bucket,
				  err_msg(), s->region);
		err_clear();
	}
	http_call_free(&c);
}

err_code s3_answer_error(s3_storage *s, const char *what, const http_response *r)
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

char *s3_full_key(const s3_storage *s, const char *key)
{
	return xasprintf("%s%s", s->root, key);
}

void s3_add_ssec_headers(const s3_storage *s, http_kvs *h)
{
	if (s->ssec_key_b64 == NULL)
		return;
	http_kvs_add(h, "x-amz-server-side-encryption-customer-algorithm", "AES256");
	http_kvs_add(h, "x-amz-server-side-encryption-customer-key", s->ssec_key_b64);
	http_kvs_add(h, "x-amz-server-side-encryption-customer-key-md5", s->ssec_md5_b64);
}

/* ------------------------------------------------------------------------------------------ */
/* get, stat, list, remove                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* A request for an object of the repository: its key below the root, SSE-C when asked. */
static void object_call(s3_storage *s, http_call *c, const char *method, const char *key,
						bool ssec)
{
	char *k = s3_full_key(s, key);
	s3_call_init(s, c, method, k);
	free(k);
	if (ssec)
		s3_add_ssec_headers(s, &c->req.headers);
}

static bool no_such_key(const http_response *r)
{
	return r->status == 404 && strcmp(r->code, "NoSuchBucket") != 0;
}

/* The object, or with len > 0 len bytes of it from offset (storage_get_range). */
static err_code s3_get_part(storage *st, const char *key, uint64_t offset, uint64_t len,
							 sink *into)
{
	s3_storage *s = (s3_storage *)st;
	http_call c = { 0 };
	object_call(s, &c, "GET", key, true);
	c.req.into = into;
	c.req.range_off = offset;
	c.req.range_len = len;
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && no_such_key(&c.resp))
		rc = err_set(E_NOTFOUND, "object s3://%s/%s%s does not exist", s->bucket, s->root, key);
	else if (rc == E_OK && (c.resp.status < 200 || c.resp.status >= 300))
		rc = s3_answer_error(s, c.what, &c.resp);
	http_call_free(&c);
	return rc;
}

static err_code s3_get(storage *st, const char *key, sink *into)
{
	return s3_get_part(st, key, 0, 0, into);
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
	http_call c = { 0 };
	s3_call_init(s, &c, "HEAD", NULL);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status == 404)
		rc = err_set(E_IO, "bucket %s does not exist (NoSuchBucket) at %s://%s", s->bucket,
					 s->scheme, s->hostport);
	else if (rc == E_OK)
		atomic_store(&s->bucket_seen, 1);
	http_call_free(&c);
	return rc;
}

static err_code s3_stat(storage *st, const char *key, obj_info *info)
{
	s3_storage *s = (s3_storage *)st;
	http_call c = { 0 };
	object_call(s, &c, "HEAD", key, true);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status == 200) {
		info->size = c.resp.content_length;
		info->mtime = c.resp.last_modified;
		info->mtime_nsec = 0;
	} else if (rc == E_OK && c.resp.status == 404) {
		rc = bucket_check(s);
		if (rc == E_OK)
			rc = err_set(E_NOTFOUND, "object s3://%s/%s%s does not exist", s->bucket, s->root,
						 key);
	} else if (rc == E_OK) {
		/* HEAD answers carry no body: ask for one byte to learn the S3 error code. */
		http_call c2 = { 0 };
		object_call(s, &c2, "GET", key, true);
		http_kvs_add(&c2.req.headers, "range", "bytes=0-0");
		if (s3_call(s, &c2) == E_OK && c2.resp.code[0] != '\0')
			rc = s3_answer_error(s, c.what, &c2.resp);
		else
			rc = s3_answer_error(s, c.what, &c.resp);
		http_call_free(&c2);
	}
	http_call_free(&c);
	return rc;
}

static err_code list_page(const http_listing *job, const char *token, int page, obj_list *items,
						  char **next)
{
	s3_storage *s = job->store;
	http_call c = { 0 };
	http_kvs_add(&c.query, "list-type", "2");
	http_kvs_add(&c.query, "prefix", job->prefix);
	http_kvs_add(&c.query, "encoding-type", "url");
	if (!job->recursive)
		http_kvs_add(&c.query, "delimiter", "/");
	if (token != NULL)
		http_kvs_add(&c.query, "continuation-token", token);
	s3_call_init(s, &c, "GET", NULL);
	char *what = xasprintf("ListObjectsV2 s3://%s/%s (page %d)", s->bucket, job->prefix, page + 1);
	free(c.what);
	c.what = what;
	c.req.what = what;
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status != 200)
		rc = s3_answer_error(s, what, &c.resp);
	s3_list_page pg = { 0 };
	if (rc == E_OK) {
		rc = s3_xml_list((const char *)c.resp.body.data, c.resp.body.len, &pg);
		if (rc != E_OK)
			err_wrap(rc, "%s", what);
	}
	if (rc == E_OK) {
		*items = pg.items;
		pg.items = (obj_list){ 0 };
		*next = pg.truncated ? xstrdup(pg.next_token) : NULL;
	}
	s3_list_page_free(&pg);
	http_call_free(&c);
	return rc;
}

static err_code s3_list(storage *st, const char *prefix, bool recursive, obj_list *out)
{
	const s3_storage *s = (const s3_storage *)st;
	char *request = xasprintf("ListObjectsV2 s3://%s/", s->bucket);
	err_code rc = http_list(st, s->root, prefix, recursive, request, list_page, out);
	free(request);
	return rc;
}

static err_code s3_remove(storage *st, const char *key)
{
	s3_storage *s = (s3_storage *)st;
	http_call c = { 0 };
	object_call(s, &c, "DELETE", key, false);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status != 204 && c.resp.status != 200 && !no_such_key(&c.resp))
		rc = s3_answer_error(s, c.what, &c.resp);
	http_call_free(&c);
	return rc;
}

/*
 * The ETag of a single PUT is the content's MD5 (not with SSE-KMS or a customer key, and not
 * of a multipart upload, whose ETag has a "-N" suffix).
 */
static err_code s3_md5(storage *st, const char *key, unsigned char out[16], bool *known)
{
	s3_storage *s = (s3_storage *)st;
	*known = false;
	if (s->ssec_key_b64 != NULL || (s->sse != NULL && strcmp(s->sse, "AES256") != 0))
		return E_OK;
	http_call c = { 0 };
	object_call(s, &c, "HEAD", key, true);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status != 200)
		rc = s3_answer_error(s, c.what, &c.resp);
	const char *e = c.resp.etag;
	size_t n = strlen(e);
	if (rc == E_OK && n == 34 && e[0] == '"' && e[33] == '"' && strspn(e + 1, "0123456789abcdef") == 32) {
		for (int i = 0; i < 16; i++) {
			char hx[3] = { e[1 + 2 * i], e[2 + 2 * i], 0 };
			out[i] = (unsigned char)strtoul(hx, NULL, 16);
		}
		*known = true;
	}
	http_call_free(&c);
	return rc;
}

static const char *s3_describe(storage *st)
{
	return ((s3_storage *)st)->describe;
}

static const storage_ops s3_ops = {
	.put = s3_put_open,
	.get = s3_get,
	.get_range = s3_get_part,
	.stat = s3_stat,
	.list = s3_list,
	.remove = s3_remove,
	.describe = s3_describe,
	.free = s3_free,
	.put_new = s3_put_new,
	.put_long = s3_put_long,
	.remove_many = s3_remove_many,
	.locked_until = s3_locked_until,
	.md5 = s3_md5,
	.copy_from = s3_copy_from,
};
