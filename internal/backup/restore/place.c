/*
 * Where a restore writes: the destination and each tablespace's place, settled and checked
 * before anything is written. A restore writes inside DEST, and outside it only where the
 * operator placed a tablespace, each place empty (or, with --delta, a stopped copy of this
 * cluster and its tablespaces' PG_<version> folders).
 */
#include "internal/backup/restore/fetch_impl.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IN_PLACE_SETTING "allow_in_place_tablespaces = on\n"

/* Whether path is dir or lies under it, compared by component ("/a/bc" is not under "/a/b"). */
static bool within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (strcmp(dir, "/") == 0)
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/*
 * path made absolute (from the working directory), its symbolic links resolved as far as it
 * exists; the part that does not exist yet may hold no "." or ".." (they would be resolved
 * against directories that are not there). what names the path in messages.
 */
static err_code canon_path(const char *path, const char *what, char **out)
{
	char *head;
	if (path[0] == '/') {
		head = xstrdup(path);
	} else {
		char *cwd = getcwd(NULL, 0);
		if (cwd == NULL)
			return err_errno(E_IO, errno, "%s: the working directory", what);
		head = xasprintf("%s/%s", cwd, path);
		free(cwd);
	}
	char *tail = xstrdup("");
	err_code rc = E_OK;
	for (;;) {
		char *real = realpath(head, NULL);
		if (real != NULL) {
			*out = xasprintf("%s%s", strcmp(real, "/") == 0 && tail[0] != '\0' ? "" : real, tail);
			free(real);
			break;
		}
		if (errno != ENOENT) {
			rc = err_errno(E_CONFIG, errno, "%s: %s", what, path);
			break;
		}
		size_t len = strlen(head);
		while (len > 1 && head[len - 1] == '/')
			head[--len] = '\0';
		char *slash = strrchr(head, '/');
		const char *comp = slash + 1;
		if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
			rc = err_set(E_CONFIG, "%s: %s: \".\" or \"..\" in a part that does not exist", what,
						 path);
			break;
		}
		char *t = xasprintf("/%s%s", comp, tail);
		free(tail);
		tail = t;
		if (slash == head)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	free(head);
	free(tail);
	return rc;
}

typedef bool (*name_ok)(const char *dir, const char *name);

/*
 * A directory's entries: *n of them (0 when it does not exist), *bad the first that accept
 * refuses (or NULL; owned). Not a directory: an error naming what.
 */
static err_code dir_scan(const char *path, const char *what, name_ok accept, size_t *n,
						 char **bad)
{
	*n = 0;
	*bad = NULL;
	DIR *d = opendir(path);
	if (d == NULL) {
		if (errno == ENOENT)
			return E_OK;
		if (errno == ENOTDIR)
			return err_set(E_CONFIG, "%s: %s is not a directory", what, path);
		return err_errno(E_IO, errno, "%s: opening %s", what, path);
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		(*n)++;
		if (*bad == NULL && (accept == NULL || !accept(path, de->d_name)))
			*bad = xstrdup(de->d_name);
	}
	closedir(d);
	return E_OK;
}

static bool all_digits(const char *s)
{
	return s[0] != '\0' && strspn(s, "0123456789") == strlen(s);
}

static bool is_dir_at(const char *dir, const char *name)
{
	char *path = xasprintf("%s/%s", dir, name);
	struct stat sb;
	bool ok = lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
	free(path);
	return ok;
}

/* A tablespace's own folder: PG_<major>_<catalog version>, as PostgreSQL names it. */
static bool version_dir(const char *dir, const char *name)
{
	if (strncmp(name, "PG_", 3) != 0)
		return false;
	size_t major = strspn(name + 3, "0123456789");
	const char *cat = name + 3 + major;
	return major > 0 && cat[0] == '_' && all_digits(cat + 1) && is_dir_at(dir, name);
}

/*
 * What a WAL directory holds: segments, history and backup history files (8 hex digits
 * first), PostgreSQL's and WAL-G's folders and temporaries.
 */
static bool wal_name(const char *dir, const char *name)
{
	static const char *const known[] = { "archive_status", "summaries", "walg_data",
										 ".wal-g",		   "RECOVERYXLOG", "RECOVERYHISTORY",
										 NULL };
	(void)dir;
	for (size_t i = 0; known[i] != NULL; i++)
		if (strcmp(name, known[i]) == 0)
			return true;
	return strncmp(name, "xlogtemp.", 9) == 0 || strncmp(name, ".walc-", 6) == 0 ||
		(strlen(name) >= 8 && strspn(name, "0123456789ABCDEF") >= 8);
}

static void places_free(ts_place *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].oid);
		free(t[i].loc);
		free(t[i].canon);
	}
	free(t);
}

void placement_free(placement *p)
{
	places_free(p->ts, p->n);
	free(p->dest);
	free(p->waldir);
	memset(p, 0, sizeof(*p));
}

/* The tablespaces a spec places, checked for form; what names the spec in messages. */
static err_code spec_read(const json_t *spec, const char *what, ts_place **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	const json_t *list = catalog_json_get(spec, "tablespaces");
	if (list == NULL)
		return E_OK;
	if (!json_is_array(list))
		return err_set(E_CORRUPT, "%s: \"tablespaces\" is not a list", what);
	*out = xcalloc(json_array_size(list) + 1, sizeof(ts_place));
	size_t i;
	const json_t *oidv;
	json_array_foreach(list, i, oidv)
	{
		const char *oid = json_string_value(oidv);
		if (oid == NULL || !all_digits(oid))
			return err_set(E_CORRUPT, "%s: bad tablespace oid", what);
		const char *loc = json_string_value(catalog_json_get(catalog_json_get(spec, oid), "loc"));
		if (loc == NULL || loc[0] != '/')
			return err_set(E_CORRUPT, "%s: tablespace %s needs an absolute \"loc\"", what, oid);
		(*out)[*n].oid = xstrdup(oid);
		(*out)[*n].loc = xstrdup(loc);
		(*n)++;
	}
	return E_OK;
}

static err_code read_spec_file(const char *path, json_t **out)
{
	json_error_t jerr;
	*out = json_load_file(path, 0, &jerr);
	if (*out == NULL)
		return err_set(E_CONFIG, "--restore-spec %s: %s (line %d)", path, jerr.text, jerr.line);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return err_set(E_CONFIG, "--restore-spec %s: expected a JSON object", path);
	}
	return E_OK;
}

/*
 * A live server refuses everything, --force included. A postmaster.pid whose process is gone
 * (a crashed server) may still belong to a server this host cannot see (another container or
 * host on shared storage): refused unless --force. what names the command in messages.
 */
err_code placement_check_stopped(const char *dest, bool force, const char *what)
{
	long pid;
	switch (pg_postmaster_state(dest, &pid)) {
	case PG_PID_NONE:
		return E_OK;
	case PG_PID_UNREADABLE:
		return err_set(E_CONFIG, "%s: %s/postmaster.pid names no process: stop the server that "
								 "runs on %s, or remove the file once none does",
					   what, dest, dest);
	case PG_PID_LIVE:
		return err_set(E_CONFIG, "%s: a server (pid %ld, %s/postmaster.pid) runs on %s: stop "
								 "it first",
					   what, pid, dest, dest);
	case PG_PID_GONE:
		break;
	}
	if (!force)
		return err_set(E_CONFIG, "%s: %s/postmaster.pid names pid %ld, which is not running "
								 "here: if no server runs on %s (another container or host), "
								 "remove the file or use --force",
					   what, dest, pid, dest);
	log_warn("%s --force: %s/postmaster.pid names pid %ld, which is not running: taken as a "
			 "crashed server's",
			 what, dest, pid);
	return E_OK;
}

/* The system identifier a marker of an interrupted restore records (false: none readable). */
static bool marker_sysid(const char *path, bool *known, uint64_t *sysid)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	char line[256];
	bool found = false;
	*known = false;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long long v;
		if (strncmp(line, "system_identifier ", 18) == 0) {
			found = true;
			if (sscanf(line + 18, "%llu", &v) == 1) {
				*known = true;
				*sysid = v;
			}
		}
	}
	fclose(f);
	return found;
}

static err_code other_cluster(const char *dest, uint64_t theirs, uint64_t ours, bool force)
{
	if (!force)
		return err_set(E_CONFIG,
					   "backup-fetch --delta: %s belongs to another cluster (system identifier "
					   "%llu, the backup's is %llu); use --force to overwrite it",
					   dest, (unsigned long long)theirs, (unsigned long long)ours);
	log_warn("backup-fetch --delta --force: %s belongs to another cluster (system identifier "
			 "%llu, the backup's is %llu): overwriting it",
			 dest, (unsigned long long)theirs, (unsigned long long)ours);
	return E_OK;
}

/*
 * --delta removes whatever the backup does not have, so it runs only onto a data directory
 * (PG_VERSION and global/pg_control) of the backup's cluster, or onto what an interrupted
 * walc restore left (its marker); --force admits another cluster's, never a directory that
 * is no cluster.
 */
static err_code check_cluster(const char *dest, const chain *c, bool force)
{
	TRY(placement_check_stopped(dest, force, "backup-fetch --delta"));
	const backup_sentinel *top = &c->lv[c->n - 1].s;
	char *marker = xasprintf("%s/" RESTORE_MARKER, dest);
	bool known = false;
	uint64_t sysid = 0;
	bool interrupted = marker_sysid(marker, &known, &sysid);
	free(marker);
	if (interrupted) {
		log_info("backup-fetch --delta: %s holds an interrupted walc restore", dest);
		if (known && top->have_system_id && sysid != top->system_id)
			return other_cluster(dest, sysid, top->system_id, force);
		return E_OK;
	}
	char *version = xasprintf("%s/PG_VERSION", dest);
	char *ctl = xasprintf("%s/global/pg_control", dest);
	struct stat sb;
	bool has_version = lstat(version, &sb) == 0 && S_ISREG(sb.st_mode);
	int fd = open(ctl, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	uint64_t id = 0;
	ssize_t got = fd >= 0 ? read(fd, &id, sizeof(id)) : -1;
	if (fd >= 0)
		close(fd);
	free(version);
	free(ctl);
	if (!has_version || got != (ssize_t)sizeof(id))
		return err_set(E_CONFIG,
					   "backup-fetch --delta: %s is not a PostgreSQL data directory (no %s): "
					   "refusing to delete what it holds",
					   dest, has_version ? "readable global/pg_control" : "PG_VERSION");
	if (top->have_system_id && le64toh(id) != top->system_id)
		return other_cluster(dest, le64toh(id), top->system_id, force);
	return E_OK;
}

/* DEST: absent or empty, or with --delta a stopped copy of the cluster. */
static err_code check_dest(const fetch_options *opt, const chain *c, placement *p)
{
	struct stat sb;
	p->dest_exists = stat(p->dest, &sb) == 0;
	if (!p->dest_exists && errno != ENOENT)
		return err_errno(E_IO, errno, "backup-fetch: %s", p->dest);
	if (p->dest_exists && !S_ISDIR(sb.st_mode))
		return err_set(E_CONFIG, "backup-fetch: %s is not a directory", p->dest);
	size_t n;
	char *bad;
	TRY(dir_scan(p->dest, "backup-fetch", NULL, &n, &bad));
	free(bad);
	if (n == 0) {
		if (opt->delta)
			log_info("backup-fetch --delta: %s is %s: nothing to compare or remove, a plain "
					 "restore",
					 p->dest, p->dest_exists ? "empty" : "absent");
		return E_OK;
	}
	if (!opt->delta)
		return err_set(E_CONFIG, "backup-fetch: destination %s is not empty", p->dest);
	TRY(check_cluster(p->dest, c, opt->force));
	p->delta = true;
	return E_OK;
}

static ts_place *placed(const placement *p, const char *oid)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->ts[i].oid, oid) == 0)
			return &p->ts[i];
	return NULL;
}

/* Where each tablespace goes: apart from DEST and from each other, empty (or its own folder). */
static err_code check_locations(placement *p, const char *what)
{
	for (size_t i = 0; i < p->n; i++) {
		ts_place *t = &p->ts[i];
		TRY(canon_path(t->loc, what, &t->canon));
		char *own = xasprintf("%s/pg_tblspc/%s", p->dest, t->oid);
		t->in_place = strcmp(t->canon, own) == 0;
		free(own);
		if (t->in_place)
			continue; /* where the tablespace belongs inside DEST, as without a spec */
		if (strcmp(t->canon, p->dest) == 0)
			return err_set(E_CONFIG, "%s: tablespace %s at %s is the destination", what,
						   t->oid, t->loc);
		if (within(t->canon, p->dest))
			return err_set(E_CONFIG, "%s: tablespace %s at %s lies inside the destination %s "
									 "(only %s/pg_tblspc/%s may hold it there)",
						   what, t->oid, t->loc, p->dest, p->dest, t->oid);
		if (within(p->dest, t->canon))
			return err_set(E_CONFIG, "%s: tablespace %s at %s holds the destination %s", what,
						   t->oid, t->loc, p->dest);
		for (size_t j = 0; j < i; j++) {
			const ts_place *u = &p->ts[j];
			if (u->in_place)
				continue;
			if (strcmp(t->canon, u->canon) == 0)
				return err_set(E_CONFIG, "%s: tablespaces %s and %s at one location, %s", what,
							   u->oid, t->oid, t->loc);
			if (within(t->canon, u->canon) || within(u->canon, t->canon))
				return err_set(E_CONFIG, "%s: tablespace %s at %s and tablespace %s at %s: one "
										 "inside the other",
							   what, u->oid, u->loc, t->oid, t->loc);
		}
		struct stat sb;
		if (lstat(t->canon, &sb) == 0 && !S_ISDIR(sb.st_mode))
			return err_set(E_CONFIG, "%s: tablespace %s's location %s is not a directory", what,
						   t->oid, t->loc);
		size_t n;
		char *bad;
		TRY(dir_scan(t->canon, what, p->delta ? version_dir : NULL, &n, &bad));
		err_code rc = E_OK;
		if (bad != NULL)
			rc = p->delta ? err_set(E_CONFIG, "%s: tablespace %s's location %s holds %s, not "
											  "only its PG_<version> folder",
									what, t->oid, t->loc, bad)
						  : err_set(E_CONFIG, "%s: tablespace %s's location %s is not empty",
									what, t->oid, t->loc);
		free(bad);
		TRY(rc);
	}
	return E_OK;
}

/*
 * --delta: pg_tblspc's links are the operator's to place (a link left where the backup's
 * tablespace is restored inside DEST would take its files elsewhere), and a pg_wal link is
 * followed only to a directory that holds WAL alone.
 */
static err_code check_delta_links(placement *p, const char *what)
{
	char *dir = xasprintf("%s/pg_tblspc", p->dest);
	DIR *d = opendir(dir);
	err_code rc = E_OK;
	struct dirent *de;
	while (d != NULL && rc == E_OK && (de = readdir(d)) != NULL) {
		if (!all_digits(de->d_name))
			continue;
		char *path = xasprintf("%s/%s", dir, de->d_name);
		struct stat sb;
		const ts_place *t = placed(p, de->d_name);
		if (lstat(path, &sb) == 0) {
			char target[4096];
			ssize_t n = S_ISLNK(sb.st_mode) ? readlink(path, target, sizeof(target) - 1) : 0;
			target[n > 0 ? n : 0] = '\0';
			if (S_ISLNK(sb.st_mode) && (t == NULL || t->in_place))
				rc = err_set(E_CONFIG,
							 "backup-fetch --delta: %s links to %s, outside the destination: name "
							 "tablespace %s in --restore-spec (or use --original-tablespaces) to "
							 "restore it there, or remove the link",
							 path, target, de->d_name);
			else if (S_ISDIR(sb.st_mode) && t != NULL && !t->in_place)
				rc = err_set(E_CONFIG, "%s: %s is a directory, tablespace %s goes to %s: move "
									   "or remove the directory first",
							 what, path, de->d_name, t->loc);
		}
		free(path);
	}
	if (d != NULL)
		closedir(d);
	free(dir);
	TRY(rc);

	char *wal = xasprintf("%s/pg_wal", p->dest);
	struct stat sb;
	if (lstat(wal, &sb) == 0 && S_ISLNK(sb.st_mode)) {
		char *target = realpath(wal, NULL);
		size_t n;
		char *bad = NULL;
		if (target == NULL)
			rc = err_errno(E_CONFIG, errno, "backup-fetch --delta: %s is a link", wal);
		else if (within(p->dest, target))
			rc = err_set(E_CONFIG, "backup-fetch --delta: %s links to %s, which holds the "
								   "destination",
						 wal, target);
		else
			rc = dir_scan(target, "backup-fetch --delta", wal_name, &n, &bad);
		for (size_t i = 0; rc == E_OK && i < p->n; i++)
			if (!p->ts[i].in_place &&
				(within(target, p->ts[i].canon) || within(p->ts[i].canon, target)))
				rc = err_set(E_CONFIG, "backup-fetch --delta: %s links to %s, which overlaps "
									   "tablespace %s's location",
							 wal, target, p->ts[i].oid);
		if (rc == E_OK && bad != NULL)
			rc = err_set(E_CONFIG, "backup-fetch --delta: %s links to %s, which holds %s, not "
								   "WAL: refusing to empty it",
						 wal, target, bad);
		free(bad);
		if (rc == E_OK)
			p->waldir = target;
		else
			free(target);
	}
	free(wal);
	return rc;
}

err_code placement_plan(const fetch_options *opt, const chain *c, placement *p)
{
	memset(p, 0, sizeof(*p));
	p->partial = opt->mask != NULL;
	const level *top = &c->lv[c->n - 1];
	/* The sentinel's own spec is checked whether or not it is used: it is the backup's record. */
	ts_place *rec = NULL;
	size_t nrec = 0;
	char *what = xasprintf("backup %s: the tablespace spec of its sentinel", top->name);
	err_code rc = top->s.spec != NULL ? spec_read(top->s.spec, what, &rec, &nrec) : E_OK;
	free(what);
	json_t *file = NULL;
	if (rc == E_OK && opt->restore_spec != NULL) {
		what = xasprintf("--restore-spec %s", opt->restore_spec);
		rc = read_spec_file(opt->restore_spec, &file);
		if (rc == E_OK)
			rc = spec_read(file, what, &p->ts, &p->n);
		json_decref(file);
	} else if (rc == E_OK && opt->original_tablespaces) {
		what = xstrdup("--original-tablespaces");
		p->ts = rec;
		p->n = nrec;
		rec = NULL;
		nrec = 0;
	} else {
		what = xstrdup("backup-fetch");
	}
	if (rc == E_OK)
		rc = canon_path(opt->dest, "backup-fetch: destination", &p->dest);
	if (rc == E_OK)
		rc = check_dest(opt, c, p);
	if (rc == E_OK)
		rc = check_locations(p, what);
	if (rc == E_OK && p->delta)
		rc = check_delta_links(p, what);
	for (size_t i = 0; rc == E_OK && i < nrec; i++)
		if (placed(p, rec[i].oid) == NULL)
			log_info("tablespace %s restored inside the destination, at %s/pg_tblspc/%s (it was "
					 "at %s: --restore-spec or --original-tablespaces place it elsewhere)",
					 rec[i].oid, p->dest, rec[i].oid, rec[i].loc);
	places_free(rec, nrec);
	free(what);
	return rc;
}

err_code placement_mark(const char *dest, const char *text)
{
	char *path = xasprintf("%s/" RESTORE_MARKER, dest);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	err_code rc = fd < 0 ? err_errno(E_IO, errno, "creating %s", path)
						 : fd_write_all(fd, text, strlen(text), path);
	if (rc == E_OK && fsync(fd) != 0)
		rc = err_errno(E_IO, errno, "syncing %s", path);
	if (fd >= 0)
		close(fd);
	/* durable before --delta removes pg_control: a crash leaves one or the other */
	if (rc == E_OK)
		rc = fsync_parent_dir(path);
	free(path);
	return rc;
}

/* Removed once the restore is whole; until then it lets --delta finish what was started. */
static err_code write_marker(const placement *p, const chain *c)
{
	const backup_sentinel *top = &c->lv[c->n - 1].s;
	char *text = top->have_system_id
		? xasprintf("walc backup-fetch of %s, not complete while this file exists\n"
					"system_identifier %llu\n",
					c->lv[c->n - 1].name, (unsigned long long)top->system_id)
		: xasprintf("walc backup-fetch of %s, not complete while this file exists\n"
					"system_identifier unknown\n",
					c->lv[c->n - 1].name);
	err_code rc = placement_mark(p->dest, text);
	free(text);
	return rc;
}

static err_code link_tablespace(const placement *p, const ts_place *t)
{
	TRY(mkdir_p(t->loc, 0700));
	char *dir = xasprintf("%s/pg_tblspc", p->dest);
	char *link = xasprintf("%s/%s", dir, t->oid);
	err_code rc = mkdir_p(dir, 0700);
	char target[4096];
	ssize_t n = rc == E_OK ? readlink(link, target, sizeof(target) - 1) : -1;
	bool same = n >= 0 && (size_t)n == strlen(t->loc) && memcmp(target, t->loc, (size_t)n) == 0;
	/* --delta: a link elsewhere is replaced (check_delta_links refused anything else there) */
	if (rc == E_OK && !same && n >= 0 && unlink(link) != 0)
		rc = err_errno(E_IO, errno, "removing the link %s", link);
	if (rc == E_OK && !same && symlink(t->loc, link) != 0)
		rc = err_errno(E_IO, errno, "linking %s to %s", link, t->loc);
	free(link);
	free(dir);
	TRY(rc);
	log_info("tablespace %s restored at %s", t->oid, t->loc);
	return E_OK;
}

err_code placement_prepare(const placement *p, const chain *c)
{
	if (!p->dest_exists)
		TRY(mkdir_p(p->dest, 0700));
	if (!p->delta && chmod(p->dest, 0700) != 0)
		return err_errno(E_IO, errno, "chmod of %s", p->dest);
	TRY(write_marker(p, c));
	if (p->delta) {
		/* pg_control comes back last: until then no server may start on a mix of old and new */
		char *ctl = xasprintf("%s/global/pg_control", p->dest);
		err_code rc = unlink(ctl) == 0 || errno == ENOENT
			? E_OK
			: err_errno(E_IO, errno, "removing %s", ctl);
		free(ctl);
		TRY(rc);
	}
	for (size_t i = 0; i < p->n; i++)
		if (!p->ts[i].in_place)
			TRY(link_tablespace(p, &p->ts[i]));
	return E_OK;
}

bool placement_follows(const placement *p, const char *member, const char *name)
{
	if (strcmp(member, "/") == 0)
		return strcmp(name, "pg_wal") == 0 && p->waldir != NULL;
	const ts_place *t = strcmp(member, "/pg_tblspc") == 0 ? placed(p, name) : NULL;
	return t != NULL && !t->in_place;
}

err_code placement_wal_dir(const placement *p)
{
	/* PostgreSQL refuses to start without pg_wal, which older walc backups may lack */
	char *dir = xasprintf("%s/pg_wal/archive_status", p->dest);
	err_code rc = mkdir_p(dir, 0700);
	free(dir);
	return rc;
}

/* Whether a line of the file is exactly line. */
static bool file_has_line(const char *path, const char *line)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return false;
	char buf[512];
	bool found = false;
	while (!found && fgets(buf, sizeof(buf), f) != NULL)
		found = strcmp(buf, line) == 0;
	fclose(f);
	return found;
}

/*
 * A tablespace restored inside DEST is a directory in pg_tblspc, which PostgreSQL (13.8 and
 * later) accepts at the end of recovery only with allow_in_place_tablespaces.
 */
static err_code allow_in_place(const char *dest)
{
	char *dir = xasprintf("%s/pg_tblspc", dest);
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;
	while (d != NULL && (de = readdir(d)) != NULL)
		if (all_digits(de->d_name) && is_dir_at(dir, de->d_name))
			n++;
	if (d != NULL)
		closedir(d);
	free(dir);
	if (n == 0)
		return E_OK;
	char *path = xasprintf("%s/postgresql.auto.conf", dest);
	err_code rc = E_OK;
	if (!file_has_line(path, IN_PLACE_SETTING)) {
		static const char text[] = "# tablespaces restored in pg_tblspc/ by walc backup-fetch\n"
			IN_PLACE_SETTING;
		int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		rc = fd < 0 ? err_errno(E_IO, errno, "opening %s", path)
					: fd_write_all(fd, text, sizeof(text) - 1, path);
		if (fd >= 0 && close(fd) != 0 && rc == E_OK)
			rc = err_errno(E_IO, errno, "closing %s", path);
		if (rc == E_OK)
			log_info("%zu tablespace%s restored in %s/pg_tblspc: %s", n, n == 1 ? "" : "s", dest,
					 "allow_in_place_tablespaces = on added to postgresql.auto.conf, as recovery "
					 "needs it");
	}
	free(path);
	return rc;
}

err_code placement_finish(const placement *p)
{
	if (!p->partial)
		TRY(allow_in_place(p->dest));
	char *marker = xasprintf("%s/" RESTORE_MARKER, p->dest);
	err_code rc = unlink(marker) == 0 || errno == ENOENT
		? E_OK
		: err_errno(E_IO, errno, "removing %s", marker);
	free(marker);
	return rc;
}
