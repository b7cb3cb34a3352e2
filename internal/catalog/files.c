/*
 * files_metadata.json's Files and TarFileSets read as a stream, one entry at a time, so that a
 * reader's memory does not grow with the number of files (the document as one jansson tree
 * took about 1.3 KB a file: 280 MiB at 200,000 files).
 *
 * jansson has no streaming mode, so a small scanner splits the text: it follows strings
 * (escapes included) and bracket depth, finds the root object's Files and TarFileSets members
 * (keys compared as catalog_json_get does), and hands each of Files' members, as the text
 * `{"name": {...}}`, to jansson, which decodes and checks it. TarFileSets' lists are followed
 * name by name (a partition can list hundreds of thousands), each name decoded alone. The
 * rest of the document is only followed to its end, never decoded: no caller needs it.
 */
#include "internal/catalog/catalog.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A root key longer than this is not one this reader looks for, in any spelling. */
#define ROOT_KEY_MAX 64
/* Brackets open at once inside a root member's value, at most (files_metadata.json has 3). */
#define DEPTH_MAX 64

typedef enum phase {
	P_BEFORE, /* before the root object */
	P_KEY,	  /* in the root object: a key, or its end */
	P_COLON,
	P_VALUE, /* a root member's value starts */
	P_SCALAR, /* in a root member's number, true, false or null */
	P_NESTED, /* in a root member's object or array (Files' own entries: in_files) */
	P_AFTER,  /* after a root member's value: a comma or the end */
	P_DONE,	  /* after the root object: white space only */
} phase;

/* Where the scanner is inside TarFileSets: {"part": ["member", ...], ...} */
typedef enum sets_state {
	T_KEY,		  /* a partition's name, or the end */
	T_COLON,	  /* the name is read (or being read): a colon follows */
	T_OPEN,		  /* its list opens */
	T_ELEM,		  /* a member's name, or the list's end */
	T_ELEM_AFTER, /* after a member's name (or in it): a comma or the list's end */
	T_NEXT,		  /* after a list: a comma or the end */
} sets_state;

typedef struct files_sink {
	sink base;
	char *what; /* the object's name, for messages */
	const char *obj; /* the root member whose entries fn gets: Files, or DatabasesByNames */
	bool *had_obj;	 /* NULL: obj must be there; else set when it is */
	catalog_file_fn fn;
	catalog_set_fn set_fn;
	void *arg;
	phase ph;
	bool first;	 /* no member yet in the root object */
	bool in_str, esc;
	int depth;	   /* brackets open inside the current root member's value */
	uint64_t arrays; /* bit i: the bracket open at depth i + 1 is '[' */
	char key[ROOT_KEY_MAX + 3];
	size_t key_len; /* ROOT_KEY_MAX + 1: too long to be Files */
	bool in_files;	/* the current root value is Files */
	bool had_files; /* a Files member was read */
	bool in_sets;	/* the current root value is TarFileSets, and set_fn wants it */
	sets_state st;
	char *part;		/* the partition whose list is being read */
	membuf ent;		/* the Files entry being read, "{" + its text; or a TarFileSets name */
	bool ent_open;	/* a Files entry has started */
	bool ent_due;	/* a comma was read: another entry must follow */
	uint64_t at;	/* bytes read, for messages */
	err_code rc;	/* the first error, returned by every later call */
} files_sink;

static err_code corrupt(files_sink *f, const char *why)
{
	f->rc = err_set(E_CORRUPT, "%s: %s (byte %llu)", f->what, why, (unsigned long long)f->at);
	return f->rc;
}

static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A byte of the entry (or TarFileSets name) being read: capped, never the whole document. */
static err_code ent_add(files_sink *f, unsigned char c)
{
	if (f->fn == NULL && !f->in_sets)
		return E_OK; /* Files followed, not read: nothing to hold */
	/*
	 * Every byte of a Files entry passes here (42 MB at 200,000 files): stored directly while
	 * it fits, no call (membuf keeps cap <= max, so its limit still holds).
	 */
	if (f->ent.len < f->ent.cap) {
		f->ent.data[f->ent.len++] = c;
		return E_OK;
	}
	if (membuf_add(&f->ent, &c, 1) != E_OK)
		return corrupt(f, f->had_obj != NULL
							  ? "a database's entry in DatabasesByNames is larger than 16 MiB"
							  : "an entry of Files or TarFileSets is larger than 16 MiB");
	return E_OK;
}

/* Whether the root key just read is name: decoded by jansson, compared without case. */
static bool key_is(files_sink *f, const char *name)
{
	if (f->key_len > ROOT_KEY_MAX)
		return false;
	json_error_t jerr;
	json_t *k = json_loadb(f->key, f->key_len, JSON_DECODE_ANY, &jerr);
	bool yes = json_is_string(k) && strcasecmp(json_string_value(k), name) == 0;
	json_decref(k);
	return yes;
}

/* One whole entry of Files read: decoded and passed on. */
static err_code entry_end(files_sink *f)
{
	TRY(ent_add(f, '}'));
	if (f->fn == NULL) { /* a reader of TarFileSets alone */
		f->ent.len = 0;
		f->ent_open = false;
		return E_OK;
	}
	json_error_t jerr;
	json_t *one = json_loadb((const char *)f->ent.data, f->ent.len, 0, &jerr);
	f->ent.len = 0;
	f->ent_open = false;
	if (one == NULL || json_object_size(one) != 1) {
		json_decref(one);
		return corrupt(f, f->had_obj == NULL ? "a malformed entry in Files"
											  : "a malformed entry in DatabasesByNames");
	}
	void *it = json_object_iter(one);
	err_code rc = f->fn(f->arg, json_object_iter_key(it), json_object_iter_value(it));
	json_decref(one);
	if (rc != E_OK)
		f->rc = rc;
	return rc;
}

static err_code open_bracket(files_sink *f, unsigned char c)
{
	if (f->depth == DEPTH_MAX)
		return corrupt(f, "nested deeper than 64 levels");
	uint64_t bit = (uint64_t)1 << f->depth++;
	f->arrays = c == '[' ? f->arrays | bit : f->arrays & ~bit;
	return E_OK;
}

/* The value ends with its outermost bracket; a bracket of the wrong kind is corrupt. */
static err_code close_bracket(files_sink *f, unsigned char c)
{
	bool array = (f->arrays >> (f->depth - 1) & 1) != 0;
	if (array != (c == ']'))
		return corrupt(f, "brackets do not match");
	if (--f->depth == 0)
		f->ph = P_AFTER;
	return E_OK;
}

/* The root member's object (Files, TarFileSets) closed: a comma or the root's end follows. */
static err_code value_end(files_sink *f)
{
	f->depth = 0;
	f->ph = P_AFTER;
	return E_OK;
}

/* Starts taking a string of TarFileSets (the opening quote c) into ent. */
static err_code sets_take(files_sink *f, unsigned char c, sets_state next)
{
	f->ent.len = 0;
	f->ent_open = true;
	f->in_str = true;
	f->ent_due = false;
	f->st = next;
	return ent_add(f, c);
}

/* A list of TarFileSets ended: the callback hears the partition once more, with no member. */
static err_code sets_list_end(files_sink *f)
{
	f->depth = 1;
	f->st = T_NEXT;
	err_code rc = f->set_fn(f->arg, f->part, NULL);
	if (rc != E_OK)
		f->rc = rc;
	return rc;
}

/* A string of TarFileSets read whole: a partition's name, or a member passed on. */
static err_code sets_string_end(files_sink *f)
{
	json_error_t jerr;
	json_t *s = json_loadb((const char *)f->ent.data, f->ent.len, JSON_DECODE_ANY, &jerr);
	f->ent.len = 0;
	f->ent_open = false;
	if (!json_is_string(s)) {
		json_decref(s);
		return corrupt(f, "a malformed name in TarFileSets");
	}
	err_code rc = E_OK;
	if (f->st == T_COLON) {
		free(f->part);
		f->part = xstrdup(json_string_value(s));
	} else {
		rc = f->set_fn(f->arg, f->part, json_string_value(s));
	}
	json_decref(s);
	if (rc != E_OK)
		f->rc = rc;
	return rc;
}

/* A byte outside strings inside TarFileSets' object (depth 1) or one of its lists (2). */
static err_code sets_byte(files_sink *f, unsigned char c)
{
	if (is_space(c))
		return E_OK;
	switch (f->st) {
	case T_KEY:
		if (c == '}' && !f->ent_due)
			return value_end(f);
		if (c != '"')
			return corrupt(f, "a TarFileSets entry does not start with a name");
		return sets_take(f, c, T_COLON);
	case T_COLON:
		if (c != ':')
			return corrupt(f, "expected a colon in TarFileSets");
		f->st = T_OPEN;
		return E_OK;
	case T_OPEN:
		if (c != '[')
			return corrupt(f, "a TarFileSets entry is not a list");
		f->depth = 2;
		f->st = T_ELEM;
		return E_OK;
	case T_ELEM:
		if (c == ']' && !f->ent_due)
			return sets_list_end(f);
		if (c != '"')
			return corrupt(f, "a TarFileSets list holds something other than names");
		return sets_take(f, c, T_ELEM_AFTER);
	default: { /* T_ELEM_AFTER, T_NEXT: after a name in a list, after a list */
		bool in_list = f->st == T_ELEM_AFTER;
		if (c == (in_list ? ']' : '}'))
			return in_list ? sets_list_end(f) : value_end(f);
		if (c != ',')
			return corrupt(f, in_list ? "expected a comma in a TarFileSets list"
									  : "expected a comma in TarFileSets");
		f->st = in_list ? T_ELEM : T_KEY;
		f->ent_due = true;
		return E_OK;
	}
	}
}

/* A byte outside any string, inside a root member's object or array. */
static err_code nested(files_sink *f, unsigned char c)
{
	if (f->in_sets)
		return sets_byte(f, c);
	bool files_level = f->in_files && f->depth == 1;
	if (files_level && !f->ent_open) {
		if (is_space(c))
			return E_OK;
		if (c == '}' && !f->ent_due)
			return value_end(f);
		if (c != '"')
			return corrupt(f, "a Files entry does not start with a name");
		f->ent_open = true;
		f->ent_due = false;
		f->in_str = true;
		TRY(ent_add(f, '{'));
		return ent_add(f, c);
	}
	if (files_level && (c == ',' || c == '}')) {
		TRY(entry_end(f));
		f->ent_due = c == ',';
		return c == '}' ? value_end(f) : E_OK;
	}
	if (f->ent_open)
		TRY(ent_add(f, c));
	if (c == '"')
		f->in_str = true;
	else if (c == '{' || c == '[')
		return open_bracket(f, c);
	else if (c == '}' || c == ']')
		return close_bracket(f, c);
	return E_OK;
}

/* A byte of a string; the opening quote has been taken. */
static err_code string_byte(files_sink *f, unsigned char c)
{
	if (f->ent_open)
		TRY(ent_add(f, c));
	if (f->ph == P_KEY && f->key_len <= ROOT_KEY_MAX)
		f->key[f->key_len++] = (char)c;
	if (f->esc)
		f->esc = false;
	else if (c == '\\')
		f->esc = true;
	else if (c == '"') {
		f->in_str = false;
		if (f->ph == P_KEY)
			f->ph = P_COLON;
		else if (f->ph == P_VALUE)
			f->ph = P_AFTER; /* a string value of the root */
		else if (f->in_sets)
			return sets_string_end(f);
	}
	return E_OK;
}

static err_code scan(files_sink *f, unsigned char c)
{
	if (f->in_str)
		return string_byte(f, c);
	if (f->ph == P_NESTED)
		return nested(f, c);
	if (f->ph == P_SCALAR) {
		if (c != ',' && c != '}' && !is_space(c))
			return E_OK;
		f->ph = P_AFTER; /* and the byte ends the value: read it as such below */
	}
	if (is_space(c))
		return E_OK;
	switch (f->ph) {
	case P_BEFORE:
		if (c != '{')
			return corrupt(f, "expected a JSON object");
		f->ph = P_KEY;
		f->first = true;
		return E_OK;
	case P_KEY:
		if (c == '}' && f->first) {
			f->ph = P_DONE;
			return E_OK;
		}
		if (c != '"')
			return corrupt(f, "expected a member name");
		f->key[0] = '"';
		f->key_len = 1;
		f->in_str = true;
		f->first = false;
		return E_OK;
	case P_COLON:
		if (c != ':')
			return corrupt(f, "expected a colon");
		f->in_files = key_is(f, f->obj);
		f->in_sets = f->set_fn != NULL && key_is(f, "TarFileSets");
		f->ph = P_VALUE;
		return E_OK;
	case P_VALUE:
		if (f->in_files && c != '{' && f->had_obj != NULL) {
			f->in_files = false; /* WAL-G writes null for none */
		} else if (f->in_files && c != '{')
			return corrupt(f, "Files is not an object");
		f->had_files |= f->in_files;
		/* WAL-G reads a TarFileSets of null as none: followed as any other value */
		f->in_sets = f->in_sets && c == '{';
		if (f->in_sets) {
			f->depth = 1;
			f->st = T_KEY;
			f->ent_due = false;
			f->ph = P_NESTED;
			return E_OK;
		}
		if (c == '{' || c == '[') {
			f->depth = 0;
			f->ph = P_NESTED;
			return open_bracket(f, c);
		} else if (c == '"')
			f->in_str = true;
		else
			f->ph = P_SCALAR;
		return E_OK;
	case P_AFTER:
		f->in_files = f->in_sets = false;
		if (c == ',')
			f->ph = P_KEY;
		else if (c == '}')
			f->ph = P_DONE;
		else
			return corrupt(f, "expected a comma or the end of the object");
		return E_OK;
	default:
		return corrupt(f, "text after the end of the object");
	}
}

static err_code files_write(sink *s, const void *buf, size_t len)
{
	files_sink *f = (files_sink *)s;
	const unsigned char *p = buf;
	if (f->rc != E_OK)
		return f->rc; /* the message of the first error stands */
	for (size_t i = 0; i < len; i++, f->at++)
		TRY(scan(f, p[i]));
	return E_OK;
}

static err_code files_finish(sink *s)
{
	files_sink *f = (files_sink *)s;
	if (f->rc != E_OK)
		return f->rc;
	if (f->ph != P_DONE)
		return corrupt(f, "truncated");
	if (f->had_obj != NULL)
		*f->had_obj = f->had_files;
	else if (!f->had_files)
		return corrupt(f, "no Files");
	return E_OK;
}

static void files_free(sink *s)
{
	files_sink *f = (files_sink *)s;
	free(f->ent.data);
	free(f->part);
	free(f->what);
	free(f);
}

static const sink_ops files_ops = { files_write, files_finish, files_free };

sink *catalog_files_sink_new(const char *what, catalog_file_fn fn, catalog_set_fn set_fn,
							 void *arg)
{
	files_sink *f = xcalloc(1, sizeof(*f));
	f->base.ops = &files_ops;
	f->what = xstrdup(what);
	f->obj = "Files";
	f->ent.max = CATALOG_JSON_MAX;
	f->fn = fn;
	f->set_fn = set_fn;
	f->arg = arg;
	return &f->base;
}

err_code catalog_dbnames_each(repo *r, const char *backup, catalog_file_fn fn, void *arg,
							  bool *found)
{
	char *key = xasprintf("%s%s/files_metadata.json", repo_backups(r), backup);
	files_sink *f = (files_sink *)catalog_files_sink_new(key, fn, NULL, arg);
	f->obj = "DatabasesByNames";
	f->had_obj = found;
	*found = false;
	err_code rc = repo_get_plain(r, key, &f->base);
	if (rc == E_NOTFOUND)
		rc = err_set(E_NOTFOUND, "%s does not exist in %s", key, repo_describe(r));
	if (rc == E_OK)
		rc = sink_finish(&f->base);
	sink_free(&f->base);
	free(key);
	return rc;
}
