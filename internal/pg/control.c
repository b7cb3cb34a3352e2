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
#define MIN_RECOVERY_BACK 72 /* minRecoveryPoint, before floatFormat in every major */
#define CRC_INIT 0xFFFFFFFFu

/*
 * What follows floatFormat, whose fixed value marks where the layout's second half starts,
 * by pg_control_version: xlog_seg_size, data_checksum_version and the CRC after the 32-byte
 * authentication nonce. 18 added a bool before the nonce (default_char_signedness); 19
 * slru_pages_per_segment before xlog_seg_size and data_checksum_version_init before the
 * version. crc_at 0: walc reads only the checksum setting (backups of old clusters).
 * 19's range is open to the bumps a release candidate may still bring: pg_control_read
 * needs the CRC to hold where the layout puts it, so it refuses a file laid out otherwise.
 */
typedef struct control_layout {
	uint32_t first, last; /* pg_control_version */
	int seg_size_at, checksum_at, crc_at;
} control_layout;

static const control_layout layouts[] = {
	{ 942, 1201, 20, 44, 0 },  /* 9.4 to 12 */
	{ 1300, 1300, 20, 44, 80 }, /* 13 to 16 */
	{ 1700, 1700, 20, 44, 80 },
	{ 1800, 1800, 20, 44, 84 },
	{ 1900, 1999, 24, 52, 92 },
};

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

/* The layout of a file long enough to hold it, and where its floatFormat is; NULL if none. */
static const control_layout *layout_of(const unsigned char *buf, size_t len, size_t *ff)
{
	long at = floatformat_at(buf, len);
	if (at < 128)
		return NULL;
	uint32_t version = (uint32_t)pg_le(buf + 8, 4);
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
		const control_layout *l = &layouts[i];
		int end = (l->crc_at > l->checksum_at ? l->crc_at : l->checksum_at) + 4;
		if (version >= l->first && version <= l->last) {
			*ff = (size_t)at;
			return (size_t)at + (size_t)end <= len ? l : NULL;
		}
	}
	return NULL;
}

bool pg_control_checksums(const unsigned char *buf, size_t len, bool *on)
{
	size_t ff;
	const control_layout *l = layout_of(buf, len, &ff);
	if (l == NULL)
		return false;
	*on = pg_le(buf + ff + (size_t)l->checksum_at, 4) != 0;
	return true;
}

bool pg_control_read(const unsigned char *buf, size_t len, pg_control_info *out)
{
	size_t ff;
	const control_layout *l = layout_of(buf, len, &ff);
	if (l == NULL || l->crc_at == 0)
		return false;
	size_t at = ff + (size_t)l->crc_at;
	if ((pg_crc32c_update(CRC_INIT, buf, at) ^ CRC_INIT) != (uint32_t)pg_le(buf + at, 4))
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
	out->seg_size = pg_le(buf + ff + (size_t)l->seg_size_at, 4);
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
