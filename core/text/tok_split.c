/* tok_split: UTF-8 decoding as llama.cpp does it, and the regex pre-tokenizers that cut
 * text into words before byte-pair merging (llama.cpp's unicode_regex_split). The regexes
 * run on PCRE2 directly (UTF + UCP, JIT when available); the lists per pre-tokenizer are
 * the ones llama.cpp's llm_tokenizer_bpe uses. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

/* ---- UTF-8 ---- */

uint32_t tok_utf8_decode(const uint8_t *s, size_t n, size_t *adv, bool *canonical)
{
	uint8_t c = s[0];
	*canonical = true;
	if (c < 0x80) {
		*adv = 1;
		return c;
	}
	size_t need;
	uint32_t cp;
	if (!(c & 0x40)) {
		goto invalid;
	} else if (!(c & 0x20)) {
		need = 2;
		cp = c & 0x1f;
	} else if (!(c & 0x10)) {
		need = 3;
		cp = c & 0x0f;
	} else if (!(c & 0x08)) {
		need = 4;
		cp = c & 0x07;
	} else {
		goto invalid;
	}
	if (need > n)
		goto invalid;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto invalid;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	*adv = need;
	if ((need == 2 && cp < 0x80) || (need == 3 && cp < 0x800) || (need == 4 && cp < 0x10000) ||
	    cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		*canonical = false;
	return cp;
invalid:
	*adv = 1;
	*canonical = false;
	return 0xFFFD;
}

size_t tok_utf8_encode(uint32_t cp, char *out)
{
	if (cp <= 0x7f) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp <= 0x7ff) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp <= 0xffff) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | ((cp >> 18) & 0x07));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* ---- the regex lists (llama.cpp's llm_tokenizer_bpe constructor) ----
 * Written in llama.cpp's syntax; tok_split_init rewrites \s and \S into explicit Unicode
 * White_Space classes, because PCRE2's \s (with UCP) also matches U+180E, which neither
 * llama.cpp nor the Hugging Face tokenizers treat as whitespace. The case-insensitive
 * contractions are llama.cpp's adapted '[sS] form: (?i:) would also fold U+017F and
 * U+212A under UCP. */

#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define GPT2_RE	     "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"

static const char *const re_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]", NULL,
};
static const char *const re_llama3[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
		 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const re_deepseek_llm[] = {
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-"
    "ᲺᲽ-"
    "Ჿᴀ-"
    "ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-"
    "ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-"
    "𐲲𐳀-"
    "𐳲𑢠-"
    "𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
    NULL,
};
static const char *const re_deepseek_coder[] = {
    "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}", NULL,
};
static const char *const re_deepseek3[] = {
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const re_falcon[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    GPT2_RE,
    "[0-9][0-9][0-9]",
    NULL,
};
static const char *const re_starcoder[] = {"\\p{N}", GPT2_RE, NULL};
static const char *const re_gpt2[] = {GPT2_RE, NULL};
static const char *const re_qwen2[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
		 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const re_qwen35[] = {
    CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const re_poro[] = {" ?[^(\\s|.,!?…。，、।۔،)]+", NULL};
static const char *const re_viking[] = {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}", NULL};
static const char *const re_tekken[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const re_gpt4o[] = {
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+" CONTRACTIONS "?|"
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*" CONTRACTIONS "?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const re_seed_coder[] = {
    CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|"
		 "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
static const char *const re_bailingmoe[] = {
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    NULL,
};
/* Kimi-K2: Han runs apart from other letters. llama.cpp runs its own code for this
 * (unicode_regex_split_custom_kimi_k2), not the tokenizer's regex: Han is its list of CJK
 * ideograph blocks (not Unicode's Han script: no radicals, no U+3005-3007), and a word is
 * any run of non-Han letters (\p{L}, no marks; no split between upper and lower case),
 * after one optional leading character, with the optional contraction. This is that code
 * as a regex. */
#define HAN                                                                                        \
	"[\\x{3400}-\\x{4DBF}\\x{4E00}-\\x{9FFF}\\x{F900}-\\x{FAFF}\\x{20000}-\\x{2A6DF}"          \
	"\\x{2A700}-\\x{2EBEF}\\x{2F800}-\\x{2FA1F}]"
static const char *const re_kimi_k2[] = {
    HAN "+|[^\\r\\n\\p{L}\\p{N}]?(?:(?!" HAN ")\\p{L})+" CONTRACTIONS "?|\\p{N}{1,3}|"
	" ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL,
};
/* Gemma 4 merges over whole lines (spaces are already U+2581): only newlines split. */
static const char *const re_gemma4[] = {"[^\\n]+|[\\n]+", NULL};

const char *const *tok_pre_regexes(enum tok_pre pre)
{
	switch (pre) {
	case TOK_PRE_DEFAULT: return re_default;
	case TOK_PRE_LLAMA3: return re_llama3;
	case TOK_PRE_DEEPSEEK_LLM: return re_deepseek_llm;
	case TOK_PRE_DEEPSEEK_CODER: return re_deepseek_coder;
	case TOK_PRE_DEEPSEEK3: return re_deepseek3;
	case TOK_PRE_FALCON: return re_falcon;
	case TOK_PRE_STARCODER: return re_starcoder;
	case TOK_PRE_GPT2: return re_gpt2;
	case TOK_PRE_QWEN2: return re_qwen2;
	case TOK_PRE_QWEN35: return re_qwen35;
	case TOK_PRE_PORO: return re_poro;
	case TOK_PRE_VIKING: return re_viking;
	case TOK_PRE_TEKKEN: return re_tekken;
	case TOK_PRE_GPT4O: return re_gpt4o;
	case TOK_PRE_SEED_CODER: return re_seed_coder;
	case TOK_PRE_BAILINGMOE: return re_bailingmoe;
	case TOK_PRE_GEMMA4: return re_gemma4;
	case TOK_PRE_KIMI_K2: return re_kimi_k2;
	}
	return re_default;
}

/* ---- compiling ---- */

/* Unicode White_Space, the set llama.cpp's unicode_set_whitespace holds. */
#define WS_CLASS                                                                                   \
	"\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{"  \
	"205F}\\x{3000}"

/* Rewrites \s / \S into explicit classes (inside a class, \s becomes the bare ranges).
 * Returns a malloc'd string or NULL. */
static char *rewrite_ws(const char *re)
{
	size_t n = strlen(re), cap = n * 8 + 256, o = 0;
	char *out = malloc(cap);
	if (!out)
		return NULL;
	bool in_class = false;
	for (size_t i = 0; i < n; i++) {
		const char *add = NULL;
		char tmp[3] = {0};
		if (re[i] == '\\' && i + 1 < n) {
			char c = re[i + 1];
			if (c == 's')
				add = in_class ? WS_CLASS : "[" WS_CLASS "]";
			else if (c == 'S' && !in_class)
				add = "[^" WS_CLASS "]";
			else {
				tmp[0] = '\\';
				tmp[1] = c;
				add = tmp;
			}
			i++;
		} else {
			if (re[i] == '[' && !in_class)
				in_class = true;
			else if (re[i] == ']' && in_class)
				in_class = false;
			tmp[0] = re[i];
			add = tmp;
		}
		size_t k = strlen(add);
		if (o + k + 1 > cap) {
			cap = (o + k + 1) * 2;
			char *p = realloc(out, cap);
			if (!p) {
				free(out);
				return NULL;
			}
			out = p;
		}
		memcpy(out + o, add, k);
		o += k;
	}
	out[o] = 0;
	return out;
}

enum bg_status tok_split_init(struct tok_splitter *s, const char *const *regexes,
			      struct bg_err *err)
{
	memset(s, 0, sizeof *s);
	for (int i = 0; regexes[i]; i++) {
		if (i >= TOK_MAX_REGEX) {
			tok_split_free(s);
			return bg_fail(err, BG_ERR_INVALID, "too many pre-tokenizer regexes");
		}
		char *re = rewrite_ws(regexes[i]);
		if (!re) {
			tok_split_free(s);
			return bg_fail(err, BG_ERR_NOMEM, "out of memory compiling a regex");
		}
		int ecode;
		PCRE2_SIZE eoff;
		/* DOLLAR_ENDONLY: "$" is the end of the piece, as in std::regex (llama.cpp). */
		pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
						 PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY,
						 &ecode, &eoff, NULL);
		free(re);
		if (!code) {
			PCRE2_UCHAR msg[256];
			pcre2_get_error_message(ecode, msg, sizeof msg);
			tok_split_free(s);
			return bg_fail(err, BG_ERR_INVALID,
				       "pre-tokenizer regex %d: %s at offset %zu", i,
				       (const char *)msg, (size_t)eoff);
		}
		(void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* interpreter if no JIT */
		s->code[i] = code;
		s->n_regex = i + 1;
	}
	return BG_OK;
}

void tok_split_free(struct tok_splitter *s)
{
	for (int i = 0; i < s->n_regex; i++)
		pcre2_code_free((pcre2_code *)s->code[i]);
	s->n_regex = 0;
}

/* ---- splitting ---- */

void tok_spans_free(struct tok_spans *sp)
{
	free(sp->v);
	sp->v = NULL;
	sp->n = sp->cap = 0;
}

static bool spans_push(struct tok_spans *sp, size_t a, size_t b)
{
	if (sp->n == sp->cap) {
		size_t cap = sp->cap ? sp->cap * 2 : 64;
		size_t *v = realloc(sp->v, cap * 2 * sizeof *v);
		if (!v)
			return false;
		sp->v = v;
		sp->cap = cap;
	}
	sp->v[2 * sp->n] = a;
	sp->v[2 * sp->n + 1] = b;
	sp->n++;
	return true;
}

enum bg_status tok_split_run(const struct tok_splitter *s, const char *text, size_t len,
			     struct tok_spans *out, struct bg_err *err)
{
	enum bg_status st = BG_OK;
	const uint8_t *u = (const uint8_t *)text;
	out->n = 0;

	/* The regexes need valid UTF-8. Where the input is not (or uses forms PCRE2 refuses),
	 * run them on a copy in which each such character is its canonical encoding, or
	 * U+FFFD as in llama.cpp, and map offsets back through orig[]. */
	bool all_ok = true;
	for (size_t i = 0; i < len;) {
		if (u[i] < 0x80) {
			i++;
			continue;
		}
		size_t adv;
		bool canon;
		tok_utf8_decode(u + i, len - i, &adv, &canon);
		if (!canon) {
			all_ok = false;
			break;
		}
		i += adv;
	}
	const char *buf = text;
	size_t blen = len;
	char *copy = NULL;
	size_t *orig = NULL; /* [blen + 1]: original offset of each copy offset (char starts) */
	if (!all_ok) {
		copy = malloc(len * 3 + 4);
		orig = malloc((len * 3 + 4) * sizeof *orig);
		if (!copy || !orig) {
			st = bg_fail(err, BG_ERR_NOMEM, "out of memory splitting text");
			goto done;
		}
		size_t o = 0;
		for (size_t i = 0; i < len;) {
			size_t adv;
			bool canon;
			uint32_t cp = tok_utf8_decode(u + i, len - i, &adv, &canon);
			if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
				cp = 0xFFFD;
			size_t k = tok_utf8_encode(cp, copy + o);
			for (size_t j = 0; j < k; j++)
				orig[o + j] = i;
			o += k;
			i += adv;
		}
		orig[o] = len;
		buf = copy;
		blen = o;
	}

	struct tok_spans cur = {0}, next = {0};
	pcre2_match_data *md = NULL;
	if (!spans_push(&cur, 0, blen)) {
		st = bg_fail(err, BG_ERR_NOMEM, "out of memory splitting text");
		goto done2;
	}
	md = pcre2_match_data_create(16, NULL);
	if (!md) {
		st = bg_fail(err, BG_ERR_NOMEM, "out of memory splitting text");
		goto done2;
	}
	for (int r = 0; r < s->n_regex; r++) {
		const pcre2_code *code = s->code[r];
		next.n = 0;
		for (size_t k = 0; k < cur.n; k++) {
			size_t a = cur.v[2 * k], b = cur.v[2 * k + 1];
			PCRE2_SPTR subj = (PCRE2_SPTR)buf + a;
			size_t slen = b - a, pos = 0, prev = 0;
			while (pos < slen) {
				int rc = pcre2_match(code, subj, slen, pos, PCRE2_NO_UTF_CHECK, md,
						     NULL);
				if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
					rc = pcre2_match(code, subj, slen, pos,
							 PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
							 NULL);
				if (rc == PCRE2_ERROR_NOMATCH)
					break;
				if (rc < 0) {
					PCRE2_UCHAR msg[256];
					pcre2_get_error_message(rc, msg, sizeof msg);
					st = bg_fail(err, BG_ERR_INVALID,
						     "pre-tokenizer regex failed: %s",
						     (const char *)msg);
					goto done2;
				}
				PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
				size_t ms = ov[0], me = ov[1];
				if (me <= ms) { /* empty match: step one character, emit nothing */
					pos = ms + 1;
					while (pos < slen && (subj[pos] & 0xc0) == 0x80)
						pos++;
					continue;
				}
				if (ms > prev && !spans_push(&next, a + prev, a + ms))
					goto nomem;
				if (!spans_push(&next, a + ms, a + me))
					goto nomem;
				prev = pos = me;
			}
			if (prev < slen && !spans_push(&next, a + prev, b))
				goto nomem;
		}
		struct tok_spans t = cur;
		cur = next;
		next = t;
	}
	/* hand the result over, mapped back to original offsets */
	for (size_t k = 0; k < cur.n; k++) {
		size_t a = cur.v[2 * k], b = cur.v[2 * k + 1];
		if (orig) {
			a = orig[a];
			b = orig[b];
		}
		if (b > a && !spans_push(out, a, b))
			goto nomem;
	}
	goto done2;
nomem:
	st = bg_fail(err, BG_ERR_NOMEM, "out of memory splitting text");
done2:
	pcre2_match_data_free(md);
	tok_spans_free(&cur);
	tok_spans_free(&next);
done:
	free(copy);
	free(orig);
	return st;
}
