/* options: the one table of command-line options of `batchgen run` and `batchgen bench`,
 * their defaults and their meaning (llama2.c style: defaults declared in one place).
 *
 * Every option is a row of the table in options.c (the request defaults, --max-tokens,
 * --temperature, ..., are the rows of io/params' table, shown where opt_table says): long name, short letter, the field of
 * struct opt_config it sets, its default (as text, parsed by the same code as the command
 * line, so the help text and the behaviour cannot disagree), the commands it belongs to
 * and one line of help. opt_parse applies the defaults, then the command line
 * (getopt_long), then checks ranges and combinations.
 *
 * Also here, so that run and bench share it: opening the model, its tokenizer and the
 * backend named by --device (opt_open_runtime), and turning the options into the
 * engine's, the backend's and the request defaults' configuration.
 */
#ifndef BG_CLI_OPTIONS_H
#define BG_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "backend.h"
#include "engine/engine.h"
#include "io/jsonl_read.h"
#include "io/params.h"
#include "model/model.h"
#include "engine/request.h"
#include "sample/sampler.h"
#include "status.h"
#include "text/tokenizer.h"

/* Which commands an option belongs to (a mask). */
enum opt_cmd {
	OPT_CMD_RUN = 1,
	OPT_CMD_BENCH = 2,
	OPT_CMD_BOTH = 3,
};

enum opt_device {
	OPT_DEVICE_AUTO = 0, /* CUDA when compiled in and a device is present, else CPU */
	OPT_DEVICE_CPU,
	OPT_DEVICE_CUDA,
};

struct opt_config {
	/* ---- files ---- */
	const char *model;  /* -m: GGUF path, hf:OWNER/REPO[:TAG], synthetic:NAME; NULL =
			     * the built-in model */
	bool offline;	    /* --offline: hf: names from the hub cache only */
	const char *input;  /* -i: JSONL requests, "-" = stdin */
	const char *output; /* -o: JSONL results, "-" = stdout */
	const char *stats;  /* --stats: per-iteration JSONL, NULL = none */
	const char *report; /* --report: summary JSON, NULL = none */

	/* ---- device ---- */
	enum opt_device device;
	int device_index; /* cuda:N */
	int threads;	  /* CPU threads, 0 = all cores */

	/* ---- engine (DESIGN.md §4) ---- */
	int policy;  /* enum engine_policy */
	int preempt; /* enum engine_preempt */
	int order;   /* enum engine_order */
	int32_t max_batch_size;
	int32_t max_num_tokens;
	bool chunked_context;
	bool prefix_cache;
	int32_t state_checkpoints;
	int overlap; /* 0 auto, 1 off, 2 on (engine_config.overlap -1, 0, 1) */
	int32_t max_queued;
	int32_t block_size;
	int64_t kv_tokens; /* 0 = size from memory */
	double mem_fraction;
	int32_t max_seq_len; /* 0 = the model's context length */

	/* ---- request defaults (a request's own fields win) ---- */
	/* The flags of io/params' table write into req (its native defaults otherwise) and
	 * mark req_given[row]; a given flag sets the default of native and OpenAI lines. */
	struct request req; /* only the table's scalar fields are used */
	bool req_given[PARAMS_MAX];
	uint64_t seed;		   /* base seed: a line without "seed" samples with seed + line */
	const char *chat_template; /* NULL = the model's tokenizer.chat_template */
	const char *chat_template_file; /* a Jinja chat template file (cli/chat_select.h) */
	const char *chat_date;	   /* YYYY-MM-DD for strftime_now; NULL = today */

	/* ---- run only ---- */
	bool resume;
	int64_t shard_k, shard_n; /* this process runs input lines i with i % n == k */
	double progress_interval; /* seconds between plain progress lines */
	bool quiet;

	/* ---- bench only ---- */
	const char *workload;  /* workload spec (WORKLOADS.md ids or ISL/OSL) */
	int64_t requests;      /* 0 = the workload's default count */
	const char *baseline;  /* a previous --report to compare with */
	double max_regression; /* percent of output tok/s a run may lose vs the baseline */
	int32_t warmup;	       /* warm-up requests not counted */
};

/* Parses argv[1..argc) for cmd (OPT_CMD_RUN or OPT_CMD_BENCH) into c (defaults first).
 * Returns true when the command should go on. Returns false when it should exit now with
 * *exit_code: 0 after --help or --version (printed on stdout), 2 after a usage error (one
 * line on stderr naming the option, then a hint to --help). argv[0] is not read as an
 * option. Positional arguments are usage errors. */
bool opt_parse(struct opt_config *c, unsigned cmd, int argc, char **argv, int *exit_code);

/* Fills c with the table's defaults only. */
void opt_defaults(struct opt_config *c);

/* Prints the usage of cmd with every option, its argument and its default. */
void opt_usage(FILE *f, unsigned cmd);

/* "batchgen VERSION (commit COMMIT)\n" */
void opt_print_version(FILE *f);

/* The configuration of the engine, of the backend, and the defaults of a request. */
void opt_engine_config(const struct opt_config *c, struct engine_config *out);
void opt_backend_config(const struct opt_config *c, struct backend_config *out);
/* The parser's defaults (jsonl_defaults_init, then the flags given, for both forms, and
 * the base seed); chat template, tokenizer and model name are left for the caller. */
void opt_jsonl_defaults(const struct opt_config *c, struct jsonl_defaults *d);

/* What a run needs: the model, its tokenizer and the backend. */
struct opt_runtime {
	struct model *model;
	struct tok *tok; /* NULL when the model carries no tokenizer (lazy synthetic) */
	struct backend *backend;
};

/* Opens the model named by c->model (an hf: name resolved through the hub cache first,
 * cli/model_spec.h; then model_open(spec, lazy)), its tokenizer and the
 * backend named by c->device. On failure everything opened is closed, rt is zeroed, and
 * err holds one sentence (the caller exits with status 3). */
/* Whether the options select the CUDA backend: --device cuda[:N], or auto with a device. */
bool opt_use_cuda(const struct opt_config *c);
enum bg_status opt_open_runtime(const struct opt_config *c, bool lazy, struct opt_runtime *rt,
				struct bg_err *err);
void opt_close_runtime(struct opt_runtime *rt); /* NULL-safe, idempotent */

/* The device in words, for logs: "cpu", "cuda:0", "auto". */
const char *opt_device_name(const struct opt_config *c, char *buf, size_t cap);

#endif
