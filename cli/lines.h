/* lines: counting the lines of a file without reading it into memory, for the progress
 * total of `run` and the checks of `merge`. */
#ifndef BG_CLI_LINES_H
#define BG_CLI_LINES_H

#include <stdbool.h>
#include <stdint.h>

/* Counts the lines of the open file fd from byte offset from to its end, with pread (the
 * file position is not moved). A last line without '\n' counts, and sets *torn when torn
 * is not NULL. Returns -1 when fd is not a regular file or cannot be read. */
int64_t lines_count(int fd, int64_t from, bool *torn);

#endif
