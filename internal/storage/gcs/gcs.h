/*
 * gcs: the private interface between the Google Cloud Storage adapter's files: configuration,
 * OAuth2 tokens (service-account JWT, authorized user, metadata server) and JSON answers
 * (gcs.c), and the JSON API operations (gcsobj.c), on the HTTP object-store core (http.h).
 * Only storage.c and tests include it.
 */
#ifndef WALC_INTERNAL_STORAGE_GCS_H
#define WALC_INTERNAL_STORAGE_GCS_H

#include "internal/storage/http/http.h"

/* Opens the GCS backend for cfg->gs_prefix (gs://bucket/path). */
err_code storage_gcs_open(const storage_settings *cfg, storage **out);

typedef enum gcs_auth_kind {
	GCS_NO_AUTH,		 /* STORAGE_EMULATOR_HOST */
	GCS_SERVICE_ACCOUNT, /* GOOGLE_APPLICATION_CREDENTIALS: a service account's key */
	GCS_AUTHORIZED_USER, /* GOOGLE_APPLICATION_CREDENTIALS: gcloud's user refresh token */
	GCS_METADATA,		 /* the metadata server (GKE Workload Identity, GCE) */
} gcs_auth_kind;

typedef struct gcs_storage {
	storage base;
	char *bucket;
	char *root;		/* object name prefix, "" or ending in '/' */
	char *describe; /* gs://bucket/root */
	char *base_url; /* https://storage.googleapis.com, or the emulator's */
	bool normalize; /* GCS_NORMALIZE_PREFIX */
	gcs_auth_kind kind;
	/* service account / authorized user */
	char *client_email, *private_key, *token_uri, *client_id, *client_secret, *refresh_token;
	char *metadata_url;
	http_token_cache tokens;
	/* customer-supplied encryption key */
	char *csek_b64, *csek_sha_b64;
	size_t chunk_size;
	int width; /* parallel deletes */
	budget *parts;
	http_client http;
	http_auth auth;
} gcs_storage;

/* A request to base_url + path (already encoded); query in c->query, set before. */
void gcs_call_init(gcs_storage *s, http_call *c, const char *method, char *path,
				   const char *what_key);
err_code gcs_call(gcs_storage *s, http_call *c);
err_code gcs_answer_error(gcs_storage *s, const char *what, const http_response *r);
void gcs_add_csek(const gcs_storage *s, http_kvs *h);
void gcs_storage_free(storage *st);

/* A page of objects.list: {"items": [{"name", "size", "updated"}], "nextPageToken"}. */
err_code gcs_json_list(const char *doc, size_t len, obj_list *items, char **next);
/* An object resource's size and update time. */
err_code gcs_json_object(const char *doc, size_t len, uint64_t *size, time_t *mtime,
						 long *nsec);
/* {"error": {"code", "message", "errors": [{"reason"}]}}: reason into code. */
bool gcs_json_error(const char *doc, size_t len, char *code, size_t codesz, char *msg,
					size_t msgsz);
/* The fields of a credentials file (service_account or authorized_user). */
err_code gcs_parse_credentials(gcs_storage *s, const char *doc, size_t len, const char *path);

extern const storage_ops gcs_ops;

#endif
