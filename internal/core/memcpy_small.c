/*
 * Small copies for the static build, which links musl: `make static` passes --wrap=memcpy, so
 * every call to memcpy in walc, its libraries and musl itself lands here. musl's memcpy
 * starts every copy with `rep movsq`, tens of nanoseconds even for one byte, and jansson
 * copies byte by byte while it reads JSON: at 200,000 files that was a third of a delta
 * push's CPU (docs/PERFORMANCE.md, "Files"). Copies of up to 32 bytes are done here with
 * a few loads and stores; longer ones go to musl's, which is fast at length. Other builds
 * never reference this file (glibc's memcpy has no such cost).
 */
#include <stddef.h>
#include <stdint.h>

void *__real_memcpy(void *restrict dst, const void *restrict src, size_t n);
void *__wrap_memcpy(void *restrict dst, const void *restrict src, size_t n);

/* Fixed-size copies through a register; GCC turns each into one load or one store. */
#define LOAD(T, p) ({ T v_; __builtin_memcpy(&v_, (p), sizeof(T)); v_; })
#define STORE(T, p, v) ({ T v_ = (v); __builtin_memcpy((p), &v_, sizeof(T)); })

void *__wrap_memcpy(void *restrict dst, const void *restrict src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (n > 32)
		return __real_memcpy(dst, src, n);
	/* Each case copies a head and a tail that overlap in the middle: no loop, no branch per byte. */
	if (n >= 16) {
		uint64_t a = LOAD(uint64_t, s), b = LOAD(uint64_t, s + 8);
		uint64_t c = LOAD(uint64_t, s + n - 16), e = LOAD(uint64_t, s + n - 8);
		STORE(uint64_t, d, a);
		STORE(uint64_t, d + 8, b);
		STORE(uint64_t, d + n - 16, c);
		STORE(uint64_t, d + n - 8, e);
	} else if (n >= 8) {
		uint64_t a = LOAD(uint64_t, s), b = LOAD(uint64_t, s + n - 8);
		STORE(uint64_t, d, a);
		STORE(uint64_t, d + n - 8, b);
	} else if (n >= 4) {
		uint32_t a = LOAD(uint32_t, s), b = LOAD(uint32_t, s + n - 4);
		STORE(uint32_t, d, a);
		STORE(uint32_t, d + n - 4, b);
	} else if (n > 0) {
		unsigned char a = s[0], b = s[n / 2], c = s[n - 1];
		d[0] = a;
		d[n / 2] = b;
		d[n - 1] = c;
	}
	return dst;
}
