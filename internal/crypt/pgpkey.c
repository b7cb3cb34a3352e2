/*
 * OpenPGP keys as WAL-G's openpgp crypter reads them (reference §2.3, §3.4): an armored key
 * text from WALG_PGP_KEY or WALG_PGP_KEY_PATH, its first armor block only, and
 * WALG_PGP_KEY_PASSPHRASE for protected secret keys. Neither the text nor the passphrase ever
 * reaches a message: only variable names, paths and key ids do.
 */
#include "internal/crypt/pgp_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A key file holds a few KiB; the cap only stops a wrong path from eating memory. */
#define KEY_TEXT_MAX (1024 * 1024)

/* ------------------------------------------------------------------------------------------ */
/* Buffers for key material                                                                   */
/* ------------------------------------------------------------------------------------------ */

static void buf_append(pgp_buf *b, const void *p, size_t n)
{
	if (n > b->cap - b->len) {
		size_t cap = b->cap ? b->cap : 4096, len = b->len;
		while (cap - len < n)
			cap *= 2;
		/* Not realloc: the old copy would stay behind in freed memory. */
		unsigned char *d = xmalloc(cap);
		if (len > 0)
			memcpy(d, b->data, len);
		pgp_buf_wipe(b);
		b->data = d;
		b->cap = cap;
		b->len = len;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void pgp_buf_wipe(pgp_buf *b)
{
	if (b->data != NULL) {
		rnp_buffer_clear(b->data, b->cap);
		free(b->data);
	}
	memset(b, 0, sizeof(*b));
}

static bool buf_writer(void *ctx, const void *buf, size_t len)
{
	buf_append(ctx, buf, len);
	return true;
}

/* ------------------------------------------------------------------------------------------ */
/* librnp contexts                                                                            */
/* ------------------------------------------------------------------------------------------ */

static int devnull_fd = -1;
static pthread_once_t devnull_once = PTHREAD_ONCE_INIT;

static void open_devnull(void)
{
	devnull_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
}

rnp_ffi_t pgp_ffi_new(void)
{
	rnp_ffi_t ffi = NULL;
	if (rnp_ffi_create(&ffi, "GPG", "GPG") != RNP_SUCCESS)
		return NULL;
	/*
	 * librnp prints its own diagnostics, which would break WAL-G's log format. It takes the
	 * descriptor over (fdopen, fclose with the context): give it a copy.
	 */
	pthread_once(&devnull_once, open_devnull);
	int fd = log_enabled(LOG_DEBUG) ? STDERR_FILENO : devnull_fd;
	int own = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
	if (own >= 0 && rnp_ffi_set_log_fd(ffi, own) != RNP_SUCCESS)
		close(own);
	return ffi;
}

rnp_result_t pgp_import(rnp_ffi_t ffi, const unsigned char *buf, size_t len)
{
	rnp_input_t in = NULL;
	rnp_result_t rc = rnp_input_from_memory(&in, buf, len, false);
	if (rc == RNP_SUCCESS)
		rc = rnp_import_keys(ffi, in, RNP_LOAD_SAVE_PUBLIC_KEYS | RNP_LOAD_SAVE_SECRET_KEYS,
							 NULL);
	rnp_input_destroy(in);
	return rc;
}

/* Saves every key of ffi (flags: public, or public and secret) into out. */
static rnp_result_t save_keys(rnp_ffi_t ffi, uint32_t flags, pgp_buf *out)
{
	rnp_output_t o = NULL;
	rnp_result_t rc = rnp_output_to_callback(&o, buf_writer, NULL, out);
	if (rc == RNP_SUCCESS)
		rc = rnp_save_keys(ffi, "GPG", o, flags);
	if (rc == RNP_SUCCESS)
		rc = rnp_output_finish(o);
	rnp_output_destroy(o);
	return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Parsing                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* The first line at or after from that starts with what; text is where the text begins. */
static const char *find_line(const char *text, const char *from, const char *end,
							 const char *what)
{
	size_t n = strlen(what);
	for (const char *p = from; (size_t)(end - p) >= n; p++)
		if ((p == text || p[-1] == '\n') && memcmp(p, what, n) == 0)
			return p;
	return NULL;
}

/*
 * The first armor block, as Go's armor.Decode finds it: from the first BEGIN line to the
 * END line after it. Only key blocks are keys (go-crypto's ReadArmoredKeyRing).
 */
static err_code first_block(const char *text, size_t len, const char *var, const char **start,
							size_t *blen, bool *more)
{
	static const char begin[] = "-----BEGIN PGP ";
	const char *end = text + len;
	const char *b = find_line(text, text, end, begin);
	if (b == NULL)
		return err_set(E_CONFIG, "%s: not an ASCII-armored OpenPGP key (no \"-----BEGIN PGP "
								 "... KEY BLOCK-----\" line)",
					   var);
	const char *type = b + sizeof(begin) - 1;
	if (!((size_t)(end - type) >= 16 && memcmp(type, "PUBLIC KEY BLOCK", 16) == 0) &&
		!((size_t)(end - type) >= 17 && memcmp(type, "PRIVATE KEY BLOCK", 17) == 0))
		return err_set(E_CONFIG, "%s: the first armor block is not a PUBLIC KEY BLOCK or "
								 "PRIVATE KEY BLOCK",
					   var);
	const char *e = find_line(text, type, end, "-----END PGP ");
	const char *stop = end;
	if (e != NULL) {
		stop = memchr(e, '\n', (size_t)(end - e));
		stop = stop ? stop + 1 : end;
	}
	*start = b;
	*blen = (size_t)(stop - b);
	*more = e != NULL && find_line(text, stop, end, begin) != NULL;
	return E_OK;
}

static char *keyid_of(rnp_key_handle_t h)
{
	char *id = NULL;
	if (rnp_key_get_keyid(h, &id) != RNP_SUCCESS || id == NULL)
		return xstrdup("(unknown)");
	char *out = xstrdup(id);
	rnp_buffer_destroy(id);
	return out;
}

/* Encrypts one byte to key h and throws it away: librnp picks the subkey only at execute. */
static rnp_result_t try_encrypt_to(rnp_ffi_t ffi, rnp_key_handle_t h)
{
	static const uint8_t one[1];
	rnp_input_t in = NULL;
	rnp_output_t out = NULL;
	rnp_op_encrypt_t op = NULL;
	rnp_result_t rc = rnp_input_from_memory(&in, one, sizeof(one), false);
	if (rc == RNP_SUCCESS)
		rc = rnp_output_to_null(&out);
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_create(&op, ffi, in, out);
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_add_recipient(op, h);
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_set_aead(op, "None");
	if (rc == RNP_SUCCESS)
		rc = rnp_op_encrypt_execute(op);
	rnp_op_encrypt_destroy(op);
	rnp_input_destroy(in);
	rnp_output_destroy(out);
	return rc;
}

/*
 * Counts primary keys and secret keys; checks that every primary key can be encrypted to now,
 * remembering a failure for encryption only: an expired key still decrypts old objects.
 */
static err_code survey(rnp_ffi_t ffi, pgp_keys *k)
{
	rnp_identifier_iterator_t it = NULL;
	const char *fp;

	if (rnp_identifier_iterator_create(ffi, &it, "fingerprint") != RNP_SUCCESS)
		return err_set(E_FAIL, "librnp: cannot list keys");
	while (rnp_identifier_iterator_next(it, &fp) == RNP_SUCCESS && fp != NULL) {
		rnp_key_handle_t h = NULL;
		bool primary = false, secret = false;
		if (rnp_locate_key(ffi, "fingerprint", fp, &h) != RNP_SUCCESS || h == NULL)
			continue;
		rnp_key_is_primary(h, &primary);
		rnp_key_have_secret(h, &secret);
		k->have_secret |= secret;
		char *id = NULL;
		if (rnp_key_get_keyid(h, &id) == RNP_SUCCESS && id != NULL) {
			k->ids = xrealloc(k->ids, (k->nids + 1) * sizeof(*k->ids));
			k->ids[k->nids++] = strtoull(id, NULL, 16);
			rnp_buffer_destroy(id);
		}
		if (primary) {
			k->primaries++;
			rnp_result_t rc = k->enc_rc == E_OK ? try_encrypt_to(ffi, h) : RNP_SUCCESS;
			if (rc != RNP_SUCCESS) {
				char *id = keyid_of(h);
				k->enc_rc = E_CONFIG;
				snprintf(k->enc_msg, sizeof(k->enc_msg),
						 "%s: key %s cannot be encrypted to (expired, revoked or without an "
						 "encryption subkey): %s",
						 k->var, id, rnp_result_to_string(rc));
				free(id);
			}
		}
		rnp_key_handle_destroy(h);
	}
	rnp_identifier_iterator_destroy(it);
	if (k->primaries == 0)
		return err_set(E_CONFIG, "%s: the armor block holds no OpenPGP key", k->var);
	return E_OK;
}

err_code pgp_keys_parse(const char *text, size_t len, const char *passphrase, const char *var,
						pgp_keys **out)
{
	const char *start = NULL;
	size_t blen = 0;
	bool more = false;
	*out = NULL;
	TRY(first_block(text, len, var, &start, &blen, &more));
	if (more)
		log_warn("%s: only the first armor block is read (as WAL-G does); the blocks after it "
				 "are ignored",
				 var);

	pgp_keys *k = xcalloc(1, sizeof(*k));
	k->var = var;
	pthread_mutex_init(&k->mu, NULL);
	buf_append(&k->block, start, blen);
	if (passphrase != NULL)
		k->passphrase = xstrdup(passphrase);

	err_code rc = E_OK;
	rnp_ffi_t ffi = pgp_ffi_new();
	rnp_result_t rr;
	if (ffi == NULL)
		rc = err_set(E_FAIL, "librnp: cannot create a context");
	else if ((rr = pgp_import(ffi, k->block.data, k->block.len)) != RNP_SUCCESS)
		rc = err_set(E_CONFIG, "%s: cannot read the OpenPGP key: %s", var,
					 rnp_result_to_string(rr));
	if (rc == E_OK)
		rc = survey(ffi, k);
	if (rc == E_OK && (rr = save_keys(ffi, RNP_LOAD_SAVE_PUBLIC_KEYS, &k->pub)) != RNP_SUCCESS)
		rc = err_set(E_FAIL, "%s: librnp cannot export the public keys: %s", var,
					 rnp_result_to_string(rr));
	if (ffi != NULL)
		rnp_ffi_destroy(ffi);
	if (rc != E_OK) {
		pgp_keys_free(k);
		return rc;
	}
	*out = k;
	return E_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Unlocking                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static err_code unlock_all(pgp_keys *k, char *msg, size_t msglen)
{
	err_code rc = E_OK;
	rnp_result_t rr;
	rnp_identifier_iterator_t it = NULL;
	const char *fp;

	if (!k->have_secret) {
		snprintf(msg, msglen,
				 "%s holds no secret key: decrypting needs the secret key (a public key is "
				 "enough to push, not to fetch)",
				 k->var);
		return E_CONFIG;
	}
	rnp_ffi_t ffi = pgp_ffi_new();
	if (ffi == NULL) {
		snprintf(msg, msglen, "librnp: cannot create a context");
		return E_FAIL;
	}
	if ((rr = pgp_import(ffi, k->block.data, k->block.len)) != RNP_SUCCESS ||
		(rr = rnp_identifier_iterator_create(ffi, &it, "fingerprint")) != RNP_SUCCESS) {
		snprintf(msg, msglen, "%s: librnp: %s", k->var, rnp_result_to_string(rr));
		rnp_ffi_destroy(ffi);
		return E_FAIL;
	}
	/* As WAL-G: with a passphrase, every protected key must accept it. */
	while (rc == E_OK && rnp_identifier_iterator_next(it, &fp) == RNP_SUCCESS && fp != NULL) {
		rnp_key_handle_t h = NULL;
		bool secret = false, prot = false;
		if (rnp_locate_key(ffi, "fingerprint", fp, &h) != RNP_SUCCESS || h == NULL)
			continue;
		rnp_key_have_secret(h, &secret);
		if (secret)
			rnp_key_is_protected(h, &prot);
		if (prot && k->passphrase == NULL) {
			char *id = keyid_of(h);
			snprintf(msg, msglen,
					 "WALG_PGP_KEY_PASSPHRASE is not set, but secret key %s in %s is protected "
					 "by a passphrase",
					 id, k->var);
			free(id);
			rc = E_CONFIG;
		} else if (prot && (rr = rnp_key_unprotect(h, k->passphrase)) != RNP_SUCCESS) {
			char *id = keyid_of(h);
			if (rr == RNP_ERROR_BAD_PASSWORD)
				snprintf(msg, msglen,
						 "WALG_PGP_KEY_PASSPHRASE: wrong passphrase for secret key %s in %s", id,
						 k->var);
			else
				snprintf(msg, msglen, "%s: cannot unlock secret key %s: %s", k->var, id,
						 rnp_result_to_string(rr));
			free(id);
			rc = E_CONFIG;
		}
		rnp_key_handle_destroy(h);
	}
	rnp_identifier_iterator_destroy(it);
	if (rc == E_OK &&
		(rr = save_keys(ffi, RNP_LOAD_SAVE_PUBLIC_KEYS | RNP_LOAD_SAVE_SECRET_KEYS, &k->sec)) !=
			RNP_SUCCESS) {
		snprintf(msg, msglen, "%s: librnp cannot export the unlocked keys: %s", k->var,
				 rnp_result_to_string(rr));
		rc = E_FAIL;
	}
	rnp_ffi_destroy(ffi);
	return rc;
}

/* The unlocked keys, unlocked once. */
static err_code unlock_once(pgp_keys *k, const pgp_buf **out)
{
	pthread_mutex_lock(&k->mu);
	if (!k->unlocked) {
		k->unlocked = true;
		k->unlock_rc = unlock_all(k, k->unlock_msg, sizeof(k->unlock_msg));
		if (k->unlock_rc != E_OK)
			pgp_buf_wipe(&k->sec);
		if (k->passphrase != NULL) {
			rnp_buffer_clear(k->passphrase, strlen(k->passphrase));
			free(k->passphrase);
			k->passphrase = NULL;
		}
	}
	err_code rc = k->unlock_rc;
	pthread_mutex_unlock(&k->mu);
	*out = &k->sec;
	return rc == E_OK ? E_OK : err_set(rc, "%s", k->unlock_msg);
}

/*
 * The unlocked keys of k and of its older keys, unlocked once: E_OK when any of them unlocked
 * (a current key that is public only, as a writer's may be, still lets the older ones
 * decrypt), else k's own failure.
 */
static err_code unlock_ring(pgp_keys *k)
{
	const pgp_buf *sec;
	bool any = false;
	for (pgp_keys *o = k; o != NULL; o = o->older)
		any |= unlock_once(o, &sec) == E_OK;
	err_clear();
	return any ? E_OK : err_set(k->unlock_rc, "%s", k->unlock_msg);
}

err_code pgp_keys_take(pgp_keys *k, rnp_ffi_t *out)
{
	rnp_result_t rr = RNP_SUCCESS;
	*out = NULL;
	TRY(unlock_ring(k));
	pthread_mutex_lock(&k->mu);
	if (k->nidle > 0)
		*out = k->idle[--k->nidle];
	pthread_mutex_unlock(&k->mu);
	if (*out != NULL)
		return E_OK;
	rnp_ffi_t ffi = pgp_ffi_new();
	if (ffi == NULL)
		return err_set(E_FAIL, "librnp: cannot create a context");
	for (const pgp_keys *o = k; o != NULL && rr == RNP_SUCCESS; o = o->older)
		if (o->unlock_rc == E_OK)
			rr = pgp_import(ffi, o->sec.data, o->sec.len);
	if (rr != RNP_SUCCESS) {
		rnp_ffi_destroy(ffi);
		return err_set(E_FAIL, "OpenPGP: librnp cannot import the unlocked keys: %s",
					   rnp_result_to_string(rr));
	}
	*out = ffi;
	return E_OK;
}

bool pgp_keys_has_id(const pgp_keys *k, uint64_t id, bool ring)
{
	for (; k != NULL; k = ring ? k->older : NULL)
		for (size_t i = 0; i < k->nids; i++)
			if (k->ids[i] == id)
				return true;
	return false;
}

void pgp_keys_join(pgp_keys *k, pgp_keys *older)
{
	while (k->older != NULL)
		k = k->older;
	k->older = older;
}

void pgp_keys_give(pgp_keys *k, rnp_ffi_t ffi)
{
	pthread_mutex_lock(&k->mu);
	if (k->nidle < PGP_IDLE_MAX) {
		k->idle[k->nidle++] = ffi;
		ffi = NULL;
	}
	pthread_mutex_unlock(&k->mu);
	if (ffi != NULL)
		rnp_ffi_destroy(ffi);
}

bool pgp_keys_have_secret(const pgp_keys *k)
{
	return k->have_secret;
}

void pgp_keys_free(pgp_keys *k)
{
	if (k == NULL)
		return;
	pgp_keys_free(k->older);
	free(k->ids);
	for (int i = 0; i < k->nidle; i++)
		rnp_ffi_destroy(k->idle[i]);
	pgp_buf_wipe(&k->block);
	pgp_buf_wipe(&k->pub);
	pgp_buf_wipe(&k->sec);
	if (k->passphrase != NULL) {
		rnp_buffer_clear(k->passphrase, strlen(k->passphrase));
		free(k->passphrase);
	}
	pthread_mutex_destroy(&k->mu);
	free(k);
}

/* ------------------------------------------------------------------------------------------ */
/* The settings                                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Empty counts as unset, as in WAL-G (viper ignores empty values). */
static const char *set(const char *v)
{
	return v != NULL && v[0] != '\0' ? v : NULL;
}

static err_code read_key_file(const char *path, pgp_buf *out, bool *loose)
{
	static const char var[] = "WALG_PGP_KEY_PATH";
	struct stat st;
	unsigned char chunk[8192];
	err_code rc = E_OK;

	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_errno(E_CONFIG, errno, "%s: cannot read %s", var, path);
	if (fstat(fd, &st) != 0)
		rc = err_errno(E_CONFIG, errno, "%s: cannot read %s", var, path);
	/* others, not the group: see crypt_key_load's file (key.c) */
	*loose = rc == E_OK && S_ISREG(st.st_mode) && (st.st_mode & S_IROTH) != 0;
	while (rc == E_OK) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = err_errno(E_CONFIG, errno, "%s: cannot read %s", var, path);
		else if (n == 0)
			break;
		else if (out->len + (size_t)n > KEY_TEXT_MAX)
			rc = err_set(E_CONFIG, "%s: %s is larger than %d bytes", var, path, KEY_TEXT_MAX);
		else
			buf_append(out, chunk, (size_t)n);
	}
	rnp_buffer_clear(chunk, sizeof(chunk));
	close(fd);
	return rc;
}

err_code pgp_keys_load(const crypt_settings *cfg, pgp_keys **out)
{
	const char *inline_key = set(cfg->pgp_key);
	const char *path = set(cfg->pgp_key_path);
	const char *pass = set(cfg->pgp_key_passphrase);
	pgp_buf text = { 0 };
	char *pw = NULL;
	bool loose = false;
	err_code rc = E_OK;
	const char *var;

	*out = NULL;
	if (inline_key != NULL) {
		/* WAL-G: strings.Replace(key, `\n`, "\n", -1), for keys kept on one line. */
		var = "WALG_PGP_KEY";
		for (const char *p = inline_key; *p; p++) {
			if (p[0] == '\\' && p[1] == 'n') {
				buf_append(&text, "\n", 1);
				p++;
			} else {
				buf_append(&text, p, 1);
			}
		}
	} else if (path != NULL) {
		var = "WALG_PGP_KEY_PATH";
		rc = read_key_file(path, &text, &loose);
	} else {
		if (pass != NULL)
			log_warn("WALG_PGP_KEY_PASSPHRASE is set, but neither WALG_PGP_KEY nor "
					 "WALG_PGP_KEY_PATH: it is not used");
		return E_OK;
	}
	if (pass != NULL) {
		/* Settings read by WAL-G's GetSetting lose trailing CR and LF. */
		size_t n = strlen(pass);
		while (n > 0 && (pass[n - 1] == '\n' || pass[n - 1] == '\r'))
			n--;
		if (n > 0) {
			pw = xmalloc(n + 1);
			memcpy(pw, pass, n);
			pw[n] = '\0';
		}
	}
	if (rc == E_OK)
		rc = pgp_keys_parse(text.len ? (const char *)text.data : "", text.len, pw, var, out);
	if (rc == E_OK && loose && (*out)->have_secret)
		log_warn("%s: %s holds a secret key and is readable by others", var, path);
	pgp_buf_wipe(&text);
	if (pw != NULL) {
		rnp_buffer_clear(pw, strlen(pw));
		free(pw);
	}
	return rc;
}

/*
 * An OpenPGP packet header at p (n bytes): its tag and body's offset and length. False for a
 * partial or indeterminate length, which no session key packet has.
 */
static bool packet_at(const unsigned char *p, size_t n, unsigned *tag, size_t *at, size_t *len)
{
	if (n < 2 || !(p[0] & 0x80))
		return false;
	if (p[0] & 0x40) {
		*tag = p[0] & 0x3f;
		if (p[1] < 192) {
			*at = 2, *len = p[1];
		} else if (p[1] < 224 && n >= 3) {
			*at = 3, *len = ((size_t)(p[1] - 192) << 8) + p[2] + 192;
		} else if (p[1] == 255 && n >= 6) {
			*at = 6, *len = (size_t)p[2] << 24 | (size_t)p[3] << 16 | (size_t)p[4] << 8 | p[5];
		} else {
			return false;
		}
	} else {
		static const size_t bytes[4] = { 1, 2, 4, 0 };
		size_t b = bytes[p[0] & 3];
		*tag = (p[0] >> 2) & 0x0f;
		if (b == 0 || n < 1 + b)
			return false;
		*len = 0;
		for (size_t i = 0; i < b; i++)
			*len = *len << 8 | p[1 + i];
		*at = 1 + b;
	}
	return true;
}

size_t pgp_recipients(const unsigned char *head, size_t n, uint64_t *ids, size_t max)
{
	size_t found = 0, off = 0;
	unsigned tag;
	size_t at, len;
	/* session key packets (public-key: tag 1, symmetric: tag 3) come first */
	while (off < n && packet_at(head + off, n - off, &tag, &at, &len) && (tag == 1 || tag == 3)) {
		const unsigned char *body = head + off + at;
		if (tag == 1 && off + at + 9 <= n && body[0] == 3 && found < max) {
			uint64_t id = 0;
			for (int i = 1; i <= 8; i++)
				id = id << 8 | body[i];
			ids[found++] = id;
		}
		off += at + len;
	}
	return found;
}
