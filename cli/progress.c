#include "cli/progress.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/json_file.h"

/* Log-scale histogram: bucket i holds values in [LO * R^i, LO * R^(i+1)) ms, from 1 us to
 * beyond a day; values outside are clamped into the first or last bucket (the exact min
 * and max are kept to clamp the answer). */
#define HIST_LO 0.001
#define HIST_R	1.01
#define HIST_N	2600

struct hist {
	uint32_t count[HIST_N];
	int64_t n;
	double min, max, sum;
};

struct progress {
	FILE *f;
	bool tty, quiet;
	double interval_s;
	int64_t total;	 /* requests of this run, -1 unknown */
	int64_t skipped; /* already done before this run */
	double t0, t_last_draw;
	int last_len; /* length of the in-place line, to blank it */
	struct engine_progress last;
	bool have_last;
	int64_t n_ok, n_failed;
	int64_t prompt_tokens, output_tokens; /* of the results written */
	int64_t preemptions;
	struct hist ttft, e2e;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void hist_add(struct hist *h, double v)
{
	if (!(v >= 0)) /* NaN or negative: not measured */
		return;
	int i = v <= HIST_LO ? 0 : (int)floor(log(v / HIST_LO) / log(HIST_R));
	if (i < 0)
		i = 0;
	if (i >= HIST_N)
		i = HIST_N - 1;
	h->count[i]++;
	if (h->n == 0 || v < h->min)
		h->min = v;
	if (h->n == 0 || v > h->max)
		h->max = v;
	h->n++;
	h->sum += v;
}

/* Nearest-rank percentile: the smallest value with at least q*n values at or below it,
 * reported as the bucket's geometric middle (within 0.5% of the true value). */
static double hist_quantile(const struct hist *h, double q)
{
	if (h->n == 0)
		return NAN;
	int64_t rank = (int64_t)ceil(q * (double)h->n);
	if (rank < 1)
		rank = 1;
	int64_t cum = 0;
	for (int i = 0; i < HIST_N; i++) {
		cum += h->count[i];
		if (cum >= rank) {
			double v = HIST_LO * pow(HIST_R, i + 0.5);
			if (v < h->min)
				v = h->min;
			if (v > h->max)
				v = h->max;
			return v;
		}
	}
	return h->max;
}

struct progress *progress_create(FILE *f, bool tty, bool quiet, double interval_s, int64_t total)
{
	struct progress *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->f = f;
	p->tty = tty;
	p->quiet = quiet;
	p->interval_s = interval_s > 0 ? interval_s : 10;
	p->total = total;
	p->t0 = now_s();
	p->t_last_draw = p->t0;
	return p;
}

void progress_destroy(struct progress *p)
{
	free(p);
}

void progress_start(struct progress *p)
{
	p->t0 = now_s();
	p->t_last_draw = p->t0;
}

void progress_add_skipped(struct progress *p, int64_t n)
{
	p->skipped += n;
}

void progress_result(struct progress *p, const struct request *r)
{
	if (r->finish == REQ_FINISH_ERROR || r->error.code[0]) {
		p->n_failed++;
		return;
	}
	p->n_ok++;
	p->prompt_tokens += r->n_prompt;
	p->output_tokens += r->n_out;
	p->preemptions += r->preemptions;
	hist_add(&p->ttft, r->ttft_ms);
	hist_add(&p->e2e, r->e2e_ms);
}

int64_t progress_n_ok(const struct progress *p)
{
	return p->n_ok;
}

int64_t progress_n_failed(const struct progress *p)
{
	return p->n_failed;
}

double progress_ttft_ms(const struct progress *p, double q)
{
	return hist_quantile(&p->ttft, q);
}

double progress_e2e_ms(const struct progress *p, double q)
{
	return hist_quantile(&p->e2e, q);
}

static void fmt_duration(char *buf, size_t cap, double s)
{
	if (!(s >= 0) || s > 1e8) {
		snprintf(buf, cap, "?");
		return;
	}
	long t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, cap, "%ldh%02ldm", t / 3600, (t / 60) % 60);
	else if (t >= 60)
		snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, cap, "%lds", t);
}

/* One progress line, without a newline. */
static int progress_format(const struct progress *p, double t, char *buf, size_t cap)
{
	const struct engine_progress *ep = &p->last;
	double el = t - p->t0;
	int64_t done = p->skipped + p->n_ok + p->n_failed;
	double rate = el > 0 ? (double)(p->n_ok + p->n_failed) / el : 0;
	double in_tps = el > 0 ? (double)ep->prompt_tokens / el : 0;
	double out_tps = el > 0 ? (double)ep->output_tokens / el : 0;
	double kv =
	    ep->kv_total_blocks > 0 ? 100.0 * ep->kv_used_blocks / (double)ep->kv_total_blocks : 0;
	char head[64], eta[32], elapsed[32];
	if (p->total >= 0) {
		double pct = p->total > 0 ? 100.0 * (double)done / (double)p->total : 100.0;
		snprintf(head, sizeof head, "%lld/%lld (%.1f%%)", (long long)done,
			 (long long)p->total, pct);
		if (rate > 0 && p->total >= done)
			fmt_duration(eta, sizeof eta, (double)(p->total - done) / rate);
		else
			snprintf(eta, sizeof eta, "?");
	} else {
		snprintf(head, sizeof head, "%lld", (long long)done);
		snprintf(eta, sizeof eta, "?");
	}
	fmt_duration(elapsed, sizeof elapsed, el);
	return snprintf(buf, cap,
			"%s%s done, %.1f req/s, in %.0f tok/s, out %.0f tok/s, %lld running, "
			"KV %.0f%%, ETA %s, elapsed %s",
			p->tty ? "" : "progress: ", head, rate, in_tps, out_tps,
			(long long)ep->n_active, kv, eta, elapsed);
}

void progress_update(struct progress *p, const struct engine_progress *ep)
{
	p->last = *ep;
	p->have_last = true;
	if (p->quiet)
		return;
	double t = now_s();
	double every = p->tty ? 0.2 : p->interval_s;
	if (t - p->t_last_draw < every)
		return;
	p->t_last_draw = t;
	char line[512];
	int n = progress_format(p, t, line, sizeof line);
	if (n < 0)
		return;
	if (n >= (int)sizeof line)
		n = (int)sizeof line - 1;
	if (p->tty) {
		/* pad with spaces over the rest of a longer previous line: no escape codes */
		int pad = p->last_len > n ? p->last_len - n : 0;
		fprintf(p->f, "\r%s%*s", line, pad, "");
		p->last_len = n;
	} else {
		fprintf(p->f, "%s\n", line);
	}
	fflush(p->f);
}

void progress_clear(struct progress *p)
{
	if (p->tty && p->last_len > 0) {
		fprintf(p->f, "\r%*s\r", p->last_len, "");
		fflush(p->f);
		p->last_len = 0;
	}
}

static void totals_or_last(const struct progress *p, const struct engine_progress *totals,
			   struct engine_progress *out)
{
	if (totals)
		*out = *totals;
	else if (p->have_last)
		*out = p->last;
	else
		memset(out, 0, sizeof *out);
}

void progress_summary(struct progress *p, const struct engine_progress *totals)
{
	progress_clear(p);
	if (p->quiet)
		return;
	struct engine_progress t;
	totals_or_last(p, totals, &t);
	double wall = now_s() - p->t0;
	int64_t n = p->n_ok + p->n_failed;
	fprintf(p->f,
		"batchgen: %lld requests (%lld ok, %lld failed%s) in %.2f s: %.2f req/s, "
		"%.1f output tok/s, %.1f total tok/s\n",
		(long long)n, (long long)p->n_ok, (long long)p->n_failed,
		p->skipped ? ", plus earlier results kept" : "", wall,
		wall > 0 ? (double)n / wall : 0, wall > 0 ? (double)p->output_tokens / wall : 0,
		wall > 0 ? (double)(p->prompt_tokens + p->output_tokens) / wall : 0);
	if (p->n_ok > 0)
		fprintf(p->f,
			"batchgen: tokens in %lld, out %lld; ttft p50 %.1f ms, p99 %.1f ms; "
			"e2e p50 %.1f ms, p99 %.1f ms; preemptions %lld; peak KV blocks %d/%d\n",
			(long long)p->prompt_tokens, (long long)p->output_tokens,
			hist_quantile(&p->ttft, 0.5), hist_quantile(&p->ttft, 0.99),
			hist_quantile(&p->e2e, 0.5), hist_quantile(&p->e2e, 0.99),
			(long long)t.preemptions, t.kv_peak_blocks, t.kv_total_blocks);
	fflush(p->f);
}

static cJSON *percentiles(const struct hist *h)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	if (h->n == 0) {
		cJSON_AddNullToObject(o, "p50");
		cJSON_AddNullToObject(o, "p90");
		cJSON_AddNullToObject(o, "p99");
		cJSON_AddNullToObject(o, "mean");
		return o;
	}
	cJSON_AddNumberToObject(o, "p50", hist_quantile(h, 0.50));
	cJSON_AddNumberToObject(o, "p90", hist_quantile(h, 0.90));
	cJSON_AddNumberToObject(o, "p99", hist_quantile(h, 0.99));
	cJSON_AddNumberToObject(o, "mean", h->sum / (double)h->n);
	cJSON_AddNumberToObject(o, "max", h->max);
	return o;
}

enum bg_status progress_write_report(struct progress *p, const struct engine_progress *totals,
				     const char *path, const char *model, const char *device,
				     struct bg_err *err)
{
	struct engine_progress t;
	totals_or_last(p, totals, &t);
	double wall = now_s() - p->t0;
	int64_t n = p->n_ok + p->n_failed;
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory writing the report");
	cJSON_AddStringToObject(o, "model", model ? model : "built-in");
	cJSON_AddStringToObject(o, "device", device ? device : "");
	cJSON *req = cJSON_AddObjectToObject(o, "requests");
	if (req) {
		cJSON_AddNumberToObject(req, "ok", (double)p->n_ok);
		cJSON_AddNumberToObject(req, "failed", (double)p->n_failed);
		cJSON_AddNumberToObject(req, "skipped", (double)p->skipped);
	}
	cJSON *tok = cJSON_AddObjectToObject(o, "tokens");
	if (tok) {
		cJSON_AddNumberToObject(tok, "input", (double)p->prompt_tokens);
		cJSON_AddNumberToObject(tok, "output", (double)p->output_tokens);
	}
	cJSON_AddNumberToObject(o, "wall_s", wall);
	cJSON *thr = cJSON_AddObjectToObject(o, "throughput");
	if (thr) {
		cJSON_AddNumberToObject(thr, "requests_per_s", wall > 0 ? (double)n / wall : 0);
		cJSON_AddNumberToObject(thr, "output_tokens_per_s",
					wall > 0 ? (double)p->output_tokens / wall : 0);
		cJSON_AddNumberToObject(
		    thr, "total_tokens_per_s",
		    wall > 0 ? (double)(p->prompt_tokens + p->output_tokens) / wall : 0);
	}
	cJSON *ttft = percentiles(&p->ttft), *e2e = percentiles(&p->e2e);
	if (ttft)
		cJSON_AddItemToObject(o, "ttft_ms", ttft);
	if (e2e)
		cJSON_AddItemToObject(o, "e2e_ms", e2e);
	cJSON_AddNumberToObject(o, "preemptions", (double)t.preemptions);
	cJSON *kv = cJSON_AddObjectToObject(o, "kv_cache");
	if (kv) {
		cJSON_AddNumberToObject(kv, "peak_used_blocks", t.kv_peak_blocks);
		cJSON_AddNumberToObject(kv, "max_num_blocks", t.kv_total_blocks);
		/* block reuse: prompt blocks taken from the cache / computed at admission */
		cJSON_AddNumberToObject(kv, "reused_blocks", (double)t.reused_blocks);
		cJSON_AddNumberToObject(kv, "missed_blocks", (double)t.missed_blocks);
		cJSON_AddNumberToObject(kv, "cache_hit_rate",
					t.reused_blocks + t.missed_blocks > 0
					    ? (double)t.reused_blocks /
						  (double)(t.reused_blocks + t.missed_blocks)
					    : 0.0);
		cJSON_AddNumberToObject(kv, "cached_tokens", (double)t.cached_tokens);
		/* preemption traffic: swapped bytes each way, recomputed tokens */
		cJSON_AddNumberToObject(kv, "swap_out_bytes", (double)t.swap_out_bytes);
		cJSON_AddNumberToObject(kv, "swap_in_bytes", (double)t.swap_in_bytes);
		cJSON_AddNumberToObject(kv, "recomputed_tokens", (double)t.recomputed_tokens);
	}
	cJSON_AddNumberToObject(o, "iterations", (double)t.iter);
	errno = 0;
	bool ok = json_file_write(path, o);
	int e = errno;
	cJSON_Delete(o);
	if (!ok && e == ENOMEM)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory writing the report");
	if (!ok)
		return bg_fail(err, BG_ERR_IO, "cannot write the report %s: %s", path,
			       e ? strerror(e) : "write error");
	return BG_OK;
}
