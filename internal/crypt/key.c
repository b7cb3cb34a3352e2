/*
 * Key loading and derivation as WAL-G does it (reference §11.1). Key material never appears in
 * a message or a log line: only lengths and variable names do.
 */
#include "internal/crypt/crypt_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* WAL-G's floor for a "none" key, so that a short password is refused rather than padded. */
#define KEY_NONE_MIN 25
/* A key file is a few dozen bytes; the cap only stops a wrong path from eating memory. */
#define KEY_FILE_MAX (64 * 1024)

err_code crypt_init(void)
{
	if (sodium_init() < 0)
		return err_set(E_FAIL, "libsodium: initialisation failed");
	return E_OK;
}

static err_code derive_hex(const char *material, size_t len, unsigned char *key, const char *var)
{
	size_t cap = len / 2 + 1, got = 0;
	unsigned char *bin = xmalloc(cap);
	err_code rc = E_OK;

	/* No hex_end: libsodium then fails unless the whole input (of even length) is hex. */
	if (sodium_hex2bin(bin, cap, material, len, NULL, &got, NULL) != 0)
		rc = err_set(E_CONFIG, "%s: not valid hex", var);
	else if (got != CRYPT_KEY_BYTES)
		rc = err_set(E_CONFIG, "%s: hex key must decode to %d bytes, got %zu", var,
					 CRYPT_KEY_BYTES, got);
	else
		memcpy(key, bin, CRYPT_KEY_BYTES);
	sodium_memzero(bin, cap);
	free(bin);
	return rc;
}

static err_code derive_base64(const char *material, size_t len, unsigned char *key,
							  const char *var)
{
	size_t cap = len / 4 * 3 + 3, got = 0;
	unsigned char *bin = xmalloc(cap);
	err_code rc = E_OK;

	/* Go's base64.StdEncoding, which WAL-G uses, skips CR and LF anywhere in the input. */
	if (sodium_base642bin(bin, cap, material, len, "\r\n", &got, NULL,
						  sodium_base64_VARIANT_ORIGINAL) != 0)
		rc = err_set(E_CONFIG, "%s: not valid base64", var);
	else if (got != CRYPT_KEY_BYTES)
		rc = err_set(E_CONFIG, "%s: base64 key must decode to %d bytes, got %zu", var,
					 CRYPT_KEY_BYTES, got);
	else
		memcpy(key, bin, CRYPT_KEY_BYTES);
	sodium_memzero(bin, cap);
	free(bin);
	return rc;
}

static err_code derive_none(const char *material, size_t len, unsigned char *key, const char *var)
{
	if (len < KEY_NONE_MIN)
		return err_set(E_CONFIG,
					   "%s: key is %zu bytes, at least %d required with transform none (or use "
					   "hex/base64)",
					   var, len, KEY_NONE_MIN);
	memset(key, 0, CRYPT_KEY_BYTES);
	if (len > CRYPT_KEY_BYTES) {
		log_warn("%s: key longer than %d bytes is truncated to %d (transform none)", var,
				 CRYPT_KEY_BYTES, CRYPT_KEY_BYTES);
		len = CRYPT_KEY_BYTES;
	} else if (len < CRYPT_KEY_BYTES) {
		log_warn("%s: key of %zu bytes is right-padded with zero bytes to %d (transform none)",
				 var, len, CRYPT_KEY_BYTES);
	}
	memcpy(key, material, len);
	return E_OK;
}

err_code crypt_key_derive(const char *material, size_t len, const char *transform,
						  unsigned char key[CRYPT_KEY_BYTES], const char *var)
{
	err_code rc;

	if (transform == NULL || transform[0] == '\0' || strcmp(transform, "none") == 0)
		rc = derive_none(material, len, key, var);
	else if (strcmp(transform, "hex") == 0)
		rc = derive_hex(material, len, key, var);
	else if (strcmp(transform, "base64") == 0)
		rc = derive_base64(material, len, key, var);
	else
		rc = err_set(E_CONFIG,
					 "WALG_LIBSODIUM_KEY_TRANSFORM: unknown transform \"%s\", expected none, hex "
					 "or base64",
					 transform);
	if (rc != E_OK)
		sodium_memzero(key, CRYPT_KEY_BYTES);
	return rc;
}

/* Go's strings.TrimSpace, limited to ASCII whitespace. */
static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

err_code crypt_file_read(const char *path, const char *var, size_t max, unsigned char **out,
						 size_t *len, bool *loose)
{
	struct stat st;
	err_code rc = E_OK;
	*out = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_errno(E_CONFIG, errno, "%s: cannot read %s", var, path);
	if (fstat(fd, &st) != 0) {
		rc = err_errno(E_CONFIG, errno, "%s: cannot read %s", var, path);
		close(fd);
		return rc;
	}
	/* others, not the group: see derive_from_file */
	*loose = S_ISREG(st.st_mode) && (st.st_mode & S_IROTH) != 0;
	unsigned char *buf = xmalloc(max + 1);
	size_t n = 0;
	while (rc == E_OK) {
		ssize_t got = read(fd, buf + n, max + 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			rc = err_errno(E_CONFIG, errno, "%s: cannot read %s", var, path);
		else if (got == 0)
			break;
		else if ((n += (size_t)got) > max)
			rc = err_set(E_CONFIG, "%s: %s is larger than %zu bytes", var, path, max);
	}
	close(fd);
	if (rc != E_OK) {
		sodium_memzero(buf, max + 1);
		free(buf);
		return rc;
	}
	/* what is not read is not wiped: the caller wipes len bytes */
	*out = buf;
	*len = n;
	return E_OK;
}

err_code crypt_key_from_text(const unsigned char *text, size_t len, const char *transform,
							 unsigned char key[CRYPT_KEY_BYTES], const char *var)
{
	size_t start = 0;
	while (start < len && is_space(text[start]))
		start++;
	while (len > start && is_space(text[len - 1]))
		len--;
	return crypt_key_derive((const char *)text + start, len - start, transform, key, var);
}

static err_code derive_from_file(const char *path, const char *transform, unsigned char *key)
{
	static const char var[] = "WALG_LIBSODIUM_KEY_PATH";
	unsigned char *buf;
	size_t len;
	bool loose;
	TRY(crypt_file_read(path, var, KEY_FILE_MAX, &buf, &len, &loose));
	err_code rc = crypt_key_from_text(buf, len, transform, key, var);
	/*
	 * Warned only for a usable key, so a bad configuration still prints one line; and only
	 * when others may read it: a key shared with a group is how Kubernetes mounts a Secret
	 * for a pod's fsGroup, and a warning there would repeat with every archived segment.
	 */
	if (rc == E_OK && loose)
		log_warn("%s: %s is readable by others", var, path);
	sodium_memzero(buf, len);
	free(buf);
	return rc;
}

err_code crypt_key_load(const crypt_settings *cfg, unsigned char key[CRYPT_KEY_BYTES], bool *have_key)
{
	/* Empty counts as unset, as in WAL-G (viper ignores empty environment variables). */
	const char *inline_key = cfg->libsodium_key;
	const char *path = cfg->libsodium_key_path;
	const char *transform = cfg->libsodium_key_transform;
	err_code rc;

	*have_key = false;
	if (inline_key != NULL && inline_key[0] != '\0')
		rc = crypt_key_derive(inline_key, strlen(inline_key), transform, key,
							  "WALG_LIBSODIUM_KEY");
	else if (path != NULL && path[0] != '\0')
		rc = derive_from_file(path, transform, key);
	else
		return E_OK;
	if (rc == E_OK)
		*have_key = true;
	else
		sodium_memzero(key, CRYPT_KEY_BYTES);
	return rc;
}
