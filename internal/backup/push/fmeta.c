/*
 * files_metadata.json, streamed while the backup is written, so that a push's memory does not
 * grow with the number of files (a jansson tree of Files took about 1.5 KB a file). Each
 * file's record goes out when its packer has made it; each partition's member names wait for
 * TarFileSets, which follows Files, packed by front coding (a name keeps only what differs
 * from the one before it: a few bytes for names in walk order). The object is published only
 * at the end of the backup, like every other; a failed push discards it.
 *
 * Files comes out in the order the packers finish their files rather than sorted; JSON
 * objects have no order, and WAL-G reads Files into a map.
 */
#include "internal/backup/push/push_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records are gathered into writes of about this size. */
#define FMETA_FLUSH (64u << 10)

typedef struct tar_set {
	char *part;
	namelist members;
} tar_set;

struct fmeta {
	sink *out;
	char *key;
	membuf buf; /* records not yet written */
	bool any;	/* a record was written: the next one needs a comma */
	err_code rc; /* the first write error, returned to every later call */
	char why[ERR_MSG_MAX]; /* its message, for the threads that meet it later */
	tar_set *sets; /* TarFileSets: each closed partition and its members */
	size_t nsets;
	bool files_closed; /* Files ended: another root member was begun */
};

static void put_varint(namelist *l, size_t v)
{
	do {
		unsigned char b = (unsigned char)(v & 0x7f);
		v >>= 7;
		l->data[l->len++] = (unsigned char)(b | (v != 0 ? 0x80 : 0));
	} while (v != 0);
}

void namelist_add(namelist *l, const char *name)
{
	size_t len = strlen(name), shared = 0;
	while (shared < len && shared < l->last_len && name[shared] == l->last[shared])
		shared++;
	size_t need = l->len + 20 + (len - shared);
	if (need > l->cap) {
		l->cap = need + need / 2;
		l->data = xrealloc(l->data, l->cap);
	}
	put_varint(l, shared);
	put_varint(l, len - shared);
	memcpy(l->data + l->len, name + shared, len - shared);
	l->len += len - shared;
	if (len + 1 > l->last_cap) {
		l->last_cap = len + 1;
		l->last = xrealloc(l->last, l->last_cap);
	}
	memcpy(l->last, name, len + 1);
	l->last_len = len;
	l->count++;
}

static size_t get_varint(const namelist *l, size_t *at)
{
	size_t v = 0;
	for (int shift = 0; *at < l->len && shift < 64; shift += 7) {
		unsigned char b = l->data[(*at)++];
		v |= (size_t)(b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			break;
	}
	return v;
}

void namelist_each(const namelist *l, void (*fn)(void *arg, const char *name), void *arg)
{
	char *name = NULL;
	size_t at = 0, cap = 0;
	while (at < l->len) {
		size_t shared = get_varint(l, &at), rest = get_varint(l, &at);
		if (shared + rest + 1 > cap) {
			cap = shared + rest + 1;
			name = xrealloc(name, cap);
		}
		memcpy(name + shared, l->data + at, rest);
		name[shared + rest] = '\0';
		at += rest;
		fn(arg, name);
	}
	free(name);
}

void namelist_free(namelist *l)
{
	free(l->data);
	free(l->last);
	memset(l, 0, sizeof(*l));
}

static void add(fmeta *f, const void *data, size_t len)
{
	if (f->buf.len + len > f->buf.cap) {
		f->buf.cap = f->buf.len + len + FMETA_FLUSH;
		f->buf.data = xrealloc(f->buf.data, f->buf.cap);
	}
	memcpy(f->buf.data + f->buf.len, data, len);
	f->buf.len += len;
}

static err_code failed(const fmeta *f)
{
	return f->rc == E_OK ? E_OK : err_set(f->rc, "%s", f->why);
}

static err_code flush(fmeta *f)
{
	if (f->rc == E_OK && f->buf.len > 0 &&
		(f->rc = sink_write(f->out, f->buf.data, f->buf.len)) != E_OK) {
		err_wrap(f->rc, "storing %s", f->key);
		snprintf(f->why, sizeof(f->why), "%s", err_msg());
	}
	f->buf.len = 0;
	return failed(f);
}

err_code fmeta_open(push_state *st)
{
	if (st->no_files_metadata)
		return E_OK;
	fmeta *f = xcalloc(1, sizeof(*f));
	f->key = xasprintf("%s%s/files_metadata.json", repo_backups(st->r), st->name);
	err_code rc = repo_put_plain(st->r, f->key, REPO_PUT_LONG, &f->out);
	if (rc != E_OK) {
		err_wrap(rc, "storing %s", f->key);
		fmeta_free(f);
		return rc;
	}
	add(f, "{\"Files\":{", 10);
	st->fmeta = f;
	return E_OK;
}

err_code fmeta_file(push_state *st, const char *member, json_t *rec)
{
	fmeta *f = st->fmeta;
	if (f == NULL) {
		json_decref(rec);
		return E_OK;
	}
	/* {"member":{...}} without its braces: jansson escapes the name and checks its UTF-8. */
	json_t *one = json_object();
	char *text = NULL;
	if (json_object_set_new(one, member, rec) == 0)
		text = json_dumps(one, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(one);
	if (text == NULL) {
		log_warn("%s: the name is not UTF-8; it has no record in files_metadata.json", member);
		return E_OK;
	}
	pthread_mutex_lock(&st->lock);
	if (f->any)
		add(f, ",", 1);
	f->any = true;
	add(f, text + 1, strlen(text) - 2);
	err_code rc = f->buf.len >= FMETA_FLUSH ? flush(f) : failed(f);
	pthread_mutex_unlock(&st->lock);
	free(text);
	return rc;
}

void fmeta_part(push_state *st, const char *base, namelist *names)
{
	fmeta *f = st->fmeta;
	if (f == NULL) {
		namelist_free(names);
		return;
	}
	pthread_mutex_lock(&st->lock);
	f->sets = xrealloc(f->sets, (f->nsets + 1) * sizeof(*f->sets));
	f->sets[f->nsets++] = (tar_set){ xstrdup(base), *names };
	pthread_mutex_unlock(&st->lock);
	memset(names, 0, sizeof(*names));
}

typedef struct set_writer {
	fmeta *f;
	bool first;
} set_writer;

/* s as a JSON string, after a comma unless first; false (nothing added) when s is not UTF-8. */
static bool add_string(fmeta *f, const char *s, bool first)
{
	json_t *j = json_string(s);
	char *text = j != NULL ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	json_decref(j);
	if (text == NULL)
		return false;
	if (!first)
		add(f, ",", 1);
	add(f, text, strlen(text));
	free(text);
	return true;
}

static void add_member(void *arg, const char *name)
{
	set_writer *w = arg;
	/* Names that are not UTF-8 were left out of Files already (fmeta_file). */
	if (add_string(w->f, name, w->first))
		w->first = false;
	if (w->f->buf.len >= FMETA_FLUSH)
		flush(w->f);
}

err_code fmeta_member(push_state *st, const char *key)
{
	fmeta *f = st->fmeta;
	if (!f->files_closed)
		add(f, "}", 1);
	f->files_closed = true;
	add(f, ",", 1);
	add_string(f, key, true);
	add(f, ":", 1);
	return failed(f);
}

err_code fmeta_text(push_state *st, const char *text, size_t len)
{
	fmeta *f = st->fmeta;
	add(f, text, len);
	return f->buf.len >= FMETA_FLUSH ? flush(f) : failed(f);
}

err_code fmeta_finish(push_state *st)
{
	fmeta *f = st->fmeta;
	if (f == NULL)
		return E_OK;
	if (!f->files_closed)
		add(f, "}", 1);
	add(f, ",\"TarFileSets\":{", 16);
	for (size_t i = 0; i < f->nsets; i++) {
		add_string(f, f->sets[i].part, i == 0); /* the partitions' own names: ASCII */
		add(f, ":[", 2);
		set_writer w = { f, true };
		namelist_each(&f->sets[i].members, add_member, &w);
		add(f, "]", 1);
	}
	add(f, "}}", 2);
	TRY(flush(f));
	err_code rc = sink_finish(f->out);
	if (rc != E_OK)
		return err_wrap(rc, "storing %s", f->key);
	push_published(st, f->key);
	return E_OK;
}

void fmeta_free(fmeta *f)
{
	if (f == NULL)
		return;
	sink_free(f->out); /* unfinished: discarded */
	for (size_t i = 0; i < f->nsets; i++) {
		free(f->sets[i].part);
		namelist_free(&f->sets[i].members);
	}
	free(f->sets);
	free(f->buf.data);
	free(f->key);
	free(f);
}
