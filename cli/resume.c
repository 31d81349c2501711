#include "cli/resume.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "io/jsonl_write.h"

/* Whether a result line reports an error: native {"error": {...}}, or OpenAI's form with
 * a response status other than 200 or a top-level error. */
static bool result_failed(const char *line, size_t len)
{
	cJSON *o = cJSON_ParseWithLength(line, len);
	if (!o)
		return false;
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
	const cJSON *resp = cJSON_GetObjectItemCaseSensitive(o, "response");
	const cJSON *code =
	    cJSON_IsObject(resp) ? cJSON_GetObjectItemCaseSensitive(resp, "status_code") : NULL;
	bool failed = (e && !cJSON_IsNull(e)) || (cJSON_IsNumber(code) && code->valuedouble != 200);
	cJSON_Delete(o);
	return failed;
}

enum bg_status resume_scan(const char *path, struct idset *ids, struct resume_stats *out,
			   struct bg_err *err)
{
	memset(out, 0, sizeof *out);
	FILE *f = fopen(path, "r+");
	if (!f) {
		if (errno == ENOENT)
			return BG_OK; /* nothing was written yet */
		return bg_fail(err, BG_ERR_IO, "cannot open %s to resume: %s", path,
			       strerror(errno));
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int64_t line_no = 0, bad_line = 0;
	long long good_end = 0, end = 0;
	enum bg_status st = BG_OK;
	while ((n = getline(&line, &cap, f)) > 0) {
		line_no++;
		if (bad_line) {
			st = bg_fail(err, BG_ERR_FORMAT,
				     "%s line %lld is not a result line (and is not the last "
				     "line); refusing to resume into this file",
				     path, (long long)bad_line);
			goto out;
		}
		end += n;
		char *id = NULL;
		bool whole = line[n - 1] == '\n';
		if (whole && jsonl_result_id(line, (size_t)n - 1, &id) == BG_OK && id) {
			if (!idset_add_done(ids, id, strlen(id))) {
				free(id);
				st = bg_fail(err, BG_ERR_NOMEM, "out of memory reading %s", path);
				goto out;
			}
			free(id);
			out->n_kept++;
			out->n_failed += result_failed(line, (size_t)n - 1);
			good_end = end;
		} else {
			free(id);
			bad_line = line_no;
		}
	}
	if (ferror(f)) {
		st = bg_fail(err, BG_ERR_IO, "cannot read %s: %s", path, strerror(errno));
		goto out;
	}
	if (good_end < end) {
		fflush(f);
		if (ftruncate(fileno(f), (off_t)good_end) != 0) {
			st = bg_fail(err, BG_ERR_IO, "cannot truncate the torn last line of %s: %s",
				     path, strerror(errno));
			goto out;
		}
		out->n_cut = end - good_end;
	}
out:
	free(line);
	fclose(f);
	return st;
}
