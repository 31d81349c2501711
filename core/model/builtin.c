#include "model/builtin.h"

/* The file is assembled into .rodata between two labels. The path, BG_BUILTIN_GGUF (the
 * Makefile's checked copy in the build tree), is relative to the directory the compiler
 * runs in (the repository root: the Makefile compiles from there), and the Makefile makes
 * this object depend on the file, so a changed file is rebuilt in.
 * The end label is a separate symbol rather than a size, so the size is the exact file
 * length whatever the assembler pads after it. */
__asm__(".section .rodata\n"
	".balign 64\n"
	".globl bg_builtin_gguf_begin\n"
	".type bg_builtin_gguf_begin, @object\n"
	"bg_builtin_gguf_begin:\n"
	".incbin \"" BG_BUILTIN_GGUF "\"\n"
	".globl bg_builtin_gguf_end\n"
	"bg_builtin_gguf_end:\n"
	".byte 0\n"
	".previous\n");

extern const unsigned char bg_builtin_gguf_begin[];
extern const unsigned char bg_builtin_gguf_end[];

const void *builtin_gguf_data(void)
{
	return bg_builtin_gguf_begin;
}

size_t builtin_gguf_size(void)
{
	return (size_t)(bg_builtin_gguf_end - bg_builtin_gguf_begin);
}
