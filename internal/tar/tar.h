/*
 * tar: a streaming reader (a sink that calls back per member) and a streaming writer for the
 * POSIX tar streams WAL-G stores as backup partitions (Go archive/tar: USTAR, PAX, GNU).
 */
#ifndef WALC_INTERNAL_TAR_TAR_H
#define WALC_INTERNAL_TAR_TAR_H

#include "internal/core/core.h"

#define TAR_BLOCK 512
#define TAR_NAME_MAX 4096					/* longest name or link target accepted or written */
#define TAR_EXT_MAX (1u << 20)				/* largest PAX / GNU long-name record read */
#define TAR_SIZE_MAX ((uint64_t)1 << 40)	/* largest member size read */

typedef enum tar_type { TAR_FILE, TAR_DIR, TAR_SYMLINK, TAR_HARDLINK, TAR_OTHER } tar_type;

typedef struct tar_entry {
	const char *name;	  /* as stored, e.g. "/base/1/1259" or "backup_label" */
	const char *linkname; /* symlink/hardlink target, else NULL or "" */
	tar_type type;
	/*
	 * Content bytes that follow. 0 for directories, links, devices and fifos (header-only, as
	 * Go reads them); TAR_OTHER members of unknown type may carry content, delivered as is.
	 */
	uint64_t size;
	uint32_t mode; /* permission bits (07777) */
	int64_t mtime; /* seconds */
	uint32_t uid, gid;
} tar_entry;

/*
 * Reader: a sink that parses a tar stream and calls back per member. Any callback may be NULL.
 * The entry and its strings are valid only during the entry callback.
 */
typedef struct tar_handler {
	err_code (*entry)(void *ctx, const tar_entry *e);		  /* header parsed */
	err_code (*data)(void *ctx, const void *buf, size_t len); /* content bytes, in order */
	err_code (*entry_end)(void *ctx);						  /* all content delivered */
} tar_handler;

/*
 * Borrows h and ctx; next is NULL. Errors are E_CORRUPT for a malformed stream ("tar: ...");
 * a handler's error is returned unchanged. After any error every later write returns it again.
 * finish() fails with "tar: truncated" unless the end-of-archive block was seen.
 */
sink *tar_reader_new(const tar_handler *h, void *ctx);
/* As tar_reader_new, for a run of whole members cut out of an archive (a ranged read): it
 * may also end between two members, without the end-of-archive block. */
sink *tar_reader_new_partial(const tar_handler *h, void *ctx);

/* Writer: builds a tar stream into next (owned). */
typedef struct tar_writer tar_writer;

tar_writer *tar_writer_new(sink *next);
/*
 * Header(s) for one member: USTAR, plus a PAX header when a name, link target or number does
 * not fit. TAR_FILE uses e->size; other types are written header-only (size 0). TAR_OTHER and
 * names or targets longer than TAR_NAME_MAX are refused (E_FAIL). Borrows e.
 */
err_code tar_writer_begin(tar_writer *w, const tar_entry *e);
/* Content; never more than e->size in total (E_FAIL). */
err_code tar_writer_write(tar_writer *w, const void *buf, size_t len);
/* E_FAIL unless exactly e->size bytes were written; pads to 512. */
err_code tar_writer_end(tar_writer *w);
/* Between members: passes what is gathered on to next (to cut the stream below there). */
err_code tar_writer_flush(tar_writer *w);
/* Two zero blocks, flush, then sink_finish(next). */
err_code tar_writer_finish(tar_writer *w);
/* Bytes of tar stream produced so far, including any still buffered. */
uint64_t tar_writer_offset(const tar_writer *w);
/* Frees next too. NULL is a no-op. */
void tar_writer_free(tar_writer *w);

#endif
