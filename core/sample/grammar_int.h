/* grammar_int: the compiled form of a GBNF grammar, shared by its parser (grammar_parse.c)
 * and its matcher (grammar.c). Not part of the interface: include only from those two.
 *
 * The compiled form is llama.cpp's: every rule is a run of elements (CHAR / CHAR_NOT /
 * CHAR_ANY with CHAR_ALT and CHAR_RNG_UPPER continuations, RULE_REF, ALT between
 * alternatives, END after the last one), all rules concatenated into one array.
 */
#ifndef BG_GRAMMAR_INT_H
#define BG_GRAMMAR_INT_H

#include <stdbool.h>
#include <stdint.h>

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

static inline bool is_end_of_seq(const struct gel *e)
{
	return e->type == GE_END || e->type == GE_ALT;
}

#endif
