/* Unit tests for internal/tar: round trips, GNU tar interop both ways, hostile input, WAL-G tars. */
#include "internal/tar/tar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "test/unit/unit.h"

#define MTIME 1700000000
#define WALG_PARTS "zstd/repo/basebackups_005/base_000000010000000000000026/tar_partitions"

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static char *repeat(char c, size_t n)
{
	char *s = xmalloc(n + 1);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* A file of the WAL-G v3.0.9 fixtures: test/fixtures/walg-v3.0.9 (run from the repository root,
 * as make does), or the directory in WALC_FIXTURES_WALG. */
static char *fixture_path(const char *rel)
{
	const char *dir = getenv("WALC_FIXTURES_WALG");
	return xasprintf("%s/%s", dir && dir[0] ? dir : "test/fixtures/walg-v3.0.9", rel);
}

static int run(const char *cmd)
{
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void read_whole(const char *path, membuf *mb)
{
	memset(mb, 0, sizeof(*mb));
	sink *s = membuf_sink_new(mb);
	assert_int_equal(sink_write_file(s, path), E_OK);
	sink_free(s);
}

static void write_whole(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fd_write_all(fd, buf, len, path), E_OK);
	close(fd);
}

/* One member as the reader delivered it. */
typedef struct got_entry {
	char *name;
	char *link;
	tar_type type;
	uint64_t size;
	uint32_t mode;
	int64_t mtime;
	uint32_t uid, gid;
	membuf data;
	bool ended;
} got_entry;

/* Records every callback and checks their order; can be told to fail at one. */
typedef struct collector {
	got_entry *e;
	size_t n;
	bool open;
	bool keep; /* keep content bytes */
	err_code fail_entry, fail_data, fail_end;
} collector;

static err_code on_entry(void *ctx, const tar_entry *e)
{
	collector *c = ctx;
	assert_false(c->open);
	if (c->fail_entry)
		return err_set(c->fail_entry, "entry refused");
	c->e = xrealloc(c->e, (c->n + 1) * sizeof(*c->e));
	got_entry *g = &c->e[c->n++];
	memset(g, 0, sizeof(*g));
	g->name = xstrdup(e->name);
	g->link = xstrdup(e->linkname ? e->linkname : "");
	g->type = e->type;
	g->size = e->size;
	g->mode = e->mode;
	g->mtime = e->mtime;
	g->uid = e->uid;
	g->gid = e->gid;
	c->open = true;
	return E_OK;
}

static err_code on_data(void *ctx, const void *buf, size_t len)
{
	collector *c = ctx;
	assert_true(c->open);
	assert_true(len > 0);
	if (c->fail_data)
		return err_set(c->fail_data, "data refused");
	got_entry *g = &c->e[c->n - 1];
	if (c->keep) {
		sink *s = membuf_sink_new(&g->data);
		assert_int_equal(sink_write(s, buf, len), E_OK);
		sink_free(s);
	} else {
		g->data.len += len;
	}
	assert_true(g->data.len <= g->size);
	return E_OK;
}

static err_code on_end(void *ctx)
{
	collector *c = ctx;
	assert_true(c->open);
	c->open = false;
	if (c->fail_end)
		return err_set(c->fail_end, "end refused");
	got_entry *g = &c->e[c->n - 1];
	assert_int_equal(g->data.len, g->size);
	g->ended = true;
	return E_OK;
}

static const tar_handler handler = { on_entry, on_data, on_end };

static void collector_free(collector *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->e[i].name);
		free(c->e[i].link);
		free(c->e[i].data.data);
	}
	free(c->e);
	memset(c, 0, sizeof(*c));
}

static const got_entry *find(const collector *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->e[i].name, name) == 0)
			return &c->e[i];
	return NULL;
}

/* Feeds buf to a fresh reader in pieces of chunk bytes (0 = one write); first error wins. */
static err_code read_tar(const void *buf, size_t len, size_t chunk, collector *c)
{
	const unsigned char *p = buf;
	sink *s = tar_reader_new(&handler, c);
	err_code rc = E_OK;
	while (rc == E_OK && len > 0) {
		size_t k = chunk == 0 || chunk > len ? len : chunk;
		rc = sink_write(s, p, k);
		p += k;
		len -= k;
	}
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	return rc;
}

static tar_entry file_entry(const char *name, uint64_t size)
{
	tar_entry e = { .name = name, .type = TAR_FILE, .size = size, .mode = 0600, .mtime = MTIME,
					.uid = 26, .gid = 26 };
	return e;
}

static tar_entry other_entry(const char *name, tar_type type, const char *link)
{
	tar_entry e = { .name = name, .linkname = link, .type = type, .mode = 0700, .mtime = MTIME,
					.uid = 26, .gid = 26 };
	return e;
}

/* Writes one member whose content goes in pieces of chunk bytes. */
static void put(tar_writer *w, const tar_entry *e, const unsigned char *content, size_t chunk)
{
	assert_int_equal(tar_writer_begin(w, e), E_OK);
	size_t len = e->type == TAR_FILE ? (size_t)e->size : 0;
	for (size_t at = 0; at < len;) {
		size_t k = chunk == 0 || chunk > len - at ? len - at : chunk;
		assert_int_equal(tar_writer_write(w, content + at, k), E_OK);
		at += k;
	}
	assert_int_equal(tar_writer_end(w), E_OK);
}

/* A header built by hand, for what our writer never produces. */
static void make_header(unsigned char *h, const char *name, char type, const char *size_octal)
{
	memset(h, 0, TAR_BLOCK);
	memcpy(h, name, strlen(name));
	memcpy(h + 100, "0000644", 7);
	memcpy(h + 108, "0000000", 7);
	memcpy(h + 116, "0000000", 7);
	memcpy(h + 124, size_octal, strlen(size_octal));
	memcpy(h + 136, "14524770400", 11);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar\0" "00", 8);
}

static void fix_checksum(unsigned char *h)
{
	unsigned sum = 0;
	memset(h + 148, ' ', 8);
	for (int i = 0; i < TAR_BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

/* A buffer of whole blocks, appended to. */
typedef struct blocks {
	unsigned char *p;
	size_t len;
} blocks;

static void add(blocks *b, const void *data, size_t len)
{
	size_t padded = (len + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
	b->p = xrealloc(b->p, b->len + padded);
	memset(b->p + b->len, 0, padded);
	memcpy(b->p + b->len, data, len);
	b->len += padded;
}

static void add_member(blocks *b, const char *name, char type, const void *data, size_t len)
{
	unsigned char h[TAR_BLOCK];
	char size[24];
	snprintf(size, sizeof(size), "%011zo", len);
	make_header(h, name, type, size);
	fix_checksum(h);
	add(b, h, sizeof(h));
	if (len)
		add(b, data, len);
}

static void add_end(blocks *b)
{
	unsigned char z[2 * TAR_BLOCK] = { 0 };
	add(b, z, sizeof(z));
}

static void expect_corrupt(const void *buf, size_t len, const char *msg)
{
	collector c = { 0 };
	err_code rc = read_tar(buf, len, 0, &c);
	if (rc != E_CORRUPT || strstr(err_msg(), msg) == NULL)
		fail_msg("want E_CORRUPT \"%s\", got %s \"%s\"", msg, err_name(rc), err_msg());
	/* The same bytes in small pieces must fail the same way. */
	collector_free(&c);
	rc = read_tar(buf, len, 7, &c);
	assert_int_equal(rc, E_CORRUPT);
	assert_non_null(strstr(err_msg(), msg));
	collector_free(&c);
}

/* ------------------------------------------------------------------------------------------ */
/* Round trips                                                                                */
/* ------------------------------------------------------------------------------------------ */

static const size_t sizes[] = { 0, 1, 511, 512, 513, (1u << 20) + 7 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void test_round_trip_sizes(void **state)
{
	(void)state;
	unsigned char *content[NSIZES];
	char names[NSIZES][32];
	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	for (size_t i = 0; i < NSIZES; i++) {
		content[i] = pattern(sizes[i], (uint32_t)i);
		snprintf(names[i], sizeof(names[i]), "/base/1/f%zu", sizes[i]);
		tar_entry e = file_entry(names[i], sizes[i]);
		put(w, &e, content[i], i % 2 ? 1000 : 0);
		assert_int_equal(tar_writer_offset(w) % TAR_BLOCK, 0);
	}
	assert_int_equal(tar_writer_finish(w), E_OK);
	assert_int_equal(tar_writer_offset(w), mb.len);
	tar_writer_free(w);

	/* Whole, odd pieces, and one byte at a time. */
	const size_t chunks[] = { 0, 4093, 1 };
	for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
		collector c = { .keep = true };
		assert_int_equal(read_tar(mb.data, mb.len, chunks[k], &c), E_OK);
		assert_int_equal(c.n, NSIZES);
		for (size_t i = 0; i < NSIZES; i++) {
			assert_string_equal(c.e[i].name, names[i]);
			assert_int_equal(c.e[i].type, TAR_FILE);
			assert_int_equal(c.e[i].size, sizes[i]);
			assert_int_equal(c.e[i].mode, 0600);
			assert_int_equal(c.e[i].mtime, MTIME);
			assert_int_equal(c.e[i].uid, 26);
			assert_int_equal(c.e[i].gid, 26);
			assert_true(c.e[i].ended);
			assert_int_equal(c.e[i].data.len, sizes[i]);
			if (sizes[i])
				assert_memory_equal(c.e[i].data.data, content[i], sizes[i]);
		}
		collector_free(&c);
	}
	for (size_t i = 0; i < NSIZES; i++)
		free(content[i]);
	free(mb.data);
}

static void test_round_trip_types(void **state)
{
	(void)state;
	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = other_entry("/", TAR_DIR, NULL);
	put(w, &e, NULL, 0);
	e = other_entry("/base", TAR_DIR, NULL);
	put(w, &e, NULL, 0);
	e = other_entry("/pg_wal", TAR_SYMLINK, "/mnt/wal");
	put(w, &e, NULL, 0);
	e = other_entry("/hard", TAR_HARDLINK, "/base/x");
	put(w, &e, NULL, 0);
	/* A directory's size is ignored, not written. */
	e = other_entry("/d2", TAR_DIR, NULL);
	e.size = 1234;
	put(w, &e, NULL, 0);
	e = file_entry("backup_label", 3);
	put(w, &e, (const unsigned char *)"abc", 0);
	assert_int_equal(tar_writer_finish(w), E_OK);
	tar_writer_free(w);

	collector c = { .keep = true };
	assert_int_equal(read_tar(mb.data, mb.len, 0, &c), E_OK);
	assert_int_equal(c.n, 6);
	assert_string_equal(c.e[0].name, "/");
	assert_int_equal(c.e[0].type, TAR_DIR);
	assert_int_equal(c.e[0].mode, 0700);
	assert_string_equal(c.e[1].name, "/base");
	assert_int_equal(c.e[1].type, TAR_DIR);
	assert_string_equal(c.e[2].name, "/pg_wal");
	assert_int_equal(c.e[2].type, TAR_SYMLINK);
	assert_string_equal(c.e[2].link, "/mnt/wal");
	assert_int_equal(c.e[3].type, TAR_HARDLINK);
	assert_string_equal(c.e[3].link, "/base/x");
	assert_int_equal(c.e[4].type, TAR_DIR);
	assert_int_equal(c.e[4].size, 0);
	assert_string_equal(c.e[5].name, "backup_label");
	assert_memory_equal(c.e[5].data.data, "abc", 3);
	/* Headers are plain USTAR, as Go writes them. */
	assert_memory_equal(mb.data + 257, "ustar\0" "00", 8);
	assert_int_equal(mb.data[156], '5');
	assert_int_equal(mb.data[2 * TAR_BLOCK + 156], '2');
	collector_free(&c);
	free(mb.data);
}

static void test_long_names(void **state)
{
	(void)state;
	char *p90 = repeat('p', 90), *q53 = repeat('q', 53), *x101 = repeat('x', 101);
	char *l99 = repeat('L', 99), *m99 = repeat('M', 99), *n95 = repeat('N', 95);
	char *t200 = repeat('t', 200), *n100 = repeat('n', 100), *big = repeat('b', TAR_NAME_MAX);
	char *split = xasprintf("/base/%s/%s", p90, q53);		/* 150 chars: prefix + name */
	char *paxname = xasprintf("/pax/%s/%s/%s", l99, m99, n95); /* 300 chars: PAX path */
	char *noslash = xasprintf("/%s", x101);					/* cannot split at the root */
	assert_int_equal(strlen(split), 150);
	assert_int_equal(strlen(paxname), 300);

	/* The 150-char name needs no extension header. */
	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = file_entry(split, 0);
	put(w, &e, NULL, 0);
	assert_int_equal(tar_writer_offset(w), TAR_BLOCK);
	e = file_entry(paxname, 5);
	put(w, &e, (const unsigned char *)"hello", 0);
	assert_int_equal(tar_writer_finish(w), E_OK);
	tar_writer_free(w);
	assert_int_equal(mb.data[156], '0');
	assert_memory_equal(mb.data + 345, split, 96);
	assert_int_equal(mb.data[TAR_BLOCK + 156], 'x');
	free(mb.data);

	const char *names[] = { split, paxname, noslash, n100, big };
	mb = (membuf){ 0 };
	w = tar_writer_new(membuf_sink_new(&mb));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		e = file_entry(names[i], 1);
		put(w, &e, (const unsigned char *)"z", 0);
	}
	e = other_entry("/lnk", TAR_SYMLINK, t200);
	put(w, &e, NULL, 0);
	e = other_entry(paxname, TAR_SYMLINK, t200);
	put(w, &e, NULL, 0);
	assert_int_equal(tar_writer_finish(w), E_OK);
	tar_writer_free(w);

	collector c = { .keep = true };
	assert_int_equal(read_tar(mb.data, mb.len, 100, &c), E_OK);
	assert_int_equal(c.n, 7);
	for (size_t i = 0; i < 5; i++) {
		assert_string_equal(c.e[i].name, names[i]);
		assert_int_equal(c.e[i].size, 1);
		assert_memory_equal(c.e[i].data.data, "z", 1);
	}
	assert_string_equal(c.e[5].name, "/lnk");
	assert_string_equal(c.e[5].link, t200);
	assert_string_equal(c.e[6].name, paxname);
	assert_string_equal(c.e[6].link, t200);
	collector_free(&c);
	free(mb.data);

	free(p90), free(q53), free(x101), free(l99), free(m99), free(n95), free(t200), free(n100);
	free(big), free(split), free(paxname), free(noslash);
}

/* Numbers that do not fit octal go base-256 plus a PAX record. */
static void test_big_numbers(void **state)
{
	(void)state;
	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = file_entry("/f", 2);
	e.uid = 4000000000u;
	e.gid = 07777777 + 1;
	e.mtime = -5;
	put(w, &e, (const unsigned char *)"ok", 0);
	e = file_entry("/g", 0);
	e.mtime = (int64_t)1 << 40;
	put(w, &e, NULL, 0);
	assert_int_equal(tar_writer_finish(w), E_OK);
	tar_writer_free(w);

	collector c = { 0 };
	assert_int_equal(read_tar(mb.data, mb.len, 0, &c), E_OK);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.e[0].uid, 4000000000u);
	assert_int_equal(c.e[0].gid, 07777777 + 1);
	assert_int_equal(c.e[0].mtime, -5);
	assert_int_equal(c.e[1].mtime, (int64_t)1 << 40);
	collector_free(&c);

	/* Without the PAX header the base-256 fields alone must still read right. */
	assert_int_equal(mb.data[156], 'x');
	size_t paxlen = TAR_BLOCK * 2;
	assert_int_equal(read_tar(mb.data + paxlen, mb.len - paxlen, 0, &c), E_OK);
	assert_string_equal(c.e[0].name, "/f");
	assert_int_equal(c.e[0].uid, 4000000000u);
	assert_int_equal(c.e[0].mtime, -5);
	collector_free(&c);
	free(mb.data);
}

/* A member of 8 GiB + 5 bytes: PAX size; GNU tar and our reader both see the size. */
static void test_huge_member_header(void **state)
{
	(void)state;
	const uint64_t size = ((uint64_t)8 << 30) + 5;
	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = file_entry("/base/big", size);
	unsigned char *chunk = pattern(128 * 1024, 9);
	assert_int_equal(tar_writer_begin(w, &e), E_OK);
	assert_int_equal(tar_writer_write(w, chunk, 128 * 1024), E_OK); /* flushes the headers */
	assert_true(mb.len > 128 * 1024);
	assert_int_equal(tar_writer_offset(w), mb.len);

	collector c = { 0 };
	sink *s = tar_reader_new(&handler, &c);
	assert_int_equal(sink_write(s, mb.data, mb.len), E_OK);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.e[0].size, size);
	assert_int_equal(c.e[0].data.len, 128 * 1024);
	assert_int_equal(sink_finish(s), E_CORRUPT);
	sink_free(s);
	collector_free(&c);

	char *dir = unit_tmpdir();
	char *path = xasprintf("%s/big.tar", dir);
	write_whole(path, mb.data, mb.len);
	char *cmd = xasprintf("tar -tvf '%s' 2>/dev/null", path);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	char line[512] = { 0 };
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	if (strstr(line, "8589934597") == NULL || strstr(line, "base/big") == NULL)
		fail_msg("GNU tar listed: %s", line);
	assert_int_equal(unit_rmtree(dir), 0);
	free(cmd), free(path), free(dir), free(chunk);
	tar_writer_free(w);
	free(mb.data);
}

static void test_writer_misuse(void **state)
{
	(void)state;
	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = file_entry("/f", 3);
	assert_int_equal(tar_writer_write(w, "a", 1), E_FAIL); /* outside a member */
	assert_int_equal(tar_writer_end(w), E_FAIL);
	e.type = TAR_OTHER;
	assert_int_equal(tar_writer_begin(w, &e), E_FAIL);
	e = file_entry("", 0);
	assert_int_equal(tar_writer_begin(w, &e), E_FAIL);
	char *toolong = repeat('a', TAR_NAME_MAX + 1);
	e = file_entry(toolong, 0);
	assert_int_equal(tar_writer_begin(w, &e), E_FAIL);
	e = other_entry("/l", TAR_SYMLINK, toolong);
	assert_int_equal(tar_writer_begin(w, &e), E_FAIL);
	free(toolong);
	assert_int_equal(tar_writer_offset(w), 0); /* refusals emit nothing */

	e = file_entry("/f", 3);
	assert_int_equal(tar_writer_begin(w, &e), E_OK);
	assert_int_equal(tar_writer_begin(w, &e), E_FAIL);
	assert_int_equal(tar_writer_write(w, "abcd", 4), E_FAIL); /* more than declared */
	assert_int_equal(tar_writer_write(w, "ab", 2), E_OK);
	assert_int_equal(tar_writer_finish(w), E_FAIL);			/* inside a member */
	tar_writer_free(w);
	free(mb.data);

	/* Too few bytes: end fails and the stream cannot be finished as if whole. */
	mb = (membuf){ 0 };
	w = tar_writer_new(membuf_sink_new(&mb));
	assert_int_equal(tar_writer_begin(w, &e), E_OK);
	assert_int_equal(tar_writer_write(w, "ab", 2), E_OK);
	assert_int_equal(tar_writer_end(w), E_FAIL);
	assert_non_null(strstr(err_msg(), "2 of its 3"));
	assert_int_equal(tar_writer_finish(w), E_FAIL);
	tar_writer_free(w);
	free(mb.data);

	/* Errors from next surface. */
	mb = (membuf){ .max = 100 };
	w = tar_writer_new(membuf_sink_new(&mb));
	e = file_entry("/f", 0);
	put(w, &e, NULL, 0);
	assert_int_not_equal(tar_writer_finish(w), E_OK);
	tar_writer_free(w);
	free(mb.data);
	tar_writer_free(NULL);
}

static void test_writer_layout(void **state)
{
	(void)state;
	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = file_entry("/PG_VERSION", 3);
	put(w, &e, (const unsigned char *)"15\n", 0);
	assert_int_equal(tar_writer_offset(w), 2 * TAR_BLOCK);
	assert_int_equal(tar_writer_finish(w), E_OK);
	assert_int_equal(tar_writer_offset(w), 4 * TAR_BLOCK);
	assert_int_equal(mb.len, 4 * TAR_BLOCK);
	tar_writer_free(w);
	/* Field forms as Go writes them. */
	assert_string_equal((const char *)mb.data, "/PG_VERSION");
	assert_memory_equal(mb.data + 100, "0000600\0", 8);
	assert_memory_equal(mb.data + 124, "00000000003\0", 12);
	assert_memory_equal(mb.data + 136, "14524770400\0", 12);
	assert_int_equal(mb.data[154], '\0');
	assert_int_equal(mb.data[155], ' ');
	assert_memory_equal(mb.data + TAR_BLOCK, "15\n", 3);
	for (size_t i = TAR_BLOCK + 3; i < mb.len; i++)
		assert_int_equal(mb.data[i], 0);
	free(mb.data);
}

/* Every split of a mixed archive into equal pieces gives the same members. */
static void test_reader_every_chunk_size(void **state)
{
	(void)state;
	char *longname = xasprintf("/x/%s", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
										"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	unsigned char *c513 = pattern(513, 3);
	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = other_entry("/", TAR_DIR, NULL);
	put(w, &e, NULL, 0);
	e = file_entry("/empty", 0);
	put(w, &e, NULL, 0);
	e = file_entry(longname, 513);
	put(w, &e, c513, 0);
	e = other_entry("/s", TAR_SYMLINK, "t");
	put(w, &e, NULL, 0);
	e = file_entry("/one", 1);
	put(w, &e, c513, 0);
	assert_int_equal(tar_writer_finish(w), E_OK);
	tar_writer_free(w);

	for (size_t chunk = 1; chunk <= 1100; chunk++) {
		collector c = { .keep = true };
		assert_int_equal(read_tar(mb.data, mb.len, chunk, &c), E_OK);
		assert_int_equal(c.n, 5);
		assert_string_equal(c.e[2].name, longname);
		assert_memory_equal(c.e[2].data.data, c513, 513);
		assert_string_equal(c.e[3].link, "t");
		assert_int_equal(c.e[4].data.data[0], c513[0]);
		collector_free(&c);
	}
	free(mb.data), free(c513), free(longname);
}

/* ------------------------------------------------------------------------------------------ */
/* Reader edge cases with hand-made headers                                                   */
/* ------------------------------------------------------------------------------------------ */

static void test_reader_end_forms(void **state)
{
	(void)state;
	blocks b = { 0 };
	add_member(&b, "a", '0', "xyz", 3);
	unsigned char z[TAR_BLOCK * 3] = { 0 };
	collector c = { 0 };

	/* One zero block then EOF, or then a partial block of zeros: both fine. */
	add(&b, z, TAR_BLOCK);
	assert_int_equal(read_tar(b.p, b.len, 0, &c), E_OK);
	collector_free(&c);
	b.p = xrealloc(b.p, b.len + 100);
	memset(b.p + b.len, 0, 100);
	assert_int_equal(read_tar(b.p, b.len + 100, 0, &c), E_OK);
	collector_free(&c);
	/* Then any number of zero blocks (WAL-G's readers allow zero padding). */
	add(&b, z, sizeof(z));
	assert_int_equal(read_tar(b.p, b.len, 13, &c), E_OK);
	assert_int_equal(c.n, 1);
	collector_free(&c);
	free(b.p);

	/* An empty stream is truncated, not an empty archive. */
	assert_int_equal(read_tar("", 0, 0, &c), E_CORRUPT);
	assert_non_null(strstr(err_msg(), "tar: truncated"));
	/* Two zero blocks alone are an empty archive. */
	assert_int_equal(read_tar(z, 2 * TAR_BLOCK, 0, &c), E_OK);
	assert_int_equal(c.n, 0);
}

/* A run of whole members cut out of an archive: it may end between two members only. */
static void test_reader_partial(void **state)
{
	(void)state;
	blocks b = { 0 };
	add_member(&b, "a", '0', "xyz", 3);
	add_member(&b, "b", '0', "0123456789", 10);
	size_t whole = b.len;
	/* everything; inside b's data; inside b's header; right after a */
	const size_t lens[] = { whole, whole - 100, 2 * TAR_BLOCK + 7, 2 * TAR_BLOCK };
	for (int cut = 0; cut < 4; cut++) {
		size_t len = lens[cut];
		collector c = { 0 };
		sink *s = tar_reader_new_partial(&handler, &c);
		assert_int_equal(sink_write(s, b.p, len), E_OK);
		err_code rc = sink_finish(s);
		sink_free(s);
		if (cut == 0 || cut == 3) {
			assert_int_equal(rc, E_OK);
			assert_int_equal(c.n, cut == 0 ? 2 : 1);
		} else {
			assert_int_equal(rc, E_CORRUPT);
			assert_non_null(strstr(err_msg(), "tar: truncated"));
		}
		collector_free(&c);
	}
	/* the ordinary reader wants the end-of-archive block */
	collector c = { 0 };
	assert_int_equal(read_tar(b.p, whole, 0, &c), E_CORRUPT);
	collector_free(&c);
	free(b.p);
}

static void test_reader_old_formats(void **state)
{
	(void)state;
	unsigned char h[TAR_BLOCK];
	blocks b = { 0 };
	collector c = { .keep = true };

	/* v7: no magic, '\0' typeflag; a trailing '/' marks a directory. */
	make_header(h, "old/file", '\0', "00000000002");
	memset(h + 257, 0, 8);
	fix_checksum(h);
	add(&b, h, sizeof(h));
	add(&b, "hi", 2);
	make_header(h, "old/dir/", '\0', "00000000000");
	memset(h + 257, 0, 8);
	fix_checksum(h);
	add(&b, h, sizeof(h));
	/* GNU magic: bytes where USTAR keeps the prefix are not part of the name. */
	make_header(h, "gnu", '0', "00000000000");
	memcpy(h + 257, "ustar  \0", 8);
	memcpy(h + 345, "14524770400", 11); /* GNU atime */
	fix_checksum(h);
	add(&b, h, sizeof(h));
	/* USTAR prefix. */
	make_header(h, "name", '0', "00000000000");
	memcpy(h + 345, "pre/fix", 7);
	fix_checksum(h);
	add(&b, h, sizeof(h));
	/* Base-256 size; space-padded octal; contiguous file type. */
	make_header(h, "b256", '7', "");
	memset(h + 124, 0, 12);
	h[124] = 0x80;
	h[135] = 4;
	memcpy(h + 100, "   644 ", 7);
	fix_checksum(h);
	add(&b, h, sizeof(h));
	add(&b, "four", 4);
	/* Checksum as a signed sum (old Sun tar) over a byte with the high bit set. */
	make_header(h, "s\xe9", '0', "00000000000");
	unsigned sum = 0;
	memset(h + 148, ' ', 8);
	int ssum = 0;
	for (int i = 0; i < TAR_BLOCK; i++) {
		sum += h[i];
		ssum += (signed char)h[i];
	}
	assert_int_not_equal((int)sum, ssum);
	snprintf((char *)h + 148, 8, "%06o", (unsigned)ssum);
	add(&b, h, sizeof(h));
	/* Device, fifo: header-only. */
	make_header(h, "fifo", '6', "00000000100");
	fix_checksum(h);
	add(&b, h, sizeof(h));
	/* Unknown type with content: delivered as TAR_OTHER. */
	add_member(&b, "odd", 'Z', "content", 7);
	add_end(&b);

	assert_int_equal(read_tar(b.p, b.len, 0, &c), E_OK);
	assert_int_equal(c.n, 8);
	assert_string_equal(c.e[0].name, "old/file");
	assert_int_equal(c.e[0].type, TAR_FILE);
	assert_memory_equal(c.e[0].data.data, "hi", 2);
	assert_string_equal(c.e[1].name, "old/dir/");
	assert_int_equal(c.e[1].type, TAR_DIR);
	assert_string_equal(c.e[2].name, "gnu");
	assert_string_equal(c.e[3].name, "pre/fix/name");
	assert_string_equal(c.e[4].name, "b256");
	assert_int_equal(c.e[4].type, TAR_FILE);
	assert_int_equal(c.e[4].size, 4);
	assert_int_equal(c.e[4].mode, 0644);
	assert_memory_equal(c.e[4].data.data, "four", 4);
	assert_string_equal(c.e[5].name, "s\xe9");
	assert_int_equal(c.e[6].type, TAR_OTHER);
	assert_int_equal(c.e[6].size, 0);
	assert_int_equal(c.e[7].type, TAR_OTHER);
	assert_int_equal(c.e[7].size, 7);
	assert_memory_equal(c.e[7].data.data, "content", 7);
	collector_free(&c);
	free(b.p);
}

static void test_reader_pax_records(void **state)
{
	(void)state;
	blocks b = { 0 };
	collector c = { .keep = true };
	const char *g = "25 comment=global header\n";
	const char *x = "21 path=/pax/renamed\n"
					"30 mtime=1700000001.123456789\n"
					"14 uid=123456\n"
					"12 gid=4242\n"
					"11 size=10\n"
					"15 SCHILY.foo=\n"
					"13 linkpath=\n";
	add_member(&b, "pax_global_header", 'g', g, strlen(g));
	add_member(&b, "PaxHeaders/x", 'x', x, strlen(x));
	add_member(&b, "ignored", '0', "0123456789", 10); /* header says 10 too */
	/* NUL padding after the records; negative fractional time floors. */
	const char xn[] = "15 mtime=-10.5\n\0\0\0";
	add_member(&b, "PaxHeaders/y", 'x', xn, sizeof(xn) - 1);
	add_member(&b, "neg", '0', NULL, 0);
	/* 'g' alone does not leave anything pending at the end. */
	add_member(&b, "pax_global_header", 'g', g, strlen(g));
	add_end(&b);
	assert_int_equal(read_tar(b.p, b.len, 5, &c), E_OK);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.e[0].name, "/pax/renamed");
	assert_string_equal(c.e[0].link, "");
	assert_int_equal(c.e[0].mtime, 1700000001);
	assert_int_equal(c.e[0].uid, 123456);
	assert_int_equal(c.e[0].gid, 4242);
	assert_int_equal(c.e[0].size, 10);
	assert_string_equal(c.e[1].name, "neg");
	assert_int_equal(c.e[1].mtime, -11);
	collector_free(&c);
	free(b.p);

	/* GNU long name and link; a GNU name wins over PAX path as in Go. */
	b = (blocks){ 0 };
	add_member(&b, "././@LongLink", 'L', "gnu/long/name\0", 14);
	add_member(&b, "././@LongLink", 'K', "gnu/long/target", 15);
	add_member(&b, "PaxHeaders/z", 'x', "17 path=pax/path\n", 17);
	add_member(&b, "short", '2', NULL, 0);
	add_end(&b);
	assert_int_equal(read_tar(b.p, b.len, 0, &c), E_OK);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.e[0].name, "gnu/long/name");
	assert_string_equal(c.e[0].link, "gnu/long/target");
	assert_int_equal(c.e[0].type, TAR_SYMLINK);
	collector_free(&c);
	free(b.p);
}

/* ------------------------------------------------------------------------------------------ */
/* Hostile input                                                                              */
/* ------------------------------------------------------------------------------------------ */

static void test_hostile(void **state)
{
	(void)state;
	unsigned char *content = pattern(1000, 1);
	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = file_entry("/a", 1000);
	put(w, &e, content, 0);
	assert_int_equal(tar_writer_finish(w), E_OK);
	tar_writer_free(w);
	assert_int_equal(mb.len, 5 * TAR_BLOCK); /* header, 2 content, 2 end */
	unsigned char *t = xmalloc(mb.len + 2 * TAR_BLOCK);

	memcpy(t, mb.data, mb.len);
	t[1] ^= 1;
	expect_corrupt(t, mb.len, "tar: bad header checksum at offset 0");

	expect_corrupt(mb.data, 300, "tar: truncated");					/* in the header */
	expect_corrupt(mb.data, TAR_BLOCK + 100, "tar: truncated");		/* in content */
	expect_corrupt(mb.data, TAR_BLOCK + 999, "tar: truncated");
	expect_corrupt(mb.data, TAR_BLOCK + 1010, "tar: truncated");	/* in the padding */
	expect_corrupt(mb.data, 3 * TAR_BLOCK, "tar: truncated");		/* no end block */
	expect_corrupt(mb.data, 3 * TAR_BLOCK + 100, "tar: truncated"); /* partial end block */

	memcpy(t, mb.data, mb.len);
	memcpy(t + 124, "0000000x750\0", 12);
	fix_checksum(t);
	expect_corrupt(t, mb.len, "tar: bad size field at offset 0");
	memcpy(t + 124, "-0000001750\0", 12);
	fix_checksum(t);
	expect_corrupt(t, mb.len, "tar: bad size field");
	memcpy(t, mb.data, mb.len);
	memcpy(t + 100, "0x00600", 7);
	fix_checksum(t);
	expect_corrupt(t, mb.len, "tar: bad mode field");

	/* Huge declared sizes: 2^41 in base-256, and a base-256 value overflowing 64 bits. */
	memcpy(t, mb.data, mb.len);
	memset(t + 124, 0, 12);
	t[124] = 0x80;
	t[130] = 0x02;
	fix_checksum(t);
	expect_corrupt(t, mb.len, "too large");
	memset(t + 124, 0x7f, 12);
	t[124] = 0x80;
	fix_checksum(t);
	expect_corrupt(t, mb.len, "tar: bad size field");

	/* Non-zero after the end: inside the end blocks, after them, and a zero block then a
	 * header (Go's "zero block then non-zero"). */
	memcpy(t, mb.data, mb.len);
	t[mb.len - 1] = 1;
	expect_corrupt(t, mb.len, "tar: data after end of archive");
	memcpy(t, mb.data, mb.len);
	memset(t + mb.len, 0, 2 * TAR_BLOCK);
	t[mb.len + TAR_BLOCK + 7] = 'x';
	expect_corrupt(t, mb.len + 2 * TAR_BLOCK, "tar: data after end of archive");
	memcpy(t, mb.data, mb.len);
	memcpy(t + 4 * TAR_BLOCK, mb.data, TAR_BLOCK);
	expect_corrupt(t, 5 * TAR_BLOCK, "tar: data after end of archive");

	/* A 2 MiB PAX record is refused at its header, before any of it is buffered. */
	unsigned char h[TAR_BLOCK];
	make_header(h, "PaxHeaders/big", 'x', "00010000000");
	fix_checksum(h);
	expect_corrupt(h, sizeof(h), "extended header of 2097152 bytes");
	make_header(h, "././@LongLink", 'L', "00010000000");
	fix_checksum(h);
	expect_corrupt(h, sizeof(h), "extended header");

	blocks b = { 0 };
	char *p4997 = repeat('p', 4997);
	char *huge = xasprintf("5008 path=%s\n", p4997);
	free(p4997);
	assert_int_equal(strlen(huge), 5008);
	add_member(&b, "PaxHeaders/p", 'x', huge, strlen(huge));
	add_member(&b, "f", '0', NULL, 0);
	add_end(&b);
	expect_corrupt(b.p, b.len, "PAX path of 4997 bytes");
	free(b.p);

	b = (blocks){ 0 };
	char *longl = repeat('l', 5000);
	add_member(&b, "././@LongLink", 'L', longl, 5000);
	add_member(&b, "f", '0', NULL, 0);
	add_end(&b);
	expect_corrupt(b.p, b.len, "GNU long name");
	free(b.p);
	free(longl);

	const char *bad_records[] = {
		"8 path=x\n",	   /* length one short */
		"11 path=x\n",	   /* longer than the record */
		"9 pathxx\n",	   /* no '=' */
		"abc\n",		   /* no length */
		"7 =xyz\n",		   /* empty key */
		"9 path=x",		   /* runs past the end */
		"12 size=-10\n",   /* bad number */
		"13 size=2e10\n",  /* bad number */
		"22 size=1099511627777\n", /* 2^40 + 1 */
		"14 mtime=1.2x\n",
		"19 uid=99999999999\n",
		"12 path=a\0b\n",	/* NUL in a name */
		"9 path=x\nx",	   /* junk after the records */
	};
	for (size_t i = 0; i < sizeof(bad_records) / sizeof(bad_records[0]); i++) {
		b = (blocks){ 0 };
		size_t n = strlen(bad_records[i]);
		if (i == 11)
			n = 12;
		add_member(&b, "PaxHeaders/p", 'x', bad_records[i], n);
		add_member(&b, "f", '0', NULL, 0);
		add_end(&b);
		collector c = { 0 };
		if (read_tar(b.p, b.len, 0, &c) != E_CORRUPT)
			fail_msg("record %zu accepted", i);
		collector_free(&c);
		free(b.p);
	}

	/* An extension header with no member after it. */
	b = (blocks){ 0 };
	add_member(&b, "PaxHeaders/p", 'x', "9 path=x\n", 9);
	add_end(&b);
	expect_corrupt(b.p, b.len, "extended header without a member");
	free(b.p);

	free(huge);
	free(t);
	free(content);
	free(mb.data);
}

static void test_errors_sticky_and_handlers(void **state)
{
	(void)state;
	blocks b = { 0 };
	add_member(&b, "a", '0', "abc", 3);
	add_member(&b, "d", '5', NULL, 0);
	add_end(&b);

	/* Handler errors come back unchanged, from whichever callback. */
	collector c = { .fail_entry = E_EXISTS };
	assert_int_equal(read_tar(b.p, b.len, 0, &c), E_EXISTS);
	assert_string_equal(err_msg(), "entry refused");
	collector_free(&c);
	c = (collector){ .fail_data = E_IO };
	assert_int_equal(read_tar(b.p, b.len, 0, &c), E_IO);
	collector_free(&c);
	c = (collector){ .fail_end = E_CANCELLED };
	assert_int_equal(read_tar(b.p, b.len, 0, &c), E_CANCELLED);
	collector_free(&c);

	/* After an error every write and finish return it. */
	c = (collector){ .fail_entry = E_NOTFOUND };
	sink *s = tar_reader_new(&handler, &c);
	assert_int_equal(sink_write(s, b.p, b.len), E_NOTFOUND);
	assert_int_equal(sink_write(s, b.p, b.len), E_NOTFOUND);
	assert_int_equal(sink_finish(s), E_NOTFOUND);
	sink_free(s);
	collector_free(&c);

	/* Write after finish, finish twice. */
	s = tar_reader_new(&handler, &c);
	assert_int_equal(sink_write(s, b.p, b.len), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	assert_int_equal(sink_write(s, b.p, 1), E_FAIL);
	assert_int_equal(sink_finish(s), E_FAIL);
	sink_free(s);
	collector_free(&c);

	/* NULL callbacks are allowed. */
	static const tar_handler none = { NULL, NULL, NULL };
	s = tar_reader_new(&none, NULL);
	assert_int_equal(sink_write(s, b.p, b.len), E_OK);
	assert_int_equal(sink_finish(s), E_OK);
	sink_free(s);
	/* Freed unfinished, mid-record: no leak. */
	blocks x = { 0 };
	add_member(&x, "PaxHeaders/p", 'x', "9 path=x\n", 9);
	s = tar_reader_new(&handler, &c);
	assert_int_equal(sink_write(s, x.p, TAR_BLOCK + 4), E_OK);
	sink_free(s);
	free(x.p);
	free(b.p);
}

/* ------------------------------------------------------------------------------------------ */
/* GNU tar interop                                                                            */
/* ------------------------------------------------------------------------------------------ */

static void expect_file(const char *dir, const char *name, const void *content, size_t len)
{
	char *path = xasprintf("%s/%s", dir, name);
	membuf mb;
	read_whole(path, &mb);
	assert_int_equal(mb.len, len);
	if (len)
		assert_memory_equal(mb.data, content, len);
	free(mb.data);
	free(path);
}

static void test_gnu_tar_extracts_ours(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *out = xasprintf("%s/out", dir);
	char *tarpath = xasprintf("%s/ours.tar", dir);
	char *p90 = repeat('p', 90), *q53 = repeat('q', 53);
	char *l99 = repeat('L', 99), *m99 = repeat('M', 99), *n95 = repeat('N', 95);
	char *t200 = repeat('t', 200);
	char *split = xasprintf("/base/%s/%s", p90, q53);
	char *paxname = xasprintf("/pax/%s/%s/%s", l99, m99, n95);
	unsigned char *content[NSIZES];
	char names[NSIZES][32];

	membuf mb = { 0 };
	tar_writer *w = tar_writer_new(membuf_sink_new(&mb));
	tar_entry e = other_entry("/", TAR_DIR, NULL);
	put(w, &e, NULL, 0);
	e = other_entry("/base", TAR_DIR, NULL);
	put(w, &e, NULL, 0);
	for (size_t i = 0; i < NSIZES; i++) {
		content[i] = pattern(sizes[i], (uint32_t)i + 100);
		snprintf(names[i], sizeof(names[i]), "/base/f%zu", sizes[i]);
		e = file_entry(names[i], sizes[i]);
		put(w, &e, content[i], 4096);
	}
	e = file_entry("/PG_VERSION", 3);
	put(w, &e, (const unsigned char *)"15\n", 0);
	e = file_entry("backup_label", 4);
	put(w, &e, (const unsigned char *)"lbl\n", 0);
	e = other_entry(split, TAR_DIR, NULL);
	put(w, &e, NULL, 0);
	e = file_entry(paxname, 6);
	put(w, &e, (const unsigned char *)"paxed\n", 0);
	e = other_entry("/lnk", TAR_SYMLINK, "base/f1");
	put(w, &e, NULL, 0);
	e = other_entry("/longlnk", TAR_SYMLINK, t200);
	put(w, &e, NULL, 0);
	assert_int_equal(tar_writer_finish(w), E_OK);
	tar_writer_free(w);
	write_whole(tarpath, mb.data, mb.len);
	free(mb.data);

	assert_int_equal(mkdir(out, 0700), 0);
	char *cmd = xasprintf("tar -xf '%s' -C '%s' 2>/dev/null", tarpath, out);
	assert_int_equal(run(cmd), 0);
	for (size_t i = 0; i < NSIZES; i++)
		expect_file(out, names[i], content[i], sizes[i]);
	expect_file(out, "PG_VERSION", "15\n", 3);
	expect_file(out, "backup_label", "lbl\n", 4);
	expect_file(out, paxname, "paxed\n", 6);
	struct stat st;
	char *p = xasprintf("%s%s", out, split);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	free(p);
	char target[512] = { 0 };
	p = xasprintf("%s/lnk", out);
	assert_int_equal(readlink(p, target, sizeof(target) - 1), 7);
	assert_string_equal(target, "base/f1");
	free(p);
	memset(target, 0, sizeof(target));
	p = xasprintf("%s/longlnk", out);
	assert_int_equal(readlink(p, target, sizeof(target) - 1), 200);
	assert_string_equal(target, t200);
	free(p);
	p = xasprintf("%s/base/f1", out);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_mtime, MTIME);
	free(p);

	/* GNU tar's own listing agrees with no complaint. */
	free(cmd);
	cmd = xasprintf("tar -tf '%s' >/dev/null 2>&1", tarpath);
	assert_int_equal(run(cmd), 0);

	assert_int_equal(unit_rmtree(dir), 0);
	for (size_t i = 0; i < NSIZES; i++)
		free(content[i]);
	free(cmd), free(dir), free(out), free(tarpath), free(p90), free(q53), free(l99), free(m99);
	free(n95), free(t200), free(split), free(paxname);
}

/* Checks every member of a GNU tar archive against the tree it was made from. */
static void check_against_tree(const collector *c, const char *src)
{
	for (size_t i = 0; i < c->n; i++) {
		const got_entry *g = &c->e[i];
		char *path = xasprintf("%s/%s", src, g->name);
		struct stat st;
		assert_int_equal(lstat(path, &st), 0);
		switch (g->type) {
		case TAR_FILE:
			assert_true(S_ISREG(st.st_mode));
			assert_int_equal(g->size, (uint64_t)st.st_size);
			expect_file(src, g->name, g->data.data, (size_t)g->size);
			break;
		case TAR_DIR:
			assert_true(S_ISDIR(st.st_mode));
			assert_true(str_has_suffix(g->name, "/"));
			break;
		case TAR_SYMLINK: {
			char target[512] = { 0 };
			assert_true(readlink(path, target, sizeof(target) - 1) > 0);
			assert_string_equal(g->link, target);
			break;
		}
		default:
			fail_msg("unexpected member type %d for %s", (int)g->type, g->name);
		}
		assert_int_equal(g->mode, st.st_mode & 07777);
		assert_int_equal(g->mtime, MTIME);
		free(path);
	}
}

static void test_reads_gnu_tar_formats(void **state)
{
	(void)state;
	char *dir = unit_tmpdir();
	char *n120 = repeat('n', 120), *t150 = repeat('t', 150);
	char *d60 = repeat('d', 60), *e60 = repeat('e', 60);
	unsigned char *big = pattern(70000, 5);
	char *cmd = xasprintf(
		"set -e; cd '%s'; mkdir -p src/c src/s/%s/%s src/long; "
		"printf 'hello\\n' > src/c/small; : > src/c/empty; printf '15\\n' > src/s/%s/%s/deep; "
		"ln -s small src/c/sym; printf 'long\\n' > src/long/%s; ln -s %s src/long/sym",
		dir, d60, e60, d60, e60, n120, t150);
	assert_int_equal(run(cmd), 0);
	free(cmd);
	char *bigpath = xasprintf("%s/src/c/big", dir);
	write_whole(bigpath, big, 70000);
	free(bigpath);
	char *src = xasprintf("%s/src", dir);
	cmd = xasprintf("touch -h -d @%d $(find '%s')", MTIME, src);
	assert_int_equal(run(cmd), 0);
	free(cmd);

	const char *formats[] = { "ustar", "pax", "gnu", "oldgnu", "v7" };
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
		/* v7 holds only 100-byte names, USTAR only names it can split. */
		bool split = f != 4, longs = f == 1 || f == 2 || f == 3;
		char *tarpath = xasprintf("%s/%s.tar", dir, formats[f]);
		cmd = xasprintf("tar --format=%s -cf '%s' -C '%s' c %s %s", formats[f], tarpath, src,
						split ? "s" : "", longs ? "long" : "");
		assert_int_equal(run(cmd), 0);
		membuf mb;
		read_whole(tarpath, &mb);
		collector c = { .keep = true };
		err_code rc = read_tar(mb.data, mb.len, 1000, &c);
		if (rc != E_OK)
			fail_msg("%s: %s", formats[f], err_msg());
		check_against_tree(&c, src);
		assert_int_equal(c.n, 5 + (split ? 4 : 0) + (longs ? 3 : 0));
		char *deep = xasprintf("s/%s/%s/deep", d60, e60);
		const got_entry *g = find(&c, deep);
		if (split) {
			assert_non_null(g);
			assert_int_equal(g->size, 3);
		}
		g = find(&c, "c/big");
		assert_non_null(g);
		assert_memory_equal(g->data.data, big, 70000);
		if (longs) {
			char *ln = xasprintf("long/%s", n120);
			g = find(&c, ln);
			assert_non_null(g);
			assert_memory_equal(g->data.data, "long\n", 5);
			g = find(&c, "long/sym");
			assert_non_null(g);
			assert_string_equal(g->link, t150);
			free(ln);
		}
		collector_free(&c);
		free(mb.data), free(deep), free(cmd), free(tarpath);
	}
	assert_int_equal(unit_rmtree(dir), 0);
	free(dir), free(src), free(n120), free(t150), free(d60), free(e60), free(big);
}

/* ------------------------------------------------------------------------------------------ */
/* WAL-G's own tars and the fuzz seeds                                                        */
/* ------------------------------------------------------------------------------------------ */

/* Streams `zstd -dc path` through a reader. */
static err_code read_zstd_tar(const char *rel, collector *c)
{
	char *path = fixture_path(rel);
	if (access(path, R_OK) != 0)
		fail_msg("fixture %s missing (WALC_FIXTURES_WALG)", path);
	char *cmd = xasprintf("zstd -dc '%s'", path);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	sink *s = tar_reader_new(&handler, c);
	unsigned char buf[65536];
	size_t n;
	err_code rc = E_OK;
	while (rc == E_OK && (n = fread(buf, 1, sizeof(buf), f)) > 0)
		rc = sink_write(s, buf, n);
	if (rc == E_OK)
		rc = sink_finish(s);
	sink_free(s);
	assert_int_equal(pclose(f), 0);
	free(cmd);
	free(path);
	return rc;
}

static void test_walg_pg_control(void **state)
{
	(void)state;
	collector c = { .keep = true };
	assert_int_equal(read_zstd_tar(WALG_PARTS "/pg_control.tar.zst", &c), E_OK);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.e[0].name, "/global/pg_control");
	assert_int_equal(c.e[0].type, TAR_FILE);
	assert_int_equal(c.e[0].size, 8192);
	assert_int_equal(c.e[0].data.len, 8192);
	assert_int_equal(c.e[0].mode, 0600);
	collector_free(&c);
}

static void test_walg_part(void **state)
{
	(void)state;
	collector c = { .keep = true };
	err_code rc = read_zstd_tar(WALG_PARTS "/part_001.tar.zst", &c);
	if (rc != E_OK)
		fail_msg("part_001: %s", err_msg());
	printf("part_001.tar: %zu members\n", c.n);
	assert_true(c.n > 500);
	const got_entry *g = find(&c, "/");
	assert_non_null(g);
	assert_int_equal(g->type, TAR_DIR);
	g = find(&c, "/PG_VERSION");
	assert_non_null(g);
	assert_int_equal(g->size, 3);
	assert_memory_equal(g->data.data, "15\n", 3);
	g = find(&c, "/base/1");
	assert_non_null(g);
	assert_int_equal(g->type, TAR_DIR);
	size_t files = 0;
	for (size_t i = 0; i < c.n; i++) {
		assert_true(c.e[i].name[0] == '/');
		assert_true(c.e[i].ended);
		files += c.e[i].type == TAR_FILE;
	}
	assert_true(files > 400);
	collector_free(&c);
}

static void test_fuzz_corpus_valid(void **state)
{
	(void)state;
	const char *dirpath = "test/fuzz/corpus/fuzz_tar";
	DIR *d = opendir(dirpath);
	if (d == NULL)
		fail_msg("%s missing (run from the repo root)", dirpath);
	size_t seeds = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		char *path = xasprintf("%s/%s", dirpath, de->d_name);
		membuf mb;
		read_whole(path, &mb);
		collector c = { 0 };
		if (read_tar(mb.data, mb.len, 0, &c) != E_OK)
			fail_msg("seed %s: %s", path, err_msg());
		assert_true(c.n > 0);
		collector_free(&c);
		free(mb.data);
		free(path);
		seeds++;
	}
	closedir(d);
	assert_true(seeds >= 5);
}

int main(void)
{
	log_setup(LOG_ERROR, false, "test");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_sizes),
		cmocka_unit_test(test_round_trip_types),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_big_numbers),
		cmocka_unit_test(test_huge_member_header),
		cmocka_unit_test(test_writer_misuse),
		cmocka_unit_test(test_writer_layout),
		cmocka_unit_test(test_reader_every_chunk_size),
		cmocka_unit_test(test_reader_end_forms),
		cmocka_unit_test(test_reader_partial),
		cmocka_unit_test(test_reader_old_formats),
		cmocka_unit_test(test_reader_pax_records),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_errors_sticky_and_handlers),
		cmocka_unit_test(test_gnu_tar_extracts_ours),
		cmocka_unit_test(test_reads_gnu_tar_formats),
		cmocka_unit_test(test_walg_pg_control),
		cmocka_unit_test(test_walg_part),
		cmocka_unit_test(test_fuzz_corpus_valid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
