/*
 * One cluster per repository. Two clusters archiving to one prefix replace each other's WAL
 * segments of the same name (a re-initdb'd primary, a prefix copied into another release), so
 * every writer checks the cluster's system identifier against the repository's: a marker
 * object at the root (WAL-G ignores it), or, before the first walc writer recorded one, the
 * newest backup's sentinel. The marker also records the encryption method once an encrypting
 * writer has written (never key material), and a writer without a key is then refused.
 */
#include "internal/catalog/catalog_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What this process verified already: the daemon checks once, not per segment. */
static pthread_mutex_t verified_lock = PTHREAD_MUTEX_INITIALIZER;
static char *verified_repo;
static uint64_t verified_sysid;
static const char *verified_encryption; /* a repo_crypt_name, or NULL */

static const char *our_encryption(const repo *r);

static bool verified(repo *r, uint64_t sysid)
{
	pthread_mutex_lock(&verified_lock);
	bool yes = verified_repo != NULL && verified_sysid == sysid &&
		verified_encryption == our_encryption(r) &&
		strcmp(verified_repo, repo_describe(r)) == 0;
	pthread_mutex_unlock(&verified_lock);
	return yes;
}

static void remember(repo *r, uint64_t sysid)
{
	pthread_mutex_lock(&verified_lock);
	free(verified_repo);
	verified_repo = xstrdup(repo_describe(r));
	verified_sysid = sysid;
	verified_encryption = our_encryption(r);
	pthread_mutex_unlock(&verified_lock);
}

static err_code parse_sysid(const char *text, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = text != NULL ? strtoull(text, &end, 10) : 0;
	if (text == NULL || errno != 0 || end == text || *end != '\0')
		return err_set(E_CORRUPT, CATALOG_CLUSTER_MARKER " in the repository has no valid "
								  "system_identifier; remove it and walc records the cluster "
								  "again");
	*out = v;
	return E_OK;
}

err_code catalog_marker_sysid(repo *r, bool *have, uint64_t *sysid)
{
	json_t *doc = NULL;
	*have = false;
	err_code rc = catalog_read_optional(r, CATALOG_CLUSTER_MARKER, &doc);
	if (rc == E_OK && doc != NULL)
		rc = parse_sysid(json_string_value(json_object_get(doc, "system_identifier")), sysid);
	*have = rc == E_OK && doc != NULL;
	json_decref(doc);
	if (rc != E_CORRUPT)
		return rc;
	log_warn("%s", err_msg());
	err_clear();
	return E_OK;
}

/* The marker for cluster sysid, recording the encryption method enc (NULL: none known). */
static err_code write_marker(repo *r, uint64_t sysid, bool exclusive, const char *enc)
{
	char host[256] = "", id[32];
	gethostname(host, sizeof(host) - 1);
	snprintf(id, sizeof(id), "%llu", (unsigned long long)sysid);
	char *when = time_now_rfc3339();
	json_t *doc = json_object();
	json_object_set_new(doc, "system_identifier", json_string(id));
	json_object_set_new(doc, "recorded", json_string(when));
	json_object_set_new(doc, "hostname", json_string(host));
	if (enc != NULL)
		json_object_set_new(doc, "encryption", json_string(enc));
	free(when);
	err_code rc = exclusive ? catalog_put_json_new(r, CATALOG_CLUSTER_MARKER, doc)
							: catalog_put_json(r, CATALOG_CLUSTER_MARKER, doc);
	json_decref(doc);
	return rc;
}

/* This writer's encryption method, NULL when it writes in the clear. */
static const char *our_encryption(const repo *r)
{
	return repo_crypt_name(r);
}

/*
 * A repository whose objects are encrypted (recorded: the method, or NULL) takes no object in
 * the clear: a restore with the key could not read it, and one without could not read the rest.
 */
static err_code check_encryption(repo *r, const char *what, const char *recorded)
{
	const char *ours = our_encryption(r);
	if (recorded == NULL)
		return E_OK;
	if (ours == NULL)
		return err_set(E_CONFIG,
					   "%s: %s holds objects encrypted with %s (" CATALOG_CLUSTER_MARKER
					   "), and no key is configured: set %s, as its other writers do",
					   what, repo_describe(r), recorded, repo_crypt_vars(recorded));
	/* during a key rotation (an older key of the recorded method in the ring) as planned */
	if (strcmp(ours, recorded) != 0 && !repo_crypt_reads(r, recorded))
		log_warn("%s: %s holds objects encrypted with %s (" CATALOG_CLUSTER_MARKER
				 "); this writer encrypts with %s: a restore needs both keys",
				 what, repo_describe(r), recorded, ours);
	return E_OK;
}

static err_code mismatch(repo *r, const char *what, uint64_t ours, uint64_t theirs,
						 const char *source)
{
	return err_set(E_CONFIG,
				   "%s: this cluster's system identifier is %llu, but %s holds the WAL and "
				   "backups of cluster %llu (%s): archive this cluster to a new prefix, or set "
				   "WALG_ALLOW_SYSTEM_ID_CHANGE=true if replacing it is intended",
				   what, (unsigned long long)ours, repo_describe(r),
				   (unsigned long long)theirs, source);
}

/* Before any walc writer recorded the cluster: the newest backup that names one. */
static err_code sentinel_cluster(repo *r, bool *found, uint64_t *sysid, char **name)
{
	backup_refs refs;
	*found = false;
	TRY(catalog_backups(r, &refs));
	err_code rc = E_OK;
	for (size_t i = refs.len; i-- > 0 && !*found;) {
		backup_sentinel s;
		rc = catalog_sentinel_read(r, refs.items[i].name, &s);
		if (rc == E_NOTFOUND ||
			catalog_sentinel_skip(rc, refs.items[i].name, "the cluster is taken from another")) {
			rc = E_OK;
			continue;
		}
		if (rc != E_OK)
			break;
		if (s.have_system_id) {
			*found = true;
			*sysid = s.system_id;
			*name = xstrdup(refs.items[i].name);
		}
		catalog_sentinel_free(&s);
	}
	catalog_backups_free(&refs);
	return rc;
}

err_code catalog_check_cluster(repo *r, uint64_t sysid, const catalog_settings *s, const char *what)
{
	if (verified(r, sysid))
		return E_OK;
	TRY(repo_prepare_write(r));
	for (int attempt = 0; attempt < 2; attempt++) {
		json_t *doc = NULL;
		err_code rc = catalog_read_json(r, CATALOG_CLUSTER_MARKER, CATALOG_JSON_MAX, &doc);
		if (rc == E_OK) {
			uint64_t theirs = 0;
			rc = parse_sysid(json_string_value(json_object_get(doc, "system_identifier")),
							 &theirs);
			char *source = xasprintf(CATALOG_CLUSTER_MARKER ", recorded %s on %s",
									 json_string_value(json_object_get(doc, "recorded")) ?: "?",
									 json_string_value(json_object_get(doc, "hostname")) ?: "?");
			const char *e = json_string_value(json_object_get(doc, "encryption"));
			char *enc = e != NULL ? xstrdup(e) : NULL;
			json_decref(doc);
			if (rc == E_OK)
				rc = check_encryption(r, what, enc);
			const char *keep = enc != NULL ? enc : our_encryption(r);
			if (rc == E_OK && theirs != sysid) {
				if (s->allow_system_id_change) {
					log_warn("%s: the repository held cluster %llu; it now holds cluster %llu "
							 "(WALG_ALLOW_SYSTEM_ID_CHANGE)",
							 what, (unsigned long long)theirs, (unsigned long long)sysid);
					rc = write_marker(r, sysid, false, keep);
				} else {
					rc = mismatch(r, what, sysid, theirs, source);
				}
			} else if (rc == E_OK && enc == NULL && keep != NULL) {
				/* The first encrypted writer: from now on, writers without a key are refused. */
				log_info("%s: recording in " CATALOG_CLUSTER_MARKER " that %s's objects are "
						 "encrypted with %s",
						 what, repo_describe(r), keep);
				rc = write_marker(r, theirs, false, keep);
			}
			free(enc);
			free(source);
			if (rc == E_OK)
				remember(r, sysid);
			return rc;
		}
		if (rc != E_NOTFOUND)
			return rc;
		err_clear();
		bool found;
		uint64_t theirs = 0;
		char *name = NULL;
		TRY(sentinel_cluster(r, &found, &theirs, &name));
		if (found && theirs != sysid && !s->allow_system_id_change) {
			char *source = xasprintf("its newest backup %s", name);
			rc = mismatch(r, what, sysid, theirs, source);
			free(source);
			free(name);
			return rc;
		}
		free(name);
		rc = write_marker(r, sysid, true, our_encryption(r));
		if (rc == E_OK) {
			remember(r, sysid);
			return E_OK;
		}
		if (rc != E_EXISTS) /* another writer recorded one meanwhile: read it */
			return err_wrap(rc, "recording the cluster in %s", repo_describe(r));
		err_clear();
	}
	return err_set(E_IO, "%s: could not read or record " CATALOG_CLUSTER_MARKER " in %s", what,
				   repo_describe(r));
}

err_code catalog_check_encryption(repo *r, const char *what)
{
	json_t *doc = NULL;
	TRY(repo_prepare_write(r));
	TRY(catalog_read_optional(r, CATALOG_CLUSTER_MARKER, &doc));
	err_code rc = check_encryption(r, what, json_string_value(json_object_get(doc, "encryption")));
	json_decref(doc);
	return rc;
}

err_code catalog_record_encryption(repo *r)
{
	json_t *doc = NULL;
	TRY(catalog_read_optional(r, CATALOG_CLUSTER_MARKER, &doc));
	const char *recorded = json_string_value(json_object_get(doc, "encryption"));
	const char *ours = our_encryption(r);
	err_code rc = E_OK;
	uint64_t sysid;
	if (doc != NULL && ours != NULL && (recorded == NULL || strcmp(recorded, ours) != 0) &&
		(rc = parse_sysid(json_string_value(json_object_get(doc, "system_identifier")),
						  &sysid)) == E_OK) {
		log_info("recording in " CATALOG_CLUSTER_MARKER " that %s's objects are encrypted with "
				 "%s",
				 repo_describe(r), ours);
		rc = write_marker(r, sysid, false, ours);
	}
	json_decref(doc);
	return rc;
}
