/* jinja_parse: the parser of the Jinja interpreter (tokens from jinja_lex.c to a syntax
 * tree), following jinja2's parser.py (3.1): the same statements, the same operator
 * precedence, the same nesting of tests and filters. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja_int.h"

#define MAX_NEST 200

/* ---- parser ---- */

static struct jx_tok *cur(struct jx_parser *p) { return &p->tk[p->pos]; }
static struct jx_tok *next(struct jx_parser *p)
{
	struct jx_tok *t = &p->tk[p->pos];
	if (t->t != T_EOF)
		p->pos++;
	return t;
}
static bool is_op(struct jx_parser *p, const char *op)
{
	struct jx_tok *t = cur(p);
	return t->t == T_OP && strcmp(t->s, op) == 0;
}
static bool is_name(struct jx_parser *p, const char *name)
{
	struct jx_tok *t = cur(p);
	return t->t == T_NAME && strcmp(t->s, name) == 0;
}
static bool skip_op(struct jx_parser *p, const char *op)
{
	if (!is_op(p, op))
		return false;
	p->pos++;
	return true;
}
static bool skip_name(struct jx_parser *p, const char *name)
{
	if (!is_name(p, name))
		return false;
	p->pos++;
	return true;
}

static const char *tok_desc(struct jx_tok *t)
{
	switch (t->t) {
	case T_NAME:
	case T_OP: return t->s;
	case T_STRING: return "a string";
	case T_INT:
	case T_FLOAT: return "a number";
	case T_BLOCK_END: return "'%}'";
	case T_VAR_END: return "'}}'";
	case T_EOF: return "end of template";
	default: return "template data";
	}
}

_Noreturn static void unexpected(struct jx_parser *p, const char *want)
{
	struct jx_tok *t = cur(p);
	jx_fail(p->e, t->line, BG_ERR_FORMAT, "expected %s, got %s", want, tok_desc(t));
}

static void expect_op(struct jx_parser *p, const char *op)
{
	if (!skip_op(p, op)) {
		char w[8];
		snprintf(w, sizeof w, "'%s'", op);
		unexpected(p, w);
	}
}

static const char *expect_name(struct jx_parser *p)
{
	if (cur(p)->t != T_NAME)
		unexpected(p, "a name");
	return next(p)->s;
}

static void expect_block_end(struct jx_parser *p)
{
	if (cur(p)->t != T_BLOCK_END)
		unexpected(p, "'%}'");
	p->pos++;
}

static struct jx_node *node(struct jx_parser *p, enum jx_kind k, int line)
{
	struct jx_node *n = jx_alloc(p->e, sizeof *n);
	n->kind = k;
	n->line = line;
	return n;
}

struct nodevec {
	struct jx_node **v;
	int n, cap;
};
static void nv_push(struct jx_parser *p, struct nodevec *v, struct jx_node *x)
{
	if (v->n == v->cap) {
		int cap = v->cap ? v->cap * 2 : 4;
		struct jx_node **nv = jx_alloc(p->e, (size_t)cap * sizeof *nv);
		if (v->n)
			memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
		v->v = nv;
		v->cap = cap;
	}
	v->v[v->n++] = x;
}

static void enter(struct jx_parser *p)
{
	if (++p->nest > MAX_NEST)
		jx_fail(p->e, cur(p)->line, BG_ERR_CAPACITY, "template nested more than %d deep", MAX_NEST);
}

static struct jx_node *parse_expr(struct jx_parser *p);
static struct jx_node *parse_or(struct jx_parser *p);
static struct jx_node *parse_unary(struct jx_parser *p, bool with_filter);
static struct jx_node *parse_tuple(struct jx_parser *p, bool with_cond, bool explicit_parens);

/* (args, name=value, ...) after the '(' has been read into n (N_CALL/N_FILTER/N_TEST). */
static void parse_args(struct jx_parser *p, struct jx_node *n)
{
	struct nodevec pos = {0}, kw = {0};
	const char **kn = NULL;
	int kcap = 0;
	while (!is_op(p, ")")) {
		if (pos.n + kw.n)
			expect_op(p, ",");
		if (is_op(p, ")"))
			break;
		if (cur(p)->t == T_NAME && p->tk[p->pos + 1].t == T_OP && strcmp(p->tk[p->pos + 1].s, "=") == 0) {
			const char *name = next(p)->s;
			p->pos++;
			if (kw.n == kcap) {
				kcap = kcap ? kcap * 2 : 4;
				const char **nk = jx_alloc(p->e, (size_t)kcap * sizeof *nk);
				if (kw.n)
					memcpy(nk, kn, (size_t)kw.n * sizeof *nk);
				kn = nk;
			}
			kn[kw.n] = name;
			nv_push(p, &kw, parse_expr(p));
		} else {
			if (kw.n)
				jx_fail(p->e, cur(p)->line, BG_ERR_FORMAT, "positional argument after keyword argument");
			nv_push(p, &pos, parse_expr(p));
		}
	}
	expect_op(p, ")");
	n->v = pos.v;
	n->nv = pos.n;
	n->w = kw.v;
	n->nk = kw.n;
	n->kn = kn;
}

static struct jx_node *parse_primary(struct jx_parser *p)
{
	struct jx_tok *t = cur(p);
	struct jx_node *n;
	switch (t->t) {
	case T_NAME:
		p->pos++;
		if (!strcmp(t->s, "true") || !strcmp(t->s, "True") || !strcmp(t->s, "false") || !strcmp(t->s, "False")) {
			n = node(p, N_CONST, t->line);
			n->val = jx_bool(t->s[0] == 't' || t->s[0] == 'T');
		} else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) {
			n = node(p, N_CONST, t->line);
			n->val = jx_none();
		} else {
			n = node(p, N_NAME, t->line);
			n->s = t->s;
			n->sn = t->n;
		}
		return n;
	case T_STRING: {
		p->pos++;
		n = node(p, N_CONST, t->line);
		if (cur(p)->t != T_STRING) {
			n->val = jx_str(p->e, t->s, t->n);
			return n;
		}
		struct strbuf b = {0};
		strbuf_put(&b, t->s, t->n);
		while (cur(p)->t == T_STRING) {
			struct jx_tok *u = next(p);
			strbuf_put(&b, u->s, u->n);
		}
		n->val = jx_strbuf_val(p->e, &b);
		return n;
	}
	case T_INT:
	case T_FLOAT:
		p->pos++;
		n = node(p, N_CONST, t->line);
		n->val = t->t == T_INT ? jx_int(t->i) : jx_float(t->f);
		return n;
	case T_OP:
		if (skip_op(p, "(")) {
			n = parse_tuple(p, true, true);
			expect_op(p, ")");
			return n;
		}
		if (skip_op(p, "[")) {
			struct nodevec v = {0};
			while (!is_op(p, "]")) {
				if (v.n)
					expect_op(p, ",");
				if (is_op(p, "]"))
					break;
				nv_push(p, &v, parse_expr(p));
			}
			expect_op(p, "]");
			n = node(p, N_LIST, t->line);
			n->v = v.v;
			n->nv = v.n;
			return n;
		}
		if (skip_op(p, "{")) {
			struct nodevec k = {0}, v = {0};
			while (!is_op(p, "}")) {
				if (k.n)
					expect_op(p, ",");
				if (is_op(p, "}"))
					break;
				nv_push(p, &k, parse_expr(p));
				expect_op(p, ":");
				nv_push(p, &v, parse_expr(p));
			}
			expect_op(p, "}");
			n = node(p, N_DICT, t->line);
			n->v = k.v;
			n->w = v.v;
			n->nv = k.n;
			return n;
		}
		break;
	default: break;
	}
	unexpected(p, "an expression");
}

static struct jx_node *parse_postfix(struct jx_parser *p, struct jx_node *n)
{
	for (;;) {
		int line = cur(p)->line;
		if (skip_op(p, ".")) {
			struct jx_tok *t = next(p);
			if (t->t == T_NAME) {
				struct jx_node *g = node(p, N_GETATTR, line);
				g->a = n;
				g->s = t->s;
				g->sn = t->n;
				n = g;
			} else if (t->t == T_INT) {
				struct jx_node *k = node(p, N_CONST, line), *g = node(p, N_GETITEM, line);
				k->val = jx_int(t->i);
				g->a = n;
				g->b = k;
				n = g;
			} else {
				p->pos--;
				unexpected(p, "an attribute name");
			}
		} else if (skip_op(p, "[")) {
			struct jx_node *parts[3] = {0};
			int k = 0;
			bool slice = false;
			for (;;) {
				if (is_op(p, ":")) {
					p->pos++;
					slice = true;
					if (++k > 2)
						unexpected(p, "']'");
					continue;
				}
				if (is_op(p, "]"))
					break;
				if (parts[k])
					unexpected(p, "']'");
				parts[k] = parse_expr(p);
			}
			expect_op(p, "]");
			struct jx_node *g = node(p, slice ? N_SLICE : N_GETITEM, line);
			g->a = n;
			g->b = parts[0];
			g->c = parts[1];
			g->d = parts[2];
			if (!slice && !g->b)
				unexpected(p, "an expression");
			n = g;
		} else if (skip_op(p, "(")) {
			struct jx_node *c = node(p, N_CALL, line);
			c->a = n;
			parse_args(p, c);
			n = c;
		} else {
			return n;
		}
	}
}

/* A filter's or test's name; jinja2 looks a dotted name up whole ("a.b": no such name). */
static const char *dotted_name(struct jx_parser *p)
{
	const char *name = expect_name(p);
	while (skip_op(p, ".")) {
		const char *part = expect_name(p);
		size_t a = strlen(name), b = strlen(part);
		char *j = jx_alloc(p->e, a + b + 2);
		memcpy(j, name, a);
		j[a] = '.';
		memcpy(j + a + 1, part, b + 1);
		name = j;
	}
	return name;
}

static struct jx_node *parse_filter(struct jx_parser *p, struct jx_node *n)
{
	int line = cur(p)->line;
	const char *name = dotted_name(p);
	struct jx_node *f = node(p, N_FILTER, line);
	f->s = name;
	f->sn = strlen(name);
	f->a = n;
	if (skip_op(p, "("))
		parse_args(p, f);
	return f;
}

static struct jx_node *parse_filter_expr(struct jx_parser *p, struct jx_node *n)
{
	for (;;) {
		if (skip_op(p, "|")) {
			n = parse_filter(p, n);
		} else if (is_name(p, "is")) {
			int line = next(p)->line;
			struct jx_node *t = node(p, N_TEST, line);
			t->op = skip_name(p, "not");
			const char *name = dotted_name(p);
			t->s = name;
			t->sn = strlen(name);
			t->a = n;
			struct jx_tok *c = cur(p);
			if (skip_op(p, "(")) {
				parse_args(p, t);
			} else if ((c->t == T_NAME || c->t == T_STRING || c->t == T_INT || c->t == T_FLOAT ||
				    (c->t == T_OP && (!strcmp(c->s, "[") || !strcmp(c->s, "{")))) &&
				   !is_name(p, "else") && !is_name(p, "or") && !is_name(p, "and")) {
				struct jx_node *arg = parse_postfix(p, parse_primary(p));
				t->v = jx_alloc(p->e, sizeof *t->v);
				t->v[0] = arg;
				t->nv = 1;
			}
			n = t;
		} else if (skip_op(p, "(")) {
			struct jx_node *c = node(p, N_CALL, n->line);
			c->a = n;
			parse_args(p, c);
			n = c;
		} else {
			return n;
		}
	}
}

static struct jx_node *parse_unary(struct jx_parser *p, bool with_filter)
{
	enter(p);
	struct jx_tok *t = cur(p);
	struct jx_node *n;
	if (is_op(p, "-") || is_op(p, "+")) {
		p->pos++;
		n = node(p, N_UNARY, t->line);
		n->op = t->s[0];
		n->a = parse_unary(p, false);
	} else {
		n = parse_primary(p);
	}
	n = parse_postfix(p, n);
	if (with_filter)
		n = parse_filter_expr(p, n);
	p->nest--;
	return n;
}

static struct jx_node *binop(struct jx_parser *p, int op, struct jx_node *a, struct jx_node *b, int line)
{
	struct jx_node *n = node(p, N_BINOP, line);
	n->op = op;
	n->a = a;
	n->b = b;
	return n;
}

static struct jx_node *parse_pow(struct jx_parser *p)
{
	struct jx_node *n = parse_unary(p, true);
	while (is_op(p, "**")) {
		int line = next(p)->line;
		n = binop(p, OP_POW, n, parse_unary(p, true), line);
	}
	return n;
}

static struct jx_node *parse_math2(struct jx_parser *p)
{
	struct jx_node *n = parse_pow(p);
	for (;;) {
		int op = is_op(p, "*") ? OP_MUL : is_op(p, "/") ? OP_DIV : is_op(p, "//") ? OP_FLOORDIV : is_op(p, "%") ? OP_MOD : 0;
		if (!op)
			return n;
		int line = next(p)->line;
		n = binop(p, op, n, parse_pow(p), line);
	}
}

static struct jx_node *parse_concat(struct jx_parser *p)
{
	struct jx_node *n = parse_math2(p);
	while (is_op(p, "~")) {
		int line = next(p)->line;
		n = binop(p, OP_CONCAT, n, parse_math2(p), line);
	}
	return n;
}

static struct jx_node *parse_math1(struct jx_parser *p)
{
	struct jx_node *n = parse_concat(p);
	for (;;) {
		int op = is_op(p, "+") ? OP_ADD : is_op(p, "-") ? OP_SUB : 0;
		if (!op)
			return n;
		int line = next(p)->line;
		n = binop(p, op, n, parse_concat(p), line);
	}
}

static struct jx_node *parse_compare(struct jx_parser *p)
{
	int line = cur(p)->line;
	struct jx_node *first = parse_math1(p);
	struct nodevec v = {0};
	int *ops = NULL, ocap = 0;
	for (;;) {
		int op = 0;
		if (is_op(p, "=="))
			op = OP_EQ;
		else if (is_op(p, "!="))
			op = OP_NE;
		else if (is_op(p, "<"))
			op = OP_LT;
		else if (is_op(p, "<="))
			op = OP_LE;
		else if (is_op(p, ">"))
			op = OP_GT;
		else if (is_op(p, ">="))
			op = OP_GE;
		else if (is_name(p, "in"))
			op = OP_IN;
		else if (is_name(p, "not") && p->tk[p->pos + 1].t == T_NAME && !strcmp(p->tk[p->pos + 1].s, "in")) {
			op = OP_NOTIN;
			p->pos++;
		}
		if (!op)
			break;
		p->pos++;
		if (v.n == ocap) {
			ocap = ocap ? ocap * 2 : 2;
			int *no = jx_alloc(p->e, (size_t)ocap * sizeof *no);
			if (v.n)
				memcpy(no, ops, (size_t)v.n * sizeof *no);
			ops = no;
		}
		ops[v.n] = op;
		nv_push(p, &v, parse_math1(p));
	}
	if (!v.n)
		return first;
	struct jx_node *n = node(p, N_COMPARE, line);
	n->a = first;
	n->v = v.v;
	n->nv = v.n;
	n->ops = ops;
	return n;
}

static struct jx_node *parse_not(struct jx_parser *p)
{
	if (is_name(p, "not")) {
		int line = next(p)->line;
		enter(p);
		struct jx_node *n = node(p, N_UNARY, line);
		n->op = '!';
		n->a = parse_not(p);
		p->nest--;
		return n;
	}
	return parse_compare(p);
}

static struct jx_node *parse_and(struct jx_parser *p)
{
	struct jx_node *n = parse_not(p);
	while (is_name(p, "and")) {
		int line = next(p)->line;
		struct jx_node *m = node(p, N_AND, line);
		m->a = n;
		m->b = parse_not(p);
		n = m;
	}
	return n;
}

static struct jx_node *parse_or(struct jx_parser *p)
{
	struct jx_node *n = parse_and(p);
	while (is_name(p, "or")) {
		int line = next(p)->line;
		struct jx_node *m = node(p, N_OR, line);
		m->a = n;
		m->b = parse_and(p);
		n = m;
	}
	return n;
}

static struct jx_node *parse_cond(struct jx_parser *p, bool with_cond)
{
	struct jx_node *n = parse_or(p);
	while (with_cond && is_name(p, "if")) {
		int line = next(p)->line;
		enter(p);
		struct jx_node *c = node(p, N_COND, line);
		c->a = n;
		c->b = parse_or(p);
		if (skip_name(p, "else"))
			c->c = parse_cond(p, true);
		p->nest--;
		n = c;
	}
	return n;
}

static struct jx_node *parse_expr(struct jx_parser *p) { return parse_cond(p, true); }

static bool tuple_end(struct jx_parser *p)
{
	struct jx_tok *t = cur(p);
	if (t->t == T_VAR_END || t->t == T_BLOCK_END || t->t == T_EOF)
		return true;
	if (t->t == T_OP && (!strcmp(t->s, ")") || !strcmp(t->s, "]") || !strcmp(t->s, "}") || !strcmp(t->s, "=") || !strcmp(t->s, "|")))
		return true;
	return t->t == T_NAME && (!strcmp(t->s, "if") || !strcmp(t->s, "in") || !strcmp(t->s, "recursive"));
}

static struct jx_node *parse_tuple(struct jx_parser *p, bool with_cond, bool explicit_parens)
{
	int line = cur(p)->line;
	struct nodevec v = {0};
	bool comma = false;
	for (;;) {
		if (v.n)
			expect_op(p, ",");
		if (tuple_end(p))
			break;
		nv_push(p, &v, parse_cond(p, with_cond));
		if (is_op(p, ","))
			comma = true;
		else
			break;
	}
	if (!comma && v.n == 1)
		return v.v[0];
	if (!v.n && !explicit_parens)
		unexpected(p, "an expression");
	struct jx_node *n = node(p, N_TUPLE, line);
	n->v = v.v;
	n->nv = v.n;
	return n;
}

/* ---- statements ---- */

static struct jx_node *parse_body(struct jx_parser *p, const char *const *ends);

static struct jx_node *parse_for(struct jx_parser *p, int line)
{
	struct jx_node *n = node(p, N_FOR, line);
	struct nodevec t = {0};
	do {
		struct jx_node *nm = node(p, N_NAME, cur(p)->line);
		nm->s = expect_name(p);
		nm->sn = strlen(nm->s);
		nv_push(p, &t, nm);
	} while (skip_op(p, ","));
	n->v = t.v;
	n->nv = t.n;
	if (!skip_name(p, "in"))
		unexpected(p, "'in'");
	n->a = parse_tuple(p, false, false);
	if (skip_name(p, "if"))
		n->d = parse_expr(p);
	if (skip_name(p, "recursive"))
		jx_fail(p->e, line, BG_ERR_UNSUPPORTED, "recursive loops are not supported");
	expect_block_end(p);
	static const char *const ends[] = {"endfor", "else", NULL};
	p->loops++;
	n->b = parse_body(p, ends);
	p->loops--;
	if (skip_name(p, "else")) { /* after the loop: break and continue are not in it */
		expect_block_end(p);
		static const char *const ends2[] = {"endfor", NULL};
		n->c = parse_body(p, ends2);
	}
	p->pos++; /* endfor */
	expect_block_end(p);
	return n;
}

static struct jx_node *parse_if(struct jx_parser *p, int line)
{
	struct jx_node *n = node(p, N_IF, line);
	n->a = parse_tuple(p, false, false);
	expect_block_end(p);
	static const char *const ends[] = {"elif", "else", "endif", NULL};
	n->b = parse_body(p, ends);
	struct jx_tok *t = next(p);
	if (!strcmp(t->s, "elif")) {
		n->c = parse_if(p, t->line);
		return n; /* the nested if consumed endif */
	}
	if (!strcmp(t->s, "else")) {
		expect_block_end(p);
		static const char *const ends2[] = {"endif", NULL};
		n->c = parse_body(p, ends2);
		p->pos++;
	}
	expect_block_end(p);
	return n;
}

static void parse_params(struct jx_parser *p, struct jx_node *n)
{
	struct nodevec names = {0}, defs = {0};
	expect_op(p, "(");
	while (!is_op(p, ")")) {
		if (names.n)
			expect_op(p, ",");
		if (is_op(p, ")"))
			break;
		struct jx_node *nm = node(p, N_NAME, cur(p)->line);
		nm->s = expect_name(p);
		nm->sn = strlen(nm->s);
		nv_push(p, &names, nm);
		if (skip_op(p, "="))
			nv_push(p, &defs, parse_expr(p));
		else if (defs.n)
			jx_fail(p->e, nm->line, BG_ERR_FORMAT, "non-default argument follows default argument");
	}
	expect_op(p, ")");
	n->v = names.v;
	n->nv = names.n;
	/* w[nv]: the default of each parameter or NULL */
	n->w = jx_alloc(p->e, ((size_t)names.n + 1) * sizeof *n->w);
	for (int i = 0; i < defs.n; i++)
		n->w[names.n - defs.n + i] = defs.v[i];
}

static struct jx_node *parse_stmt(struct jx_parser *p)
{
	struct jx_tok *t = next(p);
	if (t->t != T_NAME) {
		p->pos--;
		unexpected(p, "a statement name");
	}
	int line = t->line;
	const char *k = t->s;
	struct jx_node *n;
	if (!strcmp(k, "for"))
		return parse_for(p, line);
	if (!strcmp(k, "if"))
		return parse_if(p, line);
	if (!strcmp(k, "set")) {
		struct jx_node *target;
		struct jx_node *nm = node(p, N_NAME, cur(p)->line);
		nm->s = expect_name(p);
		nm->sn = strlen(nm->s);
		target = nm;
		if (skip_op(p, ".")) {
			target = node(p, N_GETATTR, line);
			target->a = nm;
			target->s = expect_name(p);
			target->sn = strlen(target->s);
		} else if (is_op(p, ",")) {
			struct nodevec v = {0};
			nv_push(p, &v, nm);
			while (skip_op(p, ",")) {
				struct jx_node *x = node(p, N_NAME, cur(p)->line);
				x->s = expect_name(p);
				x->sn = strlen(x->s);
				nv_push(p, &v, x);
			}
			target = node(p, N_TUPLE, line);
			target->v = v.v;
			target->nv = v.n;
		}
		if (skip_op(p, "=")) {
			n = node(p, N_SET, line);
			n->a = target;
			n->b = parse_tuple(p, true, false);
			expect_block_end(p);
			return n;
		}
		if (target->kind != N_NAME)
			unexpected(p, "'='");
		n = node(p, N_SETBLOCK, line);
		n->a = target;
		if (is_op(p, "|")) {
			struct jx_node *f = NULL;
			while (skip_op(p, "|"))
				f = parse_filter(p, f);
			n->c = f;
		}
		expect_block_end(p);
		static const char *const ends[] = {"endset", NULL};
		n->b = parse_body(p, ends);
		p->pos++;
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "macro")) {
		n = node(p, N_MACRO, line);
		n->s = expect_name(p);
		n->sn = strlen(n->s);
		parse_params(p, n);
		expect_block_end(p);
		static const char *const ends[] = {"endmacro", NULL};
		int loops = p->loops; /* a macro body is a function of its own in jinja2's code */
		p->loops = 0;
		n->b = parse_body(p, ends);
		p->loops = loops;
		p->pos++;
		if (cur(p)->t == T_NAME)
			p->pos++; /* {% endmacro name %} */
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "call")) {
		n = node(p, N_CALLBLOCK, line);
		if (is_op(p, "("))
			parse_params(p, n);
		else
			n->w = jx_alloc(p->e, sizeof *n->w);
		n->a = parse_expr(p);
		if (n->a->kind != N_CALL)
			jx_fail(p->e, line, BG_ERR_FORMAT, "expected a call in the call block");
		expect_block_end(p);
		static const char *const ends[] = {"endcall", NULL};
		int loops = p->loops;
		p->loops = 0;
		n->b = parse_body(p, ends);
		p->loops = loops;
		p->pos++;
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "filter")) {
		n = node(p, N_FILTERBLOCK, line);
		struct jx_node *f = parse_filter(p, NULL);
		while (skip_op(p, "|"))
			f = parse_filter(p, f);
		n->a = f;
		expect_block_end(p);
		static const char *const ends[] = {"endfilter", NULL};
		n->b = parse_body(p, ends);
		p->pos++;
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "generation")) {
		expect_block_end(p);
		static const char *const ends[] = {"endgeneration", NULL};
		n = parse_body(p, ends);
		p->pos++;
		expect_block_end(p);
		return n;
	}
	if (!strcmp(k, "break") || !strcmp(k, "continue")) {
		n = node(p, k[0] == 'b' ? N_BREAK : N_CONTINUE, line);
		if (!p->loops) /* Python refuses jinja2's code for it */
			jx_fail(p->e, line, BG_ERR_FORMAT, "'%s' outside a loop", k);
		expect_block_end(p);
		return n;
	}
	jx_fail(p->e, line, BG_ERR_UNSUPPORTED, "unknown or unsupported tag '%s'", k);
}

/* Statements until a block tag named in ends (NULL-terminated; NULL: the end of the
 * template). Leaves the cursor on that tag's name. */
static struct jx_node *parse_body(struct jx_parser *p, const char *const *ends)
{
	enter(p);
	struct jx_node *body = node(p, N_BODY, cur(p)->line);
	struct nodevec v = {0};
	for (;;) {
		struct jx_tok *t = cur(p);
		if (t->t == T_EOF) {
			if (ends)
				jx_fail(p->e, t->line, BG_ERR_FORMAT, "unexpected end of template, expected '%s'", ends[0]);
			break;
		}
		if (t->t == T_DATA) {
			struct jx_node *d = node(p, N_DATA, t->line);
			d->s = t->s;
			d->sn = t->n;
			nv_push(p, &v, d);
			p->pos++;
		} else if (t->t == T_VAR_BEGIN) {
			p->pos++;
			struct jx_node *o = node(p, N_OUTPUT, t->line);
			o->a = parse_tuple(p, true, false);
			if (cur(p)->t != T_VAR_END)
				unexpected(p, "'}}'");
			p->pos++;
			nv_push(p, &v, o);
		} else if (t->t == T_BLOCK_BEGIN) {
			p->pos++;
			struct jx_tok *nm = cur(p);
			bool end = false;
			for (int i = 0; ends && ends[i]; i++)
				if (nm->t == T_NAME && !strcmp(nm->s, ends[i]))
					end = true;
			if (end)
				break;
			if (nm->t == T_NAME && !strncmp(nm->s, "end", 3))
				jx_fail(p->e, nm->line, BG_ERR_FORMAT, "unexpected '%s'%s%s%s", nm->s,
					ends ? ", expected '" : "", ends ? ends[0] : "", ends ? "'" : "");
			if (nm->t == T_NAME && (!strcmp(nm->s, "elif") || !strcmp(nm->s, "else")))
				jx_fail(p->e, nm->line, BG_ERR_FORMAT, "unexpected '%s'", nm->s);
			nv_push(p, &v, parse_stmt(p));
		} else {
			unexpected(p, "template data or a tag");
		}
	}
	body->v = v.v;
	body->nv = v.n;
	p->nest--;
	return body;
}

/* jinja2's compiler refuses a filter or test name it does not know (TemplateAssertionError),
 * also in code that never runs, except in a "soft frame": the condition and bodies of an
 * {% if %} and all of an inline `a if b else c`, where the name fails only when it runs. A
 * for loop's body, else and filter condition, a macro's or call block's body and defaults,
 * and filter and set blocks are new frames, hard again. The walk keeps its own stack: a
 * long chain of operators or filters is a deep tree. */
struct walk_item {
	const struct jx_node *n;
	bool soft;
};

static int catches(struct jx_env *e, const struct jx_node *body);

static void check_names(struct jx_env *e, const struct jx_node *root)
{
	size_t n = 0, cap = 64;
	struct walk_item *st = malloc(cap * sizeof *st);
	const struct jx_node *bad = NULL;
	if (!st)
		jx_fail(e, 0, BG_ERR_NOMEM, "out of memory compiling the template");
	st[n++] = (struct walk_item){root, false};
	while (n && !bad) {
		struct walk_item it = st[--n];
		const struct jx_node *x = it.n;
		bool soft = it.soft, inner = soft; /* inner: the frame of x's bodies */
		if (!soft && ((x->kind == N_FILTER && !jx_jinja2_filter(x->s)) ||
			      (x->kind == N_TEST && !jx_jinja2_test(x->s))))
			bad = x;
		if ((x->kind == N_MACRO || x->kind == N_CALLBLOCK) && x->b)
			((struct jx_node *)x)->op = catches(e, x->b);
		switch (x->kind) {
		case N_IF:
		case N_COND: soft = inner = true; break;
		case N_FOR:
		case N_MACRO:
		case N_CALLBLOCK:
		case N_FILTERBLOCK:
		case N_SETBLOCK: inner = false; break;
		default: break;
		}
		/* the children: a (N_FOR's iterable, a call block's call: the outer frame; a filter
		 * block's filters: its own), then b, c, d, v[], w[] */
		int nw = x->kind == N_CALL || x->kind == N_FILTER || x->kind == N_TEST	     ? x->nk
			 : x->kind == N_DICT || x->kind == N_MACRO || x->kind == N_CALLBLOCK ? x->nv
											     : 0;
		size_t need = n + 4 + (size_t)x->nv + (size_t)nw;
		if (need > cap) {
			while (cap < need)
				cap *= 2;
			struct walk_item *ns = realloc(st, cap * sizeof *st);
			if (!ns) {
				free(st);
				jx_fail(e, 0, BG_ERR_NOMEM, "out of memory compiling the template");
			}
			st = ns;
		}
		bool a_soft = x->kind == N_FILTERBLOCK || x->kind == N_SETBLOCK ? inner : soft;
		const struct jx_node *kids[4] = {x->a, x->b, x->c, x->d};
		for (int k = 3; k >= 0; k--)
			if (kids[k])
				st[n++] = (struct walk_item){kids[k], k == 0 ? a_soft : inner};
		for (int k = nw - 1; k >= 0; k--)
			if (x->w && x->w[k])
				st[n++] = (struct walk_item){
				    x->w[k],
				    x->kind == N_MACRO || x->kind == N_CALLBLOCK ? false : inner};
		for (int k = x->nv - 1; k >= 0; k--)
			if (x->v[k])
				st[n++] = (struct walk_item){x->v[k], inner};
	}
	free(st);
	if (bad)
		jx_fail(e, bad->line, BG_ERR_FORMAT, "no %s named '%s'",
			bad->kind == N_FILTER ? "filter" : "test", bad->s);
}

/* MACRO_* of a macro body: the names varargs, kwargs and caller read anywhere in it (nested
 * macros included, as jinja2's find_undeclared visits them); assignment and loop targets
 * and parameters are not reads. */
static int catches(struct jx_env *e, const struct jx_node *body)
{
	size_t n = 0, cap = 64;
	const struct jx_node **st = malloc(cap * sizeof *st);
	int flags = 0;
	if (!st)
		jx_fail(e, 0, BG_ERR_NOMEM, "out of memory compiling the template");
	st[n++] = body;
	while (n) {
		const struct jx_node *x = st[--n];
		if (x->kind == N_NAME) {
			flags |= !strcmp(x->s, "varargs")  ? MACRO_VARARGS
				 : !strcmp(x->s, "kwargs") ? MACRO_KWARGS
				 : !strcmp(x->s, "caller") ? MACRO_CALLER
							   : 0;
			continue;
		}
		bool targets =
		    x->kind == N_FOR || x->kind == N_MACRO || x->kind == N_CALLBLOCK; /* v[] */
		bool target_a = x->kind == N_SET || x->kind == N_SETBLOCK;
		int nw = x->kind == N_CALL || x->kind == N_FILTER || x->kind == N_TEST	     ? x->nk
			 : x->kind == N_DICT || x->kind == N_MACRO || x->kind == N_CALLBLOCK ? x->nv
											     : 0;
		size_t need = n + 4 + (size_t)x->nv + (size_t)nw;
		if (need > cap) {
			while (cap < need)
				cap *= 2;
			const struct jx_node **ns = realloc(st, cap * sizeof *st);
			if (!ns) {
				free(st);
				jx_fail(e, 0, BG_ERR_NOMEM, "out of memory compiling the template");
			}
			st = ns;
		}
		if (x->a && !target_a)
			st[n++] = x->a;
		if (x->b)
			st[n++] = x->b;
		if (x->c)
			st[n++] = x->c;
		if (x->d)
			st[n++] = x->d;
		for (int k = 0; k < nw; k++)
			if (x->w && x->w[k])
				st[n++] = x->w[k];
		for (int k = 0; k < x->nv && !targets; k++)
			if (x->v[k])
				st[n++] = x->v[k];
	}
	free(st);
	return flags;
}

struct jx_node *jx_parse(struct jx_env *e, const char *src, size_t len)
{
	struct jx_parser p = {.e = e};
	jx_lex(&p, src, len);
	struct jx_node *root = parse_body(&p, NULL);
	check_names(e, root);
	return root;
}
