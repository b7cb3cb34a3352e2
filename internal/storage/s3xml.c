/*
 * S3 and STS XML answers, parsed with expat into (path, text) events. The input is untrusted:
 * documents are capped, DOCTYPEs refused (no entity tricks), nesting and text bounded.
 */
#include "internal/storage/s3.h"

#include <expat.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XML_MAX_DEPTH 16
#define XML_PATH_MAX 512

typedef struct xml_state {
	XML_Parser p;
	s3_xml_cb cb;
	void *ctx;
	char path[XML_PATH_MAX];
	size_t plen[XML_MAX_DEPTH + 1];
	int depth;
	char *text;
	size_t tlen;
	const char *fail;
} xml_state;

static void xml_stop(xml_state *st, const char *why)
{
	if (st->fail == NULL)
		st->fail = why;
	XML_StopParser(st->p, XML_FALSE);
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	xml_state *st = ud;
	(void)attrs;
	if (st->fail != NULL)
		return;
	if (st->depth >= XML_MAX_DEPTH)
		return xml_stop(st, "nested too deeply");
	/* Namespaced names (with a separator) are not expected; keep the local part. */
	const char *local = strrchr(name, ':');
	local = local ? local + 1 : name;
	size_t cur = st->plen[st->depth], n = strlen(local);
	if (cur + 1 + n + 1 > XML_PATH_MAX)
		return xml_stop(st, "element path too long");
	st->path[cur] = '/';
	memcpy(st->path + cur + 1, local, n + 1);
	st->depth++;
	st->plen[st->depth] = cur + 1 + n;
	st->tlen = 0;
	st->text[0] = '\0';
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	xml_state *st = ud;
	(void)name;
	if (st->fail != NULL || st->depth == 0)
		return;
	st->cb(st->ctx, st->path, st->text);
	st->depth--;
	st->path[st->plen[st->depth]] = '\0';
	st->tlen = 0;
	st->text[0] = '\0';
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	xml_state *st = ud;
	if (st->fail != NULL)
		return;
	if (st->tlen + (size_t)len >= S3_XML_TEXT_MAX)
		return xml_stop(st, "element text too long");
	memcpy(st->text + st->tlen, s, (size_t)len);
	st->tlen += (size_t)len;
	st->text[st->tlen] = '\0';
}

static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
							   const XML_Char *pubid, int has_internal)
{
	(void)name, (void)sysid, (void)pubid, (void)has_internal;
	xml_stop(ud, "DOCTYPE not allowed");
}

static void XMLCALL on_entity(void *ud, const XML_Char *name, int is_param, const XML_Char *value,
							  int vlen, const XML_Char *base, const XML_Char *sysid,
							  const XML_Char *pubid, const XML_Char *notation)
{
	(void)name, (void)is_param, (void)value, (void)vlen, (void)base, (void)sysid, (void)pubid,
		(void)notation;
	xml_stop(ud, "entity declarations not allowed");
}

err_code s3_xml_parse(const char *doc, size_t len, s3_xml_cb cb, void *ctx)
{
	if (len > S3_XML_MAX)
		return err_set(E_CORRUPT, "XML answer of %zu bytes exceeds the %u-byte limit", len,
					   S3_XML_MAX);
	xml_state st = { 0 };
	st.p = XML_ParserCreate("UTF-8");
	if (st.p == NULL)
		return err_set(E_FAIL, "cannot create an XML parser");
	st.cb = cb;
	st.ctx = ctx;
	st.text = xmalloc(S3_XML_TEXT_MAX);
	st.text[0] = '\0';
	XML_SetUserData(st.p, &st);
	XML_SetElementHandler(st.p, on_start, on_end);
	XML_SetCharacterDataHandler(st.p, on_text);
	XML_SetStartDoctypeDeclHandler(st.p, on_doctype);
	XML_SetEntityDeclHandler(st.p, on_entity);
	err_code rc = E_OK;
	if (XML_Parse(st.p, doc, (int)len, XML_TRUE) != XML_STATUS_OK || st.fail != NULL) {
		rc = err_set(E_CORRUPT, "malformed XML answer: %s (line %lu)",
					 st.fail ? st.fail : XML_ErrorString(XML_GetErrorCode(st.p)),
					 (unsigned long)XML_GetCurrentLineNumber(st.p));
	}
	XML_ParserFree(st.p);
	free(st.text);
	return rc;
}

/* Error */

typedef struct err_ctx {
	char *code, *msg;
	size_t codesz, msgsz;
	bool is_error;
} err_ctx;

static void copy_text(char *dst, size_t sz, const char *src)
{
	if (sz == 0)
		return;
	size_t n = strlen(src);
	if (n >= sz)
		n = sz - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	/* Keep messages on one printable line. */
	for (char *p = dst; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
}

static void error_cb(void *vctx, const char *path, const char *text)
{
	err_ctx *c = vctx;
	if (strcmp(path, "/Error") == 0)
		c->is_error = true;
	else if (strcmp(path, "/Error/Code") == 0)
		copy_text(c->code, c->codesz, text);
	else if (strcmp(path, "/Error/Message") == 0)
		copy_text(c->msg, c->msgsz, text);
	/* STS: ErrorResponse/Error/Code */
	else if (strcmp(path, "/ErrorResponse/Error/Code") == 0) {
		c->is_error = true;
		copy_text(c->code, c->codesz, text);
	} else if (strcmp(path, "/ErrorResponse/Error/Message") == 0)
		copy_text(c->msg, c->msgsz, text);
}

bool s3_xml_error(const char *doc, size_t len, char *code, size_t codesz, char *msg,
				  size_t msgsz)
{
	err_ctx c = { code, msg, codesz, msgsz, false };
	if (codesz)
		code[0] = '\0';
	if (msgsz)
		msg[0] = '\0';
	if (len == 0)
		return false;
	char saved[ERR_MSG_MAX];
	err_code last = err_last();
	snprintf(saved, sizeof(saved), "%s", err_msg());
	bool ok = s3_xml_parse(doc, len, error_cb, &c) == E_OK;
	/* A malformed error body is not itself the error to report. */
	if (last != E_OK)
		err_set(last, "%s", saved);
	else
		err_clear();
	return ok && c.is_error && code[0] != '\0';
}

/* ListObjectsV2 */

typedef struct list_ctx {
	s3_list_page *page;
	char *key;
	uint64_t size;
	time_t mtime;
	long nsec;
	bool url_encoded;
	bool bad;
	bool is_listing; /* the root element was ListBucketResult */
	char **keys; /* collected raw, decoded at the end once EncodingType is known */
	uint64_t *sizes;
	time_t *mtimes;
	long *nsecs;
	size_t n, cap;
} list_ctx;

static void list_cb(void *vctx, const char *path, const char *text)
{
	list_ctx *c = vctx;
	if (strcmp(path, "/ListBucketResult") == 0)
		c->is_listing = true;
	if (strcmp(path, "/ListBucketResult/Contents/Key") == 0) {
		free(c->key);
		c->key = xstrdup(text);
	} else if (strcmp(path, "/ListBucketResult/Contents/Size") == 0) {
		char *end;
		errno = 0;
		c->size = strtoull(text, &end, 10);
		/* strtoull takes "-5" as a huge number: insist on digits only. */
		if (!(text[0] >= '0' && text[0] <= '9') || end == text || *end != '\0' || errno == ERANGE)
			c->bad = true;
	} else if (strcmp(path, "/ListBucketResult/Contents/LastModified") == 0) {
		if (!s3_parse_iso8601(text, &c->mtime, &c->nsec))
			c->bad = true;
	} else if (strcmp(path, "/ListBucketResult/Contents") == 0) {
		if (c->key == NULL) {
			c->bad = true;
			return;
		}
		if (c->n == c->cap) {
			c->cap = c->cap ? c->cap * 2 : 64;
			c->keys = xrealloc(c->keys, c->cap * sizeof(*c->keys));
			c->sizes = xrealloc(c->sizes, c->cap * sizeof(*c->sizes));
			c->mtimes = xrealloc(c->mtimes, c->cap * sizeof(*c->mtimes));
			c->nsecs = xrealloc(c->nsecs, c->cap * sizeof(*c->nsecs));
		}
		c->keys[c->n] = c->key;
		c->sizes[c->n] = c->size;
		c->mtimes[c->n] = c->mtime;
		c->nsecs[c->n] = c->nsec;
		c->n++;
		c->key = NULL;
		c->size = 0;
		c->mtime = 0;
		c->nsec = 0;
	} else if (strcmp(path, "/ListBucketResult/IsTruncated") == 0) {
		c->page->truncated = strcmp(text, "true") == 0;
	} else if (strcmp(path, "/ListBucketResult/NextContinuationToken") == 0) {
		free(c->page->next_token);
		c->page->next_token = xstrdup(text);
	} else if (strcmp(path, "/ListBucketResult/EncodingType") == 0) {
		c->url_encoded = strcmp(text, "url") == 0;
	}
}

err_code s3_xml_list(const char *doc, size_t len, s3_list_page *out)
{
	memset(out, 0, sizeof(*out));
	list_ctx c = { 0 };
	c.page = out;
	err_code rc = s3_xml_parse(doc, len, list_cb, &c);
	if (rc == E_OK && !c.is_listing)
		rc = err_set(E_CORRUPT, "the answer to ListObjectsV2 is not a ListBucketResult");
	if (rc == E_OK && c.bad)
		rc = err_set(E_CORRUPT, "malformed ListObjectsV2 answer: an entry lacks a key or has a "
								"bad size or date");
	if (rc == E_OK && out->truncated && (out->next_token == NULL || !out->next_token[0]))
		rc = err_set(E_CORRUPT, "ListObjectsV2 answer is truncated but has no continuation "
								"token");
	for (size_t i = 0; i < c.n; i++) {
		if (rc == E_OK) {
			char *key = c.url_encoded ? s3_uri_decode(c.keys[i]) : xstrdup(c.keys[i]);
			if (key == NULL)
				rc = err_set(E_CORRUPT, "ListObjectsV2 answer has a badly encoded key");
			else
				obj_list_add(&out->items, key, c.sizes[i], c.mtimes[i], c.nsecs[i]);
			free(key);
		}
		free(c.keys[i]);
	}
	free(c.key);
	free(c.keys);
	free(c.sizes);
	free(c.mtimes);
	free(c.nsecs);
	if (rc != E_OK)
		s3_list_page_free(out);
	return rc;
}

void s3_list_page_free(s3_list_page *p)
{
	obj_list_free(&p->items);
	free(p->next_token);
	memset(p, 0, sizeof(*p));
}

/* InitiateMultipartUploadResult */

static void upload_id_cb(void *vctx, const char *path, const char *text)
{
	char **id = vctx;
	if (strcmp(path, "/InitiateMultipartUploadResult/UploadId") == 0) {
		free(*id);
		*id = xstrdup(text);
	}
}

err_code s3_xml_upload_id(const char *doc, size_t len, char **upload_id)
{
	*upload_id = NULL;
	err_code rc = s3_xml_parse(doc, len, upload_id_cb, upload_id);
	if (rc == E_OK && (*upload_id == NULL || (*upload_id)[0] == '\0'))
		rc = err_set(E_CORRUPT, "CreateMultipartUpload answer has no UploadId");
	if (rc != E_OK) {
		free(*upload_id);
		*upload_id = NULL;
	}
	return rc;
}

/* DeleteResult */

typedef struct del_ctx {
	size_t n;
	char *key, *code;
	char *first;
} del_ctx;

static void del_cb(void *vctx, const char *path, const char *text)
{
	del_ctx *c = vctx;
	if (strcmp(path, "/DeleteResult/Error/Key") == 0) {
		free(c->key);
		c->key = xstrdup(text);
	} else if (strcmp(path, "/DeleteResult/Error/Code") == 0) {
		free(c->code);
		c->code = xstrdup(text);
	} else if (strcmp(path, "/DeleteResult/Error") == 0) {
		if (c->n++ == 0)
			c->first = xasprintf("%s: %s", c->key ? c->key : "?", c->code ? c->code : "?");
		free(c->key);
		free(c->code);
		c->key = c->code = NULL;
	}
}

err_code s3_xml_delete_errors(const char *doc, size_t len, size_t *nerrors, char **first)
{
	del_ctx c = { 0 };
	err_code rc = s3_xml_parse(doc, len, del_cb, &c);
	free(c.key);
	free(c.code);
	*nerrors = c.n;
	*first = c.first;
	if (rc != E_OK) {
		free(c.first);
		*first = NULL;
	}
	return rc;
}

/* STS AssumeRoleWithWebIdentity */

static void sts_cb(void *vctx, const char *path, const char *text)
{
	s3_creds *c = vctx;
	static const char pre[] = "/AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult"
							  "/Credentials/";
	if (strncmp(path, pre, sizeof(pre) - 1) != 0)
		return;
	const char *f = path + sizeof(pre) - 1;
	char **dst = NULL;
	if (strcmp(f, "AccessKeyId") == 0)
		dst = &c->access_key;
	else if (strcmp(f, "SecretAccessKey") == 0)
		dst = &c->secret_key;
	else if (strcmp(f, "SessionToken") == 0)
		dst = &c->token;
	else if (strcmp(f, "Expiration") == 0) {
		long ns;
		if (!s3_parse_iso8601(text, &c->expires, &ns))
			c->expires = -1;
	}
	if (dst != NULL) {
		free(*dst);
		*dst = xstrdup(text);
	}
}

err_code s3_xml_sts_creds(const char *doc, size_t len, s3_creds *out)
{
	memset(out, 0, sizeof(*out));
	err_code rc = s3_xml_parse(doc, len, sts_cb, out);
	if (rc == E_OK && (out->access_key == NULL || out->secret_key == NULL ||
					   out->access_key[0] == '\0' || out->secret_key[0] == '\0'))
		rc = err_set(E_CORRUPT, "STS answer has no AccessKeyId or SecretAccessKey");
	if (rc == E_OK && out->expires < 0)
		rc = err_set(E_CORRUPT, "STS answer has a malformed Expiration");
	if (rc != E_OK)
		s3_creds_free(out);
	return rc;
}

/* Dates */

static bool digits(const char *s, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return true;
}

bool s3_parse_iso8601(const char *s, time_t *t, long *nsec)
{
	struct tm tm = { 0 };
	int y, mo, d, h, mi, sec;
	if (strlen(s) < 19 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
		s[7] != '-' || !digits(s + 8, 2, &d) || s[10] != 'T' || !digits(s + 11, 2, &h) ||
		s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' || !digits(s + 17, 2, &sec))
		return false;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return false;
	const char *p = s + 19;
	long ns = 0;
	if (*p == '.') {
		p++;
		int nd = 0;
		while (*p >= '0' && *p <= '9') {
			if (nd < 9) {
				ns = ns * 10 + (*p - '0');
				nd++;
			}
			p++;
		}
		if (nd == 0)
			return false;
		for (; nd < 9; nd++)
			ns *= 10;
	}
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
		return false;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	*t = timegm(&tm);
	*nsec = ns;
	return true;
}

bool s3_parse_http_date(const char *s, time_t *t)
{
	struct tm tm = { 0 };
	const char *end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL)
		return false;
	*t = timegm(&tm);
	return true;
}
