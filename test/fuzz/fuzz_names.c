/*
 * libFuzzer target for the small parsers of untrusted text: WAL file names (from PostgreSQL,
 * the daemon socket and object keys), LSNs, RFC 3339 times, storage keys, the daemon's framed
 * messages and tar member paths on restore.
 */
#include <stdlib.h>
#include <string.h>

#include "internal/backup/restore/extract.h"
#include "internal/daemon/daemon.h"
#include "internal/pg/pg.h"
#include "internal/storage/storage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';

	if (wal_is_archive_name(s) && (strchr(s, '/') != NULL || strstr(s, "..") != NULL))
		abort(); /* a name we accept must never be a path */
	uint32_t tli;
	uint64_t segno, lsn;
	char back[WAL_NAME_LEN + 1];
	for (uint64_t seg = 1u << 20; seg <= (1u << 30); seg <<= 4)
		if (wal_name_parse(s, seg, &tli, &segno) == E_OK) {
			wal_name_format(back, tli, segno, seg);
			if (strcmp(back, s) != 0)
				abort(); /* parse and format must round-trip */
		}
	(void)pg_lsn_parse(s, &lsn);
	time_t sec;
	long nsec;
	(void)time_parse_rfc3339(s, &sec, &nsec);
	if (storage_check_key(s) == E_OK && (s[0] == '/' || strstr(s, "/../") != NULL))
		abort();
	char rel[4096];
	if (extract_safe_path(s, rel, sizeof(rel)) == E_OK &&
		(rel[0] == '/' || strcmp(rel, "..") == 0 || strncmp(rel, "../", 3) == 0 ||
		 strstr(rel, "/../") != NULL))
		abort(); /* a restored path must stay inside the destination */
	daemon_request q;
	(void)daemon_parse(data, size, &q);
	err_clear();
	free(s);
	return 0;
}
