/* json_file: writing one JSON document (a --report) where the command line names it. */
#ifndef BG_CLI_JSON_FILE_H
#define BG_CLI_JSON_FILE_H

#include <stdbool.h>

#include <cjson/cJSON.h>

/* Writes root, printed, then a newline, to path; "-" is standard output (as for -o),
 * flushed and left open. False with errno set when it could not be opened, written or
 * closed (ENOMEM when printing failed). */
bool json_file_write(const char *path, const cJSON *root);

#endif
