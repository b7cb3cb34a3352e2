/*
 * pg's SQL and replication sessions against a scripted libpq (test/unit/pqfake.h): what walc
 * sends on connecting, for the server's facts, a backup's start and stop, the databases and
 * relations, slots, timeline history, the WAL stream and BASE_BACKUP's stream, on each major's
 * SQL and protocol; what it makes of the answers, and the one line an error becomes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "internal/pg/pg.h"
#include "test/unit/pqfake.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define CONNECT(settings) { .kind = PQ_CONNECT, .text = settings }
#define SQL_CONNECT CONNECT("expand")
#define REPL_CONNECT CONNECT("replication=true expand")
/* A query (with parameter p: PQexecParams) answered with nr rows of nc columns. */
#define ROWS(sql, nc, nr, ...)                                                                  \
	{ .kind = PQ_QUERY, .text = sql, .status = PGRES_TUPLES_OK, .ncols = nc, .nrows = nr,       \
	  .cells = PQ_CELLS(__VA_ARGS__) }
#define PROWS(sql, p, nc, nr, ...)                                                              \
	{ .kind = PQ_QUERY, .text = sql, .param = p, .status = PGRES_TUPLES_OK, .ncols = nc,        \
	  .nrows = nr, .cells = PQ_CELLS(__VA_ARGS__) }
#define VALUE(sql, v) ROWS(sql, 1, 1, v)
#define FAILS(sql, msg) { .kind = PQ_QUERY, .text = sql, .status = PGRES_FATAL_ERROR, .error = msg }
#define DONE(sql) { .kind = PQ_QUERY, .text = sql, .status = PGRES_COMMAND_OK }
#define STATUS(sql, st) { .kind = PQ_QUERY, .text = sql, .status = st }
/* In single-row mode: nr rows of nc columns, then the query's status. */
#define SENT(sql, st, nc, nr, ...)                                                              \
	{ .kind = PQ_SEND, .text = sql, .status = st, .ncols = nc, .nrows = nr,                     \
	  .cells = PQ_CELLS(__VA_ARGS__) }
#define RESULT(st) { .kind = PQ_RESULT, .status = st }
#define COPY(data, n) { .kind = PQ_COPY, .text = data, .copy_len = n }

static int clean(void **state)
{
	(void)state;
	unsetenv("PGDATABASE");
	unsetenv("PGAPPNAME");
	err_clear();
	return 0;
}

static pg_session *connected(const pq_step *steps, size_t n, int version, bool replication)
{
	pq_script(steps, n, version, "x");
	pg_session *s = NULL;
	assert_int_equal(pg_connect(replication, &s), E_OK);
	assert_non_null(s);
	return s;
}

/* ------------------------------------------------------------------------------------------ */
/* Connecting                                                                                 */
/* ------------------------------------------------------------------------------------------ */

static void test_connect(void **state)
{
	(void)state;
	pg_session *s;
	/* a database's name is never a connection string (PGAPPNAME is libpq's own to read) */
	const pq_step named[] = { CONNECT("dbname=host=evil") };
	pq_script(named, COUNT(named), 150004, "15.4");
	assert_int_equal(pg_connect_db("host=evil", &s), E_OK);
	assert_int_equal(pg_server_version(s), 150004);
	pg_disconnect(s);
	pq_done();

	/* a role's own database seldom exists: without PGDATABASE, postgres will do */
	const pq_step fallback[] = {
		{ .kind = PQ_CONNECT, .text = "expand",
		  .error = "FATAL:  database \"walc_backup\" does not exist" },
		CONNECT("dbname=postgres expand"),
	};
	pq_script(fallback, COUNT(fallback), 170000, "17.0");
	assert_int_equal(pg_connect(false, &s), E_OK);
	pg_disconnect(s);
	pq_done();

	/* with PGDATABASE named, its absence is the error */
	setenv("PGDATABASE", "walc_backup", 1);
	pq_script(fallback, 1, 170000, "17.0");
	assert_int_equal(pg_connect(false, &s), E_IO);
	assert_null(s);
	assert_string_equal(err_msg(), "connecting to PostgreSQL (PGHOST, PGPORT, PGUSER): FATAL:  "
								   "database \"walc_backup\" does not exist");
	pq_done();
	err_clear();

	/* a replication session */
	const pq_step repl[] = { REPL_CONNECT };
	pq_script(repl, COUNT(repl), 130011, "13.11");
	assert_int_equal(pg_connect(true, &s), E_OK);
	pg_disconnect(s);
	pq_done();
}

static void test_connect_versions(void **state)
{
	(void)state;
	pg_session *s;
	const pq_step one[] = { SQL_CONNECT };
	pq_script(one, COUNT(one), 120017, "12.17");
	assert_int_equal(pg_connect(false, &s), E_CONFIG);
	assert_string_equal(err_msg(), "PostgreSQL 12.17 (server_version_num 120017) is not "
								   "supported: walc supports PostgreSQL 13 to 19");
	pq_done();
	err_clear();
	pq_script(one, COUNT(one), 200000, "20devel");
	assert_int_equal(pg_connect(false, &s), E_CONFIG);
	pq_done();
	err_clear();
	pq_script(one, COUNT(one), 190000, "19rc1");
	assert_int_equal(pg_connect(false, &s), E_OK);
	pg_disconnect(s);
	pq_done();
	assert_int_equal(pg_check_version(130000, NULL), E_OK);
	assert_int_equal(pg_check_version(0, NULL), E_CONFIG);
	assert_non_null(strstr(err_msg(), "PostgreSQL ? (server_version_num 0)"));
	err_clear();
}

/* ------------------------------------------------------------------------------------------ */
/* The server's facts                                                                          */
/* ------------------------------------------------------------------------------------------ */

static void test_server_info_sql(void **state)
{
	(void)state;
	const pq_step steps[] = {
		SQL_CONNECT,
		VALUE("SHOW data_directory", "/var/lib/postgresql/17/main"),
		VALUE("SELECT system_identifier FROM pg_control_system()", "7301234567890123456"),
		VALUE("SELECT bytes_per_wal_segment FROM pg_control_init()", "16777216"),
		VALUE("SHOW archive_mode", "on"),
		VALUE("SHOW archive_command", NULL),
		FAILS("SHOW archive_library", "ERROR:  must be superuser"),
		VALUE("SHOW data_checksums", "on"),
		VALUE("SHOW summarize_wal", "off"),
		ROWS("SELECT 1", 1, 1, "1"),
	};
	pg_session *s = connected(steps, COUNT(steps), 170002, false);
	pg_server_info i;
	assert_int_equal(pg_server_info_get(s, &i), E_OK);
	assert_int_equal(i.version, 170002);
	assert_string_equal(i.data_dir, "/var/lib/postgresql/17/main");
	assert_true(i.system_id == UINT64_C(7301234567890123456));
	assert_int_equal(i.wal_segsize, 16 << 20);
	assert_int_equal(i.timeline, 0);
	assert_string_equal(i.archive_mode, "on");
	assert_string_equal(i.archive_command, ""); /* NULL as the server shows it: empty */
	assert_null(i.archive_library);				 /* not shown to this role */
	assert_true(i.data_checksums);
	assert_false(i.summarize_wal);
	assert_int_equal(pg_ping(s), E_OK);
	pg_server_info_free(&i);
	pg_disconnect(s);
	pq_done();

	/* before 15 there is no archive_library to ask for, before 17 no summarize_wal */
	const pq_step old[] = {
		SQL_CONNECT,
		VALUE("SHOW data_directory", "/d"),
		VALUE("SELECT system_identifier FROM pg_control_system()", "1"),
		VALUE("SELECT bytes_per_wal_segment FROM pg_control_init()", "1048576"),
		VALUE("SHOW archive_mode", "off"),
		VALUE("SHOW archive_command", "walc wal-push %p"),
		VALUE("SHOW data_checksums", "off"),
	};
	s = connected(old, COUNT(old), 140010, false);
	assert_int_equal(pg_server_info_get(s, &i), E_OK);
	assert_string_equal(i.archive_command, "walc wal-push %p");
	assert_int_equal(i.wal_segsize, 1 << 20);
	assert_false(i.data_checksums);
	pg_server_info_free(&i);
	pg_disconnect(s);
	pq_done();
}

static void test_server_info_errors(void **state)
{
	(void)state;
	pg_server_info i;
	const pq_step nan[] = {
		SQL_CONNECT,
		VALUE("SHOW data_directory", "/d"),
		VALUE("SELECT system_identifier FROM pg_control_system()", "12ab"),
	};
	pg_session *s = connected(nan, COUNT(nan), 150000, false);
	assert_int_equal(pg_server_info_get(s, &i), E_IO);
	assert_string_equal(err_msg(), "query \"SELECT system_identifier FROM pg_control_system()\" "
								   "returned \"12ab\", not a number");
	pg_server_info_free(&i);
	pg_disconnect(s);
	pq_done();
	err_clear();

	const pq_step denied[] = {
		SQL_CONNECT,
		FAILS("SHOW data_directory", "ERROR:  permission denied to examine \"data_directory\"\n"),
	};
	s = connected(denied, COUNT(denied), 150000, false);
	assert_int_equal(pg_server_info_get(s, &i), E_IO);
	assert_string_equal(err_msg(), "query \"SHOW data_directory\" failed: ERROR:  permission "
								   "denied to examine \"data_directory\"");
	pg_server_info_free(&i);
	pg_disconnect(s);
	pq_done();
	err_clear();

	const pq_step norows[] = {
		SQL_CONNECT,
		{ .kind = PQ_QUERY, .text = "SHOW data_directory", .status = PGRES_TUPLES_OK, .ncols = 1 },
	};
	s = connected(norows, COUNT(norows), 150000, false);
	assert_int_equal(pg_server_info_get(s, &i), E_IO);
	assert_string_equal(err_msg(), "query \"SHOW data_directory\" returned 0 rows");
	pg_server_info_free(&i);
	pg_disconnect(s);
	pq_done();
	err_clear();
}

static void test_server_info_replication(void **state)
{
	(void)state;
	const pq_step steps[] = {
		REPL_CONNECT,
		ROWS("IDENTIFY_SYSTEM", 4, 1, "7301234567890123456", "3", "0/3000148", NULL),
		FAILS("SHOW data_directory", "ERROR:  must be superuser"),
		VALUE("SHOW wal_segment_size", "64MB"),
		VALUE("SHOW archive_mode", "always"),
		VALUE("SHOW archive_command", ""),
		VALUE("SHOW archive_library", "walc_archive"),
		VALUE("SHOW data_checksums", "on"),
		VALUE("SHOW summarize_wal", "on"),
	};
	pg_session *s = connected(steps, COUNT(steps), 180001, true);
	pg_server_info i;
	assert_int_equal(pg_server_info_get(s, &i), E_OK);
	assert_true(i.system_id == UINT64_C(7301234567890123456));
	assert_int_equal(i.timeline, 3);
	assert_true(i.xlogpos == UINT64_C(0x3000148));
	assert_string_equal(i.data_dir, "");
	assert_int_equal(i.wal_segsize, 64 << 20);
	assert_string_equal(i.archive_library, "walc_archive");
	assert_true(i.summarize_wal);
	pg_server_info_free(&i);
	pg_disconnect(s);
	pq_done();

	/* a size the server would not print, and a refused IDENTIFY_SYSTEM */
	const pq_step odd[] = {
		REPL_CONNECT,
		ROWS("IDENTIFY_SYSTEM", 2, 1, "42", "1"),
		VALUE("SHOW data_directory", "/d"),
		VALUE("SHOW wal_segment_size", "16TB"),
		VALUE("SHOW archive_mode", "on"),
		VALUE("SHOW archive_command", "x"),
		VALUE("SHOW archive_library", ""),
		VALUE("SHOW data_checksums", "off"),
		REPL_CONNECT,
		FAILS("IDENTIFY_SYSTEM", "ERROR:  no"),
	};
	s = connected(odd, COUNT(odd), 160000, true);
	assert_int_equal(pg_server_info_get(s, &i), E_OK);
	assert_int_equal(i.wal_segsize, 0);
	assert_true(i.system_id == 42);
	assert_true(i.xlogpos == 0);
	pg_server_info_free(&i);
	pg_disconnect(s);
	assert_int_equal(pg_connect(true, &s), E_OK);
	assert_int_equal(pg_server_info_get(s, &i), E_IO);
	assert_string_equal(err_msg(), "IDENTIFY_SYSTEM: ERROR:  no");
	pg_server_info_free(&i);
	pg_disconnect(s);
	pq_done();
	err_clear();
}

static void test_wal_position(void **state)
{
	(void)state;
	const pq_step steps[] = {
		SQL_CONNECT,
		VALUE("SELECT pg_is_in_recovery()", "f"),
		VALUE("SELECT pg_current_wal_lsn()", "1/A0000060"),
		VALUE("SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int",
			  "2"),
		VALUE("SELECT pg_is_in_recovery()", "t"),
		VALUE("SELECT COALESCE(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())", "1/B0"),
		VALUE("SELECT timeline_id FROM pg_control_checkpoint()", "4"),
		VALUE("SELECT timeline_id FROM pg_control_checkpoint()", "5"),
		VALUE("SELECT CASE WHEN last_failed_time > coalesce(last_archived_time, '-infinity') "
			  "THEN last_failed_wal || ' at ' || last_failed_time ELSE '' END FROM pg_stat_archiver",
			  "000000010000000000000003 at 2026-12-06 10:00:00+00"),
	};
	pg_session *s = connected(steps, COUNT(steps), 150000, false);
	uint32_t tli;
	uint64_t lsn;
	assert_int_equal(pg_wal_position(s, &tli, &lsn), E_OK);
	assert_int_equal(tli, 2);
	assert_true(lsn == UINT64_C(0x1A0000060));
	assert_int_equal(pg_wal_position(s, &tli, &lsn), E_OK);
	assert_int_equal(tli, 4);
	assert_true(lsn == UINT64_C(0x1000000B0));
	assert_int_equal(pg_checkpoint_timeline(s, &tli), E_OK);
	assert_int_equal(tli, 5);
	char *failing;
	assert_int_equal(pg_archiver_failing(s, &failing), E_OK);
	assert_string_equal(failing, "000000010000000000000003 at 2026-12-06 10:00:00+00");
	free(failing);
	pg_disconnect(s);
	pq_done();
}

/* ------------------------------------------------------------------------------------------ */
/* A backup's start and stop                                                                  */
/* ------------------------------------------------------------------------------------------ */

#define START15                                                                               \
	"SELECT CASE WHEN pg_is_in_recovery() THEN '' ELSE (pg_walfile_name_offset(lsn)).file_name " \
	"END, lsn::text, pg_is_in_recovery() FROM pg_backup_start($1, true) lsn"
#define START14                                                                               \
	"SELECT CASE WHEN pg_is_in_recovery() THEN '' ELSE (pg_walfile_name_offset(lsn)).file_name " \
	"END, lsn::text, pg_is_in_recovery() FROM pg_start_backup($1, true, false) lsn"

static void test_backup_start_stop(void **state)
{
	(void)state;
	const pq_step steps[] = {
		SQL_CONNECT,
		PROWS(START15, "base_000000010000000000000004", 3, 1, "000000010000000000000004", "0/4000028", "f"),
		DONE("SET statement_timeout = 0"),
		ROWS("SELECT labelfile, spcmapfile, lsn::text FROM pg_backup_stop(true)", 3, 1, "START WAL LOCATION: 0/4000028\n", NULL, "0/4000100"),
		DONE("SET statement_timeout = 0"),
	};
	pg_session *s = connected(steps, COUNT(steps), 150000, false);
	pg_backup_start_info st;
	assert_int_equal(pg_backup_begin(s, "base_000000010000000000000004", &st), E_OK);
	assert_string_equal(st.walfile, "000000010000000000000004");
	assert_true(st.lsn == UINT64_C(0x4000028));
	assert_false(st.in_recovery);
	char *label, *spcmap;
	uint64_t lsn;
	assert_int_equal(pg_backup_end(s, 0, true, &label, &spcmap, &lsn), E_OK);
	assert_string_equal(label, "START WAL LOCATION: 0/4000028\n");
	assert_string_equal(spcmap, "");
	assert_true(lsn == UINT64_C(0x4000100));
	free(label);
	free(spcmap);
	pg_disconnect(s);
	pq_done();

	/* 14 and before: the old names; a standby's start has no WAL file name */
	const pq_step old[] = {
		SQL_CONNECT,
		PROWS(START14, "b", 3, 1, "", "0/5000060", "t"),
		DONE("SET statement_timeout = 60000"),
		ROWS("SELECT labelfile, spcmapfile, lsn::text FROM pg_stop_backup(false, false)", 3, 1, "L", "S", "0/5000200"),
		DONE("SET statement_timeout = 0"),
	};
	s = connected(old, COUNT(old), 140005, false);
	assert_int_equal(pg_backup_begin(s, "b", &st), E_OK);
	assert_string_equal(st.walfile, "");
	assert_true(st.in_recovery);
	assert_int_equal(pg_backup_end(s, 60000, false, &label, &spcmap, &lsn), E_OK);
	assert_string_equal(spcmap, "S");
	free(label);
	free(spcmap);
	pg_disconnect(s);
	pq_done();
}

static void test_backup_stop_errors(void **state)
{
	(void)state;
	const pq_step steps[] = {
		SQL_CONNECT,
		DONE("SET statement_timeout = 5000"),
		FAILS("SELECT labelfile, spcmapfile, lsn::text FROM pg_stop_backup(false, true)", "ERROR:  canceling statement due to statement timeout\n"),
		DONE("SET statement_timeout = 0"),
		FAILS("SELECT labelfile, spcmapfile, lsn::text FROM pg_stop_backup(false, true)", "ERROR:  backup is not in progress\n"),
		PROWS(START14, "c", 3, 2, "", "0/1", "f", "", "0/2", "f"),
		PROWS(START14, "c", 3, 1, "", "zz", "f"),
	};
	pg_session *s = connected(steps, COUNT(steps), 130000, false);
	char *label, *spcmap;
	uint64_t lsn;
	assert_int_equal(pg_backup_end(s, 5000, true, &label, &spcmap, &lsn), E_IO);
	assert_string_equal(err_msg(), "pg_backup_stop did not return within "
								   "WALG_STOP_BACKUP_TIMEOUT (5000 ms): it waits until the "
								   "backup's WAL is archived; check archive_command");
	err_clear();
	assert_int_equal(pg_backup_end(s, 0, true, &label, &spcmap, &lsn), E_IO);
	assert_non_null(strstr(err_msg(), "failed: ERROR:  backup is not in progress"));
	assert_null(label);
	err_clear();
	pg_backup_start_info st;
	assert_int_equal(pg_backup_begin(s, "c", &st), E_IO);
	assert_non_null(strstr(err_msg(), "returned 2 rows"));
	err_clear();
	assert_int_equal(pg_backup_begin(s, "c", &st), E_CORRUPT);
	assert_string_equal(err_msg(), "\"zz\" is not an LSN");
	err_clear();
	pg_disconnect(s);
	pq_done();
}

/* ------------------------------------------------------------------------------------------ */
/* Databases and relations                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct seen {
	int n;
	char names[4][64];
	pg_relation last;
	int stop_at; /* fail at this row (1-based), 0 never */
} seen;

static err_code each(void *arg, const pg_relation *r)
{
	seen *s = arg;
	snprintf(s->names[s->n], sizeof(s->names[0]), "%s", r->name);
	s->last = *r;
	s->last.name = NULL;
	if (++s->n == s->stop_at)
		return err_set(E_IO, "stop at %s", r->name);
	return E_OK;
}

/* The listing's SQL is dbnames.c's to write: its start is enough to know it. */
#define RELATIONS "WITH RECURSIVE r AS (SELECT c.oid, c.relfilenode, c.relkind, c.relname, ..."

static void test_databases_relations(void **state)
{
	(void)state;
	const pq_step steps[] = {
		SQL_CONNECT,
		ROWS("SELECT oid, datname FROM pg_catalog.pg_database WHERE datallowconn ORDER BY oid", 2, 2, "5", "postgres", "16384", "shop"),
		CONNECT("dbname=shop"),
		SENT(RELATIONS, PGRES_TUPLES_OK, 8, 2, "16385", "16385", NULL, "public", "orders", "r", "0", "16385",
				"1262", "0", "global/1262", "pg_catalog", "pg_database", "r", "0", "1262"),
		CONNECT("dbname=shop"),
		{ .kind = PQ_SEND, .text = RELATIONS, .status = PGRES_FATAL_ERROR, .ncols = 8, .nrows = 1,
		  .cells = PQ_CELLS("16390", "16390", NULL, "public", "items_1", "r", "16388", "16388"),
		  .error = "ERROR:  out of memory" },
		CONNECT("dbname=shop"),
		SENT(RELATIONS, PGRES_TUPLES_OK, 8, 2, "1", "1", NULL, "a", "b", "r", "0", "1", "2", "2", NULL, "a", "c", "i", "0", "1"),
	};
	pg_session *s = connected(steps, COUNT(steps), 160000, false);
	pg_database *d;
	size_t n;
	assert_int_equal(pg_databases_read(s, &d, &n), E_OK);
	assert_int_equal(n, 2);
	assert_string_equal(d[1].name, "shop");
	assert_int_equal(d[1].oid, 16384);
	pg_databases_free(d, n);
	pg_disconnect(s);

	seen got = { 0 };
	bool started;
	assert_int_equal(pg_relations_each("shop", each, &got, &started), E_OK);
	assert_true(started);
	assert_int_equal(got.n, 2);
	assert_string_equal(got.names[0], "public.orders");
	assert_string_equal(got.names[1], "pg_catalog.pg_database");
	assert_int_equal(got.last.relfilenode, 1262); /* a mapped catalog's, from its path */

	/* the server fails after a row: the error names the database */
	got = (seen){ 0 };
	assert_int_equal(pg_relations_each("shop", each, &got, &started), E_IO);
	assert_true(started);
	assert_int_equal(got.last.parent, 16388);
	assert_string_equal(err_msg(), "database shop: listing relations: ERROR:  out of memory");
	err_clear();

	/* the callback's error stops the listing; the rest of the rows are drained */
	got = (seen){ .stop_at = 1 };
	assert_int_equal(pg_relations_each("shop", each, &got, &started), E_IO);
	assert_int_equal(got.n, 1);
	assert_string_equal(err_msg(), "database shop: stop at a.b");
	err_clear();
	pq_done();
}

/* ------------------------------------------------------------------------------------------ */
/* Replication: slots, timeline history, the WAL stream                                       */
/* ------------------------------------------------------------------------------------------ */

#define SLOT_SQL                                                                              \
	"SELECT count(*), max(slot_type), max(restart_lsn::text), max(wal_status) FROM "           \
	"pg_replication_slots WHERE slot_name = $1"

static void test_slots(void **state)
{
	(void)state;
	const pq_step steps[] = {
		SQL_CONNECT,
		PROWS(SLOT_SQL, "walc", 4, 1, "0", NULL, NULL, NULL),
		PROWS(SLOT_SQL, "walc", 4, 1, "1", "physical", "0/7000000", "reserved"),
		PROWS(SLOT_SQL, "walc", 4, 1, "1", "physical", NULL, "lost"),
		PROWS(SLOT_SQL, "walc", 4, 1, "1", "logical", NULL, "reserved"),
		DONE("CREATE_REPLICATION_SLOT walc PHYSICAL (RESERVE_WAL)"),
		FAILS("CREATE_REPLICATION_SLOT walc PHYSICAL (RESERVE_WAL)", "ERROR:  replication slot \"walc\" already exists"),
	};
	pg_session *s = connected(steps, COUNT(steps), 150000, false);
	pg_slot_info si;
	assert_int_equal(pg_slot_read(s, "walc", &si), E_OK);
	assert_false(si.exists);
	assert_int_equal(pg_slot_read(s, "walc", &si), E_OK);
	assert_true(si.exists);
	assert_true(si.restart_lsn == UINT64_C(0x7000000));
	assert_string_equal(si.wal_status, "reserved");
	assert_int_equal(pg_slot_read(s, "walc", &si), E_OK);
	assert_true(si.exists);
	assert_true(si.restart_lsn == 0);
	assert_string_equal(si.wal_status, "lost");
	assert_int_equal(pg_slot_read(s, "walc", &si), E_CONFIG);
	assert_string_equal(err_msg(), "WALG_SLOTNAME: slot \"walc\" exists and is not physical");
	assert_false(si.exists);
	err_clear();
	assert_int_equal(pg_slot_create(s, "walc"), E_OK);
	assert_int_equal(pg_slot_create(s, "walc"), E_IO);
	assert_string_equal(err_msg(), "CREATE_REPLICATION_SLOT walc PHYSICAL (RESERVE_WAL): ERROR:  "
								   "replication slot \"walc\" already exists");
	err_clear();
	pg_disconnect(s);
	pq_done();

	const pq_step old[] = { REPL_CONNECT, DONE("CREATE_REPLICATION_SLOT s PHYSICAL RESERVE_WAL") };
	s = connected(old, COUNT(old), 140000, true);
	assert_int_equal(pg_slot_create(s, "s"), E_OK);
	pg_disconnect(s);
	pq_done();
}

static void test_timeline_history(void **state)
{
	(void)state;
	const pq_step steps[] = {
		REPL_CONNECT,
		ROWS("TIMELINE_HISTORY 2", 2, 1, "00000002.history", "1\t0/3000000\tno recovery target specified\n"),
		FAILS("TIMELINE_HISTORY 9", "ERROR:  could not open file \"pg_wal/00000009.history\""),
	};
	pg_session *s = connected(steps, COUNT(steps), 150000, true);
	char *content;
	size_t len;
	assert_int_equal(pg_timeline_history(s, 2, &content, &len), E_OK);
	assert_int_equal(len, strlen("1\t0/3000000\tno recovery target specified\n"));
	assert_string_equal(content, "1\t0/3000000\tno recovery target specified\n");
	free(content);
	assert_int_equal(pg_timeline_history(s, 9, &content, &len), E_IO);
	assert_non_null(strstr(err_msg(), "TIMELINE_HISTORY 9: ERROR:  could not open file"));
	err_clear();
	pg_disconnect(s);
	pq_done();
}

/* XLogData ('w'): start, end, send time, then the WAL bytes. */
static const char xlogdata[] = "w\0\0\0\0\x03\0\0\0" "\0\0\0\0\x03\0\0\x04" "\0\0\0\0\0\0\0\0" "WAL";
/* Primary keepalive ('k'): the server's end, send time, reply requested. */
static const char keepalive[] = "k\0\0\0\0\x03\0\0\x10" "\0\0\0\0\0\0\0\0" "\x01";

static void test_wal_stream(void **state)
{
	(void)state;
	const pq_step steps[] = {
		REPL_CONNECT,
		STATUS("START_REPLICATION SLOT walc PHYSICAL 0/3000000 TIMELINE 1", PGRES_COPY_BOTH),
		COPY(xlogdata, sizeof(xlogdata) - 1),
		COPY(keepalive, sizeof(keepalive) - 1),
		COPY(NULL, 0),
		COPY(NULL, 0),
		COPY("x", 1),
		COPY(NULL, -1),
		/* at the timeline's end: the next timeline, data still in flight, the completion */
		{ .kind = PQ_RESULT, .status = PGRES_TUPLES_OK, .ncols = 2, .nrows = 1,
		  .cells = PQ_CELLS("2", "0/3000400") },
		RESULT(PGRES_COPY_BOTH),
		COPY("w", 1),
		COPY(NULL, -1),
		RESULT(PGRES_COMMAND_OK),
	};
	pg_session *s = connected(steps, COUNT(steps), 150000, true);
	assert_int_equal(pg_wal_stream_start(s, "walc", 1, UINT64_C(0x3000000)), E_OK);
	pg_wal_msg m;
	assert_int_equal(pg_wal_stream_next(s, 10, &m), E_OK);
	assert_int_equal(m.kind, PG_WAL_DATA);
	assert_true(m.start == UINT64_C(0x3000000));
	assert_true(m.server_end == UINT64_C(0x3000004));
	assert_int_equal(m.len, 3);
	assert_memory_equal(m.data, "WAL", 3);
	assert_int_equal(pg_wal_stream_next(s, 10, &m), E_OK);
	assert_int_equal(m.kind, PG_WAL_KEEPALIVE);
	assert_true(m.reply);
	assert_true(m.server_end == UINT64_C(0x3000010));
	assert_int_equal(pg_wal_stream_next(s, 10, &m), E_OK);
	assert_int_equal(m.kind, PG_WAL_IDLE);
	assert_int_equal(pg_wal_stream_next(s, 10, &m), E_CORRUPT);
	err_clear();
	assert_int_equal(pg_wal_stream_status(s, UINT64_C(0x3000004), 0), E_OK);
	int len;
	const char *sent = pq_last_copy(&len);
	assert_int_equal(len, 34);
	assert_int_equal(sent[0], 'r');
	assert_memory_equal(sent + 1, "\0\0\0\0\x03\0\0\x04", 8); /* written */
	assert_memory_equal(sent + 9, "\0\0\0\0\0\0\0\0", 8);	   /* no flush news */
	assert_int_equal(pg_wal_stream_next(s, 10, &m), E_OK);
	assert_int_equal(m.kind, PG_WAL_END);
	uint32_t tli;
	uint64_t lsn;
	assert_int_equal(pg_wal_stream_finish(s, &tli, &lsn), E_OK);
	assert_int_equal(tli, 2);
	assert_true(lsn == UINT64_C(0x3000400));
	pg_disconnect(s);
	pq_done();
}

static void test_wal_stream_errors(void **state)
{
	(void)state;
	const pq_step steps[] = {
		REPL_CONNECT,
		FAILS("START_REPLICATION SLOT walc PHYSICAL 0/9000000 TIMELINE 1", "ERROR:  requested starting point 0/9000000 is ahead"),
		STATUS("START_REPLICATION SLOT walc PHYSICAL 0/1000000 TIMELINE 1", PGRES_COPY_BOTH),
		COPY(NULL, -2),
		{ .kind = PQ_RESULT, .status = PGRES_FATAL_ERROR, .sqlstate = "58P01",
		  .error = "ERROR:  requested WAL segment 000000010000000000000001 has already been "
				   "removed" },
	};
	pg_session *s = connected(steps, COUNT(steps), 150000, true);
	assert_int_equal(pg_wal_stream_start(s, "walc", 1, UINT64_C(0x9000000)), E_IO);
	assert_non_null(strstr(err_msg(), "START_REPLICATION SLOT walc PHYSICAL 0/9000000 TIMELINE 1: "));
	err_clear();
	assert_int_equal(pg_wal_stream_start(s, "walc", 1, UINT64_C(0x1000000)), E_OK);
	pg_wal_msg m;
	assert_int_equal(pg_wal_stream_next(s, 10, &m), E_IO);
	assert_non_null(strstr(err_msg(), "receiving WAL: "));
	err_clear();
	uint32_t tli;
	uint64_t lsn;
	assert_int_equal(pg_wal_stream_finish(s, &tli, &lsn), E_NOTFOUND);
	assert_non_null(strstr(err_msg(), "the server no longer has the WAL asked for"));
	assert_int_equal(tli, 0);
	err_clear();
	pg_disconnect(s);
	pq_done();
}

/* ------------------------------------------------------------------------------------------ */
/* BASE_BACKUP                                                                                */
/* ------------------------------------------------------------------------------------------ */

/* What the handler heard, one line an event. */
typedef struct heard {
	char log[1024];
	size_t data, manifest;
	err_code fail_begin; /* archive_begin's answer */
} heard;

__attribute__((format(printf, 2, 3))) static void note(heard *h, const char *fmt, ...)
{
	size_t at = strlen(h->log);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(h->log + at, sizeof(h->log) - at, fmt, ap);
	va_end(ap);
}

static err_code bb_started(void *ctx, uint64_t lsn, uint32_t tli)
{
	char l[32];
	pg_lsn_format(lsn, l);
	note(ctx, "started %s %u\n", l, tli);
	return E_OK;
}

static err_code bb_tablespace(void *ctx, const char *oid, const char *location)
{
	note(ctx, "tablespace %s %s\n", oid, location);
	return E_OK;
}

static err_code bb_begin(void *ctx, const char *name, const char *oid)
{
	heard *h = ctx;
	note(h, "archive %s %s\n", name, oid ? oid : "-");
	return h->fail_begin != E_OK ? err_set(h->fail_begin, "no room for %s", name) : E_OK;
}

static err_code bb_data(void *ctx, const void *buf, size_t len)
{
	(void)buf;
	((heard *)ctx)->data += len;
	return E_OK;
}

static err_code bb_end(void *ctx)
{
	heard *h = ctx;
	note(h, "end %zu\n", h->data);
	h->data = 0;
	return E_OK;
}

static err_code bb_manifest(void *ctx, const void *buf, size_t len)
{
	(void)buf;
	((heard *)ctx)->manifest += len;
	return E_OK;
}

static const pg_bb_handler handler = { bb_started, bb_tablespace, bb_begin, bb_data,
									   bb_end,	   bb_manifest,	  NULL };

#define BB_SENT { .kind = PQ_SEND, .text = "BASE_BACKUP ..." }
#define BB_START(lsn)                                                                          \
	{ .kind = PQ_RESULT, .status = PGRES_TUPLES_OK, .ncols = 2, .nrows = 1,                    \
	  .cells = PQ_CELLS(lsn, "1") }
/* the base directory's row, then a tablespace's */
#define BB_SPACES                                                                             \
	{ .kind = PQ_RESULT, .status = PGRES_TUPLES_OK, .ncols = 3, .nrows = 2,                    \
	  .cells = PQ_CELLS(NULL, NULL, "100", "16400", "/srv/ts", "50") }
#define BB_END(lsn)                                                                            \
	{ .kind = PQ_RESULT, .status = PGRES_TUPLES_OK, .ncols = 2, .nrows = 1,                    \
	  .cells = PQ_CELLS(lsn, "1") }

/* 15's stream: each archive's header, its data, the manifest, progress left out. */
static void test_base_backup(void **state)
{
	(void)state;
	static const char base_hdr[] = "nbase.tar\0";
	static const char ts_hdr[] = "n16400.tar\0/srv/ts";
	const pq_step steps[] = {
		REPL_CONNECT,
		BB_SENT,
		BB_START("0/5000028"),
		BB_SPACES,
		RESULT(PGRES_COPY_OUT),
		COPY(base_hdr, sizeof(base_hdr)),
		COPY("dbase bytes", 11),
		COPY("p\0\0\0\0\0\0\0\x10", 9),
		COPY(ts_hdr, sizeof(ts_hdr)),
		COPY("dts", 3),
		COPY("m", 1),
		COPY("d{\"Files\":[]}", 13),
		COPY(NULL, -1),
		RESULT(PGRES_COMMAND_OK),
		BB_END("0/5000100"),
		RESULT(PGRES_COMMAND_OK),
	};
	pg_session *s = connected(steps, COUNT(steps), 150000, true);
	pg_bb_options o = { .label = "base_000000010000000000000005", .manifest = false };
	heard h = { .fail_begin = E_OK };
	pg_bb_result res;
	assert_int_equal(pg_base_backup(s, &o, &handler, &h, &res), E_OK);
	assert_string_equal(h.log, "started 0/5000028 1\n"
							   "tablespace 16400 /srv/ts\n"
							   "archive base.tar -\n"
							   "end 10\n"
							   "archive 16400.tar 16400\n"
							   "end 2\n");
	assert_int_equal(h.manifest, 12);
	assert_true(res.end_lsn == UINT64_C(0x5000100));
	assert_int_equal(res.wire_bytes, sizeof(base_hdr) + 11 + 9 + sizeof(ts_hdr) + 3 + 1 + 13);
	assert_false(res.refused);
	pg_disconnect(s);
	pq_done();
}

/* 13 and 14: one CopyOut a tablespace, the end-of-archive blocks the client's to add. */
static void test_base_backup_old(void **state)
{
	(void)state;
	const pq_step steps[] = {
		REPL_CONNECT,
		BB_SENT,
		BB_START("0/6000028"),
		BB_SPACES,
		RESULT(PGRES_COPY_OUT),
		COPY("base", 4),
		COPY(NULL, 0), /* nothing yet: wait */
		COPY(NULL, -1),
		RESULT(PGRES_COMMAND_OK),
		RESULT(PGRES_COPY_OUT),
		COPY("ts", 2),
		COPY(NULL, -1),
		BB_END("0/6000100"),
	};
	pg_session *s = connected(steps, COUNT(steps), 140000, true);
	pg_bb_options o = { .label = "b" };
	heard h = { .fail_begin = E_OK };
	pg_bb_result res;
	assert_int_equal(pg_base_backup(s, &o, &handler, &h, &res), E_OK);
	assert_string_equal(h.log, "started 0/6000028 1\n"
							   "tablespace 16400 /srv/ts\n"
							   "archive base.tar -\n"
							   "end 1028\n"
							   "archive 16400.tar 16400\n"
							   "end 1026\n");
	assert_true(res.end_lsn == UINT64_C(0x6000100));
	pg_disconnect(s);
	pq_done();
}

/* A refusal leaves the session usable; a stream out of shape is an error naming what came. */
static void test_base_backup_errors(void **state)
{
	(void)state;
	const pq_step steps[] = {
		REPL_CONNECT,
		BB_SENT,
		{ .kind = PQ_RESULT, .status = PGRES_FATAL_ERROR,
		  .error = "ERROR:  incremental backups cannot be taken unless WAL summarization is "
				   "enabled\n" },
		/* data before any archive header */
		BB_SENT,
		BB_START("0/7000028"),
		BB_SPACES,
		RESULT(PGRES_COPY_OUT),
		COPY("dx", 2),
		/* an archive name the server has no business sending */
		BB_SENT,
		BB_START("0/7000028"),
		BB_SPACES,
		RESULT(PGRES_COPY_OUT),
		COPY("n../x.tar\0", 11),
		/* the handler fails: its error stands */
		BB_SENT,
		BB_START("0/7000028"),
		BB_SPACES,
		RESULT(PGRES_COPY_OUT),
		COPY("nbase.tar\0", 11),
		/* no end position */
		BB_SENT,
		BB_START("0/7000028"),
		BB_SPACES,
		RESULT(PGRES_COPY_OUT),
		COPY(NULL, -1),
		RESULT(PGRES_COMMAND_OK),
	};
	pg_session *s = connected(steps, COUNT(steps), 170000, true);
	pg_bb_options o = { .label = "b", .incremental = true, .manifest = true };
	heard h = { .fail_begin = E_OK };
	pg_bb_result res;
	assert_int_equal(pg_base_backup(s, &o, &handler, &h, &res), E_IO);
	assert_true(res.refused);
	assert_string_equal(err_msg(), "BASE_BACKUP refused: ERROR:  incremental backups cannot be "
								   "taken unless WAL summarization is enabled");
	err_clear();
	o.incremental = false;
	assert_int_equal(pg_base_backup(s, &o, &handler, &h, &res), E_CORRUPT);
	assert_false(res.refused);
	assert_string_equal(err_msg(), "BASE_BACKUP data before an archive header");
	err_clear();
	assert_int_equal(pg_base_backup(s, &o, &handler, &h, &res), E_CORRUPT);
	assert_string_equal(err_msg(), "BASE_BACKUP sent an unexpected archive \"../x.tar\"");
	err_clear();
	h.fail_begin = E_IO;
	assert_int_equal(pg_base_backup(s, &o, &handler, &h, &res), E_IO);
	assert_string_equal(err_msg(), "no room for base.tar");
	err_clear();
	assert_int_equal(pg_base_backup(s, &o, &handler, &h, &res), E_IO);
	assert_string_equal(err_msg(), "BASE_BACKUP ended without an end position");
	err_clear();
	pg_disconnect(s);
	pq_done();
}

/* 17's UPLOAD_MANIFEST: the prior manifest in pieces; refused before 17. */
static void test_upload_manifest(void **state)
{
	(void)state;
	const pq_step steps[] = {
		REPL_CONNECT,
		STATUS("UPLOAD_MANIFEST", PGRES_COPY_IN),
		RESULT(PGRES_COMMAND_OK),
		FAILS("UPLOAD_MANIFEST", "ERROR:  manifest already uploaded\n"),
	};
	pg_session *s = connected(steps, COUNT(steps), 170000, true);
	char *manifest = xmalloc(70000);
	memset(manifest, 'm', 70000);
	assert_int_equal(pg_upload_manifest(s, manifest, 70000), E_OK);
	int len;
	pq_last_copy(&len);
	assert_int_equal(len, 70000 - 65536); /* the last of two pieces */
	assert_int_equal(pg_upload_manifest(s, manifest, 10), E_IO);
	assert_string_equal(err_msg(), "BASE_BACKUP UPLOAD_MANIFEST: ERROR:  manifest already uploaded");
	err_clear();
	free(manifest);
	pg_disconnect(s);
	pq_done();
	const pq_step old[] = { REPL_CONNECT };
	s = connected(old, COUNT(old), 160000, true);
	assert_int_equal(pg_upload_manifest(s, "x", 1), E_CONFIG);
	err_clear();
	pg_disconnect(s);
	pq_done();
}

int main(void)
{
	log_setup(LOG_ERROR, false, "test_pgsql");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_connect, clean),
		cmocka_unit_test_setup(test_connect_versions, clean),
		cmocka_unit_test_setup(test_server_info_sql, clean),
		cmocka_unit_test_setup(test_server_info_errors, clean),
		cmocka_unit_test_setup(test_server_info_replication, clean),
		cmocka_unit_test_setup(test_wal_position, clean),
		cmocka_unit_test_setup(test_backup_start_stop, clean),
		cmocka_unit_test_setup(test_backup_stop_errors, clean),
		cmocka_unit_test_setup(test_databases_relations, clean),
		cmocka_unit_test_setup(test_slots, clean),
		cmocka_unit_test_setup(test_timeline_history, clean),
		cmocka_unit_test_setup(test_wal_stream, clean),
		cmocka_unit_test_setup(test_wal_stream_errors, clean),
		cmocka_unit_test_setup(test_base_backup, clean),
		cmocka_unit_test_setup(test_base_backup_old, clean),
		cmocka_unit_test_setup(test_base_backup_errors, clean),
		cmocka_unit_test_setup(test_upload_manifest, clean),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
