/*
 * files_metadata.json's Files read as a stream, one entry at a time, so that a reader's
 * memory does not grow with the number of files (the document as one jansson tree took about
 * 1.3 KB a file: 280 MiB at 200,000 files).
 *
 * jansson has no streaming mode, so a small scanner splits the text: it follows strings
 * (escapes included) and bracket depth, finds the root object's Files member (keys compared
 * as catalog_json_get does), and hands each of Files' members, as the text `{"name": {...}}`,
 * to jansson, which decodes and checks it. The rest of the document is only followed to its
 * end, never decoded: no caller of this reader needs it.
 */
#include "internal/catalog/catalog.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A root key longer than this is not "Files" in any spelling a JSON encoder would write. */
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

typedef struct files_sink {
	sink base;
	char *what; /* the object's name, for messages */
	catalog_file_fn fn;
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
	membuf ent;		/* the Files entry being read, "{" + its text */
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

/* A byte of the Files entry being read; the entry is capped, never the whole document. */
static err_code ent_add(files_sink *f, unsigned char c)
{
	if (membuf_add(&f->ent, &c, 1) != E_OK)
		return corrupt(f, "an entry in Files is larger than 16 MiB");
	return E_OK;
}

/* Whether the root key just read names Files: decoded by jansson, compared without case. */
static bool key_is_files(files_sink *f)
{
	if (f->key_len > ROOT_KEY_MAX)
		return false;
	json_error_t jerr;
	json_t *k = json_loadb(f->key, f->key_len, JSON_DECODE_ANY, &jerr);
	bool yes = json_is_string(k) && strcasecmp(json_string_value(k), "Files") == 0;
	json_decref(k);
	return yes;
}

/* One whole entry of Files read: decoded and passed on. */
static err_code entry_end(files_sink *f)
{
	TRY(ent_add(f, '}'));
	json_error_t jerr;
	json_t *one = json_loadb((const char *)f->ent.data, f->ent.len, 0, &jerr);
	f->ent.len = 0;
	f->ent_open = false;
	if (one == NULL || json_object_size(one) != 1) {
		json_decref(one);
		return corrupt(f, "a malformed entry in Files");
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

/* A byte outside any string, inside a root member's object or array. */
static err_code nested(files_sink *f, unsigned char c)
{
	bool files_level = f->in_files && f->depth == 1;
	if (files_level && !f->ent_open) {
		if (is_space(c))
			return E_OK;
		if (c == '}' && !f->ent_due) {
			f->depth = 0;
			f->ph = P_AFTER;
			return E_OK;
		}
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
		if (c == '}') {
			f->depth = 0;
			f->ph = P_AFTER;
		}
		return E_OK;
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
		f->in_files = key_is_files(f);
		f->ph = P_VALUE;
		return E_OK;
	case P_VALUE:
		if (f->in_files && c != '{')
			return corrupt(f, "Files is not an object");
		f->had_files |= f->in_files;
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
		f->in_files = false;
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
	if (!f->had_files)
		return corrupt(f, "no Files");
	return E_OK;
}

static void files_free(sink *s)
{
	files_sink *f = (files_sink *)s;
	free(f->ent.data);
	free(f->what);
	free(f);
}

static const sink_ops files_ops = { files_write, files_finish, files_free };

sink *catalog_files_sink_new(const char *what, catalog_file_fn fn, void *arg)
{
	files_sink *f = xcalloc(1, sizeof(*f));
	f->base.ops = &files_ops;
	f->what = xstrdup(what);
	f->ent.max = CATALOG_JSON_MAX;
	f->fn = fn;
	f->arg = arg;
	return &f->base;
}
