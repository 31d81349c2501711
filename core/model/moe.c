/* moe: routing one token to its experts. See moe.h. */
#include "model/moe.h"

#include <math.h>

#include "status.h"

/* p = softmax(logits): the max subtracted, the sum in index order in double */
static void softmax_probs(const float *logits, uint32_t n_expert, float *p)
{
	float mx = logits[0];
	for (uint32_t e = 1; e < n_expert; e++)
		mx = logits[e] > mx ? logits[e] : mx;
	double sum = 0.0;
	for (uint32_t e = 0; e < n_expert; e++) {
		p[e] = expf(logits[e] - mx);
		sum += (double)p[e];
	}
	const float inv = (float)(1.0 / sum);
	for (uint32_t e = 0; e < n_expert; e++)
		p[e] *= inv;
}

/* slot j takes the largest sel not yet taken (a strict > keeps the lower index on ties),
 * its weight that expert's p. O(k n_expert), k small in practice. With NaN values the
 * choice is arbitrary, but every id is a distinct expert. */
static void choose(const float *sel, const float *p, uint32_t n_expert, uint32_t k, int32_t *ids,
		   float *weights)
{
	bool taken[MOE_MAX_EXPERTS] = {false};
	for (uint32_t j = 0; j < k; j++) {
		int32_t best = -1;
		for (uint32_t e = 0; e < n_expert; e++)
			if (!taken[e] && (best < 0 || sel[e] > sel[best]))
				best = (int32_t)e;
		taken[best] = true;
		ids[j] = best;
		weights[j] = p[best];
	}
}

void moe_route(const float *logits, uint32_t n_expert, uint32_t k, bool norm, int32_t *ids,
	       float *weights)
{
	BG_ASSERT(k >= 1 && k <= n_expert && n_expert <= MOE_MAX_EXPERTS);
	float p[MOE_MAX_EXPERTS];
	softmax_probs(logits, n_expert, p);
	choose(p, p, n_expert, k, ids, weights);
	if (!norm)
		return;
	float s = 0.0f;
	for (uint32_t j = 0; j < k; j++)
		s += weights[j];
	for (uint32_t j = 0; j < k; j++)
		weights[j] /= s;
}

void moe_route_sigmoid(const float *logits, const float *sel_bias, uint32_t n_expert,
		       uint32_t k, bool norm, float scale, int32_t *ids, float *weights)
{
	moe_route_grouped(logits, sel_bias, n_expert, k, true, 0, 0, norm, scale, ids, weights);
}

void moe_route_grouped(const float *logits, const float *sel_bias, uint32_t n_expert, uint32_t k,
		       bool sigmoid, uint32_t n_group, uint32_t n_group_used, bool norm,
		       float scale, int32_t *ids, float *weights)
{
	BG_ASSERT(k >= 1 && k <= n_expert && n_expert <= MOE_MAX_EXPERTS);
	float p[MOE_MAX_EXPERTS], sel[MOE_MAX_EXPERTS];
	if (sigmoid)
		for (uint32_t e = 0; e < n_expert; e++)
			p[e] = 1.0f / (1.0f + expf(-logits[e])); /* ggml_vec_sigmoid_f32 */
	else
		softmax_probs(logits, n_expert, p);
	for (uint32_t e = 0; e < n_expert; e++)
		sel[e] = sel_bias ? p[e] + sel_bias[e] : p[e];
	if (n_group > 1) {
		const uint32_t G = n_expert / n_group;
		BG_ASSERT(n_expert % n_group == 0 && G >= 2 && n_group_used >= 1 &&
			  n_group_used < n_group && k <= n_group_used * G);
		float score[MOE_MAX_EXPERTS / 2];
		for (uint32_t g = 0; g < n_group; g++) { /* the two largest of the group */
			const float *v = sel + (size_t)g * G;
			uint32_t a = 0;
			for (uint32_t i = 1; i < G; i++)
				if (v[i] > v[a])
					a = i;
			uint32_t b = a == 0 ? 1 : 0;
			for (uint32_t i = 0; i < G; i++)
				if (i != a && v[i] > v[b])
					b = i;
			score[g] = v[a] + v[b];
		}
		bool keep[MOE_MAX_EXPERTS / 2] = {false};
		for (uint32_t j = 0; j < n_group_used; j++) {
			int32_t best = -1;
			for (uint32_t g = 0; g < n_group; g++)
				if (!keep[g] && (best < 0 || score[g] > score[best]))
					best = (int32_t)g;
			keep[best] = true;
		}
		for (uint32_t e = 0; e < n_expert; e++)
			if (!keep[e / G])
				sel[e] = -INFINITY;
	}
	choose(sel, p, n_expert, k, ids, weights);
	if (norm) {
		float s = 0.0f;
		for (uint32_t j = 0; j < k; j++)
			s += weights[j];
		s = s < 6.103515625e-5f ? 6.103515625e-5f : s; /* llama.cpp's clamp */
		for (uint32_t j = 0; j < k; j++)
			weights[j] /= s;
	}
	if (scale != 1.0f)
		for (uint32_t j = 0; j < k; j++)
			weights[j] *= scale;
}

void moe_route_llama4(const float *logits, uint32_t n_expert, uint32_t k, int32_t *ids,
		      float *weights)
{
	BG_ASSERT(k >= 1 && k <= n_expert && n_expert <= MOE_MAX_EXPERTS);
	float p[MOE_MAX_EXPERTS];
	for (uint32_t e = 0; e < n_expert; e++)
		p[e] = 1.0f / (1.0f + expf(-logits[e])); /* ggml_vec_sigmoid_f32 */
	choose(logits, p, n_expert, k, ids, weights);
}
