/*
 * Azure Blob Storage: WAL-G's WALG_AZ_PREFIX repository (https://ACCOUNT.blob.SUFFIX/CONTAINER)
 * as an adapter on the HTTP object-store core: configuration, and how requests are
 * authorized (Shared Key signing of every attempt, a SAS token in the URL, or Azure AD bearer
 * tokens from a service principal, AKS workload identity or managed identity), Azure's error
 * codes, and the parsers of its listing and batch answers. Operations are in azblob.c.
 */
#include "internal/storage/azure/azure.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define AZ_PARTS_MEMORY (24ull << 20)
#define AZ_RESOURCE "https://storage.azure.com/"
#define AZ_TOKEN_FILE_MAX (64u << 10)

/* ------------------------------------------------------------------------------------------ */
/* Authorization                                                                              */
/* ------------------------------------------------------------------------------------------ */

void az_date(char out[32])
{
	time_t now = http_now();
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(out, 32, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

typedef struct sbuf {
	char *s;
	size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s)
{
	size_t n = strlen(s);
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
}

static int cmp_kv(const void *a, const void *b)
{
	return strcmp(((const http_kv *)a)->name, ((const http_kv *)b)->name);
}

/* The Shared Key string to sign (Blob service, version 2015-02-21 and later). */
static char *string_to_sign(const az_storage *s, const char *method, const char *path,
							const http_kvs *query, const http_kvs *hdrs, size_t body_len)
{
	static const char *const std[] = { "content-encoding", "content-language", NULL,
									   "content-md5", "content-type", "date",
									   "if-modified-since", "if-match", "if-none-match",
									   "if-unmodified-since", "range" };
	sbuf b = { 0 };
	sb_add(&b, method);
	sb_add(&b, "\n");
	for (size_t i = 0; i < sizeof(std) / sizeof(std[0]); i++) {
		if (std[i] == NULL) {
			char len[32] = "";
			if (body_len > 0)
				snprintf(len, sizeof(len), "%zu", body_len);
			sb_add(&b, len);
		} else {
			const char *v = http_kvs_get(hdrs, std[i]);
			sb_add(&b, v ? v : "");
		}
		sb_add(&b, "\n");
	}
	http_kv *ms = xcalloc(hdrs->n + 1, sizeof(*ms));
	size_t n = 0;
	for (size_t i = 0; i < hdrs->n; i++)
		if (strncasecmp(hdrs->v[i].name, "x-ms-", 5) == 0)
			ms[n++] = hdrs->v[i];
	xqsort(ms, n, sizeof(*ms), cmp_kv);
	for (size_t i = 0; i < n; i++) {
		sb_add(&b, ms[i].name);
		sb_add(&b, ":");
		sb_add(&b, ms[i].value);
		sb_add(&b, "\n");
	}
	free(ms);
	sb_add(&b, "/");
	sb_add(&b, s->account);
	sb_add(&b, path);
	size_t nq = query ? query->n : 0;
	http_kv *q = xcalloc(nq + 1, sizeof(*q));
	for (size_t i = 0; i < nq; i++)
		q[i] = query->v[i];
	xqsort(q, nq, sizeof(*q), cmp_kv);
	for (size_t i = 0; i < nq; i++) {
		sb_add(&b, "\n");
		sb_add(&b, q[i].name);
		sb_add(&b, ":");
		sb_add(&b, q[i].value);
	}
	free(q);
	return b.s;
}

err_code az_authorization(az_storage *s, const char *method, const char *path,
						  const http_kvs *query, const http_kvs *hdrs, size_t body_len,
						  bool refresh, char **out)
{
	*out = NULL;
	if (s->kind == AZ_SAS)
		return E_OK;
	if (s->kind == AZ_SHARED_KEY) {
		char *sts = string_to_sign(s, method, path, query, hdrs, body_len);
		unsigned char mac[32];
		http_hmac_sha256(s->key, s->keylen, sts, strlen(sts), mac);
		free(sts);
		char *sig = http_base64(mac, sizeof(mac));
		*out = xasprintf("SharedKey %s:%s", s->account, sig);
		free(sig);
		return E_OK;
	}
	http_kvs tmp = { 0 };
	TRY(http_token_authorize(&s->tokens, &tmp, refresh));
	*out = xstrdup(tmp.v[0].value);
	http_wipe_free(tmp.v[0].value);
	tmp.v[0].value = NULL;
	free(tmp.v[0].name);
	free(tmp.v);
	return E_OK;
}

/* The path part of a URL ("/container/blob"), as sent. */
static const char *url_path(const char *url)
{
	const char *p = strstr(url, "://");
	p = p ? strchr(p + 3, '/') : NULL;
	return p ? p : "/";
}

static err_code az_authorize(void *arg, const http_request *req, http_kvs *hdrs, bool refresh)
{
	az_storage *s = arg;
	char date[32];
	az_date(date);
	http_kvs_add(hdrs, "x-ms-date", date);
	http_kvs_add(hdrs, "x-ms-version", s->api_version);
	char *path = xstrdup(url_path(req->url));
	path[strcspn(path, "?")] = '\0';
	char *auth;
	err_code rc = az_authorization(s, req->method, path, req->query, hdrs, req->body_len, refresh,
								   &auth);
	free(path);
	TRY(rc);
	if (auth != NULL)
		http_kvs_add(hdrs, "authorization", auth);
	http_wipe_free(auth);
	return E_OK;
}

/* HEAD answers carry the code in x-ms-error-code only: keep it when there is no body. */
static void az_parse_error(http_response *r)
{
	char code[64], msg[256];
	if (r->body.len > 0 && xml_error((const char *)r->body.data, r->body.len, code, sizeof(code),
									 msg, sizeof(msg))) {
		snprintf(r->code, sizeof(r->code), "%s", code);
		snprintf(r->message, sizeof(r->message), "%s", msg);
	}
}

static bool az_retryable(const http_response *r)
{
	return r->status == 408 || strcmp(r->code, "ServerBusy") == 0 ||
		   strcmp(r->code, "OperationTimedOut") == 0 || strcmp(r->code, "InternalError") == 0;
}

/* Only a bearer token can expire; a bad Shared Key or SAS stays bad. */
static bool az_expired_ad(const http_response *r)
{
	return r->status == 401 ||
		   (r->status == 403 && (strcmp(r->code, "InvalidAuthenticationInfo") == 0 ||
								 strcmp(r->code, "AuthenticationFailed") == 0));
}

static const http_store_ops az_store_ops = {
	"azure", az_authorize, az_parse_error, az_retryable, NULL, NULL,
};
static const http_store_ops az_store_ops_ad = {
	"azure", az_authorize, az_parse_error, az_retryable, az_expired_ad, NULL,
};

/* ------------------------------------------------------------------------------------------ */
/* Azure AD tokens                                                                            */
/* ------------------------------------------------------------------------------------------ */

static void form_add(char **body, const char *k, const char *v)
{
	char *ev = http_uri_encode(v, false);
	char *nb = xasprintf("%s%s%s=%s", *body ? *body : "", *body ? "&" : "", k, ev);
	http_wipe_free(*body);
	http_wipe_free(ev);
	*body = nb;
}

/* A service principal's secret or AKS's federated token, exchanged at the tenant's endpoint. */
static err_code fetch_ad(void *arg, http_token *out)
{
	az_storage *s = arg;
	char *assertion = NULL;
	if (s->kind == AZ_WORKLOAD) {
		char *raw;
		err_code rc = http_read_small_file(s->token_file, AZ_TOKEN_FILE_MAX, &raw);
		if (rc != E_OK)
			return err_wrap(E_CONFIG, "AZURE_FEDERATED_TOKEN_FILE");
		size_t n = strlen(raw);
		while (n > 0 && isspace((unsigned char)raw[n - 1]))
			raw[--n] = '\0';
		if (n == 0) {
			http_wipe_free(raw);
			return err_set(E_CONFIG, "AZURE_FEDERATED_TOKEN_FILE: %s is empty", s->token_file);
		}
		assertion = raw;
	}
	char *form = NULL;
	form_add(&form, "grant_type", "client_credentials");
	form_add(&form, "client_id", s->client_id);
	form_add(&form, "scope", AZ_RESOURCE ".default");
	if (assertion != NULL) {
		form_add(&form, "client_assertion_type",
				 "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
		form_add(&form, "client_assertion", assertion);
	} else {
		form_add(&form, "client_secret", s->client_secret);
	}
	http_wipe_free(assertion);
	char *url = xasprintf("%s%s/oauth2/v2.0/token", s->authority, s->tenant_id);
	char *what = xasprintf("Azure AD token for client %s at %s", s->client_id, url);
	err_code rc = http_token_request(&s->http, "POST", url, form, NULL, what, out);
	http_wipe_free(form);
	free(url);
	free(what);
	return rc;
}

/* Managed identity: the instance metadata endpoint. */
static err_code fetch_imds(void *arg, http_token *out)
{
	az_storage *s = arg;
	char *cid = s->client_id ? http_uri_encode(s->client_id, false) : NULL;
	char *url = xasprintf("%s/metadata/identity/oauth2/token?api-version=2018-02-01&resource="
						  "https%%3A%%2F%%2Fstorage.azure.com%%2F%s%s",
						  s->imds, cid ? "&client_id=" : "", cid ? cid : "");
	free(cid);
	http_kvs h = { 0 };
	http_kvs_add(&h, "metadata", "true");
	err_code rc = http_token_request(&s->http, "GET", url, NULL, &h, "Azure managed identity "
																	  "token",
									 out);
	http_kvs_free(&h);
	free(url);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Configuration                                                                              */
/* ------------------------------------------------------------------------------------------ */

static char *trimmed_copy(const char *s, size_t n)
{
	while (n > 0 && s[0] == '/')
		s++, n--;
	while (n > 0 && s[n - 1] == '/')
		n--;
	return xasprintf("%.*s", (int)n, s);
}

static bool valid_name(const char *s, size_t min, size_t max, bool dash)
{
	size_t n = strlen(s);
	if (n < min || n > max)
		return false;
	for (const char *p = s; *p; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || (dash && *p == '-')))
			return false;
	return true;
}

static err_code az_auth_setup(az_storage *s, const az_settings *set)
{
	if (set->access_key != NULL) {
		if (!http_base64_decode(set->access_key, &s->key, &s->keylen))
			return err_set(E_CONFIG, "AZURE_STORAGE_ACCESS_KEY: expected the account key in "
									 "base64");
		s->kind = AZ_SHARED_KEY;
		return E_OK;
	}
	if (set->sas_token != NULL) {
		const char *t = set->sas_token[0] == '?' ? set->sas_token + 1 : set->sas_token;
		if (t[0] == '\0' || strpbrk(t, " \r\n#") != NULL || strstr(t, "sig=") == NULL)
			return err_set(E_CONFIG, "AZURE_STORAGE_SAS_TOKEN: expected a SAS query string "
									 "with sig=...");
		s->sas = xstrdup(t);
		s->kind = AZ_SAS;
		return E_OK;
	}
	const char *host = set->authority_host;
	if (!str_has_prefix(host, "https://") && !str_has_prefix(host, "http://"))
		return err_set(E_CONFIG, "AZURE_AUTHORITY_HOST: expected an https:// URL, got \"%s\"",
					   host);
	s->authority = xasprintf("%s%s", host, str_has_suffix(host, "/") ? "" : "/");
	s->client_id = set->client_id ? xstrdup(set->client_id) : NULL;
	s->tenant_id = set->tenant_id ? xstrdup(set->tenant_id) : NULL;
	if (set->client_secret != NULL || set->federated_token_file != NULL) {
		const char *what = set->client_secret ? "AZURE_CLIENT_SECRET" : "AZURE_FEDERATED_TOKEN_FILE";
		if (set->client_id == NULL || set->tenant_id == NULL)
			return err_set(E_CONFIG, "%s is set but %s is not", what,
						   set->client_id == NULL ? "AZURE_CLIENT_ID" : "AZURE_TENANT_ID");
		for (const char *p = set->tenant_id; *p; p++)
			if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.')
				return err_set(E_CONFIG, "AZURE_TENANT_ID: expected a tenant id or domain, got "
										 "\"%s\"",
							   set->tenant_id);
		if (set->client_secret != NULL) {
			s->client_secret = xstrdup(set->client_secret);
			s->kind = AZ_CLIENT_SECRET;
		} else {
			s->token_file = xstrdup(set->federated_token_file);
			s->kind = AZ_WORKLOAD;
		}
		http_token_cache_init(&s->tokens, fetch_ad, s,
							  s->kind == AZ_WORKLOAD ? "azure: workload identity"
													 : "azure: service principal");
		return E_OK;
	}
	const char *imds = set->imds_endpoint;
	size_t n = strlen(imds);
	while (n > 0 && imds[n - 1] == '/')
		n--;
	s->imds = xasprintf("%.*s", (int)n, imds);
	s->kind = AZ_MANAGED;
	http_token_cache_init(&s->tokens, fetch_imds, s, "azure: managed identity");
	return E_OK;
}

static err_code az_configure(az_storage *s, const storage_settings *cfg)
{
	const az_settings *set = &cfg->az;
	const char *pfx = cfg->az_prefix + strlen("azure://");
	size_t cl = strcspn(pfx, "/");
	s->container = xasprintf("%.*s", (int)cl, pfx);
	if (!valid_name(s->container, 3, 63, true))
		return err_set(E_CONFIG, "WALG_AZ_PREFIX: bad container name \"%s\" (3 to 63 of a-z, "
								 "0-9 and '-')",
					   s->container);
	char *path = trimmed_copy(pfx + cl, strlen(pfx + cl));
	char *sp = cfg->storage_prefix ? trimmed_copy(cfg->storage_prefix, strlen(cfg->storage_prefix))
								   : xstrdup("");
	s->root = path[0] && sp[0] ? xasprintf("%s/%s/", path, sp)
		: path[0] || sp[0]	   ? xasprintf("%s/", path[0] ? path : sp)
							   : xstrdup("");
	free(path);
	free(sp);
	size_t rl = strlen(s->root);
	s->describe = xasprintf("azure://%s/%.*s", s->container, (int)(rl ? rl - 1 : 0), s->root);
	if (set->account == NULL)
		return err_set(E_CONFIG, "AZURE_STORAGE_ACCOUNT is not set: WALG_AZ_PREFIX needs the "
								 "storage account's name");
	if (!valid_name(set->account, 3, 24, false))
		return err_set(E_CONFIG, "AZURE_STORAGE_ACCOUNT: expected 3 to 24 of a-z and 0-9, got "
								 "\"%s\"",
					   set->account);
	s->account = xstrdup(set->account);
	const char *suffix = set->endpoint_suffix;
	for (const char *p = suffix; *p; p++)
		if (!isalnum((unsigned char)*p) && strchr(".-:", *p) == NULL)
			return err_set(E_CONFIG, "AZURE_ENDPOINT_SUFFIX: expected a host suffix like "
									 "core.windows.net, got \"%s\"",
						   suffix);
	s->host = xasprintf("%s.blob.%s", s->account, suffix);
	const char *ver = set->api_version;
	if (strlen(ver) != 10 || strspn(ver, "0123456789-") != 10)
		return err_set(E_CONFIG, "AZURE_BLOB_STORE_API_VERSION: expected a date like "
								 "2021-12-02, got \"%s\"",
					   ver);
	s->api_version = xstrdup(ver);
	s->block_size = (size_t)set->buffer_size;
	s->concurrency = (int)set->max_buffers;
	if (s->concurrency > cfg->upload_concurrency)
		s->concurrency = (int)cfg->upload_concurrency;
	s->width = (int)cfg->upload_concurrency;
	s->parts = budget_new(AZ_PARTS_MEMORY);

	const char *ca = set->ca_cert_file;
	if (ca != NULL && access(ca, R_OK) != 0)
		return err_errno(E_CONFIG, errno, "AZURE_CA_CERT_FILE: cannot read %s", ca);
	http_retry rt = { (int)set->max_retries, 100, 5000, 10, 30, set->try_timeout * 60 };
	TRY(http_client_init(&s->http, ca, &cfg->tls, &rt));
	TRY(az_auth_setup(s, set));
	s->auth.ops = s->kind == AZ_SHARED_KEY || s->kind == AZ_SAS ? &az_store_ops : &az_store_ops_ad;
	s->auth.arg = s;
	return E_OK;
}

static void az_free(storage *st)
{
	az_storage *s = (az_storage *)st;
	http_token_cache_free(&s->tokens);
	http_client_free(&s->http);
	budget_free(s->parts);
	if (s->key != NULL)
		memset(s->key, 0, s->keylen);
	free(s->key);
	http_wipe_free(s->sas);
	http_wipe_free(s->client_secret);
	free(s->client_id);
	free(s->tenant_id);
	free(s->token_file);
	free(s->authority);
	free(s->imds);
	free(s->account);
	free(s->container);
	free(s->root);
	free(s->describe);
	free(s->host);
	free(s->api_version);
	free(s);
}

static const char *const kind_names[] = { "Shared Key", "SAS token", "service principal",
										  "workload identity", "managed identity" };

err_code storage_az_open(const storage_settings *cfg, storage **out)
{
	*out = NULL;
	TRY(http_global_init());
	az_storage *s = xcalloc(1, sizeof(*s));
	s->base.ops = &az_ops;
	err_code rc = az_configure(s, cfg);
	if (rc != E_OK) {
		az_free(&s->base);
		return rc;
	}
	log_debug("azure: %s at https://%s (%s), block size %zu, %d blocks at once, %d retries",
			  s->describe, s->host, kind_names[s->kind], s->block_size, s->concurrency,
			  s->http.retry.max_retries);
	*out = &s->base;
	return E_OK;
}

void az_storage_free(storage *st)
{
	az_free(st);
}

/* ------------------------------------------------------------------------------------------ */
/* Requests and answers                                                                       */
/* ------------------------------------------------------------------------------------------ */

void az_call_init(az_storage *s, http_call *c, const char *method, const char *blob)
{
	char *eb = blob ? http_uri_encode(blob, true) : NULL;
	char *path = eb ? xasprintf("/%s/%s", s->container, eb) : xasprintf("/%s", s->container);
	free(eb);
	char *q = http_query_string(&c->query);
	char *url = xasprintf("https://%s%s%s%s%s%s", s->host, path,
						  q[0] || s->sas ? "?" : "", s->sas ? s->sas : "",
						  q[0] && s->sas ? "&" : "", q);
	free(q);
	http_call_set(c, method, url, NULL, path,
				  xasprintf("%s azure://%s/%s", method, s->container, blob ? blob : ""));
}

err_code az_call(az_storage *s, http_call *c)
{
	return http_do(&s->http, &s->auth, &c->req, &c->resp);
}

err_code az_answer_error(az_storage *s, const char *what, const http_response *r)
{
	const char *hint = "";
	if (strcmp(r->code, "AuthenticationFailed") == 0)
		hint = s->kind == AZ_SHARED_KEY ? " (check AZURE_STORAGE_ACCESS_KEY)"
			: s->kind == AZ_SAS		? " (check AZURE_STORAGE_SAS_TOKEN: expired or wrong)"
									: " (the Azure AD token was refused)";
	else if (strcmp(r->code, "ContainerNotFound") == 0)
		hint = " (the container does not exist)";
	else if (strcmp(r->code, "AuthorizationPermissionMismatch") == 0 ||
			 strcmp(r->code, "AuthorizationFailure") == 0)
		hint = " (the identity lacks a Storage Blob Data role on this container)";
	bool notfound = r->status == 404 && strcmp(r->code, "ContainerNotFound") != 0 &&
		strcmp(r->code, "ResourceNotFound") != 0;
	return err_set(notfound ? E_NOTFOUND : E_IO, "%s: account %s: HTTP %ld %s%s%.200s%s%s%s",
				   what, s->account, r->status, r->code[0] ? r->code : "(no Azure error code)",
				   r->message[0] ? ": " : "", r->message, hint,
				   r->request_id[0] ? ", request id " : "", r->request_id);
}

/* ------------------------------------------------------------------------------------------ */
/* Answers: List Blobs, Blob Batch                                                            */
/* ------------------------------------------------------------------------------------------ */

typedef struct list_ctx {
	az_list_page *page;
	char *name;
	uint64_t size;
	time_t mtime;
	bool bad;
	bool is_listing;
} list_ctx;

static void list_cb(void *vctx, const char *path, const char *text)
{
	list_ctx *c = vctx;
	if (strcmp(path, "/EnumerationResults") == 0) {
		c->is_listing = true;
	} else if (strcmp(path, "/EnumerationResults/Blobs/Blob/Name") == 0 ||
			   strcmp(path, "/EnumerationResults/Blobs/BlobPrefix/Name") == 0) {
		free(c->name);
		c->name = xstrdup(text);
	} else if (strcmp(path, "/EnumerationResults/Blobs/Blob/Properties/Content-Length") == 0) {
		char *end;
		c->size = strtoull(text, &end, 10);
		if (end == text || *end != '\0')
			c->bad = true;
	} else if (strcmp(path, "/EnumerationResults/Blobs/Blob/Properties/Last-Modified") == 0) {
		if (!http_parse_date(text, &c->mtime))
			c->bad = true;
	} else if (strcmp(path, "/EnumerationResults/Blobs/Blob") == 0 ||
			   strcmp(path, "/EnumerationResults/Blobs/BlobPrefix") == 0) {
		if (c->name == NULL || c->name[0] == '\0') {
			c->bad = true;
		} else {
			bool blob = strcmp(path, "/EnumerationResults/Blobs/Blob") == 0;
			obj_list_add(blob ? &c->page->items : &c->page->prefixes, c->name, c->size,
						 c->mtime, 0);
		}
		free(c->name);
		c->name = NULL;
		c->size = 0;
		c->mtime = 0;
	} else if (strcmp(path, "/EnumerationResults/NextMarker") == 0 && text[0] != '\0') {
		free(c->page->next_marker);
		c->page->next_marker = xstrdup(text);
	}
}

err_code az_xml_list(const char *doc, size_t len, az_list_page *out)
{
	memset(out, 0, sizeof(*out));
	list_ctx c = { out, NULL, 0, 0, false, false };
	err_code rc = xml_parse(doc, len, list_cb, &c);
	free(c.name);
	if (rc == E_OK && (!c.is_listing || c.bad))
		rc = err_set(E_CORRUPT, "List Blobs answer: %s",
					 c.is_listing ? "a blob without a name, size or date" : "not an EnumerationResults");
	if (rc != E_OK)
		az_list_page_free(out);
	return rc;
}

void az_list_page_free(az_list_page *p)
{
	obj_list_free(&p->items);
	obj_list_free(&p->prefixes);
	free(p->next_marker);
	memset(p, 0, sizeof(*p));
}

err_code az_batch_statuses(const char *doc, size_t len, size_t *ok, size_t *missing,
						   size_t *failed, long *first_failed)
{
	*ok = *missing = *failed = 0;
	*first_failed = 0;
	if (len > HTTP_BODY_MAX)
		return err_set(E_CORRUPT, "Blob Batch answer larger than %u bytes", HTTP_BODY_MAX);
	/* Each subresponse starts with its status line at the start of a line. */
	for (size_t i = 0; i + 12 <= len; i++) {
		if ((i > 0 && doc[i - 1] != '\n') || memcmp(doc + i, "HTTP/1.1 ", 9) != 0)
			continue;
		const char *p = doc + i + 9;
		if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]) ||
			!isdigit((unsigned char)p[2]))
			return err_set(E_CORRUPT, "Blob Batch answer: a bad status line");
		long st = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
		if (st < 100) /* no such HTTP status: not an answer to trust */
			return err_set(E_CORRUPT, "Blob Batch answer: status %03ld", st);
		if (st >= 200 && st < 300)
			(*ok)++;
		else if (st == 404)
			(*missing)++;
		else {
			if (*failed == 0)
				*first_failed = st;
			(*failed)++;
		}
	}
	return E_OK;
}
