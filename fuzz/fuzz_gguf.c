/* fuzz_gguf: GGUF files as batchgen reads them: the parser, every accessor, the
 * tokenizer loader, model validation, and a forward pass of the small models that
 * validate. Oracles (beyond "no sanitizer report"):
 *  - a parse gives BG_OK or an error with a message, nothing in between;
 *  - the writer copies every key/value of a parsed file into a file that parses again
 *    with the same keys, types and values (reader and writer agree: issue 16, defect 4);
 *  - a model that validates runs one forward pass of two tokens on the CPU backend (in
 *    recurrent-state slot 0 when it has layers with state).
 * Seeds: fuzz/seeds.sh (small synthetic models in each dtype, hand-made vocabularies).
 */
#include <string.h>

#include "backend.h"
#include "cpu/backend_cpu.h"
#include "fuzz/fuzz_util.h"
#include "model/gguf.h"
#include "model/model.h"
#include "text/tokenizer.h"

/* keys, types and values of a and b are the same (in file order) */
static void same_kvs(const struct gguf_ctx *a, const struct gguf_ctx *b)
{
	FUZZ_CHECK(gguf_n_kv(a) == gguf_n_kv(b), "%llu keys became %llu",
		   (unsigned long long)gguf_n_kv(a), (unsigned long long)gguf_n_kv(b));
	for (uint64_t i = 0; i < gguf_n_kv(a); i++) {
		struct gguf_str ka = gguf_kv_key(a, i);
		char key[300];
		FUZZ_CHECK(ka.len < sizeof key, "key %llu is %llu bytes", (unsigned long long)i,
			   (unsigned long long)ka.len);
		memcpy(key, ka.ptr, ka.len);
		key[ka.len] = 0;
		int64_t j = gguf_find_key(b, key);
		FUZZ_CHECK(j >= 0, "key %llu lost in the copy", (unsigned long long)i);
		FUZZ_CHECK(gguf_kv_type(a, i) == gguf_kv_type(b, (uint64_t)j), "key %s changed type",
			   key);
		char va[256], vb[256];
		gguf_kv_format(a, i, va, sizeof va);
		gguf_kv_format(b, (uint64_t)j, vb, sizeof vb);
		FUZZ_CHECK(strcmp(va, vb) == 0, "key %s: %s became %s", key, va, vb);
	}
}

static void forward(const struct model *m)
{
	const struct model_hparams *hp = &m->hp;
	/* small models only: the point is the validation, not the arithmetic */
	if (m->n_params > (1u << 20) || hp->n_layer > 4 || hp->n_vocab < 1)
		return;
	/* one recurrent-state slot (ignored by a model without state) */
	struct backend_config cfg = {
	    .block_size = 16, .kv_tokens = 32, .n_threads = 1, .n_state_slots = 1};
	struct backend *b = NULL;
	struct bg_err err = {0};
	if (backend_cpu_create(m, &cfg, &b, &err) != BG_OK) {
		FUZZ_CHECK(err.msg[0], "backend_cpu_create failed without a message");
		return;
	}
	int32_t toks[2] = {0, (int32_t)(hp->n_vocab - 1)};
	int32_t table[1] = {0};
	uint8_t want[2] = {0, 1};
	struct backend_seq s = {toks, 2, 0, table, 1, want, NULL, 0};
	struct backend_batch batch = {&s, 1, 1};
	enum bg_status st = b->ops->forward(b->ctx, &batch, &err);
	FUZZ_CHECK(st == BG_OK, "forward of a validated model failed: %s", err.msg);
	float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
	if (logits && st == BG_OK)
		FUZZ_CHECK(b->ops->get_logits(b->ctx, 0, logits, &err) == BG_OK, "get_logits: %s",
			   err.msg);
	free(logits);
	backend_destroy(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	void *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	struct gguf_ctx *g = NULL;
	struct bg_err err = {0};
	enum bg_status st = gguf_parse(buf, size, true, &g, &err);
	if (st != BG_OK) {
		FUZZ_CHECK(g == NULL && err.msg[0], "failed parse: ctx %p, message '%s'", (void *)g,
			   err.msg);
		return 0;
	}
	/* every accessor on every key and tensor */
	for (uint64_t i = 0; i < gguf_n_kv(g); i++) {
		char v[512];
		gguf_kv_format(g, i, v, sizeof v);
		struct gguf_str k = gguf_kv_key(g, i);
		FUZZ_CHECK(k.len > 0 && !memchr(k.ptr, 0, k.len), "key %llu is empty or has a NUL",
			   (unsigned long long)i);
		char key[300];
		if (k.len < sizeof key) {
			memcpy(key, k.ptr, k.len);
			key[k.len] = 0;
			FUZZ_CHECK(gguf_find_key(g, key) == (int64_t)i, "key %s not found", key);
			enum gguf_type et;
			uint64_t n;
			if (gguf_get_arr(g, key, &et, &n) && et == GGUF_TYPE_STRING)
				for (uint64_t j = 0; j < n && j < 64; j++)
					(void)gguf_arr_str(g, key, j);
		}
	}
	for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		char name[300];
		FUZZ_CHECK(t->name.len > 0 && t->name.len < sizeof name &&
			       !memchr(t->name.ptr, 0, t->name.len),
			   "tensor %llu: a name of %llu bytes, or with a NUL",
			   (unsigned long long)i, (unsigned long long)t->name.len);
		memcpy(name, t->name.ptr, t->name.len);
		name[t->name.len] = 0;
		FUZZ_CHECK(gguf_find_tensor(g, name) == t, "tensor %s not found by name", name);
		volatile uint8_t sink = 0;
		if (t->nbytes)
			sink ^= ((const uint8_t *)t->data)[t->nbytes - 1]; /* the range is inside */
		(void)sink;
	}
	/* reader and writer agree */
	struct gguf_writer *w = gguf_writer_create();
	if (w) {
		for (uint64_t i = 0; i < gguf_n_kv(g); i++)
			gguf_writer_copy_kv(w, g, i);
		void *out = NULL;
		size_t out_len = 0;
		if (gguf_writer_to_buffer(w, &out, &out_len, &err) == BG_OK) {
			struct gguf_ctx *g2 = NULL;
			FUZZ_CHECK(gguf_parse(out, out_len, true, &g2, &err) == BG_OK,
				   "the writer's copy does not parse: %s", err.msg);
			same_kvs(g, g2);
			gguf_close(g2);
		}
		gguf_writer_destroy(w);
	}
	/* the tokenizer, when there is one */
	struct tok *t = NULL;
	if (tok_load(g, &t, &err) == BG_OK) {
		int32_t *ids = NULL;
		size_t n = 0;
		if (tok_encode(t, "Hello world <s>\n\xe2\x96\x81 \xff", 20, true, true, &ids, &n,
			       &err) == BG_OK) {
			char *d = NULL;
			size_t dl = 0;
			if (tok_decode(t, ids, n, true, &d, &dl, &err) == BG_OK)
				free(d);
			free(ids);
		}
		tok_free(t);
	}
	/* model validation, which takes the context; then a forward pass */
	struct model *m = NULL;
	if (model_from_gguf(g, &m, &err) == BG_OK) {
		forward(m);
		model_free(m);
	} else {
		FUZZ_CHECK(m == NULL && err.msg[0], "failed model without a message");
	}
	return 0;
}
