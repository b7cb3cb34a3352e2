/* daemon: the framed messages of WAL-G's socket protocol, as walg_archive and wal-g send them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal/daemon/daemon.h"

/* type, u16 big-endian total length (header included), body. */
static size_t frame(unsigned char *out, char type, const void *body, size_t n)
{
	out[0] = (unsigned char)type;
	out[1] = (unsigned char)((n + 3) >> 8);
	out[2] = (unsigned char)(n + 3);
	memcpy(out + 3, body, n);
	return n + 3;
}

/* wal-fetch's body: 1 byte argument count, then per argument a u16 length and its bytes. */
static size_t fetch_body(unsigned char *out, const char *a, const char *b)
{
	size_t at = 0;
	out[at++] = 2;
	const char *args[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		size_t l = strlen(args[i]);
		out[at++] = (unsigned char)(l >> 8);
		out[at++] = (unsigned char)l;
		memcpy(out + at, args[i], l);
		at += l;
	}
	return at;
}

static void expect_corrupt(const unsigned char *buf, size_t len, const char *why)
{
	daemon_request q;
	assert_int_equal(daemon_parse(buf, len, &q), E_CORRUPT);
	assert_non_null(strstr(err_msg(), why));
	err_clear();
}

static void test_check(void **state)
{
	(void)state;
	unsigned char m[8];
	daemon_request q;
	size_t n = frame(m, DAEMON_CHECK, "", 0);
	assert_int_equal(daemon_parse(m, n, &q), E_OK);
	assert_int_equal(q.type, DAEMON_CHECK);
}

static void test_push(void **state)
{
	(void)state;
	unsigned char m[512];
	daemon_request q;
	size_t n = frame(m, DAEMON_PUSH, "000000010000000000000002", 24);
	assert_int_equal(daemon_parse(m, n, &q), E_OK);
	assert_int_equal(q.type, DAEMON_PUSH);
	assert_string_equal(q.name, "000000010000000000000002");
	/* WAL-G archives any file under its base name: a history file, a .partial */
	n = frame(m, DAEMON_PUSH, "00000002.history", 16);
	assert_int_equal(daemon_parse(m, n, &q), E_OK);
	assert_string_equal(q.name, "00000002.history");

	n = frame(m, DAEMON_PUSH, "", 0);
	expect_corrupt(m, n, "bad WAL file name length 0");
	char longname[300];
	memset(longname, 'A', sizeof(longname));
	n = frame(m, DAEMON_PUSH, longname, 256);
	expect_corrupt(m, n, "bad WAL file name length 256");
	n = frame(m, DAEMON_PUSH, "0000\0001", 6);
	expect_corrupt(m, n, "NUL in a WAL file name");
	n = frame(m, DAEMON_PUSH, "../etc/passwd", 13);
	expect_corrupt(m, n, "is not a WAL file name");
	n = frame(m, DAEMON_PUSH, "..", 2);
	expect_corrupt(m, n, "is not a WAL file name");
}

static void test_fetch(void **state)
{
	(void)state;
	unsigned char body[600], m[700];
	daemon_request q;
	size_t b = fetch_body(body, "000000010000000000000003", "pg_wal/RECOVERYXLOG");
	size_t n = frame(m, DAEMON_FETCH, body, b);
	assert_int_equal(daemon_parse(m, n, &q), E_OK);
	assert_int_equal(q.type, DAEMON_FETCH);
	assert_string_equal(q.name, "000000010000000000000003");
	assert_string_equal(q.dest, "pg_wal/RECOVERYXLOG");

	/* one argument, three, none */
	body[0] = 1;
	n = frame(m, DAEMON_FETCH, body, b);
	expect_corrupt(m, n, "needs 2 arguments");
	body[0] = 3;
	n = frame(m, DAEMON_FETCH, body, b);
	expect_corrupt(m, n, "needs 2 arguments");
	n = frame(m, DAEMON_FETCH, body, 0);
	expect_corrupt(m, n, "needs 2 arguments");
	/* cut inside the second length, inside the second argument, and one byte too many */
	b = fetch_body(body, "000000010000000000000003", "dest");
	n = frame(m, DAEMON_FETCH, body, 1 + 2 + 24 + 1);
	expect_corrupt(m, n, "truncated wal-fetch arguments");
	n = frame(m, DAEMON_FETCH, body, b - 1);
	expect_corrupt(m, n, "bad wal-fetch argument");
	body[b] = 'x';
	n = frame(m, DAEMON_FETCH, body, b + 1);
	expect_corrupt(m, n, "trailing bytes");
	/* an empty argument, a NUL inside one, a path as the name */
	b = fetch_body(body, "", "dest");
	n = frame(m, DAEMON_FETCH, body, b);
	expect_corrupt(m, n, "bad wal-fetch argument");
	b = fetch_body(body, "000000010000000000000003", "dest");
	body[1 + 2 + 10] = '\0';
	n = frame(m, DAEMON_FETCH, body, b);
	expect_corrupt(m, n, "bad wal-fetch argument");
	b = fetch_body(body, "a/b", "dest");
	n = frame(m, DAEMON_FETCH, body, b);
	expect_corrupt(m, n, "is not a WAL file name");
}

static void test_frame(void **state)
{
	(void)state;
	unsigned char m[64];
	size_t n = frame(m, DAEMON_PUSH, "000000010000000000000002", 24);
	/* the header's length must be the message's */
	expect_corrupt(m, n - 1, "header says");
	m[2]++;
	expect_corrupt(m, n, "header says");
	expect_corrupt(m, 2, "shorter than its header");
	expect_corrupt(m, 0, "shorter than its header");
	n = frame(m, 'X', "", 0);
	expect_corrupt(m, n, "unknown message type 0x58");
	/* answers are not requests */
	n = frame(m, DAEMON_OK, "", 0);
	expect_corrupt(m, n, "unknown message type");
}

static void expect_path(const char *pgdata, const char *dest, const char *want)
{
	char *got = daemon_fetch_path(pgdata, dest);
	if (want == NULL) {
		if (got != NULL)
			fail_msg("%s (PGDATA %s) must be refused, got %s", dest, pgdata, got);
	} else {
		if (got == NULL)
			fail_msg("%s (PGDATA %s) must be allowed", dest, pgdata);
		assert_string_equal(got, want);
	}
	free(got);
}

/* A fetch writes one file directly in PGDATA/pg_wal, nowhere else: components, not prefixes. */
static void test_fetch_path(void **state)
{
	(void)state;
	const char *d = "/srv/pg/data";
	expect_path(d, "pg_wal/RECOVERYXLOG", "/srv/pg/data/pg_wal/RECOVERYXLOG");
	expect_path(d, "./pg_wal/000000010000000000000002", "/srv/pg/data/pg_wal/000000010000000000000002");
	expect_path(d, "/srv/pg/data/pg_wal/RECOVERYXLOG", "/srv/pg/data/pg_wal/RECOVERYXLOG");
	expect_path(d, "//srv/./pg/data//pg_wal//X", "/srv/pg/data/pg_wal/X");
	expect_path("/srv/pg/data/", "/srv/pg/data/pg_wal/X", "/srv/pg/data/pg_wal/X");
	/* a sibling sharing PGDATA's prefix */
	expect_path(d, "/srv/pg/data_evil/pg_wal/X", NULL);
	expect_path(d, "/srv/pg/dat/pg_wal/X", NULL);
	/* PGDATA itself, its other files, and anything outside */
	expect_path(d, "global/pg_control", NULL);
	expect_path(d, "/srv/pg/data/global/pg_control", NULL);
	expect_path(d, "pg_wal", NULL);
	expect_path(d, "pg_wal/", NULL);
	expect_path(d, "pg_wal/.", NULL);
	expect_path(d, "pg_wal/..", NULL);
	expect_path(d, "pg_wal/../global/pg_control", NULL);
	expect_path(d, "pg_wal/archive_status/X", NULL);
	expect_path(d, "../data/pg_wal/X", NULL);
	expect_path(d, "/etc/passwd", NULL);
	expect_path(d, "/srv/pg/data/../data/pg_wal/X", NULL);
	expect_path(d, "/", NULL);
	expect_path(d, "", NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_push),
		cmocka_unit_test(test_fetch),
		cmocka_unit_test(test_frame),
		cmocka_unit_test(test_fetch_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
