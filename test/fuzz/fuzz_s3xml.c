/*
 * libFuzzer target for the S3 and STS XML answers walc parses (untrusted server bytes):
 * ListObjectsV2, Error, InitiateMultipartUpload, DeleteObjects, AssumeRoleWithWebIdentity,
 * and the date formats. Seeds in corpus/fuzz_s3xml are real-shaped answers.
 */
#include "internal/storage/s3/s3.h"

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
	s3_list_page pg;
	if (s3_xml_list(doc, size, &pg) == E_OK) {
		for (size_t i = 0; i < pg.items.len; i++)
			if (pg.items.items[i].key == NULL)
				abort();
		s3_list_page_free(&pg);
	}
	char code[64], msg[256];
	if (xml_error(doc, size, code, sizeof(code), msg, sizeof(msg)) &&
		(strlen(code) >= sizeof(code) || strlen(msg) >= sizeof(msg)))
		abort();
	char *id = NULL;
	if (s3_xml_upload_id(doc, size, &id) == E_OK && (id == NULL || id[0] == '\0'))
		abort();
	free(id);
	size_t n;
	char *first = NULL;
	if (s3_xml_delete_errors(doc, size, &n, &first) == E_OK && n > 0 && first == NULL)
		abort();
	free(first);
	s3_creds c;
	if (s3_xml_sts_creds(doc, size, &c) == E_OK)
		s3_creds_free(&c);
	/* Dates and percent-decoding on a NUL-terminated copy. */
	char *s = xmalloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	time_t t;
	long ns;
	if (http_parse_iso8601(s, &t, &ns) && (ns < 0 || ns > 999999999))
		abort();
	http_parse_date(s, &t);
	free(http_uri_decode(s));
	free(s);
	err_clear();
	return 0;
}
