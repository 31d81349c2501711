/* synth_util: a synthetic model in memory, as `batchgen synth` writes it (core/model/synth),
 * for the tests (test_model, test_backend_cpu; the GPU tests through gpu_util.h).
 * Header-only, static functions: each test program is one translation unit.
 *
 *   synth_util_gguf(o, &g, err)    the file synth writes for *o, parsed (g owns the bytes);
 *                                  on failure the status, err and g NULL
 *   synth_util_model(o, &m, err)   that file loaded (model_from_gguf); on failure the first
 *                                  failing step's status, err and m NULL; nothing leaks
 */
#ifndef BG_TEST_SYNTH_UTIL_H
#define BG_TEST_SYNTH_UTIL_H

#include "model/gguf.h"
#include "model/model.h"
#include "model/synth.h"
#include "status.h"

static inline enum bg_status synth_util_gguf(const struct synth_opts *o, struct gguf_ctx **g,
					     struct bg_err *err)
{
	void *buf;
	size_t len;
	*g = NULL;
	enum bg_status st = synth_to_buffer(o, &buf, &len, err); /* buf NULL on failure */
	return st ? st : gguf_parse(buf, len, true, g, err);	 /* frees buf on failure */
}

static inline enum bg_status synth_util_model(const struct synth_opts *o, struct model **m,
					      struct bg_err *err)
{
	struct gguf_ctx *g;
	*m = NULL;
	enum bg_status st = synth_util_gguf(o, &g, err);
	return st ? st : model_from_gguf(g, m, err); /* closes g on failure */
}

#endif
