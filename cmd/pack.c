/*
 * pack.c - `goldminer pack SRC DST`: convert an ImageFolder tree into WebDataset
 * tar shards (gm_pack, core/pack.c), which also checks what it wrote; print one
 * line with the shard count, the bytes of images and the time.
 *
 * It only reads the command line and reports: the order, keys and checks are the
 * library's.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "cmd.h"
#include "goldminer/pack.h"

#define CMD "pack"

enum { O_PER_SHARD, O_HELP, O_N };

static const struct cmd_opt opts[O_N] = {
    [O_PER_SHARD] = {"per-shard", "N", 0, "samples per shard (default 1000)"},
    [O_HELP] = {"help", NULL, 'h', "this help"},
};

static void pack_usage(FILE *f)
{
	cmd_usage(f,
		  "goldminer pack SRC DST [--per-shard N]\n"
		  "Pack the ImageFolder tree SRC into WebDataset tar shards\n"
		  "DST/shard-NNNNNN.tar (KEY.jpg + KEY.cls, in the tree's order), then\n"
		  "check them. Loading DST then gives the same batches as loading SRC.\n"
		  "All or nothing: the shards get their names only once all of them are\n"
		  "written and checked; a failure (a full disk) leaves nothing in DST.",
		  opts, O_N);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int gm_cmd_pack(int argc, char **argv)
{
	const char *val[O_N];
	char *pos[argc > 0 ? argc : 1], err[1024];
	struct cmd_args a = {val, pos, 0};
	uint64_t per = 1000, bytes = 0;
	uint32_t shards = 0;

	if (cmd_parse(CMD, opts, O_N, argc, argv, &a))
		return 2;
	if (val[O_HELP]) {
		pack_usage(stdout);
		return 0;
	}
	if (val[O_PER_SHARD] && cmd_u64(CMD, "--per-shard", val[O_PER_SHARD], 1, UINT32_MAX, &per))
		return 2;
	if (a.npos != 2) {
		pack_usage(stderr);
		return 2;
	}
	double t0 = now_s();
	if (gm_pack(pos[0], pos[1], (uint32_t)per, &bytes, &shards, err, sizeof(err))) {
		fprintf(stderr, "goldminer %s\n", err);
		return 1;
	}
	printf("pack: %s -> %s: %u shards, %.1f MB of images, checked, %.2f s\n", pos[0], pos[1],
	       shards, (double)bytes / 1e6, now_s() - t0);
	return 0;
}
