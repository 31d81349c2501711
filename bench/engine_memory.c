/* engine_memory: the engine's memory stays bounded whatever the length of the input.
 *
 * Runs the engine over generated inputs of increasing length (each request: an 8-token
 * prompt, max_tokens 1 or a few) with a null backend (constant logits, so that only the
 * engine's own memory and time are measured), each size in a fresh child process, and
 * prints the child's peak RSS (wait4 ru_maxrss). Every 97th request is a long one (64
 * tokens) so the input-order reorder buffer has to hold results behind it.
 *
 *   engine_memory [N ...]      default: 10000 100000 1000000
 *
 * Output: one line per size and order, "order=input n=1000000 peak_rss_kb=... secs=...",
 * then "order=... ratio_largest_over_smallest=R bounded|GROWS". Exit status 1 when a run
 * lost or duplicated a result, 3 when peak RSS grew by more than 1.5x.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"

#define NV 64

static enum bg_status null_forward(void *ctx, const struct backend_batch *b, struct bg_err *e)
{
	(void)ctx, (void)b, (void)e;
	return BG_OK;
}

static enum bg_status null_sample(void *ctx, const struct backend_sample_row *rows, int32_t n,
				  struct sampler_result *out, struct bg_err *err)
{
	(void)ctx, (void)err;
	for (int32_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof out[i]);
		out[i].token =
		    rows[i].forced >= 0 ? rows[i].forced : 5 + (rows[i].history.n_output % 7);
		out[i].logprob = -0.5f;
	}
	return BG_OK;
}

static const struct backend_ops null_ops = {.forward = null_forward, .sample = null_sample};

struct gen {
	long long n, next, emitted, bad;
	long long last_seq; /* order input: must be next_expected */
	int input_order;
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
	char id[32];
	snprintf(id, sizeof id, "req-%lld", g->next);
	r->id = strdup(id);
	r->seq = g->next;
	r->line = g->next + 1;
	r->n_input_ids = 8;
	r->input_ids = malloc(8 * sizeof(int32_t));
	for (int i = 0; i < 8; i++)
		r->input_ids[i] = 3 + (int32_t)((g->next + i) % (NV - 3));
	r->max_tokens = g->next % 97 == 0 ? 64 : 1;
	r->logprobs = 0;
	g->next++;
	*out = r;
	return 1;
}

static int gen_sink(void *user, struct request *r)
{
	struct gen *g = user;
	if (g->input_order && r->seq != g->emitted)
		g->bad++;
	if (r->finish == REQ_FINISH_ERROR || r->n_out < 1)
		g->bad++;
	g->emitted++;
	req_free(r);
	return 0;
}

static int child(long long n, int input_order)
{
	struct backend be = {
	    .ops = &null_ops, .name = "null", .n_vocab = NV, .block_size = 16, .n_blocks = 4096};
	struct engine_config cfg;
	engine_config_default(&cfg);
	cfg.order = input_order ? ENGINE_ORDER_INPUT : ENGINE_ORDER_COMPLETION;
	struct model_hparams hp = {.n_ctx_train = 2048};
	struct engine *e = NULL;
	struct bg_err err = {0};
	if (engine_create(&cfg, &be, NULL, &hp, &e, &err) != BG_OK) {
		fprintf(stderr, "engine_create: %s\n", err.msg);
		return 2;
	}
	struct gen g = {.n = n, .input_order = input_order};
	int64_t unf = 0;
	enum bg_status st = engine_run(e, gen_source, gen_sink, NULL, &g, NULL, &unf, &err);
	engine_destroy(e);
	if (st != BG_OK) {
		fprintf(stderr, "engine_run: %s\n", err.msg);
		return 2;
	}
	if (g.emitted != n || g.bad) {
		fprintf(stderr, "n=%lld: emitted %lld, %lld bad\n", n, g.emitted, g.bad);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long long sizes[8] = {10000, 100000, 1000000};
	int n_sizes = 3;
	if (argc > 1) {
		n_sizes = 0;
		for (int i = 1; i < argc && n_sizes < 8; i++)
			sizes[n_sizes++] = atoll(argv[i]);
	}
	int rc = 0;
	for (int order = 1; order >= 0; order--) {
		long first = 0, last = 0;
		for (int i = 0; i < n_sizes; i++) {
			struct timespec t0, t1;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			fflush(stdout);
			pid_t pid = fork();
			if (pid == 0)
				_exit(child(sizes[i], order));
			int status = 0;
			struct rusage ru;
			memset(&ru, 0, sizeof ru);
			if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) {
				perror("fork/wait4");
				return 2;
			}
			clock_gettime(CLOCK_MONOTONIC, &t1);
			int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
			if (!ok)
				rc = 1;
			printf("order=%s n=%lld peak_rss_kb=%ld secs=%.2f %s\n",
			       order ? "input" : "completion", sizes[i], ru.ru_maxrss,
			       (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9,
			       ok ? "ok" : "FAILED");
			if (i == 0)
				first = ru.ru_maxrss;
			last = ru.ru_maxrss;
		}
		if (n_sizes > 1 && first > 0) {
			double ratio = (double)last / (double)first;
			/* bounded means flat: allow allocator noise, not growth with n */
			printf("order=%s ratio_largest_over_smallest=%.3f %s\n",
			       order ? "input" : "completion", ratio,
			       ratio <= 1.5 ? "bounded" : "GROWS");
			if (ratio > 1.5)
				rc = 3;
		}
	}
	return rc;
}
