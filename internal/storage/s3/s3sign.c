/* AWS Signature Version 4 for S3 (and STS) requests, with OpenSSL's HMAC-SHA256 and SHA-256. */
#include "internal/storage/s3/s3.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

char *s3_canonical_query(const http_kvs *query)
{
	sbuf b = { 0 };
	sb_str(&b, "");
	if (query == NULL || query->n == 0)
		return b.s;
	enc_pair *p = xcalloc(query->n, sizeof(*p));
	for (size_t i = 0; i < query->n; i++) {
		p[i].k = http_uri_encode(query->v[i].name, false);
		p[i].v = http_uri_encode(query->v[i].value, false);
	}
	xqsort(p, query->n, sizeof(*p), cmp_pair);
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
static canon_hdr canon(const http_kv *kv)
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
			 const char *method, const char *canonical_uri, const http_kvs *query, http_kvs *headers,
			 const char *payload_hash, char **canonical_out)
{
	struct tm tm;
	char amzdate[17], date[9];
	gmtime_r(&now, &tm);
	strftime(amzdate, sizeof(amzdate), "%Y%m%dT%H%M%SZ", &tm);
	strftime(date, sizeof(date), "%Y%m%d", &tm);

	http_kvs_add(headers, "x-amz-date", amzdate);
	http_kvs_add(headers, "x-amz-content-sha256", payload_hash);
	if (creds->token != NULL && creds->token[0] != '\0')
		http_kvs_add(headers, "x-amz-security-token", creds->token);

	canon_hdr *h = xcalloc(headers->n, sizeof(*h));
	for (size_t i = 0; i < headers->n; i++)
		h[i] = canon(&headers->v[i]);
	xqsort(h, headers->n, sizeof(*h), cmp_hdr);

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
	http_sha256_hex(cr.s, cr.len, cr_hash);
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
	http_hex(sig, 32, sighex);

	char *auth = xasprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
						   creds->access_key, scope, signed_names.s, sighex);
	http_kvs_add(headers, "authorization", auth);
	free(auth);
	free(sts);
	free(scope);
	free(signed_names.s);
	if (canonical_out != NULL)
		*canonical_out = cr.s;
	else
		free(cr.s);
}
