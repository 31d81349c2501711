/* grammar_parse: GBNF text to the compiled form of grammar_int.h (grammar_parse and
 * grammar_free of grammar.h): llama.cpp's grammar-parser, with positions in the errors,
 * size bounds, and checks for undefined rules and left recursion.
 *
 * Its own file so that the fuzz build can give the parser libFuzzer's comparison hooks
 * (its comparisons are against input bytes) and leave them out of the matcher (Makefile).
 */
#include "sample/grammar.h"
#include "sample/grammar_int.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

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
