/* regex: regular expressions and choice lists -> GBNF (grammar.h).
 *
 * The regex form is the common subset of ECMAScript/PCRE syntax that is regular:
 * literals (UTF-8), `.` (any character but newline), classes [...] / [^...] with ranges
 * and \d \w \s inside, the escapes \d \D \w \W \s \S \t \n \r \f \v \xHH \uHHHH and
 * escaped punctuation, groups ( ) and (?: ), alternation |, and the quantifiers * + ?
 * {m} {m,} {m,n} (n <= 2000; a lazy `?` after a quantifier is accepted and changes
 * nothing: a constraint has no preference). `^` at the very start and `$` at the very end
 * are accepted and mean nothing more: the whole output must match (full match, as
 * vLLM/outlines do). Refused with BG_ERR_UNSUPPORTED and the offset: backreferences,
 * lookarounds, \b, possessive quantifiers, named groups, flags, anchors elsewhere,
 * \0 followed by a digit (octal in PCRE and Python, an error in ECMAScript),
 * and an unbounded repetition of something that can match the empty string (`(a*)*`,
 * `(a|b?)+`: left-recursive as GBNF; bounded ones such as `(a*){0,3}` are fine).
 *
 * json_string mode (a JSON schema `pattern`): the expression is for the inside of a
 * JSON string literal. The matched string's characters `"` and `\` are produced in their
 * escaped forms, and control characters and DEL are never produced (a subset of the
 * pattern's language: every produced string, once decoded, matches the pattern).
 */
#ifndef BG_REGEX_H
#define BG_REGEX_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"

#define REGEX_MAX_LEN 65536 /* bytes of pattern */
#define REGEX_MAX_DEPTH 64  /* nesting of groups */

/* A GBNF expression (no rule definitions; may be embedded in a rule body), malloc'd. */
enum bg_status regex_to_gbnf_expr(const char *pattern, bool json_string, char **expr,
				  struct bg_err *err);
/* A whole grammar "root ::= ..." for the pattern (full match), malloc'd. */
enum bg_status regex_to_gbnf(const char *pattern, char **gbnf, struct bg_err *err);
/* A grammar whose language is exactly the n strings choice[i] (at least one), malloc'd. */
enum bg_status choice_to_gbnf(const char *const *choice, size_t n, char **gbnf,
			      struct bg_err *err);

#endif
