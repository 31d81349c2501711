/* idset: the request ids of one run, for duplicate detection and --resume.
 *
 * For each id it counts how many input lines carried it (seen) and how many results for
 * it already sit in the output file (done). Its memory must stay small for inputs of
 * millions of lines, so it keeps no id text, and most ids cost nothing:
 *
 * - Runs. The ids of a file are mostly numbered in order: a line without "id" has its line
 *   number ("17", and lines come in increasing order), generated ids count up
 *   ("request-1", "request-2", ... or "q000001", ...). An id that ends in a number is
 *   kept, when its number is larger than the last one kept for the same prefix and way of
 *   writing the number (its family: "request-" with plain numbers, "q" with 6 zero-padded
 *   digits, ...), as a member of a run of an arithmetic progression (first, step, count:
 *   16 bytes a run). A whole file of line-number ids, or of "request-<n>" ids, is one run;
 *   so is one shard of it (lines K+1, K+1+N, ...). Every run but the last holds two numbers
 *   or more, so the worst mix costs 8 bytes a number. Lines whose id is their own line
 *   number have runs of their own (so that explicit ids never push them into the table),
 *   and at most 16 families are kept (the first met). All of this is exact: no hash.
 * - The table: every other id (out of order, not ending in a number, of a 17th family) is
 *   a 94-bit fingerprint of a keyed 128-bit hash (SipHash-2-4, a fresh random key per
 *   set): 64 bits in the slot's key (which also places it in the table) and 30 more in its
 *   32-bit tag, whose 2 remaining bits hold the counts of the common cases (seen once,
 *   done once, both). Rarer counts (a duplicate, an id done twice) go to a small side
 *   table. 12 bytes a slot, the table kept between 60% and 80% full: 15 to 20 bytes an
 *   id. It grows by a third, one 4096-slot segment at a time, freeing old segments as it
 *   goes, so a resize never holds two whole tables. At most 2^31 slots (1.7 billion ids in
 *   the table, 26 GB); past that, adding answers 0 (out of memory).
 *
 * An id's count is the sum of its counts in the runs and in the table (each occurrence is
 * counted in exactly one place), so which place took it never changes an answer.
 *
 * What a collision in the table would do: two distinct ids with the same fingerprint
 * would be one id to the set, so the later line would get a false duplicate_id error, or
 * --resume would skip a line that has no result. With a 94-bit fingerprint of a
 * pseudo-random function, the chance that any two of n distinct ids collide is below
 * n^2 / 2^95: 2.5e-17 for a million ids in the table, 2.5e-11 for a billion. The key is
 * random, so the ids of a file cannot have been chosen to collide (SipHash is a PRF:
 * without the key, collisions cannot be aimed at).
 *
 * Not thread-safe; one set per run.
 */
#ifndef BG_CLI_IDSET_H
#define BG_CLI_IDSET_H

#include <stddef.h>
#include <stdint.h>

struct idset;

struct idset *idset_create(void);    /* NULL on allocation failure */
void idset_destroy(struct idset *s); /* NULL-safe */

/* Adds one occurrence to the id's seen count and returns the new count: how many lines so
 * far carried this id, the id of line `line` (1-based; 0 when unknown). An id equal to the
 * decimal form of `line` (the line's own number, jsonl's id for a line without one) costs
 * nothing when the lines come in increasing order. Returns 0 when memory ran out; the set
 * then answers 0 to everything and only idset_destroy is left. */
uint32_t idset_add_seen_line(struct idset *s, const char *id, size_t len, int64_t line);

/* idset_add_seen_line with line 0: the id is never taken for its line's own number. */
uint32_t idset_add_seen(struct idset *s, const char *id, size_t len);

/* Adds one occurrence to the id's done count and returns the new count, or 0 when memory
 * ran out (as above). */
uint32_t idset_add_done(struct idset *s, const char *id, size_t len);

/* The id's done count (0 when absent). */
uint32_t idset_done(const struct idset *s, const char *id, size_t len);

/* Distinct ids held in the table (ids kept in runs are not counted). */
size_t idset_size(const struct idset *s);

/* Bytes of memory the set holds (its table, side table and runs), for tests and
 * benchmarks. */
size_t idset_bytes(const struct idset *s);

#endif
