/*
 * Chunker: cuts a byte stream into pieces of one size for the stages that need them (the
 * secretstream's chunks, S3's parts), or gathers small writes into bigger ones (tar).
 */
#include "internal/core/core.h"

#include <string.h>

err_code chunker_write(chunker *c, const void *data, size_t len)
{
	const unsigned char *p = data;
	while (len > 0) {
		/* Whole pieces go straight from the caller's buffer when nothing is held: no copy. */
		if (c->fill == 0 && len >= c->size && !c->hold_last && !c->pass_large) {
			TRY(c->put(c->arg, p, c->size));
			p += c->size;
			len -= c->size;
			continue;
		}
		if (c->pass_large && len >= c->size) {
			TRY(chunker_flush(c));
			return c->put(c->arg, p, len);
		}
		/* A held full piece goes on only now that more bytes follow it. */
		if (c->fill == c->size)
			TRY(chunker_flush(c));
		if (c->buf == NULL)
			TRY(c->get(c->arg, &c->buf));
		c->fill += take_bytes(c->buf + c->fill, c->size - c->fill, &p, &len);
		if (c->fill == c->size && !c->hold_last)
			TRY(chunker_flush(c));
	}
	return E_OK;
}

err_code chunker_flush(chunker *c)
{
	if (c->fill == 0)
		return E_OK;
	size_t n = c->fill;
	c->fill = 0;
	unsigned char *buf = c->buf;
	/* With get, the piece's buffer leaves with it and the next piece gets a fresh one. */
	if (c->get != NULL)
		c->buf = NULL;
	return c->put(c->arg, buf, n);
}
