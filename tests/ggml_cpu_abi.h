/* ggml_cpu_abi.h: the part of ggml-cpu's ABI that tests and benchmarks reach through dlsym
 * in node-llama-cpp's library (ggml_get_type_traits_cpu): the per-type quantizer of an
 * activation row and the block dot product. Must match the ggml build in bench/node_modules. */
#ifndef BG_TESTS_GGML_CPU_ABI_H
#define BG_TESTS_GGML_CPU_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef void (*ggml_from_float_t)(const float *x, void *y, int64_t k);
typedef void (*ggml_vec_dot_t)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y,
			       size_t by, int nrc);
struct ggml_cpu_traits {
	ggml_from_float_t from_float;
	ggml_vec_dot_t vec_dot;
	int vec_dot_type;
	int64_t nrows;
};

#endif
