/* json_file: see json_file.h. */
#include "cli/json_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool json_file_write(const char *path, const cJSON *root)
{
	char *text = cJSON_Print(root);
	if (!text) {
		errno = ENOMEM;
		return false;
	}
	bool to_stdout = strcmp(path, "-") == 0;
	FILE *f = to_stdout ? stdout : fopen(path, "w");
	bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
	if (f && (to_stdout ? fflush(f) != 0 || ferror(f) : fclose(f) != 0))
		ok = false;
	free(text);
	return ok;
}
