/* cmd_bench: `batchgen bench` — a benchmark workload (core/workload) through the real
 * engine, reported as a table on stderr and as JSON (--report), optionally compared with
 * an earlier report (--baseline, exit 4 on a regression).
 *
 * The run has two phases on one backend: a warm-up (--warmup requests of the same shape,
 * from another seed, not counted: page faults, thread start-up, caches) and the measured
 * run, each through its own engine so that the measured totals start at zero.
 *
 * "Configuration", the things two reports must share to be compared: the model (name,
 * architecture, parameter count, weight bytes, vocabulary, layers, width), the device
 * (backend and its description), and the options that change the work or its speed:
 * policy, preempt, max-batch-size, max-num-tokens, chunked context, overlap (when given),
 * max-queued, block size, kv-tokens, mem-fraction, max-seq-len, threads. The workload must match too: its
 * canonical spec (name and count), seed and request-shape checksum. Everything else
 * (paths, --report, --stats, timings) may differ.
 *
 * B1 (the decode micro-benchmark: batch {1, 8, 64, 256} x context {512, 2048}, 128 steps)
 * runs each cell as `batch` requests of ISL = context and reports the decode rate measured
 * over the iterations in which every request of the cell produced a token (pure decode
 * steps). On the CPU backend it is refused: its cells prefill about 840,000 tokens in
 * all, hours on a CPU; use a fixed shape (`--workload 512/128x8`) there.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "io/workload.h"
#include "gpu/backend_cuda.h"
#include "cli/commands.h"
#include "cli/json_file.h"
#include "cli/options.h"
#include "cli/outputs.h"
#include "cli/version.h"

#define BENCH_SCHEMA "batchgen-bench/1"
/* The warm-up set's seed differs from the measured one by this constant ("WARMUP"). */
#define BENCH_WARMUP_SEED_XOR 0x5741524D5550ull

/* The one piece of process state a signal handler may touch (C11 7.14.1.1). */
static volatile sig_atomic_t bench_stop;

static void bench_on_signal(int sig)
{
	(void)sig;
	bench_stop = 1;
}

/* CPU seconds (user + system) of the whole process, every thread included. */
static double bench_cpu_s(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0.0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- collecting one phase ------------------------------------------------------------- */

/* engine_run hands one user pointer to the source, the sink and the progress callback:
 * this is it, for one phase (warm-up, measured run, or one B1 cell). */
struct bench_phase {
	struct wl_gen *gen;
	int64_t n;	  /* requests expected */
	int64_t n_done;	  /* results received */
	int64_t n_failed; /* results with an error or fewer tokens than asked */
	double *ttft_ms;  /* [n] first n_done used */
	double *e2e_ms;	  /* [n] first n_done used */
	double *tpot_ms;  /* [n] first n_tpot used: requests with >= 2 output tokens */
	int64_t n_tpot;
	int64_t prompt_tokens, output_tokens;
	int64_t preemptions;
	int64_t reused_blocks, missed_blocks, cached_tokens; /* block reuse */
	int64_t swap_out_bytes, swap_in_bytes, recomputed_tokens; /* preemption traffic */
	double cpu_s; /* process CPU time during the run: less sensitive to a busy machine */
	char first_error[400];
	/* per iteration, from the progress callback */
	int64_t iters;
	double sum_active;
	int32_t kv_peak;
	int64_t last_output; /* output tokens after the previous iteration */
	double last_elapsed;
	/* B1: pure decode iterations of a cell, those in which every one of decode_batch
	 * requests made a token, as in the iteration before (so the iteration that finished
	 * the last prompt is not counted) */
	int32_t decode_batch;
	int64_t prev_delta;
	double decode_s;
	int64_t decode_tokens;
	/* progress lines */
	double next_print, print_every;
	bool quiet;
	const char *label;
};

static bool bench_phase_init(struct bench_phase *p, struct wl_gen *gen, int64_t n,
			     const char *label, bool quiet, double print_every)
{
	memset(p, 0, sizeof *p);
	p->gen = gen;
	p->n = n;
	p->ttft_ms = malloc((size_t)n * sizeof(double));
	p->e2e_ms = malloc((size_t)n * sizeof(double));
	p->tpot_ms = malloc((size_t)n * sizeof(double));
	p->label = label;
	p->quiet = quiet;
	p->print_every = print_every;
	p->next_print = print_every;
	return p->ttft_ms && p->e2e_ms && p->tpot_ms;
}

static void bench_phase_free(struct bench_phase *p)
{
	free(p->ttft_ms);
	free(p->e2e_ms);
	free(p->tpot_ms);
	memset(p, 0, sizeof *p);
}

static int bench_source(void *user, struct request **out, struct bg_err *err)
{
	struct bench_phase *p = user;
	return wl_gen_next(p->gen, out, err);
}

static int bench_sink(void *user, struct request *r)
{
	struct bench_phase *p = user;
	/* every benchmark request ignores EOS and must produce exactly max_tokens tokens */
	bool ok =
	    r->error.code[0] == 0 && r->finish == REQ_FINISH_LENGTH &&
	    r->n_out == r->max_tokens * (r->n_choices > 0 ? r->n_choices : 1);
	if (!ok) {
		if (p->n_failed == 0)
			snprintf(p->first_error, sizeof p->first_error,
				 "request %s: finish %s, %d of %d tokens%s%s", r->id ? r->id : "?",
				 req_finish_name(r->finish), r->n_out, r->max_tokens,
				 r->error.message[0] ? ": " : "", r->error.message);
		p->n_failed++;
	}
	if (p->n_done < p->n) {
		p->ttft_ms[p->n_done] = r->ttft_ms;
		p->e2e_ms[p->n_done] = r->e2e_ms;
		if (r->n_out >= 2)
			p->tpot_ms[p->n_tpot++] = (r->e2e_ms - r->ttft_ms) / (double)(r->n_out - 1);
	}
	p->n_done++;
	p->prompt_tokens += r->n_prompt;
	p->output_tokens += r->n_out;
	p->preemptions += r->preemptions;
	req_free(r);
	return 0;
}

static void bench_progress(void *user, const struct engine_progress *e)
{
	struct bench_phase *p = user;
	p->iters++;
	p->sum_active += (double)e->n_active;
	if (e->kv_peak_blocks > p->kv_peak)
		p->kv_peak = e->kv_peak_blocks;
	int64_t delta = e->output_tokens - p->last_output;
	double dt = e->elapsed_s - p->last_elapsed;
	if (p->decode_batch > 0 && delta == p->decode_batch && p->prev_delta == p->decode_batch) {
		p->decode_s += dt;
		p->decode_tokens += delta;
	}
	p->prev_delta = delta;
	p->last_output = e->output_tokens;
	p->last_elapsed = e->elapsed_s;
	if (!p->quiet && e->elapsed_s >= p->next_print) {
		p->next_print = e->elapsed_s + p->print_every;
		fprintf(stderr,
			"bench %s: %" PRId64 "/%" PRId64 " done, %" PRId64
			" active, %.1f output tok/s, %.1f s\n",
			p->label[0] ? p->label : "run", e->n_done, p->n, e->n_active,
			e->elapsed_s > 0 ? (double)e->output_tokens / e->elapsed_s : 0.0,
			e->elapsed_s);
	}
}

/* Runs the phase's requests through a fresh engine. Returns BG_OK or the engine's failure
 * (err set); *interrupted when a signal stopped it. */
static enum bg_status bench_run_phase(const struct engine_config *ecfg, struct opt_runtime *rt,
				      struct bench_phase *p, double *wall_s, bool *interrupted,
				      struct bg_err *err)
{
	struct engine *e = NULL;
	*wall_s = 0;
	*interrupted = false;
	enum bg_status st = engine_create(ecfg, rt->backend, rt->tok, &rt->model->hp, &e, err);
	if (st != BG_OK)
		return st;
	int64_t unfinished = 0;
	double c0 = bench_cpu_s();
	double t0 = bench_now();
	st = engine_run(e, bench_source, bench_sink, bench_progress, p, &bench_stop, &unfinished,
			err);
	*wall_s = bench_now() - t0;
	p->cpu_s = bench_cpu_s() - c0;
	*interrupted = bench_stop != 0;
	struct engine_progress tot;
	engine_totals(e, &tot);
	if (tot.kv_peak_blocks > p->kv_peak)
		p->kv_peak = tot.kv_peak_blocks;
	if (tot.preemptions > p->preemptions)
		p->preemptions = tot.preemptions;
	p->reused_blocks += tot.reused_blocks;
	p->missed_blocks += tot.missed_blocks;
	p->cached_tokens += tot.cached_tokens;
	p->swap_out_bytes += tot.swap_out_bytes;
	p->swap_in_bytes += tot.swap_in_bytes;
	p->recomputed_tokens += tot.recomputed_tokens;
	engine_destroy(e);
	return st;
}

/* ---- numbers -------------------------------------------------------------------------- */

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Percentile q in [0, 100] of v[n] (sorted in place), by linear interpolation between
 * closest ranks (numpy's default), so p50 of an even count is the mean of the middle two. */
static double bench_percentile(double *v, int64_t n, double q, bool *sorted)
{
	if (n <= 0)
		return 0.0;
	if (!*sorted) {
		qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
		*sorted = true;
	}
	double pos = q / 100.0 * (double)(n - 1);
	int64_t lo = (int64_t)floor(pos);
	int64_t hi = lo + 1 < n ? lo + 1 : lo;
	return v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
}

static cJSON *bench_dist(double *v, int64_t n)
{
	bool sorted = false;
	double sum = 0;
	for (int64_t i = 0; i < n; i++)
		sum += v[i];
	cJSON *o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "mean", n ? sum / (double)n : 0.0);
	cJSON_AddNumberToObject(o, "p50", bench_percentile(v, n, 50, &sorted));
	cJSON_AddNumberToObject(o, "p90", bench_percentile(v, n, 90, &sorted));
	cJSON_AddNumberToObject(o, "p99", bench_percentile(v, n, 99, &sorted));
	cJSON_AddNumberToObject(o, "max", n ? v[n - 1] : 0.0);
	return o;
}

/* Token ids for random prompts: [lo, hi) avoiding the special tokens at either end of the
 * vocabulary (Llama 1/2: <unk> <s> </s> are 0..2; Llama 3: the specials are 128000 and up).
 * Without a tokenizer: [3, n_vocab). */
static void bench_id_range(const struct opt_runtime *rt, int32_t *lo, int32_t *hi)
{
	int32_t n = (int32_t)rt->model->hp.n_vocab;
	*lo = n > 3 ? 3 : 0;
	*hi = n;
	if (!rt->tok)
		return;
	int32_t special[3] = {tok_bos(rt->tok), tok_eos(rt->tok), tok_eot(rt->tok)};
	for (int i = 0; i < 3; i++) {
		int32_t id = special[i];
		if (id < 0 || id >= n)
			continue;
		if (id < n / 2 && id + 1 > *lo)
			*lo = id + 1;
		if (id >= n / 2 && id < *hi)
			*hi = id;
	}
	if (*lo >= *hi) { /* a degenerate vocabulary: fall back to everything */
		*lo = 0;
		*hi = n;
	}
}

/* ---- the report ----------------------------------------------------------------------- */

static const char *bench_policy_name(int p)
{
	static const char *names[] = {"no-evict", "max-util", "static", "adaptive"};
	return p >= 0 && p < 3 ? names[p] : "?";
}

static void bench_hex(char *buf, size_t cap, uint64_t v)
{
	snprintf(buf, cap, "%016" PRIx64, v);
}

/* The engine and backend options (policy ... threads), into o: part of both the compared
 * configuration and the record of every option. */
static void bench_engine_options_json(cJSON *o, const struct opt_config *c)
{
	cJSON_AddStringToObject(o, "policy", bench_policy_name(c->policy));
	cJSON_AddStringToObject(o, "preempt",
				c->preempt == ENGINE_PREEMPT_SWAP ? "swap" : "recompute");
	cJSON_AddNumberToObject(o, "max_batch_size", c->max_batch_size);
	cJSON_AddNumberToObject(o, "max_num_tokens", c->max_num_tokens);
	cJSON_AddBoolToObject(o, "chunked_context", c->chunked_context);
	cJSON_AddBoolToObject(o, "prefix_cache", c->prefix_cache);
	/* only when chosen: a default run still compares with a report made before the
	 * option existed (the engine's default then was what auto does on the CPU) */
	if (c->overlap)
		cJSON_AddStringToObject(o, "overlap", c->overlap == 1 ? "off" : "on");
	cJSON_AddNumberToObject(o, "max_queued", c->max_queued);
	cJSON_AddNumberToObject(o, "block_size", c->block_size);
	cJSON_AddNumberToObject(o, "kv_tokens", (double)c->kv_tokens);
	cJSON_AddNumberToObject(o, "mem_fraction", c->mem_fraction);
	cJSON_AddNumberToObject(o, "max_seq_len", c->max_seq_len);
	cJSON_AddNumberToObject(o, "threads", c->threads);
}

/* The configuration two comparable reports share (see the top of this file). */
static cJSON *bench_config_json(const struct opt_config *c, const struct opt_runtime *rt)
{
	const struct model *m = rt->model;
	cJSON *o = cJSON_CreateObject();
	cJSON *mo = cJSON_AddObjectToObject(o, "model");
	cJSON_AddStringToObject(mo, "name", m->name);
	cJSON_AddStringToObject(mo, "arch", m->arch);
	cJSON_AddNumberToObject(mo, "n_params", (double)m->n_params);
	cJSON_AddNumberToObject(mo, "weight_bytes", (double)m->weight_bytes);
	cJSON_AddNumberToObject(mo, "n_vocab", m->hp.n_vocab);
	cJSON_AddNumberToObject(mo, "n_layer", m->hp.n_layer);
	cJSON_AddNumberToObject(mo, "n_embd", m->hp.n_embd);
	cJSON *d = cJSON_AddObjectToObject(o, "device");
	cJSON_AddStringToObject(d, "backend", rt->backend->name ? rt->backend->name : "?");
	cJSON_AddStringToObject(d, "description", rt->backend->device);
	bench_engine_options_json(o, c);
	return o;
}

/* Every option as given (or defaulted), for the record; not compared. */
static cJSON *bench_options_json(const struct opt_config *c)
{
	char dev[32];
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "model", c->model ? c->model : "(built-in)");
	cJSON_AddStringToObject(o, "workload", c->workload ? c->workload : "");
	cJSON_AddNumberToObject(o, "requests", (double)c->requests);
	cJSON_AddNumberToObject(o, "warmup", c->warmup);
	cJSON_AddNumberToObject(o, "seed", (double)c->seed);
	cJSON_AddStringToObject(o, "device", opt_device_name(c, dev, sizeof dev));
	bench_engine_options_json(o, c);
	if (c->stats)
		cJSON_AddStringToObject(o, "stats", c->stats);
	if (c->report)
		cJSON_AddStringToObject(o, "report", c->report);
	if (c->baseline) {
		cJSON_AddStringToObject(o, "baseline", c->baseline);
		cJSON_AddNumberToObject(o, "max_regression_pct", c->max_regression);
	}
	return o;
}

static void bench_utc_now(char *buf, size_t cap)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Reads a JSON file. NULL with msg set on failure. */
static cJSON *bench_read_json(const char *path, char *msg, size_t cap)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(msg, cap, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	size_t len = 0, size = 4096;
	char *buf = malloc(size);
	size_t got;
	while (buf && (got = fread(buf + len, 1, size - len, f)) > 0) {
		len += got;
		if (len == size) {
			char *nb = size < (64u << 20) ? realloc(buf, size * 2) : NULL;
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			size *= 2;
		}
	}
	fclose(f);
	if (!buf) {
		snprintf(msg, cap, "%s is too large or memory ran out", path);
		return NULL;
	}
	cJSON *root = cJSON_ParseWithLength(buf, len);
	free(buf);
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		snprintf(msg, cap, "%s is not a JSON object", path);
		return NULL;
	}
	return root;
}

static double bench_num(const cJSON *o, const char *a, const char *b)
{
	const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
	if (b)
		x = cJSON_GetObjectItemCaseSensitive(x, b);
	return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* Names the first difference between two JSON values (objects recursively) in buf;
 * false when they are equal. */
static bool bench_first_diff(const cJSON *a, const cJSON *b, const char *path, char *buf,
			     size_t cap)
{
	if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
		const cJSON *x;
		char sub[256];
		cJSON_ArrayForEach(x, a)
		{
			snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", x->string);
			const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
			if (!y) {
				snprintf(buf, cap, "%s is missing from the baseline", sub);
				return true;
			}
			if (bench_first_diff(x, y, sub, buf, cap))
				return true;
		}
		cJSON_ArrayForEach(x, b)
		{
			if (!cJSON_GetObjectItemCaseSensitive(a, x->string)) {
				snprintf(buf, cap, "%s%s%s is only in the baseline", path,
					 *path ? "." : "", x->string);
				return true;
			}
		}
		return false;
	}
	if (cJSON_Compare(a, b, true))
		return false;
	char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
	snprintf(buf, cap, "%s is %s here but %s in the baseline", path, ta ? ta : "?",
		 tb ? tb : "?");
	free(ta);
	free(tb);
	return true;
}

/* Whether the baseline can be compared with this run (same schema, workload and
 * configuration): CLI_EXIT_OK, or CLI_EXIT_USAGE with a sentence on stderr. Needs only the
 * report's fixed parts, so it runs before any work. */
static int bench_comparable(const cJSON *now, const cJSON *base, const char *base_path)
{
	const cJSON *schema = cJSON_GetObjectItemCaseSensitive(base, "schema");
	if (!cJSON_IsString(schema) || strcmp(schema->valuestring, BENCH_SCHEMA) != 0) {
		fprintf(stderr,
			"batchgen bench: %s is not a batchgen bench report (schema %s); "
			"refusing to compare\n",
			base_path, BENCH_SCHEMA);
		return CLI_EXIT_USAGE;
	}
	char why[600];
	const cJSON *wn = cJSON_GetObjectItemCaseSensitive(now, "workload");
	const cJSON *wb = cJSON_GetObjectItemCaseSensitive(base, "workload");
	static const char *wkeys[] = {"spec", "seed", "shape_checksum"};
	for (size_t i = 0; i < sizeof wkeys / sizeof wkeys[0]; i++) {
		const cJSON *x = cJSON_GetObjectItemCaseSensitive(wn, wkeys[i]);
		const cJSON *y = cJSON_GetObjectItemCaseSensitive(wb, wkeys[i]);
		if (!y || !cJSON_Compare(x, y, true)) {
			char key[64];
			snprintf(key, sizeof key, "workload.%s", wkeys[i]);
			if (y)
				bench_first_diff(x, y, key, why, sizeof why);
			else
				snprintf(why, sizeof why, "%s is missing from the baseline", key);
			fprintf(stderr,
				"batchgen bench: the baseline %s ran a different workload (%s); "
				"refusing to compare\n",
				base_path, why);
			return CLI_EXIT_USAGE;
		}
	}
	if (bench_first_diff(cJSON_GetObjectItemCaseSensitive(now, "config"),
			     cJSON_GetObjectItemCaseSensitive(base, "config"), "config", why,
			     sizeof why)) {
		fprintf(stderr,
			"batchgen bench: the baseline %s ran a different configuration (%s); "
			"refusing to compare\n",
			base_path, why);
		return CLI_EXIT_USAGE;
	}
	return CLI_EXIT_OK;
}

/* Compares output tok/s with the baseline's (already found comparable): CLI_EXIT_OK or
 * CLI_EXIT_REGRESSION (a drop beyond max_regression_pct percent), CLI_EXIT_USAGE when the
 * baseline has no usable figure. */
static int bench_compare(const cJSON *now, const cJSON *base, const char *base_path,
			 double max_regression_pct)
{
	double a = bench_num(now, "results", "output_tok_s");
	double b = bench_num(base, "results", "output_tok_s");
	if (!(b > 0) || !isfinite(a)) {
		fprintf(stderr,
			"batchgen bench: the baseline %s has no positive results.output_tok_s; "
			"refusing to compare\n",
			base_path);
		return CLI_EXIT_USAGE;
	}
	double change = a / b - 1.0;
	bool regressed = a < b * (1.0 - max_regression_pct / 100.0);
	fprintf(
	    stderr,
	    "batchgen bench: output tok/s %.2f vs baseline %.2f (%+.1f%%, allowed -%.1f%%): %s\n",
	    a, b, 100.0 * change, max_regression_pct, regressed ? "REGRESSION" : "ok");
	return regressed ? CLI_EXIT_REGRESSION : CLI_EXIT_OK;
}

static void bench_print_table(const cJSON *rep)
{
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(rep, "workload");
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(rep, "config");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(cfg, "model");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(cfg, "device");
	const char *spec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(w, "spec"));
	const char *mname = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "name"));
	const char *dev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "description"));
	fprintf(stderr, "\n== batchgen bench %s | %s (%.1fM params) | %s\n", spec ? spec : "?",
		mname ? mname : "?", bench_num(m, "n_params", NULL) / 1e6, dev ? dev : "?");
	const cJSON *cells = cJSON_GetObjectItemCaseSensitive(rep, "cells");
	if (cJSON_IsArray(cells)) { /* B1: the grid only */
		fprintf(stderr, "  %-6s %-8s %14s %12s %14s\n", "batch", "context", "decode tok/s",
			"step ms", "GB/s");
		const cJSON *c;
		cJSON_ArrayForEach(c, cells)
		{
			if (cJSON_GetObjectItemCaseSensitive(c, "skipped")) {
				fprintf(stderr, "  %-6.0f %-8.0f %14s\n",
					bench_num(c, "batch", NULL), bench_num(c, "context", NULL),
					"skipped");
				continue;
			}
			fprintf(stderr, "  %-6.0f %-8.0f %14.1f %12.3f %14.1f\n",
				bench_num(c, "batch", NULL), bench_num(c, "context", NULL),
				bench_num(c, "decode_tok_s", NULL), bench_num(c, "step_ms", NULL),
				bench_num(c, "achieved_gb_s", NULL));
		}
		fputc('\n', stderr);
		return;
	}
	const cJSON *r = cJSON_GetObjectItemCaseSensitive(rep, "results");
	fprintf(stderr, "  %-22s %12.0f   %-22s %12.3f\n", "requests",
		bench_num(r, "requests", NULL), "wall s", bench_num(r, "wall_s", NULL));
	fprintf(stderr, "  %-22s %12.0f   %-22s %12.0f\n", "prompt tokens",
		bench_num(r, "prompt_tokens", NULL), "output tokens",
		bench_num(r, "output_tokens", NULL));
	fprintf(stderr, "  %-22s %12.2f   %-22s %12.2f\n", "output tok/s",
		bench_num(r, "output_tok_s", NULL), "total tok/s",
		bench_num(r, "total_tok_s", NULL));
	fprintf(stderr, "  %-22s %12.3f   %-22s %12.0f\n", "requests/s",
		bench_num(r, "requests_s", NULL), "iterations", bench_num(r, "iterations", NULL));
	fprintf(stderr, "  %-22s %12.2f   %-22s %5.0f / %-5.0f\n", "mean batch size",
		bench_num(r, "mean_batch_size", NULL), "peak KV blocks",
		bench_num(r, "peak_kv_blocks", NULL), bench_num(r, "kv_blocks_total", NULL));
	fprintf(stderr, "  %-22s %12.0f   %-22s %12.0f\n", "preemptions",
		bench_num(r, "preemptions", NULL), "failed requests", bench_num(r, "failed", NULL));
	fprintf(stderr, "  %-22s %12.3f   %-22s %12.3f\n", "CPU s", bench_num(r, "cpu_s", NULL),
		"CPU ms / output token", bench_num(r, "cpu_ms_per_output_token", NULL));
	fprintf(stderr, "  %-10s %10s %10s %10s %10s\n", "ms", "mean", "p50", "p90", "p99");
	static const char *lat[] = {"ttft_ms", "tpot_ms", "e2e_ms"};
	static const char *latname[] = {"TTFT", "TPOT", "E2E"};
	for (int i = 0; i < 3; i++) {
		const cJSON *o = cJSON_GetObjectItemCaseSensitive(r, lat[i]);
		fprintf(stderr, "  %-10s %10.2f %10.2f %10.2f %10.2f\n", latname[i],
			bench_num(o, "mean", NULL), bench_num(o, "p50", NULL),
			bench_num(o, "p90", NULL), bench_num(o, "p99", NULL));
	}
	fputc('\n', stderr);
}

/* ---- the command ---------------------------------------------------------------------- */

/* Adds the results of a measured phase to rep. */
static void bench_add_results(cJSON *rep, struct bench_phase *p, double wall_s,
			      const struct backend *b)
{
	cJSON *r = cJSON_AddObjectToObject(rep, "results");
	double w = wall_s > 0 ? wall_s : 1e-9;
	cJSON_AddNumberToObject(r, "requests", (double)p->n_done);
	cJSON_AddNumberToObject(r, "failed", (double)p->n_failed);
	cJSON_AddNumberToObject(r, "wall_s", wall_s);
	cJSON_AddNumberToObject(r, "cpu_s", p->cpu_s);
	cJSON_AddNumberToObject(r, "cpu_ms_per_output_token",
				p->output_tokens ? p->cpu_s * 1e3 / (double)p->output_tokens : 0.0);
	cJSON_AddNumberToObject(r, "prompt_tokens", (double)p->prompt_tokens);
	cJSON_AddNumberToObject(r, "output_tokens", (double)p->output_tokens);
	cJSON_AddNumberToObject(r, "output_tok_s", (double)p->output_tokens / w);
	cJSON_AddNumberToObject(r, "total_tok_s",
				(double)(p->prompt_tokens + p->output_tokens) / w);
	cJSON_AddNumberToObject(r, "requests_s", (double)p->n_done / w);
	int64_t n = p->n_done < p->n ? p->n_done : p->n;
	cJSON_AddItemToObject(r, "ttft_ms", bench_dist(p->ttft_ms, n));
	cJSON_AddItemToObject(r, "tpot_ms", bench_dist(p->tpot_ms, p->n_tpot));
	cJSON_AddItemToObject(r, "e2e_ms", bench_dist(p->e2e_ms, n));
	cJSON_AddNumberToObject(r, "iterations", (double)p->iters);
	cJSON_AddNumberToObject(r, "mean_batch_size",
				p->iters ? p->sum_active / (double)p->iters : 0.0);
	cJSON_AddNumberToObject(r, "peak_kv_blocks", p->kv_peak);
	cJSON_AddNumberToObject(r, "kv_blocks_total", b->n_blocks);
	cJSON_AddNumberToObject(r, "kv_tokens_total", (double)b->n_blocks * b->block_size);
	cJSON_AddNumberToObject(r, "preemptions", (double)p->preemptions);
	cJSON_AddNumberToObject(r, "prompt_tok_s", (double)p->prompt_tokens / w);
	cJSON_AddNumberToObject(r, "reused_blocks", (double)p->reused_blocks);
	cJSON_AddNumberToObject(r, "missed_blocks", (double)p->missed_blocks);
	int64_t looked = p->reused_blocks + p->missed_blocks;
	cJSON_AddNumberToObject(r, "cache_hit_rate",
				looked ? (double)p->reused_blocks / (double)looked : 0.0);
	cJSON_AddNumberToObject(r, "cached_tokens", (double)p->cached_tokens);
	cJSON_AddNumberToObject(r, "swap_out_bytes", (double)p->swap_out_bytes);
	cJSON_AddNumberToObject(r, "swap_in_bytes", (double)p->swap_in_bytes);
	cJSON_AddNumberToObject(r, "recomputed_tokens", (double)p->recomputed_tokens);
}

/* One phase of n requests of spec from seed: generator, engine, collection. Returns an
 * exit status (OK when the phase ran, even with failed requests). */
static int bench_phase_run(const struct opt_config *c, struct opt_runtime *rt,
			   const struct engine_config *ecfg, const struct wl_spec *spec, int64_t n,
			   uint64_t seed, int32_t lo, int32_t hi, const char *label,
			   int32_t decode_batch, struct bench_phase *p, struct wl_gen **gen_out,
			   double *wall_s)
{
	struct bg_err err = {0};
	struct wl_gen *gen = NULL;
	*gen_out = NULL;
	*wall_s = 0;
	memset(p, 0, sizeof *p); /* bench_phase_free is safe whatever happens below */
	if (wl_gen_create(spec, n, seed, lo, hi, label, &gen, &err) != BG_OK) {
		fprintf(stderr, "batchgen bench: %s\n", err.msg);
		return CLI_EXIT_USAGE;
	}
	if (!bench_phase_init(p, gen, n, label, c->quiet, c->progress_interval)) {
		wl_gen_destroy(gen);
		fprintf(stderr, "batchgen bench: out of memory\n");
		return CLI_EXIT_MODEL;
	}
	p->decode_batch = decode_batch;
	bool interrupted = false;
	enum bg_status st = bench_run_phase(ecfg, rt, p, wall_s, &interrupted, &err);
	*gen_out = gen;
	if (interrupted) {
		fprintf(stderr, "batchgen bench: interrupted; no report written\n");
		return CLI_EXIT_INTERRUPTED;
	}
	if (st != BG_OK) {
		fprintf(stderr, "batchgen bench: %s failed: %s\n", label, err.msg);
		return st == BG_ERR_INVALID || st == BG_ERR_CAPACITY ? CLI_EXIT_USAGE
								     : CLI_EXIT_MODEL;
	}
	return CLI_EXIT_OK;
}

/* B1: one engine run per cell (see the top of this file). Fills rep's "cells". */
static int bench_b1(const struct opt_config *c, struct opt_runtime *rt,
		    const struct engine_config *base_cfg, uint64_t seed, int32_t lo, int32_t hi,
		    cJSON *rep)
{
	const struct backend *b = rt->backend;
	int64_t pool_tokens = (int64_t)b->n_blocks * b->block_size;
	double kv_bytes_per_token = b->block_size > 0 ? (double)b->block_bytes / b->block_size : 0;
	cJSON *cells = cJSON_AddArrayToObject(rep, "cells");
	for (int i = 0; i < wl_b1_cells(); i++) {
		int32_t batch, ctx, steps;
		wl_b1_cell(i, &batch, &ctx, &steps);
		cJSON *cell = cJSON_CreateObject();
		cJSON_AddItemToArray(cells, cell);
		cJSON_AddNumberToObject(cell, "batch", batch);
		cJSON_AddNumberToObject(cell, "context", ctx);
		cJSON_AddNumberToObject(cell, "steps", steps);
		/* a cell is skipped, not failed, when the machine cannot hold it */
		int64_t need = (int64_t)batch * (ctx + steps + 1);
		if (need > pool_tokens || ctx + steps + 1 > (int32_t)rt->model->hp.n_ctx_train) {
			cJSON_AddStringToObject(cell, "skipped",
						"the KV pool or the model's context is too small");
			continue;
		}
		struct wl_spec s = {.kind = WL_FIXED, .isl = ctx, .osl = steps + 1};
		snprintf(s.name, sizeof s.name, "%d/%d", ctx, steps + 1);
		struct engine_config ecfg = *base_cfg;
		ecfg.max_batch_size = batch;
		struct bench_phase p;
		struct wl_gen *gen = NULL;
		double wall = 0;
		char label[32];
		snprintf(label, sizeof label, "b%d-c%d-", batch, ctx);
		int rc = bench_phase_run(c, rt, &ecfg, &s, batch, seed, lo, hi, label, batch, &p,
					 &gen, &wall);
		wl_gen_destroy(gen);
		double step_s =
		    p.decode_tokens > 0 ? p.decode_s / ((double)p.decode_tokens / batch) : 0.0;
		double bytes = (double)rt->model->weight_bytes +
			       (double)batch * (ctx + steps / 2.0) * kv_bytes_per_token;
		cJSON_AddNumberToObject(cell, "wall_s", wall);
		cJSON_AddNumberToObject(cell, "decode_steps_measured",
					p.decode_tokens > 0 ? (double)p.decode_tokens / batch : 0);
		cJSON_AddNumberToObject(cell, "decode_tok_s",
					p.decode_s > 0 ? (double)p.decode_tokens / p.decode_s
						       : 0.0);
		cJSON_AddNumberToObject(cell, "step_ms", step_s * 1e3);
		cJSON_AddNumberToObject(cell, "bytes_per_step", bytes);
		cJSON_AddNumberToObject(cell, "achieved_gb_s",
					step_s > 0 ? bytes / step_s / 1e9 : 0);
		cJSON_AddNumberToObject(cell, "failed", (double)p.n_failed);
		bench_phase_free(&p);
		if (rc != CLI_EXIT_OK)
			return rc;
	}
	return CLI_EXIT_OK;
}

int cmd_bench(int argc, char **argv)
{
	struct opt_config c;
	int code;
	if (!opt_parse(&c, OPT_CMD_BENCH, argc, argv, &code))
		return code;
	struct bg_err err = {0};
	struct wl_spec spec;
	if (wl_parse(c.workload, &spec, &err) != BG_OK) {
		fprintf(stderr, "batchgen bench: %s\n", err.msg);
		return CLI_EXIT_USAGE;
	}
	int64_t n = c.requests > 0 ? c.requests : spec.n_requests;
	/* --stats and --report: "-" is standard output for either, not both; never one file */
	const struct output_name outs[] = {{"--stats", "statistics", c.stats},
					   {"--report", "report", c.report}};
	if (!outputs_check("batchgen bench", outs, 2))
		return CLI_EXIT_USAGE;
	char msg[600];
	cJSON *base = NULL;
	if (c.baseline) { /* an unreadable baseline is found before any work is done */
		base = bench_read_json(c.baseline, msg, sizeof msg);
		if (!base) {
			fprintf(stderr, "batchgen bench: --baseline: %s\n", msg);
			return CLI_EXIT_USAGE;
		}
	}
	bool cuda = opt_use_cuda(&c);
	if (spec.kind == WL_DECODE_GRID && !cuda) {
		fprintf(
		    stderr,
		    "batchgen bench: B1 (the decode grid up to batch 256 x context 2048) runs on "
		    "CUDA only: on the CPU its prefill alone takes hours. Use a fixed shape "
		    "there, e.g. --workload 512/128x8 --max-batch-size 8\n");
		cJSON_Delete(base);
		return CLI_EXIT_USAGE;
	}
	struct opt_runtime rt;
	/* a synthetic model on the GPU is filled there (lazy): no host copy of its weights */
	if (opt_open_runtime(&c, cuda, &rt, &err) != BG_OK) {
		fprintf(stderr, "batchgen bench: %s\n", err.msg);
		cJSON_Delete(base);
		return CLI_EXIT_MODEL;
	}
	int32_t lo, hi;
	bench_id_range(&rt, &lo, &hi);
	uint64_t seed = c.seed;

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = bench_on_signal;
	sigemptyset(&sa.sa_mask);
	struct sigaction old_int, old_term;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	bench_stop = 0;

	struct engine_config ecfg;
	opt_engine_config(&c, &ecfg);
	ecfg.order = ENGINE_ORDER_COMPLETION; /* nothing is written: no reorder buffer */
	FILE *stats = NULL;
	cJSON *rep = NULL;
	struct bench_phase p;
	memset(&p, 0, sizeof p);
	struct wl_gen *gen = NULL;
	int rc = CLI_EXIT_OK;

	int64_t n_warm = c.warmup < n ? c.warmup : n;
	struct wl_spec warm_spec = spec;
	if (spec.kind == WL_DECODE_GRID) { /* a short fixed shape warms the kernels */
		warm_spec.kind = WL_FIXED;
		warm_spec.isl = 512;
		warm_spec.osl = 8;
		n_warm = c.warmup;
	}

	/* ---- the report's fixed parts ---- */
	rep = cJSON_CreateObject();
	char buf[128];
	cJSON_AddStringToObject(rep, "schema", BENCH_SCHEMA);
	cJSON *bg = cJSON_AddObjectToObject(rep, "batchgen");
	cJSON_AddStringToObject(bg, "version", cli_version());
	cJSON_AddStringToObject(bg, "commit", cli_commit());
	bench_utc_now(buf, sizeof buf);
	cJSON_AddStringToObject(rep, "timestamp", buf);
	cJSON *host = cJSON_AddObjectToObject(rep, "host");
	if (gethostname(buf, sizeof buf) == 0) {
		buf[sizeof buf - 1] = 0;
		cJSON_AddStringToObject(host, "hostname", buf);
	}
	cJSON_AddNumberToObject(host, "online_cpus", (double)sysconf(_SC_NPROCESSORS_ONLN));
	cJSON_AddStringToObject(rep, "model_spec", c.model ? c.model : "(built-in)");
	cJSON *w = cJSON_AddObjectToObject(rep, "workload");
	wl_format(&spec, n, buf, sizeof buf);
	cJSON_AddStringToObject(w, "spec", buf);
	cJSON_AddStringToObject(w, "name", spec.name);
	snprintf(buf, sizeof buf, "%" PRIu64, seed);
	cJSON_AddStringToObject(w, "seed", buf);
	cJSON *range = cJSON_AddArrayToObject(w, "token_id_range");
	cJSON_AddItemToArray(range, cJSON_CreateNumber(lo));
	cJSON_AddItemToArray(range, cJSON_CreateNumber(hi));
	cJSON_AddNumberToObject(w, "warmup_requests", (double)n_warm);
	if (spec.kind == WL_DECODE_GRID) {
		cJSON_AddNumberToObject(w, "requests", 0);
		cJSON_AddStringToObject(w, "shape_checksum", "b1");
	} else {
		cJSON_AddNumberToObject(w, "requests", (double)n);
		bench_hex(buf, sizeof buf, wl_shapes_checksum(&spec, seed, n));
		cJSON_AddStringToObject(w, "shape_checksum", buf);
	}
	cJSON_AddItemToObject(rep, "config", bench_config_json(&c, &rt));
	cJSON_AddItemToObject(rep, "options", bench_options_json(&c));

	if (base) { /* refuse an incomparable baseline before any work */
		rc = bench_comparable(rep, base, c.baseline);
		if (rc != CLI_EXIT_OK)
			goto done;
	}

	/* opened before any work: a name that cannot be written fails at once */
	if (c.stats) {
		stats = outputs_open(c.stats, "w");
		if (!stats) {
			fprintf(stderr, "batchgen bench: cannot write --stats %s: %s\n", c.stats,
				strerror(errno));
			rc = CLI_EXIT_USAGE;
			goto done;
		}
	}

	/* ---- warm-up: the same shapes from another seed, not counted ---- */
	if (n_warm > 0) {
		double wall;
		rc = bench_phase_run(&c, &rt, &ecfg, &warm_spec, n_warm,
				     seed ^ BENCH_WARMUP_SEED_XOR, lo, hi, "warmup-", 0, &p, &gen,
				     &wall);
		wl_gen_destroy(gen);
		gen = NULL;
		if (rc == CLI_EXIT_OK && p.n_failed > 0) {
			fprintf(stderr, "batchgen bench: a warm-up request failed (%s)\n",
				p.first_error);
			rc = CLI_EXIT_SOME_FAILED;
		}
		bench_phase_free(&p);
		if (rc != CLI_EXIT_OK)
			goto done;
	}

	ecfg.stats = stats; /* the measured run's iterations only */

	/* ---- the measured run ---- */
	if (spec.kind == WL_DECODE_GRID) {
		rc = bench_b1(&c, &rt, &ecfg, seed, lo, hi, rep);
		if (rc != CLI_EXIT_OK)
			goto done;
		/* B1's results: the cells; output_tok_s is the sum of the cells' decode rates,
		 * so that a baseline comparison sees any cell that slows down */
		cJSON *r = cJSON_AddObjectToObject(rep, "results");
		double sum = 0;
		const cJSON *cell;
		cJSON_ArrayForEach(cell, cJSON_GetObjectItemCaseSensitive(rep, "cells"))
		{
			double v = bench_num(cell, "decode_tok_s", NULL);
			sum += isfinite(v) ? v : 0;
		}
		cJSON_AddNumberToObject(r, "output_tok_s", sum);
	} else {
		double wall = 0;
		rc =
		    bench_phase_run(&c, &rt, &ecfg, &spec, n, seed, lo, hi, "", 0, &p, &gen, &wall);
		if (rc != CLI_EXIT_OK)
			goto done;
		/* the generator's own checksum must be the one promised above */
		BG_ASSERT(wl_gen_shape_checksum(gen) == wl_shapes_checksum(&spec, seed, n));
		bench_hex(buf, sizeof buf, wl_gen_content_checksum(gen));
		cJSON_AddStringToObject(w, "content_checksum", buf);
		cJSON_AddNumberToObject(w, "prompt_tokens", (double)wl_gen_prompt_tokens(gen));
		cJSON_AddNumberToObject(w, "output_tokens", (double)wl_gen_output_tokens(gen));
		bench_add_results(rep, &p, wall, rt.backend);
		if (p.n_failed > 0) {
			fprintf(stderr,
				"batchgen bench: %" PRId64 " of %" PRId64
				" requests failed; first: %s\n",
				p.n_failed, n, p.first_error);
			rc = CLI_EXIT_SOME_FAILED;
		}
	}

	if (!c.quiet)
		bench_print_table(rep);
	if (c.report && !json_file_write(c.report, rep)) {
		fprintf(stderr, "batchgen bench: cannot write --report %s: %s\n", c.report,
			strerror(errno));
		rc = CLI_EXIT_USAGE;
		goto done;
	}
	if (base) {
		int cmp = bench_compare(rep, base, c.baseline, c.max_regression);
		if (cmp != CLI_EXIT_OK)
			rc = cmp; /* not comparable (2) or a regression (4) wins over failures */
	}

done:
	wl_gen_destroy(gen);
	bench_phase_free(&p);
	cJSON_Delete(rep);
	cJSON_Delete(base);
	if (stats) {
		/* the engine flushes every line: a failed write left the error flag, and
		 * fclose, with nothing buffered, would return 0 */
		errno = 0;
		bool bad = !outputs_close(stats);
		if (bad && rc == CLI_EXIT_OK) {
			fprintf(stderr, "batchgen bench: cannot write --stats %s%s%s\n", c.stats,
				errno ? ": " : "", errno ? strerror(errno) : "");
			rc = CLI_EXIT_USAGE;
		}
	}
	opt_close_runtime(&rt);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	return rc;
}
