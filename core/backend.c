#include "backend.h"

#include <stdlib.h>

void backend_destroy(struct backend *b)
{
	if (!b)
		return;
	if (b->ops && b->ops->destroy)
		b->ops->destroy(b->ctx);
	free(b);
}

enum bg_status backend_sample(struct backend *b, const struct backend_sample_row *rows,
			      int32_t n_rows, struct sampler_result *out, struct bg_err *err)
{
	enum bg_status st = b->ops->sample(b->ctx, rows, n_rows, out, err);
	if (st == BG_OK && b->ops->sample_wait)
		st = b->ops->sample_wait(b->ctx, err);
	return st;
}

enum bg_status backend_state_copy_plan(const int32_t *src, const int32_t *dst, int32_t n,
				       int32_t n_slots, int32_t *stage, int32_t *n_stage,
				       struct bg_err *err)
{
	*n_stage = 0;
	if (n < 0)
		return bg_fail(err, BG_ERR_INVALID, "state_copy: n = %d", n);
	for (int32_t i = 0; i < n; i++) {
		if (src[i] < 0 || src[i] >= n_slots || dst[i] < 0 || dst[i] >= n_slots)
			return bg_fail(err, BG_ERR_INVALID,
				       "state_copy: slot %d -> %d out of range [0, %d)", src[i],
				       dst[i], n_slots);
		for (int32_t j = 0; j < i; j++)
			if (dst[j] == dst[i])
				return bg_fail(err, BG_ERR_INVALID,
					       "state_copy: slot %d written twice", dst[i]);
	}
	for (int32_t i = 0; i < n; i++) {
		stage[i] = -1;
		for (int32_t j = 0; j < n && src[i] != dst[i]; j++)
			if (src[i] == dst[j]) {
				stage[i] = (*n_stage)++;
				break;
			}
	}
	return BG_OK;
}
