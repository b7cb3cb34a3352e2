/* LSN text form: two hex halves, "16/B374D848". */
#include "internal/pg/pg.h"

#include <stdio.h>

err_code pg_lsn_parse(const char *text, uint64_t *lsn)
{
	unsigned int hi, lo;
	int used = 0;
	if (sscanf(text, "%X/%X%n", &hi, &lo, &used) != 2 || text[used] != '\0')
		return err_set(E_CORRUPT, "\"%s\" is not an LSN", text);
	*lsn = ((uint64_t)hi << 32) | lo;
	return E_OK;
}

void pg_lsn_format(uint64_t lsn, char out[32])
{
	snprintf(out, 32, "%X/%X", (unsigned)(lsn >> 32), (unsigned)lsn);
}
