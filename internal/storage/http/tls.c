/*
 * Which HTTPS servers walc trusts, decided once per client. A store's own CA setting
 * (S3_CA_CERT_FILE, AZURE_CA_CERT_FILE) wins; otherwise SSL_CERT_FILE and SSL_CERT_DIR as Go's
 * crypto/x509 reads them on Linux, since that is how WAL-G users hand a private CA to WAL-G
 * and libcurl ignores both; otherwise the system bundle.
 */
#include "internal/storage/http/http_impl.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TLS_SYSTEM_FILE "/etc/ssl/certs/ca-certificates.crt"
/* Go's certDirectories on Linux, read beside SSL_CERT_FILE unless SSL_CERT_DIR replaces them. */
#define TLS_SYSTEM_DIRS "/etc/ssl/certs:/etc/pki/tls/certs"
#define TLS_FILE_MAX ((size_t)4 << 20)
#define TLS_BLOB_MAX ((size_t)32 << 20)

struct storage_tls {
	char *ca_file;
	char *ca_path; /* OpenSSL's ':'-separated hashed directories, or NULL */
	char *blob;	   /* PEM certificates gathered from SSL_CERT_DIR, or NULL */
	size_t blob_len;
};

/* Appends a file's PEM certificates (the whole file when it holds one) to t's blob. */
static void blob_add_file(storage_tls *t, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return;
	char *buf = xmalloc(TLS_FILE_MAX + 1);
	size_t n = fread(buf, 1, TLS_FILE_MAX + 1, f);
	fclose(f);
	buf[n <= TLS_FILE_MAX ? n : 0] = '\0';
	if (n <= TLS_FILE_MAX && strstr(buf, "-----BEGIN CERTIFICATE-----") != NULL &&
		t->blob_len + n + 1 <= TLS_BLOB_MAX) {
		t->blob = xrealloc(t->blob, t->blob_len + n + 2);
		memcpy(t->blob + t->blob_len, buf, n);
		t->blob_len += n;
		t->blob[t->blob_len++] = '\n';
		t->blob[t->blob_len] = '\0';
	}
	free(buf);
}

/*
 * Every regular file of dir, as Go takes them: a symbolic link to a file of the same
 * directory (OpenSSL's hash names) is a second name for a file already read, and skipped.
 */
static err_code blob_add_dir(storage_tls *t, const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return err_errno(E_CONFIG, errno, "SSL_CERT_DIR: cannot list %s", dir);
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		char *path = xasprintf("%s/%s", dir, de->d_name);
		struct stat lsb, sb;
		char target[4096];
		ssize_t n;
		bool same_dir_link = lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode) &&
			(n = readlink(path, target, sizeof(target) - 1)) > 0 &&
			memchr(target, '/', (size_t)n) == NULL;
		if (!same_dir_link && stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
			blob_add_file(t, path);
		free(path);
	}
	closedir(d);
	return E_OK;
}

err_code storage_tls_new(const char *store_ca, const tls_settings *set, storage_tls **out)
{
	storage_tls *t = xcalloc(1, sizeof(*t));
	const char *file = set != NULL ? set->cert_file : NULL;
	const char *dirs = set != NULL ? set->cert_dir : NULL;
	err_code rc = E_OK;
	if (store_ca != NULL) {
		t->ca_file = xstrdup(store_ca);
	} else if (file != NULL && access(file, R_OK) != 0) {
		rc = err_errno(E_CONFIG, errno, "SSL_CERT_FILE: cannot read %s", file);
	} else if (dirs == NULL) {
		/* The hashed system directories stand in for Go's reading of them. */
		t->ca_file = xstrdup(file != NULL ? file : TLS_SYSTEM_FILE);
		if (file != NULL)
			t->ca_path = xstrdup(TLS_SYSTEM_DIRS);
	} else {
		/* Go reads every file of the directories, hashed names or not: so does walc. */
		blob_add_file(t, file != NULL ? file : TLS_SYSTEM_FILE);
		char *list = xstrdup(dirs);
		char *save = NULL;
		for (char *d = strtok_r(list, ":", &save); d != NULL && rc == E_OK;
			 d = strtok_r(NULL, ":", &save))
			rc = blob_add_dir(t, d);
		free(list);
		if (rc == E_OK && t->blob == NULL)
			rc = err_set(E_CONFIG, "SSL_CERT_DIR: no certificate in %s%s%s", dirs,
						 file != NULL ? " nor in " : "", file != NULL ? file : "");
	}
	if (rc != E_OK) {
		storage_tls_free(t);
		return rc;
	}
	*out = t;
	return E_OK;
}

void storage_tls_apply(const storage_tls *t, void *curl)
{
	CURL *c = curl;
	if (t->blob != NULL) {
		struct curl_blob b = { t->blob, t->blob_len, CURL_BLOB_NOCOPY };
		curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &b);
	} else {
		curl_easy_setopt(c, CURLOPT_CAINFO, t->ca_file);
	}
	if (t->ca_path != NULL)
		curl_easy_setopt(c, CURLOPT_CAPATH, t->ca_path);
}

void storage_tls_free(storage_tls *t)
{
	if (t == NULL)
		return;
	free(t->ca_file);
	free(t->ca_path);
	free(t->blob);
	free(t);
}
