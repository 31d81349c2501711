#include "cli/idset.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- SipHash-2-4 with 128-bit output (Aumasson & Bernstein; tested against the
 * reference vectors in tests/test_cli.c) ---- */

static uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                                                   \
	do {                                                                                       \
		v0 += v1;                                                                          \
		v1 = rotl(v1, 13);                                                                 \
		v1 ^= v0;                                                                          \
		v0 = rotl(v0, 32);                                                                 \
		v2 += v3;                                                                          \
		v3 = rotl(v3, 16);                                                                 \
		v3 ^= v2;                                                                          \
		v0 += v3;                                                                          \
		v3 = rotl(v3, 21);                                                                 \
		v3 ^= v0;                                                                          \
		v2 += v1;                                                                          \
		v1 = rotl(v1, 17);                                                                 \
		v1 ^= v2;                                                                          \
		v2 = rotl(v2, 32);                                                                 \
	} while (0)

static uint64_t load_le64(const unsigned char *p)
{
	uint64_t x = 0;
	for (int i = 7; i >= 0; i--)
		x = x << 8 | p[i];
	return x;
}

/* out[0] is the first 8 bytes of the tag (little-endian), out[1] the last 8 */
static void siphash128(const uint64_t key[2], const void *data, size_t len, uint64_t out[2])
{
	const unsigned char *p = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ key[0], v1 = 0x646f72616e646f6dULL ^ key[1];
	uint64_t v2 = 0x6c7967656e657261ULL ^ key[0], v3 = 0x7465646279746573ULL ^ key[1];
	v1 ^= 0xee;
	size_t n8 = len & ~(size_t)7;
	for (size_t i = 0; i < n8; i += 8) {
		uint64_t m = load_le64(p + i);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	uint64_t b = (uint64_t)len << 56;
	for (size_t i = n8; i < len; i++)
		b |= (uint64_t)p[i] << (8 * (i - n8));
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xee;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	out[0] = v0 ^ v1 ^ v2 ^ v3;
	v1 ^= 0xdd;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	out[1] = v0 ^ v1 ^ v2 ^ v3;
}

/* ---- the hash table: key[i] (64 bits, 0 = empty) and tag[i] (30-bit fingerprint << 2 |
 * count state), in segments of SEG slots ---- */

#define SEG_BITS   12
#define SEG	   ((size_t)1 << SEG_BITS) /* slots a segment: 4096 keys + 4096 tags = 48 KiB */
#define SLOT_BYTES (sizeof(uint64_t) + sizeof(uint32_t))

/* the counts a tag can hold; anything else is in the side table (ST_MORE) */
enum { ST_SEEN1 = 0, ST_DONE1 = 1, ST_BOTH1 = 2, ST_MORE = 3 };

struct table {
	uint64_t **seg; /* [nseg], each [SEG] keys then [SEG] tags (uint32_t) */
	size_t nseg;	/* capacity nseg * SEG slots; 0 before the first id */
	size_t n;	/* ids held */
};

/* one id whose counts the 2-bit state cannot hold */
struct more {
	uint64_t key;
	uint32_t fp, seen, done;
};

/* numbers first, first+step, ..., first+step*(count-1) */
struct run {
	int64_t first;
	uint32_t step, count;
};

struct runs {
	struct run *v; /* [n], in increasing order, disjoint */
	size_t n, cap;
};

/* The ids "<prefix><number>" of one prefix and one way of writing the number: width 0 is
 * the plain decimal form (no leading zero), width w > 0 the zero-padded one of w digits
 * with a leading zero ("007"). Every id that ends in a digit is in exactly one family,
 * and the family, the width and the number give back the id. */
struct family {
	char *prefix; /* [plen], never ending in a digit */
	size_t plen;
	uint32_t width;
	struct runs seen, done; /* numbers counted once each */
};

#define MAX_FAMILIES 16 /* the first ones met; ids of other families go to the table */

struct idset {
	uint64_t key[2]; /* SipHash key */
	struct table t;
	struct more *more; /* [more_cap], open addressing, key 0 = empty, at most half full */
	size_t more_cap, more_n;
	struct runs seen_lines; /* lines whose id is their own number, counted once each */
	struct family fam[MAX_FAMILIES];
	size_t nfam;
	bool broken; /* memory ran out: every call answers 0 */
};

static uint32_t *seg_tags(uint64_t *seg)
{
	return (uint32_t *)(seg + SEG);
}

/* The slot a key starts probing from: multiply-shift of its top 32 bits (monotone in the
 * key, which is what lets a resize fill the new segments in order). */
static size_t home(uint64_t key, size_t cap)
{
	return (size_t)(((key >> 32) * (uint64_t)cap) >> 32);
}

struct pos {
	uint64_t *key;
	uint32_t *tag;
};

/* The slot holding (key, fp), or the empty slot where it would go. The table is never
 * full (at most 80%), so the probe ends. */
static struct pos probe(const struct table *t, uint64_t key, uint32_t fp)
{
	size_t cap = t->nseg * SEG;
	for (size_t i = home(key, cap);; i = i + 1 == cap ? 0 : i + 1) {
		uint64_t *seg = t->seg[i >> SEG_BITS];
		size_t j = i & (SEG - 1);
		if (seg[j] == 0 || (seg[j] == key && seg_tags(seg)[j] >> 2 == fp))
			return (struct pos){&seg[j], &seg_tags(seg)[j]};
	}
}

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->nseg; i++)
		free(t->seg[i]);
	free(t->seg);
	memset(t, 0, sizeof *t);
}

/* Puts a slot of the old table into the new one, whose segments are made on first use. */
static bool move_slot(struct table *nt, uint64_t key, uint32_t tag)
{
	size_t cap = nt->nseg * SEG;
	for (size_t i = home(key, cap);; i = i + 1 == cap ? 0 : i + 1) {
		uint64_t **seg = &nt->seg[i >> SEG_BITS];
		if (!*seg && !(*seg = calloc(SEG, SLOT_BYTES)))
			return false;
		size_t j = i & (SEG - 1);
		if ((*seg)[j] == 0) {
			(*seg)[j] = key;
			seg_tags(*seg)[j] = tag;
			nt->n++;
			return true;
		}
	}
}

/* Grows the table by a third (from 80% to 60% full). Each old segment is freed as soon as
 * its slots have moved: the homes are monotone in the key, so the new segments fill
 * roughly in order and the peak is about the new table, not old + new. Out of memory
 * half-way: both tables are freed and false returned (the set is then broken). */
static bool table_grow(struct table *t)
{
	size_t nseg = t->nseg ? t->nseg + (t->nseg + 2) / 3 : 1;
	if (nseg > ((size_t)1 << 31) / SEG) /* home() takes capacities below 2^31 */
		return false;
	struct table nt = {.seg = calloc(nseg, sizeof *nt.seg), .nseg = nseg};
	if (!nt.seg)
		return false;
	for (size_t s = 0; s < t->nseg; s++) {
		uint64_t *seg = t->seg[s];
		for (size_t j = 0; j < SEG; j++) {
			if (seg[j] && !move_slot(&nt, seg[j], seg_tags(seg)[j])) {
				table_free(&nt);
				table_free(t);
				return false;
			}
		}
		free(seg);
		t->seg[s] = NULL;
	}
	/* segments no slot landed in (a tiny table) */
	for (size_t s = 0; s < nseg; s++) {
		if (!nt.seg[s] && !(nt.seg[s] = calloc(SEG, SLOT_BYTES))) {
			table_free(&nt);
			table_free(t);
			return false;
		}
	}
	free(t->seg);
	*t = nt;
	return true;
}

/* ---- the side table of larger counts ---- */

static struct more *more_find(const struct idset *s, uint64_t key, uint32_t fp)
{
	if (!s->more_cap)
		return NULL;
	size_t mask = s->more_cap - 1;
	for (size_t i = key & mask;; i = (i + 1) & mask) {
		struct more *m = &s->more[i];
		if (m->key == 0 || (m->key == key && m->fp == fp))
			return m;
	}
}

/* The entry for (key, fp), made with zero counts when absent; NULL when out of memory
 * (nothing changed). */
static struct more *more_get(struct idset *s, uint64_t key, uint32_t fp)
{
	struct more *m = more_find(s, key, fp);
	if (m && m->key)
		return m;
	if ((s->more_n + 1) * 2 > s->more_cap) {
		size_t ncap = s->more_cap ? s->more_cap * 2 : 64;
		struct more *nm = calloc(ncap, sizeof *nm);
		if (!nm)
			return NULL;
		struct more *old = s->more;
		size_t ocap = s->more_cap;
		s->more = nm;
		s->more_cap = ncap;
		for (size_t i = 0; i < ocap; i++)
			if (old[i].key)
				*more_find(s, old[i].key, old[i].fp) = old[i];
		free(old);
		m = more_find(s, key, fp);
	}
	m->key = key;
	m->fp = fp;
	m->seen = m->done = 0;
	s->more_n++;
	return m;
}

/* ---- runs of line numbers ---- */

/* Adds x when it is larger than every number held: 1 added, 0 not (the caller counts it
 * elsewhere), -1 out of memory (nothing changed). A run of one number takes any larger
 * one as its second, so every run but the last holds two numbers or more. */
static int runs_add(struct runs *r, int64_t x)
{
	if (r->n) {
		struct run *l = &r->v[r->n - 1];
		int64_t last = l->first + (int64_t)l->step * (l->count - 1);
		if (x <= last)
			return 0;
		uint64_t gap = (uint64_t)(x - last);
		if (l->count == 1 && gap <= UINT32_MAX) {
			l->step = (uint32_t)gap;
			l->count = 2;
			return 1;
		}
		if (gap == l->step && l->count < UINT32_MAX) {
			l->count++;
			return 1;
		}
	}
	if (r->n == r->cap) {
		size_t ncap = r->cap ? r->cap * 2 : 4;
		struct run *nv = realloc(r->v, ncap * sizeof *nv);
		if (!nv)
			return -1;
		r->v = nv;
		r->cap = ncap;
	}
	r->v[r->n++] = (struct run){x, 0, 1};
	return 1;
}

static bool runs_has(const struct runs *r, int64_t x)
{
	size_t lo = 0, hi = r->n; /* the last run with first <= x is v[lo - 1] */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->v[mid].first <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	const struct run *u = &r->v[lo - 1];
	uint64_t d = (uint64_t)(x - u->first);
	if (u->count == 1)
		return d == 0;
	return d % u->step == 0 && d / u->step < u->count;
}

/* An id split as "<prefix><number>": ok false when it does not end in a digit or its
 * number has more than 18 digits. */
struct numbered {
	bool ok;
	size_t plen;
	uint32_t width; /* 0: no leading zero; else the digits' count */
	int64_t value;
};

static struct numbered split_number(const char *id, size_t len)
{
	size_t k = len;
	while (k > 0 && id[k - 1] >= '0' && id[k - 1] <= '9')
		k--;
	size_t nd = len - k;
	if (nd == 0 || nd > 18)
		return (struct numbered){0};
	int64_t v = 0;
	for (size_t i = k; i < len; i++)
		v = v * 10 + (id[i] - '0');
	return (struct numbered){true, k, id[k] == '0' && nd > 1 ? (uint32_t)nd : 0, v};
}

/* The index of the id's family, or nfam when it has none. */
static size_t family_find(const struct idset *s, const char *id, struct numbered nb)
{
	size_t i = 0;
	while (i < s->nfam && !(s->fam[i].plen == nb.plen && s->fam[i].width == nb.width &&
				memcmp(s->fam[i].prefix, id, nb.plen) == 0))
		i++;
	return i;
}

/* The id's family, made when absent if there is room (NULL else). */
static struct family *family_of(struct idset *s, const char *id, struct numbered nb)
{
	size_t i = family_find(s, id, nb);
	if (i < s->nfam)
		return &s->fam[i];
	if (s->nfam == MAX_FAMILIES)
		return NULL;
	struct family *f = &s->fam[s->nfam];
	if (!(f->prefix = malloc(nb.plen + 1)))
		return NULL; /* the table takes the id */
	memcpy(f->prefix, id, nb.plen);
	f->plen = nb.plen;
	f->width = nb.width;
	s->nfam++;
	return f;
}

/* How many times the runs count the id: once as a line's own number, once in its family's
 * runs of seen (or done) ids. */
static uint32_t runs_count(const struct idset *s, const char *id, struct numbered nb, bool done)
{
	if (!nb.ok)
		return 0;
	uint32_t c = 0;
	if (!done && nb.plen == 0 && nb.width == 0)
		c += runs_has(&s->seen_lines, nb.value);
	size_t i = family_find(s, id, nb);
	if (i < s->nfam)
		c += runs_has(done ? &s->fam[i].done : &s->fam[i].seen, nb.value);
	return c;
}

/* ---- the set ---- */

struct idset *idset_create(void)
{
	struct idset *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	/* A random key, so that no file can hold ids chosen to collide; if the kernel has
	 * none to give, the clock and pid still vary it (collisions by chance stay as
	 * unlikely, only aiming at them gets easier). */
	if (getrandom(s->key, sizeof s->key, GRND_NONBLOCK) != (ssize_t)sizeof s->key) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		s->key[0] = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30;
		s->key[1] = (uint64_t)getpid() ^ (uint64_t)(uintptr_t)s;
	}
	return s;
}

void idset_destroy(struct idset *s)
{
	if (!s)
		return;
	table_free(&s->t);
	free(s->more);
	free(s->seen_lines.v);
	for (size_t i = 0; i < s->nfam; i++) {
		free(s->fam[i].prefix);
		free(s->fam[i].seen.v);
		free(s->fam[i].done.v);
	}
	free(s);
}

static void set_break(struct idset *s)
{
	table_free(&s->t);
	free(s->more);
	s->more = NULL;
	s->more_cap = s->more_n = 0;
	s->broken = true;
}

struct hashed {
	uint64_t key; /* never 0 */
	uint32_t fp;  /* 30 bits */
};

static struct hashed hash_id(const struct idset *s, const char *id, size_t len)
{
	uint64_t h[2];
	siphash128(s->key, id, len, h);
	/* 0 marks an empty slot: key 0 is merged with key 1 (a 2^-64 bias, nothing) */
	return (struct hashed){h[0] ? h[0] : 1, (uint32_t)(h[1] >> 34)};
}

/* The table's counts of an id (0, 0 when absent). */
static void table_counts(const struct idset *s, struct hashed h, uint32_t *seen, uint32_t *done)
{
	*seen = *done = 0;
	if (!s->t.n)
		return;
	struct pos p = probe(&s->t, h.key, h.fp);
	if (!*p.key)
		return;
	switch (*p.tag & 3) {
	case ST_SEEN1: *seen = 1; break;
	case ST_DONE1: *done = 1; break;
	case ST_BOTH1: *seen = *done = 1; break;
	default: {
		const struct more *m = more_find(s, h.key, h.fp);
		*seen = m->seen;
		*done = m->done;
	}
	}
}

/* Adds dseen/ddone to the table's counts of an id and returns the new ones; false when
 * memory ran out (the caller breaks the set: a resize may have lost the table). */
static bool table_add(struct idset *s, struct hashed h, uint32_t dseen, uint32_t ddone,
		      uint32_t *seen, uint32_t *done)
{
	struct pos p = {0};
	if (s->t.n)
		p = probe(&s->t, h.key, h.fp);
	if (!p.key || !*p.key) {
		/* a new id: keep the table at most 80% full */
		if ((s->t.n + 1) * 5 > s->t.nseg * SEG * 4) {
			if (!table_grow(&s->t))
				return false;
		}
		p = probe(&s->t, h.key, h.fp);
		*p.key = h.key;
		*p.tag = h.fp << 2 | (dseen ? ST_SEEN1 : ST_DONE1);
		s->t.n++;
		*seen = dseen;
		*done = ddone;
		return true;
	}
	uint32_t st = *p.tag & 3;
	if (st == ST_MORE) {
		struct more *m = more_find(s, h.key, h.fp);
		*seen = m->seen += dseen;
		*done = m->done += ddone;
		return true;
	}
	uint32_t sn = (st == ST_SEEN1 || st == ST_BOTH1) + dseen;
	uint32_t dn = (st == ST_DONE1 || st == ST_BOTH1) + ddone;
	if (sn <= 1 && dn <= 1) {
		*p.tag = h.fp << 2 | (sn && dn ? ST_BOTH1 : sn ? ST_SEEN1 : ST_DONE1);
	} else {
		struct more *m = more_get(s, h.key, h.fp);
		if (!m)
			return false;
		m->seen = sn;
		m->done = dn;
		*p.tag = h.fp << 2 | ST_MORE;
	}
	*seen = sn;
	*done = dn;
	return true;
}

/* Counts one sight (done false) or one result (done true) of an id: in the runs when
 * they can take it (a line's own number; a number larger than its family's last), else in
 * the table. Returns the id's new count, 0 when memory ran out (the set is then broken). */
static uint32_t add(struct idset *s, const char *id, size_t len, int64_t line, bool done)
{
	if (s->broken)
		return 0;
	struct hashed h = hash_id(s, id, len);
	struct numbered nb = split_number(id, len);
	int rc = 0;
	if (!done && nb.ok && nb.plen == 0 && nb.width == 0 && line > 0 && nb.value == line)
		rc = runs_add(&s->seen_lines, line);
	if (rc == 0 && nb.ok) {
		struct family *f = family_of(s, id, nb);
		if (f)
			rc = runs_add(done ? &f->done : &f->seen, nb.value);
	}
	uint32_t seen, dn;
	if (rc < 0 || (rc == 0 && !table_add(s, h, !done, done, &seen, &dn))) {
		set_break(s);
		return 0;
	}
	if (rc > 0)
		table_counts(s, h, &seen, &dn);
	return (done ? dn : seen) + runs_count(s, id, nb, done);
}

uint32_t idset_add_seen_line(struct idset *s, const char *id, size_t len, int64_t line)
{
	return add(s, id, len, line, false);
}

uint32_t idset_add_seen(struct idset *s, const char *id, size_t len)
{
	return add(s, id, len, 0, false);
}

uint32_t idset_add_done(struct idset *s, const char *id, size_t len)
{
	return add(s, id, len, 0, true);
}

uint32_t idset_done(const struct idset *s, const char *id, size_t len)
{
	if (s->broken)
		return 0;
	uint32_t seen, done;
	table_counts(s, hash_id(s, id, len), &seen, &done);
	return done + runs_count(s, id, split_number(id, len), true);
}

size_t idset_size(const struct idset *s)
{
	return s->t.n;
}

size_t idset_bytes(const struct idset *s)
{
	size_t runs = s->seen_lines.cap, text = 0;
	for (size_t i = 0; i < s->nfam; i++) {
		runs += s->fam[i].seen.cap + s->fam[i].done.cap;
		text += s->fam[i].plen + 1;
	}
	return sizeof *s + s->t.nseg * (sizeof *s->t.seg + SEG * SLOT_BYTES) +
	       s->more_cap * sizeof *s->more + runs * sizeof(struct run) + text;
}
