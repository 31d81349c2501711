#include "engine/kv.h"

#include <stdlib.h>
#include <string.h>

struct kv_pool {
	int32_t n_blocks;
	int32_t block_size;
	int32_t *refs;	    /* [n_blocks] reference counts; 0 = free */
	int32_t *free_list; /* [n_blocks] a stack: free_list[0, n_free) */
	int32_t n_free;
	int32_t peak_used;
	int64_t alloc_new;
	int64_t alloc_total;
};

static bool table_reserve(struct kv_table *t, int32_t need);

enum bg_status kv_pool_create(int32_t n_blocks, int32_t block_size, struct kv_pool **out,
			      struct bg_err *err)
{
	*out = NULL;
	if (n_blocks <= 0 || block_size <= 0)
		return bg_fail(
		    err, BG_ERR_INVALID,
		    "KV pool needs at least one block of at least one token (got %d blocks "
		    "of %d)",
		    n_blocks, block_size);
	struct kv_pool *p = calloc(1, sizeof *p);
	if (!p)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for the KV pool");
	p->refs = calloc((size_t)n_blocks, sizeof *p->refs);
	p->free_list = malloc((size_t)n_blocks * sizeof *p->free_list);
	if (!p->refs || !p->free_list) {
		kv_pool_destroy(p);
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for a KV pool of %d blocks",
			       n_blocks);
	}
	p->n_blocks = n_blocks;
	p->block_size = block_size;
	/* Stack order puts block 0 on top, so a fresh pool hands out 0, 1, 2, ... */
	for (int32_t i = 0; i < n_blocks; i++)
		p->free_list[i] = n_blocks - 1 - i;
	p->n_free = n_blocks;
	*out = p;
	return BG_OK;
}

void kv_pool_destroy(struct kv_pool *p)
{
	if (!p)
		return;
	free(p->refs);
	free(p->free_list);
	free(p);
}

int32_t kv_block_size(const struct kv_pool *p)
{
	return p->block_size;
}
int32_t kv_n_blocks(const struct kv_pool *p)
{
	return p->n_blocks;
}
int32_t kv_n_free(const struct kv_pool *p)
{
	return p->n_free;
}
int32_t kv_n_used(const struct kv_pool *p)
{
	return p->n_blocks - p->n_free;
}

int32_t kv_blocks_for(const struct kv_pool *p, int64_t n_tokens)
{
	if (n_tokens <= 0)
		return 0;
	int64_t n = (n_tokens + p->block_size - 1) / p->block_size;
	return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

int32_t kv_blocks_missing(const struct kv_pool *p, const struct kv_table *t, int64_t n_tokens)
{
	int32_t need = kv_blocks_for(p, n_tokens);
	return need > t->n ? need - t->n : 0;
}

enum bg_status kv_grow(struct kv_pool *p, struct kv_table *t, int64_t n_tokens, struct bg_err *err)
{
	int32_t need = kv_blocks_for(p, n_tokens);
	if (need <= t->n)
		return BG_OK;
	int32_t add = need - t->n;
	if (add > p->n_free)
		return bg_fail(err, BG_ERR_CAPACITY,
			       "KV pool exhausted: %d more blocks needed, %d free", add, p->n_free);
	if (!table_reserve(t, need))
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for a block table");
	for (int32_t i = 0; i < add; i++) {
		int32_t b = p->free_list[--p->n_free];
		BG_ASSERT(p->refs[b] == 0);
		p->refs[b] = 1;
		t->blocks[t->n++] = b;
	}
	p->alloc_new += add;
	p->alloc_total += add;
	if (kv_n_used(p) > p->peak_used)
		p->peak_used = kv_n_used(p);
	return BG_OK;
}

void kv_release(struct kv_pool *p, struct kv_table *t)
{
	/* Release in reverse so that the blocks come back on top of the stack in the order
	 * they were handed out: the next sequence gets the same indices (cache-friendly, and
	 * deterministic). */
	for (int32_t i = t->n - 1; i >= 0; i--) {
		int32_t b = t->blocks[i];
		BG_ASSERT(b >= 0 && b < p->n_blocks && p->refs[b] > 0);
		if (--p->refs[b] == 0)
			p->free_list[p->n_free++] = b;
	}
	t->n = 0;
}

static bool table_reserve(struct kv_table *t, int32_t need)
{
	if (need <= t->cap)
		return true;
	int32_t cap = t->cap ? t->cap : 4;
	while (cap < need)
		cap = cap > INT32_MAX / 2 ? need : cap * 2;
	int32_t *b = realloc(t->blocks, (size_t)cap * sizeof *b);
	if (!b)
		return false;
	t->blocks = b;
	t->cap = cap;
	return true;
}

enum bg_status kv_share(struct kv_pool *p, struct kv_table *dst, const struct kv_table *src,
			int32_t n, struct bg_err *err)
{
	if (dst->n != 0 || n < 0 || n > src->n)
		return bg_fail(err, BG_ERR_INVALID, "kv_share: %d blocks of %d into a table of %d",
			       n, src->n, dst->n);
	if (!table_reserve(dst, n))
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for a block table");
	for (int32_t i = 0; i < n; i++) {
		int32_t b = src->blocks[i];
		BG_ASSERT(p->refs[b] > 0);
		p->refs[b]++;
		dst->blocks[i] = b;
	}
	dst->n = n;
	return BG_OK;
}

enum bg_status kv_make_private(struct kv_pool *p, struct kv_table *t, int32_t i, int32_t *copy_from,
			       struct bg_err *err)
{
	BG_ASSERT(i >= 0 && i < t->n);
	int32_t old = t->blocks[i];
	*copy_from = -1;
	if (p->refs[old] <= 1)
		return BG_OK;
	if (p->n_free == 0)
		return bg_fail(err, BG_ERR_CAPACITY, "KV pool exhausted: no block for a copy");
	int32_t b = p->free_list[--p->n_free];
	BG_ASSERT(p->refs[b] == 0);
	p->refs[b] = 1;
	p->refs[old]--;
	t->blocks[i] = b;
	*copy_from = old;
	p->alloc_new++;
	p->alloc_total++;
	if (kv_n_used(p) > p->peak_used)
		p->peak_used = kv_n_used(p);
	return BG_OK;
}

void kv_table_free(struct kv_table *t)
{
	if (!t)
		return;
	free(t->blocks);
	t->blocks = NULL;
	t->n = t->cap = 0;
}

int32_t kv_refcount(const struct kv_pool *p, int32_t block)
{
	if (block < 0 || block >= p->n_blocks)
		return -1;
	return p->refs[block];
}

void kv_get_stats(const struct kv_pool *p, struct kv_stats *out)
{
	out->n_blocks = p->n_blocks;
	out->block_size = p->block_size;
	out->free_blocks = p->n_free;
	out->used_blocks = p->n_blocks - p->n_free;
	out->peak_used = p->peak_used;
	out->alloc_new = p->alloc_new;
	out->alloc_total = p->alloc_total;
}

void kv_stats_reset_iter(struct kv_pool *p)
{
	p->alloc_new = 0;
}

bool kv_check(const struct kv_pool *p, const struct kv_table *const *tables, int32_t n_tables,
	      char *why, size_t why_cap)
{
#define KV_BAD(...)                                                                                \
	do {                                                                                       \
		if (why && why_cap)                                                                \
			snprintf(why, why_cap, __VA_ARGS__);                                       \
		free(seen);                                                                        \
		return false;                                                                      \
	} while (0)
	int32_t *seen = calloc((size_t)p->n_blocks, sizeof *seen);
	if (!seen) {
		if (why && why_cap)
			snprintf(why, why_cap, "out of memory in kv_check");
		return false;
	}
	if (p->n_free < 0 || p->n_free > p->n_blocks)
		KV_BAD("free count %d outside [0, %d]", p->n_free, p->n_blocks);
	for (int32_t i = 0; i < p->n_free; i++) {
		int32_t b = p->free_list[i];
		if (b < 0 || b >= p->n_blocks)
			KV_BAD("free list holds an invalid block %d", b);
		if (seen[b]++)
			KV_BAD("block %d is on the free list twice", b);
		if (p->refs[b] != 0)
			KV_BAD("free block %d has refcount %d", b, p->refs[b]);
	}
	int32_t n_used = 0;
	for (int32_t b = 0; b < p->n_blocks; b++) {
		if (p->refs[b] < 0)
			KV_BAD("block %d has negative refcount %d", b, p->refs[b]);
		if (p->refs[b] > 0)
			n_used++;
		else if (!seen[b])
			KV_BAD("block %d has refcount 0 but is not on the free list", b);
	}
	if (n_used + p->n_free != p->n_blocks)
		KV_BAD("used %d + free %d != total %d", n_used, p->n_free, p->n_blocks);
	if (n_tables > 0) {
		memset(seen, 0, (size_t)p->n_blocks * sizeof *seen);
		for (int32_t t = 0; t < n_tables; t++) {
			const struct kv_table *kt = tables[t];
			if (!kt)
				continue;
			for (int32_t i = 0; i < kt->n; i++) {
				int32_t b = kt->blocks[i];
				if (b < 0 || b >= p->n_blocks)
					KV_BAD("table %d holds an invalid block %d", t, b);
				seen[b]++;
			}
		}
		for (int32_t b = 0; b < p->n_blocks; b++)
			if (seen[b] != p->refs[b])
				KV_BAD("block %d is held by %d tables but has refcount %d", b,
				       seen[b], p->refs[b]);
	}
	free(seen);
	return true;
#undef KV_BAD
}
