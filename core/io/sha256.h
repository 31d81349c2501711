/* sha256: SHA-256 (FIPS 180-4), for checking downloads against the sha256 the hub lists.
 *
 * Incremental: init, any number of updates, final. A context is plain data (no
 * allocation), so it can live on the stack and be copied.
 */
#ifndef BG_SHA256_H
#define BG_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t n_bytes;    /* hashed so far */
	uint8_t block[64];   /* a partial block */
	size_t n_block;	     /* bytes in block */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The digest as 64 lowercase hex digits into hex[65]; s must be re-initialized after. */
void sha256_final_hex(struct sha256 *s, char hex[65]);

#endif
