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
