/* WAL file names: %08X%08X%08X of timeline, segno / segments-per-xlogid, segno % that. */
#include "internal/pg/bytes_impl.h"
#include "internal/pg/pg.h"
#include "internal/pg/wal/walpage_impl.h"

#include <stdio.h>
#include <string.h>

static bool all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'F')))
			return false;
	return true;
}

bool wal_is_segment_name(const char *name)
{
	return strlen(name) == WAL_NAME_LEN && all_hex(name, WAL_NAME_LEN);
}

bool wal_is_archive_name(const char *name)
{
	size_t n = strlen(name);
	if (n == WAL_NAME_LEN)
		return all_hex(name, n);
	if (n == 8 + strlen(".history"))
		return all_hex(name, 8) && strcmp(name + 8, ".history") == 0;
	if (n == WAL_NAME_LEN + strlen(".partial"))
		return all_hex(name, WAL_NAME_LEN) && strcmp(name + WAL_NAME_LEN, ".partial") == 0;
	if (n == WAL_NAME_LEN + 1 + 8 + strlen(".backup"))
		return all_hex(name, WAL_NAME_LEN) && name[WAL_NAME_LEN] == '.' &&
			all_hex(name + WAL_NAME_LEN + 1, 8) && strcmp(name + WAL_NAME_LEN + 9, ".backup") == 0;
	return false;
}

bool wal_is_file_name(const char *name)
{
	if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
		strlen(name) > 255)
		return false;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p == '/' || *p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

static uint64_t segs_per_xlogid(uint64_t seg_size)
{
	return (UINT64_C(1) << 32) / seg_size;
}

err_code wal_name_parse(const char *name, uint64_t seg_size, uint32_t *tli, uint64_t *segno)
{
	unsigned int t, hi, lo;
	if (!wal_is_segment_name(name) || sscanf(name, "%08X%08X%08X", &t, &hi, &lo) != 3)
		return err_set(E_CONFIG, "\"%s\" is not a WAL segment name", name);
	if (lo >= segs_per_xlogid(seg_size))
		return err_set(E_CONFIG, "\"%s\" is not a WAL segment name for %llu-byte segments", name,
					   (unsigned long long)seg_size);
	*tli = t;
	*segno = (uint64_t)hi * segs_per_xlogid(seg_size) + lo;
	return E_OK;
}

void wal_name_format(char out[WAL_NAME_LEN + 1], uint32_t tli, uint64_t segno, uint64_t seg_size)
{
	uint64_t per = segs_per_xlogid(seg_size);
	snprintf(out, WAL_NAME_LEN + 1, "%08X%08X%08X", tli, (unsigned)(segno / per),
			 (unsigned)(segno % per));
}

/* XLogLongPageHeaderData: magic, info, tli, pageaddr, rem_len, padding, sysid, seg size, blcksz. */

bool wal_header_sysid(const unsigned char *buf, size_t len, uint64_t seg_size, uint64_t *sysid)
{
	if (len < WAL_LONG_HEADER_LEN)
		return false;
	uint16_t magic = (uint16_t)pg_le(buf, 2), info = (uint16_t)pg_le(buf + 2, 2);
	if (magic < WAL_MAGIC_PG92 || (info & XLP_LONG_HEADER) == 0)
		return false;
	if ((seg_size != 0 && pg_le(buf + 32, 4) != seg_size) || pg_le(buf + 36, 4) != 8192)
		return false;
	*sysid = pg_le(buf + 24, 8);
	return true;
}

static bool valid_seg_size(uint64_t v)
{
	return v >= (UINT64_C(1) << 20) && v <= (UINT64_C(1) << 30) && (v & (v - 1)) == 0;
}

bool wal_segment_check(const char *name, const unsigned char *head, size_t head_len,
					   uint64_t size, uint64_t seg_size, uint64_t *sysid, char why[128])
{
	char seg[WAL_NAME_LEN + 1];
	snprintf(seg, sizeof(seg), "%.24s", name);
	uint16_t magic = head_len >= 2 ? (uint16_t)pg_le(head, 2) : 0;
	if (head_len < WAL_LONG_HEADER_LEN || magic < WAL_MAGIC_PG92) {
		snprintf(why, 128, "does not start with a WAL page header (%llu bytes)",
				 (unsigned long long)size);
		return false;
	}
	uint16_t info = (uint16_t)pg_le(head + 2, 2);
	uint32_t tli = (uint32_t)pg_le(head + 4, 4);
	uint64_t addr = pg_le(head + 8, 8), own = pg_le(head + 32, 4);
	uint32_t name_tli;
	uint64_t segno;
	if ((info & XLP_LONG_HEADER) == 0 || (info & ~wal_flags_known(magic)) != 0 ||
		pg_le(head + 36, 4) != 8192 || !valid_seg_size(own)) {
		snprintf(why, 128, "does not start with a WAL long page header");
		return false;
	}
	if (seg_size != 0 && own != seg_size) {
		snprintf(why, 128, "its header says %llu-byte segments, WALG_PG_WAL_SIZE %llu",
				 (unsigned long long)own, (unsigned long long)seg_size);
		return false;
	}
	if (size != own) {
		snprintf(why, 128, "is %llu bytes, not a %llu-byte segment", (unsigned long long)size,
				 (unsigned long long)own);
		return false;
	}
	if (wal_name_parse(seg, own, &name_tli, &segno) != E_OK) {
		err_clear();
		snprintf(why, 128, "its name is no segment of %llu bytes", (unsigned long long)own);
		return false;
	}
	if (addr != segno * own) {
		snprintf(why, 128, "its page address %X/%X is not its name's",
				 (unsigned)(addr >> 32), (unsigned)addr);
		return false;
	}
	if (tli == 0 || tli > name_tli) {
		snprintf(why, 128, "its page timeline %u is not its name's or an ancestor's", tli);
		return false;
	}
	*sysid = pg_le(head + 24, 8);
	return true;
}
