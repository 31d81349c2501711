/* test_kv: the KV block pool under random workloads, with its invariants checked after
 * every operation, plus hand-checked allocation order and failure behaviour. */
#include "check.h"
#include "engine/kv.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

static void test_basics(void)
{
	struct kv_pool *p = NULL;
	struct bg_err err = {0};
	CHECK(kv_pool_create(0, 16, &p, &err) == BG_ERR_INVALID && !p, "zero blocks refused");
	CHECK(kv_pool_create(8, 0, &p, &err) == BG_ERR_INVALID && !p, "zero block size refused");
	CHECK(kv_pool_create(8, 4, &p, &err) == BG_OK, "create: %s", err.msg);
	CHECK(kv_blocks_for(p, 0) == 0 && kv_blocks_for(p, 1) == 1 && kv_blocks_for(p, 4) == 1 &&
		  kv_blocks_for(p, 5) == 2 && kv_blocks_for(p, 32) == 8,
	      "ceil(n / 4)");
	struct kv_table a = {0}, b = {0};
	CHECK(kv_grow(p, &a, 5, &err) == BG_OK && a.n == 2, "a covers 5 tokens with 2 blocks");
	CHECK(a.blocks[0] == 0 && a.blocks[1] == 1, "a fresh pool hands out 0, 1, ...");
	CHECK(kv_grow(p, &a, 8, &err) == BG_OK && a.n == 2, "growing within a block is free");
	CHECK(kv_grow(p, &b, 24, &err) == BG_OK && b.n == 6, "b takes the other 6");
	CHECK(kv_n_free(p) == 0 && kv_n_used(p) == 8, "pool full");
	CHECK(kv_blocks_missing(p, &a, 9) == 1, "a needs one more for 9 tokens");
	CHECK(kv_grow(p, &a, 9, &err) == BG_ERR_CAPACITY, "no block left");
	CHECK(a.n == 2 && kv_n_free(p) == 0, "failed grow changes nothing");
	const struct kv_table *ts[2] = {&a, &b};
	char why[256] = "";
	CHECK(kv_check(p, ts, 2, why, sizeof why), "consistent: %s", why);
	/* A table claiming a block another holds: the checker must see it. */
	int32_t stolen[1] = {b.blocks[0]};
	struct kv_table fake = {.blocks = stolen, .n = 1, .cap = 1};
	const struct kv_table *ts3[3] = {&a, &b, &fake};
	CHECK(!kv_check(p, ts3, 3, why, sizeof why), "a block owned twice is detected");
	/* Leaving a table out is detected too (its blocks have a count and no owner). */
	CHECK(!kv_check(p, ts, 1, why, sizeof why), "an unlisted owner is detected");
	kv_release(p, &b);
	CHECK(b.n == 0 && kv_n_free(p) == 6, "release returns 6");
	struct kv_stats st;
	kv_get_stats(p, &st);
	CHECK(st.peak_used == 8 && st.used_blocks == 2 && st.free_blocks == 6 &&
		  st.alloc_new == 8 && st.alloc_total == 8,
	      "stats: peak %d used %d free %d new %lld", st.peak_used, st.used_blocks,
	      st.free_blocks, (long long)st.alloc_new);
	kv_stats_reset_iter(p);
	struct kv_table c = {0};
	CHECK(kv_grow(p, &c, 4, &err) == BG_OK && c.blocks[0] == b.blocks[0],
	      "LIFO: the next sequence reuses the first block released (%d)", c.blocks[0]);
	kv_get_stats(p, &st);
	CHECK(st.alloc_new == 1 && st.alloc_total == 9, "per-iteration count restarts");
	CHECK(kv_refcount(p, c.blocks[0]) == 1 && kv_refcount(p, b.blocks[5]) == 0 &&
		  kv_refcount(p, 99) == -1,
	      "refcounts");
	kv_release(p, &a);
	kv_release(p, &c);
	CHECK(kv_n_free(p) == 8 && kv_check(p, NULL, 0, why, sizeof why), "all back: %s", why);
	kv_table_free(&a);
	kv_table_free(&b);
	kv_table_free(&c);
	kv_pool_destroy(p);
	kv_pool_destroy(NULL);
}

/* Prefix sharing and copy-on-write keep the counts consistent. */
static void test_sharing(void)
{
	struct kv_pool *p = NULL;
	struct bg_err err = {0};
	char why[256] = "";
	CHECK(kv_pool_create(6, 4, &p, &err) == BG_OK, "create");
	struct kv_table a = {0}, b = {0};
	CHECK(kv_grow(p, &a, 12, &err) == BG_OK && a.n == 3, "a: 3 blocks");
	CHECK(kv_share(p, &b, &a, 2, &err) == BG_OK && b.n == 2 && b.blocks[0] == a.blocks[0] &&
		  b.blocks[1] == a.blocks[1],
	      "b shares a's first 2 blocks");
	CHECK(kv_share(p, &b, &a, 1, &err) == BG_ERR_INVALID, "sharing into a non-empty table");
	CHECK(kv_refcount(p, a.blocks[0]) == 2 && kv_refcount(p, a.blocks[2]) == 1, "counts");
	CHECK(kv_n_used(p) == 3 && kv_n_free(p) == 3, "sharing takes no block");
	const struct kv_table *ts[2] = {&a, &b};
	CHECK(kv_check(p, ts, 2, why, sizeof why), "shared blocks are consistent: %s", why);
	int32_t from = 0, shared = b.blocks[1];
	CHECK(kv_make_private(p, &b, 1, &from, &err) == BG_OK && from == shared &&
		  b.blocks[1] != shared && kv_refcount(p, shared) == 1,
	      "copy-on-write gives b its own block %d (copy from %d)", b.blocks[1], from);
	CHECK(kv_make_private(p, &a, 2, &from, &err) == BG_OK && from == -1, "private: no copy");
	CHECK(kv_check(p, ts, 2, why, sizeof why), "after copy-on-write: %s", why);
	CHECK(kv_grow(p, &b, 16, &err) == BG_OK && kv_n_free(p) == 0, "fill the pool");
	CHECK(kv_make_private(p, &b, 0, &from, &err) == BG_ERR_CAPACITY &&
		  b.blocks[0] == a.blocks[0] && kv_refcount(p, a.blocks[0]) == 2,
	      "copy-on-write without a free block changes nothing");
	kv_release(p, &a);
	CHECK(kv_refcount(p, b.blocks[0]) == 1 && kv_check(p, ts, 2, why, sizeof why),
	      "a shared block survives its first owner: %s", why);
	kv_release(p, &b);
	CHECK(kv_n_free(p) == 6 && kv_check(p, NULL, 0, why, sizeof why), "all back: %s", why);
	kv_table_free(&a);
	kv_table_free(&b);
	kv_pool_destroy(p);
}

/* Random grows and releases over many tables; invariants after every operation. */
static void test_random(void)
{
	enum { NT = 24, NB = 97, BS = 5, STEPS = 20000 };
	struct kv_pool *p = NULL;
	struct bg_err err = {0};
	CHECK(kv_pool_create(NB, BS, &p, &err) == BG_OK, "create");
	struct kv_table t[NT] = {{0}};
	int64_t tokens[NT] = {0};
	const struct kv_table *ts[NT];
	for (int i = 0; i < NT; i++)
		ts[i] = &t[i];
	int bad = 0, fails = 0, peak = 0;
	char why[256];
	for (int s = 0; s < STEPS && bad < 5; s++) {
		int i = (int)rnd(NT);
		if (rnd(4) == 0) {
			kv_release(p, &t[i]);
			tokens[i] = 0;
		} else {
			int64_t want = tokens[i] + 1 + rnd(12);
			int32_t free_before = kv_n_free(p), n_before = t[i].n;
			int32_t missing = kv_blocks_missing(p, &t[i], want);
			enum bg_status st = kv_grow(p, &t[i], want, &err);
			if (missing > free_before) {
				fails++;
				if (st != BG_ERR_CAPACITY || t[i].n != n_before ||
				    kv_n_free(p) != free_before)
					bad++, fprintf(stderr, "grow beyond capacity misbehaved\n");
			} else {
				if (st != BG_OK || t[i].n != kv_blocks_for(p, want) ||
				    kv_n_free(p) != free_before - missing)
					bad++, fprintf(stderr, "grow within capacity misbehaved\n");
				tokens[i] = want;
			}
		}
		if (kv_n_used(p) > peak)
			peak = kv_n_used(p);
		int64_t held = 0;
		for (int k = 0; k < NT; k++)
			held += t[k].n;
		if (!kv_check(p, ts, NT, why, sizeof why) || held != kv_n_used(p) ||
		    kv_n_used(p) + kv_n_free(p) != NB) {
			bad++;
			fprintf(stderr, "step %d: %s (held %lld used %d)\n", s, why,
				(long long)held, kv_n_used(p));
		}
	}
	CHECK(bad == 0, "%d invariant violations", bad);
	CHECK(fails > 0, "the workload reached the capacity limit (%d refusals)", fails);
	struct kv_stats st;
	kv_get_stats(p, &st);
	CHECK(st.peak_used == peak, "peak %d == observed %d", st.peak_used, peak);
	for (int i = 0; i < NT; i++) {
		kv_release(p, &t[i]);
		kv_table_free(&t[i]);
	}
	CHECK(kv_n_free(p) == NB, "everything returned");
	kv_pool_destroy(p);
}

/* Block reuse, hand-derived: pool of 6 blocks of 4 tokens. */
static void test_cache(void)
{
	struct kv_pool *p = NULL;
	struct bg_err err = {0};
	char why[256] = "";
	CHECK(kv_pool_create(6, 4, &p, &err) == BG_OK, "create");
	/* prompt A = 3 full blocks; B shares A's first block only; C = A's blocks 2, 3
	 * without the first (same tokens, other parent: must NOT match) */
	const int32_t A[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
	const int32_t B[8] = {1, 2, 3, 4, 5, 6, 7, 99};
	const int32_t C[8] = {5, 6, 7, 8, 9, 10, 11, 12};
	struct kv_table a = {0}, b = {0}, c = {0};
	CHECK(kv_cache_peek(p, A, 3, NULL) == 0, "an empty cache matches nothing");
	CHECK(kv_grow(p, &a, 12, &err) == BG_OK && a.n == 3, "a: blocks 0, 1, 2");
	uint64_t u = 0;
	for (int i = 0; i < 3; i++)
		u = kv_cache_put(p, a.blocks[i], u, A + 4 * i);
	CHECK(u == 3, "three keys, uids 1, 2, 3 (%llu)", (unsigned long long)u);
	CHECK(kv_cache_put(p, a.blocks[2], 2, A + 8) == 3, "keying a keyed block again: its uid");
	int32_t idle = -1;
	CHECK(kv_cache_peek(p, A, 3, &idle) == 3 && idle == 0, "A matches 3 blocks, none idle");
	CHECK(kv_cache_peek(p, B, 2, NULL) == 1, "B matches its first block only");
	CHECK(kv_cache_peek(p, C, 2, NULL) == 0, "equal tokens under another parent: no match");
	const struct kv_table *ts[3] = {&a, &b, &c};
	CHECK(kv_check(p, ts, 1, why, sizeof why), "keyed, in use: %s", why);
	kv_release(p, &a);
	struct kv_stats st;
	kv_get_stats(p, &st);
	CHECK(kv_n_free(p) == 6 && kv_n_used(p) == 0 && st.idle_blocks == 3 &&
		  st.cached_blocks == 3,
	      "released keyed blocks are idle but count as free (%d idle)", st.idle_blocks);
	CHECK(kv_check(p, ts, 3, why, sizeof why), "idle: %s", why);
	CHECK(kv_cache_peek(p, A, 3, &idle) == 3 && idle == 3, "still cached after release");
	/* B takes 1 block, then needs 1 more: the free list (3 blocks) serves first */
	CHECK(kv_cache_take(p, &b, B, 1, &u, &err) == BG_OK && b.n == 1 && b.blocks[0] == 0 &&
		  u == 1,
	      "B takes block 0 (uid 1)");
	CHECK(kv_cache_take(p, &b, A, 1, &u, &err) == BG_ERR_INVALID && u == 0,
	      "take needs an empty table");
	u = 1;
	CHECK(kv_refcount(p, 0) == 1 && kv_n_free(p) == 5, "a taken idle block is in use");
	CHECK(kv_grow(p, &b, 8, &err) == BG_OK && b.blocks[1] == 3, "B's own block is a free one");
	CHECK(kv_cache_put(p, b.blocks[1], u, B + 4) == 4, "B's second block gets uid 4");
	CHECK(kv_check(p, ts, 3, why, sizeof why), "after B: %s", why);
	/* fill the rest: 2 free blocks, then the idle ones, least recently used first:
	 * a was released last-block-first, so block 2 (A's third) went idle before 1 */
	CHECK(kv_grow(p, &c, 8, &err) == BG_OK && c.blocks[0] == 4 && c.blocks[1] == 5,
	      "free blocks first (%d %d)", c.blocks[0], c.blocks[1]);
	CHECK(kv_grow(p, &c, 12, &err) == BG_OK && c.blocks[2] == 2,
	      "then the least recently used idle block (%d)", c.blocks[2]);
	kv_get_stats(p, &st);
	CHECK(st.evicted_total == 1 && st.cached_blocks == 3 && st.idle_blocks == 1,
	      "one eviction (%lld), 3 keys, 1 idle", (long long)st.evicted_total);
	CHECK(kv_cache_peek(p, A, 3, NULL) == 2, "A now matches 2 blocks");
	CHECK(kv_check(p, ts, 3, why, sizeof why), "after eviction: %s", why);
	CHECK(kv_grow(p, &c, 16, &err) == BG_OK && c.blocks[3] == 1, "the last idle block (1)");
	CHECK(kv_cache_peek(p, A, 3, NULL) == 1 && kv_n_free(p) == 0, "A matches 1, pool full");
	CHECK(kv_grow(p, &c, 20, &err) == BG_ERR_CAPACITY && c.n == 4, "no block left");
	/* an evicted block re-keyed with other content must not revive the old chain */
	const int32_t D[4] = {42, 42, 42, 42};
	uint64_t ud = kv_cache_put(p, c.blocks[3], 0, D);
	CHECK(ud == 5 && kv_cache_peek(p, A, 3, NULL) == 1, "old child unreachable, new key 5");
	/* a second block with content already cached stays unkeyed */
	CHECK(kv_cache_put(p, c.blocks[0], 0, D) == 5 && kv_check(p, ts, 3, why, sizeof why),
	      "an equal entry's uid, nothing keyed twice: %s", why);
	kv_cache_note(p, 2, 3);
	kv_get_stats(p, &st);
	CHECK(st.reused_new == 2 && st.missed_new == 3 && st.reused_total == 2, "notes");
	kv_stats_reset_iter(p);
	kv_get_stats(p, &st);
	CHECK(st.reused_new == 0 && st.missed_new == 0 && st.missed_total == 3, "iteration reset");
	kv_release(p, &b);
	kv_release(p, &c);
	CHECK(kv_n_free(p) == 6 && kv_check(p, NULL, 0, why, sizeof why), "all back: %s", why);
	kv_table_free(&a);
	kv_table_free(&b);
	kv_table_free(&c);
	kv_pool_destroy(p);
}

/* Random prompts from a few families sharing prefixes: take, grow, key, release, with
 * every invariant after every operation and every hit verified against the tokens its
 * block was keyed with. */
static void test_cache_random(void)
{
	enum { NT = 12, NB = 41, BS = 3, STEPS = 6000, MAXB = 8 };
	struct kv_pool *p = NULL;
	struct bg_err err = {0};
	CHECK(kv_pool_create(NB, BS, &p, &err) == BG_OK, "create");
	struct kv_table t[NT] = {{0}};
	int32_t toks[NT][MAXB * BS];
	int32_t *content = calloc((size_t)NB * BS, sizeof *content); /* what a block holds */
	const struct kv_table *ts[NT];
	for (int i = 0; i < NT; i++)
		ts[i] = &t[i];
	int bad = 0, hits = 0, evictions = 0;
	char why[256];
	for (int s = 0; s < STEPS && bad < 5; s++) {
		int i = (int)rnd(NT);
		if (t[i].n > 0) {
			kv_release(p, &t[i]);
		} else {
			/* family f: tokens f, f+1, ... with a random tail after a random point */
			int32_t f = (int32_t)rnd(3), cut = (int32_t)rnd(MAXB * BS);
			int32_t nb = 1 + (int32_t)rnd(MAXB);
			for (int32_t k = 0; k < nb * BS; k++)
				toks[i][k] = k < cut ? f * 100 + k : 1000 + (int32_t)rnd(3);
			int32_t k = kv_cache_peek(p, toks[i], nb, NULL);
			uint64_t u = 0;
			if (kv_cache_take(p, &t[i], toks[i], k, &u, &err) != BG_OK)
				bad++, fprintf(stderr, "take failed: %s\n", err.msg);
			for (int32_t b = 0; b < k; b++)
				if (memcmp(&content[t[i].blocks[b] * BS], &toks[i][b * BS],
					   BS * sizeof(int32_t)))
					bad++, fprintf(stderr, "a hit holds other tokens\n");
			hits += k;
			struct kv_stats st0;
			kv_get_stats(p, &st0);
			if (kv_grow(p, &t[i], (int64_t)nb * BS, &err) != BG_OK) {
				kv_release(p, &t[i]);
			} else {
				struct kv_stats st1;
				kv_get_stats(p, &st1);
				evictions += (int)(st1.evicted_total - st0.evicted_total);
				for (int32_t b = k; b < nb; b++) {
					memcpy(&content[t[i].blocks[b] * BS], &toks[i][b * BS],
					       BS * sizeof(int32_t));
					u = kv_cache_put(p, t[i].blocks[b], u, &toks[i][b * BS]);
				}
			}
		}
		if (!kv_check(p, ts, NT, why, sizeof why))
			bad++, fprintf(stderr, "step %d: %s\n", s, why);
	}
	CHECK(bad == 0, "%d violations", bad);
	CHECK(hits > 100 && evictions > 100, "the workload hits (%d) and evicts (%d)", hits,
	      evictions);
	for (int i = 0; i < NT; i++) {
		kv_release(p, &t[i]);
		kv_table_free(&t[i]);
	}
	CHECK(kv_n_free(p) == NB && kv_check(p, NULL, 0, why, sizeof why), "all back: %s", why);
	free(content);
	kv_pool_destroy(p);
}

/* kv_drop_front (sliding window): dropped entries become KV_DROPPED, their blocks go back
 * (keyed ones stay cached), sharing keeps them dropped, release skips them. */
static void test_drop(void)
{
	struct kv_pool *p = NULL;
	struct bg_err err = {0};
	char why[256] = "";
	CHECK(kv_pool_create(8, 4, &p, &err) == BG_OK, "create");
	struct kv_table a = {0}, b = {0};
	CHECK(kv_grow(p, &a, 20, &err) == BG_OK && a.n == 5, "a: 5 blocks");
	int32_t toks[4] = {7, 8, 9, 10};
	int32_t b0 = a.blocks[0], b1 = a.blocks[1];
	CHECK(kv_cache_put(p, b0, 0, toks) != 0, "block 0 keyed");
	kv_drop_front(p, &a, 2);
	struct kv_stats ks;
	kv_get_stats(p, &ks);
	CHECK(a.n == 5 && a.n_dropped == 2 && a.blocks[0] == KV_DROPPED &&
		  a.blocks[1] == KV_DROPPED && kv_table_held(&a) == 3,
	      "two entries dropped, the table still covers 20 positions");
	CHECK(kv_refcount(p, b0) == 0 && kv_refcount(p, b1) == 0 && kv_n_free(p) == 5 &&
		  ks.idle_blocks == 1 && ks.dropped_total == 2 && ks.dropped_new == 2,
	      "their blocks are back (the keyed one idle, still cached)");
	const struct kv_table *ts[2] = {&a, &b};
	CHECK(kv_check(p, ts, 1, why, sizeof why), "after the drop: %s", why);
	kv_drop_front(p, &a, 1);
	CHECK(a.n_dropped == 2, "dropping fewer than already dropped changes nothing");
	CHECK(kv_share(p, &b, &a, 4, &err) == BG_OK && b.n_dropped == 2 &&
		  b.blocks[1] == KV_DROPPED && kv_refcount(p, a.blocks[2]) == 2,
	      "sharing copies the dropped entries and shares the held blocks");
	CHECK(kv_check(p, ts, 2, why, sizeof why), "after sharing: %s", why);
	a.blocks[0] = b1; /* a dropped entry that names a block: caught */
	CHECK(!kv_check(p, ts, 2, why, sizeof why), "a dropped entry holding a block is caught");
	a.blocks[0] = KV_DROPPED;
	kv_drop_front(p, &b, 99);
	CHECK(b.n_dropped == 4 && kv_table_held(&b) == 0, "drop clamps to the table");
	kv_release(p, &a);
	kv_release(p, &b);
	kv_stats_reset_iter(p);
	kv_get_stats(p, &ks);
	CHECK(a.n == 0 && a.n_dropped == 0 && kv_n_free(p) == 8 && ks.dropped_new == 0 &&
		  ks.dropped_total == 4 && kv_check(p, NULL, 0, why, sizeof why),
	      "all back after release: %s", why);
	kv_table_free(&a);
	kv_table_free(&b);
	kv_pool_destroy(p);
}

int main(void)
{
	test_basics();
	test_sharing();
	test_random();
	test_cache();
	test_cache_random();
	test_drop();
	return check_summary();
}
