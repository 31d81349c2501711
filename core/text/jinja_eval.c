/* jinja_eval: executes a parsed template. Scoping as jinja2: each loop iteration and each
 * macro call has its own scope (a `set` inside does not outlive it); `if` has none; a
 * macro reads the variables of the scope it was defined in at the time it is called. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/jinja.h"
#include "text/jinja_int.h"

struct jinja_template {
	struct jx_arena arena;
	struct jx_node *root;
};

/* An output buffer in the render's arena. */
struct jbuf {
	char *p;
	size_t len, cap;
};

enum flow { FLOW_NORMAL, FLOW_BREAK, FLOW_CONTINUE };

static void bput(struct jx_render *r, struct jbuf *b, const char *s, size_t n)
{
	if (!n)
		return;
	if (b->len + n > r->max_output)
		jx_rfail(r, "template output exceeds %zu bytes", r->max_output);
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *np = jx_alloc(&r->env, cap);
		if (b->len)
			memcpy(np, b->p, b->len);
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void jx_rfail(struct jx_render *r, const char *fmt, ...)
{
	char msg[BG_ERR_MSG];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	jx_fail(&r->env, r->line, BG_ERR_INVALID, "%s", msg);
}

static void step(struct jx_render *r, int line)
{
	r->line = line;
	if (++r->steps > r->max_steps)
		jx_rfail(r, "template ran more than %llu steps", (unsigned long long)r->max_steps);
}

/* ---- scopes ---- */

static struct jx_scope *scope_new(struct jx_render *r, struct jx_scope *parent)
{
	struct jx_scope *s = jx_alloc(&r->env, sizeof *s);
	s->parent = parent;
	return s;
}

static void scope_set(struct jx_render *r, struct jx_scope *s, const char *name, struct jx_val v)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->names[i], name)) {
			s->vals[i] = v;
			return;
		}
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 8;
		const char **nn = jx_alloc(&r->env, (size_t)cap * sizeof *nn);
		struct jx_val *nv = jx_alloc(&r->env, (size_t)cap * sizeof *nv);
		if (s->n) {
			memcpy(nn, s->names, (size_t)s->n * sizeof *nn);
			memcpy(nv, s->vals, (size_t)s->n * sizeof *nv);
		}
		s->names = nn;
		s->vals = nv;
		s->cap = cap;
	}
	s->names[s->n] = name;
	s->vals[s->n] = v;
	s->n++;
}

static bool scope_get(const struct jx_scope *s, const char *name, struct jx_val *out)
{
	for (; s; s = s->parent)
		for (int i = s->n - 1; i >= 0; i--)
			if (!strcmp(s->names[i], name)) {
				*out = s->vals[i];
				return true;
			}
	return false;
}

/* ---- expressions ---- */

static struct jx_val eval(struct jx_render *r, struct jx_scope *s, const struct jx_node *n);
static enum flow exec(struct jx_render *r, struct jx_scope *s, const struct jx_node *n, struct jbuf *out);

static struct jx_val to_strval(struct jx_render *r, struct jx_val v)
{
	if (v.t == JX_STR)
		return v;
	struct strbuf b = {0};
	jx_to_str(&b, v);
	return jx_strbuf_val(&r->env, &b);
}

static void eval_args(struct jx_render *r, struct jx_scope *s, const struct jx_node *n, struct jx_args *a,
		      struct jx_val *first)
{
	int extra = first ? 1 : 0;
	a->npos = n->nv + extra;
	a->pos = jx_alloc(&r->env, ((size_t)a->npos + 1) * sizeof *a->pos);
	if (first)
		a->pos[0] = *first;
	for (int i = 0; i < n->nv; i++)
		a->pos[i + extra] = eval(r, s, n->v[i]);
	a->nkw = n->nk;
	a->kn = n->kn;
	a->kv = jx_alloc(&r->env, ((size_t)n->nk + 1) * sizeof *a->kv);
	for (int i = 0; i < n->nk; i++)
		a->kv[i] = eval(r, s, n->w[i]);
}

static bool checked_add(int64_t a, int64_t b, int64_t *o) { return !__builtin_add_overflow(a, b, o); }
static bool checked_sub(int64_t a, int64_t b, int64_t *o) { return !__builtin_sub_overflow(a, b, o); }
static bool checked_mul(int64_t a, int64_t b, int64_t *o) { return !__builtin_mul_overflow(a, b, o); }

/* x ** y for y >= 0 by squaring: at most ~2 x 63 multiplications whatever y is (a loop
 * of y multiplications never overflowed for x in {0, 1, -1}: `0 ** 50000000000` ran for
 * minutes, found by fuzz_jinja). False when the result does not fit. */
static bool checked_pow(int64_t x, int64_t y, int64_t *o)
{
	int64_t acc = 1;
	for (;;) {
		if ((y & 1) && !checked_mul(acc, x, &acc))
			return false;
		y >>= 1;
		if (!y)
			break;
		/* |x| >= 2 here, and x * x is a factor of the result, so an overflow here is
		 * one of the result; for |x| <= 1 it cannot overflow */
		if (!checked_mul(x, x, &x))
			return false;
	}
	*o = acc;
	return true;
}

static bool isnum(struct jx_val v) { return v.t == JX_INT || v.t == JX_FLOAT || v.t == JX_BOOL; }
static double fnum(struct jx_val v) { return v.t == JX_FLOAT ? v.f : v.t == JX_INT ? (double)v.i : v.b; }
/* An int or a bool as an integer; 0 for anything else (a float's bits are not a bool). */
static int64_t inum(struct jx_val v) { return v.t == JX_INT ? v.i : v.t == JX_BOOL ? v.b : 0; }

_Noreturn static void bad_operands(struct jx_render *r, const char *op, struct jx_val a, struct jx_val b)
{
	if (a.t == JX_UNDEF || b.t == JX_UNDEF)
		jx_rfail(r, "an undefined value was used with '%s'", op);
	jx_rfail(r, "unsupported operand types for %s: '%s' and '%s'", op, jx_type_name(a), jx_type_name(b));
}

static struct jx_val repeat(struct jx_render *r, struct jx_val seq, int64_t k)
{
	/* an empty sequence stays empty however large k is (`'' * 2111111111111` once looped
	 * 2e12 times: found by fuzz_jinja) */
	if (k < 0 || (seq.t == JX_STR ? seq.s->n : seq.l->n) == 0)
		k = 0;
	if (seq.t == JX_STR) {
		if (seq.s->n && (uint64_t)k > r->max_output / seq.s->n)
			jx_rfail(r, "string repetition too large");
		struct jbuf b = {0};
		for (int64_t i = 0; i < k; i++)
			bput(r, &b, seq.s->p, seq.s->n);
		return jx_str(&r->env, b.p ? b.p : "", b.len);
	}
	if (seq.l->n && (uint64_t)k > 1000000 / seq.l->n)
		jx_rfail(r, "list repetition too large");
	struct jx_list *l = jx_list_new(&r->env, seq.l->n * (size_t)k);
	for (int64_t i = 0; i < k; i++)
		for (size_t j = 0; j < seq.l->n; j++)
			jx_list_push(&r->env, l, seq.l->v[j]);
	return jx_list_val(l);
}

static struct jx_val arith(struct jx_render *r, int op, struct jx_val a, struct jx_val b)
{
	static const char *names[] = {[OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/",
				      [OP_FLOORDIV] = "//", [OP_MOD] = "%", [OP_POW] = "**"};
	if (op == OP_ADD && a.t == JX_STR && b.t == JX_STR && (a.safe || b.safe)) {
		/* Markup + str escapes the str (markupsafe), even with autoescape off */
		struct jx_args none = {0};
		a = jx_apply_filter(r, "escape", a, &none);
		b = jx_apply_filter(r, "escape", b, &none);
		a.safe = b.safe = false;
		struct jx_val v = arith(r, op, a, b);
		v.safe = true;
		return v;
	}
	if (op == OP_ADD && a.t == JX_STR && b.t == JX_STR) {
		struct jbuf o = {0};
		bput(r, &o, a.s->p, a.s->n);
		bput(r, &o, b.s->p, b.s->n);
		return jx_str(&r->env, o.p ? o.p : "", o.len);
	}
	if (op == OP_ADD && a.t == JX_LIST && b.t == JX_LIST) {
		struct jx_list *l = jx_list_new(&r->env, a.l->n + b.l->n);
		for (size_t i = 0; i < a.l->n; i++)
			jx_list_push(&r->env, l, a.l->v[i]);
		for (size_t i = 0; i < b.l->n; i++)
			jx_list_push(&r->env, l, b.l->v[i]);
		l->tuple = a.l->tuple;
		return jx_list_val(l);
	}
	if (op == OP_MUL && (a.t == JX_STR || a.t == JX_LIST) && (b.t == JX_INT || b.t == JX_BOOL))
		return repeat(r, a, inum(b));
	if (op == OP_MUL && (b.t == JX_STR || b.t == JX_LIST) && (a.t == JX_INT || a.t == JX_BOOL))
		return repeat(r, b, inum(a));
	if (op == OP_MOD && a.t == JX_STR) {
		struct jx_args args = {0};
		bool tuple = b.t == JX_LIST && b.l->tuple;
		if (tuple) {
			args.pos = b.l->v;
			args.npos = (int)b.l->n;
		} else {
			args.pos = &b;
			args.npos = 1;
		}
		return jx_percent_format(
		    r, a, &args, !tuple && (b.t == JX_DICT || b.t == JX_LIST || b.t == JX_UNDEF));
	}
	if (!isnum(a) || !isnum(b))
		bad_operands(r, names[op], a, b);
	bool fl = a.t == JX_FLOAT || b.t == JX_FLOAT;
	int64_t x = inum(a), y = inum(b), o;
	double fx = fnum(a), fy = fnum(b);
	switch (op) {
	case OP_ADD:
		if (!fl && checked_add(x, y, &o))
			return jx_int(o);
		return jx_float(fx + fy);
	case OP_SUB:
		if (!fl && checked_sub(x, y, &o))
			return jx_int(o);
		return jx_float(fx - fy);
	case OP_MUL:
		if (!fl && checked_mul(x, y, &o))
			return jx_int(o);
		return jx_float(fx * fy);
	case OP_DIV:
		if (fy == 0)
			jx_rfail(r, "division by zero");
		return jx_float(fx / fy);
	case OP_FLOORDIV:
	case OP_MOD:
		if (fy == 0)
			jx_rfail(r, "integer division or modulo by zero");
		if (!fl && !(x == INT64_MIN && y == -1)) {
			int64_t q = x / y, m = x % y;
			if (m != 0 && ((m < 0) != (y < 0))) {
				q--;
				m += y;
			}
			return jx_int(op == OP_MOD ? m : q);
		} else {
			double m = fmod(fx, fy);
			if (m != 0 && ((m < 0) != (fy < 0)))
				m += fy;
			return jx_float(op == OP_MOD ? m : floor((fx - m) / fy + 0.5));
		}
	case OP_POW:
		if (!fl && y >= 0 && checked_pow(x, y, &o))
			return jx_int(o);
		return jx_float(pow(fx, fy));
	}
	bad_operands(r, "?", a, b);
}

static bool contains(struct jx_render *r, struct jx_val hay, struct jx_val needle)
{
	switch (hay.t) {
	case JX_STR:
		if (needle.t != JX_STR)
			jx_rfail(r, "'in <string>' requires string as left operand, not %s", jx_type_name(needle));
		return needle.s->n == 0 || memmem(hay.s->p, hay.s->n, needle.s->p, needle.s->n) != NULL;
	case JX_LIST:
		for (size_t i = 0; i < hay.l->n; i++)
			if (jx_equal(hay.l->v[i], needle))
				return true;
		return false;
	case JX_DICT: {
		struct jx_val o;
		return jx_dict_get(hay.d, needle, &o);
	}
	case JX_UNDEF: return false;
	default: jx_rfail(r, "argument of type '%s' is not iterable", jx_type_name(hay));
	}
}

static bool compare_op(struct jx_render *r, int op, struct jx_val a, struct jx_val b)
{
	switch (op) {
	case OP_EQ: return jx_equal(a, b);
	case OP_NE: return !jx_equal(a, b);
	case OP_IN: return contains(r, b, a);
	case OP_NOTIN: return !contains(r, b, a);
	default: break;
	}
	bool ok;
	int c = jx_compare(a, b, &ok);
	if (!ok) {
		static const char *nm[] = {[OP_LT] = "<", [OP_LE] = "<=", [OP_GT] = ">", [OP_GE] = ">="};
		jx_rfail(r, "'%s' not supported between instances of '%s' and '%s'", nm[op], jx_type_name(a),
			 jx_type_name(b));
	}
	switch (op) {
	case OP_LT: return c < 0;
	case OP_LE: return c <= 0;
	case OP_GT: return c > 0;
	default: return c >= 0;
	}
}

static int64_t slice_index(struct jx_render *r, struct jx_val v, int64_t def)
{
	if (v.t == JX_NONE)
		return def;
	if (v.t != JX_INT && v.t != JX_BOOL) /* an undefined one too, as in jinja2 */
		jx_rfail(r, "slice indices must be integers or None");
	return inum(v);
}

static struct jx_val do_slice(struct jx_render *r, struct jx_val obj, struct jx_val a, struct jx_val b, struct jx_val c)
{
	int64_t len;
	if (obj.t == JX_STR)
		len = (int64_t)jx_utf8_len(obj.s->p, obj.s->n);
	else if (obj.t == JX_LIST)
		len = (int64_t)obj.l->n;
	else if (obj.t == JX_UNDEF)
		jx_rfail(r, "an undefined value was sliced");
	else
		jx_rfail(r, "'%s' object is not subscriptable", jx_type_name(obj));
	int64_t st = slice_index(r, c, 1);
	if (st == 0)
		jx_rfail(r, "slice step cannot be zero");
	int64_t lo, hi;
	if (st > 0) {
		lo = slice_index(r, a, 0);
		hi = slice_index(r, b, len);
		if (lo < 0)
			lo = lo + len < 0 ? 0 : lo + len;
		if (hi < 0)
			hi = hi + len < 0 ? 0 : hi + len;
		if (lo > len)
			lo = len;
		if (hi > len)
			hi = len;
	} else {
		lo = slice_index(r, a, len - 1);
		hi = slice_index(r, b, -len - 1);
		if (lo < 0)
			lo = lo + len < 0 ? -1 : lo + len;
		if (hi < 0)
			hi = hi + len < 0 ? -1 : hi + len;
		if (lo >= len)
			lo = len - 1;
		if (hi >= len)
			hi = len - 1;
	}
	struct jx_list *idx = jx_list_new(&r->env, 0);
	for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st)
		jx_list_push(&r->env, idx, jx_int(i));
	if (obj.t == JX_LIST) {
		struct jx_list *l = jx_list_new(&r->env, idx->n);
		l->tuple = obj.l->tuple;
		for (size_t i = 0; i < idx->n; i++)
			jx_list_push(&r->env, l, obj.l->v[idx->v[i].i]);
		return jx_list_val(l);
	}
	struct jbuf o = {0};
	for (size_t i = 0; i < idx->n; i++) {
		size_t p0 = jx_utf8_offset(obj.s->p, obj.s->n, (size_t)idx->v[i].i);
		size_t p1 = jx_utf8_offset(obj.s->p, obj.s->n, (size_t)idx->v[i].i + 1);
		bput(r, &o, obj.s->p + p0, p1 - p0);
	}
	return jx_str(&r->env, o.p ? o.p : "", o.len);
}

static struct jx_val call_value(struct jx_render *r, struct jx_val f, struct jx_args *a)
{
	switch (f.t) {
	case JX_MACRO: return jx_call_macro(r, f.m, a);
	case JX_FUNC: return jx_call_global(r, f.fn, a);
	case JX_METHOD: return jx_call_method(r, f.bm, a);
	case JX_UNDEF: jx_rfail(r, "an undefined value was called");
	default: jx_rfail(r, "'%s' object is not callable", jx_type_name(f));
	}
}

#define MAX_FRAMES 3000 /* nested eval/exec calls: about 1 MiB of C stack */

static struct jx_val eval1(struct jx_render *r, struct jx_scope *s, const struct jx_node *n);

static struct jx_val eval(struct jx_render *r, struct jx_scope *s, const struct jx_node *n)
{
	if (++r->frames > MAX_FRAMES)
		jx_rfail(r, "template expressions nested more than %d deep", MAX_FRAMES);
	struct jx_val v = eval1(r, s, n);
	r->frames--;
	return v;
}

static struct jx_val eval1(struct jx_render *r, struct jx_scope *s, const struct jx_node *n)
{
	step(r, n->line);
	switch (n->kind) {
	case N_CONST: return n->val;
	case N_NAME: {
		struct jx_val v;
		if (scope_get(s, n->s, &v))
			return v;
		int g = jx_global_index(n->s);
		if (g >= 0)
			return (struct jx_val){.t = JX_FUNC, .fn = g};
		return jx_undef();
	}
	case N_LIST:
	case N_TUPLE: {
		struct jx_list *l = jx_list_new(&r->env, (size_t)n->nv);
		for (int i = 0; i < n->nv; i++)
			jx_list_push(&r->env, l, eval(r, s, n->v[i]));
		l->tuple = n->kind == N_TUPLE;
		return jx_list_val(l);
	}
	case N_DICT: {
		struct jx_dict *d = jx_dict_new(&r->env);
		for (int i = 0; i < n->nv; i++) {
			struct jx_val k = eval(r, s, n->v[i]);
			jx_dict_set(&r->env, d, k, eval(r, s, n->w[i]));
		}
		return jx_dict_val(d);
	}
	case N_GETATTR: {
		struct jx_val o = eval(r, s, n->a);
		r->line = n->line;
		return jx_getattr(r, o, n->s);
	}
	case N_GETITEM: {
		struct jx_val o = eval(r, s, n->a);
		struct jx_val k = eval(r, s, n->b);
		r->line = n->line;
		return jx_getitem(r, o, k);
	}
	case N_SLICE: {
		struct jx_val o = eval(r, s, n->a);
		struct jx_val a = n->b ? eval(r, s, n->b) : jx_none();
		struct jx_val b = n->c ? eval(r, s, n->c) : jx_none();
		struct jx_val c = n->d ? eval(r, s, n->d) : jx_none();
		r->line = n->line;
		return do_slice(r, o, a, b, c);
	}
	case N_CALL: {
		struct jx_val f = eval(r, s, n->a);
		struct jx_args a;
		eval_args(r, s, n, &a, NULL);
		r->line = n->line;
		return call_value(r, f, &a);
	}
	case N_FILTER: {
		struct jx_val v = eval(r, s, n->a);
		struct jx_args a;
		eval_args(r, s, n, &a, NULL);
		r->line = n->line;
		return jx_apply_filter(r, n->s, v, &a);
	}
	case N_TEST: {
		struct jx_val v = eval(r, s, n->a);
		struct jx_args a;
		eval_args(r, s, n, &a, NULL);
		r->line = n->line;
		bool t = jx_apply_test(r, n->s, v, &a);
		return jx_bool(n->op ? !t : t);
	}
	case N_UNARY: {
		struct jx_val v = eval(r, s, n->a);
		r->line = n->line;
		if (n->op == '!')
			return jx_bool(!jx_truthy(v));
		if (!isnum(v))
			jx_rfail(r, "bad operand type for unary %c: '%s'", n->op, jx_type_name(v));
		if (n->op == '+')
			return v.t == JX_BOOL ? jx_int(v.b) : v;
		if (v.t == JX_FLOAT)
			return jx_float(-v.f);
		if (inum(v) == INT64_MIN)
			return jx_float(-(double)INT64_MIN);
		return jx_int(-inum(v));
	}
	case N_BINOP: {
		struct jx_val a = eval(r, s, n->a);
		struct jx_val b = eval(r, s, n->b);
		r->line = n->line;
		if (n->op == OP_CONCAT) {
			a = to_strval(r, a);
			b = to_strval(r, b);
			struct jbuf o = {0};
			bput(r, &o, a.s->p, a.s->n);
			bput(r, &o, b.s->p, b.s->n);
			return jx_str(&r->env, o.p ? o.p : "", o.len);
		}
		return arith(r, n->op, a, b);
	}
	case N_AND: {
		struct jx_val a = eval(r, s, n->a);
		return jx_truthy(a) ? eval(r, s, n->b) : a;
	}
	case N_OR: {
		struct jx_val a = eval(r, s, n->a);
		return jx_truthy(a) ? a : eval(r, s, n->b);
	}
	case N_COMPARE: {
		struct jx_val a = eval(r, s, n->a);
		for (int i = 0; i < n->nv; i++) {
			struct jx_val b = eval(r, s, n->v[i]);
			r->line = n->line;
			if (!compare_op(r, n->ops[i], a, b))
				return jx_bool(false);
			a = b;
		}
		return jx_bool(true);
	}
	case N_COND:
		if (jx_truthy(eval(r, s, n->b)))
			return eval(r, s, n->a);
		return n->c ? eval(r, s, n->c) : jx_undef();
	default: jx_rfail(r, "internal error: statement used as an expression");
	}
}

/* ---- macros ---- */

/* Binds a call's arguments as jinja2's Macro.__call__ does: positional ones first, then
 * keywords for the parameters left; extra positional arguments go to varargs and other
 * keywords (also one naming a parameter already given) to kwargs, each only when the body
 * reads that name (def->op, MACRO_*), else the call is an error. A call block's caller is
 * passed like a keyword argument named caller. */
static struct jx_val run_macro(struct jx_render *r, struct jx_macro *m, const struct jx_args *a)
{
	const struct jx_node *def = m->def;
	if (++r->depth > r->max_depth)
		jx_rfail(r, "macro calls nested more than %d deep", r->max_depth);
	char name[80];
	if (def->kind == N_MACRO)
		snprintf(name, sizeof name, "macro '%.60s'", def->s);
	else
		snprintf(name, sizeof name, "the call block's caller");
	struct jx_scope *s = scope_new(r, m->scope);
	int np = def->nv;
	bool *set = jx_alloc(&r->env, (size_t)np + 1);
	struct jx_list *varargs = jx_list_new(&r->env, 0);
	struct jx_dict *kwargs = jx_dict_new(&r->env);
	if (a->npos > np && !(def->op & MACRO_VARARGS))
		jx_rfail(r, "%s takes not more than %d argument(s)", name, np);
	for (int i = 0; i < a->npos; i++) {
		if (i < np) {
			scope_set(r, s, def->v[i]->s, a->pos[i]);
			set[i] = true;
		} else {
			jx_list_push(&r->env, varargs, a->pos[i]);
		}
	}
	for (int k = 0; k < a->nkw; k++) {
		int i;
		for (i = a->npos; i < np; i++)
			if (!strcmp(def->v[i]->s, a->kn[k]))
				break;
		if (i < np) {
			scope_set(r, s, def->v[i]->s, a->kv[k]);
			set[i] = true;
		} else if (!strcmp(a->kn[k], "caller") && (def->op & MACRO_CALLER) &&
			   m->caller == NULL) {
			scope_set(r, s, "caller", a->kv[k]);
		} else if (def->op & MACRO_KWARGS) {
			jx_dict_set(&r->env, kwargs, jx_cstr(&r->env, a->kn[k]), a->kv[k]);
		} else {
			jx_rfail(r, "%s takes no keyword argument '%s'", name, a->kn[k]);
		}
	}
	if (m->caller && !(def->op & MACRO_CALLER)) {
		if (!(def->op & MACRO_KWARGS))
			jx_rfail(r,
				 "%s does not take the call block's caller (its body never calls "
				 "caller())",
				 name);
		jx_dict_set(&r->env, kwargs, jx_cstr(&r->env, "caller"),
			    (struct jx_val){.t = JX_MACRO, .m = m->caller});
	}
	for (int i = 0; i < np; i++)
		if (!set[i])
			scope_set(r, s, def->v[i]->s, def->w[i] ? eval(r, s, def->w[i]) : jx_undef());
	varargs->tuple = true;
	scope_set(r, s, "varargs", jx_list_val(varargs));
	scope_set(r, s, "kwargs", jx_dict_val(kwargs));
	if (m->caller && (def->op & MACRO_CALLER))
		scope_set(r, s, "caller", (struct jx_val){.t = JX_MACRO, .m = m->caller});
	struct jbuf out = {0};
	exec(r, s, def->b, &out);
	r->depth--;
	return jx_str(&r->env, out.p ? out.p : "", out.len);
}

struct jx_val jx_call_macro(struct jx_render *r, struct jx_macro *m, const struct jx_args *a)
{
	int line = r->line;
	struct jx_val v = run_macro(r, m, a);
	r->line = line;
	return v;
}

/* ---- statements ---- */

static void assign(struct jx_render *r, struct jx_scope *s, const struct jx_node *t, struct jx_val v)
{
	if (t->kind == N_NAME) {
		scope_set(r, s, t->s, v);
	} else if (t->kind == N_GETATTR) {
		struct jx_val ns;
		if (!scope_get(s, t->a->s, &ns) || ns.t != JX_DICT || !ns.d->ns)
			jx_rfail(r, "cannot assign attribute on non-namespace object");
		jx_dict_set(&r->env, ns.d, jx_cstr(&r->env, t->s), v);
	} else {
		if (v.t != JX_LIST)
			jx_rfail(r, "cannot unpack non-iterable %s object", jx_type_name(v));
		if ((int)v.l->n != t->nv)
			jx_rfail(r, "cannot unpack %zu values into %d names", v.l->n, t->nv);
		for (int i = 0; i < t->nv; i++)
			scope_set(r, s, t->v[i]->s, v.l->v[i]);
	}
}

/* The items a for loop walks over (dicts: their keys; strings: their characters). */
static struct jx_list *iter_items(struct jx_render *r, struct jx_val v)
{
	switch (v.t) {
	case JX_LIST: return v.l;
	case JX_UNDEF: return jx_list_new(&r->env, 0);
	case JX_DICT: {
		struct jx_list *l = jx_list_new(&r->env, v.d->n);
		for (size_t i = 0; i < v.d->n; i++)
			jx_list_push(&r->env, l, v.d->k[i]);
		return l;
	}
	case JX_STR: {
		struct jx_list *l = jx_list_new(&r->env, v.s->n);
		for (size_t i = 0; i < v.s->n;) {
			size_t j = i + 1;
			while (j < v.s->n && ((unsigned char)v.s->p[j] & 0xC0) == 0x80)
				j++;
			jx_list_push(&r->env, l, jx_str(&r->env, v.s->p + i, j - i));
			i = j;
		}
		return l;
	}
	default: jx_rfail(r, "'%s' object is not iterable", jx_type_name(v));
	}
}

static void exec_for(struct jx_render *r, struct jx_scope *s, const struct jx_node *n, struct jbuf *out)
{
	/* `for i in range(...)` (range not shadowed, no filter) walks the numbers without
	 * building the list, so that a nested loop over a large range costs no memory */
	struct jx_list *items = NULL;
	int64_t r0 = 0, rstep = 1;
	size_t rlen = 0;
	struct jx_val tmp;
	const struct jx_node *it = n->a;
	if (!n->d && it->kind == N_CALL && it->a->kind == N_NAME && !strcmp(it->a->s, "range") &&
	    !scope_get(s, "range", &tmp) && it->nk == 0 && it->nv >= 1 && it->nv <= 3) {
		int64_t a[3];
		for (int i = 0; i < it->nv; i++) {
			struct jx_val v = eval(r, s, it->v[i]);
			r->line = it->line;
			if (v.t != JX_INT && v.t != JX_BOOL)
				jx_rfail(r, "range argument must be an integer, not %s", jx_type_name(v));
			a[i] = v.t == JX_INT ? v.i : v.b;
		}
		int64_t hi = it->nv == 1 ? a[0] : a[1];
		r0 = it->nv == 1 ? 0 : a[0];
		rstep = it->nv == 3 ? a[2] : 1;
		if (rstep == 0)
			jx_rfail(r, "range() arg 3 must not be zero");
		double cnt = ceil(((double)hi - (double)r0) / (double)rstep);
		rlen = cnt > 0 ? (cnt > 1e15 ? (size_t)1e15 : (size_t)cnt) : 0;
	} else {
		items = iter_items(r, eval(r, s, n->a));
	}
#define ITEM(i) (items ? items->v[i] : jx_int(r0 + (int64_t)(i) * rstep))
	if (n->d) { /* {% for x in xs if cond %}: filter first, so that loop.* count the kept items */
		struct jx_list *kept = jx_list_new(&r->env, items->n);
		for (size_t i = 0; i < items->n; i++) {
			struct jx_scope *fs = scope_new(r, s);
			if (n->nv == 1)
				scope_set(r, fs, n->v[0]->s, items->v[i]);
			else {
				struct jx_node t = {.kind = N_TUPLE, .v = n->v, .nv = n->nv};
				assign(r, fs, &t, items->v[i]);
			}
			if (jx_truthy(eval(r, fs, n->d)))
				jx_list_push(&r->env, kept, items->v[i]);
		}
		items = kept;
	}
	size_t len = items ? items->n : rlen;
	/* One scope and one loop object for the whole loop, emptied and refilled each
	 * iteration (what a set in the body wrote does not survive the iteration), so that a
	 * long loop does not use memory per iteration. */
	struct jx_env *e = &r->env;
	struct jx_scope *is = scope_new(r, s);
	struct jx_dict *loop = jx_dict_new(e);
	loop->ns = true; /* attribute access only, like jinja2's LoopContext */
	static const char *const keys[] = {"index", "index0", "revindex", "revindex0", "first", "last",
					   "length", "depth", "depth0", "previtem", "nextitem"};
	struct jx_val k[11];
	for (int j = 0; j < 11; j++)
		k[j] = jx_cstr(e, keys[j]);
	for (size_t i = 0; i < len; i++) {
		step(r, n->line);
		is->n = 0;
		if (n->nv == 1) {
			scope_set(r, is, n->v[0]->s, ITEM(i));
		} else {
			struct jx_node t = {.kind = N_TUPLE, .v = n->v, .nv = n->nv};
			assign(r, is, &t, ITEM(i));
		}
		loop->n = 0;
		jx_dict_set(e, loop, k[0], jx_int((int64_t)i + 1));
		jx_dict_set(e, loop, k[1], jx_int((int64_t)i));
		jx_dict_set(e, loop, k[2], jx_int((int64_t)(len - i)));
		jx_dict_set(e, loop, k[3], jx_int((int64_t)(len - i - 1)));
		jx_dict_set(e, loop, k[4], jx_bool(i == 0));
		jx_dict_set(e, loop, k[5], jx_bool(i + 1 == len));
		jx_dict_set(e, loop, k[6], jx_int((int64_t)len));
		jx_dict_set(e, loop, k[7], jx_int(1));
		jx_dict_set(e, loop, k[8], jx_int(0));
		if (i > 0)
			jx_dict_set(e, loop, k[9], ITEM(i - 1));
		if (i + 1 < len)
			jx_dict_set(e, loop, k[10], ITEM(i + 1));
		scope_set(r, is, "loop", jx_dict_val(loop));
		if (exec(r, is, n->b, out) == FLOW_BREAK)
			break;
	}
	if (len == 0 && n->c)
		exec(r, s, n->c, out);
#undef ITEM
}

static struct jx_val apply_filter_chain(struct jx_render *r, struct jx_scope *s, const struct jx_node *f,
					struct jx_val v)
{
	if (!f)
		return v;
	v = apply_filter_chain(r, s, f->a, v);
	struct jx_args a;
	eval_args(r, s, f, &a, NULL);
	r->line = f->line;
	return jx_apply_filter(r, f->s, v, &a);
}

static enum flow exec1(struct jx_render *r, struct jx_scope *s, const struct jx_node *n, struct jbuf *out);

static enum flow exec(struct jx_render *r, struct jx_scope *s, const struct jx_node *n, struct jbuf *out)
{
	if (++r->frames > MAX_FRAMES)
		jx_rfail(r, "template nested more than %d deep", MAX_FRAMES);
	enum flow f = exec1(r, s, n, out);
	r->frames--;
	return f;
}

static enum flow exec1(struct jx_render *r, struct jx_scope *s, const struct jx_node *n, struct jbuf *out)
{
	step(r, n->line);
	switch (n->kind) {
	case N_BODY:
		for (int i = 0; i < n->nv; i++) {
			enum flow f = exec(r, s, n->v[i], out);
			if (f != FLOW_NORMAL)
				return f;
		}
		return FLOW_NORMAL;
	case N_DATA: bput(r, out, n->s, n->sn); return FLOW_NORMAL;
	case N_OUTPUT: {
		struct jx_val v = eval(r, s, n->a);
		if (v.t == JX_STR) {
			bput(r, out, v.s->p, v.s->n);
		} else {
			v = to_strval(r, v);
			bput(r, out, v.s->p, v.s->n);
		}
		return FLOW_NORMAL;
	}
	case N_IF:
		if (jx_truthy(eval(r, s, n->a)))
			return exec(r, s, n->b, out);
		return n->c ? exec(r, s, n->c, out) : FLOW_NORMAL;
	case N_FOR: exec_for(r, s, n, out); return FLOW_NORMAL;
	case N_SET: assign(r, s, n->a, eval(r, s, n->b)); return FLOW_NORMAL;
	case N_SETBLOCK: {
		/* a break or continue inside leaves the block at once, assigning nothing (jinja2
		 * writes the block's body inline in the loop's code) */
		struct jbuf b = {0};
		enum flow f = exec(r, s, n->b, &b);
		if (f != FLOW_NORMAL)
			return f;
		struct jx_val v = jx_str(&r->env, b.p ? b.p : "", b.len);
		assign(r, s, n->a, apply_filter_chain(r, s, n->c, v));
		return FLOW_NORMAL;
	}
	case N_MACRO: {
		struct jx_macro *m = jx_alloc(&r->env, sizeof *m);
		m->def = n;
		m->scope = s;
		scope_set(r, s, n->s, (struct jx_val){.t = JX_MACRO, .m = m});
		return FLOW_NORMAL;
	}
	case N_CALLBLOCK: {
		struct jx_macro *caller = jx_alloc(&r->env, sizeof *caller);
		caller->def = n;
		caller->scope = s;
		const struct jx_node *c = n->a;
		struct jx_val f = eval(r, s, c->a);
		struct jx_args a;
		eval_args(r, s, c, &a, NULL);
		r->line = n->line;
		if (f.t != JX_MACRO)
			jx_rfail(r, "a call block needs a macro");
		struct jx_macro m2 = *f.m;
		m2.caller = caller;
		struct jx_val v = run_macro(r, &m2, &a);
		bput(r, out, v.s->p, v.s->n);
		return FLOW_NORMAL;
	}
	case N_FILTERBLOCK: {
		struct jbuf b = {0};
		enum flow f = exec(r, s, n->b, &b);
		if (f != FLOW_NORMAL) /* as a set block: nothing of the body is written */
			return f;
		struct jx_val v = apply_filter_chain(r, s, n->a, jx_str(&r->env, b.p ? b.p : "", b.len));
		v = to_strval(r, v);
		bput(r, out, v.s->p, v.s->n);
		return FLOW_NORMAL;
	}
	case N_BREAK: return FLOW_BREAK;
	case N_CONTINUE: return FLOW_CONTINUE;
	default: {
		struct jx_val v = eval(r, s, n);
		(void)v;
		return FLOW_NORMAL;
	}
	}
}

/* ---- entry points ---- */

enum bg_status jinja_compile(const char *src, size_t len, struct jinja_template **out, struct bg_err *err)
{
	*out = NULL;
	struct jinja_template *t = calloc(1, sizeof *t);
	if (!t)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory compiling the chat template");
	t->arena.limit = (size_t)64 << 20;
	struct jx_env e = {.err = err, .arena = &t->arena};
	if (setjmp(e.jb)) {
		jx_arena_free(&t->arena);
		free(t);
		return err ? err->status : BG_ERR_FORMAT;
	}
	t->root = jx_parse(&e, src, len);
	*out = t;
	return BG_OK;
}

void jinja_free(struct jinja_template *t)
{
	if (!t)
		return;
	jx_arena_free(&t->arena);
	free(t);
}

static enum bg_status render(struct jx_render *r, const struct jinja_template *t, const cJSON *vars,
			     char **out, size_t *out_len);

enum bg_status jinja_render(const struct jinja_template *t, const cJSON *vars, const struct jinja_opts *o,
			    char **out, size_t *out_len, struct bg_err *err)
{
	*out = NULL;
	if (out_len)
		*out_len = 0;
	struct bg_err local;
	if (!err)
		err = &local;
	struct jx_render *r = calloc(1, sizeof *r);
	if (!r)
		return bg_fail(err, BG_ERR_NOMEM, "out of memory rendering the chat template");
	r->arena.limit = o && o->max_memory ? o->max_memory : JINJA_DEFAULT_MEMORY;
	r->env.err = err;
	r->env.arena = &r->arena;
	r->max_steps = o && o->max_steps ? o->max_steps : JINJA_DEFAULT_STEPS;
	r->max_output = o && o->max_output ? o->max_output : JINJA_DEFAULT_OUTPUT;
	r->max_depth = o && o->max_depth ? o->max_depth : JINJA_DEFAULT_DEPTH;
	r->year = o ? o->year : 2024;
	r->month = o ? o->month : 1;
	r->day = o ? o->day : 1;
	enum bg_status st = render(r, t, vars, out, out_len);
	jx_arena_free(&r->arena);
	free(r);
	return st;
}

/* The part of jinja_render under setjmp: r and its arena are on the heap, so nothing
 * here is clobbered by the longjmp of an error. */
static enum bg_status render(struct jx_render *r, const struct jinja_template *t, const cJSON *vars,
			     char **out, size_t *out_len)
{
	if (setjmp(r->env.jb))
		return r->env.err->status;
	r->globals = scope_new(r, NULL);
	if (vars)
		for (const cJSON *c = vars->child; c; c = c->next)
			if (c->string)
				scope_set(r, r->globals, jx_strdup(&r->env, c->string, strlen(c->string)),
					  jx_from_json(&r->env, c));
	struct jx_scope *top = scope_new(r, r->globals);
	struct jbuf b = {0};
	exec(r, top, t->root, &b);
	char *res = malloc(b.len + 1);
	if (!res)
		return bg_fail(r->env.err, BG_ERR_NOMEM, "out of memory rendering the chat template");
	if (b.len)
		memcpy(res, b.p, b.len);
	res[b.len] = 0;
	*out = res;
	if (out_len)
		*out_len = b.len;
	return BG_OK;
}
