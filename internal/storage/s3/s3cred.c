/*
 * AWS credentials for the S3 backend, in WAL-G's order: static keys from the environment,
 * web identity (STS AssumeRoleWithWebIdentity, refreshed before expiry), the shared
 * credentials file, then the ECS container endpoint or EC2 instance metadata (IMDSv2). No
 * credential is ever logged.
 */
#include "internal/storage/s3/s3.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define ECS_HOST "http://169.254.170.2"
#define CRED_FILE_MAX (1u << 20)
#define TOKEN_FILE_MAX (64u << 10)


/* A control character inside a credential would end up in an HTTP header. */
static bool has_control(const char *s)
{
	for (; s != NULL && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* Copy with surrounding whitespace removed (WAL-G trims the static keys). */
static char *trimmed(const char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	char *out = xmalloc(n + 1);
	memcpy(out, s, n);
	out[n] = '\0';
	return out;
}


/* ------------------------------------------------------------------------------------------ */
/* Shared credentials file                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* The profile's keys from an INI-style credentials file. E_NOTFOUND when it has none. */
static err_code parse_cred_file(const char *path, const char *profile, s3_creds *out)
{
	char *text;
	TRY(http_read_small_file(path, CRED_FILE_MAX, &text));
	memset(out, 0, sizeof(*out));
	bool in = false, found = false, bad_value = false;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *l = line;
		while (isspace((unsigned char)*l))
			l++;
		size_t n = strlen(l);
		while (n > 0 && isspace((unsigned char)l[n - 1]))
			l[--n] = '\0';
		if (l[0] == '#' || l[0] == ';' || l[0] == '\0')
			continue;
		if (l[0] == '[') {
			char *end = strchr(l, ']');
			if (end == NULL)
				continue;
			*end = '\0';
			char *name = l + 1;
			while (isspace((unsigned char)*name))
				name++;
			/* ~/.aws/config style "[profile X]" is accepted too. */
			if (strncmp(name, "profile ", 8) == 0)
				name += 8;
			char *t = trimmed(name);
			in = strcmp(t, profile) == 0;
			found |= in;
			free(t);
			continue;
		}
		if (!in)
			continue;
		char *eq = strchr(l, '=');
		if (eq == NULL)
			continue;
		*eq = '\0';
		char *k = trimmed(l), *v = trimmed(eq + 1);
		char **dst = NULL;
		if (strcasecmp(k, "aws_access_key_id") == 0)
			dst = &out->access_key;
		else if (strcasecmp(k, "aws_secret_access_key") == 0)
			dst = &out->secret_key;
		else if (strcasecmp(k, "aws_session_token") == 0)
			dst = &out->token;
		if (dst != NULL && has_control(v))
			bad_value = true;
		else if (dst != NULL) {
			free(*dst);
			*dst = v;
			v = NULL;
		}
		free(k);
		free(v);
	}
	memset(text, 0, strlen(text));
	free(text);
	if (bad_value) {
		s3_creds_free(out);
		return err_set(E_CONFIG, "%s: a credential in profile %s contains a control character",
					   path, profile);
	}
	if (!found || out->access_key == NULL || out->secret_key == NULL) {
		s3_creds_free(out);
		return err_set(E_NOTFOUND, "profile \"%s\" in %s has no aws_access_key_id and "
								   "aws_secret_access_key",
					   profile, path);
	}
	out->source = "shared credentials file";
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Web identity (STS)                                                                         */
/* ------------------------------------------------------------------------------------------ */

static void form_add(char **body, const char *k, const char *v)
{
	char *ev = http_uri_encode(v, false);
	char *nb = xasprintf("%s%s%s=%s", *body ? *body : "", *body ? "&" : "", k, ev);
	if (*body != NULL)
		memset(*body, 0, strlen(*body));
	free(*body);
	free(ev);
	*body = nb;
}

static err_code fetch_web_identity(s3_credprov *p, s3_creds *out)
{
	char *token;
	err_code rc = http_read_small_file(p->token_file, TOKEN_FILE_MAX, &token);
	/* Not E_NOTFOUND: a missing token file must not read as a missing object. */
	if (rc != E_OK)
		return err_wrap(E_CONFIG, "AWS_WEB_IDENTITY_TOKEN_FILE");
	char *t = trimmed(token);
	memset(token, 0, strlen(token));
	free(token);
	if (t[0] == '\0') {
		free(t);
		return err_set(E_CONFIG, "AWS_WEB_IDENTITY_TOKEN_FILE: %s is empty", p->token_file);
	}
	char *body = NULL;
	form_add(&body, "Action", "AssumeRoleWithWebIdentity");
	form_add(&body, "Version", "2011-06-15");
	form_add(&body, "RoleArn", p->role_arn);
	form_add(&body, "RoleSessionName", p->session_name);
	form_add(&body, "WebIdentityToken", t);
	memset(t, 0, strlen(t));
	free(t);

	http_request req = { 0 };
	req.method = "POST";
	req.url = p->sts_endpoint;
	req.body = body;
	req.body_len = strlen(body);
	char *what = xasprintf("STS AssumeRoleWithWebIdentity at %s", p->sts_endpoint);
	req.what = what;
	http_kvs_add(&req.headers, "content-type", "application/x-www-form-urlencoded");
	http_response resp;
	rc = http_do(p->http, NULL, &req, &resp);
	if (rc == E_OK && resp.status != 200) {
		char code[64] = "", msg[256] = "";
		xml_error((const char *)resp.body.data, resp.body.len, code, sizeof(code), msg,
					 sizeof(msg));
		rc = err_set(E_IO, "%s for role %s: HTTP %ld %s%s%s", what, p->role_arn, resp.status,
					 code[0] ? code : "(no error code)", msg[0] ? ": " : "", msg);
	} else if (rc == E_OK) {
		rc = s3_xml_sts_creds((const char *)resp.body.data, resp.body.len, out);
		if (rc != E_OK)
			err_wrap(rc, "%s", what);
	}
	http_response_wipe(&resp);
	http_kvs_free(&req.headers);
	memset(body, 0, strlen(body));
	free(body);
	free(what);
	if (rc == E_OK)
		out->source = "web identity";
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Instance and container metadata                                                            */
/* ------------------------------------------------------------------------------------------ */

static size_t meta_write(char *buf, size_t size, size_t n, void *ud)
{
	membuf *mb = ud;
	size_t len = size * n;
	if (mb->len + len + 1 > 65536)
		return 0;
	if (mb->len + len + 1 > mb->cap) {
		mb->cap = 65536;
		mb->data = xrealloc(mb->data, mb->cap);
	}
	memcpy(mb->data + mb->len, buf, len);
	mb->len += len;
	mb->data[mb->len] = '\0';
	return len;
}

/* A short metadata request: 1 s to connect, 3 s in all, no retries (the caller has a chain). */
static err_code meta_http(const char *method, const char *url, const char *hdr, long *status,
						  membuf *out)
{
	CURL *c = curl_easy_init();
	if (c == NULL)
		return err_set(E_FAIL, "cannot create a libcurl handle");
	memset(out, 0, sizeof(*out));
	struct curl_slist *list = NULL;
	if (hdr != NULL)
		list = curl_slist_append(list, hdr);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, meta_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	if (strcmp(method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
	}
	CURLcode cc = curl_easy_perform(c);
	*status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(list);
	curl_easy_cleanup(c);
	if (cc != CURLE_OK) {
		free(out->data);
		memset(out, 0, sizeof(*out));
		return err_set(E_IO, "%s %s: %s", method, url, curl_easy_strerror(cc));
	}
	if (out->data == NULL) {
		out->data = xcalloc(1, 1);
		out->cap = 1;
	}
	return E_OK;
}

static void wipe(membuf *m)
{
	if (m->data != NULL)
		memset(m->data, 0, m->len);
	free(m->data);
	memset(m, 0, sizeof(*m));
}

/* {"AccessKeyId","SecretAccessKey","Token","Expiration"} from IMDS or ECS. */
static err_code parse_meta_json(const char *doc, const char *what, s3_creds *out)
{
	json_error_t je;
	json_t *j = json_loads(doc, 0, &je);
	memset(out, 0, sizeof(*out));
	if (j == NULL || !json_is_object(j)) {
		json_decref(j);
		return err_set(E_CORRUPT, "%s: answer is not a JSON object", what);
	}
	const char *ak = json_string_value(json_object_get(j, "AccessKeyId"));
	const char *sk = json_string_value(json_object_get(j, "SecretAccessKey"));
	const char *tk = json_string_value(json_object_get(j, "Token"));
	const char *ex = json_string_value(json_object_get(j, "Expiration"));
	err_code rc = E_OK;
	if (ak == NULL || sk == NULL) {
		rc = err_set(E_CORRUPT, "%s: answer has no AccessKeyId/SecretAccessKey", what);
	} else {
		out->access_key = xstrdup(ak);
		out->secret_key = xstrdup(sk);
		out->token = tk ? xstrdup(tk) : NULL;
		long ns;
		if (ex != NULL && !http_parse_iso8601(ex, &out->expires, &ns))
			out->expires = 0;
	}
	json_decref(j);
	return rc;
}

static err_code fetch_imds(const s3_credprov *p, s3_creds *out)
{
	const char *base = p->imds_endpoint;
	size_t bl = strlen(base);
	while (bl > 0 && base[bl - 1] == '/')
		bl--;
	long st;
	membuf tok, role, body;
	char *url = xasprintf("%.*s/latest/api/token", (int)bl, base);
	err_code rc = meta_http("PUT", url, "X-aws-ec2-metadata-token-ttl-seconds: 21600", &st, &tok);
	free(url);
	if (rc != E_OK)
		return rc;
	if (st != 200) {
		wipe(&tok);
		return err_set(E_IO, "EC2 instance metadata: token request answered HTTP %ld", st);
	}
	char *hdr = xasprintf("X-aws-ec2-metadata-token: %s", (char *)tok.data);
	wipe(&tok);
	url = xasprintf("%.*s/latest/meta-data/iam/security-credentials/", (int)bl, base);
	rc = meta_http("GET", url, hdr, &st, &role);
	free(url);
	if (rc == E_OK && (st != 200 || role.len == 0)) {
		rc = err_set(E_IO, "EC2 instance metadata: no IAM role attached (HTTP %ld)", st);
		wipe(&role);
	}
	if (rc == E_OK) {
		char *nl = strchr((char *)role.data, '\n');
		if (nl)
			*nl = '\0';
		url = xasprintf("%.*s/latest/meta-data/iam/security-credentials/%s", (int)bl, base,
						(char *)role.data);
		wipe(&role);
		rc = meta_http("GET", url, hdr, &st, &body);
		free(url);
		if (rc == E_OK && st != 200)
			rc = err_set(E_IO, "EC2 instance metadata: credentials answered HTTP %ld", st);
		if (rc == E_OK)
			rc = parse_meta_json((char *)body.data, "EC2 instance metadata", out);
		if (body.data != NULL)
			wipe(&body);
	}
	memset(hdr, 0, strlen(hdr));
	free(hdr);
	if (rc == E_OK)
		out->source = "EC2 instance metadata";
	return rc;
}

static err_code fetch_ecs(const s3_credprov *p, s3_creds *out)
{
	char *file_token = NULL;
	if (p->ecs_token_file != NULL) {
		/* EKS Pod Identity rotates the token in its file: read it at every refresh. */
		TRY(http_read_small_file(p->ecs_token_file, TOKEN_FILE_MAX, &file_token));
		char *t = trimmed(file_token);
		memset(file_token, 0, strlen(file_token));
		free(file_token);
		file_token = t;
		if (has_control(file_token)) {
			memset(file_token, 0, strlen(file_token));
			free(file_token);
			return err_set(E_CONFIG, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: %s holds a "
									 "control character",
						   p->ecs_token_file);
		}
	}
	const char *auth = file_token != NULL ? file_token : p->ecs_token;
	char *hdr = auth ? xasprintf("Authorization: %s", auth) : NULL;
	if (file_token != NULL) {
		memset(file_token, 0, strlen(file_token));
		free(file_token);
	}
	char *url = xstrdup(p->ecs_url);
	long st;
	membuf body;
	err_code rc = meta_http("GET", url, hdr, &st, &body);
	if (rc == E_OK) {
		if (st != 200)
			rc = err_set(E_IO, "ECS container credentials: HTTP %ld", st);
		else
			rc = parse_meta_json((char *)body.data, "ECS container credentials", out);
		wipe(&body);
	}
	free(url);
	if (hdr != NULL) {
		memset(hdr, 0, strlen(hdr));
		free(hdr);
	}
	if (rc == E_OK)
		out->source = "ECS container credentials";
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* The chain                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static bool valid_session_name(const char *s)
{
	size_t n = strlen(s);
	if (n < 2 || n > 64)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && strchr("_+=,.@-", *s) == NULL)
			return false;
	return true;
}

err_code s3_credprov_init(s3_credprov *p, const s3_settings *set, const char *region,
						  http_client *http)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	p->http = http;

	const char *ak = set->access_key, *sk = set->secret_key;
	if (ak != NULL || sk != NULL) {
		if (ak == NULL || sk == NULL)
			return err_set(E_CONFIG, "%s is set but %s is not: set both or neither",
						   ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
						   ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
		p->cur.access_key = trimmed(ak);
		p->cur.secret_key = trimmed(sk);
		const char *tk = set->session_token;
		p->cur.token = tk ? trimmed(tk) : NULL;
		p->cur.source = "environment";
		if (p->cur.access_key[0] == '\0' || p->cur.secret_key[0] == '\0')
			return err_set(E_CONFIG, "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: blank value");
		if (has_control(p->cur.access_key))
			return err_set(E_CONFIG, "AWS_ACCESS_KEY_ID: contains a control character");
		if (has_control(p->cur.secret_key))
			return err_set(E_CONFIG, "AWS_SECRET_ACCESS_KEY: contains a control character");
		if (has_control(p->cur.token))
			return err_set(E_CONFIG, "AWS_SESSION_TOKEN: contains a control character");
		p->have = true;
		p->kind = S3_CRED_STATIC;
		return E_OK;
	}

	const char *tf = set->web_identity_token_file, *arn = set->role_arn;
	if (tf != NULL && arn != NULL) {
		p->kind = S3_CRED_WEBID;
		p->token_file = xstrdup(tf);
		p->role_arn = xstrdup(arn);
		p->session_name = xstrdup(set->role_session_name);
		if (!valid_session_name(p->session_name))
			return err_set(E_CONFIG, "AWS_ROLE_SESSION_NAME: expected 2 to 64 of A-Z a-z 0-9 "
									 "_+=,.@-, got \"%s\"",
						   p->session_name);
		const char *ep = set->sts_endpoint;
		if (ep != NULL) {
			if (!str_has_prefix(ep, "https://") && !str_has_prefix(ep, "http://"))
				return err_set(E_CONFIG, "AWS_STS_ENDPOINT: expected an http:// or https:// "
										 "URL, got \"%s\"",
							   ep);
			p->sts_endpoint = xstrdup(ep);
		} else {
			p->sts_endpoint = xasprintf("https://sts.%s.amazonaws.com/", region);
		}
		return E_OK;
	}

	const char *file = set->shared_credentials_file;
	const char *profile = set->profile;
	const char *home = set->home;
	char *path = file ? xstrdup(file) : home ? xasprintf("%s/.aws/credentials", home) : NULL;
	if (path != NULL) {
		s3_creds c;
		err_code rc = parse_cred_file(path, profile ? profile : "default", &c);
		if (rc == E_OK) {
			p->cur = c;
			p->have = true;
			p->kind = S3_CRED_FILE;
			p->file = path;
			p->profile = xstrdup(profile ? profile : "default");
			return E_OK;
		}
		/* A file or profile asked for by name must be there. */
		if (file != NULL || profile != NULL || rc != E_NOTFOUND) {
			bool no_profile = rc == E_NOTFOUND && profile != NULL && access(path, R_OK) == 0;
			rc = err_wrap(E_CONFIG, "%s",
						  no_profile || file == NULL ? "AWS_PROFILE" : "AWS_SHARED_CREDENTIALS_FILE");
			free(path);
			return rc;
		}
		err_clear();
		free(path);
	}

	if (set->container_relative_uri != NULL || set->container_full_uri != NULL) {
		p->kind = S3_CRED_ECS;
		p->ecs_url = set->container_relative_uri != NULL
			? xasprintf(ECS_HOST "%s", set->container_relative_uri)
			: xstrdup(set->container_full_uri);
		p->ecs_token = set->container_token ? xstrdup(set->container_token) : NULL;
		p->ecs_token_file =
			set->container_token_file ? xstrdup(set->container_token_file) : NULL;
		return E_OK;
	}
	if (!set->ec2_metadata_disabled) {
		p->kind = S3_CRED_IMDS;
		p->imds_endpoint = xstrdup(set->ec2_metadata_endpoint);
		return E_OK;
	}
	p->kind = S3_CRED_NONE;
	return E_OK;
}

/* Refresh this long before expiry: 5 minutes, or a quarter of a short lifetime. */
static bool needs_refresh(const s3_credprov *p, time_t now)
{
	if (!p->have)
		return true;
	if (p->cur.expires == 0)
		return false;
	time_t life = p->cur.expires - p->obtained;
	time_t margin = life / 4 < 300 ? life / 4 : 300;
	return now >= p->cur.expires - margin;
}

err_code s3_credprov_get(s3_credprov *p, bool force, s3_creds *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&p->mu);
	err_code rc = E_OK;
	time_t now = time(NULL);
	bool dynamic = p->kind == S3_CRED_WEBID || p->kind == S3_CRED_IMDS || p->kind == S3_CRED_ECS;
	if (p->kind == S3_CRED_NONE) {
		rc = err_set(E_CONFIG, "no AWS credentials: set AWS_ACCESS_KEY_ID and "
							   "AWS_SECRET_ACCESS_KEY, or AWS_WEB_IDENTITY_TOKEN_FILE and "
							   "AWS_ROLE_ARN, or a shared credentials file");
	} else if (dynamic && (force || needs_refresh(p, now))) {
		s3_creds c;
		if (p->kind == S3_CRED_WEBID)
			rc = fetch_web_identity(p, &c);
		else if (p->kind == S3_CRED_ECS)
			rc = fetch_ecs(p, &c);
		else
			rc = fetch_imds(p, &c);
		if (rc == E_OK) {
			s3_creds_free(&p->cur);
			p->cur = c;
			p->have = true;
			p->obtained = now;
			log_debug("s3: credentials from %s, key id %.4s..., %s%lld s", c.source,
					  c.access_key, c.expires ? "valid for " : "no expiry",
					  c.expires ? (long long)(c.expires - now) : 0LL);
		} else if (p->have && (p->cur.expires == 0 || now < p->cur.expires)) {
			/* Keep using what still works; the next request tries again. */
			log_warn("s3: refreshing credentials failed, using the current ones: %s",
					 err_msg());
			err_clear();
			rc = E_OK;
		} else if (p->kind == S3_CRED_IMDS) {
			rc = err_wrap(E_CONFIG, "no AWS credentials (set AWS_ACCESS_KEY_ID and "
									"AWS_SECRET_ACCESS_KEY, AWS_WEB_IDENTITY_TOKEN_FILE and "
									"AWS_ROLE_ARN, or a shared credentials file; instance "
									"metadata failed)");
		}
	} else if (force && p->kind != S3_CRED_STATIC && p->kind != S3_CRED_FILE) {
		rc = E_OK;
	}
	if (rc == E_OK)
		s3_creds_copy(out, &p->cur);
	pthread_mutex_unlock(&p->mu);
	return rc;
}

void s3_credprov_free(s3_credprov *p)
{
	s3_creds_free(&p->cur);
	free(p->token_file);
	free(p->role_arn);
	free(p->session_name);
	free(p->sts_endpoint);
	free(p->file);
	free(p->profile);
	free(p->ecs_url);
	if (p->ecs_token != NULL) {
		memset(p->ecs_token, 0, strlen(p->ecs_token));
		free(p->ecs_token);
	}
	free(p->ecs_token_file);
	free(p->imds_endpoint);
	pthread_mutex_destroy(&p->mu);
	memset(p, 0, sizeof(*p));
}
