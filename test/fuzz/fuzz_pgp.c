/*
 * libFuzzer target for the OpenPGP decrypt sink, with the WAL-G fixture's secret key (its
 * passphrase-protected RSA key, unlocked once): the input is an object, fed in writes of
 * varying size; it must fail cleanly, never crash, hang or leak. Seeds in corpus/fuzz_pgp are objects WAL-G wrote (test/fixtures/walg-v3.0.9-pgp),
 * so mutations reach past the PKESK into SEIPD, MDC and literal data parsing.
 */
#include "internal/crypt/crypt.h"
#include "test/fuzz/fuzz_codec.h"

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
	/* packet and partial-length boundaries move with the data */
	static const size_t steps[] = { 3, 8192, 1, 511, 65536, 24, 4099 };
	sink *s = pgp_decrypt_new(keys, null_sink_new());
	err_code rc = fuzz_feed(s, data, size, steps, sizeof(steps) / sizeof(steps[0]), 0);
	sink_free(s);
	/* Bad data is E_CORRUPT, an object for another key E_CONFIG; anything else is a bug. */
	if (rc != E_OK && rc != E_CORRUPT && rc != E_CONFIG)
		abort();
	err_clear();
	return 0;
}
