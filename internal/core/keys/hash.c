/*
 * File checksums for delta restore: XXH3-128 (xxhash, header-only here) is fast enough to add
 * to every backup read and strong enough to tell a changed or corrupted file from the stored one.
 */
#include "internal/core/core.h"
#include "internal/core/keys/hash_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define HASH_CHUNK (1u << 20)

struct hasher {
	XXH3_state_t *st;
};

static void update_baseline(void *state, const void *buf, size_t len)
{
	XXH3_128bits_update(state, buf, len);
}

/* The baseline code (SSE2 on x86-64) or AVX2's, chosen before main: threads only read it. */
static void (*update)(void *state, const void *buf, size_t len) = update_baseline;

__attribute__((constructor)) static void pick_update(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init(); /* the compiler runtime fills its CPU model in a constructor too */
	if (__builtin_cpu_supports("avx2"))
		update = hash_update_avx2;
#endif
}

hasher *hasher_new(void)
{
	hasher *h = xcalloc(1, sizeof(*h));
	h->st = XXH3_createState();
	if (h->st == NULL)
		abort();
	XXH3_128bits_reset(h->st);
	return h;
}

void hasher_update(hasher *h, const void *buf, size_t len)
{
	update(h->st, buf, len);
}

void hasher_text(hasher *h, char out[HASH_TEXT_LEN + 1])
{
	XXH128_hash_t v = XXH3_128bits_digest(h->st);
	hash_text_format((const uint64_t[2]){ v.high64, v.low64 }, out);
}

void hash_text_format(const uint64_t v[2], char out[HASH_TEXT_LEN + 1])
{
	snprintf(out, HASH_TEXT_LEN + 1, "xxh3-128:%016llx%016llx", (unsigned long long)v[0],
			 (unsigned long long)v[1]);
}

bool hash_text_parse(const char *text, uint64_t v[2])
{
	if (text == NULL || strlen(text) != HASH_TEXT_LEN || strncmp(text, "xxh3-128:", 9) != 0)
		return false;
	v[0] = v[1] = 0;
	for (int i = 0; i < 32; i++) {
		char c = text[9 + i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return false;
		v[i / 16] = v[i / 16] << 4 | (uint64_t)d;
	}
	return true;
}

void hash128(const void *data, size_t len, uint64_t out[2])
{
	XXH128_hash_t v = XXH3_128bits(data, len);
	out[0] = v.high64;
	out[1] = v.low64;
}

int hash128_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

void hasher_free(hasher *h)
{
	if (h == NULL)
		return;
	XXH3_freeState(h->st);
	free(h);
}

err_code hash_file(const char *path, char out[HASH_TEXT_LEN + 1], uint64_t *size)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_errno(errno == ENOENT ? E_NOTFOUND : E_IO, errno, "opening %s", path);
	unsigned char *buf = xmalloc(HASH_CHUNK);
	hasher *h = hasher_new();
	err_code rc = E_OK;
	*size = 0;
	for (;;) {
		ssize_t n = read(fd, buf, HASH_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = err_errno(E_IO, errno, "reading %s", path);
			break;
		}
		if (n == 0)
			break;
		hasher_update(h, buf, (size_t)n);
		*size += (uint64_t)n;
	}
	if (rc == E_OK)
		hasher_text(h, out);
	hasher_free(h);
	free(buf);
	close(fd);
	return rc;
}
