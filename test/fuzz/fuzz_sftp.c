/*
 * libFuzzer target for what an SFTP server sends (untrusted bytes): the packet framing and
 * every reply parser, then the store's reads, listings, stats and writes driven through its
 * test seam by a "server" whose byte stream is the input (the first byte picks the
 * operation). Seeds in corpus/fuzz_sftp are replies shaped as OpenSSH's.
 */
#include "internal/storage/sftp/sftp.h"

#include <stdlib.h>
#include <string.h>

#include "cmd/walc/settings/config.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct stream {
	const uint8_t *p;
	size_t left;
} stream;

static stream input;

static err_code in_send(void *arg, const void *buf, size_t len)
{
	(void)arg;
	(void)buf;
	(void)len;
	return E_OK;
}

/* The server's bytes, in pieces of varying size, then the connection's end. */
static err_code in_recv(void *arg, void *buf, size_t cap, size_t *got)
{
	(void)arg;
	if (input.left == 0)
		return err_set(E_IO, "fuzz: end of input");
	size_t n = 1 + input.p[0] % 61u * 97u;
	if (n > input.left)
		n = input.left;
	if (n > cap)
		n = cap;
	memcpy(buf, input.p, n);
	input.p += n;
	input.left -= n;
	*got = n;
	return E_OK;
}

static void in_close(void *arg)
{
	(void)arg;
}

static err_code in_connect(void *arg, sftp_io *io, bool *retryable)
{
	(void)arg;
	*retryable = false;
	*io = (sftp_io){ in_send, in_recv, in_close, NULL };
	return E_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(LOG_ERROR, false, "fuzz");
	sftp_set_test_connector(in_connect, NULL);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	/* the parsers on the whole input */
	sftp_reply r;
	if (sftp_parse_reply(data + 1, size - 1, &r) == E_OK && r.type == SSH_FXP_NAME) {
		sftp_names it;
		sftp_names_begin(&it, &r);
		const char *n;
		size_t nlen;
		sftp_attrs a;
		uint32_t count = 0;
		while (sftp_names_next(&it, &n, &nlen, &a))
			count++;
		if (count != r.count)
			abort();
	}
	uint32_t v;
	unsigned ext;
	sftp_parse_version(data + 1, size - 1, &v, &ext);

	/* the store on a server that says what the input says */
	config cfg;
	if (config_defaults(&cfg) != E_OK)
		abort();
	cfg.storage.ssh_prefix = xstrdup("ssh://fuzz/repo");
	cfg.storage.ssh.username = xstrdup("walc");
	cfg.storage.ssh.max_retries = 0;
	cfg.storage.upload_concurrency = 1;
	cfg.storage.download_concurrency = 1;
	storage *st;
	err_code orc = storage_sftp_open(&cfg.storage, &st);
	config_free(&cfg);
	if (orc != E_OK)
		abort();
	input = (stream){ data + 1, size - 1 };
	membuf mb = { 0 };
	mb.max = 1u << 20;
	sink *m = membuf_sink_new(&mb);
	obj_list l;
	obj_info info;
	switch (data[0] % 6) {
	case 0:
		storage_get(st, "wal_005/000000010000000000000001.lz4", m);
		break;
	case 1:
		storage_get_range(st, "basebackups_005/b/tar_partitions/part_001.tar.zst", 100, 40000, m);
		break;
	case 2:
		if (storage_list(st, "basebackups_005/", true, &l) == E_OK)
			obj_list_free(&l);
		break;
	case 3:
		storage_stat(st, "wal_005/x", &info);
		break;
	case 4: {
		sink *s;
		if (storage_put(st, "wal_005/y", &s) == E_OK) {
			static unsigned char zeros[100000];
			if (sink_write(s, zeros, sizeof(zeros)) == E_OK)
				sink_finish(s);
			sink_free(s);
		}
		break;
	}
	default: {
		const char *keys[] = { "a", "b/c", "b/d" };
		storage_remove_many(st, keys, 3);
		break;
	}
	}
	sink_free(m);
	free(mb.data);
	storage_free(st);
	err_clear();
	return 0;
}
