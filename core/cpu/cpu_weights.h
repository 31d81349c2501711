/* cpu_weights: the CPU backend's own copy of a model's weights, in anonymous memory that the
 * kernel may back with 2 MiB pages (madvise MADV_HUGEPAGE, for transparent huge pages in
 * "madvise" or "always" mode), instead of the file mapping's 4 KiB pages.
 *
 * Why: B=1 decode streams every weight once per token. From this copy the decode step
 * measured 22 % (Llama-3.2-3B Q4_K_M) to 26 % (TinyLlama Q4_K_M) shorter than from the
 * mapping on a 2-vCPU Zen 4 VM, B=1 output tok/s +20 % and +31 %
 * (bench/results/q12c-2026-11-29.md); anonymous memory in 4 KiB pages gained much less.
 * llama.cpp also reads its repacked weights from anonymous memory. The bytes are copied as they
 * are: the same values, the same relative offsets (so a tied output and token_embd stay one
 * tensor), the same alignment modulo 32.
 *
 * Only weights in the file's tensor bytes are copied; one the loader made in a buffer of the
 * model's own (model.owned) is read where it is.
 *
 * The copy is skipped, and the weights read from the model's own memory, when the model has
 * no weight data (a lazy synthetic model), when BG_CPU_WEIGHTS=mapped, when the weights are
 * more than half of the physical memory, or when the memory cannot be mapped. */
#ifndef BG_CPU_WEIGHTS_H
#define BG_CPU_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"

struct cpu_weights {
	struct model m;		    /* *model with its weights' data in the copy */
	struct model_layer *layers; /* m.layers, owned */
	void *map;		    /* the copy's mapping, or NULL */
	size_t map_len;
};

/* Fills w for model (which must outlive w: w->m shares its gguf and names). False only when
 * out of memory for the layer table (w is then empty). */
bool cpu_weights_init(struct cpu_weights *w, const struct model *model);

void cpu_weights_free(struct cpu_weights *w);

/* Anonymous read-write memory of at least n bytes starting on a 2 MiB boundary and advised
 * for transparent huge pages (a hint: without THP the kernel backs it with 4 KiB pages), as
 * the copy above is made; bench/qdot_bench.c's -H uses it to measure from the same kind of
 * memory. Returns the aligned start and fills *map / *map_len for munmap, or returns NULL
 * (*map NULL) when it cannot be mapped. */
void *cpu_huge_map(size_t n, void **map, size_t *map_len);

#endif
