/* gguf: GGUF v2/v3 reader (hostile-input safe) and v3 writer. See gguf.h. */
#include "model/gguf.h"
#include "model/quant.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Limits that no real model comes near; they keep a hostile file from making us recurse
 * deeply or allocate absurdly before the byte-count checks would catch it. */
#define GGUF_MAX_KEY_LEN   65535u /* the spec's limit */
#define GGUF_MAX_NAME_LEN  255u	  /* llama.cpp allows 63; be a little more lenient */
#define GGUF_MAX_DEPTH	   8	  /* nesting of arrays in arrays */
#define GGUF_MAX_ALIGNMENT (1u << 30)

/* ---- small helpers ---- */

static const char *type_name(uint32_t t)
{
	static const char *const names[] = {"u8",   "i8",  "u16", "i16", "u32", "i32", "f32",
					    "bool", "str", "arr", "u64", "i64", "f64"};
	return t <= GGUF_TYPE_FLOAT64 ? names[t] : "?";
}

/* Fixed size of a scalar type; 0 for string/array (variable) and unknown types. */
static size_t type_size(uint32_t t)
{
	switch (t) {
	case GGUF_TYPE_UINT8:
	case GGUF_TYPE_INT8:
	case GGUF_TYPE_BOOL: return 1;
	case GGUF_TYPE_UINT16:
	case GGUF_TYPE_INT16: return 2;
	case GGUF_TYPE_UINT32:
	case GGUF_TYPE_INT32:
	case GGUF_TYPE_FLOAT32: return 4;
	case GGUF_TYPE_UINT64:
	case GGUF_TYPE_INT64:
	case GGUF_TYPE_FLOAT64: return 8;
	default: return 0;
	}
}

/* The fewest bytes one element of type t can occupy in a file (used to refuse counts
 * that cannot possibly fit before allocating anything for them). */
static size_t type_min_size(uint32_t t)
{
	if (t == GGUF_TYPE_STRING)
		return 8; /* the length */
	if (t == GGUF_TYPE_ARRAY)
		return 12; /* element type + count */
	return type_size(t);
}

const char *gguf_dtype_name(enum gguf_dtype t)
{
	switch (t) {
	case GGUF_DTYPE_F32: return "f32";
	case GGUF_DTYPE_F16: return "f16";
	case GGUF_DTYPE_Q4_0: return "q4_0";
	case GGUF_DTYPE_Q4_1: return "q4_1";
	case GGUF_DTYPE_Q5_0: return "q5_0";
	case GGUF_DTYPE_Q5_1: return "q5_1";
	case GGUF_DTYPE_Q8_0: return "q8_0";
	case GGUF_DTYPE_Q2_K: return "q2_K";
	case GGUF_DTYPE_Q3_K: return "q3_K";
	case GGUF_DTYPE_Q4_K: return "q4_K";
	case GGUF_DTYPE_Q5_K: return "q5_K";
	case GGUF_DTYPE_Q6_K: return "q6_K";
	case GGUF_DTYPE_IQ2_XXS: return "iq2_xxs";
	case GGUF_DTYPE_IQ2_XS: return "iq2_xs";
	case GGUF_DTYPE_IQ3_XXS: return "iq3_xxs";
	case GGUF_DTYPE_IQ1_S: return "iq1_s";
	case GGUF_DTYPE_IQ4_NL: return "iq4_nl";
	case GGUF_DTYPE_IQ3_S: return "iq3_s";
	case GGUF_DTYPE_IQ2_S: return "iq2_s";
	case GGUF_DTYPE_IQ4_XS: return "iq4_xs";
	case GGUF_DTYPE_IQ1_M: return "iq1_m";
	case GGUF_DTYPE_BF16: return "bf16";
	case GGUF_DTYPE_MXFP4: return "mxfp4";
	}
	return "?";
}

/* ggml's names for the types we do not support, so that the refusal says what it saw. */
static const char *ggml_type_name(uint32_t t)
{
	static const char *const names[] = {
	    "f32",   "f16",	   "q4_0",	 "q4_1",       "q4_2",	   "q4_3",     "q5_0",
	    "q5_1",  "q8_0",	   "q8_1",	 "q2_k",       "q3_k",	   "q4_k",     "q5_k",
	    "q6_k",  "q8_k",	   "iq2_xxs",	 "iq2_xs",     "iq3_xxs",  "iq1_s",    "iq4_nl",
	    "iq3_s", "iq2_s",	   "iq4_xs",	 "i8",	       "i16",	   "i32",      "i64",
	    "f64",   "iq1_m",	   "bf16",	 "q4_0_4_4",   "q4_0_4_8", "q4_0_8_8", "tq1_0",
	    "tq2_0", "iq4_nl_4_4", "iq4_nl_4_8", "iq4_nl_8_8", "mxfp4"};
	return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

uint64_t gguf_row_bytes(enum gguf_dtype t, uint64_t n)
{
	uint64_t be = (uint64_t)quant_block_elems(t), bb = quant_block_bytes(t);
	if (be == 0 || n % be != 0 || n / be > UINT64_MAX / bb)
		return 0;
	return n / be * bb;
}

static bool dtype_known(uint32_t t)
{
	return t <= GGUF_DTYPE_MXFP4 && quant_block_elems((enum gguf_dtype)t) > 0;
}

/* Copies a (possibly hostile) string into out for an error message: printable ASCII
 * only, at most 64 characters, so the message stays one line. */
static const char *show(char out[80], const char *p, uint64_t len)
{
	size_t n = 0;
	for (uint64_t i = 0; i < len && n < 64; i++) {
		unsigned char c = (unsigned char)p[i];
		out[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	if (len > 64) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
	return out;
}

static int str_cmp(const char *a, uint64_t alen, const char *b, uint64_t blen)
{
	uint64_t n = alen < blen ? alen : blen;
	int c = n ? memcmp(a, b, n) : 0;
	if (c)
		return c;
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

/* ---- the parsed context ---- */

struct kv {
	struct gguf_str key;
	enum gguf_type type;
	const uint8_t *val; /* the serialized value (after the type id) */
	uint64_t val_len;   /* its bytes, array header included */
	/* arrays */
	enum gguf_type arr_type;
	uint64_t arr_n;
	const uint8_t *arr_data; /* first element */
	struct gguf_str *strs;	 /* [arr_n] for string arrays, else NULL */
};

struct gguf_ctx {
	const uint8_t *buf;
	size_t len;
	bool owned;  /* free(buf) on close */
	bool mapped; /* munmap(buf, len) on close */
	uint32_t version;
	uint32_t alignment;
	uint64_t n_kv;
	struct kv *kvs;	     /* [n_kv] in file order */
	uint64_t *kv_sorted; /* [n_kv] indices sorted by key */
	uint64_t n_tensors;
	struct gguf_tensor *tensors; /* [n_tensors] in file order */
	uint64_t *t_sorted;	     /* [n_tensors] indices sorted by name */
	size_t data_start;
};

void gguf_close(struct gguf_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->kvs)
		for (uint64_t i = 0; i < ctx->n_kv; i++)
			free(ctx->kvs[i].strs);
	free(ctx->kvs);
	free(ctx->kv_sorted);
	free(ctx->tensors);
	free(ctx->t_sorted);
	if (ctx->mapped)
		munmap((void *)ctx->buf, ctx->len);
	else if (ctx->owned)
		free((void *)ctx->buf);
	free(ctx);
}

/* ---- the reader ---- */

struct rd {
	const uint8_t *b;
	size_t len;
	size_t pos;
	struct bg_err *err;
};

static size_t rd_left(const struct rd *r)
{
	return r->len - r->pos;
}

static bool rd_u32(struct rd *r, uint32_t *v)
{
	if (rd_left(r) < 4)
		return false;
	memcpy(v, r->b + r->pos, 4);
	r->pos += 4;
	return true;
}

static bool rd_u64(struct rd *r, uint64_t *v)
{
	if (rd_left(r) < 8)
		return false;
	memcpy(v, r->b + r->pos, 8);
	r->pos += 8;
	return true;
}

/* A length-prefixed string; false when the length runs past the end. */
static bool rd_str(struct rd *r, struct gguf_str *s)
{
	uint64_t n;
	if (!rd_u64(r, &n))
		return false;
	if (n > rd_left(r))
		return false;
	s->ptr = (const char *)r->b + r->pos;
	s->len = n;
	r->pos += (size_t)n;
	return true;
}

/* Skips over one value of type t (already read), validating it. what names the key for
 * messages. If kv is not NULL (a top-level value) the array fields are filled in. */
static enum bg_status rd_value(struct rd *r, uint32_t t, int depth, const char *what, struct kv *kv)
{
	size_t sz = type_size(t);
	if (sz) {
		if (rd_left(r) < sz)
			return bg_fail(r->err, BG_ERR_FORMAT,
				       "truncated: the %s value of key '%s' runs past the end of "
				       "the file",
				       type_name(t), what);
		r->pos += sz;
		return BG_OK;
	}
	if (t == GGUF_TYPE_STRING) {
		struct gguf_str s;
		if (!rd_str(r, &s))
			return bg_fail(r->err, BG_ERR_FORMAT,
				       "the string value of key '%s' runs past the end of the file "
				       "(bad length or truncated)",
				       what);
		return BG_OK;
	}
	if (t != GGUF_TYPE_ARRAY)
		return bg_fail(r->err, BG_ERR_FORMAT, "key '%s' has unknown value type %u", what,
			       t);
	if (depth >= GGUF_MAX_DEPTH)
		return bg_fail(r->err, BG_ERR_FORMAT, "key '%s' nests arrays more than %d deep",
			       what, GGUF_MAX_DEPTH);
	uint32_t et;
	uint64_t n;
	if (!rd_u32(r, &et) || !rd_u64(r, &n))
		return bg_fail(r->err, BG_ERR_FORMAT,
			       "truncated: the array header of key '%s' runs past the end of the "
			       "file",
			       what);
	if (et > GGUF_TYPE_FLOAT64)
		return bg_fail(r->err, BG_ERR_FORMAT,
			       "array of key '%s' has unknown element type %u", what, et);
	size_t min = type_min_size(et);
	if (n > rd_left(r) / min)
		return bg_fail(r->err, BG_ERR_FORMAT,
			       "array of key '%s' claims %llu %s elements but only %zu bytes "
			       "remain",
			       what, (unsigned long long)n, type_name(et), rd_left(r));
	if (kv) {
		kv->arr_type = (enum gguf_type)et;
		kv->arr_n = n;
		kv->arr_data = r->b + r->pos;
	}
	if (et == GGUF_TYPE_STRING) {
		struct gguf_str *strs = NULL;
		if (kv && n) {
			strs = malloc((size_t)n * sizeof *strs);
			if (!strs)
				return bg_fail(
				    r->err, BG_ERR_NOMEM,
				    "out of memory indexing the %llu strings of key '%s'",
				    (unsigned long long)n, what);
			kv->strs = strs;
		}
		for (uint64_t i = 0; i < n; i++) {
			struct gguf_str s;
			if (!rd_str(r, &s))
				return bg_fail(r->err, BG_ERR_FORMAT,
					       "string %llu of the array of key '%s' runs past the "
					       "end of the file (bad length or truncated)",
					       (unsigned long long)i, what);
			if (strs)
				strs[i] = s;
		}
		return BG_OK;
	}
	if (et == GGUF_TYPE_ARRAY) {
		for (uint64_t i = 0; i < n; i++) {
			enum bg_status st = rd_value(r, GGUF_TYPE_ARRAY, depth + 1, what, NULL);
			if (st)
				return st;
		}
		return BG_OK;
	}
	r->pos += (size_t)(n * min); /* n * min <= rd_left(r), checked above */
	return BG_OK;
}

static int cmp_kv_idx(const void *a, const void *b, void *ctx)
{
	const struct kv *kvs = ctx;
	const struct kv *x = &kvs[*(const uint64_t *)a], *y = &kvs[*(const uint64_t *)b];
	return str_cmp(x->key.ptr, x->key.len, y->key.ptr, y->key.len);
}

static int cmp_t_idx(const void *a, const void *b, void *ctx)
{
	const struct gguf_tensor *ts = ctx;
	const struct gguf_tensor *x = &ts[*(const uint64_t *)a], *y = &ts[*(const uint64_t *)b];
	return str_cmp(x->name.ptr, x->name.len, y->name.ptr, y->name.len);
}

static uint64_t *sorted_index(uint64_t n, int (*cmp)(const void *, const void *, void *), void *arg)
{
	uint64_t *idx = malloc((n ? (size_t)n : 1) * sizeof *idx);
	if (!idx)
		return NULL;
	for (uint64_t i = 0; i < n; i++)
		idx[i] = i;
	qsort_r(idx, (size_t)n, sizeof *idx, cmp, arg);
	return idx;
}

/* A kind of header name (a key, a tensor's name): its longest length and the words
 * rd_name's messages use for it ("key/value pair 3 of 9", "key 3", "tensor 3"). */
struct name_kind {
	uint64_t max_len;
	const char *entry; /* what runs past the end: "key/value pair", "tensor info" */
	const char *name;  /* what has a bad length or a NUL: "key", "tensor name" */
};

static const struct name_kind KEY_NAME = {GGUF_MAX_KEY_LEN, "key/value pair", "key"};
static const struct name_kind TENSOR_NAME = {GGUF_MAX_NAME_LEN, "tensor info", "tensor name"};

/* Name i of n: a length-prefixed string of 1 to k->max_len bytes with no NUL, into *s and
 * (for messages) shown. Keys and tensor names are looked up and written as C strings: one
 * with a NUL would read as its prefix (and a writer copying a key would replace another). */
static enum bg_status rd_name(struct rd *r, const struct name_kind *k, uint64_t i, uint64_t n,
			      struct gguf_str *s, char shown[80])
{
	uint64_t len;
	if (!rd_u64(r, &len))
		return bg_fail(r->err, BG_ERR_FORMAT,
			       "truncated: %s %llu of %llu runs past the end of the file", k->entry,
			       (unsigned long long)i, (unsigned long long)n);
	if (len == 0 || len > k->max_len || len > rd_left(r))
		return bg_fail(r->err, BG_ERR_FORMAT,
			       "%s %llu has an impossible length %llu (%zu bytes remain)", k->name,
			       (unsigned long long)i, (unsigned long long)len, rd_left(r));
	s->ptr = (const char *)r->b + r->pos;
	s->len = len;
	r->pos += (size_t)len;
	show(shown, s->ptr, s->len);
	if (memchr(s->ptr, '\0', (size_t)len))
		return bg_fail(r->err, BG_ERR_FORMAT, "%s %llu ('%s') contains a NUL byte", k->name,
			       (unsigned long long)i, shown);
	return BG_OK;
}

static enum bg_status parse_kvs(struct gguf_ctx *c, struct rd *r)
{
	char sk[80];
	for (uint64_t i = 0; i < c->n_kv; i++) {
		struct kv *kv = &c->kvs[i];
		enum bg_status st = rd_name(r, &KEY_NAME, i, c->n_kv, &kv->key, sk);
		if (st)
			return st;
		uint32_t t;
		if (!rd_u32(r, &t))
			return bg_fail(r->err, BG_ERR_FORMAT,
				       "truncated: the type of key '%s' runs past the end of the "
				       "file",
				       sk);
		if (t > GGUF_TYPE_FLOAT64)
			return bg_fail(r->err, BG_ERR_FORMAT, "key '%s' has unknown value type %u",
				       sk, t);
		kv->type = (enum gguf_type)t;
		size_t start = r->pos;
		st = rd_value(r, t, 0, sk, kv);
		if (st)
			return st;
		kv->val = r->b + start;
		kv->val_len = r->pos - start;
	}
	c->kv_sorted = sorted_index(c->n_kv, cmp_kv_idx, c->kvs);
	if (!c->kv_sorted)
		return bg_fail(r->err, BG_ERR_NOMEM, "out of memory indexing keys");
	for (uint64_t i = 1; i < c->n_kv; i++) {
		const struct kv *a = &c->kvs[c->kv_sorted[i - 1]], *b = &c->kvs[c->kv_sorted[i]];
		if (!str_cmp(a->key.ptr, a->key.len, b->key.ptr, b->key.len))
			return bg_fail(r->err, BG_ERR_FORMAT, "duplicate key '%s'",
				       show(sk, a->key.ptr, a->key.len));
	}
	return BG_OK;
}

static enum bg_status parse_tensor_infos(struct gguf_ctx *c, struct rd *r)
{
	char sn[80];
	for (uint64_t i = 0; i < c->n_tensors; i++) {
		struct gguf_tensor *t = &c->tensors[i];
		enum bg_status st = rd_name(r, &TENSOR_NAME, i, c->n_tensors, &t->name, sn);
		if (st)
			return st;
		if (!rd_u32(r, &t->n_dims))
			return bg_fail(
			    r->err, BG_ERR_FORMAT,
			    "truncated: the info of tensor '%s' runs past the end of the "
			    "file",
			    sn);
		if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
			return bg_fail(r->err, BG_ERR_FORMAT,
				       "tensor '%s' has %u dimensions (1 to %d are allowed)", sn,
				       t->n_dims, GGUF_MAX_DIMS);
		for (int d = 0; d < GGUF_MAX_DIMS; d++)
			t->ne[d] = 1;
		uint64_t n_el = 1;
		for (uint32_t d = 0; d < t->n_dims; d++) {
			if (!rd_u64(r, &t->ne[d]))
				return bg_fail(r->err, BG_ERR_FORMAT,
					       "truncated: the shape of tensor '%s' runs past the "
					       "end of the file",
					       sn);
			if (t->ne[d] > (uint64_t)INT64_MAX ||
			    __builtin_mul_overflow(n_el, t->ne[d], &n_el) ||
			    n_el > (uint64_t)INT64_MAX)
				return bg_fail(r->err, BG_ERR_FORMAT,
					       "tensor '%s' has an absurd shape: the element count "
					       "overflows 63 bits",
					       sn);
		}
		uint32_t type;
		if (!rd_u32(r, &type) || !rd_u64(r, &t->offset))
			return bg_fail(
			    r->err, BG_ERR_FORMAT,
			    "truncated: the info of tensor '%s' runs past the end of the "
			    "file",
			    sn);
		if (!dtype_known(type))
			return bg_fail(r->err, BG_ERR_UNSUPPORTED,
				       "tensor '%s' has type %s (id %u), which is not supported "
				       "(supported: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, "
				       "q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, mxfp4)",
				       sn, ggml_type_name(type), type);
		t->type = (enum gguf_dtype)type;
		uint64_t row = gguf_row_bytes(t->type, t->ne[0]);
		if (row == 0 && t->ne[0] != 0)
			return bg_fail(r->err, BG_ERR_FORMAT,
				       "tensor '%s' of type %s has rows of %llu elements, not a "
				       "multiple of the block size",
				       sn, gguf_dtype_name(t->type), (unsigned long long)t->ne[0]);
		/* with a zero dimension n_el is 0 whatever the others are, so the row count
		 * gets its own overflow check */
		uint64_t rows;
		if (__builtin_mul_overflow(t->ne[1], t->ne[2], &rows) ||
		    __builtin_mul_overflow(rows, t->ne[3], &rows) ||
		    __builtin_mul_overflow(row, rows, &t->nbytes))
			return bg_fail(r->err, BG_ERR_FORMAT,
				       "tensor '%s' has an absurd size: its byte count overflows",
				       sn);
	}
	return BG_OK;
}

/* Everything after the tensor infos: alignment, data section, ranges, unique names. */
static enum bg_status check_tensors(struct gguf_ctx *c, struct rd *r)
{
	char sn[80];
	size_t a = c->alignment;
	size_t start = (r->pos + a - 1) / a * a; /* pos <= len < 2^63, a <= 2^30 */
	c->data_start = start;
	if (c->n_tensors == 0)
		return BG_OK; /* vocab-only files may end right after the key/values */
	if (start > r->len)
		return bg_fail(r->err, BG_ERR_FORMAT,
			       "truncated: the file ends before its tensor data section (at byte "
			       "%zu)",
			       start);
	size_t data_size = r->len - start;
	for (uint64_t i = 0; i < c->n_tensors; i++) {
		struct gguf_tensor *t = &c->tensors[i];
		show(sn, t->name.ptr, t->name.len);
		if (t->offset % a)
			return bg_fail(
			    r->err, BG_ERR_FORMAT,
			    "tensor '%s' has offset %llu, not a multiple of the alignment "
			    "%zu",
			    sn, (unsigned long long)t->offset, a);
		if (t->offset > data_size || t->nbytes > data_size - t->offset)
			return bg_fail(
			    r->err, BG_ERR_FORMAT,
			    "tensor '%s' (offset %llu, %llu bytes) lies outside the data "
			    "section (%zu bytes): the file is truncated or corrupt",
			    sn, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
			    data_size);
		t->data = r->b + start + t->offset;
	}
	c->t_sorted = sorted_index(c->n_tensors, cmp_t_idx, c->tensors);
	if (!c->t_sorted)
		return bg_fail(r->err, BG_ERR_NOMEM, "out of memory indexing tensors");
	for (uint64_t i = 1; i < c->n_tensors; i++) {
		const struct gguf_tensor *x = &c->tensors[c->t_sorted[i - 1]];
		const struct gguf_tensor *y = &c->tensors[c->t_sorted[i]];
		if (!str_cmp(x->name.ptr, x->name.len, y->name.ptr, y->name.len))
			return bg_fail(r->err, BG_ERR_FORMAT, "duplicate tensor name '%s'",
				       show(sn, x->name.ptr, x->name.len));
	}
	return BG_OK;
}

static enum bg_status parse(struct gguf_ctx *c, struct bg_err *err)
{
	struct rd r = {c->buf, c->len, 0, err};
	if (c->len < 24)
		return bg_fail(err, BG_ERR_FORMAT,
			       "too short for a GGUF file (%zu bytes; the header alone is 24)",
			       c->len);
	if (memcmp(c->buf, "GGUF", 4) != 0) {
		char m[80];
		return bg_fail(err, BG_ERR_FORMAT,
			       "not a GGUF file (magic \"%s\", expected \"GGUF\")",
			       show(m, (const char *)c->buf, 4));
	}
	r.pos = 4;
	rd_u32(&r, &c->version);
	if (c->version == 1)
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "GGUF version 1 is not supported (the format changed in v2); "
			       "convert the file with a current llama.cpp");
	if (c->version != 2 && c->version != 3) {
		bool swapped = (c->version & 0xffff) == 0 && c->version != 0;
		return bg_fail(err, BG_ERR_UNSUPPORTED,
			       "GGUF version %u is not supported (only 2 and 3 are)%s", c->version,
			       swapped ? "; it looks like a big-endian file" : "");
	}
	rd_u64(&r, &c->n_tensors);
	rd_u64(&r, &c->n_kv);
	/* Refuse counts that cannot fit in what is left before allocating for them: a
	 * key/value takes at least 8 + 1 + 4 bytes, a tensor info at least 8 + 1 + 4 + 8 +
	 * 4 + 8. */
	if (c->n_kv > rd_left(&r) / 13)
		return bg_fail(err, BG_ERR_FORMAT,
			       "header claims %llu key/value pairs, impossible in a file of %zu "
			       "bytes",
			       (unsigned long long)c->n_kv, c->len);
	if (c->n_tensors > rd_left(&r) / 33)
		return bg_fail(err, BG_ERR_FORMAT,
			       "header claims %llu tensors, impossible in a file of %zu bytes",
			       (unsigned long long)c->n_tensors, c->len);
	c->kvs = calloc(c->n_kv ? (size_t)c->n_kv : 1, sizeof *c->kvs);
	c->tensors = calloc(c->n_tensors ? (size_t)c->n_tensors : 1, sizeof *c->tensors);
	if (!c->kvs || !c->tensors)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for %llu keys and %llu tensors",
			       (unsigned long long)c->n_kv, (unsigned long long)c->n_tensors);
	enum bg_status st = parse_kvs(c, &r);
	if (st)
		return st;
	c->alignment = GGUF_DEFAULT_ALIGNMENT;
	int64_t ai = gguf_find_key(c, "general.alignment");
	if (ai >= 0) {
		const struct kv *kv = &c->kvs[ai];
		uint32_t a = 0;
		if (kv->type != GGUF_TYPE_UINT32)
			return bg_fail(err, BG_ERR_FORMAT,
				       "general.alignment has type %s; it must be u32",
				       type_name(kv->type));
		memcpy(&a, kv->val, 4);
		if (a == 0 || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT)
			return bg_fail(err, BG_ERR_FORMAT,
				       "general.alignment is %u; it must be a nonzero power of two "
				       "(at most 2^30)",
				       a);
		c->alignment = a;
	}
	st = parse_tensor_infos(c, &r);
	if (st)
		return st;
	return check_tensors(c, &r);
}

enum bg_status gguf_parse(const void *buf, size_t len, bool take_ownership, struct gguf_ctx **out,
			  struct bg_err *err)
{
	*out = NULL;
	struct gguf_ctx *c = calloc(1, sizeof *c);
	if (!c) {
		if (take_ownership)
			free((void *)buf);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory");
	}
	c->buf = buf;
	c->len = len;
	c->owned = take_ownership;
	if (!buf && len)
		c->len = 0;
	enum bg_status st = parse(c, err);
	if (st) {
		gguf_close(c);
		return st;
	}
	*out = c;
	return BG_OK;
}

/* -m given a directory (a hub download's folder, say): the error names up to three of
 * the .gguf files in it, so that the user sees what to pass instead. */
static enum bg_status dir_error(const char *path, struct bg_err *err)
{
	char names[256] = "";
	size_t used = 0;
	int n = 0;
	DIR *d = opendir(path);
	for (struct dirent *e; d && (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		if (len <= 5 || strcmp(e->d_name + len - 5, ".gguf") != 0)
			continue;
		if (n++ < 3 && used + len + 3 < sizeof names)
			used += (size_t)snprintf(names + used, sizeof names - used, "%s%s",
						 used ? ", " : "", e->d_name);
	}
	if (d)
		closedir(d);
	if (n == 0)
		return bg_fail(err, BG_ERR_IO, "%s: is a directory, with no .gguf file in it", path);
	return bg_fail(err, BG_ERR_IO, "%s: is a directory; give a .gguf file in it (%s%s)", path,
		       names, n > 3 ? ", ..." : "");
}

enum bg_status gguf_open(const char *path, struct gguf_ctx **out, struct bg_err *err)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return bg_fail(err, BG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) != 0) {
		int e = errno;
		close(fd);
		return bg_fail(err, BG_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
	}
	if (S_ISDIR(sb.st_mode)) {
		close(fd);
		return dir_error(path, err);
	}
	if (!S_ISREG(sb.st_mode)) {
		close(fd);
		return bg_fail(err, BG_ERR_IO, "%s: not a regular file", path);
	}
	if (sb.st_size == 0) {
		close(fd);
		return bg_fail(err, BG_ERR_FORMAT, "%s: the file is empty", path);
	}
	size_t len = (size_t)sb.st_size;
	void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	int e = errno;
	close(fd);
	if (map == MAP_FAILED)
		return bg_fail(err, BG_ERR_IO, "%s: cannot map: %s", path, strerror(e));
	struct gguf_ctx *c = calloc(1, sizeof *c);
	if (!c) {
		munmap(map, len);
		return bg_fail(err, BG_ERR_NOMEM, "%s: out of memory", path);
	}
	c->buf = map;
	c->len = len;
	c->mapped = true;
	struct bg_err e2 = {0};
	enum bg_status st = parse(c, &e2);
	if (st) {
		gguf_close(c);
		return bg_fail(err, st, "%s: %s", path, e2.msg);
	}
	*out = c;
	return BG_OK;
}

/* ---- accessors ---- */

uint32_t gguf_version(const struct gguf_ctx *ctx)
{
	return ctx->version;
}

uint32_t gguf_alignment(const struct gguf_ctx *ctx)
{
	return ctx->alignment;
}

uint64_t gguf_n_kv(const struct gguf_ctx *ctx)
{
	return ctx->n_kv;
}

int64_t gguf_find_key(const struct gguf_ctx *ctx, const char *key)
{
	if (!ctx->kv_sorted)
		return -1;
	size_t klen = strlen(key);
	uint64_t lo = 0, hi = ctx->n_kv;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct kv *kv = &ctx->kvs[ctx->kv_sorted[mid]];
		int c = str_cmp(kv->key.ptr, kv->key.len, key, klen);
		if (c == 0)
			return (int64_t)ctx->kv_sorted[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

struct gguf_str gguf_kv_key(const struct gguf_ctx *ctx, uint64_t i)
{
	BG_ASSERT(i < ctx->n_kv);
	return ctx->kvs[i].key;
}

enum gguf_type gguf_kv_type(const struct gguf_ctx *ctx, uint64_t i)
{
	BG_ASSERT(i < ctx->n_kv);
	return ctx->kvs[i].type;
}

static const struct kv *find(const struct gguf_ctx *ctx, const char *key)
{
	int64_t i = gguf_find_key(ctx, key);
	return i < 0 ? NULL : &ctx->kvs[i];
}

/* Reads an integer of scalar type t at p as a signed 128-bit-safe pair: *neg and the
 * magnitude. Returns false for non-integer types. */
static bool int_at(uint32_t t, const uint8_t *p, int64_t *sv, uint64_t *uv, bool *is_signed)
{
	union {
		uint8_t u8;
		int8_t i8;
		uint16_t u16;
		int16_t i16;
		uint32_t u32;
		int32_t i32;
		uint64_t u64;
		int64_t i64;
	} v;
	size_t sz = type_size(t);
	if (!sz || t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64 || t == GGUF_TYPE_BOOL)
		return false;
	memcpy(&v, p, sz);
	*is_signed = true;
	switch (t) {
	case GGUF_TYPE_UINT8:
		*is_signed = false;
		*uv = v.u8;
		break;
	case GGUF_TYPE_UINT16:
		*is_signed = false;
		*uv = v.u16;
		break;
	case GGUF_TYPE_UINT32:
		*is_signed = false;
		*uv = v.u32;
		break;
	case GGUF_TYPE_UINT64:
		*is_signed = false;
		*uv = v.u64;
		break;
	case GGUF_TYPE_INT8: *sv = v.i8; break;
	case GGUF_TYPE_INT16: *sv = v.i16; break;
	case GGUF_TYPE_INT32: *sv = v.i32; break;
	case GGUF_TYPE_INT64: *sv = v.i64; break;
	default: return false;
	}
	return true;
}

/* Converts the integer at p (type t) into [lo, hi]; false if not an integer or out of
 * range. */
static bool int_in_range(uint32_t t, const uint8_t *p, int64_t lo, uint64_t hi, int64_t *out_s,
			 uint64_t *out_u)
{
	int64_t sv = 0;
	uint64_t uv = 0;
	bool s;
	if (!int_at(t, p, &sv, &uv, &s))
		return false;
	if (s) {
		if (sv < lo || (sv >= 0 && (uint64_t)sv > hi))
			return false;
		*out_s = sv;
		*out_u = (uint64_t)sv;
	} else {
		if (uv > hi)
			return false;
		*out_s = (int64_t)uv; /* only meaningful when hi <= INT64_MAX */
		*out_u = uv;
	}
	return true;
}

bool gguf_get_u32(const struct gguf_ctx *ctx, const char *key, uint32_t *out)
{
	const struct kv *kv = find(ctx, key);
	int64_t s;
	uint64_t u;
	if (!kv || !int_in_range(kv->type, kv->val, 0, UINT32_MAX, &s, &u))
		return false;
	*out = (uint32_t)u;
	return true;
}

bool gguf_get_i64(const struct gguf_ctx *ctx, const char *key, int64_t *out)
{
	const struct kv *kv = find(ctx, key);
	int64_t s;
	uint64_t u;
	if (!kv || !int_in_range(kv->type, kv->val, INT64_MIN, INT64_MAX, &s, &u))
		return false;
	*out = s;
	return true;
}

bool gguf_get_f32(const struct gguf_ctx *ctx, const char *key, float *out)
{
	const struct kv *kv = find(ctx, key);
	if (!kv)
		return false;
	if (kv->type == GGUF_TYPE_FLOAT32) {
		memcpy(out, kv->val, 4);
		return true;
	}
	if (kv->type == GGUF_TYPE_FLOAT64) {
		double d;
		memcpy(&d, kv->val, 8);
		*out = (float)d;
		return true;
	}
	return false;
}

bool gguf_get_bool(const struct gguf_ctx *ctx, const char *key, bool *out)
{
	const struct kv *kv = find(ctx, key);
	if (!kv || kv->type != GGUF_TYPE_BOOL)
		return false;
	*out = kv->val[0] != 0;
	return true;
}

bool gguf_get_str(const struct gguf_ctx *ctx, const char *key, struct gguf_str *out)
{
	const struct kv *kv = find(ctx, key);
	if (!kv || kv->type != GGUF_TYPE_STRING)
		return false;
	memcpy(&out->len, kv->val, 8);
	out->ptr = (const char *)kv->val + 8;
	return true;
}

bool gguf_get_arr(const struct gguf_ctx *ctx, const char *key, enum gguf_type *elem_type,
		  uint64_t *n)
{
	const struct kv *kv = find(ctx, key);
	if (!kv || kv->type != GGUF_TYPE_ARRAY)
		return false;
	if (elem_type)
		*elem_type = kv->arr_type;
	if (n)
		*n = kv->arr_n;
	return true;
}

struct gguf_str gguf_arr_str(const struct gguf_ctx *ctx, const char *key, uint64_t i)
{
	struct gguf_str none = {"", 0};
	const struct kv *kv = find(ctx, key);
	if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_type != GGUF_TYPE_STRING ||
	    i >= kv->arr_n)
		return none;
	return kv->strs[i];
}

bool gguf_arr_copy_f32(const struct gguf_ctx *ctx, const char *key, float *dst, uint64_t n)
{
	const struct kv *kv = find(ctx, key);
	if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_n != n)
		return false;
	if (kv->arr_type == GGUF_TYPE_FLOAT32) {
		memcpy(dst, kv->arr_data, (size_t)n * 4);
		return true;
	}
	if (kv->arr_type == GGUF_TYPE_FLOAT64) {
		for (uint64_t i = 0; i < n; i++) {
			double d;
			memcpy(&d, kv->arr_data + i * 8, 8);
			dst[i] = (float)d;
		}
		return true;
	}
	return false;
}

bool gguf_arr_copy_i32(const struct gguf_ctx *ctx, const char *key, int32_t *dst, uint64_t n)
{
	const struct kv *kv = find(ctx, key);
	if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_n != n)
		return false;
	size_t sz = type_size(kv->arr_type);
	if (!sz || kv->arr_type == GGUF_TYPE_FLOAT32 || kv->arr_type == GGUF_TYPE_FLOAT64 ||
	    kv->arr_type == GGUF_TYPE_BOOL)
		return false;
	for (uint64_t i = 0; i < n; i++) {
		int64_t s;
		uint64_t u;
		if (!int_in_range(kv->arr_type, kv->arr_data + i * sz, INT32_MIN, INT32_MAX, &s,
				  &u))
			return false;
		dst[i] = (int32_t)s;
	}
	return true;
}

bool gguf_arr_copy_bool(const struct gguf_ctx *ctx, const char *key, bool *dst, uint64_t n)
{
	const struct kv *kv = find(ctx, key);
	if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->arr_n != n || kv->arr_type != GGUF_TYPE_BOOL)
		return false;
	for (uint64_t i = 0; i < n; i++) {
		if (kv->arr_data[i] > 1)
			return false;
		dst[i] = kv->arr_data[i] != 0;
	}
	return true;
}

/* ---- formatting ---- */

struct fmt {
	char *buf;
	size_t cap;
	size_t n; /* what would have been written */
};

static void fmt_putc(struct fmt *f, char c)
{
	if (f->n + 1 < f->cap)
		f->buf[f->n] = c;
	f->n++;
}

static void fmt_printf(struct fmt *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fmt_printf(struct fmt *f, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	for (int i = 0; i < k && i < (int)sizeof tmp - 1; i++)
		fmt_putc(f, tmp[i]);
}

/* A quoted string, control bytes escaped so that the rendering stays on one line; long
 * strings are cut after 200 bytes. */
static void fmt_str(struct fmt *f, const char *p, uint64_t len)
{
	fmt_putc(f, '"');
	for (uint64_t i = 0; i < len && i < 200; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '"' || c == '\\') {
			fmt_putc(f, '\\');
			fmt_putc(f, (char)c);
		} else if (c == '\n') {
			fmt_putc(f, '\\');
			fmt_putc(f, 'n');
		} else if (c < 0x20 || c == 0x7f) {
			fmt_printf(f, "\\x%02x", c);
		} else {
			fmt_putc(f, (char)c);
		}
	}
	fmt_putc(f, '"');
	if (len > 200)
		fmt_printf(f, "...(%llu bytes)", (unsigned long long)len);
}

static void fmt_scalar(struct fmt *f, uint32_t t, const uint8_t *p)
{
	int64_t sv;
	uint64_t uv;
	bool s;
	if (int_at(t, p, &sv, &uv, &s)) {
		if (s)
			fmt_printf(f, "%lld", (long long)sv);
		else
			fmt_printf(f, "%llu", (unsigned long long)uv);
	} else if (t == GGUF_TYPE_FLOAT32) {
		float v;
		memcpy(&v, p, 4);
		fmt_printf(f, "%.9g", (double)v);
	} else if (t == GGUF_TYPE_FLOAT64) {
		double v;
		memcpy(&v, p, 8);
		fmt_printf(f, "%.17g", v);
	} else if (t == GGUF_TYPE_BOOL) {
		fmt_printf(f, "%s", p[0] ? "true" : "false");
	}
}

size_t gguf_kv_format(const struct gguf_ctx *ctx, uint64_t i, char *buf, size_t cap)
{
	BG_ASSERT(i < ctx->n_kv);
	const struct kv *kv = &ctx->kvs[i];
	struct fmt f = {buf, cap, 0};
	if (kv->type == GGUF_TYPE_STRING) {
		uint64_t len;
		memcpy(&len, kv->val, 8);
		fmt_str(&f, (const char *)kv->val + 8, len);
	} else if (kv->type == GGUF_TYPE_ARRAY) {
		if (kv->arr_n > 8 || kv->arr_type == GGUF_TYPE_ARRAY) {
			fmt_printf(&f, "[%llu x %s]", (unsigned long long)kv->arr_n,
				   type_name(kv->arr_type));
		} else {
			fmt_putc(&f, '[');
			size_t sz = type_size(kv->arr_type);
			for (uint64_t j = 0; j < kv->arr_n; j++) {
				if (j)
					fmt_printf(&f, ", ");
				if (kv->arr_type == GGUF_TYPE_STRING)
					fmt_str(&f, kv->strs[j].ptr, kv->strs[j].len);
				else
					fmt_scalar(&f, kv->arr_type, kv->arr_data + j * sz);
			}
			fmt_putc(&f, ']');
		}
	} else {
		fmt_scalar(&f, kv->type, kv->val);
	}
	if (cap)
		buf[f.n < cap ? f.n : cap - 1] = '\0';
	return f.n;
}

/* ---- tensors ---- */

uint64_t gguf_n_tensors(const struct gguf_ctx *ctx)
{
	return ctx->n_tensors;
}

const struct gguf_tensor *gguf_tensor(const struct gguf_ctx *ctx, uint64_t i)
{
	BG_ASSERT(i < ctx->n_tensors);
	return &ctx->tensors[i];
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_ctx *ctx, const char *name)
{
	if (!ctx->t_sorted)
		return NULL;
	size_t nlen = strlen(name);
	uint64_t lo = 0, hi = ctx->n_tensors;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct gguf_tensor *t = &ctx->tensors[ctx->t_sorted[mid]];
		int c = str_cmp(t->name.ptr, t->name.len, name, nlen);
		if (c == 0)
			return t;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- writer ---- */

struct wkv {
	char *key;
	uint32_t type;
	uint8_t *val; /* serialized value */
	size_t len;
};

struct wtensor {
	char *name;
	enum gguf_dtype type;
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS];
	const void *data;
	gguf_fill_fn fill;
	void *fill_arg;
	uint64_t nbytes;
	uint64_t offset;
};

struct gguf_writer {
	struct wkv *kvs;
	size_t n_kv, cap_kv;
	struct wtensor *ts;
	size_t n_t, cap_t;
	bool oom;
	char bad[BG_ERR_MSG]; /* the first invalid-argument message, or "" */
};

struct gguf_writer *gguf_writer_create(void)
{
	return calloc(1, sizeof(struct gguf_writer));
}

void gguf_writer_destroy(struct gguf_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_kv; i++) {
		free(w->kvs[i].key);
		free(w->kvs[i].val);
	}
	for (size_t i = 0; i < w->n_t; i++)
		free(w->ts[i].name);
	free(w->kvs);
	free(w->ts);
	free(w);
}

/* Takes ownership of val (freed on failure). */
static void w_set(struct gguf_writer *w, const char *key, uint32_t type, uint8_t *val, size_t len)
{
	if (!val) {
		w->oom = true;
		return;
	}
	for (size_t i = 0; i < w->n_kv; i++) {
		if (strcmp(w->kvs[i].key, key) == 0) {
			free(w->kvs[i].val);
			w->kvs[i].type = type;
			w->kvs[i].val = val;
			w->kvs[i].len = len;
			return;
		}
	}
	if (w->n_kv == w->cap_kv) {
		size_t nc = w->cap_kv ? 2 * w->cap_kv : 16;
		struct wkv *nk = realloc(w->kvs, nc * sizeof *nk);
		if (!nk) {
			free(val);
			w->oom = true;
			return;
		}
		w->kvs = nk;
		w->cap_kv = nc;
	}
	char *k = strdup(key);
	if (!k) {
		free(val);
		w->oom = true;
		return;
	}
	w->kvs[w->n_kv++] = (struct wkv){k, type, val, len};
}

static uint8_t *dup_bytes(const void *p, size_t n)
{
	uint8_t *b = malloc(n ? n : 1);
	if (b && n)
		memcpy(b, p, n);
	return b;
}

void gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
	w_set(w, key, GGUF_TYPE_UINT32, dup_bytes(&v, 4), 4);
}

void gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v)
{
	w_set(w, key, GGUF_TYPE_INT32, dup_bytes(&v, 4), 4);
}

void gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v)
{
	w_set(w, key, GGUF_TYPE_FLOAT32, dup_bytes(&v, 4), 4);
}

void gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v)
{
	uint8_t b = v ? 1 : 0;
	w_set(w, key, GGUF_TYPE_BOOL, dup_bytes(&b, 1), 1);
}

void gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v)
{
	uint64_t n = strlen(v);
	uint8_t *b = malloc(8 + n);
	if (b) {
		memcpy(b, &n, 8);
		memcpy(b + 8, v, n);
	}
	w_set(w, key, GGUF_TYPE_STRING, b, 8 + n);
}

/* An array header (element type, count) followed by room for payload bytes. */
static uint8_t *arr_alloc(uint32_t et, uint64_t n, size_t payload)
{
	uint8_t *b = malloc(12 + payload);
	if (b) {
		memcpy(b, &et, 4);
		memcpy(b + 4, &n, 8);
	}
	return b;
}

void gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *v,
			     uint64_t n)
{
	size_t payload = 0;
	for (uint64_t i = 0; i < n; i++)
		payload += 8 + strlen(v[i]);
	uint8_t *b = arr_alloc(GGUF_TYPE_STRING, n, payload);
	if (b) {
		size_t p = 12;
		for (uint64_t i = 0; i < n; i++) {
			uint64_t l = strlen(v[i]);
			memcpy(b + p, &l, 8);
			memcpy(b + p + 8, v[i], l);
			p += 8 + l;
		}
	}
	w_set(w, key, GGUF_TYPE_ARRAY, b, 12 + payload);
}

void gguf_writer_set_arr_f32(struct gguf_writer *w, const char *key, const float *v, uint64_t n)
{
	uint8_t *b = arr_alloc(GGUF_TYPE_FLOAT32, n, (size_t)n * 4);
	if (b && n)
		memcpy(b + 12, v, (size_t)n * 4);
	w_set(w, key, GGUF_TYPE_ARRAY, b, 12 + (size_t)n * 4);
}

void gguf_writer_set_arr_i32(struct gguf_writer *w, const char *key, const int32_t *v, uint64_t n)
{
	uint8_t *b = arr_alloc(GGUF_TYPE_INT32, n, (size_t)n * 4);
	if (b && n)
		memcpy(b + 12, v, (size_t)n * 4);
	w_set(w, key, GGUF_TYPE_ARRAY, b, 12 + (size_t)n * 4);
}

void gguf_writer_set_raw(struct gguf_writer *w, const char *key, enum gguf_type type,
			 const void *val, size_t len)
{
	w_set(w, key, type, dup_bytes(val, len), len);
}

static void w_bad(struct gguf_writer *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_ctx *from, uint64_t i)
{
	BG_ASSERT(i < from->n_kv);
	const struct kv *kv = &from->kvs[i];
	/* the parser refuses such keys; a C-string key cut at a NUL would replace another */
	if (memchr(kv->key.ptr, '\0', (size_t)kv->key.len)) {
		w_bad(w, "key %llu contains a NUL byte", (unsigned long long)i);
		return;
	}
	char *key = malloc((size_t)kv->key.len + 1);
	if (!key) {
		w->oom = true;
		return;
	}
	memcpy(key, kv->key.ptr, (size_t)kv->key.len);
	key[kv->key.len] = '\0';
	w_set(w, key, kv->type, dup_bytes(kv->val, (size_t)kv->val_len), (size_t)kv->val_len);
	free(key);
}

static void w_bad(struct gguf_writer *w, const char *fmt, ...)
{
	if (w->bad[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->bad, sizeof w->bad, fmt, ap);
	va_end(ap);
}

static void add_tensor(struct gguf_writer *w, const char *name, enum gguf_dtype type,
		       uint32_t n_dims, const uint64_t *ne, const void *data, gguf_fill_fn fill,
		       void *fill_arg)
{
	if (n_dims == 0 || n_dims > GGUF_MAX_DIMS) {
		w_bad(w, "tensor '%s': %u dimensions (1 to %d are allowed)", name, n_dims,
		      GGUF_MAX_DIMS);
		return;
	}
	if (!dtype_known(type)) {
		w_bad(w, "tensor '%s': unknown type %d", name, (int)type);
		return;
	}
	if (strlen(name) == 0 || strlen(name) > GGUF_MAX_NAME_LEN) {
		w_bad(w, "tensor name '%.64s' is empty or too long", name);
		return;
	}
	for (size_t i = 0; i < w->n_t; i++)
		if (strcmp(w->ts[i].name, name) == 0) {
			w_bad(w, "duplicate tensor name '%s'", name);
			return;
		}
	struct wtensor t = {0};
	t.type = type;
	t.n_dims = n_dims;
	t.data = data;
	t.fill = fill;
	t.fill_arg = fill_arg;
	uint64_t rows = 1;
	for (int d = 0; d < GGUF_MAX_DIMS; d++)
		t.ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
	for (int d = 1; d < GGUF_MAX_DIMS; d++)
		if (__builtin_mul_overflow(rows, t.ne[d], &rows)) {
			w_bad(w, "tensor '%s': the shape overflows", name);
			return;
		}
	uint64_t row = gguf_row_bytes(type, t.ne[0]);
	if ((row == 0 && t.ne[0] != 0) || __builtin_mul_overflow(row, rows, &t.nbytes)) {
		w_bad(w, "tensor '%s': %llu elements per row is not valid for %s", name,
		      (unsigned long long)t.ne[0], gguf_dtype_name(type));
		return;
	}
	if (w->n_t == w->cap_t) {
		size_t nc = w->cap_t ? 2 * w->cap_t : 16;
		struct wtensor *nt = realloc(w->ts, nc * sizeof *nt);
		if (!nt) {
			w->oom = true;
			return;
		}
		w->ts = nt;
		w->cap_t = nc;
	}
	t.name = strdup(name);
	if (!t.name) {
		w->oom = true;
		return;
	}
	w->ts[w->n_t++] = t;
}

void gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum gguf_dtype type,
			    uint32_t n_dims, const uint64_t *ne, const void *data)
{
	add_tensor(w, name, type, n_dims, ne, data, NULL, NULL);
}

void gguf_writer_add_tensor_fill(struct gguf_writer *w, const char *name, enum gguf_dtype type,
				 uint32_t n_dims, const uint64_t *ne, gguf_fill_fn fill, void *arg)
{
	add_tensor(w, name, type, n_dims, ne, NULL, fill, arg);
}

/* Serializes header, key/values and tensor infos into *meta (malloc'd); assigns tensor
 * offsets; *data_start is where the data section begins (meta is padded to it). */
static enum bg_status w_layout(struct gguf_writer *w, uint8_t **meta, size_t *meta_len,
			       uint64_t *total, struct bg_err *err)
{
	if (w->oom)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory while building the GGUF file");
	if (w->bad[0])
		return bg_fail(err, BG_ERR_INVALID, "%s", w->bad);
	uint32_t align = GGUF_DEFAULT_ALIGNMENT;
	for (size_t i = 0; i < w->n_kv; i++)
		if (strcmp(w->kvs[i].key, "general.alignment") == 0) {
			if (w->kvs[i].type != GGUF_TYPE_UINT32)
				return bg_fail(err, BG_ERR_INVALID,
					       "general.alignment must be u32");
			memcpy(&align, w->kvs[i].val, 4);
			if (align == 0 || (align & (align - 1)) || align > GGUF_MAX_ALIGNMENT)
				return bg_fail(err, BG_ERR_INVALID,
					       "general.alignment %u is not a power of two", align);
		}
	size_t n = 24;
	for (size_t i = 0; i < w->n_kv; i++)
		n += 8 + strlen(w->kvs[i].key) + 4 + w->kvs[i].len;
	for (size_t i = 0; i < w->n_t; i++)
		n += 8 + strlen(w->ts[i].name) + 4 + 8 * w->ts[i].n_dims + 4 + 8;
	size_t padded = (n + align - 1) / align * align;
	uint8_t *b = calloc(1, padded ? padded : 1);
	if (!b)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory while building the GGUF file");
	size_t p = 0;
#define PUT(src, sz)                                                                               \
	do {                                                                                       \
		memcpy(b + p, (src), (sz));                                                        \
		p += (sz);                                                                         \
	} while (0)
	uint32_t version = 3;
	uint64_t nt = w->n_t, nkv = w->n_kv;
	PUT("GGUF", 4);
	PUT(&version, 4);
	PUT(&nt, 8);
	PUT(&nkv, 8);
	for (size_t i = 0; i < w->n_kv; i++) {
		uint64_t kl = strlen(w->kvs[i].key);
		PUT(&kl, 8);
		PUT(w->kvs[i].key, kl);
		PUT(&w->kvs[i].type, 4);
		PUT(w->kvs[i].val, w->kvs[i].len);
	}
	uint64_t off = 0;
	for (size_t i = 0; i < w->n_t; i++) {
		struct wtensor *t = &w->ts[i];
		uint64_t nl = strlen(t->name);
		uint32_t ty = (uint32_t)t->type;
		PUT(&nl, 8);
		PUT(t->name, nl);
		PUT(&t->n_dims, 4);
		PUT(t->ne, 8 * (size_t)t->n_dims);
		PUT(&ty, 4);
		t->offset = off;
		PUT(&off, 8);
		off += (t->nbytes + align - 1) / align * align;
	}
#undef PUT
	BG_ASSERT(p == n);
	*meta = b;
	*meta_len = padded;
	*total = padded + off;
	return BG_OK;
}

/* The bytes of tensor t into dst[t->nbytes]. */
static enum bg_status w_tensor_bytes(const struct wtensor *t, void *dst, struct bg_err *err)
{
	if (t->fill)
		return t->fill(t->fill_arg, t->name, dst, (size_t)t->nbytes, err);
	if (t->nbytes)
		memcpy(dst, t->data, (size_t)t->nbytes);
	return BG_OK;
}

enum bg_status gguf_writer_to_buffer(struct gguf_writer *w, void **buf, size_t *len,
				     struct bg_err *err)
{
	*buf = NULL;
	*len = 0;
	uint8_t *meta;
	size_t meta_len;
	uint64_t total;
	enum bg_status st = w_layout(w, &meta, &meta_len, &total, err);
	if (st)
		return st;
	if (total > SIZE_MAX / 2) {
		free(meta);
		return bg_fail(err, BG_ERR_NOMEM, "the GGUF file would be too large for memory");
	}
	uint8_t *b = calloc(1, (size_t)total);
	if (!b) {
		free(meta);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for a %llu-byte GGUF buffer",
			       (unsigned long long)total);
	}
	memcpy(b, meta, meta_len);
	free(meta);
	for (size_t i = 0; i < w->n_t; i++) {
		st = w_tensor_bytes(&w->ts[i], b + meta_len + w->ts[i].offset, err);
		if (st) {
			free(b);
			return st;
		}
	}
	*buf = b;
	*len = (size_t)total;
	return BG_OK;
}

enum bg_status gguf_writer_write(struct gguf_writer *w, const char *path, struct bg_err *err)
{
	uint8_t *meta;
	size_t meta_len;
	uint64_t total;
	enum bg_status st = w_layout(w, &meta, &meta_len, &total, err);
	if (st)
		return st;
	FILE *f = fopen(path, "wb");
	if (!f) {
		free(meta);
		return bg_fail(err, BG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
	}
	static const uint8_t zeros[64];
	uint8_t *tbuf = NULL;
	size_t tcap = 0;
	bool ok = fwrite(meta, 1, meta_len, f) == meta_len;
	free(meta);
	for (size_t i = 0; ok && i < w->n_t; i++) {
		const struct wtensor *t = &w->ts[i];
		if (t->fill) {
			/* fill each tensor into one reused buffer: a big model is written
			 * without ever holding more than its largest tensor in memory */
			if (t->nbytes > tcap) {
				free(tbuf);
				tcap = (size_t)t->nbytes;
				tbuf = malloc(tcap);
				if (!tbuf) {
					fclose(f);
					unlink(path);
					return bg_fail(err, BG_ERR_NOMEM,
						       "out of memory for tensor '%s'", t->name);
				}
			}
			st = t->fill(t->fill_arg, t->name, tbuf, (size_t)t->nbytes, err);
			if (st) {
				free(tbuf);
				fclose(f);
				unlink(path);
				return st;
			}
			ok = fwrite(tbuf, 1, (size_t)t->nbytes, f) == t->nbytes;
		} else if (t->nbytes) {
			ok = fwrite(t->data, 1, (size_t)t->nbytes, f) == t->nbytes;
		}
		uint64_t pad = i + 1 < w->n_t ? w->ts[i + 1].offset - t->offset - t->nbytes : 0;
		if (i + 1 == w->n_t)
			pad = (total - meta_len) - t->offset - t->nbytes;
		while (ok && pad) {
			size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
			ok = fwrite(zeros, 1, k, f) == k;
			pad -= k;
		}
	}
	free(tbuf);
	int e = errno;
	if (fclose(f) != 0 && ok) {
		ok = false;
		e = errno;
	}
	if (!ok) {
		unlink(path);
		return bg_fail(err, BG_ERR_IO, "%s: write failed: %s", path, strerror(e));
	}
	return BG_OK;
}
