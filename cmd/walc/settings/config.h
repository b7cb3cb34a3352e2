/*
 * cmd's settings: one table of every setting (configvars.c), read once into struct config,
 * which is made of each module's own settings (defined in its header) and cmd's. Only cmd
 * knows every part; it hands each module its own.
 */
#ifndef WALC_CMD_WALC_SETTINGS_CONFIG_H
#define WALC_CMD_WALC_SETTINGS_CONFIG_H

#include <stdio.h>

#include "internal/backup/backup.h"
#include "internal/catalog/catalog.h"
#include "internal/core/core.h"
#include "internal/crypt/crypt.h"
#include "internal/pg/pg.h"
#include "internal/repo/repo.h"
#include "internal/storage/storage.h"
#include "internal/wal/wal.h"

/* Every setting: each module's part, and cmd's own. */
typedef struct config {
	storage_settings storage;
	crypt_settings crypt;
	repo_settings repo;
	pg_settings pg;
	catalog_settings catalog;
	wal_settings wal;		/* its pg and catalog are this config's */
	backup_settings backup; /* its wal is this config's */
	log_settings log;
	/* cmd's own */
	bool tar_disable_fsync;			/* WALG_TAR_DISABLE_FSYNC */
	bool delta_restore;				/* WALG_DELTA_RESTORE: backup-fetch --delta */
	char *fetch_target_user_data;	/* WALG_FETCH_TARGET_USER_DATA */
	long network_rate_limit;		/* WALG_NETWORK_RATE_LIMIT, bytes/s, 0 = none */
	long wal_push_timeout_ms;		/* WALG_WAL_PUSH_TIMEOUT, 0 = none */
	char *metrics_address;			/* WALG_METRICS_ADDRESS, host:port for the daemon */
	char *pushgateway_url;			/* WALG_PUSHGATEWAY_URL, for backup-push and delete */
	char *pg_appname;				/* PGAPPNAME */
} config;

/*
 * Where settings come from besides the environment, as in WAL-G: command-line flags
 * (--walg-s3-prefix=..., highest precedence), then the environment, then a configuration
 * file's entries. main parses both; config only reads the name/value pairs.
 */
typedef struct config_sources {
	const config_pair *flags;
	size_t nflags;
	const config_pair *file;
	size_t nfile;
	const char *file_name; /* for messages, or NULL */
} config_sources;

/*
 * Reads and validates every setting. On a bad value returns E_CONFIG with a message naming
 * the setting (and the file it came from) and what is accepted; a WAL-G setting walc does not
 * implement that would change what is stored or how it is protected is an error too.
 * need_storage: fail when no storage prefix is set (checked last). src may be NULL.
 */
err_code config_load_from(config *out, bool need_storage, const config_sources *src);
/* config_load_from with the environment only. */
err_code config_load(config *out, bool need_storage);
/*
 * Every setting at the table's default, whatever the environment: the configuration tests
 * build on (modules keep no fallbacks of their own for an unset setting). config_free it.
 */
err_code config_defaults(config *out);
void config_free(config *c);
/*
 * base with WALG_FAILOVER_STORAGES resolved: each entry (storage_entries) made a storage's
 * settings by config_for_storage, as storage_open_use opens them. *out borrows the rest of
 * base, so it lives no longer; config_failovers_free it (config_free frees those a config's
 * storage holds).
 */
err_code config_failovers(const storage_settings *base, storage_settings *out);
void config_failovers_free(storage_settings *s);
/*
 * The repository the configuration names (repo_open_use), its failover storages resolved
 * first; use and target as there.
 */
err_code config_repo_open(const config *cfg, repo_use use, const char *target, repo **out);
/*
 * The storage settings of another storage (a WALG_FAILOVER_STORAGES entry, a copy --from/--to
 * file): base's, with each storage setting that pairs sets in place of base's, as WAL-G takes
 * them; no failover storages or target of its own. Where the storage is (WALG_FILE_PREFIX,
 * WALG_S3_PREFIX, ...; with CFS_FILE WALG_STORAGE_PREFIX too) comes from pairs only. A
 * refused setting in pairs is an error; any other that is not a storage setting is ignored,
 * with a warning unless CFS_FILE (a whole configuration file). Errors start with what.
 */
#define CFS_FILE 1u
err_code config_for_storage(const storage_settings *base, const char *what,
							const config_pair *pairs, size_t n, unsigned flags,
							storage_settings *out);
/* A copy of src that owns its own strings; config_storage_free it. */
void config_storage_copy(const storage_settings *src, storage_settings *dst);
void config_storage_free(storage_settings *s);
/* One value, for cmd's own options: a message names `name` on error. */
err_code config_parse_bool(const char *name, const char *value, bool def, bool *out);
err_code config_parse_long(const char *name, const char *value, long def, long min, long max,
						   long *out);
/* A Go duration ("500ms", "1m30s"; a bare number is seconds) in milliseconds. */
err_code config_parse_duration(const char *name, const char *value, long *ms);
/*
 * The setting a flag name sets ("walg-s3-prefix" or "pghost" -> "WALG_S3_PREFIX",
 * "PGHOST"), as WAL-G exposes every setting as a hidden flag; NULL when none does. *is_bool
 * tells whether the flag may stand without a value.
 */
const char *config_flag_setting(const char *flag, bool *is_bool);
/* Whether name is a setting of the table (any class), so a file's key is not unknown. */
bool config_known(const char *name);
/*
 * Calls fn for every setting walc implements that is set (from a flag, the environment or
 * the configuration file), with the name it was set under and its value. Settings libpq
 * reads itself are left out.
 */
void config_each_set(void (*fn)(const char *name, const char *value, bool secret, void *arg),
					 void *arg);
/* Prints every setting walc reads: value (secrets masked) and its source, default, meaning. */
void config_print_env(FILE *out);
/* At DEVEL level, logs each setting that is set (secrets masked). */
void config_log_env(void);
/*
 * Warns about WALG_* variables (and file entries) walc does not know or does not implement,
 * notes no-op ones at DEVEL level. per_segment: the command runs once a WAL segment
 * (wal-push, wal-fetch), whose log would repeat the warnings with every segment: they are
 * DEVEL lines there too.
 */
void config_warn_unknown(bool per_segment);

#endif
