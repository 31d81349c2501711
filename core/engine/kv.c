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
	/* block reuse: allocated by the first kv_cache_put (NULL until then) */
	uint64_t *uid;	  /* [n_blocks] 0 = no key */
	uint64_t *parent; /* [n_blocks] the parent uid of a keyed block */
	uint64_t *hash;	  /* [n_blocks] hash of (parent, tokens) of a keyed block */
	int32_t *ctok;	  /* [n_blocks * block_size] the tokens of a keyed block */
	int32_t *hnext;	  /* [n_blocks] next keyed block in the same bucket, -1 = end */
	int32_t *bucket;  /* [n_buckets] first keyed block of the bucket, -1 = empty */
	int32_t n_buckets; /* a power of two >= n_blocks */
	int32_t *lru_prev, *lru_next; /* [n_blocks] the idle list, oldest first; -1 = end */
	int32_t lru_head, lru_tail;
	int32_t n_idle, n_cached;
	uint64_t next_uid;
	int64_t reused_new, missed_new, reused_total, missed_total, evicted_total;
	int64_t dropped_new, dropped_total; /* kv_drop_front */
};

static bool table_reserve(struct kv_table *t, int32_t need);
static void lru_push(struct kv_pool *p, int32_t b);

/* Drops one reference on block b; at 0 it goes to the idle list (keyed) or the free
 * list. */
static void unref(struct kv_pool *p, int32_t b)
{
	BG_ASSERT(b >= 0 && b < p->n_blocks && p->refs[b] > 0);
	if (--p->refs[b] > 0)
		return;
	if (p->uid && p->uid[b])
		lru_push(p, b); /* kept for reuse; most recently used last */
	else
		p->free_list[p->n_free++] = b;
}

/* ---- the cache's tables ---- */

static uint64_t key_hash(uint64_t parent, const int32_t *tokens, int32_t n)
{
	uint64_t h = parent * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
	for (int32_t i = 0; i < n; i++) {
		h ^= (uint32_t)tokens[i];
		h *= 0x100000001B3ull;
		h ^= h >> 29;
	}
	h ^= h >> 31;
	h *= 0xBF58476D1CE4E5B9ull;
	return h ^ (h >> 32);
}

static bool cache_init(struct kv_pool *p)
{
	if (p->uid)
		return true;
	int32_t nb = 1;
	while (nb < p->n_blocks && nb < (1 << 30))
		nb *= 2;
	size_t n = (size_t)p->n_blocks;
	p->uid = calloc(n, sizeof *p->uid);
	p->parent = calloc(n, sizeof *p->parent);
	p->hash = calloc(n, sizeof *p->hash);
	p->ctok = malloc(n * (size_t)p->block_size * sizeof *p->ctok);
	p->hnext = malloc(n * sizeof *p->hnext);
	p->bucket = malloc((size_t)nb * sizeof *p->bucket);
	p->lru_prev = malloc(n * sizeof *p->lru_prev);
	p->lru_next = malloc(n * sizeof *p->lru_next);
	if (!p->uid || !p->parent || !p->hash || !p->ctok || !p->hnext || !p->bucket ||
	    !p->lru_prev || !p->lru_next) {
		free(p->uid), free(p->parent), free(p->hash), free(p->ctok), free(p->hnext);
		free(p->bucket), free(p->lru_prev), free(p->lru_next);
		p->uid = p->parent = p->hash = NULL;
		p->ctok = p->hnext = p->bucket = p->lru_prev = p->lru_next = NULL;
		return false;
	}
	for (int32_t i = 0; i < nb; i++)
		p->bucket[i] = -1;
	p->n_buckets = nb;
	p->lru_head = p->lru_tail = -1;
	p->next_uid = 1;
	return true;
}

static void lru_unlink(struct kv_pool *p, int32_t b)
{
	int32_t pv = p->lru_prev[b], nx = p->lru_next[b];
	if (pv >= 0)
		p->lru_next[pv] = nx;
	else
		p->lru_head = nx;
	if (nx >= 0)
		p->lru_prev[nx] = pv;
	else
		p->lru_tail = pv;
	p->n_idle--;
}

static void lru_push(struct kv_pool *p, int32_t b)
{
	p->lru_prev[b] = p->lru_tail;
	p->lru_next[b] = -1;
	if (p->lru_tail >= 0)
		p->lru_next[p->lru_tail] = b;
	else
		p->lru_head = b;
	p->lru_tail = b;
	p->n_idle++;
}

/* Forgets b's key. */
static void unkey(struct kv_pool *p, int32_t b)
{
	int32_t *at = &p->bucket[p->hash[b] & (uint64_t)(p->n_buckets - 1)];
	while (*at != b) {
		BG_ASSERT(*at >= 0);
		at = &p->hnext[*at];
	}
	*at = p->hnext[b];
	p->uid[b] = 0;
	p->n_cached--;
}

/* The keyed block for (parent, tokens), or -1. */
static int32_t cache_find(const struct kv_pool *p, uint64_t parent, const int32_t *tokens)
{
	if (!p->uid)
		return -1;
	uint64_t h = key_hash(parent, tokens, p->block_size);
	for (int32_t b = p->bucket[h & (uint64_t)(p->n_buckets - 1)]; b >= 0; b = p->hnext[b])
		if (p->hash[b] == h && p->parent[b] == parent &&
		    memcmp(&p->ctok[(size_t)b * p->block_size], tokens,
			   (size_t)p->block_size * sizeof *tokens) == 0)
			return b;
	return -1;
}

/* Hands out one block with count 1: a free one, else the least recently used idle one
 * (its key forgotten). The caller has checked kv_n_free > 0. */
static int32_t take_block(struct kv_pool *p)
{
	int32_t b;
	if (p->n_free > 0) {
		b = p->free_list[--p->n_free];
	} else {
		b = p->lru_head;
		BG_ASSERT(b >= 0);
		lru_unlink(p, b);
		unkey(p, b);
		p->evicted_total++;
	}
	BG_ASSERT(p->refs[b] == 0);
	p->refs[b] = 1;
	return b;
}

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
	free(p->uid), free(p->parent), free(p->hash), free(p->ctok), free(p->hnext);
	free(p->bucket), free(p->lru_prev), free(p->lru_next);
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
	return p->n_free + p->n_idle;
}
int32_t kv_n_used(const struct kv_pool *p)
{
	return p->n_blocks - p->n_free - p->n_idle;
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
	if (add > kv_n_free(p))
		return bg_fail(err, BG_ERR_CAPACITY,
			       "KV pool exhausted: %d more blocks needed, %d free", add, kv_n_free(p));
	if (!table_reserve(t, need))
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for a block table");
	for (int32_t i = 0; i < add; i++)
		t->blocks[t->n++] = take_block(p);
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
	for (int32_t i = t->n - 1; i >= t->n_dropped; i--)
		unref(p, t->blocks[i]);
	t->n = 0;
	t->n_dropped = 0;
}

void kv_drop_front(struct kv_pool *p, struct kv_table *t, int32_t n)
{
	if (n > t->n)
		n = t->n;
	/* in position order: the oldest block becomes the least recently used idle one */
	for (; t->n_dropped < n; t->n_dropped++) {
		unref(p, t->blocks[t->n_dropped]);
		t->blocks[t->n_dropped] = KV_DROPPED;
		p->dropped_total++;
		p->dropped_new++;
	}
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
	dst->n_dropped = src->n_dropped < n ? src->n_dropped : n;
	for (int32_t i = 0; i < n; i++) {
		int32_t b = src->blocks[i];
		dst->blocks[i] = b;
		if (i < dst->n_dropped)
			continue;
		BG_ASSERT(p->refs[b] > 0);
		p->refs[b]++;
	}
	dst->n = n;
	return BG_OK;
}

enum bg_status kv_make_private(struct kv_pool *p, struct kv_table *t, int32_t i, int32_t *copy_from,
			       struct bg_err *err)
{
	BG_ASSERT(i >= t->n_dropped && i < t->n);
	int32_t old = t->blocks[i];
	*copy_from = -1;
	if (p->refs[old] <= 1)
		return BG_OK;
	if (kv_n_free(p) == 0)
		return bg_fail(err, BG_ERR_CAPACITY, "KV pool exhausted: no block for a copy");
	int32_t b = take_block(p);
	p->refs[old]--;
	t->blocks[i] = b;
	*copy_from = old;
	p->alloc_new++;
	p->alloc_total++;
	if (kv_n_used(p) > p->peak_used)
		p->peak_used = kv_n_used(p);
	return BG_OK;
}

/* ---- block reuse ---- */

int32_t kv_cache_peek(const struct kv_pool *p, const int32_t *tokens, int32_t n_blocks,
		      int32_t *n_idle)
{
	int32_t n = 0, idle = 0;
	uint64_t parent = 0;
	for (; n < n_blocks; n++) {
		int32_t b = cache_find(p, parent, tokens + (size_t)n * p->block_size);
		if (b < 0)
			break;
		idle += p->refs[b] == 0;
		parent = p->uid[b];
	}
	if (n_idle)
		*n_idle = idle;
	return n;
}

uint64_t kv_cache_chain_uid(const struct kv_pool *p, const int32_t *tokens, int32_t n_blocks)
{
	uint64_t parent = 0;
	for (int32_t n = 0; n < n_blocks; n++) {
		int32_t b = cache_find(p, parent, tokens + (size_t)n * p->block_size);
		if (b < 0)
			return 0;
		parent = p->uid[b];
	}
	return parent;
}

enum bg_status kv_cache_take(struct kv_pool *p, struct kv_table *t, const int32_t *tokens,
			     int32_t n, uint64_t *uid, struct bg_err *err)
{
	*uid = 0;
	if (t->n != 0 || n < 0 || kv_cache_peek(p, tokens, n, NULL) < n)
		return bg_fail(err, BG_ERR_INVALID,
			       "kv_cache_take: %d blocks into a table of %d, or not cached", n,
			       t->n);
	if (!table_reserve(t, n))
		return bg_fail(err, BG_ERR_NOMEM, "out of memory for a block table");
	uint64_t parent = 0;
	for (int32_t i = 0; i < n; i++) {
		int32_t b = cache_find(p, parent, tokens + (size_t)i * p->block_size);
		BG_ASSERT(b >= 0);
		if (p->refs[b]++ == 0)
			lru_unlink(p, b);
		t->blocks[i] = b;
		parent = p->uid[b];
	}
	t->n = n;
	*uid = parent;
	if (kv_n_used(p) > p->peak_used)
		p->peak_used = kv_n_used(p);
	return BG_OK;
}

uint64_t kv_cache_put(struct kv_pool *p, int32_t block, uint64_t parent, const int32_t *tokens)
{
	BG_ASSERT(block >= 0 && block < p->n_blocks && p->refs[block] > 0);
	if (!cache_init(p))
		return 0;
	if (p->uid[block])
		return p->uid[block];
	int32_t other = cache_find(p, parent, tokens);
	if (other >= 0)
		return p->uid[other];
	uint64_t h = key_hash(parent, tokens, p->block_size);
	p->uid[block] = p->next_uid++;
	p->parent[block] = parent;
	p->hash[block] = h;
	memcpy(&p->ctok[(size_t)block * p->block_size], tokens,
	       (size_t)p->block_size * sizeof *tokens);
	int32_t *head = &p->bucket[h & (uint64_t)(p->n_buckets - 1)];
	p->hnext[block] = *head;
	*head = block;
	p->n_cached++;
	return p->uid[block];
}

void kv_cache_note(struct kv_pool *p, int32_t reused, int32_t missed)
{
	p->reused_new += reused;
	p->reused_total += reused;
	p->missed_new += missed;
	p->missed_total += missed;
}

void kv_table_free(struct kv_table *t)
{
	if (!t)
		return;
	free(t->blocks);
	t->blocks = NULL;
	t->n = t->cap = t->n_dropped = 0;
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
	out->free_blocks = kv_n_free(p);
	out->used_blocks = kv_n_used(p);
	out->peak_used = p->peak_used;
	out->alloc_new = p->alloc_new;
	out->alloc_total = p->alloc_total;
	out->cached_blocks = p->n_cached;
	out->idle_blocks = p->n_idle;
	out->reused_new = p->reused_new;
	out->missed_new = p->missed_new;
	out->reused_total = p->reused_total;
	out->missed_total = p->missed_total;
	out->evicted_total = p->evicted_total;
	out->dropped_new = p->dropped_new;
	out->dropped_total = p->dropped_total;
}

void kv_stats_reset_iter(struct kv_pool *p)
{
	p->alloc_new = 0;
	p->reused_new = 0;
	p->missed_new = 0;
	p->dropped_new = 0;
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
	for (int32_t i = 0; i < p->n_free; i++)
		if (p->uid && p->uid[p->free_list[i]])
			KV_BAD("free block %d has a key", p->free_list[i]);
	int32_t n_lru = 0;
	for (int32_t b = p->uid ? p->lru_head : -1, prev = -1; b >= 0; prev = b, b = p->lru_next[b]) {
		if (b >= p->n_blocks || n_lru > p->n_blocks)
			KV_BAD("the idle list is broken at block %d", b);
		if (p->lru_prev[b] != prev)
			KV_BAD("idle block %d's back link is %d, not %d", b, p->lru_prev[b], prev);
		if (seen[b]++)
			KV_BAD("block %d is on the free or idle list twice", b);
		if (p->refs[b] != 0 || !p->uid[b])
			KV_BAD("idle block %d has refcount %d and uid %llu", b, p->refs[b],
			       (unsigned long long)p->uid[b]);
		n_lru++;
	}
	if (n_lru != p->n_idle)
		KV_BAD("idle list holds %d blocks, count says %d", n_lru, p->n_idle);
	int32_t n_used = 0, n_keyed = 0;
	for (int32_t b = 0; b < p->n_blocks; b++) {
		if (p->refs[b] < 0)
			KV_BAD("block %d has negative refcount %d", b, p->refs[b]);
		if (p->refs[b] > 0)
			n_used++;
		else if (!seen[b])
			KV_BAD("block %d has refcount 0 but is on neither list", b);
		if (p->uid && p->uid[b]) {
			n_keyed++;
			if (cache_find(p, p->parent[b], &p->ctok[(size_t)b * p->block_size]) != b)
				KV_BAD("keyed block %d is not found by its key", b);
		}
	}
	if (n_keyed != p->n_cached)
		KV_BAD("%d keyed blocks, count says %d", n_keyed, p->n_cached);
	if (n_used + p->n_free + p->n_idle != p->n_blocks)
		KV_BAD("used %d + free %d + idle %d != total %d", n_used, p->n_free, p->n_idle,
		       p->n_blocks);
	if (n_tables > 0) {
		memset(seen, 0, (size_t)p->n_blocks * sizeof *seen);
		for (int32_t t = 0; t < n_tables; t++) {
			const struct kv_table *kt = tables[t];
			if (!kt)
				continue;
			if (kt->n_dropped < 0 || kt->n_dropped > kt->n)
				KV_BAD("table %d has %d dropped of %d blocks", t, kt->n_dropped, kt->n);
			for (int32_t i = 0; i < kt->n_dropped; i++)
				if (kt->blocks[i] != KV_DROPPED)
					KV_BAD("table %d's dropped entry %d holds block %d", t, i,
					       kt->blocks[i]);
			for (int32_t i = kt->n_dropped; i < kt->n; i++) {
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
