/* test_gguf: the GGUF reader against a real file (values checked against an independent
 * Python reading of stories260K.gguf), the v1 refusal, a writer round trip of every value
 * type and tensor dtype, and hostile inputs: every truncation of the metadata region,
 * seeded byte flips, and hand-made absurd counts, sizes, alignments and shapes. */
#include "model/gguf.h"

#include <stdint.h>
#include <string.h>

#include "b64_util.h"
#include "check.h"

static bool str_is(struct gguf_str s, const char *want)
{
	return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

/* A failure must come with a one-line, nonempty message. */
static bool msg_ok(const struct bg_err *e)
{
	return e->msg[0] != '\0' && strchr(e->msg, '\n') == NULL;
}

/* Touches everything a parsed context exposes, so that ASan sees any bad pointer. */
static uint64_t walk(const struct gguf_ctx *g)
{
	uint64_t h = 0;
	char line[256];
	for (uint64_t i = 0; i < gguf_n_kv(g); i++) {
		struct gguf_str k = gguf_kv_key(g, i);
		h += k.len ? (uint8_t)k.ptr[k.len - 1] : 0;
		h += gguf_kv_format(g, i, line, sizeof line);
	}
	for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		if (t->nbytes)
			h += ((const uint8_t *)t->data)[0] +
			     ((const uint8_t *)t->data)[t->nbytes - 1];
	}
	enum gguf_type et;
	uint64_t n;
	if (gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) && et == GGUF_TYPE_STRING)
		for (uint64_t i = 0; i < n; i++) {
			struct gguf_str s = gguf_arr_str(g, "tokenizer.ggml.tokens", i);
			h += s.len ? (uint8_t)s.ptr[s.len - 1] : 0;
		}
	return h;
}

/* ---- the real file ---- */

static void test_stories(const uint8_t *file, size_t len, const char *path)
{
	struct gguf_ctx *g = NULL;
	struct bg_err err = {0};
	CHECK(gguf_open(path, &g, &err) == BG_OK, "%s", err.msg);
	if (!g)
		return;
	CHECK(gguf_version(g) == 3, "version %u", gguf_version(g));
	CHECK(gguf_alignment(g) == 32, "alignment %u", gguf_alignment(g));
	CHECK(gguf_n_kv(g) == 19, "n_kv %llu", (unsigned long long)gguf_n_kv(g));
	CHECK(gguf_n_tensors(g) == 48, "n_tensors %llu", (unsigned long long)gguf_n_tensors(g));
	struct gguf_str s;
	CHECK(gguf_get_str(g, "general.architecture", &s) && str_is(s, "llama"), "arch");
	CHECK(gguf_get_str(g, "tokenizer.ggml.model", &s) && str_is(s, "llama"), "tok model");
	uint32_t u = 0;
	CHECK(gguf_get_u32(g, "llama.block_count", &u) && u == 5, "block_count %u", u);
	CHECK(gguf_get_u32(g, "llama.embedding_length", &u) && u == 64, "embd %u", u);
	CHECK(gguf_get_u32(g, "llama.feed_forward_length", &u) && u == 172, "ff %u", u);
	CHECK(gguf_get_u32(g, "llama.attention.head_count_kv", &u) && u == 4, "kv %u", u);
	CHECK(gguf_get_u32(g, "llama.context_length", &u) && u == 2048, "ctx %u", u);
	CHECK(gguf_get_u32(g, "tokenizer.ggml.padding_token_id", &u) && u == 4294967295u, "pad");
	int64_t i64 = 0;
	CHECK(gguf_get_i64(g, "tokenizer.ggml.padding_token_id", &i64) && i64 == 4294967295LL,
	      "pad as i64");
	CHECK(!gguf_get_u32(g, "llama.rope.freq_base", &u), "absent key");
	CHECK(gguf_find_key(g, "llama.rope.freq_base") == -1, "absent key index");
	CHECK(!gguf_get_str(g, "llama.block_count", &s), "type mismatch str");
	float f = 0;
	CHECK(gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f) && f == 1e-5f, "eps %g",
	      f);
	CHECK(!gguf_get_f32(g, "llama.block_count", &f), "f32 from an int key");
	enum gguf_type et;
	uint64_t n = 0;
	CHECK(gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) && et == GGUF_TYPE_STRING &&
		  n == 512,
	      "tokens %llu", (unsigned long long)n);
	CHECK(str_is(gguf_arr_str(g, "tokenizer.ggml.tokens", 0), "<unk>"), "tok 0");
	CHECK(str_is(gguf_arr_str(g, "tokenizer.ggml.tokens", 1), "<s>"), "tok 1");
	CHECK(str_is(gguf_arr_str(g, "tokenizer.ggml.tokens", 3), "<0x00>"), "tok 3");
	static float scores[512];
	static int32_t types[512];
	CHECK(gguf_arr_copy_f32(g, "tokenizer.ggml.scores", scores, 512), "scores");
	CHECK(!gguf_arr_copy_f32(g, "tokenizer.ggml.scores", scores, 511), "count mismatch");
	CHECK(gguf_arr_copy_i32(g, "tokenizer.ggml.token_type", types, 512) && types[0] == 2 &&
		  types[1] == 3 && types[3] == 6,
	      "token types %d %d %d", types[0], types[1], types[3]);
	CHECK(!gguf_arr_copy_i32(g, "tokenizer.ggml.tokens", types, 512), "i32 from strings");

	/* shapes and first values, from the independent Python reading */
	const struct gguf_tensor *t = gguf_find_tensor(g, "token_embd.weight");
	CHECK(t && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 512 &&
		  t->type == GGUF_DTYPE_F32 && t->nbytes == 131072 && t->offset == 0,
	      "token_embd");
	if (t) {
		float v[2];
		memcpy(v, t->data, 8);
		CHECK(v[0] == -0.29474878311157227f && v[1] == 0.5618956089019775f,
		      "token_embd values %.9g %.9g", v[0], v[1]);
		/* the mapping starts the data section at byte 14176 */
		CHECK(memcmp(t->data, file + 14176, 8) == 0, "token_embd at 14176");
	}
	t = gguf_find_tensor(g, "blk.4.ffn_down.weight");
	CHECK(t && t->ne[0] == 172 && t->ne[1] == 64 && t->offset == 1082880, "ffn_down");
	if (t) {
		float v;
		memcpy(&v, t->data, 4);
		CHECK(v == -0.04791264981031418f, "ffn_down value %.9g", v);
	}
	t = gguf_find_tensor(g, "output_norm.weight");
	CHECK(t && t->n_dims == 1 && t->ne[0] == 64 && t->ne[1] == 1, "output_norm");
	CHECK(gguf_find_tensor(g, "blk.5.attn_q.weight") == NULL, "absent tensor");
	CHECK(gguf_tensor(g, 0) == gguf_find_tensor(g, "token_embd.weight"), "tensor order");

	char line[64];
	int64_t ki = gguf_find_key(g, "tokenizer.ggml.tokens");
	CHECK(ki >= 0, "tokens key index");
	if (ki >= 0) {
		size_t k = gguf_kv_format(g, (uint64_t)ki, line, sizeof line);
		CHECK(k == strlen("[512 x str]") && strcmp(line, "[512 x str]") == 0, "fmt %s",
		      line);
	}
	ki = gguf_find_key(g, "general.name");
	if (ki >= 0) {
		gguf_kv_format(g, (uint64_t)ki, line, sizeof line);
		CHECK(strcmp(line, "\"llama\"") == 0, "fmt %s", line);
		char small[4];
		size_t k = gguf_kv_format(g, (uint64_t)ki, small, sizeof small);
		CHECK(k == 7 && strcmp(small, "\"ll") == 0, "truncated fmt %zu %s", k, small);
	}
	gguf_close(g);

	/* the same bytes from a buffer give the same context */
	CHECK(gguf_parse(file, len, false, &g, &err) == BG_OK, "%s", err.msg);
	if (g) {
		CHECK(gguf_n_tensors(g) == 48, "parse: tensors");
		CHECK(gguf_find_tensor(g, "token_embd.weight")->data == file + 14176, "in buffer");
		gguf_close(g);
	}
}

/* ---- v1 ---- */

static void test_v1(void)
{
	const char *p = check_shared("models/tinyllamas-stories-260k-f32.gguf");
	if (!p)
		return;
	struct gguf_ctx *g = NULL;
	struct bg_err err = {0};
	enum bg_status st = gguf_open(p, &g, &err);
	CHECK(st == BG_ERR_UNSUPPORTED && g == NULL, "v1 status %d", st);
	CHECK(strstr(err.msg, "GGUF version 1 is not supported") && strstr(err.msg, p) &&
		  msg_ok(&err),
	      "v1 message: %s", err.msg);
}

/* ---- writer round trip ---- */

static enum bg_status fill_ramp(void *arg, const char *name, void *dst, size_t nbytes,
				struct bg_err *err)
{
	(void)name;
	(void)err;
	for (size_t i = 0; i < nbytes; i++)
		((uint8_t *)dst)[i] = (uint8_t)(i * 7 + *(int *)arg);
	return BG_OK;
}

static void put(uint8_t **p, const void *v, size_t n)
{
	memcpy(*p, v, n);
	*p += n;
}

static void test_writer(void)
{
	struct gguf_writer *w = gguf_writer_create();
	BG_ASSERT(w);
	gguf_writer_set_str(w, "general.architecture", "llama");
	gguf_writer_set_u32(w, "a.u32", 4000000000u);
	gguf_writer_set_i32(w, "a.i32", -7);
	gguf_writer_set_f32(w, "a.f32", 1.5f);
	gguf_writer_set_bool(w, "a.bool", true);
	gguf_writer_set_str(w, "a.str", "line\none \"q\"");
	gguf_writer_set_str(w, "a.empty", "");
	const char *strs[] = {"x", "", "hello world"};
	gguf_writer_set_arr_str(w, "a.arr_str", strs, 3);
	float fa[] = {0.25f, -2.0f};
	gguf_writer_set_arr_f32(w, "a.arr_f32", fa, 2);
	int32_t ia[] = {1, -2, 3, 2147483647};
	gguf_writer_set_arr_i32(w, "a.arr_i32", ia, 4);
	gguf_writer_set_arr_i32(w, "a.arr_empty", NULL, 0);
	gguf_writer_set_u32(w, "a.replaced", 1);
	gguf_writer_set_u32(w, "a.replaced", 2);
	uint8_t u8 = 200;
	int8_t i8 = -100;
	uint16_t u16 = 60000;
	int16_t i16 = -30000;
	uint64_t u64 = UINT64_MAX;
	int64_t i64 = INT64_MIN;
	double f64 = 3.0e100;
	gguf_writer_set_raw(w, "a.u8", GGUF_TYPE_UINT8, &u8, 1);
	gguf_writer_set_raw(w, "a.i8", GGUF_TYPE_INT8, &i8, 1);
	gguf_writer_set_raw(w, "a.u16", GGUF_TYPE_UINT16, &u16, 2);
	gguf_writer_set_raw(w, "a.i16", GGUF_TYPE_INT16, &i16, 2);
	gguf_writer_set_raw(w, "a.u64", GGUF_TYPE_UINT64, &u64, 8);
	gguf_writer_set_raw(w, "a.i64", GGUF_TYPE_INT64, &i64, 8);
	gguf_writer_set_raw(w, "a.f64", GGUF_TYPE_FLOAT64, &f64, 8);
	/* nested: [[1u8, 2u8], ["s"]] */
	uint8_t nest[128], *p = nest;
	uint32_t t_arr = GGUF_TYPE_ARRAY, t_u8 = GGUF_TYPE_UINT8, t_str = GGUF_TYPE_STRING;
	uint64_t two = 2, one = 1;
	put(&p, &t_arr, 4);
	put(&p, &two, 8);
	put(&p, &t_u8, 4);
	put(&p, &two, 8);
	put(&p, "\x01\x02", 2);
	put(&p, &t_str, 4);
	put(&p, &one, 8);
	put(&p, &one, 8);
	put(&p, "s", 1);
	gguf_writer_set_raw(w, "a.nested", GGUF_TYPE_ARRAY, nest, (size_t)(p - nest));
	double f64s[] = {0.5, -1e300};
	uint8_t f64arr[12 + 16], *q = f64arr;
	uint32_t t_f64 = GGUF_TYPE_FLOAT64;
	put(&q, &t_f64, 4);
	put(&q, &two, 8);
	put(&q, f64s, 16);
	gguf_writer_set_raw(w, "a.arr_f64", GGUF_TYPE_ARRAY, f64arr, sizeof f64arr);

	/* tensors of every dtype, 1 to 4 dims; sizes not multiples of the alignment */
	static float d32[3 * 5];
	static uint16_t d16[7];
	static uint16_t dbf[2 * 3 * 4 * 5];
	static uint8_t dq8[34 * 2 * 3];
	for (size_t i = 0; i < sizeof d32 / 4; i++)
		d32[i] = (float)i - 3.5f;
	for (size_t i = 0; i < 7; i++)
		d16[i] = (uint16_t)(0x3c00 + i);
	for (size_t i = 0; i < sizeof dbf / 2; i++)
		dbf[i] = (uint16_t)(i * 131);
	for (size_t i = 0; i < sizeof dq8; i++)
		dq8[i] = (uint8_t)(i * 13);
	int seed = 5;
	gguf_writer_add_tensor(w, "t.f32", GGUF_DTYPE_F32, 2, (uint64_t[]){5, 3}, d32);
	gguf_writer_add_tensor(w, "t.f16", GGUF_DTYPE_F16, 1, (uint64_t[]){7}, d16);
	gguf_writer_add_tensor(w, "t.bf16", GGUF_DTYPE_BF16, 4, (uint64_t[]){2, 3, 4, 5}, dbf);
	gguf_writer_add_tensor(w, "t.q8_0", GGUF_DTYPE_Q8_0, 3, (uint64_t[]){64, 3, 1}, dq8);
	gguf_writer_add_tensor_fill(w, "t.fill", GGUF_DTYPE_F16, 2, (uint64_t[]){9, 11}, fill_ramp,
				    &seed);

	void *buf = NULL;
	size_t len = 0;
	struct bg_err err = {0};
	CHECK(gguf_writer_to_buffer(w, &buf, &len, &err) == BG_OK, "%s", err.msg);
	const char *path = "/tmp/test_gguf_roundtrip.gguf";
	char tmpl[] = "/tmp/test_gguf_XXXXXX";
	int fd = mkstemp(tmpl);
	if (fd >= 0) {
		close(fd);
		path = tmpl;
	}
	CHECK(gguf_writer_write(w, path, &err) == BG_OK, "%s", err.msg);
	size_t flen = 0;
	uint8_t *fbytes = check_read_file(path, &flen);
	CHECK(fbytes && flen == len && memcmp(fbytes, buf, len) == 0,
	      "file and buffer bytes differ (%zu vs %zu)", flen, len);
	free(fbytes);
	gguf_writer_destroy(w);

	struct gguf_ctx *g = NULL;
	CHECK(gguf_open(path, &g, &err) == BG_OK, "reparse: %s", err.msg);
	unlink(path);
	if (!g) {
		free(buf);
		return;
	}
	CHECK(gguf_version(g) == 3, "written version");
	CHECK(gguf_n_kv(g) == 21, "n_kv %llu", (unsigned long long)gguf_n_kv(g));
	uint32_t u;
	int64_t v64;
	float f;
	bool b;
	struct gguf_str s;
	CHECK(gguf_get_u32(g, "a.u32", &u) && u == 4000000000u, "u32");
	CHECK(!gguf_get_u32(g, "a.i32", &u), "negative into u32");
	CHECK(gguf_get_i64(g, "a.i32", &v64) && v64 == -7, "i32");
	CHECK(gguf_get_f32(g, "a.f32", &f) && f == 1.5f, "f32");
	CHECK(gguf_get_bool(g, "a.bool", &b) && b, "bool");
	CHECK(!gguf_get_bool(g, "a.u8", &b), "bool from u8");
	CHECK(gguf_get_str(g, "a.str", &s) && str_is(s, "line\none \"q\""), "str");
	CHECK(gguf_get_str(g, "a.empty", &s) && s.len == 0, "empty str");
	CHECK(gguf_get_u32(g, "a.replaced", &u) && u == 2, "replaced %u", u);
	CHECK(gguf_get_u32(g, "a.u8", &u) && u == 200, "u8");
	CHECK(gguf_get_i64(g, "a.i8", &v64) && v64 == -100, "i8");
	CHECK(gguf_get_u32(g, "a.u16", &u) && u == 60000, "u16");
	CHECK(gguf_get_i64(g, "a.i16", &v64) && v64 == -30000, "i16");
	CHECK(!gguf_get_u32(g, "a.u64", &u) && !gguf_get_i64(g, "a.u64", &v64), "u64 max");
	CHECK(gguf_get_i64(g, "a.i64", &v64) && v64 == INT64_MIN, "i64");
	CHECK(gguf_get_f32(g, "a.f64", &f) && f == (float)3.0e100, "f64");
	enum gguf_type et;
	uint64_t n;
	CHECK(gguf_get_arr(g, "a.arr_str", &et, &n) && et == GGUF_TYPE_STRING && n == 3, "astr");
	CHECK(str_is(gguf_arr_str(g, "a.arr_str", 2), "hello world") &&
		  str_is(gguf_arr_str(g, "a.arr_str", 1), ""),
	      "astr values");
	float fo[2];
	CHECK(gguf_arr_copy_f32(g, "a.arr_f32", fo, 2) && fo[0] == 0.25f && fo[1] == -2.0f, "af32");
	CHECK(gguf_arr_copy_f32(g, "a.arr_f64", fo, 2) && fo[0] == 0.5f && isinf(fo[1]), "af64");
	int32_t io[4];
	CHECK(gguf_arr_copy_i32(g, "a.arr_i32", io, 4) && memcmp(io, ia, sizeof ia) == 0, "ai32");
	CHECK(gguf_get_arr(g, "a.arr_empty", &et, &n) && n == 0 && et == GGUF_TYPE_INT32, "aempty");
	CHECK(gguf_get_arr(g, "a.nested", &et, &n) && et == GGUF_TYPE_ARRAY && n == 2, "nested");
	char line[128];
	int64_t ki = gguf_find_key(g, "a.str");
	if (ki >= 0) {
		gguf_kv_format(g, (uint64_t)ki, line, sizeof line);
		CHECK(strcmp(line, "\"line\\none \\\"q\\\"\"") == 0, "fmt str %s", line);
	}
	ki = gguf_find_key(g, "a.arr_i32");
	if (ki >= 0) {
		gguf_kv_format(g, (uint64_t)ki, line, sizeof line);
		CHECK(strcmp(line, "[1, -2, 3, 2147483647]") == 0, "fmt arr %s", line);
	}
	ki = gguf_find_key(g, "a.nested");
	if (ki >= 0) {
		gguf_kv_format(g, (uint64_t)ki, line, sizeof line);
		CHECK(strcmp(line, "[2 x arr]") == 0, "fmt nested %s", line);
	}

	const struct gguf_tensor *t = gguf_find_tensor(g, "t.f32");
	CHECK(t && t->type == GGUF_DTYPE_F32 && t->ne[0] == 5 && t->ne[1] == 3 && t->nbytes == 60 &&
		  memcmp(t->data, d32, 60) == 0,
	      "t.f32");
	t = gguf_find_tensor(g, "t.f16");
	CHECK(t && t->type == GGUF_DTYPE_F16 && t->n_dims == 1 && t->nbytes == 14 &&
		  memcmp(t->data, d16, 14) == 0,
	      "t.f16");
	t = gguf_find_tensor(g, "t.bf16");
	CHECK(t && t->type == GGUF_DTYPE_BF16 && t->n_dims == 4 && t->ne[3] == 5 &&
		  t->nbytes == sizeof dbf && memcmp(t->data, dbf, sizeof dbf) == 0,
	      "t.bf16");
	t = gguf_find_tensor(g, "t.q8_0");
	CHECK(t && t->type == GGUF_DTYPE_Q8_0 && t->n_dims == 3 && t->nbytes == sizeof dq8 &&
		  memcmp(t->data, dq8, sizeof dq8) == 0,
	      "t.q8_0");
	t = gguf_find_tensor(g, "t.fill");
	CHECK(t && t->nbytes == 9 * 11 * 2, "t.fill");
	if (t) {
		uint8_t want[198];
		fill_ramp(&seed, "", want, sizeof want, NULL);
		CHECK(memcmp(t->data, want, sizeof want) == 0, "t.fill data");
	}
	for (uint64_t i = 0; i < gguf_n_tensors(g); i++)
		CHECK(gguf_tensor(g, i)->offset % 32 == 0, "aligned");

	/* copying every key/value verbatim reproduces the metadata bytes */
	struct gguf_writer *w2 = gguf_writer_create();
	for (uint64_t i = 0; i < gguf_n_kv(g); i++)
		gguf_writer_copy_kv(w2, g, i);
	for (uint64_t i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *ti = gguf_tensor(g, i);
		char name[64];
		snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
		gguf_writer_add_tensor(w2, name, ti->type, ti->n_dims, ti->ne, ti->data);
	}
	void *buf2 = NULL;
	size_t len2 = 0;
	CHECK(gguf_writer_to_buffer(w2, &buf2, &len2, &err) == BG_OK, "%s", err.msg);
	CHECK(len2 == len && memcmp(buf, buf2, len) == 0, "copy_kv round trip differs");
	free(buf2);
	gguf_writer_destroy(w2);
	gguf_close(g);

	/* a custom alignment is honoured */
	w2 = gguf_writer_create();
	gguf_writer_set_u32(w2, "general.alignment", 64);
	gguf_writer_add_tensor(w2, "a", GGUF_DTYPE_F32, 1, (uint64_t[]){3}, d32);
	gguf_writer_add_tensor(w2, "b", GGUF_DTYPE_F32, 1, (uint64_t[]){3}, d32);
	CHECK(gguf_writer_to_buffer(w2, &buf2, &len2, &err) == BG_OK, "%s", err.msg);
	gguf_writer_destroy(w2);
	CHECK(gguf_parse(buf2, len2, true, &g, &err) == BG_OK, "%s", err.msg);
	if (g) {
		CHECK(
		    gguf_alignment(g) == 64 && gguf_find_tensor(g, "b")->offset == 64 &&
			((const uint8_t *)gguf_find_tensor(g, "a")->data - (const uint8_t *)buf2) %
				64 ==
			    0,
		    "alignment 64");
		gguf_close(g);
	}

	/* writer misuse is reported at write time */
	w2 = gguf_writer_create();
	gguf_writer_add_tensor(w2, "a", GGUF_DTYPE_F32, 1, (uint64_t[]){3}, d32);
	gguf_writer_add_tensor(w2, "a", GGUF_DTYPE_F32, 1, (uint64_t[]){3}, d32);
	CHECK(gguf_writer_to_buffer(w2, &buf2, &len2, &err) == BG_ERR_INVALID &&
		  strstr(err.msg, "'a'"),
	      "duplicate tensor: %s", err.msg);
	gguf_writer_destroy(w2);
	w2 = gguf_writer_create();
	gguf_writer_add_tensor(w2, "q", GGUF_DTYPE_Q8_0, 1, (uint64_t[]){33}, dq8);
	CHECK(gguf_writer_to_buffer(w2, &buf2, &len2, &err) == BG_ERR_INVALID &&
		  strstr(err.msg, "'q'"),
	      "q8_0 row: %s", err.msg);
	gguf_writer_destroy(w2);
	w2 = gguf_writer_create();
	CHECK(gguf_writer_write(w2, "/nonexistent-dir/x.gguf", &err) == BG_ERR_IO, "bad path");
	gguf_writer_destroy(w2);

	free(buf);
}

/* ---- hostile inputs ---- */

/* Parses a private copy of buf[0, len) in an exact-size allocation so that ASan catches
 * any read past the end. */
static enum bg_status parse_copy(const uint8_t *buf, size_t len, struct bg_err *err,
				 uint64_t *walked)
{
	uint8_t *c = malloc(len ? len : 1);
	memcpy(c, buf, len);
	struct gguf_ctx *g = NULL;
	enum bg_status st = gguf_parse(c, len, true, &g, err);
	if (st == BG_OK && walked)
		*walked = walk(g);
	gguf_close(g);
	return st;
}

static void test_truncations(const uint8_t *file, size_t len)
{
	const size_t data_start = 14176;
	int n_bad = 0, n_bad_msg = 0;
	struct bg_err err;
	for (size_t l = 0; l < data_start; l++) {
		err.msg[0] = '\0';
		enum bg_status st = parse_copy(file, l, &err, NULL);
		if (st == BG_OK)
			n_bad++;
		else if (!msg_ok(&err))
			n_bad_msg++;
	}
	CHECK(n_bad == 0, "%d truncations of the metadata parsed", n_bad);
	CHECK(n_bad_msg == 0, "%d truncations had no one-line message", n_bad_msg);
	/* inside the data region the tensor ranges catch it */
	n_bad = 0;
	for (size_t l = data_start; l < len; l += 9973) {
		enum bg_status st = parse_copy(file, l, &err, NULL);
		if (st != BG_ERR_FORMAT || !strstr(err.msg, "outside the data section"))
			n_bad++;
	}
	enum bg_status st = parse_copy(file, len - 1, &err, NULL);
	CHECK(st == BG_ERR_FORMAT && strstr(err.msg, "blk.4.ffn_norm.weight"),
	      "last byte missing: %s", err.msg);
	CHECK(n_bad == 0, "%d data-region truncations not caught", n_bad);
	CHECK(parse_copy(file, len, &err, NULL) == BG_OK, "whole file: %s", err.msg);
}

static void test_flips(const uint8_t *file, size_t len)
{
	const size_t region = 14176;
	uint8_t *c = malloc(len);
	memcpy(c, file, len);
	uint64_t x = 0x9e3779b97f4a7c15ull; /* xorshift64 state, fixed seed */
	int n_ok = 0, n_fail = 0, n_bad_msg = 0;
	uint64_t h = 0;
	for (int it = 0; it < 3000; it++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t pos = (size_t)(x % region);
		uint8_t old = c[pos];
		/* mostly single-bit flips, sometimes a whole random byte */
		c[pos] =
		    (it % 4 == 0) ? (uint8_t)(x >> 32) : (uint8_t)(old ^ (1u << ((x >> 40) & 7)));
		struct gguf_ctx *g = NULL;
		struct bg_err err = {0};
		if (gguf_parse(c, len, false, &g, &err) == BG_OK) {
			n_ok++;
			h += walk(g);
			gguf_close(g);
		} else {
			n_fail++;
			if (!msg_ok(&err))
				n_bad_msg++;
		}
		c[pos] = old;
	}
	/* interesting 64-bit values written over random positions: hits the length and count
	 * fields (which are not aligned) with huge, wrapping and boundary values */
	static const uint64_t vals[] = {0,
					1,
					31,
					32,
					33,
					0xffffffffull,
					0x100000000ull,
					(uint64_t)1 << 61,
					(uint64_t)1 << 63,
					UINT64_MAX,
					UINT64_MAX - 31,
					14176,
					1185376};
	for (int it = 0; it < 2000; it++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t pos = (size_t)(x % (region - 8));
		uint8_t old[8];
		memcpy(old, c + pos, 8);
		uint64_t v = vals[(x >> 40) % (sizeof vals / sizeof vals[0])];
		memcpy(c + pos, &v, (x >> 50) & 1 ? 8 : 4);
		struct gguf_ctx *g = NULL;
		struct bg_err err = {0};
		if (gguf_parse(c, len, false, &g, &err) == BG_OK) {
			n_ok++;
			h += walk(g);
			gguf_close(g);
		} else {
			n_fail++;
			if (!msg_ok(&err))
				n_bad_msg++;
		}
		memcpy(c + pos, old, 8);
	}
	(void)h;
	CHECK(n_bad_msg == 0, "%d flips failed without a one-line message", n_bad_msg);
	/* both outcomes must occur, or the test is not exercising the parser */
	CHECK(n_ok > 0 && n_fail > 0, "flips: %d parsed, %d refused", n_ok, n_fail);
	free(c);
}

/* A hand-made file: a builder with room for what the cases need. */
struct fb {
	uint8_t b[4096];
	size_t n;
};

static void fb_u32(struct fb *f, uint32_t v)
{
	memcpy(f->b + f->n, &v, 4);
	f->n += 4;
}
static void fb_u64(struct fb *f, uint64_t v)
{
	memcpy(f->b + f->n, &v, 8);
	f->n += 8;
}
static void fb_str(struct fb *f, const char *s)
{
	fb_u64(f, strlen(s));
	memcpy(f->b + f->n, s, strlen(s));
	f->n += strlen(s);
}
static void fb_header(struct fb *f, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
	f->n = 0;
	memcpy(f->b, "GGUF", 4);
	f->n = 4;
	fb_u32(f, version);
	fb_u64(f, n_tensors);
	fb_u64(f, n_kv);
}
/* A tensor info with the given dims/type/offset. */
static void fb_tensor(struct fb *f, const char *name, uint32_t n_dims, const uint64_t *ne,
		      uint32_t type, uint64_t offset)
{
	fb_str(f, name);
	fb_u32(f, n_dims);
	for (uint32_t i = 0; i < n_dims && i < 8; i++)
		fb_u64(f, ne[i]);
	fb_u32(f, type);
	fb_u64(f, offset);
}
/* Pads to 32 and appends n zero data bytes. */
static void fb_data(struct fb *f, size_t n)
{
	while (f->n % 32)
		f->b[f->n++] = 0;
	memset(f->b + f->n, 0, n);
	f->n += n;
}

static void expect(const char *what, struct fb *f, enum bg_status want, const char *needle)
{
	struct bg_err err = {0};
	enum bg_status st = parse_copy(f->b, f->n, &err, NULL);
	CHECK(st == want && msg_ok(&err) && (!needle || strstr(err.msg, needle)),
	      "%s: status %d (want %d), message: %s", what, st, want, err.msg);
}

static void test_crafted(void)
{
	struct fb f;
	struct bg_err err;

	/* baseline: one key, one tensor, parses */
	fb_header(&f, 3, 1, 1);
	fb_str(&f, "k");
	fb_u32(&f, GGUF_TYPE_UINT32);
	fb_u32(&f, 7);
	fb_tensor(&f, "w", 2, (uint64_t[]){4, 2}, GGUF_DTYPE_F32, 0);
	fb_data(&f, 32);
	CHECK(parse_copy(f.b, f.n, &err, NULL) == BG_OK, "baseline: %s", err.msg);
	fb_header(&f, 2, 0, 0);
	CHECK(parse_copy(f.b, f.n, &err, NULL) == BG_OK, "empty v2: %s", err.msg);

	memcpy(f.b, "GGUX", 4);
	expect("bad magic", &f, BG_ERR_FORMAT, "not a GGUF file");
	fb_header(&f, 0x03000000, 0, 0);
	expect("big endian", &f, BG_ERR_UNSUPPORTED, "big-endian");
	fb_header(&f, 4, 0, 0);
	expect("v4", &f, BG_ERR_UNSUPPORTED, "version 4");

	fb_header(&f, 3, 0, UINT64_MAX);
	expect("n_kv huge", &f, BG_ERR_FORMAT, "key/value pairs");
	fb_header(&f, 3, (uint64_t)1 << 62, 0);
	expect("n_tensors huge", &f, BG_ERR_FORMAT, "tensors");

	fb_header(&f, 3, 0, 1);
	fb_u64(&f, (uint64_t)1 << 63);
	fb_data(&f, 64); /* enough bytes that the count itself is plausible */
	expect("key length huge", &f, BG_ERR_FORMAT, "impossible length");
	fb_header(&f, 3, 0, 1);
	fb_u64(&f, 0);
	fb_u32(&f, 0);
	fb_data(&f, 64);
	expect("empty key", &f, BG_ERR_FORMAT, "impossible length");

	fb_header(&f, 3, 0, 1);
	fb_str(&f, "s");
	fb_u32(&f, GGUF_TYPE_STRING);
	fb_u64(&f, UINT64_MAX - 3);
	expect("string length huge", &f, BG_ERR_FORMAT, "'s'");

	fb_header(&f, 3, 0, 1);
	fb_str(&f, "a");
	fb_u32(&f, GGUF_TYPE_ARRAY);
	fb_u32(&f, GGUF_TYPE_STRING);
	fb_u64(&f, (uint64_t)1 << 61);
	expect("string array count huge", &f, BG_ERR_FORMAT, "claims");
	fb_header(&f, 3, 0, 1);
	fb_str(&f, "a");
	fb_u32(&f, GGUF_TYPE_ARRAY);
	fb_u32(&f, GGUF_TYPE_UINT64);
	fb_u64(&f, ((uint64_t)1 << 61) + 1); /* * 8 wraps to 8 */
	fb_u64(&f, 0);
	expect("u64 array count wrapping", &f, BG_ERR_FORMAT, "claims");
	fb_header(&f, 3, 0, 1);
	fb_str(&f, "a");
	fb_u32(&f, GGUF_TYPE_ARRAY);
	fb_u32(&f, 13);
	fb_u64(&f, 0);
	expect("bad element type", &f, BG_ERR_FORMAT, "element type 13");
	fb_header(&f, 3, 0, 1);
	fb_str(&f, "a");
	fb_u32(&f, 99);
	expect("bad value type", &f, BG_ERR_FORMAT, "value type 99");
	fb_header(&f, 3, 0, 1);
	fb_str(&f, "deep");
	fb_u32(&f, GGUF_TYPE_ARRAY);
	for (int i = 0; i < 100; i++) {
		fb_u32(&f, GGUF_TYPE_ARRAY);
		fb_u64(&f, 1);
	}
	fb_u32(&f, GGUF_TYPE_UINT8);
	fb_u64(&f, 0);
	expect("deep nesting", &f, BG_ERR_FORMAT, "nests");

	fb_header(&f, 3, 0, 2);
	fb_str(&f, "k");
	fb_u32(&f, GGUF_TYPE_BOOL);
	f.b[f.n++] = 1;
	fb_str(&f, "k");
	fb_u32(&f, GGUF_TYPE_BOOL);
	f.b[f.n++] = 0;
	expect("duplicate key", &f, BG_ERR_FORMAT, "duplicate key 'k'");

	uint32_t aligns[] = {0, 3, 48, 1u << 31};
	for (int i = 0; i < 4; i++) {
		fb_header(&f, 3, 0, 1);
		fb_str(&f, "general.alignment");
		fb_u32(&f, GGUF_TYPE_UINT32);
		fb_u32(&f, aligns[i]);
		expect("bad alignment", &f, BG_ERR_FORMAT, "power of two");
	}
	fb_header(&f, 3, 0, 1);
	fb_str(&f, "general.alignment");
	fb_u32(&f, GGUF_TYPE_STRING);
	fb_str(&f, "32");
	expect("alignment as string", &f, BG_ERR_FORMAT, "general.alignment");

	/* tensor infos */
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "w5", 5, (uint64_t[]){1, 1, 1, 1, 1}, 0, 0);
	fb_data(&f, 32);
	expect("5 dims", &f, BG_ERR_FORMAT, "'w5' has 5 dimensions");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "w0", 0, NULL, 0, 0);
	fb_data(&f, 32);
	expect("0 dims", &f, BG_ERR_FORMAT, "'w0'");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "big", 2, (uint64_t[]){(uint64_t)1 << 32, (uint64_t)1 << 32}, 0, 0);
	fb_data(&f, 32);
	expect("ne product overflow", &f, BG_ERR_FORMAT, "'big'");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "big", 4, (uint64_t[]){65536, 65536, 65536, 65536}, 0, 0);
	fb_data(&f, 32);
	expect("4-d product overflow", &f, BG_ERR_FORMAT, "'big'");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "neg", 1, (uint64_t[]){UINT64_MAX}, 0, 0);
	fb_data(&f, 32);
	expect("negative ne", &f, BG_ERR_FORMAT, "'neg'");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "bytes", 1, (uint64_t[]){(uint64_t)1 << 62}, 0, 0);
	fb_data(&f, 32);
	expect("byte count overflow", &f, BG_ERR_FORMAT, "'bytes'");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "huge", 2, (uint64_t[]){1 << 20, 1 << 20}, 0, 0);
	fb_data(&f, 32);
	expect("data outside file", &f, BG_ERR_FORMAT, "'huge'");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "t1", 1, (uint64_t[]){256}, 34, 0); /* tq1_0: not supported */
	fb_data(&f, 128);
	expect("tq1_0", &f, BG_ERR_UNSUPPORTED, "'t1' has type tq1_0 (id 34)");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "q2", 1, (uint64_t[]){256}, 16, 0); /* iq2_xxs: 66 bytes a block */
	fb_data(&f, 128);
	struct bg_err e2 = {0};
	CHECK(parse_copy(f.b, f.n, &e2, NULL) == BG_OK, "iq2_xxs (66-byte blocks) parses: %s",
	      e2.msg);
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "q81", 1, (uint64_t[]){32}, 9, 0); /* q8_1: an activation type only */
	fb_data(&f, 64);
	expect("q8_1", &f, BG_ERR_UNSUPPORTED, "'q81' has type q8_1");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "q4k", 1, (uint64_t[]){128}, GGUF_DTYPE_Q4_K, 0);
	fb_data(&f, 160);
	expect("q4_K row not a super-block multiple", &f, BG_ERR_FORMAT, "'q4k' of type q4_K");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "odd", 1, (uint64_t[]){33}, GGUF_DTYPE_Q8_0, 0);
	fb_data(&f, 64);
	expect("q8_0 row not a block multiple", &f, BG_ERR_FORMAT, "'odd'");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "un", 1, (uint64_t[]){4}, 0, 4);
	fb_data(&f, 64);
	expect("unaligned offset", &f, BG_ERR_FORMAT, "'un' has offset 4");
	fb_header(&f, 3, 1, 0);
	fb_tensor(&f, "wrap", 1, (uint64_t[]){16}, 0, UINT64_MAX - 31);
	fb_data(&f, 64);
	expect("offset + size wraps", &f, BG_ERR_FORMAT, "'wrap'");
	fb_header(&f, 3, 2, 0);
	fb_tensor(&f, "d", 1, (uint64_t[]){4}, 0, 0);
	fb_tensor(&f, "d", 1, (uint64_t[]){4}, 0, 32);
	fb_data(&f, 64);
	expect("duplicate tensor", &f, BG_ERR_FORMAT, "duplicate tensor name 'd'");
	fb_header(&f, 3, 1, 0);
	fb_u64(&f, 1000);
	fb_data(&f, 64);
	expect("tensor name length", &f, BG_ERR_FORMAT, "tensor name 0 has an impossible length");
	/* a hostile key with a newline still gives a one-line message */
	fb_header(&f, 3, 0, 1);
	fb_str(&f, "bad\nkey");
	fb_u32(&f, 42);
	expect("newline in key", &f, BG_ERR_FORMAT, "'bad?key'");

	/* gguf_open on things that are not GGUF files */
	struct gguf_ctx *g = NULL;
	CHECK(gguf_open("/nonexistent/x.gguf", &g, &err) == BG_ERR_IO && g == NULL &&
		  strstr(err.msg, "/nonexistent/x.gguf"),
	      "missing file: %s", err.msg);
	CHECK(gguf_open("/tmp", &g, &err) == BG_ERR_IO, "directory: %s", err.msg);
	CHECK(gguf_open("/dev/null", &g, &err) != BG_OK, "dev null");
}

/* Issue 16, defect 4: keys (and tensor names) with a NUL byte. The reader accepted them,
 * the writer cut them at the NUL, so `synth --vocab-from` a file with the key
 * "tokenizer.ggml.model\0evil" replaced the real tokenizer.ggml.model. Both are refused. */
static void test_nul_in_names(void)
{
	size_t len;
	unsigned char *buf =
	    b64_decode("R0dVRgMAAAAAAAAAAAAAAAEAAAAAAAAAAgAAAAAAAAAAawgAAAABAAAAAAAAAHY=", &len);
	CHECK(buf && len == 47, "base64");
	struct fb f;
	if (buf) {
		memcpy(f.b, buf, len);
		f.n = len;
		expect("the issue's key \"\\0k\"", &f, BG_ERR_FORMAT, "NUL byte");
		free(buf);
	}
	static const char k[] = "tokenizer.ggml.model\0evil";
	fb_header(&f, 3, 0, 2);
	fb_str(&f, "tokenizer.ggml.model");
	fb_u32(&f, GGUF_TYPE_STRING);
	fb_str(&f, "gpt2");
	fb_u64(&f, sizeof k - 1);
	memcpy(f.b + f.n, k, sizeof k - 1);
	f.n += sizeof k - 1;
	fb_u32(&f, GGUF_TYPE_STRING);
	fb_str(&f, "bert");
	expect("a key that reads as tokenizer.ggml.model", &f, BG_ERR_FORMAT, "NUL byte");
	f.b[f.n - 4 - 8 - 4 - 5] = '_'; /* the NUL of the key becomes '_': accepted */
	struct bg_err err = {0};
	CHECK(parse_copy(f.b, f.n, &err, NULL) == BG_OK, "the same key without NUL: %s",
	      err.msg);
	fb_header(&f, 3, 1, 0);
	fb_u64(&f, 3);
	memcpy(f.b + f.n, "w\0x", 3);
	f.n += 3;
	fb_u32(&f, 1);
	fb_u64(&f, 8);
	fb_u32(&f, GGUF_DTYPE_F32);
	fb_u64(&f, 0);
	fb_data(&f, 32);
	expect("a tensor name with a NUL", &f, BG_ERR_FORMAT, "NUL byte");
}

int main(void)
{
	const char *p = check_shared("models/stories260K.gguf");
	if (p) {
		size_t len = 0;
		uint8_t *file = check_read_file(p, &len);
		CHECK(file && len == 1185376, "read %s", p);
		if (file) {
			test_stories(file, len, p);
			test_truncations(file, len);
			test_flips(file, len);
			free(file);
		}
	}
	test_v1();
	test_writer();
	test_crafted();
	test_nul_in_names();
	return check_summary();
}
