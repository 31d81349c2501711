/* host_step: the engine's own (host) time per decode step, the time overlap can hide.
 *
 * A null backend (no compute: forward does nothing, sample returns a fixed function of the
 * row's history, never an end-of-generation token) under the real engine with a real
 * tokenizer, so that what is timed is what the host does in a step whatever the device:
 * scheduling, building the batch, appending tokens, detokenizing, checking stop strings,
 * writing results (to a sink that frees them). 8 B requests of a 128-token prompt and
 * max_tokens 128 (each with a stop string that never matches), at most B at a time: the
 * time per iteration is host time per step at batch B. With --overlap on the same work runs in
 * the overlapped order; on a device backend it would run while the forward pass does.
 *
 *   host_step VOCAB.gguf [B ...]     default B: 1 64 256
 *
 * Output per batch and mode: "B=256 overlap=0 iters=... us_per_step=... us_per_row=...
 * us_fwd_to_sample=A us_sample_to_fwd=B": with overlap, A (applying the step before,
 * building the sample rows) is what a device backend hides behind the forward pass, B
 * (planning and building the next step) what it would hide behind sampling once sample()
 * returns before its tokens reach the host (not built: engine.c, "Overlap").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "model/model.h"
#include "text/tokenizer.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Where the host's time goes, from the backend's side: a = forward -> sample (with
 * overlap: applying the step before and building the sample rows, which a device
 * backend runs during the forward pass), b = sample -> the next forward (planning and
 * building the next step, statistics, intake). */
struct clock {
	double t_fwd, t_smp, a, b;
	int64_t n_a, n_b;
};

static enum bg_status null_forward(void *ctx, const struct backend_batch *b, struct bg_err *e)
{
	(void)b, (void)e;
	struct clock *c = ctx;
	c->t_fwd = now_s();
	if (c->t_smp > 0) {
		c->b += c->t_fwd - c->t_smp;
		c->n_b++;
	}
	c->t_smp = 0;
	return BG_OK;
}

static enum bg_status null_sample(void *ctx, const struct backend_sample_row *rows, int32_t n,
				  struct sampler_result *out, struct bg_err *err)
{
	(void)err;
	struct clock *c = ctx;
	c->t_smp = now_s();
	c->a += c->t_smp - c->t_fwd;
	c->n_a++;
	for (int32_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof out[i]);
		out[i].token = rows[i].forced >= 0 ? rows[i].forced
						   : 300 + (rows[i].history.n_output * 7) % 200;
		out[i].logprob = -0.5f;
	}
	return BG_OK;
}

static const struct backend_ops null_ops = {.forward = null_forward, .sample = null_sample};

struct gen {
	int32_t n, next, done;
};

static int gen_source(void *user, struct request **out, struct bg_err *err)
{
	(void)err;
	struct gen *g = user;
	if (g->next >= g->n)
		return 0;
	struct request *r = req_new();
	if (!r)
		return -1;
	r->seq = g->next;
	r->n_input_ids = 128;
	r->input_ids = malloc(128 * sizeof(int32_t));
	r->stop = calloc(1, sizeof *r->stop);
	if (!r->input_ids || !r->stop || !(r->stop[0] = strdup("never stop here"))) {
		req_free(r);
		return -1;
	}
	r->n_stop = 1;
	for (int i = 0; i < 128; i++)
		r->input_ids[i] = 3 + (int32_t)((g->next * 31 + i) % 500);
	r->max_tokens = 128;
	r->logprobs = 0;
	g->next++;
	*out = r;
	return 1;
}

static int gen_sink(void *user, struct request *r)
{
	struct gen *g = user;
	g->done += r->n_out == 128;
	req_free(r);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: host_step VOCAB.gguf [B ...]\n");
		return 2;
	}
	struct bg_err err = {0};
	struct model *m = NULL;
	struct tok *tok = NULL;
	if (model_load(argv[1], &m, &err) != BG_OK || tok_load(m->gguf, &tok, &err) != BG_OK) {
		fprintf(stderr, "host_step: %s\n", err.msg);
		return 2;
	}
	int32_t bs[8] = {1, 64, 256}, nb = 3;
	if (argc > 2)
		for (nb = 0; nb + 2 < argc && nb < 8; nb++)
			bs[nb] = atoi(argv[nb + 2]);
	int rc = 0;
	for (int32_t k = 0; k < nb; k++)
		for (int ov = 0; ov < 2; ov++) {
			struct clock ck = {0};
			struct backend be = {.ops = &null_ops,
					     .ctx = &ck,
					     .name = "null",
					     .n_vocab = (int32_t)m->hp.n_vocab,
					     .block_size = 32,
					     .n_blocks = bs[k] * 9 + 8};
			struct engine_config cfg;
			engine_config_default(&cfg);
			cfg.max_batch_size = bs[k];
			cfg.overlap = ov;
			struct model_hparams hp = {.n_ctx_train = 4096};
			struct engine *e = NULL;
			if (engine_create(&cfg, &be, tok, &hp, &e, &err) != BG_OK) {
				fprintf(stderr, "engine_create: %s\n", err.msg);
				return 2;
			}
			struct gen g = {.n = 8 * bs[k]}; /* 8 waves of B */
			double t0 = now_s();
			enum bg_status st =
			    engine_run(e, gen_source, gen_sink, NULL, &g, NULL, NULL, &err);
			double dt = now_s() - t0;
			struct engine_progress p;
			engine_totals(e, &p);
			engine_destroy(e);
			if (st != BG_OK || g.done != g.n) {
				fprintf(stderr, "B=%d: %s, %d of %d complete\n", bs[k], err.msg,
					g.done, g.n);
				rc = 1;
				continue;
			}
			printf("B=%d overlap=%d iters=%lld us_per_step=%.1f us_per_row=%.2f "
			       "us_fwd_to_sample=%.1f us_sample_to_fwd=%.1f\n",
			       bs[k], ov, (long long)p.iter, dt / (double)p.iter * 1e6,
			       dt / (double)p.iter / bs[k] * 1e6, ck.a / (double)ck.n_a * 1e6,
			       ck.n_b ? ck.b / (double)ck.n_b * 1e6 : 0.0);
		}
	tok_free(tok);
	model_free(m);
	return rc;
}
