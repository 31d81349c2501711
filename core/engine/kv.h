/* kv: the KV block manager (DESIGN.md §4) — block *indices* only; the backend owns the
 * memory behind them.
 *
 * A pool of n_blocks blocks of block_size token slots each. Free blocks sit on a LIFO
 * free list (so allocation is deterministic); every block carries a reference count (1
 * for a block owned by one sequence; > 1 for a prefix shared with kv_share, split again
 * by kv_make_private before a write: copy-on-write). A sequence's block table (struct
 * kv_table) lists the blocks that hold its positions [0, n * block_size): position p
 * lives in blocks[p / block_size].
 *
 * Block reuse (prefix caching). A full block of prompt KV may be given a key: the
 * block_size tokens it holds and the uid of the keyed block before it in its sequence
 * (0 for a sequence's first block). uids are unique for the pool's lifetime and a block
 * gets a new one each time it is keyed, so a chain of keys names a whole prefix: block i
 * of a prompt matches a cached block only when their tokens are equal AND the cached
 * block's parent uid is the uid of the block matched at i - 1. The hash only finds
 * candidates; tokens and parent are always compared. A keyed block whose count drops
 * to 0 is not freed but kept "idle" on a least-recently-used list; blocks are handed
 * out from the free list first, then by evicting the least recently used idle block
 * (its key is forgotten; keyed children of it can no longer be reached and age out the
 * same way). kv_n_free counts free + idle blocks: both can be handed out at once.
 *
 * Invariants (kv_check): a block is on the free list iff its count is 0 and it has no
 * key; a block is on the idle list iff its count is 0 and it has a key; no block is on
 * either list twice; used + free + idle = total; every keyed block is found by its key;
 * given the live tables, each block's count equals the number of tables that hold it.
 */
#ifndef BG_KV_H
#define BG_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

struct kv_pool;

/* The entry of a block table whose block was given back by kv_drop_front. */
#define KV_DROPPED (-1)

/* One sequence's block table. Zero-initialize it ({0}) before first use.
 * blocks[0, n_dropped) are KV_DROPPED: positions no layer will read again (a sliding
 * window has passed them, see kv_drop_front); blocks[n_dropped, n) are held. */
struct kv_table {
	int32_t *blocks; /* [n] block indices, in position order */
	int32_t n;	 /* entries: the table covers positions [0, n * block_size) */
	int32_t cap;	 /* allocated entries of blocks */
	int32_t n_dropped; /* leading entries given back (KV_DROPPED) */
};

struct kv_stats {
	int32_t n_blocks;   /* total */
	int32_t block_size; /* tokens per block */
	int32_t free_blocks; /* free + idle: blocks that can be handed out */
	int32_t used_blocks; /* count > 0 */
	int32_t peak_used;   /* the most blocks ever used at once */
	int64_t alloc_new;   /* blocks handed out since the last kv_stats_reset_iter */
	int64_t alloc_total; /* blocks handed out since creation */
	/* block reuse */
	int32_t cached_blocks;		  /* blocks with a key (idle or in use) */
	int32_t idle_blocks;		  /* keyed blocks with count 0 */
	int64_t reused_new, missed_new;	  /* kv_cache_note since kv_stats_reset_iter */
	int64_t reused_total, missed_total; /* since creation */
	int64_t evicted_total;		  /* idle blocks whose key was dropped to reuse them */
	int64_t dropped_new, dropped_total; /* blocks given back by kv_drop_front (sliding
					     * window): this iteration, since creation */
};

/* Creates a pool of n_blocks (> 0) blocks of block_size (> 0) tokens. */
enum bg_status kv_pool_create(int32_t n_blocks, int32_t block_size, struct kv_pool **out,
			      struct bg_err *err);
void kv_pool_destroy(struct kv_pool *p); /* NULL-safe */

int32_t kv_block_size(const struct kv_pool *p);
int32_t kv_n_blocks(const struct kv_pool *p);
int32_t kv_n_free(const struct kv_pool *p);
int32_t kv_n_used(const struct kv_pool *p);

/* Blocks needed to hold n_tokens positions: ceil(n_tokens / block_size); 0 for n <= 0. */
int32_t kv_blocks_for(const struct kv_pool *p, int64_t n_tokens);

/* Blocks t would still need to cover n_tokens positions (0 if it already does). */
int32_t kv_blocks_missing(const struct kv_pool *p, const struct kv_table *t, int64_t n_tokens);

/* Grows t so that it covers n_tokens positions, taking blocks from the free list.
 * BG_ERR_CAPACITY when there are not enough free blocks, BG_ERR_NOMEM when the table
 * cannot grow: on failure nothing changes. */
enum bg_status kv_grow(struct kv_pool *p, struct kv_table *t, int64_t n_tokens, struct bg_err *err);

/* Drops t's reference on each of its blocks (a block whose count reaches 0 returns to
 * the free list) and empties t (its array is kept for reuse). */
void kv_release(struct kv_pool *p, struct kv_table *t);

/* Sliding window: gives back t's reference on its blocks [n_dropped, n) (n clamped to
 * t->n) and marks them KV_DROPPED; the table keeps covering the same positions, and
 * positions in dropped blocks must never be read or written again. Blocks whose count
 * reaches 0 go to the free list, or stay cached (idle) when keyed. */
void kv_drop_front(struct kv_pool *p, struct kv_table *t, int32_t n);

/* Blocks t holds: n - n_dropped. */
static inline int32_t kv_table_held(const struct kv_table *t)
{
	return t->n - t->n_dropped;
}

/* Prefix sharing: appends src's first n entries to the empty table dst (dropped ones stay
 * dropped); each shared held block's count goes up by one (no block is taken from the free list). BG_ERR_INVALID
 * when dst is not empty or n > src->n, BG_ERR_NOMEM: nothing changed on failure. */
enum bg_status kv_share(struct kv_pool *p, struct kv_table *dst, const struct kv_table *src,
			int32_t n, struct bg_err *err);

/* Copy-on-write, before writing into block i of t: a shared block (count > 1) is
 * replaced in t by a fresh one and its old index returned in *copy_from (the caller
 * copies the data, e.g. with the backend's kv_copy); a private block stays and
 * *copy_from = -1. BG_ERR_CAPACITY when no block is free: nothing changed. */
enum bg_status kv_make_private(struct kv_pool *p, struct kv_table *t, int32_t i, int32_t *copy_from,
			       struct bg_err *err);

/* ---- block reuse ---- */

/* How many leading full blocks of tokens[n_blocks * block_size] are cached as one
 * chain (0..n_blocks); *n_idle (may be NULL) = how many of those have count 0 (taking
 * them lowers kv_n_free). Changes nothing. */
int32_t kv_cache_peek(const struct kv_pool *p, const int32_t *tokens, int32_t n_blocks,
		      int32_t *n_idle);

/* The uid of block n_blocks - 1 of the chain of tokens[n_blocks * block_size]: the name
 * of that whole prefix while it stays cached (a block gets a new uid each time it is
 * keyed, so a uid never names two prefixes); 0 when n_blocks <= 0 or the chain is not
 * cached that far. Changes nothing. */
uint64_t kv_cache_chain_uid(const struct kv_pool *p, const int32_t *tokens, int32_t n_blocks);

/* Appends the first n blocks of the chain kv_cache_peek found for tokens (n <= what it
 * returned) to the empty table t, raising each block's count (idle blocks leave the idle
 * list, so they cannot be evicted while held); *uid = the uid of the last one (0 when n
 * is 0), the parent for kv_cache_put of block n. BG_ERR_INVALID when t is not empty or
 * the chain is shorter than n, BG_ERR_NOMEM: nothing changed on failure. */
enum bg_status kv_cache_take(struct kv_pool *p, struct kv_table *t, const int32_t *tokens,
			     int32_t n, uint64_t *uid, struct bg_err *err);

/* Keys block (count > 0, every slot written) by (parent, tokens[block_size]). Returns the
 * uid that now names this content after parent: the block's own uid when it already had
 * a key or got one now, or the uid of an equal entry already cached (block then stays
 * unkeyed: one copy of a prefix is enough). Returns 0, keying nothing, when the cache's
 * tables cannot be allocated (reuse is an optimization: nothing else changes). */
uint64_t kv_cache_put(struct kv_pool *p, int32_t block, uint64_t parent, const int32_t *tokens);

/* Counts lookups for the statistics: reused blocks taken from the cache, missed blocks
 * the sequence computes itself. */
void kv_cache_note(struct kv_pool *p, int32_t reused, int32_t missed);

/* Frees t's array (call after kv_release); NULL-safe. */
void kv_table_free(struct kv_table *t);

/* Reference count of a block (0 = free); -1 for an index out of range. */
int32_t kv_refcount(const struct kv_pool *p, int32_t block);

void kv_get_stats(const struct kv_pool *p, struct kv_stats *out);
/* Starts a new iteration's alloc_new count. */
void kv_stats_reset_iter(struct kv_pool *p);

/* Checks the invariants above. tables[n_tables] are every live table (may be NULL when
 * n_tables is 0: then only the pool's own invariants are checked, and the table sums are
 * not). Returns true when they hold; otherwise writes the first violation into why. */
bool kv_check(const struct kv_pool *p, const struct kv_table *const *tables, int32_t n_tables,
	      char *why, size_t why_cap);

#endif
