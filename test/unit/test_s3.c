/*
 * Unit tests for the S3 backend without a server: SigV4 (against AWS's published example),
 * URI encoding, S3 XML, dates, configuration checks, and put/get/list/remove through a
 * scripted fake that answers every request (multipart, abort on a failed part, retries).
 *
 * `test_s3 --dump-signed` prints, one JSON object per line, the requests walc signs for fixed
 * credentials and date; test/integration/s3_sigcheck.py re-signs each with botocore.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "cmd/walc/settings/config.h"
#include "internal/storage/s3/s3.h"

/* ------------------------------------------------------------------------------------------ */
/* Environment                                                                                */
/* ------------------------------------------------------------------------------------------ */

static const char *const s3_vars[] = {
	"AWS_ENDPOINT", "WALG_AWS_ENDPOINT", "AWS_REGION", "AWS_S3_FORCE_PATH_STYLE", "S3_SSE",
	"WALG_S3_SSE", "WALE_S3_SSE", "S3_SSE_KMS_ID", "S3_STORAGE_CLASS", "S3_CA_CERT_FILE",
	"WALG_S3_CA_CERT_FILE", "S3_MAX_PART_SIZE", "S3_MAX_RETRIES", "AWS_ACCESS_KEY_ID",
	"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY", "AWS_SECRET_KEY",
	"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_SHARED_CREDENTIALS_FILE", "AWS_PROFILE",
	"AWS_EC2_METADATA_DISABLED", "S3_CONNECT_TIMEOUT", "S3_LOW_SPEED_TIMEOUT", "WALG_S3_MAX_RETRIES",
	"S3_SSE_C", "AWS_STS_ENDPOINT", NULL,
};

static int clean_env(void **state)
{
	(void)state;
	for (size_t i = 0; s3_vars[i]; i++)
		unsetenv(s3_vars[i]);
	setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("AWS_SECRET_ACCESS_KEY", " secret/with+chars= ", 1);
	setenv("AWS_ENDPOINT", "http://127.0.0.1:9", 1);
	setenv("HOME", "/nonexistent", 1);
	err_clear();
	http_set_test_hook(NULL, NULL, 0);
	return 0;
}

/* The S3 storage as walc opens it: the settings read by config_load from the environment. */
static err_code open_s3(const char *prefix, storage **st)
{
	config cfg;
	*st = NULL;
	setenv("WALG_S3_PREFIX", prefix, 1);
	setenv("WALG_UPLOAD_CONCURRENCY", "3", 1);
	err_code rc = config_load(&cfg, true);
	if (rc == E_OK)
		rc = storage_s3_open(&cfg.storage, st);
	config_free(&cfg);
	unsetenv("WALG_S3_PREFIX");
	unsetenv("WALG_UPLOAD_CONCURRENCY");
	return rc;
}

/* The credential chain as the S3 storage starts it, from the environment's settings. */
static err_code credprov_from_env(s3_credprov *p, http_client *h)
{
	config cfg;
	err_code rc = config_load(&cfg, false);
	if (rc == E_OK)
		rc = s3_credprov_init(p, &cfg.storage.s3, "us-east-1", h);
	config_free(&cfg);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* SigV4                                                                                      */
/* ------------------------------------------------------------------------------------------ */

static void test_uri_encode(void **state)
{
	(void)state;
	char *e = http_uri_encode("a b+c=d~e/ü", false);
	assert_string_equal(e, "a%20b%2Bc%3Dd~e%2F%C3%BC");
	free(e);
	e = http_uri_encode("wal_005/0000.lz4", true);
	assert_string_equal(e, "wal_005/0000.lz4");
	free(e);
	char *d = http_uri_decode("a%20b%2Bc%3d");
	assert_string_equal(d, "a b+c=");
	free(d);
	assert_null(http_uri_decode("bad%2"));
	assert_null(http_uri_decode("bad%zz"));
}

static void test_canonical_query(void **state)
{
	(void)state;
	http_kvs q = { 0 };
	http_kvs_add(&q, "prefix", "a b/");
	http_kvs_add(&q, "list-type", "2");
	http_kvs_add(&q, "continuation-token", "x+y=");
	http_kvs_add(&q, "uploads", "");
	char *c = s3_canonical_query(&q);
	assert_string_equal(c, "continuation-token=x%2By%3D&list-type=2&prefix=a%20b%2F&uploads=");
	free(c);
	http_kvs_free(&q);
	c = s3_canonical_query(NULL);
	assert_string_equal(c, "");
	free(c);
}

/* AWS's documented example "GET Object" (Signature Version 4, S3 API reference). */
static void test_sign_aws_example(void **state)
{
	(void)state;
	s3_creds c = { (char *)(uintptr_t) "AKIAIOSFODNN7EXAMPLE",
				   (char *)(uintptr_t) "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", NULL, 0, "t" };
	http_kvs h = { 0 };
	http_kvs_add(&h, "Host", "examplebucket.s3.amazonaws.com");
	http_kvs_add(&h, "Range", "bytes=0-9");
	char *canon = NULL;
	s3_sign(&c, "us-east-1", "s3", 1369353600 /* 2013-05-24T00:00:00Z */, "GET", "/test.txt",
			NULL, &h, S3_EMPTY_SHA256, &canon);
	assert_string_equal(http_kvs_get(&h, "authorization"),
						"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
						"aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
						"Signature="
						"f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	assert_non_null(strstr(canon, "x-amz-date:20130524T000000Z\n"));
	free(canon);
	http_kvs_free(&h);

	/* With a session token the token header is added and signed. */
	c.token = (char *)(uintptr_t) "TOKEN";
	s3_sign(&c, "us-east-1", "s3", 1369353600, "GET", "/test.txt", NULL, &h, S3_UNSIGNED_PAYLOAD,
			NULL);
	assert_string_equal(http_kvs_get(&h, "x-amz-security-token"), "TOKEN");
	assert_non_null(strstr(http_kvs_get(&h, "authorization"), "x-amz-security-token"));
	http_kvs_free(&h);
	assert_true(http_header_is_secret("Authorization"));
	assert_true(http_header_is_secret("X-Amz-Security-Token"));
	assert_false(http_header_is_secret("x-amz-date"));
}

/* ------------------------------------------------------------------------------------------ */
/* XML and dates                                                                              */
/* ------------------------------------------------------------------------------------------ */

static void test_xml_list(void **state)
{
	(void)state;
	const char *doc =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
		"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
		"<Name>b</Name><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
		"<Contents><Key>p/a%20b%2Bc</Key><LastModified>2024-01-02T03:04:05.678Z</LastModified>"
		"<ETag>&quot;x&quot;</ETag><Size>12</Size></Contents>"
		"<Contents><Key>p/%C3%BC</Key><LastModified>2024-01-02T03:04:06Z</LastModified>"
		"<Size>0</Size></Contents>"
		"<CommonPrefixes><Prefix>p/d/</Prefix></CommonPrefixes>"
		"<NextContinuationToken>tok+/=</NextContinuationToken></ListBucketResult>";
	s3_list_page pg;
	assert_int_equal(s3_xml_list(doc, strlen(doc), &pg), E_OK);
	assert_int_equal(pg.items.len, 2);
	assert_string_equal(pg.items.items[0].key, "p/a b+c");
	assert_int_equal(pg.items.items[0].size, 12);
	assert_int_equal(pg.items.items[0].mtime, 1704164645);
	assert_int_equal(pg.items.items[0].mtime_nsec, 678000000);
	assert_string_equal(pg.items.items[1].key, "p/\xc3\xbc");
	assert_true(pg.truncated);
	assert_string_equal(pg.next_token, "tok+/=");
	s3_list_page_free(&pg);

	/* Without EncodingType the keys are taken as they are. */
	const char *raw = "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a%20b"
					  "</Key><Size>1</Size><LastModified>2024-01-02T03:04:06Z</LastModified>"
					  "</Contents></ListBucketResult>";
	assert_int_equal(s3_xml_list(raw, strlen(raw), &pg), E_OK);
	assert_string_equal(pg.items.items[0].key, "a%20b");
	s3_list_page_free(&pg);

	const char *trunc = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
	assert_int_equal(s3_xml_list(trunc, strlen(trunc), &pg), E_CORRUPT);
	const char *badsize = "<ListBucketResult><Contents><Key>a</Key><Size>x</Size></Contents>"
						  "</ListBucketResult>";
	assert_int_equal(s3_xml_list(badsize, strlen(badsize), &pg), E_CORRUPT);
}

static void test_xml_hostile(void **state)
{
	(void)state;
	const char *dtd = "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">]>"
					  "<Error><Code>&lol;</Code></Error>";
	s3_list_page pg;
	assert_int_equal(s3_xml_list(dtd, strlen(dtd), &pg), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "DOCTYPE"));
	char deep[2000] = "";
	for (int i = 0; i < 40; i++)
		strcat(deep, "<a>");
	assert_int_equal(s3_xml_list(deep, strlen(deep), &pg), E_CORRUPT);
	size_t big = XML_TEXT_MAX + 100;
	char *doc = xmalloc(big + 64);
	strcpy(doc, "<ListBucketResult><Name>");
	memset(doc + strlen(doc), 'x', big);
	strcpy(doc + 24 + big, "</Name></ListBucketResult>");
	assert_int_equal(s3_xml_list(doc, strlen(doc), &pg), E_CORRUPT);
	free(doc);
	assert_int_equal(s3_xml_list("<a>", 3, &pg), E_CORRUPT);
}

static void test_xml_misc(void **state)
{
	(void)state;
	char code[64], msg[256];
	const char *e = "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>"
					"<Message>The request\nsignature</Message></Error>";
	assert_true(xml_error(e, strlen(e), code, sizeof(code), msg, sizeof(msg)));
	assert_string_equal(code, "SignatureDoesNotMatch");
	assert_string_equal(msg, "The request signature");
	assert_false(xml_error("junk", 4, code, sizeof(code), msg, sizeof(msg)));
	assert_int_equal(err_last(), E_OK); /* a bad error body does not replace the error */

	char *id;
	const char *u = "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
					"<UploadId>2~abc</UploadId></InitiateMultipartUploadResult>";
	assert_int_equal(s3_xml_upload_id(u, strlen(u), &id), E_OK);
	assert_string_equal(id, "2~abc");
	free(id);
	assert_int_equal(s3_xml_upload_id("<X/>", 4, &id), E_CORRUPT);

	size_t n;
	char *first;
	const char *d = "<DeleteResult><Deleted><Key>a</Key></Deleted><Error><Key>b</Key><Code>"
					"AccessDenied</Code></Error><Error><Key>c</Key><Code>X</Code></Error>"
					"</DeleteResult>";
	assert_int_equal(s3_xml_delete_errors(d, strlen(d), &n, &first), E_OK);
	assert_int_equal(n, 2);
	assert_string_equal(first, "b: AccessDenied");
	free(first);

	s3_creds c;
	const char *sts = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>"
					  "<Credentials><AccessKeyId>AK</AccessKeyId><SecretAccessKey>SK"
					  "</SecretAccessKey><SessionToken>TK</SessionToken><Expiration>"
					  "2030-01-01T00:00:00Z</Expiration></Credentials>"
					  "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
	assert_int_equal(s3_xml_sts_creds(sts, strlen(sts), &c), E_OK);
	assert_string_equal(c.access_key, "AK");
	assert_string_equal(c.secret_key, "SK");
	assert_string_equal(c.token, "TK");
	assert_int_equal(c.expires, 1893456000);
	s3_creds_free(&c);
	assert_int_equal(s3_xml_sts_creds("<A/>", 4, &c), E_CORRUPT);
}

static void test_dates(void **state)
{
	(void)state;
	time_t t;
	long ns;
	assert_true(http_parse_iso8601("2013-05-24T00:00:00Z", &t, &ns));
	assert_int_equal(t, 1369353600);
	assert_int_equal(ns, 0);
	assert_true(http_parse_iso8601("2013-05-24T00:00:00.5Z", &t, &ns));
	assert_int_equal(ns, 500000000);
	assert_false(http_parse_iso8601("2013-05-24 00:00:00Z", &t, &ns));
	assert_false(http_parse_iso8601("2013-13-24T00:00:00Z", &t, &ns));
	assert_false(http_parse_iso8601("2013-05-24T00:00:00", &t, &ns));
	assert_true(http_parse_date("Fri, 24 May 2013 00:00:00 GMT", &t));
	assert_int_equal(t, 1369353600);
	assert_false(http_parse_date("yesterday", &t));
}

/* ------------------------------------------------------------------------------------------ */
/* Configuration                                                                              */
/* ------------------------------------------------------------------------------------------ */

static void expect_config_error(const char *prefix, const char *needle)
{
	storage *st = NULL;
	assert_int_equal(open_s3(prefix, &st), E_CONFIG);
	assert_null(st);
	if (strstr(err_msg(), needle) == NULL)
		fail_msg("expected \"%s\" in \"%s\"", needle, err_msg());
}

static void test_config(void **state)
{
	(void)state;
	storage *st;
	assert_int_equal(open_s3("s3://bucket/some/path/", &st), E_OK);
	assert_string_equal(storage_describe(st), "s3://bucket/some/path");
	storage_free(st);
	assert_int_equal(open_s3("s3://bucket", &st), E_OK);
	assert_string_equal(storage_describe(st), "s3://bucket/");
	storage_free(st);

	expect_config_error("gs://bucket", "WALG_S3_PREFIX");
	expect_config_error("s3://bu{ket/x", "bad bucket name");
	setenv("AWS_ENDPOINT", "ftp://host", 1);
	expect_config_error("s3://b/p", "AWS_ENDPOINT");
	setenv("AWS_ENDPOINT", "http://host:99999", 1);
	expect_config_error("s3://b/p", "bad port");
	setenv("AWS_ENDPOINT", "http://host/path", 1);
	expect_config_error("s3://b/p", "without a path");
	unsetenv("AWS_ENDPOINT");
	setenv("WALG_AWS_ENDPOINT", "http://h:1", 1);
	assert_int_equal(open_s3("s3://b/p", &st), E_OK);
	storage_free(st);

	setenv("S3_SSE", "DES", 1);
	expect_config_error("s3://b/p", "S3_SSE: expected AES256 or aws:kms");
	setenv("S3_SSE", "aws:kms", 1);
	expect_config_error("s3://b/p", "S3_SSE_KMS_ID");
	unsetenv("S3_SSE");
	setenv("WALE_S3_SSE", "AES256", 1);
	assert_int_equal(open_s3("s3://b/p", &st), E_OK);
	storage_free(st);
	unsetenv("WALE_S3_SSE");
	setenv("S3_SSE_KMS_ID", "key", 1);
	expect_config_error("s3://b/p", "S3_SSE is not");
	unsetenv("S3_SSE_KMS_ID");

	setenv("S3_MAX_PART_SIZE", "1000", 1);
	expect_config_error("s3://b/p", "S3_MAX_PART_SIZE: expected a whole number from 5242880");
	unsetenv("S3_MAX_PART_SIZE");
	setenv("WALG_S3_MAX_RETRIES", "-1", 1);
	expect_config_error("s3://b/p", "WALG_S3_MAX_RETRIES");
	unsetenv("WALG_S3_MAX_RETRIES");
	setenv("S3_STORAGE_CLASS", "cold storage", 1);
	expect_config_error("s3://b/p", "S3_STORAGE_CLASS");
	unsetenv("S3_STORAGE_CLASS");
	setenv("S3_CA_CERT_FILE", "/nonexistent/ca.pem", 1);
	expect_config_error("s3://b/p", "S3_CA_CERT_FILE: cannot read");
	unsetenv("S3_CA_CERT_FILE");
	setenv("AWS_S3_FORCE_PATH_STYLE", "maybe", 1);
	expect_config_error("s3://b/p", "AWS_S3_FORCE_PATH_STYLE");
	unsetenv("AWS_S3_FORCE_PATH_STYLE");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	expect_config_error("s3://b/p", "AWS_SECRET_ACCESS_KEY is not");
}

static void test_shared_credentials_file(void **state)
{
	(void)state;
	char path[] = "/tmp/walc-s3-creds-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *text = "[default]\naws_access_key_id = DEF\naws_secret_access_key = defsecret\n"
					   "[prod]\n aws_access_key_id=PROD \naws_secret_access_key= prodsecret\n"
					   "aws_session_token = tok\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	setenv("AWS_PROFILE", "prod", 1);
	http_client h;
	http_retry rt = { 0, 1, 1, 1, 1, 0 };
	assert_int_equal(http_client_init(&h, NULL, NULL, &rt), E_OK);
	s3_credprov p;
	assert_int_equal(credprov_from_env(&p, &h), E_OK);
	s3_creds c;
	assert_int_equal(s3_credprov_get(&p, false, &c), E_OK);
	assert_string_equal(c.access_key, "PROD");
	assert_string_equal(c.secret_key, "prodsecret");
	assert_string_equal(c.token, "tok");
	s3_creds_free(&c);
	s3_credprov_free(&p);
	setenv("AWS_PROFILE", "missing", 1);
	assert_int_equal(credprov_from_env(&p, &h), E_CONFIG);
	assert_non_null(strstr(err_msg(), "AWS_PROFILE"));
	s3_credprov_free(&p);
	unsetenv("AWS_PROFILE");
	assert_int_equal(credprov_from_env(&p, &h), E_OK);
	assert_int_equal(s3_credprov_get(&p, false, &c), E_OK);
	assert_string_equal(c.access_key, "DEF");
	s3_creds_free(&c);
	s3_credprov_free(&p);
	http_client_free(&h);
	unlink(path);
}

/* ------------------------------------------------------------------------------------------ */
/* A scripted fake S3                                                                         */
/* ------------------------------------------------------------------------------------------ */

typedef struct fake {
	char log[64][160];
	int n;
	int fail_part;	   /* part number answered 403 */
	int busy;		   /* answer this many 503 SlowDown first */
	unsigned char *obj; /* the object stored by PUT or Complete */
	size_t objlen;
	unsigned char *parts[16];
	size_t partlen[16];
	const char *list_pages[3];
	int list_at;
	bool unsigned_seen;
	bool no_bucket;
	bool discard; /* several uploads at once: parts are counted, not kept */
	int parts_seen;
} fake;

static void set_body(http_answer *r, const char *s)
{
	http_answer_body(r, s, strlen(s));
}

static void set_header(http_answer *r, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_header(http_answer *r, const char *name, const char *fmt, ...)
{
	char v[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v, sizeof(v), fmt, ap);
	va_end(ap);
	http_kvs_add(&r->headers, name, v);
}

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;

static err_code fake_answer(fake *f, const http_request *req, const http_kvs *hdrs, http_answer *r);

/* Parts arrive from several uploader threads at once: one at a time here. */
static err_code fake_hook(void *arg, const http_request *req, const http_kvs *hdrs, http_answer *r)
{
	pthread_mutex_lock(&fake_mu);
	err_code rc = fake_answer(arg, req, hdrs, r);
	pthread_mutex_unlock(&fake_mu);
	return rc;
}

static err_code fake_answer(fake *f, const http_request *req, const http_kvs *hdrs, http_answer *r)
{
	const char *q = strchr(req->url, '?');
	if (f->n < 64)
		snprintf(f->log[f->n++], 160, "%s %s", req->method, strstr(req->url, "/k") ? "key" : "bucket");
	if (http_kvs_get(hdrs, "authorization") == NULL)
		f->unsigned_seen = true;
	if (f->busy > 0) {
		f->busy--;
		r->status = 503;
		set_body(r, "<Error><Code>SlowDown</Code></Error>");
		return E_OK;
	}
	if (strcmp(req->method, "POST") == 0 && q && strstr(q, "uploads")) {
		r->status = 200;
		set_body(r, "<InitiateMultipartUploadResult><UploadId>UP1</UploadId>"
					"</InitiateMultipartUploadResult>");
	} else if (strcmp(req->method, "PUT") == 0 && q && strstr(q, "partNumber=")) {
		int num = atoi(strstr(q, "partNumber=") + 11);
		if (num == f->fail_part) {
			r->status = 403;
			set_body(r, "<Error><Code>AccessDenied</Code></Error>");
			return E_OK;
		}
		if (num < 1 || num > 16)
			return err_set(E_FAIL, "fake: part %d out of range", num);
		r->status = 200;
		set_header(r, "etag", "\"etag%d\"", num);
		f->parts_seen++;
		if (f->discard)
			return E_OK;
		f->parts[num - 1] = xmalloc(req->body_len);
		memcpy(f->parts[num - 1], req->body, req->body_len);
		f->partlen[num - 1] = req->body_len;
	} else if (strcmp(req->method, "POST") == 0 && q && strstr(q, "uploadId=") && f->discard) {
		r->status = 200;
		set_body(r, "<CompleteMultipartUploadResult/>");
	} else if (strcmp(req->method, "POST") == 0 && q && strstr(q, "uploadId=")) {
		const char *b = req->body;
		free(f->obj);
		f->obj = NULL;
		f->objlen = 0;
		for (int i = 1; i <= 16; i++) {
			char want[64];
			snprintf(want, sizeof(want), "<PartNumber>%d</PartNumber><ETag>&quot;etag%d", i, i);
			if (strstr(b, want) == NULL)
				break;
			f->obj = xrealloc(f->obj, f->objlen + f->partlen[i - 1]);
			memcpy(f->obj + f->objlen, f->parts[i - 1], f->partlen[i - 1]);
			f->objlen += f->partlen[i - 1];
		}
		r->status = 200;
		set_body(r, "<CompleteMultipartUploadResult/>");
	} else if (strcmp(req->method, "DELETE") == 0) {
		r->status = 204;
	} else if (strcmp(req->method, "PUT") == 0) {
		free(f->obj);
		f->obj = xmalloc(req->body_len + 1);
		if (req->body_len > 0)
			memcpy(f->obj, req->body, req->body_len);
		f->objlen = req->body_len;
		r->status = 200;
		set_header(r, "etag", "\"e\"");
	} else if (strcmp(req->method, "GET") == 0 && q && strstr(q, "list-type=2")) {
		r->status = 200;
		set_body(r, f->list_pages[f->list_at++]);
	} else if (strcmp(req->method, "GET") == 0) {
		if (f->obj == NULL) {
			r->status = 404;
			set_body(r, "<Error><Code>NoSuchKey</Code></Error>");
			return E_OK;
		}
		r->status = 200;
		http_answer_body(r, f->obj, f->objlen);
		return E_OK;
	} else if (strcmp(req->method, "HEAD") == 0 && strstr(req->url, "/k") == NULL) {
		r->status = f->no_bucket ? 404 : 200; /* HeadBucket */
	} else if (strcmp(req->method, "HEAD") == 0) {
		r->status = f->obj ? 200 : 404;
		set_header(r, "content-length", "%zu", f->objlen);
	}
	return E_OK;
}

static void fake_free(fake *f)
{
	free(f->obj);
	for (int i = 0; i < 16; i++)
		free(f->parts[i]);
}

static bool logged(const fake *f, const char *what)
{
	for (int i = 0; i < f->n; i++)
		if (strcmp(f->log[i], what) == 0)
			return true;
	return false;
}

static void test_put_get_single(void **state)
{
	(void)state;
	fake f = { 0 };
	http_set_test_hook(fake_hook, &f, 0);
	storage *st;
	assert_int_equal(open_s3("s3://b/root", &st), E_OK);
	sink *s;
	assert_int_equal(storage_put(st, "k/a", &s), E_OK);
	assert_int_equal(sink_write(s, "hello", 5), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_int_equal(f.n, 1);
	assert_string_equal(f.log[0], "PUT key");
	assert_memory_equal(f.obj, "hello", 5);

	membuf mb = { 0 };
	sink *m = membuf_sink_new(&mb);
	assert_int_equal(storage_get(st, "k/a", m), E_OK);
	sink_free(m);
	assert_int_equal(mb.len, 5);
	free(mb.data);
	obj_info info;
	assert_int_equal(storage_stat(st, "k/a", &info), E_OK);
	assert_int_equal(info.size, 5);

	/* An empty object is one PUT of nothing. */
	assert_int_equal(storage_put(st, "k/empty", &s), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_int_equal(f.objlen, 0);
	assert_int_equal(storage_remove(st, "k/a"), E_OK);
	storage_free(st);
	fake_free(&f);
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)((i * 2654435761u + seed) >> 13);
}

/* Writes data to s in pieces that straddle part boundaries, publishes it, and checks that the
 * fake holds exactly that object. */
static void write_uneven(sink *s, const unsigned char *data, size_t n, size_t piece, const fake *f)
{
	for (size_t at = 0; at < n;) {
		size_t w = piece < n - at ? piece : n - at;
		assert_int_equal(sink_write(s, data + at, w), E_OK);
		at += w;
	}
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_int_equal(f->objlen, n);
	assert_memory_equal(f->obj, data, n);
}

static void test_multipart(void **state)
{
	(void)state;
	fake f = { 0 };
	http_set_test_hook(fake_hook, &f, 0);
	setenv("S3_MAX_PART_SIZE", "5242880", 1);
	storage *st;
	assert_int_equal(open_s3("s3://b/root", &st), E_OK);
	size_t n = 5242880 * 3 + 12345;
	unsigned char *data = xmalloc(n);
	fill(data, n, 1);
	sink *s;
	assert_int_equal(storage_put(st, "k/big", &s), E_OK);
	write_uneven(s, data, n, 777777, &f);
	assert_true(logged(&f, "POST key"));
	assert_false(logged(&f, "DELETE key"));

	/* Exactly one part's worth: a single PUT. */
	f.n = 0;
	assert_int_equal(storage_put(st, "k/one", &s), E_OK);
	assert_int_equal(sink_write(s, data, 5242880), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_int_equal(f.n, 1);
	assert_string_equal(f.log[0], "PUT key");

	/* A failing part: the upload is aborted and nothing is completed. */
	fake g = { 0 };
	g.fail_part = 2;
	http_set_test_hook(fake_hook, &g, 0);
	assert_int_equal(storage_put(st, "k/bad", &s), E_OK);
	err_code rc = sink_write(s, data, n);
	if (rc == E_OK)
		rc = sink_finish(s);
	assert_int_equal(rc, E_IO);
	assert_non_null(strstr(err_msg(), "AccessDenied"));
	assert_non_null(strstr(err_msg(), "bucket b"));
	sink_free(s);
	assert_true(logged(&g, "DELETE key"));
	assert_null(g.obj);

	/* Freed unfinished after parts went up: aborted too. */
	fake h = { 0 };
	http_set_test_hook(fake_hook, &h, 0);
	assert_int_equal(storage_put(st, "k/gone", &s), E_OK);
	assert_int_equal(sink_write(s, data, n), E_OK);
	sink_free(s);
	assert_true(logged(&h, "DELETE key"));
	assert_null(h.obj);

	storage_free(st);
	free(data);
	fake_free(&f);
	fake_free(&g);
	fake_free(&h);
	unsetenv("S3_MAX_PART_SIZE");
}

/* A long stream's parts: 5 MiB while S3's 10,000-part limit leaves room, then growing. */
static void test_multipart_long(void **state)
{
	(void)state;
	fake f = { 0 };
	http_set_test_hook(fake_hook, &f, 0);
	storage *st;
	assert_int_equal(open_s3("s3://b/root", &st), E_OK); /* S3_MAX_PART_SIZE: 20 MiB */
	const size_t mib = 1048576;
	size_t n = 50 * mib + 123;
	unsigned char *data = xmalloc(n);
	fill(data, n, 7);
	sink *s;
	assert_int_equal(storage_put_long(st, "k/part", &s), E_OK);
	write_uneven(s, data, n, 3000001, &f);
	for (int i = 0; i < 10; i++)
		assert_int_equal(f.partlen[i], 5 * mib);
	assert_int_equal(f.partlen[10], 123);
	assert_null(f.parts[11]);

	/* The schedule: 5 MiB for 500 parts, 10 for the next 500, then the part size; 10,000
	 * parts still hold 183 GiB. */
	http_upload_cfg cfg = { .part_size = 20 * mib, .first_part = 5 * mib, .max_parts = 10000 };
	assert_int_equal(http_part_size_after(&cfg, 0), 5 * mib);
	assert_int_equal(http_part_size_after(&cfg, 499), 5 * mib);
	assert_int_equal(http_part_size_after(&cfg, 500), 10 * mib);
	assert_int_equal(http_part_size_after(&cfg, 1000), 20 * mib);
	assert_int_equal(http_part_size_after(&cfg, 9999), 20 * mib);
	uint64_t total = 0;
	for (int i = 0; i < cfg.max_parts; i++)
		total += http_part_size_after(&cfg, i);
	assert_int_equal(total, 187500 * mib);
	cfg.first_part = 0; /* a plain put: every part the part size */
	assert_int_equal(http_part_size_after(&cfg, 0), 20 * mib);

	/* A long stream that stays short is still one PUT; so is a plain put of 12 MiB (WAL). */
	for (int i = 0; i < 2; i++) {
		f.n = 0;
		size_t len = i == 0 ? 4 * mib : 12 * mib;
		assert_int_equal(i == 0 ? storage_put_long(st, "k/short", &s) : storage_put(st, "k/wal", &s),
						 E_OK);
		write_uneven(s, data, len, len, &f);
		assert_int_equal(f.n, 1);
		assert_string_equal(f.log[0], "PUT key");
	}

	storage_free(st);
	free(data);
	fake_free(&f);
}

/*
 * Uploads that others wait on never wait on the others' buffers: with the whole budget held
 * by the full parts of four uploads that have not gone on, a fifth still goes on, in its own
 * buffer once its first part is up (files_metadata.json is written while the packers that
 * feed it hold such parts).
 */
static void test_multipart_budget_spent(void **state)
{
	(void)state;
	fake f = { .discard = true };
	http_set_test_hook(fake_hook, &f, 0);
	storage *st;
	assert_int_equal(open_s3("s3://b/root", &st), E_OK); /* a 20 MiB budget */
	const size_t part = 5 * 1048576;
	unsigned char *data = xmalloc(3 * part);
	fill(data, 3 * part, 3);
	sink *held[4], *s;
	char key[32];
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k/held%d", i);
		assert_int_equal(storage_put_long(st, key, &held[i]), E_OK);
		/* part 1 goes up from the upload's own buffer; part 2 fills a budget buffer and waits */
		assert_int_equal(sink_write(held[i], data, 2 * part), E_OK);
	}
	alarm(60); /* a deadlock fails the test instead of hanging it */
	assert_int_equal(storage_put_long(st, "k/free", &s), E_OK);
	assert_int_equal(sink_write(s, data, 3 * part), E_OK);
	assert_int_equal(sink_write(s, data, 3 * part), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	alarm(0);
	sink_free(s);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(sink_finish(held[i]), E_OK);
		sink_free(held[i]);
	}
	assert_int_equal(f.parts_seen, 4 * 2 + 6);
	storage_free(st);
	free(data);
	fake_free(&f);
}

static void test_retry_and_errors(void **state)
{
	(void)state;
	fake f = { 0 };
	f.busy = 2;
	http_set_test_hook(fake_hook, &f, 0);
	storage *st;
	assert_int_equal(open_s3("s3://b/root", &st), E_OK);
	sink *s;
	assert_int_equal(storage_put(st, "k/a", &s), E_OK);
	assert_int_equal(sink_write(s, "x", 1), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	assert_int_equal(f.n, 3); /* two SlowDown, then stored */

	setenv("S3_MAX_RETRIES", "1", 1);
	storage *st2;
	assert_int_equal(open_s3("s3://b/root", &st2), E_OK);
	f.busy = 5;
	f.n = 0;
	assert_int_equal(storage_put(st2, "k/a", &s), E_OK);
	assert_int_equal(sink_finish(s), E_IO);
	assert_non_null(strstr(err_msg(), "SlowDown"));
	sink_free(s);
	assert_int_equal(f.n, 2);
	unsetenv("S3_MAX_RETRIES");
	storage_free(st2);

	f.busy = 0;
	free(f.obj);
	f.obj = NULL;
	membuf mb = { 0 };
	sink *m = membuf_sink_new(&mb);
	assert_int_equal(storage_get(st, "k/none", m), E_NOTFOUND);
	sink_free(m);
	obj_info info;
	assert_int_equal(storage_stat(st, "k/none", &info), E_NOTFOUND);
	storage_free(st);

	/* A HEAD 404 for a missing bucket is an error, not a missing object. */
	f.no_bucket = true;
	assert_int_equal(open_s3("s3://b/root", &st), E_OK);
	assert_int_equal(storage_stat(st, "k/none", &info), E_IO);
	assert_non_null(strstr(err_msg(), "NoSuchBucket"));
	storage_free(st);
	fake_free(&f);
}

static void test_list_pages(void **state)
{
	(void)state;
	fake f = { 0 };
	f.list_pages[0] = "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>root/"
					  "wal_005/a</Key><Size>1</Size><LastModified>2024-01-02T03:04:06Z"
					  "</LastModified></Contents><Contents><Key>root/wal_005/</Key><Size>0</Size>"
					  "<LastModified>2024-01-02T03:04:06Z</LastModified></Contents>"
					  "<NextContinuationToken>t1</NextContinuationToken></ListBucketResult>";
	f.list_pages[1] = "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>root/"
					  "wal_005/b</Key><Size>2</Size><LastModified>2024-01-02T03:04:06Z"
					  "</LastModified></Contents></ListBucketResult>";
	http_set_test_hook(fake_hook, &f, 0);
	storage *st;
	assert_int_equal(open_s3("s3://b/root/", &st), E_OK);
	obj_list l;
	assert_int_equal(storage_list(st, "wal_005", false, &l), E_OK);
	assert_int_equal(l.len, 2);
	assert_string_equal(l.items[0].key, "wal_005/a");
	assert_string_equal(l.items[1].key, "wal_005/b");
	assert_int_equal(l.items[1].size, 2);
	obj_list_free(&l);
	storage_free(st);
	fake_free(&f);
}

/* A hook that records the last request's URL and headers, and answers as a bucket in
 * eu-central-1 would to requests signed for us-east-1. */
typedef struct rec {
	char url[512];
	char auth[512];
	char ssec[128];
	int n;
} rec;

static err_code rec_hook(void *arg, const http_request *req, const http_kvs *hdrs, http_answer *r)
{
	rec *x = arg;
	x->n++;
	snprintf(x->url, sizeof(x->url), "%s %s", req->method, req->url);
	const char *a = http_kvs_get(hdrs, "authorization");
	snprintf(x->auth, sizeof(x->auth), "%s", a ? a : "");
	const char *k = http_kvs_get(hdrs, "x-amz-server-side-encryption-customer-key");
	snprintf(x->ssec, sizeof(x->ssec), "%s", k ? k : "");
	set_header(r, "x-amz-bucket-region", "eu-central-1");
	r->status = strstr(x->auth, "/us-east-1/") ? 301 : 200;
	if (strcmp(req->method, "GET") == 0 && r->status == 200)
		set_body(r, "x");
	return E_OK;
}

/* An empty object stored as "k", through the hook. */
static void put_k(storage *st)
{
	sink *s;
	assert_int_equal(storage_put(st, "k", &s), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
}

static void test_region_detection(void **state)
{
	(void)state;
	unsetenv("AWS_ENDPOINT");
	rec x = { 0 };
	http_set_test_hook(rec_hook, &x, 0);
	storage *st;
	assert_int_equal(open_s3("s3://bucket/p", &st), E_OK);
	assert_int_equal(x.n, 1);
	assert_string_equal(x.url, "HEAD https://bucket.s3.us-east-1.amazonaws.com/");
	put_k(st);
	assert_string_equal(x.url, "PUT https://bucket.s3.eu-central-1.amazonaws.com/p/k");
	assert_non_null(strstr(x.auth, "/eu-central-1/s3/aws4_request"));
	storage_free(st);

	/* With AWS_REGION set nothing is asked. */
	x.n = 0;
	setenv("AWS_REGION", "ap-south-1", 1);
	assert_int_equal(open_s3("s3://bucket/p", &st), E_OK);
	assert_int_equal(x.n, 0);
	storage_free(st);
}

static void test_sse_c(void **state)
{
	(void)state;
	setenv("S3_SSE_C", "short", 1);
	expect_config_error("s3://b/p", "S3_SSE_C: expected a 32-byte");
	setenv("S3_SSE_C", "0123456789abcdef0123456789abcdef", 1);
	rec x = { 0 };
	http_set_test_hook(rec_hook, &x, 0);
	setenv("AWS_REGION", "eu-central-1", 1);
	storage *st;
	assert_int_equal(open_s3("s3://b/p", &st), E_OK);
	put_k(st);
	assert_string_equal(x.ssec, "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=");
	assert_non_null(strstr(x.auth, "x-amz-server-side-encryption-customer-key"));
	x.ssec[0] = '\0';
	membuf mb = { 0 };
	sink *m = membuf_sink_new(&mb);
	assert_int_equal(storage_get(st, "k", m), E_OK);
	sink_free(m);
	free(mb.data);
	assert_string_equal(x.ssec, "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=");
	storage_free(st);
	assert_true(http_header_is_secret("x-amz-server-side-encryption-customer-key"));
	/* WAL-G's form: S3_SSE=AES256 names SSE-C's algorithm beside the key. */
	setenv("S3_SSE", "AES256", 1);
	memset(&x, 0, sizeof(x));
	assert_int_equal(open_s3("s3://b/p", &st), E_OK);
	put_k(st);
	assert_string_equal(x.ssec, "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=");
	assert_null(strstr(x.auth, "x-amz-server-side-encryption;"));
	storage_free(st);
	setenv("S3_SSE", "aws:kms", 1);
	setenv("S3_SSE_KMS_ID", "k", 1);
	expect_config_error("s3://b/p", "S3_SSE_C and S3_SSE=aws:kms");
	unsetenv("S3_SSE_KMS_ID");
	unsetenv("S3_SSE");
	unsetenv("S3_SSE_C");
}

static err_code exists_hook(void *arg, const http_request *req, const http_kvs *hdrs, http_answer *r)
{
	int *mode = arg;
	(void)hdrs;
	if (strcmp(req->method, "HEAD") == 0 && strcmp(req->url, "http://127.0.0.1:9/b") == 0) {
		r->status = 200; /* HeadBucket */
		return E_OK;
	}
	if (strcmp(req->method, "HEAD") == 0) {
		/* absent for put_new's check; then present with our MD5 (mode 1) or another (2) */
		static int heads;
		if (heads++ % 2 == 0) {
			r->status = 404;
			return E_OK;
		}
		r->status = 200;
		set_header(r, "content-length", "5");
		/* MD5("hello") */
		set_header(r, "etag", "%s", *mode == 1 ? "\"5d41402abc4b2a76b9719d911017c592\"" : "\"other\"");
		return E_OK;
	}
	assert_string_equal(http_kvs_get(&req->headers, "if-none-match"), "*");
	r->status = 412;
	set_body(r, "<Error><Code>PreconditionFailed</Code></Error>");
	return E_OK;
}

/* put_new: a 412 on our own retried PUT is success; on someone else's object E_EXISTS. */
static void test_put_new_conditional(void **state)
{
	(void)state;
	for (int mode = 1; mode <= 2; mode++) {
		http_set_test_hook(exists_hook, &mode, 0);
		storage *st;
		assert_int_equal(open_s3("s3://b/p", &st), E_OK);
		sink *s;
		assert_int_equal(storage_put_new(st, "k", &s), E_OK);
		assert_int_equal(sink_write(s, "hello", 5), E_OK);
		assert_int_equal(sink_finish(s), mode == 1 ? E_OK : E_EXISTS);
		sink_free(s);
		storage_free(st);
	}
}

typedef struct sts_fake {
	int sts_calls;
	int s3_calls;
	int expire; /* answer this many S3 requests with ExpiredToken */
	bool bad;
	long ttl; /* seconds from now for the credentials handed out */
} sts_fake;

static err_code sts_hook(void *arg, const http_request *req, const http_kvs *hdrs, http_answer *r)
{
	sts_fake *f = arg;
	if (str_has_prefix(req->url, "http://sts.test")) {
		f->sts_calls++;
		const char *b = req->body;
		if (strcmp(req->method, "POST") != 0 || http_kvs_get(hdrs, "authorization") != NULL ||
			strstr(b, "Action=AssumeRoleWithWebIdentity") == NULL ||
			strstr(b, "RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr") == NULL ||
			strstr(b, "WebIdentityToken=tok%2Bx%3D") == NULL)
			f->bad = true;
		time_t exp = time(NULL) + f->ttl;
		struct tm tm;
		gmtime_r(&exp, &tm);
		char when[32], doc[512];
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		snprintf(doc, sizeof(doc),
				 "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>"
				 "<Credentials><AccessKeyId>ASIA%d</AccessKeyId><SecretAccessKey>s</SecretAccessKey>"
				 "<SessionToken>T%d</SessionToken><Expiration>%s</Expiration></Credentials>"
				 "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
				 f->sts_calls, f->sts_calls, when);
		r->status = 200;
		set_body(r, doc);
		return E_OK;
	}
	f->s3_calls++;
	if (f->expire > 0) {
		f->expire--;
		r->status = 400;
		set_body(r, "<Error><Code>ExpiredToken</Code></Error>");
		return E_OK;
	}
	char want[32];
	snprintf(want, sizeof(want), "T%d", f->sts_calls);
	const char *tok = http_kvs_get(hdrs, "x-amz-security-token");
	if (tok == NULL || strcmp(tok, want) != 0)
		f->bad = true;
	r->status = 204;
	return E_OK;
}

static void test_web_identity(void **state)
{
	(void)state;
	char path[] = "/tmp/walc-s3-token-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, " tok+x=\n", 8), 8);
	close(fd);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", path, 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/r", 1);
	setenv("AWS_STS_ENDPOINT", "http://sts.test/", 1);
	sts_fake f = { 0, 0, 0, false, 3600 };
	http_set_test_hook(sts_hook, &f, 0);
	storage *st;
	assert_int_equal(open_s3("s3://b/p", &st), E_OK);
	assert_int_equal(f.sts_calls, 0); /* nothing fetched before the first request */
	assert_int_equal(storage_remove(st, "a"), E_OK);
	assert_int_equal(storage_remove(st, "b"), E_OK);
	assert_int_equal(f.sts_calls, 1); /* valid for an hour: fetched once */
	/* An ExpiredToken answer refreshes the credentials and sends again, once. */
	f.expire = 1;
	assert_int_equal(storage_remove(st, "c"), E_OK);
	assert_int_equal(f.sts_calls, 2);
	storage_free(st);

	/* Credentials that are (about to be) expired are replaced before each request. */
	f.ttl = -10;
	f.sts_calls = 0;
	assert_int_equal(open_s3("s3://b/p", &st), E_OK);
	assert_int_equal(storage_remove(st, "a"), E_OK);
	assert_int_equal(storage_remove(st, "b"), E_OK);
	assert_int_equal(f.sts_calls, 2);
	assert_false(f.bad);
	storage_free(st);

	/* A missing token file is a configuration error, never "object not found". */
	unlink(path);
	assert_int_equal(open_s3("s3://b/p", &st), E_OK);
	assert_int_equal(storage_remove(st, "a"), E_CONFIG);
	assert_non_null(strstr(err_msg(), "AWS_WEB_IDENTITY_TOKEN_FILE"));
	storage_free(st);
	unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
	unsetenv("AWS_ROLE_ARN");
	unsetenv("AWS_STS_ENDPOINT");
}

/* ------------------------------------------------------------------------------------------ */
/* The retry loop through its real code (the seam is below it)                                 */
/* ------------------------------------------------------------------------------------------ */

typedef struct resume_fake {
	unsigned char *obj;
	size_t len;
	int gets;
	int refuse;	   /* refuse this many connections first */
	bool change;   /* the object changes after the first GET */
	bool whole;	   /* answers a Range with the whole object (200), as some servers do */
	char range[3][64];
	char ifmatch[3][64];
	int deletes;
	size_t keys;
} resume_fake;

static err_code resume_hook(void *arg, const http_request *req, const http_kvs *hdrs,
							http_answer *a)
{
	resume_fake *f = arg;
	if (f->refuse > 0) {
		f->refuse--;
		a->refuse = true;
		return E_OK;
	}
	if (strcmp(req->method, "POST") == 0 && strstr(req->url, "delete=")) {
		pthread_mutex_lock(&fake_mu);
		f->deletes++;
		for (const char *p = req->body; (p = strstr(p, "<Key>")) != NULL; p++)
			f->keys++;
		pthread_mutex_unlock(&fake_mu);
		a->status = 200;
		set_body(a, "<DeleteResult/>");
		return E_OK;
	}
	if (strcmp(req->method, "GET") != 0) {
		a->status = 204;
		return E_OK;
	}
	int n = f->gets++;
	const char *range = http_kvs_get(hdrs, "range"), *im = http_kvs_get(hdrs, "if-match");
	if (n < 3) {
		snprintf(f->range[n], sizeof(f->range[n]), "%s", range ? range : "");
		snprintf(f->ifmatch[n], sizeof(f->ifmatch[n]), "%s", im ? im : "");
	}
	if (n > 0 && f->change) {
		a->status = 412;
		set_body(a, "<Error><Code>PreconditionFailed</Code></Error>");
		return E_OK;
	}
	size_t from = 0;
	if (f->whole)
		range = NULL;
	if (range != NULL)
		from = strtoull(range + 6, NULL, 10);
	a->status = range ? 206 : 200;
	set_header(a, "etag", "\"v1\"");
	if (range)
		set_header(a, "content-range", "bytes %zu-%zu/%zu", from, f->len - 1, f->len);
	http_answer_body(a, f->obj + from, f->len - from);
	a->cut = n < 2 ? 100000 : 0; /* the first two connections break mid-body */
	return E_OK;
}

/* A 300000-byte object behind resume_hook, and the store that reads it. */
static storage *resume_open(resume_fake *f, uint32_t seed)
{
	f->len = 300000;
	f->obj = xmalloc(f->len);
	fill(f->obj, f->len, seed);
	http_set_test_hook(resume_hook, f, 0);
	storage *st;
	assert_int_equal(open_s3("s3://b/root", &st), E_OK);
	return st;
}

static void test_get_resumed(void **state)
{
	(void)state;
	resume_fake f = { 0 };
	storage *st = resume_open(&f, 9);
	membuf mb = { 0 };
	sink *m = membuf_sink_new(&mb);
	assert_int_equal(storage_get(st, "k", m), E_OK);
	sink_free(m);
	assert_int_equal(f.gets, 3);
	assert_int_equal(mb.len, f.len);
	assert_memory_equal(mb.data, f.obj, f.len);
	assert_string_equal(f.range[0], "");
	assert_string_equal(f.range[1], "bytes=100000-");
	assert_string_equal(f.range[2], "bytes=200000-");
	assert_string_equal(f.ifmatch[1], "\"v1\"");
	free(mb.data);

	/* An object replaced meanwhile is never spliced: the pinned read fails. */
	f.gets = 0;
	f.change = true;
	mb = (membuf){ 0 };
	m = membuf_sink_new(&mb);
	assert_int_equal(storage_get(st, "k", m), E_IO);
	assert_non_null(strstr(err_msg(), "changed while it was being read"));
	sink_free(m);
	free(mb.data);

	/* Refused connections are retried with backoff, within the budget. */
	f.refuse = 2;
	assert_int_equal(storage_remove(st, "k"), E_OK);
	storage_free(st);
	setenv("S3_MAX_RETRIES", "1", 1);
	assert_int_equal(open_s3("s3://b/root", &st), E_OK);
	f.refuse = 5;
	assert_int_equal(storage_remove(st, "k"), E_IO);
	assert_non_null(strstr(err_msg(), "gave up after 2 attempts"));
	unsetenv("S3_MAX_RETRIES");
	storage_free(st);
	free(f.obj);
}

/* storage_get_range: bytes=FROM-TO, resumed inside the range; a server that ignores the Range
 * still yields exactly the range; an object shorter than the range is E_CORRUPT. */
static void test_get_range(void **state)
{
	(void)state;
	resume_fake f = { 0 };
	storage *st = resume_open(&f, 11);
	assert_true(storage_has_range(st));
	for (int whole = 0; whole < 2; whole++) {
		f.gets = 0;
		f.whole = whole;
		membuf mb = { 0 };
		sink *m = membuf_sink_new(&mb);
		assert_int_equal(storage_get_range(st, "k", 50000, 120000, m), E_OK);
		sink_free(m);
		assert_int_equal(mb.len, 120000);
		assert_memory_equal(mb.data, f.obj + 50000, 120000);
		if (!whole) {
			/* the first connection broke after 100000 bytes: resumed where it broke */
			assert_int_equal(f.gets, 2);
			assert_string_equal(f.range[0], "bytes=50000-169999");
			assert_string_equal(f.range[1], "bytes=150000-169999");
			assert_string_equal(f.ifmatch[1], "\"v1\"");
		}
		free(mb.data);
	}
	f.whole = false;
	f.gets = 2; /* no more broken connections */
	membuf mb = { 0 };
	sink *m = membuf_sink_new(&mb);
	assert_int_equal(storage_get_range(st, "k", 250000, 60000, m), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "50000 of the 60000 bytes"));
	sink_free(m);
	free(mb.data);
	storage_free(st);
	free(f.obj);
}

/* Batched deletes: 1000 keys a DeleteObjects request, several requests at once. */
static void test_delete_batches(void **state)
{
	(void)state;
	resume_fake f = { 0 };
	http_set_test_hook(resume_hook, &f, 0);
	storage *st;
	assert_int_equal(open_s3("s3://b/root", &st), E_OK);
	enum { N = 2500 };
	char **keys = xcalloc(N, sizeof(*keys));
	for (int i = 0; i < N; i++)
		keys[i] = xasprintf("wal_005/%024d", i);
	assert_int_equal(storage_remove_many(st, (const char *const *)keys, N), E_OK);
	assert_int_equal(f.deletes, 3);
	assert_int_equal(f.keys, N);
	for (int i = 0; i < N; i++)
		free(keys[i]);
	free(keys);
	storage_free(st);
}

/* ------------------------------------------------------------------------------------------ */
/* --dump-signed: the requests walc signs, for botocore to check                               */
/* ------------------------------------------------------------------------------------------ */

static void json_str(FILE *o, const char *s, size_t n)
{
	fputc('"', o);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c < 0x20)
			fprintf(o, "\\u%04x", c);
		else
			fputc(c, o);
	}
	fputc('"', o);
}

typedef struct dump_ctx {
	const char *key;
	const char *access, *secret, *token, *region;
	int n;
} dump_ctx;

static err_code dump_one(dump_ctx *d, const http_request *req, const http_kvs *hdrs, http_answer *r);

/* Parts are signed on several threads: one line at a time. */
static err_code dump_hook(void *arg, const http_request *req, const http_kvs *hdrs, http_answer *r)
{
	pthread_mutex_lock(&fake_mu);
	err_code rc = dump_one(arg, req, hdrs, r);
	pthread_mutex_unlock(&fake_mu);
	return rc;
}

static err_code dump_one(dump_ctx *d, const http_request *req, const http_kvs *hdrs, http_answer *r)
{
	FILE *o = stdout;
	fprintf(o, "{\"method\":");
	json_str(o, req->method, strlen(req->method));
	fprintf(o, ",\"url\":");
	json_str(o, req->url, strlen(req->url));
	fprintf(o, ",\"key\":");
	json_str(o, d->key ? d->key : "", d->key ? strlen(d->key) : 0);
	fprintf(o, ",\"query\":[");
	for (size_t i = 0; req->query && i < req->query->n; i++) {
		fprintf(o, "%s[", i ? "," : "");
		json_str(o, req->query->v[i].name, strlen(req->query->v[i].name));
		fputc(',', o);
		json_str(o, req->query->v[i].value, strlen(req->query->v[i].value));
		fputc(']', o);
	}
	fprintf(o, "],\"headers\":[");
	for (size_t i = 0; i < hdrs->n; i++) {
		fprintf(o, "%s[", i ? "," : "");
		json_str(o, hdrs->v[i].name, strlen(hdrs->v[i].name));
		fputc(',', o);
		json_str(o, hdrs->v[i].value, strlen(hdrs->v[i].value));
		fputc(']', o);
	}
	fprintf(o, "],\"body_hex\":\"");
	for (size_t i = 0; i < req->body_len; i++)
		fprintf(o, "%02x", ((const unsigned char *)req->body)[i]);
	fprintf(o, "\",\"access\":");
	json_str(o, d->access, strlen(d->access));
	fprintf(o, ",\"secret\":");
	json_str(o, d->secret, strlen(d->secret));
	fprintf(o, ",\"token\":");
	if (d->token)
		json_str(o, d->token, strlen(d->token));
	else
		fprintf(o, "null");
	fprintf(o, ",\"region\":");
	json_str(o, d->region, strlen(d->region));
	fprintf(o, "}\n");
	d->n++;
	/* Answer so the operation goes on: 200 with the bodies the callers parse. */
	r->status = strcmp(req->method, "DELETE") == 0 ? 204 : 200;
	if (strstr(req->url, "uploads="))
		set_body(r, "<InitiateMultipartUploadResult><UploadId>up/1+=~</UploadId>"
					"</InitiateMultipartUploadResult>");
	else if (strstr(req->url, "list-type=2"))
		set_body(r, "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
	else if (strstr(req->url, "delete="))
		set_body(r, "<DeleteResult/>");
	else if (strstr(req->url, "uploadId="))
		set_body(r, "<CompleteMultipartUploadResult/>");
	set_header(r, "etag", "\"etag\"");
	if (strcmp(req->method, "HEAD") == 0)
		set_header(r, "content-length", "1");
	else if (strcmp(req->method, "GET") == 0 && r->body.len == 0)
		set_body(r, "x");
	return E_OK;
}

static int dump_signed(void)
{
	static const char *const keys[] = {
		"wal_005/000000010000000000000001.lz4",
		"dir with spaces/file name.txt",
		"unicode/\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87/\xc3\xbc\xc3\xb1\xc3\xae.br",
		"plus+equals=tilde~/a+b=c~d",
		"special/!$&'()*,;:@[]^`{}|\"<>#%?",
		"basebackups_005/base_000000010000000000000002_backup_stop_sentinel.json",
	};
	static const struct {
		const char *endpoint;
		const char *path_style;
		const char *region;
		const char *token;
	} envs[] = {
		{ "http://127.0.0.1:18080", "true", "us-east-1", NULL },
		{ "http://localhost:18080", "false", "us-east-1", "session/token+==" },
		{ "https://s3.eu-west-1.amazonaws.com", "false", "eu-west-1", NULL },
		{ "https://minio.example:9000", "true", "ap-south-2", "tok" },
	};
	const char *secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY=EXAMPLE KEY";
	log_setup(LOG_ERROR, false, "test_s3");
	for (size_t e = 0; e < sizeof(envs) / sizeof(envs[0]); e++) {
		for (size_t i = 0; s3_vars[i]; i++)
			unsetenv(s3_vars[i]);
		setenv("AWS_ENDPOINT", envs[e].endpoint, 1);
		setenv("AWS_S3_FORCE_PATH_STYLE", envs[e].path_style, 1);
		setenv("AWS_REGION", envs[e].region, 1);
		setenv("AWS_ACCESS_KEY_ID", "AKIDWALCTEST", 1);
		setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
		if (envs[e].token)
			setenv("AWS_SESSION_TOKEN", envs[e].token, 1);
		setenv("S3_MAX_PART_SIZE", "5242880", 1);
		setenv("S3_SSE", "AES256", 1);
		setenv("S3_STORAGE_CLASS", "STANDARD_IA", 1);
		dump_ctx d = { NULL, "AKIDWALCTEST", secret, envs[e].token, envs[e].region, 0 };
		http_set_test_hook(dump_hook, &d, 1700000000 + (time_t)e * 86399);
		storage *st;
		if (open_s3("s3://walc-bucket/pre fix/", &st) != E_OK) {
			fprintf(stderr, "open: %s\n", err_msg());
			return 1;
		}
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
			char *full = xasprintf("pre fix/%s", keys[k]);
			d.key = full;
			sink *s;
			storage_put(st, keys[k], &s);
			sink_write(s, "payload  bytes\n", 15);
			sink_finish(s);
			sink_free(s);
			membuf mb = { 0 };
			sink *m = membuf_sink_new(&mb);
			storage_get(st, keys[k], m);
			sink_free(m);
			free(mb.data);
			obj_info info;
			storage_stat(st, keys[k], &info);
			storage_remove(st, keys[k]);
			free(full);
		}
		d.key = NULL;
		obj_list l;
		storage_list(st, "dir with spaces/", false, &l);
		obj_list_free(&l);
		storage_list(st, "", true, &l);
		obj_list_free(&l);
		storage_remove_many(st, keys, sizeof(keys) / sizeof(keys[0]));
		/* Multipart: create, two parts, complete. */
		d.key = "pre fix/big+object=~ file";
		size_t n = 5242880 + 10;
		unsigned char *big = xcalloc(1, n);
		sink *s;
		storage_put(st, "big+object=~ file", &s);
		sink_write(s, big, n);
		sink_finish(s);
		sink_free(s);
		free(big);
		storage_free(st);
	}
	http_set_test_hook(NULL, NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--dump-signed") == 0)
		return dump_signed();
	log_setup(LOG_ERROR, false, "test_s3");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_uri_encode, clean_env),
		cmocka_unit_test_setup(test_canonical_query, clean_env),
		cmocka_unit_test_setup(test_sign_aws_example, clean_env),
		cmocka_unit_test_setup(test_xml_list, clean_env),
		cmocka_unit_test_setup(test_xml_hostile, clean_env),
		cmocka_unit_test_setup(test_xml_misc, clean_env),
		cmocka_unit_test_setup(test_dates, clean_env),
		cmocka_unit_test_setup(test_config, clean_env),
		cmocka_unit_test_setup(test_shared_credentials_file, clean_env),
		cmocka_unit_test_setup(test_put_get_single, clean_env),
		cmocka_unit_test_setup(test_multipart, clean_env),
		cmocka_unit_test_setup(test_multipart_long, clean_env),
		cmocka_unit_test_setup(test_multipart_budget_spent, clean_env),
		cmocka_unit_test_setup(test_get_range, clean_env),
		cmocka_unit_test_setup(test_retry_and_errors, clean_env),
		cmocka_unit_test_setup(test_list_pages, clean_env),
		cmocka_unit_test_setup(test_region_detection, clean_env),
		cmocka_unit_test_setup(test_sse_c, clean_env),
		cmocka_unit_test_setup(test_put_new_conditional, clean_env),
		cmocka_unit_test_setup(test_web_identity, clean_env),
		cmocka_unit_test_setup(test_get_resumed, clean_env),
		cmocka_unit_test_setup(test_delete_batches, clean_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
