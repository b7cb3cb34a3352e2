/*
 * storage-internal: one transfer of the HTTP core. httpxfer.c sends one attempt of a request
 * (through libcurl, or through the test hook's answer fed to the same callbacks); http.c
 * decides retries, backoff, refreshes and Range resumes around it.
 */
#ifndef WALC_INTERNAL_STORAGE_HTTP_IMPL_H
#define WALC_INTERNAL_STORAGE_HTTP_IMPL_H

#include <curl/curl.h>

#include "internal/storage/http/http.h"

typedef struct xfer {
	http_request *req;
	http_response *resp;
	size_t up_off;			/* request body bytes sent */
	uint64_t delivered;		/* response bytes pushed into req->into, over all attempts */
	uint64_t limit;			/* at most this many (the asked range's length), or UINT64_MAX */
	uint64_t skip;			/* bytes to drop (a server that ignored our Range) */
	uint64_t range_from;	/* this attempt asked for bytes range_from- */
	bool ranged;
	bool to_sink;			/* this answer's body goes to req->into */
	bool checked;			/* to_sink decided for this answer */
	err_code sink_rc;		/* error of req->into, which stops the transfer */
	err_code hook_rc;		/* error of the test hook */
	bool too_big;
	bool bad_range;
	uint64_t cr_start;		/* Content-Range of this answer */
	bool have_cr;
	/* stall detection: no byte moved either way for low_speed_time seconds */
	curl_off_t moved;
	struct timespec last_move;
	long stall_limit;
	bool stalled;
} xfer;

/* The request's cancel flag or a process-wide cancel (a signal). */
bool http_cancelled(const atomic_bool *cancel);
/* As http_cancelled for req, whose past_cancel leaves out the process-wide cancel. */
bool http_stop_asked(const http_request *req);

/*
 * One attempt of x->req at url: the curl code; the answer is in x->resp (status, headers,
 * body when not streamed to the sink). errbuf holds CURL_ERROR_SIZE bytes.
 */
CURLcode http_attempt(http_client *h, xfer *x, const http_kvs *hdrs, const char *url,
					  char *errbuf);

#endif
