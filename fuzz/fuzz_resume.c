/* fuzz_resume: the output file that `batchgen run --resume` scans (cli/resume.c): any
 * bytes, as an interrupted or foreign run could leave them.
 * Oracles:
 *  - BG_OK: the file is now its first (size - n_cut) bytes, empty or ending in "\n";
 *    n_kept is its number of lines and every kept line's id (jsonl_result_id) is done in
 *    the id set as many times as it occurs;
 *  - an error: a message, and the file is untouched.
 * The file is a memfd, reached by its /proc/self/fd path, so nothing touches the disk.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include "cli/idset.h"
#include "cli/resume.h"
#include "fuzz/fuzz_util.h"
#include "io/jsonl_write.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz_resume", 0);
	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	struct idset *ids = idset_create();
	struct resume_stats rs = {0};
	struct bg_err err = {0};
	enum bg_status st = resume_scan(path, ids, &rs, &err);
	struct stat sb;
	FUZZ_CHECK(fstat(fd, &sb) == 0, "fstat");
	size_t now = (size_t)sb.st_size;
	char *cur = malloc(now + 1);
	FUZZ_CHECK(cur && pread(fd, cur, now, 0) == (ssize_t)now, "read back");
	if (st != BG_OK) {
		FUZZ_CHECK(err.msg[0], "an error without a message");
		FUZZ_CHECK(now == size && (size == 0 || memcmp(cur, data, size) == 0),
			   "a refused file was changed");
	} else {
		FUZZ_CHECK(rs.n_cut >= 0 && (size_t)rs.n_cut <= size && now == size - (size_t)rs.n_cut,
			   "%zu bytes, %lld cut, %zu left", size, (long long)rs.n_cut, now);
		FUZZ_CHECK(now == 0 || memcmp(cur, data, now) == 0, "the kept part changed");
		FUZZ_CHECK(now == 0 || cur[now - 1] == '\n', "the kept part ends in a torn line");
		int64_t lines = 0;
		for (size_t a = 0; a < now;) {
			const char *e = memchr(cur + a, '\n', now - a);
			size_t l = (size_t)(e - (cur + a));
			char *id = NULL;
			FUZZ_CHECK(jsonl_result_id(cur + a, l, &id) == BG_OK, "kept line %lld has no id",
				   (long long)lines + 1);
			uint32_t seen = 0;
			for (size_t b = 0; b <= a;) { /* occurrences of this id so far */
				const char *e2 = memchr(cur + b, '\n', now - b);
				char *id2 = NULL;
				if (jsonl_result_id(cur + b, (size_t)(e2 - (cur + b)), &id2) == BG_OK &&
				    strcmp(id, id2) == 0)
					seen++;
				free(id2);
				b = (size_t)(e2 - cur) + 1;
			}
			FUZZ_CHECK(idset_done(ids, id, strlen(id)) >= seen,
				   "id '%s' done %u times, seen %u", id, idset_done(ids, id, strlen(id)),
				   seen);
			free(id);
			lines++;
			a += l + 1;
		}
		FUZZ_CHECK(rs.n_kept == lines, "%lld kept, %lld lines", (long long)rs.n_kept,
			   (long long)lines);
	}
	free(cur);
	idset_destroy(ids);
	close(fd);
	return 0;
}
