#include "cli/lines.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int64_t lines_count(int fd, int64_t from, bool *torn)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || from < 0)
		return -1;
	enum { BUF = 1 << 16 };
	char *buf = malloc(BUF);
	if (!buf)
		return -1;
	int64_t lines = 0;
	off_t pos = (off_t)from;
	char last = '\n';
	ssize_t n;
	while ((n = pread(fd, buf, BUF, pos)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			lines += buf[i] == '\n';
		last = buf[n - 1];
		pos += n;
	}
	free(buf);
	if (n < 0)
		return -1;
	if (torn)
		*torn = last != '\n';
	return lines + (last != '\n');
}
