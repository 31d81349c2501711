/* http: GET/HEAD over libcurl, loaded at run time. See http.h. */
#include "io/http.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#define HTTP_DEFAULT_MAX_BODY ((size_t)16 << 20)

/* ------------------------------------------------------------------------------------ */
/* libcurl, loaded on first use                                                         */
/* ------------------------------------------------------------------------------------ */

/* The functions used, typed as curl.h declares them. */
struct curl_api {
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	bool ok;
	char why[BG_ERR_MSG]; /* why it could not be loaded */
};

/* Loaded once per process and kept (like the CUDA plugin, gpu/cuda_loader.c): written
 * only inside pthread_once, read-only after. */
static struct curl_api curl;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_load(void)
{
	/* the OpenSSL flavour first (Debian's libcurl4), then the GnuTLS one: same ABI */
	static const char *const names[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so"};
	void *h = NULL;
	for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(curl.why, sizeof curl.why,
			 "downloads need libcurl, and libcurl.so.4 was not found (install libcurl4)");
		return;
	}
	CURLcode (*global_init)(long) = (CURLcode(*)(long))dlsym(h, "curl_global_init");
#define SYM(field, name)                                                                           \
	*(void **)&curl.field = dlsym(h, name);                                                    \
	if (!curl.field) {                                                                         \
		snprintf(curl.why, sizeof curl.why, "libcurl lacks %s", name);                    \
		return;                                                                            \
	}
	SYM(easy_init, "curl_easy_init");
	SYM(easy_setopt, "curl_easy_setopt");
	SYM(easy_perform, "curl_easy_perform");
	SYM(easy_getinfo, "curl_easy_getinfo");
	SYM(easy_cleanup, "curl_easy_cleanup");
	SYM(easy_strerror, "curl_easy_strerror");
	SYM(slist_append, "curl_slist_append");
	SYM(slist_free_all, "curl_slist_free_all");
#undef SYM
	if (!global_init || global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(curl.why, sizeof curl.why, "libcurl failed to initialize");
		return;
	}
	curl.ok = true;
}

/* ------------------------------------------------------------------------------------ */
/* A request                                                                            */
/* ------------------------------------------------------------------------------------ */

struct xfer {
	CURL *curl;
	const struct http_request *req;
	struct http_response *resp;
	size_t max_body;
	size_t cap;
	bool too_big;
	bool write_failed;
	int n_status_lines; /* responses seen (one per redirect hop) */
	bool started;	    /* the first body byte went to the sink */
	bool restarted;	    /* a Range request answered 200: the sink was emptied first */
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;
	if (x->req->sink) {
		long st = 0;
		curl.easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &st);
		if (st != 200 && st != 206)
			return len; /* an error page: the caller reads the status, not this */
		if (!x->started) {
			x->started = true;
			if (x->req->range_from > 0 && st == 200) {
				/* the server ignored the Range: start the file over */
				if (fflush(x->req->sink) != 0 ||
				    ftruncate(fileno(x->req->sink), 0) != 0 ||
				    fseek(x->req->sink, 0, SEEK_SET) != 0) {
					x->write_failed = true;
					return 0;
				}
				x->restarted = true;
			}
		}
		if (fwrite(p, 1, len, x->req->sink) != len) {
			x->write_failed = true;
			return 0;
		}
		x->resp->received += len;
		return len;
	}
	if (x->resp->body_len + len > x->max_body) {
		x->too_big = true;
		return 0;
	}
	if (x->resp->body_len + len + 1 > x->cap) {
		size_t cap = x->cap ? x->cap : 4096;
		while (cap < x->resp->body_len + len + 1)
			cap *= 2;
		char *b = realloc(x->resp->body, cap);
		if (!b) {
			x->too_big = true;
			return 0;
		}
		x->resp->body = b;
		x->cap = cap;
	}
	memcpy(x->resp->body + x->resp->body_len, p, len);
	x->resp->body_len += len;
	x->resp->body[x->resp->body_len] = '\0';
	x->resp->received += len;
	return len;
}

/* Copies the value of header line "Name: value\r\n" into dst when name matches and dst
 * is still empty (the first hop's value wins: the hub's, not the storage's). */
static void header_value(const char *line, size_t len, const char *name, char *dst, size_t cap)
{
	size_t nl = strlen(name);
	if (dst[0] || len <= nl + 1 || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
		return;
	const char *v = line + nl + 1, *end = line + len;
	while (v < end && (*v == ' ' || *v == '\t' || *v == '"'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '"'))
		end--;
	size_t n = (size_t)(end - v);
	if (n >= cap)
		return;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* a new response (redirect hop): its status */
		const char *sp = memchr(p, ' ', len);
		if (sp && x->n_status_lines++ == 0)
			x->resp->first_status = strtol(sp + 1, NULL, 10);
	}
	header_value(p, len, "X-Repo-Commit", x->resp->repo_commit, sizeof x->resp->repo_commit);
	header_value(p, len, "X-Linked-Etag", x->resp->linked_etag, sizeof x->resp->linked_etag);
	return len;
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)ultotal;
	(void)ulnow;
	struct xfer *x = arg;
	uint64_t off = x->restarted ? 0 : x->req->range_from;
	if (x->req->progress && dlnow > 0)
		x->req->progress(x->req->progress_arg, off + (uint64_t)dlnow,
				 dltotal > 0 ? off + (uint64_t)dltotal : 0);
	return 0;
}

enum bg_status http_perform(const struct http_request *req, struct http_response *resp,
			    struct bg_err *err)
{
	memset(resp, 0, sizeof *resp);
	pthread_once(&curl_once, curl_load);
	if (!curl.ok)
		return bg_fail(err, BG_ERR_UNSUPPORTED, "%s", curl.why);
	CURL *c = curl.easy_init();
	if (!c)
		return bg_fail(err, BG_ERR_NOMEM, "cannot start an HTTP client (curl_easy_init)");
	struct xfer x = {.curl = c, .req = req, .resp = resp,
			 .max_body = req->max_body ? req->max_body : HTTP_DEFAULT_MAX_BODY};
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	char auth[4096];
	if (req->token && req->token[0]) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", req->token);
		hdrs = curl.slist_append(hdrs, auth);
	}
	char range[64];
	if (req->sink && req->range_from > 0) {
		snprintf(range, sizeof range, "%llu-", (unsigned long long)req->range_from);
		curl.easy_setopt(c, CURLOPT_RANGE, range);
	}
	curl.easy_setopt(c, CURLOPT_URL, req->url);
	curl.easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl.easy_setopt(c, CURLOPT_USERAGENT, "batchgen");
	curl.easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl.easy_setopt(c, CURLOPT_FOLLOWLOCATION, req->head ? 0L : 1L);
	curl.easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
	curl.easy_setopt(c, CURLOPT_NOBODY, req->head ? 1L : 0L);
	curl.easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	/* a stalled transfer (under 1 byte/s for a minute) is a failure, not a hang */
	curl.easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl.easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	curl.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl.easy_setopt(c, CURLOPT_WRITEDATA, &x);
	curl.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl.easy_setopt(c, CURLOPT_HEADERDATA, &x);
	curl.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl.easy_setopt(c, CURLOPT_XFERINFODATA, &x);
	curl.easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	CURLcode rc = curl.easy_perform(c);
	curl.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	curl.easy_cleanup(c);
	curl.slist_free_all(hdrs);
	if (rc == CURLE_OK)
		return BG_OK;
	uint64_t got = resp->received;
	http_response_free(resp);
	resp->received = got;
	if (x.too_big)
		return bg_fail(err, BG_ERR_IO, "%s: the response is larger than %zu bytes",
			       req->url, x.max_body);
	if (x.write_failed)
		return bg_fail(err, BG_ERR_IO, "%s: cannot write the download (disk full?)",
			       req->url);
	return bg_fail(err, BG_ERR_IO, "%s: %s", req->url,
		       errbuf[0] ? errbuf : curl.easy_strerror(rc));
}

void http_response_free(struct http_response *resp)
{
	if (!resp)
		return;
	free(resp->body);
	memset(resp, 0, sizeof *resp);
}

bool http_escape(const char *s, bool keep_slash, char *dst, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t k = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		bool keep = isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~' ||
			    (keep_slash && *p == '/');
		if (k + (keep ? 1 : 3) >= cap)
			return false;
		if (keep) {
			dst[k++] = (char)*p;
		} else {
			dst[k++] = '%';
			dst[k++] = hex[*p >> 4];
			dst[k++] = hex[*p & 15];
		}
	}
	if (k >= cap)
		return false;
	dst[k] = '\0';
	return true;
}
