#include "cli/options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/backend_cpu.h"
#include "gpu/backend_cuda.h"
#include "cli/model_spec.h"
#include "cli/version.h"

/* ------------------------------------------------------------------------------------ */
/* The table                                                                            */
/* ------------------------------------------------------------------------------------ */

enum opt_kind {
	K_STR,	  /* const char *, the argument itself */
	K_I32,	  /* int32_t within [lo, hi] */
	K_I64,	  /* int64_t within [lo, hi] */
	K_U64,	  /* uint64_t */
	K_F64,	  /* double within [lo, hi] */
	K_TRUE,	  /* bool set to true, no argument */
	K_FALSE,  /* bool set to false, no argument */
	K_ENUM,	  /* int: the index of the argument in choices ("a|b|c") */
	K_DEVICE, /* auto | cpu | cuda[:N] */
	K_SHARD,  /* K/N | auto */
	K_HELP,
	K_VERSION,
	K_PARAMS, /* not an option: where the flags of io/params' table are listed */
};

struct opt_def {
	const char *name; /* long name, without "--" */
	int letter;	  /* short option, 0 = none */
	enum opt_kind kind;
	size_t off;	     /* offset of the field in struct opt_config */
	const char *def;     /* default as it would be written on the command line; NULL: unset */
	const char *meta;    /* argument placeholder in the help; NULL for flags */
	unsigned cmds;	     /* enum opt_cmd mask */
	double lo, hi;	     /* numeric range (inclusive) */
	const char *choices; /* K_ENUM: "a|b|c" in the order of the enum's values */
	const char *help;
};

#define F(field) offsetof(struct opt_config, field)
#define RUN	 OPT_CMD_RUN
#define BENCH	 OPT_CMD_BENCH
#define BOTH	 OPT_CMD_BOTH
#define NOLIM	 0, 0

/* Every option of run and bench. Defaults: TensorRT-LLM's capacity policy (guaranteed no evict) and
 * free-memory fraction (0.9); vLLM's 256 sequences and 8192 tokens per iteration. */
static const struct opt_def opt_table[] = {
    /* files */
    {"model", 'm', K_STR, F(model), NULL, "FILE", BOTH, NOLIM, NULL,
     "GGUF model file, hf:OWNER/REPO[:QUANT|/FILE.gguf][@REV] (Hugging Face, through "
     "its hub cache), or synthetic:NAME (default: the built-in stories260K)"},
    {"offline", 0, K_TRUE, F(offline), NULL, NULL, BOTH, NOLIM, NULL,
     "hf: models from the hub cache only, never the network (also HF_HUB_OFFLINE=1)"},
    {"input", 'i', K_STR, F(input), "-", "FILE", RUN, NOLIM, NULL,
     "JSONL requests to read, - for standard input"},
    {"output", 'o', K_STR, F(output), "-", "FILE", RUN, NOLIM, NULL,
     "JSONL results to write, - for standard output"},
    {"stats", 0, K_STR, F(stats), NULL, "FILE", BOTH, NOLIM, NULL,
     "write one JSON line of statistics per engine iteration to FILE (- is stdout)"},
    {"report", 0, K_STR, F(report), NULL, "FILE", BOTH, NOLIM, NULL,
     "write a JSON summary of the run (throughput, latency percentiles) to FILE (- is stdout)"},
    /* device */
    {"device", 0, K_DEVICE, F(device), "auto", "DEV", BOTH, NOLIM, NULL,
     "auto, cpu, cuda or cuda:N; auto picks CUDA when a device is present"},
    {"threads", 0, K_I32, F(threads), "0", "N", BOTH, 0, 4096, NULL,
     "CPU backend and grammar-mask threads, 0 = all cores"},
    /* engine */
    {"policy", 0, K_ENUM, F(policy), "no-evict", "P", BOTH, NOLIM,
     "no-evict|max-util|static|adaptive",
     "capacity scheduling: no-evict, max-util, static or adaptive"},
    {"preempt", 0, K_ENUM, F(preempt), "recompute", "MODE", BOTH, NOLIM, "recompute|swap",
     "how max-util resumes a paused request: recompute or swap"},
    {"order", 0, K_ENUM, F(order), "input", "ORDER", RUN, NOLIM, "input|completion",
     "write results in input order, or as soon as each completes"},
    {"max-batch-size", 0, K_I32, F(max_batch_size), "256", "N", BOTH, 1, 1 << 20, NULL,
     "most requests in one iteration"},
    {"max-num-tokens", 0, K_I32, F(max_num_tokens), "8192", "N", BOTH, 1, 1 << 24, NULL,
     "most tokens (context chunks + generation steps) in one iteration"},
    {"no-chunked-context", 0, K_FALSE, F(chunked_context), NULL, NULL, BOTH, NOLIM, NULL,
     "process each prompt in one iteration instead of in chunks"},
    {"no-prefix-cache", 0, K_FALSE, F(prefix_cache), NULL, NULL, BOTH, NOLIM, NULL,
     "do not reuse the KV blocks of prompt prefixes across requests"},
    {"state-checkpoints", 0, K_I32, F(state_checkpoints), "8", "N", BOTH, 0, 4096, NULL,
     "models with recurrent state: prefix states kept for block reuse, 0 = no reuse"},
    {"overlap", 0, K_ENUM, F(overlap), "auto", "MODE", BOTH, NOLIM, "auto|off|on",
     "start each step before the host has applied the step before: auto (on for CUDA), "
     "off or on; results are the same"},
    {"max-queued", 0, K_I32, F(max_queued), "1024", "N", BOTH, 1, 1 << 24, NULL,
     "requests read ahead of the running set (bounds memory)"},
    {"block-size", 0, K_I32, F(block_size), "32", "N", BOTH, 1, 4096, NULL,
     "tokens per KV cache block"},
    {"kv-tokens", 0, K_I64, F(kv_tokens), "0", "N", BOTH, 0, (double)(INT64_C(1) << 40), NULL,
     "KV cache size in tokens, 0 = size it from memory"},
    {"mem-fraction", 0, K_F64, F(mem_fraction), "0.9", "F", BOTH, 0.01, 1.0, NULL,
     "GPU: fraction of the memory left after the weights used for the KV cache"},
    {"max-seq-len", 0, K_I32, F(max_seq_len), "0", "N", BOTH, 0, 1 << 24, NULL,
     "longest sequence (prompt + output), 0 = the model's context length"},
    /* request defaults: the flags of io/params' table */
    {"", 0, K_PARAMS, 0, NULL, NULL, RUN, NOLIM, NULL, "(io/params' table: --max-tokens, ...)"},
    {"seed", 0, K_U64, F(seed), "0", "S", BOTH, NOLIM, NULL,
     "base seed: a request without \"seed\" samples with S + its line number; "
     "bench: the workload's seed"},
    {"chat-template", 0, K_STR, F(chat_template), NULL, "NAME", RUN, NOLIM, NULL,
     "chat template for chat requests (chatml, llama2, llama3, zephyr, ...; "
     "default: the model's own)"},
    {"chat-template-file", 0, K_STR, F(chat_template_file), NULL, "FILE", RUN, NOLIM, NULL,
     "a Jinja chat template for chat requests, run as transformers runs it"},
    {"chat-date", 0, K_STR, F(chat_date), NULL, "YYYY-MM-DD", RUN, NOLIM, NULL,
     "the date strftime_now gives chat templates (default: today); fix it for "
     "reproducible datasets"},
    /* run */
    {"resume", 0, K_TRUE, F(resume), NULL, NULL, RUN, NOLIM, NULL,
     "keep the complete results already in -o FILE and do only the missing requests"},
    {"shard", 0, K_SHARD, 0, "0/1", "K/N", RUN, NOLIM, NULL,
     "process input lines K, K+N, K+2N, ... (0-based); auto reads the rank from "
     "SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/PMI_SIZE"},
    {"progress-interval", 0, K_F64, F(progress_interval), "10", "S", BOTH, 0.01, 1e6, NULL,
     "seconds between progress lines when stderr is not a terminal"},
    {"quiet", 'q', K_TRUE, F(quiet), NULL, NULL, BOTH, NOLIM, NULL,
     "no progress and no summary on stderr (warnings and errors only)"},
    /* bench */
    {"workload", 0, K_STR, F(workload), NULL, "SPEC", BENCH, NOLIM, NULL,
     "bench: a workload id (F1..F6, V1, V2, S1, B1, P1, N8, N8S, N8L, N8LS, BW4) or ISL/OSL, "
     "with an optional xN count, e.g. 128/128x32"},
    {"requests", 0, K_I64, F(requests), "0", "N", BENCH, 0, 1e9, NULL,
     "bench: number of requests, 0 = the workload's default"},
    {"baseline", 0, K_STR, F(baseline), NULL, "FILE", BENCH, NOLIM, NULL,
     "bench: a previous --report; exit 4 when output tok/s regressed"},
    {"max-regression", 0, K_F64, F(max_regression), "5", "PCT", BENCH, 0, 100, NULL,
     "bench: largest allowed drop of output tok/s against --baseline, in percent"},
    {"warmup", 0, K_I32, F(warmup), "1", "N", BENCH, 0, 1 << 20, NULL,
     "bench: warm-up requests run before timing starts"},
    /* meta */
    {"help", 'h', K_HELP, 0, NULL, NULL, BOTH, NOLIM, NULL, "print this help and exit"},
    {"version", 0, K_VERSION, 0, NULL, NULL, BOTH, NOLIM, NULL,
     "print the version and the commit and exit"},
};

#define OPT_N (sizeof opt_table / sizeof opt_table[0])

/* ------------------------------------------------------------------------------------ */
/* Setting one option from its text                                                     */
/* ------------------------------------------------------------------------------------ */

static bool parse_i64(const char *s, int64_t *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return false;
	*out = v;
	return true;
}

/* Reads the first set of the rank/size pairs the launchers export. */
static bool shard_from_env(int64_t *k, int64_t *n)
{
	static const char *const pairs[][2] = {
	    {"SLURM_PROCID", "SLURM_NTASKS"},
	    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
	    {"PMI_RANK", "PMI_SIZE"},
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		const char *r = getenv(pairs[i][0]), *s = getenv(pairs[i][1]);
		if (r && s && parse_i64(r, k) && parse_i64(s, n))
			return true;
	}
	return false;
}

/* Sets the field of d from arg; on failure writes a sentence into msg. */
static bool opt_set(struct opt_config *c, const struct opt_def *d, const char *arg, char *msg,
		    size_t cap)
{
	char *base = (char *)c;
	switch (d->kind) {
	case K_STR: *(const char **)(base + d->off) = arg; return true;
	case K_TRUE:
	case K_FALSE: *(bool *)(base + d->off) = d->kind == K_TRUE; return true;
	case K_I32:
	case K_I64: {
		int64_t v;
		if (!params_text_int(arg, d->lo, d->hi, &v, msg, cap))
			return false;
		if (d->kind == K_I32)
			*(int32_t *)(base + d->off) = (int32_t)v;
		else
			*(int64_t *)(base + d->off) = v;
		return true;
	}
	case K_U64: {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(arg, &end, 10);
		if (errno || end == arg || *end || arg[0] == '-') {
			snprintf(msg, cap, "'%s' is not a non-negative integer", arg);
			return false;
		}
		*(uint64_t *)(base + d->off) = v;
		return true;
	}
	case K_F64: {
		double v;
		if (!params_text_num(arg, d->lo, d->hi, false, &v, msg, cap))
			return false;
		*(double *)(base + d->off) = v;
		return true;
	}
	case K_ENUM: {
		const char *p = d->choices;
		for (int idx = 0; *p; idx++) {
			const char *bar = strchr(p, '|');
			size_t n = bar ? (size_t)(bar - p) : strlen(p);
			if (strlen(arg) == n && strncmp(arg, p, n) == 0) {
				*(int *)(base + d->off) = idx;
				return true;
			}
			p += n + (bar ? 1 : 0);
		}
		snprintf(msg, cap, "'%s' is not one of %s", arg, d->choices);
		return false;
	}
	case K_DEVICE: {
		if (strcmp(arg, "auto") == 0) {
			c->device = OPT_DEVICE_AUTO;
			c->device_index = 0;
		} else if (strcmp(arg, "cpu") == 0) {
			c->device = OPT_DEVICE_CPU;
			c->device_index = 0;
		} else if (strcmp(arg, "cuda") == 0) {
			c->device = OPT_DEVICE_CUDA;
			c->device_index = 0;
		} else if (strncmp(arg, "cuda:", 5) == 0) {
			int64_t v;
			if (!parse_i64(arg + 5, &v) || v < 0 || v > 1024) {
				snprintf(msg, cap, "'%s' is not cuda:N with N a device number",
					 arg);
				return false;
			}
			c->device = OPT_DEVICE_CUDA;
			c->device_index = (int)v;
		} else {
			snprintf(msg, cap, "'%s' is not auto, cpu, cuda or cuda:N", arg);
			return false;
		}
		return true;
	}
	case K_SHARD: {
		int64_t k, n;
		if (strcmp(arg, "auto") == 0) {
			if (!shard_from_env(&k, &n)) {
				snprintf(
				    msg, cap,
				    "auto needs SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/"
				    "OMPI_COMM_WORLD_SIZE or PMI_RANK/PMI_SIZE in the environment");
				return false;
			}
		} else {
			const char *slash = strchr(arg, '/');
			char kbuf[32];
			size_t kl = slash ? (size_t)(slash - arg) : 0;
			if (!slash || kl == 0 || kl >= sizeof kbuf) {
				snprintf(msg, cap, "'%s' is not K/N", arg);
				return false;
			}
			memcpy(kbuf, arg, kl);
			kbuf[kl] = 0;
			if (!parse_i64(kbuf, &k) || !parse_i64(slash + 1, &n)) {
				snprintf(msg, cap, "'%s' is not K/N", arg);
				return false;
			}
		}
		if (n < 1 || k < 0 || k >= n) {
			snprintf(msg, cap, "shard %lld/%lld: need 0 <= K < N", (long long)k,
				 (long long)n);
			return false;
		}
		c->shard_k = k;
		c->shard_n = n;
		return true;
	}
	case K_HELP:
	case K_VERSION:
	case K_PARAMS: return true;
	}
	return false;
}

void opt_defaults(struct opt_config *c)
{
	memset(c, 0, sizeof *c);
	c->chunked_context = true; /* the K_FALSE flag --no-chunked-context turns it off */
	c->prefix_cache = true;	   /* --no-prefix-cache */
	params_defaults(&c->req, false);
	for (size_t i = 0; i < OPT_N; i++) {
		const struct opt_def *d = &opt_table[i];
		char msg[256];
		if (d->def)
			BG_ASSERT(opt_set(c, d, d->def, msg, sizeof msg));
	}
}

/* ------------------------------------------------------------------------------------ */
/* Help                                                                                 */
/* ------------------------------------------------------------------------------------ */

void opt_print_version(FILE *f)
{
	fprintf(f, "batchgen %s (commit %s)\n", cli_version(), cli_commit());
}

/* Writes text from column col (the cursor is there) to at most width columns, breaking
 * at spaces; continuation lines are indented to col. */
static void print_wrapped(FILE *f, const char *text, int col, int width)
{
	int room = width - col, at = 0;
	const char *p = text;
	while (*p) {
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, " ");
		if (at > 0 && at + 1 + (int)n > room) {
			fprintf(f, "\n%*s", col, "");
			at = 0;
		} else if (at > 0) {
			fputc(' ', f);
			at++;
		}
		fwrite(p, 1, n, f);
		at += (int)n;
		p += n;
	}
	fputc('\n', f);
}

static void usage_row(FILE *f, int letter, const char *name, const char *meta, const char *def,
		      const char *help)
{
	char lhs[64];
	if (letter)
		snprintf(lhs, sizeof lhs, "-%c, --%s%s%s", letter, name, meta ? " " : "",
			 meta ? meta : "");
	else
		snprintf(lhs, sizeof lhs, "    --%s%s%s", name, meta ? " " : "", meta ? meta : "");
	char text[512];
	if (def && meta)
		snprintf(text, sizeof text, "%s (default: %s)", help, def);
	else
		snprintf(text, sizeof text, "%s", help);
	fprintf(f, "  %-28s ", lhs);
	print_wrapped(f, text, 31, 80);
}

void opt_usage(FILE *f, unsigned cmd)
{
	if (cmd == OPT_CMD_BENCH)
		fprintf(f,
			"usage: batchgen bench [-m MODEL] --workload SPEC [--report FILE] "
			"[options]\n\n"
			"Runs a synthetic workload through the engine and reports throughput.\n\n");
	else
		fprintf(f,
			"usage: batchgen [run] [-m MODEL] [-i IN.jsonl|-] [-o OUT.jsonl|-]\n"
			"                      [--stats FILE] [options]\n\n"
			"Reads one JSON request per line, generates with continuous batching, and\n"
			"writes one JSON result per line. Results go to stdout (or -o); logs,\n"
			"progress and the summary go to stderr.\n\n");
	fprintf(f, "options:\n");
	for (size_t i = 0; i < OPT_N; i++) {
		const struct opt_def *d = &opt_table[i];
		if (!(d->cmds & cmd))
			continue;
		if (d->kind == K_PARAMS) {
			for (size_t j = 0; j < params_count; j++) {
				const struct param_def *p = &params_table[j];
				if (p->cli)
					usage_row(f, 0, p->cli, p->meta, p->def, p->help);
			}
			continue;
		}
		usage_row(f, d->letter, d->name, d->meta, d->def, d->help);
	}
	fprintf(f, "\nMODEL: a GGUF file; hf:OWNER/REPO[:QUANT] (default :Q4_K_M; or "
		   "/FILE.gguf, @REVISION)\nfrom the Hugging Face hub cache ($HF_HUB_CACHE, else "
		   "$HF_HOME/hub, else\n~/.cache/huggingface/hub), downloaded from $HF_ENDPOINT "
		   "into it when missing,\nwith $HF_TOKEN for gated models; synthetic:NAME; or none: "
		   "the built-in stories260K.\n");
	if (cmd == OPT_CMD_RUN)
		fprintf(f,
			"\nexit status: 0 all requests succeeded, 1 some results are errors, "
			"2 usage error,\n3 model or device error, 130 interrupted (--resume "
			"finishes the run).\nSee batchgen(1) for the input and output formats.\n");
	else
		fprintf(f, "\nexit status: 0 ok, 2 usage error, 3 model or device error,\n"
			   "4 regression against --baseline.\n");
}

/* ------------------------------------------------------------------------------------ */
/* Parsing                                                                              */
/* ------------------------------------------------------------------------------------ */

bool opt_parse(struct opt_config *c, unsigned cmd, int argc, char **argv, int *exit_code)
{
	opt_defaults(c);
	/* long options: opt_table's rows (value 256 + row), then the parameter table's flags
	 * (value PARAM_OPT + row) */
	enum { PARAM_OPT = 256 + (int)OPT_N };
	struct option longs[OPT_N + PARAMS_MAX + 1];
	size_t nl = 0;
	char shorts[2 * OPT_N + 2];
	size_t ns = 0;
	shorts[ns++] = ':'; /* report a missing argument as ':' */
	for (size_t i = 0; i < OPT_N; i++) {
		const struct opt_def *d = &opt_table[i];
		if (d->kind == K_PARAMS)
			continue;
		longs[nl++] = (struct option){d->name, d->meta ? required_argument : no_argument,
					      NULL, 256 + (int)i};
		if (d->letter) {
			shorts[ns++] = (char)d->letter;
			if (d->meta)
				shorts[ns++] = ':';
		}
	}
	BG_ASSERT(params_count <= PARAMS_MAX);
	for (size_t j = 0; j < params_count; j++) {
		const struct param_def *p = &params_table[j];
		if (p->cli)
			longs[nl++] =
			    (struct option){p->cli, p->meta ? required_argument : no_argument, NULL,
					    PARAM_OPT + (int)j};
	}
	longs[nl] = (struct option){0, 0, 0, 0};
	shorts[ns] = 0;
	const char *cmdname = cmd == OPT_CMD_BENCH ? "bench" : "run";

	optind = 0; /* glibc: full reinitialization, so opt_parse may be called again */
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		const struct opt_def *d = NULL;
		if (ch >= PARAM_OPT && ch < PARAM_OPT + (int)params_count) {
			/* a request default (run only) */
			const struct param_def *p = &params_table[ch - PARAM_OPT];
			char msg[256];
			if (!(cmd & OPT_CMD_RUN)) {
				fprintf(stderr, "batchgen %s: --%s is not an option of %s\n",
					cmdname, p->cli, cmdname);
				*exit_code = 2;
				return false;
			}
			if (!params_set_text(&c->req, p, optarg, msg, sizeof msg)) {
				fprintf(stderr, "batchgen %s: --%s: %s\n", cmdname, p->cli, msg);
				*exit_code = 2;
				return false;
			}
			c->req_given[ch - PARAM_OPT] = true;
			continue;
		}
		if (ch >= 256 && ch < 256 + (int)OPT_N) {
			d = &opt_table[ch - 256];
		} else if (ch == '?' || ch == ':') {
			const char *what = argv[optind - 1];
			if (ch == ':')
				fprintf(stderr, "batchgen %s: option %s needs an argument\n",
					cmdname, what);
			else if (optopt && (optopt < 256))
				fprintf(stderr, "batchgen %s: unknown option -%c\n", cmdname,
					optopt);
			else
				fprintf(stderr, "batchgen %s: unknown option %s\n", cmdname, what);
			fprintf(stderr, "Try 'batchgen %s--help'.\n",
				cmd == OPT_CMD_BENCH ? "bench " : "");
			*exit_code = 2;
			return false;
		} else {
			for (size_t i = 0; i < OPT_N; i++)
				if (opt_table[i].letter == ch)
					d = &opt_table[i];
		}
		BG_ASSERT(d != NULL);
		if (!(d->cmds & cmd)) {
			fprintf(stderr, "batchgen %s: --%s is not an option of %s\n", cmdname,
				d->name, cmdname);
			*exit_code = 2;
			return false;
		}
		if (d->kind == K_HELP) {
			opt_usage(stdout, cmd);
			*exit_code = 0;
			return false;
		}
		if (d->kind == K_VERSION) {
			opt_print_version(stdout);
			*exit_code = 0;
			return false;
		}
		char msg[256];
		if (!opt_set(c, d, optarg, msg, sizeof msg)) {
			fprintf(stderr, "batchgen %s: --%s: %s\n", cmdname, d->name, msg);
			*exit_code = 2;
			return false;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "batchgen %s: unexpected argument '%s'\nTry 'batchgen %s--help'.\n",
			cmdname, argv[optind], cmd == OPT_CMD_BENCH ? "bench " : "");
		*exit_code = 2;
		return false;
	}
	/* combinations */
	if (c->resume && strcmp(c->output, "-") == 0) {
		fprintf(stderr, "batchgen %s: --resume needs -o FILE (the results to complete)\n",
			cmdname);
		*exit_code = 2;
		return false;
	}
	if (cmd == OPT_CMD_BENCH && !c->workload) {
		fprintf(stderr, "batchgen bench: --workload SPEC is required\n");
		*exit_code = 2;
		return false;
	}
	*exit_code = 0;
	return true;
}

/* ------------------------------------------------------------------------------------ */
/* Configurations                                                                       */
/* ------------------------------------------------------------------------------------ */

void opt_engine_config(const struct opt_config *c, struct engine_config *out)
{
	engine_config_default(out);
	out->policy = (enum engine_policy)c->policy;
	out->preempt = (enum engine_preempt)c->preempt;
	out->order = (enum engine_order)c->order;
	out->max_batch_size = c->max_batch_size;
	out->max_num_tokens = c->max_num_tokens;
	out->chunked_context = c->chunked_context;
	out->prefix_cache = c->prefix_cache;
	out->state_checkpoints = c->state_checkpoints;
	out->overlap = c->overlap - 1;
	out->max_queued = c->max_queued;
	out->max_seq_len = c->max_seq_len;
	out->constrain_threads = c->threads;
	out->stats = NULL; /* the command opens --stats */
}

void opt_backend_config(const struct opt_config *c, struct backend_config *out)
{
	memset(out, 0, sizeof *out);
	out->block_size = c->block_size;
	out->kv_tokens = c->kv_tokens;
	out->mem_fraction = (float)c->mem_fraction;
	out->n_threads = c->threads;
	out->device_index = c->device_index;
	/* a recurrent model's backend keeps a state for each running sequence, and the
	 * engine's state checkpoints (engine_create) */
	out->n_state_slots = c->max_batch_size + (c->prefix_cache ? c->state_checkpoints : 0);
}

void opt_jsonl_defaults(const struct opt_config *c, struct jsonl_defaults *d)
{
	jsonl_defaults_init(d);
	for (size_t j = 0; j < params_count; j++) {
		if (!c->req_given[j])
			continue;
		params_copy(&d->native, &c->req, &params_table[j]);
		params_copy(&d->openai, &c->req, &params_table[j]);
	}
	d->native.sampling.seed = d->openai.sampling.seed = c->seed;
}

const char *opt_device_name(const struct opt_config *c, char *buf, size_t cap)
{
	switch (c->device) {
	case OPT_DEVICE_AUTO: snprintf(buf, cap, "auto"); break;
	case OPT_DEVICE_CPU: snprintf(buf, cap, "cpu"); break;
	case OPT_DEVICE_CUDA: snprintf(buf, cap, "cuda:%d", c->device_index); break;
	}
	return buf;
}

/* ------------------------------------------------------------------------------------ */
/* Model, tokenizer, backend                                                            */
/* ------------------------------------------------------------------------------------ */

bool opt_use_cuda(const struct opt_config *c)
{
	/* device_count answers 0 without loading the CUDA library when there is no driver,
	 * so that `auto` costs nothing on a machine without a GPU. A driver too old for this
	 * build is worth a warning: the user has a GPU and would otherwise not learn why it
	 * sits idle. */
	if (c->device == OPT_DEVICE_CUDA)
		return true;
	if (c->device != OPT_DEVICE_AUTO)
		return false;
	char why[BG_ERR_MSG];
	if (backend_cuda_device_count(why, sizeof why) > 0)
		return true;
	if (why[0])
		fprintf(stderr, "batchgen: warning: %s; running on the CPU\n", why);
	return false;
}

/* cpu: the CPU backend whatever c->device says (auto's fallback). */
static enum bg_status open_runtime(const struct opt_config *c, bool lazy, bool cpu,
				   struct opt_runtime *rt, struct bg_err *err)
{
	memset(rt, 0, sizeof *rt);
	char *spec = NULL;
	enum bg_status st = model_spec_resolve(c->model, c->offline, c->quiet, &spec, err);
	if (st != BG_OK)
		goto fail;
	st = model_open(spec, lazy, &rt->model, err);
	free(spec);
	if (st != BG_OK)
		goto fail;
	if (rt->model->gguf) {
		st = tok_load(rt->model->gguf, &rt->tok, err);
		if (st != BG_OK)
			goto fail;
	}
	struct backend_config bc;
	opt_backend_config(c, &bc);
	if (!cpu && opt_use_cuda(c)) {
		struct bg_err cerr = {0};
		st = backend_cuda_create(rt->model, &bc, &rt->backend, &cerr);
		/* auto: a model the CUDA backend does not take (heads over 256, say) runs on
		 * the CPU, as when there is no device; cuda stays an error. The model opened
		 * serves the CPU backend as it is, but a lazy synthetic one (weights to be
		 * filled on the device, no tokenizer) is opened again with its weights in host
		 * memory. */
		if (st == BG_ERR_UNSUPPORTED && c->device == OPT_DEVICE_AUTO) {
			fprintf(stderr, "batchgen: warning: %s; running on the CPU\n", cerr.msg);
			if (rt->model->synthetic) {
				opt_close_runtime(rt);
				return open_runtime(c, false, true, rt, err);
			}
			st = backend_cpu_create(rt->model, &bc, &rt->backend, err);
		} else if (st != BG_OK && err) {
			*err = cerr;
		}
	} else {
		st = backend_cpu_create(rt->model, &bc, &rt->backend, err);
	}
	if (st != BG_OK)
		goto fail;
	return BG_OK;
fail:
	opt_close_runtime(rt);
	return st;
}

enum bg_status opt_open_runtime(const struct opt_config *c, bool lazy, struct opt_runtime *rt,
				struct bg_err *err)
{
	return open_runtime(c, lazy, false, rt, err);
}

void opt_close_runtime(struct opt_runtime *rt)
{
	if (!rt)
		return;
	backend_destroy(rt->backend);
	tok_free(rt->tok);
	model_free(rt->model);
	memset(rt, 0, sizeof *rt);
}
