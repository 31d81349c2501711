/* hub: hf: names, the Hugging Face hub cache, downloads. See hub.h. */
#include "io/hub.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io/http.h"
#include "io/sha256.h"

#define HUB_PATH_MAX	 4096
#define HUB_MAX_FILES	 100000 /* entries of a listing or a snapshot considered */
#define HUB_MAX_DEPTH	 8	/* folder levels walked in a snapshot */
#define HUB_TRIES	 3	/* download attempts in one call while each makes progress */
#define HUB_LISTING_MAX	 ((size_t)64 << 20)

/* snprintf that says whether the text fit (the callers of path-building calls check it;
 * message-building calls may truncate) */
static bool fmt(char *dst, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static bool fmt(char *dst, size_t cap, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vsnprintf(dst, cap, f, ap);
	va_end(ap);
	return n >= 0 && (size_t)n < cap;
}

/* ------------------------------------------------------------------------------------ */
/* Options from the environment                                                         */
/* ------------------------------------------------------------------------------------ */

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && v[0] ? v : NULL;
}

/* Reads the first line of a small file into dst[cap] (trimmed); false if absent. */
static bool read_line_file(const char *path, char *dst, size_t cap)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fgets(dst, (int)cap, f) != NULL;
	fclose(f);
	if (!ok)
		return false;
	size_t n = strlen(dst);
	while (n > 0 && isspace((unsigned char)dst[n - 1]))
		dst[--n] = '\0';
	return n > 0;
}

void hub_opts_from_env(struct hub_opts *o)
{
	memset(o, 0, sizeof *o);
	const char *ep = env("HF_ENDPOINT");
	snprintf(o->endpoint, sizeof o->endpoint, "%s", ep ? ep : HUB_DEFAULT_ENDPOINT);
	size_t n = strlen(o->endpoint);
	while (n > 0 && o->endpoint[n - 1] == '/')
		o->endpoint[--n] = '\0';

	const char *home = env("HOME");
	const char *hf_home = env("HF_HOME");
	const char *xdg = env("XDG_CACHE_HOME");
	char hf_home_buf[1024];
	if (!hf_home) {
		if (xdg)
			snprintf(hf_home_buf, sizeof hf_home_buf, "%s/huggingface", xdg);
		else
			snprintf(hf_home_buf, sizeof hf_home_buf, "%s/.cache/huggingface",
				 home ? home : ".");
		hf_home = hf_home_buf;
	}
	const char *cache = env("HF_HUB_CACHE");
	if (cache)
		snprintf(o->cache_dir, sizeof o->cache_dir, "%s", cache);
	else
		fmt(o->cache_dir, sizeof o->cache_dir, "%s/hub", hf_home);

	const char *tok = env("HF_TOKEN");
	if (tok) {
		snprintf(o->token, sizeof o->token, "%s", tok);
	} else {
		char p[1100];
		const char *tp = env("HF_TOKEN_PATH");
		snprintf(p, sizeof p, "%s", tp ? tp : "");
		if (!tp)
			snprintf(p, sizeof p, "%s/token", hf_home);
		if (!read_line_file(p, o->token, sizeof o->token))
			o->token[0] = '\0';
	}

	const char *off = env("HF_HUB_OFFLINE");
	o->offline = off && (strcmp(off, "1") == 0 || strcasecmp(off, "true") == 0 ||
			     strcasecmp(off, "yes") == 0 || strcasecmp(off, "on") == 0);
}

/* ------------------------------------------------------------------------------------ */
/* Names                                                                                */
/* ------------------------------------------------------------------------------------ */

bool hub_is_spec(const char *spec)
{
	return spec && strncmp(spec, "hf:", 3) == 0;
}

/* [A-Za-z0-9._-]{1,cap-1}, not "." or "..": a safe single path component */
static bool word_ok(const char *s, size_t n, size_t cap)
{
	if (n == 0 || n >= cap)
		return false;
	if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '-' && s[i] != '_')
			return false;
	return true;
}

/* A relative path whose components are non-empty, not "." or "..", without '\\' or
 * control characters. */
static bool rel_path_ok(const char *p)
{
	if (!p[0] || p[0] == '/' || strlen(p) >= 512)
		return false;
	const char *c = p;
	while (*c) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)c[i] < 0x20 || c[i] == '\\' || c[i] == 0x7f)
				return false;
		c += n;
		if (*c == '/')
			c++;
		if (e && !*c)
			return false; /* trailing slash */
	}
	return true;
}

static bool ends_with_gguf(const char *p)
{
	size_t n = strlen(p);
	return n > 5 && strcasecmp(p + n - 5, ".gguf") == 0;
}

static void copy_n(char *dst, const char *src, size_t n)
{
	memcpy(dst, src, n);
	dst[n] = '\0';
}

enum bg_status hub_parse(const char *spec, struct hub_ref *ref, struct bg_err *err)
{
	memset(ref, 0, sizeof *ref);
	if (!hub_is_spec(spec))
		return bg_fail(err, BG_ERR_INVALID, "%s: not an hf: name", spec ? spec : "(null)");
	const char *form = "expected hf:OWNER/REPO[:TAG|/FILE.gguf][@REVISION]";
	const char *body = spec + 3;
	const char *at = strrchr(body, '@');
	size_t blen = at ? (size_t)(at - body) : strlen(body);
	if (at) {
		if (!word_ok(at + 1, strlen(at + 1), sizeof ref->revision))
			return bg_fail(err, BG_ERR_INVALID,
				       "%s: bad revision '%s' (letters, digits, '.', '-', '_')",
				       spec, at + 1);
		snprintf(ref->revision, sizeof ref->revision, "%s", at + 1);
	} else {
		snprintf(ref->revision, sizeof ref->revision, "main");
	}
	const char *slash = memchr(body, '/', blen);
	if (!slash)
		return bg_fail(err, BG_ERR_INVALID, "%s: %s", spec, form);
	size_t olen = (size_t)(slash - body);
	if (!word_ok(body, olen, sizeof ref->owner))
		return bg_fail(err, BG_ERR_INVALID, "%s: bad owner (%s)", spec, form);
	copy_n(ref->owner, body, olen);
	const char *r = slash + 1, *end = body + blen;
	size_t rlen = 0;
	while (r + rlen < end && r[rlen] != ':' && r[rlen] != '/')
		rlen++;
	if (!word_ok(r, rlen, sizeof ref->repo))
		return bg_fail(err, BG_ERR_INVALID, "%s: bad repository name (%s)", spec, form);
	copy_n(ref->repo, r, rlen);
	const char *rest = r + rlen;
	size_t restlen = (size_t)(end - rest);
	if (restlen == 0) {
		snprintf(ref->tag, sizeof ref->tag, "%s", HUB_DEFAULT_TAG);
	} else if (rest[0] == ':') {
		if (!word_ok(rest + 1, restlen - 1, sizeof ref->tag))
			return bg_fail(err, BG_ERR_INVALID, "%s: bad tag (%s)", spec, form);
		copy_n(ref->tag, rest + 1, restlen - 1);
	} else {
		if (restlen - 1 >= sizeof ref->file)
			return bg_fail(err, BG_ERR_INVALID, "%s: file path too long", spec);
		copy_n(ref->file, rest + 1, restlen - 1);
		if (!rel_path_ok(ref->file) || !ends_with_gguf(ref->file))
			return bg_fail(err, BG_ERR_INVALID,
				       "%s: bad file '%s' (a relative path ending in .gguf)", spec,
				       ref->file);
	}
	return BG_OK;
}

/* "hf:OWNER/REPO:TAG@REV" as the user would write it, for messages */
static const char *ref_name(const struct hub_ref *ref, char *buf, size_t cap)
{
	bool rev = strcmp(ref->revision, "main") != 0;
	fmt(buf, cap, "hf:%s/%s%s%s%s%s", ref->owner, ref->repo, ref->file[0] ? "/" : ":",
		 ref->file[0] ? ref->file : ref->tag, rev ? "@" : "", rev ? ref->revision : "");
	return buf;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

bool hub_tag_matches(const char *path, const char *tag)
{
	const char *b = base_name(path);
	if (!ends_with_gguf(b) || strncasecmp(b, "mmproj", 6) == 0)
		return false;
	size_t n = strlen(b) - 5, t = strlen(tag);
	if (t == 0 || t > n)
		return false;
	for (size_t i = 0; i + t <= n; i++) {
		if (strncasecmp(b + i, tag, t) != 0)
			continue;
		bool before = i == 0 || !isalnum((unsigned char)b[i - 1]);
		char next = b[i + t];
		bool after = i + t == n || next == '.' || next == '-';
		if (before && after)
			return true;
	}
	return false;
}

/* A split GGUF's part: NAME-00001-of-00003.gguf */
static bool is_split(const char *path)
{
	const char *b = base_name(path);
	size_t n = strlen(b);
	if (n < 5 + 15)
		return false;
	const char *s = b + n - 5 - 15; /* "-00001-of-00003" */
	for (int i = 0; i < 15; i++) {
		char c = s[i];
		bool ok = (i == 0 || i == 6 || i == 9)	? c == '-'
			  : (i == 7)			? c == 'o'
			  : (i == 8)			? c == 'f'
							: isdigit((unsigned char)c) != 0;
		if (!ok)
			return false;
	}
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Index of the file ref names among paths[n] (sorted), or -1. */
static long pick(const struct hub_ref *ref, char **paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (ref->file[0] ? strcmp(paths[i], ref->file) == 0
				 : hub_tag_matches(paths[i], ref->tag))
			return (long)i;
	return -1;
}

static enum bg_status check_split(const struct hub_ref *ref, const char *path, struct bg_err *err)
{
	char nm[800];
	if (is_split(path))
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "%s: %s is one part of a split GGUF model, which batchgen cannot "
			       "load (merge the parts with llama.cpp's gguf-split --merge)",
			       ref_name(ref, nm, sizeof nm), path);
	return BG_OK;
}

/* The quantization-like words of a file name (Q4_K_M, IQ3_XS, F16, BF16, ...). */
static bool quant_word(const char *w, size_t n)
{
	char u[32];
	if (n == 0 || n >= sizeof u)
		return false;
	for (size_t i = 0; i < n; i++)
		u[i] = (char)toupper((unsigned char)w[i]);
	u[n] = '\0';
	if (!strcmp(u, "F16") || !strcmp(u, "F32") || !strcmp(u, "BF16"))
		return true;
	size_t i = u[0] == 'I' ? 1 : 0;
	if (u[i] != 'Q' || !isdigit((unsigned char)u[i + 1]))
		return false;
	for (i += 2; i < n; i++)
		if (!isalnum((unsigned char)u[i]) && u[i] != '_')
			return false;
	return true;
}

/* Writes the tags found among paths[n] (or, when none, the .gguf file names) into
 * dst[cap] as "A, B, C". */
static void list_tags(char **paths, size_t n, char *dst, size_t cap)
{
	size_t k = 0;
	dst[0] = '\0';
	for (int pass = 0; pass < 2 && k == 0; pass++) {
		for (size_t i = 0; i < n; i++) {
			const char *b = base_name(paths[i]);
			if (!ends_with_gguf(b) || strncasecmp(b, "mmproj", 6) == 0)
				continue;
			char word[64] = "";
			if (pass == 0) {
				size_t len = strlen(b) - 5;
				for (size_t s = 0; s < len;) {
					size_t e = s;
					while (e < len && b[e] != '-' && b[e] != '.')
						e++;
					if (quant_word(b + s, e - s) && e - s < sizeof word)
						copy_n(word, b + s, e - s);
					s = e + 1;
				}
				if (!word[0])
					continue;
			} else {
				snprintf(word, sizeof word, "%s", b);
			}
			/* unique, case-insensitively */
			bool seen = false;
			for (const char *p = dst; *p && !seen;) {
				size_t m = strcspn(p, ",");
				seen = m == strlen(word) && strncasecmp(p, word, m) == 0;
				p += m;
				while (*p == ',' || *p == ' ')
					p++;
			}
			if (seen)
				continue;
			int w = snprintf(dst + k, cap - k, "%s%s", k ? ", " : "", word);
			if (w < 0 || (size_t)w >= cap - k) {
				dst[k] = '\0';
				return;
			}
			k += (size_t)w;
		}
	}
	if (k == 0)
		snprintf(dst, cap, "no .gguf files");
}

/* ------------------------------------------------------------------------------------ */
/* The cache                                                                            */
/* ------------------------------------------------------------------------------------ */

static bool is_hex(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

static void repo_dir(const struct hub_ref *ref, const struct hub_opts *o, char *dst, size_t cap)
{
	snprintf(dst, cap, "%s/models--%s--%s", o->cache_dir, ref->owner, ref->repo);
}

/* The commit the revision names in the cache: itself when it is one, else refs/REV. */
static bool cached_commit(const struct hub_ref *ref, const char *rdir, char *commit, size_t cap)
{
	if (is_hex(ref->revision, 40)) {
		snprintf(commit, cap, "%s", ref->revision);
		return true;
	}
	char p[HUB_PATH_MAX];
	if (!fmt(p, sizeof p, "%s/refs/%s", rdir, ref->revision))
		return false;
	return read_line_file(p, commit, cap) && word_ok(commit, strlen(commit), cap);
}

struct file_list {
	char **v;
	size_t n, cap;
};

static bool list_add(struct file_list *l, const char *s)
{
	if (l->n >= HUB_MAX_FILES)
		return true; /* a bound, not a failure: the rest is not considered */
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		char **v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return false;
		l->v = v;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strdup(s)))
		return false;
	l->n++;
	return true;
}

static void list_free(struct file_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof *l);
}

/* Adds the .gguf files under root/rel (relative paths) to l. */
static bool walk(const char *root, const char *rel, int depth, struct file_list *l)
{
	char dir[HUB_PATH_MAX];
	snprintf(dir, sizeof dir, "%s%s%s", root, rel[0] ? "/" : "", rel);
	DIR *d = opendir(dir);
	if (!d)
		return true;
	bool ok = true;
	struct dirent *e;
	while (ok && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char sub[HUB_PATH_MAX], full[HUB_PATH_MAX];
		if ((size_t)snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name) >=
		    sizeof sub)
			continue;
		if (!fmt(full, sizeof full, "%s/%s", root, sub))
			continue;
		struct stat st;
		if (stat(full, &st) != 0)
			continue; /* a dangling link: not a usable file */
		if (S_ISDIR(st.st_mode) && depth < HUB_MAX_DEPTH)
			ok = walk(root, sub, depth + 1, l);
		else if (S_ISREG(st.st_mode) && ends_with_gguf(sub))
			ok = list_add(l, sub);
	}
	closedir(d);
	return ok;
}

enum bg_status hub_cache_lookup(const struct hub_ref *ref, const struct hub_opts *o, char *path,
				size_t cap, bool *found, struct bg_err *err)
{
	*found = false;
	char rdir[HUB_PATH_MAX], commit[129], snap[HUB_PATH_MAX];
	repo_dir(ref, o, rdir, sizeof rdir);
	if (!cached_commit(ref, rdir, commit, sizeof commit))
		return BG_OK;
	if (!fmt(snap, sizeof snap, "%s/snapshots/%s", rdir, commit))
		return BG_OK;
	struct file_list l = {0};
	if (ref->file[0]) {
		char p[HUB_PATH_MAX];
		struct stat st;
		if (fmt(p, sizeof p, "%s/%s", snap, ref->file) && stat(p, &st) == 0 && S_ISREG(st.st_mode) && list_add(&l, ref->file) == false)
			return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	} else if (!walk(snap, "", 0, &l)) {
		list_free(&l);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	if (l.n > 1)
		qsort(l.v, l.n, sizeof *l.v, cmp_str);
	long i = pick(ref, l.v, l.n);
	enum bg_status st = BG_OK;
	if (i >= 0) {
		st = check_split(ref, l.v[i], err);
		if (st == BG_OK) {
			if ((size_t)snprintf(path, cap, "%s/%s", snap, l.v[i]) >= cap)
				st = bg_fail(err, BG_ERR_INVALID, "%s/%s: path too long", snap,
					     l.v[i]);
			else
				*found = true;
		}
	}
	list_free(&l);
	return st;
}

/* mkdir -p of dir (an absolute or relative path) */
static bool mkdirs(const char *dir)
{
	char p[HUB_PATH_MAX];
	snprintf(p, sizeof p, "%s", dir);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			return false;
		*s = '/';
	}
	return mkdir(p, 0755) == 0 || errno == EEXIST;
}

/* Writes text into path through a temporary file and a rename. */
static bool write_atomic(const char *path, const char *text)
{
	char tmp[HUB_PATH_MAX + 32];
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return false;
	bool ok = fputs(text, f) >= 0;
	ok = (fclose(f) == 0) && ok;
	if (ok && rename(tmp, path) == 0)
		return true;
	unlink(tmp);
	return false;
}

/* ------------------------------------------------------------------------------------ */
/* sha256                                                                               */
/* ------------------------------------------------------------------------------------ */

enum bg_status hub_sha256_file(const char *path, char hex[65], struct bg_err *err)
{
	hex[0] = '\0';
	FILE *f = fopen(path, "rb");
	if (!f)
		return bg_fail(err, BG_ERR_IO, "%s: %s", path, strerror(errno));
	unsigned char *buf = malloc(1 << 20);
	if (!buf) {
		fclose(f);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	struct sha256 s;
	sha256_init(&s);
	size_t n;
	while ((n = fread(buf, 1, 1 << 20, f)) > 0)
		sha256_update(&s, buf, n);
	enum bg_status st = BG_OK;
	if (ferror(f))
		st = bg_fail(err, BG_ERR_IO, "%s: read error", path);
	else
		sha256_final_hex(&s, hex);
	free(buf);
	fclose(f);
	return st;
}

/* ------------------------------------------------------------------------------------ */
/* The hub: listing and download                                                        */
/* ------------------------------------------------------------------------------------ */

/* What a 401/403/404 or another status means for a request about ref. */
static enum bg_status status_error(const struct hub_ref *ref, const struct hub_opts *o,
				   long status, const char *what, struct bg_err *err)
{
	char nm[800];
	ref_name(ref, nm, sizeof nm);
	if (status == 401 || status == 403) {
		if (o->token[0])
			return bg_fail(err, BG_ERR_IO,
				       "%s: access denied (HTTP %ld) with the token in HF_TOKEN: "
				       "the repository is gated or private and this token may not "
				       "read it (accept its terms on the hub?)",
				       nm, status);
		return bg_fail(err, BG_ERR_IO,
			       "%s: access denied or no such repository (HTTP %ld): a gated or "
			       "private repository needs a token in HF_TOKEN",
			       nm, status);
	}
	if (status == 404)
		return bg_fail(err, BG_ERR_IO, "%s: %s not found on %s (HTTP 404)", nm, what,
			       o->endpoint);
	return bg_fail(err, BG_ERR_IO, "%s: %s: the hub answered HTTP %ld", nm, what, status);
}

struct listing_entry {
	char path[512];
	char sha256[65]; /* the LFS oid, "" for a file not in LFS */
	char oid[65];	 /* the git blob id */
	uint64_t size;
};

/* Reads the tree listing: every file's path into l (sorted later by the caller) and the
 * entry for the chosen one into *e. Untrusted JSON: entries with a bad path or oid are
 * skipped (a bad chosen entry is an error). */
static enum bg_status fetch_listing(const struct hub_ref *ref, const struct hub_opts *o,
				    struct file_list *l, cJSON **json, struct bg_err *err)
{
	char nm[800], rev[400], url[2048];
	ref_name(ref, nm, sizeof nm);
	if (!http_escape(ref->revision, false, rev, sizeof rev))
		return bg_fail(err, BG_ERR_INVALID, "%s: revision too long", nm);
	snprintf(url, sizeof url, "%s/api/models/%s/%s/tree/%s?recursive=true", o->endpoint,
		 ref->owner, ref->repo, rev);
	struct http_request rq = {.url = url, .token = o->token, .max_body = HUB_LISTING_MAX};
	struct http_response rs;
	struct bg_err e = {0};
	if (http_perform(&rq, &rs, &e) != BG_OK)
		return bg_fail(err, BG_ERR_IO,
			       "%s: cannot reach the hub (%s); with no network, --offline uses "
			       "the cache only",
			       nm, e.msg);
	if (rs.status != 200) {
		long s = rs.status;
		http_response_free(&rs);
		char what[300];
		fmt(what, sizeof what, "repository %s/%s or revision '%s'", ref->owner,
			 ref->repo, ref->revision);
		return status_error(ref, o, s, what, err);
	}
	cJSON *j = cJSON_ParseWithLength(rs.body, rs.body_len);
	http_response_free(&rs);
	if (!cJSON_IsArray(j)) {
		cJSON_Delete(j);
		return bg_fail(err, BG_ERR_FORMAT, "%s: the hub's file listing is not a JSON array",
			       nm);
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, j)
	{
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(it, "type");
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "path");
		if (!cJSON_IsString(type) || strcmp(type->valuestring, "file") != 0 ||
		    !cJSON_IsString(p) || !rel_path_ok(p->valuestring))
			continue;
		if (!list_add(l, p->valuestring)) {
			cJSON_Delete(j);
			return bg_fail(err, BG_ERR_NOMEM, "out of memory");
		}
	}
	*json = j;
	return BG_OK;
}

static bool json_u64(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9.0e15)
		return false;
	*out = (uint64_t)v->valuedouble;
	return true;
}

/* The listing's entry for path. */
static enum bg_status listing_entry(const struct hub_ref *ref, const cJSON *j, const char *path,
				    struct listing_entry *e, struct bg_err *err)
{
	char nm[800];
	memset(e, 0, sizeof *e);
	const cJSON *it;
	cJSON_ArrayForEach(it, j)
	{
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "path");
		if (!cJSON_IsString(p) || strcmp(p->valuestring, path) != 0)
			continue;
		snprintf(e->path, sizeof e->path, "%s", path);
		const cJSON *oid = cJSON_GetObjectItemCaseSensitive(it, "oid");
		if (cJSON_IsString(oid) && is_hex(oid->valuestring, 40))
			snprintf(e->oid, sizeof e->oid, "%s", oid->valuestring);
		json_u64(cJSON_GetObjectItemCaseSensitive(it, "size"), &e->size);
		const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(it, "lfs");
		if (cJSON_IsObject(lfs)) {
			const cJSON *lo = cJSON_GetObjectItemCaseSensitive(lfs, "oid");
			if (!cJSON_IsString(lo) || !is_hex(lo->valuestring, 64))
				return bg_fail(err, BG_ERR_FORMAT,
					       "%s: the listing gives %s a malformed LFS sha256",
					       ref_name(ref, nm, sizeof nm), path);
			for (int i = 0; i < 64; i++)
				e->sha256[i] = (char)tolower((unsigned char)lo->valuestring[i]);
			json_u64(cJSON_GetObjectItemCaseSensitive(lfs, "size"), &e->size);
		}
		if (!e->sha256[0] && !e->oid[0])
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s: the listing gives %s neither an LFS sha256 nor an oid",
				       ref_name(ref, nm, sizeof nm), path);
		return BG_OK;
	}
	return bg_fail(err, BG_ERR_FORMAT, "%s: %s is not in the listing",
		       ref_name(ref, nm, sizeof nm), path);
}

struct progress_ctx {
	const struct hub_opts *o;
	const char *file;
};

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress_ctx *p = arg;
	p->o->progress(p->o->progress_arg, p->file, done, total);
}

/* Downloads e into blob (through blob.incomplete), checks it, renames it into place.
 * *commit receives the X-Repo-Commit of the hub's answer when there is one. */
static enum bg_status download(const struct hub_ref *ref, const struct hub_opts *o,
			       const struct listing_entry *e, const char *blob, char *commit,
			       size_t commit_cap, struct bg_err *err)
{
	char nm[800], part[HUB_PATH_MAX + 16], rev[400], file[1600], url[4096];
	ref_name(ref, nm, sizeof nm);
	snprintf(part, sizeof part, "%s.incomplete", blob);
	if (!http_escape(ref->revision, false, rev, sizeof rev) ||
	    !http_escape(e->path, true, file, sizeof file))
		return bg_fail(err, BG_ERR_INVALID, "%s: name too long", nm);
	snprintf(url, sizeof url, "%s/%s/%s/resolve/%s/%s", o->endpoint, ref->owner, ref->repo,
		 rev, file);
	FILE *f = fopen(part, "ab");
	if (!f)
		return bg_fail(err, BG_ERR_IO, "%s: %s", part, strerror(errno));
	struct progress_ctx pc = {o, e->path};
	enum bg_status st = BG_OK;
	struct stat sb;
	for (int attempt = 0;; attempt++) {
		if (fflush(f) != 0 || fstat(fileno(f), &sb) != 0) {
			st = bg_fail(err, BG_ERR_IO, "%s: %s", part, strerror(errno));
			break;
		}
		uint64_t have = (uint64_t)sb.st_size;
		if (e->size && have > e->size) { /* not a prefix of this file: start over */
			if (ftruncate(fileno(f), 0) != 0) {
				st = bg_fail(err, BG_ERR_IO, "%s: %s", part, strerror(errno));
				break;
			}
			have = 0;
		}
		if (e->size && have == e->size)
			break; /* complete (an earlier run got it all): verify below */
		struct http_request rq = {.url = url,
					  .token = o->token,
					  .sink = f,
					  .range_from = have,
					  .progress = o->progress ? on_progress : NULL,
					  .progress_arg = &pc};
		struct http_response rs;
		struct bg_err he = {0};
		enum bg_status hs = http_perform(&rq, &rs, &he);
		if (hs == BG_OK) {
			if (!commit[0] && rs.repo_commit[0])
				snprintf(commit, commit_cap, "%s", rs.repo_commit);
			long s = rs.status;
			http_response_free(&rs);
			if (s == 416 && have > 0 && attempt + 1 < HUB_TRIES) {
				/* the range lies past the end: what is there is not this file */
				if (ftruncate(fileno(f), 0) != 0) {
					st = bg_fail(err, BG_ERR_IO, "%s: %s", part,
						     strerror(errno));
					break;
				}
				continue;
			}
			if (s != 200 && s != 206) {
				st = status_error(ref, o, s, e->path, err);
				break;
			}
			if (fflush(f) != 0 || fstat(fileno(f), &sb) != 0) {
				st = bg_fail(err, BG_ERR_IO, "%s: %s", part, strerror(errno));
				break;
			}
			if (e->size && (uint64_t)sb.st_size < e->size && attempt + 1 < HUB_TRIES &&
			    (uint64_t)sb.st_size > have)
				continue; /* ended early but made progress: resume */
			break;
		}
		/* a transport failure: resume while attempts make progress */
		if (rs.received > 0 && attempt + 1 < HUB_TRIES)
			continue;
		fflush(f);
		fstat(fileno(f), &sb);
		st = bg_fail(err, BG_ERR_IO,
			     "%s: download of %s stopped at %llu of %llu bytes (%s); run again to "
			     "resume from %s",
			     nm, e->path, (unsigned long long)sb.st_size,
			     (unsigned long long)e->size, he.msg, part);
		break;
	}
	if (fclose(f) != 0 && st == BG_OK)
		st = bg_fail(err, BG_ERR_IO, "%s: %s", part, strerror(errno));
	if (st != BG_OK)
		return st;
	if (stat(part, &sb) != 0)
		return bg_fail(err, BG_ERR_IO, "%s: %s", part, strerror(errno));
	if (e->size && (uint64_t)sb.st_size != e->size) {
		if ((uint64_t)sb.st_size > e->size)
			unlink(part);
		return bg_fail(err, BG_ERR_IO,
			       "%s: download of %s has %llu bytes, the hub lists %llu%s", nm,
			       e->path, (unsigned long long)sb.st_size,
			       (unsigned long long)e->size,
			       (uint64_t)sb.st_size < e->size ? "; run again to resume" : "");
	}
	if (e->sha256[0]) {
		char got[65];
		st = hub_sha256_file(part, got, err);
		if (st != BG_OK)
			return st;
		if (strcmp(got, e->sha256) != 0) {
			unlink(part);
			return bg_fail(err, BG_ERR_FORMAT,
				       "%s: %s is corrupt: sha256 %s, the hub lists %s (the download "
				       "was deleted; run again)",
				       nm, e->path, got, e->sha256);
		}
	}
	if (rename(part, blob) != 0)
		return bg_fail(err, BG_ERR_IO, "%s: %s", blob, strerror(errno));
	if (o->progress)
		o->progress(o->progress_arg, e->path, (uint64_t)sb.st_size, (uint64_t)sb.st_size);
	return BG_OK;
}

/* The commit the hub resolves the revision to, from a HEAD of the file's URL. */
static void head_commit(const struct hub_ref *ref, const struct hub_opts *o, const char *path,
			char *commit, size_t cap)
{
	char rev[400], file[1600], url[4096];
	if (!http_escape(ref->revision, false, rev, sizeof rev) ||
	    !http_escape(path, true, file, sizeof file))
		return;
	snprintf(url, sizeof url, "%s/%s/%s/resolve/%s/%s", o->endpoint, ref->owner, ref->repo,
		 rev, file);
	struct http_request rq = {.url = url, .token = o->token, .head = true};
	struct http_response rs;
	if (http_perform(&rq, &rs, NULL) == BG_OK && rs.repo_commit[0])
		snprintf(commit, cap, "%s", rs.repo_commit);
	http_response_free(&rs);
}

/* snapshots/<commit>/<path> -> ../../blobs/<name> (with one more ../ per folder of path),
 * replaced atomically; refs/<revision> = commit. */
static enum bg_status link_snapshot(const struct hub_ref *ref, const char *rdir,
				    const char *commit, const char *path, const char *blob_name,
				    char *out, size_t cap, struct bg_err *err)
{
	char link[HUB_PATH_MAX], dir[HUB_PATH_MAX], target[HUB_PATH_MAX], tmp[HUB_PATH_MAX + 32];
	if ((size_t)snprintf(link, sizeof link, "%s/snapshots/%s/%s", rdir, commit, path) >=
	    sizeof link)
		return bg_fail(err, BG_ERR_INVALID, "%s: path too long", rdir);
	snprintf(dir, sizeof dir, "%s", link);
	*strrchr(dir, '/') = '\0';
	if (!mkdirs(dir))
		return bg_fail(err, BG_ERR_IO, "%s: %s", dir, strerror(errno));
	size_t k = (size_t)snprintf(target, sizeof target, "../../");
	for (const char *s = path; (s = strchr(s, '/')); s++)
		k += (size_t)snprintf(target + k, sizeof target - k, "../");
	snprintf(target + k, sizeof target - k, "blobs/%s", blob_name);
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", link, (long)getpid());
	unlink(tmp);
	if (symlink(target, tmp) != 0 || rename(tmp, link) != 0) {
		int e = errno;
		unlink(tmp);
		return bg_fail(err, BG_ERR_IO, "%s: %s", link, strerror(e));
	}
	if (strcmp(ref->revision, commit) != 0) {
		char refs[HUB_PATH_MAX], refp[HUB_PATH_MAX];
		if (!fmt(refs, sizeof refs, "%s/refs", rdir) ||
		    !fmt(refp, sizeof refp, "%s/%s", refs, ref->revision) || !mkdirs(refs) || !write_atomic(refp, commit))
			return bg_fail(err, BG_ERR_IO, "%s: %s", refp, strerror(errno));
	}
	if ((size_t)snprintf(out, cap, "%s", link) >= cap)
		return bg_fail(err, BG_ERR_INVALID, "%s: path too long", link);
	return BG_OK;
}

enum bg_status hub_resolve(const struct hub_ref *ref, const struct hub_opts *o, char *path,
			   size_t cap, struct bg_err *err)
{
	char nm[800];
	ref_name(ref, nm, sizeof nm);
	bool found = false;
	enum bg_status st = hub_cache_lookup(ref, o, path, cap, &found, err);
	if (st != BG_OK || found)
		return st;
	if (o->offline)
		return bg_fail(err, BG_ERR_IO,
			       "%s: not in the hub cache %s, and offline (--offline or "
			       "HF_HUB_OFFLINE) forbids a download",
			       nm, o->cache_dir);

	struct file_list l = {0};
	cJSON *j = NULL;
	st = fetch_listing(ref, o, &l, &j, err);
	if (st != BG_OK) {
		list_free(&l);
		return st;
	}
	if (l.n > 1)
		qsort(l.v, l.n, sizeof *l.v, cmp_str);
	long i = pick(ref, l.v, l.n);
	if (i < 0) {
		char tags[400];
		list_tags(l.v, l.n, tags, sizeof tags);
		if (ref->file[0])
			st = bg_fail(err, BG_ERR_IO, "%s: no file %s in %s/%s@%s (files: %s)", nm,
				     ref->file, ref->owner, ref->repo, ref->revision, tags);
		else
			st = bg_fail(err, BG_ERR_IO, "%s: no .gguf file with tag %s in %s/%s "
				     "(tags: %s)", nm, ref->tag, ref->owner, ref->repo, tags);
		goto out;
	}
	st = check_split(ref, l.v[i], err);
	if (st != BG_OK)
		goto out;
	struct listing_entry e;
	st = listing_entry(ref, j, l.v[i], &e, err);
	if (st != BG_OK)
		goto out;

	char rdir[HUB_PATH_MAX], blobs[HUB_PATH_MAX], blob[HUB_PATH_MAX], locks[HUB_PATH_MAX],
	    lock[HUB_PATH_MAX];
	const char *blob_name = e.sha256[0] ? e.sha256 : e.oid;
	repo_dir(ref, o, rdir, sizeof rdir);
	if (!fmt(blobs, sizeof blobs, "%s/blobs", rdir) ||
	    !fmt(blob, sizeof blob, "%s/%s", blobs, blob_name) ||
	    !fmt(locks, sizeof locks, "%s/.locks/models--%s--%s", o->cache_dir, ref->owner,
		 ref->repo) ||
	    !fmt(lock, sizeof lock, "%s/%s.lock", locks, blob_name)) {
		st = bg_fail(err, BG_ERR_INVALID, "%s: cache path too long", nm);
		goto out;
	}
	if (!mkdirs(blobs) || !mkdirs(locks)) {
		st = bg_fail(err, BG_ERR_IO, "%s: cannot create the cache folders under %s: %s",
			     nm, o->cache_dir, strerror(errno));
		goto out;
	}
	/* one download of a blob at a time (sharded jobs on one machine start together) */
	int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lfd < 0 || flock(lfd, LOCK_EX) != 0) {
		st = bg_fail(err, BG_ERR_IO, "%s: %s", lock, strerror(errno));
		if (lfd >= 0)
			close(lfd);
		goto out;
	}
	char commit[129] = "";
	struct stat sb;
	if (stat(blob, &sb) != 0 || (e.size && (uint64_t)sb.st_size != e.size))
		st = download(ref, o, &e, blob, commit, sizeof commit, err);
	close(lfd);
	if (st != BG_OK)
		goto out;
	if (!commit[0] && is_hex(ref->revision, 40))
		snprintf(commit, sizeof commit, "%s", ref->revision);
	if (!commit[0])
		head_commit(ref, o, e.path, commit, sizeof commit);
	if (!commit[0] || !word_ok(commit, strlen(commit), sizeof commit))
		snprintf(commit, sizeof commit, "%s", ref->revision); /* no commit id given */
	st = link_snapshot(ref, rdir, commit, e.path, blob_name, path, cap, err);
out:
	cJSON_Delete(j);
	list_free(&l);
	return st;
}
