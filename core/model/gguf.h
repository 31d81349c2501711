/* gguf: reading and writing GGUF files (versions 2 and 3).
 *
 * The reader parses from a byte buffer (a memory map of the file, or any buffer the
 * caller keeps alive) and never trusts it: every count, length, offset and size is
 * bounds-checked before use, so a truncated or hostile file yields BG_ERR_FORMAT with a
 * sentence naming the problem, never an out-of-bounds read. Version 1 is refused with
 * BG_ERR_UNSUPPORTED. After a successful parse every accessor below is safe and O(1) or
 * O(log n); strings point into the buffer and are NOT NUL-terminated (use .len).
 *
 * Invariants of a parsed context: keys are unique; keys and tensor names hold no NUL
 * byte (such a file is refused: they are looked up and written as C strings, so the
 * writer could not copy them); every tensor's data range
 * [offset, offset + nbytes) lies inside the buffer and is aligned to general.alignment;
 * tensor names are unique; nbytes matches the type and shape.
 *
 * The writer builds a file in memory order (header, key/values, tensor infos, aligned
 * data) and writes it to a path or to a malloc'd buffer.
 */
#ifndef BG_GGUF_H
#define BG_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Metadata value types, numbered as in the GGUF specification. */
enum gguf_type {
	GGUF_TYPE_UINT8 = 0,
	GGUF_TYPE_INT8 = 1,
	GGUF_TYPE_UINT16 = 2,
	GGUF_TYPE_INT16 = 3,
	GGUF_TYPE_UINT32 = 4,
	GGUF_TYPE_INT32 = 5,
	GGUF_TYPE_FLOAT32 = 6,
	GGUF_TYPE_BOOL = 7,
	GGUF_TYPE_STRING = 8,
	GGUF_TYPE_ARRAY = 9,
	GGUF_TYPE_UINT64 = 10,
	GGUF_TYPE_INT64 = 11,
	GGUF_TYPE_FLOAT64 = 12,
};

/* Tensor element types, numbered as ggml's. Only these are accepted; any other type id
 * is BG_ERR_UNSUPPORTED naming the tensor. */
enum gguf_dtype {
	GGUF_DTYPE_F32 = 0,
	GGUF_DTYPE_F16 = 1,
	GGUF_DTYPE_Q4_0 = 2, /* Q4_0 ... IQ4_XS: llama.cpp's block formats, see model/quant.h */
	GGUF_DTYPE_Q4_1 = 3,
	GGUF_DTYPE_Q5_0 = 6,
	GGUF_DTYPE_Q5_1 = 7,
	GGUF_DTYPE_Q8_0 = 8, /* blocks of 32: fp16 scale + 32 int8, 34 bytes */
	GGUF_DTYPE_Q2_K = 10,
	GGUF_DTYPE_Q3_K = 11,
	GGUF_DTYPE_Q4_K = 12,
	GGUF_DTYPE_Q5_K = 13,
	GGUF_DTYPE_Q6_K = 14,
	GGUF_DTYPE_IQ2_XXS = 16, /* the i-quants: super-blocks of 256 that index lattice tables */
	GGUF_DTYPE_IQ2_XS = 17,
	GGUF_DTYPE_IQ3_XXS = 18,
	GGUF_DTYPE_IQ1_S = 19,
	GGUF_DTYPE_IQ4_NL = 20,
	GGUF_DTYPE_IQ3_S = 21,
	GGUF_DTYPE_IQ2_S = 22,
	GGUF_DTYPE_IQ4_XS = 23,
	GGUF_DTYPE_IQ1_M = 29,
	GGUF_DTYPE_BF16 = 30,
	GGUF_DTYPE_MXFP4 = 39, /* blocks of 32: e8m0 exponent + 16 bytes of e2m1 codes (gpt-oss) */
};

#define GGUF_MAX_DIMS	       4
#define GGUF_DEFAULT_ALIGNMENT 32

struct gguf_str {
	const char *ptr; /* into the parsed buffer; not NUL-terminated */
	uint64_t len;
};

struct gguf_tensor {
	struct gguf_str name;
	uint32_t n_dims;
	uint64_t ne[GGUF_MAX_DIMS]; /* ne[0] is the fastest-varying (row length); unused = 1 */
	enum gguf_dtype type;
	uint64_t offset;  /* relative to the start of the data section */
	uint64_t nbytes;  /* computed from type and shape */
	const void *data; /* into the parsed buffer */
};

struct gguf_ctx;

/* Maps path read-only and parses it. On failure *out is NULL and err names the file and
 * the problem. */
enum bg_status gguf_open(const char *path, struct gguf_ctx **out, struct bg_err *err);

/* Parses buf[0, len). The buffer must outlive the context; it is not copied. If
 * take_ownership, the context free()s buf when closed. */
enum bg_status gguf_parse(const void *buf, size_t len, bool take_ownership, struct gguf_ctx **out,
			  struct bg_err *err);

void gguf_close(struct gguf_ctx *ctx); /* NULL-safe; unmaps/frees */

uint32_t gguf_version(const struct gguf_ctx *ctx);
uint32_t gguf_alignment(const struct gguf_ctx *ctx);

/* ---- metadata ---- */

uint64_t gguf_n_kv(const struct gguf_ctx *ctx);
int64_t gguf_find_key(const struct gguf_ctx *ctx, const char *key); /* -1 if absent */
struct gguf_str gguf_kv_key(const struct gguf_ctx *ctx, uint64_t i);
enum gguf_type gguf_kv_type(const struct gguf_ctx *ctx, uint64_t i);

/* Typed getters by key. They return false (and leave *out alone) when the key is absent
 * or its value cannot be represented: integer getters accept any integer type whose
 * value fits; gguf_get_f32 accepts FLOAT32 or FLOAT64; gguf_get_bool accepts BOOL. */
bool gguf_get_u32(const struct gguf_ctx *ctx, const char *key, uint32_t *out);
bool gguf_get_i64(const struct gguf_ctx *ctx, const char *key, int64_t *out);
bool gguf_get_f32(const struct gguf_ctx *ctx, const char *key, float *out);
bool gguf_get_bool(const struct gguf_ctx *ctx, const char *key, bool *out);
bool gguf_get_str(const struct gguf_ctx *ctx, const char *key, struct gguf_str *out);

/* Arrays by key: element type and count; false if absent or not an array. Nested arrays
 * are parsed and validated; their elements have type GGUF_TYPE_ARRAY and are not
 * accessible element-wise (nothing in a llama model needs them). */
bool gguf_get_arr(const struct gguf_ctx *ctx, const char *key, enum gguf_type *elem_type,
		  uint64_t *n);
/* Element i of a string array (i < n, the array must be GGUF_TYPE_STRING; strings are
 * indexed at parse time so this is O(1)). */
struct gguf_str gguf_arr_str(const struct gguf_ctx *ctx, const char *key, uint64_t i);
/* Copies a whole numeric array into dst[n] converting element types (any integer type
 * to int32 where it fits, FLOAT32/FLOAT64 to float). Returns false if the key is absent,
 * the count differs from n, or a value does not fit. */
bool gguf_arr_copy_f32(const struct gguf_ctx *ctx, const char *key, float *dst, uint64_t n);
bool gguf_arr_copy_i32(const struct gguf_ctx *ctx, const char *key, int32_t *dst, uint64_t n);
/* A bool array of exactly n elements (each byte 0 or 1) into dst[n]; false otherwise. */
bool gguf_arr_copy_bool(const struct gguf_ctx *ctx, const char *key, bool *dst, uint64_t n);

/* Writes a one-line human-readable rendering of value i into buf (truncated to cap, long
 * arrays abbreviated as "[n x type]"). Returns the length it would have written. */
size_t gguf_kv_format(const struct gguf_ctx *ctx, uint64_t i, char *buf, size_t cap);

/* ---- tensors ---- */

uint64_t gguf_n_tensors(const struct gguf_ctx *ctx);
const struct gguf_tensor *gguf_tensor(const struct gguf_ctx *ctx, uint64_t i);
const struct gguf_tensor *gguf_find_tensor(const struct gguf_ctx *ctx, const char *name);

const char *gguf_dtype_name(enum gguf_dtype t); /* ggml's names: "f32", "q4_K", "iq4_xs"... */
/* Bytes of a row of n elements of type t; 0 if n is not a multiple of the block size. */
uint64_t gguf_row_bytes(enum gguf_dtype t, uint64_t n);

/* ---- writer ---- */

struct gguf_writer;

struct gguf_writer *gguf_writer_create(void);	 /* NULL on allocation failure */
void gguf_writer_destroy(struct gguf_writer *w); /* NULL-safe */

/* Setters copy the key and value. Setting an existing key replaces it. Any allocation
 * failure is remembered and reported by gguf_writer_write/_to_buffer. */
void gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v);
void gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v);
void gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v);
void gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v);
void gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *v,
			     uint64_t n);
void gguf_writer_set_arr_f32(struct gguf_writer *w, const char *key, const float *v, uint64_t n);
void gguf_writer_set_arr_i32(struct gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
/* Copies key/value i of another context verbatim (any type, nested arrays included). */
void gguf_writer_copy_kv(struct gguf_writer *w, const struct gguf_ctx *from, uint64_t i);

/* Adds a tensor. data (gguf_row_bytes(type, ne[0]) * ne[1] * ... bytes) is NOT copied:
 * it must stay valid until the write. */
void gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum gguf_dtype type,
			    uint32_t n_dims, const uint64_t *ne, const void *data);

/* Sets a value of any type from its serialized GGUF bytes (what follows the type id in a
 * file: for arrays the element type, count and elements). For the types the setters above
 * do not cover (u8..i64, f64, nested arrays). The bytes are copied, not checked. */
void gguf_writer_set_raw(struct gguf_writer *w, const char *key, enum gguf_type type,
			 const void *val, size_t len);

/* Produces a tensor's bytes at write time into dst[nbytes]; returns BG_OK or a status with
 * err filled. */
typedef enum bg_status (*gguf_fill_fn)(void *arg, const char *name, void *dst, size_t nbytes,
				       struct bg_err *err);
/* Like gguf_writer_add_tensor, but the data is produced by fill(arg, ...) during the
 * write, so that gguf_writer_write never holds more than one tensor in memory. arg must
 * stay valid until the write. */
void gguf_writer_add_tensor_fill(struct gguf_writer *w, const char *name, enum gguf_dtype type,
				 uint32_t n_dims, const uint64_t *ne, gguf_fill_fn fill, void *arg);

/* Writes a version-3 file. On error nothing useful is left at path. */
enum bg_status gguf_writer_write(struct gguf_writer *w, const char *path, struct bg_err *err);
/* Same bytes into a malloc'd buffer (caller frees). */
enum bg_status gguf_writer_to_buffer(struct gguf_writer *w, void **buf, size_t *len,
				     struct bg_err *err);

#endif
