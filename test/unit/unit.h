/*
 * What the unit tests share: a fresh directory under /tmp and its removal; for the stream
 * tests, reproducible bytes, a probe at the end of a chain, key settings cleared. Included
 * after cmocka.h (it asserts).
 */
#ifndef WALC_TEST_UNIT_UNIT_H
#define WALC_TEST_UNIT_UNIT_H

#include "cmd/walc/settings/config.h"
#include "internal/core/core.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A new empty directory; the path is the caller's to free. */
static inline char *unit_tmpdir(void)
{
	char *dir = xstrdup("/tmp/walc-unit-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return dir;
}

/* Removes dir and everything below it: 0 on success, for a cmocka teardown's result. */
static inline int unit_rmtree(const char *dir)
{
	char *cmd = xasprintf("rm -rf '%s'", dir);
	int rc = system(cmd);
	free(cmd);
	return rc;
}

/* A cmocka setup and teardown for tests that work in a fresh directory, unit_dir. */
static char *unit_dir;
static inline int unit_dir_setup(void **state)
{
	(void)state;
	unit_dir = unit_tmpdir();
	return 0;
}
static inline int unit_dir_teardown(void **state)
{
	(void)state;
	int rc = unit_rmtree(unit_dir);
	free(unit_dir);
	unit_dir = NULL;
	return rc;
}

/* Deterministic, incompressible-looking bytes so that a failure is reproducible. */
static inline unsigned char *pattern(size_t n, uint32_t seed)
{
	unsigned char *p = xmalloc(n ? n : 1);
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
	return p;
}

/* A whole file, or NULL when it cannot be read. */
static inline unsigned char *read_all(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	membuf mb = { 0 };
	sink *s = membuf_sink_new(&mb);
	unsigned char buf[65536];
	ssize_t n;
	err_code rc = E_OK;
	while (rc == E_OK && (n = read(fd, buf, sizeof(buf))) > 0)
		rc = sink_write(s, buf, (size_t)n);
	sink_free(s);
	close(fd);
	if (rc != E_OK || n < 0) {
		free(mb.data);
		return NULL;
	}
	*len = mb.len;
	return mb.data ? mb.data : xmalloc(1);
}

/* The system identifier of the cluster that wrote test/unit/data's WAL header. */
#define UNIT_WAL_SYSID UINT64_C(7714482919781331307)

/*
 * A WAL segment of seg_size bytes: PostgreSQL 15's long page header (test/unit/data, read from
 * the repository's root as make test runs) made that of segment segno of timeline tli of
 * cluster sysid, then bytes from seed. The caller frees it.
 */
static inline unsigned char *unit_wal_segment(uint32_t tli, uint64_t segno, uint64_t seg_size,
											  uint64_t sysid, uint32_t seed)
{
	unsigned char *seg = pattern(seg_size, seed);
	size_t len = 0;
	unsigned char *head = read_all("test/unit/data/pg15-wal-long-header.bin", &len);
	assert_non_null(head);
	assert_int_equal(len, 40);
	memcpy(seg, head, len);
	free(head);
	const struct { size_t at; uint64_t v; int n; } fields[] = {
		{ 4, tli, 4 }, { 8, segno * seg_size, 8 }, { 24, sysid, 8 }, { 32, seg_size, 4 },
	};
	for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++)
		for (int i = 0; i < fields[f].n; i++)
			seg[fields[f].at + (size_t)i] = (unsigned char)(fields[f].v >> (8 * i));
	return seg;
}

/* What reaches the end of a chain: the bytes, finish calls, whether it was freed. */
typedef struct probe {
	membuf mb;
	int finishes;
	bool freed;
	err_code fail_writes; /* nonzero: every write fails with it */
} probe;

typedef struct probe_sink {
	sink base;
	probe *p;
} probe_sink;

static inline err_code probe_write(sink *s, const void *buf, size_t len)
{
	probe *p = ((probe_sink *)s)->p;
	if (p->fail_writes != E_OK)
		return err_set(p->fail_writes, "probe: refusing %zu bytes", len);
	return sink_write(s->next, buf, len);
}

static inline err_code probe_finish(sink *s)
{
	((probe_sink *)s)->p->finishes++;
	return sink_finish(s->next);
}

static inline void probe_free(sink *s)
{
	((probe_sink *)s)->p->freed = true;
	sink_free(s->next);
	free(s);
}

static const sink_ops probe_ops = { probe_write, probe_finish, probe_free };

static inline sink *probe_new(probe *p)
{
	memset(p, 0, sizeof(*p));
	probe_sink *s = xcalloc(1, sizeof(*s));
	s->base.ops = &probe_ops;
	s->base.next = membuf_sink_new(&p->mb);
	s->p = p;
	return &s->base;
}

enum feed_mode { WHOLE, ODD, BYTES };

/* Writes p in one piece, one byte at a time, or in the given odd sizes, round and round. */
static inline err_code feed_sizes(sink *s, const unsigned char *p, size_t n, enum feed_mode mode,
								  const size_t *odd, size_t nodd)
{
	size_t i = 0;
	while (n > 0) {
		size_t k = mode == WHOLE ? n : mode == BYTES ? 1 : odd[i++ % nodd];
		if (k > n)
			k = n;
		TRY(sink_write(s, p, k));
		p += k;
		n -= k;
	}
	return E_OK;
}

/*
 * Feeds n bytes of in through s, whose end is pr's probe, as feed_sizes does, then finishes and
 * frees s; returns the first error. The probe's bytes go to *out (freed when out is NULL), its
 * finish count to *finishes (may be NULL).
 */
static inline err_code run_probe(sink *s, probe *pr, const unsigned char *in, size_t n,
								 enum feed_mode mode, const size_t *odd, size_t nodd, membuf *out,
								 int *finishes)
{
	err_code rc = feed_sizes(s, in, n, mode, odd, nodd);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	assert_true(pr->freed);
	if (finishes != NULL)
		*finishes = pr->finishes;
	if (out != NULL)
		*out = pr->mb;
	else
		free(pr->mb.data);
	return rc;
}

/* out holds exactly pt's n bytes, delivered with one finish (cmocka asserts); frees out's data. */
static inline void check_plain(membuf *out, int finishes, const unsigned char *pt, size_t n)
{
	assert_int_equal(finishes, 1);
	assert_int_equal(out->len, n);
	if (n > 0)
		assert_memory_equal(out->data, pt, n);
	free(out->data);
}

#ifdef WALC_INTERNAL_CRYPT_CRYPT_H
/* crypter_load on the settings the environment holds, parsed by the table as main does. */
static inline err_code crypter_load_env(crypter **out)
{
	config cfg;
	err_code rc = config_load(&cfg, false);
	if (rc == E_OK)
		rc = crypter_load(&cfg.crypt, out);
	config_free(&cfg);
	return rc;
}
#endif

#ifdef WALC_INTERNAL_REPO_REPO_H
/*
 * A cluster's directory (unit_dir/pgdata, with pg_wal/archive_status) and a file repository
 * (unit_dir/repo) configured for it with 1 MiB segments and more's settings (five at most).
 * The configuration keeps reading its sources (config_each_set): they live here until
 * unit_cluster_close.
 */
static config_pair unit_settings[8];
static char *unit_repo_dir, *unit_pgdata;
static inline void unit_cluster_open(config *cfg, repo **r, const config_pair *more, size_t nmore)
{
	unit_repo_dir = xasprintf("%s/repo", unit_dir);
	unit_pgdata = xasprintf("%s/pgdata", unit_dir);
	char *status = xasprintf("%s/pg_wal/archive_status", unit_pgdata);
	assert_int_equal(mkdir_p(unit_repo_dir, 0700), E_OK);
	assert_int_equal(mkdir_p(status, 0700), E_OK);
	free(status);
	unit_settings[0] = (config_pair){ "WALG_FILE_PREFIX", unit_repo_dir };
	unit_settings[1] = (config_pair){ "PGDATA", unit_pgdata };
	unit_settings[2] = (config_pair){ "WALG_PG_WAL_SIZE", "1" };
	assert_true(nmore <= 5);
	for (size_t i = 0; i < nmore; i++)
		unit_settings[3 + i] = more[i];
	config_sources src = { NULL, 0, unit_settings, 3 + nmore, "test" };
	assert_int_equal(config_load_from(cfg, true, &src), E_OK);
	assert_int_equal(config_repo_open(cfg, REPO_READ, NULL, r), E_OK);
}

static inline void unit_cluster_close(config *cfg, repo *r)
{
	repo_close(r);
	config_free(cfg);
	free(unit_repo_dir);
	free(unit_pgdata);
}
#endif

/* cmocka setup: no key settings in the environment, no error recorded. */
static inline int setup_env(void **state)
{
	(void)state;
	static const char *const vars[] = {
		"WALG_PGP_KEY",		  "WALG_PGP_KEY_PATH",		 "WALG_PGP_KEY_PASSPHRASE",
		"WALG_LIBSODIUM_KEY", "WALG_LIBSODIUM_KEY_PATH", "WALG_LIBSODIUM_KEY_TRANSFORM",
		"WALG_OLD_KEY_PATHS", "WALG_OLD_PGP_KEY_PASSPHRASE",
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	err_clear();
	return 0;
}

/* What fn(arg) writes to stderr (the log), read back from a file it was redirected to. */
static inline char *capture_stderr(void (*fn)(void *), void *arg)
{
	char path[] = "/tmp/walc-unit-log-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	size_t len;
	unsigned char *out = read_all(path, &len);
	unlink(path);
	assert_non_null(out);
	char *s = xmalloc(len + 1);
	memcpy(s, out, len);
	s[len] = '\0';
	free(out);
	return s;
}

#endif
