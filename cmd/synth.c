/*
 * synth.c - `goldminer synth`: write a synthetic JPEG dataset, as an ImageFolder
 * tree or as WebDataset tar shards (gm_synth_write / gm_synth_write_shards).
 *
 * The bytes depend only on (seed, image index, quality), so a dataset can be
 * recreated anywhere from its command line. The command refuses a non-empty DIR
 * unless --force: writing into someone's directory is never a default.
 *
 * It does not delete anything, and writes nothing but the dataset and one summary
 * line on stdout.
 */
#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "goldminer/synth.h"
#include "goldminer/util.h"

#define CMD "synth"

enum { O_IMAGES, O_CLASSES, O_SEED, O_QUALITY, O_SHARDS, O_FORCE, O_HELP, O_N };

static const struct cmd_opt opts[O_N] = {
    [O_IMAGES] = {"images", "N", 0, "number of images (required)"},
    [O_CLASSES] = {"classes", "C", 0, "number of classes (default 10)"},
    [O_SEED] = {"seed", "X", 0, "content seed (default 0); same seed, same bytes"},
    [O_QUALITY] = {"quality", "Q", 0, "JPEG quality 1..100 (default 90)"},
    [O_SHARDS] = {"shards", "S", 0,
		  "instead, WebDataset tar shards of S samples each: DIR/shard-NNNNNN.tar "
		  "with class_XX/img_XXXXXX.jpg + .cls, the same images in the same "
		  "(ImageFolder) order"},
    [O_FORCE] = {"force", NULL, 0, "write into a non-empty DIR (same-named files are replaced)"},
    [O_HELP] = {"help", NULL, 'h', "this help"},
};

static const char synopsis[] =
    "goldminer synth DIR --images N [--classes C] [--seed X] [--quality Q] [--shards S] "
    "[--force]\n"
    "  Write N synthetic JPEGs as DIR/class_XX/img_XXXXXX.jpg (ImageFolder).";

struct synth {
	const char *dir;
	uint64_t n, classes, seed, quality, shards;
	bool force;
};

/* true if path is a directory with an entry other than . and .. */
static bool dir_nonempty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool found = false;
	if (!d)
		return false;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			found = true;
			break;
		}
	closedir(d);
	return found;
}

/* argv into *s. -1 to run, else the exit status (0 after --help, 2 usage). */
static int synth_options(struct synth *s, int argc, char **argv)
{
	const char *val[O_N];
	char *pos[argc > 0 ? argc : 1];
	struct cmd_args a = {val, pos, 0};

	if (cmd_parse(CMD, opts, O_N, argc, argv, &a))
		return 2;
	if (val[O_HELP]) {
		cmd_usage(stdout, synopsis, opts, O_N);
		return 0;
	}
	*s = (struct synth){.classes = 10, .quality = 90, .force = val[O_FORCE] != NULL};
	if (a.npos > 1) {
		cmd_err(CMD, a.pos[1], NULL, "unexpected argument");
		cmd_usage(stderr, synopsis, opts, O_N);
		return 2;
	}
	if (!a.npos || !val[O_IMAGES]) {
		cmd_err(CMD, NULL, NULL, "DIR and --images N are required");
		cmd_usage(stderr, synopsis, opts, O_N);
		return 2;
	}
	s->dir = a.pos[0];
	if (cmd_u64(CMD, "--images", val[O_IMAGES], 0, UINT32_MAX, &s->n) ||
	    (val[O_CLASSES] && cmd_u64(CMD, "--classes", val[O_CLASSES], 1, 100000, &s->classes)) ||
	    (val[O_SEED] && cmd_u64(CMD, "--seed", val[O_SEED], 0, UINT64_MAX, &s->seed)) ||
	    (val[O_QUALITY] && cmd_u64(CMD, "--quality", val[O_QUALITY], 1, 100, &s->quality)) ||
	    (val[O_SHARDS] && cmd_u64(CMD, "--shards", val[O_SHARDS], 0, UINT32_MAX, &s->shards)))
		return 2;
	return -1;
}

int gm_cmd_synth(int argc, char **argv)
{
	struct synth s;
	uint64_t bytes = 0;
	char err[PATH_MAX + 128];

	int rc = synth_options(&s, argc, argv);
	if (rc >= 0)
		return rc;
	if (!s.force && dir_nonempty(s.dir)) {
		cmd_err(CMD, s.dir, "use --force to write into it", "exists and is not empty");
		return 1;
	}
	double t0 = gm_now_s();
	int ret = s.shards ? gm_synth_write_shards(s.dir, (uint32_t)s.n, (uint32_t)s.classes,
						   s.seed, (int)s.quality, (uint32_t)s.shards,
						   &bytes, err, sizeof(err))
			   : gm_synth_write(s.dir, (uint32_t)s.n, (uint32_t)s.classes, s.seed,
					    (int)s.quality, &bytes, err, sizeof(err));
	double sec = gm_now_s() - t0;
	if (ret) {
		cmd_err(CMD, NULL, NULL, "%s", err);
		return 1;
	}
	printf("synth: wrote %llu images in %llu classes to %s%s: %.1f MB, %.2f s\n",
	       (unsigned long long)s.n, (unsigned long long)(s.n < s.classes ? s.n : s.classes),
	       s.dir, s.shards ? " (tar shards)" : "", (double)bytes / 1e6, sec);
	return 0;
}
