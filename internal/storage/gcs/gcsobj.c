/*
 * GCS operations on the JSON API: an object that fits in one chunk is one media upload; a
 * longer one a resumable upload session fed chunk by chunk from the core's part uploader (in
 * order, each a multiple of 256 KiB, the last one with the total length), so the object
 * appears only when its last chunk is in, and an abandoned session is cancelled. Downloads
 * with alt=media resume with Range, pinned to the generation they started reading. Listing
 * pages of objects.list; deletes in parallel (WALG_UPLOAD_CONCURRENCY wide).
 */
#include "internal/storage/gcs/gcs.h"

#include <stdlib.h>
#include <string.h>

#define GCS_MAX_CHUNKS 1000000

static char *full_name(const gcs_storage *s, const char *key)
{
	return xasprintf("%s%s", s->root, key);
}

/* /storage/v1/b/BUCKET/o/NAME (the name encoded whole, slashes too), or the upload path. */
static void object_call(gcs_storage *s, http_call *c, const char *method, const char *prefix,
						const char *key)
{
	char *name = full_name(s, key);
	char *en = http_uri_encode(name, false);
	gcs_call_init(s, c, method, xasprintf("%s/b/%s/o/%s", prefix, s->bucket, en), name);
	free(en);
	free(name);
}

/* ------------------------------------------------------------------------------------------ */
/* put                                                                                        */
/* ------------------------------------------------------------------------------------------ */

typedef struct gcs_put {
	gcs_storage *s;
	char *name; /* full object name */
	char *session; /* the resumable upload's URL */
	bool exclusive;
} gcs_put;

static void upload_call(gcs_put *p, http_call *c, const char *type)
{
	gcs_storage *s = p->s;
	http_kvs_add(&c->query, "uploadType", type);
	http_kvs_add(&c->query, "name", p->name);
	if (p->exclusive)
		http_kvs_add(&c->query, "ifGenerationMatch", "0"); /* only if absent */
	gcs_call_init(s, c, "POST", xasprintf("/upload/storage/v1/b/%s/o", s->bucket), p->name);
	gcs_add_csek(s, &c->req.headers);
}

static err_code refused_exists(gcs_put *p, const http_response *r)
{
	(void)r;
	return err_set(E_EXISTS, "gs://%s/%s already exists", p->s->bucket, p->name);
}

static err_code put_single(void *arg, const unsigned char *buf, size_t len)
{
	gcs_put *p = arg;
	http_call c = { 0 };
	upload_call(p, &c, "media");
	c.req.body = buf;
	c.req.body_len = len;
	http_kvs_add(&c.req.headers, "content-type", "application/octet-stream");
	err_code rc = gcs_call(p->s, &c);
	if (rc == E_OK && c.resp.status == 412 && p->exclusive)
		rc = refused_exists(p, &c.resp);
	else if (rc == E_OK && c.resp.status != 200)
		rc = gcs_answer_error(p->s, c.what, &c.resp);
	http_call_free(&c);
	return rc;
}

static err_code session_begin(void *arg)
{
	gcs_put *p = arg;
	http_call c = { 0 };
	upload_call(p, &c, "resumable");
	http_kvs_add(&c.req.headers, "x-upload-content-type", "application/octet-stream");
	http_kvs_add(&c.req.headers, "content-type", "application/json; charset=UTF-8");
	c.req.body = "{}";
	c.req.body_len = 2;
	err_code rc = gcs_call(p->s, &c);
	if (rc == E_OK && c.resp.status == 412 && p->exclusive)
		rc = refused_exists(p, &c.resp);
	else if (rc == E_OK && c.resp.status != 200)
		rc = gcs_answer_error(p->s, c.what, &c.resp);
	else if (rc == E_OK && (c.resp.location == NULL ||
							(!str_has_prefix(c.resp.location, "https://") &&
							 !str_has_prefix(c.resp.location, "http://"))))
		rc = err_set(E_IO, "%s: the resumable upload answer has no session URL", c.what);
	if (rc == E_OK)
		p->session = xstrdup(c.resp.location);
	http_call_free(&c);
	return rc;
}

/* A chunk answered 308 must be stored up to its end: Range "bytes=0-LAST". */
static bool stored_through(const http_response *r, uint64_t last)
{
	unsigned long long a, b;
	return sscanf(r->range, "bytes=%llu-%llu", &a, &b) == 2 && a == 0 && b == last;
}

static err_code session_chunk(void *arg, http_part *part, const atomic_bool *cancel)
{
	gcs_put *p = arg;
	gcs_storage *s = p->s;
	http_call c = { 0 };
	char *what = xasprintf("PUT gs://%s/%s chunk %d", s->bucket, p->name, part->num);
	http_call_set(&c, "PUT", xstrdup(p->session), NULL, NULL, what);
	c.req.query = NULL;
	c.req.body = part->buf;
	c.req.body_len = part->len;
	c.req.cancel = cancel;
	uint64_t end = part->offset + part->len - 1;
	char range[96];
	if (part->last)
		snprintf(range, sizeof(range), "bytes %llu-%llu/%llu", (unsigned long long)part->offset,
				 (unsigned long long)end, (unsigned long long)end + 1);
	else
		snprintf(range, sizeof(range), "bytes %llu-%llu/*", (unsigned long long)part->offset,
				 (unsigned long long)end);
	http_kvs_add(&c.req.headers, "content-range", range);
	gcs_add_csek(s, &c.req.headers);
	err_code rc = gcs_call(s, &c);
	if (rc == E_OK && part->last && c.resp.status == 412 && p->exclusive)
		rc = refused_exists(p, &c.resp);
	else if (rc == E_OK && part->last && c.resp.status != 200 && c.resp.status != 201)
		rc = gcs_answer_error(s, what, &c.resp);
	else if (rc == E_OK && !part->last && c.resp.status < 300) {
		/* The server made an object of a part of the stream: it must not stay. */
		rc = err_set(E_IO, "%s: the server ended the session before its last chunk (HTTP %ld)",
					 what, c.resp.status);
		http_call d = { 0 };
		char *en = http_uri_encode(p->name, false);
		gcs_call_init(s, &d, "DELETE", xasprintf("/storage/v1/b/%s/o/%s", s->bucket, en), p->name);
		free(en);
		if (gcs_call(s, &d) != E_OK || (d.resp.status != 204 && d.resp.status != 404))
			log_warn("gcs: could not delete the incomplete gs://%s/%s", s->bucket, p->name);
		http_call_free(&d);
		err_set(E_IO, "%s: the server ended the session before its last chunk (deleted what it "
					  "made)",
				what);
	} else if (rc == E_OK && !part->last && c.resp.status != 308)
		rc = gcs_answer_error(s, what, &c.resp);
	else if (rc == E_OK && !part->last && !stored_through(&c.resp, end))
		rc = err_set(E_IO, "%s: the server kept \"%s\" of bytes 0-%llu", what, c.resp.range,
					 (unsigned long long)end);
	if (rc == E_OK)
		part->id = xstrdup("");
	http_call_free(&c);
	return rc;
}

static err_code session_complete(void *arg, http_part *const *parts, int nparts)
{
	gcs_put *p = arg;
	(void)parts;
	log_debug("gcs: stored %s in %d chunks", p->name, nparts);
	return E_OK; /* the last chunk finalized the object */
}

static void session_cancel(void *arg)
{
	gcs_put *p = arg;
	if (p->session == NULL)
		return;
	http_call c = { 0 };
	http_call_set(&c, "DELETE", xstrdup(p->session), NULL, NULL,
				  xasprintf("cancelling the upload of gs://%s/%s", p->s->bucket, p->name));
	c.req.query = NULL;
	err_code rc = gcs_call(p->s, &c);
	if (rc == E_OK && c.resp.status != 499 && c.resp.status != 204 && c.resp.status != 404 &&
		c.resp.status != 410)
		rc = gcs_answer_error(p->s, c.what, &c.resp);
	if (rc != E_OK)
		log_warn("gcs: %s failed; the session expires within a week: %s", c.what, err_msg());
	http_call_free(&c);
}

static void put_free(void *arg)
{
	gcs_put *p = arg;
	free(p->name);
	free(p->session);
	free(p);
}

static const http_upload_ops gcs_upload_ops = {
	put_single, session_begin, session_chunk, session_complete, session_cancel, put_free,
};

static sink *put_sink(gcs_storage *s, const char *key, bool exclusive)
{
	gcs_put *p = xcalloc(1, sizeof(*p));
	p->s = s;
	p->name = full_name(s, key);
	p->exclusive = exclusive;
	/* A session takes its chunks in order: one at a time. */
	http_upload_cfg cfg = { .part_size = s->chunk_size, .concurrency = 1,
							.max_parts = GCS_MAX_CHUNKS, .shared = s->parts, .what = p->name };
	return http_upload_new(&gcs_upload_ops, p, &cfg);
}

static err_code gcs_put_open(storage *st, const char *key, sink **out)
{
	*out = put_sink((gcs_storage *)st, key, false);
	return E_OK;
}

static err_code gcs_put_new(storage *st, const char *key, sink **out)
{
	TRY(http_check_absent(st, key));
	*out = put_sink((gcs_storage *)st, key, true);
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* get, stat, list, remove                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* A 404 for an object whose bucket is missing is a configuration error, never "no such WAL". */
static err_code not_found(gcs_storage *s, const char *key, const http_response *r)
{
	/* A one-item listing, as the emulator has no bucket resource to ask for. */
	http_call c = { 0 };
	http_kvs_add(&c.query, "maxResults", "1");
	gcs_call_init(s, &c, "GET", xasprintf("/storage/v1/b/%s/o", s->bucket), NULL);
	err_code rc = gcs_call(s, &c);
	if (rc == E_OK && c.resp.status == 404)
		rc = err_set(E_IO, "bucket gs://%s does not exist (%s)", s->bucket, s->base_url);
	else if (rc == E_OK)
		rc = err_set(E_NOTFOUND, "object gs://%s/%s%s does not exist%s%s", s->bucket, s->root,
					 key, r->message[0] ? ": " : "", r->message);
	http_call_free(&c);
	return rc;
}

/* The object, or with len > 0 len bytes of it from offset (storage_get_range). */
static err_code gcs_get_part(storage *st, const char *key, uint64_t offset, uint64_t len,
							 sink *into)
{
	gcs_storage *s = (gcs_storage *)st;
	http_call c = { 0 };
	http_kvs_add(&c.query, "alt", "media");
	object_call(s, &c, "GET", "/download/storage/v1", key);
	gcs_add_csek(s, &c.req.headers);
	c.req.into = into;
	c.req.range_off = offset;
	c.req.range_len = len;
	err_code rc = gcs_call(s, &c);
	if (rc == E_OK && c.resp.status == 404)
		rc = not_found(s, key, &c.resp);
	else if (rc == E_OK && (c.resp.status < 200 || c.resp.status >= 300))
		rc = gcs_answer_error(s, c.what, &c.resp);
	http_call_free(&c);
	return rc;
}

static err_code gcs_get(storage *st, const char *key, sink *into)
{
	return gcs_get_part(st, key, 0, 0, into);
}

static err_code gcs_stat(storage *st, const char *key, obj_info *info)
{
	gcs_storage *s = (gcs_storage *)st;
	http_call c = { 0 };
	object_call(s, &c, "GET", "/storage/v1", key);
	err_code rc = gcs_call(s, &c);
	if (rc == E_OK && c.resp.status == 200) {
		rc = gcs_json_object((const char *)c.resp.body.data, c.resp.body.len, &info->size,
							 &info->mtime, &info->mtime_nsec);
		if (rc != E_OK)
			err_wrap(rc, "%s", c.what);
	} else if (rc == E_OK && c.resp.status == 404) {
		rc = not_found(s, key, &c.resp);
	} else if (rc == E_OK) {
		rc = gcs_answer_error(s, c.what, &c.resp);
	}
	http_call_free(&c);
	return rc;
}

static err_code list_page(const http_listing *job, const char *token, int page, obj_list *items,
						  char **next)
{
	gcs_storage *s = job->store;
	http_call c = { 0 };
	http_kvs_add(&c.query, "prefix", job->prefix);
	if (!job->recursive)
		http_kvs_add(&c.query, "delimiter", "/");
	if (token != NULL)
		http_kvs_add(&c.query, "pageToken", token);
	http_kvs_add(&c.query, "maxResults", "1000");
	gcs_call_init(s, &c, "GET", xasprintf("/storage/v1/b/%s/o", s->bucket), NULL);
	char *what = xasprintf("objects.list gs://%s/%s (page %d)", s->bucket, job->prefix, page + 1);
	free(c.what);
	c.what = what;
	c.req.what = what;
	err_code rc = gcs_call(s, &c);
	if (rc == E_OK && c.resp.status == 404)
		rc = err_set(E_IO, "%s: bucket gs://%s does not exist", what, s->bucket);
	else if (rc == E_OK && c.resp.status != 200)
		rc = gcs_answer_error(s, what, &c.resp);
	if (rc == E_OK) {
		rc = gcs_json_list((const char *)c.resp.body.data, c.resp.body.len, items, next);
		if (rc != E_OK)
			err_wrap(rc, "%s", what);
	}
	http_call_free(&c);
	return rc;
}

static err_code gcs_list(storage *st, const char *prefix, bool recursive, obj_list *out)
{
	const gcs_storage *s = (const gcs_storage *)st;
	char *request = xasprintf("objects.list gs://%s/", s->bucket);
	err_code rc = http_list(st, s->root, prefix, recursive, request, list_page, out);
	free(request);
	return rc;
}

static err_code gcs_remove(storage *st, const char *key)
{
	gcs_storage *s = (gcs_storage *)st;
	http_call c = { 0 };
	object_call(s, &c, "DELETE", "/storage/v1", key);
	err_code rc = gcs_call(s, &c);
	if (rc == E_OK && c.resp.status != 204 && c.resp.status != 200 && c.resp.status != 404)
		rc = gcs_answer_error(s, c.what, &c.resp);
	http_call_free(&c);
	return rc;
}

typedef struct delete_job {
	storage *st;
	const char *const *keys;
} delete_job;

static err_code delete_one(void *arg, size_t from, size_t n)
{
	delete_job *job = arg;
	for (size_t i = from; i < from + n; i++)
		TRY(gcs_remove(job->st, job->keys[i]));
	return E_OK;
}

/* One DELETE per object, WALG_UPLOAD_CONCURRENCY at once. */
static err_code gcs_remove_many(storage *st, const char *const *keys, size_t n)
{
	delete_job job = { st, keys };
	return http_batches(n, 1, ((gcs_storage *)st)->width, delete_one, &job);
}

static const char *gcs_describe(storage *st)
{
	return ((gcs_storage *)st)->describe;
}

const storage_ops gcs_ops = {
	.put = gcs_put_open,
	.get = gcs_get,
	.get_range = gcs_get_part,
	.stat = gcs_stat,
	.list = gcs_list,
	.remove = gcs_remove,
	.describe = gcs_describe,
	.free = gcs_storage_free,
	.put_new = gcs_put_new,
	.remove_many = gcs_remove_many,
};
