/*
 * WAL-G's WAL metadata (WALG_UPLOAD_WAL_METADATA): beside each archived WAL file, plain JSON
 * saying when it was made. INDIVIDUAL stores wal_005/<name>.json at once; BULK stages each
 * file's entry in the marker folder and, with the segment whose name ends in F, stores the
 * entries of its 16 segments as wal_005/<name minus its last digit>.json.
 */
#include "internal/wal/wal_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/catalog/catalog.h"

#define META_DATE_FMT "%Y-%m-%dT%H:%M:%S.%fZ"

static json_t *meta_entry(const char *name, time_t sec, long nsec)
{
	char *when = time_format_rfc3339(sec, nsec);
	json_t *doc = json_pack("{s:{s:s, s:s}}", name, "created_time", when, "date_fmt",
							META_DATE_FMT);
	free(when);
	return doc;
}

/* Written aside and renamed: a staged entry is whole or absent, as an object would be. */
static err_code stage(const char *dir, const char *name, const json_t *doc)
{
	TRY(mkdir_p(dir, 0700));
	char *path = xasprintf("%s/%s.json", dir, name);
	char *tmp = xasprintf("%s.tmp", path);
	char *text = json_dumps(doc, JSON_COMPACT);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	err_code rc = fd < 0 ? err_errno(E_IO, errno, "WALG_UPLOAD_WAL_METADATA=BULK: creating %s", tmp)
						 : fd_write_all(fd, text, strlen(text), tmp);
	if (fd >= 0 && close(fd) != 0 && rc == E_OK)
		rc = err_errno(E_IO, errno, "closing %s", tmp);
	if (rc == E_OK && rename(tmp, path) != 0)
		rc = err_errno(E_IO, errno, "renaming %s", tmp);
	if (rc != E_OK)
		unlink(tmp);
	free(text);
	free(tmp);
	free(path);
	return rc;
}

/*
 * The staged entries of the group (names starting with prefix) merged into one object, stored,
 * then the staged files removed. An unreadable entry is skipped with a warning, as WAL-G does:
 * the segment in hand is archived already and matters more.
 */
static err_code store_group(repo *r, const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return err_errno(E_IO, errno, "WALG_UPLOAD_WAL_METADATA=BULK: opening %s", dir);
	json_t *all = json_object();
	char **taken = NULL;
	size_t ntaken = 0;
	struct dirent *de;
	size_t plen = strlen(prefix);
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, prefix, plen) != 0 || !str_has_suffix(de->d_name, ".json"))
			continue;
		char *path = xasprintf("%s/%s", dir, de->d_name);
		json_error_t jerr;
		json_t *one = json_load_file(path, 0, &jerr);
		if (json_is_object(one))
			json_object_update(all, one);
		else
			log_warn("WAL metadata %s is unreadable (%s): left out of %s.json", path, jerr.text,
					 prefix);
		json_decref(one);
		taken = xrealloc(taken, (ntaken + 1) * sizeof(*taken));
		taken[ntaken++] = path;
	}
	closedir(d);
	char *key = xasprintf(REPO_WAL_DIR "%s.json", prefix);
	err_code rc = catalog_put_json(r, key, all);
	for (size_t i = 0; i < ntaken; i++) {
		if (rc == E_OK && unlink(taken[i]) != 0)
			log_warn("removing %s: %s", taken[i], strerror(errno));
		free(taken[i]);
	}
	free(taken);
	free(key);
	json_decref(all);
	return rc;
}

err_code wal_metadata_store(repo *r, const wal_settings *cfg, const char *name, time_t sec,
							 long nsec)
{
	const char *level = cfg->upload_wal_metadata;
	if (level == NULL || strcmp(level, "NOMETADATA") == 0)
		return E_OK;
	json_t *doc = meta_entry(name, sec, nsec);
	err_code rc;
	if (strcmp(level, "BULK") != 0) {
		char *key = xasprintf(REPO_WAL_DIR "%s.json", name);
		rc = catalog_put_json(r, key, doc);
		free(key);
	} else {
		char *dir = wal_marker_dir(cfg);
		rc = stage(dir, name, doc);
		size_t len = strlen(name);
		if (rc == E_OK && name[len - 1] == 'F') {
			char *prefix = xasprintf("%.*s", (int)(len - 1), name);
			rc = store_group(r, dir, prefix);
			free(prefix);
		}
		free(dir);
	}
	json_decref(doc);
	return rc == E_OK ? E_OK : err_wrap(rc, "WALG_UPLOAD_WAL_METADATA=%s: %s", level, name);
}
