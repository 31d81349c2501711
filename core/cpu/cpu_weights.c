/* cpu_weights: the CPU backend's copy of the weights in huge-page memory (cpu_weights.h). */
#include "cpu/cpu_weights.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/gguf.h"

#define HUGE_PAGE ((size_t)2 << 20)

/* each_weight lists struct model_layer's weights by hand: these assertions fail to compile
 * when a weight is added to the struct (all weights come before swa) and not to the list */
#define LAYER_WEIGHTS 64
_Static_assert(offsetof(struct model_layer, swa) == LAYER_WEIGHTS * sizeof(struct model_weight),
	       "struct model_layer's weights changed: update each_weight");
_Static_assert(sizeof(struct model_layer) < offsetof(struct model_layer, swa) +
						sizeof(struct model_weight) + 3 * sizeof(float),
	       "a weight after struct model_layer's swa: update each_weight");

/* f on every weight of m: the model's own and each layer's */
static void each_weight(struct model *m, void (*f)(struct model_weight *, void *), void *arg)
{
	f(&m->tok_embd, arg);
	f(&m->output_norm, arg);
	f(&m->output, arg);
	f(&m->rope_factors, arg);
	f(&m->pl_tok_embd, arg);
	f(&m->pl_model_proj, arg);
	f(&m->pl_proj_norm, arg);
	for (uint32_t l = 0; l < m->hp.n_layer; l++) {
		struct model_layer *L = &m->layers[l];
		struct model_weight *lw[LAYER_WEIGHTS] = {
		    &L->attn_norm,    &L->wq,	  &L->wk,     &L->wv,	  &L->wo,
		    &L->ffn_norm,     &L->w_gate, &L->w_up,   &L->w_down, &L->bq,
		    &L->bk,	      &L->bv,	  &L->q_norm, &L->k_norm, &L->attn_post_norm,
		    &L->ffn_post_norm, &L->ffn_gate_inp, &L->gate_exps, &L->up_exps,
		    &L->down_exps, &L->attn_sinks, &L->bo, &L->ffn_gate_inp_b, &L->gate_exps_b,
		    &L->up_exps_b, &L->down_exps_b, &L->pl_inp_gate, &L->pl_proj,
		    &L->pl_post_norm, &L->exp_probs_b, &L->gate_shexp, &L->up_shexp,
		    &L->down_shexp, &L->wq_a, &L->q_a_norm, &L->wq_b, &L->wkv_a,
		    &L->kv_a_norm, &L->wk_b, &L->wv_b, &L->conv_in, &L->conv_w,
		    &L->gdn_qkv, &L->gdn_z, &L->gdn_beta, &L->gdn_alpha, &L->gdn_dt, &L->gdn_a,
		    &L->gdn_norm, &L->ssm_in, &L->ssm_conv_w, &L->ssm_conv_b, &L->ssm_dt_b,
		    &L->ssm_a, &L->ssm_d, &L->ssm_norm, &L->ssm_out, &L->gate_inp_shexp,
		    &L->attn_gate,
		    /* gemma4 MoE */
		    &L->gate_inp_s, &L->ffn_pre_norm_2, &L->ffn_post_norm_1, &L->ffn_post_norm_2,
		    &L->down_exps_s};
		for (int i = 0; i < LAYER_WEIGHTS; i++)
			f(lw[i], arg);
	}
}

struct span {
	const char *file_lo, *file_hi; /* the file's tensor bytes: only weights in them move */
	const char *lo, *hi;	       /* the bytes of the weights that move */
	char *to;		       /* where lo is copied */
};

/* the bytes w's data spans (with a stride: up to its last matrix's end, model.h) */
static size_t weight_bytes(const struct model_weight *w)
{
	return (size_t)model_weight_span(w);
}

/* Is w in the file's tensor bytes? A weight the loader made in a buffer of the model's own
 * (model.owned: qwen3next's reordered fused tensors) is not, and stays where it is: a span
 * from such a buffer to the file mapping would cover whatever lies between them (holes,
 * other mappings), which is neither copyable nor small. */
static bool in_file(const struct model_weight *w, const struct span *s)
{
	const char *p = w->data;
	return p && p >= s->file_lo && p + weight_bytes(w) <= s->file_hi;
}

static void widen(struct model_weight *w, void *arg)
{
	struct span *s = arg;
	const size_t n = weight_bytes(w);
	if (!n || !in_file(w, s))
		return;
	const char *p = w->data;
	if (!s->lo || p < s->lo)
		s->lo = p;
	if (!s->hi || p + n > s->hi)
		s->hi = p + n;
}

static void move(struct model_weight *w, void *arg)
{
	struct span *s = arg;
	if (weight_bytes(w) && in_file(w, s))
		w->data = s->to + ((const char *)w->data - s->lo);
}

bool cpu_weights_init(struct cpu_weights *w, const struct model *model)
{
	memset(w, 0, sizeof *w);
	w->m = *model;
	const size_t nl = model->hp.n_layer;
	if (nl) {
		w->layers = malloc(nl * sizeof *w->layers);
		if (!w->layers)
			return false;
		memcpy(w->layers, model->layers, nl * sizeof *w->layers);
	}
	w->m.layers = w->layers;

	struct span s = {0};
	const struct gguf_ctx *g = model->gguf;
	for (uint64_t i = 0; g && i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		const char *p = t->data;
		if (!s.file_lo || p < s.file_lo)
			s.file_lo = p;
		if (!s.file_hi || p + t->nbytes > s.file_hi)
			s.file_hi = p + t->nbytes;
	}
	each_weight(&w->m, widen, &s);
	const char *mode = getenv("BG_CPU_WEIGHTS");
	if (!s.lo || (mode && !strcmp(mode, "mapped")))
		return true;
	const size_t n = (size_t)(s.hi - s.lo);
	const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages > 0 && page > 0 && n > (size_t)pages * (size_t)page / 2)
		return true;
	/* room for lo's offset in its cache line */
	void *map;
	size_t len;
	char *base = cpu_huge_map(n + 64, &map, &len);
	if (!base)
		return true;
	s.to = base + (uintptr_t)s.lo % 64;
	memcpy(s.to, s.lo, n);
	(void)mprotect(map, len, PROT_READ);
	each_weight(&w->m, move, &s);
	w->map = map;
	w->map_len = len;
	return true;
}

void *cpu_huge_map(size_t n, void **map, size_t *map_len)
{
	const size_t len = n + HUGE_PAGE; /* room to start on a huge-page boundary */
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		*map = NULL;
		*map_len = 0;
		return NULL;
	}
	char *base = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	(void)madvise(base, n, MADV_HUGEPAGE);
	*map = m;
	*map_len = len;
	return base;
}

void cpu_weights_free(struct cpu_weights *w)
{
	if (w->map)
		munmap(w->map, w->map_len);
	free(w->layers);
	memset(w, 0, sizeof *w);
}
