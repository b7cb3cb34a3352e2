/*
 * st: storage tools for operators, on the repository's raw objects: ls, get and cat (decrypted
 * and decompressed unless told not to), put (compressed and encrypted, never overwriting
 * without -f), rm, stat, and check read|write.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cmd/walc/commands.h"
#include "internal/repo/repo.h"
#include "internal/storage/storage.h"

typedef struct st_flags {
	bool recursive, no_decompress, no_decrypt, no_compress, no_encrypt, force, stdin_in, glob;
	const char *pos[ARGS_MAX_POS]; /* after the subcommand */
	int npos;
} st_flags;

/* WAL-G reads a leading "/" as the repository's root, not as an absolute path. */
static const char *relative(const char *key)
{
	while (*key == '/')
		key++;
	return key;
}
/* Go's time.Time text, as WAL-G prints a listing's times: "2006-01-02 15:04:05.5 +0000 UTC". */
static void go_time(time_t t, long nsec, char *out, size_t len)
{
	char *rfc = time_format_rfc3339(t, nsec); /* 2006-01-02T15:04:05.5Z */
	rfc[10] = ' ';
	snprintf(out, len, "%.*s +0000 UTC", (int)strlen(rfc) - 1, rfc);
	free(rfc);
}

/*
 * WAL-G's listing (operators parse it: "obj SIZE DATE TIME ZONE ZONE NAME"), names relative
 * to the folder listed. Without -r: its objects and, once each, its sub-folders. With -g:
 * every object whose key matches, by its whole key.
 */
static err_code st_ls(repo *r, const st_flags *f)
{
	static const char *const hdr[] = { "type", "size", "last modified", "name" };
	repo_objs l;
	const char *pattern = f->npos > 0 ? relative(f->pos[0]) : "";
	char *prefix = xstrdup(f->glob ? "" : pattern);
	/* "wal_005" names the folder, as "wal_005/" does. */
	if (prefix[0] != '\0' && prefix[strlen(prefix) - 1] != '/') {
		char *p = xasprintf("%s/", prefix);
		free(prefix);
		prefix = p;
	}
	size_t plen = strlen(prefix);
	err_code rc = repo_list(r, prefix, true, &l);
	free(prefix);
	TRY(rc);
	table *t = table_new(4, hdr, NULL);
	const char *last_dir = NULL;
	size_t last_len = 0;
	for (size_t i = 0; i < l.len; i++) {
		const char *key = l.items[i].key;
		if (f->glob && fnmatch(pattern, key, 0) != 0)
			continue;
		const char *rest = f->glob ? key : key + (plen <= strlen(key) ? plen : 0);
		const char *slash = strchr(rest, '/');
		char size[32], when[64];
		if (!f->recursive && !f->glob && slash != NULL) {
			size_t n = (size_t)(slash - rest) + 1;
			if (last_dir == NULL || n != last_len || strncmp(last_dir, rest, n) != 0) {
				char *dir = xasprintf("%.*s", (int)n, rest);
				table_add(t, (const char *const[]){ "dir", "0", "0001-01-01 00:00:00 +0000 UTC",
												   dir });
				free(dir);
			}
			last_dir = rest;
			last_len = n;
			continue;
		}
		snprintf(size, sizeof(size), "%llu", (unsigned long long)l.items[i].size);
		go_time(l.items[i].mtime, l.items[i].mtime_nsec, when, sizeof(when));
		table_add(t, (const char *const[]){ "obj", size, when, rest });
	}
	table_print(t, stdout, false);
	table_free(t);
	repo_objs_free(&l);
	return E_OK;
}

/* Decrypt, then decompress by extension, unless told otherwise; the sink is consumed. */
static err_code read_object(repo *r, const char *key, const st_flags *f, sink *out)
{
	sink *chain = out;
	if (!f->no_decompress)
		chain = repo_decompress_new(key, chain);
	if (!f->no_decrypt)
		chain = repo_decrypt_new(r, chain);
	err_code rc = repo_get_plain(r, key, chain);
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
	char *key = f->no_compress ? xstrdup(dst) : repo_key(r, dst);
	sink *s = NULL;
	err_code rc = repo_put_plain(r, key, f->force ? REPO_PUT_REPLACE : REPO_PUT_NEW, &s);
	if (rc == E_EXISTS)
		err_wrap(rc, "st put: use -f to overwrite");
	if (rc == E_OK) {
		if (!f->no_encrypt)
			s = repo_encrypt_new(r, s);
		if (!f->no_compress)
			s = repo_compress_new(r, s);
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
	repo_obj info;
	err_code rc = E_OK;
	if (!f->glob && what[0] != '\0') {
		rc = repo_stat(r, what, &info);
		if (rc == E_OK)
			return repo_remove(r, what);
		if (rc != E_NOTFOUND)
			return rc;
		err_clear();
		rc = E_OK;
	}
	repo_objs l;
	TRY(repo_list(r, f->glob ? "" : what, true, &l));
	size_t removed = 0;
	const char **keys = xcalloc(l.len + 1, sizeof(*keys));
	for (size_t i = 0; i < l.len; i++)
		if (!f->glob || fnmatch(what, l.items[i].key, 0) == 0)
			keys[removed++] = l.items[i].key;
	rc = repo_remove_many(r, keys, removed);
	free(keys);
	/* As WAL-G: a name that removes nothing is a mistake (a pattern may match nothing). */
	if (rc == E_OK && removed == 0 && !f->glob)
		rc = err_set(E_NOTFOUND, "st rm: object or folder \"%s\" does not exist in %s", f->pos[0],
					 repo_describe(r));
	if (rc == E_OK)
		log_info("removed %zu objects under %s", removed, what[0] ? what : "/");
	repo_objs_free(&l);
	return rc;
}

static err_code st_stat(repo *r, const char *key)
{
	repo_obj info;
	TRY(repo_stat(r, relative(key), &info));
	struct tm tm;
	char when[32];
	gmtime_r(&info.mtime, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%s %llu %s\n", when, (unsigned long long)info.size, relative(key));
	return E_OK;
}

/* WAL-G's read check: the repository lists, and every name given exists. */
static err_code st_check_read(repo *r, const st_flags *f)
{
	repo_objs l;
	TRY(repo_list(r, "", false, &l));
	repo_objs_free(&l);
	char *missing = NULL;
	for (int i = 1; i < f->npos; i++) {
		repo_obj info;
		err_code rc = repo_stat(r, relative(f->pos[i]), &info);
		if (rc == E_OK)
			continue;
		if (rc != E_NOTFOUND)
			return rc;
		err_clear();
		char *m = xasprintf("%s%s%s", missing ? missing : "", missing ? ", " : "", f->pos[i]);
		free(missing);
		missing = m;
	}
	if (missing != NULL) {
		err_code rc = err_set(E_NOTFOUND, "st check read: missing from %s: %s",
							  repo_describe(r), missing);
		free(missing);
		return rc;
	}
	log_info("Read check OK");
	return E_OK;
}

/* WAL-G's write check: a new object of a random name at the root, stored, then removed. */
static err_code st_check_write(repo *r)
{
	unsigned char rnd[16];
	char name[64];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return err_errno(E_IO, errno, "st check write: random name");
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(name + 2 * i, 3, "%02x", rnd[i]);
	sink *s = NULL;
	err_code rc = repo_put_plain(r, name, REPO_PUT_NEW, &s);
	if (rc == E_OK)
		rc = sink_write(s, "test", 4);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	if (rc != E_OK)
		return err_wrap(rc, "st check write: storing %s in %s", name, repo_describe(r));
	rc = repo_remove(r, name);
	if (rc != E_OK)
		return err_wrap(rc, "st check write: %s stored, but removing it", name);
	log_info("Write check OK");
	return E_OK;
}

bool st_words_ok(const args *a)
{
	const char *sub = a->pos[0];
	int n = a->npos - 1;
	bool in = arg_set(a, "read-stdin");
	bool check = strcmp(sub, "check") == 0 && n >= 1;
	return (strcmp(sub, "ls") == 0 && n <= 1) || (strcmp(sub, "get") == 0 && n == 2) ||
		(strcmp(sub, "cat") == 0 && n == 1) || (strcmp(sub, "put") == 0 && n == (in ? 1 : 2)) ||
		(strcmp(sub, "rm") == 0 && n == 1) || (strcmp(sub, "stat") == 0 && n == 1) ||
		(check && strcmp(a->pos[1], "read") == 0) ||
		(check && n == 1 && strcmp(a->pos[1], "write") == 0);
}

/* One subcommand on the storage named target. */
static err_code st_run(const config *cfg, const char *sub, const st_flags *f, const char *target)
{
	repo *r = NULL;
	err_code rc = config_repo_open(cfg, REPO_READ, target, &r);
	if (rc == E_OK) {
		if (strcmp(sub, "ls") == 0)
			rc = st_ls(r, f);
		else if (strcmp(sub, "get") == 0) {
			sink *out;
			rc = file_sink_new(f->pos[1], true, true, &out);
			if (rc == E_OK)
				rc = read_object(r, relative(f->pos[0]), f, out);
		} else if (strcmp(sub, "cat") == 0) {
			sink *out = xcalloc(1, sizeof(*out));
			out->ops = &stdout_ops;
			rc = read_object(r, relative(f->pos[0]), f, out);
		} else if (strcmp(sub, "put") == 0)
			rc = st_put(r, f);
		else if (strcmp(sub, "rm") == 0)
			rc = st_rm(r, f);
		else if (strcmp(sub, "check") == 0)
			rc = strcmp(f->pos[0], "read") == 0 ? st_check_read(r, f) : st_check_write(r);
		else
			rc = st_stat(r, f->pos[0]);
	}
	repo_close(r);
	return rc;
}

/* WAL-G's --target all: the subcommand on each storage in turn; done when one succeeded. */
static err_code st_run_all(const config *cfg, const char *sub, const st_flags *f)
{
	char **names;
	size_t n;
	TRY(storage_names(&cfg->storage, &names, &n));
	bool one_ok = false;
	for (size_t i = 0; i < n; i++) {
		log_info("storage %s", names[i]);
		if (st_run(cfg, sub, f, names[i]) == E_OK)
			one_ok = true;
		else
			log_error("storage %s: %s", names[i], err_msg());
		err_clear();
		free(names[i]);
	}
	free(names);
	return one_ok ? E_OK : err_set(E_FAIL, "st %s failed on every storage", sub);
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
	/* As WAL-G's st: the main storage unless --target names another (or all). */
	const char *target = arg(a, "target") ? arg(a, "target") : "default";
	if (arg_set(a, "all-versions") || arg_set(a, "version-id"))
		return command_fail(err_set(E_CONFIG, "st: walc does not handle object versions "
											  "(--all-versions, --version-id)"));
	return command_fail(strcmp(target, "all") == 0 ? st_run_all(cfg, sub, &f)
												   : st_run(cfg, sub, &f, target));
}
