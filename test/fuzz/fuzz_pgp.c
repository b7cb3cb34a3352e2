/*
 * libFuzzer target for the OpenPGP decrypt sink, with the WAL-G fixture's secret key (its
 * passphrase-protected RSA key, unlocked once): the input is an object, fed in a few uneven
 * writes. Seeds in corpus/fuzz_pgp are objects WAL-G wrote (test/fixtures/walg-v3.0.9-pgp),
 * so mutations reach past the PKESK into SEIPD, MDC and literal data parsing.
 */
#include "internal/crypt/crypt.h"

#include <stdio.h>
#include <stdlib.h>

#define KEY_FILE "test/fixtures/walg-v3.0.9-pgp/keys/pgp-secret.asc"
#define PASSPHRASE "walc pgp fixture passphrase"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pgp_keys *keys;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(LOG_ERROR, false, "fuzz");
	membuf text = { 0 };
	sink *s = membuf_sink_new(&text);
	if (sink_write_file(s, KEY_FILE) != E_OK ||
		pgp_keys_parse((const char *)text.data, text.len, PASSPHRASE, "WALG_PGP_KEY_PATH", &keys) !=
			E_OK) {
		fprintf(stderr, "fuzz_pgp: %s (run from the repository root)\n", err_msg());
		abort();
	}
	sink_free(s);
	free(text.data);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sink *s = pgp_decrypt_new(keys, null_sink_new());
	/* Uneven pieces so packet and chunk boundaries fall inside writes; keep writing after an
	 * error, since callers may too. */
	size_t cuts[] = { size < 3 ? size : 3, size / 3, size / 3 + 8192, size };
	size_t at = 0;
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		size_t end = cuts[i] < size ? cuts[i] : size;
		if (end > at) {
			(void)sink_write(s, data + at, end - at);
			at = end;
		}
	}
	(void)sink_finish(s);
	sink_free(s);
	return 0;
}
