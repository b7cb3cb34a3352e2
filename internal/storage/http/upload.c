/*
 * Uploads in parts for every HTTP object store, and batches in parallel. The stream is cut by
 * the core's chunker into part-size pieces; the last full piece is held back until more bytes
 * come, so an object that fits in one part is one request and a multipart upload never ends
 * on an empty part. Parts go through a bounded channel to at most `concurrency` uploader
 * threads. Each upload fills its first part in a buffer of its own, so opening an object
 * never waits on others; later parts take their buffers from one byte budget per store, so
 * memory is bounded by the budget, never by the number or length of objects. When the budget
 * is spent, an upload also takes its own buffer back as soon as its part is up: it never
 * depends on other uploads' progress, so a writer that others wait on (files_metadata.json,
 * streamed while the partitions are written) cannot deadlock with them. The object is
 * completed only when every part succeeded, and aborted otherwise.
 */
#include "internal/storage/http/http.h"

#include <stdlib.h>
#include <string.h>

typedef struct upload {
	sink base;
	const http_upload_ops *ops;
	void *arg;
	http_upload_cfg cfg;
	chunker ck;
	pool *first; /* one buffer, the first part's size: enough for an object of one part */
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
	atomic_bool wake; /* set on cancel and when the own buffer comes back */
	bool done;
	bool aborted;
} upload;

/* A part's buffer back where it came from: the upload's own, or the store's budget. */
static void release(upload *u, unsigned char *buf)
{
	if (buf == u->first_buf) {
		pool_put(u->first, buf);
		/* The producer may be waiting on the budget for a buffer this one can replace. */
		atomic_store(&u->wake, true);
		budget_wake(u->cfg.shared);
	} else {
		budget_put(u->cfg.shared, buf);
	}
}

static err_code worker(void *arg)
{
	upload *u = arg;
	void *item;
	while (chan_recv(u->ch, &item)) {
		http_part *part = item;
		err_code rc = u->ops->part(u->arg, part, &u->cancel);
		release(u, part->buf);
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
	atomic_store(&u->wake, true);
	chan_cancel(u->ch);
	budget_wake(u->cfg.shared); /* this upload's producer may wait there; others go on */
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

/*
 * cfg->first_part while the part limit leaves room, doubling every twentieth of max_parts up
 * to part_size: a long stream starts uploading after first_part bytes, keeps more parts in
 * flight in the same memory, and still fits in max_parts parts when it is very long.
 */
size_t http_part_size_after(const http_upload_cfg *cfg, int n)
{
	size_t size = cfg->first_part;
	if (size == 0 || size >= cfg->part_size)
		return cfg->part_size;
	int step = cfg->max_parts / 20 > 0 ? cfg->max_parts / 20 : 1;
	for (int i = n / step; i > 0 && size < cfg->part_size; i--)
		size *= 2;
	return size < cfg->part_size ? size : cfg->part_size;
}

/*
 * The chunker's buffers: the upload's own first while it is free and big enough, else one
 * from the store's budget or the own one back from its upload, whichever comes first.
 */
static void *any_buf(upload *u, size_t size)
{
	bool own = pool_buf_size(u->first) >= size;
	for (;;) {
		/* Cleared before looking, so a buffer returned after the look still wakes us. */
		atomic_store(&u->wake, false);
		void *b = own ? pool_try_get(u->first) : NULL;
		if (b != NULL || atomic_load(&u->cancel))
			return b;
		b = budget_get_unless(u->cfg.shared, size, &u->wake);
		if (b != NULL || atomic_load(&u->cancel))
			return b;
	}
}

static err_code get_buf(void *arg, unsigned char **buf)
{
	upload *u = arg;
	size_t size = u->ck.size;
	void *b = NULL;
	if (u->first == NULL) {
		u->first = pool_new(1, size);
		b = pool_try_get(u->first);
		/* Written once, before any part reaches a worker: release reads it there. */
		u->first_buf = b;
	} else {
		b = any_buf(u, size);
	}
	if (b == NULL) {
		err_code rc = u->g ? group_wait(u->g) : E_OK;
		return rc != E_OK ? rc : err_set(E_CANCELLED, "upload of %s cancelled", u->cfg.what);
	}
	*buf = b;
	return E_OK;
}

static err_code put_part(void *arg, const unsigned char *data, size_t len)
{
	upload *u = arg;
	unsigned char *buf = (unsigned char *)(uintptr_t)data; /* the chunker's get() buffer */
	if (!u->finishing || u->began) {
		if (!u->began) {
			err_code rc = u->ops->begin(u->arg);
			if (rc != E_OK) {
				release(u, buf);
				return rc;
			}
			u->began = true;
			u->ch = chan_new((size_t)u->cfg.concurrency);
			u->g = group_new();
			group_on_cancel(u->g, on_cancel, u);
		}
		if (u->nparts >= u->cfg.max_parts) {
			release(u, buf);
			return err_set(E_IO, "%s: more than %d parts of %zu bytes: raise the part size",
						   u->cfg.what, u->cfg.max_parts, u->cfg.part_size);
		}
		http_part *part = xcalloc(1, sizeof(*part));
		part->num = u->nparts + 1;
		part->offset = u->offset;
		part->buf = buf;
		part->len = len;
		part->last = u->finishing;
		part->up = u;
		u->offset += len;
		u->parts = xrealloc(u->parts, (size_t)(u->nparts + 1) * sizeof(*u->parts));
		u->parts[u->nparts++] = part;
		u->ck.size = http_part_size_after(&u->cfg, u->nparts);
		if (u->nworkers < u->cfg.concurrency) {
			err_code rc = group_go(u->g, worker, u);
			if (rc != E_OK) {
				release(u, part->buf);
				part->buf = NULL;
				return rc;
			}
			u->nworkers++;
		}
		if (!chan_send(u->ch, part)) {
			/* Cancelled: the part never reached a worker. */
			release(u, part->buf);
			part->buf = NULL;
			err_code rc = group_wait(u->g);
			return rc != E_OK ? rc : err_set(E_CANCELLED, "upload of %s cancelled", u->cfg.what);
		}
		return E_OK;
	}
	/* Finishing with nothing sent yet: the whole object is this one piece. */
	err_code rc = u->ops->single(u->arg, buf, len);
	release(u, buf);
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
		release(part->up, part->buf);
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
		release(u, u->ck.buf);
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
	atomic_init(&u->wake, false);
	u->ck.size = http_part_size_after(&u->cfg, 0);
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
