/*
 * libFuzzer target for the JSON walc reads from a repository: a sentinel (any shape, any
 * types) goes through WAL-G's case-insensitive parsing; jansson does the syntax.
 */
#include <stdlib.h>
#include <string.h>

#include "internal/catalog/catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t jerr;
	json_t *root = json_loadb((const char *)data, size, 0, &jerr);
	if (root == NULL)
		return 0;
	backup_sentinel s;
	if (catalog_sentinel_parse(root, "fuzz", &s) == E_OK) {
		json_t *back = catalog_sentinel_json(&s);
		char *text = json_dumps(back, JSON_COMPACT);
		free(text);
		json_decref(back);
		catalog_sentinel_free(&s);
	}
	err_clear();
	json_decref(root);
	return 0;
}
