/* test_model: hyper-parameters and weights of the real test models (values from
 * ../shared/models/README.md), refusals (vocab-only, v1, other architectures, misshapen or
 * missing tensors made with the writer), the built-in and synthetic models, and the qwen2
 * architecture (qwen2.* keys, Q/K/V bias tensors, NeoX RoPE) and its refusals. */
#include "model/arch.h"
#include "model/model.h"

#include <stdint.h>
#include <string.h>

#include "model/builtin.h"
#include "model/half.h"
#include "model/synth.h"
#include "synth_util.h"
#include "text/tokenizer.h"
#include "check.h"

static bool has(const struct bg_err *e, const char *needle)
{
	return strstr(e->msg, needle) != NULL && strchr(e->msg, '\n') == NULL;
}

static void test_stories(void)
{
	const char *p = check_shared("models/stories260K.gguf");
	if (!p)
		return;
	struct model *m = NULL;
	struct bg_err err = {0};
	CHECK(model_load(p, &m, &err) == BG_OK, "%s", err.msg);
	if (!m)
		return;
	const struct model_hparams *hp = &m->hp;
	CHECK(strcmp(m->arch, "llama") == 0, "arch %s", m->arch);
	CHECK(hp->n_layer == 5 && hp->n_embd == 64 && hp->n_head == 8 && hp->n_head_kv == 4 &&
		  hp->head_dim == 8 && hp->n_ff == 172 && hp->rope_dim == 8 && hp->n_vocab == 512 &&
		  hp->n_ctx_train == 2048,
	      "hparams %u %u %u %u %u %u %u %u %u", hp->n_layer, hp->n_embd, hp->n_head,
	      hp->n_head_kv, hp->head_dim, hp->n_ff, hp->rope_dim, hp->n_vocab, hp->n_ctx_train);
	CHECK(hp->rope_base == 10000.0f && hp->rms_eps == 1e-5f && !hp->rope_neox, "rope/eps");
	/* by hand: 2 * 512*64 + 64 + 5 * (2*64 + 2*64*64 + 2*64*32 + 3*64*172) */
	CHECK(m->n_params == 292800, "n_params %llu", (unsigned long long)m->n_params);
	CHECK(m->weight_bytes == 292800 * 4, "weight_bytes %llu",
	      (unsigned long long)m->weight_bytes);
	CHECK(m->output.data != m->tok_embd.data, "stories260K has its own output.weight");
	CHECK(m->tok_embd.type == GGUF_DTYPE_F32 && m->tok_embd.ne0 == 64 && m->tok_embd.ne1 == 512,
	      "tok_embd");
	const struct gguf_tensor *t = gguf_find_tensor(m->gguf, "blk.4.ffn_down.weight");
	CHECK(t && m->layers[4].w_down.data == t->data && m->layers[4].w_down.ne0 == 172 &&
		  m->layers[4].w_down.ne1 == 64,
	      "blk.4.ffn_down");
	CHECK(m->layers[1].wk.ne0 == 64 && m->layers[1].wk.ne1 == 32, "wk shape");
	CHECK(m->layers[0].attn_norm.ne1 == 1 && m->layers[0].attn_norm.ne0 == 64, "norm shape");
	float v;
	memcpy(&v, m->layers[4].w_down.data, 4);
	CHECK(v == -0.04791264981031418f, "w_down[0] %.9g", v); /* Python reading of the file */
	CHECK(m->synthetic == false && strcmp(m->name, "llama") == 0, "name %s", m->name);
	/* llama: no biases (the contract the CUDA backend relies on: data NULL, ne0 0) */
	CHECK(!hp->qkv_bias && m->layers[0].bq.data == NULL && m->layers[0].bq.ne0 == 0 &&
		  m->layers[4].bk.ne0 == 0 && m->layers[4].bv.data == NULL,
	      "llama has no qkv bias");
	model_free(m);
}

static void test_tiny_random(void)
{
	const char *p = check_shared("models/llama-2-tiny-random.gguf");
	if (!p)
		return;
	struct model *m = NULL;
	struct bg_err err = {0};
	CHECK(model_open(p, false, &m, &err) == BG_OK, "%s", err.msg);
	if (!m)
		return;
	const struct model_hparams *hp = &m->hp;
	CHECK(hp->n_layer == 1 && hp->n_embd == 8 && hp->n_head == 2 && hp->n_head_kv == 2 &&
		  hp->head_dim == 4 && hp->n_ff == 32 && hp->rope_dim == 4 &&
		  hp->n_vocab == 32000 && hp->n_ctx_train == 4096,
	      "hparams");
	CHECK(m->tok_embd.type == GGUF_DTYPE_F16 && m->layers[0].wq.type == GGUF_DTYPE_F16 &&
		  m->layers[0].w_down.type == GGUF_DTYPE_F16 &&
		  m->layers[0].attn_norm.type == GGUF_DTYPE_F32 &&
		  m->output_norm.type == GGUF_DTYPE_F32,
	      "dtypes");
	/* 2 * 32000*8 + 8 + (2*8 + 4*8*8 + 3*8*32) */
	CHECK(m->n_params == 513048, "n_params %llu", (unsigned long long)m->n_params);
	CHECK(m->weight_bytes == 2 * (513048 - 3 * 8) + 4 * 3 * 8, "bytes %llu",
	      (unsigned long long)m->weight_bytes);
	model_free(m);
}

static void test_refusals(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	const char *p = check_shared("vocab/ggml-vocab-llama-spm.gguf");
	if (p) {
		struct gguf_ctx *g = NULL;
		CHECK(gguf_open(p, &g, &err) == BG_OK, "%s", err.msg);
		if (g) {
			CHECK(model_from_gguf(g, &m, &err) == BG_ERR_FORMAT && m == NULL &&
				  has(&err, "has no tensors"),
			      "vocab-only: %s", err.msg);
		}
		CHECK(model_load(p, &m, &err) == BG_ERR_FORMAT && has(&err, p) &&
			  has(&err, "has no tensors"),
		      "vocab-only load: %s", err.msg);
	}
	p = check_shared("models/tinyllamas-stories-260k-f32.gguf");
	if (p)
		CHECK(model_load(p, &m, &err) == BG_ERR_UNSUPPORTED && has(&err, "version 1"),
		      "v1: %s", err.msg);
	CHECK(model_load("/nonexistent/m.gguf", &m, &err) == BG_ERR_IO && m == NULL, "missing");
	CHECK(model_open("synthetic:no-such-shape", true, &m, &err) == BG_ERR_INVALID &&
		  has(&err, "no-such-shape") && has(&err, "llama-3-8b"),
	      "unknown shape: %s", err.msg);
	CHECK(model_open("synthetic:tiny:q4", true, &m, &err) == BG_ERR_INVALID, "bad dtype");
}

/* ---- models rewritten from stories260K with one thing changed ---- */

enum edit {
	E_NONE,
	E_RESHAPE,
	E_DROP,
	E_NORM_F16,
	E_ARCH,
	E_NO_KEY,
	E_BAD_HEADS,
	E_TRANSPOSE,
	E_EXTRA,
	E_EXPERTS
};

/* Copies stories260K, applying edit to tensor/key `what`, and tries to load the result. */
static enum bg_status rewrite(const struct gguf_ctx *src, enum edit e, const char *what,
			      struct model **out, struct bg_err *err)
{
	struct gguf_writer *w = gguf_writer_create();
	for (uint64_t i = 0; i < gguf_n_kv(src); i++) {
		struct gguf_str k = gguf_kv_key(src, i);
		if (e == E_NO_KEY && k.len == strlen(what) && memcmp(k.ptr, what, k.len) == 0)
			continue;
		gguf_writer_copy_kv(w, src, i);
	}
	if (e == E_ARCH)
		gguf_writer_set_str(w, "general.architecture", what);
	if (e == E_BAD_HEADS)
		gguf_writer_set_u32(w, "llama.attention.head_count_kv", 3);
	if (e == E_EXPERTS)
		gguf_writer_set_u32(w, "llama.expert_count", 8);
	static float extra[64];
	if (e == E_EXTRA)
		gguf_writer_add_tensor(w, what, GGUF_DTYPE_F32, 1, (uint64_t[]){64}, extra);
	static uint16_t f16buf[64];
	for (uint64_t i = 0; i < gguf_n_tensors(src); i++) {
		const struct gguf_tensor *t = gguf_tensor(src, i);
		char name[96];
		snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
		bool target = strcmp(name, what) == 0;
		uint64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
		if (target && e == E_DROP)
			continue;
		if (target && e == E_RESHAPE) {
			/* same bytes, claimed as one more row than there is: take fewer columns */
			ne[0] = t->ne[0] / 2;
			ne[1] = t->ne[1] * 2;
		}
		if (target && e == E_TRANSPOSE) {
			ne[0] = t->ne[1];
			ne[1] = t->ne[0];
		}
		if (target && e == E_NORM_F16) {
			gguf_writer_add_tensor(w, name, GGUF_DTYPE_F16, 1, ne, f16buf);
			continue;
		}
		/* a transposed vector is a (1, n) matrix */
		uint32_t n_dims = target && e == E_TRANSPOSE && t->n_dims == 1 ? 2 : t->n_dims;
		gguf_writer_add_tensor(w, name, t->type, n_dims, ne, t->data);
	}
	void *buf;
	size_t len;
	enum bg_status st = gguf_writer_to_buffer(w, &buf, &len, err);
	gguf_writer_destroy(w);
	if (st)
		return st;
	struct gguf_ctx *g = NULL;
	st = gguf_parse(buf, len, true, &g, err);
	if (st)
		return st;
	return model_from_gguf(g, out, err);
}

static void test_rewrites(void)
{
	const char *p = check_shared("models/stories260K.gguf");
	if (!p)
		return;
	struct gguf_ctx *src = NULL;
	struct bg_err err = {0};
	if (gguf_open(p, &src, &err) != BG_OK) {
		CHECK(false, "%s", err.msg);
		return;
	}
	struct model *m = NULL;
	CHECK(rewrite(src, E_NONE, "", &m, &err) == BG_OK, "unchanged copy: %s", err.msg);
	model_free(m);
	m = NULL;

	CHECK(rewrite(src, E_RESHAPE, "blk.2.attn_k.weight", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'blk.2.attn_k.weight' has shape [32, 64], expected [64, 32]"),
	      "reshaped: %s", err.msg);
	CHECK(rewrite(src, E_TRANSPOSE, "blk.0.ffn_down.weight", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'blk.0.ffn_down.weight' has shape [64, 172], expected [172, 64]"),
	      "transposed: %s", err.msg);
	CHECK(rewrite(src, E_TRANSPOSE, "token_embd.weight", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'token_embd.weight'") && has(&err, "expected [64, 512]"),
	      "token_embd: %s", err.msg);
	CHECK(rewrite(src, E_DROP, "blk.3.ffn_up.weight", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'blk.3.ffn_up.weight' is missing"),
	      "dropped: %s", err.msg);
	CHECK(rewrite(src, E_NORM_F16, "blk.1.ffn_norm.weight", &m, &err) == BG_ERR_UNSUPPORTED &&
		  has(&err, "'blk.1.ffn_norm.weight'"),
	      "f16 norm: %s", err.msg);
	CHECK(rewrite(src, E_ARCH, "gemma", &m, &err) == BG_ERR_UNSUPPORTED &&
		  has(&err, "'gemma'") && has(&err, "supported: llama, qwen2, qwen3"),
	      "arch: %s", err.msg);
	/* other architectures are refused by name, never run; qwen3moe reads its own keys */
	CHECK(rewrite(src, E_ARCH, "qwen4exp", &m, &err) == BG_ERR_UNSUPPORTED &&
		  has(&err, "'qwen4exp' is not supported"),
	      "qwen4exp: %s", err.msg);
	CHECK(rewrite(src, E_ARCH, "qwen3moe", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "qwen3moe.block_count is missing"),
	      "qwen3moe with llama keys: %s", err.msg);
	/* qwen2 reads qwen2.* keys: the llama.* ones of this file do not count */
	CHECK(rewrite(src, E_ARCH, "qwen2", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "qwen2.block_count is missing"),
	      "qwen2 arch with llama keys: %s", err.msg);
	CHECK(rewrite(src, E_NO_KEY, "llama.block_count", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "llama.block_count"),
	      "no block_count: %s", err.msg);
	CHECK(rewrite(src, E_BAD_HEADS, "", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "head_count_kv 3"),
	      "kv heads: %s", err.msg);
	/* a llama file with a bias is a variant llama does not compute: refused, not ignored */
	CHECK(rewrite(src, E_EXTRA, "blk.0.attn_q.bias", &m, &err) == BG_ERR_UNSUPPORTED &&
		  has(&err, "'blk.0.attn_q.bias'") && has(&err, "not part of a llama model"),
	      "extra tensor: %s", err.msg);
	/* rope_freqs is read now (Llama 3.1): one of the wrong length is refused */
	CHECK(rewrite(src, E_EXTRA, "rope_freqs.weight", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'rope_freqs.weight' has shape [64], expected [4]"),
	      "rope_freqs: %s", err.msg);
	/* expert_count alone: the rest of the experts' keys are required */
	CHECK(rewrite(src, E_EXPERTS, "", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "llama.expert_used_count is missing"),
	      "experts: %s", err.msg);
	CHECK(m == NULL, "no model on failure");

	/* without the rope.dimension_count and head_count_kv keys the defaults apply */
	CHECK(rewrite(src, E_NO_KEY, "llama.rope.dimension_count", &m, &err) == BG_OK, "%s",
	      err.msg);
	if (m)
		CHECK(m->hp.rope_dim == 8, "default rope_dim %u", m->hp.rope_dim);
	model_free(m);
	m = NULL;
	CHECK(rewrite(src, E_NO_KEY, "llama.attention.head_count_kv", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'blk.0.attn_k.weight' has shape [64, 32], expected [64, 64]"),
	      "default head_count_kv = head_count: %s", err.msg);

	/* dropping output.weight ties the output projection */
	CHECK(rewrite(src, E_DROP, "output.weight", &m, &err) == BG_OK, "tied: %s", err.msg);
	if (m) {
		CHECK(m->output.data == m->tok_embd.data && m->output.ne1 == 512, "tied output");
		CHECK(m->n_params == 292800 - 64 * 512, "tied n_params %llu",
		      (unsigned long long)m->n_params);
	}
	model_free(m);
	gguf_close(src);
}

/* ---- hostile files all the way through the model loader ---- */

/* Seeded byte flips in stories260K's metadata region (the first 14176 bytes): the loader
 * must refuse with a one-line message or load a model whose weights lie in the file. */
static void test_flips(void)
{
	const char *p = check_shared("models/stories260K.gguf");
	if (!p)
		return;
	FILE *f = fopen(p, "rb");
	if (!f)
		return;
	static uint8_t buf[1185376];
	size_t len = fread(buf, 1, sizeof buf, f);
	fclose(f);
	CHECK(len == sizeof buf, "read %zu", len);
	uint64_t x = 12345;
	int n_ok = 0, n_fail = 0, n_bad = 0;
	for (int it = 0; it < 1500; it++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t pos = (size_t)(x % 14176);
		uint8_t old = buf[pos];
		buf[pos] = (it & 1) ? (uint8_t)(x >> 24) : (uint8_t)(old ^ (1u << ((x >> 33) & 7)));
		struct gguf_ctx *g = NULL;
		struct model *m = NULL;
		struct bg_err err = {0};
		if (gguf_parse(buf, len, false, &g, &err) == BG_OK &&
		    model_from_gguf(g, &m, &err) == BG_OK) {
			n_ok++;
			/* every weight lies inside the buffer */
			const uint8_t *lo = buf, *hi = buf + len;
			for (uint32_t l = 0; l < m->hp.n_layer; l++) {
				const struct model_weight *w = &m->layers[l].w_down;
				const uint8_t *d = w->data;
				if (d < lo || d + gguf_row_bytes(w->type, w->ne0) * w->ne1 > hi)
					n_bad++;
			}
			model_free(m);
		} else {
			n_fail++;
			if (!err.msg[0] || strchr(err.msg, '\n'))
				n_bad++;
		}
		buf[pos] = old;
	}
	CHECK(n_bad == 0, "%d flips gave a bad model or no message", n_bad);
	CHECK(n_ok > 0 && n_fail > 0, "flips: %d loaded, %d refused", n_ok, n_fail);
}

/* ---- built-in and synthetic ---- */

static double tensor_std(const struct model_weight *w, double *mean)
{
	double s = 0, s2 = 0;
	uint64_t n = w->ne0 * w->ne1;
	for (uint64_t i = 0; i < n; i++) {
		double x;
		if (w->type == GGUF_DTYPE_F32)
			x = ((const float *)w->data)[i];
		else
			x = half_f16_to_f32(((const uint16_t *)w->data)[i]);
		s += x;
		s2 += x * x;
	}
	*mean = s / (double)n;
	return sqrt(s2 / (double)n - *mean * *mean);
}

/* The default model: stories260K, embedded. Its bytes are ../shared's file (which
 * ../shared/models/README.md gives by size and sha256; the Makefile checks the sha256), its shape is the one that README
 * lists, and it parses in place. What it generates is checked by tests/e2e_builtin.sh
 * against llama.cpp's reference. */
static void test_builtin_default(void)
{
	struct bg_err err = {0};
	CHECK(builtin_gguf_size() == 1185376, "embedded size %zu", builtin_gguf_size());
	CHECK(((uintptr_t)builtin_gguf_data() & 63) == 0, "embedded bytes 64-byte aligned");
	const char *path = check_shared("models/stories260K.gguf");
	FILE *f = path ? fopen(path, "rb") : NULL;
	if (f) {
		size_t n = builtin_gguf_size();
		unsigned char *buf = malloc(n + 1);
		size_t got = buf ? fread(buf, 1, n + 1, f) : 0;
		CHECK(got == n && memcmp(buf, builtin_gguf_data(), n) == 0,
		      "embedded bytes == ../shared/models/stories260K.gguf");
		free(buf);
		fclose(f);
	}
	struct model *m = NULL;
	CHECK(model_open(NULL, false, &m, &err) == BG_OK, "%s", err.msg);
	if (!m)
		return;
	const struct model_hparams *hp = &m->hp;
	CHECK(strcmp(m->arch, "llama") == 0 && strcmp(m->name, "stories260K") == 0, "%s %s",
	      m->arch, m->name);
	CHECK(hp->n_layer == 5 && hp->n_embd == 64 && hp->n_head == 8 && hp->n_head_kv == 4 &&
		  hp->n_ff == 172 && hp->n_vocab == 512 && hp->head_dim == 8,
	      "stories260K hparams");
	CHECK(m->output.data != m->tok_embd.data, "separate output.weight");
	CHECK(m->tok_embd.type == GGUF_DTYPE_F32, "f32");
	/* parsed in place: the weights point into the embedded bytes */
	const char *lo = builtin_gguf_data(), *hi = lo + builtin_gguf_size();
	CHECK((const char *)m->tok_embd.data >= lo && (const char *)m->tok_embd.data < hi,
	      "weights in place");
	model_free(m);
	/* "" is the default too */
	CHECK(model_open("", false, &m, &err) == BG_OK && m && m->hp.n_vocab == 512, "%s",
	      err.msg);
	model_free(m);
}

/* synthetic:builtin: the random-weight model that was the default before stories260K */
static void test_builtin(void)
{
	struct model *m = NULL;
	struct bg_err err = {0};
	CHECK(model_open("synthetic:builtin", false, &m, &err) == BG_OK, "%s", err.msg);
	if (!m)
		return;
	const struct model_hparams *hp = &m->hp;
	CHECK(hp->n_layer == 4 && hp->n_embd == 128 && hp->n_head == 4 && hp->n_head_kv == 2 &&
		  hp->n_ff == 344 && hp->n_ctx_train == 1024 && hp->head_dim == 32,
	      "builtin hparams");
	CHECK(hp->n_vocab >= 300 && hp->n_vocab <= 600, "builtin vocab %u", hp->n_vocab);
	CHECK(m->output.data == m->tok_embd.data, "builtin is tied");
	CHECK(m->gguf && !m->synthetic, "builtin has its gguf");
	struct gguf_str s;
	CHECK(gguf_get_str(m->gguf, "tokenizer.ggml.model", &s) && s.len == 5 &&
		  memcmp(s.ptr, "llama", 5) == 0,
	      "builtin tokenizer model");
	s = gguf_arr_str(m->gguf, "tokenizer.ggml.tokens", 1);
	CHECK(s.len == 3 && memcmp(s.ptr, "<s>", 3) == 0, "bos text");
	s = gguf_arr_str(m->gguf, "tokenizer.ggml.tokens", 3 + 0x41);
	CHECK(s.len == 6 && memcmp(s.ptr, "<0x41>", 6) == 0, "byte token");
	int32_t *types = calloc(hp->n_vocab, sizeof *types);
	CHECK(gguf_arr_copy_i32(m->gguf, "tokenizer.ggml.token_type", types, hp->n_vocab) &&
		  types[0] == 2 && types[1] == 3 && types[2] == 3 && types[3] == 6 &&
		  types[258] == 6 && types[259] == 1,
	      "token types");
	free(types);
	/* norms are 1; projections have std 1/sqrt(fan_in) */
	CHECK(((const float *)m->layers[2].ffn_norm.data)[17] == 1.0f, "norm is 1");
	double mean, sd = tensor_std(&m->layers[0].wq, &mean);
	CHECK(fabs(mean) < 0.01 && fabs(sd - 1.0 / sqrt(128.0)) < 0.005, "wq mean %g std %g", mean,
	      sd);
	sd = tensor_std(&m->layers[1].w_down, &mean);
	CHECK(fabs(sd - 1.0 / sqrt(344.0)) < 0.005, "w_down std %g", sd);
	/* its tokenizer loads, and encodes as llama.cpp does (ids from node-llama-cpp 3.22.1's
	 * tokenize() on the same vocabulary, written out by `batchgen synth --shape builtin`) */
	struct tok *tk = NULL;
	CHECK(tok_load(m->gguf, &tk, &err) == BG_OK, "builtin tokenizer: %s", err.msg);
	if (tk) {
		CHECK(tok_n_vocab(tk) == (int32_t)hp->n_vocab && tok_bos(tk) == 1 &&
			  tok_eos(tk) == 2,
		      "builtin vocab");
		const char *text = "Once upon a time there was a little girl named Lily.";
		static const int32_t want[] = {1,   321, 325, 295, 317, 327, 300, 295,
					       333, 337, 377, 260, 272, 421, 357, 286};
		int32_t *ids = NULL;
		size_t n = 0;
		CHECK(tok_encode(tk, text, strlen(text), true, false, &ids, &n, &err) == BG_OK &&
			  n == sizeof want / sizeof want[0] && memcmp(ids, want, sizeof want) == 0,
		      "builtin encoding (%zu ids)", n);
		free(ids);
		tok_free(tk);
	}
	model_free(m);

	void *a = NULL, *b = NULL;
	size_t la = 0, lb = 0;
	CHECK(synth_builtin(&a, &la, &err) == BG_OK && synth_builtin(&b, &lb, &err) == BG_OK &&
		  la == lb && memcmp(a, b, la) == 0,
	      "builtin is deterministic");
	free(a);
	free(b);
}

static void test_synthetic(void)
{
	struct model *m = NULL;
	struct bg_err err = {0};
	/* parameter counts of the real models (Hugging Face model cards / config arithmetic) */
	struct {
		const char *spec;
		uint64_t n_params;
	} known[] = {
	    {"synthetic:llama-3-8b", 8030261248ull},
	    {"synthetic:llama-2-7b", 6738415616ull},
	    {"synthetic:llama-3.2-1b", 1235814400ull},
	};
	for (size_t i = 0; i < 3; i++) {
		CHECK(model_open(known[i].spec, true, &m, &err) == BG_OK, "%s", err.msg);
		if (!m)
			continue;
		CHECK(m->synthetic && m->gguf == NULL && m->tok_embd.data == NULL &&
			  m->layers[0].wq.data == NULL,
		      "%s is lazy", known[i].spec);
		CHECK(m->n_params == known[i].n_params, "%s: n_params %llu", known[i].spec,
		      (unsigned long long)m->n_params);
		CHECK(m->weight_bytes > 2 * m->n_params - 1000000 &&
			  m->weight_bytes < 2 * m->n_params + 1000000,
		      "%s: f16 bytes %llu", known[i].spec, (unsigned long long)m->weight_bytes);
		model_free(m);
		m = NULL;
	}
	CHECK(model_open("synthetic:llama-3-8b", true, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(m->hp.n_layer == 32 && m->hp.n_embd == 4096 && m->hp.n_head == 32 &&
			  m->hp.n_head_kv == 8 && m->hp.n_ff == 14336 && m->hp.n_vocab == 128256 &&
			  m->hp.rope_base == 500000.0f && m->hp.n_ctx_train == 8192 &&
			  m->hp.head_dim == 128,
		      "llama-3-8b shape");
		CHECK(m->layers[31].wk.ne0 == 4096 && m->layers[31].wk.ne1 == 1024, "wk");
		model_free(m);
		m = NULL;
	}

	/* materialized: f32 and f16 of the same seed agree to f16 rounding, exactly */
	struct synth_opts o;
	synth_opts_init(&o, synth_find_shape("tiny"));
	o.seed = 7;
	void *b32, *b16, *bq8, *b32b;
	size_t l32, l16, lq8, l32b;
	CHECK(synth_to_buffer(&o, &b32, &l32, &err) == BG_OK, "%s", err.msg);
	CHECK(synth_to_buffer(&o, &b32b, &l32b, &err) == BG_OK && l32 == l32b &&
		  memcmp(b32, b32b, l32) == 0,
	      "same seed, same bytes");
	free(b32b);
	o.seed = 8;
	CHECK(synth_to_buffer(&o, &b32b, &l32b, &err) == BG_OK && l32 == l32b &&
		  memcmp(b32, b32b, l32) != 0,
	      "another seed, other bytes");
	free(b32b);
	o.seed = 7;
	o.dtype = GGUF_DTYPE_F16;
	CHECK(synth_to_buffer(&o, &b16, &l16, &err) == BG_OK, "%s", err.msg);
	o.dtype = GGUF_DTYPE_Q8_0;
	CHECK(synth_to_buffer(&o, &bq8, &lq8, &err) == BG_OK, "%s", err.msg);
	struct gguf_ctx *g32 = NULL, *g16 = NULL, *gq8 = NULL;
	struct model *m32 = NULL, *m16 = NULL, *mq8 = NULL;
	if (gguf_parse(b32, l32, true, &g32, &err) == BG_OK)
		model_from_gguf(g32, &m32, &err);
	if (gguf_parse(b16, l16, true, &g16, &err) == BG_OK)
		model_from_gguf(g16, &m16, &err);
	if (gguf_parse(bq8, lq8, true, &gq8, &err) == BG_OK)
		model_from_gguf(gq8, &mq8, &err);
	CHECK(m32 && m16 && mq8, "synthetic tiny models load: %s", err.msg);
	if (m32 && m16 && mq8) {
		const struct model_weight *w32 = &m32->layers[1].wv, *w16 = &m16->layers[1].wv;
		const struct model_weight *wq = &mq8->layers[1].wv;
		CHECK(w16->type == GGUF_DTYPE_F16 && wq->type == GGUF_DTYPE_Q8_0, "dtypes");
		uint64_t n = w32->ne0 * w32->ne1, bad16 = 0, badq = 0;
		double worst = 0;
		for (uint64_t i = 0; i < n; i++) {
			float x = ((const float *)w32->data)[i];
			if (((const uint16_t *)w16->data)[i] != half_f32_to_f16(x))
				bad16++;
			/* q8_0 (as llama.cpp quantizes): q = round(x / d) with d = amax/127, then d
			 * is stored as f16 (relative error <= 2^-11), so |d_f16 q - x| <= d/2 +
			 * 127 d 2^-11 */
			const uint8_t *blk = (const uint8_t *)wq->data + (i / 32) * 34;
			uint16_t dh;
			memcpy(&dh, blk, 2);
			float d = half_f16_to_f32(dh);
			float y = d * (float)(int8_t)blk[2 + i % 32];
			double e = fabs((double)y - x);
			if (e > worst)
				worst = e;
			if (e > d * (0.5 + 127.0 / 2048.0) + 1e-7)
				badq++;
		}
		CHECK(bad16 == 0, "%llu f16 values differ from f16(f32)",
		      (unsigned long long)bad16);
		CHECK(badq == 0, "%llu q8_0 values off by more than d/2 (worst %g)",
		      (unsigned long long)badq, worst);
		CHECK(m32->output.data != m32->tok_embd.data, "tiny is untied");
		double mean, sd = tensor_std(&m32->output, &mean);
		CHECK(fabs(sd - 4.0 / 8.0) < 0.02, "output std %g", sd);
	}
	model_free(m32);
	model_free(m16);
	model_free(mq8);

	/* q8_0 needs multiples of 32 */
	synth_opts_init(&o, synth_find_shape("builtin"));
	o.dtype = GGUF_DTYPE_Q8_0;
	CHECK(synth_check(&o, &err) == BG_ERR_INVALID && has(&err, "q8_0"), "q8_0 ffn 344");
	synth_opts_init(&o, synth_find_shape("tiny"));
	o.shape.n_head_kv = 3;
	CHECK(synth_check(&o, &err) == BG_ERR_INVALID, "kv heads 3");
	o.shape.n_head_kv = 2;
	o.shape.n_vocab = 100;
	CHECK(synth_check(&o, &err) == BG_ERR_INVALID && has(&err, "259"), "vocab 100");

	/* a generated vocabulary pads to n_vocab with [PAD<id>] */
	o.shape.n_vocab = 1000;
	struct gguf_ctx *g = NULL;
	CHECK(synth_util_gguf(&o, &g, &err) == BG_OK, "%s", err.msg);
	if (g) {
		struct gguf_str s = gguf_arr_str(g, "tokenizer.ggml.tokens", 999);
		CHECK(s.len == 8 && memcmp(s.ptr, "[PAD999]", 8) == 0, "pad token %.*s", (int)s.len,
		      s.ptr);
		CHECK(model_from_gguf(g, &m, &err) == BG_OK && m->hp.n_vocab == 1000, "%s",
		      err.msg);
		model_free(m);
		m = NULL;
	}

	/* the tokenizer copied from a vocab file */
	const char *p = check_shared("vocab/ggml-vocab-llama-spm.gguf");
	if (p) {
		struct gguf_ctx *vg = NULL;
		CHECK(gguf_open(p, &vg, &err) == BG_OK, "%s", err.msg);
		synth_opts_init(&o, synth_find_shape("tiny"));
		o.vocab_from = vg;
		CHECK(synth_n_vocab(&o) == 32000, "vocab from file %u", synth_n_vocab(&o));
		CHECK(synth_util_gguf(&o, &g, &err) == BG_OK, "%s", err.msg);
		if (g && vg) {
			uint64_t n_copied = 0;
			for (uint64_t i = 0; i < gguf_n_kv(vg); i++) {
				struct gguf_str k = gguf_kv_key(vg, i);
				if (k.len <= 10 || memcmp(k.ptr, "tokenizer.", 10) != 0)
					continue;
				char key[256];
				snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
				int64_t j = gguf_find_key(g, key);
				n_copied +=
				    j >= 0 && gguf_kv_type(g, (uint64_t)j) == gguf_kv_type(vg, i);
			}
			CHECK(n_copied >= 5, "tokenizer keys copied: %llu",
			      (unsigned long long)n_copied);
			struct gguf_str a = gguf_arr_str(g, "tokenizer.ggml.tokens", 31999);
			struct gguf_str b = gguf_arr_str(vg, "tokenizer.ggml.tokens", 31999);
			CHECK(a.len == b.len && a.len && memcmp(a.ptr, b.ptr, a.len) == 0,
			      "last token copied");
			CHECK(model_from_gguf(g, &m, &err) == BG_OK && m->hp.n_vocab == 32000 &&
				  m->tok_embd.ne1 == 32000,
			      "%s", err.msg);
			model_free(m);
			m = NULL;
		} else {
			gguf_close(g);
		}
		gguf_close(vg);
	}

	/* materialized through model_open */
	CHECK(model_open("synthetic:tiny:bf16", false, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(!m->synthetic && m->gguf && m->layers[0].wq.type == GGUF_DTYPE_BF16 &&
			  m->layers[0].wq.data != NULL,
		      "materialized");
		model_free(m);
	}
}

/* ---- qwen2 ---- */

/* A qwen2-tiny model (f32 matrices unless dtype says otherwise) parsed from a buffer; the
 * gguf context goes to *g (NULL on failure). */
static struct gguf_ctx *qwen2_gguf(enum gguf_dtype dtype, bool tie)
{
	struct synth_opts o;
	synth_opts_init(&o, synth_find_shape("qwen2-tiny"));
	o.dtype = dtype;
	o.seed = 21;
	o.tie_output = tie;
	struct gguf_ctx *g;
	struct bg_err err = {0};
	CHECK(synth_util_gguf(&o, &g, &err) == BG_OK, "qwen2-tiny: %s", err.msg);
	return g;
}

static void test_qwen2(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	struct gguf_ctx *g = qwen2_gguf(GGUF_DTYPE_F16, false);
	if (!g)
		return;
	/* the keys are qwen2.*; gguf_ctx stays readable through m->gguf */
	CHECK(gguf_find_key(g, "qwen2.block_count") >= 0 &&
		  gguf_find_key(g, "llama.block_count") < 0,
	      "qwen2 keys written");
	CHECK(model_from_gguf(g, &m, &err) == BG_OK, "qwen2-tiny loads: %s", err.msg);
	if (!m)
		return;
	const struct model_hparams *hp = &m->hp;
	CHECK(strcmp(m->arch, "qwen2") == 0, "arch %s", m->arch);
	CHECK(hp->n_layer == 2 && hp->n_embd == 64 && hp->n_head == 4 && hp->n_head_kv == 2 &&
		  hp->head_dim == 16 && hp->n_ff == 128 && hp->n_vocab == 512 &&
		  hp->n_ctx_train == 256 && hp->rope_dim == 16,
	      "qwen2 hparams");
	CHECK(hp->rope_base == 1e6f && hp->rms_eps == 1e-6f, "qwen2 rope base %g eps %g",
	      (double)hp->rope_base, (double)hp->rms_eps);
	CHECK(hp->qkv_bias && hp->rope_neox, "qwen2: qkv_bias and NeoX RoPE");
	for (uint32_t l = 0; l < 2; l++) {
		const struct model_layer *ly = &m->layers[l];
		char name[64];
		snprintf(name, sizeof name, "blk.%u.attn_k.bias", l);
		const struct gguf_tensor *t = gguf_find_tensor(m->gguf, name);
		CHECK(t && ly->bk.data == t->data, "%s points into the file", name);
		/* f32 although the matrices are f16 */
		CHECK(ly->bq.type == GGUF_DTYPE_F32 && ly->bq.ne0 == 64 && ly->bq.ne1 == 1 &&
			  ly->bk.type == GGUF_DTYPE_F32 && ly->bk.ne0 == 32 && ly->bk.ne1 == 1 &&
			  ly->bv.type == GGUF_DTYPE_F32 && ly->bv.ne0 == 32 && ly->bv.ne1 == 1 &&
			  ly->bq.data && ly->bv.data && ly->wq.type == GGUF_DTYPE_F16,
		      "layer %u bias shapes and types", l);
	}
	/* by hand: 2 * 512*64 (untied) + 64 + 2 * (2*64 + 64*64 + 2*64*32 + 64*64 + 3*64*128
	 * + 64 + 2*32 biases) */
	CHECK(m->n_params == 139840, "qwen2 n_params %llu", (unsigned long long)m->n_params);
	/* f16 matrices; f32 norms (5 * 64) and biases (2 * 128): 576 values */
	CHECK(m->weight_bytes == 2 * (139840 - 576) + 4 * 576, "qwen2 weight_bytes %llu",
	      (unsigned long long)m->weight_bytes);
	/* the biases are random, N(0, 0.5^2) (synth.h): 128 values of bq */
	double s = 0, s2 = 0;
	for (uint32_t l = 0; l < 2; l++)
		for (int i = 0; i < 64; i++) {
			double x = ((const float *)m->layers[l].bq.data)[i];
			s += x;
			s2 += x * x;
		}
	double sd = sqrt(s2 / 128 - (s / 128) * (s / 128));
	CHECK(fabs(sd - 0.5) < 0.15 && fabs(s / 128) < 0.2, "bias std %g mean %g", sd, s / 128);
	model_free(m);
	m = NULL;

	/* a tied qwen2 (no output.weight) */
	g = qwen2_gguf(GGUF_DTYPE_F32, true);
	if (g) {
		CHECK(model_from_gguf(g, &m, &err) == BG_OK && m->output.data == m->tok_embd.data &&
			  m->n_params == 139840 - 512 * 64,
		      "tied qwen2: %s", err.msg);
		model_free(m);
		m = NULL;
	}

	/* refusals, each naming the tensor: missing, misshapen, wrong type, 2-D */
	struct gguf_ctx *src = qwen2_gguf(GGUF_DTYPE_F32, false);
	if (!src)
		return;
	CHECK(rewrite(src, E_NONE, "", &m, &err) == BG_OK, "unchanged qwen2 copy: %s", err.msg);
	model_free(m);
	m = NULL;
	CHECK(rewrite(src, E_DROP, "blk.1.attn_k.bias", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'blk.1.attn_k.bias' is missing"),
	      "missing bias: %s", err.msg);
	CHECK(rewrite(src, E_DROP, "blk.0.attn_q.bias", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'blk.0.attn_q.bias' is missing"),
	      "missing q bias: %s", err.msg);
	CHECK(rewrite(src, E_RESHAPE, "blk.0.attn_q.bias", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'blk.0.attn_q.bias' has shape [32], expected [64]"),
	      "short bias: %s", err.msg);
	CHECK(rewrite(src, E_TRANSPOSE, "blk.1.attn_v.bias", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "'blk.1.attn_v.bias' has shape [1, 32], expected [32]"),
	      "2-D bias: %s", err.msg);
	CHECK(rewrite(src, E_NORM_F16, "blk.1.attn_v.bias", &m, &err) == BG_ERR_UNSUPPORTED &&
		  has(&err, "'blk.1.attn_v.bias' has type f16") && has(&err, "biases must be f32"),
	      "f16 bias: %s", err.msg);
	/* an unknown extra tensor in a qwen2 file is refused like in llama */
	CHECK(rewrite(src, E_EXTRA, "blk.0.attn_output.bias", &m, &err) == BG_ERR_UNSUPPORTED &&
		  has(&err, "'blk.0.attn_output.bias'") && has(&err, "qwen2 model"),
	      "extra qwen2 tensor: %s", err.msg);
	CHECK(rewrite(src, E_NO_KEY, "qwen2.embedding_length", &m, &err) == BG_ERR_FORMAT &&
		  has(&err, "qwen2.embedding_length"),
	      "qwen2 key missing: %s", err.msg);
	/* rope base defaults to 10000 without the key, as for llama */
	CHECK(rewrite(src, E_NO_KEY, "qwen2.rope.freq_base", &m, &err) == BG_OK &&
		  m->hp.rope_base == 10000.0f,
	      "qwen2 default rope base: %s", err.msg);
	model_free(m);
	m = NULL;
	CHECK(m == NULL, "no model on failure");
	gguf_close(src);

	/* lazy: the real Qwen2.5 parameter counts (Hugging Face model cards: 494,032,768 and
	 * 7,615,616,512), and biases described with data NULL */
	CHECK(model_open("synthetic:qwen2.5-0.5b", true, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(strcmp(m->arch, "qwen2") == 0 && m->hp.qkv_bias && m->hp.rope_neox &&
			  m->hp.rope_base == 1e6f && m->hp.n_head == 14 && m->hp.n_head_kv == 2 &&
			  m->hp.head_dim == 64 && m->hp.n_vocab == 151936,
		      "qwen2.5-0.5b shape");
		CHECK(m->n_params == 494032768ull, "qwen2.5-0.5b n_params %llu",
		      (unsigned long long)m->n_params);
		const struct model_layer *ly = &m->layers[23];
		CHECK(ly->bq.data == NULL && ly->bq.ne0 == 896 && ly->bq.ne1 == 1 &&
			  ly->bq.type == GGUF_DTYPE_F32 && ly->bk.ne0 == 128 && ly->bv.ne0 == 128 &&
			  ly->bv.data == NULL,
		      "lazy biases described");
		CHECK(m->output.ne1 == 151936 && m->output.data == NULL, "tied lazy output");
		model_free(m);
		m = NULL;
	}
	CHECK(model_open("synthetic:qwen2.5-7b", true, &m, &err) == BG_OK && m &&
		  m->n_params == 7615616512ull,
	      "qwen2.5-7b n_params %llu", m ? (unsigned long long)m->n_params : 0ull);
	model_free(m);
	m = NULL;
	/* a lazy llama has no biases */
	CHECK(model_open("synthetic:tiny", true, &m, &err) == BG_OK && m && !m->hp.qkv_bias &&
		  m->layers[1].bq.ne0 == 0 && m->layers[1].bv.ne0 == 0,
	      "lazy llama without biases");
	model_free(m);
	m = NULL;
	/* materialized through model_open, q8_0 matrices and f32 biases */
	CHECK(model_open("synthetic:qwen2-tiny:q8_0", false, &m, &err) == BG_OK && m &&
		  m->layers[0].wq.type == GGUF_DTYPE_Q8_0 &&
		  m->layers[0].bq.type == GGUF_DTYPE_F32 && m->layers[0].bq.data != NULL,
	      "qwen2-tiny:q8_0: %s", err.msg);
	model_free(m);
	/* synth refuses an architecture it does not make */
	struct synth_opts o;
	synth_opts_init(&o, synth_find_shape("tiny"));
	o.shape.arch = "gemma";
	CHECK(synth_check(&o, &err) == BG_ERR_INVALID && has(&err, "gemma"), "synth arch: %s",
	      err.msg);
}

/* The architectures of core/model/arch.h: published parameter counts of the full shapes
 * (lazy), and what the loader makes of each tiny synthetic file. */
static void test_arch(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	/* Hugging Face model cards / safetensors totals */
	struct {
		const char *spec;
		uint64_t n_params;
	} known[] = {
	    {"synthetic:llama-3.1-8b", 8030261248ull}, {"synthetic:llama-3.1-70b", 70553706496ull},
	    {"synthetic:qwen3-0.6b", 596049920ull},    {"synthetic:qwen3-8b", 8190735360ull},
	    {"synthetic:gemma2-2b", 2614341888ull},    {"synthetic:gemma3-1b", 999885952ull},
	    {"synthetic:phi3-mini", 3821079552ull},
	    {"synthetic:qwen3-30b-a3b", 30532122624ull}, {"synthetic:mixtral-8x7b", 46702792704ull},
	    {"synthetic:gpt-oss-20b", 20914757184ull}, /* biases and sinks included */
	};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		CHECK(model_open(known[i].spec, true, &m, &err) == BG_OK, "%s", err.msg);
		if (!m)
			continue;
		CHECK(m->n_params == known[i].n_params, "%s: n_params %llu", known[i].spec,
		      (unsigned long long)m->n_params);
		const struct synth_shape *sh = synth_find_shape(known[i].spec + 10);
		CHECK(sh && synth_n_params(sh, sh->tie_output) == m->n_params,
		      "%s: synth_n_params agrees", known[i].spec);
		model_free(m);
		m = NULL;
	}

	/* qwen3: head_dim from key_length, Q/K norms */
	CHECK(model_open("synthetic:qwen3-tiny", false, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(m->hp.head_dim == 32 && m->hp.qk_norm && m->hp.rope_neox &&
			  m->layers[1].q_norm.ne0 == 32 && m->layers[1].k_norm.data &&
			  m->layers[0].wq.ne1 == 128 && m->layers[0].wo.ne0 == 128 && !m->hp.n_swa,
		      "qwen3-tiny features");
		model_free(m);
		m = NULL;
	}
	/* gemma2: every other layer windowed, soft-caps, sqrt(n_embd), post-norms */
	CHECK(model_open("synthetic:gemma2-tiny", false, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(m->hp.n_swa == 16 && m->layers[0].swa && !m->layers[1].swa &&
			  m->layers[2].swa && !m->layers[3].swa && m->hp.attn_softcap == 2.0f &&
			  m->hp.final_softcap == 3.0f && m->hp.embd_scale == 8.0f && m->hp.gelu &&
			  m->hp.post_norms && m->layers[3].ffn_post_norm.data &&
			  fabsf(m->hp.attn_scale - 1.0f / sqrtf(32.0f)) < 1e-7f &&
			  m->hp.rope_base_swa == m->hp.rope_base,
		      "gemma2-tiny features");
		model_free(m);
		m = NULL;
	}
	/* gemma3: 5 windowed layers then a global one; local RoPE base 10000, global 1e6 */
	CHECK(model_open("synthetic:gemma3-tiny", false, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(m->layers[0].swa && m->layers[4].swa && !m->layers[5].swa &&
			  m->hp.rope_base_swa == 10000.0f && m->hp.rope_base == 1e6f &&
			  m->hp.final_softcap == 0.0f && m->hp.attn_softcap == 0.0f && m->hp.qk_norm,
		      "gemma3-tiny features");
		model_free(m);
		m = NULL;
	}
	/* phi3: fused tensors as row views; the window is recorded, not applied; long
	 * factors because n_ctx_train 256 > the original 64 */
	CHECK(model_open("synthetic:phi3-tiny:f32", false, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_layer *ly = &m->layers[1];
		size_t row = 64 * 4; /* f32 rows of n_embd */
		CHECK(m->hp.n_swa == 0 && m->hp.n_swa_file == 16 && !ly->swa &&
			  (const char *)ly->wk.data == (const char *)ly->wq.data + 64 * row &&
			  (const char *)ly->wv.data == (const char *)ly->wk.data + 64 * row &&
			  (const char *)ly->w_up.data == (const char *)ly->w_gate.data + 128 * row &&
			  ly->w_gate.ne1 == 128 && ly->w_up.ne1 == 128 &&
			  strcmp(m->hp.rope_factors, "rope_factors_long") == 0 &&
			  m->rope_factors.ne0 == 8 && m->hp.rope_attn_factor > 1.0f,
		      "phi3-tiny features");
		model_free(m);
		m = NULL;
	}
	/* llama 3.1 rope_freqs; yarn keys */
	CHECK(model_open("synthetic:llama3-tiny", false, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(strcmp(m->hp.rope_factors, "rope_freqs") == 0 && m->rope_factors.ne0 == 8 &&
			  m->hp.n_ctx_orig == 64,
		      "llama3-tiny rope_freqs");
		model_free(m);
		m = NULL;
	}
	/* Llama 3.2's shape: factor 32 (not 3.1's 8) over 8192, 128k context. A narrow copy
	 * keeps its head size 64, base and rope keys; the written factors run from 1 for the
	 * fast dimensions to 32 for the slow ones, rising in between. */
	{
		struct synth_opts o;
		synth_opts_init(&o, synth_find_shape("llama-3.2-1b"));
		o.shape.n_layer = 1, o.shape.n_embd = 128, o.shape.n_head = o.shape.n_head_kv = 2;
		o.shape.n_ff = 64, o.shape.n_vocab = 512;
		struct gguf_ctx *g;
		uint32_t ctx = 0, orig = 0;
		CHECK(synth_util_gguf(&o, &g, &err) == BG_OK, "%s", err.msg);
		const struct gguf_tensor *t = g ? gguf_find_tensor(g, "rope_freqs.weight") : NULL;
		CHECK(t && t->type == GGUF_DTYPE_F32 && t->ne[0] == 32, "llama-3.2 rope_freqs shape");
		if (t) {
			float f[32];
			memcpy(f, t->data, sizeof f);
			bool rising = true;
			for (int i = 1; i < 32; i++)
				rising &= f[i] >= f[i - 1];
			CHECK(f[0] == 1.0f && f[31] == 32.0f && rising && f[16] > 1.0f && f[16] < 32.0f,
			      "llama-3.2 factors %g .. %g .. %g", (double)f[0], (double)f[16],
			      (double)f[31]);
		}
		CHECK(g && gguf_get_u32(g, "llama.context_length", &ctx) && ctx == 131072 &&
			  gguf_get_u32(g, "llama.rope.scaling.original_context_length", &orig) &&
			  orig == 8192 && gguf_find_key(g, "llama.rope.scaling.factor") < 0,
		      "llama-3.2 keys: ctx %u orig %u", ctx, orig);
		gguf_close(g);
	}
	CHECK(model_open("synthetic:llama-yarn-tiny", false, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(m->hp.rope_yarn && m->hp.rope_freq_scale == 0.25f && m->hp.n_ctx_orig == 64,
		      "llama-yarn-tiny");
		model_free(m);
		m = NULL;
	}
}

/* ---- mixtures of experts ---- */

enum moe_edit {
	ME_NONE, ME_KEY, ME_DROP, ME_RESHAPE, ME_SPLIT, ME_DENSE, ME_HALVE, ME_ADD, ME_BOOLS,
	ME_KEY_F32, ME_KEY_FALSE, ME_KEY_LIST
};

/* The synthetic shape `shape` (f32) written and parsed again with one change: ME_KEY sets
 * u32 key `what` to val (or removes it when val is UINT32_MAX); ME_DROP drops tensor
 * `what`; ME_RESHAPE gives it one expert less (ne2 - 1; bytes as they are); ME_SPLIT adds
 * blk.0.ffn_gate.0.weight (the old per-expert form); ME_DENSE adds blk.0.ffn_gate.weight;
 * ME_HALVE halves tensor `what`'s ne0; ME_ADD adds an f32 vector (64) named `what`;
 * ME_BOOLS sets key `what` to a bool list of 4 (bit i of val: element i; bit 31: 5; bit
 * 30: 3);
 * ME_KEY_F32 sets f32 key `what` to val / 1000 (removes it when val is UINT32_MAX);
 * ME_KEY_FALSE sets bool key `what` to false; ME_KEY_LIST sets `what` to a list of 4 i32
 * values val. */
static enum bg_status moe_rewrite(const char *shape, enum moe_edit e, const char *what,
				  uint32_t val, struct model **out, struct bg_err *err)
{
	struct synth_opts o;
	synth_opts_init(&o, synth_find_shape(shape));
	struct gguf_ctx *src;
	enum bg_status st = synth_util_gguf(&o, &src, err);
	if (st)
		return st;
	struct gguf_writer *w = gguf_writer_create();
	for (uint64_t i = 0; i < gguf_n_kv(src); i++) {
		struct gguf_str k = gguf_kv_key(src, i);
		if ((e == ME_KEY || e == ME_BOOLS || e == ME_KEY_F32 || e == ME_KEY_FALSE ||
		     e == ME_KEY_LIST) &&
		    k.len == strlen(what) && memcmp(k.ptr, what, k.len) == 0)
			continue;
		gguf_writer_copy_kv(w, src, i);
	}
	if (e == ME_KEY && val != UINT32_MAX)
		gguf_writer_set_u32(w, what, val);
	if (e == ME_BOOLS) {
		uint8_t v[17];
		uint32_t et = GGUF_TYPE_BOOL;
		uint64_t cnt = val >> 31 ? 5 : val >> 30 & 1 ? 3 : 4;
		memcpy(v, &et, 4);
		memcpy(v + 4, &cnt, 8);
		for (uint64_t i = 0; i < cnt; i++)
			v[12 + i] = (uint8_t)((val >> i) & 1);
		gguf_writer_set_raw(w, what, GGUF_TYPE_ARRAY, v, 12 + (size_t)cnt);
	}
	if (e == ME_KEY_F32 && val != UINT32_MAX)
		gguf_writer_set_f32(w, what, (float)val / 1000.0f);
	if (e == ME_KEY_FALSE)
		gguf_writer_set_bool(w, what, false);
	if (e == ME_KEY_LIST) {
		int32_t v[4] = {(int32_t)val, (int32_t)val, (int32_t)val, (int32_t)val};
		gguf_writer_set_arr_i32(w, what, v, 4);
	}
	static float extra[64 * 64];
	if (e == ME_SPLIT)
		gguf_writer_add_tensor(w, "blk.0.ffn_gate.0.weight", GGUF_DTYPE_F32, 2,
				       (uint64_t[]){64, 64}, extra);
	if (e == ME_DENSE)
		gguf_writer_add_tensor(w, "blk.0.ffn_gate.weight", GGUF_DTYPE_F32, 2,
				       (uint64_t[]){64, 64}, extra);
	if (e == ME_ADD)
		gguf_writer_add_tensor(w, what, GGUF_DTYPE_F32, 1, (uint64_t[]){64}, extra);
	for (uint64_t i = 0; i < gguf_n_tensors(src); i++) {
		const struct gguf_tensor *t = gguf_tensor(src, i);
		char name[96];
		snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
		bool target = strcmp(name, what) == 0;
		uint64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
		if (target && e == ME_DROP)
			continue;
		if (target && e == ME_RESHAPE)
			ne[2] -= 1;
		if (target && e == ME_HALVE)
			ne[0] /= 2;
		gguf_writer_add_tensor(w, name, t->type, t->n_dims, ne, t->data);
	}
	void *buf;
	size_t len;
	st = gguf_writer_to_buffer(w, &buf, &len, err);
	gguf_writer_destroy(w);
	gguf_close(src);
	if (st)
		return st;
	struct gguf_ctx *g = NULL;
	if ((st = gguf_parse(buf, len, true, &g, err)))
		return st;
	return model_from_gguf(g, out, err);
}

/* A refusal: the shape rewritten by moe_rewrite(shape, e, what, val) is refused with status
 * st and a message containing msg, and no model is returned. */
struct refusal {
	const char *shape;
	enum moe_edit e;
	const char *what;
	uint32_t val;
	enum bg_status st;
	const char *msg;
};

static void check_refusals(const struct refusal *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct bg_err err = {0};
		struct model *m = NULL;
		enum bg_status st = moe_rewrite(r[i].shape, r[i].e, r[i].what, r[i].val, &m, &err);
		CHECK(st == r[i].st && m == NULL && has(&err, r[i].msg),
		      "%s %d %s %u: status %d, '%s' (want '%s')", r[i].shape, (int)r[i].e, r[i].what,
		      r[i].val, (int)st, err.msg, r[i].msg);
		model_free(m);
	}
}

static void test_moe(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	/* qwen3moe-tiny: 8 experts, 4 used, 32 wide; the stacked weights and one expert's view */
	CHECK(moe_rewrite("qwen3moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *ly = &m->layers[1];
		CHECK(hp->n_expert == 8 && hp->n_expert_used == 4 && hp->n_ff_exp == 32 &&
			  hp->expert_weights_norm && hp->qk_norm && hp->rope_neox && hp->head_dim == 32,
		      "qwen3moe-tiny hparams: %u %u %u", hp->n_expert, hp->n_expert_used,
		      hp->n_ff_exp);
		CHECK(ly->ffn_gate_inp.ne0 == 64 && ly->ffn_gate_inp.ne1 == 8 &&
			  ly->ffn_gate_inp.ne2 == 0 && ly->ffn_gate_inp.type == GGUF_DTYPE_F32 &&
			  ly->gate_exps.ne0 == 64 && ly->gate_exps.ne1 == 32 && ly->gate_exps.ne2 == 8 &&
			  ly->up_exps.ne2 == 8 && ly->down_exps.ne0 == 32 && ly->down_exps.ne1 == 64 &&
			  ly->down_exps.ne2 == 8 && !ly->w_gate.data && !ly->w_up.data &&
			  !ly->w_down.data,
		      "qwen3moe-tiny layer shapes");
		struct model_weight e3 = model_expert(&ly->down_exps, 3);
		CHECK(e3.ne2 == 0 && e3.ne0 == 32 && e3.ne1 == 64 &&
			  (const char *)e3.data == (const char *)ly->down_exps.data + 3 * 64 * 32 * 4,
		      "model_expert: expert 3's rows");
		/* every weight counted: attention as qwen3-tiny, the router and 8 experts */
		const struct synth_shape *sh = synth_find_shape("qwen3moe-tiny");
		CHECK(m->n_params == synth_n_params(sh, false) &&
			  m->weight_bytes == 4 * m->n_params,
		      "n_params %llu, bytes %llu", (unsigned long long)m->n_params,
		      (unsigned long long)m->weight_bytes);
	}
	model_free(m);
	m = NULL;
	/* mixtral-tiny: llama with experts as wide as feed_forward_length */
	CHECK(moe_rewrite("mixtral-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m)
		CHECK(strcmp(m->arch, "llama") == 0 && m->hp.n_expert == 8 &&
			  m->hp.n_expert_used == 2 && m->hp.n_ff_exp == 64 && !m->hp.rope_neox &&
			  m->layers[0].up_exps.ne1 == 64,
		      "mixtral-tiny");
	model_free(m);
	m = NULL;
	/* the lazy real-size shapes describe the same stacked weights */
	CHECK(model_open("synthetic:qwen3-30b-a3b", true, &m, &err) == BG_OK, "%s", err.msg);
	if (m)
		CHECK(m->hp.n_expert == 128 && m->hp.n_expert_used == 8 && m->hp.n_ff_exp == 768 &&
			  m->layers[47].gate_exps.ne2 == 128 && m->layers[47].down_exps.ne0 == 768 &&
			  m->layers[0].ffn_gate_inp.ne1 == 128 && !m->layers[0].gate_exps.data,
		      "lazy qwen3-30b-a3b");
	model_free(m);
	m = NULL;

	/* every bound refused with a message naming it */
	static const struct refusal bad[] = {
	    {"qwen3moe-tiny", ME_KEY, "qwen3moe.expert_used_count", 9, BG_ERR_FORMAT,
	     "qwen3moe.expert_used_count is 9 (expected 1 to 8)"},
	    {"qwen3moe-tiny", ME_KEY, "qwen3moe.expert_used_count", 0, BG_ERR_FORMAT,
	     "qwen3moe.expert_used_count is 0"},
	    {"qwen3moe-tiny", ME_KEY, "qwen3moe.expert_count", 513, BG_ERR_FORMAT,
	     "qwen3moe.expert_count is 513 (expected 1 to 512)"},
	    {"qwen3moe-tiny", ME_KEY, "qwen3moe.expert_count", UINT32_MAX, BG_ERR_FORMAT,
	     "qwen3moe.expert_count is missing or 0"},
	    {"qwen3moe-tiny", ME_KEY, "qwen3moe.expert_feed_forward_length", UINT32_MAX,
	     BG_ERR_FORMAT, "qwen3moe.expert_feed_forward_length is missing"},
	    {"qwen3moe-tiny", ME_KEY, "qwen3moe.expert_shared_count", 1, BG_ERR_UNSUPPORTED,
	     "shared experts"},
	    {"qwen3moe-tiny", ME_KEY, "qwen3moe.expert_gating_func", 2, BG_ERR_UNSUPPORTED,
	     "softmax gating"},
	    /* a count that disagrees with the tensors: their shapes are checked */
	    {"qwen3moe-tiny", ME_KEY, "qwen3moe.expert_count", 7, BG_ERR_FORMAT,
	     "'blk.0.ffn_gate_inp.weight' has shape [64, 8], expected [64, 7]"},
	    {"qwen3moe-tiny", ME_KEY, "qwen3moe.expert_feed_forward_length", 64, BG_ERR_FORMAT,
	     "'blk.0.ffn_gate_exps.weight' has shape [64, 32, 8], expected [64, 64, 8]"},
	    {"qwen3moe-tiny", ME_RESHAPE, "blk.1.ffn_down_exps.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_down_exps.weight' has shape [32, 64, 7], expected [32, 64, 8]"},
	    {"qwen3moe-tiny", ME_DROP, "blk.1.ffn_up_exps.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_up_exps.weight' is missing"},
	    {"qwen3moe-tiny", ME_DENSE, "", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_gate.weight' is not part of a qwen3moe model"},
	    {"mixtral-tiny", ME_SPLIT, "", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_gate.0.weight': experts stored one tensor each"},
	    {"mixtral-tiny", ME_DROP, "blk.0.ffn_gate_inp.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.ffn_gate_inp.weight' is missing"},
	    /* dense qwen3 keys with experts: not an architecture with experts */
	    {"qwen3-tiny", ME_KEY, "qwen3.expert_count", 8, BG_ERR_UNSUPPORTED,
	     "mixture-of-experts qwen3 models are not supported"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
	/* synth refuses shapes the loader would */
	struct synth_opts o;
	synth_opts_init(&o, synth_find_shape("qwen3moe-tiny"));
	o.shape.n_expert_used = 9;
	CHECK(synth_check(&o, &err) == BG_ERR_INVALID && has(&err, "9 of 8 used"),
	      "synth: %s", err.msg);
	synth_opts_init(&o, synth_find_shape("qwen3-tiny"));
	o.shape.arch = "qwen3moe";
	CHECK(synth_check(&o, &err) == BG_ERR_INVALID && has(&err, "needs experts"), "synth: %s",
	      err.msg);
}

/* gpt-oss: its extra tensors, their shapes, and refusals naming them */
static void test_oss(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("gpt-oss-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l1 = &m->layers[1];
		CHECK(hp->attn_sinks && hp->attn_out_bias && hp->moe_bias && hp->swiglu_oai &&
			  hp->swiglu_alpha == 1.702f && hp->swiglu_limit == 7.0f && hp->qkv_bias &&
			  hp->rope_neox && hp->rope_yarn && hp->rope_freq_scale == 1.0f / 32 &&
			  hp->n_ctx_orig == 64 && hp->head_dim == 32 && hp->n_expert == 4 &&
			  hp->n_expert_used == 2 && hp->n_ff_exp == 32 && hp->expert_weights_norm &&
			  !hp->post_norms && hp->n_swa == 16 && hp->swa_pattern == 2,
		      "gpt-oss-tiny hparams");
		/* llama.cpp's set_swa_pattern(2): even layers windowed */
		CHECK(l0->swa && !l1->swa, "layer 0 windowed, layer 1 global");
		CHECK(l0->attn_sinks.ne0 == 4 && l0->attn_sinks.ne1 == 1 &&
			  l0->attn_sinks.type == GGUF_DTYPE_F32 && l0->bo.ne0 == 64 &&
			  l0->bq.ne0 == 128 && l0->bk.ne0 == 64 && l0->ffn_gate_inp_b.ne0 == 4 &&
			  l0->ffn_gate_inp_b.ne2 == 0 && l0->gate_exps_b.ne0 == 32 &&
			  l0->gate_exps_b.ne1 == 1 && l0->gate_exps_b.ne2 == 4 &&
			  l0->up_exps_b.ne0 == 32 && l0->up_exps_b.ne2 == 4 &&
			  l0->down_exps_b.ne0 == 64 && l0->down_exps_b.ne1 == 1 &&
			  l0->down_exps_b.ne2 == 4 && l0->ffn_norm.data && !l0->attn_post_norm.data,
		      "gpt-oss-tiny layer shapes");
		struct model_weight b2 = model_expert(&l1->down_exps_b, 2);
		CHECK(b2.ne0 == 64 && b2.ne1 == 1 && b2.ne2 == 0 &&
			  (const char *)b2.data == (const char *)l1->down_exps_b.data + 2 * 64 * 4,
		      "model_expert: expert 2's down bias");
		const struct synth_shape *sh = synth_find_shape("gpt-oss-tiny");
		CHECK(m->n_params == synth_n_params(sh, false) && m->weight_bytes == 4 * m->n_params,
		      "n_params %llu", (unsigned long long)m->n_params);
	}
	model_free(m);
	m = NULL;
	CHECK(model_open("synthetic:gpt-oss-20b", true, &m, &err) == BG_OK, "%s", err.msg);
	if (m)
		CHECK(m->hp.head_dim == 64 && m->hp.n_head == 64 && m->hp.n_swa == 128 &&
			  m->hp.rope_yarn && m->hp.n_ctx_orig == 4096 && m->layers[22].swa &&
			  !m->layers[23].swa && m->layers[23].up_exps_b.ne2 == 32 &&
			  m->layers[0].attn_sinks.ne0 == 64 && !m->layers[0].attn_sinks.data,
		      "lazy gpt-oss-20b");
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    {"gpt-oss-tiny", ME_DROP, "blk.1.attn_sinks.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_sinks.weight' is missing"},
	    {"gpt-oss-tiny", ME_DROP, "blk.0.attn_output.bias", 0, BG_ERR_FORMAT, "'blk.0.attn_output.bias' is missing"},
	    {"gpt-oss-tiny", ME_DROP, "blk.0.ffn_gate_inp.bias", 0, BG_ERR_FORMAT,
	     "'blk.0.ffn_gate_inp.bias' is missing"},
	    {"gpt-oss-tiny", ME_DROP, "blk.1.ffn_down_exps.bias", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_down_exps.bias' is missing"},
	    {"gpt-oss-tiny", ME_DROP, "blk.0.post_attention_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.post_attention_norm.weight' is missing"},
	    {"gpt-oss-tiny", ME_DROP, "blk.0.attn_q.bias", 0, BG_ERR_FORMAT, "'blk.0.attn_q.bias' is missing"},
	    {"gpt-oss-tiny", ME_DENSE, "", 0, BG_ERR_UNSUPPORTED, "'blk.0.ffn_gate.weight' is not part of a gpt-oss"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* olmo2: no pre-norms, whole-row Q/K norms, post-norms; the tensors of other graphs
 * refused; OLMo 3's windows from a per-layer bool list, unscaled RoPE there */
static void test_olmo2(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("olmo2-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l1 = &m->layers[1];
		CHECK(hp->no_pre_norms && hp->qk_norm && hp->qk_norm_full && hp->post_norms &&
			  hp->rope_neox && !hp->gelu && hp->embd_scale == 1.0f && !hp->n_swa &&
			  hp->head_dim == 16 && hp->rope_base == 500000.0f,
		      "olmo2-tiny hparams");
		CHECK(!l1->attn_norm.data && !l1->attn_norm.ne0 && !l1->ffn_norm.data &&
			  l1->q_norm.ne0 == 64 && l1->k_norm.ne0 == 32 && l1->q_norm.data &&
			  l1->attn_post_norm.ne0 == 64 && l1->ffn_post_norm.data &&
			  m->output.data != m->tok_embd.data,
		      "olmo2-tiny layer shapes");
		/* norm weights 1 + N(0, 0.25^2): not all 1 */
		float w[2];
		memcpy(w, l1->q_norm.data, sizeof w);
		CHECK(w[0] != 1.0f && w[1] != 1.0f && w[0] > 0.0f, "olmo2 q_norm %g %g", (double)w[0],
		      (double)w[1]);
		CHECK(m->n_params == synth_n_params(synth_find_shape("olmo2-tiny"), false),
		      "olmo2-tiny n_params %llu", (unsigned long long)m->n_params);
	}
	model_free(m);
	m = NULL;
	/* OLMo-2-1124-7B from its config.json, by hand: 2 * 100352 * 4096 (untied) + 4096 +
	 * 32 * (4 * 4096^2 + 3 * 4096 * 11008 + 4 * 4096) */
	CHECK(model_open("synthetic:olmo2-7b", true, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(m->n_params == 7298617344ull && !m->layers[31].attn_norm.ne0 &&
			  m->layers[31].q_norm.ne0 == 4096 &&
			  synth_n_params(synth_find_shape("olmo2-7b"), false) == m->n_params,
		      "lazy olmo2-7b: n_params %llu", (unsigned long long)m->n_params);
	}
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    {"olmo2-tiny", ME_HALVE, "blk.1.attn_q_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_q_norm.weight' has shape [32], expected [64]"},
	    {"olmo2-tiny", ME_HALVE, "blk.0.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.attn_k_norm.weight' has shape [16], expected [32]"},
	    {"olmo2-tiny", ME_DROP, "blk.1.post_ffw_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.post_ffw_norm.weight' is missing"},
	    {"olmo2-tiny", ME_DROP, "blk.0.post_attention_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.post_attention_norm.weight' is missing"},
	    {"olmo2-tiny", ME_ADD, "blk.0.attn_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_norm.weight' is not part of a olmo2"},
	    {"olmo2-tiny", ME_ADD, "blk.1.ffn_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.1.ffn_norm.weight' is not part of a olmo2"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
	/* OLMo 3: the list [1, 1, 1, 0] is period 4; windowed layers' RoPE unscaled, without
	 * the file's attn_factor (1.25) */
	CHECK(moe_rewrite("olmo3-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		CHECK(hp->n_swa == 16 && hp->swa_pattern == 4 && m->layers[0].swa &&
			  m->layers[2].swa && !m->layers[3].swa && hp->rope_yarn &&
			  hp->rope_freq_scale == 0.25f && hp->rope_freq_scale_swa == 1.0f &&
			  hp->rope_attn_factor == 1.25f && hp->rope_attn_factor_swa == 1.0f &&
			  hp->rope_base_swa == hp->rope_base &&
			  hp->qk_norm_full && hp->no_pre_norms,
		      "olmo3-tiny hparams");
	}
	model_free(m);
	m = NULL;
	/* other lists: every layer windowed (period 0), none (period 1), or refused */
	struct {
		uint32_t bits, p;
		enum bg_status st;
		const char *msg;
	} lists[] = {
	    {0xf, 0, BG_OK, ""},
	    {0x0, 1, BG_OK, ""},
	    {0x5, 2, BG_OK, ""},
	    {0x9, 0, BG_ERR_UNSUPPORTED, "does not repeat one pattern"},
	    {0x80000007u, 0, BG_ERR_UNSUPPORTED, "nor a list of 4 bools"},
	};
	for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
		err.msg[0] = '\0';
		enum bg_status st = moe_rewrite("olmo3-tiny", ME_BOOLS,
						"olmo2.attention.sliding_window_pattern",
						lists[i].bits, &m, &err);
		CHECK(st == lists[i].st && (st || m->hp.swa_pattern == lists[i].p) &&
			  has(&err, lists[i].msg),
		      "olmo3-tiny pattern list %#x: status %d, '%s'", lists[i].bits, (int)st,
		      err.msg);
		model_free(m);
		m = NULL;
	}
}

/* granite: its four scales from the file, what llama.cpp requires and its defaults */
static void test_granite(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("granite-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		CHECK(hp->embd_scale == 12.0f && hp->attn_scale == 0.125f &&
			  hp->residual_scale == 0.22f && hp->logit_scale == 0.125f &&
			  !hp->rope_neox &&
			  !hp->qkv_bias && hp->final_softcap == 0.0f,
		      "granite-tiny scales: embd %g attn %g residual %g logit %g",
		      (double)hp->embd_scale, (double)hp->attn_scale, (double)hp->residual_scale,
		      (double)hp->logit_scale);
		model_free(m);
		m = NULL;
	}
	/* the optional scales absent or 0: llama's values */
	static const char *const opt[3] = {"granite.embedding_scale", "granite.attention.scale",
					   "granite.residual_scale"};
	for (int z = 0; z < 2; z++)
		for (int i = 0; i < 3; i++) {
			CHECK(moe_rewrite("granite-tiny", ME_KEY_F32, opt[i], z ? 0 : UINT32_MAX, &m,
					  &err) == BG_OK,
			      "%s: %s", opt[i], err.msg);
			if (!m)
				continue;
			const struct model_hparams *hp = &m->hp;
			CHECK(i == 0 ? hp->embd_scale == 1.0f
				     : i == 1 ? hp->attn_scale == 0.25f : hp->residual_scale == 1.0f,
			      "%s %s: the default", opt[i], z ? "0" : "absent");
			model_free(m);
			m = NULL;
		}
	/* granitemoe: the same scales, experts as wide as feed_forward_length */
	CHECK(moe_rewrite("granitemoe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		CHECK(hp->n_expert == 8 && hp->n_expert_used == 2 && hp->n_ff_exp == 64 &&
			  hp->expert_weights_norm && hp->residual_scale == 0.22f &&
			  hp->logit_scale == 0.125f && hp->embd_scale == 12.0f &&
			  m->layers[3].down_exps.ne2 == 8,
		      "granitemoe-tiny hparams");
		model_free(m);
		m = NULL;
	}
	static const struct refusal bad[] = {
	    /* logit_scale required and usable; a granite file without RoPE */
	    {"granite-tiny", ME_KEY_F32, "granite.logit_scale", UINT32_MAX, BG_ERR_FORMAT,
	     "granite.logit_scale is missing"},
	    {"granite-tiny", ME_KEY_F32, "granite.logit_scale", 0, BG_ERR_FORMAT,
	     "not a usable number"},
	    {"granite-tiny", ME_KEY_FALSE, "granite.rope.scaling.finetuned", 0, BG_ERR_UNSUPPORTED,
	     "without RoPE"},
	    /* granitemoe: shared experts (Granite MoE Shared); no experts */
	    {"granitemoe-tiny", ME_KEY, "granitemoe.expert_shared_feed_forward_length", 32,
	     BG_ERR_UNSUPPORTED, "shared experts are not supported"},
	    {"granitemoe-tiny", ME_KEY, "granitemoe.expert_count", UINT32_MAX, BG_ERR_FORMAT,
	     "a granitemoe model has experts"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* mistral3: the attention temperature's keys and defaults, the graph's RoPE magnitude */
static void test_mistral3(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("mistral3-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		/* floor = YaRN's original context; offset 0; attn_factor 1 / (1 + 0.1 ln 4) */
		CHECK(hp->attn_temp_scale == 0.5f && hp->attn_temp_floor == 16 &&
			  hp->attn_temp_offset == 0.0f && hp->rope_yarn &&
			  hp->rope_attn_factor == 1.0f / (1.0f + 0.1f * logf(4.0f)) && !hp->rope_neox,
		      "mistral3-tiny: temperature %g / %u + %g, attn_factor %g",
		      (double)hp->attn_temp_scale, hp->attn_temp_floor, (double)hp->attn_temp_offset,
		      (double)hp->rope_attn_factor);
		CHECK(arch_attn_temp(hp, 15) == 1.0f && arch_attn_temp(hp, 16) == (float)(log(2.0) * 0.5 + 1.0) &&
			  arch_attn_temp(hp, 47) == (float)(log(3.0) * 0.5 + 1.0) &&
			  arch_attn_temp(hp, 48) == (float)(log(4.0) * 0.5 + 1.0),
		      "mistral3-tiny: temperatures at 15, 16, 47, 48");
		model_free(m);
		m = NULL;
	}
	/* no temperature key: none (the floor is not needed then) */
	CHECK(moe_rewrite("mistral3-tiny", ME_KEY_F32, "mistral3.attention.temperature_scale",
			  UINT32_MAX, &m, &err) == BG_OK,
	      "%s", err.msg);
	if (m) {
		CHECK(m->hp.attn_temp_scale == 0.0f && arch_attn_temp(&m->hp, 1000) == 1.0f,
		      "mistral3 without the key: no temperature");
		model_free(m);
		m = NULL;
	}
	/* the temperature's floor is the context length without an original context */
	CHECK(moe_rewrite("mistral3-tiny", ME_KEY, "mistral3.rope.scaling.original_context_length",
			  UINT32_MAX, &m, &err) == BG_OK,
	      "%s", err.msg);
	if (m) {
		CHECK(m->hp.attn_temp_floor == 256, "mistral3 floor without original_context_length: %u",
		      m->hp.attn_temp_floor);
		model_free(m);
		m = NULL;
	}
	/* optional Q/K/V and O biases: read when blk.0 has them, then required everywhere */
	CHECK(moe_rewrite("mistral3-bias-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s",
	      err.msg);
	if (m) {
		CHECK(m->hp.qkv_bias && m->hp.attn_out_bias && m->layers[3].bq.ne0 == 64 &&
			  m->layers[3].bo.ne0 == 64 && m->layers[3].bv.ne0 == 32,
		      "mistral3-bias-tiny: biases read");
		model_free(m);
		m = NULL;
	}
	CHECK(moe_rewrite("mistral3-tiny", ME_NONE, "", 0, &m, &err) == BG_OK && m &&
		  !m->hp.qkv_bias && !m->hp.attn_out_bias,
	      "mistral3-tiny: no biases");
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    /* one O bias missing; K/V biases without the Q bias */
	    {"mistral3-bias-tiny", ME_DROP, "blk.2.attn_output.bias", 0, BG_ERR_FORMAT,
	     "'blk.2.attn_output.bias' is missing"},
	    {"mistral3-bias-tiny", ME_DROP, "blk.0.attn_q.bias", 0, BG_ERR_UNSUPPORTED,
	     "attn_k.bias' is not part of a mistral3 model"},
	    /* YaRN betas other than 32 / 1 (batchgen computes with those) */
	    {"mistral3-tiny", ME_KEY_F32, "mistral3.rope.scaling.yarn_beta_fast", 16000,
	     BG_ERR_UNSUPPORTED, "YaRN betas 16 / 1"},
	    /* the yarn_log_multiplier synth writes is accepted for mistral3 (its graph ignores
	     * it), still refused for llama */
	    {"llama-yarn-tiny", ME_KEY_F32, "llama.rope.scaling.yarn_log_multiplier", 1000,
	     BG_ERR_UNSUPPORTED, "yarn_log_multiplier"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* smollm3: every 4th layer (3, 7) without RoPE, from the architecture alone */
static void test_smollm3(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(model_open("synthetic:smollm3-tiny:f32", false, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		int n = 0;
		for (uint32_t l = 0; l < m->hp.n_layer; l++)
			n += m->layers[l].no_rope ? (int)(1u << l) : 0;
		CHECK(m->hp.n_layer == 8 && n == (1 << 3 | 1 << 7) && !m->hp.rope_neox,
		      "smollm3-tiny: layers without RoPE (bits) %#x", (unsigned)n);
		model_free(m);
		m = NULL;
	}
	/* the other architectures rotate every layer */
	CHECK(model_open("synthetic:gemma2-tiny:f32", false, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		bool any = false;
		for (uint32_t l = 0; l < m->hp.n_layer; l++)
			any |= m->layers[l].no_rope;
		CHECK(!any, "gemma2-tiny: every layer rotated");
		model_free(m);
	}
}

/* seed_oss: its FFN norm read from post_attention_norm, optional Q/K/V biases, no O bias;
 * apertus: per-head Q/K norms, no gate, xIELU's values transformed as ggml_xielu (by hand
 * below: softplus(x) = ln(1 + e^x)); the released sizes' parameter counts (synth.c's
 * comments derive them from each config.json). */
static void test_seed_apertus(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("seed_oss-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l1 = &m->layers[1];
		const struct gguf_tensor *pn =
		    gguf_find_tensor(m->gguf, "blk.1.post_attention_norm.weight");
		CHECK(hp->rope_neox && hp->qkv_bias && !hp->attn_out_bias && !hp->qk_norm &&
			  !hp->post_norms && !hp->xielu && hp->head_dim == 32 && l1->bq.ne0 == 128 &&
			  l1->bk.ne0 == 64 && l1->w_gate.data && !l1->attn_post_norm.data,
		      "seed_oss-tiny hparams");
		CHECK(pn && l1->ffn_norm.data == pn->data && l1->ffn_norm.ne0 == 64,
		      "seed_oss: the FFN norm is post_attention_norm.weight");
		float w[2];
		memcpy(w, l1->ffn_norm.data, sizeof w);
		CHECK(w[0] != 1.0f && w[1] != 1.0f && w[0] > 0.0f, "seed_oss ffn norm %g %g",
		      (double)w[0], (double)w[1]);
		CHECK(m->n_params == synth_n_params(synth_find_shape("seed_oss-tiny"), false),
		      "seed_oss-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	CHECK(moe_rewrite("apertus-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l2 = &m->layers[2];
		CHECK(hp->rope_neox && hp->qk_norm && !hp->qk_norm_full && hp->xielu &&
			  hp->qkv_bias && hp->attn_out_bias &&
			  strcmp(hp->rope_factors, "rope_freqs") == 0 &&
			  l2->q_norm.ne0 == 16 && l2->k_norm.ne0 == 16 && !l2->w_gate.data &&
			  !l2->w_gate.ne0 && l2->w_up.ne1 == 128 && l2->w_down.ne0 == 128,
		      "apertus-tiny hparams and layer shapes");
		/* layer 0: alpha_n 1, alpha_p 0.5, beta 0.5; layer 2: 2, -0.1, 0.75 (synth) */
		const double want[2][4] = {
		    {0.5 + 1.3132616875182228, 0.9740769841801067, 0.5, -1e-6},
		    {0.75 + 2.1269280110429727, 0.6443966600735709, 0.75, -1e-6}};
		const float *got[2] = {l0->xielu, l2->xielu};
		bool ok = true;
		for (int i = 0; i < 2; i++)
			for (int k = 0; k < 4; k++)
				ok = ok && fabs(got[i][k] - want[i][k]) <= 1e-6 * fabs(want[i][k]);
		CHECK(ok, "apertus xielu layer 0 %g %g %g %g, layer 2 %g %g %g %g",
		      (double)got[0][0], (double)got[0][1], (double)got[0][2], (double)got[0][3],
		      (double)got[1][0], (double)got[1][1], (double)got[1][2], (double)got[1][3]);
		CHECK(m->n_params == synth_n_params(synth_find_shape("apertus-tiny"), false) + 8,
		      "apertus-tiny n_params %llu (+ 8 rope factors)",
		      (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	/* one value for every layer (llama.cpp's get_key_or_arr): alpha_p 25 (softplus: 25) */
	CHECK(moe_rewrite("apertus-tiny", ME_KEY_F32, "xielu.alpha_p", 25000, &m, &err) == BG_OK,
	      "%s", err.msg);
	if (m) {
		CHECK(m->layers[0].xielu[1] == 25.0f && m->layers[2].xielu[1] == 25.0f &&
			  m->layers[2].xielu[2] == 0.75f,
		      "apertus: one xielu.alpha_p for every layer");
		model_free(m);
		m = NULL;
	}
	/* the released sizes, lazily: seed-oss-36b, apertus-8b and -70b (without the 64 rope
	 * factors, which a lazy model does not describe) */
	static const struct {
		const char *shape;
		uint64_t n;
	} sizes[] = {{"seed-oss-36b", 36151104512ull},
		     {"apertus-8b", 8053338112ull},
		     {"apertus-70b", 70599864320ull}};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		char spec[64];
		snprintf(spec, sizeof spec, "synthetic:%s", sizes[i].shape);
		CHECK(model_open(spec, true, &m, &err) == BG_OK, "%s", err.msg);
		if (m) {
			uint64_t n = synth_n_params(synth_find_shape(sizes[i].shape), false);
			CHECK(m->n_params == sizes[i].n && n == m->n_params, "lazy %s: n_params %llu",
			      sizes[i].shape, (unsigned long long)m->n_params);
		}
		model_free(m);
		m = NULL;
	}
	static const struct refusal bad[] = {
	    {"seed_oss-tiny", ME_ADD, "blk.0.attn_output.bias", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_output.bias' is not part of a seed_oss model"},
	    {"seed_oss-tiny", ME_ADD, "blk.0.ffn_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_norm.weight' is not part of a seed_oss model"},
	    {"seed_oss-tiny", ME_DROP, "blk.1.post_attention_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.post_attention_norm.weight' is missing"},
	    {"seed_oss-tiny", ME_DROP, "blk.1.attn_v.bias", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_v.bias' is missing"},
	    {"apertus-tiny", ME_DROP, "blk.1.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_k_norm.weight' is missing"},
	    {"apertus-tiny", ME_ADD, "blk.0.attn_q_norm.bias", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_q_norm.bias' is not part of a apertus model"},
	    {"apertus-tiny", ME_DENSE, "", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_gate.weight' is not part of a apertus model"},
	    {"apertus-tiny", ME_KEY_F32, "xielu.beta", UINT32_MAX, BG_ERR_FORMAT,
	     "xielu.beta is missing"},
	    {"apertus-tiny", ME_BOOLS, "xielu.eps", 0, BG_ERR_FORMAT,
	     "xielu.eps is not a list of 3 numbers"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* glm4: interleaved RoPE over rope.dimension_count (8 of 16), Q/K/V biases without an O
 * bias, post-norms, ffn_up's gate|up halves as the gate and up views, the NextN layer after
 * block_count - nextn_predict_layers skipped (its tensors not counted); the released sizes'
 * parameter counts (synth.c derives them from each config.json); refusals. */
static void test_glm4(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("glm4-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l1 = &m->layers[1];
		const struct gguf_tensor *up = gguf_find_tensor(m->gguf, "blk.1.ffn_up.weight");
		CHECK(!hp->rope_neox && hp->rope_dim == 8 && hp->head_dim == 16 && hp->qkv_bias &&
			  !hp->attn_out_bias && hp->post_norms && !hp->qk_norm &&
			  hp->n_layer == 2 && hp->n_layer_nextn == 1 && l1->bq.ne0 == 64 && l1->bk.ne0 == 32 &&
			  l1->attn_post_norm.data && l1->ffn_post_norm.data,
		      "glm4-tiny hparams");
		CHECK(up && l1->w_gate.data == up->data && l1->w_gate.ne1 == 128 &&
			  l1->w_up.data == (const char *)up->data + 128 * 64 * sizeof(float) &&
			  l1->w_up.ne1 == 128,
		      "glm4: gate then up rows of ffn_up");
		/* the file holds the NextN layer blk.2 (with its nextn.* tensors), not counted */
		CHECK(gguf_find_tensor(m->gguf, "blk.2.nextn.eh_proj.weight") &&
			  gguf_find_tensor(m->gguf, "blk.2.attn_q.weight") &&
			  m->n_params == synth_n_params(synth_find_shape("glm4-tiny"), false),
		      "glm4-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	static const struct {
		const char *shape;
		uint64_t n;
	} sizes[] = {{"glm4-9b", 9400279040ull}, {"glm4-32b", 33142249472ull}};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		char spec[64];
		snprintf(spec, sizeof spec, "synthetic:%s", sizes[i].shape);
		CHECK(model_open(spec, true, &m, &err) == BG_OK, "%s", err.msg);
		if (m) {
			uint64_t n = synth_n_params(synth_find_shape(sizes[i].shape), false);
			CHECK(m->n_params == sizes[i].n && n == m->n_params && m->hp.rope_dim == 64,
			      "lazy %s: n_params %llu", sizes[i].shape,
			      (unsigned long long)m->n_params);
		}
		model_free(m);
		m = NULL;
	}
	static const struct refusal bad[] = {
	    {"glm4-tiny", ME_ADD, "blk.0.attn_output.bias", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_output.bias' is not part of a glm4 model"},
	    {"glm4-tiny", ME_DROP, "blk.1.post_ffw_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.post_ffw_norm.weight' is missing"},
	    {"glm4-tiny", ME_DROP, "blk.1.attn_k.bias", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_k.bias' is missing"},
	    /* without the key, layer 2 is a NextN layer no longer: its nextn.* are unknown */
	    {"glm4-tiny", ME_KEY, "glm4.nextn_predict_layers", UINT32_MAX, BG_ERR_UNSUPPORTED,
	     "'blk.2.nextn.eh_proj.weight' is not part of a glm4 model"},
	    {"glm4-tiny", ME_KEY, "glm4.nextn_predict_layers", 3, BG_ERR_FORMAT,
	     "nextn_predict_layers 3 leaves no layer of block_count 3"},
	    {"glm4-tiny", ME_KEY_LIST, "glm4.rope.dimension_sections", 8, BG_ERR_UNSUPPORTED,
	     "glm4.rope.dimension_sections (M-RoPE of GLM-4V) is not supported"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* lfm2: the conv and attention layers the head_count_kv list makes, their tensors, the
 * output norm under its own name, the KV row a conv layer needs (half of n_embd in each of
 * the K and V slots), n_params as synth derives it; refusals. */
static void test_lfm2(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("lfm2-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l1 = &m->layers[1];
		const struct gguf_tensor *on = gguf_find_tensor(m->gguf, "token_embd_norm.weight");
		const struct gguf_tensor *op =
		    gguf_find_tensor(m->gguf, "blk.0.shortconv.out_proj.weight");
		CHECK(hp->conv_l == 3 && hp->n_head_kv == 2 && hp->head_dim == 16 && hp->qk_norm &&
			  hp->rope_neox && l0->conv && !l1->conv && m->layers[2].conv &&
			  m->layers[3].conv && model_kv_dim_max(hp) == 32,
		      "lfm2-tiny hparams and layer kinds");
		CHECK(l0->conv_in.ne0 == 64 && l0->conv_in.ne1 == 192 && l0->conv_w.ne0 == 3 &&
			  l0->conv_w.ne1 == 64 && l0->conv_w.type == GGUF_DTYPE_F32 && op &&
			  l0->wo.data == op->data && !l0->wq.data && !l0->q_norm.data &&
			  l1->wq.ne1 == 64 && l1->wk.ne1 == 32 && l1->q_norm.ne0 == 16 &&
			  !l1->conv_in.data,
		      "lfm2: a conv layer's in_proj, taps and out_proj (as wo); attention's Q/K");
		CHECK(on && m->output_norm.data == on->data && m->output.data == m->tok_embd.data &&
			  m->n_params == synth_n_params(synth_find_shape("lfm2-tiny"), true),
		      "lfm2-tiny: token_embd_norm, tied output, n_params %llu",
		      (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	static const struct refusal bad[] = {
	    {"lfm2-tiny", ME_KEY, "lfm2.attention.head_count_kv", 2, BG_ERR_FORMAT,
	     "lfm2.attention.head_count_kv is not a list of 4 K/V head counts"},
	    {"lfm2-tiny", ME_KEY_LIST, "lfm2.attention.head_count_kv", 3, BG_ERR_FORMAT,
	     "dividing head_count 4"},
	    /* every layer a conv: layer 1 has no conv tensors */
	    {"lfm2-tiny", ME_KEY_LIST, "lfm2.attention.head_count_kv", 0, BG_ERR_FORMAT,
	     "'blk.1.shortconv.in_proj.weight' is missing"},
	    {"lfm2-tiny", ME_KEY, "lfm2.shortconv.l_cache", UINT32_MAX, BG_ERR_FORMAT,
	     "lfm2.shortconv.l_cache is missing or not in [2, 8]"},
	    {"lfm2-tiny", ME_KEY, "lfm2.shortconv.l_cache", 9, BG_ERR_FORMAT,
	     "lfm2.shortconv.l_cache is missing or not in [2, 8]"},
	    {"lfm2-tiny", ME_KEY, "lfm2.shortconv.l_cache", 4, BG_ERR_FORMAT,
	     "'blk.0.shortconv.conv.weight' has shape [3, 64], expected [4, 64]"},
	    {"lfm2-tiny", ME_KEY, "lfm2.attention.sliding_window", 16, BG_ERR_UNSUPPORTED,
	     "lfm2.attention.sliding_window 16 (windowed attention layers) is not supported"},
	    {"lfm2-tiny", ME_DROP, "token_embd_norm.weight", 0, BG_ERR_FORMAT,
	     "'token_embd_norm.weight' is missing"},
	    {"lfm2-tiny", ME_DROP, "blk.2.shortconv.in_proj.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.shortconv.in_proj.weight' is missing"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* granitehybrid: the Mamba2 and attention layers the head_count_kv list makes, the ssm.*
 * keys, no RoPE (rope.scaling.finetuned false), the shared expert of its own width, each
 * layer's state (hand-derived: 3 conv rows of 128 + 2 x 2 x 16, then 128 x 16), n_params
 * as synth derives it; refusals. */
static void test_granitehybrid(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("granitehybrid-moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s",
	      err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l1 = &m->layers[1];
		const struct gguf_tensor *so = gguf_find_tensor(m->gguf, "blk.0.ssm_out.weight");
		CHECK(hp->ssm_d_conv == 4 && hp->ssm_d_inner == 128 && hp->ssm_d_state == 16 &&
			  hp->ssm_n_head == 8 && hp->ssm_n_group == 2 && hp->n_head_kv == 2 &&
			  hp->rope_none && hp->n_expert == 4 && hp->n_ff_exp == 32 &&
			  hp->n_expert_shared == 1 && model_ff_shexp(hp) == 64 &&
			  hp->expert_weights_norm && !hp->expert_gating_sigmoid &&
			  hp->logit_scale == 0.125f && hp->residual_scale == 0.22f,
		      "granitehybrid-moe-tiny hparams");
		CHECK(l0->ssm && !l1->ssm && m->layers[2].ssm && m->layers[3].ssm && l1->no_rope &&
			  l0->ssm_in.ne1 == 2 * 128 + 2 * 32 + 8 && l0->ssm_conv_w.ne0 == 4 &&
			  l0->ssm_conv_w.ne1 == 192 && l0->ssm_norm.ne0 == 64 &&
			  l0->ssm_norm.ne1 == 2 && so && l0->wo.data == so->data && !l0->wq.data &&
			  l1->wq.ne1 == 64 && !l1->ssm_in.data && l0->gate_shexp.ne1 == 64 &&
			  l1->down_shexp.ne0 == 64,
		      "granitehybrid: a Mamba2 layer's tensors (ssm_out as wo), attention's");
		CHECK(model_state_floats(hp, l0) == 3 * 192 + 128 * 16 &&
			  model_state_floats(hp, l1) == 0,
		      "granitehybrid: state floats %llu, %llu",
		      (unsigned long long)model_state_floats(hp, l0),
		      (unsigned long long)model_state_floats(hp, l1));
		CHECK(m->n_params == synth_n_params(synth_find_shape("granitehybrid-moe-tiny"), false),
		      "granitehybrid-moe-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	CHECK(model_open("synthetic:granitehybrid-tiny", true, &m, &err) == BG_ERR_UNSUPPORTED &&
		  strstr(err.msg, "Mamba2 layers are made as files only"),
	      "granitehybrid: no lazy model (%s)", err.msg);
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    {"granitehybrid-moe-tiny", ME_KEY, "granitehybrid.attention.head_count_kv", 2,
	     BG_ERR_FORMAT, "granitehybrid.attention.head_count_kv is not a list of 4 K/V head"},
	    {"granitehybrid-moe-tiny", ME_KEY, "granitehybrid.ssm.conv_kernel", UINT32_MAX,
	     BG_ERR_FORMAT, "granitehybrid.ssm.conv_kernel is missing or 0"},
	    {"granitehybrid-moe-tiny", ME_KEY, "granitehybrid.ssm.conv_kernel", 9, BG_ERR_FORMAT,
	     "Mamba2 sizes are not usable: conv_kernel 9"},
	    {"granitehybrid-moe-tiny", ME_KEY, "granitehybrid.ssm.inner_size", 96, BG_ERR_FORMAT,
	     "inner_size 96 (2 x embedding_length 64)"},
	    {"granitehybrid-moe-tiny", ME_KEY, "granitehybrid.ssm.group_count", 3, BG_ERR_FORMAT,
	     "group_count 3 dividing the heads"},
	    {"granitehybrid-moe-tiny", ME_KEY, "granitehybrid.ssm.time_step_rank", 0,
	     BG_ERR_FORMAT, "granitehybrid.ssm.time_step_rank is missing or 0"},
	    {"granitehybrid-moe-tiny", ME_KEY, "granitehybrid.ssm.state_size", 32, BG_ERR_FORMAT,
	     "'blk.0.ssm_in.weight' has shape [64, 328], expected [64, 392]"},
	    {"granitehybrid-moe-tiny", ME_DROP, "blk.2.ssm_a", 0, BG_ERR_FORMAT,
	     "'blk.2.ssm_a' is missing"},
	    {"granitehybrid-moe-tiny", ME_DROP, "blk.3.ssm_conv1d.bias", 0, BG_ERR_FORMAT,
	     "'blk.3.ssm_conv1d.bias' is missing"},
	    {"granitehybrid-moe-tiny", ME_KEY,
	     "granitehybrid.expert_shared_feed_forward_length", UINT32_MAX, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_gate_shexp.weight' is not part of a granitehybrid model"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* nemotron_h ("M-*M-"): the layer kinds the two per-layer lists make, the Mamba2 inner
 * size that is not 2 n_embd, the FFN layers' up and down without gate or ffn_norm, no RoPE,
 * the eps from layer_norm_rms_epsilon, n_params as synth derives it; refusals. */
static void test_nemotron_h(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("nemotron_h-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		CHECK(hp->ssm_d_inner == 96 && hp->ssm_n_head == 8 && hp->relu2 && hp->rope_none &&
			  hp->n_ff == 128 && hp->n_head_kv == 2 && hp->logit_scale == 1.0f,
		      "nemotron_h-tiny hparams");
		CHECK(L[0].ssm && L[0].no_ffn && L[1].ffn_only && !L[1].ssm && L[2].no_ffn &&
			  !L[2].ssm && L[2].wq.ne1 == 64 && L[2].no_rope && L[3].ssm &&
			  L[4].ffn_only && L[1].w_up.ne1 == 128 && L[1].w_down.ne0 == 128 &&
			  !L[1].w_gate.data && !L[1].ffn_norm.data && !L[1].wq.data &&
			  !L[0].w_up.data && !L[2].ffn_norm.data && L[0].ssm_in.ne1 == 2 * 96 + 64 + 8,
		      "nemotron_h: Mamba2, FFN, attention, Mamba2, FFN layers");
		CHECK(model_state_floats(hp, &L[0]) == 3 * 160 + 96 * 16 &&
			  model_state_floats(hp, &L[1]) == 0 &&
			  m->n_params == synth_n_params(synth_find_shape("nemotron_h-tiny"), false),
		      "nemotron_h: state floats, n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	/* without the RMS eps, layer_norm_epsilon (1e-5 in these files) */
	CHECK(moe_rewrite("nemotron_h-tiny", ME_KEY_F32,
			  "nemotron_h.attention.layer_norm_rms_epsilon", UINT32_MAX, &m,
			  &err) == BG_OK &&
		  m->hp.rms_eps == 1e-5f,
	      "nemotron_h: eps from layer_norm_epsilon (%s)", err.msg);
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    /* one width for every layer: every layer an FFN (as llama.cpp reads it) */
	    {"nemotron_h-tiny", ME_KEY, "nemotron_h.feed_forward_length", 128, BG_ERR_FORMAT,
	     "'blk.0.ffn_up.weight' is missing"},
	    {"nemotron_h-tiny", ME_KEY, "nemotron_h.nextn_predict_layers", 1, BG_ERR_UNSUPPORTED,
	     "nextn_predict_layers 1 (MTP layers) is not supported"},
	    {"nemotron_h-tiny", ME_DROP, "blk.1.ffn_up.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_up.weight' is missing"},
	    {"nemotron_h-tiny", ME_ADD, "blk.1.ffn_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.1.ffn_norm.weight' is not part of a nemotron_h model"},
	    {"nemotron_h-tiny", ME_KEY, "nemotron_h.ssm.inner_size", 100, BG_ERR_FORMAT,
	     "Mamba2 sizes are not usable"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* nemotron_h_moe: nemotron_h-tiny's layers, the FFN ones 8 routed experts of 32 (up and down
 * alone) with the selection bias and a shared expert of 64 (up and down); the routing keys
 * (sigmoid, normalized, times 2.5); n_params as synth derives it; refusals. */
static void test_nemotron_h_moe(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("nemotron_h_moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s",
	      err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		CHECK(hp->n_expert == 8 && hp->n_expert_used == 2 && hp->n_ff_exp == 32 &&
			  hp->n_ff_shexp == 64 && hp->n_expert_shared == 1 &&
			  model_ff_shexp(hp) == 64 && hp->expert_gating_sigmoid &&
			  hp->moe_sel_bias && hp->expert_weights_norm &&
			  hp->expert_weights_scale == 2.5f && hp->relu2 && !hp->moe_grouped,
		      "nemotron_h_moe-tiny hparams");
		CHECK(L[1].ffn_only && L[4].ffn_only && L[0].no_ffn && L[2].no_ffn &&
			  L[1].ffn_gate_inp.ne1 == 8 && L[1].up_exps.ne1 == 32 &&
			  L[1].up_exps.ne2 == 8 && L[1].down_exps.ne0 == 32 &&
			  !L[1].gate_exps.data && L[1].exp_probs_b.ne0 == 8 &&
			  L[1].up_shexp.ne1 == 64 && L[1].down_shexp.ne0 == 64 &&
			  !L[1].gate_shexp.data && !L[1].w_up.data && !L[0].ffn_gate_inp.data &&
			  !L[2].up_exps.data,
		      "nemotron_h_moe: routed and shared ReLU^2 experts on the FFN layers only");
		CHECK(m->n_params == synth_n_params(synth_find_shape("nemotron_h_moe-tiny"), false),
		      "nemotron_h_moe-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
	}
	static const struct refusal bad[] = {
	    {"nemotron_h_moe-tiny", ME_KEY, "nemotron_h_moe.moe_latent_size", 16,
	     BG_ERR_UNSUPPORTED, "latent expert projections (Nemotron 3 Super) are not supported"},
	    {"nemotron_h_moe-tiny", ME_KEY, "nemotron_h_moe.expert_group_count", 2,
	     BG_ERR_UNSUPPORTED, "grouped routing is not supported"},
	    {"nemotron_h_moe-tiny", ME_KEY, "nemotron_h_moe.expert_shared_feed_forward_length",
	     UINT32_MAX, BG_ERR_FORMAT, "expert_shared_feed_forward_length is missing"},
	    {"nemotron_h_moe-tiny", ME_KEY, "nemotron_h_moe.expert_count", 0, BG_ERR_FORMAT,
	     "a nemotron_h_moe model has experts"},
	    {"nemotron_h_moe-tiny", ME_DROP, "blk.4.exp_probs_b.bias", 0, BG_ERR_FORMAT,
	     "'blk.4.exp_probs_b.bias' is missing"},
	    {"nemotron_h_moe-tiny", ME_DROP, "blk.1.ffn_up_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_up_shexp.weight' is missing"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* step35: step35-tiny's per-kind heads (global 4 / 2, windowed 8 / 4), its window list
 * starting with a global layer, the rotations (the global layers half of
 * rope.dimension_count, the windowed ones rope.dimension_count_swa at base 1e4), attn_gate
 * on layers 0-2 as wide as their query heads, the dense first layer, the clamps as synth
 * writes them (0 read as none); step35-tail's last layer dense after MoE layers; n_params
 * as synth derives it; refusals. */
static void test_step35(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("step35-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		CHECK(hp->n_head == 4 && hp->n_head_swa == 8 && hp->n_head_kv == 2 &&
			  hp->n_head_kv_swa == 4 && model_n_head(hp, true) == 8 &&
			  hp->head_dim == 16 && hp->rope_dim == 8 && hp->rope_dim_swa == 12 &&
			  hp->rope_base == 1e6f && hp->rope_base_swa == 1e4f && hp->n_swa == 8 &&
			  hp->n_layer_dense_lead == 1 && hp->n_expert == 8 && hp->n_ff_shexp == 64 &&
			  hp->expert_gating_sigmoid && hp->moe_sel_bias &&
			  hp->expert_weights_scale == 2.5f && model_q_dim_max(hp) == 128,
		      "step35-tiny hparams");
		CHECK(!L[0].swa && L[1].swa && L[2].swa && !L[3].swa && L[0].wq.ne1 == 64 &&
			  L[1].wq.ne1 == 128 && L[1].wk.ne1 == 64 && L[0].attn_gate.ne1 == 4 &&
			  L[1].attn_gate.ne1 == 8 && !L[3].attn_gate.data && L[0].w_gate.ne1 == 128 &&
			  !L[0].ffn_gate_inp.data && L[1].ffn_gate_inp.ne1 == 8 &&
			  L[0].clamp_shexp == 0.7f && L[1].clamp_exp == 0.6f &&
			  L[2].clamp_shexp == 0.0f && L[3].clamp_exp == 0.0f,
		      "step35-tiny layers");
		CHECK(m->n_params == synth_n_params(synth_find_shape("step35-tiny"), false),
		      "step35-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
	}
	m = NULL; /* step35-tail: its last layer dense after the MoE layers */
	CHECK(moe_rewrite("step35-tail", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_layer *L = m->layers;
		CHECK(m->hp.n_layer_dense_lead == 1 && !model_layer_moe(&L[0]) &&
			  model_layer_moe(&L[1]) && model_layer_moe(&L[2]) &&
			  !model_layer_moe(&L[3]) && !L[3].ffn_gate_inp.data &&
			  !L[3].gate_exps.data && L[3].w_gate.ne1 == 128 &&
			  L[3].w_down.ne0 == 128 && L[2].ffn_gate_inp.ne1 == 8 &&
			  L[3].clamp_shexp == 0.8f,
		      "step35-tail layers");
		CHECK(m->n_params == synth_n_params(synth_find_shape("step35-tail"), false),
		      "step35-tail n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
	}
	static const struct refusal bad[] = {
	    {"step35-tiny", ME_KEY_LIST, "step35.attention.head_count_kv", 3, BG_ERR_FORMAT,
	     "the global layers' head count 4 is not a multiple of their K/V head count 3"},
	    {"step35-tiny", ME_KEY, "step35.attention.sliding_window", UINT32_MAX, BG_ERR_FORMAT,
	     "attention.sliding_window is missing or 0"},
	    {"step35-tiny", ME_KEY, "step35.attention.sliding_window_pattern", UINT32_MAX,
	     BG_ERR_FORMAT, "sliding_window_pattern is missing"},
	    {"step35-tiny", ME_BOOLS, "step35.attention.sliding_window_pattern", 2,
	     BG_ERR_UNSUPPORTED, "does not repeat one pattern"},
	    {"step35-tiny", ME_KEY, "step35.expert_gating_func", 1, BG_ERR_UNSUPPORTED,
	     "only sigmoid gating"},
	    {"step35-tiny", ME_KEY, "step35.expert_shared_feed_forward_length", UINT32_MAX,
	     BG_ERR_FORMAT, "expert_shared_feed_forward_length is missing"},
	    {"step35-tiny", ME_DROP, "blk.2.ffn_gate_inp.weight", 0, BG_ERR_FORMAT,
	     "layer 2 has experts (ffn_gate_exps) but no router (ffn_gate_inp)"},
	    {"step35-tiny", ME_DROP, "blk.2.ffn_gate_exps.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.ffn_gate_exps.weight' is missing"},
	    {"step35-tiny", ME_HALVE, "blk.1.attn_gate.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_gate.weight' has shape [32, 8], expected [64, 8]"},
	    {"step35-tiny", ME_KEY_LIST, "step35.swiglu_clamp_exp", 1, BG_ERR_FORMAT,
	     "swiglu_clamp_exp is not a list of 4 numbers"},
	    {"step35-tiny", ME_KEY, "step35.rope.dimension_count", 6, BG_ERR_FORMAT,
	     "its half (the global layers' rotation) is odd"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* llama4: llama4-tiny's hparams as llama.cpp's loader sets them (chunks of 8192 on layers
 * 0-2 without a sliding_window key, layer 3 without RoPE, the temperature 0.1 / 8192 /
 * offset 1, the Q/K norm with 4 experts, none with 128, MoE on layers 1 and 3 with the
 * shared expert as wide as the experts, dense 0 and 2), a nonzero sliding_window still
 * 8192, sliding_window_pattern 0 every layer chunked; n_params; refusals. */
static void test_llama4(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("llama4-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		CHECK(hp->swa_chunked && hp->n_swa == 8192 && hp->swa_pattern == 4 &&
			  hp->attn_temp_nope && hp->attn_temp_scale == 0.1f &&
			  hp->attn_temp_offset == 1.0f && hp->attn_temp_floor == 8192 &&
			  hp->qk_norm_after_rope && !hp->qk_norm && hp->moe_weight_in &&
			  hp->n_moe_step == 2 && hp->n_expert == 4 && hp->n_expert_used == 2 &&
			  hp->n_ff_exp == 32 && model_ff_shexp(hp) == 32 &&
			  !hp->expert_weights_norm && hp->expert_weights_scale == 1.0f &&
			  !hp->rope_neox && strcmp(hp->rope_factors, "rope_freqs") == 0 &&
			  model_kv_window(hp) == 0,
		      "llama4-tiny hparams");
		CHECK(L[0].swa && L[1].swa && L[2].swa && !L[3].swa && !L[0].no_rope &&
			  !L[2].no_rope && L[3].no_rope && !model_layer_moe(&L[0]) &&
			  model_layer_moe(&L[1]) && !model_layer_moe(&L[2]) &&
			  model_layer_moe(&L[3]) && L[0].w_gate.ne1 == 128 &&
			  L[1].gate_shexp.ne1 == 32 && L[3].down_shexp.ne0 == 32 &&
			  L[1].gate_exps.ne2 == 4,
		      "llama4-tiny layers");
		/* arch_attn_temp by hand: 1 up to position 8190, 1 + 0.1 ln 2 from 8191 */
		CHECK(arch_attn_temp(hp, 8190) == 1.0f &&
			  fabsf(arch_attn_temp(hp, 8191) - (1.0f + 0.1f * logf(2.0f))) < 1e-6f &&
			  fabsf(arch_attn_temp(hp, 16383) - (1.0f + 0.1f * logf(3.0f))) < 1e-6f,
		      "llama4 temperature");
		CHECK(m->n_params == synth_n_params(synth_find_shape("llama4-tiny"), false),
		      "llama4-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
	}
	m = NULL;
	CHECK(moe_rewrite("llama4-128e", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(m->hp.n_expert == 128 && !m->hp.qk_norm_after_rope && m->hp.moe_weight_in,
		      "llama4-128e: no Q/K norm");
		CHECK(m->n_params == synth_n_params(synth_find_shape("llama4-128e"), false),
		      "llama4-128e n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
	}
	m = NULL; /* a nonzero window is still 8192 (llama.cpp overrides it) */
	CHECK(moe_rewrite("llama4-tiny", ME_KEY, "llama4.attention.sliding_window", 4096, &m,
			  &err) == BG_OK &&
		  m && m->hp.n_swa == 8192 && m->hp.n_swa_file == 4096 && m->layers[0].swa,
	      "llama4 sliding_window 4096: %s", err.msg);
	model_free(m);
	m = NULL;
	CHECK(moe_rewrite("llama4-chunk", ME_NONE, "", 0, &m, &err) == BG_OK && m &&
		  m->layers[3].swa && m->layers[3].no_rope && model_kv_window(&m->hp) == 8192,
	      "llama4-chunk: every layer chunked: %s", err.msg);
	model_free(m);
	static const struct refusal bad[] = {
	    {"llama4-tiny", ME_KEY, "llama4.attention.sliding_window", 0, BG_ERR_UNSUPPORTED,
	     "sliding_window is 0"},
	    {"llama4-tiny", ME_KEY, "llama4.interleave_moe_layer_step", UINT32_MAX, BG_ERR_FORMAT,
	     "interleave_moe_layer_step is missing"},
	    {"llama4-tiny", ME_KEY, "llama4.interleave_moe_layer_step", 0, BG_ERR_FORMAT,
	     "interleave_moe_layer_step is 0"},
	    {"llama4-tiny", ME_KEY, "llama4.expert_count", UINT32_MAX, BG_ERR_FORMAT,
	     "a llama4 model has experts"},
	    {"llama4-tiny", ME_DROP, "blk.3.ffn_up_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.3.ffn_up_shexp.weight' is missing"},
	    {"llama4-tiny", ME_DROP, "blk.1.ffn_gate_inp.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_gate_inp.weight' is missing"},
	    {"llama4-tiny", ME_ADD, "blk.0.attn_q.bias", 0, BG_ERR_UNSUPPORTED, "bias"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* ernie4_5-moe-tiny with its layer count, leading dense layers and MoE step replaced (f32),
 * written and loaded. */
static enum bg_status load_ernie_moe(uint32_t n_layer, uint32_t lead, uint32_t step,
				     struct model **out, struct bg_err *err)
{
	struct synth_opts o;
	synth_opts_init(&o, synth_find_shape("ernie4_5-moe-tiny"));
	o.shape.n_layer = n_layer;
	o.shape.n_dense_lead = lead;
	o.shape.moe_step = step;
	return synth_util_model(&o, out, err);
}

/* ernie4_5 (llama's layer: interleaved RoPE, the optional Q/K/V biases, no O bias, tied
 * output) and ernie4_5-moe (the dense first layer, softmax routing with the selection
 * bias (optional per layer), normalized and unscaled weights, the shared expert of its own
 * width); the MoE layer rule l >= leading_dense_block_count && (l + 1) % step == 0 on a
 * 6-layer file with lead 2 and step 2 (MoE: layers 3 and 5 only), which llama.cpp cannot
 * load (arch.c); n_params as synth derives it; refusals. */
static void test_ernie(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("ernie4_5-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		CHECK(!hp->rope_neox && hp->qkv_bias && !hp->attn_out_bias && !hp->n_expert &&
			  m->layers[1].bq.ne0 == 64 && m->output.data == m->tok_embd.data &&
			  hp->rope_base == 500000.0f,
		      "ernie4_5-tiny hparams");
		CHECK(m->n_params == synth_n_params(synth_find_shape("ernie4_5-tiny"), true),
		      "ernie4_5-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
	}
	m = NULL;
	CHECK(moe_rewrite("ernie4_5-moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		CHECK(!hp->rope_neox && !hp->qkv_bias && hp->n_expert == 8 &&
			  hp->n_expert_used == 2 && hp->n_ff_exp == 32 && hp->n_ff == 128 &&
			  hp->n_ff_shexp == 64 && hp->n_expert_shared == 1 &&
			  model_ff_shexp(hp) == 64 && hp->moe_grouped && hp->moe_sel_bias &&
			  !hp->expert_gating_sigmoid && hp->expert_weights_norm &&
			  hp->expert_weights_scale == 1.0f && hp->n_expert_groups <= 1 &&
			  hp->n_layer_dense_lead == 1 && hp->n_moe_step == 1,
		      "ernie4_5-moe-tiny hparams");
		CHECK(!model_layer_moe(&L[0]) && L[0].w_gate.ne1 == 128 && model_layer_moe(&L[1]) &&
			  model_layer_moe(&L[2]) && L[2].exp_probs_b.ne0 == 8 &&
			  L[2].gate_shexp.ne1 == 64 && L[2].down_shexp.ne0 == 64 &&
			  !L[2].w_gate.data && m->output.data != m->tok_embd.data,
		      "ernie4_5-moe-tiny layers");
		CHECK(m->n_params == synth_n_params(synth_find_shape("ernie4_5-moe-tiny"), false),
		      "ernie4_5-moe-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
	}
	m = NULL; /* the step: lead 2, step 2 of 6 layers */
	CHECK(load_ernie_moe(6, 2, 2, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_layer *L = m->layers;
		bool ok = m->hp.n_moe_step == 2;
		for (uint32_t l = 0; l < 6; l++)
			ok = ok && model_layer_moe(&L[l]) == (l == 3 || l == 5) &&
			     (L[l].w_down.data != NULL) == !(l == 3 || l == 5);
		CHECK(ok, "ernie4_5-moe lead 2, step 2: MoE layers 3 and 5 only");
		model_free(m);
	}
	m = NULL; /* the selection bias is optional per layer */
	CHECK(moe_rewrite("ernie4_5-moe-tiny", ME_DROP, "blk.1.exp_probs_b.bias", 0, &m, &err) ==
		      BG_OK,
	      "%s", err.msg);
	CHECK(m && !m->layers[1].exp_probs_b.data && m->layers[2].exp_probs_b.data,
	      "ernie4_5-moe: blk.1 without exp_probs_b");
	model_free(m);
	/* (without expert_shared_feed_forward_length there is no shared expert: its tensors
	 * are unknown, as llama.cpp's tensor count refuses them) */
	static const struct refusal bad[] = {
	    {"ernie4_5-moe-tiny", ME_KEY, "ernie4_5-moe.interleave_moe_layer_step", UINT32_MAX,
	     BG_ERR_FORMAT, "interleave_moe_layer_step is missing"},
	    {"ernie4_5-moe-tiny", ME_KEY, "ernie4_5-moe.interleave_moe_layer_step", 0,
	     BG_ERR_FORMAT, "interleave_moe_layer_step is 0 (expected 1 to 3)"},
	    {"ernie4_5-moe-tiny", ME_KEY, "ernie4_5-moe.leading_dense_block_count", 4,
	     BG_ERR_FORMAT, "leading_dense_block_count 4 exceeds the 3 layers"},
	    {"ernie4_5-moe-tiny", ME_KEY, "ernie4_5-moe.expert_shared_feed_forward_length",
	     UINT32_MAX, BG_ERR_UNSUPPORTED,
	     "tensor 'blk.1.ffn_gate_shexp.weight' is not part of a ernie4_5-moe model"},
	    {"ernie4_5-moe-tiny", ME_DROP, "blk.1.ffn_gate_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_gate_shexp.weight' is missing"},
	    {"ernie4_5-moe-tiny", ME_DROP, "blk.0.ffn_down.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.ffn_down.weight' is missing"},
	    {"ernie4_5-moe-tiny", ME_KEY_F32, "ernie4_5-moe.attention.layer_norm_rms_epsilon",
	     UINT32_MAX, BG_ERR_FORMAT, "layer_norm_rms_epsilon is missing"},
	    {"ernie4_5-tiny", ME_ADD, "blk.0.attn_output.bias", 0, BG_ERR_UNSUPPORTED,
	     "tensor 'blk.0.attn_output.bias' is not part of a ernie4_5 model"},
	    {"ernie4_5-tiny", ME_KEY, "ernie4_5.expert_count", 4, BG_ERR_UNSUPPORTED,
	     "mixture-of-experts ernie4_5 models"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* hunyuan-dense (NeoX RoPE, Q/K norms after it, tied; expert_count 1 read as dense;
 * rope.scaling.alpha 50 multiplying the base by 50^(16/14), derived here in double) and
 * hunyuan-moe (experts as wide as feed_forward_length 64, softmax, renormalized, a shared
 * expert of 96, or of feed_forward_length without the key); refusals. */
static void test_hunyuan(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("hunyuan-dense-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s",
	      err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		CHECK(hp->rope_neox && hp->qk_norm && hp->qk_norm_after_rope && !hp->qk_norm_full &&
			  !hp->qkv_bias && !hp->n_expert && m->layers[1].k_norm.ne0 == 16 &&
			  m->output.data == m->tok_embd.data && hp->rope_base == 10000.0f,
		      "hunyuan-dense-tiny hparams");
		CHECK(m->n_params == synth_n_params(synth_find_shape("hunyuan-dense-tiny"), true),
		      "hunyuan-dense-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
	}
	m = NULL;
	CHECK(moe_rewrite("hunyuan-dense-tiny", ME_KEY, "hunyuan-dense.expert_count", 1, &m,
			  &err) == BG_OK &&
		  m && m->hp.n_expert == 0,
	      "hunyuan-dense with expert_count 1: dense (%s)", err.msg);
	model_free(m);
	m = NULL;
	CHECK(moe_rewrite("hunyuan-dense-tiny", ME_KEY_F32, "hunyuan-dense.rope.scaling.alpha",
			  50000, &m, &err) == BG_OK,
	      "%s", err.msg);
	if (m) {
		double want = 10000.0 * pow(50.0, 16.0 / 14.0); /* 874,339 */
		CHECK(fabs(m->hp.rope_base - want) <= 1e-5 * want && m->hp.rope_base_swa ==
										 m->hp.rope_base,
		      "hunyuan-dense alpha 50: base %g, want %g", (double)m->hp.rope_base, want);
		model_free(m);
	}
	m = NULL;
	CHECK(moe_rewrite("hunyuan-moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		CHECK(hp->rope_neox && hp->qk_norm_after_rope && hp->n_expert == 8 &&
			  hp->n_expert_used == 2 && hp->n_ff_exp == 64 && hp->n_ff == 64 &&
			  hp->n_ff_shexp == 96 && hp->n_expert_shared == 1 &&
			  !hp->expert_gating_sigmoid && hp->expert_weights_norm &&
			  !hp->moe_sel_bias && !hp->moe_grouped &&
			  hp->expert_weights_scale == 1.0f && model_layer_moe(&L[0]) &&
			  model_layer_moe(&L[1]) && L[0].gate_exps.ne1 == 64 &&
			  L[0].gate_shexp.ne1 == 96 && L[1].down_shexp.ne0 == 96,
		      "hunyuan-moe-tiny hparams and layers");
		CHECK(m->n_params == synth_n_params(synth_find_shape("hunyuan-moe-tiny"), false),
		      "hunyuan-moe-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
	}
	m = NULL; /* lazily: hunyuan-dense (its norms after RoPE), hunyuan-moe refused (files
		   * only: its shared expert) */
	CHECK(model_open("synthetic:hunyuan-dense-tiny", true, &m, &err) == BG_OK && m &&
		  m->hp.qk_norm_after_rope && m->hp.qk_norm,
	      "lazy hunyuan-dense-tiny: %s", err.msg);
	model_free(m);
	m = NULL;
	CHECK(model_open("synthetic:hunyuan-moe-tiny", true, &m, &err) == BG_ERR_UNSUPPORTED &&
		  !m && has(&err, "hunyuan-moe too"),
	      "lazy hunyuan-moe-tiny refused: %s", err.msg);
	static const struct refusal bad[] = {
	    {"hunyuan-moe-tiny", ME_KEY, "hunyuan-moe.expert_shared_feed_forward_length",
	     UINT32_MAX, BG_ERR_FORMAT,
	     "'blk.0.ffn_gate_shexp.weight' has shape [64, 96], expected [64, 64]"},
	    {"hunyuan-moe-tiny", ME_KEY, "hunyuan-moe.expert_feed_forward_length", UINT32_MAX,
	     BG_ERR_FORMAT, "expert_feed_forward_length is missing"},
	    {"hunyuan-moe-tiny", ME_DROP, "blk.1.attn_q_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_q_norm.weight' is missing"},
	    {"hunyuan-dense-tiny", ME_KEY, "hunyuan-dense.expert_count", 2, BG_ERR_UNSUPPORTED,
	     "mixture-of-experts hunyuan-dense models"},
	    {"hunyuan-dense-tiny", ME_KEY_F32, "hunyuan-dense.attention.layer_norm_rms_epsilon",
	     UINT32_MAX, BG_ERR_FORMAT, "layer_norm_rms_epsilon is missing"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* lfm2moe: lfm2's layers with the leading dense layer (feed_forward_length 128) and then
 * experts of their own width (32) with minimax-m2's routing keys (sigmoid, the selection
 * bias, normalized, unscaled); LFM2-8B-A1B's parameter count derived by hand; refusals. */
static void test_lfm2moe(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("lfm2moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0];
		bool moe = true;
		for (uint32_t l = 1; l < hp->n_layer; l++) {
			const struct model_layer *L = &m->layers[l];
			moe = moe && L->exp_probs_b.ne0 == 4 && L->gate_exps.ne1 == 32 &&
			      L->down_exps.ne0 == 32 && !L->w_gate.data && !L->gate_shexp.data &&
			      L->conv == (l != 1);
		}
		CHECK(hp->conv_l == 3 && hp->n_expert == 4 && hp->n_expert_used == 2 &&
			  hp->n_ff == 128 && hp->n_ff_exp == 32 && hp->n_layer_dense_lead == 1 &&
			  !hp->n_expert_shared && hp->expert_gating_sigmoid && hp->moe_sel_bias &&
			  hp->expert_weights_norm && hp->expert_weights_scale == 1.0f && l0->conv &&
			  l0->w_gate.ne1 == 128 && l0->w_down.ne0 == 128 &&
			  !l0->ffn_gate_inp.data && !l0->exp_probs_b.data && moe &&
			  m->n_params == synth_n_params(synth_find_shape("lfm2moe-tiny"), true),
		      "lfm2moe-tiny hparams and layers, n_params %llu",
		      (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	/* 65536 x 2048 (tied) + 2048 + 24 x 2 x 2048 (norms) + 18 conv layers x (3 x 2048^2 +
	 * 3 x 2048 + 2048^2) + 6 attention layers x (2 x 2048^2 + 2 x 2048 x 512 + 2 x 64) + 2
	 * dense x 3 x 2048 x 7168 + 22 MoE x (2048 x 32 + 3 x 2048 x 1792 x 32 + 32) */
	CHECK(synth_n_params(synth_find_shape("lfm2-8b-a1b"), true) == 8339930560ull,
	      "lfm2-8b-a1b: n_params");
	static const struct refusal bad[] = {
	    {"lfm2moe-tiny", ME_KEY, "lfm2moe.leading_dense_block_count", 5, BG_ERR_FORMAT,
	     "leading_dense_block_count 5 exceeds the 4 layers"},
	    /* absent: 0, every layer MoE, and layer 0 has a dense FFN instead */
	    {"lfm2moe-tiny", ME_KEY, "lfm2moe.leading_dense_block_count", UINT32_MAX, BG_ERR_FORMAT,
	     "'blk.0.ffn_gate_inp.weight' is missing"},
	    {"lfm2moe-tiny", ME_KEY, "lfm2moe.expert_gating_func", UINT32_MAX, BG_ERR_FORMAT,
	     "lfm2moe.expert_gating_func is missing"},
	    {"lfm2moe-tiny", ME_DROP, "blk.3.exp_probs_b.bias", 0, BG_ERR_FORMAT,
	     "'blk.3.exp_probs_b.bias' is missing"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* qwen35: qwen35-tiny's layer kinds (delta net, attention, delta net), the ssm.* keys as
 * read, the gated attention's doubled attn_q, the state a delta-net layer keeps, the
 * parameter count derived by hand; refusals. */
static void test_qwen35(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("qwen35-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l1 = &m->layers[1];
		/* 512 x 64 (tied) + 64 + 3 x (2 x 64 + 3 x 64 x 128) + 2 delta nets x (64 x 128 +
		 * 64 x 64 + 4 x 128 + 2 x 4 + 2 x 64 x 4 + 16 + 64 x 64) + attention (64 x 128 + 2
		 * x 64 x 32 + 64 x 64 + 2 x 16) */
		CHECK(hp->gdn_conv == 4 && hp->gdn_d == 16 && hp->gdn_nk == 2 && hp->gdn_nv == 4 &&
			  hp->gdn_every == 2 && hp->attn_out_gate && hp->rope_neox &&
			  hp->rope_dim == 8 && hp->head_dim == 16 && hp->qk_norm && l0->gdn &&
			  !l1->gdn && m->layers[2].gdn && l0->gdn_qkv.ne1 == 128 &&
			  l0->gdn_z.ne1 == 64 && l0->conv_w.ne0 == 4 && l0->wo.ne0 == 64 &&
			  l1->wq.ne1 == 128 && l1->wk.ne1 == 32 && l1->ffn_norm.data &&
			  model_state_floats(hp, l0) == 3 * 128 + 4 * 16 * 16 &&
			  model_state_floats(hp, l1) == 0 && m->n_params == 158224 &&
			  m->n_params == synth_n_params(synth_find_shape("qwen35-tiny"), true),
		      "qwen35-tiny hparams and layers, n_params %llu",
		      (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	static const struct refusal bad[] = {
	    {"qwen35-tiny", ME_KEY, "qwen35.ssm.conv_kernel", UINT32_MAX, BG_ERR_FORMAT,
	     "qwen35.ssm.conv_kernel is missing or not in [2, 8]"},
	    {"qwen35-tiny", ME_KEY, "qwen35.ssm.conv_kernel", 9, BG_ERR_FORMAT,
	     "qwen35.ssm.conv_kernel is missing or not in [2, 8]"},
	    {"qwen35-tiny", ME_KEY, "qwen35.ssm.time_step_rank", 3, BG_ERR_FORMAT,
	     "are missing or inconsistent"},
	    {"qwen35-tiny", ME_KEY, "qwen35.ssm.inner_size", 63, BG_ERR_FORMAT,
	     "are missing or inconsistent"},
	    {"qwen35-tiny", ME_KEY, "qwen35.ssm.state_size", 0, BG_ERR_FORMAT,
	     "are missing or inconsistent"},
	    {"qwen35-tiny", ME_KEY, "qwen35.ssm.state_size", 8, BG_ERR_FORMAT,
	     "are missing or inconsistent"},
	    {"qwen35-tiny", ME_KEY, "qwen35.full_attention_interval", 0, BG_ERR_FORMAT,
	     "qwen35.full_attention_interval is 0"},
	    /* absent: 4, so layer 1 is a delta net the file does not have */
	    {"qwen35-tiny", ME_KEY, "qwen35.full_attention_interval", UINT32_MAX, BG_ERR_FORMAT,
	     "'blk.1.attn_qkv.weight' is missing"},
	    {"qwen35-tiny", ME_BOOLS, "qwen35.attention.recurrent_layers", 5, BG_ERR_UNSUPPORTED,
	     "qwen35.attention.recurrent_layers (a layer pattern other than"},
	    {"qwen35-tiny", ME_KEY_F32, "qwen35.attention.scale", 100, BG_ERR_UNSUPPORTED,
	     "qwen35.attention.scale is not supported"},
	    {"qwen35-tiny", ME_DROP, "blk.2.ssm_a", 0, BG_ERR_FORMAT, "'blk.2.ssm_a' is missing"},
	    {"qwen35-tiny", ME_HALVE, "blk.1.attn_q.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_q.weight' has shape"},
	    {"qwen35-tiny", ME_HALVE, "blk.0.ssm_conv1d.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.ssm_conv1d.weight' has shape"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* qwen3next: whether row `row` of w (f32, n_embd 64 wide) is row `src` of the file's
 * tensor `name` */
static bool qn_row_is(const struct model *m, const struct model_weight *w, uint64_t row,
		      const char *name, uint64_t src)
{
	const struct gguf_tensor *t = gguf_find_tensor(m->gguf, name);
	return t && w->data && w->type == GGUF_DTYPE_F32 &&
	       memcmp((const float *)w->data + row * 64, (const float *)t->data + src * 64,
		      64 * sizeof(float)) == 0;
}

/* qwen3next: qwen35moe-tiny's layers and counts (196048 parameters: ssm_ba's 2 x 64 x 4
 * are ssm_beta's and ssm_alpha's) with V heads reading K heads repeat-interleaved; the
 * fused tensors' rows where the layouts in arch.c put them (d 16, 2 K heads, 4 V heads,
 * r 2): ssm_ba per K head g [beta of V heads 2g, 2g+1 | their alpha], so V head 1's beta is
 * row 1 and its alpha row 3, V head 2's beta row 4 and alpha row 6; ssm_in per K head
 * [q 16 | k 16 | v 32 | z 32] (96 rows), so K head 1's q starts at row 96 (qkv row 16), the
 * k rows at 16 (qkv row 32), V head 2's v at row 96 + 32 (qkv row 64 + 32), its z at
 * 96 + 64 (z row 32); refusals. */
static void test_qwen3next(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("qwen3next-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l2 = &m->layers[2];
		CHECK(hp->gdn_k_grouped && hp->shexp_gate && hp->attn_out_gate && hp->rope_neox &&
			  hp->rope_dim == 8 && l0->gdn && !m->layers[1].gdn && l2->gdn &&
			  l0->gdn_beta.ne1 == 4 && l0->gdn_alpha.ne1 == 4 &&
			  m->n_params == 196048 &&
			  m->n_params == synth_n_params(synth_find_shape("qwen3next-tiny"), true),
		      "qwen3next-tiny hparams and layers, n_params %llu",
		      (unsigned long long)m->n_params);
		CHECK(qn_row_is(m, &l2->gdn_beta, 0, "blk.2.ssm_ba.weight", 0) &&
			  qn_row_is(m, &l2->gdn_beta, 1, "blk.2.ssm_ba.weight", 1) &&
			  qn_row_is(m, &l2->gdn_alpha, 1, "blk.2.ssm_ba.weight", 3) &&
			  qn_row_is(m, &l2->gdn_beta, 2, "blk.2.ssm_ba.weight", 4) &&
			  qn_row_is(m, &l2->gdn_alpha, 2, "blk.2.ssm_ba.weight", 6) &&
			  qn_row_is(m, &l2->gdn_alpha, 3, "blk.2.ssm_ba.weight", 7),
		      "qwen3next ssm_ba's rows as beta and alpha");
		model_free(m);
		m = NULL;
	}
	CHECK(moe_rewrite("qwen3next-ssmin-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s",
	      err.msg);
	if (m) {
		const struct model_layer *l0 = &m->layers[0];
		CHECK(l0->gdn_qkv.ne1 == 128 && l0->gdn_z.ne1 == 64 &&
			  qn_row_is(m, &l0->gdn_qkv, 0, "blk.0.ssm_in.weight", 0) &&
			  qn_row_is(m, &l0->gdn_qkv, 16, "blk.0.ssm_in.weight", 96) &&
			  qn_row_is(m, &l0->gdn_qkv, 32, "blk.0.ssm_in.weight", 16) &&
			  qn_row_is(m, &l0->gdn_qkv, 64 + 32, "blk.0.ssm_in.weight", 96 + 32) &&
			  qn_row_is(m, &l0->gdn_qkv, 127, "blk.0.ssm_in.weight", 96 + 63) &&
			  qn_row_is(m, &l0->gdn_z, 0, "blk.0.ssm_in.weight", 64) &&
			  qn_row_is(m, &l0->gdn_z, 32, "blk.0.ssm_in.weight", 96 + 64) &&
			  m->n_params == 196048,
		      "qwen3next ssm_in's rows as q, k, v and z, n_params %llu",
		      (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	/* the converter's attention.recurrent_layers, as full_attention_interval 2 says */
	CHECK(moe_rewrite("qwen3next-tiny", ME_BOOLS, "qwen3next.attention.recurrent_layers",
			  1u << 30 | 5, &m, &err) == BG_OK &&
		  m->layers[0].gdn && !m->layers[1].gdn && m->layers[2].gdn,
	      "qwen3next recurrent_layers [T, F, T]: %s", err.msg);
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    {"qwen3next-tiny", ME_DROP, "blk.0.ssm_ba.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.ssm_ba.weight' is missing"},
	    {"qwen3next-tiny", ME_HALVE, "blk.2.ssm_ba.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.ssm_ba.weight' has shape"},
	    {"qwen3next-tiny", ME_DROP, "blk.0.attn_qkv.weight", 0, BG_ERR_FORMAT,
	     "layer 0: qwen3next's delta net needs attn_qkv.weight and attn_gate.weight, or "
	     "ssm_in.weight"},
	    {"qwen3next-tiny", ME_DROP, "blk.2.attn_gate.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.attn_gate.weight' is missing"},
	    {"qwen3next-ssmin-tiny", ME_HALVE, "blk.0.ssm_in.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.ssm_in.weight' has shape"},
	    {"qwen3next-ssmin-tiny", ME_ADD, "blk.0.attn_qkv.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.attn_qkv.weight' has shape"},
	    {"qwen3next-tiny", ME_BOOLS, "qwen3next.attention.recurrent_layers", 5,
	     BG_ERR_UNSUPPORTED, "qwen3next.attention.recurrent_layers (a layer pattern"},
	    {"qwen3next-tiny", ME_BOOLS, "qwen3next.attention.recurrent_layers", 1u << 30 | 7,
	     BG_ERR_UNSUPPORTED, "qwen3next.attention.recurrent_layers (a layer pattern"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* qwen35moe, qwen2moe: every layer's router, experts and gated shared expert (its gate one
 * row of n_embd), softmax routing renormalized or not, qwen35moe without
 * feed_forward_length; the parameter counts derived by hand (qwen35-tiny's 158224 less
 * its dense FFNs, 3 x 3 x 64 x 128, plus 3 x (router 64 x 4 + experts 3 x 64 x 32 x 4 +
 * shared 3 x 64 x 64 + gate 64); qwen2moe-tiny: untied 2 x 512 x 64 + 64, 2 x (norms 128,
 * Q/K/V/O 4096 + 2048 + 2048 + 4096, biases 128, the same FFN)); refusals. */
static void test_qwen_moe(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("qwen35moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l1 = &m->layers[1];
		CHECK(hp->shexp_gate && hp->n_expert == 4 && hp->n_expert_used == 2 &&
			  hp->n_ff_exp == 32 && hp->n_expert_shared == 1 &&
			  model_ff_shexp(hp) == 64 && hp->n_ff == 64 && hp->expert_weights_norm &&
			  !hp->expert_gating_sigmoid && hp->expert_weights_scale == 1.0f &&
			  l0->gdn && !l1->gdn && l0->gate_inp_shexp.ne0 == 64 &&
			  l0->gate_inp_shexp.ne1 == 1 && l1->gate_shexp.ne1 == 64 &&
			  l1->ffn_gate_inp.ne1 == 4 && !l1->w_gate.data && l1->ffn_norm.data &&
			  m->n_params == 196048 &&
			  m->n_params == synth_n_params(synth_find_shape("qwen35moe-tiny"), true),
		      "qwen35moe-tiny hparams and layers, n_params %llu",
		      (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	CHECK(moe_rewrite("qwen2moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		CHECK(hp->shexp_gate && hp->qkv_bias && hp->rope_neox && !hp->expert_weights_norm &&
			  hp->n_ff == 128 && model_ff_shexp(hp) == 64 &&
			  m->layers[1].gate_inp_shexp.ne0 == 64 && m->n_params == 165056 &&
			  m->n_params == synth_n_params(synth_find_shape("qwen2moe-tiny"), false),
		      "qwen2moe-tiny hparams, n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	/* qwen35moe-gu-tiny: ffn_gate_up_exps read in place. The file's tensor is [64, 64, 4]
	 * f32: expert e's gate row r is its row e * 64 + r, its up row r its row e * 64 + 32
	 * + r (offsets computed here from the file's layout alone); the views must point at
	 * those bytes in the mapping itself (no copy), each expert a stride of 64 rows on */
	CHECK(moe_rewrite("qwen35moe-gu-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct gguf_tensor *gu =
		    gguf_find_tensor(m->gguf, "blk.1.ffn_gate_up_exps.weight");
		const struct model_layer *l1 = &m->layers[1];
		int bad = gu && gu->nbytes == 64 * 64 * 4 * 4 ? 0 : -1;
		for (uint32_t e = 0; bad >= 0 && e < 4; e++)
			for (uint32_t r = 0; r < 32; r++) {
				const char *fg = (const char *)gu->data + ((e * 64 + r) * 64) * 4;
				const char *fu =
				    (const char *)gu->data + ((e * 64 + 32 + r) * 64) * 4;
				struct model_weight g = model_expert(&l1->gate_exps, e);
				struct model_weight u = model_expert(&l1->up_exps, e);
				bad += (const char *)g.data + r * 64 * 4 != fg;
				bad += (const char *)u.data + r * 64 * 4 != fu;
			}
		CHECK(
		    bad == 0 && l1->gate_exps.ne1 == 32 && l1->gate_exps.ne2 == 4 &&
			l1->up_exps.ne1 == 32 && model_expert_stride(&l1->up_exps) == 64 * 64 * 4 &&
			model_weight_span(&l1->gate_exps) == (3 * 64 + 32) * 64 * 4 &&
			m->n_owned == 0 && m->n_params == 196048 &&
			m->n_params == synth_n_params(synth_find_shape("qwen35moe-gu-tiny"), true),
		    "qwen35moe-gu-tiny: %d rows elsewhere, n_params %llu, %u owned", bad,
		    (unsigned long long)m->n_params, m->n_owned);
		model_free(m);
		m = NULL;
	}
	CHECK(model_open("synthetic:qwen2moe-tiny", true, &m, &err) == BG_ERR_UNSUPPORTED &&
		  strstr(err.msg, "gated shared experts") && strstr(err.msg, "files only"),
	      "qwen2moe: no lazy model (%s)", err.msg);
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    {"qwen35moe-tiny", ME_DROP, "blk.2.ffn_gate_inp_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.ffn_gate_inp_shexp.weight' is missing"},
	    {"qwen35moe-tiny", ME_HALVE, "blk.1.ffn_gate_inp_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_gate_inp_shexp.weight' has shape [32], expected [64]"},
	    /* neither width key: nothing says how wide the shared expert is */
	    {"qwen35moe-tiny", ME_KEY, "qwen35moe.expert_shared_feed_forward_length", UINT32_MAX,
	     BG_ERR_FORMAT,
	     "qwen35moe.expert_shared_feed_forward_length (or, without it, feed_forward_length) "
	     "is missing"},
	    {"qwen35moe-tiny", ME_KEY, "qwen35moe.expert_shared_feed_forward_length", 32,
	     BG_ERR_FORMAT, "'blk.0.ffn_gate_shexp.weight' has shape [64, 64], expected [64, 32]"},
	    {"qwen35moe-tiny", ME_KEY, "qwen35moe.expert_gating_func", 2, BG_ERR_UNSUPPORTED,
	     "qwen35moe.expert_gating_func is 2: qwen35moe routes with a softmax (1)"},
	    {"qwen35moe-tiny", ME_KEY, "qwen35moe.expert_shared_count", 2, BG_ERR_UNSUPPORTED,
	     "qwen35moe.expert_shared_count is 2"},
	    {"qwen35moe-tiny", ME_KEY, "qwen35moe.expert_count", UINT32_MAX, BG_ERR_FORMAT,
	     "qwen35moe.expert_count is missing or 0"},
	    /* without its own key the shared expert is feed_forward_length (128) wide */
	    {"qwen2moe-tiny", ME_KEY, "qwen2moe.expert_shared_feed_forward_length", UINT32_MAX,
	     BG_ERR_FORMAT, "'blk.0.ffn_gate_shexp.weight' has shape [64, 64], expected [64, 128]"},
	    {"qwen2moe-tiny", ME_DROP, "blk.0.attn_q.bias", 0, BG_ERR_FORMAT,
	     "'blk.0.attn_q.bias' is missing"},
	    {"qwen35moe-gu-tiny", ME_ADD, "blk.2.ffn_up_exps.weight", 0, BG_ERR_FORMAT,
	     "blk.2 has both ffn_gate_up_exps and the separate 'blk.2.ffn_up_exps.weight'"},
	    {"qwen35moe-gu-tiny", ME_HALVE, "blk.0.ffn_gate_up_exps.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.ffn_gate_up_exps.weight' has shape [32, 64, 4], expected [64, 64, 4]"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* qwen2vl, qwen3vl, qwen3vlmoe (multi-section RoPE, arch.h's mrope): the pairs that text
 * leaves unturned, derived by hand from ggml_mrope_cache_init's rule (sector i % sum;
 * M-RoPE: the 4th position from sections[0] + [1] + [2] on; IMROPE: sector % 3 == k turns
 * below 3 sections[k]): Qwen2-VL's [16, 24, 24, 0] over 64 pairs none, Qwen3-VL's [24, 20,
 * 20, 0] pairs 61 and 62, the tiny shapes' 4 of 8, 10 of 16 and 7 of 16; their frequencies
 * 0 there and base^(-2i / d) elsewhere; the files' hparams and parameter counts (by hand:
 * qwen2vl-tiny untied 2 x 512 x 64 + 64, 2 x (norms 128, Q/K/V/O 4096 + 2048 + 2048 + 4096,
 * biases 128, FFN 3 x 64 x 128); qwen3vl-tiny tied 512 x 64 + 64, 2 x (norms 128 + 64,
 * Q/K/V/O 8192 + 4096 + 4096 + 8192, FFN 24576); qwen3vlmoe-tiny untied, its FFN a router
 * 64 x 8 and experts 3 x 64 x 32 x 8); refusals of the lists ggml would assert on. */
static void test_qwenvl(void)
{
	static const struct {
		uint8_t mrope;
		int32_t sec[4];
		uint32_t half;
		uint32_t off[2]; /* the unturned pairs, UINT32_MAX: none */
	} rule[] = {
	    {1, {16, 24, 24, 0}, 64, {UINT32_MAX, UINT32_MAX}},
	    {2, {24, 20, 20, 0}, 64, {61, 62}},
	    {1, {2, 1, 1, 1}, 8, {4, UINT32_MAX}},
	    {2, {5, 3, 3, 0}, 16, {10, UINT32_MAX}},
	    {2, {4, 2, 3, 1}, 16, {7, UINT32_MAX}},
	};
	for (size_t r = 0; r < sizeof rule / sizeof rule[0]; r++) {
		uint32_t bad = UINT32_MAX;
		for (uint32_t i = 0; i < rule[r].half; i++) {
			bool off = i == rule[r].off[0] || i == rule[r].off[1];
			if (arch_mrope_pair_turns(rule[r].mrope, rule[r].sec, i) == off)
				bad = i;
		}
		CHECK(bad == UINT32_MAX, "mrope %u [%d, %d, %d, %d]: pair %u", rule[r].mrope,
		      rule[r].sec[0], rule[r].sec[1], rule[r].sec[2], rule[r].sec[3], bad);
	}
	static const struct {
		const char *shape;
		uint8_t mrope;
		uint32_t off;
		uint64_t n_params;
	} files[] = {
	    {"qwen2vl-tiny", 1, 4, 139840},
	    {"qwen3vl-tiny", 2, 10, 131520},
	    {"qwen3vlmoe-tiny", 2, 7, 214464},
	};
	for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
		struct bg_err err = {0};
		struct model *m = NULL;
		CHECK(moe_rewrite(files[f].shape, ME_NONE, "", 0, &m, &err) == BG_OK, "%s",
		      err.msg);
		if (!m)
			continue;
		const struct model_hparams *hp = &m->hp;
		const struct synth_shape *sh = synth_find_shape(files[f].shape);
		double freq[64];
		float ms = 0.0f;
		arch_rope_freqs(hp, NULL, false, freq, &ms);
		uint32_t half = hp->rope_dim / 2, wrong = UINT32_MAX;
		for (uint32_t i = 0; i < half; i++) {
			double want = i == files[f].off ? 0.0 : pow(10000.0, -2.0 * i / hp->rope_dim);
			if (fabs(freq[i] - want) > 1e-12 * want)
				wrong = i;
		}
		CHECK(hp->rope_mrope == files[f].mrope && hp->rope_neox &&
			  memcmp(hp->rope_sections, sh->rope_sections, sizeof hp->rope_sections) ==
			      0 &&
			  hp->rope_dim == hp->head_dim && ms == 1.0f && wrong == UINT32_MAX &&
			  hp->qkv_bias == (f == 0) && hp->qk_norm == (f > 0) &&
			  hp->n_expert == (f == 2 ? 8u : 0u) && m->n_params == files[f].n_params &&
			  m->n_params == synth_n_params(sh, sh->tie_output),
		      "%s: mrope %u, sections %d %d %d %d, freq %u wrong, n_params %llu",
		      files[f].shape, hp->rope_mrope, hp->rope_sections[0], hp->rope_sections[1],
		      hp->rope_sections[2], hp->rope_sections[3], wrong,
		      (unsigned long long)m->n_params);
		model_free(m);
	}
	static const struct refusal bad[] = {
	    {"qwen2vl-tiny", ME_KEY, "qwen2vl.rope.dimension_sections", UINT32_MAX, BG_ERR_FORMAT,
	     "qwen2vl.rope.dimension_sections is missing"},
	    {"qwen3vl-tiny", ME_KEY_LIST, "qwen3vl.rope.dimension_sections", 0, BG_ERR_UNSUPPORTED,
	     "qwen3vl.rope.dimension_sections [0, 0, 0, 0] is not supported"},
	    {"qwen2vl-tiny", ME_KEY_LIST, "qwen2vl.rope.dimension_sections", 5, BG_ERR_UNSUPPORTED,
	     "sum at most the head size 16"},
	    {"qwen3vlmoe-tiny", ME_KEY_LIST, "qwen3vlmoe.rope.dimension_sections", UINT32_MAX,
	     BG_ERR_UNSUPPORTED, "[-1, -1, -1, -1] is not supported"},
	    {"qwen3vl-tiny", ME_KEY, "qwen3vl.rope.dimension_count", 16, BG_ERR_UNSUPPORTED,
	     "qwen3vl.rope.dimension_count 16 differs from the head size 32"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* glm4moe: the leading dense layer and the MoE ones (selection bias, shared expert), the
 * routing keys as read (sigmoid, norm, scale 2.5), the Q/K norms blk.0 decides, the NextN
 * layer skipped; the released sizes' parameter counts (synth.c derives them); refusals. */
static void test_glm4moe(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("glm4moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l2 = &m->layers[2];
		const struct gguf_tensor *pn =
		    gguf_find_tensor(m->gguf, "blk.2.post_attention_norm.weight");
		CHECK(hp->rope_neox && hp->rope_dim == 16 && hp->head_dim == 32 && hp->qk_norm &&
			  hp->qkv_bias && !hp->post_norms && hp->n_layer == 3 &&
			  hp->n_layer_nextn == 1 && hp->n_expert == 8 && hp->n_expert_used == 2 &&
			  hp->n_ff_exp == 32 && hp->n_expert_shared == 1 &&
			  hp->n_layer_dense_lead == 1 && hp->expert_gating_sigmoid &&
			  hp->expert_weights_norm && hp->expert_weights_scale == 2.5f,
		      "glm4moe-tiny hparams");
		CHECK(!l0->ffn_gate_inp.data && l0->w_gate.ne1 == 128 && l0->w_down.ne0 == 128 &&
			  l2->ffn_gate_inp.ne1 == 8 && l2->exp_probs_b.ne0 == 8 &&
			  l2->gate_shexp.ne1 == 32 && l2->down_shexp.ne0 == 32 && !l2->w_gate.data,
		      "glm4moe: layer 0 dense, layer 2 routed with its bias and shared expert");
		CHECK(pn && l2->ffn_norm.data == pn->data, "glm4moe: the FFN norm is "
							     "post_attention_norm.weight");
		CHECK(gguf_find_tensor(m->gguf, "blk.3.nextn.eh_proj.weight") &&
			  m->n_params == synth_n_params(synth_find_shape("glm4moe-tiny"), false),
		      "glm4moe-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	/* without the key llama.cpp's default: sigmoid; without expert_weights_norm: false */
	CHECK(moe_rewrite("glm4moe-tiny", ME_KEY, "glm4moe.expert_gating_func", UINT32_MAX, &m,
			  &err) == BG_OK,
	      "%s", err.msg);
	if (m) {
		CHECK(m->hp.expert_gating_sigmoid, "glm4moe: sigmoid when the key is absent");
		model_free(m);
		m = NULL;
	}
	static const struct {
		const char *shape;
		uint64_t n;
	} sizes[] = {{"glm4.5-air", 106852251264ull}, {"glm4.5", 352797829024ull}};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		char spec[64];
		snprintf(spec, sizeof spec, "synthetic:%s", sizes[i].shape);
		CHECK(model_open(spec, true, &m, &err) == BG_OK, "%s", err.msg);
		if (m) {
			uint64_t n = synth_n_params(synth_find_shape(sizes[i].shape), false);
			CHECK(m->n_params == sizes[i].n && n == m->n_params,
			      "lazy %s: n_params %llu", sizes[i].shape,
			      (unsigned long long)m->n_params);
		}
		model_free(m);
		m = NULL;
	}
	static const struct refusal bad[] = {
	    {"glm4moe-tiny", ME_DROP, "blk.1.exp_probs_b.bias", 0, BG_ERR_FORMAT,
	     "'blk.1.exp_probs_b.bias' is missing"},
	    {"glm4moe-tiny", ME_DROP, "blk.2.ffn_down_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.ffn_down_shexp.weight' is missing"},
	    {"glm4moe-tiny", ME_KEY, "glm4moe.expert_shared_count", UINT32_MAX, BG_ERR_FORMAT,
	     "expert_shared_count"},
	    {"glm4moe-tiny", ME_KEY, "glm4moe.expert_gating_func", 3, BG_ERR_UNSUPPORTED,
	     "glm4moe.expert_gating_func is 3"},
	    /* softmax with the selection bias and scale: no released model; refused */
	    {"glm4moe-tiny", ME_KEY, "glm4moe.expert_gating_func", 1, BG_ERR_UNSUPPORTED,
	     "glm4moe.expert_gating_func is 1"},
	    {"glm4moe-tiny", ME_KEY, "glm4moe.leading_dense_block_count", 0, BG_ERR_FORMAT,
	     "'blk.0.ffn_gate_inp.weight' is missing"},
	    {"glm4moe-tiny", ME_ADD, "blk.0.ffn_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_norm.weight' is not part of a glm4moe model"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* minimax-m2: whole-row Q/K norms, partial NeoX RoPE, every layer routed with sigmoid gating
 * and its selection bias, no shared expert; the released size's parameter count (derived in
 * synth.c's comment from the configuration); refusals. */
static void test_minimax(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("minimax-m2-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		bool layers = true;
		for (uint32_t l = 0; l < hp->n_layer; l++) {
			const struct model_layer *L = &m->layers[l];
			layers = layers && L->q_norm.ne0 == 128 && L->k_norm.ne0 == 64 &&
				 L->exp_probs_b.ne0 == 8 && L->exp_probs_b.data &&
				 L->ffn_gate_inp.ne1 == 8 && !L->gate_shexp.data && !L->w_gate.data;
		}
		CHECK(hp->rope_neox && hp->rope_dim == 16 && hp->head_dim == 32 && hp->qk_norm &&
			  hp->qk_norm_full && !hp->qkv_bias && hp->n_expert == 8 &&
			  hp->n_expert_used == 2 && hp->n_ff_exp == 32 && !hp->n_expert_shared &&
			  !hp->n_layer_dense_lead && hp->expert_gating_sigmoid &&
			  hp->moe_sel_bias && hp->expert_weights_norm &&
			  hp->expert_weights_scale == 1.0f && layers &&
			  m->output.data != m->tok_embd.data &&
			  m->n_params == synth_n_params(synth_find_shape("minimax-m2-tiny"), false),
		      "minimax-m2-tiny hparams and layers");
		model_free(m);
		m = NULL;
	}
	CHECK(model_open("synthetic:minimax-m2", true, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(m->n_params == 228689764864ull &&
			  synth_n_params(synth_find_shape("minimax-m2"), false) == m->n_params &&
			  m->hp.rope_dim == 64 && m->hp.head_dim == 128,
		      "lazy minimax-m2: n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	static const struct refusal bad[] = {
	    {"minimax-m2-tiny", ME_DROP, "blk.1.exp_probs_b.bias", 0, BG_ERR_FORMAT,
	     "'blk.1.exp_probs_b.bias' is missing"},
	    {"minimax-m2-tiny", ME_KEY, "minimax-m2.expert_gating_func", UINT32_MAX, BG_ERR_FORMAT,
	     "minimax-m2.expert_gating_func is missing"},
	    {"minimax-m2-tiny", ME_KEY, "minimax-m2.expert_gating_func", 1, BG_ERR_UNSUPPORTED,
	     "minimax-m2.expert_gating_func is 1"},
	    {"minimax-m2-tiny", ME_KEY, "minimax-m2.expert_feed_forward_length", 64, BG_ERR_FORMAT,
	     "differs from feed_forward_length"},
	    {"minimax-m2-tiny", ME_KEY, "minimax-m2.expert_shared_count", 1, BG_ERR_UNSUPPORTED,
	     "has no shared experts"},
	    {"minimax-m2-tiny", ME_DROP, "blk.0.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.attn_k_norm.weight' is missing"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* deepseek2: the MLA keys and weights as read (the cache row kv_lora + rope, one K/V head,
 * value_length kv_lora accepted), the attention scale (hand-derived below), the grouped
 * routing's keys, q_lora 0's plain attn_q, the released sizes' parameter counts (synth.c
 * derives them from each config.json); refusals. */
static void test_deepseek2(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("deepseek2-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l2 = &m->layers[2];
		/* YaRN factor 4, mscale_all_dim 0.707 (the file's 0.0707 / 0.1): mscale = 1 +
		 * 0.1 * 0.707 * ln 4 = 1.0980..., scale = mscale^2 / sqrt(32 + 16) */
		const double ms = 1.0 + 0.1 * 0.707 * log(4.0);
		CHECK(hp->mla && hp->head_dim == 48 && hp->n_head_kv == 1 && hp->rope_dim == 16 &&
			  !hp->rope_neox && hp->n_lora_q == 32 && hp->n_lora_kv == 32 &&
			  hp->mla_nope == 32 && hp->mla_v_head == 16 && hp->rope_yarn &&
			  fabsf(hp->rope_yarn_log_mul - 0.707f) < 1e-6f && hp->moe_grouped &&
			  hp->n_expert_groups == 4 && hp->n_group_used == 2 &&
			  hp->expert_gating_sigmoid && hp->expert_weights_norm &&
			  hp->expert_weights_scale == 2.5f && hp->n_expert_shared == 1 &&
			  hp->n_layer_dense_lead == 1,
		      "deepseek2-tiny hparams");
		CHECK(fabs(hp->attn_scale - ms * ms / sqrt(48.0)) < 1e-6,
		      "deepseek2 scale %g vs %g", (double)hp->attn_scale, ms * ms / sqrt(48.0));
		CHECK(l0->wq_a.ne1 == 32 && l0->q_a_norm.ne0 == 32 && l0->wq_b.ne1 == 4 * 48 &&
			  l0->wkv_a.ne1 == 48 && l0->kv_a_norm.ne0 == 32 && l0->wk_b.ne0 == 32 &&
			  l0->wk_b.ne1 == 32 && l0->wk_b.ne2 == 4 && l0->wv_b.ne0 == 32 &&
			  l0->wv_b.ne1 == 16 && l0->wv_b.ne2 == 4 && l0->wo.ne0 == 64 &&
			  !l0->wq.data && !l0->wk.data && !l0->wv.data && !l0->ffn_gate_inp.data &&
			  l2->exp_probs_b.ne0 == 8 && l2->gate_shexp.ne1 == 32,
		      "deepseek2-tiny layers");
		CHECK(m->n_params == synth_n_params(synth_find_shape("deepseek2-tiny"), false),
		      "deepseek2-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	CHECK(moe_rewrite("deepseek2-lite-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) { /* no YaRN: 1/sqrt(48); softmax without norm, scale or selection bias */
		const struct model_hparams *hp = &m->hp;
		CHECK(hp->n_lora_q == 0 && m->layers[0].wq.ne1 == 4 * 48 &&
			  !m->layers[0].wq_a.data && hp->attn_scale == 1.0f / sqrtf(48.0f) &&
			  !hp->expert_gating_sigmoid && !hp->expert_weights_norm &&
			  hp->expert_weights_scale == 1.0f && !m->layers[1].exp_probs_b.data &&
			  hp->n_expert_shared == 2 && hp->n_expert_groups == 2 &&
			  hp->n_group_used == 1 &&
			  m->n_params ==
			      synth_n_params(synth_find_shape("deepseek2-lite-tiny"), false),
		      "deepseek2-lite-tiny hparams");
		model_free(m);
		m = NULL;
	}
	/* without expert_gating_func: softmax (llama.cpp's default for V2 files) */
	CHECK(moe_rewrite("deepseek2-tiny", ME_KEY, "deepseek2.expert_gating_func", UINT32_MAX, &m,
			  &err) == BG_OK,
	      "%s", err.msg);
	if (m) {
		CHECK(!m->hp.expert_gating_sigmoid, "deepseek2: softmax when the key is absent");
		model_free(m);
		m = NULL;
	}
	static const struct {
		const char *shape;
		uint64_t n;
	} sizes[] = {{"deepseek-v2-lite", 15706484224ull},
		     {"deepseek-v3", 671026419200ull},
		     {"kimi-k2", 1026408232448ull},
		     {"glm-4.7-flash", 29943393920ull}};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		char spec[64];
		snprintf(spec, sizeof spec, "synthetic:%s", sizes[i].shape);
		CHECK(model_open(spec, true, &m, &err) == BG_OK, "%s", err.msg);
		if (m) {
			uint64_t n = synth_n_params(synth_find_shape(sizes[i].shape), false);
			CHECK(m->n_params == sizes[i].n && n == m->n_params && m->hp.mla,
			      "lazy %s: n_params %llu", sizes[i].shape,
			      (unsigned long long)m->n_params);
		}
		model_free(m);
		m = NULL;
	}
	static const struct refusal bad[] = {
	    /* an older conversion: attn_kv_b, no MLA lengths */
	    {"deepseek2-tiny", ME_KEY, "deepseek2.attention.key_length_mla", UINT32_MAX,
	     BG_ERR_UNSUPPORTED, "an older deepseek2 conversion (attn_kv_b"},
	    {"deepseek2-tiny", ME_ADD, "blk.0.attn_kv_b.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_kv_b.weight': the unsplit attn_kv_b"},
	    {"deepseek2-tiny", ME_KEY, "deepseek2.attention.q_lora_rank", UINT32_MAX, BG_ERR_FORMAT,
	     "deepseek2.attention.q_lora_rank is missing"},
	    {"deepseek2-tiny", ME_KEY, "deepseek2.attention.key_length", 64, BG_ERR_FORMAT,
	     "key_length = kv_lora_rank + rope.dimension_count (48)"},
	    {"deepseek2-tiny", ME_KEY, "deepseek2.attention.head_count_kv", 4, BG_ERR_FORMAT,
	     "head_count_kv 1"},
	    {"deepseek2-tiny", ME_DROP, "blk.1.attn_v_b.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_v_b.weight' is missing"},
	    {"deepseek2-tiny", ME_RESHAPE, "blk.1.attn_k_b.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_k_b.weight' has shape"},
	    {"deepseek2-tiny", ME_DROP, "blk.2.ffn_up_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.ffn_up_shexp.weight' is missing"},
	    {"deepseek2-tiny", ME_KEY, "deepseek2.expert_gating_func", 3, BG_ERR_UNSUPPORTED,
	     "deepseek2.expert_gating_func is 3"},
	    {"deepseek2-tiny", ME_KEY, "deepseek2.expert_group_count", 3, BG_ERR_FORMAT,
	     "expert_group_count 3 / expert_group_used_count 2 do not fit 8 experts"},
	    {"deepseek2-tiny", ME_KEY, "deepseek2.expert_group_used_count", 4, BG_ERR_FORMAT,
	     "expert_group_used_count 4 do not fit"},
	    {"deepseek2-tiny", ME_KEY_F32, "deepseek2.attention.temperature_scale", 100,
	     BG_ERR_UNSUPPORTED, "temperature_scale (Mistral Large 3's"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* gemma4: the two kinds of layer's geometry, V = K where attn_v is absent, the layer output
 * scales, the lazy 31B's parameter count, and the refusals (per-layer embeddings, shared
 * KV, experts) */
static void test_gemma4(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("gemma4-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		CHECK(hp->head_dim == 32 && hp->head_dim_swa == 16 && hp->n_head_kv == 1 &&
			  hp->n_head_kv_swa == 2 && hp->rope_dim == 32 && hp->rope_dim_swa == 16 &&
			  hp->attn_scale == 1.0f && hp->v_norm && hp->out_scale &&
			  hp->rope_factors_global && strcmp(hp->rope_factors, "rope_freqs") == 0 &&
			  hp->final_softcap == 30.0f && hp->n_swa == 16 && hp->swa_pattern == 3 &&
			  hp->rope_base_swa == 10000.0f && hp->rope_base == 1e6f &&
			  hp->embd_scale == 8.0f && hp->gelu && hp->post_norms && hp->qk_norm,
		      "gemma4-tiny hparams");
		CHECK(L[0].swa && L[1].swa && !L[2].swa && L[3].swa && !L[5].swa &&
			  L[0].wq.ne1 == 64 && L[0].wk.ne1 == 32 && L[0].q_norm.ne0 == 16 &&
			  L[2].wq.ne1 == 128 && L[2].wk.ne1 == 32 && L[2].wo.ne0 == 128 &&
			  L[2].k_norm.ne0 == 32 && !L[0].v_from_k && L[0].wv.data != L[0].wk.data &&
			  L[2].v_from_k && L[2].wv.data == L[2].wk.data && L[5].v_from_k,
		      "gemma4-tiny layers: windowed 16 x 2 K/V heads, global 32 x 1 with V = K");
		bool scales = true;
		for (uint32_t l = 0; l < hp->n_layer; l++)
			scales = scales && isfinite(L[l].out_scale) && L[l].out_scale != 1.0f &&
				 fabsf(L[l].out_scale - 1.0f) < 1.5f;
		CHECK(scales, "gemma4-tiny: each layer's output scale read (1 + N(0, 0.25^2))");
		CHECK(m->n_params == synth_n_params(synth_find_shape("gemma4-tiny"), false),
		      "gemma4-tiny n_params %llu", (unsigned long long)m->n_params);
		CHECK(model_head_dim_max(hp) == 32 && model_kv_dim_max(hp) == 32 &&
			  model_q_dim_max(hp) == 128,
		      "gemma4-tiny: the largest head, K/V row and Q row");
	}
	model_free(m);
	m = NULL;
	/* any layer's attn_v may be absent (V = K there) */
	CHECK(moe_rewrite("gemma4-tiny", ME_DROP, "blk.0.attn_v.weight", 0, &m, &err) == BG_OK &&
		  m && m->layers[0].v_from_k && !m->layers[1].v_from_k,
	      "gemma4 without blk.0.attn_v: %s", err.msg);
	model_free(m);
	m = NULL;
	/* the 31B as published (synth.c's comment derives 30,697,345,596 by hand) */
	CHECK(model_open("synthetic:gemma4-31b", true, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		CHECK(m->n_params == 30697345596ull &&
			  synth_n_params(synth_find_shape("gemma4-31b"), true) == m->n_params &&
			  m->layers[5].v_from_k && !m->layers[4].v_from_k &&
			  m->layers[5].wq.ne1 == 16384 && m->layers[4].wk.ne1 == 4096 &&
			  m->layers[59].wk.ne1 == 2048 && m->hp.final_softcap == 30.0f &&
			  m->hp.rope_base_swa == 10000.0f && m->hp.swa_pattern == 6,
		      "lazy gemma4-31b: n_params %llu", (unsigned long long)m->n_params);
	}
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    {"gemma4-tiny", ME_KEY, "gemma4.embedding_length_per_layer_input", 256, BG_ERR_FORMAT,
	     "'per_layer_token_embd.weight' is missing"},
	    {"gemma4-e-tiny", ME_DROP, "blk.2.proj.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.proj.weight' is missing"},
	    {"gemma4-tiny", ME_KEY, "gemma4.attention.shared_kv_layers", 2, BG_ERR_UNSUPPORTED,
	     "shared_kv_layers is 2 of 6 layers: the layers they would read"},
	    {"gemma4-tiny", ME_KEY, "gemma4.attention.shared_kv_layers", 6, BG_ERR_UNSUPPORTED,
	     "shared_kv_layers is 6 of 6 layers"},
	    {"gemma4-e-tiny", ME_ADD, "blk.4.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.4.attn_k_norm.weight' has shape [64], expected [16]"},
	    {"gemma2-tiny", ME_KEY_LIST, "gemma2.feed_forward_length", 128, BG_ERR_UNSUPPORTED,
	     "gemma2.feed_forward_length is a per-layer list"},
	    /* experts without a count in use (gemma4-moe-tiny: the MoE files) */
	    {"gemma4-tiny", ME_KEY, "gemma4.expert_count", 8, BG_ERR_FORMAT,
	     "gemma4.expert_used_count"},
	    {"gemma4-tiny", ME_ADD, "blk.0.ffn_gate_inp.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_gate_inp.weight' is not part of a gemma4"},
	    {"gemma4-tiny", ME_DROP, "blk.3.layer_output_scale.weight", 0, BG_ERR_FORMAT,
	     "'blk.3.layer_output_scale.weight' is missing"},
	    {"gemma4-tiny", ME_HALVE, "blk.2.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.attn_k_norm.weight' has shape [16], expected [32]"},
	    {"gemma4-tiny", ME_KEY, "gemma4.attention.key_length_swa", 24, BG_ERR_UNSUPPORTED,
	     "value_length_swa 16 differs from key_length_swa 24"},
	    {"gemma4-tiny", ME_KEY, "gemma4.rope.dimension_count_swa", 18, BG_ERR_FORMAT,
	     "rope.dimension_count_swa 18 is not an even number in [2, the windowed head"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
	/* E2B/E4B's features (gemma4-e-tiny): per-layer embeddings of 32, layers 3-5 sharing */
	CHECK(moe_rewrite("gemma4-e-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		CHECK(hp->n_embd_per_layer == 32 && hp->n_layer_kv == 3 &&
			  model_n_layer_kv(hp) == 3 && m->pl_tok_embd.ne0 == 192 &&
			  m->pl_tok_embd.ne1 == 512 && m->pl_model_proj.ne1 == 192 &&
			  m->pl_proj_norm.ne0 == 32 && L[0].pl_inp_gate.ne1 == 32 &&
			  L[5].pl_proj.ne0 == 32 && L[5].pl_post_norm.ne0 == 64,
		      "gemma4-e-tiny: per-layer embeddings");
		CHECK(hp->n_ff == 256 && L[2].w_gate.ne1 == 128 && L[3].w_up.ne1 == 256 &&
			  L[5].w_down.ne0 == 256 && L[0].w_down.ne0 == 128,
		      "gemma4-e-tiny: FFN widths per layer (128, the shared layers 256)");
		CHECK(model_kv_layer(hp, &L[2], 2) == 2 && model_kv_layer(hp, &L[3], 3) == 1 &&
			  model_kv_layer(hp, &L[4], 4) == 1 && model_kv_layer(hp, &L[5], 5) == 2 &&
			  !L[3].wk.ne0 && !L[5].wv.ne0 && !L[4].k_norm.ne0 && L[4].q_norm.ne0 == 16,
		      "gemma4-e-tiny: layers 3, 4 read layer 1's KV, 5 reads layer 2's");
		CHECK(m->n_params == synth_n_params(synth_find_shape("gemma4-e-tiny"), false),
		      "gemma4-e-tiny n_params %llu vs %llu", (unsigned long long)m->n_params,
		      (unsigned long long)synth_n_params(synth_find_shape("gemma4-e-tiny"), false));
	}
	model_free(m);
	m = NULL;
	CHECK(model_open("synthetic:gemma4-e-tiny", true, &m, &err) == BG_ERR_UNSUPPORTED &&
		  has(&err, "files only"),
	      "lazy gemma4-e-tiny refused: %s", err.msg);
	model_free(m);
}

/* gemma4 with experts (26B-A4B; model.h's gemma4_moe), gemma4-moe-tiny: layer 0 dense (no
 * router), layers 1-2 the dense FFN of 128 beside 4 experts of 32 with the router's scale,
 * the three norms and the per-expert down scales; the parameter count by hand: the same
 * shape without experts plus, per MoE layer, router 64 x 4, 4 vectors of 64, experts
 * 3 x 64 x 32 x 4 and 4 scales. The down scales are optional (llama.cpp's loader); the rest
 * is required. -gu: ffn_gate_up_exps [64, 64, 4] read in place, expert e's gate row r at
 * the file's row e * 64 + r and its up row at e * 64 + 32 + r (deepseek2-gu-tiny likewise,
 * [64, 64, 8]). */
static void test_gemma4_moe(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("gemma4-moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		struct synth_shape dense = *synth_find_shape("gemma4-moe-tiny");
		dense.n_expert = dense.n_expert_used = dense.n_ff_exp = dense.n_dense_lead = 0;
		CHECK(hp->gemma4_moe && hp->n_expert == 4 && hp->n_expert_used == 2 &&
			  hp->n_ff_exp == 32 && hp->expert_weights_norm &&
			  !hp->expert_gating_sigmoid && hp->expert_weights_scale == 1.0f &&
			  hp->gelu && !model_layer_moe(&L[0]) && L[0].w_gate.ne1 == 128 &&
			  !L[0].ffn_pre_norm_2.data && model_layer_moe(&L[1]) &&
			  model_layer_moe(&L[2]) && L[1].ffn_gate_inp.ne1 == 4 &&
			  L[2].w_gate.ne1 == 128 && L[2].w_down.ne0 == 128 &&
			  L[1].gate_exps.ne1 == 32 && L[1].down_exps.ne2 == 4 &&
			  L[1].gate_inp_s.ne0 == 64 && L[1].ffn_pre_norm_2.ne0 == 64 &&
			  L[2].ffn_post_norm_1.ne0 == 64 && L[2].ffn_post_norm_2.ne0 == 64 &&
			  L[2].down_exps_s.ne0 == 4 && L[2].ffn_post_norm.data,
		      "gemma4-moe-tiny hparams and layers");
		const uint64_t moe = 64 * 4 + 4 * 64 + 3 * 64 * 32 * 4 + 4;
		CHECK(m->n_params == synth_n_params(&dense, false) + 2 * moe &&
			  m->n_params ==
			      synth_n_params(synth_find_shape("gemma4-moe-tiny"), false),
		      "gemma4-moe-tiny n_params %llu", (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	CHECK(moe_rewrite("gemma4-moe-tiny", ME_DROP, "blk.1.ffn_down_exps.scale", 0, &m,
			  &err) == BG_OK &&
		  !m->layers[1].down_exps_s.data && m->layers[2].down_exps_s.data,
	      "gemma4-moe-tiny without blk.1's down scales (optional): %s", err.msg);
	model_free(m);
	m = NULL;
	static const char *const gu[2] = {"gemma4-moe-gu-tiny", "deepseek2-gu-tiny"};
	for (int k = 0; k < 2; k++) {
		CHECK(moe_rewrite(gu[k], ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
		if (!m)
			continue;
		const uint32_t X = m->hp.n_expert;
		const struct gguf_tensor *t =
		    gguf_find_tensor(m->gguf, "blk.2.ffn_gate_up_exps.weight");
		const struct model_layer *l2 = &m->layers[2];
		int bad = t && t->nbytes == 64ull * 64 * X * 4 ? 0 : -1;
		for (uint32_t e = 0; bad >= 0 && e < X; e++)
			for (uint32_t r = 0; r < 32; r++) {
				const char *fg = (const char *)t->data + ((e * 64 + r) * 64) * 4;
				const char *fu = (const char *)t->data + ((e * 64 + 32 + r) * 64) * 4;
				bad += (const char *)model_expert(&l2->gate_exps, e).data + r * 64 * 4 !=
				       fg;
				bad += (const char *)model_expert(&l2->up_exps, e).data + r * 64 * 4 !=
				       fu;
			}
		CHECK(bad == 0 && l2->up_exps.ne1 == 32 && m->n_owned == 0 &&
			  m->n_params == synth_n_params(synth_find_shape(gu[k]), false),
		      "%s: %d rows elsewhere, n_params %llu", gu[k], bad,
		      (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	CHECK(model_open("synthetic:gemma4-moe-tiny", true, &m, &err) == BG_ERR_UNSUPPORTED &&
		  has(&err, "gemma4 with experts is made as a file only"),
	      "lazy gemma4-moe-tiny refused: %s", err.msg);
	model_free(m);
	static const struct refusal bad[] = {
	    {"gemma4-moe-tiny", ME_DROP, "blk.1.pre_ffw_norm_2.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.pre_ffw_norm_2.weight' is missing"},
	    {"gemma4-moe-tiny", ME_DROP, "blk.2.post_ffw_norm_1.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.post_ffw_norm_1.weight' is missing"},
	    {"gemma4-moe-tiny", ME_DROP, "blk.2.ffn_gate_inp.scale", 0, BG_ERR_FORMAT,
	     "'blk.2.ffn_gate_inp.scale' is missing"},
	    /* the dense FFN beside the experts is required */
	    {"gemma4-moe-tiny", ME_DROP, "blk.1.ffn_down.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_down.weight' is missing"},
	    {"gemma4-moe-tiny", ME_HALVE, "blk.1.ffn_down_exps.scale", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_down_exps.scale' has shape [2], expected [4]"},
	    {"gemma4-moe-tiny", ME_KEY_LIST, "gemma4.expert_feed_forward_length", 32,
	     BG_ERR_UNSUPPORTED, "gemma4.expert_feed_forward_length is a per-layer list"},
	    {"gemma4-moe-gu-tiny", ME_ADD, "blk.2.ffn_up_exps.weight", 0, BG_ERR_FORMAT,
	     "blk.2 has both ffn_gate_up_exps and the separate 'blk.2.ffn_up_exps.weight'"},
	    {"deepseek2-gu-tiny", ME_ADD, "blk.1.ffn_gate_exps.weight", 0, BG_ERR_FORMAT,
	     "blk.1 has both ffn_gate_up_exps and the separate 'blk.1.ffn_gate_exps.weight'"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* A lazy synthetic model (no file: model.c's lazy_model) has the hyper-parameters and
 * per-layer flags the loader reads from the same shape's file: granite's scales,
 * mistral3's temperature, attn_factor and biases, smollm3's unrotated layers, seed_oss's
 * biases, apertus's missing gate and xIELU values. */
/* exaone4 (arch.h): olmo2's norm placement with per-head Q/K norms; windows only in a
 * 64-layer file, where every 4th layer is global and not rotated (llama.cpp's
 * load_swa_pattern(4) and use_rope); below 64 layers the window keys are not read (a
 * pattern llama.cpp would not take is ignored too) and every layer rotates; the released
 * sizes' parameter counts by hand (the model cards' 1.07B and 30.95B without embeddings). */
static void test_exaone4(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("exaone4-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		bool rot = true;
		for (uint32_t l = 0; l < hp->n_layer; l++)
			rot = rot && !m->layers[l].swa && !m->layers[l].no_rope;
		CHECK(hp->no_pre_norms && hp->qk_norm && !hp->qk_norm_full && !hp->qk_norm_heads &&
			  hp->post_norms && hp->rope_neox && hp->n_swa == 0 &&
			  hp->n_swa_file == 16 && rot && m->rope_factors.ne0 == 8 &&
			  m->output.data == m->tok_embd.data,
		      "exaone4-tiny: no windows, every layer rotated, rope_freqs, tied");
		const struct model_layer *l1 = &m->layers[1];
		CHECK(!l1->attn_norm.ne0 && !l1->ffn_norm.ne0 && l1->q_norm.ne0 == 16 &&
			  l1->k_norm.ne0 == 16 && l1->attn_post_norm.ne0 == 64 &&
			  l1->ffn_post_norm.ne0 == 64,
		      "exaone4-tiny layer shapes");
	}
	model_free(m);
	m = NULL;
	/* the window keys below 64 layers: a pattern list that repeats nothing still loads */
	CHECK(moe_rewrite("exaone4-tiny", ME_BOOLS, "exaone4.attention.sliding_window_pattern", 0x9,
			  &m, &err) == BG_OK &&
		  m->hp.n_swa == 0 && !m->layers[3].no_rope,
	      "exaone4-tiny with an odd pattern list: %s", err.msg);
	model_free(m);
	m = NULL;
	/* 64 layers: l % 4 < 3 windowed (16) and rotated with the global base, the others
	 * global without RoPE */
	CHECK(moe_rewrite("exaone4-swa-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		bool ok = hp->n_swa == 16 && hp->swa_pattern == 4 && hp->n_layer == 64 &&
			  hp->rope_base_swa == hp->rope_base &&
			  hp->rope_freq_scale_swa == hp->rope_freq_scale &&
			  !hp->rope_factors_global;
		for (uint32_t l = 0; l < hp->n_layer; l++)
			ok = ok && m->layers[l].swa == (l % 4 < 3) &&
			     m->layers[l].no_rope == (l % 4 == 3);
		CHECK(ok, "exaone4-swa-tiny: windows and NoPE layers");
	}
	model_free(m);
	m = NULL;
	/* a period instead of the list (2: even layers windowed), the window's default 4096 */
	CHECK(moe_rewrite("exaone4-swa-tiny", ME_KEY, "exaone4.attention.sliding_window_pattern", 2,
			  &m, &err) == BG_OK &&
		  m->hp.swa_pattern == 2 && m->layers[0].swa && !m->layers[1].swa &&
		  m->layers[1].no_rope && !m->layers[62].no_rope,
	      "exaone4-swa-tiny with period 2: %s", err.msg);
	model_free(m);
	m = NULL;
	CHECK(moe_rewrite("exaone4-swa-tiny", ME_KEY, "exaone4.attention.sliding_window",
			  UINT32_MAX, &m, &err) == BG_OK &&
		  m->hp.n_swa == 4096 && m->layers[3].no_rope,
	      "exaone4-swa-tiny without a window key: %s", err.msg);
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    {"exaone4-swa-tiny", ME_KEY, "exaone4.attention.sliding_window", 0, BG_ERR_FORMAT,
	     "sliding_window is 0 in a 64-layer exaone4 file"},
	    {"exaone4-tiny", ME_ADD, "blk.0.attn_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_norm.weight' is not part of a exaone4"},
	    {"exaone4-tiny", ME_DROP, "blk.2.post_ffw_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.post_ffw_norm.weight' is missing"},
	    {"exaone4-tiny", ME_HALVE, "blk.1.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_k_norm.weight' has shape [8], expected [16]"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
	/* EXAONE-4.0-1.2B: 102400 x 2048 (tied) + 2048 + 30 x (2 x 2048^2 + 2 x 2048 x 512 +
	 * 2 x 64 + 2 x 2048 + 3 x 2048 x 4096 = 35,655,808); 32B: 2 x 102400 x 5120 + 5120 +
	 * 64 x (2 x 5120^2 + 2 x 5120 x 1024 + 2 x 128 + 2 x 5120 + 3 x 5120 x 27392 =
	 * 483,666,176) */
	static const struct {
		const char *spec;
		uint64_t n;
	} sizes[] = {{"synthetic:exaone4-1.2b", 1279391488ull},
		     {"synthetic:exaone4-32b", 32003216384ull}};
	for (int i = 0; i < 2; i++) {
		CHECK(model_open(sizes[i].spec, true, &m, &err) == BG_OK, "%s", err.msg);
		CHECK(m && m->n_params == sizes[i].n &&
			  (i == 0 ? m->hp.n_swa == 0 : m->hp.n_swa == 4096),
		      "%s: n_params %llu", sizes[i].spec,
		      m ? (unsigned long long)m->n_params : 0ull);
		model_free(m);
		m = NULL;
	}
}

/* olmoe (arch.h): whole-row Q/K norms, softmax routing whose chosen weights are not
 * renormalized, experts feed_forward_length wide; GQA refused (llama.cpp's K norm is
 * n_embd wide); OLMoE-1B-7B's parameter count by hand. */
static void test_olmoe(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("olmoe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		CHECK(hp->qk_norm && hp->qk_norm_full && !hp->no_pre_norms && !hp->post_norms &&
			  hp->rope_neox && hp->n_expert == 8 && hp->n_expert_used == 4 &&
			  hp->n_ff_exp == 64 && !hp->expert_weights_norm &&
			  hp->expert_weights_scale == 1.0f && !hp->expert_gating_sigmoid &&
			  !hp->n_expert_shared && m->layers[1].q_norm.ne0 == 64 &&
			  m->layers[1].k_norm.ne0 == 64 && m->layers[1].attn_norm.ne0 == 64,
		      "olmoe-tiny hparams");
	}
	model_free(m);
	m = NULL;
	static const struct refusal bad[] = {
	    {"olmoe-tiny", ME_KEY, "olmoe.attention.head_count_kv", 2, BG_ERR_UNSUPPORTED,
	     "llama.cpp's olmoe takes n_head_kv = n_head"},
	    {"olmoe-tiny", ME_KEY, "olmoe.expert_count", UINT32_MAX, BG_ERR_FORMAT,
	     "a olmoe model has experts"},
	    {"olmoe-tiny", ME_HALVE, "blk.0.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.attn_k_norm.weight' has shape [32], expected [64]"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
	/* OLMoE-1B-7B: 2 x 50304 x 2048 (untied) + 2048 + 16 x (4 x 2048^2 + 4 x 2048 (norms) +
	 * 2048 x 64 (router) + 3 x 2048 x 1024 x 64 = 419,569,664) */
	CHECK(model_open("synthetic:olmoe-1b-7b", true, &m, &err) == BG_OK, "%s", err.msg);
	CHECK(m && m->n_params == 6919161856ull, "olmoe-1b-7b: n_params %llu",
	      m ? (unsigned long long)m->n_params : 0ull);
	model_free(m);
}

/* bailingmoe2 (arch.h's bailing): fused attn_qkv viewed as Q/K/V, per-head Q/K norms,
 * partial NeoX RoPE, one dense layer, deepseek2's grouped sigmoid routing with the
 * selection bias (optional per layer), a shared expert of expert_shared_feed_forward_length
 * times expert_shared_count (as llama.cpp multiplies it), a NextN layer skipped; the keys
 * llama.cpp requires (expert_gating_func, expert_shared_count) and its n_embd-wide Q;
 * Ling-mini-2.0's parameter count by hand. */
static void test_bailingmoe2(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("bailingmoe2-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l1 = &m->layers[1];
		CHECK(hp->n_layer == 3 && hp->n_layer_nextn == 1 && hp->rope_neox &&
			  hp->rope_dim == 8 && hp->head_dim == 16 && hp->qk_norm &&
			  !hp->qk_norm_full && !hp->qkv_bias && hp->moe_grouped &&
			  hp->expert_gating_sigmoid && hp->moe_sel_bias &&
			  hp->expert_weights_norm && hp->expert_weights_scale == 2.5f &&
			  hp->n_expert_groups == 4 && hp->n_group_used == 2 &&
			  hp->n_expert_shared == 1 && model_ff_shexp(hp) == 32 &&
			  hp->n_layer_dense_lead == 1 && m->output.data != m->tok_embd.data,
		      "bailingmoe2-tiny hparams");
		CHECK(l0->wq.ne1 == 64 && l0->wk.ne1 == 32 && l0->wv.ne1 == 32 &&
			  l0->q_norm.ne0 == 16 && l0->k_norm.ne0 == 16 && l0->w_gate.ne1 == 128 &&
			  !l0->ffn_gate_inp.ne0 && l1->exp_probs_b.ne0 == 8 &&
			  l1->gate_shexp.ne1 == 32 && l1->ffn_norm.ne0 == 64 && !l1->w_gate.ne0,
		      "bailingmoe2-tiny layer shapes");
	}
	model_free(m);
	m = NULL;
	/* the selection bias is optional (llama.cpp: TENSOR_NOT_REQUIRED); softmax gating */
	CHECK(moe_rewrite("bailingmoe2-tiny", ME_DROP, "blk.2.exp_probs_b.bias", 0, &m, &err) ==
		      BG_OK &&
		  !m->layers[2].exp_probs_b.data && m->layers[1].exp_probs_b.data,
	      "bailingmoe2-tiny without blk.2's selection bias: %s", err.msg);
	model_free(m);
	m = NULL;
	CHECK(moe_rewrite("bailingmoe2-tiny", ME_KEY, "bailingmoe2.expert_gating_func", 1, &m,
			  &err) == BG_OK &&
		  !m->hp.expert_gating_sigmoid,
	      "bailingmoe2-tiny with softmax gating: %s", err.msg);
	model_free(m);
	m = NULL;
	/* without the shared width key: the experts' width x count (32) */
	CHECK(moe_rewrite("bailingmoe2-tiny", ME_KEY,
			  "bailingmoe2.expert_shared_feed_forward_length", UINT32_MAX, &m,
			  &err) == BG_OK &&
		  model_ff_shexp(&m->hp) == 32,
	      "bailingmoe2-tiny without expert_shared_feed_forward_length: %s", err.msg);
	model_free(m);
	static const struct refusal bad[] = {
	    {"bailingmoe2-tiny", ME_KEY, "bailingmoe2.expert_shared_feed_forward_length", 16,
	     BG_ERR_FORMAT, "'blk.1.ffn_gate_shexp.weight' has shape [64, 32], expected [64, 16]"},
	    {"bailingmoe2-tiny", ME_KEY, "bailingmoe2.expert_shared_count", 2, BG_ERR_FORMAT,
	     "'blk.1.ffn_gate_shexp.weight' has shape [64, 32], expected [64, 64]"},
	    {"bailingmoe2-tiny", ME_KEY, "bailingmoe2.expert_shared_count", UINT32_MAX,
	     BG_ERR_FORMAT, "expert_shared_count"},
	    {"bailingmoe2-tiny", ME_KEY, "bailingmoe2.expert_gating_func", UINT32_MAX,
	     BG_ERR_FORMAT, "bailingmoe2.expert_gating_func is missing"},
	    {"bailingmoe2-tiny", ME_KEY, "bailingmoe2.expert_gating_func", 3, BG_ERR_UNSUPPORTED,
	     "bailingmoe2.expert_gating_func is 3"},
	    {"bailingmoe2-tiny", ME_KEY, "bailingmoe2.expert_group_count", 3, BG_ERR_FORMAT,
	     "expert_group_count 3 / expert_group_used_count 2 do not fit 8 experts"},
	    {"bailingmoe2-tiny", ME_KEY, "bailingmoe2.attention.key_length", 32, BG_ERR_UNSUPPORTED,
	     "takes n_head x head_dim = n_embd only"},
	    {"bailingmoe2-tiny", ME_DROP, "blk.1.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_k_norm.weight' is missing"},
	    {"bailingmoe2-tiny", ME_DROP, "blk.2.ffn_up_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.ffn_up_shexp.weight' is missing"},
	    {"bailingmoe2-tiny", ME_KEY, "bailingmoe2.leading_dense_block_count", 2, BG_ERR_FORMAT,
	     "blk.1.ffn_gate.weight' is missing"},
	    {"bailingmoe2-tiny", ME_ADD, "blk.0.attn_q.bias", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_q.bias' is not part of a bailingmoe2"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
	/* Ling-mini-2.0: 2 x 157184 x 2048 (untied) + 2048 + 20 x (2048 x (2048 + 2 x 512) +
	 * 2048^2 + 2 x 2048 + 2 x 128 = 10,490,112) + the dense FFN 3 x 2048 x 5120 + 19 x
	 * (2048 x 256 (router) + 3 x 2048 x 512 x 256 + 256 (exp_probs_b) + 3 x 2048 x 512
	 * (shared) = 808,976,640): 16,255,643,392 (the model card's 16.26B) */
	m = NULL;
	CHECK(model_open("synthetic:ling-mini-2.0", true, &m, &err) == BG_OK, "%s", err.msg);
	CHECK(m && m->n_params == 16255643392ull && m->hp.n_expert_groups == 8,
	      "ling-mini-2.0: n_params %llu", m ? (unsigned long long)m->n_params : 0ull);
	model_free(m);
}

/* exaone, arcee, dots1 (arch.h): exaone's NeoX RoPE with rope_freqs, tied output;
 * arcee's interleaved RoPE and non-gated ReLU^2 FFN (no ffn_gate: relu2 without
 * nemotron_h's layers); dots1's per-head Q/K norms, one dense layer, bailingmoe2's routing
 * (moe_grouped, sigmoid, the optional selection bias, the scale) plus 2 shared experts as
 * wide as the experts each; the keys llama.cpp requires (the RMS eps, expert_gating_func,
 * expert_shared_count) and dots1's K/V heads. */
static void test_exaone_arcee_dots1(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("exaone-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		CHECK(hp->rope_neox && !hp->qk_norm && !hp->qkv_bias && !hp->relu2 &&
			  strcmp(hp->rope_factors, "rope_freqs") == 0 &&
			  m->output.data == m->tok_embd.data && m->layers[1].w_gate.ne1 == 128,
		      "exaone-tiny hparams");
	}
	model_free(m);
	m = NULL;
	CHECK(moe_rewrite("arcee-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l1 = &m->layers[1];
		CHECK(!hp->rope_neox && hp->relu2 && !hp->rope_none && hp->rope_yarn &&
			  !l1->ffn_only && !l1->no_ffn && !l1->no_rope && !l1->w_gate.ne0 &&
			  l1->w_up.ne1 == 128 && l1->ffn_norm.ne0 == 64,
		      "arcee-tiny hparams");
	}
	model_free(m);
	m = NULL;
	CHECK(moe_rewrite("dots1-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0], *l1 = &m->layers[1];
		CHECK(hp->rope_neox && hp->qk_norm && !hp->qk_norm_full && hp->moe_grouped &&
			  hp->expert_gating_sigmoid && hp->moe_sel_bias &&
			  hp->expert_weights_norm && hp->expert_weights_scale == 2.5f &&
			  hp->n_expert_groups == 0 && hp->n_expert_shared == 2 &&
			  model_ff_shexp(hp) == 64 && hp->n_layer_dense_lead == 1 &&
			  m->output.data != m->tok_embd.data,
		      "dots1-tiny hparams");
		CHECK(l0->wk.ne1 == 64 && l0->q_norm.ne0 == 16 && l0->w_gate.ne1 == 128 &&
			  !l0->ffn_gate_inp.ne0 && l1->exp_probs_b.ne0 == 8 &&
			  l1->gate_shexp.ne1 == 64 && !l1->w_gate.ne0,
		      "dots1-tiny layer shapes");
	}
	model_free(m);
	m = NULL;
	/* the selection bias optional; expert_shared_feed_forward_length not read for dots1 */
	CHECK(moe_rewrite("dots1-tiny", ME_DROP, "blk.2.exp_probs_b.bias", 0, &m, &err) == BG_OK &&
		  !m->layers[2].exp_probs_b.data && m->layers[1].exp_probs_b.data,
	      "dots1-tiny without blk.2's selection bias: %s", err.msg);
	model_free(m);
	m = NULL;
	CHECK(moe_rewrite("dots1-tiny", ME_KEY, "dots1.expert_shared_feed_forward_length", 16, &m,
			  &err) == BG_OK &&
		  model_ff_shexp(&m->hp) == 64,
	      "dots1-tiny with expert_shared_feed_forward_length 16: %s", err.msg);
	model_free(m);
	static const struct refusal bad[] = {
	    {"exaone-tiny", ME_KEY_F32, "exaone.attention.layer_norm_rms_epsilon", UINT32_MAX,
	     BG_ERR_FORMAT, "exaone.attention.layer_norm_rms_epsilon is missing"},
	    {"arcee-tiny", ME_KEY_F32, "arcee.attention.layer_norm_rms_epsilon", UINT32_MAX,
	     BG_ERR_FORMAT, "arcee.attention.layer_norm_rms_epsilon is missing"},
	    {"arcee-tiny", ME_DENSE, "", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_gate.weight' is not part of a arcee"},
	    {"exaone-tiny", ME_ADD, "blk.0.attn_output.bias", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_output.bias' is not part of a exaone"},
	    {"dots1-tiny", ME_KEY, "dots1.attention.head_count_kv", 2, BG_ERR_UNSUPPORTED,
	     "as many K/V heads as query heads only"},
	    {"dots1-tiny", ME_KEY, "dots1.expert_gating_func", UINT32_MAX, BG_ERR_FORMAT,
	     "dots1.expert_gating_func is missing"},
	    {"dots1-tiny", ME_KEY, "dots1.expert_shared_count", UINT32_MAX, BG_ERR_FORMAT,
	     "expert_shared_count"},
	    {"dots1-tiny", ME_KEY, "dots1.expert_count", UINT32_MAX, BG_ERR_FORMAT,
	     "a dots1 model has experts"},
	    {"dots1-tiny", ME_DROP, "blk.1.attn_q_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_q_norm.weight' is missing"},
	    {"dots1-tiny", ME_DROP, "blk.2.ffn_down_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.ffn_down_shexp.weight' is missing"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* exaone-moe (arch.h): windows of 16 on layers 0-2, rotated there only (layer 3 global,
 * no RoPE), per-head Q/K norms after pre-norms, one dense layer, bailingmoe2's routing plus
 * one shared expert of expert_shared_feed_forward_length (the experts' width without it;
 * expert_shared_count not used); the keys llama.cpp requires (sliding_window,
 * expert_gating_func). */
static void test_exaone_moe(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("exaone-moe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = m->layers;
		CHECK(hp->rope_neox && hp->qk_norm && hp->n_swa == 16 && hp->swa_pattern == 4 &&
			  L[0].swa && L[2].swa && !L[3].swa && !L[2].no_rope && L[3].no_rope &&
			  hp->moe_grouped && hp->expert_gating_sigmoid && hp->moe_sel_bias &&
			  hp->expert_weights_norm && hp->expert_weights_scale == 2.5f &&
			  hp->n_expert_shared == 1 && model_ff_shexp(hp) == 64 &&
			  hp->n_layer_dense_lead == 1 && L[0].w_gate.ne1 == 128 &&
			  L[3].gate_shexp.ne1 == 64 && L[1].ffn_norm.ne0 == 64,
		      "exaone-moe-tiny hparams and layers");
	}
	model_free(m);
	m = NULL;
	CHECK(moe_rewrite("exaone-moe-tiny", ME_KEY, "exaone-moe.expert_shared_count", 3, &m,
			  &err) == BG_OK &&
		  model_ff_shexp(&m->hp) == 64,
	      "exaone-moe-tiny with expert_shared_count 3: %s", err.msg);
	model_free(m);
	static const struct refusal bad[] = {
	    {"exaone-moe-tiny", ME_KEY, "exaone-moe.attention.sliding_window", UINT32_MAX,
	     BG_ERR_FORMAT, "exaone-moe.attention.sliding_window is missing"},
	    {"exaone-moe-tiny", ME_KEY, "exaone-moe.expert_gating_func", UINT32_MAX,
	     BG_ERR_FORMAT, "exaone-moe.expert_gating_func is missing"},
	    {"exaone-moe-tiny", ME_KEY, "exaone-moe.expert_shared_feed_forward_length",
	     UINT32_MAX, BG_ERR_FORMAT,
	     "'blk.1.ffn_gate_shexp.weight' has shape [64, 64], expected [64, 32]"},
	    {"exaone-moe-tiny", ME_DROP, "blk.2.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.attn_k_norm.weight' is missing"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* bailingmoe (arch.h): llama's attention (interleaved RoPE), every layer softmax-routed
 * experts (leading_dense_block_count read by llama.cpp and unused), renormalized and scaled,
 * plus shared experts of n_ff_exp x expert_shared_count; the refusals llama.cpp's shapes
 * and keys imply. */
static void test_bailingmoe(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	CHECK(moe_rewrite("bailingmoe-tiny", ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
	if (m) {
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l0 = &m->layers[0];
		CHECK(!hp->rope_neox && !hp->qk_norm && hp->moe_grouped &&
			  !hp->expert_gating_sigmoid && !hp->moe_sel_bias &&
			  hp->expert_weights_norm && hp->expert_weights_scale == 2.5f &&
			  hp->n_expert_groups == 0 && hp->n_expert_shared == 2 &&
			  model_ff_shexp(hp) == 64 && hp->n_layer_dense_lead == 0 &&
			  m->output.data != m->tok_embd.data,
		      "bailingmoe-tiny hparams");
		CHECK(l0->ffn_gate_inp.ne1 == 8 && l0->gate_shexp.ne1 == 64 && !l0->w_gate.ne0 &&
			  !l0->exp_probs_b.ne0 && l0->wk.ne1 == 32,
		      "bailingmoe-tiny layer shapes");
	}
	model_free(m);
	m = NULL;
	/* llama.cpp's experts in every layer, whatever leading_dense_block_count says */
	CHECK(moe_rewrite("bailingmoe-tiny", ME_KEY, "bailingmoe.leading_dense_block_count", 1, &m,
			  &err) == BG_OK &&
		  m->hp.n_layer_dense_lead == 0 && model_layer_moe(&m->layers[0]),
	      "bailingmoe-tiny with leading_dense_block_count 1: %s", err.msg);
	model_free(m);
	static const struct refusal bad[] = {
	    {"bailingmoe-tiny", ME_KEY, "bailingmoe.rope.dimension_count", 8, BG_ERR_UNSUPPORTED,
	     "shapes Q/K/V by rope.dimension_count"},
	    {"bailingmoe-tiny", ME_KEY, "bailingmoe.expert_shared_count", UINT32_MAX, BG_ERR_FORMAT,
	     "expert_shared_count"},
	    {"bailingmoe-tiny", ME_KEY, "bailingmoe.expert_count", UINT32_MAX, BG_ERR_FORMAT,
	     "a bailingmoe model has experts"},
	    {"bailingmoe-tiny", ME_KEY_F32, "bailingmoe.attention.layer_norm_rms_epsilon",
	     UINT32_MAX, BG_ERR_FORMAT, "bailingmoe.attention.layer_norm_rms_epsilon is missing"},
	    {"bailingmoe-tiny", ME_DROP, "blk.1.ffn_up_shexp.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_up_shexp.weight' is missing"},
	    {"bailingmoe-tiny", ME_ADD, "blk.0.exp_probs_b.bias", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.exp_probs_b.bias' is not part of a bailingmoe"},
	    {"bailingmoe-tiny", ME_ADD, "blk.0.attn_output.bias", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_output.bias' is not part of a bailingmoe"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* falcon-h1 (arch.h): every layer attention (NeoX) and a Mamba2 block side by side
 * (model_hparams.ssm_parallel; model_layer.ssm false, ssm_out its own), the inner size not 2
 * n_embd, ssm_norm and the conv bias optional, the FFN norm named blk.N.ffn_norm, a KV
 * cache and a recurrent state in every layer; attn_output.bias accepted unused as
 * llama.cpp; the refusals llama.cpp's loader implies. */
static void test_falcon_h1(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	static const char *const tiny[2] = {"falcon-h1-tiny", "falcon-h1-norm-tiny"};
	for (int i = 0; i < 2; i++) {
		CHECK(moe_rewrite(tiny[i], ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
		if (!m)
			continue;
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *L = &m->layers[1];
		CHECK(hp->ssm_parallel && hp->rope_neox && !hp->rope_none &&
			  hp->ssm_d_inner == 96 && hp->ssm_n_head == 8 && hp->ssm_n_group == 2 &&
			  hp->n_head_kv == 2 && hp->head_dim == 32 && !L->ssm && L->wq.ne1 == 128 &&
			  L->wo.ne0 == 128 && L->ssm_out.ne0 == 96 && L->ssm_out.ne1 == 64 &&
			  L->ssm_in.ne1 == 264 && L->ffn_norm.ne0 == 64 && L->w_gate.ne1 == 128 &&
			  (L->ssm_norm.data != NULL) == (i == 1) && L->ssm_conv_b.data &&
			  model_state_floats(hp, L) == 3 * 160 + 96 * 16 &&
			  (m->output.data == m->tok_embd.data) == (i == 0),
		      "%s hparams and layers", tiny[i]);
		model_free(m);
		m = NULL;
	}
	CHECK(moe_rewrite("falcon-h1-tiny", ME_DROP, "blk.1.ssm_conv1d.bias", 0, &m, &err) ==
		      BG_OK &&
		  !m->layers[1].ssm_conv_b.data && m->layers[0].ssm_conv_b.data,
	      "falcon-h1-tiny without blk.1's conv bias: %s", err.msg);
	model_free(m);
	m = NULL;
	CHECK(moe_rewrite("falcon-h1-tiny", ME_ADD, "blk.0.attn_output.bias", 0, &m, &err) ==
		      BG_OK &&
		  !m->hp.attn_out_bias && !m->layers[0].bo.data,
	      "falcon-h1-tiny with an O bias (unused): %s", err.msg);
	model_free(m);
	static const struct refusal bad[] = {
	    {"falcon-h1-tiny", ME_KEY, "falcon-h1.ssm.conv_kernel", UINT32_MAX, BG_ERR_FORMAT,
	     "falcon-h1.ssm.conv_kernel is missing or 0"},
	    {"falcon-h1-tiny", ME_KEY, "falcon-h1.ssm.inner_size", 100, BG_ERR_FORMAT,
	     "Mamba2 sizes are not usable"},
	    {"falcon-h1-tiny", ME_KEY_F32, "falcon-h1.attention.layer_norm_rms_epsilon", UINT32_MAX,
	     BG_ERR_FORMAT, "falcon-h1.attention.layer_norm_rms_epsilon is missing"},
	    {"falcon-h1-tiny", ME_DROP, "blk.1.ffn_norm", 0, BG_ERR_FORMAT,
	     "'blk.1.ffn_norm' is missing"},
	    {"falcon-h1-tiny", ME_ADD, "blk.0.ffn_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_norm.weight' is not part of a falcon-h1"},
	    {"falcon-h1-tiny", ME_DROP, "blk.2.ssm_out.weight", 0, BG_ERR_FORMAT,
	     "'blk.2.ssm_out.weight' is missing"},
	    {"falcon-h1-tiny", ME_DROP, "blk.0.ssm_a", 0, BG_ERR_FORMAT,
	     "'blk.0.ssm_a' is missing"},
	    {"falcon-h1-tiny", ME_HALVE, "blk.0.ssm_in.weight", 0, BG_ERR_FORMAT,
	     "'blk.0.ssm_in.weight' has shape"},
	    {"falcon-h1-tiny", ME_DROP, "blk.1.attn_k.weight", 0, BG_ERR_FORMAT,
	     "'blk.1.attn_k.weight' is missing"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

/* command-r and cohere2 (arch.h's cohere): LayerNorms with layer_norm_epsilon, no
 * ffn_norm (parallel), the output tied, logit_scale as a multiplier; Command R+'s per-head
 * Q/K norms from 64 layers on; cohere2's layers 0-2 windowed and rotated, 3 global without
 * RoPE; the released sizes' parameter counts (synth.c); refusals as llama.cpp's loader. */
static void test_cohere(void)
{
	struct bg_err err = {0};
	struct model *m = NULL;
	static const char *const tiny[3] = {"command-r-tiny", "command-r-plus-tiny",
					    "cohere2-tiny"};
	for (int i = 0; i < 3; i++) {
		CHECK(moe_rewrite(tiny[i], ME_NONE, "", 0, &m, &err) == BG_OK, "%s", err.msg);
		if (!m)
			continue;
		const struct model_hparams *hp = &m->hp;
		const struct model_layer *l1 = &m->layers[1];
		CHECK(hp->layer_norm && hp->parallel && !hp->rope_neox && !hp->qkv_bias &&
			  hp->logit_scale == 0.5f && hp->rms_eps == 1e-5f &&
			  m->output.data == m->tok_embd.data && !l1->ffn_norm.data &&
			  !l1->ffn_norm.ne0 && l1->attn_norm.ne0 == hp->n_embd &&
			  hp->qk_norm == (i == 1) && hp->qk_norm_heads == (i == 1) &&
			  (i != 1 || (l1->q_norm.ne0 == 16 && l1->q_norm.ne1 == 2 &&
				      l1->k_norm.ne0 == 16 && l1->k_norm.ne1 == 1)),
		      "%s hparams", tiny[i]);
		bool rot = true;
		for (uint32_t l = 0; l < hp->n_layer; l++)
			rot = rot && m->layers[l].no_rope == (i == 2 && l == 3) &&
			      m->layers[l].swa == (i == 2 && l != 3);
		CHECK(rot && (i != 2 || (hp->n_swa == 16 && hp->swa_pattern == 4 &&
					 hp->rope_base_swa == hp->rope_base)),
		      "%s: windowed layers rotate, the global one does not", tiny[i]);
		CHECK(m->n_params == synth_n_params(synth_find_shape(tiny[i]), true),
		      "%s n_params %llu", tiny[i], (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	/* command-r: logit_scale optional (absent, or 0: none) */
	for (int z = 0; z < 2; z++) {
		CHECK(moe_rewrite("command-r-tiny", ME_KEY_F32, "command-r.logit_scale",
				  z ? 0 : UINT32_MAX, &m, &err) == BG_OK,
		      "%s", err.msg);
		CHECK(m && m->hp.logit_scale == 1.0f, "command-r: logit_scale %s: none",
		      z ? "0" : "absent");
		model_free(m);
		m = NULL;
	}
	static const struct {
		const char *shape;
		uint64_t n;
	} sizes[] = {{"command-r-35b", 34980831232ull},
		     {"command-r-plus-104b", 103810674688ull},
		     {"command-r7b", 8028033024ull},
		     {"command-a-111b", 111057580032ull}};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		char spec[64];
		snprintf(spec, sizeof spec, "synthetic:%s", sizes[i].shape);
		CHECK(model_open(spec, true, &m, &err) == BG_OK, "%s", err.msg);
		if (m)
			CHECK(m->n_params == sizes[i].n &&
				  synth_n_params(synth_find_shape(sizes[i].shape), true) ==
				      sizes[i].n,
			      "lazy %s: n_params %llu", sizes[i].shape,
			      (unsigned long long)m->n_params);
		model_free(m);
		m = NULL;
	}
	static const struct refusal bad[] = {
	    {"command-r-tiny", ME_ADD, "output.weight", 0, BG_ERR_UNSUPPORTED,
	     "'output.weight' is not part of a command-r model"},
	    {"command-r-tiny", ME_ADD, "blk.0.ffn_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.ffn_norm.weight' is not part of a command-r model"},
	    /* Q/K norms below 64 layers: llama.cpp does not load them */
	    {"command-r-tiny", ME_ADD, "blk.0.attn_q_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_q_norm.weight' is not part of a command-r model"},
	    {"command-r-plus-tiny", ME_DROP, "blk.63.attn_k_norm.weight", 0, BG_ERR_FORMAT,
	     "'blk.63.attn_k_norm.weight' is missing"},
	    {"command-r-tiny", ME_KEY_F32, "command-r.attention.layer_norm_epsilon", UINT32_MAX,
	     BG_ERR_FORMAT, "layer_norm_epsilon is missing"},
	    {"cohere2-tiny", ME_KEY_F32, "cohere2.logit_scale", UINT32_MAX, BG_ERR_FORMAT,
	     "cohere2.logit_scale is missing"},
	    {"cohere2-tiny", ME_KEY, "cohere2.attention.sliding_window", UINT32_MAX,
	     BG_ERR_FORMAT, "cohere2.attention.sliding_window is missing"},
	    {"cohere2-tiny", ME_ADD, "blk.0.attn_q_norm.weight", 0, BG_ERR_UNSUPPORTED,
	     "'blk.0.attn_q_norm.weight' is not part of a cohere2 model"},
	};
	check_refusals(bad, sizeof bad / sizeof bad[0]);
}

static void test_lazy_new_arch(void)
{
	static const char *const shapes[] = {
	    "granite-tiny",   "granitemoe-tiny",     "mistral3-tiny",  "mistral3-bias-tiny",
	    "smollm3-tiny",   "seed_oss-tiny",	     "apertus-tiny",   "gemma4-tiny",
	    "glm4-tiny",      "glm4moe-tiny",	     "deepseek2-tiny", "deepseek2-lite-tiny",
	    "command-r-tiny", "command-r-plus-tiny", "cohere2-tiny",   "minimax-m2-tiny",
	    "exaone4-tiny",   "exaone4-swa-tiny",    "olmoe-tiny",     "bailingmoe2-tiny"};
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		char spec[64];
		snprintf(spec, sizeof spec, "synthetic:%s:f32", shapes[i]);
		struct bg_err err = {0};
		struct model *a = NULL, *b = NULL;
		CHECK(model_open(spec, false, &a, &err) == BG_OK, "%s: %s", spec, err.msg);
		CHECK(model_open(spec, true, &b, &err) == BG_OK, "%s lazy: %s", spec, err.msg);
		if (a && b) {
			const struct model_hparams *x = &a->hp, *y = &b->hp;
			bool same =
			    x->embd_scale == y->embd_scale && x->attn_scale == y->attn_scale &&
			    x->residual_scale == y->residual_scale &&
			    x->logit_scale == y->logit_scale &&
			    x->attn_temp_scale == y->attn_temp_scale &&
			    x->attn_temp_floor == y->attn_temp_floor &&
			    x->attn_temp_offset == y->attn_temp_offset &&
			    x->rope_attn_factor == y->rope_attn_factor &&
			    x->rope_freq_scale == y->rope_freq_scale &&
			    x->rope_yarn == y->rope_yarn && x->n_ctx_orig == y->n_ctx_orig &&
			    x->qkv_bias == y->qkv_bias && x->attn_out_bias == y->attn_out_bias &&
			    x->n_expert == y->n_expert && x->n_ff_exp == y->n_ff_exp &&
			    x->xielu == y->xielu && x->qk_norm == y->qk_norm &&
			    x->head_dim == y->head_dim && x->head_dim_swa == y->head_dim_swa &&
			    x->n_head_kv == y->n_head_kv && x->n_head_kv_swa == y->n_head_kv_swa &&
			    x->rope_dim_swa == y->rope_dim_swa && x->v_norm == y->v_norm &&
			    x->out_scale == y->out_scale &&
			    x->rope_factors_global == y->rope_factors_global &&
			    x->rope_base_swa == y->rope_base_swa &&
			    x->swa_pattern == y->swa_pattern && x->n_swa == y->n_swa &&
			    x->final_softcap == y->final_softcap && x->rope_dim == y->rope_dim &&
			    x->rope_neox == y->rope_neox && x->post_norms == y->post_norms &&
			    x->n_layer_nextn == y->n_layer_nextn && x->n_layer == y->n_layer &&
			    x->n_expert_shared == y->n_expert_shared &&
			    x->n_layer_dense_lead == y->n_layer_dense_lead &&
			    x->expert_gating_sigmoid == y->expert_gating_sigmoid &&
			    x->expert_weights_scale == y->expert_weights_scale &&
			    x->expert_weights_norm == y->expert_weights_norm && x->mla == y->mla &&
			    x->n_lora_q == y->n_lora_q && x->n_lora_kv == y->n_lora_kv &&
			    x->mla_nope == y->mla_nope && x->mla_v_head == y->mla_v_head &&
			    x->rope_yarn_log_mul == y->rope_yarn_log_mul &&
			    x->moe_grouped == y->moe_grouped &&
			    x->n_expert_groups == y->n_expert_groups &&
			    x->n_group_used == y->n_group_used && x->layer_norm == y->layer_norm &&
			    x->parallel == y->parallel && x->qk_norm_heads == y->qk_norm_heads &&
			    x->qk_norm_full == y->qk_norm_full && x->rms_eps == y->rms_eps &&
			    /* a lazy model describes gemma4's rope factors, not others'
			     * (apertus-tiny's) */
			    a->n_params ==
				b->n_params + (a->rope_factors.data && !b->rope_factors.ne0
						   ? x->rope_dim / 2
						   : 0);
			for (uint32_t l = 0; l < x->n_layer; l++)
				same = same && a->layers[l].no_rope == b->layers[l].no_rope &&
				       a->layers[l].bo.ne0 == b->layers[l].bo.ne0 &&
				       a->layers[l].bq.ne0 == b->layers[l].bq.ne0 &&
				       a->layers[l].w_gate.ne0 == b->layers[l].w_gate.ne0 &&
				       memcmp(a->layers[l].xielu, b->layers[l].xielu,
					      sizeof a->layers[l].xielu) == 0 &&
				       a->layers[l].swa == b->layers[l].swa &&
				       a->layers[l].v_from_k == b->layers[l].v_from_k &&
				       a->layers[l].wq.ne1 == b->layers[l].wq.ne1 &&
				       a->layers[l].wk.ne1 == b->layers[l].wk.ne1 &&
				       a->layers[l].wq_b.ne1 == b->layers[l].wq_b.ne1 &&
				       a->layers[l].wk_b.ne2 == b->layers[l].wk_b.ne2 &&
				       a->layers[l].wo.ne0 == b->layers[l].wo.ne0 &&
				       a->layers[l].q_norm.ne1 == b->layers[l].q_norm.ne1 &&
				       a->layers[l].ffn_norm.ne0 == b->layers[l].ffn_norm.ne0 &&
				       a->layers[l].exp_probs_b.ne0 == b->layers[l].exp_probs_b.ne0;
			CHECK(same, "%s: the lazy model's hyper-parameters are the file's", spec);
		}
		model_free(a);
		model_free(b);
	}
}

int main(void)
{
	test_stories();
	test_tiny_random();
	test_refusals();
	test_rewrites();
	test_flips();
	test_builtin_default();
	test_builtin();
	test_synthetic();
	test_qwen2();
	test_arch();
	test_moe();
	test_oss();
	test_olmo2();
	test_granite();
	test_mistral3();
	test_smollm3();
	test_seed_apertus();
	test_cohere();
	test_gemma4();
	test_gemma4_moe();
	test_glm4();
	test_glm4moe();
	test_lfm2();
	test_granitehybrid();
	test_nemotron_h();
	test_nemotron_h_moe();
	test_step35();
	test_llama4();
	test_lfm2moe();
	test_qwen35();
	test_qwen_moe();
	test_qwenvl();
	test_qwen3next();
	test_deepseek2();
	test_minimax();
	test_lazy_new_arch();
	test_exaone4();
	test_olmoe();
	test_ernie();
	test_hunyuan();
	test_bailingmoe2();
	test_exaone_arcee_dots1();
	test_exaone_moe();
	test_bailingmoe();
	test_falcon_h1();
	return check_summary();
}
