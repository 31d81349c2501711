/* ggml_requant: rewrites a GGUF model with its 2-D weights quantized to one block type by
 * ggml's own quantizer (ggml_quantize_chunk in the libggml-base.so that node-llama-cpp
 * installs), given a uniform importance matrix: llama.cpp's quantize tool refuses IQ2_XXS,
 * IQ2_XS, IQ2_S and IQ1_S without one, and its presets mix those types into IQ3_XXS and
 * IQ1_M files, so tests/e2e_llamacpp.sh makes its i-quant files with this instead.
 *
 *   ggml_requant LIBGGML_BASE.so IN.gguf OUT.gguf TYPE    (TYPE: a ggml name, "iq2_xxs")
 *
 * Every tensor named *.weight with 2 or 3 dimensions, f32 or f16, rows a multiple of 256
 * and at most 4096 wide (the importance matrix's room) is quantized; the rest (norms, and
 * everything else) is copied as it is, as are the key/values. Exit status 0 when at least
 * one tensor was quantized. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/half.h"
#include "model/quant.h"

static int type_by_name(const char *s)
{
	for (int t = 0; t <= GGUF_DTYPE_MXFP4; t++)
		if (quant_block_elems((enum gguf_dtype)t) == 256 &&
		    !strcmp(gguf_dtype_name((enum gguf_dtype)t), s))
			return t;
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: ggml_requant LIBGGML_BASE.so IN.gguf OUT.gguf TYPE\n");
		return 2;
	}
	const int type = type_by_name(argv[4]);
	if (type < 0) {
		fprintf(stderr, "ggml_requant: %s is not a block type of 256\n", argv[4]);
		return 2;
	}
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	void (*qinit)(int) = h ? (void (*)(int))dlsym(h, "ggml_quantize_init") : NULL;
	size_t (*qchunk)(int, const float *, void *, int64_t, int64_t, int64_t, const float *) =
	    h ? (size_t(*)(int, const float *, void *, int64_t, int64_t, int64_t,
			   const float *))dlsym(h, "ggml_quantize_chunk")
	      : NULL;
	if (!qinit || !qchunk) {
		fprintf(stderr, "ggml_requant: %s: no ggml_quantize_chunk (%s)\n", argv[1],
			h ? "symbol missing" : dlerror());
		return 1;
	}
	qinit(type);
	struct bg_err err = {0};
	struct gguf_ctx *g = NULL;
	if (gguf_open(argv[2], &g, &err) != BG_OK) {
		fprintf(stderr, "ggml_requant: %s\n", err.msg);
		return 1;
	}
	struct gguf_writer *w = gguf_writer_create();
	for (uint64_t i = 0; i < gguf_n_kv(g); i++)
		gguf_writer_copy_kv(w, g, i);
	const uint64_t nt = gguf_n_tensors(g);
	void **bufs = calloc(nt, sizeof *bufs);
	float imat[4096];
	int n_quant = 0;
	for (uint64_t i = 0; i < nt; i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		char name[128];
		snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
		const size_t nl = strlen(name);
		const bool quantize = nl > 7 && !strcmp(name + nl - 7, ".weight") &&
				      (t->n_dims == 2 || t->n_dims == 3) && t->ne[0] % 256 == 0 &&
				      t->ne[0] <= 4096 &&
				      (t->type == GGUF_DTYPE_F32 || t->type == GGUF_DTYPE_F16);
		if (!quantize) {
			gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
			continue;
		}
		const int64_t k = (int64_t)t->ne[0],
			      rows = (int64_t)(t->nbytes / (t->type == GGUF_DTYPE_F32 ? 4 : 2)) / k;
		float *x = malloc(sizeof(float) * (size_t)(k * rows));
		quant_dequant(t->type, t->data, x, k * rows);
		for (int64_t j = 0; j < k; j++)
			imat[j] = 1.0f;
		bufs[i] = malloc(gguf_row_bytes((enum gguf_dtype)type, (uint64_t)k) * (size_t)rows);
		qchunk(type, x, bufs[i], 0, rows, k, imat);
		free(x);
		gguf_writer_add_tensor(w, name, (enum gguf_dtype)type, t->n_dims, t->ne, bufs[i]);
		n_quant++;
	}
	enum bg_status st = gguf_writer_write(w, argv[3], &err);
	if (st != BG_OK)
		fprintf(stderr, "ggml_requant: %s\n", err.msg);
	else
		fprintf(stderr, "ggml_requant: %d tensors in %s\n", n_quant, argv[4]);
	gguf_writer_destroy(w);
	for (uint64_t i = 0; i < nt; i++)
		free(bufs[i]);
	free(bufs);
	gguf_close(g);
	return st == BG_OK && n_quant > 0 ? 0 : 1;
}
