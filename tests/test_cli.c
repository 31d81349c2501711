/* test_cli: the command line's own pieces, without running a model: the option table
 * (every default parses, ranges and combinations are refused, --shard forms), the id set
 * (its SipHash against the reference vectors; seen/done counts, 1M ids through many
 * resizes, runs of numbered ids and their memory, and a random mix against a plain
 * string-counting model), the latency histogram's percentiles against an exact sort, and
 * resume_scan on hand-made output files.
 *
 * cli/ is not part of libbatchgen.a, so the sources are compiled into this program. */
#include "cli/idset.c"
#include "cli/json_file.c"
#include "cli/model_spec.c"
#include "cli/options.c"
#include "cli/outputs.c"
#include "cli/progress.c"
#include "cli/resume.c"
#include "cli/version.c"

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
	CHECK(c.req.max_tokens == 16 && c.req.sampling.temperature == 0 &&
		  c.req.sampling.top_p == 1 && c.req.sampling.top_k == 0,
	      "request defaults");
	CHECK(c.req.logprobs == -1 && !c.req.ignore_eos, "no logprobs by default");
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
	CHECK(c.req.max_tokens == 7 && c.req.sampling.temperature == 0.5f, "numbers");
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
	CHECK(d.native.max_tokens == 7 && d.native.sampling.temperature == 0.5f &&
		  d.native.sampling.seed == UINT64_MAX,
	      "jsonl defaults");
	/* flags given set OpenAI lines' defaults too; others keep OpenAI's own */
	CHECK(d.openai.max_tokens == 7 && d.openai.sampling.temperature == 0.5f &&
		  d.openai.sampling.seed == UINT64_MAX && d.openai.sampling.top_p == 1.0f,
	      "jsonl OpenAI defaults follow the flags given");
	opt_defaults(&c);
	opt_jsonl_defaults(&c, &d);
	CHECK(d.openai.max_tokens == PARAMS_TO_END && d.openai.sampling.temperature == 1.0f &&
		  d.native.max_tokens == 16 && d.native.sampling.temperature == 0.0f,
	      "without flags: OpenAI lines to the end at temperature 1, native 16 greedy");

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

/* SipHash-2-4-128 against the reference implementation's vectors (veorq/SipHash
 * vectors.h, vectors_sip128): key 00 01 .. 0f, message 00 01 .. (len-1). */
static void test_siphash(void)
{
	static const struct {
		size_t len;
		unsigned char tag[16];
	} v[] = {
	    {0,
	     {0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6, 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55,
	      0x02, 0x93}},
	    {1,
	     {0xda, 0x87, 0xc1, 0xd8, 0x6b, 0x99, 0xaf, 0x44, 0x34, 0x76, 0x59, 0x11, 0x9b, 0x22,
	      0xfc, 0x45}},
	    {8,
	     {0x3b, 0x62, 0xa9, 0xba, 0x62, 0x58, 0xf5, 0x61, 0x0f, 0x83, 0xe2, 0x64, 0xf3, 0x14,
	      0x97, 0xb4}},
	    {15,
	     {0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8, 0x11, 0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf,
	      0xc3, 0xd9}},
	    {63,
	     {0x51, 0x50, 0xd1, 0x77, 0x2f, 0x50, 0x83, 0x4a, 0x50, 0x3e, 0x06, 0x9a, 0x97, 0x3f,
	      0xbd, 0x7c}},
	};
	const uint64_t key[2] = {0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
	unsigned char msg[64];
	for (int i = 0; i < 64; i++)
		msg[i] = (unsigned char)i;
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		uint64_t h[2];
		siphash128(key, msg, v[i].len, h);
		unsigned char tag[16];
		for (int b = 0; b < 8; b++) {
			tag[b] = (unsigned char)(h[0] >> (8 * b));
			tag[8 + b] = (unsigned char)(h[1] >> (8 * b));
		}
		CHECK(memcmp(tag, v[i].tag, 16) == 0, "siphash128 of %zu bytes", v[i].len);
	}
}

static int idf(char *buf, size_t cap, const char *fmt, long long i)
{
	return snprintf(buf, cap, fmt, i);
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
	CHECK(idset_size(s) == 0 && idset_bytes(s) < 4096, "ids counting up are a run: %zu, %zu B",
	      idset_size(s), idset_bytes(s));
	CHECK(idset_add_seen(s, "id-17", 5) == 2, "second sight");
	CHECK(idset_done(s, "id-17", 5) == 0, "not done");
	CHECK(idset_add_done(s, "id-17", 5) == 1 && idset_done(s, "id-17", 5) == 1, "done");
	CHECK(idset_add_seen(s, "id-17", 5) == 3 && idset_add_done(s, "id-17", 5) == 2 &&
		  idset_done(s, "id-17", 5) == 2,
	      "counts past the tag's states");
	CHECK(idset_done(s, "id-1", 4) == 0, "a prefix is another id");
	CHECK(idset_add_seen(s, "", 0) == 1, "the empty id is an id");
	/* ids that differ in one byte, or only in length, are different */
	CHECK(idset_add_seen(s, "ab\0c", 4) == 1 && idset_add_seen(s, "ab\0d", 4) == 1,
	      "embedded NUL");
	CHECK(idset_add_seen(s, "ab", 2) == 1 && idset_add_seen(s, "ab\0", 3) == 1, "length");
	/* the ways of writing a number are different ids */
	CHECK(idset_add_seen(s, "q5", 2) == 1 && idset_add_seen(s, "q05", 3) == 1 &&
		  idset_add_seen(s, "q005", 4) == 1 && idset_add_seen(s, "q0", 2) == 1 &&
		  idset_add_seen(s, "q00", 3) == 1 && idset_add_seen(s, "q6", 2) == 1 &&
		  idset_add_seen(s, "q05", 3) == 2 && idset_add_seen(s, "q5", 2) == 2,
	      "q5 q05 q005 q0 q00");
	CHECK(idset_add_seen(s, "x9999999999999999999", 20) == 1 &&
		  idset_add_seen(s, "x9999999999999999999", 20) == 2 &&
		  idset_add_seen(s, "x123456789012345678", 19) == 1 &&
		  idset_add_seen(s, "x123456789012345678", 19) == 2,
	      "19 and 18 digits");
	/* done before seen (--resume), then seen: the counts of each state */
	CHECK(idset_add_done(s, "r", 1) == 1 && idset_add_seen(s, "r", 1) == 1 &&
		  idset_done(s, "r", 1) == 1,
	      "done then seen");
	CHECK(idset_add_seen(s, "r", 1) == 2 && idset_done(s, "r", 1) == 1, "then seen twice");
	idset_destroy(s);
	idset_destroy(NULL);

	/* the table's identity is (key, fingerprint): equal keys with other fingerprints, or
	 * equal fingerprints with other keys, are other ids (hashes forced here) */
	s = idset_create();
	uint32_t seen, done;
	struct hashed a = {12345, 7}, b = {12345, 8}, c = {12346, 7};
	CHECK(table_add(s, a, 1, 0, &seen, &done) && seen == 1, "a");
	CHECK(table_add(s, b, 1, 0, &seen, &done) && seen == 1, "same key, other fingerprint");
	CHECK(table_add(s, c, 1, 0, &seen, &done) && seen == 1, "same fingerprint, other key");
	CHECK(table_add(s, a, 1, 0, &seen, &done) && seen == 2, "a again");
	idset_destroy(s);

	/* more families than are kept: the rest go to the table, exactly */
	s = idset_create();
	int ok = 0;
	for (int k = 1; k <= 3; k++)
		for (int f = 0; f < 20; f++) {
			int n = snprintf(id, sizeof id, "%c%d", 'a' + f, k);
			ok += idset_add_seen(s, id, (size_t)n) == 1;
		}
	CHECK(ok == 60 && s->nfam == MAX_FAMILIES && idset_size(s) == 4 * 3,
	      "20 families: %d ok, %zu kept, %zu in the table", ok, s->nfam, idset_size(s));
	for (int f = 0; f < 20; f++) {
		int n = snprintf(id, sizeof id, "%c%d", 'a' + f, 2);
		ok += idset_add_seen(s, id, (size_t)n) == 2;
	}
	CHECK(ok == 80, "their duplicates: %d", ok - 60);
	idset_destroy(s);

	/* 1M sequential ids ("request-<n>", OpenAI's example): one run; every 7th again: a
	 * duplicate (those go to the table) */
	enum { N = 1000000 };
	s = idset_create();
	ok = 0;
	for (int i = 1; i <= N; i++) {
		int n = idf(id, sizeof id, "request-%lld", i);
		ok += idset_add_seen(s, id, (size_t)n) == 1;
	}
	CHECK(ok == N && idset_bytes(s) < 4096, "request-<n>: %d ones, %zu bytes", ok,
	      idset_bytes(s));
	ok = 0;
	for (int i = 1; i <= N; i += 7) {
		int n = idf(id, sizeof id, "request-%lld", i);
		ok += idset_add_seen(s, id, (size_t)n) == 2;
	}
	CHECK(ok == (N + 6) / 7, "request-<n> duplicates: %d", ok);
	idset_destroy(s);

	/* The table: 1M distinct ids that do not end in a digit, through about twenty
	 * resizes: none is taken for another (every first sight is 1, every done count exact
	 * afterwards), every real duplicate is found, and the table stays within 20 bytes an
	 * id (plus its last segment) */
	s = idset_create();
	int ones = 0;
	size_t max_bytes = 0;
	for (int i = 0; i < N; i++) {
		int n = idf(id, sizeof id, "req-%lld.", i);
		ones += idset_add_seen(s, id, (size_t)n) == 1;
		if (i % 3 == 0)
			idset_add_done(s, id, (size_t)n);
		size_t by = idset_bytes(s);
		max_bytes = by > max_bytes ? by : max_bytes;
	}
	CHECK(ones == N, "%d of %d distinct ids seen once", ones, N);
	CHECK(idset_size(s) == N, "size %zu", idset_size(s));
	CHECK(max_bytes <= (size_t)N * 20 + 100000, "%zu bytes for %d ids (%.1f an id)", max_bytes,
	      N, (double)max_bytes / N);
	int bad_done = 0, twos = 0;
	for (int i = 0; i < N; i++) {
		int n = idf(id, sizeof id, "req-%lld.", i);
		bad_done += idset_done(s, id, (size_t)n) != (i % 3 == 0);
		if (i % 7 == 0)
			twos += idset_add_seen(s, id, (size_t)n) == 2;
	}
	CHECK(bad_done == 0, "%d wrong done counts", bad_done);
	CHECK(twos == (N + 6) / 7, "%d of %d duplicates found", twos, (N + 6) / 7);
	int absent = 0;
	for (int i = N; i < N + 100000; i++) {
		int n = idf(id, sizeof id, "req-%lld.", i);
		absent += idset_done(s, id, (size_t)n) == 0;
	}
	CHECK(absent == 100000, "ids never added are absent: %d", absent);
	idset_destroy(s);

	/* 1M lines without ids (the id is the line number): nothing stored */
	s = idset_create();
	ones = 0;
	for (int i = 1; i <= N; i++) {
		int n = idf(id, sizeof id, "%lld", i);
		ones += idset_add_seen_line(s, id, (size_t)n, i) == 1;
	}
	CHECK(ones == N && idset_size(s) == 0, "line ids: %d ones, %zu in the table", ones,
	      idset_size(s));
	CHECK(idset_bytes(s) < 4096, "line ids cost %zu bytes", idset_bytes(s));
	/* a later line naming an earlier line's number is a duplicate; other spellings of
	 * the number are other ids */
	CHECK(idset_add_seen_line(s, "500", 3, N + 1) == 2, "explicit id = an earlier line's");
	CHECK(idset_add_seen_line(s, "0500", 4, N + 2) == 1, "a leading zero is another id");
	CHECK(idset_add_seen_line(s, "2000000", 7, N + 3) == 1, "a future line's number");
	CHECK(idset_add_seen_line(s, "2000000", 7, 2000000) == 2, "then that line");
	CHECK(idset_add_seen_line(s, "500", 3, 2000001) == 3, "third");
	idset_destroy(s);

	/* one shard's lines (K=2 of N=4: lines 3, 7, 11, ...) cost one run; numbers of lines
	 * this process never saw are not taken */
	s = idset_create();
	for (int i = 3; i < 40000; i += 4) {
		int n = idf(id, sizeof id, "%lld", i);
		CHECK(idset_add_seen_line(s, id, (size_t)n, i) == 1, "shard line %d", i);
	}
	CHECK(idset_bytes(s) < 4096, "a shard's line ids cost %zu bytes", idset_bytes(s));
	CHECK(idset_add_seen_line(s, "7", 1, 40003) == 2, "a line of this shard");
	CHECK(idset_add_seen_line(s, "9", 1, 40007) == 1, "a line of another shard");
	CHECK(idset_add_seen_line(s, "39999", 5, 40011) == 2, "its last line");
	CHECK(idset_add_seen_line(s, "40003", 5, 40015) == 1, "a line past it");
	idset_destroy(s);

	/* done ids that are line numbers, in order: one run; out of order: still exact */
	s = idset_create();
	for (int i = 1; i <= 100000; i++) {
		int n = idf(id, sizeof id, "%lld", i);
		idset_add_done(s, id, (size_t)n);
	}
	CHECK(idset_bytes(s) < 4096, "done line ids cost %zu bytes", idset_bytes(s));
	CHECK(idset_done(s, "1", 1) == 1 && idset_done(s, "100000", 6) == 1 &&
		  idset_done(s, "100001", 6) == 0 && idset_done(s, "0", 1) == 0,
	      "done runs");
	CHECK(idset_add_done(s, "5", 1) == 2 && idset_done(s, "5", 1) == 2, "done twice");
	/* --resume: line 5's first sight is skipped (done 2), so is line 5's id given again
	 * on a later line; a third sight runs */
	CHECK(idset_add_seen_line(s, "5", 1, 5) == 1, "line 5");
	CHECK(idset_add_seen_line(s, "5", 1, 100001) == 2, "5 again");
	CHECK(idset_add_seen_line(s, "5", 1, 100002) == 3 && idset_done(s, "5", 1) == 2,
	      "5 a third time: not done");
	idset_destroy(s);
}

/* The set against a plain model (counts by exact string comparison) over a random mix of
 * ids: lines without ids, ids naming other lines (earlier and later), other spellings of
 * numbers, 40 families (more than are kept) of ids in random order, done ids in and out
 * of order. */
enum { MODEL_OPS = 30000, MODEL_BASE = MODEL_OPS + 51, MODEL_U = MODEL_BASE + 8 + 40 * 50 };

/* Ids below MODEL_BASE are plain numbers, then "0<k>" (k < 8), then "<letter><k>" and
 * "<letter><k as 3 digits>" (20 letters, k < 50). */
static int model_id(char *buf, size_t cap, int u)
{
	if (u < MODEL_BASE)
		return idf(buf, cap, "%lld", u);
	if (u < MODEL_BASE + 8)
		return idf(buf, cap, "0%lld", u - MODEL_BASE);
	int j = u - MODEL_BASE - 8, fam = j / 50, k = j % 50;
	return snprintf(buf, cap, fam % 2 ? "%c%03d" : "%c%d", 'a' + fam / 2, k);
}

static void test_idset_model(void)
{
	static uint32_t mseen[MODEL_U], mdone[MODEL_U];
	memset(mseen, 0, sizeof mseen);
	memset(mdone, 0, sizeof mdone);
	struct idset *s = idset_create();
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	int bad = 0, line = 0, ndup = 0, nskip = 0;
	char id[32];
	for (int op = 0; op < MODEL_OPS; op++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		unsigned r = (unsigned)(rng >> 33);
		int u; /* the id's index in the model */
		unsigned kind = r % 16;
		if (kind < 6 || line < 2)
			u = line + 1; /* its own line number */
		else if (kind < 9)
			u = 1 + (int)((r >> 4) % (unsigned)(line + 50)); /* another line's */
		else if (kind < 10)
			u = MODEL_BASE + (int)((r >> 4) % 8);
		else
			u = MODEL_BASE + 8 + (int)((r >> 4) % (40 * 50));
		int n = model_id(id, sizeof id, u);
		if (r % 5 == 0) {
			/* a result already in the output file */
			uint32_t got = idset_add_done(s, id, (size_t)n);
			bad += got != ++mdone[u];
		} else {
			line++;
			uint32_t got = idset_add_seen_line(s, id, (size_t)n, line);
			bad += got != ++mseen[u];
			ndup += got > 1;
			nskip += got <= idset_done(s, id, (size_t)n);
		}
		if (op % 97 == 0) {
			uint32_t got = idset_done(s, id, (size_t)n);
			bad += got != mdone[u];
		}
	}
	CHECK(bad == 0, "%d answers differ from the model", bad);
	CHECK(ndup > 1000 && nskip > 1000, "the mix has duplicates (%d) and skips (%d)", ndup,
	      nskip);
	CHECK(idset_size(s) > 1000 && s->seen_lines.n > 100 && s->nfam == MAX_FAMILIES,
	      "the mix uses the table (%zu ids), line runs (%zu) and families (%zu)", idset_size(s),
	      s->seen_lines.n, s->nfam);
	int bad_done = 0;
	for (int u = 1; u < MODEL_U; u++) {
		int n = model_id(id, sizeof id, u);
		bad_done += idset_done(s, id, (size_t)n) != mdone[u];
	}
	CHECK(bad_done == 0, "%d done counts differ from the model", bad_done);
	idset_destroy(s);
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
	test_siphash();
	test_idset();
	test_idset_model();
	test_percentiles();
	test_resume();
	return check_summary();
}
