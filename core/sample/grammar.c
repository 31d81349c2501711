/* grammar: GBNF parsing, the stack matcher and the token-trie mask (see grammar.h).
 *
 * The compiled form is llama.cpp's: every rule is a run of elements (CHAR / CHAR_NOT /
 * CHAR_ANY with CHAR_ALT and CHAR_RNG_UPPER continuations, RULE_REF, ALT between
 * alternatives, END after the last one), all rules concatenated into one array. A stack is
 * a list of element positions, the top last; its top is always a character element after
 * `advance` (rule references on top are expanded into their alternatives). A state is a
 * set of distinct stacks; the empty stack means "the grammar is complete here".
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

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

enum {
	GE_END = 0,
	GE_ALT,
	GE_RULE_REF,
	GE_CHAR,
	GE_CHAR_NOT,
	GE_CHAR_RNG_UPPER,
	GE_CHAR_ALT,
	GE_CHAR_ANY,
};

struct gel {
	uint32_t type;
	uint32_t value; /* a code point, or a rule id for GE_RULE_REF */
};

struct grammar {
	uint64_t hash;	      /* of the elements: identifies the grammar in mask caches */
	struct gel *el;	      /* [n_el], all rules, each ending with GE_END */
	uint32_t n_el;
	uint32_t *rule_start; /* [n_rules] index of each rule's first element */
	uint32_t n_rules;
	uint32_t root;
};

static bool is_end_of_seq(const struct gel *e)
{
	return e->type == GE_END || e->type == GE_ALT;
}

/* ======================================================================================
 * Parsing (llama.cpp's grammar-parser, with positions in the errors and size bounds)
 * ====================================================================================== */

struct rvec {
	struct gel *e;
	uint32_t n, cap;
};

static uint32_t name_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

struct gparser {
	const char *src; /* NUL-terminated copy of the text */
	char **names;	 /* [n_sym] rule names */
	struct rvec *rules; /* [n_sym]; n == 0 means "referenced, not yet defined" */
	bool *defined;	    /* [n_sym] */
	uint32_t *ref_at;   /* [n_sym] offset of the first reference (for "undefined" errors) */
	uint32_t n_sym, cap_sym;
	/* [hcap] symbol id + 1 by name hash, 0 = empty (open addressing); grown with the
	 * symbols, at most half full (a table for GRAMMAR_MAX_RULES up front was 512 KiB to
	 * clear per parse) */
	uint32_t *htab, hcap;
	uint64_t n_el;
	int depth;
	struct bg_err *err;
	bool failed;
};

static void gp_where(const struct gparser *p, const char *at, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (const char *c = p->src; c < at && *c; c++) {
		if (*c == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

__attribute__((format(printf, 4, 5))) static const char *gp_fail(struct gparser *p, const char *at,
								   enum bg_status st,
								   const char *fmt, ...)
{
	if (p->failed)
		return NULL;
	p->failed = true;
	int line, col;
	gp_where(p, at, &line, &col);
	char pre[64];
	snprintf(pre, sizeof pre, "grammar: line %d, column %d: ", line, col);
	va_list ap;
	va_start(ap, fmt);
	bg_failv(p->err, st, pre, fmt, ap);
	va_end(ap);
	return NULL;
}

static bool rvec_push(struct gparser *p, struct rvec *r, uint32_t type, uint32_t value)
{
	if (p->n_el >= GRAMMAR_MAX_ELEMENTS) {
		gp_fail(p, p->src, BG_ERR_CAPACITY, "the grammar has more than %u elements",
			GRAMMAR_MAX_ELEMENTS);
		return false;
	}
	if (r->n == r->cap) {
		uint32_t nc = r->cap ? r->cap * 2 : 16;
		struct gel *ne = realloc(r->e, nc * sizeof *ne);
		if (!ne) {
			gp_fail(p, p->src, BG_ERR_NOMEM, "out of memory");
			return false;
		}
		r->e = ne;
		r->cap = nc;
	}
	r->e[r->n++] = (struct gel){type, value};
	p->n_el++;
	return true;
}

struct gp_item {
	uint32_t lo, hi;
};

static int gp_item_cmp(const void *a, const void *b)
{
	const struct gp_item *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : x->hi < y->hi ? -1 : x->hi > y->hi;
}

/* Rewrites the negated class that starts at rule->e[first] with its characters and ranges
 * in increasing order of their first code point (the same set; a one-character range
 * becomes one character): match_partial then finds a gap in one pass. */
static bool gp_sort_class(struct gparser *p, struct rvec *rule, uint32_t first)
{
	uint32_t n_el = rule->n - first, n = 0;
	if (n_el == 0)
		return true;
	struct gp_item *it = malloc(n_el * sizeof *it);
	if (!it) {
		gp_fail(p, p->src, BG_ERR_NOMEM, "out of memory");
		return false;
	}
	for (uint32_t i = first; i < rule->n; n++) {
		bool range = i + 1 < rule->n && rule->e[i + 1].type == GE_CHAR_RNG_UPPER;
		it[n] = (struct gp_item){rule->e[i].value, rule->e[i + range].value};
		i += 1 + range;
	}
	qsort(it, n, sizeof *it, gp_item_cmp);
	uint32_t o = first;
	for (uint32_t k = 0; k < n; k++) {
		bool range = it[k].lo != it[k].hi;
		rule->e[o++] = (struct gel){k ? GE_CHAR_ALT : GE_CHAR_NOT, it[k].lo};
		if (range)
			rule->e[o++] = (struct gel){GE_CHAR_RNG_UPPER, it[k].hi};
	}
	free(it);
	/* o <= the old n: a range of one character [a-a] becomes one element */
	p->n_el -= rule->n - o;
	rule->n = o;
	return true;
}

static bool rvec_append(struct gparser *p, struct rvec *r, const struct gel *e, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (!rvec_push(p, r, e[i].type, e[i].value))
			return false;
	return true;
}

/* A new symbol; returns its id or UINT32_MAX (p->failed set). */
static uint32_t gp_new_symbol(struct gparser *p, const char *name, size_t len, const char *at)
{
	if (p->n_sym >= GRAMMAR_MAX_RULES) {
		gp_fail(p, at, BG_ERR_CAPACITY, "the grammar has more than %u rules",
			GRAMMAR_MAX_RULES);
		return UINT32_MAX;
	}
	if (p->n_sym == p->cap_sym) {
		uint32_t nc = p->cap_sym ? p->cap_sym * 2 : 32;
		char **nn = realloc(p->names, nc * sizeof *nn);
		if (nn)
			p->names = nn;
		struct rvec *nr = realloc(p->rules, nc * sizeof *nr);
		if (nr)
			p->rules = nr;
		bool *nd = realloc(p->defined, nc * sizeof *nd);
		if (nd)
			p->defined = nd;
		uint32_t *na = realloc(p->ref_at, nc * sizeof *na);
		if (na)
			p->ref_at = na;
		if (!nn || !nr || !nd || !na) {
			gp_fail(p, at, BG_ERR_NOMEM, "out of memory");
			return UINT32_MAX;
		}
		p->cap_sym = nc;
	}
	char *copy = malloc(len + 1);
	if (!copy) {
		gp_fail(p, at, BG_ERR_NOMEM, "out of memory");
		return UINT32_MAX;
	}
	memcpy(copy, name, len);
	copy[len] = 0;
	if ((p->n_sym + 1) * 2 > p->hcap) {
		uint32_t nc = p->hcap ? p->hcap * 2 : 64;
		uint32_t *nt = calloc(nc, sizeof *nt);
		if (!nt) {
			free(copy);
			gp_fail(p, at, BG_ERR_NOMEM, "out of memory");
			return UINT32_MAX;
		}
		for (uint32_t i = 0; i < p->n_sym; i++) {
			uint32_t h = name_hash(p->names[i], strlen(p->names[i])) & (nc - 1);
			while (nt[h])
				h = (h + 1) & (nc - 1);
			nt[h] = i + 1;
		}
		free(p->htab);
		p->htab = nt;
		p->hcap = nc;
	}
	uint32_t id = p->n_sym++;
	p->names[id] = copy;
	uint32_t h = name_hash(name, len) & (p->hcap - 1);
	while (p->htab[h])
		h = (h + 1) & (p->hcap - 1);
	p->htab[h] = id + 1;
	p->rules[id] = (struct rvec){0};
	p->defined[id] = false;
	p->ref_at[id] = (uint32_t)(at - p->src);
	return id;
}

static uint32_t gp_symbol(struct gparser *p, const char *name, size_t len, const char *at)
{
	uint32_t mask = p->hcap - 1;
	for (uint32_t h = name_hash(name, len) & mask; p->hcap && p->htab[h]; h = (h + 1) & mask) {
		const char *nm = p->names[p->htab[h] - 1];
		if (strlen(nm) == len && memcmp(nm, name, len) == 0)
			return p->htab[h] - 1;
	}
	return gp_new_symbol(p, name, len, at);
}

static uint32_t gp_generated(struct gparser *p, uint32_t base, const char *at)
{
	char name[300];
	int n = snprintf(name, sizeof name, "%.200s_%u", p->names[base], p->n_sym);
	return gp_new_symbol(p, name, (size_t)n, at);
}

static void gp_define(struct gparser *p, uint32_t id, struct rvec *r)
{
	if (p->defined[id]) {
		p->n_el -= p->rules[id].n; /* a redefinition replaces the rule, as in llama.cpp */
		free(p->rules[id].e);
	}
	p->rules[id] = *r;
	p->defined[id] = true;
	*r = (struct rvec){0};
}

static bool is_word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
	       (c >= '0' && c <= '9');
}

static const char *parse_space(const char *s, bool newline_ok)
{
	while (*s == ' ' || *s == '\t' || *s == '#' || (newline_ok && (*s == '\r' || *s == '\n'))) {
		if (*s == '#') {
			while (*s && *s != '\r' && *s != '\n')
				s++;
		} else {
			s++;
		}
	}
	return s;
}

static const char *parse_name(struct gparser *p, const char *s)
{
	const char *c = s;
	while (is_word_char(*c))
		c++;
	if (c == s)
		return gp_fail(p, s, BG_ERR_FORMAT, "expecting a rule name");
	return c;
}

/* One character of a literal or class: an escape or one UTF-8 sequence, decoded as
 * llama.cpp's parser does (a stray continuation byte stands for itself). */
static const char *parse_char(struct gparser *p, const char *s, uint32_t *cp)
{
	if (*s == '\\') {
		int nhex = 0;
		switch (s[1]) {
		case 'x': nhex = 2; break;
		case 'u': nhex = 4; break;
		case 'U': nhex = 8; break;
		case 't': *cp = '\t'; return s + 2;
		case 'r': *cp = '\r'; return s + 2;
		case 'n': *cp = '\n'; return s + 2;
		case '\\':
		case '"':
		case '[':
		case ']': *cp = (uint8_t)s[1]; return s + 2;
		default:
			return gp_fail(p, s, BG_ERR_FORMAT, "unknown escape \\%c",
				       s[1] ? s[1] : ' ');
		}
		uint32_t v = 0;
		const char *c = s + 2;
		for (int i = 0; i < nhex; i++, c++) {
			int d = strbuf_hex_digit(*c);
			if (d < 0)
				return gp_fail(p, c, BG_ERR_FORMAT, "expecting %d hex digits", nhex);
			v = (v << 4) | (uint32_t)d;
		}
		*cp = v;
		return c;
	}
	if (!*s)
		return gp_fail(p, s, BG_ERR_FORMAT, "unexpected end of input");
	static const int lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
	uint8_t b = (uint8_t)*s;
	int len = lookup[b >> 4];
	uint32_t v = b & ((1u << (8 - len)) - 1);
	const char *c = s + 1;
	for (const char *end = s + len; c < end && *c; c++)
		v = (v << 6) + ((uint8_t)*c & 0x3F);
	*cp = v;
	return c;
}

static const char *parse_int(struct gparser *p, const char *s, int *out)
{
	const char *c = s;
	long v = 0;
	while (*c >= '0' && *c <= '9') {
		if (v <= 100000000)
			v = v * 10 + (*c - '0');
		c++;
	}
	if (c == s)
		return gp_fail(p, s, BG_ERR_FORMAT, "expecting an integer");
	*out = v > INT_MAX / 2 ? INT_MAX / 2 : (int)v;
	return c;
}

static const char *parse_alternates(struct gparser *p, const char *s, uint32_t rule_id,
				    bool nested);

/* Rewrites the item at rule[last..] into its repetition, as llama.cpp does:
 * S{m,n} -> S (m times) S'(n-m) with S'(k) ::= S S'(k-1) | ; S{m,} -> S (m times) S'
 * with S' ::= S S' | . */
static bool gp_repeat(struct gparser *p, struct rvec *rule, uint32_t last, uint32_t rule_id,
		      int min_times, int max_times, const char *at)
{
	if (last == rule->n) {
		gp_fail(p, at, BG_ERR_FORMAT, "expecting an item before a repetition");
		return false;
	}
	uint32_t n_prev = rule->n - last;
	struct gel *prev = malloc(n_prev * sizeof *prev);
	if (!prev) {
		gp_fail(p, at, BG_ERR_NOMEM, "out of memory");
		return false;
	}
	memcpy(prev, rule->e + last, n_prev * sizeof *prev);
	bool ok = true;
	if (min_times == 0) {
		p->n_el -= n_prev;
		rule->n = last;
	} else {
		for (int i = 1; i < min_times && ok; i++)
			ok = rvec_append(p, rule, prev, n_prev);
	}
	uint32_t last_rec = 0;
	int n_opt = max_times < 0 ? 1 : max_times - min_times;
	for (int i = 0; i < n_opt && ok; i++) {
		uint32_t rec = gp_generated(p, rule_id, at);
		if (rec == UINT32_MAX) {
			ok = false;
			break;
		}
		struct rvec r = {0};
		ok = rvec_append(p, &r, prev, n_prev);
		if (ok && (i > 0 || max_times < 0))
			ok = rvec_push(p, &r, GE_RULE_REF, max_times < 0 ? rec : last_rec);
		ok = ok && rvec_push(p, &r, GE_ALT, 0) && rvec_push(p, &r, GE_END, 0);
		if (ok)
			gp_define(p, rec, &r);
		free(r.e);
		last_rec = rec;
	}
	if (ok && n_opt > 0)
		ok = rvec_push(p, rule, GE_RULE_REF, last_rec);
	free(prev);
	return ok;
}

static const char *parse_sequence(struct gparser *p, const char *s, uint32_t rule_id,
				  struct rvec *rule, bool nested)
{
	uint32_t last = rule->n;
	while (s && *s) {
		const char *at = s;
		if (*s == '"') {
			s++;
			last = rule->n;
			while (*s != '"') {
				if (!*s)
					return gp_fail(p, s, BG_ERR_FORMAT,
						       "unexpected end of input in a literal");
				uint32_t cp;
				if (!(s = parse_char(p, s, &cp)) || !rvec_push(p, rule, GE_CHAR, cp))
					return NULL;
			}
			s = parse_space(s + 1, nested);
		} else if (*s == '[') {
			s++;
			uint32_t start_type = GE_CHAR;
			if (*s == '^') {
				s++;
				start_type = GE_CHAR_NOT;
			}
			last = rule->n;
			while (*s != ']') {
				if (!*s)
					return gp_fail(p, s, BG_ERR_FORMAT,
						       "unexpected end of input in a class");
				uint32_t cp;
				if (!(s = parse_char(p, s, &cp)))
					return NULL;
				if (!rvec_push(p, rule, last < rule->n ? GE_CHAR_ALT : start_type, cp))
					return NULL;
				if (s[0] == '-' && s[1] != ']') {
					if (!s[1])
						return gp_fail(p, s, BG_ERR_FORMAT,
							       "unexpected end of input in a class");
					if (!(s = parse_char(p, s + 1, &cp)) ||
					    !rvec_push(p, rule, GE_CHAR_RNG_UPPER, cp))
						return NULL;
				}
			}
			if (start_type == GE_CHAR_NOT && !gp_sort_class(p, rule, last))
				return NULL;
			s = parse_space(s + 1, nested);
		} else if (is_word_char(*s)) {
			const char *e = parse_name(p, s);
			uint32_t ref = gp_symbol(p, s, (size_t)(e - s), s);
			if (ref == UINT32_MAX)
				return NULL;
			s = parse_space(e, nested);
			last = rule->n;
			if (!rvec_push(p, rule, GE_RULE_REF, ref))
				return NULL;
		} else if (*s == '(') {
			if (p->depth >= GRAMMAR_MAX_DEPTH)
				return gp_fail(p, s, BG_ERR_CAPACITY,
					       "groups nest deeper than %d", GRAMMAR_MAX_DEPTH);
			s = parse_space(s + 1, true);
			uint32_t sub = gp_generated(p, rule_id, at);
			if (sub == UINT32_MAX)
				return NULL;
			p->depth++;
			s = parse_alternates(p, s, sub, true);
			p->depth--;
			if (!s)
				return NULL;
			last = rule->n;
			if (!rvec_push(p, rule, GE_RULE_REF, sub))
				return NULL;
			if (*s != ')')
				return gp_fail(p, s, BG_ERR_FORMAT, "expecting ')'");
			s = parse_space(s + 1, nested);
		} else if (*s == '.') {
			last = rule->n;
			if (!rvec_push(p, rule, GE_CHAR_ANY, 0))
				return NULL;
			s = parse_space(s + 1, nested);
		} else if (*s == '*' || *s == '+' || *s == '?') {
			int mn = *s == '+' ? 1 : 0, mx = *s == '?' ? 1 : -1;
			s = parse_space(s + 1, nested);
			if (!gp_repeat(p, rule, last, rule_id, mn, mx, at))
				return NULL;
		} else if (*s == '{') {
			s = parse_space(s + 1, nested);
			int mn, mx = -1;
			if (!(s = parse_int(p, s, &mn)))
				return NULL;
			s = parse_space(s, nested);
			if (*s == '}') {
				mx = mn;
				s = parse_space(s + 1, nested);
			} else if (*s == ',') {
				s = parse_space(s + 1, nested);
				if (*s >= '0' && *s <= '9') {
					if (!(s = parse_int(p, s, &mx)))
						return NULL;
					s = parse_space(s, nested);
				}
				if (*s != '}')
					return gp_fail(p, s, BG_ERR_FORMAT, "expecting '}'");
				s = parse_space(s + 1, nested);
			} else {
				return gp_fail(p, s, BG_ERR_FORMAT, "expecting ',' or '}'");
			}
			if (mn > GRAMMAR_MAX_REPETITION || mx > GRAMMAR_MAX_REPETITION)
				return gp_fail(p, at, BG_ERR_CAPACITY,
					       "more than %d repetitions", GRAMMAR_MAX_REPETITION);
			if (mx >= 0 && mx < mn)
				return gp_fail(p, at, BG_ERR_FORMAT,
					       "repetition maximum %d below its minimum %d", mx, mn);
			if (!gp_repeat(p, rule, last, rule_id, mn, mx, at))
				return NULL;
		} else if (*s == '<' || (*s == '!' && s[1] == '<')) {
			return gp_fail(p, s, BG_ERR_UNSUPPORTED,
				       "token references <...> are not supported");
		} else {
			break;
		}
	}
	return s;
}

static const char *parse_alternates(struct gparser *p, const char *s, uint32_t rule_id,
				    bool nested)
{
	struct rvec r = {0};
	s = parse_sequence(p, s, rule_id, &r, nested);
	while (s && *s == '|') {
		if (!rvec_push(p, &r, GE_ALT, 0)) {
			s = NULL;
			break;
		}
		s = parse_space(s + 1, true);
		s = parse_sequence(p, s, rule_id, &r, nested);
	}
	if (s && rvec_push(p, &r, GE_END, 0))
		gp_define(p, rule_id, &r);
	else
		s = NULL;
	free(r.e);
	return s;
}

static const char *parse_rule(struct gparser *p, const char *s)
{
	const char *e = parse_name(p, s);
	if (!e)
		return NULL;
	uint32_t id = gp_symbol(p, s, (size_t)(e - s), s);
	if (id == UINT32_MAX)
		return NULL;
	const char *c = parse_space(e, false);
	if (!(c[0] == ':' && c[1] == ':' && c[2] == '='))
		return gp_fail(p, c, BG_ERR_FORMAT, "expecting ::=");
	c = parse_space(c + 3, true);
	c = parse_alternates(p, c, id, false);
	if (!c)
		return NULL;
	if (*c == '\r')
		c += c[1] == '\n' ? 2 : 1;
	else if (*c == '\n')
		c++;
	else if (*c)
		return gp_fail(p, c, BG_ERR_FORMAT, "expecting a newline or the end");
	return parse_space(c, true);
}

/* ---- checks on the parsed rules: nullable rules, then left recursion ---- */

/* Fails when some rule can derive itself as its first symbol. nullable[r]: rule r derives
 * the empty string (a worklist fixpoint); the left-edge graph A -> B holds when B occurs
 * in an alternative of A after only nullable references; a cycle in it is left recursion. */
static bool check_left_recursion(struct gparser *p, const struct grammar *g)
{
	uint32_t nr = g->n_rules, ne = g->n_el;
	uint32_t *alt_rule = malloc((size_t)ne * sizeof *alt_rule); /* per element: its alt id */
	uint32_t *alt_need = malloc((size_t)ne * sizeof *alt_need); /* per alt */
	uint32_t *alt_owner = malloc((size_t)ne * sizeof *alt_owner);
	uint32_t *occ_start = calloc((size_t)nr + 1, sizeof *occ_start);
	uint32_t *occ = malloc((size_t)ne * sizeof *occ);
	uint32_t *queue = malloc((size_t)nr * sizeof *queue);
	bool *nullable = calloc(nr, sizeof *nullable);
	uint32_t *edge_start = calloc((size_t)nr + 1, sizeof *edge_start);
	uint32_t *edge = malloc((size_t)ne * sizeof *edge);
	uint8_t *color = calloc(nr, 1);
	uint32_t *dfs = malloc((size_t)nr * 2 * sizeof *dfs);
	bool ok = false;
	if (!alt_rule || !alt_need || !alt_owner || !occ_start || !occ || !queue || !nullable ||
	    !edge_start || !edge || !color || !dfs) {
		gp_fail(p, p->src, BG_ERR_NOMEM, "out of memory");
		goto done;
	}
	/* alternatives: ids in element order */
	uint32_t n_alt = 0;
	for (uint32_t r = 0; r < nr; r++) {
		uint32_t i = g->rule_start[r];
		for (;;) {
			uint32_t a = n_alt++;
			alt_owner[a] = r;
			alt_need[a] = 0;
			for (; !is_end_of_seq(&g->el[i]); i++) {
				alt_rule[i] = a;
				if (g->el[i].type == GE_RULE_REF) {
					if (alt_need[a] != UINT32_MAX)
						alt_need[a]++;
					occ_start[g->el[i].value + 1]++;
				} else if (g->el[i].type == GE_CHAR || g->el[i].type == GE_CHAR_NOT ||
					   g->el[i].type == GE_CHAR_ANY) {
					alt_need[a] = UINT32_MAX; /* a character: never empty */
				}
			}
			if (g->el[i].type == GE_END)
				break;
			i++;
		}
	}
	for (uint32_t r = 0; r < nr; r++)
		occ_start[r + 1] += occ_start[r];
	{
		uint32_t *fill = calloc(nr, sizeof *fill);
		if (!fill) {
			gp_fail(p, p->src, BG_ERR_NOMEM, "out of memory");
			goto done;
		}
		for (uint32_t i = 0; i < ne; i++)
			if (g->el[i].type == GE_RULE_REF) {
				uint32_t t = g->el[i].value;
				occ[occ_start[t] + fill[t]++] = alt_rule[i];
			}
		free(fill);
	}
	uint32_t qh = 0, qt = 0;
	for (uint32_t a = 0; a < n_alt; a++)
		if (alt_need[a] == 0 && !nullable[alt_owner[a]]) {
			nullable[alt_owner[a]] = true;
			queue[qt++] = alt_owner[a];
		}
	while (qh < qt) {
		uint32_t r = queue[qh++];
		for (uint32_t k = occ_start[r]; k < occ_start[r + 1]; k++) {
			uint32_t a = occ[k];
			if (alt_need[a] == UINT32_MAX || alt_need[a] == 0)
				continue;
			if (--alt_need[a] == 0 && !nullable[alt_owner[a]]) {
				nullable[alt_owner[a]] = true;
				queue[qt++] = alt_owner[a];
			}
		}
	}
	/* left edges (CSR), two passes */
	for (int pass = 0; pass < 2; pass++) {
		uint32_t *fill = pass ? calloc(nr, sizeof *fill) : NULL;
		if (pass && !fill) {
			gp_fail(p, p->src, BG_ERR_NOMEM, "out of memory");
			goto done;
		}
		for (uint32_t r = 0; r < nr; r++) {
			bool leading = true;
			for (uint32_t i = g->rule_start[r];; i++) {
				const struct gel *e = &g->el[i];
				if (is_end_of_seq(e)) {
					if (e->type == GE_END)
						break;
					leading = true;
					continue;
				}
				if (!leading)
					continue;
				if (e->type == GE_RULE_REF) {
					if (pass)
						edge[edge_start[r] + fill[r]++] = e->value;
					else
						edge_start[r + 1]++;
					leading = nullable[e->value];
				} else if (e->type != GE_CHAR_ALT && e->type != GE_CHAR_RNG_UPPER) {
					leading = false;
				}
			}
		}
		if (!pass)
			for (uint32_t r = 0; r < nr; r++)
				edge_start[r + 1] += edge_start[r];
		free(fill);
	}
	/* iterative DFS: color 1 = on the path, 2 = done */
	for (uint32_t r0 = 0; r0 < nr; r0++) {
		if (color[r0])
			continue;
		uint32_t sp = 0;
		dfs[sp * 2] = r0;
		dfs[sp * 2 + 1] = edge_start[r0];
		color[r0] = 1;
		sp++;
		while (sp) {
			uint32_t r = dfs[(sp - 1) * 2], *k = &dfs[(sp - 1) * 2 + 1];
			if (*k == edge_start[r + 1]) {
				color[r] = 2;
				sp--;
				continue;
			}
			uint32_t t = edge[(*k)++];
			if (color[t] == 1) {
				gp_fail(p, p->src + p->ref_at[t], BG_ERR_FORMAT,
					"rule '%s' is left-recursive", p->names[t]);
				goto done;
			}
			if (!color[t]) {
				color[t] = 1;
				dfs[sp * 2] = t;
				dfs[sp * 2 + 1] = edge_start[t];
				sp++;
			}
		}
	}
	ok = true;
done:
	free(alt_rule);
	free(alt_need);
	free(alt_owner);
	free(occ_start);
	free(occ);
	free(queue);
	free(nullable);
	free(edge_start);
	free(edge);
	free(color);
	free(dfs);
	return ok;
}

void grammar_free(struct grammar *g)
{
	if (!g)
		return;
	free(g->el);
	free(g->rule_start);
	free(g);
}

enum bg_status grammar_parse(const char *text, size_t len, const char *root, struct grammar **out,
			     struct bg_err *err)
{
	*out = NULL;
	if (!root)
		root = "root";
	if (len > GRAMMAR_MAX_TEXT)
		return bg_fail(err, BG_ERR_CAPACITY, "grammar: longer than %u bytes",
			       GRAMMAR_MAX_TEXT);
	if (memchr(text, 0, len))
		return bg_fail(err, BG_ERR_FORMAT, "grammar: contains a NUL byte at offset %zu",
			       (size_t)((const char *)memchr(text, 0, len) - text));
	char *src = malloc(len + 1);
	if (!src)
		return bg_fail(err, BG_ERR_NOMEM, "grammar: out of memory");
	memcpy(src, text, len);
	src[len] = 0;
	struct gparser p = {.src = src, .err = err};
	struct grammar *g = NULL;
	const char *s = parse_space(src, true);
	while (s && *s)
		s = parse_rule(&p, s);
	if (p.failed)
		goto fail;
	for (uint32_t i = 0; i < p.n_sym; i++)
		if (!p.defined[i]) {
			gp_fail(&p, src + p.ref_at[i], BG_ERR_FORMAT, "undefined rule '%s'",
				p.names[i]);
			goto fail;
		}
	uint32_t root_id = UINT32_MAX;
	for (uint32_t i = 0; i < p.n_sym; i++)
		if (strcmp(p.names[i], root) == 0)
			root_id = i;
	if (root_id == UINT32_MAX) {
		gp_fail(&p, src + len, BG_ERR_FORMAT, "no rule named '%s'", root);
		goto fail;
	}
	g = calloc(1, sizeof *g);
	if (!g) {
		gp_fail(&p, src, BG_ERR_NOMEM, "out of memory");
		goto fail;
	}
	g->n_rules = p.n_sym;
	g->n_el = (uint32_t)p.n_el;
	g->root = root_id;
	g->el = malloc(((size_t)g->n_el + 1) * sizeof *g->el);
	g->rule_start = malloc(((size_t)g->n_rules + 1) * sizeof *g->rule_start);
	if (!g->el || !g->rule_start) {
		gp_fail(&p, src, BG_ERR_NOMEM, "out of memory");
		goto fail;
	}
	uint32_t k = 0;
	for (uint32_t i = 0; i < p.n_sym; i++) {
		g->rule_start[i] = k;
		memcpy(g->el + k, p.rules[i].e, p.rules[i].n * sizeof *g->el);
		k += p.rules[i].n;
	}
	BG_ASSERT(k == g->n_el);
	g->hash = 1469598103934665603ull ^ g->root;
	for (uint32_t i = 0; i < g->n_el; i++)
		g->hash = (g->hash ^ ((uint64_t)g->el[i].type << 32 | g->el[i].value)) * 1099511628211ull;
	if (!check_left_recursion(&p, g))
		goto fail;
	goto done;
fail:
	grammar_free(g);
	g = NULL;
done:
	for (uint32_t i = 0; i < p.n_sym; i++) {
		free(p.names[i]);
		free(p.rules[i].e);
	}
	free(p.names);
	free(p.rules);
	free(p.defined);
	free(p.ref_at);
	free(p.htab);
	free(src);
	*out = g;
	if (!g && !p.failed)
		return bg_fail(err, BG_ERR_NOMEM, "grammar: out of memory");
	return g ? BG_OK : err ? err->status : BG_ERR_FORMAT;
}

/* ======================================================================================
 * Matching
 * ====================================================================================== */

/* Matches code point chr at the character element `pos`; *next is the element after the
 * character's alternatives (llama_grammar_match_char). */
static bool match_char(const struct gel *pos, uint32_t chr, const struct gel **next)
{
	bool found = false;
	bool positive = pos->type == GE_CHAR || pos->type == GE_CHAR_ANY;
	do {
		if (pos[1].type == GE_CHAR_RNG_UPPER) {
			found = found || (pos->value <= chr && chr <= pos[1].value);
			pos += 2;
		} else if (pos->type == GE_CHAR_ANY) {
			found = true;
			pos += 1;
		} else {
			found = found || pos->value == chr;
			pos += 1;
		}
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
		uint32_t lo = pos->value, hi = pos->value;
		if (pos[1].type == GE_CHAR_RNG_UPPER)
			hi = pos[1].value, pos += 2;
		else
			pos += 1;
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
static bool match_partial(const struct gel *pos, uint32_t value, int n_remain)
{
	bool positive = pos->type == GE_CHAR || pos->type == GE_CHAR_ANY;
	if (n_remain < 0 || (n_remain == 1 && value < 2))
		return false;
	uint32_t low = value << (n_remain * 6);
	uint32_t high = low | ((1u << (n_remain * 6)) - 1);
	if (low == 0) {
		if (n_remain == 2)
			low = 1u << 11;
		else if (n_remain == 3)
			low = 1u << 16;
	}
	if (pos->type == GE_CHAR_NOT)
		return negated_leaves_gap(pos, low, high);
	do {
		if (pos[1].type == GE_CHAR_RNG_UPPER) {
			if (pos->value <= high && low <= pos[1].value)
				return positive;
			pos += 2;
		} else if (pos->type == GE_CHAR_ANY) {
			return true;
		} else {
			if (low <= pos->value && pos->value <= high)
				return positive;
			pos += 1;
		}
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
		if (++s->ops > GRAMMAR_STEP_OPS) {
			s->over = true;
			return false;
		}
		size_t start = s->tidx.w[--s->tidx.n];
		uint32_t len = s->todo.w[start];
		s->cur.n = 0;
		if (!wb_reserve(s, &s->cur, len))
			return false;
		memcpy(s->cur.w, s->todo.w + start + 1, len * 4);
		s->cur.n = len;
		s->todo.n = start;
		uint32_t h = stack_hash(s->cur.w, len);
		if (stab_has(s, &s->seen_tab, &s->seen, h, s->cur.w, len))
			continue;
		if (!wb_reserve(s, &s->seen, 2 + len))
			return false;
		size_t at = s->seen.n;
		s->seen.w[s->seen.n++] = h;
		s->seen.w[s->seen.n++] = len;
		memcpy(s->seen.w + s->seen.n, s->cur.w, len * 4);
		s->seen.n += len;
		if (!stab_add(s, &s->seen_tab, &s->seen, at))
			return false;
		const struct gel *top = len ? &g->el[s->cur.w[len - 1]] : NULL;
		if (!top || top->type != GE_RULE_REF) {
			/* a final stack: add to the set unless present */
			if (stab_has(s, &s->set_tab, &s->sets, h, s->cur.w, len))
				continue;
			if (!wb_reserve(s, &s->sets, 2 + len))
				return false;
			size_t at = s->sets.n;
			s->sets.w[s->sets.n++] = h;
			s->sets.w[s->sets.n++] = len;
			memcpy(s->sets.w + s->sets.n, s->cur.w, len * 4);
			s->sets.n += len;
			s->sets.w[set]++;
			if (!stab_add(s, &s->set_tab, &s->sets, at))
				return false;
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
		       "grammar: a step needed more than %u stack operations or %u words of "
		       "memory (the grammar is too ambiguous)",
		       GRAMMAR_STEP_OPS, GRAMMAR_STEP_WORDS);
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
	return calloc(1, sizeof(struct grammar_scratch));
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
			return 1;
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

/* Visits the children of trie node `node`, whose prefix leaves the interned set at
 * s->sets[set] and the decoder d. False on budget/oom. */
static bool walk_node(struct walk *w, uint32_t node, size_t set, struct u8dec d)
{
	struct grammar_scratch *s = w->s;
	for (uint32_t c = w->v->first_child[node]; c != UINT32_MAX; c = w->v->next_sib[c]) {
		struct u8dec dd = d;
		uint32_t cp;
		int r = u8_step(&dd, w->v->byte[c], &cp);
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
