/* model: a Llama-architecture model described by a GGUF file.
 *
 * Architectures: `llama`, and `qwen2` (Qwen2 / Qwen2.5), which is llama plus a bias on the
 * Q, K and V projections (blk.N.attn_{q,k,v}.bias, f32, required), NeoX-layout RoPE, and
 * its hyper-parameters under `qwen2.*`. A llama file with any bias tensor is refused.
 *
 * model_load reads the hyper-parameters from the `<arch>.*` metadata, finds every tensor
 * by its GGUF name, and checks each shape against the hyper-parameters; a missing or
 * misshapen tensor is BG_ERR_FORMAT with a message naming the tensor. Weights are not
 * copied: struct model_weight points into the GGUF mapping, which the model owns.
 * When output.weight is absent the output projection is tied to token_embd.weight.
 *
 * Layout: a 2-D weight of GGUF shape (ne0, ne1) is ne1 rows of ne0 elements, row-major;
 * a matrix-vector product y = W x has x of length ne0 and y of length ne1.
 */
#ifndef BG_MODEL_H
#define BG_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/gguf.h"
#include "status.h"

struct model_hparams {
	uint32_t n_vocab;
	uint32_t n_ctx_train; /* <arch>.context_length: the max sequence length */
	uint32_t n_embd;
	uint32_t n_layer;
	uint32_t n_head;
	uint32_t n_head_kv; /* == n_head without GQA */
	uint32_t head_dim;  /* n_embd / n_head */
	uint32_t n_ff;
	uint32_t rope_dim; /* rotated dimensions per head (<= head_dim), default head_dim */
	float rope_base;   /* default 10000 */
	float rms_eps;	   /* default 1e-5 */
	bool rope_neox;	   /* false for llama: rotate interleaved pairs (x[2i], x[2i+1]);
			    * true for qwen2: rotate (x[i], x[i + rope_dim / 2]) */
	bool qkv_bias;	   /* qwen2: Q, K and V projections have a bias */
};

struct model_weight {
	enum gguf_dtype type;
	const void *data; /* into the GGUF mapping */
	uint64_t ne0;	  /* elements per row (input dimension) */
	uint64_t ne1;	  /* rows (output dimension); 1 for vectors */
};

struct model_layer {
	struct model_weight attn_norm; /* (n_embd) f32 */
	struct model_weight wq;	       /* (n_embd, n_head * head_dim) */
	struct model_weight wk;	       /* (n_embd, n_head_kv * head_dim) */
	struct model_weight wv;	       /* (n_embd, n_head_kv * head_dim) */
	struct model_weight wo;	       /* (n_head * head_dim, n_embd) */
	struct model_weight ffn_norm;  /* (n_embd) f32 */
	struct model_weight w_gate;    /* (n_embd, n_ff) */
	struct model_weight w_up;      /* (n_embd, n_ff) */
	struct model_weight w_down;    /* (n_ff, n_embd) */

	/* qwen2's biases, added to the Q, K and V projections before RoPE */
	struct model_weight bq; /* (n_head * head_dim) f32, or data == NULL and ne0 == 0 when the
				   model has no QKV bias */
	struct model_weight bk; /* (n_head_kv * head_dim) likewise */
	struct model_weight bv; /* (n_head_kv * head_dim) likewise */
};

struct model {
	char arch[32];	/* general.architecture */
	char name[128]; /* general.name, or the file's base name */
	struct model_hparams hp;
	struct model_weight tok_embd;	 /* (n_embd, n_vocab) */
	struct model_weight output_norm; /* (n_embd) f32 */
	struct model_weight output;	 /* (n_embd, n_vocab); == tok_embd when tied */
	struct model_layer *layers;	 /* [n_layer] */
	uint64_t n_params;
	uint64_t weight_bytes;
	struct gguf_ctx *gguf; /* owned; NULL for a lazy synthetic model */
	/* A lazy synthetic model (model_open("synthetic:NAME", lazy)) has every weight's
	 * data == NULL: a backend that supports it fills the weights with seeded random
	 * values itself (the CUDA backend does, in device memory). Its biases, when
	 * hp.qkv_bias, are described like the other weights (type f32, ne0 = the output
	 * dimension, ne1 = 1, data == NULL); without biases bq/bk/bv are all zero. */
	bool synthetic;
	uint64_t synth_seed;
};

/* Opens and validates a model file. On failure *out is NULL and err->msg starts with the
 * path ("PATH: problem"), so a CLI prints it as "batchgen: <msg>". */
enum bg_status model_load(const char *path, struct model **out, struct bg_err *err);

/* Builds a model from an already parsed GGUF context, taking ownership of g (closed on
 * failure too). A vocab-only file is BG_ERR_FORMAT ("has no tensors"). */
enum bg_status model_from_gguf(struct gguf_ctx *g, struct model **out, struct bg_err *err);

/* Reads only the hyper-parameters (no tensors needed). */
enum bg_status model_read_hparams(const struct gguf_ctx *g, struct model_hparams *hp, char arch[32],
				  struct bg_err *err);

/* Opens what -m names: NULL or "" = the built-in model (stories260K, embedded in the
 * binary: core/model/builtin.h); "synthetic:builtin" = the small random-weight model
 * that was the default before (synth_builtin's bytes, always materialized);
 * "synthetic:NAME[:DTYPE]" (llama-3-8b, llama-3.2-1b, llama-2-7b,
 * llama-100m, tiny, qwen2.5-0.5b, qwen2-tiny, ... see core/model/synth.h; DTYPE f32|f16|bf16|q8_0,
 * default f16; seed 0) = random weights of a named shape, materialized in host memory (through the
 * GGUF writer and parser, with a generated tokenizer) unless lazy; otherwise a path. */
enum bg_status model_open(const char *spec, bool lazy, struct model **out, struct bg_err *err);

/* (model_open's messages likewise start with the path, the spec, or "built-in model".) */
void model_free(struct model *m); /* NULL-safe */

#endif
