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
#include "goldminer/util.h"

#define CMD "pack"

enum { O_PER_SHARD, O_RESTART, O_TREE, O_HELP, O_N };

static const struct cmd_opt opts[O_N] = {
    [O_PER_SHARD] = {"per-shard", "N", 0, "samples per shard (default 1000)"},
    [O_RESTART] = {"restart", "[=N]", 0,
		   "rewrite each JPEG losslessly with a restart marker every N MCUs at most "
		   "(default 4; a divisor of the MCUs of a row)"},
    [O_TREE] = {"tree", NULL, 0, "write an ImageFolder tree at DST instead of shards"},
    [O_HELP] = {"help", NULL, 'h', "this help"},
};

static void pack_usage(FILE *f)
{
	cmd_usage(f,
		  "goldminer pack SRC DST [--per-shard N] [--restart[=N]] [--tree]\n"
		  "Pack the ImageFolder tree SRC into WebDataset tar shards\n"
		  "DST/shard-NNNNNN.tar (KEY.jpg + KEY.cls, in the tree's order), then\n"
		  "check them. Loading DST then gives the same batches as loading SRC.\n"
		  "All or nothing: the shards get their names only once all of them are\n"
		  "written and checked; a failure (a full disk) leaves nothing in DST.\n"
		  "--restart: each JPEG is transcoded losslessly (same DCT coefficients,\n"
		  "baseline, optimal Huffman tables) with restart markers, and kept as it\n"
		  "was when its decoded pixels would differ. --tree: the same tree at DST\n"
		  "(new or empty), written aside and renamed once checked.",
		  opts, O_N);
}

int gm_cmd_pack(int argc, char **argv)
{
	const char *val[O_N];
	char *pos[argc > 0 ? argc : 1], err[1024];
	struct cmd_args a = {val, pos, 0};
	uint64_t per = 1000, restart = 0;
	struct gm_pack_stats st;

	if (cmd_parse(CMD, opts, O_N, argc, argv, &a))
		return 2;
	if (val[O_HELP]) {
		pack_usage(stdout);
		return 0;
	}
	if (val[O_PER_SHARD] && cmd_u64(CMD, "--per-shard", val[O_PER_SHARD], 1, UINT32_MAX, &per))
		return 2;
	if (val[O_RESTART]) {
		restart = GM_PACK_RESTART_DEFAULT;
		if (val[O_RESTART][0] &&
		    cmd_u64(CMD, "--restart", val[O_RESTART], 1, 65535, &restart))
			return 2;
	}
	if (a.npos != 2) {
		cmd_err(CMD, NULL, NULL, "expected SRC and DST, not %d arguments", a.npos);
		pack_usage(stderr);
		return 2;
	}
	double t0 = gm_now_s();
	struct gm_pack_opts o = {(uint32_t)per, (uint32_t)restart, val[O_TREE] != NULL};
	if (gm_pack_ex(pos[0], pos[1], &o, &st, err, sizeof(err))) {
		cmd_err(CMD, NULL, NULL, "%s", err);
		return 1;
	}
	if (o.tree)
		printf("pack: %s -> %s: a tree of %u images", pos[0], pos[1], st.files);
	else
		printf("pack: %s -> %s: %u shards", pos[0], pos[1], st.shards);
	printf(", %.1f MB of images, checked, %.2f s\n", (double)st.bytes_out / 1e6,
	       gm_now_s() - t0);
	if (restart)
		printf("pack: restart markers every %u MCUs at most: %.1f MB -> %.1f MB (%+.2f%%); "
		       "%u of %u images kept as they were (not transcodable, or pixels would "
		       "differ)\n",
		       (unsigned)restart, (double)st.bytes_in / 1e6, (double)st.bytes_out / 1e6,
		       st.bytes_in ? 100.0 * ((double)st.bytes_out / (double)st.bytes_in - 1) : 0.0,
		       st.kept, st.files);
	return 0;
}
