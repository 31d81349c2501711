/* outputs: the files a command writes, as its command line names them.
 *
 * "-" names standard output, for every output of every command (run's -o, --stats and
 * --report; bench's --stats and --report). A command checks its outputs together before
 * any work (outputs_check): two outputs on standard output, or two naming one file, would
 * interleave or overwrite each other, so they are a usage error.
 */
#ifndef BG_CLI_OUTPUTS_H
#define BG_CLI_OUTPUTS_H

#include <stdbool.h>
#include <stdio.h>

/* One output of a command: its option ("-o", "--stats"), what it holds ("results",
 * "statistics"), and the name given (NULL: not asked for). */
struct output_name {
	const char *flag;
	const char *what;
	const char *path;
};

/* Whether path names standard output ("-"). */
bool outputs_is_stdout(const char *path);

/* Whether paths a and b name one regular file: the same inode when both exist (not a
 * device: -o /dev/null --stats /dev/null is fine), else the same resolved folder and name
 * (a file not made yet: "x" and "./x"). */
bool outputs_same_file(const char *a, const char *b);

/* False, after one line on stderr starting with who ("batchgen", "batchgen bench"), when
 * two of the n outputs both go to standard output or name one file. */
bool outputs_check(const char *who, const struct output_name *o, int n);

/* path opened with fopen's mode, or stdout for "-"; NULL with errno set. Close it with
 * outputs_close. */
FILE *outputs_open(const char *path, const char *mode);

/* Flushes f, and closes it unless it is stdout. False when a write had failed (the error
 * flag) or the flush / close failed; errno is the C library's (a caller that needs to
 * tell whether it was set zeroes it first). */
bool outputs_close(FILE *f);

#endif
