/* jinja_int: the internals shared by the jinja_*.c files (not a public header).
 *
 * Memory: everything (syntax tree, values, strings) is allocated from an arena; the
 * template owns one arena for its tree, each render one for its values, freed at once.
 * Errors: jx_fail() longjmps to the jmp_buf of the current compile or render with a
 * message naming the template line; nothing needs unwinding because of the arenas.
 * Values are small structs passed by value; strings, lists and dicts are immutable once
 * built (the sandbox forbids mutation), except namespaces, whose attributes `set` assigns.
 */
#ifndef BG_JINJA_INT_H
#define BG_JINJA_INT_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "strbuf.h"

/* ---- arena ---- */
struct jx_chunk;
struct jx_arena {
	struct jx_chunk *head;
	size_t used, limit; /* bytes taken from malloc; limit 0: none */
};

/* ---- error context ---- */
struct jx_env {
	jmp_buf jb;
	struct bg_err *err;
	struct jx_arena *arena;
	char *pending; /* a malloc'd buffer jx_fail frees (see jx_strbuf_val) */
};

_Noreturn void jx_fail(struct jx_env *e, int line, enum bg_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void *jx_alloc(struct jx_env *e, size_t n); /* zeroed; fails (longjmp) past the limit */
void jx_arena_free(struct jx_arena *a);
char *jx_strdup(struct jx_env *e, const char *s, size_t n);

/* ---- values ---- */
enum jx_type {
	JX_UNDEF,
	JX_NONE,
	JX_BOOL,
	JX_INT,
	JX_FLOAT,
	JX_STR,
	JX_LIST, /* list or tuple (tuple flag) */
	JX_DICT, /* dict, namespace (ns flag) */
	JX_MACRO,
	JX_FUNC,   /* a global function (range, namespace, ...) */
	JX_METHOD, /* a method bound to a value: "abc".upper */
};

struct jx_str {
	size_t n;
	char p[]; /* [n + 1], NUL-terminated */
};
struct jx_list;
struct jx_dict;
struct jx_macro;
struct jx_method;

struct jx_val {
	enum jx_type t;
	bool safe; /* JX_STR: a markupsafe.Markup (from |safe or |e): `+` escapes the other side */
	union {
		bool b;
		int64_t i;
		double f;
		struct jx_str *s;
		struct jx_list *l;
		struct jx_dict *d;
		struct jx_macro *m;
		int fn; /* JX_FUNC: index of a global */
		struct jx_method *bm;
	};
};

struct jx_list {
	size_t n, cap;
	struct jx_val *v; /* [n] */
	bool tuple;
};

struct jx_dict {
	size_t n, cap;
	struct jx_val *k, *v; /* [n] each, in insertion order */
	bool ns;	      /* a namespace() object */
};

struct jx_method {
	struct jx_val self;
	const char *name;
};

/* ---- syntax tree ---- */
enum jx_kind {
	/* statements */
	N_BODY,	    /* v[nv] statements */
	N_DATA,	    /* s */
	N_OUTPUT,   /* a */
	N_IF,	    /* a cond, b body, c else (or NULL) */
	N_FOR,	    /* v[nv] target names (N_NAME), a iter, b body, c else, d filter cond */
	N_SET,	    /* a target (N_NAME, N_TUPLE of names, N_GETATTR on a name), b value */
	N_SETBLOCK, /* a target name, b body, c filter chain applied (N_FILTER on NULL) */
	N_MACRO, /* s name, v[nv] params (N_NAME), w[nv] defaults (or NULL), b body; op: MACRO_* */
	N_CALLBLOCK,   /* a call expr, v/w caller params and defaults, b body; op: MACRO_* */
	N_FILTERBLOCK, /* a filter chain (innermost applied on NULL), b body */
	N_BREAK,
	N_CONTINUE,
	/* expressions */
	N_CONST,   /* val */
	N_NAME,	   /* s */
	N_LIST,	   /* v[nv] */
	N_TUPLE,   /* v[nv] */
	N_DICT,	   /* v[nv] keys, w[nv] values */
	N_GETATTR, /* a . s */
	N_GETITEM, /* a [ b ] */
	N_SLICE,   /* a [ b : c : d ] (each may be NULL) */
	N_CALL,	   /* a ( v[nv] args ; kn[nk] names with w[nk] values ) */
	N_FILTER,  /* s name applied to a (NULL: the filter block's body); args as N_CALL */
	N_TEST,	   /* s name on a; args as N_CALL; op 1: negated */
	N_UNARY,   /* op '-' '+' '!' on a */
	N_BINOP,   /* op on a, b */
	N_AND,
	N_OR,
	N_COMPARE, /* a, then v[nv] operands with ops[nv] */
	N_COND,	   /* a if b else c (c may be NULL) */
};

/* What a macro's (or call block's) body reads, as jinja2's compiler finds it: a macro takes
 * extra positional arguments only when its body reads varargs, unknown keyword arguments
 * only when it reads kwargs, a caller only when it reads caller. */
enum { MACRO_VARARGS = 1, MACRO_KWARGS = 2, MACRO_CALLER = 4 };

enum jx_op {
	OP_ADD = 1,
	OP_SUB,
	OP_MUL,
	OP_DIV,
	OP_FLOORDIV,
	OP_MOD,
	OP_POW,
	OP_CONCAT,
	OP_EQ,
	OP_NE,
	OP_LT,
	OP_LE,
	OP_GT,
	OP_GE,
	OP_IN,
	OP_NOTIN,
};

struct jx_node {
	enum jx_kind kind;
	int line;
	int op;
	const char *s; /* NUL-terminated; sn bytes */
	size_t sn;
	struct jx_node *a, *b, *c, *d;
	struct jx_node **v, **w; /* [nv] (w also [nk] for calls) */
	int nv, nk;
	const char **kn; /* [nk] keyword names */
	int *ops;	 /* [nv] N_COMPARE */
	struct jx_val val;
};

/* ---- tokens (jinja_lex.c) for the parser (jinja_parse.c) ---- */
enum jx_tt { T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP, T_EOF };

struct jx_tok {
	enum jx_tt t;
	int line;
	const char *s; /* T_DATA, T_NAME, T_STRING (decoded), T_OP: NUL-terminated */
	size_t n;
	int64_t i;
	double f;
};

struct jx_parser {
	struct jx_env *e;
	struct jx_tok *tk;
	size_t n, cap, pos;
	int nest;
	int loops; /* for loops around the statement being parsed, within its macro */
};

/* Tokenizes src[len] into p->tk (ends with T_EOF); p->e set. */
void jx_lex(struct jx_parser *p, const char *src, size_t len);

/* Parses src into a tree allocated in e's arena. */
struct jx_node *jx_parse(struct jx_env *e, const char *src, size_t len);

/* ---- render state ---- */
struct jx_scope {
	struct jx_scope *parent;
	const char **names;
	struct jx_val *vals;
	int n, cap;
};

struct jx_macro {
	const struct jx_node *def; /* N_MACRO (or N_CALLBLOCK for caller) */
	struct jx_scope *scope;	   /* where it was defined */
	struct jx_macro *caller;   /* the caller a call block passes, or NULL */
};

struct jx_render {
	struct jx_env env;
	struct jx_arena arena;
	struct jx_scope *globals;
	uint64_t steps, max_steps;
	size_t max_output;
	int depth, max_depth;
	int frames; /* eval/exec recursion, bounded so that the C stack is */
	int year, month, day;
	int line; /* the line being evaluated, for errors */
};

_Noreturn void jx_rfail(struct jx_render *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* values (jinja_value.c) */
struct jx_val jx_undef(void);
struct jx_val jx_none(void);
struct jx_val jx_bool(bool b);
struct jx_val jx_int(int64_t i);
struct jx_val jx_float(double f);
struct jx_val jx_str(struct jx_env *e, const char *s, size_t n);
struct jx_val jx_cstr(struct jx_env *e, const char *s);
struct jx_val jx_strbuf_val(struct jx_env *e, struct strbuf *b); /* copies; frees b */
struct jx_list *jx_list_new(struct jx_env *e, size_t cap);
void jx_list_push(struct jx_env *e, struct jx_list *l, struct jx_val v);
struct jx_val jx_list_val(struct jx_list *l);
struct jx_dict *jx_dict_new(struct jx_env *e);
void jx_dict_set(struct jx_env *e, struct jx_dict *d, struct jx_val k, struct jx_val v);
bool jx_dict_get(const struct jx_dict *d, struct jx_val k, struct jx_val *out);
bool jx_dict_gets(const struct jx_dict *d, const char *k, struct jx_val *out);
struct jx_val jx_dict_val(struct jx_dict *d);
struct jx_val jx_from_json(struct jx_env *e, const void *cjson);

bool jx_truthy(struct jx_val v);
bool jx_equal(struct jx_val a, struct jx_val b);
/* Python ordering: -1, 0, 1; *ok false when the types cannot be ordered. */
int jx_compare(struct jx_val a, struct jx_val b, bool *ok);
const char *jx_type_name(struct jx_val v);
void jx_to_str(struct strbuf *b, struct jx_val v);  /* Python str() */
void jx_repr(struct strbuf *b, struct jx_val v);    /* Python repr() */
void jx_format_float(struct strbuf *b, double f);   /* Python repr(float) */
/* json.dumps's options: indent is what each level adds after a newline (NULL: None, all on
 * one line); ascii is ensure_ascii (non-ASCII characters as \uXXXX escapes, UTF-16
 * surrogate pairs above U+FFFF). */
struct jx_json_fmt {
	const char *indent;
	const char *item_sep, *key_sep;
	bool sort_keys, ascii;
};
/* json.dumps; returns false (nothing sensible written) on an unserializable value. */
bool jx_tojson(struct strbuf *b, struct jx_val v, const struct jx_json_fmt *f, int level);
size_t jx_utf8_len(const char *s, size_t n);		/* code points */
/* The code point of the UTF-8 sequence at s[*i] (*i < n), *i moved past it; an invalid or
 * cut sequence gives U+FFFD for its first byte. */
uint32_t jx_utf8_next(const char *s, size_t n, size_t *i);
void jx_put_utf8(struct strbuf *b, uint32_t c);		   /* c <= 0x10FFFF */
size_t jx_utf8_offset(const char *s, size_t n, size_t cp); /* byte offset of code point cp */

/* builtins (jinja_builtins.c) */
struct jx_args {
	struct jx_val *pos; /* [npos] */
	int npos;
	const char **kn; /* [nkw] */
	struct jx_val *kv;
	int nkw;
};
/* The argument named name or at position i (after the filter's subject), or def. */
struct jx_val jx_arg(const struct jx_args *a, int i, const char *name, struct jx_val def);
struct jx_val jx_apply_filter(struct jx_render *r, const char *name, struct jx_val v,
			      const struct jx_args *a);
bool jx_apply_test(struct jx_render *r, const char *name, struct jx_val v,
		   const struct jx_args *a);
bool jx_test_exists(const char *name);
/* fmt % args, Python's printf-style formatting (jinja_builtins.c says which conversions). */
struct jx_val jx_percent_format(struct jx_render *r, struct jx_val fmt, const struct jx_args *a,
				bool mapping_arg);
/* Whether name is one of jinja2's built-in filters / tests (which it checks at compile time). */
bool jx_jinja2_filter(const char *name);
bool jx_jinja2_test(const char *name);
struct jx_val jx_call_method(struct jx_render *r, struct jx_method *m, const struct jx_args *a);
/* Attribute access obj.name as jinja2's sandbox does (methods first for builtin types). */
struct jx_val jx_getattr(struct jx_render *r, struct jx_val obj, const char *name);
struct jx_val jx_getitem(struct jx_render *r, struct jx_val obj, struct jx_val key);
int jx_global_index(const char *name); /* -1 when not a global function */
struct jx_val jx_call_global(struct jx_render *r, int fn, const struct jx_args *a);

/* eval (jinja_eval.c), for the builtins that call back (map, select, caller) */
struct jx_val jx_call_macro(struct jx_render *r, struct jx_macro *m, const struct jx_args *a);

#endif
