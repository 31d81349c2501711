/* grammar: the stack matcher and the token-trie mask of grammar.h, over the compiled form
 * of grammar_int.h (grammar_parse.c builds it).
 *
 * A stack is a list of element positions, the top last; its top is always a character
 * element after `advance` (rule references on top are expanded into their alternatives).
 * A state is a set of distinct stacks; the empty stack means "the grammar is complete
 * here".
 *
 * Sets live in a word arena as [n_stacks] then per stack [hash, len, pos_0 .. pos_len-1].
 * Everything a step builds is appended to the scratch arenas and released afterwards, so a
 * step allocates nothing once the scratch has grown to its working size.
 *
 * The mask walks a trie of the vocabulary's token bytes depth first: a node's stack set is
 * its parent's advanced by the code point the node's byte completes, so every prefix
 * shared by many tokens is matched once. A subtree whose set is empty is skipped whole.
 */
#include "sample/grammar.h"
#include "sample/grammar_int.h"

#include <stdlib.h>
#include <string.h>

/* One interval of the character class at pos: [*lo, *hi] (a character is [c, c], `.` is
 * every code point); returns the element after it. The class goes on while the returned
 * element is a GE_CHAR_ALT. Every walk of a class below goes through here. */
static inline const struct gel *class_interval(const struct gel *pos, uint32_t *lo, uint32_t *hi)
{
	if (pos[1].type == GE_CHAR_RNG_UPPER) {
		*lo = pos->value;
		*hi = pos[1].value;
		return pos + 2;
	}
	*lo = pos->type == GE_CHAR_ANY ? 0 : pos->value;
	*hi = pos->type == GE_CHAR_ANY ? UINT32_MAX : pos->value;
	return pos + 1;
}

static bool class_positive(const struct gel *pos)
{
	return pos->type == GE_CHAR || pos->type == GE_CHAR_ANY;
}

/* Matches code point chr at the character element `pos`; *next is the element after the
 * character's alternatives (llama_grammar_match_char). */
static bool match_char(const struct gel *pos, uint32_t chr, const struct gel **next)
{
	bool found = false, positive = class_positive(pos);
	do {
		uint32_t lo, hi;
		pos = class_interval(pos, &lo, &hi);
		found = found || (lo <= chr && chr <= hi);
	} while (pos->type == GE_CHAR_ALT);
	*next = pos;
	return found == positive;
}

/* Is some code point of [low, high] outside every range and character of the negated
 * class at pos? The parser sorted the class by first code point (gp_sort_class): one
 * pass moves `cur` past each interval that covers it, and the first interval that starts
 * above `cur` leaves `cur` uncovered. */
static bool negated_leaves_gap(const struct gel *pos, uint32_t low, uint32_t high)
{
	uint32_t cur = low;
	do {
		uint32_t lo, hi;
		pos = class_interval(pos, &lo, &hi);
		if (lo > cur)
			return true;
		if (hi >= cur) {
			if (hi >= high)
				return false;
			cur = hi + 1;
		}
	} while (pos->type == GE_CHAR_ALT);
	return true;
}

/* Can an unfinished UTF-8 sequence (value, n_remain more bytes) complete to a code point
 * that pos matches? As llama_grammar_match_partial_char for characters and positive
 * classes; for a negated class, yes when some completion avoids every excluded character
 * (llama.cpp says no as soon as one excluded character is a possible completion, so that
 * `[^🦙]` refused the first byte of every 4-byte character, and a text was accepted whole
 * but refused byte by byte: found by fuzz_grammar). */
/* The last Unicode code point: the decoder below takes 4-byte leads up to ff as llama.cpp
 * does, but a sequence that decodes past this is no character and no class matches it
 * (not even a negated one: `[^\x00-\U0010FFFF]` matches nothing). */
#define UNICODE_MAX 0x10FFFFu

static bool match_partial(const struct gel *pos, uint32_t value, int n_remain)
{
	bool positive = class_positive(pos);
	if (n_remain < 0 || (n_remain == 1 && value < 2))
		return false;
	uint32_t low = value << (n_remain * 6);
	uint32_t high = low | ((1u << (n_remain * 6)) - 1);
	if (low > UNICODE_MAX) /* no completion is a character (f4 90.., f5..ff) */
		return false;
	if (high > UNICODE_MAX)
		high = UNICODE_MAX;
	if (low == 0) {
		if (n_remain == 2)
			low = 1u << 11;
		else if (n_remain == 3)
			low = 1u << 16;
	}
	if (pos->type == GE_CHAR_NOT)
		return negated_leaves_gap(pos, low, high);
	do {
		uint32_t lo, hi;
		pos = class_interval(pos, &lo, &hi);
		if (lo <= high && low <= hi)
			return positive;
	} while (pos->type == GE_CHAR_ALT);
	return !positive;
}

/* ---- word buffers ---- */

struct wbuf {
	uint32_t *w;
	size_t n, cap;
};

struct grammar_scratch {
	struct wbuf sets; /* stack sets, LIFO (mark/release) */
	struct wbuf todo; /* advance's work list: entries [len, pos...] */
	struct wbuf tidx; /* start of each todo entry */
	struct wbuf cur;  /* the stack being expanded */
	struct wbuf seen; /* [hash, len, pos...] stacks already expanded in this accept */
	/* Where the stacks of seen and of the set being built are, by hash: advance looks a
	 * stack up in both once per stack it expands, and with a linear scan an ambiguous
	 * grammar's step was quadratic in its stacks (92 % of fuzz_grammar's time). */
	struct stab {
		uint32_t *off; /* [cap] entry offsets in the buffer */
		uint32_t *gen; /* [cap] == g: filled since the last stab_reset */
		size_t cap, used;
		uint32_t g;
	} seen_tab, set_tab;
	/* accept_char results of this step: in a trie walk the same (set, code point) pair
	 * comes back at many nodes (every token prefix of the same length inside a string
	 * reaches the same set). memo holds [n_src, src words, n_res, res words] records. */
	struct wbuf memo;
	struct memo_slot {
		uint64_t key;
		uint32_t gen; /* == memo_gen: filled in this step */
		uint32_t at;  /* record offset in memo */
		uint32_t chr;
	} *slots;	   /* [GRAMMAR_MEMO_SLOTS] */
	uint32_t memo_gen, memo_used;
	/* The mask walk keeps every set it reaches, interned (one copy per distinct set),
	 * so a set is known by its offset and a transition (offset, code point) is looked up
	 * without hashing words. */
	struct htab {
		uint64_t *keys;
		uint32_t *vals;
		uint32_t *gens; /* == memo_gen: filled in this step */
		size_t cap, used;
	} trans, intern;
	uint64_t ops;	  /* stack operations in this step */
	uint64_t max_ops; /* the budget of ops per step: GRAMMAR_STEP_OPS unless set lower */
	bool over;	  /* the step ran past its budget */
	bool oom;
	/* Masks of recent states: inside a JSON string or a repetition the state repeats
	 * step after step (and across the rows of a batch), and its mask is copied instead
	 * of walked. Keyed by grammar, vocabulary and the state's words. */
	struct mask_entry {
		uint64_t key;	      /* hash of everything below, 0 = empty */
		const void *g, *v;    /* identities, with their content hashes */
		uint64_t ghash, vhash;
		uint32_t *words;      /* [n_words] the state's set, then partial value/remain */
		size_t n_words;
		uint32_t *mask;	      /* [mask_words] */
		size_t mask_words;
	} cache[GRAMMAR_MASK_CACHE];
	uint32_t cache_next; /* round-robin victim */
	uint64_t cache_hits;
};

/* Words of scratch a step holds now (its budget is GRAMMAR_STEP_WORDS). */
static size_t step_words(const struct grammar_scratch *s)
{
	return s->sets.cap + s->todo.cap + s->tidx.cap + s->cur.cap + s->seen.cap + s->memo.cap +
	       2 * (s->seen_tab.cap + s->set_tab.cap);
}

static bool wb_reserve(struct grammar_scratch *s, struct wbuf *b, size_t more)
{
	/* allocated on the first call even for 0 words: callers memcpy into b->w, and
	 * memcpy(NULL, ., 0) is undefined (found by fuzz/fuzz_grammar: `root ::=`) */
	if (b->w && b->n + more <= b->cap)
		return true;
	size_t total = step_words(s);
	size_t nc = b->cap ? b->cap : 256;
	while (nc < b->n + more)
		nc *= 2;
	if (total - b->cap + nc > GRAMMAR_STEP_WORDS) {
		s->over = true;
		return false;
	}
	uint32_t *nw = realloc(b->w, nc * sizeof *nw);
	if (!nw) {
		s->oom = true;
		return false;
	}
	b->w = nw;
	b->cap = nc;
	return true;
}

static uint32_t stack_hash(const uint32_t *pos, uint32_t len)
{
	uint32_t h = 2166136261u ^ len;
	for (uint32_t i = 0; i < len; i++)
		h = (h ^ pos[i]) * 16777619u;
	return h;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* Empties t (in O(1): a new generation). */
static void stab_reset(struct stab *t)
{
	t->used = 0;
	if (++t->g == 0) { /* wrapped: old generations could match again */
		if (t->gen)
			memset(t->gen, 0, t->cap * sizeof *t->gen);
		t->g = 1;
	}
}

/* Is the stack (hash, pos[len]) in t, whose entries [hash, len, pos...] lie in b? One
 * stack operation per entry compared. */
static bool stab_has(struct grammar_scratch *s, const struct stab *t, const struct wbuf *b,
		     uint32_t hash, const uint32_t *pos, uint32_t len)
{
	if (!t->cap)
		return false;
	for (size_t i = (size_t)mix64(hash) & (t->cap - 1); t->gen[i] == t->g; i = (i + 1) & (t->cap - 1)) {
		s->ops++;
		const uint32_t *e = b->w + t->off[i];
		if (e[0] == hash && e[1] == len && memcmp(e + 2, pos, len * 4) == 0)
			return true;
	}
	return false;
}

static void stab_put(struct stab *t, const struct wbuf *b, uint32_t at)
{
	size_t i = (size_t)mix64(b->w[at]) & (t->cap - 1);
	while (t->gen[i] == t->g)
		i = (i + 1) & (t->cap - 1);
	t->off[i] = at;
	t->gen[i] = t->g;
	t->used++;
}

/* Adds the entry at b[at] (not in t) to t, growing it (within the step's memory budget). */
static bool stab_add(struct grammar_scratch *s, struct stab *t, const struct wbuf *b, size_t at)
{
	if ((t->used + 1) * 2 > t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 256;
		if (step_words(s) + 2 * (nc - t->cap) > GRAMMAR_STEP_WORDS) {
			s->over = true;
			return false;
		}
		struct stab n = {malloc(nc * sizeof *n.off), calloc(nc, sizeof *n.gen), nc, 0, 1};
		if (!n.off || !n.gen) {
			free(n.off);
			free(n.gen);
			s->oom = true;
			return false;
		}
		for (size_t i = 0; i < t->cap; i++)
			if (t->gen[i] == t->g)
				stab_put(&n, b, t->off[i]);
		free(t->off);
		free(t->gen);
		*t = n;
	}
	stab_put(t, b, (uint32_t)at);
	return true;
}

/* Appends the stack (hash, pos[len]) to b as [hash, len, pos...] and to t, unless t has it:
 * 1 added, 0 present already, -1 out of budget or memory. */
static int stack_add(struct grammar_scratch *s, struct stab *t, struct wbuf *b, uint32_t hash,
		     const uint32_t *pos, uint32_t len)
{
	if (stab_has(s, t, b, hash, pos, len))
		return 0;
	if (!wb_reserve(s, b, 2 + len))
		return -1;
	size_t at = b->n;
	b->w[b->n++] = hash;
	b->w[b->n++] = len;
	memcpy(b->w + b->n, pos, len * 4);
	b->n += len;
	return stab_add(s, t, b, at) ? 1 : -1;
}

/* A new set is being built (at the top of s->sets): no stack expanded for it yet. */
static void set_begin(struct grammar_scratch *s)
{
	s->seen.n = 0;
	stab_reset(&s->seen_tab);
	stab_reset(&s->set_tab);
}

/* Expands the stack waiting in s->todo (pushed by the caller) until every resulting
 * stack is empty or has a character on top, and adds those to the set at s->sets[set]
 * (llama_grammar_advance_stack). s->seen holds the stacks expanded already for this set;
 * set_begin starts both. */
static bool advance(const struct grammar *g, struct grammar_scratch *s, size_t set)
{
	while (s->tidx.n) {
		size_t start = s->tidx.w[--s->tidx.n];
		uint32_t len = s->todo.w[start];
		/* an expansion copies and hashes the stack: its cost counts its length (with 1
		 * per stack, `(| | ... | [^a]){0,2000}`, 108 ways to 2000-deep stacks, ran ~10 s
		 * within budget once stacks were found by hash: campaign 5's slow units) */
		s->ops += 1 + len;
		if (s->ops > s->max_ops) {
			s->over = true;
			return false;
		}
		s->cur.n = 0;
		if (!wb_reserve(s, &s->cur, len))
			return false;
		memcpy(s->cur.w, s->todo.w + start + 1, len * 4);
		s->cur.n = len;
		s->todo.n = start;
		uint32_t h = stack_hash(s->cur.w, len);
		int added = stack_add(s, &s->seen_tab, &s->seen, h, s->cur.w, len);
		if (added <= 0) {
			if (added < 0)
				return false;
			continue;
		}
		const struct gel *top = len ? &g->el[s->cur.w[len - 1]] : NULL;
		if (!top || top->type != GE_RULE_REF) {
			/* a final stack: add to the set unless present */
			added = stack_add(s, &s->set_tab, &s->sets, h, s->cur.w, len);
			if (added < 0)
				return false;
			s->sets.w[set] += (uint32_t)added;
			continue;
		}
		uint32_t after = s->cur.w[len - 1] + 1; /* the element after the reference */
		const struct gel *sub = &g->el[g->rule_start[top->value]];
		for (;;) {
			if (!wb_reserve(s, &s->todo, len + 2) || !wb_reserve(s, &s->tidx, 1))
				return false;
			size_t e = s->todo.n;
			s->tidx.w[s->tidx.n++] = (uint32_t)e;
			uint32_t *w = s->todo.w + e + 1;
			uint32_t nl = len - 1;
			memcpy(w, s->cur.w, nl * 4);
			if (!is_end_of_seq(&g->el[after]))
				w[nl++] = after;
			if (!is_end_of_seq(sub))
				w[nl++] = (uint32_t)(sub - g->el);
			s->todo.w[e] = nl;
			s->todo.n = e + 1 + nl;
			while (!is_end_of_seq(sub))
				sub++;
			if (sub->type == GE_ALT)
				sub++;
			else
				break;
		}
	}
	return true;
}

/* Pushes the stack pos[len] (not in s->todo) as a todo entry. */
static bool todo_push(struct grammar_scratch *s, const uint32_t *pos, uint32_t len)
{
	if (!wb_reserve(s, &s->todo, len + 1) || !wb_reserve(s, &s->tidx, 1))
		return false;
	s->tidx.w[s->tidx.n++] = (uint32_t)s->todo.n;
	s->todo.w[s->todo.n++] = len;
	memcpy(s->todo.w + s->todo.n, pos, len * 4);
	s->todo.n += len;
	return true;
}

static size_t set_words(const uint32_t *w);

#define GRAMMAR_MEMO_SLOTS 8192u

static uint64_t memo_key(const uint32_t *w, size_t n, uint32_t chr)
{
	uint64_t h = 1469598103934665603ull ^ chr;
	for (size_t i = 0; i < n; i++)
		h = (h ^ w[i]) * 1099511628211ull;
	return h;
}

static bool accept_char_raw(const struct grammar *g, struct grammar_scratch *s, size_t from,
			    uint32_t chr, size_t *out);

/* Appends to s->sets the set of stacks reached from the set at `from` by code point chr
 * (llama_grammar_accept); *out is its offset. Memoized within the step. */
static bool accept_char(const struct grammar *g, struct grammar_scratch *s, size_t from, uint32_t chr,
			size_t *out)
{
	size_t n_src = set_words(s->sets.w + from);
	uint64_t key = memo_key(s->sets.w + from, n_src, chr);
	uint32_t slot = (uint32_t)(key & (GRAMMAR_MEMO_SLOTS - 1));
	if (s->slots) {
		for (uint32_t probe = 0; probe < 8; probe++, slot = (slot + 1) & (GRAMMAR_MEMO_SLOTS - 1)) {
			struct memo_slot *m = &s->slots[slot];
			if (m->gen != s->memo_gen)
				break;
			if (m->key != key || m->chr != chr || s->memo.w[m->at] != n_src ||
			    memcmp(s->memo.w + m->at + 1, s->sets.w + from, n_src * 4) != 0)
				continue;
			uint32_t res_at = m->at + 1 + (uint32_t)n_src;
			uint32_t n_res = s->memo.w[res_at];
			if (!wb_reserve(s, &s->sets, n_res))
				return false;
			*out = s->sets.n;
			memcpy(s->sets.w + s->sets.n, s->memo.w + res_at + 1, n_res * 4);
			s->sets.n += n_res;
			s->ops++;
			return true;
		}
	}
	if (!accept_char_raw(g, s, from, chr, out))
		return false;
	/* remember it, when there is room (a full table only costs speed) */
	if (!s->slots) {
		s->slots = calloc(GRAMMAR_MEMO_SLOTS, sizeof *s->slots);
		if (!s->slots)
			return true;
	}
	slot = (uint32_t)(key & (GRAMMAR_MEMO_SLOTS - 1));
	for (uint32_t probe = 0; probe < 8; probe++, slot = (slot + 1) & (GRAMMAR_MEMO_SLOTS - 1)) {
		struct memo_slot *m = &s->slots[slot];
		if (m->gen == s->memo_gen)
			continue;
		size_t n_res = set_words(s->sets.w + *out);
		if (s->memo_used >= GRAMMAR_MEMO_SLOTS / 2 || s->memo.n + n_src + n_res + 2 > UINT32_MAX / 2 ||
		    !wb_reserve(s, &s->memo, n_src + n_res + 2)) {
			s->over = false; /* a memo that does not fit is no error */
			return true;
		}
		uint32_t at = (uint32_t)s->memo.n;
		s->memo.w[s->memo.n++] = (uint32_t)n_src;
		memcpy(s->memo.w + s->memo.n, s->sets.w + from, n_src * 4);
		s->memo.n += n_src;
		s->memo.w[s->memo.n++] = (uint32_t)n_res;
		memcpy(s->memo.w + s->memo.n, s->sets.w + *out, n_res * 4);
		s->memo.n += n_res;
		*m = (struct memo_slot){key, s->memo_gen, at, chr};
		s->memo_used++;
		break;
	}
	return true;
}

static bool accept_char_raw(const struct grammar *g, struct grammar_scratch *s, size_t from,
			    uint32_t chr, size_t *out)
{
	if (!wb_reserve(s, &s->sets, 1))
		return false;
	size_t set = s->sets.n;
	s->sets.w[s->sets.n++] = 0;
	set_begin(s);
	uint32_t n = s->sets.w[from];
	size_t q = from + 1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t len = s->sets.w[q + 1];
		size_t stack_at = q + 2;
		q += 2 + len;
		if (!len)
			continue;
		const struct gel *next;
		if (!match_char(&g->el[s->sets.w[stack_at + len - 1]], chr, &next))
			continue;
		/* the stack without its top, plus the next element if the sequence goes on;
		 * built in todo (sets may move while we push) */
		if (!wb_reserve(s, &s->todo, len + 2) || !wb_reserve(s, &s->tidx, 1))
			return false;
		size_t e = s->todo.n;
		s->tidx.w[s->tidx.n++] = (uint32_t)e;
		uint32_t nl = len - 1;
		memcpy(s->todo.w + e + 1, s->sets.w + stack_at, nl * 4);
		if (!is_end_of_seq(next))
			s->todo.w[e + 1 + nl++] = (uint32_t)(next - g->el);
		s->todo.w[e] = nl;
		s->todo.n = e + 1 + nl;
		if (!advance(g, s, set))
			return false;
	}
	*out = set;
	return true;
}

static bool set_has_empty(const uint32_t *w)
{
	uint32_t n = w[0];
	const uint32_t *q = w + 1;
	for (uint32_t i = 0; i < n; i++) {
		if (q[1] == 0)
			return true;
		q += 2 + q[1];
	}
	return false;
}

static bool set_partial_ok(const struct grammar *g, const uint32_t *w, uint32_t value, int n_remain)
{
	uint32_t n = w[0];
	const uint32_t *q = w + 1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t len = q[1];
		if (len && match_partial(&g->el[q[2 + len - 1]], value, n_remain))
			return true;
		q += 2 + len;
	}
	return false;
}

/* ---- the row state ---- */

struct grammar_state {
	const struct grammar *g;
	uint32_t *set; /* [n_words] one stack set */
	size_t n_words;
	uint32_t partial_value; /* an unfinished UTF-8 sequence: its bits so far */
	int partial_remain;	/* bytes it still needs (0: none) */
	bool finished;		/* an end-of-generation token was accepted */
};

static size_t set_words(const uint32_t *w)
{
	uint32_t n = w[0];
	size_t q = 1;
	for (uint32_t i = 0; i < n; i++)
		q += 2 + w[q + 1];
	return q;
}

static enum bg_status step_error(struct grammar_scratch *s, struct bg_err *err)
{
	if (s->oom)
		return bg_fail(err, BG_ERR_NOMEM, "grammar: out of memory");
	return bg_fail(err, BG_ERR_CAPACITY,
		       "grammar: a step needed more than %llu stack operations or %u words of "
		       "memory (the grammar is too ambiguous)",
		       (unsigned long long)s->max_ops, GRAMMAR_STEP_WORDS);
}

static void step_begin(struct grammar_scratch *s)
{
	s->sets.n = s->todo.n = s->tidx.n = s->cur.n = s->seen.n = s->memo.n = 0;
	s->memo_gen++;
	s->memo_used = 0;
	if (s->memo_gen == 0) { /* wrapped: old generations could match again */
		if (s->slots)
			memset(s->slots, 0, GRAMMAR_MEMO_SLOTS * sizeof *s->slots);
		if (s->trans.gens)
			memset(s->trans.gens, 0, s->trans.cap * 4);
		if (s->intern.gens)
			memset(s->intern.gens, 0, s->intern.cap * 4);
		s->trans.used = s->intern.used = 0;
		s->memo_gen = 1;
	}
	s->trans.used = s->intern.used = 0;
	s->ops = 0;
	s->over = s->oom = false;
}

struct grammar_scratch *grammar_scratch_create(void)
{
	struct grammar_scratch *s = calloc(1, sizeof *s);
	if (s)
		s->max_ops = GRAMMAR_STEP_OPS;
	return s;
}

void grammar_scratch_set_step_ops(struct grammar_scratch *s, uint64_t ops)
{
	s->max_ops = ops && ops < GRAMMAR_STEP_OPS ? ops : GRAMMAR_STEP_OPS;
}

uint64_t grammar_scratch_mask_hits(const struct grammar_scratch *s)
{
	return s->cache_hits;
}

void grammar_scratch_free(struct grammar_scratch *s)
{
	if (!s)
		return;
	for (int i = 0; i < GRAMMAR_MASK_CACHE; i++) {
		free(s->cache[i].words);
		free(s->cache[i].mask);
	}
	free(s->sets.w);
	free(s->todo.w);
	free(s->tidx.w);
	free(s->cur.w);
	free(s->seen.w);
	free(s->seen_tab.off);
	free(s->seen_tab.gen);
	free(s->set_tab.off);
	free(s->set_tab.gen);
	free(s->memo.w);
	free(s->slots);
	free(s->trans.keys);
	free(s->trans.vals);
	free(s->trans.gens);
	free(s->intern.keys);
	free(s->intern.vals);
	free(s->intern.gens);
	free(s);
}

/* Replaces st's set by the set at s->sets[at]. */
static bool state_take(struct grammar_state *st, struct grammar_scratch *s, size_t at)
{
	size_t n = set_words(s->sets.w + at);
	uint32_t *w = malloc(n * 4);
	if (!w) {
		s->oom = true;
		return false;
	}
	memcpy(w, s->sets.w + at, n * 4);
	free(st->set);
	st->set = w;
	st->n_words = n;
	return true;
}

enum bg_status grammar_state_create(const struct grammar *g, struct grammar_scratch *s,
				    struct grammar_state **out, struct bg_err *err)
{
	*out = NULL;
	struct grammar_state *st = calloc(1, sizeof *st);
	if (!st)
		return bg_fail(err, BG_ERR_NOMEM, "grammar: out of memory");
	st->g = g;
	step_begin(s);
	bool ok = wb_reserve(s, &s->sets, 1);
	if (ok) {
		s->sets.w[s->sets.n++] = 0;
		set_begin(s);
		const struct gel *pos = &g->el[g->rule_start[g->root]];
		for (;;) {
			uint32_t p = (uint32_t)(pos - g->el);
			if (!(ok = todo_push(s, &p, is_end_of_seq(pos) ? 0 : 1)) ||
			    !(ok = advance(g, s, 0)))
				break;
			while (!is_end_of_seq(pos))
				pos++;
			if (pos->type == GE_ALT)
				pos++;
			else
				break;
		}
	}
	if (!ok || !state_take(st, s, 0)) {
		grammar_state_free(st);
		return step_error(s, err);
	}
	*out = st;
	return BG_OK;
}

struct grammar_state *grammar_state_clone(const struct grammar_state *st)
{
	struct grammar_state *c = malloc(sizeof *c);
	if (!c)
		return NULL;
	*c = *st;
	c->set = malloc(st->n_words * 4);
	if (!c->set) {
		free(c);
		return NULL;
	}
	memcpy(c->set, st->set, st->n_words * 4);
	return c;
}

void grammar_state_free(struct grammar_state *st)
{
	if (!st)
		return;
	free(st->set);
	free(st);
}

bool grammar_state_accepts(const struct grammar_state *st)
{
	return !st->finished && set_has_empty(st->set);
}

bool grammar_state_finished(const struct grammar_state *st)
{
	return st->finished;
}

int32_t grammar_state_n_stacks(const struct grammar_state *st)
{
	return (int32_t)st->set[0];
}

/* UTF-8 decoding as llama.cpp's decode_utf8 does it, one byte at a time. cont: the bytes
 * still continue the sequence the row left unfinished (those must be continuation
 * bytes; inside a token, continuation bytes are taken without a check). */
struct u8dec {
	uint32_t value;
	int remain;
	bool cont;
};

/* Returns -1: invalid (the token is refused whatever follows), 0: no code point yet,
 * 1: *cp completed. */
static int u8_step(struct u8dec *d, uint8_t b, uint32_t *cp)
{
	static const int lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
	if (d->remain > 0) {
		if (d->cont && (b >> 6) != 2)
			return -1;
		d->value = (d->value << 6) + (b & 0x3F);
		if (--d->remain == 0) {
			d->cont = false;
			*cp = d->value;
			return d->value > UNICODE_MAX ? -1 : 1;
		}
		return 0;
	}
	d->cont = false;
	int n = lookup[b >> 4] - 1;
	if (n < 0)
		return -1;
	d->value = b & ((1u << (7 - n)) - 1);
	d->remain = n;
	if (n == 0) {
		*cp = d->value;
		return 1;
	}
	return 0;
}

/* Feeds piece[len] (cut at a NUL) to the set at s->sets[*at]; on success *at is the new
 * set and *d the decoder after it. False with nothing changed when refused (the token is
 * not allowed) or on budget/oom (s->over / s->oom). */
static bool feed(const struct grammar *g, struct grammar_scratch *s, size_t *at, struct u8dec *d,
		 const char *piece, size_t len)
{
	size_t cur = *at;
	struct u8dec dd = *d;
	for (size_t i = 0; i < len && piece[i]; i++) {
		uint32_t cp;
		int r = u8_step(&dd, (uint8_t)piece[i], &cp);
		if (r < 0)
			return false;
		if (r == 1) {
			size_t next;
			if (!accept_char(g, s, cur, cp, &next))
				return false;
			if (s->sets.w[next] == 0)
				return false;
			cur = next;
		}
	}
	if (dd.remain > 0 && !set_partial_ok(g, s->sets.w + cur, dd.value, dd.remain))
		return false;
	*at = cur;
	*d = dd;
	return true;
}

static enum bg_status state_feed(struct grammar_state *st, const char *bytes, size_t len,
				 struct grammar_scratch *s, struct bg_err *err)
{
	step_begin(s);
	if (st->finished)
		return bg_fail(err, BG_ERR_INVALID, "grammar: the output already ended");
	if (!wb_reserve(s, &s->sets, st->n_words))
		return step_error(s, err);
	memcpy(s->sets.w, st->set, st->n_words * 4);
	s->sets.n = st->n_words;
	size_t at = 0;
	struct u8dec d = {st->partial_value, st->partial_remain, st->partial_remain > 0};
	if (!feed(st->g, s, &at, &d, bytes, len)) {
		if (s->over || s->oom)
			return step_error(s, err);
		return bg_fail(err, BG_ERR_INVALID, "grammar: the text is not allowed here");
	}
	if (!state_take(st, s, at))
		return step_error(s, err);
	/* after a complete sequence d.value still holds its code point: kept, it would make
	 * the states after two different characters different mask-cache keys */
	st->partial_value = d.remain ? d.value : 0;
	st->partial_remain = d.remain;
	return BG_OK;
}

enum bg_status grammar_state_accept_bytes(struct grammar_state *st, const char *bytes, size_t len,
					  struct grammar_scratch *s, struct bg_err *err)
{
	return state_feed(st, bytes, len, s, err);
}

/* ======================================================================================
 * The vocabulary trie and the mask
 * ====================================================================================== */

struct grammar_vocab {
	uint64_t hash; /* of the pieces and flags: identifies the vocabulary in mask caches */
	int32_t n_vocab;
	bool *is_eog;	       /* [n_vocab] */
	char **piece;	       /* [n_vocab] copies */
	uint32_t *piece_len;   /* [n_vocab] */
	uint32_t n_nodes;      /* node 0 is the root (the empty prefix) */
	uint32_t *first_child; /* [n_nodes] UINT32_MAX when none */
	uint32_t *next_sib;    /* [n_nodes] */
	uint8_t *byte;	       /* [n_nodes] the byte that leads to the node */
	int32_t *first_tok;    /* [n_nodes] tokens whose piece ends here, -1 when none */
	int32_t *next_tok;     /* [n_vocab] */
};

void grammar_vocab_free(struct grammar_vocab *v)
{
	if (!v)
		return;
	if (v->piece)
		for (int32_t i = 0; i < v->n_vocab; i++)
			free(v->piece[i]);
	free(v->piece);
	free(v->piece_len);
	free(v->is_eog);
	free(v->first_child);
	free(v->next_sib);
	free(v->byte);
	free(v->first_tok);
	free(v->next_tok);
	free(v);
}

int32_t grammar_vocab_n(const struct grammar_vocab *v)
{
	return v->n_vocab;
}

/* The bytes of a piece the grammar looks at: up to the first NUL. */
static size_t piece_span(const char *p, size_t len)
{
	const char *z = memchr(p, 0, len);
	return z ? (size_t)(z - p) : len;
}

enum bg_status grammar_vocab_create(int32_t n_vocab, const char *const *piece,
				    const uint32_t *piece_len, const bool *is_eog,
				    struct grammar_vocab **out, struct bg_err *err)
{
	*out = NULL;
	if (n_vocab <= 0)
		return bg_fail(err, BG_ERR_INVALID, "grammar: empty vocabulary");
	struct grammar_vocab *v = calloc(1, sizeof *v);
	if (!v)
		return bg_fail(err, BG_ERR_NOMEM, "grammar: out of memory");
	v->n_vocab = n_vocab;
	size_t total = 1;
	for (int32_t i = 0; i < n_vocab; i++)
		total += piece_span(piece[i], piece_len[i]);
	size_t cap_nodes = total;
	v->is_eog = malloc((size_t)n_vocab * sizeof *v->is_eog);
	v->piece = calloc((size_t)n_vocab, sizeof *v->piece);
	v->piece_len = malloc((size_t)n_vocab * sizeof *v->piece_len);
	v->next_tok = malloc((size_t)n_vocab * sizeof *v->next_tok);
	v->first_child = malloc(cap_nodes * sizeof *v->first_child);
	v->next_sib = malloc(cap_nodes * sizeof *v->next_sib);
	v->byte = malloc(cap_nodes);
	v->first_tok = malloc(cap_nodes * sizeof *v->first_tok);
	if (!v->is_eog || !v->piece || !v->piece_len || !v->next_tok || !v->first_child ||
	    !v->next_sib || !v->byte || !v->first_tok) {
		grammar_vocab_free(v);
		return bg_fail(err, BG_ERR_NOMEM, "grammar: out of memory");
	}
	v->n_nodes = 1;
	v->first_child[0] = UINT32_MAX;
	v->next_sib[0] = UINT32_MAX;
	v->first_tok[0] = -1;
	v->byte[0] = 0;
	/* insert in reverse id order so each node's token list comes out ascending */
	for (int32_t i = n_vocab - 1; i >= 0; i--) {
		v->is_eog[i] = is_eog[i];
		v->piece_len[i] = piece_len[i];
		v->piece[i] = malloc(piece_len[i] + 1);
		if (!v->piece[i]) {
			grammar_vocab_free(v);
			return bg_fail(err, BG_ERR_NOMEM, "grammar: out of memory");
		}
		memcpy(v->piece[i], piece[i], piece_len[i]);
		v->piece[i][piece_len[i]] = 0;
		v->next_tok[i] = -1;
		size_t n = piece_span(piece[i], piece_len[i]);
		if (is_eog[i] || n == 0 || n > GRAMMAR_MAX_TOKEN_BYTES)
			continue; /* never in the trie: decided without walking */
		uint32_t node = 0;
		for (size_t k = 0; k < n; k++) {
			uint8_t b = (uint8_t)piece[i][k];
			uint32_t *link = &v->first_child[node];
			while (*link != UINT32_MAX && v->byte[*link] < b)
				link = &v->next_sib[*link];
			if (*link == UINT32_MAX || v->byte[*link] != b) {
				uint32_t nn = v->n_nodes++;
				v->byte[nn] = b;
				v->first_child[nn] = UINT32_MAX;
				v->first_tok[nn] = -1;
				v->next_sib[nn] = *link;
				*link = nn;
			}
			node = *link;
		}
		v->next_tok[i] = v->first_tok[node];
		v->first_tok[node] = i;
	}
	uint64_t h = 1469598103934665603ull ^ (uint64_t)n_vocab;
	for (int32_t i = 0; i < n_vocab; i++) {
		for (uint32_t k = 0; k < piece_len[i]; k++)
			h = (h ^ (uint8_t)piece[i][k]) * 1099511628211ull;
		h = (h ^ (0x100u + (is_eog[i] ? 1u : 0u) + piece_len[i] * 4u)) * 1099511628211ull;
	}
	v->hash = h;
	*out = v;
	return BG_OK;
}

struct walk {
	const struct grammar *g;
	const struct grammar_vocab *v;
	struct grammar_scratch *s;
	uint32_t *mask;
};

static void mask_set(uint32_t *mask, int32_t id)
{
	mask[id >> 5] |= 1u << (id & 31);
}

/* ---- hash tables of the walk (open addressing, cleared per step by generation) ---- */

/* The slot of key (found, or the empty one where it would go). */
static size_t ht_slot(const struct htab *t, uint32_t gen, uint64_t key)
{
	size_t i = (size_t)mix64(key) & (t->cap - 1);
	while (t->gens[i] == gen && t->keys[i] != key)
		i = (i + 1) & (t->cap - 1);
	return i;
}

static bool ht_grow(struct grammar_scratch *s, struct htab *t)
{
	if (t->cap && (t->used + 1) * 2 <= t->cap)
		return true;
	size_t nc = t->cap ? t->cap * 2 : 4096;
	if (nc > GRAMMAR_STEP_WORDS) {
		s->over = true;
		return false;
	}
	struct htab n = {calloc(nc, 8), calloc(nc, 4), calloc(nc, 4), nc, t->used};
	if (!n.keys || !n.vals || !n.gens) {
		free(n.keys);
		free(n.vals);
		free(n.gens);
		s->oom = true;
		return false;
	}
	for (size_t i = 0; i < t->cap; i++)
		if (t->gens[i] == s->memo_gen) {
			size_t j = ht_slot(&n, s->memo_gen, t->keys[i]);
			n.keys[j] = t->keys[i];
			n.vals[j] = t->vals[i];
			n.gens[j] = s->memo_gen;
		}
	free(t->keys);
	free(t->vals);
	free(t->gens);
	*t = n;
	return true;
}

/* The set at s->sets[at..top) (just built) as an interned set: an earlier identical set
 * (the new copy is dropped) or this one (kept). */
static bool intern_set(struct grammar_scratch *s, size_t at, size_t *out)
{
	size_t n = set_words(s->sets.w + at);
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s->sets.w[at + i]) * 1099511628211ull;
	/* collisions of h between different sets: probe on with h + k */
	for (uint64_t k = h;; k++) {
		if (!ht_grow(s, &s->intern))
			return false;
		size_t i = ht_slot(&s->intern, s->memo_gen, k);
		if (s->intern.gens[i] != s->memo_gen) {
			s->intern.keys[i] = k;
			s->intern.vals[i] = (uint32_t)at;
			s->intern.gens[i] = s->memo_gen;
			s->intern.used++;
			*out = at;
			return true;
		}
		size_t o = s->intern.vals[i];
		if (set_words(s->sets.w + o) == n && memcmp(s->sets.w + o, s->sets.w + at, n * 4) == 0) {
			s->sets.n = at;
			*out = o;
			return true;
		}
	}
}

/* The interned set reached from the interned set at `from` by chr. */
static bool walk_accept(const struct grammar *g, struct grammar_scratch *s, size_t from, uint32_t chr,
			size_t *out)
{
	uint64_t key = (uint64_t)from << 21 | chr;
	if (!ht_grow(s, &s->trans))
		return false;
	size_t i = ht_slot(&s->trans, s->memo_gen, key);
	if (s->trans.gens[i] == s->memo_gen) {
		*out = s->trans.vals[i];
		return true;
	}
	size_t at;
	if (!accept_char_raw(g, s, from, chr, &at) || !intern_set(s, at, out))
		return false;
	i = ht_slot(&s->trans, s->memo_gen, key); /* intern_set does not touch trans */
	s->trans.keys[i] = key;
	s->trans.vals[i] = (uint32_t)*out;
	s->trans.gens[i] = s->memo_gen;
	s->trans.used++;
	return true;
}

/* Adds to bits[4] the ASCII code points the character element at pos matches (as
 * match_char). */
static void class_ascii(const struct gel *pos, uint32_t bits[4])
{
	uint32_t b[4] = {0};
	bool positive = class_positive(pos);
	do {
		uint32_t lo, hi;
		pos = class_interval(pos, &lo, &hi);
		for (uint32_t c = lo; c <= hi && c < 128; c++)
			b[c >> 5] |= 1u << (c & 31);
	} while (pos->type == GE_CHAR_ALT);
	for (int k = 0; k < 4; k++)
		bits[k] |= positive ? b[k] : ~b[k];
}

/* The ASCII code points some stack of the set w[] takes next: accept_char from this set
 * by any other ASCII code point gives the empty set. */
static void set_ascii_next(const struct grammar *g, const uint32_t *w, uint32_t bits[4])
{
	memset(bits, 0, 4 * sizeof *bits);
	uint32_t n = w[0];
	const uint32_t *q = w + 1;
	for (uint32_t i = 0; i < n; i++, q += 2 + q[1])
		if (q[1])
			class_ascii(&g->el[q[2 + q[1] - 1]], bits);
}

/* Visits the children of trie node `node`, whose prefix leaves the interned set at
 * s->sets[set] and the decoder d. False on budget/oom. */
static bool walk_node(struct walk *w, uint32_t node, size_t set, struct u8dec d)
{
	struct grammar_scratch *s = w->s;
	/* Where a node has many children (the root: every first byte of the vocabulary),
	 * one pass over the set tells which ASCII bytes lead anywhere; the others are
	 * skipped without an accept_char each (a scan of the set, an empty set built and
	 * interned). */
	uint32_t next[4];
	bool filter = false;
	if (d.remain == 0) {
		uint32_t k = 0;
		for (uint32_t c = w->v->first_child[node]; c != UINT32_MAX && k < 8; c = w->v->next_sib[c])
			k++;
		if (k == 8) {
			set_ascii_next(w->g, s->sets.w + set, next);
			filter = true;
		}
	}
	for (uint32_t c = w->v->first_child[node]; c != UINT32_MAX; c = w->v->next_sib[c]) {
		uint8_t byte = w->v->byte[c];
		if (filter && byte < 0x80 && !(next[byte >> 5] >> (byte & 31) & 1))
			continue;
		struct u8dec dd = d;
		uint32_t cp;
		int r = u8_step(&dd, byte, &cp);
		if (r < 0)
			continue; /* invalid UTF-8: this token and all longer ones refused */
		size_t cset = set;
		if (r == 1) {
			if (!walk_accept(w->g, s, set, cp, &cset))
				return false;
			if (s->sets.w[cset] == 0)
				continue;
		}
		if (w->v->first_tok[c] >= 0 &&
		    (dd.remain == 0 || set_partial_ok(w->g, s->sets.w + cset, dd.value, dd.remain)))
			for (int32_t t = w->v->first_tok[c]; t >= 0; t = w->v->next_tok[t])
				mask_set(w->mask, t);
		if (w->v->first_child[c] != UINT32_MAX && !walk_node(w, c, cset, dd))
			return false;
	}
	return true;
}

static uint64_t state_key(const struct grammar_state *st, const struct grammar_vocab *v)
{
	uint64_t h = st->g->hash ^ (v->hash * 31u) ^ ((uint64_t)st->partial_value << 8) ^
		     (uint64_t)(st->partial_remain + 1);
	for (size_t i = 0; i < st->n_words; i++)
		h = (h ^ st->set[i]) * 1099511628211ull;
	return h ? h : 1;
}

static struct mask_entry *cache_find(struct grammar_scratch *s, const struct grammar_state *st,
				     const struct grammar_vocab *v, uint64_t key)
{
	for (int i = 0; i < GRAMMAR_MASK_CACHE; i++) {
		struct mask_entry *e = &s->cache[i];
		if (e->key == key && e->g == st->g && e->ghash == st->g->hash && e->v == v &&
		    e->vhash == v->hash && e->n_words == st->n_words + 2 &&
		    memcmp(e->words, st->set, st->n_words * 4) == 0 &&
		    e->words[st->n_words] == st->partial_value &&
		    e->words[st->n_words + 1] == (uint32_t)st->partial_remain)
			return e;
	}
	return NULL;
}

static void cache_put(struct grammar_scratch *s, const struct grammar_state *st,
		      const struct grammar_vocab *v, uint64_t key, const uint32_t *mask, size_t mw)
{
	struct mask_entry *e = &s->cache[s->cache_next];
	s->cache_next = (s->cache_next + 1) % GRAMMAR_MASK_CACHE;
	uint32_t *w = realloc(e->words, (st->n_words + 2) * 4);
	if (w)
		e->words = w;
	uint32_t *m = e->mask_words == mw ? e->mask : realloc(e->mask, mw * 4);
	if (m)
		e->mask = m;
	if (!w || !m) {
		e->key = 0;
		return;
	}
	memcpy(w, st->set, st->n_words * 4);
	w[st->n_words] = st->partial_value;
	w[st->n_words + 1] = (uint32_t)st->partial_remain;
	memcpy(m, mask, mw * 4);
	*e = (struct mask_entry){key, st->g, v, st->g->hash, v->hash, w, st->n_words + 2, m, mw};
}

enum bg_status grammar_state_mask(const struct grammar_state *st, const struct grammar_vocab *v,
				  struct grammar_scratch *s, uint32_t *mask, struct bg_err *err)
{
	int32_t n = v->n_vocab;
	size_t mw = (size_t)((n + 31) / 32);
	memset(mask, 0, mw * 4);
	if (st->finished)
		return BG_OK;
	uint64_t key = state_key(st, v);
	const struct mask_entry *hit = cache_find(s, st, v, key);
	if (hit) {
		memcpy(mask, hit->mask, mw * 4);
		s->cache_hits++;
		return BG_OK;
	}
	step_begin(s);
	if (!wb_reserve(s, &s->sets, st->n_words))
		return step_error(s, err);
	memcpy(s->sets.w, st->set, st->n_words * 4);
	s->sets.n = st->n_words;
	struct walk w = {st->g, v, s, mask};
	struct u8dec d = {st->partial_value, st->partial_remain, st->partial_remain > 0};
	size_t root = 0;
	if (!intern_set(s, 0, &root) || !walk_node(&w, 0, root, d))
		return step_error(s, err);
	if (set_has_empty(st->set))
		for (int32_t i = 0; i < n; i++)
			if (v->is_eog[i])
				mask_set(mask, i);
	cache_put(s, st, v, key, mask, mw);
	return BG_OK;
}

enum bg_status grammar_state_accept_token(struct grammar_state *st, const struct grammar_vocab *v,
					  int32_t id, struct grammar_scratch *s, struct bg_err *err)
{
	if (id < 0 || id >= v->n_vocab)
		return bg_fail(err, BG_ERR_INVALID, "grammar: token %d out of range", (int)id);
	if (st->finished)
		return bg_fail(err, BG_ERR_INVALID, "grammar: the output already ended");
	if (v->is_eog[id]) {
		if (!set_has_empty(st->set))
			return bg_fail(err, BG_ERR_INVALID,
				       "grammar: end of generation where the grammar is unfinished");
		st->finished = true;
		return BG_OK;
	}
	size_t n = piece_span(v->piece[id], v->piece_len[id]);
	if (n == 0 || n > GRAMMAR_MAX_TOKEN_BYTES)
		return bg_fail(err, BG_ERR_INVALID, "grammar: token %d is never allowed", (int)id);
	return state_feed(st, v->piece[id], n, s, err);
}

bool grammar_matches(const struct grammar *g, const char *text, size_t len)
{
	struct grammar_scratch *s = grammar_scratch_create();
	struct grammar_state *st = NULL;
	bool ok = s && grammar_state_create(g, s, &st, NULL) == BG_OK &&
		  grammar_state_accept_bytes(st, text, len, s, NULL) == BG_OK &&
		  st->partial_remain == 0 && grammar_state_accepts(st);
	grammar_state_free(st);
	grammar_scratch_free(s);
	return ok;
}
