/* settings-internal: the table of settings (configvars.c) that config.c reads, checks and prints. */
#ifndef WALC_CMD_WALC_SETTINGS_CONFIG_IMPL_H
#define WALC_CMD_WALC_SETTINGS_CONFIG_IMPL_H

#include <stddef.h>

#include "cmd/walc/settings/config.h"

typedef enum var_kind {
	V_TEXT,		/* a string (printable unless F_RAW) */
	V_BOOL,		/* Go's strconv.ParseBool, as WAL-G */
	V_INT,		/* a whole number from min to max */
	V_DURATION, /* a Go duration ("1m30s") or bare seconds, stored in milliseconds */
	V_CHOICE,	/* one of choices ("a|b|c", case-insensitive), stored in its canonical case */
	V_REFUSED,	/* WAL-G's, not implemented, and it changes what is stored: an error */
	V_WARN,		/* WAL-G's, not implemented, harmless to leave out: a warning */
	V_NOOP,		/* WAL-G's, tunes what walc does not have: a DEVEL note */
} var_kind;

#define F_SECRET (1u << 0) /* masked in walc env and DEVEL logs */
#define F_ALIAS (1u << 1)  /* a storage setting: also read as WALG_NAME and WALE_NAME */
#define F_WALE (1u << 2)   /* a WALG_ name also read as WALE_ (WAL-E's prefixes) */
#define F_EXT (1u << 3)	   /* a walc extension, not a WAL-G setting */
#define F_RAW (1u << 4)	   /* may hold any character (key material, JSON) */
/* A gpg key id: refused alone; beside an OpenPGP key ignored with a warning, as WAL-G ignores it */
#define F_KEY_ID (1u << 5)
/*
 * A storage's own setting: a WALG_FAILOVER_STORAGES entry or a copy --from/--to file sets it
 * for that storage alone (config_for_storage); unset there, the main configuration's counts.
 */
#define F_STORE (1u << 6)
/* Where a storage is (a prefix): taken from that entry or file only, never inherited. */
#define F_WHERE (1u << 7)
#define NO_FIELD ((size_t)-1) /* read by a library from the environment (libpq's PG*) */

typedef struct config_var {
	const char *name;
	var_kind kind;
	const char *def;	 /* as text, parsed like a value (NULL: unset); V_REFUSED: the value
						  * that means "off" and is accepted */
	long min, max;		 /* V_INT */
	const char *choices; /* V_CHOICE */
	unsigned flags;
	size_t off;			 /* offsetof(config, field), or NO_FIELD */
	const char *alt;	 /* another name, read when this one is unset */
	const char *help;	 /* what it means; V_REFUSED: why, and what walc supports instead */
} config_var;

extern const config_var config_vars[];
extern const size_t config_nvars;

#endif
