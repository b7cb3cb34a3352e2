/*
 * A data directory's own records, read without a server: pg_control (untrusted bytes, held to
 * its CRC) and postmaster.pid.
 */
#include "internal/pg/pg.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "internal/pg/bytes_impl.h"

#define FLOATFORMAT_VALUE 1234567.0
/*
 * From floatFormat, the field whose fixed value marks the layout of every major: back to
 * minRecoveryPoint (the fields between have not changed from 13 to 18), on to
 * xlog_seg_size and data_checksum_version; the CRC follows the 32-byte authentication nonce,
 * after one more bool in 18 (default_char_signedness).
 */
#define MIN_RECOVERY_BACK 72
#define SEG_SIZE_AT 20
#define CHECKSUM_VERSION_AT 44
#define CRC_AFTER_17 80
#define CRC_AFTER_18 84
#define CRC_INIT 0xFFFFFFFFu

static long floatformat_at(const unsigned char *buf, size_t len)
{
	double marker = FLOATFORMAT_VALUE;
	unsigned char want[8];
	memcpy(want, &marker, sizeof(want));
	for (size_t off = 0; off + 48 <= len && off < 1024; off += 8)
		if (memcmp(buf + off, want, 8) == 0 && pg_le(buf + off + 8, 4) == PG_PAGE_SIZE)
			return (long)off;
	return -1;
}

bool pg_control_checksums(const unsigned char *buf, size_t len, bool *on)
{
	long ff = floatformat_at(buf, len);
	if (ff < 0)
		return false;
	*on = pg_le(buf + ff + CHECKSUM_VERSION_AT, 4) != 0;
	return true;
}

static bool crc_at(const unsigned char *buf, size_t len, size_t at)
{
	if (at + 4 > len)
		return false;
	uint32_t crc = pg_crc32c_update(CRC_INIT, buf, at) ^ CRC_INIT;
	return crc == (uint32_t)pg_le(buf + at, 4);
}

bool pg_control_read(const unsigned char *buf, size_t len, pg_control_info *out)
{
	long ff = floatformat_at(buf, len);
	if (ff < 128 || (size_t)ff + CRC_AFTER_18 + 4 > len)
		return false;
	if (!crc_at(buf, len, (size_t)ff + CRC_AFTER_17) && !crc_at(buf, len, (size_t)ff + CRC_AFTER_18))
		return false;
	memset(out, 0, sizeof(*out));
	out->system_id = pg_le(buf, 8);
	out->version = (uint32_t)pg_le(buf + 8, 4);
	out->state = (int)pg_le(buf + 16, 4);
	out->checkpoint = pg_le(buf + 32, 8);
	out->redo = pg_le(buf + 40, 8);
	out->timeline = (uint32_t)pg_le(buf + 48, 4);
	out->min_recovery = pg_le(buf + ff - MIN_RECOVERY_BACK, 8);
	out->min_recovery_tli = (uint32_t)pg_le(buf + ff - MIN_RECOVERY_BACK + 8, 4);
	out->seg_size = pg_le(buf + ff + SEG_SIZE_AT, 4);
	return true;
}

err_code pg_control_load(const char *datadir, pg_control_info *out)
{
	char *path = xasprintf("%s/global/pg_control", datadir);
	membuf mb = { .max = 65536 };
	sink *m = membuf_sink_new(&mb);
	err_code rc = sink_write_file(m, path);
	sink_free(m);
	if (rc == E_OK && !pg_control_read(mb.data, mb.len, out))
		rc = err_set(E_CORRUPT, "%s is not a pg_control file walc can read (or fails its CRC)",
					 path);
	free(mb.data);
	free(path);
	return rc;
}

const char *pg_control_state_name(int state)
{
	static const char *const names[] = { "starting up", "shut down", "shut down in recovery",
										 "shutting down", "in crash recovery",
										 "in archive recovery", "in production" };
	return state >= 0 && state < (int)(sizeof(names) / sizeof(names[0])) ? names[state]
																		 : "unknown";
}

pg_pid_state pg_postmaster_state(const char *datadir, long *pid)
{
	char *path = xasprintf("%s/postmaster.pid", datadir);
	FILE *f = fopen(path, "r");
	free(path);
	*pid = 0;
	if (f == NULL)
		return errno == ENOENT ? PG_PID_NONE : PG_PID_UNREADABLE;
	char line[32] = "";
	bool got = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	char *end;
	long v = got ? strtol(line, &end, 10) : 0;
	if (!got || end == line || (*end != '\n' && *end != '\0') || v <= 0)
		return PG_PID_UNREADABLE;
	*pid = v;
	return kill((pid_t)v, 0) == 0 || errno == EPERM ? PG_PID_LIVE : PG_PID_GONE;
}
