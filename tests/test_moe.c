/* test_moe: moe_route (core/model/moe.h) against values derived by hand: the softmax of
 * chosen logits, the top-k order, ties, k = 1, k = n_expert, renormalization on and off;
 * moe_route_sigmoid's probabilities, selection bias (the choice only), scale and clamp.
 * Tolerance: the probabilities are f32 computations of a few operations each, so a
 * relative 1e-6 (about 8 ulp) covers their rounding; ids are compared exactly. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "model/moe.h"

#define LN2 0.69314718055994531
#define LN3 1.09861228866810969

static void route(const float *logits, uint32_t n, uint32_t k, bool norm, int32_t *ids,
		  float *w)
{
	for (uint32_t j = 0; j < k; j++) {
		ids[j] = -7;
		w[j] = -7.0f;
	}
	moe_route(logits, n, k, norm, ids, w);
}

int main(void)
{
	int32_t ids[8];
	float w[8];
	/* exp(logits) = 1, 2, 3, 1: p = 1/7, 2/7, 3/7, 1/7; the two largest are experts 2, 1 */
	const float a[4] = {0.0f, (float)LN2, (float)LN3, 0.0f};
	route(a, 4, 2, true, ids, w);
	CHECK(ids[0] == 2 && ids[1] == 1, "top-2 ids %d %d", ids[0], ids[1]);
	CHECK_NEAR(w[0], 3.0 / 5.0, 0, 1e-6);
	CHECK_NEAR(w[1], 2.0 / 5.0, 0, 1e-6);
	route(a, 4, 2, false, ids, w);
	CHECK(ids[0] == 2 && ids[1] == 1, "top-2 ids without norm %d %d", ids[0], ids[1]);
	CHECK_NEAR(w[0], 3.0 / 7.0, 0, 1e-6);
	CHECK_NEAR(w[1], 2.0 / 7.0, 0, 1e-6);
	/* ties: equal p go to the lower index first, also at the cut */
	const float t[4] = {1.0f, 1.0f, 1.0f, 1.0f};
	route(t, 4, 2, false, ids, w);
	CHECK(ids[0] == 0 && ids[1] == 1, "all equal: %d %d", ids[0], ids[1]);
	CHECK_NEAR(w[0], 0.25, 0, 1e-6);
	CHECK_NEAR(w[1], 0.25, 0, 1e-6);
	route(t, 4, 2, true, ids, w);
	CHECK(w[0] == 0.5f && w[1] == 0.5f, "all equal, norm: %g %g", (double)w[0], (double)w[1]);
	const float c[5] = {0.0f, 2.0f, 1.0f, 2.0f, 1.0f};
	route(c, 5, 3, false, ids, w);
	CHECK(ids[0] == 1 && ids[1] == 3 && ids[2] == 2, "tie at the top and the cut: %d %d %d",
	      ids[0], ids[1], ids[2]);
	CHECK(w[0] == w[1] && w[2] < w[1], "tied weights equal");
	/* k = 1: renormalized, the weight is exactly 1; without, p = 1 / (1 + e^-6 + e^-0.1) */
	const float k1[3] = {-1.0f, 5.0f, 4.9f};
	route(k1, 3, 1, true, ids, w);
	CHECK(ids[0] == 1 && w[0] == 1.0f, "k = 1 norm: id %d w %.9g", ids[0], (double)w[0]);
	route(k1, 3, 1, false, ids, w);
	CHECK(ids[0] == 1, "k = 1: id %d", ids[0]);
	CHECK_NEAR(w[0], 1.0 / (1.0 + exp(-6.0) + exp(-5.0 + 4.9)), 0, 1e-6);
	/* k = n_expert: every expert once, by descending p; normalized, the weights are p
	 * again (the p sum to 1 up to rounding) */
	const float all[6] = {0.5f, -2.0f, 3.0f, 0.0f, 3.0f, 1.0f};
	const int32_t order[6] = {2, 4, 5, 0, 3, 1};
	double z = 0.0;
	for (int i = 0; i < 6; i++)
		z += exp(all[i]);
	route(all, 6, 6, true, ids, w);
	int bad = 0;
	for (int j = 0; j < 6; j++) {
		bad += ids[j] != order[j];
		bad += fabs(w[j] - exp(all[order[j]]) / z) > 1e-6 * exp(all[order[j]]) / z;
	}
	CHECK(bad == 0, "k = n_expert: ids %d %d %d %d %d %d", ids[0], ids[1], ids[2], ids[3],
	      ids[4], ids[5]);
	/* large logits: the max is subtracted, nothing overflows */
	const float big[2] = {1000.0f, 999.0f};
	route(big, 2, 1, false, ids, w);
	CHECK(ids[0] == 0, "big: id %d", ids[0]);
	CHECK_NEAR(w[0], 1.0 / (1.0 + exp(-1.0)), 0, 1e-6);
	route(big, 2, 2, true, ids, w);
	CHECK_NEAR(w[0] + w[1], 1.0, 0, 1e-6);
	/* NaN logits: weights are NaN, ids still distinct experts in range */
	const float nan3[3] = {NAN, 1.0f, 2.0f};
	route(nan3, 3, 2, true, ids, w);
	CHECK(ids[0] >= 0 && ids[0] < 3 && ids[1] >= 0 && ids[1] < 3 && ids[0] != ids[1],
	      "NaN: ids %d %d", ids[0], ids[1]);
	/* 128 experts, 8 used (Qwen3-30B-A3B): logit e = e mod 37 (a spread with repeats):
	 * the chosen are the 8 of largest logit, lower index first among equals */
	float l128[128];
	for (int e = 0; e < 128; e++)
		l128[e] = (float)(e % 37);
	route(l128, 128, 8, true, ids, w);
	const int32_t want[8] = {36, 73, 110, 35, 72, 109, 34, 71};
	bad = 0;
	float s = 0.0f;
	for (int j = 0; j < 8; j++) {
		bad += ids[j] != want[j];
		s += w[j];
	}
	CHECK(bad == 0 && fabsf(s - 1.0f) < 1e-6f && w[0] == w[1] && w[1] == w[2] && w[3] < w[2],
	      "128 experts: %d %d %d %d %d %d %d %d", ids[0], ids[1], ids[2], ids[3], ids[4],
	      ids[5], ids[6], ids[7]);
	/* w of 36 vs 35: ratio e */
	CHECK_NEAR(w[0] / w[3], exp(1.0), 0, 1e-6);

	/* moe_route_sigmoid (glm4moe): logits ln(1), ln(3), ln(2), ln(1/3) give sigmoid p =
	 * 1/2, 3/4, 2/3, 1/4. Without a bias the top 2 are experts 1 (3/4), 2 (2/3): normed
	 * 9/17, 8/17, times 2.5 = 45/34, 40/34. The bias {0.3, 0, 0, 0.6} makes the selection
	 * values 0.8, 0.75, 0.667, 0.85: experts 3 then 0, whose weights stay the unbiased p
	 * 1/4, 1/2 (normed 1/3, 2/3; not 0.85 / 0.8 normed, which a bias on the weights would
	 * give). */
	const float sg[4] = {0.0f, (float)LN3, (float)LN2, -(float)LN3};
	const float sb[4] = {0.3f, 0.0f, 0.0f, 0.6f};
	moe_route_sigmoid(sg, NULL, 4, 2, true, 2.5f, ids, w);
	CHECK(ids[0] == 1 && ids[1] == 2, "sigmoid top-2 ids %d %d", ids[0], ids[1]);
	CHECK_NEAR(w[0], 45.0 / 34.0, 0, 1e-6);
	CHECK_NEAR(w[1], 40.0 / 34.0, 0, 1e-6);
	moe_route_sigmoid(sg, sb, 4, 2, true, 1.0f, ids, w);
	CHECK(ids[0] == 3 && ids[1] == 0, "selection bias: ids %d %d", ids[0], ids[1]);
	CHECK_NEAR(w[0], 1.0 / 3.0, 0, 1e-6);
	CHECK_NEAR(w[1], 2.0 / 3.0, 0, 1e-6);
	moe_route_sigmoid(sg, sb, 4, 2, false, 1.0f, ids, w);
	CHECK_NEAR(w[0], 0.25, 0, 1e-6);
	CHECK_NEAR(w[1], 0.5, 0, 1e-6);
	/* the norm's sum clamped at 6.103515625e-5 (llama.cpp's): p = sigmoid(-20) ~ 2.06e-9
	 * each, so the normed weights are p / 6.103515625e-5, far below 1/2 */
	const float lo[2] = {-20.0f, -20.0f};
	moe_route_sigmoid(lo, NULL, 2, 2, true, 1.0f, ids, w);
	CHECK_NEAR(w[0], 1.0 / (1.0 + exp(20.0)) / 6.103515625e-5, 0, 1e-5);

	/* moe_route_grouped (deepseek2), 8 experts in 4 groups of 2. Sigmoid p of logits
	 * ln(1), ln(3), ln(2), ln(1/3), ln(4), ln(1/4), ln(1), ln(3): 1/2, 3/4, 2/3, 1/4,
	 * 4/5, 1/5, 1/2, 3/4. Group sums (top 2 of 2): 5/4, 11/12, 1, 5/4: groups 0 and 3
	 * (ties: the lower first, then 3 over 2's 1), so the top 2 of experts {0, 1, 6, 7} are
	 * 1 and 7 (3/4 each: the lower index first), although expert 4 (4/5) is the largest:
	 * its group scores 1. Normed: 1/2 each, times 2. */
	const float gl[8] = {0.0f,	  (float)LN3,	   (float)LN2,
			     -(float)LN3, (float)log(4.0), -(float)log(4.0),
			     0.0f,	  (float)LN3};
	moe_route_grouped(gl, NULL, 8, 2, true, 4, 2, true, 2.0f, ids, w);
	CHECK(ids[0] == 1 && ids[1] == 7, "grouped: ids %d %d (want 1 7)", ids[0], ids[1]);
	CHECK_NEAR(w[0], 1.0, 0, 1e-6);
	CHECK_NEAR(w[1], 1.0, 0, 1e-6);
	/* without groups: experts 4 (4/5) then 1 (3/4) */
	moe_route_grouped(gl, NULL, 8, 2, true, 1, 0, false, 1.0f, ids, w);
	CHECK(ids[0] == 4 && ids[1] == 1 && fabsf(w[0] - 0.8f) < 1e-6f,
	      "ungrouped: ids %d %d (want 4 1)", ids[0], ids[1]);
	/* the selection bias moves the groups: +0.5 on expert 5 makes group 2 score 4/5 +
	 * 7/10 = 3/2, the best; with group 0 (5/4, before 3's equal 5/4) the candidates are
	 * {0, 1, 4, 5}: by p + bias 4 (4/5), 1 (3/4), 5 (7/10); the weights stay p: 4/5, 3/4,
	 * 1/5, not normed */
	const float gb[8] = {0, 0, 0, 0, 0, 0.5f, 0, 0};
	moe_route_grouped(gl, gb, 8, 3, true, 4, 2, false, 1.0f, ids, w);
	CHECK(ids[0] == 4 && ids[1] == 1 && ids[2] == 5, "biased groups: ids %d %d %d", ids[0],
	      ids[1], ids[2]);
	CHECK_NEAR(w[2], 0.2, 0, 1e-6);
	/* softmax gating (DeepSeek-V2): logits ln 1 .. ln 8 give p = (e + 1) / 36; groups of
	 * 2 score 3, 7, 11, 15 (/36): with 1 group used, experts 6 and 7 only: 8/36, 7/36 */
	float sl[8];
	for (int e = 0; e < 8; e++)
		sl[e] = (float)log(e + 1.0);
	moe_route_grouped(sl, NULL, 8, 2, false, 4, 1, false, 1.0f, ids, w);
	CHECK(ids[0] == 7 && ids[1] == 6, "softmax grouped: ids %d %d", ids[0], ids[1]);
	CHECK_NEAR(w[0], 8.0 / 36.0, 0, 1e-6);
	CHECK_NEAR(w[1], 7.0 / 36.0, 0, 1e-6);
	return check_summary();
}
