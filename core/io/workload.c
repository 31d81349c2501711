#include "io/workload.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- random numbers -------------------------------------------------------------------
 * splitmix64 as a generator: simple, statistically good enough for lengths and token ids,
 * and easy to reproduce elsewhere (bench/llamacpp_bench.mjs does, with BigInt). Each request
 * has two streams, derived from (seed, index, stream) by the splitmix64 finalizer. */

static uint64_t wl_fmix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t wl_next(uint64_t *state)
{
	*state += 0x9E3779B97F4A7C15ull;
	return wl_fmix(*state);
}

enum { WL_STREAM_SHAPE = 0, WL_STREAM_TOKENS = 1 };

static uint64_t wl_stream(uint64_t seed, int64_t i, int stream)
{
	return seed ^ wl_fmix((uint64_t)i * 2u + (uint64_t)stream + 1u);
}

/* Uniform in [0, 1) with 53 bits. */
static double wl_unit(uint64_t *state)
{
	return (double)(wl_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal by Box-Muller (two draws per value; the second value is discarded so
 * that every draw is independent of what came before in the stream). */
static double wl_gauss(uint64_t *state)
{
	double u1 = 1.0 - wl_unit(state); /* (0, 1]: log is finite */
	double u2 = wl_unit(state);
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static int32_t wl_lognormal_len(uint64_t *state, double mu, double sigma)
{
	double v = exp(mu + sigma * wl_gauss(state));
	if (v > 1e9) /* far beyond any drop rule; keeps lround in range */
		v = 1e9;
	return (int32_t)lround(v);
}

/* ---- checksums ------------------------------------------------------------------------ */

#define WL_FNV_OFFSET 0xcbf29ce484222325ull
#define WL_FNV_PRIME  0x100000001b3ull

static uint64_t wl_fnv_u32(uint64_t h, uint32_t v)
{
	for (int b = 0; b < 4; b++) { /* little-endian bytes: the same on every host */
		h ^= (v >> (8 * b)) & 0xffu;
		h *= WL_FNV_PRIME;
	}
	return h;
}

/* ---- specs ---------------------------------------------------------------------------- */

struct wl_named {
	const char *name;
	int32_t isl, osl;
	int64_t n; /* the 7-8B column of WORKLOADS.md */
	int32_t shared_prefix, n_samples, group;
};

static const struct wl_named wl_fixed_table[] = {
    {"F1", 128, 128, 8192, 0, 0, 0},
    {"F2", 128, 2048, 1000, 0, 0, 0},
    {"F3", 2048, 128, 1000, 0, 0, 0},
    {"F4", 500, 2000, 1000, 0, 0, 0},
    {"F5", 1000, 1000, 1000, 0, 0, 0},
    {"F6", 2048, 2048, 500, 0, 0, 0},
    {"V1", 1024, 128, 1000, 0, 0, 0},
    {"V2", 256, 256, 1000, 0, 0, 0},
    /* issue 14's engine workloads */
    {"P1", 1100, 128, 256, 1000, 0, 0},
    {"N8", 128, 128, 32, 0, 8, 0},
    {"N8S", 128, 128, 256, 0, 0, 8},
    /* n = 8 where sharing the prefill can pay: 8 x 1152 / (1024 + 8 x 128) = 4.5x fewer
     * positions at most (N8's 128/128: 1.78x) */
    {"N8L", 1024, 128, 32, 0, 8, 0},
    {"N8LS", 1024, 128, 256, 0, 0, 8},
    {"BW4", 128, 128, 32, 0, 0, 0}, /* + beam_width 4, set in wl_parse */
};

static bool wl_parse_i64(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *out)
{
	if (len == 0 || len > 18)
		return false;
	int64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (s[i] - '0');
	}
	if (v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

enum bg_status wl_parse(const char *text, struct wl_spec *out, struct bg_err *err)
{
	memset(out, 0, sizeof *out);
	if (!text || !*text)
		return bg_fail(err, BG_ERR_INVALID, "empty workload spec");
	size_t len = strlen(text);
	/* split off a trailing xN count */
	const char *x = NULL;
	for (size_t i = len; i > 0; i--) {
		if (text[i - 1] == 'x' || text[i - 1] == 'X') {
			x = text + i - 1;
			break;
		}
	}
	size_t base_len = x ? (size_t)(x - text) : len;
	if (x) {
		int64_t n;
		if (!wl_parse_i64(x + 1, len - base_len - 1, 1, INT32_MAX, &n))
			return bg_fail(
			    err, BG_ERR_INVALID,
			    "workload '%s': the count after 'x' must be a whole number >= 1", text);
		out->n_requests = n;
		out->n_given = true;
	}
	if (base_len == 0 || base_len >= sizeof out->name)
		return bg_fail(err, BG_ERR_INVALID, "workload '%s' is not a known name or ISL/OSL",
			       text);
	char base[sizeof out->name];
	memcpy(base, text, base_len);
	base[base_len] = 0;

	const char *slash = strchr(base, '/');
	if (slash) {
		int64_t isl, osl;
		if (!wl_parse_i64(base, (size_t)(slash - base), 1, 1 << 24, &isl) ||
		    !wl_parse_i64(slash + 1, strlen(slash + 1), 1, 1 << 24, &osl))
			return bg_fail(err, BG_ERR_INVALID,
				       "workload '%s': ISL/OSL must be two whole numbers >= 1",
				       text);
		out->kind = WL_FIXED;
		out->isl = (int32_t)isl;
		out->osl = (int32_t)osl;
		snprintf(out->name, sizeof out->name, "%" PRId64 "/%" PRId64, isl, osl);
		if (!out->n_given)
			out->n_requests = 1000; /* vLLM bench throughput's default count */
		return BG_OK;
	}
	for (size_t i = 0; i < sizeof wl_fixed_table / sizeof wl_fixed_table[0]; i++) {
		if (strcasecmp(base, wl_fixed_table[i].name) == 0) {
			out->kind = WL_FIXED;
			out->isl = wl_fixed_table[i].isl;
			out->osl = wl_fixed_table[i].osl;
			out->shared_prefix = wl_fixed_table[i].shared_prefix;
			out->n_samples = wl_fixed_table[i].n_samples;
			out->group = wl_fixed_table[i].group;
			out->beam_width = strcasecmp(base, "BW4") == 0 ? 4 : 0;
			snprintf(out->name, sizeof out->name, "%s", wl_fixed_table[i].name);
			if (!out->n_given)
				out->n_requests = wl_fixed_table[i].n;
			return BG_OK;
		}
	}
	if (strcasecmp(base, "S1") == 0) {
		out->kind = WL_LOGNORMAL;
		snprintf(out->name, sizeof out->name, "S1");
		out->isl_mu = log(170.0);
		out->isl_sigma = 1.05;
		out->osl_mu = log(130.0);
		out->osl_sigma = 0.95;
		out->min_isl = 4;
		out->min_osl = 4;
		out->max_isl = 1024;
		out->max_total = 2048;
		if (!out->n_given)
			out->n_requests = 1000;
		return BG_OK;
	}
	if (strcasecmp(base, "B1") == 0) {
		if (out->n_given)
			return bg_fail(
			    err, BG_ERR_INVALID,
			    "workload B1 is a fixed grid (batch x context); it takes no count");
		out->kind = WL_DECODE_GRID;
		snprintf(out->name, sizeof out->name, "B1");
		return BG_OK;
	}
	return bg_fail(err, BG_ERR_INVALID,
		       "unknown workload '%s' (known: F1..F6, V1, V2, S1, B1, P1, N8, N8S, N8L, "
		       "N8LS, BW4, or ISL/OSL[xN] such as "
		       "128/128x32)",
		       text);
}

void wl_format(const struct wl_spec *s, int64_t n, char *buf, size_t cap)
{
	if (s->kind == WL_DECODE_GRID)
		snprintf(buf, cap, "%s", s->name);
	else
		snprintf(buf, cap, "%sx%" PRId64, s->name, n);
}

void wl_shape(const struct wl_spec *s, uint64_t seed, int64_t i, int32_t *isl, int32_t *osl)
{
	BG_ASSERT(s->kind != WL_DECODE_GRID);
	if (s->kind == WL_FIXED) {
		*isl = s->isl;
		*osl = s->osl;
		return;
	}
	uint64_t st = wl_stream(seed, i, WL_STREAM_SHAPE);
	for (;;) { /* about 20% of draws are dropped; the loop ends with probability 1 */
		int32_t a = wl_lognormal_len(&st, s->isl_mu, s->isl_sigma);
		int32_t b = wl_lognormal_len(&st, s->osl_mu, s->osl_sigma);
		if (a < s->min_isl || b < s->min_osl || a > s->max_isl ||
		    (int64_t)a + b > s->max_total)
			continue;
		*isl = a;
		*osl = b;
		return;
	}
}

uint64_t wl_shapes_checksum(const struct wl_spec *s, uint64_t seed, int64_t n)
{
	uint64_t h = WL_FNV_OFFSET;
	for (int64_t i = 0; i < n; i++) {
		int32_t a, b;
		wl_shape(s, seed, i, &a, &b);
		h = wl_fnv_u32(wl_fnv_u32(h, (uint32_t)a), (uint32_t)b);
	}
	return h;
}

static const int32_t wl_b1_batch[] = {1, 8, 64, 256};
static const int32_t wl_b1_ctx[] = {512, 2048};

int wl_b1_cells(void)
{
	return 8;
}

void wl_b1_cell(int i, int32_t *batch, int32_t *ctx, int32_t *steps)
{
	BG_ASSERT(i >= 0 && i < 8);
	if (batch)
		*batch = wl_b1_batch[i / 2];
	if (ctx)
		*ctx = wl_b1_ctx[i % 2];
	if (steps)
		*steps = 128;
}

/* ---- generator ------------------------------------------------------------------------ */

struct wl_gen {
	struct wl_spec spec;
	int64_t n, made;
	uint64_t seed;
	int32_t id_lo, id_hi;
	char prefix[32];
	uint64_t shape_sum, content_sum;
	int64_t prompt_tokens, output_tokens;
};

enum bg_status wl_gen_create(const struct wl_spec *s, int64_t n, uint64_t seed, int32_t id_lo,
			     int32_t id_hi, const char *id_prefix, struct wl_gen **out,
			     struct bg_err *err)
{
	*out = NULL;
	if (s->kind == WL_DECODE_GRID)
		return bg_fail(err, BG_ERR_INVALID,
			       "workload B1 is a grid of decode cells, not a request stream");
	if (n <= 0)
		return bg_fail(err, BG_ERR_INVALID, "a workload needs at least one request");
	if (id_lo < 0 || id_lo >= id_hi)
		return bg_fail(err, BG_ERR_INVALID, "empty token id range [%d, %d)", id_lo, id_hi);
	struct wl_gen *g = calloc(1, sizeof *g);
	if (!g)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	g->spec = *s;
	g->n = n;
	g->seed = seed;
	g->id_lo = id_lo;
	g->id_hi = id_hi;
	snprintf(g->prefix, sizeof g->prefix, "%s", id_prefix ? id_prefix : "");
	g->shape_sum = WL_FNV_OFFSET;
	g->content_sum = WL_FNV_OFFSET;
	*out = g;
	return BG_OK;
}

void wl_gen_destroy(struct wl_gen *g)
{
	free(g);
}

int wl_gen_next(struct wl_gen *g, struct request **out, struct bg_err *err)
{
	*out = NULL;
	if (g->made >= g->n)
		return 0;
	int64_t i = g->made;
	int32_t isl, osl;
	wl_shape(&g->spec, g->seed, i, &isl, &osl);

	struct request *r = req_new();
	char idbuf[64];
	snprintf(idbuf, sizeof idbuf, "%s%" PRId64, g->prefix, i);
	if (r) {
		r->id = strdup(idbuf);
		r->input_ids = malloc((size_t)isl * sizeof *r->input_ids);
	}
	if (!r || !r->id || !r->input_ids) {
		req_free(r);
		bg_fail(err, BG_ERR_NOMEM, "out of memory making request %" PRId64, i);
		return -1;
	}
	int64_t si = g->spec.group > 1 ? i / g->spec.group : i;
	uint64_t st = wl_stream(g->seed, si, WL_STREAM_TOKENS);
	/* the shared prefix: the stream of a request index no request has */
	uint64_t sp = wl_stream(g->seed, -1, WL_STREAM_TOKENS);
	uint64_t range = (uint64_t)(g->id_hi - g->id_lo);
	uint64_t h = wl_fnv_u32(wl_fnv_u32(g->content_sum, (uint32_t)isl), (uint32_t)osl);
	for (int32_t k = 0; k < isl; k++) {
		/* modulo bias is below range / 2^64: negligible */
		uint64_t *s = k < g->spec.shared_prefix ? &sp : &st;
		r->input_ids[k] = g->id_lo + (int32_t)(wl_next(s) % range);
		h = wl_fnv_u32(h, (uint32_t)r->input_ids[k]);
	}
	if (g->spec.n_samples > 1)
		r->n = g->spec.n_samples;
	if (g->spec.beam_width > 1) /* greedy and ignore_eos: every beam reaches osl */
		r->n = r->beam_width = g->spec.beam_width;
	r->n_input_ids = isl;
	r->line = i + 1;
	r->seq = i;
	r->add_bos = 0; /* the prompt is exactly ISL random ids */
	r->max_tokens = osl;
	r->ignore_eos = true; /* otherwise req_new's neutral values: greedy, no log-probs */

	g->content_sum = h;
	g->shape_sum = wl_fnv_u32(wl_fnv_u32(g->shape_sum, (uint32_t)isl), (uint32_t)osl);
	g->prompt_tokens += isl;
	g->output_tokens += (int64_t)osl * (g->spec.n_samples > 1	? g->spec.n_samples
					    : g->spec.beam_width > 1 ? g->spec.beam_width
								     : 1);
	g->made++;
	*out = r;
	return 1;
}

int wl_source(void *user, struct request **out, struct bg_err *err)
{
	return wl_gen_next(user, out, err);
}

int64_t wl_gen_count(const struct wl_gen *g)
{
	return g->made;
}

uint64_t wl_gen_shape_checksum(const struct wl_gen *g)
{
	return g->shape_sum;
}

uint64_t wl_gen_content_checksum(const struct wl_gen *g)
{
	return g->content_sum;
}

int64_t wl_gen_prompt_tokens(const struct wl_gen *g)
{
	return g->prompt_tokens;
}

int64_t wl_gen_output_tokens(const struct wl_gen *g)
{
	return g->output_tokens;
}
