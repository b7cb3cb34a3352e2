/*
 * libFuzzer target for applying a WAL-G increment on restore: the input is the content of an
 * increment member (magic, file size, page count, block numbers, pages) applied to a base file
 * in a scratch directory. Hostile sizes and block numbers must be refused, never written.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/backup/restore/extract.h"
#include "internal/tar/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/walc-fuzz-inc-XXXXXX";
static file_table files;

/* libFuzzer ends a timed run with exit(): the scratch directory goes with it. */
static void remove_scratch(void)
{
	char *path = xasprintf("%s/rel", dir);
	(void)unlink(path);
	(void)rmdir(dir);
	free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (files.n == 0) {
		if (mkdtemp(dir) == NULL || atexit(remove_scratch) != 0)
			abort();
		json_t *rec = json_pack("{s:b}", "IsIncremented", 1);
		if (file_table_add(&files, "/rel", rec) != E_OK || file_table_end(&files, "fuzz") != E_OK)
			abort();
		json_decref(rec);
	}
	/* A base file of 4 pages for the increment to apply to. */
	char *path = xasprintf("%s/rel", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 4 * 8192) != 0)
		abort();
	close(fd);

	extract_level lvl = { .dest = dir, .need = NULL, .files = &files, .backup = "fuzz" };
	membuf mb = { 0 };
	tar_writer *tw = tar_writer_new(membuf_sink_new(&mb));
	tar_entry te = { .name = "/rel", .type = TAR_FILE, .size = size, .mode = 0600 };
	if (tar_writer_begin(tw, &te) != E_OK || tar_writer_write(tw, data, size) != E_OK ||
		tar_writer_end(tw) != E_OK || tar_writer_finish(tw) != E_OK)
		abort();
	tar_writer_free(tw);

	sink *x = extract_sink_new(&lvl, NULL);
	if (sink_write(x, mb.data, mb.len) == E_OK)
		(void)sink_finish(x);
	sink_free(x);
	free(mb.data);
	/* Whatever was accepted, the file never grows past a relation segment. */
	struct stat sb;
	if (stat(path, &sb) == 0 && sb.st_size > (off_t)1 << 30)
		abort();
	free(path);
	err_clear();
	return 0;
}
