/* test_engine: the continuous-batching loop against a FAKE backend.
 *
 * The fake is a tiny "model" whose KV is a hash chain: the slot of position p holds
 * h_p = mix(h_{p-1}, token_p, p), read back through the block table, and the logits of a
 * row depend only on h_p. So a request's outputs depend on every token before it *as
 * read from the KV blocks*: a wrong block table, a lost swap, a block handed to two
 * requests or a re-sampled token changes them. The fake checks every batch it gets
 * (block tables long enough, no block in two sequences of one batch, positions read were
 * written, logits rows counted right) and records the batch shapes.
 *
 * Checks: one result per request, input order / completion order, errors for requests
 * that cannot run (the run goes on), stop strings across token boundaries, EOS, stop
 * token ids, max sequence length, prompt log-probs, per-iteration stats (exact field set,
 * invariants), the policies behaving as named, the reorder window bounding look-ahead,
 * the stop flag, and outputs identical alone and in any batch under every policy.
 */
#include "check.h"
#include "engine_util.h"
#include "fake_backend.h"
#include "engine/engine.h"
#include "model/gguf.h"

#include <cjson/cJSON.h>
#include <stdint.h>

/* ------------------------------------------------------------------------------------ */
/* a tiny SentencePiece-style vocabulary, written with the GGUF writer                  */
/* ------------------------------------------------------------------------------------ */

/* ids: 0 <unk>, 1 <s>, 2 </s>, 3..28 'a'..'z', 29 '▁', 30 '.', 31 "ab", 32 "cd",
 * 33 "▁the", 34 <0xC3>, 35 <0xA9> */
#define TV 36
static struct tok *make_tok(void)
{
	const char *toks[TV];
	char letters[26][2];
	float scores[TV];
	int32_t types[TV];
	toks[0] = "<unk>", toks[1] = "<s>", toks[2] = "</s>";
	for (int i = 0; i < 26; i++) {
		letters[i][0] = (char)('a' + i);
		letters[i][1] = 0;
		toks[3 + i] = letters[i];
	}
	toks[29] = "\xe2\x96\x81", toks[30] = ".", toks[31] = "ab", toks[32] = "cd";
	toks[33] = "\xe2\x96\x81the", toks[34] = "<0xC3>", toks[35] = "<0xA9>";
	for (int i = 0; i < TV; i++) {
		scores[i] = -(float)i;
		types[i] = 1;
	}
	types[0] = 2, types[1] = 3, types[2] = 3, types[34] = 6, types[35] = 6;
	struct gguf_writer *w = gguf_writer_create();
	gguf_writer_set_str(w, "general.architecture", "llama");
	gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
	gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, TV);
	gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", scores, TV);
	gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, TV);
	gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
	gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
	gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
	void *buf = NULL;
	size_t len = 0;
	struct bg_err err = {0};
	struct gguf_ctx *g = NULL;
	struct tok *t = NULL;
	if (gguf_writer_to_buffer(w, &buf, &len, &err) != BG_OK ||
	    gguf_parse(buf, len, true, &g, &err) != BG_OK || tok_load(g, &t, &err) != BG_OK)
		fprintf(stderr, "tiny vocabulary: %s\n", err.msg);
	gguf_close(g);
	gguf_writer_destroy(w);
	return t;
}

/* ------------------------------------------------------------------------------------ */
/* workloads and runs                                                                   */
/* ------------------------------------------------------------------------------------ */

struct spec {
	int32_t ids[128];
	int32_t n_ids;
	const char *prompt; /* instead of ids */
	int32_t max_tokens;
	float temperature;
	uint64_t seed;
	const char *stop[2];
	int32_t n_stop;
	int32_t stop_tok;
	bool ignore_eos;
	int32_t logprobs, prompt_logprobs;
	const char *preset_error; /* a parse error carried in */
	int32_t n;		  /* samples; 0 = 1 */
};

struct run {
	const struct spec *specs;
	int32_t n, next;
	struct request **res; /* [n] by input position */
	int32_t *emit_order;  /* [n] */
	int32_t n_emitted, dup;
	int64_t max_ahead; /* the most requests pulled beyond the ones emitted */
	volatile sig_atomic_t *stop;
	int64_t stop_after_iter;
	struct engine_progress tot; /* engine_totals after the run */
};

static int src(void *user, struct request **out, struct bg_err *err)
{
	(void)err;
	struct run *R = user;
	if (R->next >= R->n)
		return 0;
	const struct spec *s = &R->specs[R->next];
	struct request *r = engine_util_req("r", R->next, s->prompt, s->ids, s->n_ids);
	r->line = R->next + 1;
	r->max_tokens = s->max_tokens;
	r->sampling.temperature = s->temperature;
	r->sampling.seed = s->seed;
	r->ignore_eos = s->ignore_eos;
	r->logprobs = s->logprobs;
	r->prompt_logprobs = s->prompt_logprobs;
	r->n = s->n > 0 ? s->n : 1;
	engine_util_req_stops(r, s->stop, s->n_stop);
	if (s->stop_tok > 0) {
		r->stop_token_ids = malloc(sizeof(int32_t));
		r->stop_token_ids[0] = s->stop_tok;
		r->n_stop_token_ids = 1;
	}
	if (s->preset_error)
		snprintf(r->error.code, sizeof r->error.code, "%s", s->preset_error);
	R->next++;
	int64_t ahead = R->next - R->n_emitted;
	if (ahead > R->max_ahead)
		R->max_ahead = ahead;
	*out = r;
	return 1;
}

static int sink(void *user, struct request *r)
{
	struct run *R = user;
	int64_t k = r->seq;
	if (k < 0 || k >= R->n || R->res[k]) {
		R->dup++;
		req_free(r);
		return 0;
	}
	R->res[k] = r;
	R->emit_order[R->n_emitted++] = (int32_t)k;
	return 0;
}

static void prog(void *user, const struct engine_progress *p)
{
	struct run *R = user;
	if (R->stop && R->stop_after_iter > 0 && p->iter >= R->stop_after_iter)
		*R->stop = 1;
}

static void run_free(struct run *R)
{
	for (int32_t i = 0; i < R->n; i++)
		req_free(R->res[i]);
	free(R->res);
	free(R->emit_order);
}

/* Runs specs through a fresh engine; returns the status of engine_run. */
static enum bg_status run_specs(const struct engine_config *cfg, struct backend *be,
				const struct tok *tok, int32_t max_seq, const struct spec *specs,
				int32_t n, struct run *R, int64_t *unfinished)
{
	memset(R, 0, sizeof *R);
	R->specs = specs;
	R->n = n;
	R->res = calloc((size_t)n, sizeof *R->res);
	R->emit_order = calloc((size_t)n, sizeof *R->emit_order);
	struct model_hparams hp = {.n_ctx_train = (uint32_t)max_seq};
	struct engine *e = NULL;
	struct bg_err err = {0};
	enum bg_status st = engine_create(cfg, be, tok, &hp, &e, &err);
	if (st != BG_OK) {
		fprintf(stderr, "engine_create: %s\n", err.msg);
		return st;
	}
	int64_t unf = 0;
	st = engine_run(e, src, sink, prog, R, NULL, &unf, &err);
	if (st != BG_OK)
		fprintf(stderr, "engine_run: %s\n", err.msg);
	if (unfinished)
		*unfinished = unf;
	engine_totals(e, &R->tot);
	engine_destroy(e);
	return st;
}

static bool same_result(const struct request *a, const struct request *b, char *why, size_t cap)
{
	if (!a || !b)
		return snprintf(why, cap, "missing"), false;
	if (a->finish != b->finish)
		return snprintf(why, cap, "finish %s vs %s", req_finish_name(a->finish),
				req_finish_name(b->finish)),
		       false;
	if (strcmp(a->error.code, b->error.code))
		return snprintf(why, cap, "error %s vs %s", a->error.code, b->error.code), false;
	if (a->n_out != b->n_out)
		return snprintf(why, cap, "n_out %d vs %d", a->n_out, b->n_out), false;
	if (a->n_out && memcmp(a->out_ids, b->out_ids, (size_t)a->n_out * sizeof(int32_t)))
		return snprintf(why, cap, "token ids differ"), false;
	if (a->logprobs >= 0 && a->n_out &&
	    memcmp(a->out_logprobs, b->out_logprobs, (size_t)a->n_out * sizeof(float)))
		return snprintf(why, cap, "logprobs differ"), false;
	if (a->logprobs > 0 && a->n_out &&
	    memcmp(a->out_top, b->out_top, (size_t)a->n_out * sizeof *a->out_top))
		return snprintf(why, cap, "top logprobs differ"), false;
	/* an error result (too_long) has n_prompt set but no prompt_lp */
	if (a->prompt_logprobs >= 0 && a->n_prompt &&
	    ((a->prompt_lp == NULL) != (b->prompt_lp == NULL) ||
	     (a->prompt_lp &&
	      memcmp(a->prompt_lp, b->prompt_lp, (size_t)a->n_prompt * sizeof(float)))))
		return snprintf(why, cap, "prompt logprobs differ"), false;
	if ((a->text == NULL) != (b->text == NULL) ||
	    (a->text && (a->text_len != b->text_len || memcmp(a->text, b->text, a->text_len))))
		return snprintf(why, cap, "text differs"), false;
	return true;
}

static uint64_t wl_state = 12345;
static uint32_t wrnd(uint32_t n)
{
	wl_state = fake_mix64(wl_state + 0x9e3779b97f4a7c15ull);
	return (uint32_t)(wl_state % n);
}

/* A varied workload: prompts 1..40 tokens, max_tokens skewed, greedy and seeded. */
static struct spec *make_workload(int32_t n, bool with_stops)
{
	struct spec *sp = calloc((size_t)n, sizeof *sp);
	for (int32_t i = 0; i < n; i++) {
		struct spec *s = &sp[i];
		s->n_ids = 1 + (int32_t)wrnd(40);
		s->ids[0] = 1;
		for (int32_t j = 1; j < s->n_ids; j++)
			s->ids[j] = 3 + (int32_t)wrnd(TV - 3);
		s->max_tokens = wrnd(5) == 0 ? 16 + (int32_t)wrnd(24) : 1 + (int32_t)wrnd(8);
		s->temperature = wrnd(2) ? 0.0f : 0.9f;
		s->seed = wrnd(1000);
		s->logprobs = (int32_t)wrnd(4) - 1;
		s->prompt_logprobs = wrnd(4) == 0 ? (int32_t)wrnd(3) : -1;
		s->ignore_eos = wrnd(3) == 0;
		if (with_stops && wrnd(2) == 0) {
			static const char *stops[] = {"ab", "e", "xy", "the", "q", "o", "t", "a"};
			s->stop[0] = stops[wrnd(8)];
			s->stop[1] = stops[wrnd(8)];
			s->n_stop = 2;
		}
		if (wrnd(10) == 0)
			s->stop_tok = 3 + (int32_t)wrnd(TV - 3);
	}
	return sp;
}

/* The reference results: each of specs[n] run alone through the engine (caller frees each
 * and the array). */
static struct request **solo_results(const struct engine_config *cfg, struct backend *be,
				     const struct tok *tok, int32_t max_seq, const struct spec *sp,
				     int32_t n)
{
	struct request **ref = calloc((size_t)n, sizeof *ref);
	for (int32_t i = 0; ref && i < n; i++) {
		struct run R;
		run_specs(cfg, be, tok, max_seq, &sp[i], 1, &R, NULL);
		ref[i] = R.res[0];
		R.res[0] = NULL;
		run_free(&R);
	}
	return ref;
}

/* ------------------------------------------------------------------------------------ */
/* tests                                                                                */
/* ------------------------------------------------------------------------------------ */

static void test_invariance_fake(const struct tok *tok)
{
	const int32_t N = 150, max_seq = 64;
	struct spec *sp = make_workload(N, true);
	struct fake f;
	/* references: each request alone, in a roomy pool */
	struct backend be = fake_backend(&f, TV, 256, 4, FAKE_HASH);
	struct engine_config cfg;
	engine_config_default(&cfg);
	struct request **ref = solo_results(&cfg, &be, tok, max_seq, sp, N);
	CHECK(f.errors == 0, "fake backend (solo): %s", f.err);
	fake_free(&f);
	int n_stop = 0, n_eos = 0, n_len = 0;
	for (int32_t i = 0; i < N; i++) {
		n_stop += ref[i]->finish == REQ_FINISH_STOP;
		n_eos += ref[i]->finish == REQ_FINISH_EOS;
		n_len += ref[i]->finish == REQ_FINISH_LENGTH;
	}
	CHECK(n_stop > 5 && n_eos > 3 && n_len > 20, "workload covers stop %d eos %d length %d",
	      n_stop, n_eos, n_len);
	int64_t ovl_steps = 0, ovl_dropped = 0;
	for (int pi = 0; pi < ENGINE_UTIL_N_POLICIES; pi++)
		for (int chunk = 0; chunk < 2; chunk++)
			for (int bsi = 0; bsi < 4; bsi++) {
				engine_util_policy(&cfg, pi);
				/* --overlap auto: serial on the synchronous fake, then overlapped
				 * on the asynchronous one (its results arrive at sample_wait) */
				cfg.overlap = -1;
				bool async = bsi >= 2;
				cfg.chunked_context = chunk;
				cfg.max_batch_size = bsi % 2 ? 64 : 1;
				cfg.max_num_tokens = 48;
				cfg.max_queued = 16;
				cfg.order =
				    (pi + chunk) % 2 ? ENGINE_ORDER_COMPLETION : ENGINE_ORDER_INPUT;
				/* 24 blocks of 4 = 96 token slots: tight, so max-util preempts */
				be = async ? fake_backend_async(&f, TV, 24, 4, FAKE_HASH)
					   : fake_backend(&f, TV, 24, 4, FAKE_HASH);
				struct run R;
				enum bg_status st =
				    run_specs(&cfg, &be, tok, max_seq, sp, N, &R, NULL);
				int diff = 0, preempt = 0;
				char why[200] = "";
				for (int32_t i = 0; i < N; i++) {
					char w[128];
					if (!same_result(ref[i], R.res[i], w, sizeof w)) {
						if (!diff)
							snprintf(why, sizeof why, "request %d: %s",
								 i, w);
						diff++;
					}
					if (R.res[i])
						preempt += R.res[i]->preemptions;
				}
				CHECK(st == BG_OK && R.n_emitted == N && R.dup == 0,
				      "policy %d chunk %d bs %d: %d results of %d", pi, chunk,
				      cfg.max_batch_size, R.n_emitted, N);
				CHECK(diff == 0,
				      "policy %d/%d chunk %d bs %d async %d: %d differ (%s)", pi,
				      cfg.preempt, chunk, cfg.max_batch_size, async, diff, why);
				CHECK(async || (R.tot.overlap_steps == 0 && R.tot.overlap_dropped == 0),
				      "overlap auto on a synchronous backend: no step overlapped");
				ovl_steps += R.tot.overlap_steps;
				ovl_dropped += R.tot.overlap_dropped;
				CHECK(f.errors == 0, "fake backend: %s", f.err);
				CHECK(f.max_tokens <= cfg.max_num_tokens &&
					  f.max_seqs <= cfg.max_batch_size,
				      "batch bounds: %lld tokens, %lld seqs",
				      (long long)f.max_tokens, (long long)f.max_seqs);
				if (cfg.order == ENGINE_ORDER_INPUT) {
					bool ordered = true;
					for (int32_t i = 0; i < R.n_emitted; i++)
						ordered &= R.emit_order[i] == i;
					CHECK(ordered, "input order kept");
				}
				if (cfg.policy == ENGINE_POLICY_MAX_UTIL && cfg.max_batch_size > 1)
					CHECK(preempt > 0, "max-util preempted (%d)", preempt);
				if (cfg.policy != ENGINE_POLICY_MAX_UTIL &&
				    cfg.policy != ENGINE_POLICY_ADAPTIVE)
					CHECK(preempt == 0, "policy %d never preempts (%d)", pi,
					      preempt);
				if (fake_state_slots) /* scheduler.h: a state is not swapped */
					CHECK(f.swap_outs == 0, "state slots: no swap (%lld)",
					      (long long)f.swap_outs);
				else if (cfg.preempt == ENGINE_PREEMPT_SWAP &&
					 cfg.max_batch_size > 1)
					CHECK(f.swap_outs > 0 && f.swap_ins > 0,
					      "swapped %lld/%lld", (long long)f.swap_outs,
					      (long long)f.swap_ins);
				run_free(&R);
				fake_free(&f);
			}
	/* the overlapped runs did overlap, and requests stopping by their token (stop
	 * strings, EOS) had their next step run and thrown away */
	CHECK(ovl_steps > 1000 && ovl_dropped > 100, "overlap: %lld steps, %lld rows dropped",
	      (long long)ovl_steps, (long long)ovl_dropped);
	fprintf(stderr, "overlap: %lld steps overlapped, %lld rows dropped\n", (long long)ovl_steps,
		(long long)ovl_dropped);
	for (int32_t i = 0; i < N; i++)
		req_free(ref[i]);
	free(ref);
	free(sp);
}

/* Random engine configurations (block sizes 1..16, tiny token budgets, look-ahead and
 * reorder window of 1, pools just big enough) against the solo references. */
static void test_random_configs(const struct tok *tok)
{
	const int32_t N = 60, max_seq = 64;
	struct spec *sp = make_workload(N, true);
	struct fake f;
	struct backend be = fake_backend(&f, TV, 256, 4, FAKE_HASH);
	struct engine_config cfg;
	engine_config_default(&cfg);
	struct request **ref = solo_results(&cfg, &be, tok, max_seq, sp, N);
	fake_free(&f);
	/* BG_ENGINE_FUZZ=N runs N configurations instead of 24 (for a longer soak). */
	int n_cfg = getenv("BG_ENGINE_FUZZ") ? atoi(getenv("BG_ENGINE_FUZZ")) : 24;
	for (int k = 0; k < n_cfg; k++) {
		engine_config_default(&cfg);
		cfg.policy = (enum engine_policy)wrnd(4);
		cfg.preempt = wrnd(2) ? ENGINE_PREEMPT_SWAP : ENGINE_PREEMPT_RECOMPUTE;
		cfg.chunked_context = wrnd(3) != 0;
		cfg.max_batch_size = 1 + (int32_t)wrnd(20);
		cfg.max_num_tokens =
		    cfg.chunked_context ? 1 + (int32_t)wrnd(60) : 40 + (int32_t)wrnd(30);
		cfg.max_queued = 1 + (int32_t)wrnd(6);
		cfg.reorder_window = 1 + (int32_t)wrnd(4);
		cfg.order = wrnd(2) ? ENGINE_ORDER_COMPLETION : ENGINE_ORDER_INPUT;
		cfg.prefix_cache = wrnd(2);
		cfg.overlap = k % 2;
		int32_t bs = 1 + (int32_t)wrnd(16);
		int32_t nb = (max_seq - 1 + bs - 1) / bs + (int32_t)wrnd(12);
		be = fake_backend(&f, TV, nb, bs, FAKE_HASH);
		struct run R;
		enum bg_status st = run_specs(&cfg, &be, tok, max_seq, sp, N, &R, NULL);
		int diff = 0;
		char why[200] = "";
		for (int32_t i = 0; i < N; i++) {
			char w[128];
			if (!same_result(ref[i], R.res[i], w, sizeof w) && diff++ == 0)
				snprintf(why, sizeof why, "request %d: %s", i, w);
		}
		CHECK(st == BG_OK && R.n_emitted == N && R.dup == 0 && diff == 0 && f.errors == 0,
		      "config %d (policy %d preempt %d chunk %d bs %d tokens %d blocks %dx%d "
		      "overlap %d): %d results, %d differ (%s) %s",
		      k, cfg.policy, cfg.preempt, cfg.chunked_context, cfg.max_batch_size,
		      cfg.max_num_tokens, nb, bs, cfg.overlap, R.n_emitted, diff, why, f.err);
		run_free(&R);
		fake_free(&f);
	}
	for (int32_t i = 0; i < N; i++)
		req_free(ref[i]);
	free(ref);
	free(sp);
}

/* Errors: each request that cannot run gets one error result in its turn; others run. */
static void test_errors(const struct tok *tok)
{
	struct spec sp[8] = {0};
	for (int i = 0; i < 8; i++) {
		sp[i].n_ids = 3;
		sp[i].ids[0] = 1, sp[i].ids[1] = 5, sp[i].ids[2] = 6;
		sp[i].max_tokens = 4;
	}
	sp[1].n_ids = 40; /* >= max_seq_len 32 */
	for (int j = 0; j < 40; j++)
		sp[1].ids[j] = 4;
	sp[2].ids[1] = TV + 5; /* outside the vocabulary */
	sp[3].n_ids = 0;       /* empty */
	sp[4].preset_error = "invalid_json";
	sp[5].max_tokens = 0; /* to the end of the context: 32 - 3 tokens */
	sp[5].ignore_eos = true;
	sp[6].max_tokens = 40; /* prompt 3 + 40 > 32: refused as too_long */
	sp[6].ignore_eos = true;
	sp[7].prompt = ""; /* empty text prompt */
	struct fake f;
	struct backend be = fake_backend(&f, TV, 64, 4, FAKE_HASH);
	struct engine_config cfg;
	engine_config_default(&cfg);
	struct run R;
	CHECK(run_specs(&cfg, &be, tok, 32, sp, 8, &R, NULL) == BG_OK, "run");
	CHECK(R.n_emitted == 8 && R.dup == 0, "one result each (%d)", R.n_emitted);
	const char *want[8] = {"",
			       "too_long",
			       "invalid_request",
			       "invalid_request",
			       "invalid_json",
			       "",
			       "too_long",
			       "invalid_request"};
	for (int i = 0; i < 8; i++) {
		struct request *r = R.res[i];
		if (!r)
			continue;
		CHECK(strcmp(r->error.code, want[i]) == 0, "request %d error '%s' want '%s'", i,
		      r->error.code, want[i]);
		CHECK((r->finish == REQ_FINISH_ERROR) == (want[i][0] != 0), "request %d finish %s",
		      i, req_finish_name(r->finish));
		if (want[i][0])
			CHECK(r->error.message[0] || i == 4, "request %d has a message", i);
		CHECK(r->text != NULL, "request %d has a text", i);
	}
	if (R.res[0])
		CHECK(R.res[0]->n_out >= 1 && R.res[0]->finish != REQ_FINISH_ERROR,
		      "the good request ran");
	if (R.res[5])
		CHECK(R.res[5]->finish == REQ_FINISH_LENGTH && R.res[5]->n_out == 32 - 3,
		      "max_tokens 0 runs to the end of the context: %d tokens", R.res[5]->n_out);
	if (R.res[6]) /* prompt + max_tokens beyond the max sequence length: refused */
		CHECK(R.res[6]->n_out == 0 &&
			  strstr(R.res[6]->error.message, "max sequence length"),
		      "refused beyond the max sequence length: %d tokens, '%s'", R.res[6]->n_out,
		      R.res[6]->error.message);
	run_free(&R);
	/* A pool too small for one request: error, the run goes on. */
	fake_free(&f);
	be = fake_backend(&f, TV, 2, 4, FAKE_HASH); /* 8 token slots */
	sp[0].max_tokens = 2;			    /* 3 + 2 - 1 = 4 slots: fits */
	sp[6].max_tokens = 10;			    /* 12 slots: never fits */
	CHECK(run_specs(&cfg, &be, tok, 32, sp, 8, &R, NULL) == BG_OK, "run 2");
	CHECK(R.res[0] && R.res[0]->finish == REQ_FINISH_LENGTH && R.res[0]->n_out == 2,
	      "small request ran");
	CHECK(R.res[6] && strcmp(R.res[6]->error.code, "too_long") == 0,
	      "request bigger than the pool: '%s'", R.res[6] ? R.res[6]->error.code : "?");
	run_free(&R);
	/* chunking off: a prompt over max_num_tokens cannot run */
	cfg.chunked_context = false;
	cfg.max_num_tokens = 2;
	struct spec one = sp[0];
	CHECK(run_specs(&cfg, &be, tok, 32, &one, 1, &R, NULL) == BG_OK, "run 3");
	CHECK(R.res[0] && strcmp(R.res[0]->error.code, "too_long") == 0,
	      "unchunked prompt over the budget");
	run_free(&R);
	fake_free(&f);
}

/* A backend that returns a token outside the vocabulary (a broken plugin): the requests of
 * that step fail with a backend_error, no such token reaches a result, the run goes on. */
static void test_bad_backend_token(const struct tok *tok)
{
	const int32_t bad[2] = {TV + 3, -7}; /* past the end; negative */
	for (int v = 0; v < 2; v++) {
		struct spec sp[4] = {0};
		for (int i = 0; i < 4; i++) {
			sp[i].n_ids = 3;
			sp[i].ids[0] = 1, sp[i].ids[1] = 5 + i, sp[i].ids[2] = 6;
			sp[i].max_tokens = 6;
			sp[i].ignore_eos = true;
		}
		struct fake f;
		struct backend be = fake_backend(&f, TV, 64, 4, FAKE_HASH);
		f.bad_call = 3;
		f.bad_token = bad[v];
		struct engine_config cfg;
		engine_config_default(&cfg);
		cfg.max_batch_size = 2; /* two waves: the second runs after the first fails */
		struct run R;
		CHECK(run_specs(&cfg, &be, tok, 32, sp, 4, &R, NULL) == BG_OK, "run");
		CHECK(R.n_emitted == 4 && R.dup == 0, "one result each (%d)", R.n_emitted);
		char want[64];
		snprintf(want, sizeof want, "invalid result (token %d,", (int)bad[v]);
		int failed = 0, ok = 0;
		for (int i = 0; i < 4; i++) {
			const struct request *r = R.res[i];
			if (!r)
				continue;
			for (int32_t k = 0; k < r->n_out; k++)
				CHECK(r->out_ids[k] >= 0 && r->out_ids[k] < TV, "request %d token %d",
				      i, r->out_ids[k]);
			if (r->finish == REQ_FINISH_ERROR) {
				failed++;
				CHECK(strcmp(r->error.code, "backend_error") == 0 &&
					  strstr(r->error.message, want),
				      "request %d: %s: %s", i, r->error.code, r->error.message);
			} else {
				ok += r->finish == REQ_FINISH_LENGTH && r->n_out == 6;
			}
		}
		CHECK(failed >= 1 && ok >= 2, "token %d: %d failed, %d ran to their length",
		      (int)bad[v], failed, ok);
		run_free(&R);
		fake_free(&f);
	}
}

/* Stop strings across token boundaries, EOS, stop tokens, on predictable text. */
static void test_stops(const struct tok *tok)
{
	struct fake f;
	struct backend be = fake_backend(&f, TV, 64, 4, FAKE_SUCC);
	/* successor chain: a -> b -> c -> ... -> z -> "." -> EOS; "ab" -> "cd" -> "▁the" ->
	 * <0xC3> -> <0xA9> -> "x" */
	for (int i = 0; i < TV; i++)
		f.succ[i] = 3;
	for (int i = 3; i < 28; i++)
		f.succ[i] = i + 1;
	f.succ[28] = 30;
	f.succ[30] = 2;
	f.succ[31] = 32, f.succ[32] = 33, f.succ[33] = 34, f.succ[34] = 35, f.succ[35] = 26;
	f.succ[1] = 3;
	struct spec sp[9] = {0};
	for (int i = 0; i < 9; i++) {
		sp[i].n_ids = 2;
		sp[i].ids[0] = 1;
		sp[i].ids[1] = 3; /* "a": continues b c d ... */
		sp[i].max_tokens = 10;
	}
	sp[0].stop[0] = "de", sp[0].n_stop = 1;	 /* across "d","e" */
	sp[1].stop[0] = "zzz", sp[1].n_stop = 1; /* never */
	sp[2].max_tokens = 40;			 /* runs to "." then EOS */
	sp[3].stop_tok = 7;			 /* 'e' */
	sp[4].ids[1] = 31;			 /* "ab" -> cd, the, é, x */
	sp[4].stop[0] = "d t", sp[4].n_stop = 1; /* across "cd" + "▁the" */
	sp[5].ids[1] = 31;
	sp[5].stop[0] = "\xc3\xa9", sp[5].n_stop = 1; /* é: two byte tokens */
	sp[6].ids[1] = 31;
	sp[6].max_tokens = 4; /* cd the <C3> <A9>: é complete */
	sp[7].stop[0] = "c", sp[7].stop[1] = "bcd", sp[7].n_stop = 2; /* earliest wins */
	sp[8].max_tokens = 40;
	sp[8].ignore_eos = true;
	struct engine_config cfg;
	engine_config_default(&cfg);
	struct run R;
	CHECK(run_specs(&cfg, &be, tok, 64, sp, 9, &R, NULL) == BG_OK, "run");
	struct {
		const char *text;
		enum req_finish fin;
		int32_t n_out;
	} want[9] = {
	    {"bc", REQ_FINISH_STOP, 4}, /* b c d e: the stop completes at 'e' */
	    {"bcdefghijk", REQ_FINISH_LENGTH, 10},
	    {"bcdefghijklmnopqrstuvwxyz.", REQ_FINISH_EOS, 27},
	    {"bcd", REQ_FINISH_STOP, 4}, /* stop token excluded from the text */
	    {"c", REQ_FINISH_STOP, 2},	 /* "cd" + "▁the": the stop starts inside "cd" */
	    {"cd the", REQ_FINISH_STOP, 4},
	    {"cd the\xc3\xa9", REQ_FINISH_LENGTH, 4},
	    {"b", REQ_FINISH_STOP, 2},
	    {NULL, REQ_FINISH_LENGTH, 40},
	};
	for (int i = 0; i < 9; i++) {
		struct request *r = R.res[i];
		if (!r) {
			CHECK(false, "request %d missing", i);
			continue;
		}
		if (want[i].text)
			CHECK(strcmp(r->text, want[i].text) == 0, "request %d text '%s' want '%s'",
			      i, r->text, want[i].text);
		CHECK(r->finish == want[i].fin, "request %d finish %s want %s", i,
		      req_finish_name(r->finish), req_finish_name(want[i].fin));
		CHECK(r->n_out == want[i].n_out, "request %d n_out %d want %d", i, r->n_out,
		      want[i].n_out);
		CHECK(r->text_len == strlen(r->text), "request %d text_len", i);
	}
	if (R.res[8])
		CHECK(R.res[8]->n_out == 40 && R.res[8]->out_ids[26] == 2,
		      "ignore_eos runs through EOS");
	run_free(&R);
	fake_free(&f);
}

/* Prompt log-probs: row count and values against the fake's own scoring. */
static void test_prompt_logprobs(const struct tok *tok)
{
	struct fake f;
	struct backend be = fake_backend(&f, TV, 64, 4, FAKE_SUCC);
	for (int i = 0; i < TV; i++)
		f.succ[i] = (i + 1) % TV;
	struct spec sp = {0};
	sp.n_ids = 6;
	int32_t ids[6] = {1, 2, 3, 9, 4, 5}; /* succ: 1->2, 2->3, 3->4 (not 9), 9->10, 4->5 */
	memcpy(sp.ids, ids, sizeof ids);
	sp.max_tokens = 2;
	sp.prompt_logprobs = 2;
	sp.logprobs = 1;
	struct engine_config cfg;
	engine_config_default(&cfg);
	cfg.max_num_tokens = 4; /* the prompt is chunked 4 + 2 */
	struct run R;
	CHECK(run_specs(&cfg, &be, tok, 64, &sp, 1, &R, NULL) == BG_OK, "run");
	struct request *r = R.res[0];
	if (r && r->prompt_lp) {
		CHECK(isnan(r->prompt_lp[0]), "first prompt token has no log-prob");
		/* logits: 10 at succ, 0 elsewhere: lp(succ) = 10 - log(e^10 + 35) */
		double hit = 10.0 - log(exp(10.0) + (TV - 1));
		double miss = 0.0 - log(exp(10.0) + (TV - 1));
		double want[6] = {NAN, hit, hit, miss, miss, hit};
		for (int i = 1; i < 6; i++)
			CHECK_NEAR(r->prompt_lp[i], want[i], 1e-5, 1e-5);
		CHECK(r->prompt_top && r->prompt_top[3].n_top == 2 &&
			  r->prompt_top[3].top_ids[0] == 4,
		      "top alternative of position 3 is the successor 4");
		CHECK(r->n_out == 2 && r->out_ids[0] == 6 && r->out_logprobs && r->out_top &&
			  r->out_top[0].n_top == 1,
		      "generation after prompt log-probs");
	} else {
		CHECK(false, "no prompt log-probs");
	}
	CHECK(f.errors == 0, "fake: %s", f.err);
	run_free(&R);
	fake_free(&f);
}

/* Reads stats lines and checks the exact schema and invariants. */
struct stat_sum {
	int lines, bad;
	double sum_active;
	int64_t max_paused, empty_slots, sum_completed;
	int64_t swap_out, swap_in, recomputed; /* kv_cache's preemption traffic, summed */
};

static bool has_exactly(const cJSON *o, const char *const *keys, int n)
{
	if (!cJSON_IsObject(o) || cJSON_GetArraySize(o) != n)
		return false;
	for (int i = 0; i < n; i++)
		if (!cJSON_GetObjectItemCaseSensitive(o, keys[i]))
			return false;
	return true;
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void read_stats(FILE *fp, bool is_static, struct stat_sum *s)
{
	static const char *top_in[] = {"timestamp",
				       "iter",
				       "iter_latency_ms",
				       "num_active_requests",
				       "max_num_active_requests",
				       "num_queued_requests",
				       "num_new_active_requests",
				       "num_completed_requests",
				       "kv_cache",
				       "inflight",
				       "mem"};
	static const char *top_st[] = {"timestamp",
				       "iter",
				       "iter_latency_ms",
				       "num_active_requests",
				       "max_num_active_requests",
				       "num_queued_requests",
				       "num_new_active_requests",
				       "num_completed_requests",
				       "kv_cache",
				       "static",
				       "mem"};
	static const char *kv[] = {"max_num_blocks",   "free_num_blocks",	"used_num_blocks",
				   "tokens_per_block", "alloc_new_blocks",	"reused_blocks",
				   "missed_blocks",    "cache_hit_rate",	"cached_blocks",
				   "held_requests",    "window_dropped_blocks", "swap_out_bytes",
				   "swap_in_bytes",    "recomputed_tokens"};
	static const char *inf[] = {"num_scheduled_requests", "num_context_requests",
				    "num_gen_requests",	      "num_paused_requests",
				    "num_ctx_tokens",	      "num_gen_tokens",
				    "micro_batch_id"};
	static const char *st[] = {"num_scheduled_requests", "num_context_requests",
				   "num_ctx_tokens", "num_gen_tokens", "empty_gen_slots"};
	static const char *mem[] = {"device_bytes", "host_bytes"};
	memset(s, 0, sizeof *s);
	rewind(fp);
	char line[4096];
	double last_iter = -1;
	while (fgets(line, sizeof line, fp)) {
		s->lines++;
		cJSON *j = cJSON_Parse(line);
		bool ok = j && has_exactly(j, is_static ? top_st : top_in, 11);
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kv_cache");
		const cJSON *b =
		    cJSON_GetObjectItemCaseSensitive(j, is_static ? "static" : "inflight");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "mem");
		ok = ok && has_exactly(k, kv, 14) && has_exactly(m, mem, 2) &&
		     (is_static ? has_exactly(b, st, 5) : has_exactly(b, inf, 7));
		if (ok) {
			const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "timestamp");
			int Y, M, D, h, mi, sec, ms;
			char z = 0;
			ok &= cJSON_IsString(ts) &&
			      sscanf(ts->valuestring, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &Y, &M, &D,
				     &h, &mi, &sec, &ms, &z) == 8 &&
			      z == 'Z' && strlen(ts->valuestring) == 24;
			ok &= num(k, "used_num_blocks") + num(k, "free_num_blocks") ==
			      num(k, "max_num_blocks");
			if (is_static)
				ok &= num(b, "num_scheduled_requests") >=
				      num(b, "num_context_requests");
			else
				ok &= num(b, "num_scheduled_requests") ==
				      num(b, "num_context_requests") + num(b, "num_gen_requests");
			ok &= num(j, "iter") == last_iter + 1;
			last_iter = num(j, "iter");
			ok &= num(j, "num_active_requests") <= num(j, "max_num_active_requests");
			ok &= num(j, "iter_latency_ms") >= 0;
			s->sum_active += num(j, "num_active_requests");
			s->sum_completed += (int64_t)num(j, "num_completed_requests");
			if (!is_static && num(b, "num_paused_requests") > s->max_paused)
				s->max_paused = (int64_t)num(b, "num_paused_requests");
			if (is_static)
				s->empty_slots += (int64_t)num(b, "empty_gen_slots");
			ok &= num(k, "swap_out_bytes") >= 0 && num(k, "swap_in_bytes") >= 0 &&
			      num(k, "recomputed_tokens") >= 0;
			s->swap_out += (int64_t)num(k, "swap_out_bytes");
			s->swap_in += (int64_t)num(k, "swap_in_bytes");
			s->recomputed += (int64_t)num(k, "recomputed_tokens");
		}
		if (!ok && s->bad++ == 0)
			fprintf(stderr, "bad stats line: %s", line);
		cJSON_Delete(j);
	}
}

/* Same workload, small pool: the policies behave as named. */
static void test_policies(const struct tok *tok)
{
	const int32_t N = 96;
	struct spec *sp = calloc(N, sizeof *sp);
	for (int32_t i = 0; i < N; i++) {
		sp[i].n_ids = 8;
		sp[i].ids[0] = 1;
		for (int j = 1; j < 8; j++)
			sp[i].ids[j] = 3 + (i * 7 + j * 3) % (TV - 3);
		/* skewed: most stop at EOS early, max_tokens leaves room for long ones */
		sp[i].max_tokens = 56;
		sp[i].ignore_eos = (i % 8) == 0;
	}
	struct {
		double mean_active;
		int64_t iters, max_paused, empty;
		int bad, lines, completed;
		int64_t swap_out, swap_in, recomputed, preemptions;
	} out[4];
	/* the 4th: max-util with --preempt swap */
	const enum engine_policy pols[4] = {ENGINE_POLICY_NO_EVICT, ENGINE_POLICY_MAX_UTIL,
					    ENGINE_POLICY_STATIC, ENGINE_POLICY_MAX_UTIL};
	for (int p = 0; p < 4; p++) {
		struct fake f;
		struct backend be = fake_backend(&f, TV, 64, 8, FAKE_HASH); /* 512 slots */
		struct engine_config cfg;
		engine_config_default(&cfg);
		cfg.policy = pols[p];
		cfg.preempt = p == 3 ? ENGINE_PREEMPT_SWAP : ENGINE_PREEMPT_RECOMPUTE;
		cfg.max_batch_size = 32;
		cfg.max_num_tokens = 256;
		cfg.stats = tmpfile();
		struct run R;
		CHECK(run_specs(&cfg, &be, tok, 128, sp, N, &R, NULL) == BG_OK, "run %d", p);
		CHECK(R.n_emitted == N, "policy %d: all results (%d)", p, R.n_emitted);
		struct stat_sum s;
		read_stats(cfg.stats, pols[p] == ENGINE_POLICY_STATIC, &s);
		fclose(cfg.stats);
		out[p].mean_active = s.lines ? s.sum_active / s.lines : 0;
		out[p].iters = s.lines;
		out[p].max_paused = s.max_paused;
		out[p].empty = s.empty_slots;
		out[p].bad = s.bad;
		out[p].lines = s.lines;
		out[p].completed = (int)s.sum_completed;
		out[p].swap_out = s.swap_out;
		out[p].swap_in = s.swap_in;
		out[p].recomputed = s.recomputed;
		out[p].preemptions = R.tot.preemptions;
		CHECK(R.tot.swap_out_bytes == s.swap_out && R.tot.swap_in_bytes == s.swap_in &&
			  R.tot.recomputed_tokens == s.recomputed,
		      "policy %d: totals = the stats' sums (%lld/%lld, %lld/%lld, %lld/%lld)", p,
		      (long long)R.tot.swap_out_bytes, (long long)s.swap_out,
		      (long long)R.tot.swap_in_bytes, (long long)s.swap_in,
		      (long long)R.tot.recomputed_tokens, (long long)s.recomputed);
		CHECK(s.bad == 0, "policy %d: %d bad stats lines of %d", p, s.bad, s.lines);
		CHECK(s.sum_completed == N, "policy %d: completions in stats %lld", p,
		      (long long)s.sum_completed);
		CHECK(f.n_forward == s.lines, "one stats line per forward (%lld vs %d)",
		      (long long)f.n_forward, s.lines);
		run_free(&R);
		fake_free(&f);
	}
	fprintf(stderr,
		"policies: no-evict %lld iters mean active %.2f | max-util %lld iters mean active "
		"%.2f, max paused %lld | static %lld iters, empty slots %lld\n",
		(long long)out[0].iters, out[0].mean_active, (long long)out[1].iters,
		out[1].mean_active, (long long)out[1].max_paused, (long long)out[2].iters,
		(long long)out[2].empty);
	CHECK(out[0].max_paused == 0, "no-evict never has a paused request");
	CHECK(out[1].mean_active > out[0].mean_active, "max-util keeps more requests active");
	CHECK(out[1].iters < out[0].iters, "max-util needs fewer iterations");
	CHECK(out[0].iters < out[2].iters, "continuous needs fewer iterations than static");
	CHECK(out[2].empty > 0, "static pads finished requests");
	/* preemption traffic: recompute feeds tokens again, swap copies blocks out and back
	 * (every swapped-out request resumes: what went out comes back); the fake backend's
	 * block is 8 slots of 8 bytes */
	for (int p = 0; p < 3; p++)
		CHECK(out[p].swap_out == 0 && out[p].swap_in == 0 &&
			  (out[p].recomputed > 0) == (out[p].preemptions > 0),
		      "policy %d (recompute): %lld preemptions, %lld tokens recomputed, no swap",
		      p, (long long)out[p].preemptions, (long long)out[p].recomputed);
	CHECK(out[1].recomputed > 0, "max-util recomputed something (%lld)",
	      (long long)out[1].recomputed);
	CHECK(out[3].preemptions > 0 && out[3].swap_out > 0 && out[3].swap_in == out[3].swap_out &&
		  out[3].swap_out % 64 == 0 && out[3].recomputed == 0,
	      "max-util swap: %lld preemptions, %lld bytes out, %lld in, %lld recomputed",
	      (long long)out[3].preemptions, (long long)out[3].swap_out,
	      (long long)out[3].swap_in, (long long)out[3].recomputed);
	free(sp);
}

/* First wave: 16 requests with a shared 24-token prefix (6 blocks of 4) arrive together.
 * Under the continuous policies the first computes the prefix and every later one takes
 * it from the cache (it is held until the first has keyed it); without the hold each
 * would miss, since none had written the prefix when they were admitted. Results equal
 * those of a run without the cache; static admits its batch at once and holds nothing. */
static void test_first_wave(const struct tok *tok)
{
	enum { N = 16, PRE = 24 };
	struct spec sp[N];
	memset(sp, 0, sizeof sp);
	for (int32_t i = 0; i < N; i++) {
		sp[i].n_ids = PRE + 4;
		for (int32_t j = 0; j < PRE + 4; j++)
			sp[i].ids[j] =
			    j == 0 ? 1 : 3 + (j < PRE ? j * 5 : j * 7 + i * 3) % (TV - 3);
		sp[i].max_tokens = 4;
		sp[i].ignore_eos = true;
		sp[i].logprobs = -1;
		sp[i].prompt_logprobs = -1;
	}
	struct fake f;
	struct backend be = fake_backend(&f, TV, 256, 4, FAKE_HASH);
	struct engine_config cfg;
	engine_config_default(&cfg);
	cfg.prefix_cache = false;
	struct run R0;
	CHECK(run_specs(&cfg, &be, tok, 64, sp, N, &R0, NULL) == BG_OK, "reference run");
	fake_free(&f);
	for (int pi = 0; pi < ENGINE_UTIL_N_POLICIES; pi++)
		for (int chunk = 0; chunk < 2; chunk++) {
			const char *name = engine_util_policy(&cfg, pi);
			cfg.chunked_context = chunk;
			cfg.max_batch_size = 32;
			cfg.max_num_tokens = 512; /* room for all 16 prompts in one step */
			be = fake_backend(&f, TV, 256, 4, FAKE_HASH);
			f.shared_ok = true;
			struct run R;
			CHECK(run_specs(&cfg, &be, tok, 64, sp, N, &R, NULL) == BG_OK, "%s run",
			      name);
			int diff = 0, later_cached = 0;
			for (int32_t i = 0; i < N; i++) {
				char w[128];
				diff += !same_result(R0.res[i], R.res[i], w, sizeof w);
				later_cached += i > 0 && R.res[i] && R.res[i]->cached_tokens == PRE;
			}
			CHECK(diff == 0, "%s chunk %d: %d of %d differ without the cache", name,
			      chunk, diff, N);
			if (cfg.policy != ENGINE_POLICY_STATIC)
				CHECK(
				    later_cached == N - 1 && R.tot.cached_tokens == (N - 1) * PRE &&
					R.tot.reused_blocks == (N - 1) * PRE / 4 &&
					R.tot.missed_blocks == PRE / 4 + N,
				    "%s chunk %d: %d of %d later requests took the %d-token prefix "
				    "(cached %lld, reused %lld, missed %lld)",
				    name, chunk, later_cached, N - 1, PRE,
				    (long long)R.tot.cached_tokens, (long long)R.tot.reused_blocks,
				    (long long)R.tot.missed_blocks);
			run_free(&R);
			fake_free(&f);
		}
	run_free(&R0);
}

/* Order input with a long head: look-ahead stays bounded by the window. */
static void test_window(const struct tok *tok)
{
	const int32_t N = 400;
	struct spec *sp = calloc(N, sizeof *sp);
	for (int32_t i = 0; i < N; i++) {
		sp[i].n_ids = 2;
		sp[i].ids[0] = 1;
		sp[i].ids[1] = 5;
		sp[i].max_tokens = i == 0 ? 120 : 1;
		sp[i].ignore_eos = true;
		if (i % 50 == 7)
			sp[i].preset_error = "invalid_json";
	}
	struct fake f;
	struct backend be = fake_backend(&f, TV, 64, 8, FAKE_HASH);
	struct engine_config cfg;
	engine_config_default(&cfg);
	cfg.max_batch_size = 4;
	cfg.max_queued = 8;
	cfg.reorder_window = 16;
	struct run R;
	CHECK(run_specs(&cfg, &be, tok, 256, sp, N, &R, NULL) == BG_OK, "run");
	CHECK(R.n_emitted == N, "all emitted (%d)", R.n_emitted);
	bool ordered = true;
	for (int32_t i = 0; i < R.n_emitted; i++)
		ordered &= R.emit_order[i] == i;
	CHECK(ordered, "in input order");
	/* pulled-but-not-emitted <= window + look-ahead + running (+1 for the one in hand) */
	CHECK(R.max_ahead <= 16 + 8 + 4 + 1, "look-ahead bounded: %lld", (long long)R.max_ahead);
	/* totals: 8 preset errors; the head makes 120 tokens, the other 391 one each */
	CHECK(R.tot.n_read == N && R.tot.n_done == N && R.tot.n_failed == 8 &&
		  R.tot.output_tokens == 120 + 391 && R.tot.prompt_tokens == 2 * 392 &&
		  R.tot.n_active == 0 && R.tot.kv_used_blocks == 0,
	      "totals: read %lld done %lld failed %lld out %lld prompt %lld",
	      (long long)R.tot.n_read, (long long)R.tot.n_done, (long long)R.tot.n_failed,
	      (long long)R.tot.output_tokens, (long long)R.tot.prompt_tokens);
	run_free(&R);
	/* completion order: the long head comes out last */
	cfg.order = ENGINE_ORDER_COMPLETION;
	cfg.max_batch_size = 16;
	CHECK(run_specs(&cfg, &be, tok, 256, sp, N, &R, NULL) == BG_OK, "run 2");
	CHECK(R.n_emitted == N && R.emit_order[N - 1] == 0, "completion order: head last");
	run_free(&R);
	fake_free(&f);
	free(sp);
}

/* The stop flag: complete results out, the rest counted unfinished, nothing lost. */
static void test_stop_flag(const struct tok *tok)
{
	const int32_t N = 60;
	struct spec *sp = make_workload(N, false);
	for (int o = 0; o < 2; o++) {
		struct fake f;
		struct backend be = fake_backend(&f, TV, 64, 4, FAKE_HASH);
		struct engine_config cfg;
		engine_config_default(&cfg);
		cfg.max_batch_size = 8;
		cfg.max_queued = 8;
		cfg.order = o ? ENGINE_ORDER_COMPLETION : ENGINE_ORDER_INPUT;
		volatile sig_atomic_t stop = 0;
		struct run R;
		memset(&R, 0, sizeof R);
		R.specs = sp;
		R.n = N;
		R.res = calloc(N, sizeof *R.res);
		R.emit_order = calloc(N, sizeof *R.emit_order);
		R.stop = &stop;
		R.stop_after_iter = 6;
		struct model_hparams hp = {.n_ctx_train = 64};
		struct engine *e = NULL;
		struct bg_err err = {0};
		CHECK(engine_create(&cfg, &be, tok, &hp, &e, &err) == BG_OK, "create");
		int64_t unf = -1;
		CHECK(engine_run(e, src, sink, prog, &R, &stop, &unf, &err) == BG_OK, "run");
		CHECK(unf > 0 && R.n_emitted + unf == R.next,
		      "order %d: emitted %d + unfinished %lld "
		      "== read %d",
		      o, R.n_emitted, (long long)unf, R.next);
		int incomplete = 0;
		for (int32_t i = 0; i < N; i++)
			if (R.res[i] && R.res[i]->finish == REQ_FINISH_NONE)
				incomplete++;
		CHECK(incomplete == 0, "only finished results are emitted");
		engine_destroy(e);
		run_free(&R);
		fake_free(&f);
	}
	free(sp);
}

/* A text prompt is tokenized with BOS by default; the engine keeps the ids. */
static void test_text_prompt(const struct tok *tok)
{
	struct fake f;
	struct backend be = fake_backend(&f, TV, 64, 4, FAKE_HASH);
	struct spec sp = {0};
	sp.prompt = "ab cd the";
	sp.max_tokens = 3;
	struct engine_config cfg;
	engine_config_default(&cfg);
	struct run R;
	CHECK(run_specs(&cfg, &be, tok, 64, &sp, 1, &R, NULL) == BG_OK, "run");
	int32_t *ids = NULL;
	size_t n = 0;
	struct bg_err err = {0};
	CHECK(tok_encode(tok, sp.prompt, strlen(sp.prompt), true, true, &ids, &n, &err) == BG_OK,
	      "encode: %s", err.msg);
	struct request *r = R.res[0];
	CHECK(r && r->n_prompt == (int32_t)n && n > 0 && r->prompt_ids[0] == 1 &&
		  memcmp(r->prompt_ids, ids, n * sizeof *ids) == 0,
	      "prompt ids = tok_encode(add_bos)");
	CHECK(r && r->n_out == 3 && r->queue_ms >= 0 && r->ttft_ms >= r->queue_ms &&
		  r->e2e_ms >= r->ttft_ms,
	      "metrics ordered: queue %.3f ttft %.3f e2e %.3f", r ? r->queue_ms : -1,
	      r ? r->ttft_ms : -1, r ? r->e2e_ms : -1);
	free(ids);
	run_free(&R);
	fake_free(&f);
}

/* A sink that fails aborts the run with an error; a source that fails ends the input,
 * the requests already read still complete, and the error is returned. No leaks (ASan). */
static int failing_sink(void *user, struct request *r)
{
	struct run *R = user;
	req_free(r);
	return ++R->n_emitted >= 3 ? -1 : 0;
}

static int failing_src(void *user, struct request **out, struct bg_err *err)
{
	struct run *R = user;
	if (R->next >= 5) {
		bg_fail(err, BG_ERR_IO, "read error at line %d", R->next + 1);
		return -1;
	}
	return src(user, out, err);
}

static void test_io_failures(const struct tok *tok)
{
	const int32_t N = 20;
	struct spec *sp = make_workload(N, false);
	struct fake f;
	struct backend be = fake_backend(&f, TV, 64, 4, FAKE_HASH);
	struct engine_config cfg;
	engine_config_default(&cfg);
	cfg.max_batch_size = 4;
	struct model_hparams hp = {.n_ctx_train = 64};
	for (int which = 0; which < 2; which++) {
		struct run R;
		memset(&R, 0, sizeof R);
		R.specs = sp;
		R.n = N;
		R.res = calloc(N, sizeof *R.res);
		R.emit_order = calloc(N, sizeof *R.emit_order);
		struct engine *e = NULL;
		struct bg_err err = {0};
		CHECK(engine_create(&cfg, &be, tok, &hp, &e, &err) == BG_OK, "create");
		enum bg_status st =
		    engine_run(e, which ? failing_src : src, which ? sink : failing_sink, NULL, &R,
			       NULL, NULL, &err);
		CHECK(st == BG_ERR_IO, "%s failure is reported (%d: %s)", which ? "source" : "sink",
		      st, err.msg);
		if (which)
			CHECK(R.n_emitted == 5 && strstr(err.msg, "line 6"),
			      "the 5 requests read complete (%d); message '%s'", R.n_emitted,
			      err.msg);
		else
			CHECK(R.n_emitted == 3, "the run stopped at the failing write (%d)",
			      R.n_emitted);
		engine_destroy(e);
		if (which)
			run_free(&R);
		else {
			free(R.res);
			free(R.emit_order);
		}
	}
	fake_free(&f);
	free(sp);
}

/* ------------------------------------------------------------------------------------ */
/* a source that is not always ready (ENGINE_SOURCE_PENDING)                            */
/* ------------------------------------------------------------------------------------ */

/* A simulated slow producer. Time is the engine's iteration count (seen through the
 * progress callback); request i "arrives" at avail[i]. While the engine has work, a
 * request not yet arrived -- or, at random, one that has -- gets PENDING. While the
 * engine is idle the source "blocks": time jumps to the next arrival (after idle_pend
 * PENDINGs first, to exercise a source that does not block). */
struct prun {
	struct run R; /* first member: the plain sink and progress callbacks take it */
	struct engine *e;
	const int64_t *avail; /* [n] arrival times, non-decreasing */
	int64_t clock;	      /* iterations run + time skipped while blocked */
	uint64_t rng;
	int32_t idle_pend; /* PENDINGs still to give while idle */
	int64_t calls, pend_busy, pend_idle, idle_calls;
	int32_t *emitted_at_read; /* [n] results emitted when request i was read */
	bool idle_at_first_call;
};

static int pend_src(void *user, struct request **out, struct bg_err *err)
{
	struct prun *P = user;
	struct run *R = &P->R;
	if (++P->calls > 100 * (int64_t)R->n)
		return ENGINE_SOURCE_EOF; /* a spinning engine: end it (the call count fails) */
	bool idle = engine_idle(P->e);
	if (P->calls == 1)
		P->idle_at_first_call = idle;
	if (R->next >= R->n)
		return ENGINE_SOURCE_EOF;
	if (idle) {
		P->idle_calls++;
		if (P->idle_pend > 0) {
			P->idle_pend--;
			P->pend_idle++;
			return ENGINE_SOURCE_PENDING;
		}
		if (P->clock < P->avail[R->next])
			P->clock = P->avail[R->next]; /* blocked until it arrived */
	} else {
		P->rng = fake_mix64(P->rng + 0x9e3779b97f4a7c15ull);
		if (P->clock < P->avail[R->next] || P->rng % 3 == 0) {
			P->pend_busy++;
			return ENGINE_SOURCE_PENDING;
		}
	}
	P->emitted_at_read[R->next] = R->n_emitted;
	return src(R, out, err);
}

static void pend_prog(void *user, const struct engine_progress *p)
{
	struct prun *P = user;
	(void)p;
	P->clock++;
}

static void test_pending_source(const struct tok *tok)
{
	const int32_t N = 80, max_seq = 64;
	uint64_t saved = wl_state; /* the tests after this one keep their workloads */
	struct spec *sp = make_workload(N, true);
	wl_state = saved;
	/* arrivals: mostly 0-3 iterations apart; before request 40 a gap longer than any
	 * request can run (prompt <= 40 + max_tokens <= 40 steps, one token a step or more) */
	int64_t *avail = calloc(N, sizeof *avail);
	uint64_t h = 7;
	for (int32_t i = 1; i < N; i++) {
		h = fake_mix64(h + (uint64_t)i);
		avail[i] = avail[i - 1] + (int64_t)(h % 4) + (i == 40 ? 1000 : 0);
	}
	for (int v = 0; v < 4; v++) {
		struct fake f;
		struct backend be = fake_backend(&f, TV, 64, 4, FAKE_HASH);
		struct engine_config cfg;
		engine_config_default(&cfg);
		cfg.max_batch_size = 8;
		cfg.max_num_tokens = 32;
		cfg.max_queued = 4;
		cfg.order = v % 2 ? ENGINE_ORDER_COMPLETION : ENGINE_ORDER_INPUT;
		cfg.policy = v / 2 ? ENGINE_POLICY_MAX_UTIL : ENGINE_POLICY_NO_EVICT;
		struct run ref;
		CHECK(run_specs(&cfg, &be, tok, max_seq, sp, N, &ref, NULL) == BG_OK,
		      "plain run %d", v);

		struct prun P;
		memset(&P, 0, sizeof P);
		P.R.specs = sp;
		P.R.n = N;
		P.R.res = calloc(N, sizeof *P.R.res);
		P.R.emit_order = calloc(N, sizeof *P.R.emit_order);
		P.emitted_at_read = calloc(N, sizeof *P.emitted_at_read);
		P.avail = avail;
		P.rng = (uint64_t)v + 1;
		P.idle_pend = v == 3 ? 5 : 0;
		struct model_hparams hp = {.n_ctx_train = (uint32_t)max_seq};
		struct bg_err err = {0};
		CHECK(engine_create(&cfg, &be, tok, &hp, &P.e, &err) == BG_OK, "create");
		CHECK(engine_idle(P.e), "a fresh engine is idle");
		enum bg_status st =
		    engine_run(P.e, pend_src, sink, pend_prog, &P, NULL, NULL, &err);
		struct engine_progress tot;
		engine_totals(P.e, &tot);
		CHECK(st == BG_OK && P.R.n_emitted == N && P.R.dup == 0,
		      "variant %d: %d results of %d (%s)", v, P.R.n_emitted, N, err.msg);
		int diff = 0;
		char why[160] = "";
		for (int32_t i = 0; i < N; i++) {
			char w[128];
			if (!same_result(ref.res[i], P.R.res[i], w, sizeof w) && diff++ == 0)
				snprintf(why, sizeof why, "request %d: %s", i, w);
		}
		CHECK(diff == 0, "variant %d: results identical to the plain run (%d differ: %s)",
		      v, diff, why);
		if (cfg.order == ENGINE_ORDER_INPUT) {
			bool ordered = true;
			for (int32_t i = 0; i < P.R.n_emitted; i++)
				ordered &= P.R.emit_order[i] == i;
			CHECK(ordered, "variant %d: input order kept", v);
		}
		CHECK(P.pend_busy > 0 && P.pend_idle == (v == 3 ? 5 : 0),
		      "variant %d: PENDING exercised (%lld busy, %lld idle)", v,
		      (long long)P.pend_busy, (long long)P.pend_idle);
		/* no spinning: every call yields a request, the end, or a PENDING; a PENDING
		 * while busy is followed by an iteration, one while idle by a sleep */
		CHECK(P.calls == N + 1 + P.pend_busy + P.pend_idle,
		      "variant %d: %lld source calls = %d requests + EOF + %lld PENDING", v,
		      (long long)P.calls, N, (long long)(P.pend_busy + P.pend_idle));
		CHECK(P.pend_busy <= tot.iter,
		      "variant %d: at most one PENDING per iteration (%lld, %lld iterations)", v,
		      (long long)P.pend_busy, (long long)tot.iter);
		CHECK(P.idle_at_first_call && P.idle_calls >= 2 && P.idle_calls <= N + 1 + 5,
		      "variant %d: the source is told when it may block (%lld idle calls)", v,
		      (long long)P.idle_calls);
		/* the long gap: every earlier request finished and was emitted before request
		 * 40 arrived -- running requests did not wait for the input */
		CHECK(P.emitted_at_read[40] == 40,
		      "variant %d: %d of 40 earlier results out before request 40 arrived", v,
		      P.emitted_at_read[40]);
		CHECK(f.errors == 0, "fake backend: %s", f.err);
		engine_destroy(P.e);
		run_free(&P.R);
		run_free(&ref);
		free(P.emitted_at_read);
		fake_free(&f);
	}
	free(avail);
	free(sp);
}

/* n > 1: sample i of a request equals the request run alone with seed + i, under every
 * policy (with preemption and swaps), chunking and batch size, with copy-on-write of the
 * shared last prompt block (the fake backend checks no block is written by two
 * sequences of a batch, and never reads a slot not written). */
static void test_samples(const struct tok *tok)
{
	const int32_t N = 40, max_seq = 64;
	struct spec *sp = make_workload(N, true);
	int32_t n_exp = 0;
	for (int32_t i = 0; i < N; i++) {
		sp[i].n = wrnd(3) == 0 ? 1 : 2 + (int32_t)wrnd(4);
		sp[i].temperature = 0.9f;
		sp[i].prompt_logprobs = -1;
		n_exp += sp[i].n;
	}
	/* references: every sample as a request of its own, seed + i */
	struct spec *ex = calloc((size_t)n_exp, sizeof *ex);
	int32_t *first = calloc((size_t)N, sizeof *first);
	for (int32_t i = 0, k = 0; i < N; i++) {
		first[i] = k;
		for (int32_t j = 0; j < sp[i].n; j++, k++) {
			ex[k] = sp[i];
			ex[k].n = 1;
			ex[k].seed = sp[i].seed + (uint64_t)j;
		}
	}
	struct fake f;
	struct backend be = fake_backend(&f, TV, 256, 4, FAKE_HASH);
	struct engine_config cfg;
	engine_config_default(&cfg);
	struct run R0;
	CHECK(run_specs(&cfg, &be, tok, max_seq, ex, n_exp, &R0, NULL) == BG_OK, "reference run");
	fake_free(&f);
	int64_t copies = 0, distinct = 0;
	for (int pi = 0; pi < ENGINE_UTIL_N_POLICIES; pi++)
		for (int v = 0; v < 4; v++) {
			engine_util_policy(&cfg, pi);
			cfg.overlap = v / 2;
			cfg.chunked_context = v % 2;
			cfg.max_batch_size = v % 2 ? 16 : 6;
			cfg.max_num_tokens = 48;
			cfg.prefix_cache = pi % 2 == 0;
			cfg.order = v % 2 ? ENGINE_ORDER_COMPLETION : ENGINE_ORDER_INPUT;
			/* 30 blocks of 4: tight, max-util and adaptive preempt; no-evict and
			 * static reserve a family's whole future: 44 hold the largest */
			bool pre = cfg.policy == ENGINE_POLICY_MAX_UTIL ||
				   cfg.policy == ENGINE_POLICY_ADAPTIVE;
			be = fake_backend(&f, TV, pre ? 30 : 44, 4, FAKE_HASH);
			f.shared_ok = true;
			struct run R;
			enum bg_status st = run_specs(&cfg, &be, tok, max_seq, sp, N, &R, NULL);
			int diff = 0;
			char why[200] = "";
			for (int32_t i = 0; i < N; i++) {
				const struct request *r = R.res[i];
				if (!r || (sp[i].n > 1 && r->n_choices != sp[i].n)) {
					diff++;
					continue;
				}
				int32_t total = 0;
				for (int32_t j = 0; j < sp[i].n; j++) {
					struct request view = *r;
					if (sp[i].n > 1) {
						const struct req_choice *c = &r->choices[j];
						req_choice_view(r, c, &view);
						distinct += j > 0 && (c->n_out != r->choices[0].n_out ||
								      memcmp(c->out_ids, r->choices[0].out_ids,
									     (size_t)c->n_out * 4));
					}
					total += view.n_out;
					char w[128];
					if (!same_result(R0.res[first[i] + j], &view, w, sizeof w) &&
					    diff++ == 0)
						snprintf(why, sizeof why, "request %d sample %d: %s", i, j,
							 w);
				}
				if (r->n_out != total && diff++ == 0)
					snprintf(why, sizeof why, "request %d: n_out %d, samples %d", i,
						 r->n_out, total);
			}
			CHECK(st == BG_OK && R.n_emitted == N && R.dup == 0 && diff == 0 &&
				  f.errors == 0,
			      "samples, policy %d v %d overlap %d: %d results, %d differ (%s) %s",
			      pi, v % 2, cfg.overlap, R.n_emitted, diff, why, f.err);
			copies += f.copies;
			run_free(&R);
			fake_free(&f);
		}
	CHECK(copies > 0 && distinct > 0, "copy-on-write happened (%lld), samples differ (%lld)",
	      (long long)copies, (long long)distinct);
	run_free(&R0);
	free(ex);
	free(first);
	free(sp);
}

int main(void)
{
	struct tok *tok = make_tok();
	CHECK(tok != NULL, "tiny vocabulary loads");
	if (!tok)
		return check_summary();
	test_errors(tok);
	test_bad_backend_token(tok);
	test_stops(tok);
	test_prompt_logprobs(tok);
	test_text_prompt(tok);
	test_window(tok);
	test_stop_flag(tok);
	test_io_failures(tok);
	test_pending_source(tok);
	test_policies(tok);
	test_first_wave(tok);
	test_invariance_fake(tok);
	test_random_configs(tok);
	test_samples(tok);
	/* again over a backend with recurrent-state slots (fake_backend.h): the same results,
	 * the fake checking that each sequence's slot holds its own state at every forward
	 * (zeroed at position 0, copied to forked samples, never shared) */
	fake_state_slots = 64;
	test_invariance_fake(tok);
	test_random_configs(tok);
	test_samples(tok);
	fake_state_slots = 0;
	tok_free(tok);
	return check_summary();
}
