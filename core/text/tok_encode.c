/* tok_encode: text -> token ids. Special-token partitioning, the SentencePiece merge
 * loop and the byte-level BPE merge loop, as llama.cpp's llama_vocab::impl::tokenize,
 * llm_tokenizer_spm_session and llm_tokenizer_bpe_session do them (see tokenizer.c for
 * the deliberate differences on invalid UTF-8). Everything mutable lives in a per-call
 * scratch, so a struct tok can be shared between threads. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"
#include "text/tokenizer.h"

/* ---- encoding: per-call scratch (struct tok stays read-only) ---- */

struct sym {
	int32_t prev, next;
	uint32_t start, n; /* byte range in the word being merged */
	int32_t id;	   /* token of that range, -1 if none */
};

struct bigram {
	uint64_t key; /* smaller pops first */
	int32_t l, r;
	uint32_t nl, nr; /* sizes when queued: a change means the entry is stale */
	int32_t result;
};

struct scratch {
	int32_t *ids;
	size_t n, cap;
	char *buf;
	size_t buf_cap;
	struct sym *sym;
	size_t sym_cap;
	struct bigram *heap;
	size_t heap_n, heap_cap;
	struct tok_spans spans;
	bool oom;
};

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	size_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

static void emit(struct scratch *sc, int32_t id)
{
	if (!grow((void **)&sc->ids, &sc->cap, sc->n + 1, sizeof *sc->ids)) {
		sc->oom = true;
		return;
	}
	sc->ids[sc->n++] = id;
}

static void heap_push(struct scratch *sc, struct bigram b)
{
	if (!grow((void **)&sc->heap, &sc->heap_cap, sc->heap_n + 1, sizeof *sc->heap)) {
		sc->oom = true;
		return;
	}
	size_t i = sc->heap_n++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (sc->heap[p].key <= b.key)
			break;
		sc->heap[i] = sc->heap[p];
		i = p;
	}
	sc->heap[i] = b;
}

static struct bigram heap_pop(struct scratch *sc)
{
	struct bigram top = sc->heap[0], last = sc->heap[--sc->heap_n];
	size_t i = 0, n = sc->heap_n;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && sc->heap[c + 1].key < sc->heap[c].key)
			c++;
		if (last.key <= sc->heap[c].key)
			break;
		sc->heap[i] = sc->heap[c];
		i = c;
	}
	if (n)
		sc->heap[i] = last;
	return top;
}

/* Order-preserving map of a float onto uint32. */
static uint32_t float_key(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Bytes in the symbol starting at s[0] (n >= 1 bytes left). For valid UTF-8 this is
 * llama.cpp's unicode_len_utf8; a byte that does not start a complete sequence is a
 * symbol of its own. (llama.cpp would let a stray lead byte swallow the next bytes, even
 * the three bytes of an escaped space, which then decode as a literal U+2581.) */
static size_t sym_len(const char *s, size_t n)
{
	if ((uint8_t)s[0] < 0x80)
		return 1;
	size_t adv;
	bool canon;
	tok_utf8_decode((const uint8_t *)s, n, &adv, &canon);
	return adv;
}

/* ---- SentencePiece (llm_tokenizer_spm) ---- */

static void spm_try_bigram(const struct tok *t, struct scratch *sc, const char *w, int32_t l,
			   int32_t r)
{
	if (l < 0 || r < 0)
		return;
	const struct sym *a = &sc->sym[l], *b = &sc->sym[r];
	int32_t id = lookup(t, w + a->start, a->n + b->n);
	if (id < 0)
		return;
	/* highest score first, then leftmost */
	uint64_t key = ((uint64_t)~float_key(t->score[id]) << 32) | (uint32_t)l;
	heap_push(sc, (struct bigram){key, l, r, a->n, b->n, id});
}

static void spm_byte(const struct tok *t, struct scratch *sc, uint8_t c)
{
	int32_t id = t->hex_byte_tok[c];
	if (id < 0) {
		char s = (char)c;
		id = lookup(t, &s, 1);
	}
	if (id < 0)
		id = t->unk;
	if (id >= 0)
		emit(sc, id);
}

/* Queues the candidate merge of adjacent symbols l and r (a no-op when l or r is -1 or
 * the pair is not in the vocabulary). */
typedef void (*bigram_fn)(const struct tok *t, struct scratch *sc, const char *w, int32_t l,
			  int32_t r);

/* The merge loop both algorithms share: seed the queue with every adjacent pair of
 * symbols [0, ns), then repeatedly apply the best queued merge that is still valid (both
 * symbols unchanged since it was queued) and queue the pairs it creates. What "best" means
 * (score or rank) is in the queued bigrams and heap order. */
static void merge_symbols(const struct tok *t, struct scratch *sc, const char *w, int32_t ns,
			  bigram_fn add)
{
	sc->heap_n = 0;
	for (int32_t i = 1; i < ns; i++)
		add(t, sc, w, i - 1, i);
	while (sc->heap_n && !sc->oom) {
		struct bigram bg = heap_pop(sc);
		struct sym *a = &sc->sym[bg.l], *b = &sc->sym[bg.r];
		if (a->n == 0 || b->n == 0 || a->n != bg.nl || b->n != bg.nr)
			continue;
		a->n += b->n;
		b->n = 0;
		a->id = bg.result;
		a->next = b->next;
		if (b->next >= 0)
			sc->sym[b->next].prev = bg.l;
		add(t, sc, w, a->prev, bg.l);
		add(t, sc, w, bg.l, a->next);
	}
}

/* Merges symbols [0, ns) of word w and emits the result. */
static void spm_merge(const struct tok *t, struct scratch *sc, const char *w, int32_t ns)
{
	merge_symbols(t, sc, w, ns, spm_try_bigram);
	for (int32_t i = ns ? 0 : -1; i >= 0; i = sc->sym[i].next) {
		const struct sym *s = &sc->sym[i];
		if (s->id >= 0) {
			emit(sc, s->id);
		} else {
			for (uint32_t j = 0; j < s->n; j++)
				spm_byte(t, sc, (uint8_t)w[s->start + j]);
		}
	}
}

/* text: already escaped (spaces are U+2581). */
static void spm_tokenize(const struct tok *t, struct scratch *sc, const char *text, size_t len)
{
	size_t off = 0, word = 0;
	int32_t ns = 0;
	while (off < len && !sc->oom) {
		size_t n = sym_len(text + off, len - off);
		bool is_space = n == 3 && memcmp(text + off, ESC_SPACE, 3) == 0;
		if (t->spm_cut_ok && is_space && ns > 0) {
			const struct sym *p = &sc->sym[ns - 1];
			bool prev_space =
			    p->n == 3 && memcmp(text + word + p->start, ESC_SPACE, 3) == 0;
			if (!prev_space) {
				spm_merge(t, sc, text + word, ns);
				ns = 0;
				word = off;
			}
		}
		if (!grow((void **)&sc->sym, &sc->sym_cap, (size_t)ns + 1, sizeof *sc->sym)) {
			sc->oom = true;
			return;
		}
		sc->sym[ns] = (struct sym){ns - 1, -1, (uint32_t)(off - word), (uint32_t)n,
					   lookup(t, text + off, n)};
		if (ns > 0)
			sc->sym[ns - 1].next = ns;
		ns++;
		off += n;
	}
	if (ns > 0 && !sc->oom)
		spm_merge(t, sc, text + word, ns);
}

/* ---- byte-level BPE (llm_tokenizer_bpe) ---- */

static void bpe_add_bigram(const struct tok *t, struct scratch *sc, const char *w, int32_t l,
			   int32_t r)
{
	if (l < 0 || r < 0)
		return;
	const struct sym *a = &sc->sym[l], *b = &sc->sym[r];
	int32_t rank, result;
	if (a->id >= 0 && b->id >= 0) {
		if (!pair_find(&t->merges, a->id, b->id, &rank, &result))
			return;
	} else {
		rank = strpair_find(&t->merges_str, w + a->start, a->n, w + b->start, b->n);
		if (rank < 0)
			return;
		result = lookup(t, w + a->start, a->n + b->n);
	}
	uint64_t key = ((uint64_t)(uint32_t)rank << 32) | (uint32_t)l;
	heap_push(sc, (struct bigram){key, l, r, a->n, b->n, result});
}

/* One pre-tokenized word w[0, n) (already byte-encoded when the vocabulary is). */
static void bpe_word(const struct tok *t, struct scratch *sc, const char *w, size_t n,
		     const uint8_t *raw)
{
	if (t->ignore_merges) {
		int32_t id = lookup(t, w, n);
		if (id >= 0) {
			emit(sc, id);
			return;
		}
	} else if (t->pre == TOK_PRE_GEMMA4) {
		size_t j = 0;
		while (j < n && w[j] == '\n')
			j++;
		int32_t id = j == n ? lookup(t, w, n) : -1;
		if (id >= 0) {
			emit(sc, id);
			return;
		}
	}
	int32_t ns = 0;
	if (raw) { /* one symbol per original byte */
		if (!grow((void **)&sc->sym, &sc->sym_cap, n, sizeof *sc->sym)) {
			sc->oom = true;
			return;
		}
		size_t off = 0;
		for (size_t i = 0; off < n; i++) {
			uint8_t l = t->byte_enc_len[raw[i]];
			sc->sym[ns] =
			    (struct sym){ns - 1, ns + 1, (uint32_t)off, l, t->byte_enc_tok[raw[i]]};
			ns++;
			off += l;
		}
	} else {
		for (size_t off = 0; off < n;) {
			size_t l = sym_len(w + off, n - off);
			if (!grow((void **)&sc->sym, &sc->sym_cap, (size_t)ns + 1,
				  sizeof *sc->sym)) {
				sc->oom = true;
				return;
			}
			sc->sym[ns] = (struct sym){ns - 1, ns + 1, (uint32_t)off, (uint32_t)l,
						   lookup(t, w + off, l)};
			ns++;
			off += l;
		}
	}
	if (ns == 0)
		return;
	sc->sym[ns - 1].next = -1;
	merge_symbols(t, sc, w, ns, bpe_add_bigram);
	for (int32_t i = 0; i >= 0; i = sc->sym[i].next) {
		const struct sym *s = &sc->sym[i];
		if (s->id >= 0) {
			emit(sc, s->id);
			continue;
		}
		/* not a token: fall back to single bytes, skipping those without a token */
		for (uint32_t j = 0; j < s->n; j++) {
			uint8_t c = (uint8_t)w[s->start + j];
			int32_t id =
			    t->byte_encode ? lookup(t, (const char *)&c, 1) : t->hex_byte_tok[c];
			if (id >= 0)
				emit(sc, id);
		}
	}
}

static enum bg_status bpe_tokenize(const struct tok *t, struct scratch *sc, const char *text,
				   size_t len, struct bg_err *err)
{
	enum bg_status st = tok_split_run(&t->split, text, len, &sc->spans, err);
	if (st != BG_OK)
		return st;
	for (size_t k = 0; k < sc->spans.n && !sc->oom; k++) {
		size_t a = sc->spans.v[2 * k], b = sc->spans.v[2 * k + 1];
		const uint8_t *raw = (const uint8_t *)text + a;
		if (!t->byte_encode) {
			bpe_word(t, sc, text + a, b - a, NULL);
			continue;
		}
		if (!grow((void **)&sc->buf, &sc->buf_cap, (b - a) * 2 + 1, 1)) {
			sc->oom = true;
			break;
		}
		size_t o = 0;
		for (size_t i = 0; i < b - a; i++) {
			memcpy(sc->buf + o, t->byte_enc[raw[i]], 2);
			o += t->byte_enc_len[raw[i]];
		}
		bpe_word(t, sc, sc->buf, o, raw);
	}
	return BG_OK;
}

/* ---- special-token partition (tokenizer_st_partition) ---- */

struct frag {
	int32_t id; /* >= 0: a special token; -1: raw text [a, b) */
	size_t a, b;
};

static bool frag_push(struct frag **v, size_t *n, size_t *cap, struct frag f)
{
	if (!grow((void **)v, cap, *n + 1, sizeof **v))
		return false;
	(*v)[(*n)++] = f;
	return true;
}

/* Splits text into raw pieces and special tokens exactly as llama.cpp does: each special
 * token in turn (longest first) cuts every remaining raw piece at all its occurrences. */
static enum bg_status partition(const struct tok *t, const char *text, size_t len,
				bool parse_special, struct frag **out, size_t *n_out,
				struct bg_err *err)
{
	struct frag *v = NULL, *w = NULL;
	size_t n = 0, cap = 0, wn = 0, wcap = 0;
	uint8_t *present = NULL;
	if (!frag_push(&v, &n, &cap, (struct frag){-1, 0, len}))
		goto nomem;
	size_t eligible = parse_special ? t->n_special : t->n_special_plain;
	if (eligible == 0 || len == 0)
		goto done;
	present = calloc(t->n_special, 1);
	if (!present)
		goto nomem;
	/* which specials occur at all: one pass with the first-bytes buckets */
	const uint8_t *u = (const uint8_t *)text;
	size_t n_present = 0;
	for (size_t p = 0; p < len; p++) {
		for (uint32_t j = t->sp1_start[u[p]]; j < t->sp1_start[u[p] + 1]; j++) {
			uint32_t k = t->sp1_list[j];
			int32_t id = t->special[k];
			if (!present[k] && (parse_special || !(t->attr[id] & (TOK_ATTR_CONTROL |
									      TOK_ATTR_UNKNOWN)))) {
				present[k] = 1;
				n_present++;
			}
		}
		if (p + 1 >= len)
			break;
		size_t key = (size_t)u[p] << 8 | u[p + 1];
		for (uint32_t j = t->sp2_start[key]; j < t->sp2_start[key + 1]; j++) {
			uint32_t k = t->sp2_list[j];
			int32_t id = t->special[k];
			if (present[k] || t->len[id] > len - p ||
			    (!parse_special &&
			     (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))))
				continue;
			if (memcmp(text + p, t->arena + t->off[id], t->len[id]) == 0) {
				present[k] = 1;
				n_present++;
			}
		}
	}
	for (size_t k = 0; k < t->n_special && n_present; k++) {
		if (!present[k])
			continue;
		int32_t id = t->special[k];
		const char *s = t->arena + t->off[id];
		size_t sl = t->len[id];
		uint16_t attr = t->attr[id];
		wn = 0;
		for (size_t i = 0; i < n; i++) {
			if (v[i].id >= 0) {
				if (!frag_push(&w, &wn, &wcap, v[i]))
					goto nomem;
				continue;
			}
			size_t a = v[i].a, b = v[i].b;
			while (a < b) {
				const char *m = memmem(text + a, b - a, s, sl);
				if (!m) {
					if (!frag_push(&w, &wn, &wcap, (struct frag){-1, a, b}))
						goto nomem;
					break;
				}
				size_t ms = (size_t)(m - text), le = ms;
				if (attr & TOK_ATTR_LSTRIP)
					while (le > a && isspace((unsigned char)text[le - 1]))
						le--;
				if (le > a && !frag_push(&w, &wn, &wcap, (struct frag){-1, a, le}))
					goto nomem;
				if (!frag_push(&w, &wn, &wcap, (struct frag){id, 0, 0}))
					goto nomem;
				a = ms + sl;
				if (a < b && (attr & TOK_ATTR_RSTRIP))
					while (a < b && isspace((unsigned char)text[a]))
						a++;
			}
		}
		struct frag *tv = v;
		size_t tc = cap;
		v = w;
		n = wn;
		cap = wcap;
		w = tv;
		wcap = tc;
		n_present--;
	}
done:
	free(present);
	free(w);
	*out = v;
	*n_out = n;
	return BG_OK;
nomem:
	free(present);
	free(v);
	free(w);
	return bg_fail(err, BG_ERR_NOMEM, "out of memory tokenizing");
}

enum bg_status tok_encode(const struct tok *t, const char *text, size_t len, bool add_bos,
			  bool parse_special, int32_t **ids, size_t *n, struct bg_err *err)
{
	*ids = NULL;
	*n = 0;
	struct scratch sc = {0};
	struct frag *fr = NULL;
	size_t nf = 0;
	enum bg_status st = BG_OK;
	if (len > INT32_MAX) /* symbol indices and offsets are 32-bit */
		return bg_fail(err, BG_ERR_CAPACITY, "text of %zu bytes is too long to tokenize",
			       len);
	if (add_bos && t->bos >= 0)
		emit(&sc, t->bos);
	if (len > 0) {
		st = partition(t, text, len, parse_special, &fr, &nf, err);
		if (st != BG_OK)
			goto out;
	}
	bool prev_special = true; /* SPM: a leading space before the first text piece */
	for (size_t i = 0; i < nf && !sc.oom; i++) {
		if (fr[i].id >= 0) {
			emit(&sc, fr[i].id);
			prev_special = true;
			continue;
		}
		const char *s = text + fr[i].a;
		size_t l = fr[i].b - fr[i].a;
		if (t->type == TOK_SPM || t->escape_ws) {
			bool prefix = t->type == TOK_SPM && t->add_space_prefix && prev_special;
			size_t spaces = 0;
			for (size_t j = 0; j < l; j++)
				spaces += s[j] == ' ';
			/* escaped text: each space (and the prefix) becomes 3 bytes */
			size_t need = l + 2 * spaces + (prefix ? 3 : 0);
			char *e = malloc(need ? need : 1);
			if (!e) {
				sc.oom = true;
				break;
			}
			size_t o = 0;
			if (prefix) {
				memcpy(e, ESC_SPACE, 3);
				o = 3;
			}
			for (size_t j = 0; j < l; j++) {
				if (s[j] == ' ') {
					memcpy(e + o, ESC_SPACE, 3);
					o += 3;
				} else {
					e[o++] = s[j];
				}
			}
			if (t->type == TOK_SPM)
				spm_tokenize(t, &sc, e, o);
			else
				st = bpe_tokenize(t, &sc, e, o, err);
			free(e);
			if (st != BG_OK)
				goto out;
		} else {
			st = bpe_tokenize(t, &sc, s, l, err);
			if (st != BG_OK)
				goto out;
		}
		prev_special = false;
	}
	if (sc.oom) {
		st = bg_fail(err, BG_ERR_NOMEM, "out of memory tokenizing %zu bytes", len);
		goto out;
	}
	if (sc.n == 0) { /* keep the "malloc'd" promise for empty results */
		free(sc.ids);
		sc.ids = malloc(sizeof *sc.ids);
		if (!sc.ids) {
			st = bg_fail(err, BG_ERR_NOMEM, "out of memory");
			goto out;
		}
	}
	*ids = sc.ids;
	*n = sc.n;
	sc.ids = NULL;
out:
	free(sc.ids);
	free(sc.buf);
	free(sc.sym);
	free(sc.heap);
	tok_spans_free(&sc.spans);
	free(fr);
	return st;
}
