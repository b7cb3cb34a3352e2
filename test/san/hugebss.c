/*
 * Linked into the ASan+UBSan builds only (make asan, make coverage; Makefile's SAN_OBJ): moves
 * the executable's .bss onto transparent huge pages, right after the ASan runtime has started
 * and before any library's constructor runs. A speed-up of the test binary, nothing else: on
 * any failure the .bss stays as it was.
 *
 * Why: LeakSanitizer scans every writable segment at exit, and 8.6 MiB of the executable's
 * 9.8 MiB .bss are the ASan runtime's stack-depot tables, mostly never written. Each 4 KiB page
 * the scan reads costs a page fault, 10-15 us on the test machines, about 2,000 of them per
 * process; a 1 MiB wal-push took 115 ms of CPU, 92 ms with this, and make test runs about
 * 12,000 walc processes. On 2 MiB pages the scan faults a few times. MADV_HUGEPAGE on the .bss
 * itself does not work: the runtime has already written pages of most of its 2 MiB ranges,
 * which then keep their 4 KiB pages, and MADV_COLLAPSE refuses the .bss (EINVAL). So the range
 * is rebuilt: a fresh mapping asked for huge pages, the pages written so far copied into it,
 * then moved over the old range by mremap (same addresses, so ASan's shadow of the globals is
 * unchanged).
 */
#include <link.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_SIZE ((uintptr_t)2 << 20)
#define PAGE_SIZE_4K ((uintptr_t)4096)
#define MAX_PAGES 16384 /* 64 MiB of .bss: far more than walc has */

static unsigned char resident[MAX_PAGES];

/* mincore cannot tell a page swapped out from one never written: with swap, leave it be. */
static int swap_in_use(void)
{
	char buf[512];
	int fd = open("/proc/swaps", O_RDONLY | O_CLOEXEC), lines = 0;
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf);

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 1;
	for (ssize_t i = 0; i < n; i++)
		lines += buf[i] == '\n';
	return lines > 1; /* more than the header */
}

/* Not instrumented, and not memcpy (ASan's memcpy would check the globals' redzones). */
__attribute__((no_sanitize("address"))) static void copy_page(uintptr_t to, uintptr_t from)
{
	volatile const uint64_t *src = (volatile const uint64_t *)from;
	uint64_t *dst = (uint64_t *)to;

	for (size_t i = 0; i < PAGE_SIZE_4K / sizeof *dst; i++)
		dst[i] = src[i];
}

static void move_to_huge_pages(uintptr_t begin, uintptr_t end)
{
	size_t len = end - begin, pages = len / PAGE_SIZE_4K;
	char *map;
	uintptr_t at;

	if (pages > MAX_PAGES)
		return;
	map = mmap(NULL, len + HUGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return;
	at = ((uintptr_t)map + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
	if (madvise((void *)at, len, MADV_HUGEPAGE) != 0 || mincore((void *)begin, len, resident) != 0)
		goto fail;
	for (size_t i = 0; i < pages; i++)
		if (resident[i] & 1)
			copy_page(at + i * PAGE_SIZE_4K, begin + i * PAGE_SIZE_4K);
	if (mremap((void *)at, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)begin) == MAP_FAILED)
		goto fail;
	/* The mapping's slack before and after the moved range. */
	if (at > (uintptr_t)map)
		munmap(map, at - (uintptr_t)map);
	munmap((void *)(at + len), (uintptr_t)map + len + HUGE_SIZE - (at + len));
	return;
fail:
	munmap(map, len + HUGE_SIZE);
}

static int main_program_bss(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_name && info->dlpi_name[0])
		return 0; /* a shared library; the executable's name is "" */
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t begin, end;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
			continue;
		/* The whole 2 MiB ranges of the part not backed by the file. */
		begin = info->dlpi_addr + ph->p_vaddr + ph->p_filesz;
		end = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		begin = (begin + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1);
		end &= ~(HUGE_SIZE - 1);
		if (end > begin)
			move_to_huge_pages(begin, end);
	}
	return 1;
}

static void bss_to_huge_pages(int argc, char **argv, char **envp)
{
	(void)argc;
	(void)argv;
	(void)envp;
	if (!swap_in_use())
		dl_iterate_phdr(main_program_bss, NULL);
}

/* After the ASan runtime's own entry, which the linker places first, before any constructor. */
__attribute__((section(".preinit_array"), used)) static void (*hugebss_preinit)(int, char **, char **) =
	bss_to_huge_pages;
