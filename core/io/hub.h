/* hub: GGUF models named by their Hugging Face repository, `hf:OWNER/REPO[:TAG|/FILE]
 * [@REVISION]`, found in the Hugging Face hub cache or fetched into it.
 *
 * Naming follows llama.cpp's -hf: a TAG (default Q4_K_M) picks the repository's .gguf
 * file whose name carries it as a word (case-insensitively; "Q4_K" does not pick
 * "Q4_K_M"), multimodal projector files (mmproj*) excluded; /FILE names the file itself.
 *
 * The cache is huggingface_hub's, so that the Python tools and batchgen share it: the root
 * is $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub; a repository lives in models--OWNER--REPO/ with blobs/<sha256>
 * (the file's bytes, named by the LFS sha256, or the git oid for a non-LFS file),
 * snapshots/<commit>/<path> (a relative symlink to the blob) and refs/<revision> (the
 * commit the revision pointed to).
 *
 * Resolution: the cache first (refs/<revision>, then the snapshot; no request at all when
 * it has the file); otherwise, unless offline, the repository's listing
 * (GET <endpoint>/api/models/OWNER/REPO/tree/<revision>?recursive=true), then the file
 * (GET <endpoint>/OWNER/REPO/resolve/<revision>/<path>) into blobs/<name>.incomplete,
 * resumed with a Range request when one is there (and retried twice within one call when a
 * connection breaks after making progress), its sha256 checked against the listing's LFS
 * oid, and only then renamed into place and linked from the snapshot.
 *
 * Invariants: nothing but a verified whole file is ever under blobs/<name> or linked from
 * snapshots/; a failed or corrupt download leaves at most blobs/<name>.incomplete (a
 * corrupt one is deleted). Concurrent processes serialize on an flock of
 * .locks/models--OWNER--REPO/<name>.lock under the cache root (huggingface_hub's place
 * for its locks), and the second finds the blob there. Every
 * name taken from the command line or the server is checked before it reaches a path
 * (no "..", no absolute path, no backslash).
 */
#ifndef BG_HUB_H
#define BG_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define HUB_DEFAULT_TAG	     "Q4_K_M"
#define HUB_DEFAULT_ENDPOINT "https://huggingface.co"

/* A parsed hf: name. Exactly one of tag and file is non-empty. */
struct hub_ref {
	char owner[97];
	char repo[97];
	char tag[65];	    /* the quantization tag, default HUB_DEFAULT_TAG */
	char file[512];	    /* a path inside the repository, ending in .gguf */
	char revision[129]; /* branch, tag or commit; default "main" */
};

/* Called while a file downloads: done and total bytes of the whole file (total 0 when
 * unknown); once more with done == total at the end. */
typedef void (*hub_progress_fn)(void *arg, const char *file, uint64_t done, uint64_t total);

struct hub_opts {
	char endpoint[512];   /* no trailing slash */
	char token[1024];     /* "" = none */
	char cache_dir[1024]; /* the hub cache's root */
	bool offline;	      /* never touch the network */
	hub_progress_fn progress; /* NULL = silent */
	void *progress_arg;
};

/* Fills o from the environment as huggingface_hub reads it: HF_ENDPOINT; HF_TOKEN (else
 * the file $HF_TOKEN_PATH, else $HF_HOME/token or ~/.cache/huggingface/token); the cache
 * root (see above); HF_HUB_OFFLINE (1, true, yes or on). No progress callback. */
void hub_opts_from_env(struct hub_opts *o);

/* Whether spec is an hf: name. */
bool hub_is_spec(const char *spec);

/* Parses "hf:OWNER/REPO[:TAG|/FILE.gguf][@REVISION]". OWNER, REPO, TAG and REVISION take
 * letters, digits, '.', '-' and '_'; FILE is a relative path without "." or ".."
 * components. BG_ERR_INVALID with a sentence on a malformed name. */
enum bg_status hub_parse(const char *spec, struct hub_ref *ref, struct bg_err *err);

/* Whether the .gguf file at path (a repository path; its base name is read) carries tag as
 * a word: case-insensitively, preceded by the start or a character that is not a letter
 * or digit, followed by '.', '-' or the end of the name. mmproj files never match. */
bool hub_tag_matches(const char *path, const char *tag);

/* Looks for ref in the cache only. *found tells whether path[cap] holds the file's path
 * (inside snapshots/). BG_OK whether found or not; an error only for a match batchgen
 * cannot use (a split GGUF). */
enum bg_status hub_cache_lookup(const struct hub_ref *ref, const struct hub_opts *o, char *path,
				size_t cap, bool *found, struct bg_err *err);

/* Resolves ref to a local file: the cache, else (unless o->offline) a download as above.
 * On failure err holds one sentence starting with the hf: name: no such repository,
 * revision or file, a tag that is not there (naming the tags that are), access denied
 * (naming HF_TOKEN), no network, a broken or corrupt download, not in the cache while
 * offline. */
enum bg_status hub_resolve(const struct hub_ref *ref, const struct hub_opts *o, char *path,
			   size_t cap, struct bg_err *err);

/* The sha256 of a file as 64 lowercase hex digits into hex[65]. */
enum bg_status hub_sha256_file(const char *path, char hex[65], struct bg_err *err);

#endif
