/* Repository objects as stored: listings, stats, removals, plain puts and gets, copies. */
#include "internal/repo/repo.h"

#include <stdlib.h>
#include <string.h>

#include "internal/repo/repo_impl.h"

static repo_obj obj_of(const obj_info *o)
{
	return (repo_obj){ .key = o->key, .size = o->size, .mtime = o->mtime,
					   .mtime_nsec = o->mtime_nsec, .where = o->where };
}

void repo_objs_add(repo_objs *l, const char *key, uint64_t size, time_t mtime, long nsec)
{
	if (l->len == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->items = xrealloc(l->items, l->cap * sizeof(*l->items));
	}
	l->items[l->len++] = (repo_obj){ .key = xstrdup(key), .size = size, .mtime = mtime,
									 .mtime_nsec = nsec };
}

void repo_objs_free(repo_objs *l)
{
	for (size_t i = 0; i < l->len; i++)
		free(l->items[i].key);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

/* A storage listing as the repository's (the keys move over; l is emptied). */
static void objs_take(obj_list *l, repo_objs *out)
{
	out->len = out->cap = l->len;
	out->items = xcalloc(l->len ? l->len : 1, sizeof(*out->items));
	for (size_t i = 0; i < l->len; i++)
		out->items[i] = obj_of(&l->items[i]);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

err_code repo_list(repo *r, const char *prefix, bool recursive, repo_objs *out)
{
	obj_list l;
	memset(out, 0, sizeof(*out));
	TRY(storage_list(r->st, prefix, recursive, &l));
	objs_take(&l, out);
	return E_OK;
}

err_code repo_list_temporaries(repo *r, const char *prefix, repo_objs *out)
{
	obj_list l;
	memset(out, 0, sizeof(*out));
	TRY(storage_list_temporaries(r->st, prefix, &l));
	objs_take(&l, out);
	return E_OK;
}

long repo_temporary_pid(const char *key)
{
	return storage_temporary_pid(key);
}

err_code repo_stat(repo *r, const char *key, repo_obj *info)
{
	obj_info o = { 0 };
	err_code rc = storage_stat(r->st, key, &o);
	*info = obj_of(&o);
	return rc;
}

err_code repo_remove(repo *r, const char *key)
{
	return storage_remove(r->st, key);
}

err_code repo_remove_many(repo *r, const char *const *keys, size_t n)
{
	return storage_remove_many(r->st, keys, n);
}

err_code repo_locked_until(repo *r, const char *const *keys, size_t n, time_t *until)
{
	return storage_locked_until(r->st, keys, n, until);
}

err_code repo_prepare_write(repo *r)
{
	return storage_prepare_write(r->st);
}

void repo_recheck(repo *r)
{
	storage_recheck(r->st);
}

const char *repo_storage_name(repo *r)
{
	return storage_name(r->st);
}

void repo_prefer(repo *r, const char *name)
{
	storage_prefer(r->st, name);
}

err_code repo_put_plain(repo *r, const char *key, repo_put_mode mode, sink **out)
{
	return mode == REPO_PUT_NEW ? storage_put_new(r->st, key, out)
		: mode == REPO_PUT_LONG ? storage_put_long(r->st, key, out)
								: storage_put(r->st, key, out);
}

err_code repo_get_plain(repo *r, const char *key, sink *into)
{
	return storage_get(r->st, key, into);
}

err_code repo_copy_object(repo *from, repo *to, const char *key, uint64_t size,
						  bool *server_side)
{
	return storage_copy(from->st, to->st, key, size, to->net, server_side);
}
