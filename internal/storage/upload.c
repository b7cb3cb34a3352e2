/*
 * Uploads in parts for every HTTP object store, and batches in parallel. The stream is cut by
 * the core's chunker into part-size pieces; the last full piece is held back until more bytes
 * come, so an object that fits in one part is one request and a multipart upload never ends
 * on an empty part. Parts go through a bounded channel to at most `concurrency` uploader
 * threads; their buffers come from one pool per store, so memory is bounded by the number of
 * buffers, never by the object's length. The object is completed only when every part
 * succeeded, and aborted otherwise.
 */
#include "internal/storage/http.h"

#include <stdlib.h>
#include <string.h>

typedef struct upload {
	sink base;
	const http_upload_ops *ops;
	void *arg;
	http_upload_cfg cfg;
	chunker ck;
	pool *first; /* one buffer: enough for an object that fits in one part */
	void *first_buf;
	uint64_t offset;
	bool finishing;
	bool began;
	bool single_done;
	http_part **parts;
	int nparts;
	chan *ch;
	group *g;
	int nworkers;
	atomic_bool cancel;
	bool done;
	bool aborted;
} upload;

pool *http_part_pool(size_t part_size, size_t mem, int concurrency)
{
	size_t n = mem / part_size;
	if (n < 1)
		n = 1;
	if (n > (size_t)concurrency)
		n = (size_t)concurrency;
	return pool_new(n, part_size);
}

static err_code worker(void *arg)
{
	upload *u = arg;
	void *item;
	while (chan_recv(u->ch, &item)) {
		http_part *part = item;
		err_code rc = u->ops->part(u->arg, part, &u->cancel);
		pool_put(part->from, part->buf);
		part->buf = NULL;
		if (rc != E_OK)
			return rc;
	}
	return group_cancelled(u->g) ? err_set(E_CANCELLED, "upload cancelled") : E_OK;
}

static void on_cancel(void *arg)
{
	upload *u = arg;
	atomic_store(&u->cancel, true);
	chan_cancel(u->ch);
	pool_wake(u->cfg.shared); /* this upload's producer may wait there; others go on */
}

static void do_abort(upload *u)
{
	if (u->aborted || !u->began)
		return;
	u->aborted = true;
	/* Keep the error that made us abort: the abort's own outcome is only logged. */
	char saved[ERR_MSG_MAX];
	err_code last = err_last();
	snprintf(saved, sizeof(saved), "%s", err_msg());
	u->ops->abort(u->arg);
	if (last != E_OK)
		err_set(last, "%s", saved);
	else
		err_clear();
}

/* The chunker's buffers: the upload's own first, then the store's pool. */
static err_code get_buf(void *arg, unsigned char **buf)
{
	upload *u = arg;
	if (u->first == NULL)
		u->first = pool_new(1, u->cfg.part_size);
	void *b = pool_try_get(u->first); /* free again once its part is uploaded */
	if (b != NULL)
		u->first_buf = b;
	else
		b = pool_get_unless(u->cfg.shared, &u->cancel);
	if (b == NULL) {
		err_code rc = u->g ? group_wait(u->g) : E_OK;
		return rc != E_OK ? rc : err_set(E_CANCELLED, "upload of %s cancelled", u->cfg.what);
	}
	*buf = b;
	return E_OK;
}

static pool *owner(upload *u, const unsigned char *buf)
{
	return buf == u->first_buf ? u->first : u->cfg.shared;
}

/* The size of the part after the first n: first_part, twice, then doubling every second part. */
static size_t part_size_after(const http_upload_cfg *cfg, int n)
{
	size_t size = cfg->first_part;
	if (size == 0 || size >= cfg->part_size)
		return cfg->part_size;
	for (int i = n / 2; i > 0 && size < cfg->part_size; i--)
		size *= 2;
	return size < cfg->part_size ? size : cfg->part_size;
}

static err_code put_part(void *arg, const unsigned char *data, size_t len)
{
	upload *u = arg;
	unsigned char *buf = (unsigned char *)(uintptr_t)data; /* the chunker's get() buffer */
	if (!u->finishing || u->began) {
		if (!u->began) {
			err_code rc = u->ops->begin(u->arg);
			if (rc != E_OK) {
				pool_put(owner(u, buf), buf);
				return rc;
			}
			u->began = true;
			u->ch = chan_new((size_t)u->cfg.concurrency);
			u->g = group_new();
			group_on_cancel(u->g, on_cancel, u);
		}
		if (u->nparts >= u->cfg.max_parts) {
			pool_put(owner(u, buf), buf);
			return err_set(E_IO, "%s: more than %d parts of %zu bytes: raise the part size",
						   u->cfg.what, u->cfg.max_parts, u->cfg.part_size);
		}
		http_part *part = xcalloc(1, sizeof(*part));
		part->num = u->nparts + 1;
		part->offset = u->offset;
		part->buf = buf;
		part->len = len;
		part->last = u->finishing;
		part->from = owner(u, buf);
		u->offset += len;
		u->parts = xrealloc(u->parts, (size_t)(u->nparts + 1) * sizeof(*u->parts));
		u->parts[u->nparts++] = part;
		u->ck.size = part_size_after(&u->cfg, u->nparts); /* every buffer holds part_size */
		if (u->nworkers < u->cfg.concurrency) {
			err_code rc = group_go(u->g, worker, u);
			if (rc != E_OK) {
				pool_put(part->from, part->buf);
				part->buf = NULL;
				return rc;
			}
			u->nworkers++;
		}
		if (!chan_send(u->ch, part)) {
			/* Cancelled: the part never reached a worker. */
			pool_put(part->from, part->buf);
			part->buf = NULL;
			err_code rc = group_wait(u->g);
			return rc != E_OK ? rc : err_set(E_CANCELLED, "upload of %s cancelled", u->cfg.what);
		}
		return E_OK;
	}
	/* Finishing with nothing sent yet: the whole object is this one piece. */
	err_code rc = u->ops->single(u->arg, buf, len);
	pool_put(owner(u, buf), buf);
	u->single_done = rc == E_OK;
	return rc;
}

static err_code up_write(sink *sk, const void *data, size_t len)
{
	upload *u = (upload *)sk;
	return chunker_write(&u->ck, data, len);
}

static err_code up_finish(sink *sk)
{
	upload *u = (upload *)sk;
	u->finishing = true;
	err_code rc = chunker_flush(&u->ck);
	if (rc == E_OK && !u->began && !u->single_done)
		rc = u->ops->single(u->arg, NULL, 0); /* an empty object */
	if (u->began) {
		if (u->ch != NULL)
			chan_close(u->ch);
		err_code wrc = group_wait(u->g);
		if (rc == E_OK)
			rc = wrc;
		if (rc == E_OK)
			rc = u->ops->complete(u->arg, u->parts, u->nparts);
		if (rc != E_OK)
			do_abort(u);
	}
	if (rc == E_OK)
		u->done = true;
	return rc;
}

/* Parts left in the channel by a cancel give their buffers back. */
static void part_release(void *item)
{
	http_part *part = item;
	if (part->buf != NULL)
		pool_put(part->from, part->buf);
	part->buf = NULL;
}

static void up_free(sink *sk)
{
	upload *u = (upload *)sk;
	if (u->g != NULL) {
		if (!u->done) {
			group_fail(u->g, E_CANCELLED, "upload abandoned");
			group_wait(u->g);
			do_abort(u);
		}
		group_free(u->g);
	}
	if (u->ch != NULL)
		chan_drain(u->ch, part_release);
	chan_free(u->ch);
	if (u->ck.buf != NULL)
		pool_put(owner(u, u->ck.buf), u->ck.buf);
	for (int i = 0; i < u->nparts; i++) {
		free(u->parts[i]->id);
		free(u->parts[i]);
	}
	free(u->parts);
	pool_free(u->first);
	u->ops->free(u->arg);
	free(u);
}

static const sink_ops upload_sink_ops = { up_write, up_finish, up_free };

sink *http_upload_new(const http_upload_ops *ops, void *arg, const http_upload_cfg *cfg)
{
	upload *u = xcalloc(1, sizeof(*u));
	u->base.ops = &upload_sink_ops;
	u->ops = ops;
	u->arg = arg;
	u->cfg = *cfg;
	if (u->cfg.concurrency < 1)
		u->cfg.concurrency = 1;
	atomic_init(&u->cancel, false);
	u->ck.size = part_size_after(&u->cfg, 0);
	u->ck.hold_last = true;
	u->ck.get = get_buf;
	u->ck.put = put_part;
	u->ck.arg = u;
	return &u->base;
}

/* ------------------------------------------------------------------------------------------ */
/* Batches                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct batches {
	http_batch_fn fn;
	void *arg;
	size_t n, batch;
	atomic_size_t next;
	group *g;
} batches;

static err_code batch_worker(void *arg)
{
	batches *b = arg;
	for (;;) {
		if (group_cancelled(b->g))
			return err_set(E_CANCELLED, "cancelled");
		TRY(cancel_check());
		size_t from = atomic_fetch_add(&b->next, b->batch);
		if (from >= b->n)
			return E_OK;
		size_t k = b->n - from < b->batch ? b->n - from : b->batch;
		TRY(b->fn(b->arg, from, k));
	}
}

err_code http_batches(size_t n, size_t batch, int width, http_batch_fn fn, void *arg)
{
	if (n == 0)
		return E_OK;
	size_t nb = (n + batch - 1) / batch;
	if (width < 1 || nb == 1)
		width = 1;
	if ((size_t)width > nb)
		width = (int)nb;
	if (width == 1) {
		for (size_t at = 0; at < n; at += batch)
			TRY(fn(arg, at, n - at < batch ? n - at : batch));
		return E_OK;
	}
	batches b = { fn, arg, n, batch, 0, group_new() };
	err_code rc = E_OK;
	for (int i = 0; i < width && rc == E_OK; i++)
		rc = group_go(b.g, batch_worker, &b);
	if (rc != E_OK)
		group_fail(b.g, rc, err_msg());
	err_code wrc = group_wait(b.g);
	group_free(b.g);
	return rc != E_OK ? rc : wrc;
}

/* ------------------------------------------------------------------------------------------ */
/* Listings and conditional puts                                                              */
/* ------------------------------------------------------------------------------------------ */

err_code http_list(void *store, const char *root, const char *prefix, bool recursive,
				   const char *request, http_page_fn fn, obj_list *out)
{
	size_t rootlen = strlen(root), pl = strlen(prefix);
	char *full = pl == 0 || prefix[pl - 1] == '/' ? xasprintf("%s%s", root, prefix)
												  : xasprintf("%s%s/", root, prefix);
	http_listing l = { store, full, recursive };
	char *token = NULL;
	err_code rc = E_OK;
	for (int page = 0; rc == E_OK; page++) {
		obj_list items = { 0 };
		char *next = NULL;
		rc = fn(&l, token, page, &items, &next);
		for (size_t i = 0; rc == E_OK && i < items.len; i++) {
			const obj_info *o = &items.items[i];
			size_t kl = strlen(o->key);
			if (kl <= rootlen || strncmp(o->key, root, rootlen) != 0 || o->key[kl - 1] == '/')
				continue;
			obj_list_add(out, o->key + rootlen, o->size, o->mtime, o->mtime_nsec);
		}
		obj_list_free(&items);
		if (rc == E_OK && next != NULL && token != NULL && strcmp(token, next) == 0)
			rc = err_set(E_CORRUPT, "%s%s (page %d): the server repeated its continuation token",
						 request, full, page + 1);
		free(token);
		token = rc == E_OK ? next : (free(next), NULL);
		if (token == NULL)
			break;
	}
	free(token);
	free(full);
	if (rc != E_OK)
		obj_list_free(out);
	return rc;
}

err_code http_check_absent(storage *st, const char *key)
{
	obj_info info;
	err_code rc = storage_stat(st, key, &info);
	if (rc == E_OK)
		return err_set(E_EXISTS, "%s already exists in %s", key, storage_describe(st));
	if (rc != E_NOTFOUND)
		return rc;
	err_clear();
	return E_OK;
}
