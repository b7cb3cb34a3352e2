/*
 * Delta backups: choosing the base (reference §8.1), deciding per file whether it is skipped,
 * stored as an increment of changed pages, or stored whole (§8.2, §8.3).
 */
#include "internal/backup/push/push_impl.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal/pg/pg.h"
#include "internal/tar/tar.h"

static err_code full_because(const char *why)
{
	log_info("taking a full backup: %s", why);
	return E_OK;
}

static int64_t mtime_ns(time_t sec, long nsec)
{
	/* Past 2262 or before 1678 the nanoseconds overflow: such a time matches nothing. */
	if (sec > INT64_MAX / 1000000000 - 1 || sec < INT64_MIN / 1000000000 + 1)
		return INT64_MIN;
	return (int64_t)sec * 1000000000 + nsec;
}

/* 0 for INT64_MIN, which no file's MTime equals; never 0 otherwise. */
static uint32_t mtime_fp(int64_t ns)
{
	if (ns == INT64_MIN)
		return 0;
	uint64_t h[2];
	hash128(&ns, sizeof(ns), h);
	uint32_t fp = (uint32_t)h[0];
	return fp != 0 ? fp : 1;
}

err_code delta_add_file(void *arg, const char *name, const json_t *rec)
{
	delta_base *d = arg;
	const char *mt = json_string_value(catalog_json_get(rec, "MTime"));
	time_t sec;
	long nsec;
	if (d->files == NULL)
		d->files = keytab_new(1);
	int64_t ns = mt != NULL && time_parse_rfc3339(mt, &sec, &nsec) ? mtime_ns(sec, nsec) : INT64_MIN;
	uint64_t key[2], fp = mtime_fp(ns);
	pg_name_key(name, key);
	keytab_add(d->files, key, &fp);
	return E_OK;
}

void delta_files_finish(delta_base *d)
{
	if (d->files == NULL)
		d->files = keytab_new(1);
	keytab_finish(d->files); /* a name listed twice keeps fingerprint 0 */
}

/* The first disagreement between a candidate base's sentinel and its own records. */
typedef struct base_doubt {
	int n;
	char first[ERR_MSG_MAX + 512];
} base_doubt;

static void doubt(void *arg, const char *object, const char *what)
{
	base_doubt *bd = arg;
	if (bd->n++ == 0)
		snprintf(bd->first, sizeof(bd->first), "%s: %s", object, what);
}

err_code delta_choose(repo *r, const backup_settings *cfg, const push_options *opt, delta_base *d)
{
	char *cand = NULL;
	backup_sentinel cs = { 0 };
	err_code rc = E_OK;
	const char *from_name = opt->delta_from_name ? opt->delta_from_name : cfg->delta_from_name;
	const char *from_ud =
		opt->delta_from_user_data ? opt->delta_from_user_data : cfg->delta_from_user_data;
	bool explicit_base = from_name != NULL || from_ud != NULL;

	memset(d, 0, sizeof(*d));
	if (opt->full)
		return full_because("--full");
	/* A delta's files are known only from files metadata, which this backup would not have. */
	if (opt->without_files_metadata || cfg->without_files_metadata)
		return full_because("without files metadata");
	if (cfg->delta_max_steps <= 0 && !explicit_base)
		return E_OK;
	if (from_name != NULL)
		rc = catalog_resolve(r, from_name, &cand);
	else if (from_ud != NULL)
		rc = catalog_find_by_user_data(r, from_ud, "delta-from user data", &cand);
	else {
		rc = catalog_resolve(r, "LATEST", &cand);
		if (rc == E_NOTFOUND) {
			err_clear();
			return full_because("no earlier backup to base a delta on");
		}
	}
	if (rc == E_OK)
		rc = catalog_sentinel_read(r, cand, &cs);
	if (rc != E_OK)
		goto out;
	int count = cs.is_delta ? cs.delta_count + 1 : 1;
	if (!explicit_base && count > cfg->delta_max_steps) {
		full_because("the chain reached WALG_DELTA_MAX_STEPS");
		goto out;
	}
	if (!explicit_base && !opt->permanent && catalog_permanent(r, cand, &cs)) {
		full_because("the latest backup is permanent (a delta would pin it)");
		goto out;
	}
	if (cfg->delta_origin_full && cs.is_delta) {
		char *full = xstrdup(cs.delta_full_name);
		catalog_sentinel_free(&cs);
		free(cand);
		cand = full;
		if ((rc = catalog_sentinel_read(r, cand, &cs)) != E_OK)
			goto out;
	}
	if (cs.files_metadata_disabled || cs.version < 2) {
		full_because("the base backup has no files metadata");
		goto out;
	}
	/* A base whose start LSN is wrong would make this delta leave changed pages out. */
	base_doubt bd = { 0, "" };
	char *locked = NULL;
	rc = backup_crosscheck(r, cand, &cs, (uint64_t)cfg->wal->pg->pg_wal_size_mb << 20, doubt, &bd,
						   &locked);
	if (rc != E_OK)
		goto out;
	if (bd.n > 0) {
		free(locked);
		log_warn("not taking a delta from %s: %s%s; taking a full backup (backup-verify %s "
				 "lists what disagrees)",
				 cand, bd.first, bd.n > 1 ? " (and more)" : "", cand);
		goto out;
	}
	/* an encrypt-only key: what is plain (metadata.json) was checked, the rest cannot be */
	if (locked != NULL)
		log_info("the sentinel of %s was checked against its metadata.json only: %s", cand,
				 locked);
	free(locked);
	if ((rc = catalog_files_each(r, cand, delta_add_file, NULL, d)) != E_OK)
		goto out;
	delta_files_finish(d);
	d->active = true;
	d->name = cand;
	cand = NULL;
	d->full_name = xstrdup(cs.is_delta ? cs.delta_full_name : d->name);
	d->count = count;
	d->lsn = cs.lsn;
	d->finish_lsn = cs.finish_lsn;
	d->have_system_id = cs.have_system_id;
	d->system_id = cs.system_id;
	if (cs.start_time == NULL || !time_parse_rfc3339(cs.start_time, &d->start, &d->start_nsec))
		d->start = 0; /* unknown: never skip by mtime */
	log_info("taking delta %d of %ld from %s (full backup %s)", count, cfg->delta_max_steps,
			 d->name, d->full_name);
out:
	free(cand);
	catalog_sentinel_free(&cs);
	return rc;
}

void delta_catchup(uint64_t from_lsn, delta_base *d)
{
	memset(d, 0, sizeof(*d));
	d->active = true;
	d->catchup = true;
	/* WAL-G's catchup sentinel: DeltaFrom and DeltaFullName empty, DeltaCount 1 */
	d->name = xstrdup("");
	d->full_name = xstrdup("");
	d->count = 1;
	d->lsn = from_lsn;
}

err_code delta_check(const delta_base *d, uint64_t system_id, uint64_t start_lsn)
{
	char a[32], b[32];
	if (!d->active)
		return E_OK;
	if (d->catchup && d->lsn > start_lsn) {
		pg_lsn_format(d->lsn, a);
		pg_lsn_format(start_lsn, b);
		return err_set(E_CONFIG, "catchup-push --from-lsn: %s is past this server's position "
								 "%s: give the standby's LSN",
					   a, b);
	}
	if (d->have_system_id && d->system_id != system_id)
		return err_set(E_CONFIG,
					   "cannot take a delta from %s: it belongs to another cluster (system "
					   "identifier %llu, this cluster's is %llu); use --full",
					   d->name, (unsigned long long)d->system_id,
					   (unsigned long long)system_id);
	if (d->finish_lsn > start_lsn) {
		pg_lsn_format(d->finish_lsn, a);
		pg_lsn_format(start_lsn, b);
		return err_set(E_CONFIG,
					   "cannot take a delta from %s: its finish LSN %s is ahead of this "
					   "backup's start %s (a restored or rewound cluster?); use --full",
					   d->name, a, b);
	}
	return E_OK;
}

void delta_free(delta_base *d)
{
	keytab_free(d->files);
	free(d->name);
	free(d->full_name);
	memset(d, 0, sizeof(*d));
}

static bool all_digits_dot(const char *s)
{
	/* ^\d+(\.\d+)?$ */
	const char *p = s;
	if (!(*p >= '0' && *p <= '9'))
		return false;
	while (*p >= '0' && *p <= '9')
		p++;
	if (*p == '.') {
		p++;
		if (!(*p >= '0' && *p <= '9'))
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return *p == '\0';
}

bool delta_is_paged(const char *member, uint64_t size)
{
	const char *base = strrchr(member, '/');
	base = base ? base + 1 : member;
	return size > 0 && size % PG_PAGE_SIZE == 0 &&
		(str_has_prefix(member, "/base/") || str_has_prefix(member, "/global/") ||
		 str_has_prefix(member, "/pg_tblspc/")) &&
		strstr(member, "pg_xact") == NULL && strstr(member, "pg_clog") == NULL &&
		strstr(member, "pg_multixact") == NULL && all_digits_dot(base);
}

/*
 * WAL-G skips a file whose mtime equals the base's record of it. A write in the same clock
 * tick as the base's read would keep the mtime and be lost, so walc also requires the file to
 * be older than the base backup's start by DELTA_MTIME_MARGIN: anything touched near or after
 * that moment is scanned page by page instead.
 */
delta_kind delta_classify(const delta_base *d, const char *member, const struct stat *sb)
{
	if (!d->active)
		return DELTA_WHOLE;
	/* the standby holds every file older than the LSN: only pages since then travel */
	if (d->catchup)
		return delta_is_paged(member, (uint64_t)sb->st_size) ? DELTA_INCREMENT : DELTA_WHOLE;
	uint64_t key[2], fp;
	pg_name_key(member, key);
	if (!keytab_find(d->files, key, &fp, NULL))
		return DELTA_WHOLE;
	if (d->start != 0 && fp != 0 &&
		fp == mtime_fp(mtime_ns(sb->st_mtim.tv_sec, sb->st_mtim.tv_nsec)) &&
		sb->st_mtim.tv_sec + DELTA_MTIME_MARGIN < d->start)
		return DELTA_SKIP;
	return delta_is_paged(member, (uint64_t)sb->st_size) ? DELTA_INCREMENT : DELTA_WHOLE;
}

err_code delta_scan(int fd, const char *path, uint64_t size, uint64_t since_lsn,
					unsigned char *buf, uint32_t **blocks, uint32_t *n, bool *usable)
{
	uint64_t npages = size / PG_PAGE_SIZE;
	/* Grown as pages are found: most scans find few, and a 1 GiB segment has 131,072. */
	size_t cap = npages < 1024 ? (npages ? (size_t)npages : 1) : 1024;
	uint32_t *list = xmalloc(cap * sizeof(uint32_t));
	uint32_t count = 0;
	err_code rc = E_OK;

	*usable = true;
	for (uint64_t blk = 0; blk < npages && *usable;) {
		size_t want = (npages - blk) * PG_PAGE_SIZE < DELTA_SCAN_CHUNK
			? (size_t)((npages - blk) * PG_PAGE_SIZE)
			: DELTA_SCAN_CHUNK;
		ssize_t got = pread(fd, buf, want, (off_t)(blk * PG_PAGE_SIZE));
		if (got < 0) {
			if (errno == EINTR)
				continue;
			rc = err_errno(E_IO, errno, "reading %s", path);
			break;
		}
		if (got < PG_PAGE_SIZE)
			break; /* the file shrank: WAL replay restores what is gone */
		for (size_t off = 0; off + PG_PAGE_SIZE <= (size_t)got; off += PG_PAGE_SIZE, blk++) {
			const unsigned char *page = buf + off;
			if (pg_page_is_new(page) ||
				(pg_page_header_valid(page) && pg_page_lsn(page) >= since_lsn)) {
				if (count == cap) {
					cap = 2 * cap < npages ? 2 * cap : (size_t)npages;
					list = xrealloc(list, cap * sizeof(uint32_t));
				}
				list[count++] = (uint32_t)blk;
			} else if (!pg_page_header_valid(page)) {
				*usable = false; /* a page we cannot judge: store the whole file */
				break;
			}
		}
	}
	if (rc != E_OK || !*usable) {
		free(list);
		list = NULL;
		count = 0;
	}
	*blocks = list;
	*n = count;
	return rc;
}

uint64_t delta_increment_size(uint32_t n)
{
	return 16 + (uint64_t)n * (4 + PG_PAGE_SIZE);
}

err_code delta_put(tar_writer *tw, hasher *h, const void *buf, size_t len)
{
	if (h != NULL)
		hasher_update(h, buf, len);
	return tar_writer_write(tw, buf, len);
}

err_code delta_write_increment(tar_writer *tw, tar_entry *te, int fd, const char *path,
							   uint64_t file_size, const uint32_t *blocks, uint32_t n,
							   unsigned char *buf, hasher *h)
{
	unsigned char head[16] = { 'w', 'i', '1', 0x55 };
	uint64_t size_le = htole64(file_size);
	uint32_t n_le = htole32(n);
	memcpy(head + 4, &size_le, 8);
	memcpy(head + 12, &n_le, 4);
	te->type = TAR_FILE;
	te->size = delta_increment_size(n);
	TRY(tar_writer_begin(tw, te));
	TRY(delta_put(tw, h, head, sizeof(head)));
	for (uint32_t i = 0; i < n; i++) {
		uint32_t le = htole32(blocks[i]);
		TRY(delta_put(tw, h, &le, 4));
	}
	for (uint32_t i = 0; i < n; i++) {
		ssize_t got = pread(fd, buf, PG_PAGE_SIZE, (off_t)blocks[i] * PG_PAGE_SIZE);
		if (got < 0)
			return err_errno(E_IO, errno, "reading %s", path);
		/* A page truncated away since the scan: WAL replay recreates what matters. */
		if (got < PG_PAGE_SIZE)
			memset(buf + got, 0, PG_PAGE_SIZE - (size_t)got);
		TRY(delta_put(tw, h, buf, PG_PAGE_SIZE));
	}
	return tar_writer_end(tw);
}
