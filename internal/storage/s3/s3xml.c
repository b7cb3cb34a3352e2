/* S3 and STS XML answers (listings, upload ids, delete results, credentials) over xml.c. */
#include "internal/storage/s3/s3.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
		if (!http_parse_iso8601(text, &c->mtime, &c->nsec))
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
	err_code rc = xml_parse(doc, len, list_cb, &c);
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
			char *key = c.url_encoded ? http_uri_decode(c.keys[i]) : xstrdup(c.keys[i]);
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
	err_code rc = xml_parse(doc, len, upload_id_cb, upload_id);
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

char *s3_xml_delete_request(const char *root, const char *const *keys, size_t n, size_t *len)
{
	size_t cap = 64;
	char *body = xmalloc(cap);
	size_t at = (size_t)snprintf(body, cap, "<Delete><Quiet>true</Quiet>");
	for (size_t i = 0; i < n; i++) {
		char *k = xasprintf("%s%s", root, keys[i]);
		char *e = http_xml_escape(k);
		size_t need = strlen(e) + 40;
		if (at + need >= cap) {
			cap = (at + need) * 2;
			body = xrealloc(body, cap);
		}
		at += (size_t)snprintf(body + at, cap - at, "<Object><Key>%s</Key></Object>", e);
		free(e);
		free(k);
	}
	if (at + 16 >= cap)
		body = xrealloc(body, cap = at + 16);
	at += (size_t)snprintf(body + at, cap - at, "</Delete>");
	*len = at;
	return body;
}

err_code s3_xml_delete_errors(const char *doc, size_t len, size_t *nerrors, char **first)
{
	del_ctx c = { 0 };
	err_code rc = xml_parse(doc, len, del_cb, &c);
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
		if (!http_parse_iso8601(text, &c->expires, &ns))
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
	err_code rc = xml_parse(doc, len, sts_cb, out);
	if (rc == E_OK && (out->access_key == NULL || out->secret_key == NULL ||
					   out->access_key[0] == '\0' || out->secret_key[0] == '\0'))
		rc = err_set(E_CORRUPT, "STS answer has no AccessKeyId or SecretAccessKey");
	if (rc == E_OK && out->expires < 0)
		rc = err_set(E_CORRUPT, "STS answer has a malformed Expiration");
	if (rc != E_OK)
		s3_creds_free(out);
	return rc;
}
