/*
 * libFuzzer target for the answers of GCS, Azure Blob and token endpoints walc parses
 * (untrusted server bytes): objects.list pages, object resources and JSON errors, OAuth2
 * token answers (Google, Azure AD, the metadata servers), Azure's List Blobs XML and Blob
 * Batch multipart answers. Seeds in corpus/fuzz_objstore are real-shaped answers.
 */
#include "internal/storage/azure/azure.h"
#include "internal/storage/gcs/gcs.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(LOG_ERROR, false, "fuzz");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *doc = (const char *)data;
	obj_list l;
	char *next;
	if (gcs_json_list(doc, size, &l, &next) == E_OK) {
		for (size_t i = 0; i < l.len; i++)
			if (l.items[i].key == NULL || l.items[i].key[0] == '\0')
				abort();
		obj_list_free(&l);
		free(next);
	}
	uint64_t sz;
	time_t t;
	long ns;
	gcs_json_object(doc, size, &sz, &t, &ns);
	char code[64], msg[256];
	if (gcs_json_error(doc, size, code, sizeof(code), msg, sizeof(msg)) &&
		(strlen(code) >= sizeof(code) || strlen(msg) >= sizeof(msg)))
		abort();
	http_token tok;
	if (http_token_parse(doc, size, 1000, &tok) == E_OK) {
		if (tok.value == NULL || tok.value[0] == '\0')
			abort();
		http_token_free(&tok);
	}
	az_list_page pg;
	if (az_xml_list(doc, size, &pg) == E_OK)
		az_list_page_free(&pg);
	size_t ok, missing, failed;
	long first;
	if (az_batch_statuses(doc, size, &ok, &missing, &failed, &first) == E_OK &&
		failed > 0 && (first < 100 || first > 999))
		abort();
	err_clear();
	return 0;
}
