/*
 * catalog-internal: the record of the process behind a claim or retention's intent, and
 * whether that process is known to be gone; reading root objects that may be absent.
 */
#ifndef WALC_INTERNAL_CATALOG_CATALOG_IMPL_H
#define WALC_INTERNAL_CATALOG_CATALOG_IMPL_H

#include "internal/catalog/catalog.h"

/* Where a process ran: strings borrowed (NULL when the record lacks them). */
typedef struct proc_rec {
	const char *hostname;
	long pid;
	const char *boot_id; /* /proc/sys/kernel/random/boot_id */
	const char *pid_ns;	 /* the link /proc/self/ns/pid */
} proc_rec;

/* This process (strings kept for the process's life; "" when unknown). */
proc_rec proc_here(void);
/* Adds p's members to a JSON object (hostname, pid, boot_id, pid_namespace). */
void proc_rec_json(const proc_rec *p, json_t *o);
/* p's members from such an object (borrowed from it). */
proc_rec proc_rec_from_json(const json_t *o);
/*
 * Whether p ran on this machine since it booted, in our pid namespace, and its pid is no
 * longer there: a process that died (killed, crashed) without clearing its record.
 */
bool proc_gone(const proc_rec *p);

/* catalog_read_json of a root object that may be absent: then E_OK and *out NULL. */
err_code catalog_read_optional(repo *r, const char *key, json_t **out);

#endif
