/*
 * OAuth2 bearer tokens for the stores that use them (GCS, Azure AD): one cached token per
 * store, fetched on first use, refreshed a few minutes before it expires or when the store
 * answers that it expired; the answers of token endpoints parsed with a size cap. No token
 * is ever logged.
 */
#include "internal/storage/http/http.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN_ANSWER_MAX (64u << 10)

void http_token_free(http_token *t)
{
	http_wipe_free(t->value);
	memset(t, 0, sizeof(*t));
}

void http_token_cache_init(http_token_cache *c, http_token_fetch fetch, void *arg,
						   const char *what)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	c->fetch = fetch;
	c->arg = arg;
	c->what = what;
}

void http_token_cache_free(http_token_cache *c)
{
	if (c->fetch == NULL)
		return;
	http_token_free(&c->cur);
	pthread_mutex_destroy(&c->mu);
	memset(c, 0, sizeof(*c));
}

/* Refresh this long before expiry: 5 minutes, or a quarter of a short lifetime. */
static bool stale(const http_token_cache *c, time_t now)
{
	if (c->cur.value == NULL)
		return true;
	if (c->cur.expires == 0)
		return false;
	time_t life = c->cur.expires - c->obtained;
	time_t margin = life / 4 < 300 ? life / 4 : 300;
	return now >= c->cur.expires - margin;
}

err_code http_token_authorize(http_token_cache *c, http_kvs *hdrs, bool refresh)
{
	pthread_mutex_lock(&c->mu);
	time_t now = time(NULL);
	err_code rc = E_OK;
	if (refresh || stale(c, now)) {
		http_token t = { 0 };
		rc = c->fetch(c->arg, &t);
		if (rc == E_OK) {
			http_token_free(&c->cur);
			c->cur = t;
			c->obtained = now;
			log_debug("%s: new token, %s%lld s", c->what,
					  t.expires ? "valid for " : "expiry unknown ",
					  t.expires ? (long long)(t.expires - now) : 0LL);
		} else if (c->cur.value != NULL && !refresh &&
				   (c->cur.expires == 0 || now < c->cur.expires)) {
			/* Keep using what still works; the next request tries again. */
			log_warn("%s: refreshing the token failed, using the current one: %s", c->what,
					 err_msg());
			err_clear();
			rc = E_OK;
		} else {
			rc = err_wrap(rc == E_NOTFOUND ? E_CONFIG : rc, "%s", c->what);
		}
	}
	if (rc == E_OK) {
		char *v = xasprintf("Bearer %s", c->cur.value);
		http_kvs_add(hdrs, "authorization", v);
		http_wipe_free(v);
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/* A whole number of seconds given as a number or a string ("3599"). */
static bool json_seconds(json_t *v, long long *out)
{
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return true;
	}
	const char *s = json_string_value(v);
	if (s == NULL || s[0] == '\0' || strlen(s) > 18)
		return false;
	char *end;
	long long n = strtoll(s, &end, 10);
	if (*end != '\0')
		return false;
	*out = n;
	return true;
}

err_code http_token_parse(const char *doc, size_t len, time_t now, http_token *out)
{
	memset(out, 0, sizeof(*out));
	if (len > TOKEN_ANSWER_MAX)
		return err_set(E_CORRUPT, "token answer larger than %u bytes", TOKEN_ANSWER_MAX);
	json_error_t je;
	json_t *j = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &je);
	if (j == NULL || !json_is_object(j)) {
		json_decref(j);
		return err_set(E_CORRUPT, "token answer is not a JSON object");
	}
	const char *tok = json_string_value(json_object_get(j, "access_token"));
	err_code rc = E_OK;
	if (tok == NULL || tok[0] == '\0' || strlen(tok) > 16384) {
		rc = err_set(E_CORRUPT, "token answer has no access_token");
	} else {
		for (const unsigned char *p = (const unsigned char *)tok; *p && rc == E_OK; p++)
			if (*p < 0x21 || *p > 0x7e)
				rc = err_set(E_CORRUPT, "token answer: access_token holds a blank or control "
										"character");
	}
	if (rc == E_OK) {
		long long n;
		if (json_seconds(json_object_get(j, "expires_in"), &n) && n > 0 && n < 100000000)
			out->expires = now + (time_t)n;
		else if (json_seconds(json_object_get(j, "expires_on"), &n) && n > now)
			out->expires = (time_t)n;
		out->value = xstrdup(tok);
	}
	json_decref(j);
	return rc;
}

err_code http_token_request(http_client *h, const char *method, const char *url,
							const char *form, const http_kvs *headers, const char *what,
							http_token *out)
{
	http_request req = { 0 };
	req.method = method;
	req.url = url;
	req.what = what;
	req.body = form;
	req.body_len = form ? strlen(form) : 0;
	for (size_t i = 0; headers != NULL && i < headers->n; i++)
		http_kvs_add(&req.headers, headers->v[i].name, headers->v[i].value);
	if (form != NULL)
		http_kvs_add(&req.headers, "content-type", "application/x-www-form-urlencoded");
	http_response resp;
	err_code rc = http_do(h, NULL, &req, &resp);
	if (rc == E_OK && resp.status != 200) {
		/* OAuth errors: {"error": "...", "error_description": "..."}; never the token. */
		char detail[256] = "";
		json_t *j = json_loadb((const char *)resp.body.data, resp.body.len, 0, NULL);
		const char *e = json_string_value(json_object_get(j, "error"));
		const char *d = json_string_value(json_object_get(j, "error_description"));
		if (e != NULL)
			snprintf(detail, sizeof(detail), ": %s%s%.160s", e, d ? ": " : "", d ? d : "");
		for (char *p = detail; *p; p++)
			if ((unsigned char)*p < 0x20)
				*p = ' ';
		json_decref(j);
		rc = err_set(E_IO, "%s: HTTP %ld%s", what, resp.status, detail);
	} else if (rc == E_OK) {
		rc = http_token_parse((const char *)resp.body.data, resp.body.len, time(NULL), out);
		if (rc != E_OK)
			err_wrap(rc, "%s", what);
	}
	http_response_wipe(&resp);
	http_kvs_free(&req.headers);
	return rc;
}
