/*
 * Transparent huge pages asked of the allocator, where walc can ask: the static binary's
 * mimalloc (built with WALC_MIMALLOC). The ordinary build's allocator is left as it is.
 */
#include "internal/core/core.h"

#ifdef WALC_MIMALLOC
#include <mimalloc.h>
#endif

void mem_use_huge_pages(void)
{
#ifdef WALC_MIMALLOC
	/*
	 * mimalloc then madvises each new 32 MiB segment (MADV_HUGEPAGE). The first segment is
	 * made at the first allocation and serves a short process's whole main thread, which is
	 * why the caller must come first.
	 */
	mi_option_enable(mi_option_large_os_pages);
#endif
}
