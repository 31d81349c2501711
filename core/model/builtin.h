/* builtin: the model compiled into the binary, used when -m names none.
 *
 * It is stories260K (Andrej Karpathy's llama2.c TinyStories model, MIT; GGUF v3, llama,
 * 5 layers, 64 embd, a 512-token SentencePiece vocabulary, all f32), read at build time
 * from ../shared/models/stories260K.gguf (or the Makefile's BUILTIN_GGUF; sha256 checked)
 * and embedded byte for byte (.incbin in builtin.c), so that the binary writes short
 * English stories with no file to fetch.
 *
 * Invariants: the bytes are read-only, live as long as the program, and start on a
 * 64-byte boundary (GGUF's tensor alignment is 32), so they can be parsed in place.
 */
#ifndef BG_BUILTIN_H
#define BG_BUILTIN_H

#include <stddef.h>

/* The embedded GGUF file: builtin_gguf_size() bytes from builtin_gguf_data(). */
const void *builtin_gguf_data(void);
size_t builtin_gguf_size(void);

/* The name a run reports for it. */
#define BUILTIN_MODEL_NAME "stories260K"

#endif
