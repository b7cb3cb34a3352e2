/*
 * Small copies for the static build, which links musl: `make static` passes --wrap=memcpy, so
 * every call to memcpy in walc, its libraries and musl itself lands here. musl's memcpy
 * starts every copy with `rep movsq`, tens of nanoseconds even for one byte, and jansson
 * copies byte by byte while it reads JSON: at 200,000 files memcpy was 40% of a delta
 * push's samples (docs/PERFORMANCE.md, "Files"). Copies of up to 32 bytes are done here with
 * a few loads and stores, all loads first (so a short copy between overlapping buffers, a
 * caller's bug, still gives what was meant); longer ones go to musl's, which is fast at
 * length. Other builds never reference this file (glibc's memcpy has no such cost).
 */
#include <stddef.h>
#include <stdint.h>

void *__real_memcpy(void *restrict dst, const void *restrict src, size_t n);
void *__wrap_memcpy(void *restrict dst, const void *restrict src, size_t n);

/*
 * Unaligned loads and stores as plain accesses through types that may alias anything: at any
 * optimisation level one move each, never a call to memcpy, which here would be this function.
 */
typedef uint64_t __attribute__((may_alias, aligned(1))) u64_any;
typedef uint32_t __attribute__((may_alias, aligned(1))) u32_any;
#define LOAD(T, p) (*(const T *)(const void *)(p))
#define STORE(T, p, v) (*(T *)(void *)(p) = (v))

void *__wrap_memcpy(void *restrict dst, const void *restrict src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	if (n > 32)
		return __real_memcpy(dst, src, n);
	/* Each case copies a head and a tail that overlap in the middle: no loop, no branch per byte. */
	if (n >= 16) {
		uint64_t a = LOAD(u64_any, s), b = LOAD(u64_any, s + 8);
		uint64_t c = LOAD(u64_any, s + n - 16), e = LOAD(u64_any, s + n - 8);
		STORE(u64_any, d, a);
		STORE(u64_any, d + 8, b);
		STORE(u64_any, d + n - 16, c);
		STORE(u64_any, d + n - 8, e);
	} else if (n >= 8) {
		uint64_t a = LOAD(u64_any, s), b = LOAD(u64_any, s + n - 8);
		STORE(u64_any, d, a);
		STORE(u64_any, d + n - 8, b);
	} else if (n >= 4) {
		uint32_t a = LOAD(u32_any, s), b = LOAD(u32_any, s + n - 4);
		STORE(u32_any, d, a);
		STORE(u32_any, d + n - 4, b);
	} else if (n > 0) {
		unsigned char a = s[0], b = s[n / 2], c = s[n - 1];
		d[0] = a;
		d[n / 2] = b;
		d[n - 1] = c;
	}
	return dst;
}
