/* cmd_merge: `batchgen merge [-i INPUT] -o OUT SHARD_0 ... SHARD_N-1` joins the outputs of
 * `--shard K/N` runs back into input order.
 *
 * Why this works without line numbers in the results: shard K answers input lines K,
 * K+N, K+2N, ... (0-based), one result per line, in input order (run refuses --shard
 * with --order completion, and an interrupted run writes only an in-order prefix, so
 * --resume keeps the order). So the i-th line of shard K's output is the result of input
 * line K + i*N, and the merged output is shard 0's first line, shard 1's first line, ...,
 * shard N-1's first line, shard 0's second line, and so on. The files must be named in
 * shard order, 0 first.
 *
 * Checks before anything is written: every file ends with a whole line, and the counts
 * fit the round-robin (c_0 >= c_1 >= ... >= c_N-1 >= c_0 - 1). With -i INPUT the count of
 * each shard must be exactly what the input's line count implies, which also catches a
 * shard that stopped early, and then every result that succeeded must carry the id of
 * the input line it is merged against (its "id" or "custom_id"; the line number for a
 * native line without one): shards of equal counts named out of order (a shell glob
 * sorts out.10 before out.2) are refused, not merged into the wrong lines. Memory: one
 * line per shard.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/commands.h"
#include "cli/lines.h"
#include "cli/outputs.h"

static void merge_usage(FILE *f)
{
	fprintf(f, "usage: batchgen merge [-i INPUT] [-o OUT] SHARD_0 SHARD_1 ... SHARD_N-1\n\n"
		   "Joins the outputs of `batchgen run --shard K/N` (K = 0..N-1, named in that "
		   "order)\ninto input order.\n\n"
		   "options:\n"
		   "  -o, --output FILE            merged JSONL results, - for standard output "
		   "(default: -)\n"
		   "  -i, --input FILE             the input file the shards ran on: check that "
		   "every shard is complete\n"
		   "  -h, --help                   print this help and exit\n");
}

/* Counts the lines of path; false (with a message) when it cannot be read or, with
 * need_whole, when its last line is torn. */
static bool count_file(const char *path, bool need_whole, int64_t *lines)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "batchgen merge: cannot open %s: %s\n", path, strerror(errno));
		return false;
	}
	bool torn = false;
	*lines = lines_count(fd, 0, &torn);
	close(fd);
	if (*lines < 0) {
		fprintf(stderr, "batchgen merge: cannot read %s (not a regular file?)\n", path);
		return false;
	}
	if (torn && need_whole) {
		fprintf(stderr,
			"batchgen merge: %s ends with a torn line; finish that shard with "
			"`batchgen run --resume` first\n",
			path);
		return false;
	}
	return true;
}

/* The id a result for input line `line` must carry, into buf: a native line's "id", an
 * OpenAI line's "custom_id", the line number (1-based) for a native object
 * without an id. False when it cannot be told (not an object, an id of the wrong type:
 * such a line gets an error result, which is not checked). */
static bool merge_want_id(const char *line, size_t len, int64_t line_no, char *buf, size_t cap)
{
	cJSON *o = cJSON_ParseWithLength(line, len);
	bool ok = false;
	if (cJSON_IsObject(o)) {
		const cJSON *cid = cJSON_GetObjectItemCaseSensitive(o, "custom_id");
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
		bool openai = cid || cJSON_GetObjectItemCaseSensitive(o, "body");
		const cJSON *v = openai ? cid : id;
		if (cJSON_IsString(v) && v->valuestring[0]) {
			ok = snprintf(buf, cap, "%s", v->valuestring) < (int)cap;
		} else if (!openai && (!v || cJSON_IsNull(v))) {
			snprintf(buf, cap, "%lld", (long long)line_no);
			ok = true;
		}
	}
	cJSON_Delete(o);
	return ok;
}

/* The id of a result line that succeeded (native: "error" null, its "id"; OpenAI, known
 * by its "response": status 200, its "custom_id"), into buf; false for an error result
 * or one that is not JSON. */
static bool merge_got_id(const char *line, size_t len, char *buf, size_t cap)
{
	cJSON *o = cJSON_ParseWithLength(line, len);
	bool ok = false;
	if (cJSON_IsObject(o)) {
		bool openai = cJSON_GetObjectItemCaseSensitive(o, "response") != NULL;
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, openai ? "custom_id" : "id");
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
		const cJSON *resp = cJSON_GetObjectItemCaseSensitive(o, "response");
		const cJSON *code = cJSON_IsObject(resp)
					? cJSON_GetObjectItemCaseSensitive(resp, "status_code")
					: NULL;
		bool good = openai ? cJSON_IsNumber(code) && code->valuedouble == 200
				   : !err || cJSON_IsNull(err);
		if (good && cJSON_IsString(v))
			ok = snprintf(buf, cap, "%s", v->valuestring) < (int)cap;
	}
	cJSON_Delete(o);
	return ok;
}

/* Reads the input beside the shards in merge order and compares each result that
 * succeeded with its input line's id. False (with a message) at the first mismatch or a
 * read failure. The files are read again for the merge itself. */
static bool merge_check_ids(const char *in_path, char **paths, int n, const int64_t *count)
{
	FILE *in = fopen(in_path, "r");
	FILE **f = calloc((size_t)n, sizeof *f);
	bool ok = in && f;
	for (int k = 0; ok && k < n; k++)
		ok = (f[k] = fopen(paths[k], "r")) != NULL;
	if (!ok)
		fprintf(stderr, "batchgen merge: cannot read the input and the shards again\n");
	char *a = NULL, *b = NULL, want[256], got[256];
	size_t cap_a = 0, cap_b = 0;
	for (int64_t l = 0; ok; l++) {
		ssize_t la = getline(&a, &cap_a, in);
		if (la < 0)
			break;
		int k = (int)(l % n);
		if (l / n >= count[k])
			break; /* counted before: cannot happen unless a file changed */
		ssize_t lb = getline(&b, &cap_b, f[k]);
		if (lb <= 0) {
			fprintf(stderr, "batchgen merge: %s changed while merging\n", paths[k]);
			ok = false;
			break;
		}
		if (!merge_want_id(a, (size_t)la, l + 1, want, sizeof want) ||
		    !merge_got_id(b, (size_t)lb, got, sizeof got) || strcmp(want, got) == 0)
			continue;
		fprintf(stderr,
			"batchgen merge: input line %lld has id \"%s\" but its result, line %lld "
			"of %s, has \"%s\": name the shards in shard order, 0 first (a shell glob "
			"puts out.10 before out.2), each from a --shard K/%d run of %s\n",
			(long long)(l + 1), want, (long long)(l / n + 1), paths[k], got, n,
			in_path);
		ok = false;
	}
	free(a);
	free(b);
	for (int k = 0; f && k < n; k++)
		if (f[k])
			fclose(f[k]);
	free(f);
	if (in)
		fclose(in);
	return ok;
}

int cmd_merge(int argc, char **argv)
{
	const char *out_path = "-", *in_path = NULL;
	static const struct option longs[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"input", required_argument, NULL, 'i'},
	    {"help", no_argument, NULL, 'h'},
	    {0, 0, 0, 0},
	};
	optind = 0;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, ":o:i:h", longs, NULL)) != -1) {
		switch (ch) {
		case 'o': out_path = optarg; break;
		case 'i': in_path = optarg; break;
		case 'h': merge_usage(stdout); return CLI_EXIT_OK;
		case ':':
			fprintf(stderr, "batchgen merge: option %s needs an argument\n",
				argv[optind - 1]);
			return CLI_EXIT_USAGE;
		default:
			fprintf(stderr,
				"batchgen merge: unknown option %s\nTry 'batchgen merge "
				"--help'.\n",
				argv[optind - 1]);
			return CLI_EXIT_USAGE;
		}
	}
	int n = argc - optind;
	char **paths = argv + optind;
	if (n < 1) {
		fprintf(stderr, "batchgen merge: name the shard outputs, shard 0 first\n");
		merge_usage(stderr);
		return CLI_EXIT_USAGE;
	}

	/* -o naming a shard output or the input would truncate it before it is read */
	for (int k = -1; k < n && !outputs_is_stdout(out_path); k++) {
		const char *src = k < 0 ? in_path : paths[k];
		if (src && outputs_same_file(out_path, src)) {
			fprintf(stderr,
				"batchgen merge: -o %s is %s; write the merged results "
				"elsewhere\n",
				out_path,
				k < 0 ? "the input file (-i)" : "one of the shard outputs");
			return CLI_EXIT_USAGE;
		}
	}

	/* ---- check the counts before writing anything ---- */
	int64_t *count = calloc((size_t)n, sizeof *count);
	FILE **f = calloc((size_t)n, sizeof *f);
	if (!count || !f) {
		free(count);
		free(f);
		fprintf(stderr, "batchgen merge: out of memory\n");
		return CLI_EXIT_MODEL;
	}
	int rc = CLI_EXIT_OK;
	int64_t total = 0;
	for (int k = 0; k < n; k++) {
		if (!count_file(paths[k], true, &count[k])) {
			rc = CLI_EXIT_USAGE;
			goto out;
		}
		total += count[k];
	}
	for (int k = 1; k < n; k++) {
		if (count[k] > count[k - 1] || count[k] < count[0] - 1) {
			fprintf(
			    stderr,
			    "batchgen merge: %s has %lld results but %s has %lld: the shards are "
			    "incomplete or not named in shard order (0 first)\n",
			    paths[k], (long long)count[k], paths[0], (long long)count[0]);
			rc = CLI_EXIT_USAGE;
			goto out;
		}
	}
	if (in_path) {
		int64_t lines;
		if (!count_file(in_path, false, &lines)) {
			rc = CLI_EXIT_USAGE;
			goto out;
		}
		for (int k = 0; k < n; k++) {
			int64_t want = lines > k ? (lines - k + n - 1) / n : 0;
			if (count[k] != want) {
				fprintf(
				    stderr,
				    "batchgen merge: %s has %lld results, but shard %d/%d of %s "
				    "(%lld lines) has %lld; finish it with `batchgen run "
				    "--resume`\n",
				    paths[k], (long long)count[k], k, n, in_path, (long long)lines,
				    (long long)want);
				rc = CLI_EXIT_USAGE;
				goto out;
			}
		}
		if (!merge_check_ids(in_path, paths, n, count)) {
			rc = CLI_EXIT_USAGE;
			goto out;
		}
	}

	/* ---- round-robin ---- */
	for (int k = 0; k < n; k++) {
		if (!(f[k] = fopen(paths[k], "r"))) {
			fprintf(stderr, "batchgen merge: cannot open %s: %s\n", paths[k],
				strerror(errno));
			rc = CLI_EXIT_USAGE;
			goto out;
		}
	}
	FILE *out = outputs_open(out_path, "w");
	if (!out) {
		fprintf(stderr, "batchgen merge: cannot open %s: %s\n", out_path, strerror(errno));
		rc = CLI_EXIT_USAGE;
		goto out;
	}
	char *line = NULL;
	size_t cap = 0;
	int64_t written = 0;
	bool werr = false;
	for (int64_t i = 0; written < total && !werr; i++) {
		for (int k = 0; k < n && !werr; k++) {
			if (i >= count[k])
				continue;
			ssize_t len = getline(&line, &cap, f[k]);
			if (len <= 0) {
				fprintf(stderr, "batchgen merge: %s changed while merging\n",
					paths[k]);
				werr = true;
				break;
			}
			werr = fwrite(line, 1, (size_t)len, out) != (size_t)len;
			written++;
		}
	}
	free(line);
	if (!outputs_close(out))
		werr = true;
	if (werr) {
		fprintf(stderr, "batchgen merge: cannot write %s\n",
			outputs_is_stdout(out_path) ? "standard output" : out_path);
		rc = CLI_EXIT_MODEL;
	}
out:
	for (int k = 0; k < n; k++)
		if (f[k])
			fclose(f[k]);
	free(f);
	free(count);
	return rc;
}
