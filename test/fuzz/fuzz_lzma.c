/* libFuzzer target: the lzma decoder on untrusted bytes. */
#include "test/fuzz/fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_codec_run("lzma", data, size);
}
