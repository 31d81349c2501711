/* test_cli: the command line's own pieces, without running a model: the option table
 * (every default parses, ranges and combinations are refused, --shard forms), the id set
 * (seen/done counts, growth), the latency histogram's percentiles against an exact sort,
 * and resume_scan on hand-made output files.
 *
 * cli/ is not part of libbatchgen.a, so the sources are compiled into this program. */
#include "../cli/idset.c"
#include "../cli/options.c"
#include "../cli/progress.c"
#include "../cli/resume.c"
#include "../cli/version.c"

#include <stdarg.h>

#include "check.h"

static bool parse(struct opt_config *c, unsigned cmd, int *code, const char *a0, ...)
{
	char *argv[32];
	int argc = 0;
	argv[argc++] = (char *)"run";
	va_list ap;
	va_start(ap, a0);
	for (const char *a = a0; a; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	/* silence the usage messages: they go to stderr */
	FILE *saved = stderr;
	stderr = fopen("/dev/null", "w");
	bool ok = opt_parse(c, cmd, argc, argv, code);
	fclose(stderr);
	stderr = saved;
	return ok;
}

static void test_options(void)
{
	struct opt_config c;
	int code = -1;
	CHECK(parse(&c, OPT_CMD_RUN, &code, NULL), "no arguments");
	CHECK(code == 0, "code %d", code);
	CHECK(strcmp(c.input, "-") == 0 && strcmp(c.output, "-") == 0, "stdin/stdout defaults");
	CHECK(c.model == NULL, "built-in model by default");
	CHECK(c.max_tokens == 16 && c.temperature == 0 && c.top_p == 1 && c.top_k == 0,
	      "request defaults");
	CHECK(c.logprobs == -1 && !c.ignore_eos, "no logprobs by default");
	CHECK(c.policy == ENGINE_POLICY_NO_EVICT && c.order == ENGINE_ORDER_INPUT,
	      "policy/order defaults");
	CHECK(c.chunked_context, "chunked context on by default");
	CHECK(c.shard_k == 0 && c.shard_n == 1, "no shard by default");
	CHECK(c.device == OPT_DEVICE_AUTO, "device auto");
	CHECK(c.mem_fraction == 0.9 && c.block_size == 32, "kv defaults");

	CHECK(parse(&c, OPT_CMD_RUN, &code, "-m", "x.gguf", "-i", "in", "-o", "out", "--policy",
		    "max-util", "--preempt", "swap", "--order", "completion", "--max-tokens", "7",
		    "--temperature", "0.5", "--seed", "18446744073709551615", "--device", "cuda:3",
		    "--no-chunked-context", "--shard", "2/5", "-q", NULL),
	      "a full command line");
	CHECK(strcmp(c.model, "x.gguf") == 0 && strcmp(c.input, "in") == 0 &&
		  strcmp(c.output, "out") == 0,
	      "files");
	CHECK(c.policy == ENGINE_POLICY_MAX_UTIL && c.preempt == ENGINE_PREEMPT_SWAP &&
		  c.order == ENGINE_ORDER_COMPLETION,
	      "enums map to the engine's values");
	CHECK(c.max_tokens == 7 && c.temperature == 0.5, "numbers");
	CHECK(c.seed == UINT64_MAX, "seed takes the full 64 bits");
	CHECK(c.device == OPT_DEVICE_CUDA && c.device_index == 3, "cuda:N");
	CHECK(!c.chunked_context && c.quiet, "flags");
	CHECK(c.shard_k == 2 && c.shard_n == 5, "shard");

	/* the engine and request configurations follow */
	struct engine_config ec;
	opt_engine_config(&c, &ec);
	CHECK(ec.policy == ENGINE_POLICY_MAX_UTIL && !ec.chunked_context, "engine config");
	struct jsonl_defaults d;
	opt_jsonl_defaults(&c, &d);
	CHECK(d.max_tokens == 7 && d.sampling.temperature == 0.5f && d.sampling.seed == UINT64_MAX,
	      "jsonl defaults");

	/* usage errors: exit 2 */
	const char *bad[][3] = {
	    {"--max-tokens", "0", NULL},   {"--max-tokens", "1x", NULL},
	    {"--top-p", "1.01", NULL},	   {"--temperature", "nan", NULL},
	    {"--policy", "always", NULL},  {"--device", "cuda:x", NULL},
	    {"--shard", "3/3", NULL},	   {"--shard", "-1/3", NULL},
	    {"--shard", "1/0", NULL},	   {"--shard", "12", NULL},
	    {"--logprobs", "21", NULL},	   {"--seed", "-1", NULL},
	    {"--workload", "F1", NULL},	   {"--resume", NULL, NULL},
	    {"--bogus", NULL, NULL},	   {"stray", NULL, NULL},
	    {"--mem-fraction", "0", NULL}, {"--block-size", "0", NULL},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		code = -1;
		bool ok = parse(&c, OPT_CMD_RUN, &code, bad[i][0], bad[i][1], NULL);
		CHECK(!ok && code == 2, "%s %s: ok %d code %d", bad[i][0],
		      bad[i][1] ? bad[i][1] : "", ok, code);
	}
	/* bench: its own options, and --workload is required */
	CHECK(!parse(&c, OPT_CMD_BENCH, &code, NULL) && code == 2, "bench needs --workload");
	CHECK(parse(&c, OPT_CMD_BENCH, &code, "--workload", "F1", "--requests", "9", "--baseline",
		    "b.json", "--max-regression", "10", NULL),
	      "bench options");
	CHECK(c.requests == 9 && c.max_regression == 10 && strcmp(c.baseline, "b.json") == 0,
	      "bench values");
	CHECK(!parse(&c, OPT_CMD_BENCH, &code, "--workload", "F1", "-i", "x", NULL) && code == 2,
	      "run-only options are refused by bench");

	/* --shard auto reads the launchers' variables, Slurm first */
	setenv("PMI_RANK", "1", 1);
	setenv("PMI_SIZE", "3", 1);
	CHECK(parse(&c, OPT_CMD_RUN, &code, "--shard", "auto", NULL) && c.shard_k == 1 &&
		  c.shard_n == 3,
	      "PMI");
	setenv("SLURM_PROCID", "4", 1);
	setenv("SLURM_NTASKS", "8", 1);
	CHECK(parse(&c, OPT_CMD_RUN, &code, "--shard", "auto", NULL) && c.shard_k == 4 &&
		  c.shard_n == 8,
	      "Slurm wins");
	setenv("SLURM_PROCID", "8", 1);
	CHECK(!parse(&c, OPT_CMD_RUN, &code, "--shard", "auto", NULL) && code == 2,
	      "rank >= size is refused");
	unsetenv("SLURM_PROCID");
	unsetenv("SLURM_NTASKS");
	unsetenv("PMI_RANK");
	unsetenv("PMI_SIZE");

	/* every row's default parses through the row itself (opt_defaults asserts it), and
	 * every option has help text */
	for (size_t i = 0; i < OPT_N; i++)
		CHECK(opt_table[i].help && opt_table[i].help[0], "--%s has help",
		      opt_table[i].name);
}

static void test_idset(void)
{
	struct idset *s = idset_create();
	CHECK(s != NULL, "create");
	char id[32];
	int first = 0;
	for (int i = 0; i < 5000; i++) {
		int n = snprintf(id, sizeof id, "id-%d", i);
		first += idset_add_seen(s, id, (size_t)n) == 1;
	}
	CHECK(first == 5000, "5000 distinct ids seen once: %d", first);
	CHECK(idset_size(s) == 5000, "size %zu", idset_size(s));
	CHECK(idset_add_seen(s, "id-17", 5) == 2, "second sight");
	CHECK(idset_done(s, "id-17", 5) == 0, "not done");
	CHECK(idset_add_done(s, "id-17", 5) == 1 && idset_done(s, "id-17", 5) == 1, "done");
	CHECK(idset_done(s, "id-1", 4) == 0, "a prefix is another id");
	CHECK(idset_add_seen(s, "", 0) == 1, "the empty id is an id");
	/* ids that differ in one byte, or only in length, are different */
	CHECK(idset_add_seen(s, "ab\0c", 4) == 1 && idset_add_seen(s, "ab\0d", 4) == 1,
	      "embedded NUL");
	idset_destroy(s);
	idset_destroy(NULL);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void test_percentiles(void)
{
	struct progress *p = progress_create(stderr, false, true, 10, -1);
	CHECK(isnan(progress_ttft_ms(p, 0.5)), "no data: NaN");
	enum { N = 20000 };
	static double v[N];
	uint64_t x = 12345;
	for (int i = 0; i < N; i++) {
		/* log-uniform over 0.01 ms .. 100 s, an LCG: independent of the histogram */
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		double u = (double)(x >> 11) / 9007199254740992.0;
		v[i] = 0.01 * pow(1e7, u);
		struct request r;
		memset(&r, 0, sizeof r);
		r.finish = REQ_FINISH_LENGTH;
		r.ttft_ms = v[i];
		r.e2e_ms = 2 * v[i];
		progress_result(p, &r);
	}
	qsort(v, N, sizeof v[0], cmp_double);
	const double qs[] = {0.01, 0.5, 0.9, 0.99, 1.0};
	for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
		/* nearest rank: the ceil(q N)-th smallest; buckets are 1% wide, so the answer is
		 * within 0.5% (the bucket's geometric middle) */
		double want = v[(int)ceil(qs[i] * N) - 1];
		double got = progress_ttft_ms(p, qs[i]);
		CHECK(fabs(got - want) <= 0.0051 * want, "q %.2f: got %g want %g", qs[i], got,
		      want);
		got = progress_e2e_ms(p, qs[i]);
		CHECK(fabs(got - 2 * want) <= 0.0051 * 2 * want, "e2e q %.2f", qs[i]);
	}
	struct request bad;
	memset(&bad, 0, sizeof bad);
	bad.finish = REQ_FINISH_ERROR;
	progress_result(p, &bad);
	CHECK(progress_n_ok(p) == N && progress_n_failed(p) == 1, "counts");
	progress_destroy(p);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

static void test_resume(void)
{
	char dir[] = "/tmp/test_cli_XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char path[64];
	snprintf(path, sizeof path, "%s/out.jsonl", dir);
	struct bg_err err;
	struct resume_stats rs;

	/* a missing file is an empty one */
	struct idset *s = idset_create();
	CHECK(resume_scan(path, s, &rs, &err) == BG_OK && rs.n_kept == 0 && rs.n_cut == 0,
	      "missing file");
	idset_destroy(s);

	/* whole lines kept, a torn tail cut */
	const char *good = "{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"b\",\"text\":\"y\"}\n";
	char text[256];
	snprintf(text, sizeof text, "%s{\"id\":\"c\",\"te", good);
	write_file(path, text);
	s = idset_create();
	CHECK(resume_scan(path, s, &rs, &err) == BG_OK, "torn: %s", err.msg);
	CHECK(rs.n_kept == 2 && rs.n_cut == 13 && rs.n_failed == 0, "kept %lld cut %lld",
	      (long long)rs.n_kept, (long long)rs.n_cut);
	CHECK(idset_done(s, "a", 1) == 1 && idset_done(s, "b", 1) == 1 &&
		  idset_done(s, "c", 1) == 0,
	      "ids done");
	FILE *f = fopen(path, "r");
	char buf[256] = {0};
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	CHECK(n == strlen(good) && memcmp(buf, good, n) == 0, "file cut to the whole lines");
	idset_destroy(s);

	/* a last line with a newline that is not JSON is cut too; OpenAI lines use custom_id */
	write_file(path, "{\"id\":\"batch_1\",\"custom_id\":\"r1\",\"response\":{}}\n{\"id\":\n");
	s = idset_create();
	CHECK(resume_scan(path, s, &rs, &err) == BG_OK && rs.n_kept == 1 && rs.n_cut == 7,
	      "bad last line: kept %lld cut %lld", (long long)rs.n_kept, (long long)rs.n_cut);
	CHECK(idset_done(s, "r1", 2) == 1 && idset_done(s, "batch_1", 7) == 0, "custom_id");
	idset_destroy(s);

	/* a bad line in the middle: refused, file untouched */
	const char *mid = "{\"id\":\"a\"}\nnot json\n{\"id\":\"b\"}\n";
	write_file(path, mid);
	s = idset_create();
	CHECK(resume_scan(path, s, &rs, &err) == BG_ERR_FORMAT, "bad middle line");
	CHECK(strstr(err.msg, "line 2") != NULL, "names the line: %s", err.msg);
	f = fopen(path, "r");
	memset(buf, 0, sizeof buf);
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	CHECK(n == strlen(mid), "untouched");
	idset_destroy(s);

	/* duplicates: the id counted as often as it appears */
	write_file(path, "{\"id\":\"a\"}\n{\"id\":\"a\"}\n");
	s = idset_create();
	CHECK(resume_scan(path, s, &rs, &err) == BG_OK && idset_done(s, "a", 1) == 2, "done twice");
	idset_destroy(s);

	/* error results are counted: native error objects, OpenAI error statuses */
	write_file(path, "{\"id\":\"a\",\"error\":null}\n"
			 "{\"id\":\"b\",\"error\":{\"code\":\"invalid_json\"}}\n"
			 "{\"id\":\"x\",\"custom_id\":\"c\",\"response\":{\"status_code\":200},"
			 "\"error\":null}\n"
			 "{\"id\":\"y\",\"custom_id\":\"d\",\"response\":{\"status_code\":400},"
			 "\"error\":null}\n");
	s = idset_create();
	CHECK(resume_scan(path, s, &rs, &err) == BG_OK && rs.n_kept == 4 && rs.n_failed == 2,
	      "failed %lld of %lld", (long long)rs.n_failed, (long long)rs.n_kept);
	idset_destroy(s);
	remove(path);
	rmdir(dir);
}

int main(void)
{
	test_options();
	test_idset();
	test_percentiles();
	test_resume();
	return check_summary();
}
