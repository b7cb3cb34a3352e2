/*
 * libFuzzer target: the replication stream's messages (wal-receive reads them from the
 * server). A message either fails to parse or describes bytes inside what was given.
 */
#include <stdlib.h>

#include "internal/pg/pg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pg_wal_msg m;
	if (pg_wal_msg_parse(data, size, &m) != E_OK) {
		err_clear();
		return 0;
	}
	if (m.kind == PG_WAL_DATA &&
		(m.data < data || m.data + m.len != data + size || m.start > UINT64_MAX - m.len))
		abort();
	if (m.kind != PG_WAL_DATA && m.kind != PG_WAL_KEEPALIVE)
		abort();
	return 0;
}
