/*
 * libFuzzer target for files_metadata.json read as a stream (catalog's Files reader), fed in
 * two pieces split where the first byte says, into the delta push's table of its base: the
 * scanner's bracket and string tracking, jansson on each entry, and the table's sort.
 */
#include <stdlib.h>
#include <string.h>

#include "internal/backup/push_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	size_t split = data[0] % size;
	data++;
	size--;
	if (split > size)
		split = size;
	delta_base d = { .active = true, .start = 1700000000 };
	sink *s = catalog_files_sink_new("fuzz", delta_add_file, &d);
	err_code rc = sink_write(s, data, split);
	if (rc == E_OK)
		rc = sink_write(s, data + split, size - split);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	if (rc == E_OK) {
		delta_files_sort(&d);
		struct stat sb = { 0 };
		(void)delta_classify(&d, "/base/1/1", &sb);
	}
	err_clear();
	delta_free(&d);
	return 0;
}
