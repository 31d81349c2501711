/* json_file: see json_file.h. */
#include "cli/json_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/outputs.h"

bool json_file_write(const char *path, const cJSON *root)
{
	char *text = cJSON_Print(root);
	if (!text) {
		errno = ENOMEM;
		return false;
	}
	FILE *f = outputs_open(path, "w");
	bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
	if (f && !outputs_close(f))
		ok = false;
	free(text);
	return ok;
}
