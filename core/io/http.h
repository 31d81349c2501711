/* http: the few HTTP requests the hub client makes, over libcurl.
 *
 * libcurl (libcurl.so.4, Debian's libcurl4; curl.h from libcurl4-openssl-dev at build
 * time) is loaded with dlopen on the first request, as the CUDA backend is: the binary
 * links no network library, starts and runs everything else where libcurl is absent
 * (a bare GPU machine), and there a request is BG_ERR_UNSUPPORTED saying what to install.
 *
 * A request is one GET (or HEAD) of a URL, redirects followed (the hub answers a file's
 * URL with a redirect to its storage), with an optional bearer token. libcurl drops the
 * Authorization header when a redirect leaves the original host, so a token is never sent
 * to the storage servers. Bodies go either into memory (bounded) or appended to an open
 * file (downloads, with a Range request to resume one).
 *
 * Failures: a transport failure (no route, refused, DNS, TLS, a connection cut before the
 * body was complete, a stall) is BG_ERR_IO with one sentence naming the URL and curl's
 * reason; an HTTP status is not an error here: the caller reads it from the response and
 * says what it means (404: no such repository, 401/403: token...).
 */
#ifndef BG_HTTP_H
#define BG_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"

/* Called while a body arrives: done counts the bytes of the whole file so far (the
 * resume offset included), total is the whole file's size or 0 when unknown. */
typedef void (*http_progress_fn)(void *arg, uint64_t done, uint64_t total);

struct http_request {
	const char *url;
	const char *token;     /* sent as "Authorization: Bearer TOKEN"; NULL = none */
	bool head;	       /* HEAD instead of GET: headers only, no redirect followed */
	FILE *sink;	       /* a 200/206 body is appended here (other statuses' bodies are
				* dropped); NULL = into http_response.body */
	uint64_t range_from;   /* with sink: "Range: bytes=N-" when N > 0; a server that
				* answers 200 instead of 206 has the sink emptied first, so
				* the sink always ends up holding the file from its start */
	size_t max_body;       /* without sink: a longer body is BG_ERR_IO (0 = 16 MiB) */
	http_progress_fn progress; /* NULL = none */
	void *progress_arg;
};

struct http_response {
	long status;	     /* the final HTTP status (after redirects) */
	long first_status;   /* the first response's status (before any redirect) */
	char *body;	     /* malloc'd, NUL-terminated; NULL with a sink */
	size_t body_len;
	uint64_t received;   /* body bytes written (to sink or body) */
	char repo_commit[65]; /* the first X-Repo-Commit header seen, "" if none */
	char linked_etag[80]; /* the first X-Linked-Etag (quotes removed), "" if none */
};

/* Performs req. On BG_OK resp holds the status and the body (free with
 * http_response_free), whatever the status. On failure resp is freed and zeroed
 * except received (how far a download got), and err says why. */
enum bg_status http_perform(const struct http_request *req, struct http_response *resp,
			    struct bg_err *err);

void http_response_free(struct http_response *resp); /* NULL-safe, idempotent */

/* Percent-encodes s (RFC 3986 unreserved characters kept; '/' kept when keep_slash)
 * into dst[cap]. Returns false when it does not fit. */
bool http_escape(const char *s, bool keep_slash, char *dst, size_t cap);

#endif
