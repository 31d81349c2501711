/* commands: the subcommands of batchgen. Each takes the arguments after its name
 * (argv[0] is the subcommand name) and returns the process exit status (DESIGN.md §8:
 * 0 ok, 1 some results are errors, 2 usage, 3 model or device, 4 bench regression,
 * 130 interrupted). Only cli/ turns statuses into exit codes. */
#ifndef BG_CLI_COMMANDS_H
#define BG_CLI_COMMANDS_H

enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_SOME_FAILED = 1,
	CLI_EXIT_USAGE = 2,
	CLI_EXIT_MODEL = 3,
	CLI_EXIT_REGRESSION = 4,
	CLI_EXIT_INTERRUPTED = 130,
};

int cmd_run(int argc, char **argv);	   /* cli/cmd_run.c: the main job */
int cmd_info(int argc, char **argv);	   /* cli/cmd_info.c */
int cmd_tokenize(int argc, char **argv);   /* cli/cmd_tokenize.c (and detokenize) */
int cmd_detokenize(int argc, char **argv); /* cli/cmd_tokenize.c */
int cmd_synth(int argc, char **argv);	   /* cli/cmd_synth.c: write synthetic GGUF models */
int cmd_bench(int argc, char **argv);	   /* cli/cmd_bench.c */
int cmd_merge(int argc, char **argv);	   /* cli/cmd_merge.c: join shard outputs */

#endif
