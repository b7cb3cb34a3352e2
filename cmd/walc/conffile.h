/*
 * WAL-G's configuration file: --config FILE, WALG_CONFIG_PATH, or ~/.walg.json. walc reads its
 * JSON form into setting names and values (the environment wins over it, flags over both);
 * other formats WAL-G reads (YAML, TOML, ...) are refused naming the file, never ignored.
 */
#ifndef WALC_CMD_WALC_CONFFILE_H
#define WALC_CMD_WALC_CONFFILE_H

#include "internal/core/core.h"

typedef struct conffile {
	char *path;			/* the file read, or NULL when there is none */
	config_pair *pairs; /* setting names upper-cased, as WAL-G's viper reads them */
	size_t n;
} conffile;

/* explicit: --config's value, or NULL (then WALG_CONFIG_PATH, then ~/.walg.*). */
err_code conffile_load(const char *explicit_path, conffile *out);
void conffile_free(conffile *f);

#endif
