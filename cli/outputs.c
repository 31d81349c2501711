/* outputs: see outputs.h. */
#include "cli/outputs.h"

#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool outputs_is_stdout(const char *path)
{
	return path && strcmp(path, "-") == 0;
}

bool outputs_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	bool ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
	if (ea || eb)
		return ea && eb && S_ISREG(sa.st_mode) && sa.st_dev == sb.st_dev &&
		       sa.st_ino == sb.st_ino;
	char ca[PATH_MAX], cb[PATH_MAX], da[PATH_MAX], db[PATH_MAX];
	snprintf(ca, sizeof ca, "%s", a);
	snprintf(cb, sizeof cb, "%s", b);
	if (!realpath(dirname(ca), da) || !realpath(dirname(cb), db))
		return strcmp(a, b) == 0;
	snprintf(ca, sizeof ca, "%s", a);
	snprintf(cb, sizeof cb, "%s", b);
	return strcmp(da, db) == 0 && strcmp(basename(ca), basename(cb)) == 0;
}

bool outputs_check(const char *who, const struct output_name *o, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++) {
			if (!o[i].path || !o[j].path)
				continue;
			bool si = outputs_is_stdout(o[i].path), sj = outputs_is_stdout(o[j].path);
			if (si && sj) {
				fprintf(stderr,
					"%s: the %s (%s -) and the %s (%s -) would both go to "
					"standard output; give one of them a file\n",
					who, o[i].what, o[i].flag, o[j].what, o[j].flag);
				return false;
			}
			if (!si && !sj && outputs_same_file(o[i].path, o[j].path)) {
				fprintf(stderr,
					"%s: %s and %s name the same file (%s); give each its "
					"own\n",
					who, o[i].flag, o[j].flag, o[j].path);
				return false;
			}
		}
	return true;
}

FILE *outputs_open(const char *path, const char *mode)
{
	return outputs_is_stdout(path) ? stdout : fopen(path, mode);
}

bool outputs_close(FILE *f)
{
	bool ok = ferror(f) == 0;
	if (f == stdout ? fflush(f) != 0 || ferror(f) : fclose(f) != 0)
		ok = false;
	return ok;
}
