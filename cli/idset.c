#include "idset.h"

#include <stdbool.h>
#include <stdlib.h>

struct idset_slot {
	uint64_t h1, h2; /* h1 == 0 && h2 == 0 marks an empty slot */
	uint32_t seen, done;
};

struct idset {
	struct idset_slot *slots; /* [cap], cap a power of two */
	size_t cap, n;
};

/* FNV-1a, then a final avalanche (splitmix64's) so that the low bits used for the slot
 * index depend on every byte. */
static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static void hash2(const char *id, size_t len, uint64_t *h1, uint64_t *h2)
{
	uint64_t a = 0xcbf29ce484222325ULL, b = 0x9e3779b97f4a7c15ULL ^ len;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)id[i];
		a = (a ^ c) * 0x100000001b3ULL;
		b = (b + c + 1) * 0xff51afd7ed558ccdULL;
		b ^= b >> 29;
	}
	*h1 = mix(a);
	*h2 = mix(b ^ (a << 1));
	if (*h1 == 0 && *h2 == 0)
		*h2 = 1;
}

struct idset *idset_create(void)
{
	struct idset *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->cap = 1024;
	s->slots = calloc(s->cap, sizeof *s->slots);
	if (!s->slots) {
		free(s);
		return NULL;
	}
	return s;
}

void idset_destroy(struct idset *s)
{
	if (!s)
		return;
	free(s->slots);
	free(s);
}

static struct idset_slot *find(const struct idset *s, uint64_t h1, uint64_t h2)
{
	size_t mask = s->cap - 1;
	for (size_t i = h1 & mask;; i = (i + 1) & mask) {
		struct idset_slot *sl = &s->slots[i];
		if ((sl->h1 == h1 && sl->h2 == h2) || (sl->h1 == 0 && sl->h2 == 0))
			return sl;
	}
}

static bool grow(struct idset *s)
{
	size_t ncap = s->cap * 2;
	struct idset_slot *ns = calloc(ncap, sizeof *ns);
	if (!ns)
		return false;
	struct idset old = *s;
	s->slots = ns;
	s->cap = ncap;
	for (size_t i = 0; i < old.cap; i++) {
		struct idset_slot *o = &old.slots[i];
		if (o->h1 || o->h2)
			*find(s, o->h1, o->h2) = *o;
	}
	free(old.slots);
	return true;
}

static struct idset_slot *slot_for(struct idset *s, const char *id, size_t len)
{
	if ((s->n + 1) * 2 > s->cap && !grow(s)) /* load factor <= 1/2 */
		return NULL;
	uint64_t h1, h2;
	hash2(id, len, &h1, &h2);
	struct idset_slot *sl = find(s, h1, h2);
	if (sl->h1 == 0 && sl->h2 == 0) {
		sl->h1 = h1;
		sl->h2 = h2;
		s->n++;
	}
	return sl;
}

uint32_t idset_add_seen(struct idset *s, const char *id, size_t len)
{
	struct idset_slot *sl = slot_for(s, id, len);
	return sl ? ++sl->seen : 0;
}

uint32_t idset_add_done(struct idset *s, const char *id, size_t len)
{
	struct idset_slot *sl = slot_for(s, id, len);
	return sl ? ++sl->done : 0;
}

uint32_t idset_done(const struct idset *s, const char *id, size_t len)
{
	uint64_t h1, h2;
	hash2(id, len, &h1, &h2);
	const struct idset_slot *sl = find(s, h1, h2);
	return sl->done;
}

size_t idset_size(const struct idset *s)
{
	return s->n;
}
