/* main: picks the subcommand. `batchgen` with no subcommand (or with an option first)
 * is `batchgen run`. Only cli/ exits; every command returns its exit status. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *what;
} commands[] = {
    {"run", cmd_run, "generate: JSONL requests in, JSONL results out (the default)"},
    {"info", cmd_info, "describe a GGUF model: architecture, shapes, tokenizer, metadata"},
    {"tokenize", cmd_tokenize, "print the token ids of a text as a JSON array"},
    {"detokenize", cmd_detokenize, "print the text of token ids"},
    {"synth", cmd_synth, "write a synthetic GGUF model (random weights of a named shape)"},
    {"bench", cmd_bench, "run a benchmark workload and report throughput and latency"},
    {"merge", cmd_merge, "join the outputs of --shard runs back into input order"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
	fprintf(f, "usage: batchgen [COMMAND] [options]\n\ncommands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].what);
	fprintf(f, "  %-11s %s\n", "help", "help on a command: batchgen help COMMAND");
	fprintf(f, "\nWithout a command, batchgen runs `run`. `batchgen COMMAND --help` lists\n"
		   "a command's options; batchgen(1) has the input, output and statistics\n"
		   "formats.\n");
}

int main(int argc, char **argv)
{
	/* `batchgen`, `batchgen -i x`, `batchgen --help`: run, with argv as its own argv. */
	if (argc < 2 || argv[1][0] == '-') {
		if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
			opt_print_version(stdout);
			return CLI_EXIT_OK;
		}
		if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
			usage(stdout);
			fputc('\n', stdout);
			opt_usage(stdout, OPT_CMD_RUN);
			return CLI_EXIT_OK;
		}
		return cmd_run(argc, argv);
	}
	const char *name = argv[1];
	if (strcmp(name, "help") == 0) {
		if (argc < 3) {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		for (size_t i = 0; i < N_COMMANDS; i++)
			if (strcmp(argv[2], commands[i].name) == 0) {
				char *av[] = {argv[2], "--help", NULL};
				return commands[i].fn(2, av);
			}
		fprintf(stderr, "batchgen: no command '%s'\n", argv[2]);
		usage(stderr);
		return CLI_EXIT_USAGE;
	}
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(name, commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "batchgen: unknown command '%s'\n", name);
	usage(stderr);
	return CLI_EXIT_USAGE;
}
