/* Backend-independent parts of storage: dispatch, key checks, listing helpers. */
#include "internal/storage/storage.h"
#include "internal/storage/azure/azure.h"
#include "internal/storage/gcs/gcs.h"
#include "internal/storage/s3/s3.h"
#include "internal/storage/sftp/sftp.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "internal/pipe/pipe.h"

err_code storage_check_key(const char *key)
{
	if (key == NULL || key[0] == '\0')
		return err_set(E_CONFIG, "empty object key");
	if (key[0] == '/')
		return err_set(E_CONFIG, "object key \"%s\" is absolute", key);
	for (const char *p = key; *p; p++)
		if ((unsigned char)*p < 0x20)
			return err_set(E_CONFIG, "object key contains a control character");
	/* Walk the components: "." and ".." would escape or alias the repository. */
	const char *p = key;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return err_set(E_CONFIG, "object key \"%s\" has a \".\" or \"..\" component", key);
		if (slash == NULL)
			break;
		p = slash + 1;
	}
	return E_OK;
}

err_code storage_put(storage *st, const char *key, sink **out)
{
	*out = NULL;
	TRY(storage_check_key(key));
	return st->ops->put(st, key, out);
}

err_code storage_put_long(storage *st, const char *key, sink **out)
{
	*out = NULL;
	TRY(storage_check_key(key));
	return st->ops->put_long != NULL ? st->ops->put_long(st, key, out) : st->ops->put(st, key, out);
}

err_code storage_put_new(storage *st, const char *key, sink **out)
{
	*out = NULL;
	TRY(storage_check_key(key));
	if (st->ops->put_new != NULL)
		return st->ops->put_new(st, key, out);
	obj_info info;
	err_code rc = st->ops->stat(st, key, &info);
	if (rc == E_OK)
		return err_set(E_EXISTS, "%s already exists in %s", key, storage_describe(st));
	if (rc != E_NOTFOUND)
		return rc;
	err_clear();
	return st->ops->put(st, key, out);
}

err_code storage_get(storage *st, const char *key, sink *into)
{
	TRY(storage_check_key(key));
	return st->ops->get(st, key, into);
}

bool storage_has_range(const storage *st)
{
	return st->ops->get_range != NULL;
}

err_code storage_get_range(storage *st, const char *key, uint64_t offset, uint64_t len,
						   sink *into)
{
	TRY(storage_check_key(key));
	if (st->ops->get_range == NULL)
		return err_set(E_FAIL, "%s cannot read part of an object", storage_describe(st));
	return len == 0 ? E_OK : st->ops->get_range(st, key, offset, len, into);
}

err_code storage_stat(storage *st, const char *key, obj_info *info)
{
	memset(info, 0, sizeof(*info));
	TRY(storage_check_key(key));
	return st->ops->stat(st, key, info);
}

err_code storage_list(storage *st, const char *prefix, bool recursive, obj_list *out)
{
	memset(out, 0, sizeof(*out));
	if (prefix[0] != '\0')
		TRY(storage_check_key(prefix));
	return st->ops->list(st, prefix, recursive, out);
}

err_code storage_list_temporaries(storage *st, const char *prefix, obj_list *out)
{
	memset(out, 0, sizeof(*out));
	if (prefix[0] != '\0')
		TRY(storage_check_key(prefix));
	return st->ops->list_temporaries ? st->ops->list_temporaries(st, prefix, out) : E_OK;
}

long storage_temporary_pid(const char *key)
{
	const char *mark = strstr(key, FILE_TMP_MARK);
	if (mark == NULL)
		return 0;
	char *end;
	long pid = strtol(mark + strlen(FILE_TMP_MARK), &end, 10);
	return end != mark + strlen(FILE_TMP_MARK) && *end == '.' && pid > 0 ? pid : 0;
}

bool storage_is_temporary(const char *name)
{
	if (name[0] == '.' && strstr(name, FILE_TMP_MARK) != NULL)
		return true;
	/* WAL-G's: ".tmp." then 8 digits, 'T', 6 digits, 'Z', '-', 16 lower-case hex digits */
	static const char shape[] = ".tmp.ddddddddTddddddZ-xxxxxxxxxxxxxxxx";
	size_t n = strlen(name), k = sizeof(shape) - 1;
	if (n <= k)
		return false;
	const char *t = name + n - k;
	for (size_t i = 0; i < k; i++) {
		char c = t[i];
		bool ok = shape[i] == 'd'	? (c >= '0' && c <= '9')
				  : shape[i] == 'x' ? ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))
									: c == shape[i];
		if (!ok)
			return false;
	}
	return true;
}

err_code storage_remove(storage *st, const char *key)
{
	TRY(storage_check_key(key));
	return st->ops->remove(st, key);
}

err_code storage_remove_many(storage *st, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		TRY(storage_check_key(keys[i]));
	if (st->ops->remove_many != NULL)
		return st->ops->remove_many(st, keys, n);
	for (size_t i = 0; i < n; i++)
		TRY(st->ops->remove(st, keys[i]));
	return E_OK;
}

err_code storage_prepare_write(storage *st)
{
	return st->ops->prepare_write != NULL ? st->ops->prepare_write(st) : E_OK;
}

err_code storage_locked_until(storage *st, const char *const *keys, size_t n, time_t *until)
{
	memset(until, 0, n * sizeof(*until));
	if (st->ops->locked_until == NULL || n == 0)
		return E_OK;
	for (size_t i = 0; i < n; i++)
		TRY(storage_check_key(keys[i]));
	return st->ops->locked_until(st, keys, n, until);
}

const char *storage_describe(storage *st)
{
	return st->ops->describe(st);
}

void storage_free(storage *st)
{
	if (st != NULL)
		st->ops->free(st);
}

void obj_list_add(obj_list *l, const char *key, uint64_t size, time_t mtime, long nsec)
{
	if (l->len == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->items = xrealloc(l->items, l->cap * sizeof(*l->items));
	}
	l->items[l->len++] = (obj_info){ xstrdup(key), size, mtime, nsec, NULL };
}

void obj_list_free(obj_list *l)
{
	for (size_t i = 0; i < l->len; i++)
		free(l->items[i].key);
	free(l->items);
	memset(l, 0, sizeof(*l));
}

err_code storage_open(const storage_settings *cfg, storage **out)
{
	*out = NULL;
	/* WAL-G's order: S3, then the file system, then GCS, then Azure, then SFTP. */
	if (cfg->s3_prefix != NULL)
		return storage_s3_open(cfg, out);
	if (cfg->file_prefix == NULL && cfg->gs_prefix != NULL)
		return storage_gcs_open(cfg, out);
	if (cfg->file_prefix == NULL && cfg->az_prefix != NULL)
		return storage_az_open(cfg, out);
	if (cfg->file_prefix == NULL && cfg->ssh_prefix != NULL)
		return storage_sftp_open(cfg, out);
	if (cfg->file_prefix == NULL)
		return err_set(E_CONFIG, "no storage configured: set WALG_FILE_PREFIX, WALG_S3_PREFIX, "
								 "WALG_GS_PREFIX, WALG_AZ_PREFIX or WALG_SSH_PREFIX");
	char *root = cfg->storage_prefix
		? xasprintf("%s/%s", cfg->file_prefix, cfg->storage_prefix)
		: xstrdup(cfg->file_prefix);
	err_code rc = storage_fs_open(root, out);
	free(root);
	return rc;
}

typedef struct md5_tap {
	EVP_MD_CTX *ctx;
	uint64_t bytes;
} md5_tap;

static void md5_bytes(void *arg, const void *buf, size_t len)
{
	md5_tap *t = arg;
	EVP_DigestUpdate(t->ctx, buf, len);
	t->bytes += len;
}

/* Whether st keeps an MD5 of key that differs from want (unknown ones never differ). */
static err_code md5_differs(storage *st, const char *key, const unsigned char want[16],
							bool *differs)
{
	*differs = false;
	if (st->ops->md5 == NULL)
		return E_OK;
	unsigned char got[16];
	bool known = false;
	TRY(st->ops->md5(st, key, got, &known));
	*differs = known && memcmp(got, want, 16) != 0;
	return E_OK;
}

err_code storage_copy(storage *src, storage *dst, const char *key, uint64_t size, rate *net,
					  bool *server_side)
{
	*server_side = false;
	TRY(storage_check_key(key));
	if (dst->ops->copy_from != NULL && dst->ops->copy_from == src->ops->copy_from)
		TRY(dst->ops->copy_from(dst, src, key, size, server_side));
	unsigned char md5[16];
	bool have_md5 = false;
	uint64_t copied = size;
	if (!*server_side) {
		sink *put;
		TRY(storage_put(dst, key, &put));
		md5_tap t = { EVP_MD_CTX_new(), 0 };
		EVP_DigestInit_ex(t.ctx, EVP_md5(), NULL);
		sink *tap = tap_sink_new(md5_bytes, &t, net != NULL ? rate_sink_new(net, put) : put);
		err_code rc = storage_get(src, key, tap);
		/* A read that src's own checksum disowns is not published. */
		bool differs = false;
		unsigned int ml = 0;
		if (rc == E_OK) {
			EVP_DigestFinal_ex(t.ctx, md5, &ml);
			have_md5 = true;
			rc = md5_differs(src, key, md5, &differs);
		}
		if (rc == E_OK && (differs || t.bytes != size))
			rc = err_set(E_CORRUPT, "%s in %s: read %llu bytes%s, listed with %llu", key,
						 storage_describe(src), (unsigned long long)t.bytes,
						 differs ? " whose MD5 differs from the store's" : "",
						 (unsigned long long)size);
		if (rc == E_OK)
			rc = sink_finish(tap);
		sink_free(tap);
		EVP_MD_CTX_free(t.ctx);
		TRY(rc);
		copied = t.bytes;
	}
	obj_info info;
	err_code rc = storage_stat(dst, key, &info);
	bool differs = false;
	if (rc == E_OK && have_md5)
		rc = md5_differs(dst, key, md5, &differs);
	if (rc == E_OK && (info.size != copied || differs)) {
		storage_remove(dst, key);
		err_clear();
		rc = err_set(E_CORRUPT, "%s: the copy in %s has %llu bytes%s, the source %llu; removed",
					 key, storage_describe(dst), (unsigned long long)info.size,
					 differs ? " and another MD5" : "", (unsigned long long)copied);
	}
	return rc;
}
