/*
 * S3 uploads on the core's part uploader: an object that fits in one part is one PUT, a
 * longer one a multipart upload (parts in parallel, completed only when every part succeeded,
 * aborted otherwise), so an object is complete or absent. put_new makes every write
 * conditional (If-None-Match: *). Deletes of many objects are DeleteObjects requests.
 */
#include "internal/storage/s3/s3.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S3_MAX_PARTS 10000

typedef struct s3_put {
	s3_storage *s;
	char *key; /* full S3 key */
	char *upload_id;
	bool exclusive; /* put_new: never replace an existing object */
	/* the single PUT's bytes, for a refused conditional PUT's check */
	const unsigned char *buf;
	size_t len;
} s3_put;

/* From now, as WAL-G counts it: each object is locked for the period from its upload. */
static void lock_until(const s3_storage *s, char when[32])
{
	time_t until = time(NULL) + s->lock_seconds;
	struct tm tm;
	gmtime_r(&until, &tm);
	strftime(when, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void add_upload_headers(s3_storage *s, http_kvs *h)
{
	s3_add_ssec_headers(s, h);
	if (s->lock_mode != NULL) {
		char when[32];
		lock_until(s, when);
		http_kvs_add(h, "x-amz-object-lock-mode", s->lock_mode);
		http_kvs_add(h, "x-amz-object-lock-retain-until-date", when);
	}
	if (s->sse != NULL)
		http_kvs_add(h, "x-amz-server-side-encryption", s->sse);
	if (s->sse_kms_id != NULL)
		http_kvs_add(h, "x-amz-server-side-encryption-aws-kms-key-id", s->sse_kms_id);
	if (s->storage_class != NULL)
		http_kvs_add(h, "x-amz-storage-class", s->storage_class);
}

/* A bucket with Object Lock takes an object's bytes, or a part's, only with their MD5. */
static void add_body_md5(s3_storage *s, http_kvs *h, const void *body, size_t len)
{
	if (s->lock_mode == NULL)
		return;
	char md5[25];
	http_md5_base64(body, len, md5);
	http_kvs_add(h, "content-md5", md5);
}

/*
 * A conditional PUT was refused because the key exists. That object may be ours: a retried
 * PUT whose first answer was lost. Same MD5 (the ETag of a plain single PUT) means it is.
 */
static err_code exists_unless_ours(s3_put *p)
{
	s3_storage *s = p->s;
	http_call c = { 0 };
	s3_call_init(s, &c, "HEAD", p->key);
	s3_add_ssec_headers(s, &c.req.headers);
	err_code rc = s3_call(s, &c);
	bool ours = false;
	if (rc == E_OK && c.resp.status == 200 && c.resp.content_length == p->len) {
		unsigned char md[16];
		unsigned int ml = 0;
		EVP_Digest(p->buf, p->len, md, &ml, EVP_md5(), NULL);
		char hex[35] = "\"";
		http_hex(md, 16, hex + 1);
		hex[33] = '"';
		hex[34] = '\0';
		ours = strcmp(c.resp.etag, hex) == 0;
	}
	http_call_free(&c);
	if (ours)
		return E_OK;
	return err_set(E_EXISTS, "s3://%s/%s already exists", s->bucket, p->key);
}

static err_code put_single(void *arg, const unsigned char *buf, size_t len)
{
	s3_put *p = arg;
	s3_storage *s = p->s;
	http_call c = { 0 };
	s3_call_init(s, &c, "PUT", p->key);
	c.req.body = buf;
	c.req.body_len = len;
	http_kvs_add(&c.req.headers, "content-type", "application/octet-stream");
	add_upload_headers(s, &c.req.headers);
	add_body_md5(s, &c.req.headers, buf, len);
	if (p->exclusive)
		http_kvs_add(&c.req.headers, "if-none-match", "*");
	p->buf = buf;
	p->len = len;
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status == 412 && p->exclusive)
		rc = exists_unless_ours(p);
	else if (rc == E_OK && c.resp.status != 200)
		rc = s3_answer_error(s, c.what, &c.resp);
	if (rc == E_OK)
		log_debug("s3: stored %s (%zu bytes, ETag %s)", p->key, len, c.resp.etag);
	http_call_free(&c);
	return rc;
}

static err_code mp_create(void *arg)
{
	s3_put *p = arg;
	s3_storage *s = p->s;
	http_call c = { 0 };
	http_kvs_add(&c.query, "uploads", "");
	s3_call_init(s, &c, "POST", p->key);
	http_kvs_add(&c.req.headers, "content-type", "application/octet-stream");
	add_upload_headers(s, &c.req.headers);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status != 200)
		rc = s3_answer_error(s, "CreateMultipartUpload", &c.resp);
	else if (rc == E_OK) {
		rc = s3_xml_upload_id((const char *)c.resp.body.data, c.resp.body.len, &p->upload_id);
		if (rc != E_OK)
			err_wrap(rc, "%s", c.what);
	}
	if (rc == E_OK)
		log_debug("s3: multipart upload of %s started", p->key);
	http_call_free(&c);
	return rc;
}

static err_code mp_part(void *arg, http_part *part, const atomic_bool *cancel)
{
	s3_put *p = arg;
	s3_storage *s = p->s;
	char num[16];
	snprintf(num, sizeof(num), "%d", part->num);
	http_call c = { 0 };
	http_kvs_add(&c.query, "partNumber", num);
	http_kvs_add(&c.query, "uploadId", p->upload_id);
	s3_call_init(s, &c, "PUT", p->key);
	char *what = xasprintf("%s part %d", c.what, part->num);
	free(c.what);
	c.what = what;
	c.req.what = what;
	c.req.body = part->buf;
	c.req.body_len = part->len;
	c.req.cancel = cancel;
	s3_add_ssec_headers(s, &c.req.headers);
	add_body_md5(s, &c.req.headers, part->buf, part->len);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status != 200)
		rc = s3_answer_error(s, what, &c.resp);
	else if (rc == E_OK && c.resp.etag[0] == '\0')
		rc = err_set(E_IO, "%s: answer has no ETag", what);
	if (rc == E_OK)
		part->id = xstrdup(c.resp.etag);
	http_call_free(&c);
	return rc;
}

/*
 * A multipart upload carries its lock from CreateMultipartUpload, but Ceph RGW (16.2) drops it:
 * an object that comes out unlocked gets its retention set afterwards (PutObjectRetention),
 * so that a server which honoured the headers needs no more permission than WAL-G's.
 */
static err_code lock_if_unlocked(s3_storage *s, const char *key)
{
	http_call c = { 0 };
	s3_call_init(s, &c, "HEAD", key);
	s3_add_ssec_headers(s, &c.req.headers);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status != 200)
		rc = s3_answer_error(s, c.what, &c.resp);
	bool locked = rc == E_OK && c.resp.lock_until[0] != '\0';
	http_call_free(&c);
	if (rc != E_OK || locked)
		return rc;
	char when[32], body[256];
	lock_until(s, when);
	int len = snprintf(body, sizeof(body),
					   "<Retention xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Mode>%s</Mode>"
					   "<RetainUntilDate>%s</RetainUntilDate></Retention>",
					   s->lock_mode, when);
	memset(&c, 0, sizeof(c));
	http_kvs_add(&c.query, "retention", "");
	s3_call_init(s, &c, "PUT", key);
	c.req.body = body;
	c.req.body_len = (size_t)len;
	http_kvs_add(&c.req.headers, "content-type", "application/xml");
	add_body_md5(s, &c.req.headers, body, (size_t)len);
	rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status != 200)
		rc = s3_answer_error(s, "PutObjectRetention", &c.resp);
	if (rc == E_OK)
		log_debug("s3: %s locked (%s) until %s after its multipart upload", key, s->lock_mode, when);
	http_call_free(&c);
	return rc;
}

static err_code mp_complete(void *arg, http_part *const *parts, int nparts)
{
	s3_put *p = arg;
	s3_storage *s = p->s;
	size_t cap = 64 + (size_t)nparts * 200, len = 0;
	char *body = xmalloc(cap);
	len += (size_t)snprintf(body, cap, "<CompleteMultipartUpload>");
	for (int i = 0; i < nparts; i++) {
		char *etag = http_xml_escape(parts[i]->id);
		size_t need = strlen(etag) + 96;
		if (len + need >= cap) {
			cap = (len + need) * 2;
			body = xrealloc(body, cap);
		}
		len += (size_t)snprintf(body + len, cap - len,
								"<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>",
								parts[i]->num, etag);
		free(etag);
	}
	if (len + 32 >= cap)
		body = xrealloc(body, cap = len + 32);
	len += (size_t)snprintf(body + len, cap - len, "</CompleteMultipartUpload>");

	http_call c = { 0 };
	http_kvs_add(&c.query, "uploadId", p->upload_id);
	s3_call_init(s, &c, "POST", p->key);
	c.req.body = body;
	c.req.body_len = len;
	http_kvs_add(&c.req.headers, "content-type", "application/xml");
	if (p->exclusive)
		http_kvs_add(&c.req.headers, "if-none-match", "*");
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status == 412 && p->exclusive)
		rc = err_set(E_EXISTS, "s3://%s/%s already exists", s->bucket, p->key);
	else if (rc == E_OK && c.resp.status != 200)
		rc = s3_answer_error(s, "CompleteMultipartUpload", &c.resp);
	/* S3 may answer 200 and still report an error in the body. */
	else if (rc == E_OK && xml_error((const char *)c.resp.body.data, c.resp.body.len,
									 c.resp.code, sizeof(c.resp.code), c.resp.message,
									 sizeof(c.resp.message)))
		rc = s3_answer_error(s, "CompleteMultipartUpload", &c.resp);
	if (rc == E_OK)
		log_debug("s3: stored %s in %d parts", p->key, nparts);
	http_call_free(&c);
	free(body);
	if (rc == E_OK && s->lock_mode != NULL)
		rc = lock_if_unlocked(s, p->key);
	return rc;
}

static void mp_abort(void *arg)
{
	s3_put *p = arg;
	s3_storage *s = p->s;
	if (p->upload_id == NULL)
		return;
	http_call c = { 0 };
	http_kvs_add(&c.query, "uploadId", p->upload_id);
	s3_call_init(s, &c, "DELETE", p->key);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status != 204 && c.resp.status != 200 && c.resp.status != 404)
		rc = s3_answer_error(s, "AbortMultipartUpload", &c.resp);
	if (rc != E_OK)
		log_warn("s3: could not abort the multipart upload of %s (upload id %s), it stays "
				 "pending until a lifecycle rule removes it: %s",
				 p->key, p->upload_id, err_msg());
	else
		log_debug("s3: aborted the multipart upload of %s", p->key);
	http_call_free(&c);
}

static void put_free(void *arg)
{
	s3_put *p = arg;
	free(p->upload_id);
	free(p->key);
	free(p);
}

static const http_upload_ops s3_upload_ops = {
	put_single, mp_create, mp_part, mp_complete, mp_abort, put_free,
};

static sink *put_sink(s3_storage *s, const char *key, bool exclusive, size_t first_part)
{
	s3_put *p = xcalloc(1, sizeof(*p));
	p->s = s;
	p->key = s3_full_key(s, key);
	p->exclusive = exclusive;
	http_upload_cfg cfg = { .part_size = s->part_size, .first_part = first_part,
							.concurrency = s->concurrency, .max_parts = S3_MAX_PARTS,
							.shared = s->parts, .what = p->key };
	return http_upload_new(&s3_upload_ops, p, &cfg);
}

err_code s3_put_open(storage *st, const char *key, sink **out)
{
	*out = put_sink((s3_storage *)st, key, false, 0);
	return E_OK;
}

/* S3's smallest part but the last: a long stream's parts while 10,000 of them leave room. */
#define S3_MIN_PART (5 * 1024 * 1024)

err_code s3_put_long(storage *st, const char *key, sink **out)
{
	*out = put_sink((s3_storage *)st, key, false, S3_MIN_PART);
	return E_OK;
}

/*
 * A put that never replaces: refused at once when the key exists, and the upload itself is
 * conditional (If-None-Match: *), so a writer that published first in the meantime wins on
 * servers that honour it (AWS S3; others get the check before writing only).
 */
err_code s3_put_new(storage *st, const char *key, sink **out)
{
	TRY(http_check_absent(st, key));
	*out = put_sink((s3_storage *)st, key, true, 0);
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Batched deletes                                                                            */
/* ------------------------------------------------------------------------------------------ */

typedef struct delete_job {
	s3_storage *s;
	const char *const *keys;
} delete_job;

/* One DeleteObjects request for keys[from, from + n). */
static err_code delete_batch(void *arg, size_t from, size_t n)
{
	delete_job *job = arg;
	s3_storage *s = job->s;
	size_t len;
	char *body = s3_xml_delete_request(s->root, job->keys + from, n, &len);

	char md5[25];
	http_md5_base64(body, len, md5);
	http_call c = { 0 };
	http_kvs_add(&c.query, "delete", "");
	s3_call_init(s, &c, "POST", NULL);
	char *what = xasprintf("DeleteObjects s3://%s (%zu keys)", s->bucket, n);
	free(c.what);
	c.what = what;
	c.req.what = what;
	c.req.body = body;
	c.req.body_len = len;
	http_kvs_add(&c.req.headers, "content-type", "application/xml");
	http_kvs_add(&c.req.headers, "content-md5", md5);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status != 200)
		rc = s3_answer_error(s, what, &c.resp);
	if (rc == E_OK) {
		size_t nerr;
		char *first = NULL;
		rc = s3_xml_delete_errors((const char *)c.resp.body.data, c.resp.body.len, &nerr,
								  &first);
		if (rc == E_OK && nerr > 0)
			rc = err_set(E_IO, "%s: %zu keys not deleted, first %s", what, nerr, first);
		else if (rc != E_OK)
			err_wrap(rc, "%s", what);
		free(first);
	}
	if (rc == E_OK)
		log_debug("s3: deleted %zu objects in one DeleteObjects request", n);
	http_call_free(&c);
	free(body);
	return rc;
}

/* DeleteObjects, S3_DELETE_BATCH_SIZE keys a request, WALG_UPLOAD_CONCURRENCY at once. */
err_code s3_remove_many(storage *st, const char *const *keys, size_t n)
{
	s3_storage *s = (s3_storage *)st;
	delete_job job = { s, keys };
	return http_batches(n, s->delete_batch, s->concurrency, delete_batch, &job);
}

/* Whether the bucket has Object Lock: asked once; without permission to ask, assumed so. */
static err_code bucket_locks(s3_storage *s, bool *yes)
{
	int known = __atomic_load_n(&s->bucket_locks, __ATOMIC_ACQUIRE);
	if (known >= 0) {
		*yes = known == 1;
		return E_OK;
	}
	http_call c = { 0 };
	http_kvs_add(&c.query, "object-lock", "");
	s3_call_init(s, &c, "GET", NULL);
	err_code rc = s3_call(s, &c);
	if (rc == E_OK && c.resp.status == 200)
		*yes = c.resp.body.data != NULL &&
			strstr((const char *)c.resp.body.data, "<ObjectLockEnabled>Enabled<") != NULL;
	else if (rc == E_OK && (c.resp.status == 404 || c.resp.status == 400 || c.resp.status == 501))
		*yes = false; /* no configuration, or a server without Object Lock */
	else if (rc == E_OK) {
		log_debug("s3: GetObjectLockConfiguration answered %ld: each object is asked instead",
				  c.resp.status);
		*yes = true;
	}
	http_call_free(&c);
	if (rc == E_OK)
		__atomic_store_n(&s->bucket_locks, *yes ? 1 : 0, __ATOMIC_RELEASE);
	return rc;
}

typedef struct lock_job {
	s3_storage *s;
	const char *const *keys;
	time_t *until;
} lock_job;

static err_code lock_batch(void *arg, size_t from, size_t n)
{
	lock_job *j = arg;
	for (size_t i = from; i < from + n; i++) {
		http_call c = { 0 };
		char *full = s3_full_key(j->s, j->keys[i]);
		s3_call_init(j->s, &c, "HEAD", full);
		free(full);
		s3_add_ssec_headers(j->s, &c.req.headers);
		err_code rc = s3_call(j->s, &c);
		if (rc == E_OK && c.resp.status != 200 && c.resp.status != 404)
			rc = s3_answer_error(j->s, c.what, &c.resp);
		time_t sec;
		long nsec;
		if (rc == E_OK && c.resp.status == 200 && c.resp.lock_until[0] != '\0' &&
			time_parse_rfc3339(c.resp.lock_until, &sec, &nsec) && sec > time(NULL))
			j->until[i] = sec;
		http_call_free(&c);
		TRY(rc);
	}
	return E_OK;
}

/* A HEAD per object, WALG_UPLOAD_CONCURRENCY at once, in a bucket with Object Lock only. */
err_code s3_locked_until(storage *st, const char *const *keys, size_t n, time_t *until)
{
	s3_storage *s = (s3_storage *)st;
	bool locks = false;
	TRY(bucket_locks(s, &locks));
	if (!locks)
		return E_OK;
	lock_job job = { s, keys, until };
	return http_batches(n, 64, s->concurrency, lock_batch, &job);
}

/*
 * CopyObject inside one endpoint: the bytes never leave the store. Only between buckets of
 * one endpoint, without customer keys (whose copy needs both keys), and below S3's 5 GiB
 * limit of a single copy; a refusal (another account's bucket, a server without it) leaves
 * the copy to the stream.
 */
err_code s3_copy_from(storage *st, storage *src_st, const char *key, uint64_t size, bool *done)
{
	s3_storage *s = (s3_storage *)st, *src = (s3_storage *)src_st;
	*done = false;
	if (strcmp(s->scheme, src->scheme) != 0 || strcmp(s->hostport, src->hostport) != 0 ||
		s->ssec_key_b64 != NULL || src->ssec_key_b64 != NULL || size > ((uint64_t)5 << 30))
		return E_OK;
	char *from_key = s3_full_key(src, key), *to_key = s3_full_key(s, key);
	char *ekey = http_uri_encode(from_key, true);
	char *source = xasprintf("/%s/%s", src->bucket, ekey);
	http_call c = { 0 };
	s3_call_init(s, &c, "PUT", to_key);
	http_kvs_add(&c.req.headers, "x-amz-copy-source", source);
	add_upload_headers(s, &c.req.headers);
	err_code rc = s3_call(s, &c);
	/* A 200 may carry an <Error> that came after the copy started. */
	bool failed = c.resp.body.len > 0 && memmem(c.resp.body.data, c.resp.body.len, "<Error>", 7);
	if (rc == E_OK && (c.resp.status == 403 || c.resp.status == 501)) {
		log_debug("s3: CopyObject of %s refused (%ld %s): streaming it", key, c.resp.status,
				  c.resp.code);
	} else if (rc == E_OK && (c.resp.status != 200 || failed)) {
		rc = s3_answer_error(s, c.what, &c.resp);
	} else if (rc == E_OK) {
		*done = true;
		if (s->lock_mode != NULL)
			rc = lock_if_unlocked(s, to_key);
	}
	http_call_free(&c);
	free(source);
	free(ekey);
	free(from_key);
	free(to_key);
	return rc;
}
