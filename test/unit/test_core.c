/* Unit tests for core: errors, configuration, sinks, atomic file writing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/core/core.h"

static const char *const walg_vars[] = {
	"WALG_FILE_PREFIX", "WALG_S3_PREFIX", "WALG_STORAGE_PREFIX", "WALG_COMPRESSION_METHOD",
	"WALG_COMPRESSION_LEVEL", "WALG_PREVENT_WAL_OVERWRITE", "WALG_UPLOAD_CONCURRENCY",
	"WALG_DOWNLOAD_CONCURRENCY", "WALG_PG_WAL_SIZE", "WALG_LOG_LEVEL", "WALG_LOG_FORMAT",
	"PGDATA", NULL,
};

static int clear_env(void **state)
{
	(void)state;
	for (size_t i = 0; walg_vars[i]; i++)
		unsetenv(walg_vars[i]);
	err_clear();
	return 0;
}

static void test_err_wrap(void **state)
{
	(void)state;
	assert_int_equal(err_set(E_IO, "reading %s", "x"), E_IO);
	assert_int_equal(err_wrap(E_CORRUPT, "object %s", "k"), E_CORRUPT);
	assert_string_equal(err_msg(), "object k: reading x");
	assert_int_equal(err_last(), E_CORRUPT);
}

static void test_config_defaults(void **state)
{
	(void)state;
	config c;
	setenv("WALG_FILE_PREFIX", "/tmp/repo/", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_string_equal(c.storage.file_prefix, "/tmp/repo");
	assert_string_equal(c.repo.compression, "lz4");
	assert_int_equal(c.storage.upload_concurrency, 16);
	assert_int_equal(c.storage.download_concurrency, 10);
	assert_int_equal(c.pg.pg_wal_size_mb, 16);
	assert_false(c.wal.prevent_wal_overwrite);
	assert_int_equal(c.log.level, LOG_INFO);
	config_free(&c);
}

static void test_config_file_url(void **state)
{
	(void)state;
	config c;
	setenv("WALG_FILE_PREFIX", "file://localhost/srv/walc", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_string_equal(c.storage.file_prefix, "/srv/walc");
	config_free(&c);
}

static void expect_config_error(const char *var, const char *value, const char *needle)
{
	config c;
	setenv("WALG_FILE_PREFIX", "/tmp/repo", 1);
	setenv(var, value, 1);
	assert_int_equal(config_load(&c, true), E_CONFIG);
	assert_non_null(strstr(err_msg(), needle));
	config_free(&c);
	unsetenv(var);
}

static void test_config_errors(void **state)
{
	(void)state;
	expect_config_error("WALG_FILE_PREFIX", "rel/path", "WALG_FILE_PREFIX");
	expect_config_error("WALG_PREVENT_WAL_OVERWRITE", "yes", "WALG_PREVENT_WAL_OVERWRITE");
	expect_config_error("WALG_UPLOAD_CONCURRENCY", "99999999999999999999", "WALG_UPLOAD_CONCURRENCY");
	expect_config_error("WALG_UPLOAD_CONCURRENCY", "4x", "WALG_UPLOAD_CONCURRENCY");
	expect_config_error("WALG_PG_WAL_SIZE", "3", "WALG_PG_WAL_SIZE");
	expect_config_error("WALG_LOG_LEVEL", "LOUD", "WALG_LOG_LEVEL");
	expect_config_error("WALG_FILE_PREFIX", "/tmp/a\nb", "control character");
	expect_config_error("WALG_S3_PREFIX", "bucket/path", "WALG_S3_PREFIX");
}

static void test_config_no_storage(void **state)
{
	(void)state;
	config c;
	assert_int_equal(config_load(&c, true), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALG_FILE_PREFIX"));
	config_free(&c);
	assert_int_equal(config_load(&c, false), E_OK);
	config_free(&c);
}

static void test_config_bools(void **state)
{
	(void)state;
	static const char *const yes[] = { "1", "t", "T", "TRUE", "true", "True", NULL };
	config c;
	setenv("WALG_FILE_PREFIX", "/tmp/repo", 1);
	for (size_t i = 0; yes[i]; i++) {
		setenv("WALG_PREVENT_WAL_OVERWRITE", yes[i], 1);
		assert_int_equal(config_load(&c, true), E_OK);
		assert_true(c.wal.prevent_wal_overwrite);
		config_free(&c);
	}
}

/* Flags win over the environment, which wins over a file; storage settings alias. */
static void test_config_sources(void **state)
{
	(void)state;
	config c;
	config_pair file[] = { { "WALG_FILE_PREFIX", "/from/file" },
						   { "WALG_COMPRESSION_METHOD", "zstd" },
						   { "WALG_UPLOAD_CONCURRENCY", "7" } };
	config_pair flags[] = { { "WALG_UPLOAD_CONCURRENCY", "3" } };
	config_sources src = { flags, 1, file, 3, "/etc/walg.json" };
	setenv("WALG_COMPRESSION_METHOD", "brotli", 1);
	assert_int_equal(config_load_from(&c, true, &src), E_OK);
	assert_string_equal(c.storage.file_prefix, "/from/file");
	assert_string_equal(c.repo.compression, "brotli");
	assert_int_equal(c.storage.upload_concurrency, 3);
	config_free(&c);
	unsetenv("WALG_COMPRESSION_METHOD");
	/* A bad value from the file names the file. */
	config_pair bad[] = { { "WALG_FILE_PREFIX", "/x" }, { "WALG_DELTA_MAX_STEPS", "many" } };
	config_sources bsrc = { NULL, 0, bad, 2, "/etc/walg.json" };
	assert_int_equal(config_load_from(&c, true, &bsrc), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALG_DELTA_MAX_STEPS (in /etc/walg.json)"));
	config_free(&c);
	/* S3 settings as NAME, WALG_NAME or WALE_NAME; WAL-E's prefix names. */
	setenv("WALE_S3_PREFIX", "s3://bucket/p", 1);
	setenv("WALG_S3_SSE", "AES256", 1);
	setenv("WALE_AWS_REGION", "eu-west-1", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_string_equal(c.storage.s3_prefix, "s3://bucket/p");
	assert_string_equal(c.storage.s3.sse, "AES256");
	assert_string_equal(c.storage.s3.region, "eu-west-1");
	assert_int_equal(c.storage.s3.max_part_size, 20971520);
	config_free(&c);
	unsetenv("WALE_S3_PREFIX");
	unsetenv("WALG_S3_SSE");
	unsetenv("WALE_AWS_REGION");
}

static void test_config_refused_and_choices(void **state)
{
	(void)state;
	config c;
	setenv("WALG_FILE_PREFIX", "/tmp/repo", 1);
	setenv("WALG_GPG_KEY_ID", "0123ABCD", 1);
	assert_int_equal(config_load(&c, true), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALG_GPG_KEY_ID is set, but"));
	config_free(&c);
	unsetenv("WALG_GPG_KEY_ID");
	/* OpenPGP keys are settings: parsed into the struct, the secret ones may hold anything. */
	setenv("WALG_PGP_KEY_PATH", "/k.asc", 1);
	setenv("WALG_PGP_KEY", "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nx", 1);
	setenv("WALG_PGP_KEY_PASSPHRASE", "pass\r\n", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_string_equal(c.crypt.pgp_key_path, "/k.asc");
	assert_string_equal(c.crypt.pgp_key, "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nx");
	assert_string_equal(c.crypt.pgp_key_passphrase, "pass\r\n");
	config_free(&c);
	unsetenv("WALG_PGP_KEY_PATH");
	unsetenv("WALG_PGP_KEY");
	unsetenv("WALG_PGP_KEY_PASSPHRASE");
	setenv("WALG_TARGET_STORAGE", "default", 1); /* the "off" value */
	setenv("WALG_LOG_LEVEL", "devel", 1);		   /* choices ignore case */
	setenv("WALG_COMPRESSION_METHOD", "ZSTD", 1);
	setenv("WALG_ZSTD_LEVEL", "Best", 1);
	setenv("WALG_ALIVE_CHECK_INTERVAL", "1m30s", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_int_equal(c.log.level, LOG_DEBUG);
	assert_string_equal(c.repo.compression, "zstd");
	assert_int_equal(c.repo.compression_level, 11);
	assert_int_equal(c.backup.alive_check_ms, 90000);
	config_free(&c);
	setenv("WALG_COMPRESSION_METHOD", "lz4", 1);
	assert_int_equal(config_load(&c, true), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALG_ZSTD_LEVEL"));
	config_free(&c);
	unsetenv("WALG_TARGET_STORAGE");
	unsetenv("WALG_ZSTD_LEVEL");
	unsetenv("WALG_COMPRESSION_METHOD");
	unsetenv("WALG_ALIVE_CHECK_INTERVAL");
	bool is_bool;
	assert_string_equal(config_flag_setting("walg-s3-prefix", &is_bool), "WALG_S3_PREFIX");
	assert_false(is_bool);
	assert_string_equal(config_flag_setting("pg-ready-rename", &is_bool), "PG_READY_RENAME");
	assert_true(is_bool);
	assert_null(config_flag_setting("walg-nonsense", &is_bool));
	assert_true(config_known("WALG_S3_MAX_RETRIES"));
	assert_true(config_known("WALE_FILE_PREFIX"));
	assert_false(config_known("WALG_FILE_PREFX"));
}

/* Go's RFC3339Nano, which WAL-G's listings print: no trailing zeros, no fraction at zero. */
static void test_time_format(void **state)
{
	(void)state;
	static const struct {
		long nsec;
		const char *want;
	} cases[] = { { 0, "2026-12-06T02:04:42Z" },
				  { 500000000, "2026-12-06T02:04:42.5Z" },
				  { 777878000, "2026-12-06T02:04:42.777878Z" },
				  { 123456789, "2026-12-06T02:04:42.123456789Z" } };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = time_format_rfc3339(1796522682, cases[i].nsec);
		assert_string_equal(got, cases[i].want);
		time_t sec;
		long nsec;
		assert_true(time_parse_rfc3339(got, &sec, &nsec));
		assert_int_equal(sec, 1796522682);
		assert_int_equal(nsec, cases[i].nsec);
		free(got);
	}
}

/* What operators write into WAL-G's environment: Spilo's names, WAL-E's endpoint form. */
static void test_config_operator_names(void **state)
{
	(void)state;
	config c;
	setenv("WALG_S3_PREFIX", "s3://bucket/spilo/db/wal/15", 1);
	setenv("WALE_S3_ENDPOINT", "https+path://minio.local:9000", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_string_equal(c.storage.s3.endpoint, "https://minio.local:9000");
	assert_true(c.storage.s3.force_path_style);
	config_free(&c);
	/* The convention gives the addressing style unless AWS_S3_FORCE_PATH_STYLE is set. */
	setenv("WALE_S3_ENDPOINT", "http+virtualhost://s3.local", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_string_equal(c.storage.s3.endpoint, "http://s3.local");
	assert_false(c.storage.s3.force_path_style);
	config_free(&c);
	setenv("AWS_S3_FORCE_PATH_STYLE", "true", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_true(c.storage.s3.force_path_style);
	config_free(&c);
	unsetenv("AWS_S3_FORCE_PATH_STYLE");
	/* AWS_ENDPOINT wins, and WAL-E's form is then not even parsed. */
	setenv("AWS_ENDPOINT", "http://127.0.0.1:7480", 1);
	setenv("WALE_S3_ENDPOINT", "nonsense", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_string_equal(c.storage.s3.endpoint, "http://127.0.0.1:7480");
	config_free(&c);
	unsetenv("AWS_ENDPOINT");
	assert_int_equal(config_load(&c, true), E_CONFIG);
	assert_non_null(strstr(err_msg(), "WALE_S3_ENDPOINT"));
	config_free(&c);
	setenv("WALE_S3_ENDPOINT", "https+sideways://h", 1);
	assert_int_equal(config_load(&c, true), E_CONFIG);
	assert_non_null(strstr(err_msg(), "sideways"));
	config_free(&c);
	unsetenv("WALE_S3_ENDPOINT");
	/* IPv6 instance metadata, as the AWS SDK reads AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE. */
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6", 1);
	assert_int_equal(config_load(&c, true), E_OK);
	assert_string_equal(c.storage.s3.ec2_metadata_endpoint, "http://[fd00:ec2::254]");
	config_free(&c);
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	assert_int_equal(config_load(&c, true), E_OK);
	assert_string_equal(c.storage.s3.ec2_metadata_endpoint, "http://169.254.169.254");
	config_free(&c);
	unsetenv("WALG_S3_PREFIX");
	static const char *const known[] = { "WALG_DISABLE_S3_SSE", "WALG_BACKUP_COMPRESSION_METHOD",
										 "WALG_BACKUP_FROM_REPLICA", "USE_WALG_BACKUP",
										 "BACKUP_NUM_TO_RETAIN", "WALE_S3_ENDPOINT",
										 "AWS_INSTANCE_PROFILE", "GOMAXPROCS", "GODEBUG",
										 "S3_LOG_LEVEL", "WALG_S3_LOG_LEVEL" };
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		assert_true(config_known(known[i]));
}

static void test_membuf_cap(void **state)
{
	(void)state;
	membuf mb = { .max = 10 };
	sink *s = membuf_sink_new(&mb);
	assert_int_equal(sink_write(s, "12345", 5), E_OK);
	assert_int_equal(sink_write(s, "123456", 6), E_CORRUPT);
	assert_int_equal(mb.len, 5);
	sink_free(s);
	free(mb.data);
}

static void test_file_sink_atomic(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *path = xasprintf("%s/out", dir);
	sink *s;

	/* Freed unfinished: nothing at all is left. */
	assert_int_equal(file_sink_new(path, true, true, &s), E_OK);
	assert_int_equal(sink_write(s, "abc", 3), E_OK);
	sink_free(s);
	assert_int_not_equal(access(path, F_OK), 0);
	char *cmd = xasprintf("test -z \"$(ls -A %s)\"", dir);
	assert_int_equal(system(cmd), 0);

	/* Finished: the whole content, and compare_sink agrees. */
	assert_int_equal(file_sink_new(path, true, true, &s), E_OK);
	assert_int_equal(sink_write(s, "abc", 3), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	bool equal = false;
	s = compare_sink_new(path, &equal);
	assert_int_equal(sink_write(s, "abc", 3), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	assert_true(equal);
	sink_free(s);
	s = compare_sink_new(path, &equal);
	assert_int_equal(sink_write(s, "ab", 2), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	assert_false(equal);
	sink_free(s);

	/* Without replace, an existing file is refused. */
	assert_int_equal(file_sink_new(path, false, false, &s), E_EXISTS);

	free(cmd);
	assert_int_equal(unit_rmtree(dir), 0);
	free(path);
	free(dir);
}

/* hash128 is the checksum's function: the same bytes give the text hasher_text writes. */
static void test_hash128(void **state)
{
	(void)state;
	hasher *h = hasher_new();
	hasher_update(h, "ab", 2);
	hasher_update(h, "c", 1);
	char text[HASH_TEXT_LEN + 1], direct[HASH_TEXT_LEN + 1];
	hasher_text(h, text);
	hasher_free(h);
	uint64_t v[2];
	hash128("abc", 3, v);
	snprintf(direct, sizeof(direct), "xxh3-128:%016llx%016llx", (unsigned long long)v[0],
			 (unsigned long long)v[1]);
	assert_string_equal(direct, text);
	/* the text form parses back; anything else is refused */
	uint64_t back[2];
	assert_true(hash_text_parse(text, back));
	assert_true(back[0] == v[0] && back[1] == v[1]);
	char again[HASH_TEXT_LEN + 1];
	hash_text_format(back, again);
	assert_string_equal(again, text);
	text[20] = 'G';
	assert_false(hash_text_parse(text, back));
	assert_false(hash_text_parse("xxh3-128:00", back));
	assert_false(hash_text_parse("sha1:0123456789abcdef0123456789abcdef0", back));
	assert_false(hash_text_parse(NULL, back));
}

/*
 * Past 240 bytes XXH3 runs its vector code: hasher_update's (AVX2 where the CPU has it) in
 * uneven pieces must give what hash128's one call gives, and the value recorded in backups.
 */
static void test_hash128_long(void **state)
{
	(void)state;
	size_t len = (3u << 20) + 77;
	unsigned char *buf = malloc(len);
	assert_non_null(buf);
	uint32_t x = 1;
	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (unsigned char)(x >> 16);
	}
	hasher *h = hasher_new();
	size_t pieces[] = { 1, 239, 4096, 1000003, 65, 1u << 20 };
	size_t at = 0;
	for (size_t i = 0; at < len; i = (i + 1) % 6) {
		size_t n = pieces[i] < len - at ? pieces[i] : len - at;
		hasher_update(h, buf + at, n);
		at += n;
	}
	char text[HASH_TEXT_LEN + 1], direct[HASH_TEXT_LEN + 1];
	hasher_text(h, text);
	hasher_free(h);
	uint64_t v[2];
	hash128(buf, len, v);
	hash_text_format(v, direct);
	assert_string_equal(direct, text);
	/* the value libxxhash 0.8 gives for these bytes (XXH3_128bits) */
	assert_string_equal(text, "xxh3-128:3c83d372ba53d5de0687b58fd68c544f");
	free(buf);
}

/* internal/core/mem/memcpy_small.c: the static build's memcpy (this test links __real_memcpy to
 * memcpy) */
void *__wrap_memcpy(void *restrict dst, const void *restrict src, size_t n);

/* Every length around the shim's cases (0-3, 4-7, 8-15, 16-32, longer), at every alignment. */
static void test_memcpy_small(void **state)
{
	(void)state;
	unsigned char src[128], dst[160], want[160];
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i * 37 + 11);
	for (size_t n = 0; n <= 100; n++)
		for (size_t so = 0; so < 8; so++)
			for (size_t doff = 0; doff < 8; doff++) {
				memset(dst, 0xA5, sizeof(dst));
				memset(want, 0xA5, sizeof(want));
				for (size_t i = 0; i < n; i++)
					want[doff + i] = src[so + i];
				assert_ptr_equal(__wrap_memcpy(dst + doff, src + so, n), dst + doff);
				assert_memory_equal(dst, want, sizeof(dst));
			}
}

/* A set of name hashes: sorted once, repeats kept once, looked up by name. */
/* Records across several blocks come back in order, each as added; none gives NULL. */
static void test_recs(void **state)
{
	(void)state;
	typedef struct rec {
		uint64_t a, b, c;
	} rec;
	recs r = { .size = sizeof(rec) };
	assert_null(recs_take(&r));
	size_t n = 3 * ((1u << 20) / sizeof(rec)) + 7;
	for (size_t i = 0; i < n; i++) {
		rec *x = recs_add(&r);
		assert_true(x->a == 0 && x->b == 0 && x->c == 0);
		*x = (rec){ i, ~i, i * 3 };
	}
	assert_int_equal(r.n, n);
	rec *all = recs_take(&r);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.nblocks, 0);
	for (size_t i = 0; i < n; i++)
		assert_true(all[i].a == i && all[i].b == ~i && all[i].c == i * 3);
	free(all);
	/* freed half-filled, and usable again */
	for (size_t i = 0; i < 10; i++)
		recs_add(&r);
	recs_free(&r);
	assert_null(recs_take(&r));
}

static void keytab_key(size_t i, uint64_t key[2])
{
	if (i % 5 == 4) { /* a hash, as other names' keys are */
		hash128(&i, sizeof(i), key);
		key[0] &= ~(UINT64_C(1) << 63);
	} else { /* close neighbours in a few first halves, as relation files' keys are */
		key[0] = (UINT64_C(1) << 63) | (i % 3);
		key[1] = 3 * (uint64_t)i;
	}
}

typedef struct keytab_walk {
	const keytab *t;
	size_t n;
	uint64_t prev[2];
} keytab_walk;

static void keytab_visit(void *arg, const uint64_t key[2], const uint64_t *fields, size_t at)
{
	keytab_walk *w = arg;
	uint64_t got[KEYTAB_FIELDS];
	size_t got_at;
	assert_int_equal(at, w->n);
	if (w->n > 0)
		assert_true(hash128_cmp(w->prev, key) < 0);
	assert_true(keytab_find(w->t, key, got, &got_at));
	assert_int_equal(got_at, at);
	assert_memory_equal(got, fields, 3 * sizeof(*got));
	w->prev[0] = key[0];
	w->prev[1] = key[1];
	w->n++;
}

/*
 * More keys than one run holds, in a scrambled order, some twice in different runs, hashes
 * among close keys and differences of 2^63 and more: each is found with its numbers (those of
 * a key added twice are 0), in order, and no neighbour is taken for one.
 */
static void test_keytab(void **state)
{
	(void)state;
	enum { N = 3 * 16384 + 77 };
	keytab *t = keytab_new(3);
	uint64_t key[2], f[KEYTAB_FIELDS], got[KEYTAB_FIELDS];
	for (size_t j = 0; j < N; j++) {
		size_t i = (j * 7919) % N; /* 7919 is prime and does not divide N: a permutation */
		keytab_key(i, key);
		f[0] = i;
		f[1] = (uint64_t)i * i * i * i * i;
		f[2] = ~(uint64_t)i;
		keytab_add(t, key, f);
		if (i % 1000 == 17)
			keytab_add(t, key, f); /* again, later: in another run */
	}
	static const uint64_t far[][2] = { { 7, 0 }, { 7, UINT64_MAX }, { 7, UINT64_C(1) << 63 } };
	for (size_t i = 0; i < 3; i++) {
		f[0] = f[1] = f[2] = i + 1;
		keytab_add(t, far[i], f);
	}
	assert_true(keytab_finish(t));
	assert_int_equal(keytab_count(t), N + 3);
	for (size_t i = 0; i < N; i++) {
		keytab_key(i, key);
		assert_true(keytab_find(t, key, got, NULL));
		bool twice = i % 1000 == 17;
		assert_true(got[0] == (twice ? 0 : i) && got[2] == (twice ? 0 : ~(uint64_t)i));
		if (i % 5 != 4) {
			key[1]++; /* a neighbour that is not there */
			assert_false(keytab_find(t, key, NULL, NULL));
		}
	}
	for (size_t i = 0; i < 3; i++) {
		assert_true(keytab_find(t, far[i], got, NULL));
		assert_int_equal(got[1], i + 1);
	}
	key[0] = 7;
	key[1] = 1;
	assert_false(keytab_find(t, key, NULL, NULL));
	key[0] = 0;
	key[1] = 0;
	assert_false(keytab_find(t, key, NULL, NULL));
	keytab_walk w = { t, 0, { 0, 0 } };
	keytab_each(t, keytab_visit, &w);
	assert_int_equal(w.n, N + 3);
	keytab_free(t);

	/* a set: no numbers; empty, and NULL, have nothing */
	t = keytab_new(0);
	assert_false(keytab_finish(t));
	assert_int_equal(keytab_count(t), 0);
	assert_false(keytab_find(t, key, NULL, NULL));
	assert_false(keytab_find(NULL, key, NULL, NULL));
	assert_int_equal(keytab_count(NULL), 0);
	keytab_free(t);
	t = keytab_new(0);
	keytab_add(t, key, NULL);
	assert_false(keytab_finish(t));
	assert_true(keytab_find(t, key, NULL, NULL));
	keytab_free(t);
}

typedef struct progress_call {
	progress *p;
	uint64_t bytes, files;
} progress_call;

static void add_progress(void *arg)
{
	progress_call *c = arg;
	progress_add(c->p, c->bytes, c->files);
}

/* What progress logs when age_ms have passed since it last logged. */
static char *progress_lines(progress *p, uint64_t bytes, uint64_t files, int64_t age_ms)
{
	progress_call c = { p, bytes, files };
	p->last_ms -= age_ms;
	return capture_stderr(add_progress, &c);
}

/* A progress line at most every ten seconds: bytes of the total, files, rate, time left. */
static void test_progress(void **state)
{
	(void)state;
	progress p;
	progress_start(&p, "backup-fetch base_X", (uint64_t)100 << 20);
	char *quiet = progress_lines(&p, (uint64_t)10 << 20, 3, 0);
	assert_string_equal(quiet, "");
	free(quiet);
	p.started_ms -= 4000; /* 20 MiB in about 4 s */
	char *line = progress_lines(&p, (uint64_t)10 << 20, 2, 10000);
	assert_non_null(strstr(line, "backup-fetch base_X: 20.0 MiB of 100.0 MiB (20%), 5 files, "));
	assert_non_null(strstr(line, " MiB/s, about 1"));
	assert_non_null(strstr(line, " s left"));
	free(line);
	/* the turn was taken: the next call within ten seconds logs nothing */
	char *again = progress_lines(&p, 1, 0, 0);
	assert_string_equal(again, "");
	free(again);
	/* no total known: no share, no time left */
	progress_start(&p, "backup-verify base_Y", 0);
	line = progress_lines(&p, (uint64_t)3 << 20, 1, 10000);
	assert_non_null(strstr(line, "backup-verify base_Y: 3.0 MiB, 1 files, "));
	assert_null(strstr(line, "left"));
	free(line);
}

static void expect_target_time(const char *text, time_t want_sec, long want_nsec)
{
	time_t sec = 0;
	long nsec = -1;
	const char *why = time_parse_target(text, &sec, &nsec);
	if (why != NULL)
		fail_msg("\"%s\" refused: %s", text, why);
	assert_int_equal(sec, want_sec);
	assert_int_equal(nsec, want_nsec);
}

static void expect_target_refused(const char *text, const char *because)
{
	time_t sec;
	long nsec;
	const char *why = time_parse_target(text, &sec, &nsec);
	if (why == NULL)
		fail_msg("\"%s\" must be refused", text);
	assert_non_null(strstr(why, because));
}

/* recovery_target_time as an operator copies it: RFC 3339 or PostgreSQL's own output. */
static void test_time_target(void **state)
{
	(void)state;
	const time_t t = 1796524482; /* 2026-12-06T02:34:42Z */
	expect_target_time("2026-12-06T02:34:42Z", t, 0);
	expect_target_time("2026-12-06 02:34:42.777878+00", t, 777878000);
	expect_target_time("2026-12-06 02:34:42+00", t, 0);
	expect_target_time("2026-12-06 03:34:42+01", t, 0);
	expect_target_time("2026-12-06 03:34:42+0100", t, 0);
	expect_target_time("2026-12-06T03:34:42.5+01:00", t, 500000000);
	expect_target_time("2026-12-05 21:04:42-05:30", t, 0);
	expect_target_time("2026-12-06 02:34:42 UTC", t, 0);
	expect_target_time("2026-12-06 02:34:42.1 +00", t, 100000000);
	expect_target_refused("2026-12-06 02:34:42", "no time zone");
	expect_target_refused("2026-12-06 02:34:42.123", "no time zone");
	expect_target_refused("2026-12-06 02:34:42 Europe/Berlin", "time zone such as");
	expect_target_refused("2026-12-06 02:34:42+1", "offset such as");
	expect_target_refused("2026-12-06 02:34:42+01:0", "offset such as");
	expect_target_refused("2026-12-06 02:34:42+25", "out of range");
	expect_target_refused("yesterday", "date and time");
	expect_target_refused("", "date and time");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_err_wrap, clear_env),
		cmocka_unit_test_setup(test_config_defaults, clear_env),
		cmocka_unit_test_setup(test_config_file_url, clear_env),
		cmocka_unit_test_setup(test_config_errors, clear_env),
		cmocka_unit_test_setup(test_config_no_storage, clear_env),
		cmocka_unit_test_setup(test_config_bools, clear_env),
		cmocka_unit_test_setup(test_config_sources, clear_env),
		cmocka_unit_test_setup(test_config_refused_and_choices, clear_env),
		cmocka_unit_test_setup(test_config_operator_names, clear_env),
		cmocka_unit_test(test_time_format),
		cmocka_unit_test_setup(test_membuf_cap, clear_env),
		cmocka_unit_test_setup(test_file_sink_atomic, clear_env),
		cmocka_unit_test(test_hash128),
		cmocka_unit_test(test_hash128_long),
		cmocka_unit_test(test_memcpy_small),
		cmocka_unit_test(test_recs),
		cmocka_unit_test(test_keytab),
		cmocka_unit_test(test_time_target),
		cmocka_unit_test(test_progress),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
