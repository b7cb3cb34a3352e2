/*
 * Azure Blob operations: block blobs written with one Put Blob, or Put Block from the core's
 * part uploader and one Put Block List that makes the blob appear whole (uncommitted blocks
 * of a failed upload are never visible and Azure drops them); ranged, ETag-pinned GETs; List
 * Blobs pages; deletes in Blob Batch requests of up to 256.
 */
#include "internal/storage/azure/azure.h"

#include <stdlib.h>
#include <string.h>

#define AZ_MAX_BLOCKS 50000
#define AZ_BATCH 256

static char *full_name(const az_storage *s, const char *key)
{
	return xasprintf("%s%s", s->root, key);
}

static void blob_call(az_storage *s, http_call *c, const char *method, const char *key)
{
	char *b = full_name(s, key);
	az_call_init(s, c, method, b);
	free(b);
}

/* ------------------------------------------------------------------------------------------ */
/* put                                                                                        */
/* ------------------------------------------------------------------------------------------ */

typedef struct az_put {
	az_storage *s;
	char *key;
	bool exclusive;
} az_put;

/* A conditional Put Blob refused: the blob may be ours, from an attempt whose answer was lost. */
static err_code exists_unless_ours(az_put *p, const char *md5)
{
	http_call c = { 0 };
	blob_call(p->s, &c, "HEAD", p->key);
	err_code rc = az_call(p->s, &c);
	bool ours = rc == E_OK && c.resp.status == 200 && strcmp(c.resp.content_md5, md5) == 0;
	http_call_free(&c);
	if (ours)
		return E_OK;
	return err_set(E_EXISTS, "azure://%s/%s%s already exists", p->s->container, p->s->root,
				   p->key);
}

static err_code put_single(void *arg, const unsigned char *buf, size_t len)
{
	az_put *p = arg;
	http_call c = { 0 };
	blob_call(p->s, &c, "PUT", p->key);
	c.req.body = buf;
	c.req.body_len = len;
	char md5[25];
	http_md5_base64(buf ? (const void *)buf : "", len, md5);
	http_kvs_add(&c.req.headers, "x-ms-blob-type", "BlockBlob");
	http_kvs_add(&c.req.headers, "content-type", "application/octet-stream");
	http_kvs_add(&c.req.headers, "content-md5", md5);
	if (p->exclusive)
		http_kvs_add(&c.req.headers, "if-none-match", "*");
	err_code rc = az_call(p->s, &c);
	if (rc == E_OK && p->exclusive && (c.resp.status == 409 || c.resp.status == 412))
		rc = exists_unless_ours(p, md5);
	else if (rc == E_OK && c.resp.status != 201)
		rc = az_answer_error(p->s, c.what, &c.resp);
	http_call_free(&c);
	return rc;
}

static err_code put_begin(void *arg)
{
	(void)arg;
	return E_OK; /* blocks need no session */
}

static char *block_id(int num)
{
	char raw[16];
	snprintf(raw, sizeof(raw), "walc%08d", num);
	return http_base64(raw, strlen(raw));
}

static err_code put_block(void *arg, http_part *part, const atomic_bool *cancel)
{
	az_put *p = arg;
	char *id = block_id(part->num);
	http_call c = { 0 };
	http_kvs_add(&c.query, "comp", "block");
	http_kvs_add(&c.query, "blockid", id);
	blob_call(p->s, &c, "PUT", p->key);
	char *what = xasprintf("%s block %d", c.what, part->num);
	free(c.what);
	c.what = what;
	c.req.what = what;
	c.req.body = part->buf;
	c.req.body_len = part->len;
	c.req.cancel = cancel;
	err_code rc = az_call(p->s, &c);
	if (rc == E_OK && c.resp.status != 201)
		rc = az_answer_error(p->s, what, &c.resp);
	if (rc == E_OK)
		part->id = id;
	else
		free(id);
	http_call_free(&c);
	return rc;
}

static err_code put_block_list(void *arg, http_part *const *parts, int nparts)
{
	az_put *p = arg;
	size_t cap = 64 + (size_t)nparts * 40, len = 0;
	char *body = xmalloc(cap);
	len += (size_t)snprintf(body, cap, "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
	for (int i = 0; i < nparts; i++)
		len += (size_t)snprintf(body + len, cap - len, "<Latest>%s</Latest>", parts[i]->id);
	len += (size_t)snprintf(body + len, cap - len, "</BlockList>");
	http_call c = { 0 };
	http_kvs_add(&c.query, "comp", "blocklist");
	blob_call(p->s, &c, "PUT", p->key);
	c.req.body = body;
	c.req.body_len = len;
	http_kvs_add(&c.req.headers, "content-type", "application/xml");
	if (p->exclusive)
		http_kvs_add(&c.req.headers, "if-none-match", "*");
	err_code rc = az_call(p->s, &c);
	if (rc == E_OK && p->exclusive && (c.resp.status == 409 || c.resp.status == 412))
		rc = err_set(E_EXISTS, "azure://%s/%s%s already exists", p->s->container, p->s->root,
					 p->key);
	else if (rc == E_OK && c.resp.status != 201)
		rc = az_answer_error(p->s, "Put Block List", &c.resp);
	if (rc == E_OK)
		log_debug("azure: stored %s in %d blocks", p->key, nparts);
	http_call_free(&c);
	free(body);
	return rc;
}

static void put_abort(void *arg)
{
	az_put *p = arg;
	/* Uncommitted blocks are invisible and expire by themselves; an older blob stays. */
	log_debug("azure: upload of %s abandoned; its uncommitted blocks expire", p->key);
}

static void put_free(void *arg)
{
	az_put *p = arg;
	free(p->key);
	free(p);
}

static const http_upload_ops az_upload_ops = {
	put_single, put_begin, put_block, put_block_list, put_abort, put_free,
};

static sink *put_sink(az_storage *s, const char *key, bool exclusive)
{
	az_put *p = xcalloc(1, sizeof(*p));
	p->s = s;
	p->key = xstrdup(key);
	p->exclusive = exclusive;
	http_upload_cfg cfg = { .part_size = s->block_size, .concurrency = s->concurrency,
							.max_parts = AZ_MAX_BLOCKS, .shared = s->parts, .what = p->key };
	return http_upload_new(&az_upload_ops, p, &cfg);
}

static err_code az_put_open(storage *st, const char *key, sink **out)
{
	*out = put_sink((az_storage *)st, key, false);
	return E_OK;
}

static err_code az_put_new(storage *st, const char *key, sink **out)
{
	TRY(http_check_absent(st, key));
	*out = put_sink((az_storage *)st, key, true);
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* get, stat, list, remove                                                                    */
/* ------------------------------------------------------------------------------------------ */

static bool blob_missing(const http_response *r)
{
	return r->status == 404 && strcmp(r->code, "ContainerNotFound") != 0;
}

/* The object, or with len > 0 len bytes of it from offset (storage_get_range). */
static err_code az_get_part(storage *st, const char *key, uint64_t offset, uint64_t len,
							 sink *into)
{
	az_storage *s = (az_storage *)st;
	http_call c = { 0 };
	blob_call(s, &c, "GET", key);
	c.req.into = into;
	c.req.range_off = offset;
	c.req.range_len = len;
	err_code rc = az_call(s, &c);
	if (rc == E_OK && blob_missing(&c.resp))
		rc = err_set(E_NOTFOUND, "blob azure://%s/%s%s does not exist", s->container, s->root,
					 key);
	else if (rc == E_OK && (c.resp.status < 200 || c.resp.status >= 300))
		rc = az_answer_error(s, c.what, &c.resp);
	http_call_free(&c);
	return rc;
}

static err_code az_get(storage *st, const char *key, sink *into)
{
	return az_get_part(st, key, 0, 0, into);
}

static err_code az_stat(storage *st, const char *key, obj_info *info)
{
	az_storage *s = (az_storage *)st;
	http_call c = { 0 };
	blob_call(s, &c, "HEAD", key);
	err_code rc = az_call(s, &c);
	if (rc == E_OK && c.resp.status == 200) {
		info->size = c.resp.content_length;
		info->mtime = c.resp.last_modified;
	} else if (rc == E_OK && blob_missing(&c.resp) && c.resp.code[0] != '\0') {
		rc = err_set(E_NOTFOUND, "blob azure://%s/%s%s does not exist", s->container, s->root,
					 key);
	} else if (rc == E_OK) {
		/* A 404 without a code could be the container: only a listing can tell. */
		rc = az_answer_error(s, c.what, &c.resp);
	}
	http_call_free(&c);
	return rc;
}

/* Content-MD5, which a single Put Blob stores (walc sends it) and Put Block List does not. */
static err_code az_md5(storage *st, const char *key, unsigned char out[16], bool *known)
{
	az_storage *s = (az_storage *)st;
	*known = false;
	http_call c = { 0 };
	blob_call(s, &c, "HEAD", key);
	err_code rc = az_call(s, &c);
	if (rc == E_OK && c.resp.status != 200)
		rc = az_answer_error(s, c.what, &c.resp);
	unsigned char *md = NULL;
	size_t len = 0;
	if (rc == E_OK && c.resp.content_md5[0] != '\0' &&
		http_base64_decode(c.resp.content_md5, &md, &len) && len == 16) {
		memcpy(out, md, 16);
		*known = true;
	}
	free(md);
	http_call_free(&c);
	return rc;
}

static err_code list_page(const http_listing *job, const char *marker, int page, obj_list *items,
						  char **next)
{
	az_storage *s = job->store;
	http_call c = { 0 };
	http_kvs_add(&c.query, "restype", "container");
	http_kvs_add(&c.query, "comp", "list");
	http_kvs_add(&c.query, "prefix", job->prefix);
	if (!job->recursive)
		http_kvs_add(&c.query, "delimiter", "/");
	if (marker != NULL)
		http_kvs_add(&c.query, "marker", marker);
	http_kvs_add(&c.query, "maxresults", "5000");
	az_call_init(s, &c, "GET", NULL);
	char *what = xasprintf("List Blobs azure://%s/%s (page %d)", s->container, job->prefix,
						   page + 1);
	free(c.what);
	c.what = what;
	c.req.what = what;
	err_code rc = az_call(s, &c);
	if (rc == E_OK && c.resp.status != 200)
		rc = az_answer_error(s, what, &c.resp);
	az_list_page pg = { 0 };
	if (rc == E_OK) {
		rc = az_xml_list((const char *)c.resp.body.data, c.resp.body.len, &pg);
		if (rc != E_OK)
			err_wrap(rc, "%s", what);
	}
	if (rc == E_OK) {
		*items = pg.items;
		pg.items = (obj_list){ 0 };
		*next = pg.next_marker;
		pg.next_marker = NULL;
	}
	az_list_page_free(&pg);
	http_call_free(&c);
	return rc;
}

static err_code az_list(storage *st, const char *prefix, bool recursive, obj_list *out)
{
	const az_storage *s = (const az_storage *)st;
	char *request = xasprintf("List Blobs azure://%s/", s->container);
	err_code rc = http_list(st, s->root, prefix, recursive, request, list_page, out);
	free(request);
	return rc;
}

static err_code az_remove(storage *st, const char *key)
{
	az_storage *s = (az_storage *)st;
	http_call c = { 0 };
	blob_call(s, &c, "DELETE", key);
	http_kvs_add(&c.req.headers, "x-ms-delete-snapshots", "include");
	err_code rc = az_call(s, &c);
	if (rc == E_OK && c.resp.status != 202 && c.resp.status != 200 && !blob_missing(&c.resp))
		rc = az_answer_error(s, c.what, &c.resp);
	http_call_free(&c);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Blob Batch                                                                                 */
/* ------------------------------------------------------------------------------------------ */

typedef struct batch_job {
	az_storage *s;
	const char *const *keys;
	atomic_bool unsupported; /* the service refused batches: delete one by one */
} batch_job;

static void body_add(membuf *b, const char *s)
{
	size_t n = strlen(s);
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->data = xrealloc(b->data, b->cap);
	}
	memcpy(b->data + b->len, s, n + 1);
	b->len += n;
}

/* The multipart body: one DELETE subrequest per key, each authorized on its own. */
static err_code batch_body(az_storage *s, const char *const *keys, size_t n, const char *bound,
						   membuf *body)
{
	char date[32];
	az_date(date);
	for (size_t i = 0; i < n; i++) {
		char *name = full_name(s, keys[i]);
		char *en = http_uri_encode(name, true);
		free(name);
		char *path = xasprintf("/%s/%s", s->container, en);
		free(en);
		http_kvs h = { 0 };
		http_kvs_add(&h, "x-ms-date", date);
		http_kvs_add(&h, "x-ms-delete-snapshots", "include");
		char *auth;
		err_code rc = az_authorization(s, "DELETE", path, NULL, &h, 0, false, &auth);
		if (rc != E_OK) {
			http_kvs_free(&h);
			free(path);
			return rc;
		}
		char *part = xasprintf("--%s\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: "
							   "binary\r\nContent-ID: %zu\r\n\r\nDELETE %s%s%s HTTP/1.1\r\n"
							   "x-ms-date: %s\r\nx-ms-delete-snapshots: include\r\n%s%s%s"
							   "Content-Length: 0\r\n\r\n",
							   bound, i, path, s->sas ? "?" : "", s->sas ? s->sas : "", date,
							   auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
		body_add(body, part);
		http_wipe_free(part);
		http_wipe_free(auth);
		http_kvs_free(&h);
		free(path);
	}
	char *end = xasprintf("--%s--\r\n", bound);
	body_add(body, end);
	free(end);
	return E_OK;
}

static err_code delete_batch(void *arg, size_t from, size_t n)
{
	batch_job *job = arg;
	az_storage *s = job->s;
	if (atomic_load(&job->unsupported)) {
		for (size_t i = from; i < from + n; i++)
			TRY(az_remove(&s->base, job->keys[i]));
		return E_OK;
	}
	char bound[64];
	snprintf(bound, sizeof(bound), "batch_walc_%zu_%ld", from, (long)http_now());
	membuf body = { 0 };
	err_code rc = batch_body(s, job->keys + from, n, bound, &body);
	if (rc != E_OK) {
		free(body.data);
		return rc;
	}
	http_call c = { 0 };
	http_kvs_add(&c.query, "restype", "container");
	http_kvs_add(&c.query, "comp", "batch");
	az_call_init(s, &c, "POST", NULL);
	char *what = xasprintf("Blob Batch azure://%s (%zu deletes)", s->container, n);
	free(c.what);
	c.what = what;
	c.req.what = what;
	c.req.body = body.data;
	c.req.body_len = body.len;
	char *ct = xasprintf("multipart/mixed; boundary=%s", bound);
	http_kvs_add(&c.req.headers, "content-type", ct);
	free(ct);
	rc = az_call(s, &c);
	if (rc == E_OK && c.resp.status == 202) {
		size_t ok, missing, failed;
		long first;
		rc = az_batch_statuses((const char *)c.resp.body.data, c.resp.body.len, &ok, &missing,
							   &failed, &first);
		if (rc == E_OK && failed > 0)
			rc = err_set(E_IO, "%s: %zu deletes failed, the first with HTTP %ld", what, failed,
						 first);
		else if (rc == E_OK && ok + missing != n)
			rc = err_set(E_CORRUPT, "%s: %zu answers for %zu deletes", what, ok + missing, n);
		if (rc == E_OK)
			log_debug("azure: deleted %zu blobs in one batch (%zu were absent)", n, missing);
	} else if (rc == E_OK && (c.resp.status == 400 || c.resp.status == 404 ||
							  c.resp.status == 405 || c.resp.status == 501)) {
		/* A service (or emulator) without Blob Batch: the same deletes one by one. */
		log_debug("azure: %s answered HTTP %ld %s: deleting one by one", what, c.resp.status,
				  c.resp.code);
		atomic_store(&job->unsupported, true);
		for (size_t i = from; rc == E_OK && i < from + n; i++)
			rc = az_remove(&s->base, job->keys[i]);
	} else if (rc == E_OK) {
		rc = az_answer_error(s, what, &c.resp);
	}
	http_call_free(&c);
	http_wipe_free((char *)body.data);
	return rc;
}

static err_code az_remove_many(storage *st, const char *const *keys, size_t n)
{
	az_storage *s = (az_storage *)st;
	batch_job job = { s, keys, false };
	return http_batches(n, AZ_BATCH, s->width, delete_batch, &job);
}

static const char *az_describe(storage *st)
{
	return ((az_storage *)st)->describe;
}

const storage_ops az_ops = {
	.put = az_put_open,
	.get = az_get,
	.get_range = az_get_part,
	.stat = az_stat,
	.list = az_list,
	.remove = az_remove,
	.describe = az_describe,
	.free = az_storage_free,
	.put_new = az_put_new,
	.remove_many = az_remove_many,
	.md5 = az_md5,
};
