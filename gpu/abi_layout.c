/* abi_layout: prints build/gpu/abi_layout.h, the layout of every struct that crosses the
 * plugin boundary (gpu/plugin.h) as this C compiler lays it out: the size and alignment of
 * each, and the offset of each field of the backend's own structs (a field added into
 * padding, or two fields swapped, keeps the size).
 *
 * The CUDA backend includes the header and static_asserts each size and alignment under
 * nvcc's host compiler, so the two compilers must agree or the plugin does not build; the
 * loader and the plugin both fold GPU_ABI_LAYOUT (a hash of the same numbers) into the ABI
 * value they compare, so a library built before a struct changed is refused at load time
 * without anyone remembering to bump GPU_PLUGIN_ABI. A struct that starts to cross the
 * boundary goes into the list below. Run by the Makefile (and gpu/emu/run.sh); not part
 * of batchgen. */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "status.h"

#define LAYOUT_LIST(X)                                                                     \
	X(backend_seq)                                                                     \
	X(backend_batch)                                                                   \
	X(backend_sample_row)                                                              \
	X(backend_mem)                                                                     \
	X(backend_ops)                                                                     \
	X(backend)                                                                         \
	X(backend_config)                                                                  \
	X(model_hparams)                                                                   \
	X(model_weight)                                                                    \
	X(model_layer)                                                                     \
	X(model)                                                                           \
	X(sampler_params)                                                                  \
	X(sampler_rng)                                                                     \
	X(sampler_result)                                                                  \
	X(sampler_history)                                                                 \
	X(bg_err)

/* the fields of core/backend.h's structs and of the sampler results the plugin writes;
 * model and sampler parameters are read-only to it and checked by size */
#define FIELD_LIST(F)                                                                      \
	F(backend_seq, tokens)                                                             \
	F(backend_seq, n_tokens)                                                           \
	F(backend_seq, pos0)                                                               \
	F(backend_seq, block_table)                                                        \
	F(backend_seq, n_blocks)                                                           \
	F(backend_seq, want_logits)                                                        \
	F(backend_seq, prev_rows)                                                          \
	F(backend_seq, state_slot)                                                         \
	F(backend_batch, seqs)                                                             \
	F(backend_batch, n_seqs)                                                           \
	F(backend_batch, n_logits)                                                         \
	F(backend_sample_row, logits_row)                                                  \
	F(backend_sample_row, forced)                                                      \
	F(backend_sample_row, params)                                                      \
	F(backend_sample_row, history)                                                     \
	F(backend_sample_row, rng)                                                         \
	F(backend_sample_row, constraint)                                                  \
	F(backend_mem, weight_bytes)                                                       \
	F(backend_mem, kv_bytes)                                                           \
	F(backend_mem, workspace_bytes)                                                    \
	F(backend_mem, on_device)                                                          \
	F(backend_ops, forward)                                                            \
	F(backend_ops, sample)                                                             \
	F(backend_ops, sample_wait)                                                        \
	F(backend_ops, get_logits)                                                         \
	F(backend_ops, kv_swap_out)                                                        \
	F(backend_ops, kv_swap_in)                                                         \
	F(backend_ops, kv_copy)                                                            \
	F(backend_ops, state_copy)                                                         \
	F(backend_ops, mem_info)                                                           \
	F(backend_ops, destroy)                                                            \
	F(backend, ops)                                                                    \
	F(backend, ctx)                                                                    \
	F(backend, name)                                                                   \
	F(backend, caps)                                                                   \
	F(backend, device)                                                                 \
	F(backend, n_vocab)                                                                \
	F(backend, block_size)                                                             \
	F(backend, n_blocks)                                                               \
	F(backend, block_bytes)                                                            \
	F(backend, n_state_slots)                                                          \
	F(backend, state_bytes)                                                            \
	F(backend_config, block_size)                                                      \
	F(backend_config, kv_tokens)                                                       \
	F(backend_config, mem_fraction)                                                    \
	F(backend_config, n_threads)                                                       \
	F(backend_config, device_index)                                                    \
	F(backend_config, n_state_slots)                                                   \
	F(sampler_result, token)                                                           \
	F(sampler_result, logprob)                                                         \
	F(sampler_result, n_top)                                                           \
	F(sampler_result, top_ids)                                                         \
	F(sampler_result, top_logprobs)

static uint32_t fnv(uint32_t h, const char *s, size_t a, size_t b)
{
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	h = (h ^ (uint32_t)a) * 16777619u;
	return (h ^ (uint32_t)b) * 16777619u;
}

int main(void)
{
	uint32_t h = 2166136261u;
	printf("/* generated by gpu/abi_layout.c from this build's headers: do not edit */\n");
	printf("#define GPU_ABI_CHECKS \\\n");
#define X(s)                                                                               \
	printf("\tstatic_assert(sizeof(struct " #s ") == %zu && alignof(struct " #s ") == %zu, " \
	       "\"struct " #s " is laid out differently by the C and the CUDA compilers\"); \\\n", \
	       sizeof(struct s), alignof(struct s));                                       \
	h = fnv(h, #s, sizeof(struct s), alignof(struct s));
	LAYOUT_LIST(X)
#undef X
#define F(s, f)                                                                            \
	printf("\tstatic_assert(offsetof(struct " #s ", " #f ") == %zu, \"struct " #s "." #f    \
	       " lies elsewhere for the C and the CUDA compilers\"); \\\n",                  \
	       offsetof(struct s, f));                                                     \
	h = fnv(h, #s "." #f, offsetof(struct s, f), 0);
	FIELD_LIST(F)
#undef F
	printf("\t/* end */\n");
	printf("#define GPU_ABI_LAYOUT 0x%08xu\n", h);
	return 0;
}
