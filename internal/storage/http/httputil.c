/*
 * Small pieces every HTTP object store needs: name/value lists, percent and base64 encodings,
 * digests and HMAC, XML escaping, HTTP and ISO dates, small secret files.
 */
#include "internal/storage/http/http.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void http_kvs_add(http_kvs *l, const char *name, const char *value)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 8;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n].name = xstrdup(name);
	l->v[l->n].value = xstrdup(value);
	l->n++;
}

const char *http_kvs_get(const http_kvs *l, const char *name)
{
	for (size_t i = 0; l != NULL && i < l->n; i++)
		if (strcasecmp(l->v[i].name, name) == 0)
			return l->v[i].value;
	return NULL;
}

void http_kvs_free(http_kvs *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].value);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static const char hexdig[] = "0123456789ABCDEF";
static const char hexlow[] = "0123456789abcdef";

char *http_uri_encode(const char *s, bool keep_slash)
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

char *http_uri_decode(const char *s)
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

void http_hex(const unsigned char *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexlow[d[i] >> 4];
		out[2 * i + 1] = hexlow[d[i] & 15];
	}
	out[2 * n] = '\0';
}

void http_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	SHA256(data, len, d);
	http_hex(d, sizeof(d), out);
}

char *http_base64(const void *data, size_t len)
{
	char *out = xmalloc(4 * ((len + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

void http_md5_base64(const void *data, size_t len, char out[25])
{
	unsigned char d[16];
	unsigned int dl = 0;
	EVP_Digest(data, len, d, &dl, EVP_md5(), NULL);
	EVP_EncodeBlock((unsigned char *)out, d, 16);
}

void http_hmac_sha256(const void *key, size_t klen, const void *msg, size_t mlen,
					  unsigned char out[32])
{
	unsigned int outl = 32;
	HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &outl);
}

char *http_base64url(const void *data, size_t len)
{
	char *b = http_base64(data, len);
	size_t n = strlen(b);
	while (n > 0 && b[n - 1] == '=')
		b[--n] = '\0';
	for (char *p = b; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	return b;
}

bool http_base64_decode(const char *s, unsigned char **out, size_t *len)
{
	size_t n = strlen(s);
	*out = NULL;
	*len = 0;
	if (n == 0 || n > (1u << 20))
		return false;
	/* EVP_DecodeBlock wants whole quads: pad what came without. */
	size_t padded = (n + 3) / 4 * 4;
	char *tmp = xmalloc(padded + 1);
	memcpy(tmp, s, n);
	memset(tmp + n, '=', padded - n);
	tmp[padded] = '\0';
	for (size_t i = 0; i < padded; i++)
		if (!isalnum((unsigned char)tmp[i]) && tmp[i] != '+' && tmp[i] != '/' && tmp[i] != '=') {
			free(tmp);
			return false;
		}
	unsigned char *buf = xmalloc(padded / 4 * 3 + 1);
	int got = EVP_DecodeBlock(buf, (const unsigned char *)tmp, (int)padded);
	size_t pad = 0;
	while (pad < 2 && padded - pad > 0 && tmp[padded - 1 - pad] == '=')
		pad++;
	free(tmp);
	if (got < 0 || (size_t)got < pad) {
		free(buf);
		return false;
	}
	*out = buf;
	*len = (size_t)got - pad;
	return true;
}

char *http_query_string(const http_kvs *query)
{
	size_t cap = 1;
	for (size_t i = 0; query != NULL && i < query->n; i++)
		cap += 3 * (strlen(query->v[i].name) + strlen(query->v[i].value)) + 2;
	char *out = xmalloc(cap), *o = out;
	for (size_t i = 0; query != NULL && i < query->n; i++) {
		char *k = http_uri_encode(query->v[i].name, false);
		char *v = http_uri_encode(query->v[i].value, false);
		o += sprintf(o, "%s%s=%s", i ? "&" : "", k, v);
		free(k);
		free(v);
	}
	*o = '\0';
	return out;
}

char *http_xml_escape(const char *s)
{
	size_t n = 0;
	for (const char *c = s; *c; c++)
		n += *c == '&' ? 5 : (*c == '<' || *c == '>') ? 4 : (*c == '"' || *c == '\'') ? 6 : 1;
	char *o = xmalloc(n + 1), *w = o;
	for (const char *c = s; *c; c++) {
		const char *rep = *c == '&' ? "&amp;" : *c == '<' ? "&lt;" : *c == '>' ? "&gt;" :
			*c == '"' ? "&quot;" : *c == '\'' ? "&apos;" : NULL;
		if (rep) {
			size_t l = strlen(rep);
			memcpy(w, rep, l);
			w += l;
		} else {
			*w++ = *c;
		}
	}
	*w = '\0';
	return o;
}

bool http_header_is_secret(const char *name)
{
	static const char *const secret[] = {
		"authorization",
		"x-amz-security-token",
		"x-amz-server-side-encryption-customer-key",
		"x-amz-server-side-encryption-customer-key-md5",
		"x-aws-ec2-metadata-token",
		"x-goog-encryption-key",
		"x-goog-encryption-key-sha256",
		"metadata-flavor-token",
		"cookie",
		NULL,
	};
	for (size_t i = 0; secret[i] != NULL; i++)
		if (strcasecmp(name, secret[i]) == 0)
			return true;
	return false;
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

bool http_parse_iso8601(const char *s, time_t *t, long *nsec)
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

bool http_parse_date(const char *s, time_t *t)
{
	struct tm tm = { 0 };
	const char *end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL)
		return false;
	*t = timegm(&tm);
	return true;
}

err_code http_read_small_file(const char *path, size_t max, char **out)
{
	*out = NULL;
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return err_errno(errno == ENOENT ? E_NOTFOUND : E_IO, errno, "opening %s", path);
	char *buf = xmalloc(max + 1);
	size_t n = fread(buf, 1, max + 1, f);
	bool bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		return err_set(E_IO, "reading %s", path);
	}
	if (n > max) {
		free(buf);
		return err_set(E_CONFIG, "%s is larger than %zu bytes", path, max);
	}
	buf[n] = '\0';
	*out = buf;
	return E_OK;
}

void http_call_set(http_call *c, const char *method, char *url, char *host, char *curi,
				   char *what)
{
	free(c->url);
	free(c->host);
	free(c->curi);
	free(c->what);
	c->url = url;
	c->host = host;
	c->curi = curi;
	c->what = what;
	c->req.method = method;
	c->req.url = url;
	c->req.host = host;
	c->req.canonical_uri = curi;
	c->req.query = &c->query;
	c->req.what = what;
}

void http_call_free(http_call *c)
{
	http_kvs_free(&c->req.headers);
	http_response_free(&c->resp);
	http_kvs_free(&c->query);
	free(c->url);
	free(c->host);
	free(c->curi);
	free(c->what);
	memset(c, 0, sizeof(*c));
}

void http_wipe_free(char *s)
{
	if (s != NULL)
		memset(s, 0, strlen(s));
	free(s);
}
