/*
 * azure: the private interface between the Azure Blob adapter's files: configuration, Shared
 * Key signing, SAS and Azure AD tokens, URLs and errors (azure.c), and the storage operations
 * (azblob.c), on the HTTP object-store core (http.h). Only storage.c and tests include it.
 */
#ifndef WALC_INTERNAL_STORAGE_AZURE_H
#define WALC_INTERNAL_STORAGE_AZURE_H

#include "internal/storage/http/http.h"

/* Opens the Azure Blob backend for cfg->az_prefix (azure://container/path). */
err_code storage_az_open(const storage_settings *cfg, storage **out);

typedef enum az_auth_kind {
	AZ_SHARED_KEY,		/* AZURE_STORAGE_ACCESS_KEY */
	AZ_SAS,				/* AZURE_STORAGE_SAS_TOKEN */
	AZ_CLIENT_SECRET,	/* AZURE_CLIENT_SECRET with AZURE_CLIENT_ID, AZURE_TENANT_ID */
	AZ_WORKLOAD,		/* AZURE_FEDERATED_TOKEN_FILE (AKS workload identity) */
	AZ_MANAGED,			/* the instance metadata endpoint (managed identity) */
} az_auth_kind;

typedef struct az_storage {
	storage base;
	char *account;
	char *container;
	char *root;		/* blob name prefix, "" or ending in '/' */
	char *describe; /* azure://container/root */
	char *host;		/* ACCOUNT.blob.SUFFIX */
	char *api_version;
	az_auth_kind kind;
	unsigned char *key; /* Shared Key, decoded */
	size_t keylen;
	char *sas;			/* without '?' */
	/* Azure AD */
	char *client_id, *tenant_id, *client_secret, *token_file, *authority, *imds;
	http_token_cache tokens;
	size_t block_size;
	int concurrency; /* blocks of one upload at once */
	int width;		 /* batch deletes at once */
	budget *parts;
	http_client http;
	http_auth auth;
} az_storage;

/* A request to the container (blob NULL; query in c->query, set before) or a blob (full name). */
void az_call_init(az_storage *s, http_call *c, const char *method, const char *blob);
err_code az_call(az_storage *s, http_call *c);
err_code az_answer_error(az_storage *s, const char *what, const http_response *r);
/*
 * The Authorization value for a request (Shared Key: signs it; Azure AD: the bearer token),
 * or NULL with SAS. For the subrequests of a batch, which are authorized one by one.
 */
err_code az_authorization(az_storage *s, const char *method, const char *path,
						  const http_kvs *query, const http_kvs *hdrs, size_t body_len,
						  bool refresh, char **out);
/* "Tue, 02 Jan 2024 03:04:05 GMT" for x-ms-date. */
void az_date(char out[32]);
/* Parses an EnumerationResults page: names as stored, next marker. */
typedef struct az_list_page {
	obj_list items;
	obj_list prefixes;
	char *next_marker;
} az_list_page;
err_code az_xml_list(const char *doc, size_t len, az_list_page *out);
void az_list_page_free(az_list_page *p);
/* The statuses of a Blob Batch answer (multipart/mixed): counts of each kind. */
err_code az_batch_statuses(const char *doc, size_t len, size_t *ok, size_t *missing,
						   size_t *failed, long *first_failed);

void az_storage_free(storage *st);
/* The storage operations (azblob.c). */
extern const storage_ops az_ops;

#endif
