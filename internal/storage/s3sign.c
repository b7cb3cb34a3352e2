/* AWS Signature Version 4 for S3 (and STS) requests, with OpenSSL's HMAC-SHA256 and SHA-256. */
#include "internal/storage/s3.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void s3_kvs_add(s3_kvs *l, const char *name, const char *value)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 8;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n].name = xstrdup(name);
	l->v[l->n].value = xstrdup(value);
	l->n++;
}

const char *s3_kvs_get(const s3_kvs *l, const char *name)
{
	for (size_t i = 0; l != NULL && i < l->n; i++)
		if (strcasecmp(l->v[i].name, name) == 0)
			return l->v[i].value;
	return NULL;
}

void s3_kvs_free(s3_kvs *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].value);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void s3_creds_free(s3_creds *c)
{
	if (c->secret_key != NULL)
		memset(c->secret_key, 0, strlen(c->secret_key));
	free(c->access_key);
	free(c->secret_key);
	free(c->token);
	memset(c, 0, sizeof(*c));
}

void s3_creds_copy(s3_creds *dst, const s3_creds *src)
{
	dst->access_key = src->access_key ? xstrdup(src->access_key) : NULL;
	dst->secret_key = src->secret_key ? xstrdup(src->secret_key) : NULL;
	dst->token = src->token ? xstrdup(src->token) : NULL;
	dst->expires = src->expires;
	dst->source = src->source;
}

static const char hexdig[] = "0123456789ABCDEF";
static const char hexlow[] = "0123456789abcdef";

char *s3_uri_encode(const char *s, bool keep_slash)
{
	size_t n = strlen(s);
	char *out = xmalloc(n * 3 + 1), *o = out;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hexdig[c >> 4];
			*o++ = hexdig[c & 15];
		}
	}
	*o = '\0';
	return out;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *s3_uri_decode(const char *s)
{
	char *out = xmalloc(strlen(s) + 1), *o = out;
	for (const char *p = s; *p; p++) {
		if (*p != '%') {
			*o++ = *p;
			continue;
		}
		int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
		if (hi < 0 || lo < 0) {
			free(out);
			return NULL;
		}
		*o++ = (char)(hi << 4 | lo);
		p += 2;
	}
	*o = '\0';
	return out;
}

static void to_hex(const unsigned char *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexlow[d[i] >> 4];
		out[2 * i + 1] = hexlow[d[i] & 15];
	}
	out[2 * n] = '\0';
}

void s3_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	SHA256(data, len, d);
	to_hex(d, sizeof(d), out);
}

char *s3_base64(const void *data, size_t len)
{
	char *out = xmalloc(4 * ((len + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

void s3_md5_base64(const void *data, size_t len, char out[25])
{
	unsigned char d[16];
	unsigned int dl = 0;
	EVP_Digest(data, len, d, &dl, EVP_md5(), NULL);
	EVP_EncodeBlock((unsigned char *)out, d, 16);
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int outl = 32;
	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &outl);
}

/* A growable string for building canonical requests. */
typedef struct sbuf {
	char *s;
	size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

typedef struct enc_pair {
	char *k, *v;
} enc_pair;

static int cmp_pair(const void *a, const void *b)
{
	const enc_pair *x = a, *y = b;
	int c = strcmp(x->k, y->k);
	return c ? c : strcmp(x->v, y->v);
}

char *s3_canonical_query(const s3_kvs *query)
{
	sbuf b = { 0 };
	sb_str(&b, "");
	if (query == NULL || query->n == 0)
		return b.s;
	enc_pair *p = xcalloc(query->n, sizeof(*p));
	for (size_t i = 0; i < query->n; i++) {
		p[i].k = s3_uri_encode(query->v[i].name, false);
		p[i].v = s3_uri_encode(query->v[i].value, false);
	}
	qsort(p, query->n, sizeof(*p), cmp_pair);
	for (size_t i = 0; i < query->n; i++) {
		if (i > 0)
			sb_str(&b, "&");
		sb_str(&b, p[i].k);
		sb_str(&b, "=");
		sb_str(&b, p[i].v);
		free(p[i].k);
		free(p[i].v);
	}
	free(p);
	return b.s;
}

typedef struct canon_hdr {
	char *name;
	char *value;
} canon_hdr;

static int cmp_hdr(const void *a, const void *b)
{
	return strcmp(((const canon_hdr *)a)->name, ((const canon_hdr *)b)->name);
}

/* Lower-case name; value trimmed with inner runs of blanks collapsed to one space. */
static canon_hdr canon(const s3_kv *kv)
{
	canon_hdr h;
	h.name = xstrdup(kv->name);
	for (char *p = h.name; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	h.value = xmalloc(strlen(kv->value) + 1);
	char *o = h.value;
	bool blank = false;
	const char *p = kv->value;
	while (*p == ' ' || *p == '\t')
		p++;
	for (; *p; p++) {
		if (*p == ' ' || *p == '\t') {
			blank = true;
			continue;
		}
		if (blank && o != h.value)
			*o++ = ' ';
		blank = false;
		*o++ = *p;
	}
	*o = '\0';
	return h;
}

void s3_sign(const s3_creds *creds, const char *region, const char *service, time_t now,
			 const char *method, const char *canonical_uri, const s3_kvs *query, s3_kvs *headers,
			 const char *payload_hash, char **canonical_out)
{
	struct tm tm;
	char amzdate[17], date[9];
	gmtime_r(&now, &tm);
	strftime(amzdate, sizeof(amzdate), "%Y%m%dT%H%M%SZ", &tm);
	strftime(date, sizeof(date), "%Y%m%d", &tm);

	s3_kvs_add(headers, "x-amz-date", amzdate);
	s3_kvs_add(headers, "x-amz-content-sha256", payload_hash);
	if (creds->token != NULL && creds->token[0] != '\0')
		s3_kvs_add(headers, "x-amz-security-token", creds->token);

	canon_hdr *h = xcalloc(headers->n, sizeof(*h));
	for (size_t i = 0; i < headers->n; i++)
		h[i] = canon(&headers->v[i]);
	qsort(h, headers->n, sizeof(*h), cmp_hdr);

	sbuf signed_names = { 0 };
	sb_str(&signed_names, "");
	sbuf cr = { 0 };
	sb_str(&cr, method);
	sb_str(&cr, "\n");
	sb_str(&cr, canonical_uri);
	sb_str(&cr, "\n");
	char *q = s3_canonical_query(query);
	sb_str(&cr, q);
	free(q);
	sb_str(&cr, "\n");
	for (size_t i = 0; i < headers->n; i++) {
		sb_str(&cr, h[i].name);
		sb_str(&cr, ":");
		sb_str(&cr, h[i].value);
		sb_str(&cr, "\n");
		if (i > 0)
			sb_str(&signed_names, ";");
		sb_str(&signed_names, h[i].name);
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
	sb_str(&cr, "\n");
	sb_str(&cr, signed_names.s);
	sb_str(&cr, "\n");
	sb_str(&cr, payload_hash);

	char cr_hash[65];
	s3_sha256_hex(cr.s, cr.len, cr_hash);
	char *scope = xasprintf("%s/%s/%s/aws4_request", date, region, service);
	char *sts = xasprintf("AWS4-HMAC-SHA256\n%s\n%s\n%s", amzdate, scope, cr_hash);

	unsigned char k[32];
	char *ksecret = xasprintf("AWS4%s", creds->secret_key);
	hmac(ksecret, strlen(ksecret), date, k);
	memset(ksecret, 0, strlen(ksecret));
	free(ksecret);
	hmac(k, 32, region, k);
	hmac(k, 32, service, k);
	hmac(k, 32, "aws4_request", k);
	unsigned char sig[32];
	hmac(k, 32, sts, sig);
	memset(k, 0, sizeof(k));
	char sighex[65];
	to_hex(sig, 32, sighex);

	char *auth = xasprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
						   creds->access_key, scope, signed_names.s, sighex);
	s3_kvs_add(headers, "authorization", auth);
	free(auth);
	free(sts);
	free(scope);
	free(signed_names.s);
	if (canonical_out != NULL)
		*canonical_out = cr.s;
	else
		free(cr.s);
}

bool s3_header_is_secret(const char *name)
{
	static const char *const secret[] = {
		"authorization",
		"x-amz-security-token",
		"x-amz-server-side-encryption-customer-key",
		"x-amz-server-side-encryption-customer-key-md5",
		"x-aws-ec2-metadata-token",
		"cookie",
		NULL,
	};
	for (size_t i = 0; secret[i] != NULL; i++)
		if (strcasecmp(name, secret[i]) == 0)
			return true;
	return false;
}
