/*
 * st: storage tools for operators, on the repository's raw objects: ls, get and cat (decrypted
 * and decompressed unless told not to), put (compressed and encrypted, never overwriting
 * without -f), rm.
 */
#include <stdlib.h>
#include <string.h>

#include "cmd/walc/commands.h"
#include "internal/repo/repo.h"

static int usage(void)
{
	log_error("usage: walc %s", command_find("st")->usage);
	return 1;
}

typedef struct st_flags {
	bool recursive, no_decompress, no_decrypt, no_compress, no_encrypt, force;
	const char *pos[3];
	int npos;
} st_flags;

static bool parse(int argc, char **argv, st_flags *f)
{
	memset(f, 0, sizeof(*f));
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-r") == 0 || strcmp(a, "--recursive") == 0)
			f->recursive = true;
		else if (strcmp(a, "--no-decompress") == 0)
			f->no_decompress = true;
		else if (strcmp(a, "--no-decrypt") == 0)
			f->no_decrypt = true;
		else if (strcmp(a, "--no-compress") == 0)
			f->no_compress = true;
		else if (strcmp(a, "--no-encrypt") == 0)
			f->no_encrypt = true;
		else if (strcmp(a, "-f") == 0 || strcmp(a, "--force") == 0 ||
				 strcmp(a, "--overwrite") == 0)
			f->force = true;
		else if (a[0] == '-' || f->npos == 3)
			return false;
		else
			f->pos[f->npos++] = a;
	}
	return true;
}

/* Without -r: the folder's objects and, once each, its sub-folders ("name/"). */
static err_code st_ls(repo *r, const st_flags *f)
{
	obj_list l;
	const char *prefix = f->npos > 0 ? f->pos[0] : "";
	size_t plen = strlen(prefix);
	TRY(storage_list(r->st, prefix, true, &l));
	const char *last_dir = NULL;
	size_t last_len = 0;
	for (size_t i = 0; i < l.len; i++) {
		const char *key = l.items[i].key;
		const char *rest = key + (plen <= strlen(key) ? plen : 0);
		while (*rest == '/')
			rest++;
		const char *slash = strchr(rest, '/');
		if (!f->recursive && slash != NULL) {
			size_t n = (size_t)(slash - key) + 1;
			if (last_dir == NULL || n != last_len || strncmp(last_dir, key, n) != 0)
				printf("%-20s %12s %.*s\n", "", "DIR", (int)n, key);
			last_dir = key;
			last_len = n;
			continue;
		}
		struct tm tm;
		char when[32];
		gmtime_r(&l.items[i].mtime, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("%s %12llu %s\n", when, (unsigned long long)l.items[i].size, key);
	}
	obj_list_free(&l);
	return E_OK;
}

/* Decrypt, then decompress by extension, unless told otherwise; the sink is consumed. */
static err_code read_object(repo *r, const char *key, const st_flags *f, sink *out)
{
	sink *chain = out;
	if (!f->no_decompress)
		chain = codec_decompress_new(repo_codec_for_key(key), chain);
	if (!f->no_decrypt)
		chain = repo_decrypt_new(r, chain);
	err_code rc = storage_get(r->st, key, chain);
	if (rc == E_OK)
		rc = sink_finish(chain);
	sink_free(chain);
	return rc == E_OK ? E_OK : err_wrap(rc, "object %s", key);
}

static err_code stdout_write(sink *s, const void *buf, size_t len)
{
	(void)s;
	return fwrite(buf, 1, len, stdout) == len ? E_OK : err_set(E_IO, "writing to stdout");
}

static err_code stdout_finish(sink *s)
{
	(void)s;
	return fflush(stdout) == 0 ? E_OK : err_set(E_IO, "writing to stdout");
}

static void stdout_free(sink *s)
{
	free(s);
}

static const sink_ops stdout_ops = { stdout_write, stdout_finish, stdout_free };

static err_code st_put(repo *r, const st_flags *f)
{
	const char *file = f->pos[0], *dst = f->pos[1];
	const codec *c = f->no_compress ? codec_by_name("none") : r->codec;
	char *key = codec_ext(c)[0] ? xasprintf("%s.%s", dst, codec_ext(c)) : xstrdup(dst);
	sink *s = NULL;
	err_code rc = f->force ? storage_put(r->st, key, &s) : storage_put_new(r->st, key, &s);
	if (rc == E_EXISTS)
		err_wrap(rc, "st put: use -f to overwrite");
	if (rc == E_OK) {
		if (!f->no_encrypt)
			s = repo_encrypt_new(r, s);
		s = codec_compress_new(c, r->level, s);
		rc = sink_write_file(s, file);
		if (rc == E_OK)
			rc = sink_finish(s);
		if (rc == E_EXISTS)
			err_wrap(rc, "st put: %s appeared meanwhile; use -f to overwrite", key);
	}
	sink_free(s);
	if (rc == E_OK)
		log_info("stored %s as %s", file, key);
	free(key);
	return rc;
}

static err_code st_rm(repo *r, const char *what)
{
	obj_info info;
	err_code rc = storage_stat(r->st, what, &info);
	if (rc == E_OK)
		return storage_remove(r->st, what);
	if (rc != E_NOTFOUND)
		return rc;
	err_clear();
	rc = E_OK;
	obj_list l;
	TRY(storage_list(r->st, what, true, &l));
	for (size_t i = 0; rc == E_OK && i < l.len; i++)
		rc = storage_remove(r->st, l.items[i].key);
	if (rc == E_OK)
		log_info("removed %zu objects under %s", l.len, what);
	obj_list_free(&l);
	return rc;
}

int cmd_st(const config *cfg, int argc, char **argv)
{
	st_flags f;
	if (argc < 2 || !parse(argc, argv, &f))
		return usage();
	const char *sub = argv[1];
	repo r;
	err_code rc = repo_open(cfg, &r);
	if (rc != E_OK) {
		repo_close(&r);
		return command_fail(rc);
	}
	if (strcmp(sub, "ls") == 0 && f.npos <= 1)
		rc = st_ls(&r, &f);
	else if (strcmp(sub, "get") == 0 && f.npos == 2) {
		sink *out;
		rc = file_sink_new(f.pos[1], true, true, &out);
		if (rc == E_OK)
			rc = read_object(&r, f.pos[0], &f, out);
	} else if (strcmp(sub, "cat") == 0 && f.npos == 1) {
		sink *out = xcalloc(1, sizeof(*out));
		out->ops = &stdout_ops;
		rc = read_object(&r, f.pos[0], &f, out);
	} else if (strcmp(sub, "put") == 0 && f.npos == 2)
		rc = st_put(&r, &f);
	else if (strcmp(sub, "rm") == 0 && f.npos == 1)
		rc = st_rm(&r, f.pos[0]);
	else {
		repo_close(&r);
		return usage();
	}
	repo_close(&r);
	return command_fail(rc);
}
