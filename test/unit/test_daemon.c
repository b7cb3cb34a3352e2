/*
 * daemon: the framed messages of WAL-G's socket protocol, as walg_archive and wal-g send them;
 * the daemon serving them over its socket to walc's client, on a file repository (archive,
 * restore, a missing segment, a refused destination, an unknown message); the Pushgateway's
 * texts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

#include "internal/daemon/daemon.h"
#include "test/unit/unit.h"

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

/* ------------------------------------------------------------------------------------------ */
/* The daemon at work                                                                         */
/* ------------------------------------------------------------------------------------------ */

#define MIB ((uint64_t)1 << 20)
#define SEG3 "000000010000000000000003"

static const config_pair prefetching[] = { { "WALG_DOWNLOAD_CONCURRENCY", "2" } };

/* What the daemon refuses before it listens: no PGDATA, a long path, a file in the way. */
static void test_run_refused(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	unit_cluster_open(&cfg, &r, prefetching, 1);
	pg_settings no_pgdata = cfg.pg;
	no_pgdata.pgdata = NULL;
	wal_settings none = cfg.wal;
	none.pg = &no_pgdata;
	assert_int_equal(daemon_run(r, r, &none, "/tmp/x.sock", NULL), E_CONFIG);
	assert_non_null(strstr(err_msg(), "daemon: PGDATA must be set"));
	err_clear();
	char longpath[200];
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(daemon_run(r, r, &cfg.wal, longpath, NULL), E_CONFIG);
	assert_non_null(strstr(err_msg(), "is too long"));
	err_clear();
	char *file = xasprintf("%s/not-a-socket", unit_dir);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(daemon_run(r, r, &cfg.wal, file, NULL), E_CONFIG);
	assert_non_null(strstr(err_msg(), "exists and is not a socket"));
	err_clear();
	/* a metrics address that is none: refused before any port is taken */
	char *sock = xasprintf("%s/walc.sock", unit_dir);
	assert_int_equal(daemon_run(r, r, &cfg.wal, sock, "no-port"), E_CONFIG);
	assert_string_equal(err_msg(), "WALG_METRICS_ADDRESS: expected host:port, got \"no-port\"");
	err_clear();
	free(sock);
	free(file);
	unit_cluster_close(&cfg, r);
}

/* The Pushgateway's texts: a failure says only that; a success adds the repository's state. */
static void test_push_texts(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	unit_cluster_open(&cfg, &r, prefetching, 1);
	metric m = { "walc_copy_objects", "Objects copied.", 7 };
	char *t = metrics_run_text(r, true, 1.5, &m, 1);
	assert_non_null(strstr(t, "\nwalc_run_success 1\n"));
	assert_non_null(strstr(t, "\nwalc_run_duration_seconds 1.5\n"));
	assert_non_null(strstr(t, "\nwalc_run_last_success_timestamp_seconds "));
	assert_non_null(strstr(t, "# HELP walc_copy_objects Objects copied.\n# TYPE walc_copy_objects "
							  "gauge\nwalc_copy_objects 7\n"));
	assert_non_null(strstr(t, "\nwalc_backups 0\n"));
	assert_non_null(strstr(t, "\nwalc_verified_backup_age_seconds -1\n"));
	free(t);
	t = metrics_run_text(r, false, 2, &m, 1);
	assert_non_null(strstr(t, "\nwalc_run_success 0\n"));
	assert_null(strstr(t, "last_success"));
	assert_null(strstr(t, "walc_copy_objects"));
	free(t);
	t = metrics_run_text(NULL, true, 2, NULL, 0);
	assert_null(strstr(t, "walc_backups"));
	free(t);
	wal_backlog b = { .bytes = 3 * MIB, .files = 3, .oldest_s = 12, .limit = 0, .dropped = 2 };
	t = metrics_backlog_text(&b);
	assert_non_null(strstr(t, "\nwalc_wal_backlog_bytes 3145728\n"));
	assert_non_null(strstr(t, "\nwalc_wal_backlog_oldest_seconds 12\n"));
	/* a gauge of the last report, not a counter, on the Pushgateway */
	assert_non_null(strstr(t, "# TYPE walc_wal_dropped_segments_total gauge\n"
							  "walc_wal_dropped_segments_total 2\n"));
	free(t);
	unit_cluster_close(&cfg, r);
}

typedef struct served {
	repo *r;
	const wal_settings *cfg;
	const char *sock;
	err_code rc;
} served;

static void *run_daemon(void *arg)
{
	served *s = arg;
	s->rc = daemon_run(s->r, s->r, s->cfg, s->sock, NULL);
	return NULL;
}

/* One request through walc's client: the daemon's answer byte. */
static char ask(const char *sock, char type, const char *name, const char *dest)
{
	const char *argv[2] = { name, dest };
	int argc = type == DAEMON_FETCH ? 2 : name != NULL ? 1 : 0;
	char answer = 0;
	assert_int_equal(daemon_ask(sock, type, argv, argc, 2000, 30000, &answer), E_OK);
	return answer;
}

/*
 * The daemon serving walc's client on a file repository, until a signal asks it to stop. Last
 * in the program: the cancellation that stops it is for the whole process.
 */
static void test_serve(void **state)
{
	(void)state;
	config cfg;
	repo *r = NULL;
	unit_cluster_open(&cfg, &r, prefetching, 1);
	char *sock = xasprintf("%s/walc.sock", unit_dir);
	served s = { r, &cfg.wal, sock, E_FAIL };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, run_daemon, &s), 0);
	char answer = 0;
	for (int i = 0; i < 500; i++) {
		const char *none[1] = { NULL };
		if (daemon_ask(sock, DAEMON_CHECK, none, 0, 100, 1000, &answer) == E_OK)
			break;
		err_clear();
		usleep(10000);
	}
	assert_int_equal(answer, DAEMON_OK);
	struct stat sb;
	assert_int_equal(stat(sock, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);

	/* archive: the segment in pg_wal, stored; one that is not there is an error */
	unsigned char *seg = unit_wal_segment(1, 3, MIB, UNIT_WAL_SYSID, 3);
	char *path = xasprintf("%s/pg_wal/" SEG3, unit_pgdata);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(seg, 1, MIB, f), MIB);
	fclose(f);
	assert_int_equal(ask(sock, DAEMON_PUSH, SEG3, NULL), DAEMON_OK);
	assert_int_equal(ask(sock, DAEMON_PUSH, "000000010000000000000009", NULL), DAEMON_ERROR);

	/* restore into pg_wal; a segment never archived; a destination outside pg_wal */
	assert_int_equal(ask(sock, DAEMON_FETCH, SEG3, "pg_wal/RECOVERYXLOG"), DAEMON_OK);
	char *got_path = xasprintf("%s/pg_wal/RECOVERYXLOG", unit_pgdata);
	size_t len;
	unsigned char *got = read_all(got_path, &len);
	assert_non_null(got);
	assert_int_equal(len, MIB);
	assert_memory_equal(got, seg, MIB);
	free(got);
	assert_int_equal(ask(sock, DAEMON_FETCH, "000000010000000000000004", "pg_wal/RECOVERYXLOG"),
					 DAEMON_MISSING);
	assert_int_equal(ask(sock, DAEMON_FETCH, SEG3, "/etc/passwd"), DAEMON_ERROR);
	/* a message of no known type */
	assert_int_equal(ask(sock, 'Z', NULL, NULL), DAEMON_ERROR);

	/* stopped by a signal's cancellation: the next connection wakes it */
	cancel_request(SIGTERM);
	const char *none[1] = { NULL };
	if (daemon_ask(sock, DAEMON_CHECK, none, 0, 1000, 1000, &answer) != E_OK)
		err_clear();
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(s.rc, E_OK);
	assert_int_equal(access(sock, F_OK), -1);

	free(got_path);
	free(path);
	free(seg);
	free(sock);
	unit_cluster_close(&cfg, r);
}

int main(void)
{
	log_setup(LOG_ERROR, false, "test_daemon");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_push),
		cmocka_unit_test(test_fetch),
		cmocka_unit_test(test_frame),
		cmocka_unit_test(test_fetch_path),
		cmocka_unit_test_setup_teardown(test_run_refused, unit_dir_setup, unit_dir_teardown),
		cmocka_unit_test_setup_teardown(test_push_texts, unit_dir_setup, unit_dir_teardown),
		/* last: its cancellation is for the whole process */
		cmocka_unit_test_setup_teardown(test_serve, unit_dir_setup, unit_dir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
