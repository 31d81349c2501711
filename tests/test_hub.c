/* test_hub: hf: names, tag matching, the environment's settings and the hub cache
 * lookup (core/io/hub.h), on a cache built here by hand; no network (the end-to-end
 * download against a local server is tests/e2e_hub.sh). */
#include "io/hub.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/http.h"
#include "io/sha256.h"
#include "check.h"

/* ---- names ---- */

static void test_parse(void)
{
	struct hub_ref r;
	struct bg_err err = {0};
	CHECK(hub_parse("hf:bartowski/Llama-3.2-1B-Instruct-GGUF", &r, &err) == BG_OK, "%s",
	      err.msg);
	CHECK(!strcmp(r.owner, "bartowski") && !strcmp(r.repo, "Llama-3.2-1B-Instruct-GGUF") &&
		  !strcmp(r.tag, "Q4_K_M") && !r.file[0] && !strcmp(r.revision, "main"),
	      "default tag and revision: %s %s %s %s", r.owner, r.repo, r.tag, r.revision);
	CHECK(hub_parse("hf:o/r:q8_0", &r, &err) == BG_OK && !strcmp(r.tag, "q8_0") && !r.file[0],
	      "tag as written");
	CHECK(hub_parse("hf:o/r/dir/x.Q8_0.GGUF@v1.0", &r, &err) == BG_OK &&
		  !strcmp(r.file, "dir/x.Q8_0.GGUF") && !r.tag[0] && !strcmp(r.revision, "v1.0"),
	      "file and revision: %s %s", r.file, r.revision);
	CHECK(hub_parse("hf:o/r:F16@0123456789abcdef0123456789abcdef01234567", &r, &err) == BG_OK &&
		  !strcmp(r.tag, "F16") &&
		  !strcmp(r.revision, "0123456789abcdef0123456789abcdef01234567"),
	      "tag and commit");
	static const char *const bad[] = {
	    "hf:",	     "hf:o",	       "hf:o/",		  "hf:/r",
	    "hf:o/r:",	     "hf:o/r/",	       "hf:o/r/x.bin",	  "hf:o/r/../x.gguf",
	    "hf:o/r/./x.gguf", "hf:o/r//x.gguf", "hf:o/r/d/",	  "hf:o/r@",
	    "hf:o/r@a/b",    "hf:o b/r",       "hf:../r",	  "hf:o/..",
	    "hf:o/r:Q4/x",   "hf:o/r/x\\y.gguf", "o/r",		  "hf:o/r/.gguf",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct bg_err e = {0};
		CHECK(hub_parse(bad[i], &r, &e) == BG_ERR_INVALID && e.msg[0], "'%s' refused",
		      bad[i]);
	}
	CHECK(hub_is_spec("hf:o/r") && !hub_is_spec("synthetic:tiny") && !hub_is_spec(NULL) &&
		  !hub_is_spec("model.gguf"),
	      "hub_is_spec");
}

static void test_tags(void)
{
	struct {
		const char *path, *tag;
		bool want;
	} cases[] = {
	    {"Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M", true},
	    {"Llama-3.2-1B-Instruct-Q4_K_M.gguf", "q4_k_m", true}, /* case-insensitive */
	    {"llama-2-7b.Q4_K_M.gguf", "Q4_K_M", true},		   /* TheBloke's '.' */
	    {"x-Q4_K_M.gguf", "Q4_K", false},			   /* a word, not a prefix */
	    {"x-Q4_K_S.gguf", "Q4_K_M", false},
	    {"xQ4_K_M.gguf", "Q4_K_M", false},			   /* not after a letter */
	    {"x-Q4_K_M-00001-of-00002.gguf", "Q4_K_M", true},	   /* a split's part */
	    {"mmproj-model-Q4_K_M.gguf", "Q4_K_M", false},	   /* projectors excluded */
	    {"MMPROJ-F16.gguf", "F16", false},
	    {"x-Q4_K_M.bin", "Q4_K_M", false},
	    {"Q8_0/x-F16.gguf", "Q8_0", false}, /* the base name only */
	    {"Q8_0/x-F16.gguf", "f16", true},
	    {"f16.gguf", "F16", true},
	    {"model-IQ4_XS.gguf", "iq4_xs", true},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		CHECK(hub_tag_matches(cases[i].path, cases[i].tag) == cases[i].want, "%s ~ %s: %d",
		      cases[i].path, cases[i].tag, !cases[i].want);
}

/* ---- the environment ---- */

static void env_clear(void)
{
	const char *names[] = {"HF_ENDPOINT",	 "HF_TOKEN", "HF_TOKEN_PATH", "HF_HOME",
			       "HF_HUB_CACHE",	 "XDG_CACHE_HOME", "HF_HUB_OFFLINE"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		unsetenv(names[i]);
}

static void test_env(const char *tmp)
{
	struct hub_opts o;
	env_clear();
	setenv("HOME", "/home/u", 1);
	hub_opts_from_env(&o);
	CHECK(!strcmp(o.endpoint, "https://huggingface.co"), "%s", o.endpoint);
	CHECK(!strcmp(o.cache_dir, "/home/u/.cache/huggingface/hub"), "%s", o.cache_dir);
	CHECK(!o.offline && !o.token[0] && !o.progress, "defaults");
	setenv("XDG_CACHE_HOME", "/xdg", 1);
	hub_opts_from_env(&o);
	CHECK(!strcmp(o.cache_dir, "/xdg/huggingface/hub"), "%s", o.cache_dir);
	setenv("HF_HOME", "/hfhome", 1);
	hub_opts_from_env(&o);
	CHECK(!strcmp(o.cache_dir, "/hfhome/hub"), "%s", o.cache_dir);
	setenv("HF_HUB_CACHE", "/cache", 1);
	setenv("HF_ENDPOINT", "http://127.0.0.1:9//", 1);
	hub_opts_from_env(&o);
	CHECK(!strcmp(o.cache_dir, "/cache"), "%s", o.cache_dir);
	CHECK(!strcmp(o.endpoint, "http://127.0.0.1:9"), "trailing slashes: %s", o.endpoint);
	const char *on[] = {"1", "true", "YES", "On"}, *off[] = {"0", "false", "no", ""};
	for (int i = 0; i < 4; i++) {
		setenv("HF_HUB_OFFLINE", on[i], 1);
		hub_opts_from_env(&o);
		CHECK(o.offline, "HF_HUB_OFFLINE=%s", on[i]);
		setenv("HF_HUB_OFFLINE", off[i], 1);
		hub_opts_from_env(&o);
		CHECK(!o.offline, "HF_HUB_OFFLINE=%s", off[i]);
	}
	/* the token: HF_TOKEN, else the token file of HF_HOME */
	char home[1024], tokf[1100];
	snprintf(home, sizeof home, "%s/hfhome", tmp);
	mkdir(home, 0755);
	snprintf(tokf, sizeof tokf, "%s/token", home);
	FILE *f = fopen(tokf, "w");
	if (f) {
		fputs("hf_filetoken\n", f);
		fclose(f);
	}
	setenv("HF_HOME", home, 1);
	hub_opts_from_env(&o);
	CHECK(!strcmp(o.token, "hf_filetoken"), "token file: '%s'", o.token);
	setenv("HF_TOKEN", "hf_envtoken", 1);
	hub_opts_from_env(&o);
	CHECK(!strcmp(o.token, "hf_envtoken"), "HF_TOKEN wins: '%s'", o.token);
	env_clear();
}

/* ---- the cache ---- */

static void put(const char *path, const char *text)
{
	char dir[2048];
	snprintf(dir, sizeof dir, "mkdir -p \"$(dirname '%s')\"", path);
	CHECK(system(dir) == 0, "%s", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL, "%s", path);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

#define COMMIT "0123456789abcdef0123456789abcdef01234567"

static void test_cache(const char *tmp)
{
	struct hub_opts o;
	memset(&o, 0, sizeof o);
	snprintf(o.cache_dir, sizeof o.cache_dir, "%s/cache", tmp);
	snprintf(o.endpoint, sizeof o.endpoint, "http://127.0.0.1:1"); /* nothing listens */
	char repo[1100], p[2048];
	snprintf(repo, sizeof repo, "%s/models--own--rep", o.cache_dir);
	snprintf(p, sizeof p, "%s/refs/main", repo);
	put(p, COMMIT "\n");
	snprintf(p, sizeof p, "%s/snapshots/" COMMIT "/a-Q8_0.gguf", repo);
	put(p, "GGUF a");
	snprintf(p, sizeof p, "%s/snapshots/" COMMIT "/sub/b-Q4_K_M.gguf", repo);
	put(p, "GGUF b");
	snprintf(p, sizeof p, "%s/snapshots/" COMMIT "/mmproj-Q4_K_M.gguf", repo);
	put(p, "GGUF m");
	snprintf(p, sizeof p, "%s/snapshots/" COMMIT "/c-Q6_K-00001-of-00002.gguf", repo);
	put(p, "GGUF c");
	snprintf(p, sizeof p, "%s/snapshots/" COMMIT "/gone-F16.gguf", repo);
	char target[2048];
	snprintf(target, sizeof target, "%s/blobs/nothing", repo);
	CHECK(symlink(target, p) == 0, "dangling link");

	struct {
		const char *spec;
		const char *want; /* relative to the snapshot; NULL = not found */
	} cases[] = {
	    {"hf:own/rep:q8_0", "a-Q8_0.gguf"},
	    {"hf:own/rep", "sub/b-Q4_K_M.gguf"}, /* default Q4_K_M, in a folder, not mmproj */
	    {"hf:own/rep/a-Q8_0.gguf", "a-Q8_0.gguf"},
	    {"hf:own/rep/sub/b-Q4_K_M.gguf", "sub/b-Q4_K_M.gguf"},
	    {"hf:own/rep:Q8_0@" COMMIT, "a-Q8_0.gguf"},
	    {"hf:own/rep:Q5_K_M", NULL},
	    {"hf:own/rep/x.gguf", NULL},
	    {"hf:own/rep:F16", NULL},	    /* a dangling link is not a file */
	    {"hf:own/rep:Q8_0@v2", NULL},   /* no refs/v2 */
	    {"hf:own/other:Q8_0", NULL},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct hub_ref r;
		struct bg_err err = {0};
		char path[4096] = "", want[4096] = "";
		bool found = true;
		CHECK(hub_parse(cases[i].spec, &r, &err) == BG_OK, "%s", err.msg);
		CHECK(hub_cache_lookup(&r, &o, path, sizeof path, &found, &err) == BG_OK, "%s: %s",
		      cases[i].spec, err.msg);
		if (cases[i].want)
			snprintf(want, sizeof want, "%s/snapshots/" COMMIT "/%s", repo,
				 cases[i].want);
		CHECK(found == (cases[i].want != NULL) && (!found || !strcmp(path, want)),
		      "%s: found %d '%s'", cases[i].spec, found, path);
		/* offline, hub_resolve answers the same from the cache, or says offline */
		o.offline = true;
		err.msg[0] = '\0';
		enum bg_status st = hub_resolve(&r, &o, path, sizeof path, &err);
		CHECK(cases[i].want ? st == BG_OK && !strcmp(path, want)
				    : st == BG_ERR_IO && strstr(err.msg, "offline") &&
					  !strncmp(err.msg, "hf:own/", 7),
		      "%s offline: %d %s", cases[i].spec, st, err.msg);
		o.offline = false;
	}
	/* a split part is refused, with a reason */
	struct hub_ref r;
	struct bg_err err = {0};
	char path[4096];
	bool found;
	hub_parse("hf:own/rep:Q6_K", &r, &err);
	CHECK(hub_cache_lookup(&r, &o, path, sizeof path, &found, &err) == BG_ERR_UNSUPPORTED &&
		  strstr(err.msg, "split"),
	      "split: %s", err.msg);
	/* not cached and online: the unreachable endpoint is a one-sentence error */
	hub_parse("hf:own/other:Q8_0", &r, &err);
	err.msg[0] = '\0';
	CHECK(hub_resolve(&r, &o, path, sizeof path, &err) == BG_ERR_IO &&
		  strstr(err.msg, "cannot reach") && !strchr(err.msg, '\n'),
	      "unreachable: %s", err.msg);
}

/* ---- sha256 and URL escaping ---- */

/* The expected digests are from coreutils' sha256sum, an independent implementation. */

static void test_sha_escape(const char *tmp)
{
	char p[1100], hex[65];
	struct bg_err err = {0};
	snprintf(p, sizeof p, "%s/abc", tmp);
	put(p, "abc");
	/* FIPS 180-2's first example */
	CHECK(hub_sha256_file(p, hex, &err) == BG_OK &&
		  !strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
	      "sha256(abc) = %s", hex);
	snprintf(p, sizeof p, "%s/empty", tmp);
	put(p, "");
	CHECK(hub_sha256_file(p, hex, &err) == BG_OK &&
		  !strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
	      "sha256() = %s", hex);
	/* FIPS 180-2's other two examples: 448 bits (two blocks with the padding), and a
	 * million 'a' fed in pieces of every size from 1 to 199 bytes (block boundaries) */
	struct sha256 s;
	const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	sha256_init(&s);
	sha256_update(&s, m2, strlen(m2));
	sha256_final_hex(&s, hex);
	CHECK(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
	      "sha256(448 bits) = %s", hex);
	char *mil = malloc(1000000);
	if (mil) {
		memset(mil, 'a', 1000000);
		sha256_init(&s);
		for (size_t at = 0, step = 1; at < 1000000; step = step % 199 + 1) {
			size_t k = 1000000 - at < step ? 1000000 - at : step;
			sha256_update(&s, mil + at, k);
			at += k;
		}
		sha256_final_hex(&s, hex);
		CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
		      "sha256(a x 1e6) = %s", hex);
		free(mil);
	}
	/* lengths around the padding boundary (55, 56, 63, 64 bytes) against one-shot calls
	 * of the file path, which hashes in 1 MiB reads */
	static const char *const want[] = {
	    "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318", /* 55 x 'a' */
	    "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a", /* 56 */
	    "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34", /* 63 */
	    "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb", /* 64 */
	};
	static const size_t lens[] = {55, 56, 63, 64};
	for (int i = 0; i < 4; i++) {
		char a[64];
		memset(a, 'a', sizeof a);
		sha256_init(&s);
		sha256_update(&s, a, lens[i]);
		sha256_final_hex(&s, hex);
		CHECK(!strcmp(hex, want[i]), "sha256(%zu x a) = %s", lens[i], hex);
	}
	snprintf(p, sizeof p, "%s/missing", tmp);
	CHECK(hub_sha256_file(p, hex, &err) == BG_ERR_IO, "missing file");
	char out[64];
	CHECK(http_escape("a b/c~d%", true, out, sizeof out) && !strcmp(out, "a%20b/c~d%25"), "%s",
	      out);
	CHECK(http_escape("refs/pr/1", false, out, sizeof out) && !strcmp(out, "refs%2Fpr%2F1"),
	      "%s", out);
	CHECK(!http_escape("abcdef", false, out, 6) && http_escape("abcde", false, out, 6),
	      "capacity");
}

int main(void)
{
	char tmp[] = "/tmp/test_hub.XXXXXX";
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	test_parse();
	test_tags();
	test_env(tmp);
	test_cache(tmp);
	test_sha_escape(tmp);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	return check_summary();
}
