/*
 * s3_live: drives the S3 backend through the public storage API against a real server, for
 * the integration tests (built by s3lib.sh with the Makefile's flags; not a unit test). The
 * configuration comes from the environment as for walc (WALG_S3_PREFIX, AWS_*, S3_*);
 * WALC_S3_TEST_ENDPOINT must be set, or it does nothing and says so.
 *
 *   s3_live put KEY FILE          stream FILE into KEY (uneven writes)
 *   s3_live putnew KEY FILE       as put, but never replacing KEY (exit 3 when it exists)
 *   s3_live racenew KEY FILE      put_new of FILE while a plain put publishes KEY first:
 *                                 must end in "exists" (exit 3) and keep the other content
 *   s3_live get KEY FILE          stream KEY into FILE
 *   s3_live stat KEY              print the size
 *   s3_live list PREFIX [-r]      print the number of objects, then their keys
 *   s3_live putmany PREFIX N      store N small objects PREFIX/obj-00000 ...
 *   s3_live rmprefix PREFIX       delete every object below PREFIX (DeleteObjects batches)
 *   s3_live rm KEY                delete one object
 *   s3_live loop SECONDS KEY      put and get KEY again and again for SECONDS (credential
 *                                 refresh); prints the number of round trips
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/walc/settings/config.h"
#include "internal/storage/s3/s3.h"
#include "internal/storage/storage.h"

static int fail(const char *what)
{
	fprintf(stderr, "s3_live %s: %s\n", what, err_msg());
	return 1;
}

static err_code put_file_mode(storage *st, const char *key, const char *path, int mode);

static err_code put_file(storage *st, const char *key, const char *path)
{
	return put_file_mode(st, key, path, 0);
}

/* mode 0: put; 1: put_new; 2: put_new racing a plain put published before finish. */
static err_code put_file_mode(storage *st, const char *key, const char *path, int mode)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return err_set(E_IO, "cannot open %s", path);
	sink *s = NULL;
	err_code rc = mode ? storage_put_new(st, key, &s) : storage_put(st, key, &s);
	static unsigned char buf[3 << 20];
	size_t sizes[] = { 1, 4095, 65536, 1 << 20, 3 << 20, 777 };
	for (size_t i = 0; rc == E_OK; i++) {
		size_t n = fread(buf, 1, sizes[i % 6], f);
		if (n == 0)
			break;
		rc = sink_write(s, buf, n);
	}
	if (rc == E_OK && ferror(f))
		rc = err_set(E_IO, "reading %s", path);
	if (rc == E_OK && mode == 2) {
		sink *other;
		rc = storage_put(st, key, &other);
		if (rc == E_OK)
			rc = sink_write(other, "the other writer\n", 17);
		if (rc == E_OK)
			rc = sink_finish(other);
		sink_free(other);
	}
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	fclose(f);
	return rc;
}

static err_code get_file(storage *st, const char *key, const char *path)
{
	sink *s;
	TRY(file_sink_new(path, false, true, &s));
	err_code rc = storage_get(st, key, s);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	return rc;
}

int main(int argc, char **argv)
{
	if (getenv("WALC_S3_TEST_ENDPOINT") == NULL) {
		printf("not run: needs WALC_S3_TEST_ENDPOINT (run by test/integration/test_s3_*.sh)\n");
		return 77;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: s3_live put|get|stat|list|putmany|rmprefix|rm|loop ARGS\n");
		return 2;
	}
	config cfg;
	if (config_load(&cfg, true) != E_OK)
		return fail("config");
	log_setup(cfg.log.level, false, "s3_live");
	storage *st;
	if (storage_open(&cfg.storage, &st) != E_OK)
		return fail("open");
	const char *cmd = argv[1];
	err_code rc = E_OK;
	if (strcmp(cmd, "put") == 0 && argc == 4) {
		rc = put_file(st, argv[2], argv[3]);
	} else if ((strcmp(cmd, "putnew") == 0 || strcmp(cmd, "racenew") == 0) && argc == 4) {
		rc = put_file_mode(st, argv[2], argv[3], cmd[0] == 'p' ? 1 : 2);
	} else if (strcmp(cmd, "get") == 0 && argc == 4) {
		rc = get_file(st, argv[2], argv[3]);
	} else if (strcmp(cmd, "stat") == 0) {
		obj_info info;
		rc = storage_stat(st, argv[2], &info);
		if (rc == E_OK)
			printf("%llu\n", (unsigned long long)info.size);
	} else if (strcmp(cmd, "list") == 0) {
		obj_list l;
		rc = storage_list(st, argv[2], argc > 3 && strcmp(argv[3], "-r") == 0, &l);
		if (rc == E_OK) {
			printf("%zu\n", l.len);
			for (size_t i = 0; i < l.len; i++)
				printf("%s %llu\n", l.items[i].key, (unsigned long long)l.items[i].size);
		}
		obj_list_free(&l);
	} else if (strcmp(cmd, "putmany") == 0 && argc == 4) {
		long n = atol(argv[3]);
		for (long i = 0; i < n && rc == E_OK; i++) {
			char *key = xasprintf("%s/obj-%05ld", argv[2], i);
			sink *s;
			rc = storage_put(st, key, &s);
			if (rc == E_OK)
				rc = sink_write(s, key, strlen(key));
			if (rc == E_OK)
				rc = sink_finish(s);
			sink_free(s);
			free(key);
		}
	} else if (strcmp(cmd, "rmprefix") == 0) {
		obj_list l;
		rc = storage_list(st, argv[2], true, &l);
		if (rc == E_OK) {
			const char **keys = xcalloc(l.len + 1, sizeof(*keys));
			for (size_t i = 0; i < l.len; i++)
				keys[i] = l.items[i].key;
			rc = storage_remove_many(st, keys, l.len);
			free(keys);
			if (rc == E_OK)
				printf("deleted %zu\n", l.len);
		}
		obj_list_free(&l);
	} else if (strcmp(cmd, "rm") == 0) {
		rc = storage_remove(st, argv[2]);
	} else if (strcmp(cmd, "loop") == 0 && argc == 4) {
		time_t end = time(NULL) + atol(argv[2]);
		long rounds = 0;
		char *tmp = xasprintf("/tmp/s3_live.%d", (int)getpid());
		while (rc == E_OK && time(NULL) < end) {
			FILE *f = fopen(tmp, "w");
			fprintf(f, "round %ld\n", rounds);
			fclose(f);
			rc = put_file(st, argv[3], tmp);
			if (rc == E_OK)
				rc = get_file(st, argv[3], tmp);
			rounds++;
			sleep(1);
		}
		unlink(tmp);
		free(tmp);
		printf("%ld\n", rounds);
	} else {
		fprintf(stderr, "s3_live: bad arguments\n");
		rc = E_CONFIG;
	}
	if (rc != E_OK)
		fail(cmd);
	storage_free(st);
	config_free(&cfg);
	return rc == E_OK ? 0 : rc == E_EXISTS ? 3 : 1;
}
