/* Compression method "none": objects are stored as the raw bytes. */
#include "internal/codec/codec_impl.h"

/* Nothing to filter, so the chain is just next: no copy, no extra sink. */
sink *codec_none_compress_new(int level, sink *next)
{
	(void)level;
	return next;
}

sink *codec_none_decompress_new(sink *next)
{
	return next;
}
