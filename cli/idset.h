/* idset: the request ids of one run, for duplicate detection and --resume.
 *
 * For each id it counts how many input lines carried it (seen) and how many results for
 * it already sit in the output file (done). An id is kept as a 128-bit hash (two
 * independent 64-bit hashes), not as its text: a 24-byte slot in a table kept at most
 * half full (48 to 96 bytes per distinct id). Two different ids collide with probability
 * about n^2 / 2^129 (nil for any real file).
 */
#ifndef BG_CLI_IDSET_H
#define BG_CLI_IDSET_H

#include <stddef.h>
#include <stdint.h>

struct idset;

struct idset *idset_create(void);    /* NULL on allocation failure */
void idset_destroy(struct idset *s); /* NULL-safe */

/* Adds one occurrence to the id's seen (or done) count and returns the new count, or 0
 * when memory ran out (nothing changed). */
uint32_t idset_add_seen(struct idset *s, const char *id, size_t len);
uint32_t idset_add_done(struct idset *s, const char *id, size_t len);

/* The id's done count (0 when absent). */
uint32_t idset_done(const struct idset *s, const char *id, size_t len);

/* Distinct ids held. */
size_t idset_size(const struct idset *s);

#endif
