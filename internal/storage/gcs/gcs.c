/*
 * Google Cloud Storage: WAL-G's WALG_GS_PREFIX repository as an adapter on the HTTP
 * object-store core: configuration, OAuth2 bearer tokens (a service account's signed JWT or
 * gcloud's authorized-user refresh token from GOOGLE_APPLICATION_CREDENTIALS, else the
 * metadata server, as GKE Workload Identity and GCE provide), STORAGE_EMULATOR_HOST (plain
 * HTTP, no credentials, as WAL-G's client does), the JSON API's answers and errors.
 * Operations are in gcsobj.c.
 */
#include "internal/storage/gcs/gcs.h"

#include <ctype.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>

#define GCS_SCOPE "https://www.googleapis.com/auth/devstorage.read_write"
#define GCS_CRED_MAX (64u << 10)
#define GCS_CHUNK_MAX (16u << 20) /* the largest part buffer walc holds */
#define GCS_PARTS_MEMORY (16u << 20)

/* ------------------------------------------------------------------------------------------ */
/* JSON answers                                                                               */
/* ------------------------------------------------------------------------------------------ */

static json_t *load(const char *doc, size_t len)
{
	if (len == 0 || len > HTTP_BODY_MAX)
		return NULL;
	json_t *j = json_loadb(doc, len, JSON_REJECT_DUPLICATES, NULL);
	if (j != NULL && !json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* size is a decimal string in the JSON API ("1024"); updated RFC 3339. */
static bool object_fields(json_t *o, const char **name, uint64_t *size, time_t *mtime,
						  long *nsec)
{
	const char *sz = json_string_value(json_object_get(o, "size"));
	const char *up = json_string_value(json_object_get(o, "updated"));
	if (name != NULL) {
		*name = json_string_value(json_object_get(o, "name"));
		if (*name == NULL || (*name)[0] == '\0')
			return false;
	}
	if (sz == NULL || up == NULL || sz[0] == '\0' || strspn(sz, "0123456789") != strlen(sz) ||
		strlen(sz) > 19)
		return false;
	*size = strtoull(sz, NULL, 10);
	return time_parse_rfc3339(up, mtime, nsec);
}

err_code gcs_json_list(const char *doc, size_t len, obj_list *items, char **next)
{
	memset(items, 0, sizeof(*items));
	*next = NULL;
	json_t *j = load(doc, len);
	if (j == NULL)
		return err_set(E_CORRUPT, "objects.list answer is not a JSON object");
	json_t *arr = json_object_get(j, "items");
	err_code rc = E_OK;
	if (arr != NULL && !json_is_array(arr))
		rc = err_set(E_CORRUPT, "objects.list answer: items is not an array");
	size_t i;
	json_t *o;
	json_array_foreach(arr, i, o)
	{
		const char *name;
		uint64_t size;
		time_t mt;
		long ns;
		if (rc != E_OK)
			break;
		if (!json_is_object(o) || !object_fields(o, &name, &size, &mt, &ns))
			rc = err_set(E_CORRUPT, "objects.list answer: an item without name, size or updated");
		else
			obj_list_add(items, name, size, mt, ns);
	}
	json_t *tok = json_object_get(j, "nextPageToken");
	if (rc == E_OK && tok != NULL && !json_is_string(tok))
		rc = err_set(E_CORRUPT, "objects.list answer: nextPageToken is not a string");
	if (rc == E_OK && json_string_value(tok) != NULL && json_string_value(tok)[0] != '\0')
		*next = xstrdup(json_string_value(tok));
	json_decref(j);
	if (rc != E_OK)
		obj_list_free(items);
	return rc;
}

err_code gcs_json_object(const char *doc, size_t len, uint64_t *size, time_t *mtime, long *nsec)
{
	json_t *j = load(doc, len);
	bool ok = j != NULL && object_fields(j, NULL, size, mtime, nsec);
	json_decref(j);
	return ok ? E_OK : err_set(E_CORRUPT, "object resource without size or updated");
}

static void copy_line(char *dst, size_t sz, const char *src)
{
	snprintf(dst, sz, "%s", src ? src : "");
	for (char *p = dst; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = ' ';
}

bool gcs_json_error(const char *doc, size_t len, char *code, size_t codesz, char *msg,
					size_t msgsz)
{
	json_t *j = load(doc, len);
	json_t *e = json_object_get(j, "error");
	bool found = json_is_object(e);
	if (found) {
		json_t *errs = json_object_get(e, "errors");
		const char *reason = json_string_value(json_object_get(json_array_get(errs, 0), "reason"));
		copy_line(code, codesz, reason);
		copy_line(msg, msgsz, json_string_value(json_object_get(e, "message")));
	}
	json_decref(j);
	return found;
}

static void gcs_parse_error(http_response *r)
{
	char code[64], msg[256];
	if (r->body.len > 0 && gcs_json_error((const char *)r->body.data, r->body.len, code,
										  sizeof(code), msg, sizeof(msg))) {
		snprintf(r->code, sizeof(r->code), "%s", code);
		snprintf(r->message, sizeof(r->message), "%s", msg);
	} else if (r->body.len > 0 && r->body.len < 200) {
		copy_line(r->message, sizeof(r->message), (const char *)r->body.data);
	}
}

static bool gcs_retryable(const http_response *r)
{
	return r->status == 408 || strcmp(r->code, "rateLimitExceeded") == 0 ||
		   strcmp(r->code, "backendError") == 0;
}

static bool gcs_expired(const http_response *r)
{
	return r->status == 401;
}

/* A resumed download reads the generation it started with: a replaced object is a 404. */
static char *gcs_pin(const http_response *first, const char *url, http_kvs *hdrs)
{
	(void)hdrs;
	if (first->generation[0] == '\0' || strspn(first->generation, "0123456789") !=
											 strlen(first->generation))
		return NULL;
	return xasprintf("%s%sgeneration=%s", url, strchr(url, '?') ? "&" : "?", first->generation);
}

static err_code gcs_authorize(void *arg, const http_request *req, http_kvs *hdrs, bool refresh)
{
	(void)req;
	gcs_storage *s = arg;
	if (s->kind == GCS_NO_AUTH)
		return E_OK;
	return http_token_authorize(&s->tokens, hdrs, refresh);
}

static const http_store_ops gcs_store_ops = {
	"gcs", gcs_authorize, gcs_parse_error, gcs_retryable, gcs_expired, gcs_pin,
};

/* ------------------------------------------------------------------------------------------ */
/* Tokens                                                                                     */
/* ------------------------------------------------------------------------------------------ */

static char *json_b64url(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	char *b = http_base64url(s, strlen(s));
	free(s);
	return b;
}

/* RS256 over the JWT's header and claims with the service account's key. */
static err_code sign_jwt(const gcs_storage *s, char **out)
{
	time_t now = time(NULL);
	json_t *hdr = json_pack("{s:s,s:s}", "alg", "RS256", "typ", "JWT");
	json_t *cl = json_pack("{s:s,s:s,s:s,s:I,s:I}", "iss", s->client_email, "scope", GCS_SCOPE,
						   "aud", s->token_uri, "iat", (json_int_t)now, "exp",
						   (json_int_t)now + 3600);
	char *h = json_b64url(hdr), *c = json_b64url(cl);
	json_decref(hdr);
	json_decref(cl);
	char *input = xasprintf("%s.%s", h, c);
	free(h);
	free(c);
	BIO *bio = BIO_new_mem_buf(s->private_key, -1);
	EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	BIO_free(bio);
	err_code rc = E_OK;
	unsigned char sig[1024];
	size_t siglen = sizeof(sig);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (key == NULL)
		rc = err_set(E_CONFIG, "GOOGLE_APPLICATION_CREDENTIALS: private_key is not a PEM key");
	else if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
			 EVP_DigestSign(md, sig, &siglen, (const unsigned char *)input, strlen(input)) != 1)
		rc = err_set(E_CONFIG, "GOOGLE_APPLICATION_CREDENTIALS: signing with private_key "
							   "failed (an RSA key is needed)");
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
	if (rc == E_OK) {
		char *sg = http_base64url(sig, siglen);
		*out = xasprintf("%s.%s", input, sg);
		free(sg);
	}
	free(input);
	return rc;
}

static char *form_of(const char *const *kv)
{
	char *body = NULL;
	for (size_t i = 0; kv[i] != NULL; i += 2) {
		char *v = http_uri_encode(kv[i + 1], false);
		char *nb = xasprintf("%s%s%s=%s", body ? body : "", body ? "&" : "", kv[i], v);
		http_wipe_free(v);
		http_wipe_free(body);
		body = nb;
	}
	return body;
}

static err_code fetch_token(void *arg, http_token *out)
{
	gcs_storage *s = arg;
	if (s->kind == GCS_METADATA) {
		http_kvs h = { 0 };
		http_kvs_add(&h, "metadata-flavor", "Google");
		err_code rc = http_token_request(&s->http, "GET", s->metadata_url, NULL, &h,
										 "GCS token from the metadata server", out);
		http_kvs_free(&h);
		return rc;
	}
	char *form, *what;
	if (s->kind == GCS_SERVICE_ACCOUNT) {
		char *jwt;
		TRY(sign_jwt(s, &jwt));
		const char *kv[] = { "grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer",
							 "assertion", jwt, NULL };
		form = form_of(kv);
		http_wipe_free(jwt);
		what = xasprintf("GCS token for %s at %s", s->client_email, s->token_uri);
	} else {
		const char *kv[] = { "grant_type", "refresh_token", "client_id", s->client_id,
							 "client_secret", s->client_secret, "refresh_token",
							 s->refresh_token, NULL };
		form = form_of(kv);
		what = xasprintf("GCS token for user client %s at %s", s->client_id, s->token_uri);
	}
	err_code rc = http_token_request(&s->http, "POST", s->token_uri, form, NULL, what, out);
	http_wipe_free(form);
	free(what);
	return rc;
}

static const char *field(json_t *j, const char *name)
{
	const char *v = json_string_value(json_object_get(j, name));
	return v != NULL && v[0] != '\0' ? v : NULL;
}

err_code gcs_parse_credentials(gcs_storage *s, const char *doc, size_t len, const char *path)
{
	json_t *j = load(doc, len);
	if (j == NULL)
		return err_set(E_CONFIG, "GOOGLE_APPLICATION_CREDENTIALS: %s is not a JSON object", path);
	const char *type = field(j, "type");
	err_code rc = E_OK;
	const char *uri = field(j, "token_uri");
	if (uri == NULL)
		uri = "https://oauth2.googleapis.com/token";
	if (!str_has_prefix(uri, "https://") && !str_has_prefix(uri, "http://"))
		rc = err_set(E_CONFIG, "GOOGLE_APPLICATION_CREDENTIALS: token_uri is not a URL");
	else if (type != NULL && strcmp(type, "service_account") == 0) {
		const char *email = field(j, "client_email"), *key = field(j, "private_key");
		if (email == NULL || key == NULL)
			rc = err_set(E_CONFIG, "GOOGLE_APPLICATION_CREDENTIALS: %s has no client_email "
								   "or private_key",
						 path);
		else {
			s->kind = GCS_SERVICE_ACCOUNT;
			s->client_email = xstrdup(email);
			s->private_key = xstrdup(key);
		}
	} else if (type != NULL && strcmp(type, "authorized_user") == 0) {
		const char *id = field(j, "client_id"), *sec = field(j, "client_secret"),
				   *rt = field(j, "refresh_token");
		if (id == NULL || sec == NULL || rt == NULL)
			rc = err_set(E_CONFIG, "GOOGLE_APPLICATION_CREDENTIALS: %s lacks client_id, "
								   "client_secret or refresh_token",
						 path);
		else {
			s->kind = GCS_AUTHORIZED_USER;
			s->client_id = xstrdup(id);
			s->client_secret = xstrdup(sec);
			s->refresh_token = xstrdup(rt);
		}
	} else {
		rc = err_set(E_CONFIG, "GOOGLE_APPLICATION_CREDENTIALS: %s is of type \"%s\"; walc "
							   "reads service_account and authorized_user keys",
					 path, type ? type : "(none)");
	}
	if (rc == E_OK)
		s->token_uri = xstrdup(uri);
	json_decref(j);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Configuration                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* Path below the bucket: slashes at the ends dropped, repeated ones collapsed unless asked. */
static char *clean_path(const char *p, bool normalize)
{
	while (*p == '/')
		p++;
	char *out = xmalloc(strlen(p) + 1), *o = out;
	for (; *p; p++) {
		if (normalize && *p == '/' && o > out && o[-1] == '/')
			continue;
		*o++ = *p;
	}
	while (o > out && o[-1] == '/')
		o--;
	*o = '\0';
	return out;
}

static err_code gcs_configure(gcs_storage *s, const storage_settings *cfg)
{
	const gcs_settings *set = &cfg->gcs;
	s->normalize = set->normalize_prefix;
	const char *b = cfg->gs_prefix + strlen("gs://");
	size_t bl = strcspn(b, "/");
	s->bucket = xasprintf("%.*s", (int)bl, b);
	for (const char *p = s->bucket; *p; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && strchr("-_.", *p) == NULL)
			return err_set(E_CONFIG, "WALG_GS_PREFIX: bad bucket name \"%s\" (a-z, 0-9, '-', "
									 "'_' and '.')",
						   s->bucket);
	char *path = clean_path(b + bl, s->normalize);
	char *sp = cfg->storage_prefix ? clean_path(cfg->storage_prefix, true) : xstrdup("");
	s->root = path[0] && sp[0] ? xasprintf("%s/%s/", path, sp)
		: path[0] || sp[0]	   ? xasprintf("%s/", path[0] ? path : sp)
							   : xstrdup("");
	free(path);
	free(sp);
	size_t rl = strlen(s->root);
	s->describe = xasprintf("gs://%s/%.*s", s->bucket, (int)(rl ? rl - 1 : 0), s->root);

	if (set->encryption_key != NULL) {
		unsigned char *key;
		size_t kl;
		if (!http_base64_decode(set->encryption_key, &key, &kl) || kl != 32) {
			free(key);
			return err_set(E_CONFIG, "GCS_ENCRYPTION_KEY: expected a 32-byte AES-256 key in "
									 "standard base64");
		}
		unsigned char md[32];
		unsigned int ml = 0;
		EVP_Digest(key, 32, md, &ml, EVP_sha256(), NULL);
		s->csek_b64 = http_base64(key, 32);
		s->csek_sha_b64 = http_base64(md, 32);
		memset(key, 0, 32);
		free(key);
	}
	/* Chunks of a resumable upload are multiples of 256 KiB; walc holds at most 16 MiB. */
	size_t chunk = (size_t)set->max_chunk_size;
	if (chunk > GCS_CHUNK_MAX)
		chunk = GCS_CHUNK_MAX;
	s->chunk_size = chunk / (256u << 10) * (256u << 10);
	s->width = (int)cfg->upload_concurrency;
	s->parts = budget_new(GCS_PARTS_MEMORY);

	http_retry rt = { (int)set->max_retries, 128, 5000, 10, 30, set->context_timeout };
	TRY(http_client_init(&s->http, NULL, &cfg->tls, &rt));

	if (set->emulator_host != NULL) {
		const char *h = set->emulator_host;
		s->base_url = str_has_prefix(h, "http://") || str_has_prefix(h, "https://")
			? xstrdup(h)
			: xasprintf("http://%s", h);
		s->kind = GCS_NO_AUTH;
	} else {
		const char *ep = set->endpoint ? set->endpoint : "https://storage.googleapis.com";
		if (!str_has_prefix(ep, "https://") && !str_has_prefix(ep, "http://"))
			return err_set(E_CONFIG, "GCS_ENDPOINT: expected an http(s):// URL, got \"%s\"", ep);
		s->base_url = xstrdup(ep);
		if (set->credentials_file != NULL) {
			char *doc;
			err_code rc = http_read_small_file(set->credentials_file, GCS_CRED_MAX, &doc);
			if (rc != E_OK)
				return err_wrap(E_CONFIG, "GOOGLE_APPLICATION_CREDENTIALS");
			rc = gcs_parse_credentials(s, doc, strlen(doc), set->credentials_file);
			http_wipe_free(doc);
			TRY(rc);
		} else {
			const char *mh = set->metadata_host;
			s->metadata_url = xasprintf("http://%s/computeMetadata/v1/instance/service-accounts/"
										"default/token",
										mh);
			s->kind = GCS_METADATA;
		}
		http_token_cache_init(&s->tokens, fetch_token, s,
							  s->kind == GCS_METADATA ? "gcs: metadata server" : "gcs: credentials file");
	}
	size_t n = strlen(s->base_url);
	while (n > 0 && s->base_url[n - 1] == '/')
		s->base_url[--n] = '\0';
	s->auth.ops = &gcs_store_ops;
	s->auth.arg = s;
	return E_OK;
}

void gcs_storage_free(storage *st)
{
	gcs_storage *s = (gcs_storage *)st;
	http_token_cache_free(&s->tokens);
	http_client_free(&s->http);
	budget_free(s->parts);
	http_wipe_free(s->private_key);
	http_wipe_free(s->client_secret);
	http_wipe_free(s->refresh_token);
	http_wipe_free(s->csek_b64);
	free(s->csek_sha_b64);
	free(s->client_email);
	free(s->client_id);
	free(s->token_uri);
	free(s->metadata_url);
	free(s->bucket);
	free(s->root);
	free(s->describe);
	free(s->base_url);
	free(s);
}

err_code storage_gcs_open(const storage_settings *cfg, storage **out)
{
	*out = NULL;
	TRY(http_global_init());
	gcs_storage *s = xcalloc(1, sizeof(*s));
	s->base.ops = &gcs_ops;
	err_code rc = gcs_configure(s, cfg);
	if (rc != E_OK) {
		gcs_storage_free(&s->base);
		return rc;
	}
	static const char *const kinds[] = { "emulator, no credentials", "service account",
										 "authorized user", "metadata server" };
	log_debug("gcs: %s via %s (%s), chunk size %zu, %d retries", s->describe, s->base_url,
			  kinds[s->kind], s->chunk_size, s->http.retry.max_retries);
	*out = &s->base;
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Requests                                                                                   */
/* ------------------------------------------------------------------------------------------ */

void gcs_call_init(gcs_storage *s, http_call *c, const char *method, char *path,
				   const char *what_key)
{
	char *q = http_query_string(&c->query);
	char *url = xasprintf("%s%s%s%s", s->base_url, path, q[0] ? "?" : "", q);
	free(q);
	http_call_set(c, method, url, NULL, path,
				  xasprintf("%s gs://%s/%s", method, s->bucket, what_key ? what_key : ""));
}

err_code gcs_call(gcs_storage *s, http_call *c)
{
	return http_do(&s->http, &s->auth, &c->req, &c->resp);
}

void gcs_add_csek(const gcs_storage *s, http_kvs *h)
{
	if (s->csek_b64 == NULL)
		return;
	http_kvs_add(h, "x-goog-encryption-algorithm", "AES256");
	http_kvs_add(h, "x-goog-encryption-key", s->csek_b64);
	http_kvs_add(h, "x-goog-encryption-key-sha256", s->csek_sha_b64);
}

err_code gcs_answer_error(gcs_storage *s, const char *what, const http_response *r)
{
	const char *hint = "";
	if (r->status == 401)
		hint = " (the token was refused)";
	else if (r->status == 403)
		hint = " (the identity lacks access to this bucket)";
	else if (strcmp(r->code, "customerEncryptionKeyIsIncorrect") == 0 ||
			 strcmp(r->code, "resourceIsEncryptedWithCustomerEncryptionKey") == 0)
		hint = " (check GCS_ENCRYPTION_KEY)";
	return err_set(r->status == 404 ? E_NOTFOUND : E_IO, "%s: bucket %s: HTTP %ld %s%s%.200s%s",
				   what, s->bucket, r->status, r->code[0] ? r->code : "(no GCS error reason)",
				   r->message[0] ? ": " : "", r->message, hint);
}
