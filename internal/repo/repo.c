/* Repository objects: codec and encryption chains around storage streams. */
#include "internal/repo/repo.h"

#include <stdlib.h>
#include <string.h>

#include "internal/repo/repo_impl.h"

static err_code check_codec(const repo_settings *cfg, repo *r)
{
	r->codec = codec_by_name(cfg->compression);
	if (r->codec == NULL)
		return err_set(E_CONFIG,
					   "WALG_COMPRESSION_METHOD: unknown method \"%s\", expected lz4, zstd, "
					   "brotli, lzma or none",
					   cfg->compression);
	r->level = cfg->compression_level;
	if (r->level != 0 &&
		(r->level < codec_level_min(r->codec) || r->level > codec_level_max(r->codec)))
		return err_set(E_CONFIG, "WALG_COMPRESSION_LEVEL: %s accepts %d to %d, got %d",
					   codec_name(r->codec), codec_level_min(r->codec),
					   codec_level_max(r->codec), r->level);
	return E_OK;
}

err_code repo_open_use(const storage_settings *st, const crypt_settings *keys,
					   const repo_settings *rs, repo_use use, const char *target, repo **out)
{
	static const storage_use uses[] = { [REPO_WRITE] = STORAGE_WRITE,
										[REPO_READ] = STORAGE_READ,
										[REPO_EVERY] = STORAGE_EVERY };
	repo *r = xcalloc(1, sizeof(*r));
	r->upload_concurrency = st->upload_concurrency;
	r->download_concurrency = st->download_concurrency;
	err_code rc = check_codec(rs, r);
	if (rc == E_OK)
		rc = crypt_init();
	if (rc == E_OK)
		rc = crypter_load(keys, &r->crypt);
	if (rc == E_OK)
		rc = storage_open_use(st, uses[use], target, &r->st);
	if (rc != E_OK) {
		repo_close(r);
		r = NULL;
	}
	*out = r;
	return rc;
}

err_code repo_open(const storage_settings *st, const crypt_settings *keys, const repo_settings *rs,
				   repo **out)
{
	return repo_open_use(st, keys, rs, REPO_READ, NULL, out);
}

long repo_upload_concurrency(const repo *r)
{
	return r->upload_concurrency;
}

long repo_download_concurrency(const repo *r)
{
	return r->download_concurrency;
}

void repo_limit_network(repo *r, uint64_t bytes_per_sec)
{
	if (bytes_per_sec > 0 && r->net == NULL)
		r->net = rate_new(bytes_per_sec);
}

sink *repo_paced_new(repo *r, sink *next)
{
	return r->net != NULL ? rate_sink_new(r->net, next) : next;
}

void repo_close(repo *r)
{
	if (r == NULL)
		return;
	storage_free(r->st);
	rate_free(r->net);
	crypter_free(r->crypt);
	free(r);
}

const char *repo_backups(const repo *r)
{
	return r->backups != NULL ? r->backups : REPO_BACKUP_DIR;
}

void repo_set_backups(repo *r, const char *dir)
{
	r->backups = dir;
}

const char *repo_describe(repo *r)
{
	return storage_describe(r->st);
}

/* base_key with c's extension, to free. */
static char *key_with(const codec *c, const char *base_key)
{
	const char *ext = codec_ext(c);
	return ext[0] ? xasprintf("%s.%s", base_key, ext) : xstrdup(base_key);
}

char *repo_key(const repo *r, const char *base_key)
{
	return key_with(r->codec, base_key);
}

static err_code put_chain(repo *r, const char *base_key, repo_put_mode mode, uint64_t *stored,
						  sink **out, char **key_out)
{
	char *key = repo_key(r, base_key);
	sink *s = NULL;
	err_code rc = repo_put_plain(r, key, mode, &s);
	if (rc != E_OK) {
		free(key);
		return rc;
	}
	s = repo_paced_new(r, s);
	if (stored != NULL)
		s = count_sink_new(stored, s);
	s = repo_encrypt_new(r, s);
	*out = repo_compress_new(r, s);
	if (key_out != NULL)
		*key_out = key;
	else
		free(key);
	return E_OK;
}

err_code repo_put(repo *r, const char *base_key, uint64_t *stored, sink **out, char **key_out)
{
	return put_chain(r, base_key, REPO_PUT_REPLACE, stored, out, key_out);
}

err_code repo_put_long(repo *r, const char *base_key, uint64_t *stored, sink **out, char **key_out)
{
	return put_chain(r, base_key, REPO_PUT_LONG, stored, out, key_out);
}

err_code repo_put_new(repo *r, const char *base_key, sink **out, char **key_out)
{
	return put_chain(r, base_key, REPO_PUT_NEW, NULL, out, key_out);
}

const codec *repo_codec_for_key(const char *key)
{
	const char *slash = strrchr(key, '/');
	const char *base = slash ? slash + 1 : key;
	const char *dot = strrchr(base, '.');
	if (dot != NULL) {
		const codec *c = codec_by_ext(dot + 1);
		if (c != NULL && codec_ext(c)[0] != '\0')
			return c;
	}
	return codec_by_name("none");
}

sink *repo_decompress_new(const char *key, sink *next)
{
	return codec_decompress_new(repo_codec_for_key(key), next);
}

sink *repo_compress_new(const repo *r, sink *next)
{
	return codec_compress_new(r->codec, r->level, next);
}

bool repo_is_codec_ext(const char *ext)
{
	return codec_by_ext(ext) != NULL;
}

size_t repo_decode_memory(const char *key)
{
	return codec_decode_memory(repo_codec_for_key(key));
}

void repo_compress_here(void)
{
	codec_compress_here();
}

/* The frames rule: c's frames are entry points in the stored object only in the clear. */
static bool frames_stored(const repo *r, const codec *c)
{
	return codec_has_frames(c) && r->crypt == NULL;
}

bool repo_frames_allowed(const repo *r)
{
	return frames_stored(r, r->codec);
}

err_code repo_end_frame(const char *key, sink *w)
{
	return codec_end_frame(repo_codec_for_key(key), w);
}

/*
 * Without a key, an object's first bytes are kept as they pass: when decoding fails, they
 * tell an encrypted object (whose decoder saw ciphertext) from a damaged one.
 */
#define SNIFF_BYTES 4096

typedef struct sniffed {
	size_t n;
	unsigned char head[SNIFF_BYTES];
} sniffed;

static void sniff_bytes(void *arg, const void *buf, size_t len)
{
	sniffed *f = arg;
	size_t room = SNIFF_BYTES - f->n, k = len < room ? len : room;
	memcpy(f->head + f->n, buf, k);
	f->n += k;
}

/* f's tap on next, without a key (f: NULL, or zeroed by the caller). */
static sink *sniff_new(repo *r, sniffed *f, sink *next)
{
	return r->crypt == NULL && f != NULL ? tap_sink_new(sniff_bytes, f, next) : next;
}

/* The first bytes each codec writes (none for brotli, whose stream has no header). */
static const unsigned char *codec_magic(const codec *c, size_t *len)
{
	static const unsigned char zstd[] = { 0x28, 0xb5, 0x2f, 0xfd }, lz4[] = { 0x04, 0x22, 0x4d, 0x18 },
							   lzma[] = { 0x5d };
	const char *name = codec_name(c);
	const unsigned char *m = strcmp(name, "zstd") == 0 ? zstd
		: strcmp(name, "lz4") == 0					   ? lz4
		: strcmp(name, "lzma") == 0					   ? lzma
													   : NULL;
	*len = m == zstd ? sizeof(zstd) : m == lz4 ? sizeof(lz4) : m == lzma ? sizeof(lzma) : 0;
	return m;
}

/*
 * rc, or when the object read without a key (its first bytes f) shows encryption: a line saying so
 * (*said then).
 */
static err_code encrypted_without_key(repo *r, const char *key, const sniffed *f, err_code rc,
									  bool *said)
{
	*said = false;
	if (r->crypt != NULL || f == NULL || rc == E_OK || rc == E_NOTFOUND || rc == E_CANCELLED)
		return rc;
	const codec *c = repo_codec_for_key(key);
	size_t mlen;
	const unsigned char *magic = codec_magic(c, &mlen);
	const char *method =
		crypt_sniff(f->head, f->n, magic, mlen, strcmp(codec_name(c), "none") == 0);
	if (method == NULL)
		return rc;
	*said = true;
	return err_set(E_CONFIG, "object %s in %s is encrypted (%s), no key configured: set %s",
				   key, storage_describe(r->st), method, crypter_vars(method));
}

/*
 * An object (whole: ranged false; else len stored bytes from offset) decoded into `into`;
 * the stored bytes counted toward p (NULL: none) as they arrive.
 */
static err_code get_object(repo *r, const char *key, bool ranged, uint64_t offset, uint64_t len,
						   progress *p, sink *into)
{
	sink *chain = repo_decompress_new(key, into);
	if (!ranged)
		chain = repo_decrypt_new(r, chain);
	/* only an object's start shows what it is */
	sniffed head = { 0 }, *sniff = !ranged || offset == 0 ? &head : NULL;
	chain = sniff_new(r, sniff, chain);
	if (p != NULL)
		chain = tap_sink_new(progress_bytes, p, chain);
	chain = repo_paced_new(r, chain);
	err_code rc = !ranged				? storage_get(r->st, key, chain)
		: r->crypt != NULL ? err_set(E_FAIL, "an encrypted object cannot be read in part")
						   : storage_get_range(r->st, key, offset, len, chain);
	if (rc == E_OK)
		rc = sink_finish(chain);
	bool said;
	rc = encrypted_without_key(r, key, sniff, rc, &said);
	sink_free(chain);
	if (rc != E_OK && rc != E_NOTFOUND && !said && !ranged)
		err_wrap(rc, "object %s in %s", key, storage_describe(r->st));
	else if (rc != E_OK && rc != E_NOTFOUND && !said)
		err_wrap(rc, "object %s (bytes %llu to %llu) in %s", key, (unsigned long long)offset,
				 (unsigned long long)(offset + len), storage_describe(r->st));
	return rc;
}

err_code repo_get(repo *r, const char *key, sink *into)
{
	return get_object(r, key, false, 0, 0, NULL, into);
}

err_code repo_get_counted(repo *r, const char *key, progress *p, sink *into)
{
	return get_object(r, key, false, 0, 0, p, into);
}

bool repo_has_range(const repo *r, const char *key)
{
	return frames_stored(r, repo_codec_for_key(key)) && storage_has_range(r->st);
}

err_code repo_get_range(repo *r, const char *key, uint64_t offset, uint64_t len, sink *into)
{
	return get_object(r, key, true, offset, len, NULL, into);
}

err_code repo_get_range_counted(repo *r, const char *key, uint64_t offset, uint64_t len,
								progress *p, sink *into)
{
	return get_object(r, key, true, offset, len, p, into);
}

/*
 * The i-th key an object stored for base_key may have: the configured codec's extension
 * first, then the others'; NULL past the last.
 */
static char *candidate_key(const repo *r, const char *base_key, size_t i)
{
	const codec *c = r->codec;
	if (i > 0) {
		const codec *const *all = codec_all();
		size_t k = 0;
		for (; all[k] != NULL; k++)
			if (all[k] != r->codec && --i == 0)
				break;
		c = all[k];
		if (c == NULL)
			return NULL;
	}
	return key_with(c, base_key);
}

static err_code none_for(repo *r, const char *base_key)
{
	return err_set(E_NOTFOUND, "no object for %s in %s", base_key, storage_describe(r->st));
}

err_code repo_find(repo *r, const char *base_key, char **key_out)
{
	*key_out = NULL;
	char *key;
	for (size_t i = 0; (key = candidate_key(r, base_key, i)) != NULL; i++) {
		repo_obj info;
		err_code rc = repo_stat(r, key, &info);
		if (rc == E_OK)
			*key_out = key;
		else
			free(key);
		if (rc != E_NOTFOUND)
			return rc;
	}
	return none_for(r, base_key);
}

err_code repo_get_found(repo *r, const char *base_key, repo_open_fn open_sink, void *arg,
						char **key_out)
{
	char *key;
	for (size_t i = 0; (key = candidate_key(r, base_key, i)) != NULL; i++) {
		sink *into = NULL;
		err_code rc = open_sink(arg, &into);
		/* a destination that cannot be opened is never "no such object" */
		if (rc == E_NOTFOUND)
			rc = err_wrap(E_IO, "opening where %s goes", key);
		if (rc == E_OK)
			rc = repo_get(r, key, into);
		if (rc == E_OK && key_out != NULL)
			*key_out = key;
		else
			free(key);
		if (rc != E_NOTFOUND)
			return rc;
	}
	return none_for(r, base_key);
}
