/*
 * libFuzzer target for the libsodium decrypt sink: the first 32 bytes of the input are the key
 * (a fixed key for shorter inputs), the rest is the stream, fed in a few uneven writes.
 * Seeds in corpus/fuzz_secretstream are the fixed key followed by valid streams.
 */
#include "internal/crypt/crypt.h"

#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned char fixed_key[CRYPT_KEY_BYTES] = "walc-fuzz-secretstream-key-0001";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(LOG_ERROR, false, "fuzz");
	if (crypt_init() != E_OK)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const unsigned char *key = fixed_key;
	if (size >= CRYPT_KEY_BYTES) {
		key = data;
		data += CRYPT_KEY_BYTES;
		size -= CRYPT_KEY_BYTES;
	}
	sink *s = crypt_decrypt_new(key, null_sink_new());
	/* Uneven pieces so chunk and header boundaries fall inside writes; keep writing after an
	 * error, since callers may too. */
	size_t cuts[] = { size < 1 ? size : 1, size / 3, size / 3 + 8209, size };
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
