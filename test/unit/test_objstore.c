/*
 * Unit tests for the GCS and Azure adapters without a server, through the core's test seam
 * (below the retry loop): the GCS resumable upload protocol (which the emulator in the
 * integration tests lacks: it finalizes on the first chunk), a service account's signed JWT
 * exchanged for a token and refreshed after a 401, the metadata server, CSEK headers, the
 * JSON and XML parsers, Azure configuration errors and Azure AD token requests; a plain
 * request outside the stores (the Pushgateway's): its retries, Basic authentication from the
 * URL kept out of messages, and its sending after a signal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/walc/settings/config.h"
#include "internal/storage/azure/azure.h"
#include "internal/storage/gcs/gcs.h"

static const char *const vars[] = {
	"WALG_GS_PREFIX", "STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "GCS_ENDPOINT",
	"GCE_METADATA_HOST", "GCS_MAX_CHUNK_SIZE", "GCS_ENCRYPTION_KEY", "GCS_MAX_RETRIES",
	"WALG_AZ_PREFIX", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_ACCESS_KEY",
	"AZURE_STORAGE_SAS_TOKEN", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET",
	"AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AZURE_IMDS_ENDPOINT",
	"WALG_FILE_PREFIX", "WALG_S3_PREFIX", NULL,
};

static int clean(void **state)
{
	(void)state;
	for (size_t i = 0; vars[i]; i++)
		unsetenv(vars[i]);
	setenv("HOME", "/nonexistent", 1);
	http_set_test_hook(NULL, NULL, 0);
	err_clear();
	return 0;
}

static err_code open_env(storage **st)
{
	config cfg;
	*st = NULL;
	err_code rc = config_load(&cfg, true);
	if (rc == E_OK)
		rc = storage_open(&cfg.storage, st);
	config_free(&cfg);
	return rc;
}

static void body(http_answer *a, const char *s)
{
	http_answer_body(a, s, strlen(s));
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
}

/* ------------------------------------------------------------------------------------------ */
/* A fake GCS: media and resumable uploads, tokens                                             */
/* ------------------------------------------------------------------------------------------ */

typedef struct gfake {
	unsigned char *obj;
	size_t len;
	size_t got;		 /* bytes received by the session */
	int chunks;
	int tokens;		 /* tokens issued */
	int unauthorized; /* answer this many storage requests 401 */
	char last_auth[256];
	char token_form[4096];
	bool csek_seen;
	bool bad;
	EVP_PKEY *pub;	 /* the service account's public key, to check the JWT */
} gfake;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static bool jwt_ok(gfake *f, const char *form)
{
	const char *a = strstr(form, "assertion=");
	if (a == NULL || f->pub == NULL)
		return false;
	char *jwt = http_uri_decode(a + 10);
	char *dot2 = strrchr(jwt, '.');
	*dot2 = '\0';
	char *sig = dot2 + 1;
	/* base64url -> base64 */
	for (char *p = sig; *p; p++)
		*p = *p == '-' ? '+' : *p == '_' ? '/' : *p;
	unsigned char *raw;
	size_t rl;
	bool ok = http_base64_decode(sig, &raw, &rl);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	ok = ok && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, f->pub) == 1 &&
		 EVP_DigestVerify(md, raw, rl, (const unsigned char *)jwt, strlen(jwt)) == 1;
	EVP_MD_CTX_free(md);
	/* the claims */
	char *dot1 = strchr(jwt, '.');
	char *cl = dot1 + 1;
	for (char *p = cl; *p; p++)
		*p = *p == '-' ? '+' : *p == '_' ? '/' : *p;
	unsigned char *cj;
	size_t cjl;
	if (ok && http_base64_decode(cl, &cj, &cjl)) {
		json_t *j = json_loadb((const char *)cj, cjl, 0, NULL);
		ok = j != NULL &&
			 strcmp(json_string_value(json_object_get(j, "iss")), "walc@test.iam") == 0 &&
			 strcmp(json_string_value(json_object_get(j, "aud")), "http://tok.test/token") == 0 &&
			 strstr(json_string_value(json_object_get(j, "scope")), "devstorage.read_write");
		json_decref(j);
		free(cj);
	} else {
		ok = false;
	}
	free(raw);
	free(jwt);
	return ok;
}

static err_code gcs_hook(void *arg, const http_request *req, const http_kvs *hdrs,
						 http_answer *a)
{
	gfake *f = arg;
	pthread_mutex_lock(&mu);
	const char *auth = http_kvs_get(hdrs, "authorization");
	if (str_has_prefix(req->url, "http://tok.test/") || strstr(req->url, "computeMetadata")) {
		if (strstr(req->url, "computeMetadata") &&
			strcmp(http_kvs_get(hdrs, "metadata-flavor") ?: "", "Google") != 0)
			f->bad = true;
		if (req->body_len > 0) {
			snprintf(f->token_form, sizeof(f->token_form), "%.*s", (int)req->body_len,
					 (const char *)req->body);
			if (!jwt_ok(f, f->token_form))
				f->bad = true;
		}
		f->tokens++;
		char doc[128];
		snprintf(doc, sizeof(doc), "{\"access_token\":\"ya29.t%d\",\"expires_in\":3599}",
				 f->tokens);
		a->status = 200;
		body(a, doc);
		goto out;
	}
	snprintf(f->last_auth, sizeof(f->last_auth), "%s", auth ? auth : "");
	if (http_kvs_get(hdrs, "x-goog-encryption-key-sha256") != NULL)
		f->csek_seen = true;
	if (f->unauthorized > 0) {
		f->unauthorized--;
		a->status = 401;
		body(a, "{\"error\":{\"code\":401,\"message\":\"Invalid Credentials\",\"errors\":"
				"[{\"reason\":\"authError\"}]}}");
		goto out;
	}
	if (strcmp(req->method, "POST") == 0 && strstr(req->url, "uploadType=resumable")) {
		a->status = 200;
		http_kvs_add(&a->headers, "location", "http://gcs.test/upload/session?upload_id=S1");
		f->got = 0;
		f->chunks = 0;
	} else if (strcmp(req->method, "PUT") == 0 && strstr(req->url, "upload_id=S1")) {
		const char *cr = http_kvs_get(hdrs, "content-range");
		unsigned long long from, to, total;
		bool last = sscanf(cr ? cr : "", "bytes %llu-%llu/%llu", &from, &to, &total) == 3;
		if (!last && sscanf(cr ? cr : "", "bytes %llu-%llu/*", &from, &to) != 2)
			f->bad = true;
		/* chunks arrive in order, each but the last a multiple of 256 KiB */
		if (from != f->got || to - from + 1 != req->body_len || (!last && req->body_len % 262144))
			f->bad = true;
		f->obj = xrealloc(f->obj, f->got + req->body_len);
		memcpy(f->obj + f->got, req->body, req->body_len);
		f->got += req->body_len;
		f->chunks++;
		if (last) {
			f->len = f->got;
			a->status = 200;
			body(a, "{}");
		} else {
			a->status = 308;
			char r[64];
			snprintf(r, sizeof(r), "bytes=0-%zu", f->got - 1);
			http_kvs_add(&a->headers, "range", r);
		}
	} else if (strcmp(req->method, "POST") == 0 && strstr(req->url, "uploadType=media")) {
		free(f->obj);
		f->obj = xmalloc(req->body_len + 1);
		memcpy(f->obj, req->body, req->body_len);
		f->len = req->body_len;
		a->status = 200;
		body(a, "{}");
	} else if (strcmp(req->method, "GET") == 0 && strstr(req->url, "alt=media")) {
		a->status = 200;
		http_kvs_add(&a->headers, "x-goog-generation", "1700000000000001");
		http_answer_body(a, f->obj, f->len);
	} else {
		a->status = 204;
	}
out:
	pthread_mutex_unlock(&mu);
	return E_OK;
}

static void put_bytes(storage *st, const char *key, const unsigned char *b, size_t n, err_code want)
{
	sink *s;
	assert_int_equal(storage_put(st, key, &s), E_OK);
	for (size_t at = 0; at < n;) {
		size_t k = n - at < 100000 ? n - at : 100000; /* uneven writes */
		assert_int_equal(sink_write(s, b + at, k), E_OK);
		at += k;
	}
	assert_int_equal(sink_finish(s), want);
	sink_free(s);
}

static void test_gcs_resumable(void **state)
{
	(void)state;
	gfake f = { 0 };
	http_set_test_hook(gcs_hook, &f, 0);
	setenv("WALG_GS_PREFIX", "gs://bkt/some//path/", 1);
	setenv("STORAGE_EMULATOR_HOST", "gcs.test", 1);
	setenv("GCS_MAX_CHUNK_SIZE", "1000000", 1); /* rounded down to 786432 (3 x 256 KiB) */
	storage *st;
	assert_int_equal(open_env(&st), E_OK);
	assert_string_equal(storage_describe(st), "gs://bkt/some/path");
	size_t n = 2 * 786432 + 12345;
	unsigned char *b = xmalloc(n);
	fill(b, n, 3);
	put_bytes(st, "basebackups_005/part_1.tar.lz4", b, n, E_OK);
	assert_false(f.bad);
	assert_int_equal(f.chunks, 3);
	assert_int_equal(f.len, n);
	assert_memory_equal(f.obj, b, n);
	assert_string_equal(f.last_auth, ""); /* the emulator gets no credentials */
	/* one chunk or less: one media upload */
	put_bytes(st, "wal_005/x.lz4", b, 1000, E_OK);
	assert_int_equal(f.len, 1000);
	membuf mb = { 0 };
	sink *m = membuf_sink_new(&mb);
	assert_int_equal(storage_get(st, "wal_005/x.lz4", m), E_OK);
	sink_free(m);
	assert_int_equal(mb.len, 1000);
	free(mb.data);
	storage_free(st);
	free(b);
	free(f.obj);
}

static void test_gcs_service_account(void **state)
{
	(void)state;
	gfake f = { 0 };
	EVP_PKEY *key = EVP_RSA_gen(2048);
	assert_non_null(key);
	BIO *bio = BIO_new(BIO_s_mem());
	PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL);
	char *pem;
	long pl = BIO_get_mem_data(bio, &pem);
	json_t *cred = json_pack("{s:s,s:s,s:s%,s:s}", "type", "service_account", "client_email",
							 "walc@test.iam", "private_key", pem, (size_t)pl, "token_uri",
							 "http://tok.test/token");
	char path[] = "/tmp/walc-gcs-cred-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(json_dump_file(cred, path, 0), 0);
	json_decref(cred);
	BIO_free(bio);
	f.pub = key;
	http_set_test_hook(gcs_hook, &f, 0);
	setenv("WALG_GS_PREFIX", "gs://bkt/p", 1);
	setenv("GCS_ENDPOINT", "http://gcs.test", 1);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	setenv("GCS_ENCRYPTION_KEY", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", 1);
	storage *st;
	assert_int_equal(open_env(&st), E_OK);
	assert_int_equal(f.tokens, 0); /* nothing fetched before the first request */
	put_bytes(st, "k", (const unsigned char *)"hello", 5, E_OK);
	assert_int_equal(f.tokens, 1);
	assert_string_equal(f.last_auth, "Bearer ya29.t1");
	assert_true(f.csek_seen);
	assert_non_null(strstr(f.token_form, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"));
	/* a 401 refreshes the token once and sends again */
	f.unauthorized = 1;
	assert_int_equal(storage_remove(st, "k"), E_OK);
	assert_int_equal(f.tokens, 2);
	assert_string_equal(f.last_auth, "Bearer ya29.t2");
	assert_false(f.bad);
	storage_free(st);
	/* a bad key is a configuration error naming the setting */
	setenv("GCS_ENCRYPTION_KEY", "c2hvcnQ=", 1);
	assert_int_equal(open_env(&st), E_CONFIG);
	assert_non_null(strstr(err_msg(), "GCS_ENCRYPTION_KEY"));
	unlink(path);
	EVP_PKEY_free(key);
	free(f.obj);
}

static void test_gcs_metadata(void **state)
{
	(void)state;
	gfake f = { 0 };
	http_set_test_hook(gcs_hook, &f, 0);
	setenv("WALG_GS_PREFIX", "gs://bkt/p", 1);
	setenv("GCS_ENDPOINT", "http://gcs.test", 1);
	setenv("GCE_METADATA_HOST", "meta.test:8080", 1);
	storage *st;
	assert_int_equal(open_env(&st), E_OK);
	assert_int_equal(storage_remove(st, "k"), E_OK);
	assert_int_equal(f.tokens, 1);
	assert_string_equal(f.last_auth, "Bearer ya29.t1");
	assert_false(f.bad);
	storage_free(st);
}

static void test_parsers(void **state)
{
	(void)state;
	obj_list l;
	char *next;
	const char *doc = "{\"kind\":\"storage#objects\",\"nextPageToken\":\"tok\",\"items\":[{\"name\":"
					  "\"p/wal_005/a.lz4\",\"size\":\"12\",\"updated\":\"2024-01-02T03:04:05.678Z\"}]}";
	assert_int_equal(gcs_json_list(doc, strlen(doc), &l, &next), E_OK);
	assert_int_equal(l.len, 1);
	assert_int_equal(l.items[0].size, 12);
	assert_string_equal(next, "tok");
	obj_list_free(&l);
	free(next);
	const char *bad = "{\"items\":[{\"name\":\"a\",\"size\":12}]}";
	assert_int_equal(gcs_json_list(bad, strlen(bad), &l, &next), E_CORRUPT);
	http_token t;
	const char *tok = "{\"access_token\":\"abc\",\"expires_in\":\"3600\",\"token_type\":\"Bearer\"}";
	assert_int_equal(http_token_parse(tok, strlen(tok), 1000, &t), E_OK);
	assert_int_equal(t.expires, 4600);
	http_token_free(&t);
	const char *ctl = "{\"access_token\":\"a\\nb\"}";
	assert_int_equal(http_token_parse(ctl, strlen(ctl), 0, &t), E_CORRUPT);
	az_list_page pg;
	const char *az = "<?xml version=\"1.0\"?><EnumerationResults><Blobs><Blob><Name>r/a</Name>"
					 "<Properties><Last-Modified>Tue, 02 Jan 2024 03:04:05 GMT</Last-Modified>"
					 "<Content-Length>7</Content-Length></Properties></Blob><BlobPrefix><Name>r/d/"
					 "</Name></BlobPrefix></Blobs><NextMarker>m2</NextMarker></EnumerationResults>";
	assert_int_equal(az_xml_list(az, strlen(az), &pg), E_OK);
	assert_int_equal(pg.items.len, 1);
	assert_int_equal(pg.items.items[0].size, 7);
	assert_int_equal(pg.prefixes.len, 1);
	assert_string_equal(pg.next_marker, "m2");
	az_list_page_free(&pg);
	const char *batch = "--b\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 202 Accepted\r\n\r\n"
						"--b\r\n\r\nHTTP/1.1 404 Not Found\r\n\r\n--b\r\n\r\nHTTP/1.1 403 No\r\n--b--";
	size_t ok, missing, failed;
	long first;
	assert_int_equal(az_batch_statuses(batch, strlen(batch), &ok, &missing, &failed, &first), E_OK);
	assert_int_equal(ok, 1);
	assert_int_equal(missing, 1);
	assert_int_equal(failed, 1);
	assert_int_equal(first, 403);
}

/* ------------------------------------------------------------------------------------------ */
/* Azure                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct afake {
	int tokens;
	char form[2048];
	char auth[256];
	char url[512];
	bool metadata_header;
} afake;

static err_code az_hook(void *arg, const http_request *req, const http_kvs *hdrs, http_answer *a)
{
	afake *f = arg;
	if (strstr(req->url, "/oauth2/")) {
		f->tokens++;
		snprintf(f->form, sizeof(f->form), "%.*s", (int)req->body_len, (const char *)req->body);
		snprintf(f->url, sizeof(f->url), "%s", req->url);
		f->metadata_header = http_kvs_get(hdrs, "metadata") != NULL;
		a->status = 200;
		body(a, "{\"access_token\":\"eyJ0.e30.c2ln\",\"expires_in\":\"3600\"}");
		return E_OK;
	}
	const char *au = http_kvs_get(hdrs, "authorization");
	snprintf(f->auth, sizeof(f->auth), "%s", au ? au : "");
	snprintf(f->url, sizeof(f->url), "%s", req->url);
	a->status = 202;
	return E_OK;
}

static void test_azure_config_and_ad(void **state)
{
	(void)state;
	storage *st;
	setenv("WALG_AZ_PREFIX", "azure://container/p", 1);
	assert_int_equal(open_env(&st), E_CONFIG);
	assert_non_null(strstr(err_msg(), "AZURE_STORAGE_ACCOUNT"));
	setenv("AZURE_STORAGE_ACCOUNT", "acct", 1);
	setenv("AZURE_STORAGE_ACCESS_KEY", "not base64!", 1);
	assert_int_equal(open_env(&st), E_CONFIG);
	assert_non_null(strstr(err_msg(), "AZURE_STORAGE_ACCESS_KEY"));
	unsetenv("AZURE_STORAGE_ACCESS_KEY");
	setenv("AZURE_STORAGE_SAS_TOKEN", "?sv=2021&sig=abc%3D", 1);
	afake f = { 0 };
	http_set_test_hook(az_hook, &f, 0);
	assert_int_equal(open_env(&st), E_OK);
	assert_int_equal(storage_remove(st, "wal_005/a"), E_OK);
	assert_string_equal(f.url, "https://acct.blob.core.windows.net/container/p/wal_005/a?sv=2021&sig=abc%3D");
	assert_string_equal(f.auth, "");
	storage_free(st);
	unsetenv("AZURE_STORAGE_SAS_TOKEN");

	/* workload identity: the federated token file is read at every fetch */
	char path[] = "/tmp/walc-az-token-XXXXXX";
	int fd = mkstemp(path);
	assert_int_equal(write(fd, "fed.jwt\n", 8), 8);
	close(fd);
	setenv("AZURE_FEDERATED_TOKEN_FILE", path, 1);
	setenv("AZURE_CLIENT_ID", "cid", 1);
	assert_int_equal(open_env(&st), E_CONFIG);
	assert_non_null(strstr(err_msg(), "AZURE_TENANT_ID"));
	setenv("AZURE_TENANT_ID", "tid", 1);
	setenv("AZURE_AUTHORITY_HOST", "https://login.test", 1);
	assert_int_equal(open_env(&st), E_OK);
	assert_int_equal(storage_remove(st, "a"), E_OK);
	assert_int_equal(f.tokens, 1);
	assert_string_equal(f.auth, "Bearer eyJ0.e30.c2ln");
	assert_non_null(strstr(f.form, "client_assertion=fed.jwt"));
	assert_non_null(strstr(f.form, "scope=https%3A%2F%2Fstorage.azure.com%2F.default"));
	storage_free(st);
	unlink(path);
	unsetenv("AZURE_FEDERATED_TOKEN_FILE");

	/* managed identity: the metadata endpoint, with the Metadata header */
	setenv("AZURE_IMDS_ENDPOINT", "http://imds.test/", 1);
	f.tokens = 0;
	assert_int_equal(open_env(&st), E_OK);
	assert_int_equal(storage_remove(st, "a"), E_OK);
	assert_int_equal(f.tokens, 1);
	assert_true(f.metadata_header);
	storage_free(st);
}

/* ------------------------------------------------------------------------------------------ */
/* A plain request outside the stores (the Pushgateway's)                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct pfake {
	int attempts;
	long status[4]; /* each attempt's answer; 0 refuses the connection */
	char url[256], auth[128], type[64], body[64];
} pfake;

static err_code plain_hook(void *arg, const http_request *req, const http_kvs *hdrs,
						   http_answer *a)
{
	pfake *f = arg;
	const char *au = http_kvs_get(hdrs, "authorization");
	const char *ct = http_kvs_get(hdrs, "content-type");
	snprintf(f->url, sizeof(f->url), "%s", req->url);
	snprintf(f->auth, sizeof(f->auth), "%s", au ? au : "");
	snprintf(f->type, sizeof(f->type), "%s", ct ? ct : "");
	snprintf(f->body, sizeof(f->body), "%.*s", (int)req->body_len, (const char *)req->body);
	long status = f->status[f->attempts < 4 ? f->attempts : 3];
	f->attempts++;
	a->status = status;
	a->refuse = status == 0;
	if (status >= 300)
		body(a, "<Error><Code>SlowDown</Code></Error>"); /* plain text to this client */
	return E_OK;
}

static err_code plain_send(int retries)
{
	storage_http_msg m = { .method = "POST",
						   .url = "http://us%40er:s3cr%3At@gw.test:9091/metrics/job/walc",
						   .content_type = "text/plain; version=0.0.4", .body = "up 1\n",
						   .body_len = 5, .max_retries = retries, .attempt_s = 2 };
	return storage_http_send(&m, NULL, NULL);
}

static void test_plain_send(void **state)
{
	(void)state;
	/* a 503 and a refused connection are retried; the user and password go as Basic auth */
	pfake f = { .status = { 503, 0, 200 } };
	http_set_test_hook(plain_hook, &f, 0);
	assert_int_equal(plain_send(3), E_OK);
	assert_int_equal(f.attempts, 3);
	assert_string_equal(f.url, "http://gw.test:9091/metrics/job/walc");
	char *basic = http_base64("us@er:s3cr:t", strlen("us@er:s3cr:t"));
	char want[128];
	snprintf(want, sizeof(want), "Basic %s", basic);
	free(basic);
	assert_string_equal(f.auth, want);
	assert_string_equal(f.type, "text/plain; version=0.0.4");
	assert_string_equal(f.body, "up 1\n");

	/* a 400 is the answer, not a reason to ask again, even with an S3 throttling code */
	f = (pfake){ .status = { 400 } };
	assert_int_equal(plain_send(3), E_IO);
	assert_int_equal(f.attempts, 1);
	assert_string_equal(err_msg(), "POST http://gw.test:9091/metrics/job/walc: HTTP 400");
	err_clear();

	/* retries run out: the last error is named, never the password */
	f = (pfake){ .status = { 502, 502, 502, 502 } };
	assert_int_equal(plain_send(1), E_IO);
	assert_int_equal(f.attempts, 2);
	assert_non_null(strstr(err_msg(), "gave up after 2 attempts; last error: HTTP 502"));
	assert_null(strstr(err_msg(), "s3cr"));
	err_clear();
	http_set_test_hook(NULL, NULL, 0);

	char *shown = storage_url_shown("https://u:p@gw.test/x");
	assert_string_equal(shown, "https://gw.test/x");
	free(shown);
	shown = storage_url_shown("gw.test:9091");
	assert_string_equal(shown, "http://gw.test:9091/");
	free(shown);
	shown = storage_url_shown("no url");
	assert_string_equal(shown, "(an unparsable URL)");
	free(shown);
	storage_http_msg bad = { .method = "PUT", .url = "no url" };
	assert_int_equal(storage_http_send(&bad, NULL, NULL), E_CONFIG);
	assert_string_equal(err_msg(), "PUT: cannot parse the URL");
	err_clear();
}

/* A run that a signal ended still reports its failure (in a child: cancellation is for good). */
static void test_plain_send_after_signal(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pfake f = { .status = { 200 } };
		http_set_test_hook(plain_hook, &f, 0);
		cancel_request(15);
		_exit(plain_send(0) == E_OK && f.attempts == 1 ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	log_setup(LOG_ERROR, false, "test_objstore");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_gcs_resumable, clean),
		cmocka_unit_test_setup(test_gcs_service_account, clean),
		cmocka_unit_test_setup(test_gcs_metadata, clean),
		cmocka_unit_test_setup(test_parsers, clean),
		cmocka_unit_test_setup(test_azure_config_and_ad, clean),
		cmocka_unit_test_setup(test_plain_send, clean),
		cmocka_unit_test_setup(test_plain_send_after_signal, clean),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
