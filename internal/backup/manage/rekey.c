/*
 * rekey: every encrypted object of the repository (or of the named backups) re-encrypted from
 * an older key of the ring to the current one, so that an old key can be retired. An object
 * is never readable by neither key: it is replaced only by an atomic put of bytes that were
 * first stored whole as a temporary copy (walc_rekey/KEY, a folder WAL-G ignores) and, as
 * they are copied back, decrypt with the current key alone to the same plaintext the old
 * object held. Objects already under the current key are left alone, so a run that was
 * killed is finished by the next one.
 */
#include "internal/backup/restore/fetch_impl.h"
#include "internal/backup/manage/retention_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define REKEY_DIR "walc_rekey/"

typedef struct rekey_run {
	repo *r;
	FILE *out;
	pthread_mutex_t lock;
	uint64_t current, rekeyed, problems; /* under lock */
	progress prog;
} rekey_run;

/* Objects that the repository's key encrypts: WAL files, tar partitions, server manifests. */
static bool encrypted_key(const char *key)
{
	static const char *const dirs[] = { REPO_BACKUP_DIR, REPO_CATCHUP_DIR };
	if (str_has_prefix(key, REPO_WAL_DIR))
		return !str_has_suffix(key, ".json"); /* WAL metadata is plain JSON */
	for (size_t i = 0; i < 2; i++) {
		if (!str_has_prefix(key, dirs[i]))
			continue;
		const char *in = strchr(key + strlen(dirs[i]), '/');
		return in != NULL &&
			(str_has_prefix(in + 1, "tar_partitions/") ||
			 str_has_prefix(in + 1, "walc_backup_manifest"));
	}
	return false;
}

static void problem(rekey_run *k, const char *key, const char *why)
{
	pthread_mutex_lock(&k->lock);
	k->problems++;
	fprintf(k->out, "PROBLEM %s: %s\n", key, why);
	fflush(k->out);
	pthread_mutex_unlock(&k->lock);
}

static void hash_tap(void *arg, const void *buf, size_t len)
{
	hasher_update(arg, buf, len);
}

/* Writes go to both sinks (owned); the caller finishes each. */
typedef struct tee_sink {
	sink base;
	sink *a, *b;
} tee_sink;

static err_code tee_write(sink *s, const void *buf, size_t len)
{
	tee_sink *t = (tee_sink *)s;
	TRY(sink_write(t->a, buf, len));
	return sink_write(t->b, buf, len);
}

static err_code tee_finish(sink *s)
{
	(void)s;
	return E_OK;
}

static void tee_free(sink *s)
{
	tee_sink *t = (tee_sink *)s;
	sink_free(t->a);
	sink_free(t->b);
	free(t);
}

static const sink_ops tee_ops = { tee_write, tee_finish, tee_free };

static err_code put_for(repo *r, const char *key, sink **out)
{
	return repo_put_plain(r, key,
						  strstr(key, "/tar_partitions/") != NULL ? REPO_PUT_LONG : REPO_PUT_REPLACE,
						  out);
}

/*
 * The object decrypted with the ring and encrypted with the current key into the temporary
 * copy tkey, published whole; sum: the plaintext's.
 */
static err_code copy_out(repo *r, const char *key, const char *tkey, char sum[HASH_TEXT_LEN + 1])
{
	sink *put = NULL;
	hasher *h = hasher_new();
	err_code rc = put_for(r, tkey, &put);
	if (rc == E_OK) {
		sink *s = repo_decrypt_new(r, tap_sink_new(hash_tap, h, repo_encrypt_new(r, put)));
		s = repo_paced_new(r, s);
		rc = repo_get_plain(r, key, s);
		if (rc == E_OK)
			rc = sink_finish(s);
		sink_free(s);
	}
	hasher_text(h, sum);
	hasher_free(h);
	return rc == E_OK ? E_OK : err_wrap(rc, "re-encrypting into %s", tkey);
}

/*
 * The temporary copy's stored bytes put back under key, published only once they decrypted
 * with the current key alone to the plaintext sum, and once key still is the object that was
 * read (a writer replacing it meanwhile wins).
 */
static err_code copy_back(repo *r, const char *key, const char *tkey, const repo_obj *was,
						  const char *sum)
{
	tee_sink *t = xcalloc(1, sizeof(*t));
	hasher *h = hasher_new();
	t->base.ops = &tee_ops;
	t->b = repo_decrypt_current_new(r, tap_sink_new(hash_tap, h, null_sink_new()));
	err_code rc = put_for(r, key, &t->a);
	sink *in = repo_paced_new(r, &t->base);
	if (rc == E_OK)
		rc = repo_get_plain(r, tkey, in);
	if (rc == E_OK)
		rc = sink_finish(t->b);
	char got[HASH_TEXT_LEN + 1];
	hasher_text(h, got);
	if (rc == E_OK && strcmp(got, sum) != 0)
		rc = err_set(E_CORRUPT, "%s decrypts with the current key to other bytes than %s "
								"(%s, not %s): %s left as it was",
					 tkey, key, got, sum, key);
	repo_obj now;
	if (rc == E_OK && (rc = repo_stat(r, key, &now)) == E_OK &&
		(now.size != was->size || now.mtime != was->mtime || now.mtime_nsec != was->mtime_nsec))
		rc = err_set(E_EXISTS, "%s was replaced while it was re-encrypted: left as the writer "
							   "left it",
					 key);
	if (rc == E_OK)
		rc = sink_finish(t->a);
	sink_free(in);
	hasher_free(h);
	return rc;
}

static err_code rekey_object(void *arg, const char *key)
{
	rekey_run *k = arg;
	repo *r = k->r;
	repo_obj was, copy, after;
	repo_key_of which = REPO_KEY_NONE;
	err_code rc = repo_stat(r, key, &was);
	if (rc == E_NOTFOUND) { /* deleted since it was listed */
		err_clear();
		return E_OK;
	}
	if (rc == E_OK)
		rc = repo_probe_key(r, key, was.size, &which);
	progress_add(&k->prog, was.size, 1);
	if (rc == E_OK && which == REPO_KEY_CURRENT) {
		pthread_mutex_lock(&k->lock);
		k->current++;
		pthread_mutex_unlock(&k->lock);
		return E_OK;
	}
	if (rc == E_OK && which == REPO_KEY_NONE) {
		problem(k, key, "no key of the ring opens it (stored in the clear, or encrypted with a "
						"key the ring lacks): left as it is");
		return E_OK;
	}
	char *tkey = xasprintf(REKEY_DIR "%s", key);
	char sum[HASH_TEXT_LEN + 1];
	if (rc == E_OK)
		rc = copy_out(r, key, tkey, sum);
	if (rc == E_OK)
		rc = repo_stat(r, tkey, &copy);
	if (rc == E_OK)
		rc = copy_back(r, key, tkey, &was, sum);
	if (rc == E_OK && (rc = repo_stat(r, key, &after)) == E_OK && after.size != copy.size)
		rc = err_set(E_CORRUPT, "%s is %llu bytes after its replacement, its checked copy %s %llu",
					 key, (unsigned long long)after.size, tkey, (unsigned long long)copy.size);
	if (rc == E_OK) {
		if (repo_remove(r, tkey) != E_OK)
			err_clear(); /* a stray copy: the next run removes it */
		pthread_mutex_lock(&k->lock);
		k->rekeyed++;
		fprintf(k->out, "rekeyed %s\n", key);
		fflush(k->out);
		pthread_mutex_unlock(&k->lock);
	}
	free(tkey);
	if (rc == E_CANCELLED)
		return rc;
	if (rc != E_OK && rc != E_NOTFOUND)
		problem(k, key, err_msg());
	err_clear();
	return E_OK;
}

/* Encrypted objects below prefix, into keys; a backup's pg_control.tar after its partitions. */
static err_code collect(repo *r, const char *prefix, bool recursive, repo_objs *all,
						uint64_t *bytes)
{
	repo_objs l;
	TRY(repo_list(r, prefix, recursive, &l));
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < l.len; i++) {
			const repo_obj *o = &l.items[i];
			if (encrypted_key(o->key) && (strstr(o->key, "/pg_control.tar") != NULL) == pass) {
				repo_objs_add(all, o->key, o->size, o->mtime, o->mtime_nsec);
				*bytes += o->size;
			}
		}
	repo_objs_free(&l);
	return E_OK;
}

/* The object a hidden temporary (".NAME.walc-tmp.PID.SEQ") was to become, or NULL. */
static char *target_of(const char *temp)
{
	const char *slash = strrchr(temp, '/'), *base = slash ? slash + 1 : temp;
	const char *mark = strstr(base, FILE_TMP_MARK);
	if (base[0] != '.' || mark == NULL)
		return NULL;
	return xasprintf("%.*s%.*s", (int)(base - temp), temp, (int)(mark - base - 1), base + 1);
}

static bool in_scope(const repo_objs *scope, const char *key)
{
	for (size_t k = 0; key != NULL && k < scope->len; k++)
		if (strcmp(scope->items[k].key, key) == 0)
			return true;
	return false;
}

/*
 * What this run and killed ones left: the temporary copies of objects in scope (every one,
 * for the whole repository), and the hidden temporaries (file and SFTP storage) of puts that
 * were killed, beside the objects in scope. WAL-G v3.0.9's backup-fetch takes every name in
 * tar_partitions/ for a partition, hidden ones too, and retries one it cannot read for hours.
 */
static void remove_leftovers(repo *r, const repo_objs *scope, bool whole)
{
	static const char *const dirs[] = { REKEY_DIR, REPO_BACKUP_DIR, REPO_CATCHUP_DIR, REPO_WAL_DIR };
	repo_objs l = { 0 }, dead = { 0 };
	err_code rc = repo_list(r, REKEY_DIR, true, &l);
	for (size_t d = 0; rc == E_OK && d < 4; d++)
		rc = retain_dead_temporaries(r, dirs[d], &dead);
	for (size_t i = 0; rc == E_OK && i < l.len; i++)
		if ((whole || in_scope(scope, l.items[i].key + strlen(REKEY_DIR))) &&
			repo_remove(r, l.items[i].key) != E_OK)
			err_clear();
	for (size_t i = 0; rc == E_OK && i < dead.len; i++) {
		char *target = target_of(dead.items[i].key);
		bool copy = str_has_prefix(dead.items[i].key, REKEY_DIR);
		if (target != NULL &&
			((copy && whole) || in_scope(scope, copy ? target + strlen(REKEY_DIR) : target)) &&
			repo_remove(r, dead.items[i].key) != E_OK)
			err_clear();
		free(target);
	}
	if (rc != E_OK) {
		log_warn("rekey: leftovers of interrupted runs not removed: %s", err_msg());
		err_clear();
	}
	repo_objs_free(&l);
	repo_objs_free(&dead);
}

err_code backup_rekey(repo *r, const rekey_options *o, uint64_t *problems, FILE *out)
{
	*problems = 0;
	if (!repo_encrypted(r))
		return err_set(E_CONFIG, "rekey: no current key: set WALG_LIBSODIUM_KEY(_PATH) or "
								 "WALG_PGP_KEY(_PATH) to the key objects are re-encrypted with, "
								 "and WALG_OLD_KEY_PATHS to the ones they are encrypted with");
	repo_objs keys = { 0 };
	uint64_t bytes = 0;
	err_code rc = E_OK;
	for (size_t i = 0; rc == E_OK && i < o->nnames; i++) {
		char *name = NULL;
		rc = catalog_resolve(r, o->names[i], &name);
		char *prefix = rc == E_OK ? xasprintf("%s%s/", repo_backups(r), name) : NULL;
		if (rc == E_OK)
			rc = collect(r, prefix, true, &keys, &bytes);
		free(prefix);
		free(name);
	}
	if (rc == E_OK && o->nnames == 0) {
		rc = collect(r, REPO_BACKUP_DIR, true, &keys, &bytes);
		if (rc == E_OK)
			rc = collect(r, REPO_CATCHUP_DIR, true, &keys, &bytes);
		if (rc == E_OK)
			rc = collect(r, REPO_WAL_DIR, false, &keys, &bytes);
	}
	rekey_run k = { .r = r, .out = out };
	pthread_mutex_init(&k.lock, NULL);
	const char **list = xcalloc(keys.len + 1, sizeof(*list));
	for (size_t i = 0; i < keys.len; i++)
		list[i] = keys.items[i].key;
	if (rc == E_OK) {
		log_info("rekey: %zu encrypted objects (%.1f MiB) in %s, to the current %s key",
				 keys.len, (double)bytes / 1048576, repo_describe(r),
				 repo_crypt_name(r));
		progress_start(&k.prog, "rekey", bytes);
		rc = parts_run(list, keys.len, o->concurrency, rekey_object, &k);
		progress_log(&k.prog);
	}
	if (rc == E_OK)
		remove_leftovers(r, &keys, o->nnames == 0);
	/* the repository's own record, last: every object is now the current key's */
	if (rc == E_OK && k.problems == 0 && o->nnames == 0)
		rc = catalog_record_encryption(r);
	if (rc == E_OK)
		fprintf(out, "rekey: %zu objects: %llu re-encrypted with the current key, %llu were "
					 "already, %llu problem%s\n",
				keys.len, (unsigned long long)k.rekeyed, (unsigned long long)k.current,
				(unsigned long long)k.problems, k.problems == 1 ? "" : "s");
	*problems = k.problems;
	free(list);
	repo_objs_free(&keys);
	pthread_mutex_destroy(&k.lock);
	return rc;
}
