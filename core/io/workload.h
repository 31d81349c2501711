/* workload: the benchmark workloads of WORKLOADS.md, as a deterministic request generator.
 *
 * A workload is named (F1..F6, V1, V2, S1, B1, P1, N8, N8S, N8L, N8LS, BW4) or written as
 * `ISL/OSL[xN]` (e.g. `128/128x32`); a named one may take a count too (`F1x64`). Every
 * request has random prompt token ids (uniform in [id_lo, id_hi), a range chosen by the
 * caller to avoid special tokens), max_tokens = OSL, ignore_eos, greedy sampling: every
 * engine does the same work.
 *
 * Determinism: request i depends only on (spec, seed, i, id range). Its shape comes from
 * its own RNG stream (wl_shape: independent of the vocabulary, so that reports of one
 * workload on different models compare) and its tokens from a second stream. The first k
 * requests of a run of n are the first k of any longer run. S1 draws ISL ~ LogNormal(ln 170,
 * 1.05), OSL ~ LogNormal(ln 130, 0.95) (lengths rounded to the nearest integer) and redraws
 * until the pair passes the drop rules (ISL >= 4, OSL >= 4, ISL <= 1024, ISL + OSL <= 2048),
 * as ShareGPT-style benchmarks filter their data set.
 *
 * A generator makes requests on the fly (memory does not grow with the count) and keeps
 * two running checksums: of the shapes (ISL, OSL per request) and of the content (shapes
 * plus every token id). B1 (the decode micro-benchmark) is a grid of cells, not a stream:
 * wl_b1_cell lists them; wl_gen refuses it.
 */
#ifndef BG_WORKLOAD_H
#define BG_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/request.h"
#include "status.h"

enum wl_kind {
	WL_FIXED = 0,  /* every request ISL/OSL */
	WL_LOGNORMAL,  /* S1 */
	WL_DECODE_GRID /* B1 */
};

struct wl_spec {
	char name[48]; /* canonical text: "F1", "128/128", "S1" (without the count) */
	enum wl_kind kind;
	int32_t isl, osl;   /* WL_FIXED */
	int64_t n_requests; /* from `xN`, else WORKLOADS.md's 7-8B count (ISL/OSL: 1000) */
	bool n_given;	    /* the spec carried `xN` */
	/* engine workloads (issue 14): P1 = a shared 1000-token system prompt + a 100-token
	 * question; N8 = 8 samples of each prompt (n = 8); N8S = the same as 8 separate
	 * requests (request i has the prompt of i / 8); N8L, N8LS = the same with
	 * 1024-token prompts */
	int32_t shared_prefix; /* the first tokens of every prompt are the same */
	int32_t n_samples;     /* request field n (0 = 1) */
	int32_t group;	       /* requests i and j with i / group == j / group share a prompt */
	int32_t beam_width;    /* BW4: beam search of this width, all beams returned (0 = off) */
	/* WL_LOGNORMAL: ln-space means and deviations, and the drop rules */
	double isl_mu, isl_sigma, osl_mu, osl_sigma;
	int32_t min_isl, min_osl, max_isl, max_total;
};

/* Parses a workload spec (case-insensitive names; `ISL/OSL`, `ISL/OSLxN`, `NAMExN`).
 * On failure *out is unspecified and err says why. */
enum bg_status wl_parse(const char *text, struct wl_spec *out, struct bg_err *err);

/* The canonical text of spec with n requests, e.g. "F1x64", "128/128x32" (buf of cap). */
void wl_format(const struct wl_spec *s, int64_t n, char *buf, size_t cap);

/* The shape of request i of (spec, seed). Not for B1. */
void wl_shape(const struct wl_spec *s, uint64_t seed, int64_t i, int32_t *isl, int32_t *osl);

/* Checksum (FNV-1a 64) of the shapes of requests [0, n): what wl_gen_shape_checksum is
 * after n requests. */
uint64_t wl_shapes_checksum(const struct wl_spec *s, uint64_t seed, int64_t n);

/* B1 cells: batch {1, 8, 64, 256} x context {512, 2048}, 128 decode steps each.
 * wl_b1_cells is the number of cells; wl_b1_cell fills cell i (NULL outputs skipped). */
int wl_b1_cells(void);
void wl_b1_cell(int i, int32_t *batch, int32_t *ctx, int32_t *steps);

struct wl_gen;

/* A generator of n requests (n > 0) with token ids in [id_lo, id_hi) (0 <= id_lo < id_hi).
 * A warm-up set uses a different seed (the measured requests stay the same).
 * Request ids are "<prefix><i>". BG_ERR_INVALID for B1 or a bad range. */
enum bg_status wl_gen_create(const struct wl_spec *s, int64_t n, uint64_t seed, int32_t id_lo,
			     int32_t id_hi, const char *id_prefix, struct wl_gen **out,
			     struct bg_err *err);
void wl_gen_destroy(struct wl_gen *g); /* NULL-safe */

/* Makes the next request (ownership to the caller), or returns 0 when n were made.
 * Returns -1 with err set when memory runs out. */
int wl_gen_next(struct wl_gen *g, struct request **out, struct bg_err *err);

/* An engine_source_fn: user is a struct wl_gen *. */
int wl_source(void *user, struct request **out, struct bg_err *err);

int64_t wl_gen_count(const struct wl_gen *g);		  /* requests made so far */
uint64_t wl_gen_shape_checksum(const struct wl_gen *g);	  /* over the made requests */
uint64_t wl_gen_content_checksum(const struct wl_gen *g); /* shapes + token ids */
int64_t wl_gen_prompt_tokens(const struct wl_gen *g);	  /* sum of ISL so far */
int64_t wl_gen_output_tokens(const struct wl_gen *g);	  /* sum of OSL so far */

#endif
