/*
 * main.c - the `goldminer` binary: dispatch to a subcommand (cmd.h). Each command
 * lives in a file of its own under cmd/ and uses only the library's public
 * headers; none of this is in libgoldminer.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "goldminer/version.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} cmds[] = {
    {"bench", gm_cmd_bench, "run the data pipeline on a dataset and report images/s"},
    {"node", gm_cmd_node, "run the node agent that shares this host's CPUs between jobs"},
    {"pack", gm_cmd_pack, "pack an ImageFolder tree into WebDataset tar shards"},
    {"plan", gm_cmd_plan, "show how a pipeline spec splits between workers and consumer"},
    {"profile", gm_cmd_profile, "measure pre-processing samples/s per vCPU into a sim profile"},
    {"run", gm_cmd_run, "run a training script with goldminer serving its DataLoaders"},
    {"sim", gm_cmd_sim, "replay a cluster trace under a CPU allocation policy"},
    {"synth", gm_cmd_synth, "write a synthetic JPEG ImageFolder dataset"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: goldminer COMMAND [ARGS...]   (goldminer help COMMAND, goldminer "
		   "--version)\n\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("goldminer %s\n", gm_version());
		return 0;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		/* goldminer help CMD is CMD --help */
		for (size_t i = 0; argc > 2 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
			if (!strcmp(argv[2], cmds[i].name)) {
				char *av[] = {argv[2], "--help", NULL};
				return cmds[i].fn(2, av);
			}
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	cmd_err(NULL, argv[1], "goldminer help lists them", "unknown command");
	usage(stderr);
	return 2;
}
