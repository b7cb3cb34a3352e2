/*
 * st: storage tools for operators, on the repository's raw objects: ls, get and cat (decrypted
 * and decompressed unless told not to), put (compressed and encrypted, never overwriting
 * without -f), rm.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/walc/commands.h"
#include "internal/repo/repo.h"

typedef struct st_flags {
	bool recursive, no_decompress, no_decrypt, no_compress, no_encrypt, force, stdin_in, glob;
	const char *pos[3]; /* after the subcommand */
	int npos;
} st_flags;

/* WAL-G reads a leading "/" as the repository's root, not as an absolute path. */
static const char *relative(const char *key)
{
	while (*key == '/')
		key++;
	return key;
}
/* Without -r: the folder's objects and, once each, its sub-folders ("name/"). */
static err_code st_ls(repo *r, const st_flags *f)
{
	obj_list l;
	const char *pattern = f->npos > 0 ? relative(f->pos[0]) : "";
	const char *prefix = f->glob ? "" : pattern;
	size_t plen = strlen(prefix);
	TRY(storage_list(r->st, prefix, true, &l));
	const char *last_dir = NULL;
	size_t last_len = 0;
	for (size_t i = 0; i < l.len; i++) {
		const char *key = l.items[i].key;
		if (f->glob && fnmatch(pattern, key, 0) != 0)
			continue;
		const char *rest = key + (plen <= strlen(key) ? plen : 0);
		while (*rest == '/')
			rest++;
		const char *slash = strchr(rest, '/');
		/* A glob names objects, wherever they are. */
		if (!f->recursive && !f->glob && slash != NULL) {
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
	if (f->stdin_in ? f->npos != 1 : f->npos != 2)
		return err_set(E_CONFIG, f->stdin_in ? "st put --read-stdin KEY" : "st put FILE KEY");
	const char *file = f->stdin_in ? "standard input" : f->pos[0];
	const char *dst = relative(f->pos[f->stdin_in ? 0 : 1]);
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
		rc = f->stdin_in ? sink_write_fd(s, STDIN_FILENO, file) : sink_write_file(s, file);
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

static err_code st_rm(repo *r, const st_flags *f)
{
	const char *what = relative(f->pos[0]);
	obj_info info;
	err_code rc = E_OK;
	if (!f->glob && what[0] != '\0') {
		rc = storage_stat(r->st, what, &info);
		if (rc == E_OK)
			return storage_remove(r->st, what);
		if (rc != E_NOTFOUND)
			return rc;
		err_clear();
		rc = E_OK;
	}
	obj_list l;
	TRY(storage_list(r->st, f->glob ? "" : what, true, &l));
	size_t removed = 0;
	const char **keys = xcalloc(l.len + 1, sizeof(*keys));
	for (size_t i = 0; i < l.len; i++)
		if (!f->glob || fnmatch(what, l.items[i].key, 0) == 0)
			keys[removed++] = l.items[i].key;
	rc = storage_remove_many(r->st, keys, removed);
	free(keys);
	/* As WAL-G: a name that removes nothing is a mistake (a pattern may match nothing). */
	if (rc == E_OK && removed == 0 && !f->glob)
		rc = err_set(E_NOTFOUND, "st rm: object or folder \"%s\" does not exist in %s", f->pos[0],
					 storage_describe(r->st));
	if (rc == E_OK)
		log_info("removed %zu objects under %s", removed, what[0] ? what : "/");
	obj_list_free(&l);
	return rc;
}

static err_code st_stat(repo *r, const char *key)
{
	obj_info info;
	TRY(storage_stat(r->st, relative(key), &info));
	struct tm tm;
	char when[32];
	gmtime_r(&info.mtime, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%s %llu %s\n", when, (unsigned long long)info.size, relative(key));
	return E_OK;
}

bool st_words_ok(const args *a)
{
	const char *sub = a->pos[0];
	int n = a->npos - 1;
	bool in = arg_set(a, "read-stdin");
	return (strcmp(sub, "ls") == 0 && n <= 1) || (strcmp(sub, "get") == 0 && n == 2) ||
		(strcmp(sub, "cat") == 0 && n == 1) || (strcmp(sub, "put") == 0 && n == (in ? 1 : 2)) ||
		(strcmp(sub, "rm") == 0 && n == 1) || (strcmp(sub, "stat") == 0 && n == 1);
}

int cmd_st(const config *cfg, const args *a)
{
	st_flags f = {
		.recursive = arg_set(a, "recursive"),
		.no_decompress = arg_set(a, "no-decompress"),
		.no_decrypt = arg_set(a, "no-decrypt"),
		.no_compress = arg_set(a, "no-compress"),
		.no_encrypt = arg_set(a, "no-encrypt"),
		.force = arg_set(a, "force") || arg_set(a, "overwrite"),
		.stdin_in = arg_set(a, "read-stdin"),
		.glob = arg_set(a, "glob"),
	};
	for (int i = 1; i < a->npos; i++)
		f.pos[f.npos++] = a->pos[i];
	const char *sub = a->pos[0];
	err_code rc = check_target_storage(arg(a, "target"), "st --target");
	if (rc == E_OK && (arg_set(a, "all-versions") || arg_set(a, "version-id")))
		rc = err_set(E_CONFIG, "st: walc does not handle object versions (--all-versions, "
							   "--version-id)");
	if (rc != E_OK)
		return command_fail(rc);
	repo r;
	rc = repo_open(cfg, &r);
	if (rc == E_OK) {
		if (strcmp(sub, "ls") == 0)
			rc = st_ls(&r, &f);
		else if (strcmp(sub, "get") == 0) {
			sink *out;
			rc = file_sink_new(f.pos[1], true, true, &out);
			if (rc == E_OK)
				rc = read_object(&r, relative(f.pos[0]), &f, out);
		} else if (strcmp(sub, "cat") == 0) {
			sink *out = xcalloc(1, sizeof(*out));
			out->ops = &stdout_ops;
			rc = read_object(&r, relative(f.pos[0]), &f, out);
		} else if (strcmp(sub, "put") == 0)
			rc = st_put(&r, &f);
		else if (strcmp(sub, "rm") == 0)
			rc = st_rm(&r, &f);
		else
			rc = st_stat(&r, f.pos[0]);
	}
	repo_close(&r);
	return command_fail(rc);
}
