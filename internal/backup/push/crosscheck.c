/*
 * A backup's sentinel against the backup's own records. The sentinel's start LSN decides which
 * pages the next delta stores, so one that moved (a changed digit, a hand edit, a bad restore
 * of the repository) would silently drop changed pages from every later delta. PostgreSQL
 * wrote the truth three times: backup_label (START WAL LOCATION, START TIMELINE), pg_control
 * (the system identifier) and the .backup history file archived in wal_005 (STOP WAL
 * LOCATION); metadata.json, written with the sentinel, must agree too. backup-verify reports
 * each disagreement; backup-push does not build a delta on it.
 */
#include "internal/backup/push/push_impl.h"

#include <endian.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"

#define RECORD_MAX (64u << 10) /* backup_label and history files are a few hundred bytes */

/* One member of a small tar object, kept whole (up to RECORD_MAX). */
typedef struct grab {
	const char *want; /* its name without a leading "/" */
	membuf out;
	bool in, found;
} grab;

static err_code grab_entry(void *ctx, const tar_entry *e)
{
	grab *g = ctx;
	const char *name = e->name;
	while (*name == '/' || (name[0] == '.' && name[1] == '/'))
		name += name[0] == '/' ? 1 : 2;
	g->in = e->type == TAR_FILE && strcmp(name, g->want) == 0;
	if (g->in) {
		g->found = true;
		g->out.len = 0;
	}
	return E_OK;
}

static err_code grab_data(void *ctx, const void *buf, size_t len)
{
	grab *g = ctx;
	return g->in ? membuf_add(&g->out, buf, len) : E_OK;
}

static err_code grab_end(void *ctx)
{
	((grab *)ctx)->in = false;
	return E_OK;
}

static const tar_handler grab_handler = { grab_entry, grab_data, grab_end };

/* What a backup_label or a .backup history file says (PostgreSQL's "KEY: value" lines). */
typedef struct label_info {
	bool start_ok, stop_ok, tli_ok;
	uint64_t start, stop;
	uint32_t tli; /* START TIMELINE, else the start file's */
	char file[WAL_NAME_LEN + 1]; /* the start segment, "" when not given */
	char label[256], start_time[64]; /* LABEL, START TIME: which backup wrote it */
	bool standby;					  /* BACKUP FROM: standby */
} label_info;

/* "KEY: X/Y (file SEGMENT)": the LSN, and the segment's name when file is given. */
static bool location(const char *line, const char *key, uint64_t *lsn, char *file)
{
	char text[32], f[WAL_NAME_LEN + 1] = "";
	size_t n = strlen(key);
	if (strncmp(line, key, n) != 0 || sscanf(line + n, ": %31s (file %24[0-9A-F])", text, f) < 1)
		return false;
	if (pg_lsn_parse(text, lsn) != E_OK) {
		err_clear();
		return false;
	}
	if (file != NULL && strlen(f) == WAL_NAME_LEN)
		memcpy(file, f, sizeof(f));
	return true;
}

static void parse_label(const membuf *mb, label_info *li)
{
	memset(li, 0, sizeof(*li));
	const char *p = (const char *)mb->data, *end = p + mb->len;
	char line[256];
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) ? n : sizeof(line) - 1), p);
		p += n + (nl != NULL);
		unsigned tli;
		if (location(line, "START WAL LOCATION", &li->start, li->file))
			li->start_ok = true;
		else if (location(line, "STOP WAL LOCATION", &li->stop, NULL))
			li->stop_ok = true;
		else if (sscanf(line, "START TIMELINE: %u", &tli) == 1) {
			li->tli = tli;
			li->tli_ok = true;
		} else if (strncmp(line, "LABEL: ", 7) == 0)
			snprintf(li->label, sizeof(li->label), "%.255s", line + 7);
		else if (strncmp(line, "START TIME: ", 12) == 0)
			snprintf(li->start_time, sizeof(li->start_time), "%.63s", line + 12);
		else if (strcmp(line, "BACKUP FROM: standby") == 0)
			li->standby = true;
	}
	if (!li->tli_ok && li->file[0] != '\0' && sscanf(li->file, "%8X", &li->tli) == 1)
		li->tli_ok = true;
}

typedef struct cross {
	repo *r;
	const char *name;
	const backup_sentinel *s;
	char sentinel[512]; /* the sentinel's key, the object a disagreement names */
	crosscheck_fn fn;
	void *arg;
	char *locked; /* the first record the configured key cannot decrypt, and why */
} cross;

static void say(cross *c, const char *object, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(cross *c, const char *object, const char *fmt, ...)
{
	char what[ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	c->fn(c->arg, object != NULL ? object : c->sentinel, what);
}

typedef enum rec_state { REC_ABSENT, REC_READ, REC_BAD, REC_LOCKED } rec_state;

/*
 * Reads one small record: a member of a tar object, or (member NULL) a plain object. A failure
 * to read it is said of the object (REC_BAD), except one of the configuration (REC_LOCKED: an
 * OpenPGP key without a usable secret key, which encrypts but cannot read); only a
 * cancellation is returned.
 */
static err_code read_record(cross *c, const char *base_key, const char *member, membuf *out,
							rec_state *st)
{
	char *key = NULL;
	*st = REC_ABSENT;
	err_code rc = repo_find(c->r, base_key, &key);
	if (rc == E_NOTFOUND) {
		err_clear();
		return E_OK;
	}
	grab g = { member, { NULL, 0, 0, RECORD_MAX }, false, false };
	if (rc == E_OK) {
		out->len = 0;
		out->max = RECORD_MAX;
		rc = repo_get(c->r, key, member ? tar_reader_new(&grab_handler, &g) : membuf_sink_new(out));
	}
	if (rc == E_OK && member != NULL && !g.found)
		rc = err_set(E_CORRUPT, "it holds no %s", member);
	if (rc == E_OK) {
		*st = REC_READ;
		if (member != NULL) {
			free(out->data);
			*out = g.out;
			g.out.data = NULL;
		}
	} else if (rc == E_CONFIG) {
		*st = REC_LOCKED;
		if (c->locked == NULL)
			c->locked = xstrdup(err_msg());
		err_clear();
		rc = E_OK;
	} else if (rc != E_CANCELLED) {
		*st = REC_BAD;
		say(c, key ? key : base_key, "%s", err_msg());
		err_clear();
		rc = E_OK;
	}
	free(g.out.data);
	free(key);
	return rc;
}

/* metadata.json, written beside the sentinel (and plain, like it): the same LSNs and system. */
static void check_metadata(cross *c)
{
	char *key = xasprintf(REPO_BACKUP_DIR "%s/metadata.json", c->name);
	json_t *m = NULL;
	err_code rc = catalog_read_json(c->r, key, CATALOG_JSON_MAX, &m);
	if (rc != E_OK) {
		if (rc != E_NOTFOUND)
			say(c, key, "%s", err_msg());
		err_clear();
		free(key);
		return;
	}
	static const char *const fields[] = { "start_lsn", "finish_lsn", "system_identifier" };
	const uint64_t mine[] = { c->s->lsn, c->s->finish_lsn, c->s->system_id };
	for (size_t i = 0; i < 3; i++) {
		const json_t *v = catalog_json_get(m, fields[i]);
		if (!json_is_integer(v) || (i == 2 && !c->s->have_system_id))
			continue;
		uint64_t theirs = (uint64_t)json_integer_value(v);
		char a[32], b[32];
		if (theirs == mine[i])
			continue;
		if (i < 2) {
			pg_lsn_format(mine[i], a);
			pg_lsn_format(theirs, b);
		} else {
			snprintf(a, sizeof(a), "%llu", (unsigned long long)mine[i]);
			snprintf(b, sizeof(b), "%llu", (unsigned long long)theirs);
		}
		say(c, NULL, "%s %s, but %s says %s %s",
			i == 0	 ? "start LSN"
			: i == 1 ? "finish LSN"
					 : "system identifier",
			a, key, fields[i], b);
	}
	json_decref(m);
	free(key);
}

/* The label's start and timeline against the sentinel's LSN and the name's timeline. */
static void check_label(cross *c, const label_info *li, uint64_t seg_size)
{
	char a[32], b[32];
	const backup_sentinel *s = c->s;
	if (!li->start_ok) {
		say(c, NULL, "backup_label has no START WAL LOCATION: the start LSN cannot be checked");
		return;
	}
	pg_lsn_format(s->lsn, a);
	pg_lsn_format(li->start, b);
	if (s->lsn != li->start)
		say(c, NULL, "start LSN %s, but backup_label says START WAL LOCATION %s", a, b);
	uint32_t tli;
	uint64_t segno;
	char seg[WAL_NAME_LEN + 1];
	if (strncmp(c->name, "base_", 5) != 0 || strlen(c->name) < 5 + WAL_NAME_LEN)
		return;
	snprintf(seg, sizeof(seg), "%s", c->name + 5);
	if (!wal_is_segment_name(seg) || wal_name_parse(seg, seg_size, &tli, &segno) != E_OK) {
		err_clear();
		return;
	}
	if (li->tli_ok && li->tli != tli)
		say(c, NULL, "the name says timeline %u, but backup_label says START TIMELINE %u", tli,
			li->tli);
	/* WAL-G names a backup by the segment of its start, or of the byte before it */
	if (seg_size > 0 && segno != s->lsn / seg_size &&
		(s->lsn == 0 || segno != (s->lsn - 1) / seg_size))
		say(c, NULL, "start LSN %s is not in segment %s that the name gives", a, seg);
}

err_code backup_crosscheck(repo *r, const char *name, const backup_sentinel *s, uint64_t seg_size,
						   crosscheck_fn fn, void *arg, char **locked)
{
	cross c = { r, name, s, "", fn, arg, NULL };
	snprintf(c.sentinel, sizeof(c.sentinel), REPO_BACKUP_DIR "%s" SENTINEL_SUFFIX, name);
	char a[32], b[32];
	membuf mb = { 0 };
	rec_state st;
	label_info li = { 0 };

	char *key = xasprintf(REPO_BACKUP_DIR "%s/tar_partitions/backup_label.tar", name);
	err_code rc = read_record(&c, key, "backup_label", &mb, &st);
	if (rc == E_OK && st == REC_ABSENT)
		say(&c, key, "missing: the start LSN cannot be checked");
	free(key);
	if (rc == E_OK && st == REC_READ) {
		parse_label(&mb, &li);
		check_label(&c, &li, seg_size);
	}
	if (s->finish_lsn != 0 && s->finish_lsn < s->lsn) {
		pg_lsn_format(s->finish_lsn, a);
		pg_lsn_format(s->lsn, b);
		say(&c, NULL, "finish LSN %s is before the start LSN %s", a, b);
	}

	key = xasprintf(REPO_BACKUP_DIR "%s/tar_partitions/pg_control.tar", name);
	if (rc == E_OK)
		rc = read_record(&c, key, "global/pg_control", &mb, &st);
	if (rc == E_OK && st == REC_ABSENT)
		say(&c, key, "missing: the system identifier cannot be checked");
	uint64_t sysid;
	if (rc == E_OK && st == REC_READ && s->have_system_id && mb.len >= sizeof(sysid)) {
		memcpy(&sysid, mb.data, sizeof(sysid));
		sysid = le64toh(sysid);
		if (sysid != s->system_id)
			say(&c, NULL, "system identifier %llu, but pg_control says %llu",
				(unsigned long long)s->system_id, (unsigned long long)sysid);
	}
	free(key);

	/* The history file is named by the start the label gives (the sentinel's may be wrong). */
	if (rc == E_OK && li.start_ok && li.file[0] != '\0' && seg_size > 0) {
		key = xasprintf("wal_005/%s.%08X.backup", li.file, (unsigned)(li.start % seg_size));
		label_info hi = { 0 };
		rc = read_record(&c, key, NULL, &mb, &st);
		if (rc == E_OK && st == REC_READ)
			parse_label(&mb, &hi);
		/*
		 * A backup taken on a standby archives no history file: one of that name is another
		 * backup's that started at the same checkpoint (its primary's), as one whose LABEL or
		 * START TIME differs from this backup_label's.
		 */
		if (rc == E_OK && st == REC_READ &&
			(li.standby || strcmp(hi.label, li.label) != 0 ||
			 strcmp(hi.start_time, li.start_time) != 0)) {
			log_info("%s: %s is another backup's (%s): not compared", name, key,
					 li.standby ? "this one was taken on a standby, which archives none"
								: "its LABEL or START TIME differ from backup_label's");
		} else if (rc == E_OK && st == REC_READ) {
			pg_lsn_format(s->finish_lsn, a);
			pg_lsn_format(hi.stop, b);
			if (hi.stop_ok && hi.stop != s->finish_lsn)
				say(&c, NULL, "finish LSN %s, but %s says STOP WAL LOCATION %s", a, key, b);
			if (hi.start_ok && hi.start != li.start) {
				pg_lsn_format(li.start, a);
				pg_lsn_format(hi.start, b);
				say(&c, key, "START WAL LOCATION %s, but backup_label says %s", b, a);
			}
		}
		free(key);
	}
	if (rc == E_OK)
		check_metadata(&c);
	free(mb.data);
	if (locked != NULL)
		*locked = c.locked;
	else
		free(c.locked);
	return rc;
}
